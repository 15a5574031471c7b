"""Repeated timing (median and min, never one sample) and the machine's copy bandwidth."""
from __future__ import annotations

import gc
import statistics
import time
from dataclasses import asdict, dataclass
from typing import Callable

import numpy as np


@dataclass
class Timing:
    median_s: float     # per call
    min_s: float        # per call
    samples: int        # timed samples
    calls_per_sample: int

    def as_dict(self) -> dict:
        return asdict(self)


@dataclass
class Plan:
    """How hard to time: `warmup` calls, then samples until `repeats` of them or `budget_s`
    seconds (at least `min_repeats`).  A sample loops enough calls to last `min_sample_s`, so
    microsecond calls are timed over many calls."""
    warmup: int = 2
    repeats: int = 15
    min_repeats: int = 5
    budget_s: float = 4.0
    min_sample_s: float = 0.02


FULL = Plan(warmup=1, min_repeats=3)   # the checked first call warmed up too
QUICK = Plan(warmup=1, repeats=3, min_repeats=2, budget_s=0.2, min_sample_s=0.001)


def _calls_per_sample(call: Callable[[], object], min_sample_s: float) -> int:
    t0 = time.perf_counter()
    call()
    once = time.perf_counter() - t0
    return max(1, min(100_000, int(min_sample_s / max(once, 1e-9)) + 1)) if once < min_sample_s else 1


def measure(call: Callable[[], object], plan: Plan) -> Timing:
    """Warm up, then time samples of `call` with the garbage collector paused inside each sample."""
    return measure_interleaved({"call": call}, plan)["call"]


def measure_interleaved(calls: dict[str, Callable[[], object]], plan: Plan,
                        before: dict[str, Callable[[], None]] | None = None,
                        after: dict[str, Callable[[int], None]] | None = None) -> dict[str, Timing]:
    """`measure` for several calls at once, their samples taken in turn (one of each per round), so
    that a drift of the machine's speed over seconds -- a shared host's CPU ran the same lazy call
    at ~30 and ~45 us seconds apart (docs/benchmarks.md, "W7 on the GPU: the host, not the code")
    -- reaches every call alike instead of deciding which row wins.  Untimed around each sample of
    call `name`: `before[name]()` (a framework's setup) and `after[name](calls in the sample)`."""
    before, after = before or {}, after or {}
    number: dict[str, int] = {}
    for name, call in calls.items():
        before.get(name, _nothing)()
        for _ in range(plan.warmup):
            call()
        number[name] = _calls_per_sample(call, plan.min_sample_s)
    samples: dict[str, list[float]] = {name: [] for name in calls}
    spent, budget = 0.0, plan.budget_s * len(calls)
    while calls:
        counts = [len(v) for v in samples.values()]
        if min(counts) >= plan.repeats or (min(counts) >= plan.min_repeats and spent >= budget):
            break
        for name, call in calls.items():
            before.get(name, _nothing)()
            gc.collect()
            gc.disable()
            try:
                t0 = time.perf_counter()
                for _ in range(number[name]):
                    call()
                dt = time.perf_counter() - t0
            finally:
                gc.enable()
            after.get(name, _nothing)(number[name])
            samples[name].append(dt / number[name])
            spent += dt
    return {name: Timing(statistics.median(v), min(v), len(v), number[name]) for name, v in samples.items()}


def _nothing(*_) -> None:
    pass


def copy_bandwidth(nbytes: int, plan: Plan) -> dict:
    """numpy copyto into a preallocated destination; GB/s counts the bytes read plus written
    (2·nbytes per copy), the same way workloads count bytes_moved."""
    src = np.ones(nbytes // 4, dtype=np.float32)
    dst = np.empty_like(src)
    t = measure(lambda: np.copyto(dst, src), plan)
    return {"array_bytes": src.nbytes, "bytes_per_copy": 2 * src.nbytes,
            "gb_per_s": 2 * src.nbytes / t.median_s / 1e9, **t.as_dict()}


def per_call_us(call: Callable[[], object], n: int = 30, warmup: int = 5) -> tuple[float, float]:
    """(median, min) microseconds of `n` single calls after `warmup` calls: the GPU probes'
    whole-call timer (each call synchronises, so one call is one sample)."""
    for _ in range(warmup):
        call()
    times = []
    for _ in range(n):
        t0 = time.perf_counter()
        call()
        times.append(time.perf_counter() - t0)
    return statistics.median(times) * 1e6, min(times) * 1e6

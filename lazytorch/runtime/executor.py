"""The backend-neutral plan executor: runs a KernelPlan's launches in order on one backend.

It allocates each launch's write buffers through the backend, hands every launch its read and
write buffers in the order of launch.reads / launch.writes, drops temps after their last reader
and returns the output buffers.  Launches the backend does not compile (compile_launch returned
None) run on the reference executor through to_host/from_host, so any plan runs on any backend.

It owns what every backend shares: a launch function that returns a true value reports that its
kernel set the error flag (integer division by zero), and the executor raises the error; with
LAZYTORCH_DEBUG=1 every launch (kernels, library and reference calls) is traced to stderr with
its time, and so is each launch's compile time; LAZYTORCH_DEBUG=2 adds the kernel sources.
"""
from __future__ import annotations

import os
import sys
import time
from typing import Any, Callable, Mapping, Sequence

import numpy as np

from ..ir import dtypes as D
from ..passes.plan import KernelPlan, Launch, describe_launch
from .reference import run_launch

Buffer = Any
LaunchFn = Callable[[Sequence[Buffer], Sequence[Buffer]], Any]   # returns true: the error flag was set


def host_fallback(backend, launch: Launch) -> LaunchFn:
    """Run the launch's nodes on the host, copying buffers across when the backend is a device."""
    def fn(reads: Sequence[Buffer], writes: Sequence[Buffer]) -> None:
        outs = run_launch(launch, [backend.to_host(b) for b in reads])
        for buf, value in zip(writes, outs):
            copy_into(backend, buf, value)
    return fn


def copy_into(backend, buf: Buffer, value: np.ndarray) -> None:
    if isinstance(buf, np.ndarray):
        np.copyto(buf, value, casting="no")
    else:
        buf.copy_from_host(value)   # device buffers of host-fallback backends implement this


# Scalar params whose storage is the Python number's own type: on host backends (default
# Backend.scalar) one np.array call makes the 0-d buffer, with the same value and dtype.
_HOST_SCALAR_DTYPES = frozenset({D.float64, D.int64, D.bool_})


def debug_level() -> int:
    try:
        return int(os.environ.get("LAZYTORCH_DEBUG", "0") or 0)
    except ValueError:
        return 1


def _trace(text: str) -> None:
    print(f"[lazytorch] {text}", file=sys.stderr)


def kernel_error(launch: Launch) -> ZeroDivisionError:
    """The error a launch reports through its kernel's error flag (every backend's kernels set it
    on an integer division by zero)."""
    ops = ", ".join(sorted({n.op for n in launch.nodes}))
    return ZeroDivisionError(f"{launch.name}: integer division by zero (ops: {ops})")


def _traced(fn: LaunchFn, launch: Launch, backend: str, where: str) -> LaunchFn:
    shape = list(launch.domain) if getattr(launch, "domain", None) else [list(b.shape) for _, b in launch.writes]

    def run(reads: Sequence[Buffer], writes: Sequence[Buffer]) -> None:
        t0 = time.perf_counter()
        flagged = fn(reads, writes)
        _trace(f"{backend} {launch.name} ({where} {launch.pattern} {shape}) "
               f"{(time.perf_counter() - t0) * 1e6:.1f} us")
        return flagged
    return run


class PlanExecutor:
    """A plan prepared for one backend (see runtime/backend.py for the launch calling convention).

    Everything that does not depend on the data is worked out once here, so that `run` (every
    graph-cache hit) only converts the arguments, allocates the writes and calls the launches:
    buffers live in a list indexed by a per-plan slot number instead of a dict keyed by id.
    """

    def __init__(self, backend, plan: KernelPlan,
                 compile_launch: Callable[[Launch, KernelPlan], LaunchFn | None] | None = None,
                 sources: Mapping[str, str] | None = None):
        self.backend = backend
        self.plan = plan
        compile_launch = compile_launch or backend.compile_launch
        debug = debug_level()
        slot_of: dict[int, int] = {}

        def slot(bid: int) -> int:
            return slot_of.setdefault(bid, len(slot_of))

        self.params = [(slot(p.id), self._converter(p), p.dtype) for p in plan.params]
        last_read: dict[int, int] = {}
        for i, launch in enumerate(plan.launches):
            for _, b in launch.reads:
                last_read[b.id] = i
        keep = {b.id for b in plan.outputs} | {p.id for p in plan.params}
        frees_at: dict[int, list[int]] = {}             # launch index -> temps last read there
        for b, at in last_read.items():
            if b not in keep:
                frees_at.setdefault(at, []).append(b)
        self.steps: list[tuple[LaunchFn, list[int], list[tuple[int, tuple, Any]], list[int], Launch]] = []
        for i, launch in enumerate(plan.launches):
            t0 = time.perf_counter()
            fn = compile_launch(launch, plan)
            where = launch.kind if fn is not None else "reference"
            fn = fn or host_fallback(backend, launch)
            if debug:
                _trace(f"compiled {launch.name} ({where}) in {(time.perf_counter() - t0) * 1e3:.1f} ms")
                if debug >= 2 and sources and launch.name in sources:
                    _trace(sources[launch.name])
                fn = _traced(fn, launch, backend.name, where)
            reads = [slot(b.id) for _, b in launch.reads]
            writes = [(slot(b.id), b.shape, b.dtype) for _, b in launch.writes]
            self.steps.append((fn, reads, writes, [slot(b) for b in frees_at.get(i, ())], launch))
        self.outputs = [slot(o.id) for o in plan.outputs]
        self.size = len(slot_of)

    def _converter(self, p) -> Callable[[Any, Any], Buffer]:
        """How the run-time value of param `p` becomes a buffer of this backend."""
        if p.slot not in self.plan.scalar_slots:
            adopt = self.backend.adopt
            return lambda value, dtype: adopt(value)
        if getattr(self.backend.scalar, "host_default", False) and p.dtype in _HOST_SCALAR_DTYPES:
            np_dtype = p.dtype.np
            return lambda value, dtype: np.array(value, np_dtype)
        return self.backend.scalar

    def run(self, args: Sequence[Any]) -> list[Buffer]:
        env: list[Buffer] = [None] * self.size
        for (i, convert, dtype), value in zip(self.params, args):
            env[i] = convert(value, dtype)
        empty = self.backend.empty
        for fn, reads, writes, frees, launch in self.steps:
            outs = [empty(shape, dtype) for _, shape, dtype in writes]
            try:
                failed = fn([env[r] for r in reads], outs)
            except Exception as e:
                e.add_note(describe_launch(launch))     # which op, which user line (passes/plan.py)
                raise
            if failed:
                raise kernel_error(launch)
            for (i, _, _), buf in zip(writes, outs):
                env[i] = buf
            for i in frees:
                env[i] = None
        return [env[i] for i in self.outputs]

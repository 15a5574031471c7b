"""Running one workload on one framework: check against the float64 reference, then time.

Every failure is recorded in the framework's row (status "error" with the message, or "wrong" with
the error size) so one broken framework never stops the run.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
import traceback
from pathlib import Path
from typing import Any, Callable

import numpy as np

from .frameworks import NUMPY_OPS, PEERS, Framework
from .timing import Plan, measure, measure_interleaved
from .workloads import Workload

ROOT = Path(__file__).resolve().parent.parent
ROOF_PEERS = ("numpy", "torch", "mlx")   # eager peers whose plain matmul is the compute limit


def reference(w: Workload, inputs: list[np.ndarray]) -> np.ndarray:
    """The workload's math in numpy float64; a model's forward in torch eager (float32)."""
    if w.run is not None:
        torch = PEERS["torch"]
        return torch.to_numpy(prepared_call(w, torch, inputs)()).astype(np.float64)
    return w.math(NUMPY_OPS, *[x.astype(np.float64) for x in inputs])


def module_of(fw: Framework) -> str:
    """The Python module a column runs: lazytorch[cpu] -> lazytorch, torch.compile[cuda] -> torch."""
    return "lazytorch" if fw.name.startswith("lazytorch") else fw.name.split("[")[0].split(".")[0]


def body_of(w: Workload, fw: Framework) -> Callable:
    """`body(ops, *inputs)`: the workload's math, or a model's forward on the framework's module."""
    if w.run is None:
        return w.math
    forward = w.run(module_of(fw))
    return lambda ops, *xs: forward(*xs)


def check(out: np.ndarray, ref: np.ndarray, tol: float) -> dict:
    """Shape, finiteness and allclose(rtol=tol, atol=tol·max|ref|) against the reference."""
    out = np.asarray(out, dtype=np.float64)
    if out.shape != ref.shape:
        return {"status": "wrong", "error": f"shape {list(out.shape)}, expected {list(ref.shape)}"}
    scale = float(np.max(np.abs(ref))) if ref.size else 1.0
    err = float(np.max(np.abs(out - ref))) if ref.size else 0.0
    ok = bool(np.all(np.isfinite(out))) and np.allclose(out, ref, rtol=tol, atol=tol * scale)
    result = {"status": "ok" if ok else "wrong", "max_abs_err": err, "ref_max_abs": scale}
    if not ok:
        result["error"] = f"max |out - ref| = {err:.3g} (max |ref| = {scale:.3g}, rtol = atol/max|ref| = {tol})"
    return result


def describe(exc: BaseException) -> str:
    """One line for the table: the exception and where in lazytorch/the peer it came from."""
    frame = traceback.extract_tb(exc.__traceback__)[-1] if exc.__traceback__ else None
    where = f" ({Path(frame.filename).name}:{frame.lineno})" if frame else ""
    message = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
    return f"{type(exc).__name__}: {message[:300]}{where}"


def prepared_call(w: Workload, fw: Framework, inputs: list[np.ndarray],
                  math: Callable | None = None) -> Callable[[], Any]:
    """A no-argument call computing the workload on `fw` to completion (build + run + sync)."""
    fw.setup()
    ops = fw.ops()
    native = [fw.to_native(x) for x in inputs]
    body = math or body_of(w, fw)
    fn = fw.prepare(lambda *xs: body(ops, *xs))

    def call():
        out = fn(*native)
        fw.sync(out)
        return out
    return call


def checked_call(w: Workload, fw: Framework, inputs: list[np.ndarray], ref: np.ndarray, row: dict):
    """The framework's call, after its first call (timed: compile time) was checked against the
    reference into `row`; None where the result was wrong.  Raises what the framework raises."""
    call = prepared_call(w, fw, inputs)
    t0 = time.perf_counter()
    out = call()
    row["first_call_s"] = time.perf_counter() - t0
    row.update(check(fw.to_numpy(out), ref, w.tol))
    return call if row["status"] == "ok" else None


def run_timed(w: Workload, fw: Framework, inputs: list[np.ndarray], ref: np.ndarray, plan: Plan) -> dict:
    """Check first (the first call also records compile time), then time; errors go in the row."""
    return run_interleaved(w, [fw], inputs, ref, plan)[0]


def run_interleaved(w: Workload, frameworks: list[Framework], inputs: list[np.ndarray], ref: np.ndarray,
                    plan: Plan) -> list[dict]:
    """run_timed for each framework, the timed samples of all of them taken in turn
    (timing.measure_interleaved): each is checked first, then every correct one is timed.  A
    framework's failure is data for its row."""
    rows, calls, setups, counted = [], {}, {}, {}
    for fw in frameworks:
        row: dict = {"framework": fw.name}
        try:
            call = checked_call(w, fw, inputs, ref, row)
            if call is not None:
                calls[fw.name], setups[fw.name] = call, fw.setup
                if fw.counters:
                    counted[fw.name] = _Counted(fw.counters)
        except Exception as exc:
            row.update(status="error", error=describe(exc))
        rows.append(row)
    befores = {name: _then(setup, counted[name].before) if name in counted else setup
               for name, setup in setups.items()}
    try:
        timings = measure_interleaved(calls, plan, befores, {k: c.after for k, c in counted.items()})
    except Exception as exc:         # (one framework failing mid-way: every timed row says so)
        for row in rows:
            if row["framework"] in calls:
                row.update(status="error", error=describe(exc))
        return rows
    for row in rows:
        name = row["framework"]
        if name in timings:
            row.update(timings[name].as_dict())
            if len(timings) > 1:
                row["interleaved"] = True
            if name in counted:
                row["per_call"] = counted[name].per_call()
    return rows


def _then(first: Callable[[], None], second: Callable[[], None]) -> Callable[[], None]:
    def both() -> None:
        first()
        second()
    return both


class _Counted:
    """A framework's event counters (Framework.counters) over its own timed calls only, read
    around each of its samples (outside the timed part), while other frameworks' samples
    interleave (lazytorch's rows share one set of counters)."""

    def __init__(self, read: Callable[[], dict[str, int]]):
        self.read, self.sums, self.calls, self.last = read, {}, 0, {}

    def before(self) -> None:
        self.last = self.read()

    def after(self, calls: int) -> None:
        for k, v in self.read().items():
            self.sums[k] = self.sums.get(k, 0) + v - self.last.get(k, 0)
        self.calls += calls

    def per_call(self) -> dict[str, float]:
        return {k: round(v / max(1, self.calls), 3) for k, v in self.sums.items()}


def add_ratios(rows: list[dict], to: tuple[str, ...]) -> None:
    """`ratio_to_<name>`: each row's median ÷ the median of framework `name` (or `name[device]`)."""
    medians = {r["framework"].split("[")[0]: r.get("median_s") for r in rows}
    for name in to:
        if medians.get(name):
            for r in rows:
                if r.get("median_s") is not None:
                    r[f"ratio_to_{name}"] = r["median_s"] / medians[name]


def run_roof(w: Workload, peers: list[Framework], inputs: list[np.ndarray], sizes: dict,
             plan: Plan) -> dict:
    """GFLOP/s of the workload's matmul-only math on each eager peer, and the best of them."""
    flops = w.flops(sizes)
    rates: dict = {}
    for fw in peers:
        try:
            t = measure(prepared_call(w, fw, inputs, math=w.roof), plan)
            rates[fw.name] = flops / t.median_s / 1e9
        except Exception as exc:
            rates[fw.name] = describe(exc)
    numbers = {k: v for k, v in rates.items() if isinstance(v, float)}
    best = max(numbers, key=numbers.get) if numbers else None
    return {"gflops": rates, "best": best, "best_gflops": numbers.get(best)}


def cold_start(of: str, framework: str, quick: bool, cache_dir: str) -> dict:
    """One fresh process running workload `of` on `framework` (benchmarks/cold_start.py) with
    lazytorch's and torch.compile's disk caches in `cache_dir`; returns its JSON report."""
    env = dict(os.environ, LAZYTORCH_CACHE_DIR=cache_dir,
               TORCHINDUCTOR_CACHE_DIR=os.path.join(cache_dir, "inductor"))
    cmd = [sys.executable, "-m", "benchmarks.cold_start", "--workload", of, "--framework", framework]
    proc = subprocess.run(cmd + (["--quick"] if quick else []), cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=900)
    lines = proc.stdout.strip().splitlines()
    if proc.returncode != 0 or not lines:
        tail = (proc.stderr.strip().splitlines() or ["no output"])[-1]
        return {"status": "error", "error": f"subprocess exit {proc.returncode}: {tail[:300]}"}
    return json.loads(lines[-1])


def run_cold(w: Workload, fw: Framework, quick: bool) -> dict:
    """W8: the first evaluation with an empty disk cache, then again with the cache it left."""
    row: dict = {"framework": fw.name}
    with tempfile.TemporaryDirectory(prefix="lazytorch-bench-cache-") as cache_dir:
        cold = cold_start(w.of, fw.name, quick, cache_dir)
        warm = cold_start(w.of, fw.name, quick, cache_dir) if cold.get("status") == "ok" else cold
    failed = next((r for r in (cold, warm) if r.get("status") != "ok"), None)
    row["status"] = failed.get("status", "error") if failed else "ok"
    if failed and failed.get("error"):
        row["error"] = failed["error"]
    row["max_abs_err"] = cold.get("max_abs_err")
    row.update(import_s=cold.get("import_s"), cold_first_s=cold.get("first_call_s"),
               warm_first_s=warm.get("first_call_s"), steady_s=warm.get("median_s"))
    return row

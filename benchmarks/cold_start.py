"""W8's fresh process: import a framework, run one workload once (the first evaluation, timed),
check it, time the steady state, and print one JSON line.  Started by runner.cold_start.

    python -m benchmarks.cold_start --workload W1 --framework "lazytorch[cpu]" [--quick] [--phases]

`--phases` (lazytorch on cpu) adds where the first call's time went: wall milliseconds of planning
(`plan`, which includes `backend`: importing and creating the backend), code generation (importing
the code generator, lowering, rendering), the C compiler, `prepare` (finding and loading the
program's library: code generation and the compiler are part of it) and `run` (the executor: the
kernels and the first touch of fresh output buffers), the call's CPU time with its child
processes' (the compiler's) and its minor page faults: docs/benchmarks.md, "First calls" and "W8".

The first call starts after a full garbage collection, as every steady-state sample does
(timing.measure): the harness's own setup (compiling bytecode, making the inputs) otherwise left
the interpreter due for a collection of its whole heap, and that pass (~12 ms on the 2-core
development machine) landed in the timed call.  Collections that the first call's own
allocations start are still timed, and listed in `first_call_gc` as [generation, ms].
"""
from __future__ import annotations

import argparse
import compileall
import gc
import importlib.util
import json
import os
import resource
import time
from typing import Callable


def compile_bytecode() -> None:
    """Compile lazytorch's (and this harness's) modules to bytecode before the timed part, as an
    installed package has them (pip compiles at install).  Run from a source checkout under
    PYTHONDONTWRITEBYTECODE=1, every fresh process would otherwise compile each module it imports,
    the code generator's included (the README demo's first call: ~1.0 s against ~0.45 s)."""
    for name in ("lazytorch", "benchmarks"):
        spec = importlib.util.find_spec(name)
        if spec is not None and spec.origin:
            compileall.compile_dir(os.path.dirname(spec.origin), quiet=2)


def cpu_seconds() -> float:
    """CPU time of this process and of its finished children (the C compiler's runs)."""
    me, kids = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return me.ru_utime + me.ru_stime + kids.ru_utime + kids.ru_stime


def watch_phases() -> dict[str, float]:
    """Wall seconds spent in lazytorch's first-call phases, filled in as they run (wrappers around
    the planner, the backend's creation, the cpu backend's prepare, code generator, compiler runs
    and executor).  The cpu backend's modules are wrapped once the backend is created, so that
    their import stays inside the timed call, where it happens without --phases."""
    from lazytorch import realize, runtime
    spent: dict[str, float] = {}

    def wrap(owner, name: str, phase: str) -> None:
        fn = getattr(owner, name)

        def timed(*a, **k):
            t = time.perf_counter()
            try:
                return fn(*a, **k)
            finally:
                spent[phase] = spent.get(phase, 0.0) + time.perf_counter() - t
        setattr(owner, name, timed)

    def cpu_phases() -> None:
        from lazytorch.runtime import compiler, cpu
        wrap(cpu.CpuBackend, "prepare", "prepare")
        wrap(cpu.CpuExecutor, "run", "run")
        wrap(cpu, "kernel_sources", "codegen")
        wrap(compiler, "_compile_all", "cc")
    create = runtime._create

    def created(name: str):
        backend = create(name)
        if name == "cpu":
            cpu_phases()
        return backend
    runtime._create = created
    wrap(runtime, "_create", "backend")
    wrap(realize, "plan_for", "plan")
    return spent


def watch_gc() -> tuple[list[list], Callable]:
    """[generation, wall ms] of each garbage collection from now on, and the callback recording
    them (remove it from gc.callbacks to stop)."""
    passes: list[list] = []

    def callback(phase: str, info: dict) -> None:
        if phase == "start":
            passes.append([info["generation"], time.perf_counter()])
        else:
            passes[-1][1] = round((time.perf_counter() - passes[-1][1]) * 1e3, 2)
    gc.callbacks.append(callback)
    return passes, callback


def main() -> None:
    compile_bytecode()
    t0 = time.perf_counter()
    p = argparse.ArgumentParser()
    p.add_argument("--workload", required=True)
    p.add_argument("--framework", required=True)
    p.add_argument("--quick", action="store_true")
    p.add_argument("--phases", action="store_true")
    args = p.parse_args()
    from .frameworks import by_name
    from .runner import check, describe, prepared_call, reference
    from .timing import QUICK, measure
    from .workloads import BY_NAME, make_inputs
    w, fw = BY_NAME[args.workload], by_name(args.framework)
    inputs = make_inputs(w, args.quick)
    row: dict = {"framework": fw.name}
    try:
        fw.ops()  # imports the framework
        row["import_s"] = time.perf_counter() - t0
        call = prepared_call(w, fw, inputs)
        phases = watch_phases() if args.phases else None
        gc.collect()
        collections, watching = watch_gc()
        faults = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
        c1, t1 = cpu_seconds(), time.perf_counter()
        out = call()
        row["first_call_s"] = time.perf_counter() - t1
        gc.callbacks.remove(watching)
        row["first_call_gc"] = collections
        if phases is not None:
            row["first_call_cpu_s"] = cpu_seconds() - c1
            row["first_call_minflt"] = resource.getrusage(resource.RUSAGE_SELF).ru_minflt - faults
            row["phases_ms"] = {k: round(v * 1e3, 1) for k, v in phases.items()}
        row.update(check(fw.to_numpy(out), reference(w, inputs), w.tol))
        if row["status"] == "ok":
            row["median_s"] = measure(call, QUICK).median_s
    except Exception as exc:
        row.update(status="error", error=describe(exc))
    print(json.dumps(row))


if __name__ == "__main__":
    main()

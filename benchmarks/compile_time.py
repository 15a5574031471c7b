"""Compile time per node: where the first evaluation of a long pending program spends its time.

A program of N op nodes is built through the Tensor API, then compiled stage by stage as `lt.eval`
would (realize.py): the program walk and its graph key, normalisation to params, each graph pass
(decompose, legalize, simplify; decompose includes the driver's scan for a composite, without
which it is not walked), fusion into the kernel plan, and the backend's `prepare`.  On
`cpu`, prepare is split into the plan-index key (`plan_structure`), lowering and rendering the C
(`kernel_sources`), the C compiler's own run (`C compile*`: a fresh disk cache every time, so it
really compiles; not Python, so reported apart) and the rest of prepare.  Printed: microseconds per
op node of every stage (op nodes are the pending nodes that compute, as the issue counts a 5,000-step
loop's 10,000 nodes; the IR also holds the inputs and one node per Python scalar), the Python total
per op node, per IR node and for the whole program, and with --profile cProfile's top entries.
Times are process times (other processes' load does not count; --repeat N keeps each stage's best).

Workloads (N = op nodes):
  chain  - `y = y * 0.999 + 0.001` in a loop (the issue's lazy loop)
  mixed  - a chain reading three tensors, with a relu and casts, summed at the end
  wide   - 64 independent chains combined pairwise at the end (a wide DAG)

    python -m benchmarks.compile_time [--sizes 1000,10000,40000] [--backend cpu --backend reference]
                                      [--workload chain ...] [--profile] [--eval] [--repeat N]
"""
from __future__ import annotations

import argparse
import cProfile
import contextlib
import functools
import gc
import io
import os
import pstats
import tempfile
import time
from dataclasses import replace
from typing import Callable

import numpy as np

import lazytorch as lt
from lazytorch.ir.graph import program
from lazytorch.ir.node import tracing
from lazytorch.passes.fuse import build_plan
from lazytorch.passes.normalize import normalize
from lazytorch.passes.pipeline import PASSES
from lazytorch.realize import options_for, pending_roots
from lazytorch.runtime import get_backend


def chain(n: int):
    y = lt.ones(1000)
    for _ in range(n // 2):            # 2 op nodes a step (mul, add) and their 2 scalars
        y = y * 0.999 + 0.001
    return [y]


def mixed(n: int):
    rng = np.random.default_rng(0)
    a, b, c = (lt.from_numpy(rng.uniform(-1, 1, 1000).astype(np.float32)) for _ in range(3))
    y = a
    for _ in range(n // 7):           # 7 op nodes a step
        y = (y * b + c).relu() * 0.5 - a
        y = y.to(lt.float16).to(lt.float32)
    return [y.sum()]


def wide(n: int):
    rng = np.random.default_rng(0)
    ys = [lt.from_numpy(rng.standard_normal(256).astype(np.float32)) for _ in range(64)]
    for _ in range(n // (64 * 2)):
        ys = [y * 0.5 + 1.0 for y in ys]
    while len(ys) > 1:
        ys = [ys[k] + ys[k + 1] for k in range(0, len(ys), 2)]
    return ys


WORKLOADS: dict[str, Callable] = {"chain": chain, "mixed": mixed, "wide": wide}


def _timed(stages: dict[str, float], name: str, fn, *args):
    clock = time.perf_counter if name.endswith("*") else time.process_time   # (* : the C compiler,
    t0 = clock()                                                            #  a child process: wall)
    out = fn(*args)
    stages[name] = stages.get(name, 0.0) + clock() - t0
    return out


@contextlib.contextmanager
def _timing_prepare(stages: dict[str, float], backend: str):
    """On cpu, time the parts of prepare: the plan-index key, lowering and rendering, and the C
    compiler's run (module functions wrapped for the duration)."""
    if backend != "cpu":
        yield
        return
    from lazytorch.runtime import compiler, cpu
    saved = [(cpu, "plan_structure"), (cpu, "kernel_sources"), (compiler, "_compile")]
    names = {"plan_structure": "plan_index", "kernel_sources": "lower+render", "_compile": "C compile*"}
    originals = [getattr(m, a) for m, a in saved]
    for (m, a), fn in zip(saved, originals):
        stages[names[a]] = 0.0
        setattr(m, a, functools.partial(_timed, stages, names[a], fn))
    try:
        yield
    finally:
        for (m, a), fn in zip(saved, originals):
            setattr(m, a, fn)


def compile_stages(tensors, backend: str) -> tuple[int, int, dict[str, float]]:
    """(op nodes, IR nodes, seconds per stage) of compiling the pending program of `tensors`."""
    stages: dict[str, float] = {}
    roots = pending_roots(t.node for t in tensors)
    prog = _timed(stages, "key", program, roots)
    options = options_for(backend)
    params, roots = _timed(stages, "normalize", normalize, prog.order, roots)
    try:              # (whether it decomposes, as realize.plan_for finds it: timed with decompose)
        from lazytorch.passes.decompose import has_composites
        options = _timed(stages, "decompose", lambda: replace(options, composites=has_composites(prog.order)))
    except ImportError:                 # (a tree before that)
        pass
    with tracing(False):
        for name, fn in PASSES:
            roots = _timed(stages, name, fn, roots, options)
        plan = _timed(stages, "fuse", build_plan, params, roots, options.max_buffers, options.library_bias)
    plan.backend = backend
    b = get_backend(backend)
    with _timing_prepare(stages, backend):
        _timed(stages, "prepare", b.prepare, plan)
    if backend == "cpu":      # prepare's own Python: what the stages timed inside it leave
        stages["prepare"] -= stages["plan_index"] + stages["lower+render"]   # (the compiler's wait
                                                                            #  is no process time)
    return sum(1 for n in prog.order if not n.is_leaf), len(prog.order), stages


@contextlib.contextmanager
def _fresh_disk_cache():
    """A new, empty kernel cache directory: the C compiler really runs."""
    with tempfile.TemporaryDirectory() as cache:
        old = os.environ.get("LAZYTORCH_CACHE_DIR")
        os.environ["LAZYTORCH_CACHE_DIR"] = cache
        try:
            yield
        finally:
            if old is None:
                del os.environ["LAZYTORCH_CACHE_DIR"]
            else:
                os.environ["LAZYTORCH_CACHE_DIR"] = old


def _as_graph_cache_compiles():
    """The conditions the graph cache compiles under (graph_cache.py: the cycle collector paused;
    nothing where the tree measured predates that)."""
    try:
        from lazytorch.passes.pipeline import no_cycle_collection
    except ImportError:
        return contextlib.nullcontext()
    return no_cycle_collection()


def measure(workload: str, n: int, backend: str, profile: bool = False,
            end_to_end: bool = False) -> tuple[int, int, dict[str, float], str]:
    """(op nodes, IR nodes, seconds per stage, cProfile's top entries or '') of one compile; with
    `end_to_end`, stage "lt.eval*" is a whole first `lt.eval` of the same program built again (a
    graph-cache miss, C compile included)."""
    lt.set_backend(backend)
    tensors = WORKLOADS[workload](n)
    gc.collect()
    prof = cProfile.Profile() if profile else None
    with _fresh_disk_cache(), _as_graph_cache_compiles():
        try:
            if prof:
                prof.enable()
            ops, nodes, stages = compile_stages(tensors, backend)
        finally:
            if prof:
                prof.disable()
    if end_to_end:
        lt.cache_clear()
        tensors = WORKLOADS[workload](n)
        gc.collect()
        with _fresh_disk_cache():
            _timed(stages, "lt.eval*", lt.eval, *tensors)
    text = ""
    if prof:
        s = io.StringIO()
        pstats.Stats(prof, stream=s).sort_stats("tottime").print_stats(15)
        text = s.getvalue()
    return ops, nodes, stages, text


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="1000,10000,40000")
    parser.add_argument("--backend", action="append", help="backend(s) (default: cpu, reference)")
    parser.add_argument("--workload", action="append", choices=sorted(WORKLOADS),
                        help="workload(s) (default: all)")
    parser.add_argument("--profile", action="store_true", help="print cProfile's top entries")
    parser.add_argument("--eval", action="store_true", help="also time a whole first lt.eval (lt.eval*)")
    parser.add_argument("--repeat", type=int, default=1, help="compiles per size; each stage's best is shown")
    a = parser.parse_args(argv)
    print("us per op node of each stage (op nodes: the pending nodes that compute, as the issue counts "
          "them; IR nodes add inputs and Python scalars); 'python' sums every stage but those marked *")
    for backend in a.backend or ["cpu", "reference"]:
        for workload in a.workload or list(WORKLOADS):
            for n in (int(s) for s in a.sizes.split(",")):
                ops, nodes, stages, prof = measure(workload, n, backend, a.profile, a.eval)
                for _ in range(a.repeat - 1):     # each Python stage's best time (a shared machine);
                    again = measure(workload, n, backend, False, a.eval)[2]   # (* stages: the first
                    stages = {k: v if k.endswith("*") else min(v, again[k]) for k, v in stages.items()}  # run's)
                python = sum(v for k, v in stages.items() if not k.endswith("*"))
                parts = "  ".join(f"{k} {v / ops * 1e6:.1f}" for k, v in stages.items())
                print(f"{backend:<10}{workload:<7}{ops:>6} op nodes ({nodes} IR nodes): python "
                      f"{python / ops * 1e6:6.1f} us/op node, {python / nodes * 1e6:5.1f} us/IR node "
                      f"({python:.3f} s) | {parts}", flush=True)
                if prof:
                    print(prof)


if __name__ == "__main__":
    main()

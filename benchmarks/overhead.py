"""Per-call overhead of lazytorch (workload W7): where the microseconds of one small call go.

One call builds 20 chained pointwise ops with Python scalars on 1024 float32 elements through
the Tensor API, evaluates it (a graph-cache hit) and materialises the result.  Printed per call,
median over samples: build (the Tensor API down to the nodes, each with its tree key; also per
op), key (what
eval does to find the compiled program: the tree key's cache lookup), walk (for comparison: the
one walk that orders and keys a program that is not a tree, plus its lookup), execute (argument
binding and launches) and the whole call.

    python -m benchmarks.overhead [--backend cpu] [--samples 15] [--calls 200] [--clock cpu]
    python -m benchmarks.overhead --demo [--backend cpu] [--calls 60]

`--demo` times the README demo (examples/gpt_block.py) instead, alternating in one process: the
graph build, the lazy evaluation of a built graph (walk, key, lookup and the plan's run) and a
whole lt.compile call (its plan's run), so the lazy plan's run can be compared with the compiled
one's (they differed by the demo's runtime scalars before structural constants).

`--model W9` (or W11) splits a model workload's lazy call into its stages, alternating with its
lt.compile call in one process, the garbage collector paused inside each call as the benchmark
harness does: build (the model's Python code down to the nodes), program (the walk that orders
and keys the pending program, plus the live tensors it syncs), lookup (the graph cache), run
(the cached plan's executable) and the compiled call.  `--torch-first` imports torch before
lazytorch, as the benchmark harness does (its libgomp is then the process's: runtime/threads.py).

    python -m benchmarks.overhead --model W9 [--calls 40] [--torch-first]

`--clock cpu` counts this thread's CPU time instead of wall time: on a shared machine it leaves
out the time other processes hold the cores (not their effect on caches and clocks).

`--count STAGE` runs one stage of W7 (`build`, `eval`: build + eval, `call`: build + eval + numpy, `compiled`: the
lt.compile call + numpy, `execute`: the cached plan's run) `--calls` times inside one
`functools.reduce`, after warm-up and with the cycle collector off, for an instruction counter
that other jobs do not disturb: under callgrind, collecting only inside that reduce,

    valgrind --tool=callgrind --collect-atstart=no --toggle-collect=functools_reduce \
        python -m benchmarks.overhead --count call --calls 20

(with OMP_NUM_THREADS=1 and LAZYTORCH_EXTRA_CFLAGS=-mno-avx512f for valgrind); the difference of
runs with 20 and 10 calls, divided by 10, is one call without the process's start.
"""
from __future__ import annotations

import argparse
import functools
import gc
import statistics
import time

import numpy as np

import lazytorch as lt
from lazytorch.graph_cache import CACHE, ProgramKey
from lazytorch.ir.graph import program
from lazytorch.realize import _compile
from lazytorch.runtime import backend_name

from .workloads import w7_math


CLOCKS = {"wall": time.perf_counter, "cpu": time.thread_time}
_clock = [time.perf_counter]


def _median_us(fn, samples: int, calls: int) -> float:
    times = []
    clock = _clock[0]
    for _ in range(samples):
        gc.collect()
        gc.disable()
        try:
            t0 = clock()
            for _ in range(calls):
                fn()
            times.append((clock() - t0) / calls * 1e6)
        finally:
            gc.enable()
    return statistics.median(times)


def breakdown(backend: str, samples: int = 15, calls: int = 200) -> dict[str, float]:
    """Median microseconds per call of each stage of W7 and of the whole call."""
    lt.set_backend(backend)
    x = lt.from_numpy(np.random.default_rng(0).standard_normal(1024).astype(np.float32))
    for _ in range(2):                    # compile once (the first build is the general route's)
        lt.eval(w7_math(lt, x))
    name = backend_name()
    root = w7_math(lt, x).node
    _, tree, leaves, n, size = root.tree     # (a tree: no walk at eval)
    leaves = leaves[:n]
    ops = size - len(leaves)

    def key_and_lookup():
        return CACHE.get_or_compile((("tree", tree), name), _no_compile)

    def walk_and_lookup():
        prog = program([root])
        return CACHE.get_or_compile(ProgramKey(prog.key, name), lambda: _compile(prog.order, [root], name))

    compiled = key_and_lookup()
    walk_and_lookup()
    args = [n.buffer if n.op == "buffer" else n.value for n in leaves]

    def whole():
        y = w7_math(lt, x)
        lt.eval(y)
        return y.numpy()

    build = _median_us(lambda: w7_math(lt, x), samples, calls)
    return {
        "build": build,
        "per op": build / ops,
        "key+lookup": _median_us(key_and_lookup, samples, calls),
        "walk": _median_us(walk_and_lookup, samples, calls),
        "execute": _median_us(lambda: compiled.executable.run(args), samples, calls),
        "call": _median_us(whole, samples, calls),
    }


def demo_breakdown(backend: str, calls: int = 60) -> dict[str, tuple[float, float]]:
    """(median, min) milliseconds of the README demo's build, lazy eval of the built graph and a
    compiled call, alternating (wall clock: the kernels run on OpenMP threads)."""
    import sys
    from pathlib import Path
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "examples"))
    from gpt_block import DEMO_SIZE, block, random_input, random_weights

    lt.set_backend(backend)
    s = DEMO_SIZE
    w = {k: lt.from_numpy(v) for k, v in random_weights(s["width"]).items()}
    x = lt.from_numpy(random_input(s["batch"], s["seq"], s["width"]))
    compiled = lt.compile(lambda x: block(lt, x, w, s["n_head"]))
    for _ in range(5):
        block(lt, x, w, s["n_head"]).numpy()
        compiled(x).numpy()
    times: dict[str, list[float]] = {"build": [], "lazy eval": [], "lt.compile call": []}
    clock = time.perf_counter
    for _ in range(calls):
        t0 = clock()
        y = block(lt, x, w, s["n_head"])
        t1 = clock()
        y.numpy()
        t2 = clock()
        compiled(x).numpy()
        t3 = clock()
        for k, dt in zip(times, (t1 - t0, t2 - t1, t3 - t2)):
            times[k].append(dt * 1e3)
    return {k: (statistics.median(v), min(v)) for k, v in times.items()}


def model_breakdown(workload: str, backend: str, calls: int = 40, quick: bool = False) -> dict[str, tuple[float, float]]:
    """(median, min) milliseconds of each stage of a model workload's lazy call (see the module
    docstring) and of its lt.compile call, alternating in one process (wall clock); `quick`: the
    workload's small sizes."""
    from lazytorch import realize
    from lazytorch.tensor import live_pending
    from .workloads import BY_NAME, make_inputs

    lt.set_backend(backend)
    w = BY_NAME[workload]
    forward = w.run("lazytorch")
    args = [lt.from_numpy(np.array(x, copy=True)) for x in make_inputs(w, quick=quick)]
    compiled = lt.compile(forward)
    name = backend_name()
    for _ in range(3):
        lt.eval(forward(*args))
        lt.eval(compiled(*args))
    stages = ("build", "program", "lookup", "run", "lazy call", "lt.compile call")
    times: dict[str, list[float]] = {k: [] for k in stages}
    clock = time.perf_counter
    for _ in range(calls):
        gc.collect()
        gc.disable()
        try:
            t0 = clock()
            out = forward(*args)
            t1 = clock()
            roots, prog = realize.program_for([out.node], live_pending())
            t2 = clock()
            entry = realize.CACHE.get_or_compile(ProgramKey(prog.key, name), _no_compile)
            leaves = [n.buffer if n.op == "buffer" else n.value for n in prog.leaves]
            t3 = clock()
            for node, buf in zip(roots, entry.executable.run(leaves)):
                node.realize(buf)
            t4 = clock()
            lt.eval(compiled(*args))
            t5 = clock()
        finally:
            gc.enable()
        for k, dt in zip(stages, (t1 - t0, t2 - t1, t3 - t2, t4 - t3, t4 - t0, t5 - t4)):
            times[k].append(dt * 1e3)
    return {k: (statistics.median(v), min(v)) for k, v in times.items()}


def count(stage: str, backend: str, calls: int) -> None:
    """Run W7's `stage` `calls` times inside one functools.reduce (see the module's `--count`)."""
    lt.set_backend(backend)
    x = lt.from_numpy(np.random.default_rng(0).standard_normal(1024).astype(np.float32))
    compiled = lt.compile(lambda x: w7_math(lt, x))
    for _ in range(5):                    # compile both, warm the fast path's memo
        w7_math(lt, x).numpy()
        compiled(x).numpy()
    root = w7_math(lt, x).node
    _, tree, leaves, n, _ = root.tree
    plan = CACHE.get_or_compile((("tree", tree), backend_name()), _no_compile)
    args = [leaf.buffer if leaf.op == "buffer" else leaf.value for leaf in leaves[:n]]
    del root
    stages = {
        "build": lambda: w7_math(lt, x),
        "call": lambda: w7_math(lt, x).numpy(),
        "eval": lambda: lt.eval(w7_math(lt, x)),
        "compiled": lambda: compiled(x).numpy(),
        "execute": lambda: plan.executable.run(args),
    }
    step = stages[stage]
    gc.collect()
    gc.disable()
    functools.reduce(lambda acc, _: step(), range(calls), None)
    gc.enable()


def _no_compile():
    raise AssertionError("W7 was compiled before: its lookups must hit")


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--backend", action="append", help="backend(s) to measure (default: cpu, reference)")
    parser.add_argument("--samples", type=int, default=15)
    parser.add_argument("--calls", type=int, default=200)
    parser.add_argument("--clock", choices=sorted(CLOCKS), default="wall")
    parser.add_argument("--demo", action="store_true", help="time the README demo's stages instead of W7's")
    parser.add_argument("--model", help="a model workload (W9, W11): its lazy call's stages against lt.compile")
    parser.add_argument("--torch-first", action="store_true", help="import torch before lazytorch (as the harness)")
    parser.add_argument("--count", choices=("build", "eval", "call", "compiled", "execute"),
                        help="run one stage --calls times inside functools.reduce (for callgrind)")
    a = parser.parse_args(argv)
    if a.count:
        count(a.count, (a.backend or ["cpu"])[0], a.calls)
        return
    _clock[0] = CLOCKS[a.clock]
    if a.model:
        if a.torch_first:
            import torch  # noqa: F401  (before lazytorch loads its first kernel library)
        for backend in a.backend or ["cpu"]:
            r = model_breakdown(a.model, backend, a.calls if a.calls != 200 else 40)
            print(f"{a.model} {backend}: " + ", ".join(f"{k} {m:.2f} ms (min {lo:.2f})" for k, (m, lo) in r.items()))
        return
    if a.demo:
        for backend in a.backend or ["cpu"]:
            r = demo_breakdown(backend, a.calls if a.calls != 200 else 60)
            print(f"{backend}: " + ", ".join(f"{k} {m:.2f} ms (min {lo:.2f})" for k, (m, lo) in r.items()))
        return
    print(f"{'backend':<12}{'build':>10}{'(per op)':>10}{'key+lookup':>12}{'(walk)':>10}{'execute':>10}{'call':>10}"
          f"   (us per call, median, {a.clock} clock)")
    for backend in a.backend or ["cpu", "reference"]:
        r = breakdown(backend, a.samples, a.calls)
        print(f"{backend:<12}{r['build']:>10.1f}{r['per op']:>10.2f}{r['key+lookup']:>12.1f}{r['walk']:>10.1f}{r['execute']:>10.1f}"
              f"{r['call']:>10.1f}")


if __name__ == "__main__":
    main()

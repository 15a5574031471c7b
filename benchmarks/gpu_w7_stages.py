"""W7's lazy call on the cuda backend, stage by stage: where a call's microseconds go after the
build (issue 14, "W7 lazy <= mx.compile on the GPU").

One lazy call is `y = w7_math(lt, x); y.numpy()`: the build, the eval (the graph cache's tree
lookup, the plan's run -- `GraphedPlan.run` -- and realizing the root) and the device->host copy.
Each stage is timed with perf_counter spans inside every call (the run through a wrapper around
the executable's `run`), garbage collector paused inside each sample, median and min of the
per-call spans over all calls.  Beside it, for comparison in the same process: the whole lazy
call with `.numpy()` and with `lt.eval + synchronize` (gpu_profile.py's call), the lt.compile
call both ways (with `--mlx`, mx.compile's: mx.eval and np.array), and the floors: the plan's cached graph launched and waited for, a 4 KB copy to
pageable host memory and one to pinned memory.  `--cprofile N` adds cProfile's busiest functions
over N whole lazy calls.  (Logs of the ninth session name the floors "copy pageable" for
"download" and "copy pinned" for "raw pinned copy".)

`--torch-first` imports torch and starts its CUDA context before lazytorch is imported, as the
benchmark harness's process has it (its copy bandwidth runs on torch first): the harness measured
W7's lazy call at about twice this probe's figure.

    PYTHONPATH=$PWD python benchmarks/gpu_w7_stages.py [--calls 2000] [--cprofile 1000] [--tag after] [--mlx] [--torch-first]
"""
from __future__ import annotations

import argparse
import ctypes
import gc
import statistics
import sys
import time

import numpy as np

if "--torch-first" in sys.argv:          # (before lazytorch's import: see the docstring)
    import torch
    torch.zeros(1, device="cuda").sum().item()

import lazytorch as lt
from lazytorch.runtime import cuda_driver

from benchmarks.workloads import w7_math


def timed(calls: int, body, names: tuple[str, ...]) -> dict[str, tuple[float, float]]:
    """(median, min) µs of each span `body()` returns (a tuple of perf_counter_ns deltas), over
    `calls` calls in samples of 100 with the collector paused inside each."""
    spans: list[tuple] = []
    for start in range(0, calls, 100):
        gc.collect()
        gc.disable()
        try:
            for _ in range(min(100, calls - start)):
                spans.append(body())
        finally:
            gc.enable()
    return {name: (statistics.median(col) / 1e3, min(col) / 1e3) for name, col in zip(names, zip(*spans))}


def show(title: str, r: dict[str, tuple[float, float]]) -> None:
    print(f"{title:<28}" + "  ".join(f"{k} {m:6.2f} ({lo:5.2f})" for k, (m, lo) in r.items()), flush=True)


def pieces(graphed, graph, args: list, tag: str, calls: int) -> None:
    """The parts of a graph replay's host work, each alone: binding the args (before the ninth
    session every replay bound them), allocating the output, the key, the lookup and the
    asynchronous launch."""
    from lazytorch.runtime import cuda_graph
    if graph is None:
        return
    clock = time.perf_counter_ns
    ex, dev = graphed.executor, graphed.dev
    env = ex.bind(args)
    empty = ex.backend.empty
    outs = [empty(shape, dtype) for shape, dtype in graphed.out_meta]
    if hasattr(graphed, "param_slots"):          # (the key of every bound param's identity)
        identity = cuda_graph._identity
        make_key = lambda: tuple([identity(env[i]) for i in graphed.param_slots] + [o.ptr for o in outs])  # noqa: E731
    else:                                        # (read off the args as given)
        make_key = lambda: graphed._key(args, graphed.buffers(args), outs)     # noqa: E731
    key = make_key()

    def one(fn):
        def body():
            t0 = clock()
            fn()
            return (clock() - t0,)
        return timed(calls, body, ("t",))["t"]

    show(f"{tag} replay pieces", {
        "bind": one(lambda: ex.bind(args)),
        "outs": one(lambda: [empty(shape, dtype) for shape, dtype in graphed.out_meta]),
        "key": one(make_key),
        "lookup": one(lambda: graphed.graphs.get(key)),
        "launch": one(lambda: dev.launch_graph(graph.exe))})
    dev.synchronize()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--calls", type=int, default=2000)
    ap.add_argument("--cprofile", type=int, default=0)
    ap.add_argument("--tag", default="")
    ap.add_argument("--mlx", action="store_true", help="time mx.compile's call of the chain too")
    ap.add_argument("--torch-first", action="store_true", help="torch's CUDA context first (see the docstring)")
    a = ap.parse_args()
    lt.set_backend("cuda")
    clock = time.perf_counter_ns
    x = lt.from_numpy(np.random.default_rng(0).standard_normal(1024).astype(np.float32)).clone()
    lt.eval(x)
    want = w7_math(np, np.asarray(x.numpy(), np.float64))
    compiled = lt.compile(lambda t: w7_math(lt, t))
    for _ in range(20):                  # compile both, capture their graphs, warm every memo
        got = w7_math(lt, x).numpy()
        compiled(x).numpy()
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(compiled(x).numpy(), want, rtol=1e-5, atol=1e-5)

    root = w7_math(lt, x).node
    leaves = root.tree[2][:root.tree[3]]
    leaves = [n.buffer if n.op == "buffer" else n.value for n in leaves]
    from lazytorch.graph_cache import CACHE
    from lazytorch.runtime import backend_name
    entry = CACHE.get_or_compile((("tree", root.tree[1]), backend_name()), lambda: None)
    plan = entry.executable
    del root
    run_ns = [0]
    inner = plan.run

    def run(*args):                      # (the plan's run, timed from inside the eval)
        t0 = clock()
        out = inner(*args)
        run_ns[0] = clock() - t0
        return out
    plan.run = run

    before = lt.cuda.graph_info()

    def lazy_stages():
        t0 = clock()
        y = w7_math(lt, x)
        t1 = clock()
        lt.eval(y)
        t2 = clock()
        y.numpy()
        t3 = clock()
        return t1 - t0, t2 - t1 - run_ns[0], run_ns[0], t3 - t2, t3 - t0

    stages = timed(a.calls, lazy_stages, ("build", "eval-run", "run", "numpy", "call"))
    after = lt.cuda.graph_info()
    del plan.run
    show(f"{a.tag} lazy stages", stages)
    print(f"{a.tag} graph replays per lazy call: "
          f"{(after['replays'] - before['replays']) / a.calls:.3f}, captures {after['captures'] - before['captures']}")

    def lazy_numpy():
        t0 = clock()
        w7_math(lt, x).numpy()
        return (clock() - t0,)

    def lazy_sync():
        t0 = clock()
        lt.eval(w7_math(lt, x))
        lt.cuda.synchronize()
        return (clock() - t0,)

    def compiled_numpy():
        t0 = clock()
        compiled(x).numpy()
        return (clock() - t0,)

    def compiled_sync():
        t0 = clock()
        lt.eval(compiled(x))
        lt.cuda.synchronize()
        return (clock() - t0,)

    calls = {"lazy+numpy": lazy_numpy, "lazy+sync": lazy_sync,
             "compiled+numpy": compiled_numpy, "compiled+sync": compiled_sync}
    if a.mlx:                            # mx.compile of the same chain: mx.eval, and np.array of it
        import mlx.core as mx
        xm = mx.array(np.asarray(x.numpy()))
        mx.eval(xm)
        mxc = mx.compile(lambda t: w7_math(mx, t))
        np.testing.assert_allclose(np.array(mxc(xm)), want, rtol=1e-5, atol=1e-5)

        def mx_eval():
            t0 = clock()
            mx.eval(mxc(xm))
            return (clock() - t0,)

        def mx_numpy():
            t0 = clock()
            np.array(mxc(xm))
            return (clock() - t0,)
        calls.update({"mx.compile+eval": mx_eval, "mx.compile+numpy": mx_numpy})
    for _ in range(2):                   # (alternating rounds: the machine's drift shows)
        show(f"{a.tag} whole calls", {name: timed(a.calls, fn, ("t",))["t"] for name, fn in calls.items()})

    # the floors: the plan's graph launched and waited for; a 4 KB result copied to the host
    dev = cuda_driver.device()
    graphed = inner.__self__
    graph = next(iter(getattr(graphed, "graphs", {}).values()), None)
    y = w7_math(lt, x)
    lt.eval(y)
    buf = y.node.buffer
    host = np.empty(1024, np.float32)
    pinned = ctypes.c_void_p()
    dev.check(dev.cu.cuMemAllocHost_v2(ctypes.byref(pinned), host.nbytes), "cuMemAllocHost")
    staging = np.ctypeslib.as_array((ctypes.c_float * 1024).from_address(pinned.value))
    dtoh = dev.raw.cuMemcpyDtoHAsync_v2

    def graph_sync():
        t0 = clock()
        dev.launch_graph(graph.exe)
        dev.synchronize()
        return (clock() - t0,)

    def download():                      # (the runtime's: pageable before the ninth session)
        t0 = clock()
        np.asarray(buf)
        return (clock() - t0,)

    def copy_pinned():
        t0 = clock()
        dtoh(pinned, ctypes.c_uint64(buf.ptr), ctypes.c_size_t(host.nbytes), dev.stream)
        dev.synchronize()
        staging.copy()
        return (clock() - t0,)

    def graph_download():
        t0 = clock()
        dev.launch_graph(graph.exe)
        np.asarray(buf)
        return (clock() - t0,)

    def graph_pinned():
        t0 = clock()
        dev.launch_graph(graph.exe)
        dtoh(pinned, ctypes.c_uint64(buf.ptr), ctypes.c_size_t(host.nbytes), dev.stream)
        dev.synchronize()
        staging.copy()
        return (clock() - t0,)

    floors = {"download": timed(a.calls, download, ("t",))["t"],
              "raw pinned copy": timed(a.calls, copy_pinned, ("t",))["t"]}
    if graph is not None:
        floors.update({"graph+sync": timed(a.calls, graph_sync, ("t",))["t"],
                       "graph+download": timed(a.calls, graph_download, ("t",))["t"],
                       "graph+raw pinned": timed(a.calls, graph_pinned, ("t",))["t"]})
    show(f"{a.tag} floors", floors)

    pieces(graphed, graph, leaves, a.tag, a.calls)

    if a.cprofile:
        import cProfile
        import io
        import pstats
        prof = cProfile.Profile()
        prof.enable()
        for _ in range(a.cprofile):
            w7_math(lt, x).numpy()
        prof.disable()
        out = io.StringIO()
        pstats.Stats(prof, stream=out).sort_stats("tottime").print_stats(25)
        print("\n".join("    " + line for line in out.getvalue().splitlines()[2:] if line.strip()), flush=True)


if __name__ == "__main__":
    main()

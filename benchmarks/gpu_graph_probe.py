"""CUDA graph replay on the driver runtime (runtime/cuda_graph.py), A/B in one process: each
workload's lt.compile call with graphs and without, its lazy call with graphs, torch eager, and the
GPU's own time per call (ten calls queued back to back, so the host is hidden); rounds interleaved
so that drift hits every row alike.  Medians and minima of synchronised calls, in µs.

    PYTHONPATH=$PWD python benchmarks/gpu_graph_probe.py [W5,W6,W7,W1,W2,W3,W4]
"""
import sys

import numpy as np

import lazytorch as lt
from benchmarks.frameworks import _lazytorch_ops, _torch_ops
from benchmarks.timing import per_call_us
from benchmarks.workloads import BY_NAME

lt.set_backend("cuda")
from lazytorch.runtime import cuda_driver, get_backend   # noqa: E402

ROUNDS = 3


def compiled(math, ops, graphs: bool):
    """lt.compile of `math`, prepared (first call) with the backend's graphs on or off."""
    backend = get_backend()
    saved, backend.graph_sight = backend.graph_sight, (2 if graphs else 0)
    f = lt.compile(lambda *a: math(ops, *a))
    return f, lambda: setattr(backend, "graph_sight", saved)


def main(names):
    import torch
    o, to = _lazytorch_ops(), _torch_ops()
    rng = np.random.default_rng(0)
    sync = cuda_driver.device().synchronize
    for wl in names:
        wk = BY_NAME[wl]
        arrs = wk.inputs(rng, wk.sizes)
        ins = [lt.tensor(a) for a in arrs]
        lt.eval(*ins)
        tins = [torch.from_numpy(a).cuda() for a in arrs]
        rows = {}
        fns = {}
        for graphs in (True, False):
            f, restore = compiled(wk.math, o, graphs)
            lt.eval(f(*ins))                 # (prepared now, with the setting above)
            restore()
            fns["lt.compile " + ("graphs" if graphs else "no graphs")] = f

        def whole(f):
            def call():
                y = f(*ins)
                lt.eval(y)
                sync()
            return call

        def queued(f):
            def call():
                ys = [f(*ins) for _ in range(10)]
                lt.eval(*ys)
                sync()
            return call

        def lazy():
            y = wk.math(o, *ins)
            lt.eval(y)
            sync()

        def torch_whole():
            wk.math(to, *tins)
            torch.cuda.synchronize()

        def torch_queued():
            [wk.math(to, *tins) for _ in range(10)]
            torch.cuda.synchronize()
        table = [(name, whole(f), 300, 1) for name, f in fns.items()]
        table += [("lazy (graphs)", lazy, 200, 1), ("torch eager", torch_whole, 300, 1)]
        table += [(name.replace("lt.compile", "GPU per call,"), queued(f), 30, 10) for name, f in fns.items()]
        table += [("GPU per call, torch", torch_queued, 30, 10)]
        before = lt.cuda.graph_info()
        for _ in range(ROUNDS):
            for name, fn, n, per in table:
                med, mn = per_call_us(fn, n, warmup=20)
                rows.setdefault(name, []).append((med / per, mn / per))
        after = lt.cuda.graph_info()
        for name, rs in rows.items():
            meds = [m for m, _ in rs]
            print("%s %-28s median %8.1f  min %8.1f   (rounds: %s)" % (
                wl, name, np.median(meds), min(m for _, m in rs), " ".join("%.1f" % m for m in meds)), flush=True)
        print(wl, "graphs:", {k: after[k] - before[k] for k in after}, flush=True)
        want = np.asarray(wk.math(to, *tins).cpu())
        for name, f in fns.items():
            got = f(*ins).numpy()
            print(wl, name, "max |diff| vs torch %.3g" % float(np.abs(got - want).max()), flush=True)


if __name__ == "__main__":
    main((sys.argv[1] if len(sys.argv) > 1 else "W5,W6,W7").split(","))

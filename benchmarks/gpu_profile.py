"""Where a GPU workload call's time goes, beside its peers, in one process: for each workload and
framework, the whole call (median and min of synchronised calls), then torch.profiler's CUPTI
records (they see MLX's kernels too) of a few calls: GPU kernels per call, kernel time per call,
the busiest kernels, and the gap (whole call minus kernel time) that is host work and waiting.

    PYTHONPATH=$PWD python benchmarks/gpu_profile.py [W1,W2,W3,W4,W7] [--frameworks lt.compile,lazy,torch,torch.compile,mx.compile]
        [--host-profile]     # and cProfile's busiest host functions of lazytorch's calls
"""
from __future__ import annotations

import argparse
import collections
import os

import numpy as np

from benchmarks.frameworks import _lazytorch_ops, _mlx_ops, _torch_ops
from benchmarks.timing import per_call_us
from benchmarks.workloads import BY_NAME

CALLS = 5          # profiled calls per framework


def frameworks(names: list[str]) -> dict:
    """name -> (ops table, input maker, wrap(fn), sync(out)) of the frameworks in `names`; MLX is
    imported only when an MLX framework is asked for (its threads then share the process)."""
    import lazytorch as lt
    import torch
    lt.set_backend("cuda")

    def lt_in(x):
        t = lt.from_numpy(np.array(x, copy=True)).clone()
        lt.eval(t)
        lt.cuda.synchronize()
        return t

    def lt_sync(out):
        lt.eval(out)
        lt.cuda.synchronize()

    torch_in = lambda x: torch.from_numpy(np.array(x, copy=True)).cuda()    # noqa: E731
    torch_sync = lambda out: torch.cuda.synchronize()                     # noqa: E731
    table = {
        "lazy": (_lazytorch_ops(), lt_in, lambda fn: fn, lt_sync),
        "lt.compile": (_lazytorch_ops(), lt_in, lt.compile, lt_sync),
        "torch": (_torch_ops(), torch_in, lambda fn: fn, torch_sync),
        "torch.compile": (_torch_ops(), torch_in, torch.compile, torch_sync),
    }
    if "mx.compile" in names:
        import mlx.core as mx

        def mx_in(x):
            a = mx.array(x)
            mx.eval(a)
            return a
        table["mx.compile"] = (_mlx_ops(), mx_in, mx.compile, mx.eval)
    return {n: table[n] for n in names}


def kernel_profile(call) -> tuple[float, float, list[tuple[str, float, int]]]:
    """(kernels per call, kernel µs per call, top kernels) from CUPTI over CALLS calls."""
    from torch.profiler import ProfilerActivity, profile
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(CALLS):
            call()
    events = [e for e in prof.key_averages() if e.device_time_total > 0]
    count = sum(e.count for e in events) / CALLS
    total = sum(e.device_time_total for e in events) / CALLS
    top = sorted(((e.key[:70], e.device_time_total / CALLS, e.count // CALLS) for e in events),
                 key=lambda r: -r[1])[:4]
    return count, total, top


def host_profile(call, calls: int = 40) -> None:
    """cProfile's busiest functions (own time) over `calls` calls, per call."""
    import cProfile
    import io
    import pstats
    prof = cProfile.Profile()
    prof.enable()
    for _ in range(calls):
        call()
    prof.disable()
    out = io.StringIO()
    pstats.Stats(prof, stream=out).sort_stats("tottime").print_stats(14)
    print("\n".join("      " + line for line in out.getvalue().splitlines()[4:] if line.strip()), flush=True)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("workloads", nargs="?", default="W1,W2,W3,W4,W7")
    ap.add_argument("--frameworks", default="lt.compile,lazy,torch,torch.compile,mx.compile")
    ap.add_argument("--host-profile", action="store_true", help="cProfile lazytorch's calls too")
    args = ap.parse_args()
    fws = frameworks(args.frameworks.split(","))
    rng = np.random.default_rng(0)
    rows = collections.defaultdict(dict)
    for wname in args.workloads.split(","):
        w = BY_NAME[wname]
        data = w.inputs(rng, w.sizes)
        ideal_bytes = w.bytes_moved(w.sizes) if w.bytes_moved else None
        for fname in args.frameworks.split(","):
            ops, make_in, wrap, sync = fws[fname]
            xs = [make_in(x) for x in data]
            fn = wrap(lambda *a, _ops=ops: w.math(_ops, *a))
            call = lambda: sync(fn(*xs))                            # noqa: E731
            med, low = per_call_us(call, 40, warmup=8)
            count, kern, top = kernel_profile(call)
            rows[wname][fname] = (med, low, count, kern)
            print(f"{wname} {fname:14s} call {med:8.1f} us (min {low:7.1f})  kernels/call {count:5.1f}"
                  f"  kernel time {kern:7.1f} us  gap {med - kern:7.1f} us", flush=True)
            for name, us, n in top:
                print(f"      {us:8.1f} us  x{n}  {name}")
            if args.host_profile and fname in ("lazy", "lt.compile"):
                host_profile(call)
        if ideal_bytes:
            print(f"{wname} bytes moved {ideal_bytes / 1e6:.1f} MB", flush=True)
    import lazytorch as lt
    print("CUDA graphs:", lt.cuda.graph_info(), flush=True)
    print(os.environ.get("LAZYTORCH_GPU_GEOMETRY", ""), dict(rows))


if __name__ == "__main__":
    main()

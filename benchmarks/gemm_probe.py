"""One linear layer's product several ways in one process, on one thread: torch.mm, numpy's matmul (its OpenBLAS) as asked and transposed (W @ xᵀ), the rows
kernel alone on one thread (runtime/_rows.c, where built) and lazytorch's compiled product (the
cpu backend's helper, runtime/library.py, with the route it picks), the ways alternating over
rounds, for the shapes of the README demo and of W9, in GFLOP/s.

    OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1 taskset -c 2 python -m benchmarks.gemm_probe
"""
from __future__ import annotations

import statistics

import numpy as np

from .timing import per_call_us

SHAPES = [(256, 256, 768), (256, 256, 1024), (256, 1024, 256), (55, 384, 384), (55, 384, 1536), (55, 1536, 384),
          (128, 384, 1536), (16, 384, 1536)]


ROUNDS = 7


def main() -> None:
    import ctypes

    import torch

    import lazytorch as lt
    from lazytorch.runtime import library
    lt.set_backend("cpu")
    i64, ptr = ctypes.c_int64, ctypes.c_void_p
    address = library.rows_kernel()
    rows = ctypes.CFUNCTYPE(ctypes.c_int, i64, i64, i64, ptr, i64, ptr, i64, ptr, i64)(address) if address else None
    torch.set_num_threads(1)
    rng = np.random.default_rng(0)
    print(f"GFLOP/s per way: best of {ROUNDS} rounds (median of the rounds' medians), the ways alternating")
    for m, k, n in SHAPES:
        a = rng.standard_normal((m, k)).astype(np.float32)
        w = rng.standard_normal((n, k)).astype(np.float32)
        c = np.empty((m, n), np.float32)
        ta, tw, la, lw = torch.from_numpy(a), torch.from_numpy(w), lt.from_numpy(a), lt.from_numpy(w)
        product = lt.compile(lambda x, y: x @ y.t())
        ways = {"torch": lambda: ta @ tw.t(), "numpy": lambda: a @ w.T, "numpy_transposed": lambda: w @ a.T,
                "lt.compile": lambda: product(la, lw).numpy()}
        if rows:
            ways["rows_kernel"] = lambda: rows(m, n, k, a.ctypes.data, k, w.ctypes.data, k, c.ctypes.data, n)
        times: dict[str, list] = {name: [] for name in ways}
        for _ in range(ROUNDS):
            for name, fn in ways.items():
                times[name].append(per_call_us(fn, 10, warmup=1))
        flops = 2 * m * k * n
        parts = [f"{name} {flops / min(t[1] for t in ts) / 1e3:.0f} ({flops / statistics.median(t[0] for t in ts) / 1e3:.0f})"
                 for name, ts in times.items()]
        print(f"({m},{k})@({n},{k})^T ", "  ".join(parts), flush=True)


if __name__ == "__main__":
    main()

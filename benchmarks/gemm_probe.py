"""One linear layer's product several ways in one process, on the cores it may use: torch.mm (on
one and on two threads), numpy's matmul (its OpenBLAS) as asked and transposed (W @ xᵀ), the rows
kernel alone on one thread (runtime/_rows.c, where built) and lazytorch's compiled product (the
cpu backend's helper, runtime/library.py, with the route it picks), min over 40 calls, for the
shapes of the README demo and of W9, in µs and GFLOP/s.

    OMP_NUM_THREADS=2 taskset -c 0,1 python -m benchmarks.gemm_probe
"""
from __future__ import annotations

import numpy as np

from .timing import per_call_us

SHAPES = [(256, 256, 768), (256, 256, 1024), (256, 1024, 256), (55, 384, 384), (55, 384, 1536), (55, 1536, 384),
          (128, 384, 1536), (16, 384, 1536)]


def best_us(fn, calls: int = 40) -> float:
    return per_call_us(fn, calls, warmup=1)[1]


def main() -> None:
    import torch

    import ctypes

    import lazytorch as lt
    from lazytorch.runtime import library
    lt.set_backend("cpu")
    i64, ptr = ctypes.c_int64, ctypes.c_void_p
    address = library.rows_kernel()
    rows = ctypes.CFUNCTYPE(ctypes.c_int, i64, i64, i64, ptr, i64, ptr, i64, ptr, i64)(address) if address else None
    rng = np.random.default_rng(0)
    for m, k, n in SHAPES:
        a = rng.standard_normal((m, k)).astype(np.float32)
        w = rng.standard_normal((n, k)).astype(np.float32)
        ta, tw, la, lw = torch.from_numpy(a), torch.from_numpy(w), lt.from_numpy(a), lt.from_numpy(w)
        product = lt.compile(lambda x, y: x @ y.t())
        row = [f"({m},{k})@({n},{k})^T"]
        for threads in (1, 2):
            torch.set_num_threads(threads)
            row.append(f"torch{threads} {best_us(lambda: ta @ tw.t()):.0f}")
        row.append(f"numpy {best_us(lambda: a @ w.T):.0f}")
        row.append(f"numpy_transposed {best_us(lambda: w @ a.T):.0f}")
        if rows:
            c = np.empty((m, n), np.float32)
            row.append(f"rows_kernel {best_us(lambda: rows(m, n, k, a.ctypes.data, k, w.ctypes.data, k, c.ctypes.data, n)):.0f}")
        row.append(f"lt.compile {best_us(lambda: product(la, lw).numpy()):.0f}")
        flops = 2 * m * k * n
        print("  ".join(row), "us (min);", " ".join(f"{part.split()[0]} {flops / float(part.split()[1]) / 1e3:.0f}"
                                                    for part in row[1:]), "GFLOP/s", flush=True)


if __name__ == "__main__":
    main()

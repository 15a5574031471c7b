"""One linear layer's product three ways in one process, on the cores it may use: torch.mm (on one
and on two threads), numpy's matmul (its OpenBLAS) and lazytorch's compiled product (the cpu
backend's BLAS helper, runtime/library.py), min over 40 calls, for the shapes of the README demo
and of W9.

    OMP_NUM_THREADS=2 taskset -c 0,1 python -m benchmarks.gemm_probe
"""
from __future__ import annotations

import numpy as np

from .timing import per_call_us

SHAPES = [(256, 256, 768), (256, 256, 1024), (256, 1024, 256), (55, 384, 384), (55, 384, 1536)]


def best_us(fn, calls: int = 40) -> float:
    return per_call_us(fn, calls, warmup=1)[1]


def main() -> None:
    import torch

    import lazytorch as lt
    lt.set_backend("cpu")
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
        row.append(f"lt.compile {best_us(lambda: product(la, lw).numpy()):.0f}")
        print("  ".join(row), "us (min)", flush=True)


if __name__ == "__main__":
    main()

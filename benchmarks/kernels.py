"""Generated-kernel speed on the cpu backend against the memory-copy ideal.

    python -m benchmarks.kernels [names...]

For each workload: the median time of one eval on fixed inputs (compiled and warmed first), the
bytes it must move (inputs read once, outputs written once), the ideal = bytes / copy bandwidth
(numpy copyto into a preallocated buffer of 64 MiB, measured in the same process, back to back),
and the ratio.  Matmul workloads report GFLOP/s instead.
"""
from __future__ import annotations

import statistics
import sys
import time

import numpy as np

import lazytorch as lt

F32 = np.float32


def _median(fn, reps: int) -> float:
    fn()
    ts = []
    for _ in range(reps):
        t0 = time.perf_counter()
        fn()
        ts.append(time.perf_counter() - t0)
    return statistics.median(ts)


def copy_bandwidth(nbytes: int = 64 << 20, reps: int = 15) -> float:
    src = np.ones(nbytes // 4, F32)
    dst = np.empty_like(src)
    return 2 * nbytes / _median(lambda: np.copyto(dst, src), reps)   # read + write


def _rand(*shape):
    return np.random.default_rng(0).standard_normal(shape, dtype=F32)


def w1():
    a, b, c = (lt.tensor(_rand(1 << 24)) for _ in range(3))
    return (lambda: lt.nn.functional.gelu(a * b + c, approximate="tanh") * lt.sigmoid(a) - lt.tanh(b)), 4 * 4 << 24, None


def w2():
    x, bias, scale = lt.tensor(_rand(4096, 4096)), lt.tensor(_rand(4096)), lt.tensor(_rand(4096, 1))
    return (lambda: lt.relu(x + bias) * scale), 2 * 4 * 4096 * 4096, None


def w3():
    x = lt.tensor(_rand(4096, 4096))
    return (lambda: lt.softmax(x, dim=-1)), 2 * 4 * 4096 * 4096, None


def w4():
    x, w, b = lt.tensor(_rand(8192, 1024)), lt.tensor(_rand(1024)), lt.tensor(_rand(1024))
    return (lambda: lt.nn.functional.layer_norm(x, (1024,), w, b)), 2 * 4 * 8192 * 1024, None


def sum_all():
    x = lt.tensor(_rand(4096, 4096))
    return (lambda: x.sum()), 4 * 4096 * 4096, None


def sum_cols():
    x = lt.tensor(_rand(4096, 4096))
    return (lambda: x.sum(0)), 4 * 4096 * 4096, None


def argmax_rows():
    x = lt.tensor(_rand(4096, 4096))
    return (lambda: x.argmax(-1)), 4 * 4096 * 4096, None


def erf_pow():
    x = lt.tensor(_rand(1 << 24))
    return (lambda: lt.erf(x) + lt.pow(lt.abs(x), 1.7)), 2 * 4 << 24, None


def w5():
    x, w1_, b1 = lt.tensor(_rand(4096, 1024)), lt.tensor(_rand(1024, 4096) * 0.03), lt.tensor(_rand(4096))
    w2_ = lt.tensor(_rand(4096, 1024) * 0.03)
    flops = 2 * 2 * 4096 * 1024 * 4096
    return (lambda: lt.nn.functional.gelu(x @ w1_ + b1) @ w2_), None, flops


def w6():
    q, k, v = (lt.tensor(_rand(8, 16, 512, 64)) for _ in range(3))
    flops = 2 * 2 * 8 * 16 * 512 * 512 * 64
    return (lambda: lt.softmax(q @ k.transpose(-1, -2) * 0.125, dim=-1) @ v), None, flops


WORKLOADS = {"W1": w1, "W2": w2, "W3": w3, "W4": w4, "W5": w5, "W6": w6, "sum_all": sum_all,
             "sum_cols": sum_cols, "argmax_rows": argmax_rows, "erf_pow": erf_pow}


def main(names: list[str]) -> None:
    lt.set_backend("cpu")
    bw = copy_bandwidth()
    print(f"copy bandwidth {bw / 1e9:.1f} GB/s (read + write)")
    for name in names or list(WORKLOADS):
        make, nbytes, flops = WORKLOADS[name]()
        t = _median(lambda: lt.eval(make()), 9 if flops else 15)
        if flops:
            print(f"{name:12s} {t * 1e3:8.2f} ms  {flops / t / 1e9:7.1f} GFLOP/s")
        else:
            ideal = nbytes / bw
            print(f"{name:12s} {t * 1e3:8.2f} ms  ideal {ideal * 1e3:6.2f} ms  ratio {t / ideal:5.2f}")


if __name__ == "__main__":
    main(sys.argv[1:])

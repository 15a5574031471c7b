"""W7's lazy call on the cuda backend (`lt.eval(w7_math(lt, x)); lt.cuda.synchronize()`) over a
process's first seconds: medians of 200 calls, one after another for 3 s, after two seconds of MODE:
`none` (start at once), `cpu` (a pure-Python spin), `gpu` (torch's tiny adds with a sync each),
`sleep`.  Whether a slow harness row is a warm-up (the first seconds) or the process (its whole
life): docs/benchmarks.md, "W7 on the GPU: the process, not the code".

    PYTHONPATH=$PWD python benchmarks/gpu_w7_over_time.py MODE
"""
from __future__ import annotations

import statistics
import sys
import time

import numpy as np

import lazytorch as lt
from benchmarks.gpu import _lt_device_in
from benchmarks.workloads import w7_math


def before(mode: str, seconds: float = 2.0) -> None:
    end = time.perf_counter() + seconds
    if mode == "cpu":
        while time.perf_counter() < end:
            sum(range(100))
    elif mode == "gpu":
        import torch
        a = torch.ones(1024, device="cuda")
        while time.perf_counter() < end:
            a.add_(1)
            torch.cuda.synchronize()
    elif mode == "sleep":
        time.sleep(seconds)


def main() -> None:
    mode = sys.argv[1] if len(sys.argv) > 1 else "none"
    lt.set_backend("cuda")
    x = _lt_device_in(np.random.default_rng(0).standard_normal(1024).astype(np.float32))

    def probe() -> None:
        lt.eval(w7_math(lt, x))
        lt.cuda.synchronize()
    for _ in range(5):
        probe()
    before(mode)
    t0, out = time.perf_counter(), []
    while time.perf_counter() - t0 < 3.0:
        spans = []
        for _ in range(200):
            c = time.perf_counter_ns()
            probe()
            spans.append(time.perf_counter_ns() - c)
        out.append((round(time.perf_counter() - t0, 2), round(statistics.median(spans) / 1e3, 1)))
    print(mode, "median", statistics.median(m for _, m in out), out[:3], out[3:12:2], out[-2:])


if __name__ == "__main__":
    main()

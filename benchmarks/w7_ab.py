"""W7's lazy call on the cpu backend by stage, wall clock (min and median of 15 samples of 2000
calls): build, build + eval, build + eval + numpy; and the lt.compile call + numpy.  For A/B runs
of two trees on quiet cores:

    for t in BEFORE AFTER; do (cd $t && PYTHONPATH=$t taskset -c 0 python3 benchmarks/w7_ab.py); done
"""
from collections import deque

import numpy as np

import lazytorch as lt

from benchmarks.timing import per_call_us
from benchmarks.workloads import w7_math


def w7(x):
    return w7_math(lt, x)


def timed(fn, n=2000, samples=15):
    """(min, median) microseconds of one call, each sample timing `n` calls in a row."""
    median, least = per_call_us(lambda: deque((fn() for _ in range(n)), maxlen=0), samples, warmup=1)
    return least / n, median / n


def main():
    lt.set_backend("cpu")
    x = lt.from_numpy(np.random.default_rng(0).standard_normal(1024).astype(np.float32))
    for _ in range(5):
        w7(x).numpy()

    def evaluated():
        y = w7(x)
        lt.eval(y)

    compiled = lt.compile(w7)
    for _ in range(5):
        compiled(x).numpy()
    stages = {"build": lambda: w7(x), "build+eval": evaluated, "build+eval+numpy": lambda: w7(x).numpy(),
              "compiled+numpy": lambda: compiled(x).numpy()}
    print("  ".join(f"{k} {a:.1f}/{b:.1f}" for k, (a, b) in ((k, timed(f)) for k, f in stages.items())), "us min/median")


if __name__ == "__main__":
    main()

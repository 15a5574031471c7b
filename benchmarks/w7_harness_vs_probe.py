"""Why W7's lazy call on the GPU times ~2x slower in the harness than in gpu_w7_stages.py: one
process, the harness's own call (benchmarks/runner.py prepared_call, timed by timing.measure) beside
the probe's (`lt.eval(w7_math(lt, x)); lt.cuda.synchronize()`) on the same input, then variants that
differ from the harness's call in one way each, alternating over rounds.

    PYTHONPATH=$PWD python benchmarks/w7_harness_vs_probe.py [--backend cuda]
"""
from __future__ import annotations

import argparse
import cProfile
import pstats
import sys

import numpy as np

from benchmarks.gpu import _lt_device_in, _lt_gpu_sync, lazytorch_gpu
from benchmarks.runner import prepared_call, run_timed, reference
from benchmarks.timing import FULL, measure
from benchmarks.workloads import BY_NAME, make_inputs, w7_math


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--backend", default="cuda")
    a = ap.parse_args()
    import lazytorch as lt
    w = BY_NAME["W7"]
    fw = lazytorch_gpu(a.backend)
    inputs = make_inputs(w, False)
    row = run_timed(w, fw, inputs, reference(w, inputs), FULL)      # (the harness's row itself)
    print("harness row", round(row["median_s"] * 1e6, 1), round(row["min_s"] * 1e6, 1), row.get("per_call"), flush=True)
    harness = prepared_call(w, fw, inputs)
    x = _lt_device_in(inputs[0])

    def probe():
        lt.eval(w7_math(lt, x))
        lt.cuda.synchronize()

    def held():                          # the harness's shape: the result held through the sync
        out = w7_math(lt, x)
        _lt_gpu_sync(out)
        return out

    def no_sync():
        out = w7_math(lt, x)
        lt.eval(out)
        return out
    ways = {"harness": harness, "probe": probe, "held": held, "eval only": no_sync}
    for r in range(3):
        print(f"round {r}: " + "  ".join(f"{k} {measure(f, FULL).median_s * 1e6:.1f}" for k, f in ways.items()),
              flush=True)
    for name in ("harness", "probe"):
        pr = cProfile.Profile()
        pr.enable()
        for _ in range(2000):
            ways[name]()
        pr.disable()
        print(f"--- cProfile {name}, 2000 calls")
        pstats.Stats(pr, stream=sys.stdout).sort_stats("tottime").print_stats(14)


if __name__ == "__main__":
    main()

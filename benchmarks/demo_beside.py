"""The README demo (examples/gpt_block.py, lazy path) beside other work on the cores, one process:

- `--beside numpy` (default): right after a multi-threaded numpy product, and quiet.  numpy's
  OpenBLAS pool spins ~0.1 s after each such call, on a core the demo's kernels and split products
  would fork onto (runtime/threads.py own_busy).  Each round runs the float64 numpy block (the
  demo's own check) and times the demo's calls for the next `--window` seconds, then sleeps until
  the pool sleeps and times `--quiet` calls.
- `--beside process`: quiet, then beside a CPU-bound process (`while True: pass`), `--seconds` of
  calls each (runtime/threads.py idle_cores).

Prints one line: medians and minimums in ms.  For A/B runs of two trees:

    for t in BEFORE AFTER; do (cd $t && PYTHONPATH=$t python3 benchmarks/demo_beside.py --tag $t); done
"""
from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "examples"))

import gpt_block  # noqa: E402

import lazytorch as lt  # noqa: E402


def _ms(v: list[float]) -> str:
    return f"{statistics.median(v) * 1e3:.2f} (min {min(v) * 1e3:.2f}, n={len(v)})"


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--beside", choices=["numpy", "process"], default="numpy")
    p.add_argument("--rounds", type=int, default=8, help="numpy: rounds of product, window, quiet")
    p.add_argument("--window", type=float, default=0.08, help="numpy: seconds timed after each product")
    p.add_argument("--quiet", type=int, default=10, help="numpy: calls timed once the pool sleeps")
    p.add_argument("--seconds", type=float, default=3.0, help="process: seconds timed quiet and beside it")
    p.add_argument("--tag", default="")
    args = p.parse_args()
    s = gpt_block.DEMO_SIZE
    w_np = gpt_block.random_weights(s["width"])
    x_np = gpt_block.random_input(s["batch"], s["seq"], s["width"])
    w = {k: lt.from_numpy(v) for k, v in w_np.items()}
    x = lt.from_numpy(x_np)

    def call() -> float:
        t = time.perf_counter()
        gpt_block.block(lt, x, w, s["n_head"]).numpy()
        return time.perf_counter() - t

    def calls_for(seconds: float) -> list[float]:
        start, out = time.perf_counter(), []
        while time.perf_counter() - start < seconds:
            out.append(call())
        return out

    for _ in range(30):
        call()
    if args.beside == "process":
        quiet = calls_for(args.seconds)
        proc = subprocess.Popen([sys.executable, "-c", "while True: pass"])
        try:
            time.sleep(1.2)                        # (idle_cores samples every 0.5 s)
            busy = calls_for(args.seconds)
        finally:
            proc.kill()
            proc.wait()
        print(f"{args.tag} demo ms: quiet {_ms(quiet)}; beside a busy process {_ms(busy)}")
        return
    window, quiet = [], []
    for _ in range(args.rounds):
        gpt_block.block_float64(x_np, w_np, s["n_head"])
        window += calls_for(args.window)
        time.sleep(0.3)
        quiet += [call() for _ in range(args.quiet)]
    print(f"{args.tag} demo ms: after a numpy product {_ms(window)}; quiet {_ms(quiet)}")


if __name__ == "__main__":
    main()

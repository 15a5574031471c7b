"""`python -m benchmarks`: run the workload table on lazytorch's backends and the peers.

    python -m benchmarks                          # everything (minutes)
    python -m benchmarks --quick --workloads W1,W7 --backends reference --peers numpy
    python -m benchmarks --workloads W7,W11 --backends cpu --compiled cpu --peers numpy,torch,torch.compile
    python -m benchmarks --device gpu                  # NVIDIA GPU: cuda backend vs torch/mlx on the GPU
    python -m benchmarks --workloads W11,W9 --backends cpu --compiled cpu --peers torch --compete 1
                                                       # the same beside one CPU-bound competing process
"""
from __future__ import annotations

import argparse
import contextlib
import os
import subprocess
import sys
from pathlib import Path

from . import report
from .frameworks import PEERS, Framework, lazytorch_backend_kept, select
from .machine import machine_info
from .runner import ROOF_PEERS, add_ratios, reference, run_cold, run_interleaved, run_roof, run_timed
from .timing import FULL, QUICK, Plan, copy_bandwidth
from .workloads import BY_NAME, WORKLOADS, Workload, make_inputs

COPY_BYTES = {False: 512 * 2 ** 20, True: 16 * 2 ** 20}   # large enough to leave every cache
GPU_COPY_BYTES = {False: 1024 * 2 ** 20, True: 64 * 2 ** 20}   # a sync per copy costs < 2% at 1 GiB


def parse_args(argv: list[str]) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m benchmarks", description=__doc__.splitlines()[0])
    names = lambda s: [x.strip() for x in s.split(",") if x.strip()]  # noqa: E731
    p.add_argument("--workloads", type=names, default=[w.name for w in WORKLOADS],
                   help=f"comma-separated, from {','.join(BY_NAME)} (default: all)")
    p.add_argument("--device", choices=("cpu", "gpu"), default="cpu",
                   help="gpu: lazytorch's cuda backend and the peers on an NVIDIA GPU (benchmarks/gpu.py)")
    p.add_argument("--backends", type=names, default=None,
                   help="lazytorch backends, comma-separated (default: cpu,reference; gpu: cuda)")
    p.add_argument("--compiled", type=names, default=[],
                   help="lazytorch backends to also run under lt.compile, comma-separated (default: none)")
    p.add_argument("--peers", type=names, default=None,
                   help=f"comma-separated, from {','.join(PEERS)} (default: all; gpu: all GPU peers)")
    p.add_argument("--quick", action="store_true", help="smoke run: small sizes, few repeats")
    p.add_argument("--compete", type=int, default=0, metavar="N",
                   help="run beside N CPU-bound competing processes (`while True: pass`), as on a "
                        "machine with another job (default: 0, quiet)")
    p.add_argument("--interleave", choices=("per-call", "all", "none"), default="per-call",
                   help="take the frameworks' timed samples in turn, one of each per round (timing."
                        "measure_interleaved) for the per-call workloads (W7: the default), every "
                        "timed workload, or none (each framework's samples in a row)")
    p.add_argument("--out", type=Path, default=Path(__file__).resolve().parent / "results",
                   help="directory for results.json, results.md and ratios.png")
    args = p.parse_args(argv)
    gpu = args.device == "gpu"
    if args.backends is None:
        args.backends = ["cuda"] if gpu else ["cpu", "reference"]
    if args.peers is None:
        from .gpu import GPU_PEERS
        args.peers = list(GPU_PEERS if gpu else PEERS)
    unknown = [w for w in args.workloads if w not in BY_NAME]
    if unknown:
        p.error(f"unknown workload(s) {', '.join(unknown)}; valid: {', '.join(BY_NAME)}")
    return args


def derive(row: dict, entry: dict) -> dict:
    """The comparisons: × ideal time, GFLOP/s and its fraction of the best plain matmul, µs/call."""
    t = row.get("median_s")
    if t is None:
        return row
    if entry.get("ideal_s"):
        row["ratio_to_ideal"] = t / entry["ideal_s"]
    if entry.get("flops"):
        row["gflops"] = entry["flops"] / t / 1e9
        best = (entry.get("matmul_roof") or {}).get("best_gflops")
        if best:
            row["ratio_to_matmul"] = row["gflops"] / best
    if entry.get("per_call_us"):
        row["us_per_call"] = t * 1e6
    return row


def progress(w: Workload, row: dict) -> None:
    t = row.get("median_s", row.get("cold_first_s"))
    detail = report.fmt_time(t) if t is not None else row.get("error", "")
    if row.get("per_call"):
        detail += "  (per call: " + ", ".join(f"{k} {v:g}" for k, v in row["per_call"].items()) + ")"
    print(f"  {w.name} {row['framework']:<22} {row['status']:<6} {detail}", file=sys.stderr, flush=True)


@contextlib.contextmanager
def competing(n: int):
    """N busy processes for the duration of the block (each spins one core; the OS shares the
    rest): how a user's program fares beside another job (issue 14, part 1)."""
    procs = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(n)]
    try:
        yield
    finally:
        for proc in procs:
            proc.kill()
            proc.wait()


def run_workload(w: Workload, frameworks: list[Framework], quick: bool, plan: Plan, bandwidth: dict,
                 interleave: str = "per-call") -> dict:
    sizes = BY_NAME[w.of].size(quick) if w.of else w.size(quick)
    entry: dict = {"name": w.name, "title": w.title, "sizes": sizes, "mode": w.mode}
    runnable = w.mode == "cold" or (w.inputs is not None and (w.math or w.run) is not None)
    skipped = w.missing() or (None if runnable else "no inputs and math in its table entry yet")
    if skipped:
        entry["skipped"] = skipped
        return entry
    rows = []
    if w.mode == "cold":
        for fw in frameworks:
            rows.append(run_cold(w, fw, quick))
            progress(w, rows[-1])
        entry["results"] = rows
        return entry
    inputs = make_inputs(w, quick)
    ref = reference(w, inputs)
    if w.bytes_moved:
        entry.update(bytes_moved=w.bytes_moved(sizes), bytes_formula=w.bytes_formula)
        entry["ideal_s"] = entry["bytes_moved"] / (bandwidth["gb_per_s"] * 1e9)
    if w.flops:
        entry.update(flops=w.flops(sizes), flops_formula=w.flops_formula)
        peers = [f for f in frameworks if f.name in ROOF_PEERS] or [PEERS["numpy"]]
        entry["matmul_roof"] = run_roof(w, peers, inputs, sizes, plan)
    entry["per_call_us"] = w.per_call_us
    if interleave == "all" or (interleave == "per-call" and w.per_call_us):
        for row in run_interleaved(w, frameworks, inputs, ref, plan):
            rows.append(derive(row, entry))
            progress(w, rows[-1])
    else:
        for fw in frameworks:
            rows.append(derive(run_timed(w, fw, inputs, ref, plan), entry))
            progress(w, rows[-1])
    add_ratios(rows, w.ratios_to)
    entry["results"] = rows
    return entry


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    args = parse_args(argv)
    plan = QUICK if args.quick else FULL
    if args.device == "gpu":
        # Every framework multiplies float32 in full float32, as torch does by default: MLX would use
        # TF32 (reading the variable once, at the process's first matmul, whichever framework runs it)
        os.environ.setdefault("MLX_ENABLE_TF32", "0")
        from . import gpu
        frameworks = gpu.select(args.backends, args.peers, args.compiled)
        bandwidth = gpu.copy_bandwidth(GPU_COPY_BYTES[args.quick], plan)
    else:
        frameworks = select(args.backends, args.peers, args.compiled)
        bandwidth = copy_bandwidth(COPY_BYTES[args.quick], plan)
    print(f"copy bandwidth: {bandwidth['gb_per_s']:.1f} GB/s", file=sys.stderr)
    run = {"command": "python -m benchmarks " + " ".join(argv), "quick": args.quick, "device": args.device,
           "competing_processes": args.compete,
           "machine": machine_info(), "copy_bandwidth": bandwidth,
           "frameworks": [f.name for f in frameworks], "workloads": []}
    args.out.mkdir(parents=True, exist_ok=True)
    with lazytorch_backend_kept(), competing(args.compete):
        for name in args.workloads:
            run["workloads"].append(run_workload(BY_NAME[name], frameworks, args.quick, plan, bandwidth,
                                                 args.interleave))
            report.write_json(run, args.out / "results.json")   # an interrupted run keeps what it measured
    text = report.markdown(run)
    note = report.chart(run, args.out / "ratios.png")
    run["chart"] = note or str(args.out / "ratios.png")
    report.write_json(run, args.out / "results.json")
    (args.out / "results.md").write_text(text + "\n")
    print(text)
    print(f"\nwrote {args.out / 'results.json'}, {args.out / 'results.md'}"
          + (f"; {note}" if note else f", {args.out / 'ratios.png'}"))
    return 0

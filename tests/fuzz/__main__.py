"""python -m tests.fuzz --programs 10000 --backends reference,cpu,metal-emu --seed 0 [--jobs N] [--log FILE]"""
from __future__ import annotations

import argparse
import sys
import warnings

import torch

from .run import run_sharded, tee_log


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m tests.fuzz", description=__doc__)
    ap.add_argument("--programs", type=int, default=1000)
    ap.add_argument("--backends", default="reference")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--batch", type=int, default=40, help="programs evaluated by one lt.eval")
    ap.add_argument("--max-steps", type=int, default=8)
    ap.add_argument("--jobs", type=int, default=1,
                    help="processes; each runs a contiguous seed range, the report is merged")
    ap.add_argument("--log", help="append progress and shrunk repros to this file")
    args = ap.parse_args(argv)
    torch.set_num_threads(1)
    warnings.filterwarnings("ignore", category=UserWarning)   # torch's dof / deprecation notes

    log = tee_log(args.log)

    failed = False
    for backend in [b for b in args.backends.split(",") if b]:
        camp = run_sharded(backend, args.programs, args.seed, args.jobs, args.batch, log=log,
                           log_path=args.log, max_steps=args.max_steps)
        log(f"# DONE {camp.summary()}")
        failed |= bool(camp.mismatches)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())

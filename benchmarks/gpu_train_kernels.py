"""Where a ResNet-18 training step's GPU time goes, torch eager beside lt.compile (and the lazy
step): CUPTI's kernel records (torch.profiler, which sees lazytorch's kernels too) over a few
steps, per step: kernels, kernel time, and the busiest kernels grouped by kind (a GEMM, a
convolution, a generated kernel by its pattern), so that what the GPU does beyond torch's work
shows by kind.  The steps are benchmarks/conv_models.py's (`training_steps`: the same weights,
SGD, the loss read on the host).

    PYTHONPATH=$PWD python benchmarks/gpu_train_kernels.py [--batch 64] [--size 224] [--steps 3] [--top 14] [--forward]
"""
from __future__ import annotations

import argparse
import collections
import re

import numpy as np


def kind(name: str) -> str:
    """A kernel's group: generated kernels by pattern (k12_pointwise -> pointwise), library
    kernels by what they do."""
    m = re.match(r"k\d+_(\w+)", name)
    if m:
        return "generated " + m.group(1)
    low = name.lower()
    for word in ("gemm", "conv", "wgrad", "dgrad", "cutlass", "sgemm", "batch_norm", "elementwise", "reduce",
                 "softmax", "pool", "lt_"):
        if word in low:
            return f"library {word}"
    return "other " + name[:40]


def profile(call, steps: int, top: int = 14) -> tuple[float, float, list, list]:
    """(kernels, kernel ms, groups, the busiest kernels) per step, over `steps` steps."""
    from torch.profiler import ProfilerActivity, profile as torch_profile
    with torch_profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(steps):
            call()
    events = [e for e in prof.key_averages() if e.device_time_total > 0]
    groups: dict[str, list] = collections.defaultdict(lambda: [0.0, 0])
    for e in events:
        g = groups[kind(e.key)]
        g[0] += e.device_time_total / steps / 1e3
        g[1] += e.count / steps
    count = sum(e.count for e in events) / steps
    total = sum(e.device_time_total for e in events) / steps / 1e3
    top_kernels = sorted(((e.key[:60], e.device_time_total / steps / 1e3, e.count / steps) for e in events), key=lambda r: -r[1])
    return count, total, sorted(((k, ms, n) for k, (ms, n) in groups.items()), key=lambda r: -r[1]), top_kernels[:top]


LAUNCHES: dict[str, str] = {}


def launches() -> dict[str, str]:
    """Generated kernel name (lt_<hash of its source>) -> what it computes (its pattern, first
    ops, reads' and writes' shapes), read off the compiled plans alive (lt.compile's entries)."""
    import gc

    from lazytorch.codegen.gpu import launch_call
    from lazytorch.compile import Entry
    named = {}
    for entry in [o for o in gc.get_objects() if type(o) is Entry and o.plan is not None]:
        for launch in entry.plan.launches:
            call = launch_call(launch, "cuda") if launch.kind == "kernel" else None
            ops = [n.op for n in launch.nodes if n.op not in ("view", "scalar")]
            named[call.name if call else launch.name] = (
                f"{launch.pattern} {ops[:4]} reads {[list(n.shape) for n, _ in launch.reads][:3]} "
                f"-> {[list(n.shape) for n, _ in launch.writes]}")
    return named


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--size", type=int, default=224)
    ap.add_argument("--steps", type=int, default=3)
    ap.add_argument("--top", type=int, default=14, help="busiest kernels listed")
    ap.add_argument("--forward", action="store_true", help="the forward in eval mode instead of a training step")
    args = ap.parse_args()
    import torch

    import lazytorch as lt
    from benchmarks.conv_models import forwards, models, training_steps
    lt.set_backend("cuda")
    args.device, args.train = "cuda", not args.forward
    x = np.random.default_rng(4).standard_normal((args.batch, 3, args.size, args.size)).astype(np.float32)
    tnet, lnet = models("cuda")
    made = forwards if args.forward else training_steps
    calls = made(argparse.Namespace(device="cuda", batch=args.batch, steps=1, compiled=False), tnet, lnet,
                 torch.from_numpy(x).to("cuda"), lt.from_numpy(x))
    for call in calls.values():              # (compiles, captures)
        for _ in range(3):
            call()
    LAUNCHES.update(launches())
    what = "forward (eval mode)" if args.forward else "training step (SGD)"
    print(f"ResNet-18 {what} on cuda, input {[args.batch, 3, args.size, args.size]}, "
          f"{args.steps} profiled steps each; per step:")
    for name, call in calls.items():
        count, total, groups, top = profile(call, args.steps, args.top)
        print(f"  {name:11s} kernels {count:6.1f}  kernel time {total:7.2f} ms")
        for k, ms, n in groups[:10]:
            print(f"      {ms:7.2f} ms  x{n:6.1f}  {k}")
        print("    busiest:")
        for k, ms, n in top:
            print(f"      {ms:7.2f} ms  x{n:6.1f}  {k}  {LAUNCHES.get(k.strip(), '')[:200]}")


if __name__ == "__main__":
    main()

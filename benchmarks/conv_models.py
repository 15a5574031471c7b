"""ResNet-18 (torchvision's resnet.py, vendored in tests/models) forward beside torch, in one process.

The model file runs as written with torch and with lazytorch imported in its place (the test's
`load_pair`), the same weights in both, eval mode.  Each round times one call of every framework
in turn (lazy: graph built and run; lt.compile; torch eager; torch.compile with --compiled), so a
noisy host slows them alike; printed are the first call, median and min per framework and the
medians' ratio to torch eager.  `--device cuda`: lazytorch's cuda backend beside torch on the GPU
(each call ends with the result on the host).

    python -m benchmarks.conv_models [--batch 1] [--size 224] [--rounds 20] [--compiled] [--device cuda]
"""
from __future__ import annotations

import argparse
import os
import statistics
import sys
import time

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def models(device: str = "cpu"):
    """(torch ResNet-18, lazytorch ResNet-18) with the same weights, in eval mode, on `device`."""
    import torch
    sys.path[:0] = [os.path.join(ROOT, "tests")]
    from test_nn_models import _resnet_prepare, load_pair
    tmod, lmod = load_pair("resnet.py", _resnet_prepare, expected_changes=1)
    torch.manual_seed(0)
    tnet, lnet = tmod.resnet18(num_classes=1000).eval(), lmod.resnet18(num_classes=1000).eval()
    lnet.load_state_dict(tnet.state_dict())
    return tnet.to(device), lnet


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--batch", type=int, default=1)
    p.add_argument("--size", type=int, default=224)
    p.add_argument("--rounds", type=int, default=20)
    p.add_argument("--compiled", action="store_true", help="torch.compile too (slow first call)")
    p.add_argument("--device", default="cpu", choices=("cpu", "cuda"))
    args = p.parse_args()
    import torch

    import lazytorch as lt
    lt.set_backend(args.device)
    tnet, lnet = models(args.device)
    x = np.random.default_rng(4).standard_normal((args.batch, 3, args.size, args.size)).astype(np.float32)
    tx, lx = torch.from_numpy(x).to(args.device), lt.from_numpy(x)
    compiled = lt.compile(lnet)
    calls = {"lazy": lambda: lnet(lx).numpy(), "lt.compile": lambda: compiled(lx).numpy(),
             "torch": lambda: tnet(tx).cpu().numpy()}
    if args.compiled:
        tc = torch.compile(tnet)
        calls["torch.compile"] = lambda: tc(tx).cpu().numpy()
    first, times = {}, {k: [] for k in calls}
    with torch.no_grad(), lt.no_grad():
        expected = tnet(tx).cpu().numpy()
        for name, call in calls.items():
            t = time.perf_counter()
            got = call()
            first[name] = time.perf_counter() - t
            err = float(np.abs(got - expected).max())
            assert err < 1e-3 * max(1.0, float(np.abs(expected).max())), (name, err)
            call()
        for _ in range(args.rounds):
            for name, call in calls.items():
                t = time.perf_counter()
                call()
                times[name].append(time.perf_counter() - t)
    base = statistics.median(times["torch"])
    print(f"ResNet-18 forward on {args.device}, input {list(x.shape)}, {args.rounds} rounds, "
          f"load {os.getloadavg()[0]:.2f}")
    for name, ts in times.items():
        med = statistics.median(ts)
        print(f"  {name:14s} first {first[name] * 1e3:8.1f} ms  median {med * 1e3:7.2f} ms  "
              f"min {min(ts) * 1e3:7.2f} ms  {med / base:5.2f}x torch")


if __name__ == "__main__":
    main()

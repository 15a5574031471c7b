"""ResNet-18 (torchvision's resnet.py, vendored in tests/models) forward beside torch, in one process;
`--model dcgan`: a DCGAN's training step (discriminator, then generator: transposed convolutions).

The model file runs as written with torch and with lazytorch imported in its place (the test's
`load_pair`), the same weights in both, eval mode.  Each round times one call of every framework
in turn (lazy: graph built and run; lt.compile; torch eager; torch.compile with --compiled), so a
noisy host slows them alike; printed are the first call, median and min per framework and the
medians' ratio to torch eager.  `--train`: a training step instead (each framework its own copy of
the weights; the first steps' losses are checked against torch's).  `--device cuda`: lazytorch's cuda backend beside torch on the GPU
(each call ends with the result on the host).

    python -m benchmarks.conv_models [--batch 1] [--size 224] [--rounds 20] [--compiled] [--device cuda]
    python -m benchmarks.conv_models --model dcgan [--batch 64] [--device cuda]
    python -m benchmarks.conv_models --train --phases [--rounds 150]   # the lazy step's phases
    python -m benchmarks.conv_models --train --steps 10   # the loss read every 10 steps, as a loop logs
    python -m benchmarks.conv_models --train --block 5    # 5 calls of each framework in a row per round

Printed per framework: the first call, median, min, mean and max of the rounds (a lazy training
loop's throughput is its mean: a periodic collection or recompile shows there, not in the median).
"""
from __future__ import annotations

import argparse
import gc
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


def forwards(args, tnet, lnet, tx, lx) -> dict:
    """Each framework's forward in eval mode, ending with the logits on the host."""
    import torch

    import lazytorch as lt
    compiled = lt.compile(lnet)

    def under(grad_off, fn):
        def call():
            with grad_off():
                return fn()
        return call
    calls = {"torch": under(torch.no_grad, lambda: tnet(tx).cpu().numpy()),
             "lazy": under(lt.no_grad, lambda: lnet(lx).numpy()),
             "lt.compile": under(lt.no_grad, lambda: compiled(lx).numpy())}
    if args.compiled:
        tc = torch.compile(tnet)
        calls["torch.compile"] = under(torch.no_grad, lambda: tc(tx).cpu().numpy())
    return calls


def training_steps(args, tnet, lnet, tx, lx) -> dict:
    """Each framework's training step (train mode, cross-entropy, SGD lr 0.01) on its own copy of
    the same weights, ending with the loss on the host: the first steps' losses agree."""
    import torch

    import lazytorch as lt
    labels = np.random.default_rng(5).integers(0, 1000, args.batch)
    ty, ly = torch.from_numpy(labels).to(args.device), lt.from_numpy(labels)
    lnet2 = models(args.device)[1]
    for net in (tnet, lnet, lnet2):
        net.train()
    topt, lopt, lopt2 = (o.optim.SGD(n.parameters(), lr=0.01) for o, n in ((torch, tnet), (lt, lnet), (lt, lnet2)))

    def step(F, net, opt, x, y, mark=lambda phase: None):
        opt.zero_grad()
        loss = F.cross_entropy(net(x), y)
        mark("forward")
        loss.backward()
        mark("backward")
        opt.step()
        mark("step")
        return loss
    compiled = lt.compile(lambda x, y: step(lt.nn.functional, lnet2, lopt2, x, y))
    return {"torch": read_after(args, lambda: step(torch.nn.functional, tnet, topt, tx, ty), _torch_host),
            "lazy": read_after(args, lambda: step(lt.nn.functional, lnet, lopt, lx, ly, PHASES.mark)),
            "lt.compile": read_after(args, lambda: compiled(lx, ly))}


def _torch_host(t):
    return t.detach().cpu().numpy()


def read_after(args, step, host=lambda t: t.numpy()):
    """A timed call: `args.steps` steps, then the last one's loss read on the host (`host`:
    lazytorch's `.numpy()`; not `.cpu()`, which selects the cpu device for the process), as a
    loop that logs every so many steps."""
    def call(steps: int | None = None):
        for _ in range(steps or args.steps):
            loss = step()
        return host(loss)
    return call


class Phases:
    """`--phases`: where the lazy training step's time goes, per step: forward build, backward
    build, the optimizer's step (its update's build and the evaluation of the whole step), the
    loss's download, and the cyclic collector's time inside the step (gc.callbacks)."""

    def __init__(self) -> None:
        self.on, self.times, self.gc = False, {}, [0.0, 0.0, 0.0]

    def start(self) -> None:
        if self._collector not in gc.callbacks:
            gc.callbacks.append(self._collector)
        self.on = True
        self.last = time.perf_counter()

    def _collector(self, phase: str, info: dict) -> None:
        if self.on:
            now = time.perf_counter()
            if phase == "start":
                self.began = now
            else:
                self.gc[info["generation"]] += now - self.began

    def mark(self, phase: str) -> None:
        if self.on:
            now = time.perf_counter()
            self.times.setdefault(phase, []).append(now - self.last)
            self.last = now

    def report(self, steps: int) -> None:
        parts = [f"{k} {statistics.median(v) * 1e3:.2f} (mean {statistics.mean(v) * 1e3:.2f})"
                 for k, v in self.times.items()]
        gens = ", ".join(f"{t / steps * 1e3:.2f}" for t in self.gc)
        print("  lazy step's phases, ms, median (mean): " + ", ".join(parts) +
              f"; collector {sum(self.gc) / steps * 1e3:.2f} ms a step (generations 0, 1, 2: {gens})")


PHASES = Phases()


def gan_steps(args) -> dict:
    """Each framework's DCGAN step (tests/gan_models.py; Adam) on its own copy of the same
    weights, ending with both losses on the host."""
    import torch

    import lazytorch as lt
    sys.path[:0] = [os.path.join(ROOT, "tests")]
    from gan_models import dcgan, gan_step
    torch.manual_seed(0)
    nets = {"torch": dcgan(torch.nn), "lazy": dcgan(lt.nn), "lt.compile": dcgan(lt.nn)}
    for name in ("lazy", "lt.compile"):
        for t, m in zip(nets["torch"], nets[name]):
            m.load_state_dict(t.state_dict())
    nets["torch"] = tuple(m.to(args.device) for m in nets["torch"])
    rng = np.random.default_rng(4)
    real = rng.standard_normal((args.batch, 3, 64, 64)).astype(np.float32)
    noise = rng.standard_normal((args.batch, 100, 1, 1)).astype(np.float32)

    def stepper(lib, g, d):
        opts = [lib.optim.Adam(m.parameters(), lr=2e-4, betas=(0.5, 0.999)) for m in (g, d)]
        return lambda x, z: lib.stack(list(gan_step(lib, g, d, *opts, x, z)))
    tstep = stepper(torch, *nets["torch"])
    lstep, cstep = stepper(lt, *nets["lazy"]), lt.compile(stepper(lt, *nets["lt.compile"]))
    tx, tz = (torch.from_numpy(a).to(args.device) for a in (real, noise))
    lx, lz = lt.from_numpy(real), lt.from_numpy(noise)
    return {"torch": read_after(args, lambda: tstep(tx, tz), _torch_host), "lazy": read_after(args, lambda: lstep(lx, lz)),
            "lt.compile": read_after(args, lambda: cstep(lx, lz))}


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--batch", type=int, default=1)
    p.add_argument("--size", type=int, default=224)
    p.add_argument("--rounds", type=int, default=20)
    p.add_argument("--compiled", action="store_true", help="torch.compile too (slow first call)")
    p.add_argument("--device", default="cpu", choices=("cpu", "cuda"))
    p.add_argument("--train", action="store_true", help="a training step (cross-entropy, SGD) per call")
    p.add_argument("--model", default="resnet18", choices=("resnet18", "dcgan"))
    p.add_argument("--phases", action="store_true", help="with --train: the lazy step's phases")
    p.add_argument("--warmup", type=int, default=6, help="untimed calls after the first")
    p.add_argument("--block", type=int, default=1, help="timed calls of one framework in a row per round "
                   "(1: the frameworks alternate call by call; more: as a loop runs its own step back to "
                   "back, the host's caches warm with its own work)")
    p.add_argument("--steps", type=int, default=1, help="training steps per timed call, the loss read "
                   "after the last (a loop that logs every N steps); times are per step")
    args = p.parse_args()
    if args.steps > 1 and not (args.train or args.model == "dcgan"):
        p.error("--steps is for training steps: --train, or --model dcgan")
    import torch

    import lazytorch as lt
    lt.set_backend(args.device)
    shape = [args.batch, 3, args.size, args.size]
    if args.model == "dcgan":
        calls, shape = gan_steps(args), [args.batch, 3, 64, 64]
    else:
        x = np.random.default_rng(4).standard_normal(shape).astype(np.float32)
        tnet, lnet = models(args.device)
        tx, lx = torch.from_numpy(x).to(args.device), lt.from_numpy(x)
        calls = training_steps(args, tnet, lnet, tx, lx) if args.train else forwards(args, tnet, lnet, tx, lx)
    first, times = {}, {k: [] for k in calls}
    t = time.perf_counter()
    expected = calls["torch"](1) if args.steps > 1 else calls["torch"]()   # (the first step's losses agree;
    first["torch"] = time.perf_counter() - t                             # later ones drift apart chaotically)
    for name, call in calls.items():
        t = time.perf_counter()
        got = (call(1) if args.steps > 1 else call()) if name != "torch" else expected
        first.setdefault(name, time.perf_counter() - t)
        err = float(np.abs(got - expected).max())
        assert err < 1e-3 * max(1.0, float(np.abs(expected).max())), (name, err)
        for _ in range(args.warmup):    # (on cuda a loop's two CUDA graphs are captured on its
            call()                      #  fourth to seventh calls: runtime/cuda_graph.py)
    # the warm-up's compiles leave the collector's oldest generation due a full collection (100-200
    # ms over torch's heap on an H200 host), which lands in whichever round comes next: made here,
    # once, so the rounds' means show the steady state's own collections, as a long loop's do
    gc.collect()
    for _ in range(args.rounds):
        for name, call in calls.items():
            for _ in range(args.block):
                if name == "lazy" and args.phases:
                    PHASES.start()
                t = time.perf_counter()
                call()
                times[name].append(time.perf_counter() - t)
                if name == "lazy" and args.phases:
                    PHASES.mark("download")
                    PHASES.on = False
    times = {k: [t / args.steps for t in ts] for k, ts in times.items()}
    base = statistics.median(times["torch"])
    what = "ResNet-18 " + ("training step (SGD)" if args.train else "forward")
    if args.model == "dcgan":
        what = "DCGAN training step (Adam, discriminator then generator)"
    steps = f" of {args.steps} steps (times per step)" if args.steps > 1 else ""
    block = f" of {args.block} calls in a row" if args.block > 1 else ""
    print(f"{what} on {args.device}, input {shape}, {args.rounds} rounds{block}{steps}, "
          f"load {os.getloadavg()[0]:.2f}")
    for name, ts in times.items():
        med = statistics.median(ts)
        print(f"  {name:14s} first {first[name] * 1e3:8.1f} ms  median {med * 1e3:7.2f} ms  "
              f"min {min(ts) * 1e3:7.2f} ms  mean {statistics.mean(ts) * 1e3:7.2f} ms  "
              f"max {max(ts) * 1e3:8.1f} ms  {med / base:5.2f}x torch")
    if PHASES.times:
        PHASES.report(args.rounds * args.block * args.steps)
    if args.device == "cuda":
        from lazytorch.runtime import cuda_graph
        print(f"  CUDA graphs (warm-up included) {cuda_graph.STATS}")


if __name__ == "__main__":
    main()

"""ResNet-18's lazy training step alone, by part: where a step's host time goes.

A process that runs only the lazy step (SGD; tests/models/resnet.py, as benchmarks/conv_models.py
loads it), with the evaluation's parts timed by wrappers: the program walk and the live values it
syncs (`program_for`), the graph-cache lookup, the executable's run (and, on cuda, a
synchronisation right after it: what the run left the GPU to do); per step the forward build, the
backward build, `opt.step` (the update's build and the whole evaluation) and the loss's download;
and the cyclic collector's time per step by generation.  Medians and means of `--steps` steps
after 8.  For A/B runs, run it from each tree in turn (`PYTHONPATH=<tree>`).

    python -m benchmarks.lazy_step [--device cuda] [--batch 16] [--size 128] [--steps 100]
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


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--device", default="cpu", choices=("cpu", "cuda"))
    p.add_argument("--batch", type=int, default=2)
    p.add_argument("--size", type=int, default=32)
    p.add_argument("--steps", type=int, default=60)
    args = p.parse_args()
    sys.path[:0] = [os.path.join(ROOT, "tests")]
    from benchmarks.conv_models import models

    import lazytorch as lt
    import lazytorch.realize as R
    lt.set_backend(args.device)
    lnet = models(args.device)[1].train()
    rng = np.random.default_rng(0)
    x = lt.from_numpy(rng.standard_normal((args.batch, 3, args.size, args.size)).astype(np.float32))
    y = lt.from_numpy(rng.integers(0, 1000, args.batch))
    opt = lt.optim.SGD(lnet.parameters(), lr=0.01)
    times: dict[str, list[float]] = {}

    def add(part: str, seconds: float) -> None:
        times.setdefault(part, []).append(seconds * 1e3)

    def timed(part: str, fn):
        def wrapper(*a, **k):
            t = time.perf_counter()
            out = fn(*a, **k)
            add(part, time.perf_counter() - t)
            return out
        return wrapper
    R.program_for = timed("program_for", R.program_for)
    lookup = type(R.CACHE).get_or_compile
    wrapped: set[int] = set()
    executables: list = []

    def get_or_compile(cache, key, compile_fn):
        t = time.perf_counter()
        compiled = lookup(cache, key, compile_fn)
        add("lookup", time.perf_counter() - t)
        ex = compiled.executable
        if id(ex) not in wrapped:
            wrapped.add(id(ex))
            executables.append(ex)
            ex.run = _timed_run(ex.run, add, args.device)
        return compiled
    type(R.CACHE).get_or_compile = get_or_compile
    collector, began = [0.0, 0.0, 0.0], [0.0]

    def on_collect(phase: str, info: dict) -> None:
        if phase == "start":
            began[0] = time.perf_counter()
        else:
            collector[info["generation"]] += time.perf_counter() - began[0]

    def step() -> None:
        t0 = time.perf_counter()
        opt.zero_grad()
        loss = lt.nn.functional.cross_entropy(lnet(x), y)
        t1 = time.perf_counter()
        loss.backward()
        t2 = time.perf_counter()
        opt.step()
        t3 = time.perf_counter()
        loss.numpy()
        t4 = time.perf_counter()
        for part, a, b in (("forward", t0, t1), ("backward", t1, t2), ("opt.step", t2, t3), ("download", t3, t4)):
            add(part, b - a)
    for _ in range(8):
        step()
    times.clear()
    gc.callbacks.append(on_collect)
    for _ in range(args.steps):
        step()
    gc.callbacks.remove(on_collect)
    print(f"ResNet-18 lazy training step on {args.device}, input {[args.batch, 3, args.size, args.size]}, "
          f"{args.steps} steps, load {os.getloadavg()[0]:.2f}")
    for part, ms in times.items():
        print(f"  {part:16s} median {statistics.median(ms):7.2f} mean {statistics.mean(ms):7.2f} ms  (n={len(ms)})")
    print("  collector, ms a step by generation 0, 1, 2:", ", ".join(f"{c / args.steps * 1e3:.2f}" for c in collector))
    if args.device == "cuda":
        _graphs(lt, executables)


def _graphs(lt, executables: list) -> None:
    """Whether the step's plans replay as CUDA graphs, and where not, why (runtime/cuda_graph.py)."""
    from lazytorch.runtime import cuda_driver
    print(f"  CUDA graphs {lt.cuda.graph_info()}, threads on the device {len(cuda_driver.device().threads)}")
    for ex in executables:
        plain = getattr(ex, "executor", ex)
        print(f"    plan of {len(plain.plan.launches)} launches ({type(ex).__name__}): on {getattr(ex, 'on', None)}, "
              f"host launches {plain.host_launches}, memory plan {plain.memory is not None}, "
              f"graphs {len(getattr(ex, 'graphs', ()))}, evictions {getattr(ex, 'evictions', None)}, "
              f"keys seen once {len(getattr(ex, 'seen', ()))}")


def _timed_run(run, add, device: str):
    """An executable's run, timed; on cuda also a wait for the stream right after it."""
    def timed(run_args, *rest):
        t = time.perf_counter()
        out = run(run_args, *rest)
        add("executable.run", time.perf_counter() - t)
        if device == "cuda":
            from lazytorch.runtime import cuda_driver
            t = time.perf_counter()
            cuda_driver.synchronize()
            add("then sync", time.perf_counter() - t)
        return out
    return timed


if __name__ == "__main__":
    main()

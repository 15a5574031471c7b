"""The GPU columns of the comparison (`python -m benchmarks --device gpu`) and the GPU copy bandwidth.

On an NVIDIA GPU: lazytorch's `cuda` backend, torch eager and torch.compile on cuda tensors, and
MLX eager and mx.compile with MLX's CUDA build (its default device is then the GPU, so the `mlx`
and `mx.compile` peers of frameworks.py run there unchanged).  Every timed call ends with a sync,
so a row is the time until the result exists on the GPU; inputs live on the GPU before timing.
"""
from __future__ import annotations

from typing import Any

import numpy as np

from .frameworks import PEERS, Framework, _torch_ops, _torch_compile, lazytorch, lazytorch_compiled
from .timing import Plan, measure


def _torch_cuda_in(x: np.ndarray):
    import torch
    return torch.from_numpy(np.array(x, copy=True)).cuda()


def _torch_cuda_sync(out) -> None:
    import torch
    torch.cuda.synchronize()


def _lt_device_in(x: np.ndarray):
    """A lazytorch tensor whose buffer already lives on the GPU (a copy kernel's output)."""
    import lazytorch as lt
    t = lt.from_numpy(np.array(x, copy=True)).clone()
    lt.eval(t)
    _lt_gpu_sync(t)
    return t


def _lt_gpu_sync(out) -> None:
    """lt.eval starts the kernels; lt.cuda.synchronize waits for the GPU (torch.cuda.synchronize's
    counterpart, as the torch rows use)."""
    import lazytorch as lt
    outs = out if isinstance(out, (list, tuple)) else [out]
    lt.eval(*outs)
    lt.cuda.synchronize()


def _lt_graph_counters() -> dict[str, int]:
    import lazytorch as lt
    return lt.cuda.graph_info()


def lazytorch_gpu(backend: str) -> Framework:
    fw = lazytorch(backend)
    fw.to_native, fw.sync, fw.counters = _lt_device_in, _lt_gpu_sync, _lt_graph_counters
    return fw


GPU_PEERS: dict[str, Framework] = {f.name: f for f in [
    Framework("torch[cuda]", _torch_ops, _torch_cuda_in, lambda t: t.cpu().numpy(), _torch_cuda_sync),
    Framework("torch.compile[cuda]", _torch_ops, _torch_cuda_in, lambda t: t.cpu().numpy(), _torch_cuda_sync,
              prepare=_torch_compile),
    PEERS["mlx"], PEERS["mx.compile"],
]}


def lazytorch_gpu_compiled(backend: str) -> Framework:
    """lt.compile on the GPU, on device-resident inputs like lazytorch_gpu."""
    fw = lazytorch_compiled(backend)
    fw.to_native, fw.sync, fw.counters = _lt_device_in, _lt_gpu_sync, _lt_graph_counters
    return fw


def select(backends: list[str], peers: list[str], compiled: list[str] = ()) -> list[Framework]:
    unknown = [p for p in peers if p not in GPU_PEERS]
    if unknown:
        raise SystemExit(f"unknown GPU peer(s) {', '.join(unknown)}; valid: {', '.join(GPU_PEERS)}")
    return ([lazytorch_gpu(b) for b in backends] + [lazytorch_gpu_compiled(b) for b in compiled]
            + [GPU_PEERS[p] for p in peers])


def copy_bandwidth(nbytes: int, plan: Plan) -> dict[str, Any]:
    """Device-to-device copy (torch `copy_` into a preallocated cuda tensor, synchronized); GB/s
    counts the bytes read plus written, as workloads count bytes_moved."""
    import torch
    src = torch.ones(nbytes // 4, dtype=torch.float32, device="cuda")
    dst = torch.empty_like(src)

    def call() -> None:
        dst.copy_(src)
        torch.cuda.synchronize()
    t = measure(call, plan)
    size = src.numel() * 4
    return {"array_bytes": size, "bytes_per_copy": 2 * size, "gb_per_s": 2 * size / t.median_s / 1e9,
            "device": torch.cuda.get_device_name(), "how": "torch cuda copy_ (device to device)", **t.as_dict()}


# ---------------------------------------------------------------- kernel-only timings
# What the GPU itself spends in each generated kernel of a workload, without lazytorch's host path
# (graph building, plan lookup): the kernels are launched straight through mx.fast.cuda_kernel on
# device-resident inputs, BATCH launches per mx.eval (MLX queues them while the GPU runs), so the
# time per launch is the kernel's.  `LAZYTORCH_GPU_GEOMETRY` (see docs/gpu.md) forces a geometry:
#
#   python -m benchmarks.gpu kernels W1,W2,W3,W4 [--geometry "threads=512" --geometry "rows:per_thread=4"]
#   python -m benchmarks.gpu kernels R1,R2,R3,R4 --geometry "" --geometry "split=1"   (long reductions)
BATCH = 20


def _kernel_rows() -> dict:
    """Kernel-only rows for long reductions (the grid combine; no peer columns, so not in the
    workload table): `python -m benchmarks.gpu kernels R1,R2,R3,R4`."""
    from .workloads import F32, Workload, randn
    vec = lambda rng, s: [randn(rng, s["N"])]                       # noqa: E731
    mat = lambda rng, s: [randn(rng, s["M"], s["N"])]               # noqa: E731
    return {w.name: w for w in [
        Workload("R1", "x.sum() over N", {"N": 2 ** 24}, {"N": 2 ** 17}, inputs=vec, math=lambda o, x: x.sum(),
                 bytes_moved=lambda s: s["N"] * F32),
        Workload("R2", "x.sum(1) of M x N, few long rows", {"M": 4, "N": 2 ** 22}, {"M": 4, "N": 2 ** 17},
                 inputs=mat, math=lambda o, x: x.sum(dim=1), bytes_moved=lambda s: s["M"] * s["N"] * F32),
        Workload("R3", "x.sum(0) of M x N, few outputs", {"M": 2 ** 20, "N": 16}, {"M": 2 ** 15, "N": 16},
                 inputs=mat, math=lambda o, x: x.sum(dim=0), bytes_moved=lambda s: s["M"] * s["N"] * F32),
        Workload("R4", "x.argmax() over N", {"N": 2 ** 24}, {"N": 2 ** 17}, inputs=vec, math=lambda o, x: x.argmax(),
                 bytes_moved=lambda s: s["N"] * F32),
    ]}


def kernel_times(names: list[str], geometry: str = "", rounds: int = 5, quick: bool = False) -> list[dict]:
    """One row per workload: the summed median time of its kernels (s), the kernels' geometries and
    GB/s against the workload's bytes_moved."""
    import os
    import time
    import lazytorch as lt
    import mlx.core as mx
    from lazytorch.codegen.gpu import launch_call
    from lazytorch.realize import kernel_plan
    from lazytorch.runtime.mlx import CUDA, call_arguments, kernel_arguments, mx_dtype
    from .frameworks import _lazytorch_ops
    from .workloads import BY_NAME, make_inputs

    os.environ["LAZYTORCH_GPU_GEOMETRY"] = geometry     # read when each kernel is rendered
    lt.set_backend("cuda")                               # the plan as the cuda backend builds it
    rows = []
    extra = _kernel_rows()
    for name in names:
        w = BY_NAME[name] if name in BY_NAME else extra[name]
        arrays = make_inputs(w, quick)
        out = w.math(_lazytorch_ops(), *[lt.tensor(a) for a in arrays])
        total, shapes = 0.0, []
        for launch in kernel_plan([out]).launches:
            call = launch_call(launch, "cuda")
            if call is None:
                continue
            kernel = mx.fast.cuda_kernel(**kernel_arguments(call, CUDA))
            ins = [mx.random.normal(s).astype(mx_dtype(d)) for s, d in zip(call.input_shapes, call.input_dtypes)]
            mx.eval(ins)
            args = call_arguments(call, ins)
            mx.eval(kernel(**args))                      # compile
            samples = []
            for _ in range(rounds):
                t0 = time.perf_counter()
                mx.eval([kernel(**args)[0] for _ in range(BATCH)])
                samples.append((time.perf_counter() - t0) / BATCH)
            total += sorted(samples)[len(samples) // 2]
            shapes.append(call.source.splitlines()[0].split("geometry ")[-1])
        size = w.size(quick)
        nbytes = w.bytes_moved(size) if w.bytes_moved else None
        rows.append({"workload": name, "geometry_env": geometry, "kernel_s": total, "geometry": shapes,
                     "gb_per_s": nbytes / total / 1e9 if nbytes and total else None})
    return rows


def main(argv: list[str] | None = None) -> None:
    import argparse
    import json
    p = argparse.ArgumentParser(prog="python -m benchmarks.gpu")
    p.add_argument("what", choices=("kernels",))
    p.add_argument("workloads")
    p.add_argument("--geometry", action="append", default=None,
                   help="LAZYTORCH_GPU_GEOMETRY values to compare (default: the built-in table)")
    p.add_argument("--quick", action="store_true")
    args = p.parse_args(argv)
    for geo in args.geometry or [""]:
        for row in kernel_times(args.workloads.split(","), geo, quick=args.quick):
            print(json.dumps(row), flush=True)


if __name__ == "__main__":
    main()

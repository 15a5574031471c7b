"""The GPU columns of the comparison (`python -m benchmarks --device gpu`) and the GPU copy bandwidth.

On an NVIDIA GPU: lazytorch's `cuda` backend, torch eager and torch.compile on cuda tensors, and
MLX eager and mx.compile with MLX's CUDA build (its default device is then the GPU, so the `mlx`
and `mx.compile` peers of frameworks.py run there unchanged).  Every timed call ends with a sync,
so a row is the time until the result exists on the GPU; inputs live on the GPU before timing.
"""
from __future__ import annotations

from typing import Any

import numpy as np

from .frameworks import PEERS, Framework, _torch_ops, _torch_compile, lazytorch
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
    """lt.eval builds MLX's lazy graph of kernel launches; mx.eval runs it to completion."""
    import lazytorch as lt
    import mlx.core as mx
    outs = out if isinstance(out, (list, tuple)) else [out]
    lt.eval(*outs)
    mx.eval([t.node.buffer.array for t in outs])


def lazytorch_gpu(backend: str) -> Framework:
    fw = lazytorch(backend)
    fw.to_native, fw.sync = _lt_device_in, _lt_gpu_sync
    return fw


GPU_PEERS: dict[str, Framework] = {f.name: f for f in [
    Framework("torch[cuda]", _torch_ops, _torch_cuda_in, lambda t: t.cpu().numpy(), _torch_cuda_sync),
    Framework("torch.compile[cuda]", _torch_ops, _torch_cuda_in, lambda t: t.cpu().numpy(), _torch_cuda_sync,
              prepare=_torch_compile),
    PEERS["mlx"], PEERS["mx.compile"],
]}


def select(backends: list[str], peers: list[str]) -> list[Framework]:
    unknown = [p for p in peers if p not in GPU_PEERS]
    if unknown:
        raise SystemExit(f"unknown GPU peer(s) {', '.join(unknown)}; valid: {', '.join(GPU_PEERS)}")
    return [lazytorch_gpu(b) for b in backends] + [GPU_PEERS[p] for p in peers]


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

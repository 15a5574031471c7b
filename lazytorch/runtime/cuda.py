"""The cuda backend: generated CUDA kernels launched through `mx.fast.cuda_kernel` (MLX's CUDA build)
on an NVIDIA GPU.  Buffers are MLX arrays in GPU memory.  As on Metal, float64 is refused (MLX
runs no float64 on the GPU) and 0-d float64 Python scalars are read as float32.

codegen/cuda.py::launch_call builds each kernel's CudaCall; this module turns it into the two MLX
calls.  Buffers and data movement are the metal backend's (both hold MLX arrays).  matmul library
launches run as `mx.matmul` on the GPU; other launches the generator does not lower run on the host.
"""
from __future__ import annotations

import os
from typing import Any, Sequence

from ..codegen.cuda import check_dtypes, launch_call
from ..codegen.cuda_kernel import CudaCall
from ..ir import dtypes as D
from ..ir.dtypes import DType
from .backend import Buffer, LaunchFn
from .metal import MetalBackend, _mx, mx_dtype

# mx.matmul on the GPU computes these in the precision torch does (half types accumulate in f32).
# MLX multiplies float32 with TF32 unless told not to (relative error ~1e-3, where torch's default
# is full float32): it reads MLX_ENABLE_TF32 once, at its first matmul, so it is set before that.
os.environ.setdefault("MLX_ENABLE_TF32", "0")
MATMUL_DTYPES = (D.float16, D.bfloat16, D.float32)


def kernel_arguments(call: CudaCall) -> dict[str, Any]:
    """Keyword arguments of mx.fast.cuda_kernel(...) for `call`."""
    return dict(name=call.name, input_names=list(call.input_names), output_names=list(call.output_names),
                source=call.source, header=call.header, ensure_row_contiguous=call.ensure_row_contiguous,
                shared_memory=call.shared_memory)


def call_arguments(call: CudaCall, inputs: Sequence[Any]) -> dict[str, Any]:
    """Keyword arguments of the kernel call (inputs are MLX arrays of the declared shapes)."""
    return dict(inputs=list(inputs), output_shapes=[tuple(s) for s in call.output_shapes],
                output_dtypes=[mx_dtype(d) for d in call.output_dtypes], grid=tuple(call.grid),
                threadgroup=tuple(call.threadgroup), init_value=call.init_value,
                template=[(n, mx_dtype(v) if isinstance(v, DType) else v) for n, v in call.template] or None)


def _matmul_launch(launch) -> LaunchFn | None:
    """mx.matmul for a library launch of views and one float matmul (None: anything else)."""
    # Matmuls of non-empty matrices, read directly or through views (a transposed key); 1-d and
    # size-0 operands run on the host (an early GPU run crashed there, not yet isolated).
    *views, node = launch.nodes
    if node.op != "matmul" or any(v.op != "view" for v in views):
        return None
    if any(n.dtype not in MATMUL_DTYPES or len(n.shape) < 2 or 0 in n.shape
           for n in (node, *node.inputs, *views)):
        return None
    mx = _mx()

    def fn(reads: Sequence[Buffer], writes: Sequence[Buffer]) -> None:
        env = {id(node): buf.array for (node, _), buf in zip(launch.reads, reads)}
        for node in launch.nodes:
            x = [env[id(i)] for i in node.inputs]
            if node.op == "view":
                spec = node.attrs["view"]
                env[id(node)] = mx.as_strided(x[0].reshape(-1), spec.shape, spec.strides, spec.offset)
            else:
                env[id(node)] = mx.matmul(*x)
        for (node, _), w in zip(launch.writes, writes):
            w.array = mx.contiguous(env[id(node)]).reshape(w.array.shape)
    return fn


class CudaBackend(MetalBackend):
    name = "cuda"

    def __init__(self) -> None:
        mx = _mx()
        if not (hasattr(mx, "cuda") and mx.cuda.is_available()):
            raise RuntimeError("the cuda backend needs MLX's CUDA build (pip package mlx[cuda]) and an "
                               "NVIDIA GPU; on other hosts use 'cpu' (or lt.show_kernels(..., "
                               "backend='cuda') to see the kernels)")
        self._kernels: dict[str, Any] = {}

    def make_kernel(self, call: CudaCall):
        return _mx().fast.cuda_kernel(**kernel_arguments(call))

    def compile_launch(self, launch, plan) -> LaunchFn | None:
        check_dtypes(launch)
        if launch.kind == "library":
            return _matmul_launch(launch)
        return self.mlx_launch(launch, launch_call(launch), call_arguments)

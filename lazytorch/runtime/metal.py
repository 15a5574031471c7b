"""The metal backend: generated Metal kernels launched through `mx.fast.metal_kernel` on Apple
silicon.  Buffers are MLX arrays in unified memory.

The kernels are the ones metal-emu runs (codegen/metal.py::launch_call builds the MetalCall for
both); this module only turns a MetalCall into the two MLX calls.  `kernel_arguments` and
`call_arguments` are those calls' arguments, kept as plain functions so tests on Linux can check
them against the source the emulator compiled.
"""
from __future__ import annotations

from typing import Any, Sequence

import numpy as np

from ..codegen.metal import ERROR_FLAG, division_by_zero, launch_call
from ..codegen.metal_kernel import MetalCall
from ..ir import dtypes as D
from ..ir.dtypes import DType
from .backend import Backend, Buffer, LaunchFn


def _mx():
    import mlx.core as mx
    return mx


def mx_dtype(dt: DType):
    return getattr(_mx(), {"bool": "bool_"}.get(dt.name, dt.name))


def kernel_arguments(call: MetalCall) -> dict[str, Any]:
    """Keyword arguments of mx.fast.metal_kernel(...) for `call`."""
    return dict(name=call.name, input_names=list(call.input_names), output_names=list(call.output_names),
                source=call.source, header=call.header, ensure_row_contiguous=call.ensure_row_contiguous)


def call_arguments(call: MetalCall, inputs: Sequence[Any]) -> dict[str, Any]:
    """Keyword arguments of the kernel call (inputs are MLX arrays of the declared shapes)."""
    return dict(inputs=list(inputs), output_shapes=[tuple(s) for s in call.output_shapes],
                output_dtypes=[mx_dtype(d) for d in call.output_dtypes], grid=tuple(call.grid),
                threadgroup=tuple(call.threadgroup), init_value=call.init_value,
                template=[(n, mx_dtype(v) if isinstance(v, DType) else v) for n, v in call.template] or None)


class MetalBuffer:
    """A buffer: an MLX array that a launch may replace (MLX kernels return new arrays)."""

    def __init__(self, array, dtype: DType):
        self.array = array
        self.dtype = dtype

    def __array__(self, dtype=None, copy=None):
        arr = self.array.view(_mx().uint16) if self.dtype is D.bfloat16 else self.array
        host = np.array(arr)
        return host if dtype is None else host.astype(dtype)

    def copy_from_host(self, value: np.ndarray) -> None:
        self.array = MetalBackend.to_mx(value, self.dtype)


class MetalBackend(Backend):
    name = "metal"

    def __init__(self) -> None:
        mx = _mx()
        if not mx.metal.is_available():
            raise RuntimeError("the metal backend needs Apple silicon with Metal; on other hosts use "
                               "'metal-emu' (the same kernels on the CPU)")
        self._kernels: dict[str, Any] = {}

    @staticmethod
    def to_mx(arr: np.ndarray, dtype: DType):
        mx = _mx()
        a = mx.array(np.ascontiguousarray(arr).reshape(np.shape(arr)))   # (ascontiguousarray makes 0-d 1-d)
        return a.view(mx.bfloat16) if dtype is D.bfloat16 else a

    def from_host(self, arr: np.ndarray) -> Buffer:
        dtype = D.bfloat16 if arr.dtype == np.uint16 else D.from_numpy(arr.dtype)
        return MetalBuffer(self.to_mx(arr, dtype), dtype)

    def adopt(self, buf: Buffer) -> Buffer:
        return buf if isinstance(buf, MetalBuffer) else self.from_host(np.asarray(buf))

    def to_host(self, buf: Buffer) -> np.ndarray:
        return np.asarray(buf)

    def empty(self, shape: tuple[int, ...], dtype: DType) -> Buffer:
        return MetalBuffer(_mx().zeros(shape, dtype=mx_dtype(dtype)), dtype)

    def scalar(self, value: Any, dtype: DType) -> Buffer:
        dtype = D.float32 if dtype is D.float64 else dtype    # see codegen/metal.py::narrow_scalars
        return MetalBuffer(self.to_mx(D.from_compute(np.asarray(value), dtype).reshape(()), dtype), dtype)

    def make_kernel(self, call: MetalCall):
        """The MLX custom kernel for `call` (the cuda backend swaps in mx.fast.cuda_kernel)."""
        return _mx().fast.metal_kernel(**kernel_arguments(call))

    def compile_launch(self, launch, plan) -> LaunchFn | None:
        return self.mlx_launch(launch, launch_call(launch), call_arguments)

    def mlx_launch(self, launch, call, arguments) -> LaunchFn | None:
        """A launch of `call` (a MetalCall or CudaCall) through MLX, with `arguments(call, inputs)`
        giving the kernel call's keyword arguments; None runs the launch on the reference executor."""
        if call is None:
            return None
        if min(call.grid) == 0:
            return lambda reads, writes: None
        kernel = self._kernels.get(call.name)
        if kernel is None:
            kernel = self._kernels[call.name] = self.make_kernel(call)

        def fn(reads: Sequence[Buffer], writes: Sequence[Buffer]) -> None:
            inputs = [r.array.reshape(-1) for r in reads]
            outs = kernel(**arguments(call, inputs))
            for w, o in zip(writes, outs):
                w.array = o.reshape(w.array.shape)
            if call.output_names[-1] == ERROR_FLAG and outs[-1].item():
                raise division_by_zero(launch)
        return fn

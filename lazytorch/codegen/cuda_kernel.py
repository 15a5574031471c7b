"""One CUDA kernel launch as the cuda backend hands it to MLX, and the full source MLX builds from it.

The cuda backend launches a kernel body through `mx.fast.cuda_kernel`: it passes a name, input and
output names, the body, a header, template constants, grid (in threads) and threadgroup sizes
(`CudaCall`).  MLX then writes a `__global__` function around the body inside
`namespace mlx::core::cu` and compiles it with NVRTC.  `assemble` writes that source exactly as
MLX does, so tests compile every generated kernel with nvcc on hosts without a GPU.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Union

from ..ir import dtypes as D
from ..ir.dtypes import DType
from ..ir.errors import op_error

TemplateValue = Union[bool, int, DType]

# The type names MLX writes for each dtype in the kernel signature.  float64 is left out: MLX's CUDA
# build refuses float64 arrays in GPU kernels ("float64 is not supported on the GPU", MLX 0.32.4).
TYPE_NAMES: dict[DType, str] = {
    D.bool_: "bool", D.uint8: "uint8_t", D.int8: "int8_t", D.int16: "int16_t",
    D.int32: "int32_t", D.int64: "int64_t", D.float16: "__half",
    D.bfloat16: "__nv_bfloat16", D.float32: "float",
}

# What MLX puts before the caller's header (its device utilities: Shape, Strides, fp16/bf16 types).
DEFAULT_HEADER = '\n#include "mlx/backend/cuda/device/utils.cuh"\n\n#include <cooperative_groups.h>\n\n'

# MLX passes the grid as C ints.
MAX_GRID = 2**31 - 1


def type_name(dtype: DType, op: str = "cuda") -> str:
    try:
        return TYPE_NAMES[dtype]
    except KeyError:
        raise op_error(TypeError, op, f"dtype {dtype.name} is not supported on the cuda backend (MLX "
                       "runs no float64 on the GPU)", valid="cast to float32 first, or use the cpu backend "
                       f"(cuda dtypes: {', '.join(d.name for d in TYPE_NAMES)})") from None


@dataclass(frozen=True)
class CudaCall:
    """Everything one launch passes to `mx.fast.cuda_kernel(...)` and then to the kernel call."""
    name: str
    input_names: tuple[str, ...]
    output_names: tuple[str, ...]
    source: str                                 # the kernel body
    header: str
    input_shapes: tuple[tuple[int, ...], ...]
    input_dtypes: tuple[DType, ...]
    output_shapes: tuple[tuple[int, ...], ...]
    output_dtypes: tuple[DType, ...]
    grid: tuple[int, int, int]                  # in threads, as for Metal
    threadgroup: tuple[int, int, int]
    template: tuple[tuple[str, TemplateValue], ...] = ()
    ensure_row_contiguous: bool = True
    init_value: float | None = None             # fill every output with this before the launch
    shared_memory: int = 0                      # dynamic shared memory in bytes

    def __post_init__(self) -> None:
        for dt in self.input_dtypes + self.output_dtypes:
            type_name(dt, self.name)
        if not self.output_names:
            raise op_error(ValueError, self.name, "a CUDA kernel needs at least one output")
        if len(self.input_names) != len(self.input_shapes) or len(self.output_names) != len(self.output_shapes):
            raise op_error(ValueError, self.name, "names and shapes of the buffers differ in number")
        if any(g > MAX_GRID for g in self.grid):
            raise op_error(ValueError, self.name, f"grid {self.grid} exceeds the launch limit of "
                           f"{MAX_GRID} threads per dimension", valid="smaller tensors")


def _template_value(v: TemplateValue) -> str:
    if isinstance(v, bool):
        return "t" if v else "f"
    return str(v) if isinstance(v, int) else type_name(v)


def function_name(call: CudaCall) -> str:
    """custom_kernel_<name>[_<template values>] (bools as t/f, dtypes by their MLX names)."""
    suffix = "".join("_" + (v.name if isinstance(v, DType) else _template_value(v)) for _, v in call.template)
    return "custom_kernel_" + call.name + suffix


def assemble(call: CudaCall) -> str:
    """The CUDA source MLX compiles for `call`: its default header, the call's header, then the
    `__global__` function with inputs as `const T*` (plus `_shape`/`_strides`/`_ndim` parameters
    only when the body names them), outputs as `T*`, template values as constexpr."""
    text = DEFAULT_HEADER + call.header
    text += "namespace mlx::core::cu {\n\nnamespace cg = cooperative_groups;\n\n"
    text += f"__global__ void {function_name(call)}(\n"
    for name, shape, dt in zip(call.input_names, call.input_shapes, call.input_dtypes):
        text += f"    const {type_name(dt)}* {name},\n"
        if shape:
            for suffix, decl in (("_shape", "Shape"), ("_strides", "Strides"), ("_ndim", "int")):
                if name + suffix in call.source:
                    text += f"    const __grid_constant__ {decl} {name}{suffix},\n"
    for i, (name, dt) in enumerate(zip(call.output_names, call.output_dtypes)):
        text += f"    {type_name(dt)}* {name}"
        text += ",\n" if i < len(call.output_names) - 1 else ") {\n"
    if call.template:
        for n, v in call.template:
            if isinstance(v, bool):
                text += f"  constexpr bool {n} = {'true' if v else 'false'};\n"
            elif isinstance(v, int):
                text += f"  constexpr int {n} = {v};\n"
            else:
                text += f"  using {n} = {type_name(v)};\n"
        text += "\n"
    return text + call.source + "\n}\n\n} // namespace mlx::core::cu\n"

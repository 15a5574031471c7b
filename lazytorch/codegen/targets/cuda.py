"""The CUDA target: its Dialect table, its MLX call and the full source MLX's CUDA build compiles.

CUDA kernels use the GPU templates Metal uses (`shaders/gpu_linear.j2`, `gpu_rows.j2`,
`gpu_columns.j2`; docs/gpu.md): warp shuffles (`__shfl_down_sync`/`__shfl_xor_sync`, width 32),
`__shared__` memory and `__syncthreads()`, 16-byte vector loads in pointwise kernels; the table's
`extra` spells CUDA's thread indices, collectives and vector words.  Math is
CUDA's libm-named device functions (expf, log1pf, erff, ...; no fast math); the helpers CUDA lacks
(torch's division, NaN-propagating max/min, warp shuffles of any type) come from
`shaders/cuda_preamble.cuh.j2`, cut to the ones a kernel calls and passed as its header.  Being
C++, the helpers are overloads, so expressions drop the C table's per-type suffix.

MLX writes a `__global__` function around the body inside `namespace mlx::core::cu` and compiles
it with NVRTC; `assemble` writes that source exactly as MLX does, so tests compile every
generated kernel with nvcc on hosts without a GPU.
"""
from __future__ import annotations

from ...ir import dtypes as D
from ...ir.dtypes import DType
from ..dialect import C_CHECKED, C_MATH, FLOAT_FUNCS, GPU_FIELDS, INT_C, Dialect, libm_suffix
from ..mlx_call import MlxCall, TemplateValue, gpu_type_name

# The type names MLX writes for each dtype in the kernel signature.  float64 is left out: MLX's CUDA
# build refuses float64 arrays in GPU kernels ("float64 is not supported on the GPU", MLX 0.32.4).
TYPE_NAMES: dict[DType, str] = {
    D.bool_: "bool", D.uint8: "uint8_t", D.int8: "int8_t", D.int16: "int16_t",
    D.int32: "int32_t", D.int64: "int64_t", D.float16: "__half",
    D.bfloat16: "__nv_bfloat16", D.float32: "float",
}

# What MLX puts before the caller's header (its device utilities: Shape, Strides, fp16/bf16 types).
DEFAULT_HEADER = '\n#include "mlx/backend/cuda/device/utils.cuh"\n\n#include <cooperative_groups.h>\n\n'


def type_name(dtype: DType, op: str = "cuda") -> str:
    """The CUDA type of `dtype`; float64 (and anything else MLX's CUDA build lacks) is an error."""
    return gpu_type_name(TYPE_NAMES, dtype, op, "cuda", "the cuda backend (MLX runs no float64 on the GPU)")




class CudaCall(MlxCall):
    """An MlxCall whose buffers have CUDA types (float64 is refused: MLX runs none on the GPU)."""
    target = "CUDA"
    type_name = staticmethod(type_name)


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
    text += _function(call, f"__global__ void {function_name(call)}")
    return text + "\n} // namespace mlx::core::cu\n"


# What a standalone kernel has instead of MLX's device header: NVRTC has no <cstdint> and no
# __builtin_huge_valf (the preamble's INFINITY otherwise).
STANDALONE_HEADER = """#include <cuda/std/cstdint>
#include <cuda/std/limits>
#ifndef INFINITY
#define INFINITY (cuda::std::numeric_limits<float>::infinity())
#endif
#ifndef NAN
#define NAN (cuda::std::numeric_limits<float>::quiet_NaN())
#endif
using cuda::std::int8_t; using cuda::std::uint8_t; using cuda::std::int16_t; using cuda::std::uint16_t;
using cuda::std::int32_t; using cuda::std::uint32_t; using cuda::std::int64_t; using cuda::std::uint64_t;
"""


def standalone(call: CudaCall, by_value: frozenset[str] = frozenset()) -> str:
    """`call`'s kernel as a source of its own, compiled ahead of time (runtime/nvrtc.py) and launched
    through mx.fast.precompiled_cuda_kernel: our header only, and an `extern "C"` function named
    `call.name` whose parameters are the ones MLX passes a precompiled kernel: inputs, outputs, then
    by value the 1-element inputs named in `by_value` (Python scalars: no upload per call), which
    the body reads as before through a 1-element local array of the same name."""
    if any(name + suffix in call.source for name in call.input_names for suffix in ("_shape", "_strides", "_ndim")):
        raise ValueError(f"{call.name}: a standalone kernel gets no shape parameters")
    # The bound is the group the kernel is launched with, so NVRTC keeps a thread's registers within
    # what a group of that size may hold: unbounded, the rows kernel of BatchNorm's backward (1024
    # threads) failed cuLaunchKernel with "too many resources requested" on an H200.  (MLX's JIT
    # path, `assemble`, writes its own declaration and gets no bound.)
    threads = call.threadgroup[0] * call.threadgroup[1] * call.threadgroup[2]
    return STANDALONE_HEADER + call.header + _function(
        call, f'extern "C" __global__ void __launch_bounds__({threads}) {call.name}', by_value)


def _function(call: CudaCall, declaration: str, by_value: frozenset[str] = frozenset()) -> str:
    params, scalars, values = [], [], []
    for name, shape, dt in zip(call.input_names, call.input_shapes, call.input_dtypes):
        if name in by_value:
            scalars.append(f"{type_name(dt)} {name}_value")
            values.append(f"  const {type_name(dt)} {name}[1] = {{{name}_value}};\n")
            continue
        params.append(f"const {type_name(dt)}* {name}")
        if shape:
            params += [f"const __grid_constant__ {decl} {name}{suffix}"
                       for suffix, decl in (("_shape", "Shape"), ("_strides", "Strides"), ("_ndim", "int"))
                       if name + suffix in call.source]
    params += [f"{type_name(dt)}* {name}" for name, dt in zip(call.output_names, call.output_dtypes)] + scalars
    text = declaration + "(\n" + ",\n".join("    " + p for p in params) + ") {\n" + "".join(values)
    if call.template:
        for n, v in call.template:
            if isinstance(v, bool):
                text += f"  constexpr bool {n} = {'true' if v else 'false'};\n"
            elif isinstance(v, int):
                text += f"  constexpr int {n} = {v};\n"
            else:
                text += f"  using {n} = {type_name(v)};\n"
        text += "\n"
    return text + call.source + "\n}\n"


# CUDA's device math has every float function under its libm name except these two.
_HELPERS = {"sigmoid", "reciprocal"}
_CUDA_MATH = libm_suffix({
    **{k: v.replace("_{t}(", "(") for k, v in {**C_MATH, **C_CHECKED}.items()},
    **{f"{f}@float": (f"lt_{f}({{0}})" if f in _HELPERS else f"{f}{{F}}({{0}})") for f in FLOAT_FUNCS},
    "round@float": "rint{F}({0})",                 # torch rounds half to even
})

FULL_MASK = "0xffffffffu"

DIALECT = Dialect(
    name="cuda",
    storage={d.name: TYPE_NAMES[d] for d in TYPE_NAMES},
    register={"bool": "bool", **INT_C, "float16": "float", "bfloat16": "float", "float32": "float",
              "float64": "double"},   # (float64 kernels compile, but MLX refuses float64 on the GPU)
    math=_CUDA_MATH,
    load={"bfloat16": "__bfloat162float({ptr}[{idx}])", "float16": "__half2float({ptr}[{idx}])",
          "*": "{ptr}[{idx}]"},
    store={"bfloat16": "__float2bfloat16_rn({0})", "float16": "__float2half_rn({0})", "*": "{0}"},
    # a float cast to uint8 wraps as on torch's CPU (see targets/c.py)
    cast={"bool": "(({0}) != 0)", "uint8": "(({T})(int64_t)({0}))",
          "float16": "__half2float(__float2half_rn((float)({0})))",
          "bfloat16": "__bfloat162float(__float2bfloat16_rn((float)({0})))", "*": "(({T})({0}))"},
    preamble="cuda_preamble.cuh.j2",
    **GPU_FIELDS,
    extra={   # the GPU templates' thread vocabulary (see targets/metal.py for Metal's)
        "global_id": "blockIdx.x * (size_t)blockDim.x + threadIdx.x", "group_id": "blockIdx.x",
        "local_id": "threadIdx.x", "local_size": "blockDim.x",
        "lane": "(threadIdx.x % 32)", "simd_group": "(threadIdx.x / 32)",
        "shared": "__shared__", "barrier": "__syncthreads();",
        "simd_any": f"__any_sync({FULL_MASK}, {{0}})", "simd_all": f"__all_sync({FULL_MASK}, {{0}})",
        "simd_flag": f"__any_sync({FULL_MASK}, {{0}})",   # OR of a 0/1 flag across the warp
        "unroll": "#pragma unroll",
        "unroll_some": "#pragma unroll 4",     # loops whose trip count varies by thread: 4 loads in flight
        # the linear template's vector words: n elements of `bytes` bytes in all move as one
        # load/store (taken only when every vector pointer is aligned to its word, checked at run time)
        "vec_words": {"4": "unsigned int", "8": "uint2", "16": "uint4"},
        "vec_decl": "alignas({bytes}) {T} {v}[{n}];",
        "vec_load": "*reinterpret_cast<{W}*>({v}) = *reinterpret_cast<const {W}*>({ptr} + {idx});",
        "vec_store": "*reinterpret_cast<{W}*>({ptr} + {idx}) = *reinterpret_cast<const {W}*>({v});",
        "vec_aligned": "(size_t)({ptr}) % {bytes} == 0",
        # the same n elements moved one by one (rows kernels, when a pointer is not aligned)
        "vec_load_each": "for (int lt_e = 0; lt_e < {n}; lt_e++) {v}[lt_e] = {ptr}[{idx} + lt_e];",
        "vec_store_each": "for (int lt_e = 0; lt_e < {n}; lt_e++) {ptr}[{idx} + lt_e] = {v}[lt_e];",
        # the grid combine of long reductions (gpu_rows.j2): each block's partial, a fence, a
        # ticket; the last block reads every partial past L1 (volatile) and folds them in order
        "grid_fence": "__threadfence();",
        "grid_ticket": "atomicAdd({0}, 1)",
        "grid_load": "((volatile {T}*){ptr})[{idx}]",
    },
)


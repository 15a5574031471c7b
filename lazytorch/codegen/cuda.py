"""The CUDA dialect table and the CudaCall of a kernel launch (the cuda backend's kernels).

CUDA kernels use the GPU templates the Metal dialect uses (`shaders/metal_linear.metal.j2`: one
thread per element; `shaders/metal_rows.metal.j2`: one block per outer index, threads stride over
the inner domain, then combine through warp shuffles (`__shfl_down_sync`, width 32), `__shared__`
memory and `__syncthreads()`); the table's `extra` spells CUDA's thread indices and collectives.
Math is CUDA's libm-named device functions (expf, log1pf, erff, ...; no fast math); the helpers CUDA
lacks (torch's division, NaN-propagating max/min, warp shuffles of any type) come from
`shaders/cuda_preamble.cuh.j2`, passed as the kernel's header.  Being C++, the helpers are
overloads, so expressions drop the C table's per-type suffix (`lt_max_{t}` -> `lt_max`).
"""
from __future__ import annotations

from .cuda_kernel import TYPE_NAMES, CudaCall, type_name
from .dialects import _C_CHECKED, _C_MATH, DIALECTS, FLOAT_FUNCS, Dialect, _libm_suffix
from .kernel_ir import Kernel
from .metal import ERROR_FLAG, division_by_zero, launch_shape, mlx_call, narrow_scalars  # noqa: F401  (shared with Metal)

_INT = {"uint8": "uint8_t", "int8": "int8_t", "int16": "int16_t", "int32": "int32_t", "int64": "int64_t"}

# CUDA's device math has every float function under its libm name except these two.
_HELPERS = {"sigmoid", "reciprocal"}
_CUDA_MATH = _libm_suffix({
    **{k: v.replace("_{t}(", "(") for k, v in {**_C_MATH, **_C_CHECKED}.items()},
    **{f"{f}@float": (f"lt_{f}({{0}})" if f in _HELPERS else f"{f}{{F}}({{0}})") for f in FLOAT_FUNCS},
    "round@float": "rint{F}({0})",                 # torch rounds half to even
})

FULL_MASK = "0xffffffffu"

CUDA = Dialect(
    name="cuda",
    storage={d.name: TYPE_NAMES[d] for d in TYPE_NAMES},
    register={"bool": "bool", **_INT, "float16": "float", "bfloat16": "float", "float32": "float",
              "float64": "double"},   # (float64 kernels compile, but MLX refuses float64 on the GPU)
    math=_CUDA_MATH,
    load={"bfloat16": "__bfloat162float({ptr}[{idx}])", "float16": "__half2float({ptr}[{idx}])",
          "*": "{ptr}[{idx}]"},
    store={"bfloat16": "__float2bfloat16_rn({0})", "float16": "__float2half_rn({0})", "*": "{0}"},
    cast={"bool": "(({0}) != 0)", "float16": "__half2float(__float2half_rn((float)({0})))",
          "bfloat16": "__bfloat162float(__float2bfloat16_rn((float)({0})))", "*": "(({T})({0}))"},
    templates={"linear": "metal_linear.metal.j2", "rows": "metal_rows.metal.j2"},
    preamble="cuda_preamble.cuh.j2",
    in_qualifier="const",
    restrict="",
    extra={   # the GPU templates' thread vocabulary (see codegen/metal.py for Metal's)
        "global_id": "blockIdx.x * (size_t)blockDim.x + threadIdx.x", "group_id": "blockIdx.x",
        "local_id": "threadIdx.x", "local_size": "blockDim.x",
        "lane": "(threadIdx.x % 32)", "simd_group": "(threadIdx.x / 32)",
        "shared": "__shared__", "barrier": "__syncthreads();",
        "simd_any": f"__any_sync({FULL_MASK}, {{0}})", "simd_all": f"__all_sync({FULL_MASK}, {{0}})",
        "simd_flag": f"__any_sync({FULL_MASK}, {{0}})",   # OR of a 0/1 flag across the warp
    },
)

DIALECTS["cuda"] = CUDA


def cuda_call(kernel: Kernel, body: str, header: str) -> CudaCall:
    """The launch for a rendered kernel, built as Metal's is (the templates are shared)."""
    return mlx_call(CudaCall, kernel, body, header)


def launch_call(launch) -> CudaCall | None:
    """The CudaCall of a plan launch (None: not a kernel this generator lowers; the executor runs
    it on the host)."""
    from .lower import Unsupported, lower, supports
    from .render import preamble, render
    check_dtypes(launch)
    if launch.kind != "kernel" or not supports(launch):
        return None
    try:
        kernel = lower(launch)
    except Unsupported:
        return None
    kernel = narrow_scalars(kernel)
    return cuda_call(kernel, render(kernel, CUDA), preamble(CUDA.name))


def check_dtypes(launch) -> None:
    """No float64 on the cuda backend (MLX refuses it on the GPU): name the op and dtype.  0-d
    float64 params (Python scalars) are read as float32, as on Metal (narrow_scalars)."""
    for n in launch.nodes:
        if n.op not in ("param", "scalar"):
            type_name(n.dtype, n.op)
    for n, b in launch.reads:
        if b.shape != ():
            type_name(n.dtype, n.op)

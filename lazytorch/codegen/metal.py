"""The Metal dialect table and the MetalCall of a kernel (shared by the metal and metal-emu backends).

Metal kernels are written as kernel *bodies* (the Metal runtime writes the signature, see
metal_kernel.py): `shaders/metal_linear.metal.j2` runs one thread per element,
`shaders/metal_rows.metal.j2` one threadgroup per outer index whose threads stride over the inner
domain and then combine their partial reductions (simd collectives within a simdgroup of 32, then
threadgroup memory across simdgroups).  Helper functions Metal lacks (erf, expm1, log1p, integer
division with torch's semantics ...) come from `shaders/metal_preamble.metal.j2`, passed as the
kernel's header.  Math uses the `metal::precise` forms: no fast math.
"""
from __future__ import annotations

import hashlib

from ..ir import dtypes as D

from .dialects import _C_CHECKED, _C_MATH, DIALECTS, FLOAT_FUNCS, Dialect
from .kernel_ir import Kernel
from .metal_kernel import TYPE_NAMES, MetalCall

_INT = {"uint8": "uint8_t", "int8": "int8_t", "int16": "int16_t", "int32": "int32_t", "int64": "int64_t"}

# The float functions Metal has, under their precise names; the rest are preamble helpers.
_PRECISE = {"exp", "exp2", "log", "log2", "log10", "sqrt", "rsqrt", "sin", "cos", "tan", "asin", "acos",
            "atan", "sinh", "cosh", "tanh", "floor", "ceil", "trunc"}
_METAL_MATH = {
    **{k: v for k, v in _C_MATH.items() if "{F}" not in v},   # operators and lt_ helpers (preamble)
    **{f"{f}@float": (f"metal::precise::{f}({{0}})" if f in _PRECISE else f"lt_{f}_{{t}}({{0}})")
       for f in FLOAT_FUNCS},
    "round@float": "metal::rint({0})",             # torch rounds half to even
    "abs@float": "metal::abs({0})",
    "div_trunc@float": "metal::trunc({0} / {1})",
    "fmod@float": "metal::fmod({0}, {1})",
    "pow@float": "metal::precise::pow({0}, {1})",
    "atan2@float": "metal::precise::atan2({0}, {1})",
    **_C_CHECKED,   # integer division reports division by zero through the ERROR_FLAG output
}
# The extra int32[1] output of kernels that divide integers: set to 1 on division by zero.
ERROR_FLAG = "lt_err"

METAL = Dialect(
    name="metal",
    storage={d.name: TYPE_NAMES[d] for d in TYPE_NAMES},
    register={"bool": "bool", **_INT, "float16": "float", "bfloat16": "float", "float32": "float"},
    math=_METAL_MATH,
    load={"bfloat16": "float({ptr}[{idx}])", "float16": "float({ptr}[{idx}])", "*": "{ptr}[{idx}]"},
    store={"bfloat16": "bfloat16_t({0})", "float16": "float16_t({0})", "*": "{0}"},
    cast={"bool": "(({0}) != 0)", "float16": "float(float16_t({0}))", "bfloat16": "float(bfloat16_t({0}))",
          "*": "{T}({0})"},
    templates={"linear": "metal_linear.metal.j2", "rows": "metal_rows.metal.j2"},
    preamble="metal_preamble.metal.j2",
    in_qualifier="const",
    restrict="",
    extra={   # the GPU templates' thread vocabulary (shared with the CUDA table)
        "global_id": "thread_position_in_grid.x", "group_id": "threadgroup_position_in_grid.x",
        "local_id": "thread_position_in_threadgroup.x", "local_size": "threads_per_threadgroup.x",
        "lane": "thread_index_in_simdgroup", "simd_group": "simdgroup_index_in_threadgroup",
        "shared": "threadgroup", "barrier": "threadgroup_barrier(mem_flags::mem_threadgroup);",
        "simd_sum": "simd_sum({0})", "simd_prod": "simd_product({0})", "simd_amax": "simd_max({0})",
        "simd_amin": "simd_min({0})", "simd_any": "simd_any({0})", "simd_all": "simd_all({0})",
        "simd_flag": "simd_max({0})",   # OR of a 0/1 int flag across the simdgroup
    },
)

DIALECTS["metal"] = METAL

LINEAR_THREADGROUP = 256


def rows_threadgroup(inner_numel: int) -> int:
    """Threads per row: a multiple of the simd width, about 4 elements per thread, at most 256."""
    tg = 32
    while tg < 256 and tg * 4 < inner_numel:
        tg *= 2
    return tg


def launch_shape(kernel: Kernel) -> tuple[tuple[int, int, int], tuple[int, int, int]]:
    """Grid (in threads) and threadgroup of a kernel rendered with the GPU templates (Metal, CUDA)."""
    if kernel.pattern == "pointwise" and kernel.contiguous:   # render.py's choice of template
        return (kernel.numel, 1, 1), (LINEAR_THREADGROUP, 1, 1)
    if kernel.pattern == "pointwise":   # strided pointwise kernels render as rows of the last dim
        from .render import _split_last
        kernel = _split_last(kernel)
    width = rows_threadgroup(kernel.inner_numel)
    return (kernel.outer_numel * width, 1, 1), (width, 1, 1)


def metal_call(kernel: Kernel, body: str, header: str) -> MetalCall:
    """The launch both Metal backends make for a rendered kernel."""
    return mlx_call(MetalCall, kernel, body, header)


def mlx_call(call_type, kernel: Kernel, body: str, header: str):
    """The MLX custom-kernel launch (a MetalCall or CudaCall: the GPU templates are shared) for a
    rendered kernel: buffer names and types from the kernel's args, grid and threadgroup from its
    shape.  The name carries a hash of the source, so one name never stands for two kernels."""
    ins = [a for a in kernel.args if a.role == "in"]
    outs = [a for a in kernel.args if a.role == "out"]
    digest = hashlib.sha256((header + body).encode()).hexdigest()[:12]
    flag = ERROR_FLAG in body
    grid, tg = launch_shape(kernel)
    return call_type(
        name=f"lt_{digest}",
        input_names=tuple(a.name for a in ins),
        output_names=tuple(a.name for a in outs) + ((ERROR_FLAG,) if flag else ()),
        source=body, header=header,
        input_shapes=tuple((a.numel,) for a in ins), input_dtypes=tuple(a.dtype for a in ins),
        output_shapes=tuple((a.numel,) for a in outs) + (((1,),) if flag else ()),
        output_dtypes=tuple(a.dtype for a in outs) + ((D.int32,) if flag else ()),
        grid=grid, threadgroup=tg, init_value=0 if flag else None)


def check_dtypes(launch) -> None:
    """Metal has no float64: name the op and dtype instead of computing something else.  0-d
    float64 params (Python scalars) are the exception: they are read as float32 (narrow_scalars)."""
    from .metal_kernel import type_name
    for n in launch.nodes:
        if n.op not in ("param", "scalar"):
            type_name(n.dtype, n.op)
    for n, b in launch.reads:
        if b.shape != ():
            type_name(n.dtype, n.op)


def narrow_scalars(kernel: Kernel) -> Kernel:
    """Read 1-element float64 inputs (scalar params) as float32: Metal buffers cannot hold doubles.
    The backends store such scalars as float32 (Backend.scalar)."""
    import dataclasses
    from ..ir import dtypes as D
    wide = {i for i, a in enumerate(kernel.args) if a.dtype is D.float64 and a.role == "in" and a.numel == 1}
    if not wide:
        return kernel
    args = [dataclasses.replace(a, dtype=D.float32) if i in wide else a for i, a in enumerate(kernel.args)]
    for stage in kernel.stages:
        for op in stage.ops:
            if op.op == "load" and op.attrs.get("storage") is D.float64:
                op.attrs["storage"] = D.float32
                op.dtype = D.float32
            elif op.dtype is D.float64:
                from .metal_kernel import type_name
                type_name(op.dtype, op.op)
    return dataclasses.replace(kernel, args=args)


def launch_call(launch) -> MetalCall | None:
    """The MetalCall of a plan launch (None: not a kernel this generator lowers; the executor runs it
    on the host).  Both Metal backends get their kernels here."""
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
    return metal_call(kernel, render(kernel, METAL), preamble(METAL.name))


def division_by_zero(launch) -> ZeroDivisionError:
    """The error both Metal backends raise when a kernel set its ERROR_FLAG."""
    ops = ", ".join(sorted({n.op for n in launch.nodes}))
    return ZeroDivisionError(f"{launch.name}: integer division by zero (ops: {ops})")

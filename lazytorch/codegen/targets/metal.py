"""The Metal target: its Dialect table, its MLX call and the full source the Metal runtime compiles.

Metal kernels are kernel *bodies*: the runtime (`mx.fast.metal_kernel`) writes the signature
around them.  The GPU templates (`shaders/gpu_linear.j2`, `gpu_rows.j2`, `gpu_columns.j2`, shared
with CUDA) and their launch geometry are described in docs/gpu.md; this table spells their thread
vocabulary (simd collectives within a simdgroup of 32, threadgroup memory across simdgroups).
Helpers Metal lacks (erf, expm1, log1p, integer division with torch's semantics ...)
come from `shaders/metal_preamble.metal.j2`, cut to the ones a kernel calls and passed as its
header.  Math uses the `metal::precise` forms: no fast math.

`assemble` writes the signature exactly as the runtime does, so metal-emu compiles (with the shader
shim, on the CPU) the same source a Mac would; tests/test_metal_emu.py checks it against the source
the runtime itself prints.
"""
from __future__ import annotations

import math
import re
from dataclasses import dataclass, field

from ...ir import dtypes as D
from ...ir.dtypes import DType
from ..dialect import C_CHECKED, C_MATH, FLOAT_FUNCS, GPU_FIELDS, INT_C, Dialect
from ..mlx_call import MlxCall, TemplateValue, gpu_type_name


# Inputs with fewer elements are passed in the `constant` address space.
MAX_CONSTANT_ARRAY_SIZE = 8

# The type names the runtime writes for each dtype (float64 has none: Metal has no double).
TYPE_NAMES: dict[DType, str] = {
    D.bool_: "bool", D.uint8: "uint8_t", D.int8: "int8_t", D.int16: "int16_t",
    D.int32: "int32_t", D.int64: "int64_t", D.float16: "float16_t",
    D.bfloat16: "bfloat16_t", D.float32: "float",
}

# The built-in attributes, in the runtime's order, each added to the signature only when its name
# occurs in the body.
ATTRIBUTES: tuple[tuple[str, str], ...] = (
    ("dispatch_quadgroups_per_threadgroup", "uint"),
    ("dispatch_simdgroups_per_threadgroup", "uint"),
    ("dispatch_threads_per_threadgroup", "uint3"),
    ("grid_origin", "uint3"),
    ("grid_size", "uint3"),
    ("quadgroup_index_in_threadgroup", "uint"),
    ("quadgroups_per_threadgroup", "uint"),
    ("simdgroup_index_in_threadgroup", "uint"),
    ("simdgroups_per_threadgroup", "uint"),
    ("thread_execution_width", "uint"),
    ("thread_index_in_quadgroup", "uint"),
    ("thread_index_in_simdgroup", "uint"),
    ("thread_index_in_threadgroup", "uint"),
    ("thread_position_in_grid", "uint3"),
    ("thread_position_in_threadgroup", "uint3"),
    ("threadgroup_position_in_grid", "uint3"),
    ("threadgroups_per_grid", "uint3"),
    ("threads_per_grid", "uint3"),
    ("threads_per_simdgroup", "uint"),
    ("threads_per_threadgroup", "uint3"),
)

MAX_THREADS_PER_THREADGROUP = 1024


def type_name(dtype: DType, op: str = "metal") -> str:
    """The Metal type of `dtype`; float64 (and anything else Metal lacks) is an error."""
    return gpu_type_name(TYPE_NAMES, dtype, op, "Metal", "Metal (no 64-bit floats on the GPU)")


class MetalCall(MlxCall):
    """An MlxCall whose buffers have Metal types (float64 is refused)."""
    target = "Metal"
    type_name = staticmethod(type_name)


@dataclass(frozen=True)
class Param:
    """One parameter of the assembled kernel, in buffer order."""
    name: str
    kind: str            # "input", "shape", "strides", "ndim", "output" or "attribute"
    ctype: str           # element type (attributes: their type)
    by_ref: bool = False  # `const constant T& name`: a 0-d input or an ndim
    source_index: int = -1  # which input/output this belongs to


@dataclass(frozen=True)
class AssembledKernel:
    function: str        # the (host) name of the kernel function
    source: str          # the full text the Metal runtime compiles (after its own prelude)
    params: tuple[Param, ...] = field(default=())
    template_args: str = ""  # "<float, 4>" when the kernel is a template, else ""


def _template_value(v: TemplateValue) -> str:
    if isinstance(v, bool):
        return "1" if v else "0"
    if isinstance(v, int):
        return str(v)
    return type_name(v)


def _template_kind(v: TemplateValue) -> str:
    return "bool" if isinstance(v, bool) else "int" if isinstance(v, int) else "typename"


def function_name(call: MetalCall) -> str:
    """custom_kernel_<name>[_<template>]_<input types and passing>_<output types>."""
    name = "custom_kernel_" + call.name
    if call.template:
        targs = "<" + ", ".join(_template_value(v) for _, v in call.template) + ">"
        name += "_" + re.sub(r"<|>|(, )", "_", targs)[:-1]
    for shape, dt in zip(call.input_shapes, call.input_dtypes):
        name += "_" + type_name(dt)
        name += "s" if len(shape) == 0 else "c" if math.prod(shape) < MAX_CONSTANT_ARRAY_SIZE else ""
    for dt in call.output_dtypes:
        name += "_" + type_name(dt)
    return name


def assemble(call: MetalCall) -> AssembledKernel:
    """The kernel source the Metal runtime builds around `call.source`, written the way it writes
    it (byte for byte, including its punctuation), and the parameters in buffer order.

    Mirrors MLX's builder (ml-explore/mlx 846d176, mlx/backend/common/metal_kernel.cpp):
    `write_signature` (lines 52-177) for header, template line, buffers and attributes;
    `metal_kernel` (lines 235-271) for which shape/stride/ndim buffers and attributes the body's
    text selects; the kernel name (lines 301-325, `function_name` here) and the explicit template
    instantiation (lines 340-349).  The Metal runtime compiles `metal::utils() + source`
    (mlx/backend/metal/custom_kernel.cpp line 53); metal-emu puts shaders/metal_shim.h in place of
    `metal::utils()`.  tests/test_metal_emu.py compares this text with the one MLX itself prints."""
    func = function_name(call)
    params: list[Param] = []
    text = call.header
    if call.template:
        text += "template <" + ", ".join(f"{_template_kind(v)} {n}" for n, v in call.template) + ">\n"
    text += f"[[kernel]] void {func}(\n"
    index = 0
    for i, (name, shape, dt) in enumerate(zip(call.input_names, call.input_shapes, call.input_dtypes)):
        location = "constant" if math.prod(shape) < MAX_CONSTANT_ARRAY_SIZE else "device"
        ref = "&" if len(shape) == 0 else "*"
        text += f"  const {location} {type_name(dt)}{ref} {name} [[buffer({index})]],\n"
        params.append(Param(name, "input", type_name(dt), len(shape) == 0, i))
        index += 1
        if not shape:
            continue
        for suffix, decl, ctype, by_ref in (("_shape", "int*", "int", False),
                                            ("_strides", "int64_t*", "int64_t", False),
                                            ("_ndim", "int&", "int", True)):
            if name + suffix in call.source:
                text += f"  const constant {decl} {name}{suffix} [[buffer({index})]],\n"
                params.append(Param(name + suffix, suffix[1:], ctype, by_ref, i))
                index += 1
    attributes = [(a, t) for a, t in ATTRIBUTES if a in call.source]
    n_buffers = len(call.input_names) + len(call.output_names)
    for i, (name, dt) in enumerate(zip(call.output_names, call.output_dtypes)):
        text += f"  device {type_name(dt)}* {name} [[buffer({index})]]"
        # The runtime compares the buffer index with the number of arrays here (its quirk: with
        # shape buffers and no attributes this closes the list early; our kernels always use
        # thread_position_in_grid, so they never hit it).
        text += ",\n" if index < n_buffers - 1 or attributes else ") {\n"
        params.append(Param(name, "output", type_name(dt), False, i))
        index += 1
    for j, (attr, ctype) in enumerate(attributes):
        text += f"  {ctype} {attr} [[{attr}]]"
        text += ",\n" if j < len(attributes) - 1 else ") {\n"
        params.append(Param(attr, "attribute", ctype))
    text += call.source + "\n}\n"
    targs = ""
    if call.template:
        targs = "<" + ", ".join(_template_value(v) for _, v in call.template) + ">"
        full = func + targs
        text += (f'\ntemplate [[host_name("{func}")]] [[kernel]] decltype({full}) {full};\n')
    return AssembledKernel(func, text, tuple(params), targs)


# The float functions Metal has, under their precise names; the rest are preamble helpers.
_PRECISE = {"exp", "exp2", "log", "log2", "log10", "sqrt", "rsqrt", "sin", "cos", "tan", "asin", "acos",
            "atan", "sinh", "cosh", "tanh", "floor", "ceil", "trunc"}
_METAL_MATH = {
    **{k: v for k, v in C_MATH.items() if "{F}" not in v},   # operators and lt_ helpers (preamble)
    **{f"{f}@float": (f"metal::precise::{f}({{0}})" if f in _PRECISE else f"lt_{f}_{{t}}({{0}})")
       for f in FLOAT_FUNCS},
    "round@float": "metal::rint({0})",             # torch rounds half to even
    "abs@float": "metal::abs({0})",
    "div_trunc@float": "metal::trunc({0} / {1})",
    "fmod@float": "metal::fmod({0}, {1})",
    "pow@float": "metal::precise::pow({0}, {1})",
    "atan2@float": "metal::precise::atan2({0}, {1})",
    **C_CHECKED,   # integer division reports division by zero through the ERROR_FLAG output
}

DIALECT = Dialect(
    name="metal",
    storage={d.name: TYPE_NAMES[d] for d in TYPE_NAMES},
    register={"bool": "bool", **INT_C, "float16": "float", "bfloat16": "float", "float32": "float"},
    math=_METAL_MATH,
    load={"bfloat16": "float({ptr}[{idx}])", "float16": "float({ptr}[{idx}])", "*": "{ptr}[{idx}]"},
    store={"bfloat16": "bfloat16_t({0})", "float16": "float16_t({0})", "*": "{0}"},
    # a float cast to uint8 wraps as on torch's CPU (see targets/c.py)
    cast={"bool": "(({0}) != 0)", "uint8": "{T}(int64_t({0}))",
          "float16": "float(float16_t({0}))", "bfloat16": "float(bfloat16_t({0}))",
          "*": "{T}({0})"},
    preamble="metal_preamble.metal.j2",
    **GPU_FIELDS,
    extra={   # the GPU templates' thread vocabulary (shared with the CUDA table)
        "global_id": "thread_position_in_grid.x", "group_id": "threadgroup_position_in_grid.x",
        "local_id": "thread_position_in_threadgroup.x", "local_size": "threads_per_threadgroup.x",
        "lane": "thread_index_in_simdgroup", "simd_group": "simdgroup_index_in_threadgroup",
        "shared": "threadgroup", "barrier": "threadgroup_barrier(mem_flags::mem_threadgroup);",
        "simd_sum": "simd_sum({0})", "simd_prod": "simd_product({0})", "simd_amax": "simd_max({0})",
        "simd_amin": "simd_min({0})", "simd_any": "simd_any({0})", "simd_all": "simd_all({0})",
        "simd_flag": "simd_max({0})",   # OR of a 0/1 int flag across the simdgroup
        # rows kernels' vector steps (a thread's 4 adjacent elements): Metal moves them element by
        # element into a thread array (no word casts: its strict address spaces; no vec_words, so
        # linear kernels keep their per-element loads)
        "vec_decl": "{T} {v}[{n}];",
        "vec_load_each": "for (uint lt_e = 0; lt_e < {n}; lt_e++) {v}[lt_e] = {ptr}[{idx} + lt_e];",
        "vec_store_each": "for (uint lt_e = 0; lt_e < {n}; lt_e++) {ptr}[{idx} + lt_e] = {v}[lt_e];",
        # the grid combine of long reductions (gpu_rows.j2): a device-scope fence (MSL 3.2) around
        # a relaxed atomic ticket orders each threadgroup's partial before the last group reads it
        "grid_fence": "atomic_thread_fence(mem_flags::mem_device, memory_order_seq_cst, thread_scope_device);",
        "grid_ticket": "atomic_fetch_add_explicit((device atomic_int*)({0}), 1, memory_order_relaxed)",
        "grid_load": "{ptr}[{idx}]",
    },
)


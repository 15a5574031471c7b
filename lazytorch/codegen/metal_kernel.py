"""One Metal kernel launch as the metal backend hands it to the Metal runtime, and the full source
that runtime builds from it.

The metal backend launches a kernel body through `mx.fast.metal_kernel`: it passes a name, input
and output names, the body, a header, template arguments, grid and threadgroup sizes
(`MetalCall`).  The runtime then writes the kernel signature around the body.  `assemble` writes
that signature exactly as the runtime does, so the metal-emu backend compiles (with the shader shim,
on the CPU) the same source a Mac would compile: both backends build their MetalCall with the same
code and only differ in who assembles and runs it.  tests/test_metal_emu.py checks `assemble`
against the source the runtime itself prints.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Union

from ..ir import dtypes as D
from ..ir.dtypes import DType
from ..ir.errors import op_error

TemplateValue = Union[bool, int, DType]

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
    try:
        return TYPE_NAMES[dtype]
    except KeyError:
        raise op_error(TypeError, op, f"dtype {dtype.name} is not supported on Metal (no 64-bit "
                       "floats on the GPU)", valid="cast to float32 first, or use the cpu backend "
                       f"(Metal dtypes: {', '.join(d.name for d in TYPE_NAMES)})") from None


@dataclass(frozen=True)
class MetalCall:
    """Everything one launch passes to `mx.fast.metal_kernel(...)` and then to the kernel call."""
    name: str
    input_names: tuple[str, ...]
    output_names: tuple[str, ...]
    source: str                                 # the kernel body
    header: str
    input_shapes: tuple[tuple[int, ...], ...]
    input_dtypes: tuple[DType, ...]
    output_shapes: tuple[tuple[int, ...], ...]
    output_dtypes: tuple[DType, ...]
    grid: tuple[int, int, int]                  # in threads
    threadgroup: tuple[int, int, int]
    template: tuple[tuple[str, TemplateValue], ...] = ()
    ensure_row_contiguous: bool = True
    init_value: float | None = None             # fill every output with this before the launch

    def __post_init__(self) -> None:
        for dt in self.input_dtypes + self.output_dtypes:
            type_name(dt, self.name)
        if not self.output_names:
            raise op_error(ValueError, self.name, "a Metal kernel needs at least one output")
        if len(self.input_names) != len(self.input_shapes) or len(self.output_names) != len(self.output_shapes):
            raise op_error(ValueError, self.name, "names and shapes of the buffers differ in number")


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


def _size(shape: tuple[int, ...]) -> int:
    n = 1
    for s in shape:
        n *= s
    return n


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
        name += "s" if len(shape) == 0 else "c" if _size(shape) < MAX_CONSTANT_ARRAY_SIZE else ""
    for dt in call.output_dtypes:
        name += "_" + type_name(dt)
    return name


def assemble(call: MetalCall) -> AssembledKernel:
    """The kernel source the Metal runtime builds around `call.source`, written the way it writes
    it (byte for byte, including its punctuation), and the parameters in buffer order."""
    func = function_name(call)
    params: list[Param] = []
    text = call.header
    if call.template:
        text += "template <" + ", ".join(f"{_template_kind(v)} {n}" for n, v in call.template) + ">\n"
    text += f"[[kernel]] void {func}(\n"
    index = 0
    for i, (name, shape, dt) in enumerate(zip(call.input_names, call.input_shapes, call.input_dtypes)):
        location = "constant" if _size(shape) < MAX_CONSTANT_ARRAY_SIZE else "device"
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

"""Builders of the creation ops: lazy fills and index ramps, and seeded random data.

Fills are `full` nodes and integer ramps (arange of integers, eye) are pointwise arithmetic on
`iota` nodes in int64, so neither holds memory until a kernel writes it.  Ramps with a fractional
part (float arange, linspace) are computed on the host in float64, as torch computes them, and
rounded once to their dtype: no backend has to compute in a dtype the result does not have (Metal
and CUDA through MLX have no float64).

`full` is a pointwise node of one number (so zeros and ones of any size cost no memory until a
kernel writes them): a structural constant where the library chose the number (zeros, ones,
tril's zeros: `fill_constant`), a runtime scalar where the user gave it (`full(size, v)`: `fill`,
so one compiled program serves every v); random tensors are drawn on the host from one seeded generator
(`lazytorch.manual_seed`), since no backend can reproduce torch's generator anyway.
"""
from __future__ import annotations

import math

import numpy as np

from . import dtypes as D
from .build import builder, call, constant, scalar
from .errors import op_error
from .node import Node, note_build_effect
from .registry import OpDef
from .schema import Schema

_generator = [np.random.default_rng(0)]


def manual_seed(seed: int) -> None:
    _generator[0] = np.random.default_rng(int(seed))


def generator() -> np.random.Generator:
    return _generator[0]


def check_size(op: str, size) -> tuple[int, ...]:
    size = (size,) if isinstance(size, int) else tuple(int(s) for s in size)
    if any(s < 0 for s in size):
        raise op_error(RuntimeError, op, f"negative dimension in size {list(size)}", None,
                       "sizes must be >= 0")
    return size


def fill(shape: tuple[int, ...], value, dtype: D.DType) -> Node:
    v = value if isinstance(value, Node) else scalar(value)
    return Node("full", (v,), {"size": shape, "dtype": dtype}, shape, dtype)


def fill_constant(shape: tuple[int, ...], value, dtype: D.DType) -> Node:
    """A fill with a number the library chose (not the user's): a structural constant."""
    return Node("full", (constant(value),), {"size": shape, "dtype": dtype}, shape, dtype)


def _fill_dtype(value, dtype) -> D.DType:
    if dtype is not None:
        return D.as_dtype(dtype)
    if isinstance(value, bool):
        return D.bool_
    if isinstance(value, int):
        return D.default_int
    if isinstance(value, Node):
        return value.dtype if value.op != "scalar" or not value.dtype.is_floating_point else D.default_float
    return D.default_float


_CONSTANT = {"zeros": 0.0, "ones": 1.0, "empty": 0.0}     # empty is zero-filled: no garbage reads


@builder("full")
def full(op: OpDef, schema: Schema, a: dict) -> Node:
    size = check_size(op.name, a["size"])
    if op.name in _CONSTANT:
        dtype = D.as_dtype(a["dtype"]) if a.get("dtype") is not None else D.default_float
        return fill_constant(size, _CONSTANT[op.name], dtype)
    value = a.get("fill_value")
    return fill(size, value, _fill_dtype(value, a.get("dtype")))


def _float_dtype(op: str, dtype) -> D.DType:
    dtype = D.as_dtype(dtype) if dtype is not None else D.default_float
    if not dtype.is_floating_point:
        raise op_error(TypeError, op, f"dtype {dtype.name} is not supported", None,
                       "random floats need a floating point dtype")
    return dtype


# rand draws k / 2**digits (digits: the significand bits of the dtype), as torch does, so every value
# is exact in its dtype: a float64 draw rounded to float16, bfloat16 or float32 could become 1.0
_RAND_DIGITS = {D.float16: 11, D.bfloat16: 8, D.float32: 24}


def random_node(op: str, size: tuple[int, ...], dtype: D.DType) -> Node:
    """rand (uniform [0, 1)) or randn (standard normal) values drawn now from the seeded generator."""
    g = generator()
    data = g.standard_normal(size) if op.startswith("randn") else g.random(size)
    if not op.startswith("randn") and dtype in _RAND_DIGITS:
        scale = float(2 ** _RAND_DIGITS[dtype])
        data = np.floor(data * scale) / scale
    return Node.from_buffer(D.from_compute(data.astype(np.float32 if dtype is not D.float64 else np.float64),
                                           dtype), size, dtype)


def random_like(op: str, x: Node) -> Node:
    """rand or randn values of x's shape, drawn in float64 for a float64 x, else in float32 (the
    variates a random initialiser transforms before casting to x's dtype)."""
    return random_node(op, x.shape, D.float64 if x.dtype is D.float64 else D.float32)


@builder("random")
def random(op: OpDef, schema: Schema, a: dict) -> Node:
    return random_node(op.name, check_size(op.name, a["size"]), _float_dtype(op.name, a.get("dtype")))


@builder("randint")
def randint(op: OpDef, schema: Schema, a: dict) -> Node:
    size = check_size(op.name, a["size"])
    low, high = a.get("low", 0), a["high"]
    if low >= high:
        raise op_error(RuntimeError, op.name, f"random_ expects 'from' < 'to', got low={low} >= high={high}")
    dtype = D.as_dtype(a["dtype"]) if a.get("dtype") is not None else D.int64
    data = generator().integers(low, high, size=size)
    return Node.from_buffer(D.from_compute(data, dtype), size, dtype)


@builder("like")
def like(op: OpDef, schema: Schema, a: dict) -> Node:
    x: Node = a["self"]
    dtype = D.as_dtype(a["dtype"]) if a.get("dtype") is not None else x.dtype
    kind = op.name.removesuffix("_like")
    if kind in ("rand", "randn"):
        return random_node(kind, x.shape, _float_dtype(op.name, dtype))
    if kind == "full":
        return fill(x.shape, a["fill_value"], dtype)
    return fill_constant(x.shape, _CONSTANT[kind], dtype)


# ---------------------------------------------------------------- index ramps

def iota(shape: tuple[int, ...], dim: int) -> Node:
    """The int64 index along `dim`, broadcast over `shape` (the primitive ramps are built from)."""
    return Node("iota", (), {"dim": dim, "size": shape, "dtype": D.int64}, shape, D.int64)


def _number(op: str, name: str, v) -> int | float:
    """A Python number from a scalar argument (a number, a scalar leaf or an evaluated 0-d tensor)."""
    if isinstance(v, Node):
        if v.op == "scalar":
            return v.value
        if v.realized and v.numel == 1:
            note_build_effect()                 # (data read at build time: not a replayable call)
            return np.asarray(D.to_compute(v.buffer, v.dtype)).reshape(()).item()
        raise op_error(TypeError, op, f"argument '{name}' must be a number, got a lazy tensor", {name: v},
                       "evaluate it first or pass a Python number")
    return v


def _host(values: np.ndarray, dtype: D.DType) -> Node:
    """float64 host values rounded once to `dtype`, as a buffer leaf."""
    data = values.astype(dtype.np if dtype is not D.bfloat16 else np.float32)
    return Node.from_buffer(D.from_compute(data, dtype), values.shape, dtype)


def _ramp(n: int, start, step, dtype: D.DType) -> Node:
    """start + i * step for i in range(n): lazily in int64 for integers, else on the host.  start
    and step stay runtime scalars: position ids (`arange(pos, pos + t)`) change every step of a
    decoding loop, and one compiled program serves them all."""
    if all(isinstance(v, int) and not isinstance(v, bool) for v in (start, step)):
        values = call("add", call("mul", iota((n,), 0), step), start)
        return values if values.dtype is dtype else call("to", values, dtype)
    return _host(float(start) + np.arange(n, dtype=np.float64) * float(step), dtype)


def no_bool_ramp(op: str, dtype: D.DType) -> None:
    if dtype.is_bool:                             # torch: "arange_cpu" not implemented for 'Bool'
        raise op_error(NotImplementedError, op, "dtype bool is not supported", None,
                       "ramps need a numeric dtype; compare a ramp to make a mask")


@builder("arange")
def arange(op: OpDef, schema: Schema, a: dict) -> Node:
    start, end, step = (_number(op.name, k, a.get(k, d)) for k, d in (("start", 0), ("end", None), ("step", 1)))
    if step == 0:
        raise op_error(RuntimeError, op.name, "step must be nonzero", None)
    if (end - start) * step < 0:
        raise op_error(RuntimeError, op.name, f"upper bound and larger bound inconsistent with step sign "
                       f"(start={start}, end={end}, step={step})", None)
    floating = any(isinstance(v, float) for v in (start, end, step))
    dtype = D.as_dtype(a["dtype"]) if a.get("dtype") is not None else D.default_float if floating else D.int64
    no_bool_ramp(op.name, dtype)
    n = math.ceil((end - start) / step)
    if floating and not dtype.is_floating_point:   # torch: the length from the numbers, the values
        start, step = int(start), int(step)        # from start and step converted to the dtype
        if step == 0 and dtype is D.int64:
            raise op_error(ValueError, op.name, "step must be nonzero (after conversion to int64)", None)
    return _ramp(n, start, step, dtype)


@builder("linspace")
def linspace(op: OpDef, schema: Schema, a: dict) -> Node:
    ends = [_number(op.name, k, a[k]) for k in ("start", "end")]
    start, end = (float(v) for v in ends)
    steps = a["steps"]
    if steps < 0:
        raise op_error(RuntimeError, op.name, f"number of steps must be non-negative, got {steps}", None)
    dtype = D.as_dtype(a["dtype"]) if a.get("dtype") is not None else D.default_float
    if steps <= 1:                                # torch fills without its kernel (bool included)
        return fill((steps,), start, dtype)
    no_bool_ramp(op.name, dtype)
    if not dtype.is_floating_point:               # torch converts the ends to the dtype first
        _check_float_ends(op.name, ends, dtype)
        start, end = (float(np.array(int(v)).astype(dtype.np)) for v in (start, end))
    rd = _rounding(dtype)                         # torch computes float linspace in the dtype itself
    s, e = rd(start), rd(end)
    step = rd(rd(e - s) / rd(steps - 1))
    i = np.arange(steps, dtype=np.float64)
    # torch's symmetric form: the first half counts up from start, the second down from end
    values = np.where(i < steps // 2, rd(s + rd(step * rd(i))), rd(e - rd(step * rd(steps - 1 - i))))
    return _host(np.asarray(values, np.float64), dtype)


def _check_float_ends(op: str, ends, dtype: D.DType) -> None:
    """torch converts a Python-float end to an integer dtype with an overflow check (an integer
    end wraps: -2 becomes 254 in uint8, but -1.5 is an error)."""
    info = np.iinfo(dtype.np)
    for v in ends:
        if isinstance(v, float) and not info.min <= v <= info.max:
            raise op_error(RuntimeError, op, f"value {v} cannot be converted to type {dtype.name} without "
                           "overflow", None, f"ends in [{info.min}, {info.max}], or integer ends (which wrap)")


def _rounding(dtype: D.DType):
    """Rounds host values after each operation as arithmetic in `dtype` would (float64 for ints)."""
    if dtype is D.bfloat16:
        return lambda a: D.bf16_to_f32(D.f32_to_bf16(np.asarray(a, np.float32)))
    if dtype.is_floating_point:
        return lambda a: np.asarray(a, dtype.np)
    return lambda a: np.asarray(a, np.float64)


@builder("eye")
def eye(op: OpDef, schema: Schema, a: dict) -> Node:
    n = a["n"]
    m = n if a.get("m") is None else a["m"]
    shape = check_size(op.name, (n, m))
    dtype = D.as_dtype(a["dtype"]) if a.get("dtype") is not None else D.default_float
    diagonal = call("eq", iota(shape, 0), iota(shape, 1))
    return diagonal if dtype.is_bool else call("to", diagonal, dtype)

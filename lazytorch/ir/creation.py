"""Builders of the creation ops: lazy fills and index ramps, and seeded random data.

`full` is a pointwise node of a runtime scalar (so zeros and ones of any size cost no memory until
a kernel writes them); random tensors are drawn on the host from one seeded generator
(`lazytorch.manual_seed`), since no backend can reproduce torch's generator anyway.
"""
from __future__ import annotations

import numpy as np

from . import dtypes as D
from .build import builder, scalar
from .errors import op_error
from .node import Node
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


@builder("full")
def full(op: OpDef, schema: Schema, a: dict) -> Node:
    size = check_size(op.name, a["size"])
    value = {"zeros": 0.0, "ones": 1.0}.get(op.name, a.get("fill_value"))
    dtype = D.as_dtype(a["dtype"]) if a.get("dtype") is not None else \
        D.default_float if op.name in ("zeros", "ones") else _fill_dtype(value, None)
    return fill(size, value, dtype)


@builder("random")
def random(op: OpDef, schema: Schema, a: dict) -> Node:
    size = check_size(op.name, a["size"])
    dtype = D.as_dtype(a["dtype"]) if a.get("dtype") is not None else D.default_float
    if not dtype.is_floating_point:
        raise op_error(TypeError, op.name, f"dtype {dtype.name} is not supported", None,
                       "random floats need a floating point dtype")
    g = generator()
    data = g.standard_normal(size) if op.name == "randn" else g.random(size)
    return Node.from_buffer(D.from_compute(data.astype(np.float32 if dtype is not D.float64 else np.float64),
                                           dtype), size, dtype)

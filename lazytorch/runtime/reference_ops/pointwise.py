"""Reference implementations of pointwise ops."""
from __future__ import annotations

import math

import numpy as np

from ...ir import dtypes as D
from ...ir.meta import compute_dtype
from ...ir.node import Node
from ...ir.registry import get
from . import REF, finish, np_compute, ref

# ---------------------------------------------------------------- pointwise

def _erf(x):
    return np.vectorize(math.erf, otypes=[x.dtype])(x) if x.size else x.copy()


def _sign(x):
    if x.dtype == np.bool_:
        return x.copy()
    return np.where(np.isnan(x), 0, np.sign(x)) if x.dtype.kind == "f" else np.sign(x)  # torch: sign(NaN) = 0


def _checked(name: str, fn):
    """fn of two arrays; an integer division by a zero divisor raises, as torch's does."""
    def run(a, b):
        if a.dtype.kind in "iu" and np.any(b == 0):
            raise ZeroDivisionError(f"{name}: integer division by zero")
        with np.errstate(divide="ignore", invalid="ignore"):
            return fn(a, b)
    return run


_floor_divide = _checked("floor_divide", np.floor_divide)
_remainder = _checked("remainder", np.mod)
_fmod = _checked("fmod", np.fmod)


def _trunc_divide(a, b):
    if a.dtype.kind in "iu":
        q = np.abs(a) // np.abs(b)
        return np.where((a < 0) != (b < 0), -q, q).astype(a.dtype)
    return np.trunc(a / b)


_div_trunc = _checked("div", _trunc_divide)


def _pow(a, b):
    if a.dtype.kind in "iu":
        return _int_pow(a, b)
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        return np.power(a, b)


def _int_pow(a, b):
    """torch's integer pow: a negative exponent gives 1/a truncated (1 for 1, +-1 for -1, else 0).

    A negative *Python number* exponent is rejected at the call (ir/meta/pointwise.py::pow)."""
    negative = b < 0
    powered = np.power(a, np.where(negative, 0, b).astype(b.dtype))
    odd = (b % 2) != 0
    inverse = np.where(a == 1, 1, np.where(a == -1, np.where(odd, -1, 1), 0))
    return np.where(negative, inverse, powered).astype(powered.dtype)


UNARY = {
    "neg": np.negative, "abs": np.abs, "sign": _sign, "exp": np.exp, "exp2": np.exp2, "expm1": np.expm1,
    "log": np.log, "log2": np.log2, "log10": np.log10, "log1p": np.log1p, "sqrt": np.sqrt,
    "rsqrt": lambda x: 1 / np.sqrt(x), "reciprocal": lambda x: 1 / x, "sin": np.sin, "cos": np.cos,
    "tan": np.tan, "asin": np.arcsin, "acos": np.arccos, "atan": np.arctan, "sinh": np.sinh,
    "cosh": np.cosh, "tanh": np.tanh, "erf": _erf, "floor": np.floor, "ceil": np.ceil,
    "round": np.round, "trunc": np.trunc, "isnan": np.isnan, "isinf": np.isinf,   # (np.round: half to even, as torch)
    "isfinite": np.isfinite, "logical_not": np.logical_not, "bitwise_not": np.invert,
    "sigmoid": lambda x: 1 / (1 + np.exp(-x)),
}
BINARY = {
    "add": np.add, "sub": np.subtract, "mul": np.multiply, "div": np.true_divide,
    "floor_divide": _floor_divide, "remainder": _remainder, "fmod": _fmod, "pow": _pow,
    "maximum": np.maximum, "minimum": np.minimum, "atan2": np.arctan2,
    "eq": np.equal, "ne": np.not_equal, "lt": np.less, "le": np.less_equal, "gt": np.greater,
    "ge": np.greater_equal, "logical_and": np.logical_and, "logical_or": np.logical_or,
    "logical_xor": np.logical_xor, "bitwise_and": np.bitwise_and, "bitwise_or": np.bitwise_or,
    "bitwise_xor": np.bitwise_xor, "div_trunc": _div_trunc, "div_floor": _floor_divide,
}


def _pointwise(fn):
    def run(node: Node, *arrays):
        op = get(node.op)
        ct = compute_dtype(op, list(node.inputs))
        args = [np_compute(a, n.dtype, ct) for a, n in zip(arrays, node.inputs)]
        with np.errstate(all="ignore"):
            out = fn(*args)
        return finish(out, node)
    return run


for _name, _fn in {**UNARY, **BINARY}.items():
    REF[_name] = _pointwise(_fn)


@ref("where")
def _where(node: Node, cond, a, b):
    ct = node.dtype
    return finish(np.where(cond.astype(bool), np_compute(a, node.inputs[1].dtype, ct),
                           np_compute(b, node.inputs[2].dtype, ct)), node)


@ref("to")
def _to(node: Node, x):
    src = node.inputs[0].dtype
    vals = D.to_compute(x, src)
    if node.dtype.category == D.INTEGER and src.is_floating_point:
        with np.errstate(invalid="ignore"):
            vals = np.trunc(vals)
    if node.dtype.is_bool:
        return finish(vals != 0, node)
    with np.errstate(invalid="ignore", over="ignore"):
        return finish(vals, node)


@ref("full")
def _full(node: Node, value):
    return finish(np.full(node.shape, np_compute(value, node.inputs[0].dtype, node.dtype)), node)


@ref("iota")
def _iota(node: Node):
    dim = node.attrs["dim"]
    shape = [1] * len(node.shape)
    shape[dim] = node.shape[dim]
    return finish(np.arange(node.shape[dim], dtype=np.int64).reshape(shape), node)


@ref("scalar")
def _scalar(node: Node):
    """A constant a decomposition introduced (user scalars arrive as params)."""
    return finish(np.asarray(node.value), node)

"""Builders of registry/misc.yaml: creation helpers (logspace, scalar_tensor, new_tensor),
in-place initialisers (fill_, zero_, the copy behind Tensor.copy_, uniform_, normal_, bernoulli_,
exponential_, ...), the real-number forms of the complex helpers (conj, real, angle, isreal) and
the clear refusals of complex numbers.

Random initialisers draw their uniform or normal variates now from lazytorch's seeded generator
(lazytorch.manual_seed), as rand/randn do, and transform them lazily (exponential:
-log(1 - U) / lambd), so the transform fuses with what follows.
"""
from __future__ import annotations

import math

import numpy as np

from . import dtypes as D
from .build import Args, call
from .creation import no_bool_ramp, fill, generator, random_like
from .errors import op_error
from .families import OpFamily
from .host import from_values, host_value
from .node import Node

FAMILY = OpFamily("misc", errors_as=None)
misc_op = FAMILY.register


def _dtype(a: Args, default: D.DType) -> D.DType:
    return D.as_dtype(a["dtype"]) if a.get("dtype") is not None else default


# ---------------------------------------------------------------- creation

def _host_number(v) -> float:
    """A Scalar argument's value: a Python number, a scalar leaf, or a 0-d tensor (read: a sync)."""
    if isinstance(v, Node):
        return float(v.value) if v.op == "scalar" else float(host_value(v))
    return float(v)


@misc_op("logspace")
def _logspace(op, a):
    steps = a["steps"]
    if steps < 0:
        raise op_error(RuntimeError, op, f"number of steps must be non-negative, got {steps}")
    dtype = _dtype(a, D.default_float)
    no_bool_ramp(op, dtype)                  # as arange and linspace (torch: not implemented for 'Bool')
    exps = np.linspace(_host_number(a["start"]), _host_number(a["end"]), steps, dtype=np.float64)
    vals = np.power(float(a["base"]), exps)
    if not dtype.is_floating_point:
        vals = np.trunc(vals)
    return from_values(vals, dtype)


@misc_op("scalar_tensor")
def _scalar_tensor(op, a):
    s = a["s"]
    s = s.value if isinstance(s, Node) and s.op == "scalar" else s
    return fill((), s, _dtype(a, D.default_float))


def _data_node(data, dtype: D.DType | None) -> Node:
    node = getattr(data, "node", data)
    if isinstance(node, Node):
        return node if dtype is None or node.dtype is dtype else call("to", node, dtype)
    arr = np.asarray(data)
    if dtype is None:
        dtype = D.bool_ if arr.dtype == np.bool_ else D.default_int if arr.dtype.kind in "iu" else D.default_float
    return from_values(arr, dtype)


@misc_op("new_tensor")
def _new_tensor(op, a):
    node = _data_node(a["data"], _dtype(a, a["self"].dtype))
    return call("clone", node) if node is getattr(a["data"], "node", None) else node


# ---------------------------------------------------------------- in-place initialisers

@misc_op("fill")
def _fill(op, a):
    x, v = a["self"], a["value"]
    if isinstance(v, Node) and v.op != "scalar":
        if v.ndim != 0:
            raise op_error(RuntimeError, op, f"fill_ only supports 0-dimension value tensor but got tensor with "
                           f"{v.ndim} dimensions", {"self": x, "value": v})
        return call("expand", call("to", v, x.dtype), x.shape)
    return fill(x.shape, v.value if isinstance(v, Node) else v, x.dtype)


@misc_op("zero")
def _zero(op, a):
    x = a["self"]
    return fill(x.shape, 0, x.dtype)


@misc_op("copy")
def _copy(op, a):
    x, src = a["self"], a["src"]
    from .meta import broadcast_shapes
    if broadcast_shapes(op, x.shape, src.shape, args={"self": x, "src": src}) != x.shape:
        raise op_error(RuntimeError, op, f"src of shape {list(src.shape)} cannot be broadcast to self's shape "
                       f"{list(x.shape)}", {"self": x, "src": src})
    v = src if src.dtype is x.dtype else call("to", src, x.dtype)
    return call("expand", v, x.shape) if v.shape != x.shape else call("clone", v)


def _floating(op: str, x: Node) -> None:
    if not x.dtype.is_floating_point:
        raise op_error(RuntimeError, op, f"not implemented for '{x.dtype.name}'", {"self": x},
                       "random floating point fills need a floating point tensor")


def _cast(v: Node, x: Node) -> Node:
    return v if v.dtype is x.dtype else call("to", v, x.dtype)


@misc_op("uniform")
def _uniform_fill(op, a):
    x, lo, hi = a["self"], float(a["from"]), float(a["to"])
    _floating(op, x)
    if lo > hi:
        raise op_error(RuntimeError, op, f"expects to return a [from, to) range, but found from={lo} > to={hi}", {"self": x})
    return _cast(call("add", call("mul", random_like("rand", x), hi - lo), lo), x)


@misc_op("normal")
def _normal_fill(op, a):
    x, mean, std = a["self"], float(a["mean"]), float(a["std"])
    _floating(op, x)
    if std < 0:
        raise op_error(RuntimeError, op, f"expects std >= 0.0, but found std {std}", {"self": x})
    n = random_like("randn", x)
    return _cast(call("add", call("mul", n, std), mean), x)


@misc_op("log_normal")
def _log_normal(op, a):
    x, mean, std = a["self"], float(a["mean"]), float(a["std"])
    _floating(op, x)
    n = random_like("randn", x)
    return _cast(call("exp", call("add", call("mul", n, std), mean)), x)


@misc_op("exponential")
def _exponential(op, a):
    x, lambd = a["self"], float(a["lambd"])
    _floating(op, x)
    if lambd <= 0:
        raise op_error(RuntimeError, op, f"expects lambda > 0.0, but found lambda={lambd}", {"self": x})
    return _cast(call("div", call("neg", call("log1p", call("neg", random_like("rand", x)))), lambd), x)


@misc_op("cauchy")
def _cauchy(op, a):
    x, median, sigma = a["self"], float(a["median"]), float(a["sigma"])
    _floating(op, x)
    t = call("tan", call("mul", call("sub", random_like("rand", x), 0.5), math.pi))
    return _cast(call("add", call("mul", t, sigma), median), x)


@misc_op("geometric")
def _geometric(op, a):
    x, p = a["self"], float(a["p"])
    if not 0 < p < 1:
        raise op_error(RuntimeError, op, f"geometric_ expects p to be in (0, 1), but got p={p}", {"self": x})
    u = call("log1p", call("neg", random_like("rand", x)))
    return _cast(call("ceil", call("div", u, math.log1p(-p))), x)


@misc_op("random")
def _random(op, a):
    x = a["self"]
    lo, hi = a["from"], a["to"]
    if hi is None:
        if lo is not None and a.get("_one_arg"):
            lo, hi = 0, lo
        else:
            hi = {D.float16: 2 ** 11, D.bfloat16: 2 ** 8, D.float32: 2 ** 24, D.float64: 2 ** 53,
                  D.bool_: 2}.get(x.dtype, 2 ** (8 * x.dtype.itemsize - (1 if x.dtype.signed else 0)))
            lo = 0 if lo is None else lo
    if lo >= hi:
        raise op_error(RuntimeError, op, f"random_ expects 'from' to be less than 'to', but got from={lo} >= to={hi}",
                       {"self": x})
    return from_values(generator().integers(int(lo), int(hi), size=x.shape), x.dtype)


@misc_op("bernoulli")
def _bernoulli(op, a):
    x, p = a["self"], a["p"]
    probs = x if p is None else getattr(p, "node", p)
    if not isinstance(probs, Node):
        if not 0 <= float(probs) <= 1:
            raise op_error(RuntimeError, op, f"bernoulli_ expects p to be in [0, 1], but got p={probs}", {"self": x})
        probs = fill((), float(probs), D.float64)
    if p is None and not x.dtype.is_floating_point:
        raise op_error(RuntimeError, op, f"not implemented for '{x.dtype.name}'", {"self": x},
                       "the probabilities must be floating point")
    return _cast(call("lt", random_like("rand", x), probs), x)


# ---------------------------------------------------------------- complex numbers

@misc_op("conj", "conj_physical", "resolve_conj", "resolve_neg", "real")
def _identity(op, a):
    """For real tensors these are the tensor itself (torch's real-dtype behaviour)."""
    return a["self"]


@misc_op("imag")
def _imag(op, a):
    raise op_error(RuntimeError, op, "imag is not implemented for tensors with non-complex dtypes", {"self": a["self"]},
                   "lazytorch has no complex dtypes")


@misc_op("angle")
def _angle(op, a):
    x = a["self"]
    xf = x if x.dtype.is_floating_point else call("to", x, D.default_float)
    zero = fill((), 0, xf.dtype)
    out = call("where", call("lt", xf, 0), fill((), math.pi, xf.dtype), zero)
    return call("where", call("isnan", xf), xf, out)


@misc_op("isreal")
def _isreal(op, a):
    return fill(a["self"].shape, True, D.bool_)


@misc_op("view_as_complex", "view_as_real", "polar", "complex", "cfloat", "cdouble", "chalf")
def _complex(op, a):
    raise NotImplementedError(f"{op}: complex numbers are not supported by lazytorch (no complex dtypes); "
                              "keep real and imaginary parts as two real tensors")


@misc_op("new_empty", "new_empty_strided", "empty_strided", "empty_permuted")
def _empty(op, a):
    """Uninitialised memory in torch; zeros here (lazytorch never hands out stale data)."""
    from .creation import check_size
    size = check_size(op, a["size"])
    base = a.get("self")
    return fill(size, 0, _dtype(a, base.dtype if base is not None else D.default_float))


@misc_op("randint_like")
def _randint_like(op, a):
    x = a["self"]
    lo, hi = (0, a["low_or_high"]) if a["high"] is None else (a["low_or_high"], a["high"])
    if lo >= hi:
        raise op_error(RuntimeError, op, f"random_ expects 'from' to be less than 'to', but got from={lo} >= to={hi}",
                       {"self": x})
    return from_values(generator().integers(int(lo), int(hi), size=x.shape), _dtype(a, x.dtype))


@misc_op("nonzero_static")
def _nonzero_static(op, a):
    x, size = a["self"], a["size"]
    if size < 0:
        raise op_error(RuntimeError, op, f"nonzero_static: 'size' must be an non-negative integer, got {size}", {"self": x})
    vals = np.asarray(host_value(x))
    idx = np.argwhere(vals != 0).astype(np.int64).reshape(int(np.count_nonzero(vals)), x.ndim)[:size]
    pad = np.full((size - idx.shape[0], x.ndim), a["fill_value"], np.int64)
    return from_values(np.concatenate([idx, pad]), D.int64)

"""Builders of the normalization functionals (registry/norm.yaml), composed at the call.

Every form computes in the opmath dtype (float32 for half types) and casts back once.  Statistics
are a mean and a biased variance of the centred values over the normalised dims (kept as size 1),
so the reductions and the normalisation of a channel or group share one row kernel.  In training,
batch_norm / instance_norm also rebind the running-statistics tensors they were given to
`(1 - momentum) * running + momentum * batch_statistic` (the variance unbiased), as torch updates
its buffers in place; the running tensors are passed through untouched (`Any`) for that reason.
"""
from __future__ import annotations

import math

from .build import Args, as_node, builder, call, constant, in_opmath
from .errors import given, op_error
from .node import Node
from .registry import OpDef
from .schema import Schema


def _floating(op: str, x: Node, args: dict) -> None:
    if not x.dtype.is_floating_point:
        raise op_error(NotImplementedError, op, f"\"{op}\" not implemented for dtype {x.dtype.name}", args,
                       "use a floating point input")


def _per_channel(v: Node, ndim: int) -> Node:
    """A [C] vector shaped to broadcast along dim 1 of an ndim input."""
    return call("reshape", v, (-1,) + (1,) * (ndim - 2))


def _check_vector(op: str, name: str, v: Node | None, size: int, args: dict) -> None:
    if v is not None and v.numel != size:
        raise op_error(RuntimeError, op, f"{name} should contain {size} elements not {v.numel}", args)


def _stats(x: Node, dims: list[int]) -> tuple[Node, Node, int]:
    """(mean, biased variance, count) of x over dims, both kept as size 1.  1 / count is a
    structural constant and the centred values are squared by `square`, not multiplied by
    themselves: a derivative rule's application is replayed only over distinct inputs that are no
    runtime scalars (autograd/engine.py input_grads), and BatchNorm's were 81 of ResNet-18's 335 a
    step, built anew each time."""
    n = math.prod(x.shape[d] for d in dims)
    inv = constant(1.0 / n if n else math.nan)
    mean = call("mul", call("sum", x, dims, True), inv)
    centred = call("sub", x, mean)
    var = call("mul", call("sum", call("square", centred), dims, True), inv)
    return mean, var, n


def _normalise(x: Node, mean: Node, var: Node, eps: float, weight, bias, ndim: int) -> Node:
    """(x - mean) / sqrt(var + eps), then the affine; eps is a structural constant (as above)."""
    y = call("mul", call("sub", x, mean), call("rsqrt", call("add", var, constant(eps))))
    if weight is not None:
        y = call("mul", y, _per_channel(in_opmath(weight), ndim))
    if bias is not None:
        y = call("add", y, _per_channel(in_opmath(bias), ndim))
    return y


def _update(op: str, running, batch: Node, momentum: float) -> None:
    """running <- (1 - momentum) * running + momentum * batch, in place on the caller's tensor."""
    node = as_node(running)
    new = call("add", call("mul", in_opmath(node), 1.0 - momentum), call("mul", batch, momentum))
    new = call("to", new, node.dtype)
    rebind = getattr(running, "_rebind", None)
    if rebind is not None:                     # a Tensor: torch updates the buffer in place
        rebind(new, op)


@builder("batch_norm")
def batch_norm(op: OpDef, schema: Schema, a: Args) -> Node:
    x, w, b = a["self"], a["weight"], a["bias"]
    rm, rv = a["running_mean"], a["running_var"]
    args = given(input=x, running_mean=rm, running_var=rv, weight=w, bias=b)
    _floating(op.name, x, args)
    c = x.shape[1] if x.ndim > 1 else 0          # as torch: a 1-d input has no channel dim
    rm_n, rv_n = (None if v is None else as_node(v) for v in (rm, rv))
    for name, v in (("running_mean", rm_n), ("running_var", rv_n), ("weight", w), ("bias", b)):
        _check_vector(op.name, name, v, c, args)
    training, eps, momentum = a["training"], float(a["eps"]), float(a["momentum"])
    if x.numel == 0:
        return x
    if x.ndim < 2:
        raise op_error(RuntimeError, op.name, f"Expected at least 2 dimensions for input tensor but received {x.ndim}",
                       args, "input has shape [N, C, *]")
    xf = in_opmath(x)
    if not training:
        if rm_n is None or rv_n is None:
            raise op_error(RuntimeError, op.name, f"{'running_mean' if rm_n is None else 'running_var'} must be "
                           "defined in evaluation mode", args, "pass running statistics or training=True")
        mean, var = (_per_channel(in_opmath(v), x.ndim) for v in (rm_n, rv_n))
        return call("to", _normalise(xf, mean, var, eps, w, b, x.ndim), x.dtype)
    dims = [0] + list(range(2, x.ndim))
    if math.prod(x.shape[d] for d in dims) <= 1:
        raise op_error(ValueError, op.name, f"Expected more than 1 value per channel when training, got input size "
                       f"{list(x.shape)}", args)
    mean, var, n = _stats(xf, dims)
    y = call("to", _normalise(xf, mean, var, eps, w, b, x.ndim), x.dtype)
    if rm is not None:
        _update(op.name, rm, call("reshape", mean, (c,)), momentum)
    if rv is not None:
        _update(op.name, rv, call("mul", call("reshape", var, (c,)), n / (n - 1)), momentum)
    return y


@builder("instance_norm")
def instance_norm(op: OpDef, schema: Schema, a: Args) -> Node:
    x, w, b = a["self"], a["weight"], a["bias"]
    rm, rv = a["running_mean"], a["running_var"]
    args = given(input=x, running_mean=rm, running_var=rv, weight=w, bias=b)
    _floating(op.name, x, args)
    if x.ndim < 3:
        raise op_error(ValueError, op.name, f"expected at least 3 dims [N, C, *spatial], got input of size "
                       f"{list(x.shape)}", args)
    c = x.shape[1]
    rm_n, rv_n = (None if v is None else as_node(v) for v in (rm, rv))
    for name, v in (("running_mean", rm_n), ("running_var", rv_n), ("weight", w), ("bias", b)):
        _check_vector(op.name, name, v, c, args)
    eps, momentum = float(a["eps"]), float(a["momentum"])
    xf = in_opmath(x)
    if not a["use_input_stats"]:
        if rm_n is None or rv_n is None:
            raise op_error(RuntimeError, op.name, "Expected running_mean and running_var to be defined when "
                           "use_input_stats is false", args)
        mean, var = (_per_channel(in_opmath(v), x.ndim) for v in (rm_n, rv_n))
        return call("to", _normalise(xf, mean, var, eps, w, b, x.ndim), x.dtype)
    dims = list(range(2, x.ndim))
    if math.prod(x.shape[d] for d in dims) <= 1:
        raise op_error(ValueError, op.name, f"Expected more than 1 spatial element when training, got input size "
                       f"{list(x.shape)}", args)
    mean, var, n = _stats(xf, dims)
    y = call("to", _normalise(xf, mean, var, eps, w, b, x.ndim), x.dtype)
    # torch: the running statistics move towards the batch average of the per-instance statistics
    if rm is not None:
        _update(op.name, rm, call("mean", call("reshape", mean, (x.shape[0], c)), 0), momentum)
    if rv is not None:
        unbiased = call("mul", call("reshape", var, (x.shape[0], c)), n / (n - 1))
        _update(op.name, rv, call("mean", unbiased, 0), momentum)
    return y


@builder("group_norm")
def group_norm(op: OpDef, schema: Schema, a: Args) -> Node:
    x, g, w, b = a["self"], a["num_groups"], a["weight"], a["bias"]
    args = given(input=x, weight=w, bias=b)
    _floating(op.name, x, args)
    if x.ndim < 2:
        raise op_error(RuntimeError, op.name, f"Expected at least 2 dimensions for input tensor but received {x.ndim}",
                       args)
    n, c = x.shape[:2]
    if g <= 0 or c % g:
        raise op_error(RuntimeError, op.name, f"Expected number of channels in input to be divisible by num_groups, "
                       f"but got input of shape {list(x.shape)} and num_groups={g}", args)
    for name, v in (("weight", w), ("bias", b)):
        if v is not None and tuple(v.shape) != (c,):
            raise op_error(RuntimeError, op.name, f"Expected {name} to be a vector of size equal to the number of "
                           f"channels in input, but got {name} of shape {list(v.shape)} and input of shape "
                           f"{list(x.shape)}", args)
    spatial = tuple(x.shape[2:])
    eps = float(a["eps"])
    if g in (1, c):                  # statistics over whole channels or all of them: no regrouping,
        xf = in_opmath(x)              # so the result is the row kernel's own output
        mean, var, _ = _stats(xf, list(range(1 if g == 1 else 2, x.ndim)))
        return call("to", _normalise(xf, mean, var, eps, w, b, x.ndim), x.dtype)
    grouped = call("reshape", in_opmath(x), (n, g, c // g) + spatial)       # a view of a contiguous input
    mean, var, _ = _stats(grouped, list(range(2, grouped.ndim)))
    y = call("mul", call("sub", grouped, mean), call("rsqrt", call("add", var, eps)))
    for v, fn in ((w, "mul"), (b, "add")):
        if v is not None:
            y = call(fn, y, call("reshape", in_opmath(v), (g, c // g) + (1,) * len(spatial)))
    return call("to", call("reshape", y, tuple(x.shape)), x.dtype)


@builder("local_response_norm")
def local_response_norm(op: OpDef, schema: Schema, a: Args) -> Node:
    """x / (k + alpha * mean of x^2 over `size` neighbouring channels)^beta (zero-padded channels)."""
    x, size = a["self"], a["size"]
    args = {"input": x}
    if x.ndim < 3:
        raise op_error(ValueError, op.name, f"Expected 3D or higher dimensionality input (got {x.ndim} dimensions)",
                       args)
    if size <= 0:
        raise op_error(RuntimeError, op.name, f"size must be positive, got {size}", args)
    _floating(op.name, x, args)
    if x.numel == 0:
        return x
    xf = in_opmath(x)
    sq = call("transpose", call("mul", xf, xf), 1, -1)                      # channels last
    sq = call("pad", sq, [size // 2, (size - 1) // 2])
    from .build_conv import windows
    win = windows(sq, (size,), (1,), (1,))                                   # (..., C, size)
    avg = call("mul", call("sum", win, -1), 1.0 / size)
    div = call("pow", call("add", call("mul", call("transpose", avg, 1, -1), float(a["alpha"])), float(a["k"])),
               float(a["beta"]))
    return call("to", call("div", xf, div), x.dtype)

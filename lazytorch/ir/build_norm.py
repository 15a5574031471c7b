"""Builders of the normalization functionals (registry/norm.yaml), composed at the call.

Every form computes in the opmath dtype (float32 for half types) and casts back once.  Statistics
are a mean and a biased variance of the centred values over the normalised dims (kept as size 1),
so the reductions and the normalisation of a channel or group share one row kernel.  In training,
batch_norm / instance_norm also rebind the running-statistics tensors they were given to
`(1 - momentum) * running + momentum * batch_statistic` (the variance unbiased), as torch updates
its buffers in place; the running tensors are passed through untouched (`Any`) for that reason.
nn.BatchNorm builds through `batch_norm_nodes` instead, which returns the new running values for
the module to store, so its training forward replays (`batch_norm_replayed`).
"""
from __future__ import annotations

import math
from typing import Any

from .build import Args, as_node, builder, call, constant, in_opmath, recorded, scalar
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


def _stats(x: Node, dims: list[int]) -> tuple[Node, Node, Node, int]:
    """(mean, biased variance, centred values, count) of x over dims, the statistics kept as size
    1.  1 / count is a structural constant and the centred values are squared by `square`, not
    multiplied by themselves: a derivative rule's application is replayed only over distinct
    inputs that are no runtime scalars (autograd/engine.py input_grads), and BatchNorm's were 81 of
    ResNet-18's 335 a step, built anew each time.  The centred values are the ones `_normalise`
    scales (not a second x - mean: a node fewer to build and to give autograd's record)."""
    n = math.prod(x.shape[d] for d in dims)
    inv = constant(1.0 / n if n else math.nan)
    mean = call("mul", call("sum", x, dims, True), inv)
    centred = call("sub", x, mean)
    var = call("mul", call("sum", call("square", centred), dims, True), inv)
    return mean, var, centred, n


def _normalise(centred: Node, var: Node, eps: float, weight, bias, ndim: int) -> Node:
    """(x - mean) / sqrt(var + eps) from the centred values, then the affine; eps is a structural
    constant (as above)."""
    y = call("mul", centred, call("rsqrt", call("add", var, constant(eps))))
    if weight is not None:
        y = call("mul", y, _per_channel(in_opmath(weight), ndim))
    if bias is not None:
        y = call("add", y, _per_channel(in_opmath(bias), ndim))
    return y


def _update(op: str, running, batch: Node, factors: tuple[Node, Node]) -> None:
    """running <- the blend of running and batch (`_blend`), in place on the caller's tensor."""
    new = _blend(as_node(running), batch, factors)
    rebind = getattr(running, "_rebind", None)
    if rebind is not None:                     # a Tensor: torch updates the buffer in place
        rebind(new, op)


def _momentum_factors(momentum: float) -> tuple[Node, Node]:
    """(1 - momentum, momentum) as runtime scalars (a module's momentum may change between steps
    without a new program), made once for both running statistics' blends."""
    return scalar(1.0 - momentum), scalar(momentum)


def _blend(running: Node, batch: Node, factors: tuple[Node, Node]) -> Node:
    """(1 - momentum) * running + momentum * batch (`factors`: _momentum_factors), computed in the
    opmath dtype and stored in running's."""
    keep, take = factors
    new = call("add", call("mul", in_opmath(running), keep), call("mul", batch, take))
    return call("to", new, running.dtype)


def _unbiased(var: Node, n: int) -> Node:
    """A biased variance of n values made unbiased (the running variance's), by a structural
    constant: it follows from the input's shape."""
    return call("mul", var, constant(n / (n - 1)))


@builder("batch_norm")
def batch_norm(op: OpDef, schema: Schema, a: Args) -> Node:
    rm, rv = a["running_mean"], a["running_var"]
    y, new_mean, new_var = batch_norm_nodes(a["self"], rm, rv, a["weight"], a["bias"], a["training"],
                                            float(a["momentum"]), float(a["eps"]))
    for running, new in ((rm, new_mean), (rv, new_var)):
        rebind = getattr(running, "_rebind", None)
        if new is not None and rebind is not None:     # a Tensor: torch updates the buffer in place
            rebind(new, op.name)
    return y


def batch_norm_nodes(x: Any, running_mean: Any, running_var: Any, weight: Any, bias: Any, training: bool,
                     momentum: float, eps: float) -> tuple[Node, Node | None, Node | None]:
    """batch_norm's result and, in training, the running statistics' new values (None where no
    running statistic was given, for an empty input, or in eval mode), both from one mean and
    variance: the row kernel that normalises also yields the statistics the blends read.
    Nothing is updated here: the functional rebinds its arguments, nn.BatchNorm its buffers
    (outside autograd).  Tensor arguments are Nodes or Tensors (or None); every check runs
    before anything is built, so a refused input leaves no half-made update."""
    x, weight, bias = (None if v is None else as_node(v) for v in (x, weight, bias))
    rm, rv = (None if v is None else as_node(v) for v in (running_mean, running_var))
    op = "batch_norm"
    args = given(input=x, running_mean=rm, running_var=rv, weight=weight, bias=bias)
    _floating(op, x, args)
    c = x.shape[1] if x.ndim > 1 else 0          # as torch: a 1-d input has no channel dim
    for name, v in (("running_mean", rm), ("running_var", rv), ("weight", weight), ("bias", bias)):
        _check_vector(op, name, v, c, args)
    if x.numel == 0:                             # (torch leaves the running statistics as they are)
        return x, None, None
    if x.ndim < 2:
        raise op_error(RuntimeError, op, f"Expected at least 2 dimensions for input tensor but received {x.ndim}",
                       args, "input has shape [N, C, *]")
    xf = in_opmath(x)
    if not training:
        if rm is None or rv is None:
            raise op_error(RuntimeError, op, f"{'running_mean' if rm is None else 'running_var'} must be "
                           "defined in evaluation mode", args, "pass running statistics or training=True")
        mean, var = (_per_channel(in_opmath(v), x.ndim) for v in (rm, rv))
        return call("to", _normalise(call("sub", xf, mean), var, eps, weight, bias, x.ndim), x.dtype), None, None
    dims = [0] + list(range(2, x.ndim))
    if math.prod(x.shape[d] for d in dims) <= 1:
        raise op_error(ValueError, op, f"Expected more than 1 value per channel when training, got input size "
                       f"{list(x.shape)}", args)
    mean, var, centred, n = _stats(xf, dims)
    y = call("to", _normalise(centred, var, eps, weight, bias, x.ndim), x.dtype)
    factors = _momentum_factors(momentum)
    new_mean = None if rm is None else _blend(rm, call("reshape", mean, (c,)), factors)
    new_var = None if rv is None else _blend(rv, _unbiased(call("reshape", var, (c,)), n), factors)
    return y, new_mean, new_var


# batch_norm_nodes replayed from a recording of an earlier call with the same signature (shapes,
# dtypes, flags, momentum and eps: ir/build.py recorded), as the Tensor API replays an op: the
# training forward of nn.BatchNorm, which builds the same nodes every step and updates its buffers
# itself (the functional's in-place update is an effect, so F.batch_norm with running statistics
# is never replayed).
batch_norm_replayed = recorded(batch_norm_nodes)


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
        return call("to", _normalise(call("sub", xf, mean), var, eps, w, b, x.ndim), x.dtype)
    dims = list(range(2, x.ndim))
    if math.prod(x.shape[d] for d in dims) <= 1:
        raise op_error(ValueError, op.name, f"Expected more than 1 spatial element when training, got input size "
                       f"{list(x.shape)}", args)
    mean, var, centred, n = _stats(xf, dims)
    y = call("to", _normalise(centred, var, eps, w, b, x.ndim), x.dtype)
    # torch: the running statistics move towards the batch average of the per-instance statistics
    factors = _momentum_factors(momentum)
    if rm is not None:
        _update(op.name, rm, call("mean", call("reshape", mean, (x.shape[0], c)), 0), factors)
    if rv is not None:
        _update(op.name, rv, call("mean", _unbiased(call("reshape", var, (x.shape[0], c)), n), 0), factors)
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
        _, var, centred, _ = _stats(xf, list(range(1 if g == 1 else 2, x.ndim)))
        return call("to", _normalise(centred, var, eps, w, b, x.ndim), x.dtype)
    grouped = call("reshape", in_opmath(x), (n, g, c // g) + spatial)       # a view of a contiguous input
    _, var, centred, _ = _stats(grouped, list(range(2, grouped.ndim)))
    y = call("mul", centred, call("rsqrt", call("add", var, eps)))
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

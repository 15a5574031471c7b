"""Builders of the losses, distances and one_hot (registry/loss.yaml), composed at the call.

Each loss is a function from the bound arguments to its per-element loss in the opmath dtype
(float32 for half types), followed by the shared reduction ('none', 'mean', 'sum'; kl_div also
'batchmean') and one cast back.  Forms follow torch's own kernels (log clamped at -100 in
binary_cross_entropy, the log-sum-exp form of binary_cross_entropy_with_logits, xlogy in kl_div)
so values agree to rounding.  Class indices are read with the bounds-checked gather, so an
out-of-range class raises when the program runs instead of reading outside the row.
"""
from __future__ import annotations

import math
from typing import Callable

import numpy as np

from . import dtypes as D
from .build import Args, as_node, builder, call, in_opmath
from .errors import given, op_error
from .meta import broadcast_shapes, promoted
from .node import Node
from .registry import OpDef
from .schema import Schema

REDUCTIONS = ("none", "mean", "sum")


def legacy_reduction(size_average, reduce, reduction: str) -> str:
    """torch's mapping of the deprecated size_average / reduce flags onto `reduction`."""
    if size_average is None and reduce is None:
        return reduction
    size_average = True if size_average is None else size_average
    reduce = True if reduce is None else reduce
    return "none" if not reduce else "mean" if size_average else "sum"


def _reduction(op: str, a: Args, extra: tuple[str, ...] = ()) -> str:
    """torch's reduction, with the legacy size_average / reduce flags mapped as torch maps them."""
    if a.get("size_average") is not None or a.get("reduce") is not None:
        return legacy_reduction(a.get("size_average"), a.get("reduce"), a["reduction"])
    if a["reduction"] not in REDUCTIONS + extra:
        raise op_error(ValueError, op, f"{a['reduction']} is not a valid value for reduction", None,
                       f"valid: {', '.join(REDUCTIONS + extra)}")
    return a["reduction"]


def _floating(op: str, args: dict) -> None:
    for name, n in args.items():
        if n is not None and not n.dtype.is_floating_point:
            raise op_error(RuntimeError, op, f"{name} has dtype {n.dtype.name}, but a floating point tensor is "
                           "required", {k: v for k, v in args.items() if v is not None})


def _same_size(op: str, x: Node, t: Node, args: dict, message: str) -> None:
    if tuple(x.shape) != tuple(t.shape):
        raise op_error(ValueError, op, message.format(t=list(t.shape), x=list(x.shape)), args)


def _reduce(loss: Node, reduction: str, denominator=None) -> Node:
    if reduction == "none":
        return loss
    total = call("sum", loss)
    if reduction == "sum":
        return total
    if isinstance(denominator, Node):
        return call("div", total, denominator)
    n = loss.numel if denominator is None else denominator
    return call("div", total, float(n)) if n else call("mul", total, math.nan)


def _broadcast(op: str, *nodes: Node) -> tuple[Node, ...]:
    args = {f"input{i}": n for i, n in enumerate(nodes)}
    shape = broadcast_shapes(op, *(n.shape for n in nodes), args=args)
    return tuple(n if tuple(n.shape) == shape else call("expand", n, shape) for n in nodes)


# ---------------------------------------------------------------- per-element losses

def _nll(op: str, a: Args):
    x, t, w = a["self"], a["target"], a["weight"]
    args = given(input=x, target=t, weight=w)
    _floating(op, {"input": x})
    if x.ndim not in (1,) and x.ndim < 2:
        raise op_error(ValueError, op, f"Expected 1 or more dimensions (got {x.ndim})", args)
    cdim = 0 if x.ndim == 1 else 1
    classes = x.shape[cdim]
    per_item = () if x.ndim == 1 else x.shape[:1] + x.shape[2:]
    if t.dtype.category != D.INTEGER:
        raise op_error(RuntimeError, op, f"expected a target of an integer dtype (class indices), got "
                       f"{t.dtype.name}", args)
    if tuple(t.shape) != tuple(per_item):
        raise op_error(ValueError if x.ndim <= 2 else RuntimeError, op,
                       f"Expected input batch_size ({x.shape[0]}) to match target batch_size ({t.shape[0] if t.ndim else 0})"
                       if x.ndim == 2 and t.ndim >= 1 and t.shape[0] != x.shape[0] else
                       f"expected target of shape {list(per_item)}, got {list(t.shape)}", args)
    if w is not None and tuple(w.shape) != (classes,):
        raise op_error(RuntimeError, op, f"weight tensor should be defined either for all {classes} classes or no "
                       f"classes but got weight tensor of shape: {list(w.shape)}", args)
    valid = call("ne", t, a["ignore_index"])
    index = call("unsqueeze", call("where", valid, call("to", t, D.int64), 0), cdim)
    pick = call("squeeze", call("gather", in_opmath(x), cdim, index), cdim)
    item_w = call("to", valid, pick.dtype)
    if w is not None:
        wx = call("reshape", in_opmath(w), (classes,) + (1,) * (x.ndim - cdim - 1))
        wx = call("expand", wx, tuple(x.shape))
        item_w = call("where", valid, call("squeeze", call("gather", wx, cdim, index), cdim), 0.0)
    loss = call("neg", call("mul", pick, item_w))
    return loss, call("sum", item_w), x.dtype


def _bce(op: str, a: Args):
    x, t, w = a["self"], a["target"], a["weight"]
    args = given(input=x, target=t, weight=w)
    _floating(op, args)
    _same_size(op, x, t, args, "Using a target size ({t}) that is different to the input size ({x}) is deprecated. "
               "Please ensure they have the same size.")
    xf, tf = in_opmath(x), in_opmath(t)
    log_x = call("clamp_min", call("log", xf), -100.0)
    log_1mx = call("clamp_min", call("log1p", call("neg", xf)), -100.0)
    loss = call("neg", call("add", call("mul", tf, log_x), call("mul", call("sub", 1.0, tf), log_1mx)))
    if w is not None:
        loss = call("mul", loss, in_opmath(w))
    return loss, None, x.dtype


def _bce_logits(op: str, a: Args):
    x, t, w, pw = a["self"], a["target"], a["weight"], a["pos_weight"]
    args = given(input=x, target=t, weight=w, pos_weight=pw)
    _floating(op, args)
    _same_size(op, x, t, args, "Target size ({t}) must be the same as input size ({x})")
    xf, tf = in_opmath(x), in_opmath(t)
    softplus_neg = _softplus(call("neg", xf))             # log(1 + exp(-x))
    weight = call("add", call("mul", call("sub", in_opmath(pw), 1.0), tf), 1.0) if pw is not None else None
    loss = call("add", call("mul", call("sub", 1.0, tf), xf),
                softplus_neg if weight is None else call("mul", weight, softplus_neg))
    if w is not None:
        loss = call("mul", loss, in_opmath(w))
    return loss, None, x.dtype


def _operands(op: str, a: Args) -> tuple[Node, dict, Node, Node]:
    """(input, the error arguments, input and target in opmath, broadcast together): both floating."""
    x, t = a["self"], a["target"]
    args = {"input": x, "target": t}
    _floating(op, args)
    return (x, args, *_broadcast(op, in_opmath(x), in_opmath(t)))


def _difference(op: str, a: Args) -> tuple[Node, Node, dict]:
    x, args, xf, tf = _operands(op, a)
    return call("abs", call("sub", xf, tf)), promoted([x, a["target"]]), args


def _weighted(op: str, loss: Node, x: Node, w, args: dict) -> tuple[Node, Node | None]:
    if w is None:
        return loss, None
    if tuple(w.shape) != tuple(x.shape):
        raise op_error(ValueError, op, "Weights and input must have the same size.", {**args, "weight": w})
    return call("mul", loss, in_opmath(w)), None


def _l1(op: str, a: Args):
    d, dtype, args = _difference(op, a)
    loss, _ = _weighted(op, d, a["self"], a["weight"], args)
    return loss, (None if a["weight"] is None else call("sum", in_opmath(a["weight"]))), dtype


def _smooth_l1(op: str, a: Args):
    d, dtype, args = _difference(op, a)
    beta = float(a["beta"])
    if beta < 0:
        raise op_error(RuntimeError, op, "smooth_l1_loss does not support negative values for beta.", args)
    if beta == 0.0:
        return d, None, dtype
    loss = call("where", call("lt", d, beta), call("mul", call("mul", d, d), 0.5 / beta), call("sub", d, 0.5 * beta))
    return loss, None, dtype


def _huber(op: str, a: Args):
    d, dtype, args = _difference(op, a)
    delta = float(a["delta"])
    if delta <= 0:
        raise op_error(RuntimeError, op, "huber_loss does not support non-positive values for delta.", args)
    loss = call("where", call("lt", d, delta), call("mul", call("mul", d, d), 0.5),
                call("mul", call("sub", d, 0.5 * delta), delta))
    loss, _ = _weighted(op, loss, a["self"], a["weight"], args)
    return loss, None, dtype


def _kl_div(op: str, a: Args):
    x, _, xf, tf = _operands(op, a)
    if a["log_target"]:
        loss = call("mul", call("exp", tf), call("sub", tf, xf))
    else:                                        # xlogy(t, t) - t * x: a zero target contributes 0
        tlogt = call("where", call("eq", tf, 0.0), 0.0, call("mul", tf, call("log", tf)))
        tlogt = call("where", call("isnan", tf), tf, tlogt)
        loss = call("sub", tlogt, call("mul", tf, xf))
    batch = x.shape[0] if x.ndim else 1
    return loss, ("batch", batch), x.dtype


def _poisson_nll(op: str, a: Args):
    x, _, xf, tf = _operands(op, a)
    if a["log_input"]:
        loss = call("sub", call("exp", xf), call("mul", tf, xf))
    else:
        loss = call("sub", xf, call("mul", tf, call("log", call("add", xf, float(a["eps"])))))
    if a["full"]:                                # Stirling's approximation of log(t!), for t > 1
        stirling = call("add", call("sub", call("mul", tf, call("log", tf)), tf),
                        call("mul", call("log", call("mul", tf, 2 * math.pi)), 0.5))
        loss = call("add", loss, call("where", call("gt", tf, 1.0), stirling, 0.0))
    return loss, None, x.dtype


def _gaussian_nll(op: str, a: Args):
    x, t, var = a["self"], a["target"], a["var"]
    if var.op == "scalar":
        var = call("full_like", x, float(var.value))
    args = {"input": x, "target": t, "var": var}
    _floating(op, args)
    if tuple(var.shape) != tuple(x.shape):
        if tuple(x.shape[:-1]) == tuple(var.shape):         # homoscedastic over the last dim
            var = call("unsqueeze", var, -1)
        elif not (tuple(x.shape[:-1]) == tuple(var.shape[:-1]) and var.shape[-1] == 1):
            raise op_error(ValueError, op, "var is of incorrect size", args,
                           "var must have the input's shape, or it with the last dim 1 or removed")
    xf, tf = _broadcast(op, in_opmath(x), in_opmath(t))
    v = call("clamp_min", in_opmath(var), float(a["eps"]))
    d = call("sub", xf, tf)
    loss = call("mul", call("add", call("log", v), call("div", call("mul", d, d), v)), 0.5)
    if a["full"]:
        loss = call("add", loss, 0.5 * math.log(2 * math.pi))
    return loss, None, x.dtype


def _margin_ranking(op: str, a: Args):
    x1, x2, y = a["input1"], a["input2"], a["target"]
    args = {"input1": x1, "input2": x2, "target": y}
    if not (x1.ndim == x2.ndim == y.ndim):
        raise op_error(RuntimeError, op, f"margin_ranking_loss : All input tensors should have same dimension but got "
                       f"sizes: input1: {list(x1.shape)}, input2: {list(x2.shape)}, target: {list(y.shape)}", args)
    _floating(op, {"input1": x1, "input2": x2})
    x1f, x2f, yf = _broadcast(op, in_opmath(x1), in_opmath(x2), in_opmath(y))
    loss = call("clamp_min", call("add", call("mul", call("neg", yf), call("sub", x1f, x2f)), float(a["margin"])), 0.0)
    return loss, None, x1.dtype


def _cosine_embedding(op: str, a: Args):
    x1, x2, y = a["input1"], a["input2"], a["target"]
    args = {"input1": x1, "input2": x2, "target": y}
    _floating(op, {"input1": x1, "input2": x2})
    if x1.ndim not in (1, 2) or tuple(x1.shape) != tuple(x2.shape) or y.ndim != x1.ndim - 1 or \
            (y.ndim and y.shape[0] != x1.shape[0]):
        raise op_error(RuntimeError, op, f"expected 1D or 2D inputs of one shape and a target with one dim less, got "
                       f"input1 {list(x1.shape)}, input2 {list(x2.shape)}, target {list(y.shape)}", args)
    d = x1.ndim - 1
    a1, a2 = in_opmath(x1), in_opmath(x2)
    eps = 1e-12                                  # torch's EPSILON in cosine_embedding_loss
    prod = call("sum", call("mul", a1, a2), d)
    m1 = call("add", call("sum", call("mul", a1, a1), d), eps)
    m2 = call("add", call("sum", call("mul", a2, a2), d), eps)
    cos = call("div", prod, call("sqrt", call("mul", m1, m2)))
    pos = call("sub", 1.0, cos)
    neg = call("clamp_min", call("sub", cos, float(a["margin"])), 0.0)
    loss = call("add", call("where", call("eq", y, 1), pos, 0.0), call("where", call("eq", y, -1), neg, 0.0))
    return loss, None, x1.dtype


def _pairwise(x1: Node, x2: Node, p: float, eps: float, keepdim: bool) -> Node:
    """torch's pairwise_distance: the p-norm of x1 - x2 + eps over the last dim."""
    d = call("add", call("sub", x1, x2), eps)
    ndim = max(x1.ndim, x2.ndim)
    if ndim == 0:
        return call("abs", d)
    return call("norm", d, float(p), [-1], keepdim)


def _triplet(op: str, a: Args):
    an, po, ne = a["anchor"], a["positive"], a["negative"]
    args = {"anchor": an, "positive": po, "negative": ne}
    if not (an.ndim == po.ndim == ne.ndim):
        raise op_error(RuntimeError, op, f"The anchor, positive, and negative tensors are expected to have the same "
                       f"number of dimensions, but got: anchor {an.ndim}D, positive {po.ndim}D, and negative "
                       f"{ne.ndim}D inputs", args)
    _floating(op, args)
    if a["margin"] <= 0:
        raise op_error(ValueError, op, f"triplet_margin_loss: expected margin to be greater than 0, got "
                       f"{a['margin']} instead", args)
    p, eps = float(a["p"]), float(a["eps"])
    af, pf, nf = (in_opmath(v) for v in (an, po, ne))
    d_ap = _pairwise(af, pf, p, eps, False)
    d_an = _pairwise(af, nf, p, eps, False)
    if a["swap"]:
        d_an = call("minimum", d_an, _pairwise(pf, nf, p, eps, False))
    loss = call("clamp_min", call("sub", call("add", d_ap, float(a["margin"])), d_an), 0.0)
    return loss, None, an.dtype


def _softplus(x: Node) -> Node:
    """log(1 + exp(x)) without overflow: max(x, 0) + log1p(exp(-|x|))."""
    return call("add", call("clamp_min", x, 0.0), call("log1p", call("exp", call("neg", call("abs", x)))))


def _soft_margin(op: str, a: Args):
    x, y = a["self"], a["target"]
    _floating(op, {"input": x})
    xf, yf = _broadcast(op, in_opmath(x), in_opmath(y))
    return call("log1p", call("exp", call("neg", call("mul", xf, yf)))), None, x.dtype


def _hinge_embedding(op: str, a: Args):
    x, y = a["self"], a["target"]
    _floating(op, {"input": x})
    xf, yf = _broadcast(op, in_opmath(x), in_opmath(y))
    margin = call("clamp_min", call("sub", float(a["margin"]), xf), 0.0)
    loss = call("add", call("where", call("ne", yf, 1.0), margin, 0.0), call("where", call("ne", yf, -1.0), xf, 0.0))
    return loss, None, x.dtype


def _multilabel_soft_margin(op: str, a: Args):
    x, y, w = a["self"], a["target"], a["weight"]
    args = given(input=x, target=y, weight=w)
    _floating(op, {"input": x})
    if x.ndim == 0:
        raise op_error(ValueError, op, "input must have a class dim", args)
    xf, yf = _broadcast(op, in_opmath(x), in_opmath(y))
    # -(y * logsigmoid(x) + (1 - y) * logsigmoid(-x)), logsigmoid(v) = -softplus(-v)
    loss = call("add", call("mul", yf, _softplus(call("neg", xf))), call("mul", call("sub", 1.0, yf), _softplus(xf)))
    if w is not None:
        loss = call("mul", loss, in_opmath(w))
    return call("div", call("sum", loss, -1), float(x.shape[-1])), None, x.dtype


def _multi_margin(op: str, a: Args):
    x, y, w, p = a["self"], a["target"], a["weight"], a["p"]
    args = given(input=x, target=y, weight=w)
    _floating(op, {"input": x})
    if p not in (1, 2):
        raise op_error(ValueError, op, f"only p == 1 and p == 2 supported, got {p}", args)
    target_fits = tuple(y.shape) == (x.shape[0],) if x.ndim == 2 else y.numel == 1
    if x.ndim > 2 or y.dtype.category != D.INTEGER or not target_fits:
        raise op_error(RuntimeError, op, f"inconsistent target size: {list(y.shape)} for input of size: "
                       f"{list(x.shape)}", args, "input [N, C] (or [C]) and integer target [N] (or a scalar)")
    c = x.shape[-1] if x.ndim else 1
    if w is not None and (w.ndim != 1 or w.numel != c):
        raise op_error(RuntimeError, op, f"inconsistent weight size, expected {c} but got {list(w.shape)}", args)
    x2 = call("reshape", in_opmath(x), (-1, c))
    index = call("reshape", call("to", y, D.int64), (-1, 1))
    picked = call("gather", x2, 1, index)                                   # bounds-checked x[i, y_i]
    z = call("clamp_min", call("add", call("sub", float(a["margin"]), picked), x2), 0.0)
    h = z if p == 1 else call("mul", z, z)
    from .creation import iota
    h = call("where", call("eq", iota(tuple(x2.shape), 1), index), 0.0, h)  # j == y_i does not count
    if w is not None:
        h = call("mul", h, call("gather", call("expand", call("reshape", in_opmath(w), (1, c)), tuple(x2.shape)), 1,
                                index))
    loss = call("div", call("sum", h, 1), float(c))
    return (loss if x.ndim == 2 else call("reshape", loss, ())), None, x.dtype


LOSSES: dict[str, Callable] = {
    "soft_margin_loss": _soft_margin,
    "hinge_embedding_loss": _hinge_embedding,
    "multilabel_soft_margin_loss": _multilabel_soft_margin,
    "multi_margin_loss": _multi_margin,
    "nll_loss": _nll,
    "binary_cross_entropy": _bce,
    "binary_cross_entropy_with_logits": _bce_logits,
    "l1_loss": _l1,
    "smooth_l1_loss": _smooth_l1,
    "huber_loss": _huber,
    "kl_div": _kl_div,
    "poisson_nll_loss": _poisson_nll,
    "gaussian_nll_loss": _gaussian_nll,
    "margin_ranking_loss": _margin_ranking,
    "cosine_embedding_loss": _cosine_embedding,
    "triplet_margin_loss": _triplet,
}


@builder("loss")
def loss(op: OpDef, schema: Schema, a: Args) -> Node:
    reduction = _reduction(op.name, a, ("batchmean",) if op.name == "kl_div" else ())
    per_element, denominator, dtype = LOSSES[op.name](op.name, a)
    if isinstance(denominator, tuple):           # kl_div's ("batch", size): 'batchmean' divides by it
        (_, batch), denominator = denominator, None
        if reduction == "batchmean":
            return call("to", call("div", call("sum", per_element), float(batch)), dtype)
    return call("to", _reduce(per_element, reduction, denominator), dtype)


# ---------------------------------------------------------------- distances

@builder("distance")
def distance(op: OpDef, schema: Schema, a: Args) -> Node:
    if op.name == "pdist":
        return _pdist(op.name, a)
    x1, x2 = a["x1"], a["x2"]
    args = {"x1": x1, "x2": x2}
    _floating(op.name, args)
    a1, a2 = _broadcast(op.name, in_opmath(x1), in_opmath(x2))
    dtype = x1.dtype if x1.dtype is x2.dtype else a1.dtype
    if op.name == "pairwise_distance":
        return call("to", _pairwise(a1, a2, a["p"], a["eps"], a["keepdim"]), dtype)
    from .errors import wrap_dim
    d = wrap_dim(op.name, a["dim"], a1.ndim, args)
    eps = float(a["eps"])
    n1 = call("clamp_min", call("norm", a1, 2.0, [d], True), eps)
    n2 = call("clamp_min", call("norm", a2, 2.0, [d], True), eps)
    return call("to", call("sum", call("mul", call("div", a1, n1), call("div", a2, n2)), d), dtype)


def _pdist(op: str, a: Args) -> Node:
    x, p = a["self"], float(a["p"])
    args = {"input": x}
    if x.ndim != 2:
        raise op_error(RuntimeError, op, f"pdist only supports 2D tensors, got: {x.ndim}D", args)
    _floating(op, args)
    if p < 0:
        raise op_error(RuntimeError, op, "pdist only supports non-negative p values", args)
    n = x.shape[0]
    i, j = np.triu_indices(n, 1)
    if i.size == 0:
        return call("zeros", (0,), dtype=x.dtype)
    pick = lambda idx: call("index_select", in_opmath(x), 0, Node.from_buffer(idx.astype(np.int64), (idx.size,), D.int64))  # noqa: E731
    return call("to", call("norm", call("sub", pick(i), pick(j)), p, [1]), x.dtype)


# ---------------------------------------------------------------- one_hot

@builder("one_hot")
def one_hot(op: OpDef, schema: Schema, a: Args) -> Node:
    """Row t of the identity for every class index t: a bounds-checked row lookup, so a negative or
    too-large class raises when the program runs (torch checks the same)."""
    tensor, classes = a["self"], a["num_classes"]
    x = as_node(tensor)
    if x.dtype is not D.int64:
        raise op_error(RuntimeError, op.name, f"one_hot is only applicable to index tensor of dtype int64, got "
                       f"{x.dtype.name}", {"self": x})
    if classes == -1:
        if x.numel == 0:
            raise op_error(RuntimeError, op.name, "Can not infer total number of classes from empty tensor.",
                           {"self": x})
        if not hasattr(tensor, "max"):
            raise op_error(RuntimeError, op.name, "num_classes=-1 needs the data; pass num_classes", {"self": x})
        classes = int(tensor.max().item()) + 1   # a sync: the class count comes from the data
    if classes < 0:
        raise op_error(RuntimeError, op.name, f"num_classes should be positive, got {classes}", {"self": x})
    eye = call("eye", classes, dtype=D.int64)
    rows = call("index_select", eye, 0, call("reshape", x, (-1,)))
    return call("reshape", rows, tuple(x.shape) + (classes,))

"""Decompositions of the nn composites into primitives (see the package docstring for the rules).

Every form computes in the opmath dtype (float32 for half types) and casts back once at the end:
softmax subtracts the row max, norms centre before squaring, losses pick the target's log-prob
with a bounds-checked gather (an out-of-range class raises), attention masks with -inf before softmax.
"""
from __future__ import annotations

import math

import numpy as np

from ...ir import dtypes as D
from ...ir import precision
from ...ir.build import call as B
from ...ir.build_linalg import matmul_node
from ...ir.build_nn import attention_weights
from ...ir.node import Node
from . import LIBRARY_FORMS, cast, decomposes, opmath


# ---------------------------------------------------------------- softmax family

def _shifted(x: Node, dim: int) -> Node:
    """x minus its max along dim (exp of it cannot overflow); empty tensors have no max to take."""
    if x.numel == 0:
        return x
    return B("sub", x, B("amax", x, dim, True))


def log_softmax_of(x: Node, dim: int) -> Node:
    shifted = _shifted(x, dim)
    return B("sub", shifted, B("log", B("sum", B("exp", shifted), dim, True)))


def softmax_of(x: Node, dim: int) -> Node:
    e = B("exp", _shifted(x, dim))
    return B("div", e, B("sum", e, dim, True))


def _input(self: Node, dtype) -> Node:
    return opmath(B("to", self, dtype) if dtype is not None else self)


@decomposes("softmax")
def softmax(node: Node, self: Node, dim: int, dtype=None) -> Node:
    return cast(softmax_of(_input(self, dtype), dim), node.dtype)


@decomposes("log_softmax")
def log_softmax(node: Node, self: Node, dim: int, dtype=None) -> Node:
    return cast(log_softmax_of(_input(self, dtype), dim), node.dtype)


# ---------------------------------------------------------------- norms

def _mean(x: Node, dims: list[int]) -> Node:
    """Mean over dims, kept as size 1 (sum times 1/n: no mean primitive needed)."""
    n = math.prod(x.shape[d] for d in dims)
    return B("mul", B("sum", x, dims, True), 1.0 / n if n else math.nan)


def _affine(y: Node, weight: Node | None, bias: Node | None) -> Node:
    if weight is not None:
        y = B("mul", y, opmath(weight))
    if bias is not None:
        y = B("add", y, opmath(bias))
    return y


@decomposes("layer_norm")
def layer_norm(node: Node, self: Node, normalized_shape, weight=None, bias=None, eps: float = 1e-5) -> Node:
    x = opmath(self)
    dims = list(range(x.ndim - len(normalized_shape), x.ndim))
    centred = B("sub", x, _mean(x, dims))
    var = _mean(B("mul", centred, centred), dims)            # biased, as torch's layer_norm
    y = B("mul", centred, B("rsqrt", B("add", var, eps)))
    return cast(_affine(y, weight, bias), node.dtype)


@decomposes("rms_norm")
def rms_norm(node: Node, self: Node, normalized_shape, weight=None, eps=None) -> Node:
    x = opmath(self)
    if eps is None:                                          # torch: machine epsilon of the opmath dtype
        eps = float(np.finfo(x.dtype.np).eps)
    dims = list(range(x.ndim - len(normalized_shape), x.ndim))
    y = B("mul", x, B("rsqrt", B("add", _mean(B("mul", x, x), dims), eps)))
    return cast(_affine(y, weight, None), node.dtype)


# ---------------------------------------------------------------- linear

@decomposes("linear")
def linear(node: Node, self: Node, weight: Node, bias=None) -> Node:
    y = matmul_node(self, B("t", weight), precision.tf32(node.attrs))     # (decided at the call: ir/precision.py)
    return y if bias is None else B("add", y, bias)


# ---------------------------------------------------------------- losses

def _class_dim(x: Node) -> int:
    return 0 if x.ndim == 1 else 1


def _per_class(w: Node, x: Node) -> Node:
    """A [C] weight shaped to broadcast along x's class dim."""
    trailing = x.ndim - _class_dim(x) - 1
    return w if trailing == 0 else B("reshape", w, tuple(w.shape) + (1,) * trailing)


def _reduce(loss: Node, reduction: str, denominator: Node | float | None = None) -> Node:
    if reduction == "none":
        return loss
    total = B("sum", loss)
    if reduction == "sum":
        return total
    if isinstance(denominator, Node):
        return B("div", total, denominator)
    return B("mul", total, 1.0 / denominator if denominator else math.nan)


@decomposes("cross_entropy")
def cross_entropy(node: Node, self: Node, target: Node, weight=None, size_average=None, ignore_index: int = -100,
                  reduce=None, reduction: str = "mean", label_smoothing: float = 0.0) -> Node:
    cdim = _class_dim(self)
    lp = log_softmax_of(opmath(self), cdim)
    w = None if weight is None else _per_class(opmath(weight), self)
    weighted = lp if w is None else B("mul", lp, w)
    classes = self.shape[cdim]
    if target.dtype.is_floating_point:
        loss = _probability_target(weighted, opmath(target), cdim, classes, label_smoothing)
        return cast(_reduce(loss, reduction, self.numel / classes if classes else 0), node.dtype)
    valid = B("ne", target, ignore_index)
    pick = _picker(target, valid, cdim)
    nll = B("where", valid, B("neg", pick(weighted)), 0.0)
    per_item_weight = valid if w is None else B("where", valid, pick(B("expand", w, tuple(self.shape))), 0.0)
    denominator = B("sum", per_item_weight, dtype=lp.dtype)
    loss = _reduce(nll, reduction, denominator)
    if label_smoothing > 0.0:
        smooth = B("where", valid, B("neg", B("sum", weighted, cdim)), 0.0)
        loss = B("add", B("mul", loss, 1.0 - label_smoothing),
                 B("mul", _reduce(smooth, reduction, denominator), label_smoothing / classes))
    return cast(loss, node.dtype)


def _picker(target: Node, valid: Node, cdim: int):
    """A function reading values[..., target, ...] along the class dim for every item.

    Ignored items read class 0 instead; every other target goes through the bounds-checked gather,
    so an out-of-range class raises when the program runs (torch: "Target 5 is out of bounds")
    rather than reading outside the row or silently contributing nothing.
    """
    index = B("unsqueeze", B("where", valid, B("to", target, D.int64), 0), cdim)
    return lambda values: B("squeeze", _target_gather(values, cdim, index), cdim)


def _target_gather(values: Node, cdim: int, index: Node) -> Node:
    """gather whose out-of-range error is torch's cross_entropy one (the user wrote no gather)."""
    g = B("gather", values, cdim, index)
    return Node(g.op, g.inputs, {**g.attrs, "bounds_error": "Target {index} is out of bounds."}, g.shape, g.dtype)


def _probability_target(weighted_lp: Node, target: Node, cdim: int, classes: int, smoothing: float) -> Node:
    if smoothing > 0.0:
        target = B("add", B("mul", target, 1.0 - smoothing), smoothing / classes)
    return B("neg", B("sum", B("mul", weighted_lp, target), cdim))


@decomposes("mse_loss")
def mse_loss(node: Node, self: Node, target: Node, size_average=None, reduce=None, reduction: str = "mean",
             weight=None) -> Node:
    d = B("sub", opmath(self), opmath(target))
    sq = B("mul", d, d)
    if weight is None:
        return cast(_reduce(sq, reduction, sq.numel), node.dtype)
    sq = B("mul", sq, opmath(weight))
    return cast(_reduce(sq, reduction, B("sum", opmath(weight))), node.dtype)


# ---------------------------------------------------------------- attention

@decomposes("scaled_dot_product_attention")
def scaled_dot_product_attention(node: Node, query: Node, key: Node, value: Node, attn_mask=None,
                                 dropout_p: float = 0.0, is_causal: bool = False, scale=None,
                                 enable_gqa: bool = False) -> Node:
    q, k, v = opmath(query), opmath(key), opmath(value)
    mask = attn_mask if attn_mask is None or attn_mask.dtype.is_bool else opmath(attn_mask)
    tf32 = precision.tf32(node.attrs)           # (decided at the call: ir/precision.py)
    return cast(matmul_node(attention_weights(q, k, mask, is_causal, scale, tf32), v, tf32), node.dtype)


FUSED_ATTENTION_DTYPES = (D.float32, D.float16, D.bfloat16)


def _plain(x) -> bool:
    return type(x) in (bool, int, float)     # not a runtime scalar (a pass must not read those)


def fused_attention_form(node: Node) -> bool:
    """Whether this sdpa means exactly what one fused attention call computes (MLX's
    mx.fast.scaled_dot_product_attention, run whole by the MLX backends): q, k, v of shapes
    (B, H, L, E), (B, H, S, E), (B, H, S, Ev) in one float32/half dtype; no mask, or the causal one
    with as many queries as keys (MLX aligns its causal mask bottom-right and torch top-left: they
    agree only when L == S); no dropout, no grouped heads, a plain scale."""
    a = node.attrs
    if len(node.inputs) != 3 or a.get("attn_mask") is not None:
        return False
    if not (_plain(a["dropout_p"]) and a["dropout_p"] == 0 and _plain(a["is_causal"]) and a["enable_gqa"] is False):
        return False
    if a["scale"] is not None and not _plain(a["scale"]):
        return False
    q, k, v = node.inputs
    if not (q.ndim == k.ndim == v.ndim == 4 and 0 not in q.shape + k.shape + v.shape):
        return False
    if not (q.shape[:2] == k.shape[:2] == v.shape[:2] and q.shape[3] == k.shape[3] and k.shape[2] == v.shape[2]):
        return False
    if a["is_causal"] and q.shape[2] != k.shape[2]:
        return False
    return q.dtype in FUSED_ATTENTION_DTYPES and q.dtype is k.dtype is v.dtype is node.dtype


LIBRARY_FORMS["scaled_dot_product_attention"] = fused_attention_form

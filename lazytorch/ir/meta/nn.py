"""Meta rules of the nn composites: softmax, norms, linear, losses, attention and embedding.

Each rule checks its arguments the way torch does (and names what would be valid), normalises
them in place (wrapped dims, tuples) and returns the result's shape and dtype.
"""
from __future__ import annotations

from .. import dtypes as D
from ..dtypes import DType
from ..errors import given, op_error, wrap_dim
from ..node import Node
from ..registry import OpDef
from . import Args, Shape, broadcast_shapes, rule
from .linalg import check_operands

REDUCTIONS = ("none", "mean", "sum")


def _floating(op: str, args: dict, what: str = "input") -> None:
    for name, n in args.items():
        if isinstance(n, Node) and not n.dtype.is_floating_point:
            raise op_error(TypeError, op, f"{name} has dtype {n.dtype.name}, but a floating point {what} is "
                           f"required", args)


def _reduction(op: str, a: Args) -> str:
    if a.get("size_average") is not None or a.get("reduce") is not None:
        raise op_error(ValueError, op, "size_average and reduce are deprecated and not supported", None,
                       "use reduction='none', 'mean' or 'sum'")
    if a["reduction"] not in REDUCTIONS:
        raise op_error(ValueError, op, f"reduction '{a['reduction']}' is not valid", None,
                       f"valid: {', '.join(REDUCTIONS)}")
    return a["reduction"]


def softmax_dim(ndim: int) -> int:
    """torch's legacy implicit dim of softmax when dim=None."""
    return 0 if ndim in (0, 1, 3) else 1


@rule("softmax")
def softmax(op: OpDef, a: Args) -> tuple[Shape, DType]:
    x: Node = a["self"]
    dim = softmax_dim(x.ndim) if a["dim"] is None else a["dim"]
    a["dim"] = wrap_dim(op.name, dim, x.ndim, {"self": x})
    out = D.as_dtype(a["dtype"]) if a["dtype"] is not None else x.dtype
    if not out.is_floating_point:
        raise op_error(TypeError, op.name, f"dtype {out.name} is not supported", {"self": x},
                       "use a floating point input or pass dtype=")
    a["dtype"] = None if a["dtype"] is None else out
    return x.shape, out


def _normalized(op: str, a: Args) -> tuple[int, ...]:
    """Check normalized_shape against the input's trailing dims and weight/bias's shapes."""
    x: Node = a["self"]
    shape = (a["normalized_shape"],) if isinstance(a["normalized_shape"], int) else tuple(a["normalized_shape"])
    a["normalized_shape"] = shape
    args = {k: v for k, v in a.items() if isinstance(v, Node)}
    if not shape or len(shape) > x.ndim or tuple(x.shape[x.ndim - len(shape):]) != shape:
        raise op_error(RuntimeError, op, f"normalized_shape={list(shape)} does not match the input's trailing "
                       f"dims {list(x.shape)}", args, f"expected an input of shape [*, {', '.join(map(str, shape))}]"
                       if shape else "normalized_shape must have at least one dim")
    for name in ("weight", "bias"):
        t = a.get(name)
        if t is not None and tuple(t.shape) != shape:
            raise op_error(RuntimeError, op, f"{name} of shape {list(t.shape)} must have normalized_shape "
                           f"{list(shape)}", args)
    _floating(op, args)
    return shape


@rule("layer_norm", "rms_norm")
def layer_norm(op: OpDef, a: Args) -> tuple[Shape, DType]:
    _normalized(op.name, a)
    return a["self"].shape, a["self"].dtype


@rule("linear")
def linear(op: OpDef, a: Args) -> tuple[Shape, DType]:
    x, w, b = a["self"], a["weight"], a["bias"]
    args = given(input=x, weight=w, bias=b)
    if w.ndim > 2:
        raise op_error(RuntimeError, op.name, f"weight must be 1-d or 2-d, got {w.ndim}-d", args,
                       "weight has shape [out_features, in_features]")
    dtype = check_operands(op.name, x, w)
    if x.ndim == 0 or x.shape[-1] != w.shape[-1]:
        raise op_error(RuntimeError, op.name, f"input {list(x.shape)} and weight {list(w.shape)} cannot be "
                       f"multiplied", args, "input's last dim must equal weight's in_features (its last dim)")
    shape = tuple(x.shape[:-1]) + tuple(w.shape[:-1])
    if b is not None:
        if b.dtype is not dtype:
            raise op_error(RuntimeError, op.name, f"bias has dtype {b.dtype.name}, but input and weight "
                           f"{dtype.name}", args)
        out = broadcast_shapes(op.name, b.shape, shape, args=args)
        if out != shape:
            raise op_error(RuntimeError, op.name, f"bias of shape {list(b.shape)} does not broadcast to the "
                           f"output shape {list(shape)}", args)
    return shape, dtype


@rule("cross_entropy")
def cross_entropy(op: OpDef, a: Args) -> tuple[Shape, DType]:
    x, t, w = a["self"], a["target"], a["weight"]
    args = given(input=x, target=t, weight=w)
    reduction = _reduction(op.name, a)
    _floating(op.name, {"input": x})
    if x.ndim == 0:
        raise op_error(RuntimeError, op.name, "input must have a class dim (shape [C] or [N, C, ...])", args)
    classes = x.shape[0] if x.ndim == 1 else x.shape[1]
    if w is not None and tuple(w.shape) != (classes,):
        raise op_error(RuntimeError, op.name, f"weight must have shape [{classes}] (one per class)", args)
    if not 0.0 <= a["label_smoothing"] <= 1.0:
        raise op_error(ValueError, op.name, f"label_smoothing={a['label_smoothing']} is not in [0, 1]", args)
    per_item = () if x.ndim == 1 else x.shape[:1] + x.shape[2:]
    if t.dtype.is_floating_point:                # class probabilities, shaped like the input
        if tuple(t.shape) != tuple(x.shape) or t.dtype is not x.dtype:
            raise op_error(RuntimeError, op.name, "a probabilities target must have the input's shape and dtype",
                           args, "or pass class indices of shape [N, ...] (an integer dtype)")
    elif t.dtype.category != D.INTEGER or tuple(t.shape) != per_item:
        raise op_error(RuntimeError, op.name, f"class-index target must be an integer tensor of shape "
                       f"{list(per_item)}", args, "or class probabilities shaped like the input")
    return (per_item if reduction == "none" else ()), x.dtype


@rule("mse_loss")
def mse_loss(op: OpDef, a: Args) -> tuple[Shape, DType]:
    x, t, w = a["self"], a["target"], a["weight"]
    args = given(input=x, target=t, weight=w)
    reduction = _reduction(op.name, a)
    _floating(op.name, args)
    shape = broadcast_shapes(op.name, *(n.shape for n in args.values()), args=args)
    from . import promoted
    return (shape if reduction == "none" else ()), promoted(list(args.values()))


@rule("scaled_dot_product_attention")
def scaled_dot_product_attention(op: OpDef, a: Args) -> tuple[Shape, DType]:
    q, k, v, mask = a["query"], a["key"], a["value"], a["attn_mask"]
    args = {n: a[n] for n in ("query", "key", "value", "attn_mask") if a[n] is not None}
    if not 0.0 <= a["dropout_p"] <= 1.0:
        raise op_error(RuntimeError, op.name, f"dropout probability has to be between 0 and 1, but got "
                       f"{a['dropout_p']}", args)
    if a["enable_gqa"]:
        raise op_error(NotImplementedError, op.name, "enable_gqa=True is not supported", args)
    if q.ndim < 2 or k.ndim < 2 or v.ndim < 2:
        raise op_error(RuntimeError, op.name, "query, key and value need at least 2 dims ([..., L, E])", args)
    if len({q.dtype, k.dtype, v.dtype}) != 1:
        raise op_error(RuntimeError, op.name, "query, key and value must share one dtype", args)
    _floating(op.name, {"query": q})
    if q.shape[-1] != k.shape[-1] or k.shape[-2] != v.shape[-2]:
        raise op_error(RuntimeError, op.name, f"query [.., L, E], key [.., S, E] and value [.., S, Ev] do not "
                       f"fit: {list(q.shape)}, {list(k.shape)}, {list(v.shape)}", args)
    batch = broadcast_shapes(op.name, q.shape[:-2], k.shape[:-2], v.shape[:-2], args=args)
    scores = batch + (q.shape[-2], k.shape[-2])
    if mask is not None:
        if not (mask.dtype.is_bool or mask.dtype is q.dtype):
            raise op_error(RuntimeError, op.name, f"attn_mask has dtype {mask.dtype.name}", args,
                           f"use a bool mask or a float mask of dtype {q.dtype.name}")
        if broadcast_shapes(op.name, mask.shape, scores, args=args) != scores:
            raise op_error(RuntimeError, op.name, f"attn_mask of shape {list(mask.shape)} does not broadcast to "
                           f"the scores' shape {list(scores)}", args)
    if a["is_causal"] and mask is not None:
        raise op_error(ValueError, op.name, "pass either attn_mask or is_causal=True, not both", args)
    return batch + (q.shape[-2], v.shape[-1]), q.dtype


@rule("embedding")
def embedding(op: OpDef, a: Args) -> tuple[Shape, DType]:
    idx, w = a["self"], a["weight"]
    args = {"input": idx, "weight": w}
    if idx.dtype.category != D.INTEGER:
        raise op_error(TypeError, op.name, f"indices have dtype {idx.dtype.name}", args,
                       "indices must be an integer tensor (int32 or int64)")
    if w.ndim != 2:
        raise op_error(RuntimeError, op.name, f"weight must be 2-d [num_embeddings, dim], got {w.ndim}-d", args)
    if a["max_norm"] is not None:
        raise op_error(NotImplementedError, op.name, "max_norm (which rescales weight in place) is not supported",
                       args, "leave max_norm=None")
    pad = a["padding_idx"]
    if pad is not None:
        if not -w.shape[0] <= pad < w.shape[0]:
            raise op_error(IndexError, op.name, f"padding_idx {pad} is out of range for {w.shape[0]} embeddings",
                           args)
        a["padding_idx"] = pad % w.shape[0]
    return tuple(idx.shape) + (w.shape[1],), w.dtype

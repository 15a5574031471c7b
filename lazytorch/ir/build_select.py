"""Builders of sorting and selection (registry/sorting.yaml).

The order-dependent part is a `host_call` returning int64 indices along the dim (sort, topk,
kthvalue, median, mode, cummax/cummin; runtime/reference_ops/host_select.py); the values are then
`gather(self, dim, indices)`, so both outputs of `x.sort()` come from one host launch and one gather.
"""
from __future__ import annotations

from . import dtypes as D
from . import meta
from .build import Args, builder, call
from .errors import op_error, wrap_dim
from .host import host_call, host_value
from .node import Node
from .registry import OpDef
from .schema import Schema


def _dim(op: str, x: Node, dim: int) -> int:
    return wrap_dim(op, dim, x.ndim, {"self": x})


def _along(op: str, x0: Node, dim: int) -> tuple[int, Node]:
    """The wrapped dim, and x0 as at least 1-d (a 0-d input is one element along dim 0)."""
    return _dim(op, x0, dim), (call("reshape", x0, (1,)) if x0.ndim == 0 else x0)


def _finish(x0: Node, x: Node, idx: Node, d: int, keepdim: bool):
    """(values, indices): x's values at idx along d, with the 0-d promotion undone and the reduced
    dim dropped unless keepdim."""
    values = call("gather", x, d, idx)
    if x0.ndim == 0:
        return call("reshape", values, ()), call("reshape", idx, ())
    if not keepdim:
        return call("squeeze", values, d), call("squeeze", idx, d)
    return values, idx


def _check_sortable(op: str, x: Node) -> None:
    if x.dtype is D.bool_ and op in ("kthvalue", "median", "nanmedian", "quantile", "nanquantile"):
        raise op_error(RuntimeError, op, "not implemented for 'Bool'", {"self": x})


@builder("sort")
def sort(op: OpDef, schema: Schema, a: Args):
    x0 = a["self"]
    d, x = _along(op.name, x0, a["dim"])
    idx = host_call("argsort", (x,), x.shape, D.int64, dim=d, descending=bool(a["descending"]))
    if op.name == "argsort":
        return idx if x0.ndim else call("reshape", idx, ())
    return _finish(x0, x, idx, d, True)


@builder("msort")
def msort(op: OpDef, schema: Schema, a: Args):
    x = a["self"]
    return call("sort", x, 0)[0] if x.ndim else x


@builder("topk")
def topk(op: OpDef, schema: Schema, a: Args):
    x0, k = a["self"], a["k"]
    d, x = _along(op.name, x0, a["dim"])
    if not 0 <= k <= x.shape[d]:
        raise op_error(RuntimeError, op.name, f"selected index k={k} is out of range for dim {d} of size "
                       f"{x.shape[d]}", {"self": x0}, f"k must be in 0..{x.shape[d]}")
    shape = x.shape[:d] + (k,) + x.shape[d + 1:]
    idx = host_call("topk", (x,), shape, D.int64, k=k, dim=d, largest=bool(a["largest"]))
    return _finish(x0, x, idx, d, True)


def _reduced_index(x: Node, d: int, fn: str, **params) -> Node:
    shape = x.shape[:d] + (1,) + x.shape[d + 1:]
    return host_call(fn, (x,), shape, D.int64, dim=d, **params)


@builder("kthvalue")
def kthvalue(op: OpDef, schema: Schema, a: Args):
    x0, k = a["self"], a["k"]
    _check_sortable(op.name, x0)
    d, x = _along(op.name, x0, a["dim"])
    if not 1 <= k <= x.shape[d]:
        raise op_error(IndexError, op.name, f"k={k} is out of range for dim {d} of size {x.shape[d]}", {"self": x0},
                       f"k must be in 1..{x.shape[d]}")
    idx = _reduced_index(x, d, "kthvalue", k=k)
    return _finish(x0, x, idx, d, a["keepdim"])


@builder("median")
def median(op: OpDef, schema: Schema, a: Args):
    x0 = a["self"]
    _check_sortable(op.name, x0)
    ignore_nan = op.name == "nanmedian"
    if "dim" not in a:                                 # the full reduction: the value only
        if x0.numel == 0:
            return call("full", (), float("nan"), dtype=x0.dtype)
        flat = call("reshape", x0, (-1,))
        idx = _reduced_index(flat, 0, "median", ignore_nan=ignore_nan)
        return call("reshape", call("gather", flat, 0, idx), ())
    d, x = _along(op.name, x0, a["dim"])
    if x.shape[d] == 0:
        raise op_error(IndexError, op.name, f"dim {d} is empty: median of an empty dimension is undefined",
                       {"self": x0})
    idx = _reduced_index(x, d, "median", ignore_nan=ignore_nan)
    return _finish(x0, x, idx, d, a["keepdim"])


@builder("mode")
def mode(op: OpDef, schema: Schema, a: Args):
    x0 = a["self"]
    d, x = _along(op.name, x0, a["dim"])
    if x.shape[d] == 0:
        raise op_error(IndexError, op.name, f"dim {d} is empty", {"self": x0})
    idx = _reduced_index(x, d, "mode")
    return _finish(x0, x, idx, d, a["keepdim"])


@builder("cumextreme")
def cumextreme(op: OpDef, schema: Schema, a: Args):
    x0 = a["self"]
    d, x = _along(op.name, x0, a["dim"])
    idx = host_call("cumextreme", (x,), x.shape, D.int64, dim=d, maximum=op.name == "cummax")
    return _finish(x0, x, idx, d, True)


@builder("scan_host")
def scan_host(op: OpDef, schema: Schema, a: Args):
    """cumprod and logcumsumexp: a running product / log-sum-exp computed on the host."""
    x = a["self"]
    d = _dim(op.name, x, a["dim"])
    if op.name == "logcumsumexp":
        if not x.dtype.is_floating_point:
            raise op_error(RuntimeError, op.name, f"not implemented for '{x.dtype.name}'", {"self": x},
                           "logcumsumexp needs a floating point tensor")
        return host_call("logcumsumexp", (x,), x.shape, x.dtype, dim=d)
    dtype = D.as_dtype(a["dtype"]) if a.get("dtype") is not None else \
        (D.int64 if not x.dtype.is_floating_point else x.dtype)
    src = x if x.dtype is dtype else call("to", x, dtype)
    return host_call("cumprod", (src,), x.shape, dtype, dim=d)


@builder("searchsorted")
def searchsorted(op: OpDef, schema: Schema, a: Args):
    if op.name == "bucketize":
        seq, values = a["boundaries"], a["self"]
        if seq.ndim != 1:
            raise op_error(RuntimeError, op.name, f"boundaries tensor must be 1 dimension, but got dim({seq.ndim})",
                           {"boundaries": seq})
        right, sorter = a["right"], None
    else:
        seq, values, sorter = a["sorted_sequence"], a["self"], a["sorter"]
        right = a["right"] or a["side"] == "right"
        if a["side"] == "left" and a["right"]:
            raise op_error(RuntimeError, op.name, "side and right can't be set to opposites, got side of left "
                           "while right was True", {"sorted_sequence": seq})
        if seq.ndim > 1 and (values.ndim != seq.ndim or values.shape[:-1] != seq.shape[:-1]):
            raise op_error(RuntimeError, op.name, f"boundaries and input should have the same leading dims, got "
                           f"{list(seq.shape)} and {list(values.shape)}", {"sorted_sequence": seq, "self": values},
                           "use a 1-D sorted_sequence to search every value in it")
    if seq.ndim == 0:
        raise op_error(RuntimeError, op.name, "boundaries tensor should have positive dimension", {"sorted_sequence": seq})
    dtype = D.int32 if a["out_int32"] else D.int64
    common = meta.promoted([seq, values])
    seq_c = seq if seq.dtype is common else call("to", seq, common)
    val_c = values if values.dtype is common else call("to", values, common)
    if sorter is not None:
        return host_call("searchsorted_sorter", (seq_c, val_c, sorter), values.shape, dtype, right=bool(right))
    return host_call("searchsorted", (seq_c, val_c), values.shape, dtype, right=bool(right))


@builder("quantile")
def quantile(op: OpDef, schema: Schema, a: Args):
    x, q = a["self"], a["q"]
    if not x.dtype.is_floating_point:
        raise op_error(RuntimeError, op.name, f"input tensor must be either float or double dtype, got "
                       f"{x.dtype.name}", {"self": x})
    interpolation = a["interpolation"]
    if interpolation not in ("linear", "lower", "higher", "midpoint", "nearest"):
        raise op_error(RuntimeError, op.name, f"interpolation must be one of linear, lower, higher, midpoint or "
                       f"nearest, got '{interpolation}'", {"self": x})
    q_node = q if isinstance(q, Node) else call("full", (), float(q), dtype=x.dtype)
    if q_node.ndim > 1:
        raise op_error(RuntimeError, op.name, f"q must be a scalar or 1D tensor, got {q_node.ndim}-d", {"q": q_node})
    dim = None if a["dim"] is None else _dim(op.name, x, a["dim"])
    keep = a["keepdim"]
    reduced = meta.reduced_shape(x.shape, tuple(range(x.ndim)) if dim is None else (dim,), keep)
    shape = tuple(q_node.shape) + reduced
    qv = q_node if q_node.dtype is x.dtype else call("to", q_node, x.dtype)
    return host_call("quantile", (x, qv), shape, x.dtype, dim=dim, keepdim=bool(keep), out_shape=shape,
                     interpolation=interpolation, ignore_nan=op.name == "nanquantile")


@builder("multinomial")
def multinomial(op: OpDef, schema: Schema, a: Args) -> Node:
    """Draws now from lazytorch's seeded generator (manual_seed), reading the probabilities (a sync)."""
    import numpy as np

    from .creation import generator
    from .host import from_values
    p, n, replace = a["self"], a["num_samples"], a["replacement"]
    if p.ndim not in (1, 2) or not p.dtype.is_floating_point:
        raise op_error(RuntimeError, op.name, "prob_dist must be a 1 or 2 dim floating point tensor", {"self": p})
    if not replace and n > p.shape[-1]:
        raise op_error(RuntimeError, op.name, f"cannot sample n_sample={n} > prob_dist.size(-1)={p.shape[-1]} "
                       "samples without replacement", {"self": p})
    probs = np.asarray(host_value(p), dtype=np.float64).reshape(-1, p.shape[-1])
    if (probs < 0).any() or not np.isfinite(probs).all():
        raise op_error(RuntimeError, op.name, "probability tensor contains either inf, nan or element < 0", {"self": p})
    g = generator()
    rows = []
    for row in probs:
        total = row.sum()
        if total <= 0:
            raise op_error(RuntimeError, op.name, "invalid multinomial distribution (sum of probabilities <= 0)",
                           {"self": p})
        if not replace and (row > 0).sum() < n:
            raise op_error(RuntimeError, op.name, "invalid multinomial distribution (with replacement=False, "
                           "not enough non-negative category to sample)", {"self": p})
        rows.append(g.choice(len(row), size=n, replace=bool(replace), p=row / total))
    out = np.stack(rows) if rows else np.zeros((0, n), np.int64)
    return from_values(out.reshape(p.shape[:-1] + (n,)), D.int64)

"""Builders of scatter and indexed updates (registry/scatter.yaml).

scatter/scatter_add/scatter_reduce are one `host_call` (runtime/reference_ops/host_scatter.py:
deterministic, repeated indices accumulate in order).  The index_* ops are scatters with the 1-D
index expanded over the source's shape; select_scatter is a `where` over an iota (it fuses);
take and take_along_dim are the `index` and `gather` primitives on a flattened or broadcast input.
"""
from __future__ import annotations

from . import dtypes as D
from .build import Args, builder, call
from .creation import fill, iota
from .errors import op_error, wrap_dim
from .host import host_call
from .node import Node
from .registry import OpDef
from .schema import Schema

REDUCES = ("sum", "prod", "mean", "amax", "amin")
_LEGACY = {"add": "sum", "multiply": "prod"}


def _index_dtype(op: str, index: Node) -> None:
    if index.dtype not in (D.int64, D.int32):
        raise op_error(RuntimeError, op, f"expected index to have dtype int64, got {index.dtype.name}", {"index": index},
                       "pass a long tensor of indices")


def check_scatter(op: str, x: Node, d: int, index: Node, src: Node | None) -> None:
    args = {"self": x, "index": index} | ({"src": src} if src is not None else {})
    _index_dtype(op, index)
    if index.ndim != x.ndim and not (index.ndim <= 1 and x.ndim <= 1):
        raise op_error(RuntimeError, op, f"index ({index.ndim}-d) and self ({x.ndim}-d) must have the same number "
                       "of dimensions", args)
    if src is not None and src.ndim != index.ndim and not (index.ndim <= 1 and src.ndim <= 1):
        raise op_error(RuntimeError, op, f"index ({index.ndim}-d) and src ({src.ndim}-d) must have the same number "
                       "of dimensions", args)
    for i, s in enumerate(index.shape):
        if src is not None and src.ndim and s > src.shape[i]:
            raise op_error(RuntimeError, op, f"size of index dim {i} ({s}) is larger than src's ({src.shape[i]})", args)
        if i != d and x.ndim and s > x.shape[i]:
            raise op_error(RuntimeError, op, f"size of index dim {i} ({s}) is larger than self's ({x.shape[i]}) "
                           f"outside dim {d}", args)


def scatter_node(op: str, x: Node, d: int, index: Node, src: Node, reduce: str | None, include_self: bool = True) -> Node:
    src = src if src.dtype is x.dtype else call("to", src, x.dtype)
    return host_call("scatter", (x, index, src), x.shape, x.dtype, dim=d, reduce=reduce, include_self=include_self)


@builder("scatter")
def scatter(op: OpDef, schema: Schema, a: Args) -> Node:
    x, index = a["self"], a["index"]
    d = wrap_dim(op.name, a["dim"], x.ndim, {"self": x})
    src = a.get("src")
    if src is None:
        src = fill(index.shape, a["value"].value if isinstance(a["value"], Node) and a["value"].op == "scalar"
                   else a["value"], x.dtype) if not isinstance(a["value"], Node) or a["value"].op == "scalar" \
            else call("expand", call("to", a["value"], x.dtype), index.shape)
    elif src.dtype is not x.dtype:
        raise op_error(RuntimeError, op.name, f"expected self and src to have the same dtype, got {x.dtype.name} and "
                       f"{src.dtype.name}", {"self": x, "src": src})
    check_scatter(op.name, x, d, index, src)
    if op.name == "scatter_add":
        reduce, include_self = "sum", True
    elif op.name == "scatter_reduce":
        reduce, include_self = a["reduce"], a["include_self"]
        if reduce not in REDUCES:
            raise op_error(RuntimeError, op.name, f"reduce argument must be one of {', '.join(REDUCES)}, got "
                           f"'{reduce}'", {"self": x})
    else:
        reduce, include_self = a.get("reduce"), True
        if reduce is not None:
            if reduce not in _LEGACY:
                raise op_error(RuntimeError, op.name, f"reduce argument must be either add or multiply, got '{reduce}'",
                               {"self": x})
            reduce = _LEGACY[reduce]
    return scatter_node(op.name, x, d, index, src, reduce, include_self)


def _expanded_index(op: str, d: int, index: Node, shape: tuple[int, ...]) -> Node:
    """A 1-D index along dim d, broadcast to `shape` (the source's)."""
    if index.ndim > 1:
        raise op_error(IndexError, op, f"index must be a vector (at most 1-d), got {index.ndim}-d", {"index": index})
    _index_dtype(op, index)
    if not shape:
        return call("reshape", index, ())
    n = index.numel
    view = (1,) * d + (n,) + (1,) * (len(shape) - d - 1)
    return call("expand", call("reshape", index, view), shape)


def _check_source(op: str, x: Node, d: int, index: Node, source: Node) -> None:
    n = index.numel
    expect = x.shape[:d] + (n,) + x.shape[d + 1:] if x.ndim else ((n,) if source.ndim else ())
    if tuple(source.shape) != tuple(expect) and not (x.ndim == 0 and source.numel == 1):
        raise op_error(RuntimeError, op, f"source of shape {list(source.shape)} does not match self {list(x.shape)} "
                       f"with dim {d} of size {n} (the index's length)", {"self": x, "index": index, "source": source},
                       f"source must have shape {list(expect)}")


@builder("index_update")
def index_update(op: OpDef, schema: Schema, a: Args) -> Node:
    x, index = a["self"], a["index"]
    d = wrap_dim(op.name, a["dim"], x.ndim, {"self": x})
    if op.name == "index_fill":
        v = a["value"]
        if isinstance(v, Node) and v.ndim != 0:
            raise op_error(RuntimeError, op.name, f"only supports a 0-dimensional value tensor, but got tensor with "
                           f"{v.ndim} dimension(s)", {"self": x, "value": v})
        shape = x.shape[:d] + (index.numel,) + x.shape[d + 1:] if x.ndim else ()
        src = call("expand", call("to", v, x.dtype), shape) if isinstance(v, Node) else fill(shape, v, x.dtype)
        idx = _expanded_index(op.name, d, index, shape)
        return scatter_node(op.name, x, d, _wrap_negative(idx, x, d), src, None)
    source = a["source"]
    if source.dtype is not x.dtype:
        raise op_error(RuntimeError, op.name, f"self ({x.dtype.name}) and source ({source.dtype.name}) must have the "
                       "same dtype", {"self": x, "source": source})
    _check_source(op.name, x, d, index, source)
    idx = _expanded_index(op.name, d, index, source.shape)
    if op.name == "index_copy":
        return scatter_node(op.name, x, d, idx, source, None)
    if op.name == "index_add":
        alpha = a["alpha"]
        if not (isinstance(alpha, (int, float)) and alpha == 1):
            source = call("mul", source, alpha)
        return scatter_node(op.name, x, d, idx, source, "sum")
    reduce = a["reduce"]
    if reduce not in ("prod", "mean", "amax", "amin"):
        raise op_error(RuntimeError, op.name, f"reduce argument must be one of prod, mean, amax, amin, got '{reduce}'",
                       {"self": x})
    return scatter_node(op.name, x, d, idx, source, reduce, a["include_self"])


def _wrap_negative(idx: Node, x: Node, d: int) -> Node:
    """index_fill accepts negative indices (they count from the end)."""
    n = x.shape[d] if x.ndim else 1
    return call("where", call("lt", idx, 0), call("add", idx, n), idx)


@builder("take")
def take(op: OpDef, schema: Schema, a: Args) -> Node:
    x, index = a["self"], a["index"]
    _index_dtype(op.name, index)
    flat = call("reshape", x, (-1,))
    if flat.shape[0] == 0 and index.numel:
        raise op_error(IndexError, op.name, "cannot take from an empty tensor", {"self": x, "index": index})
    return call("index", flat, (index,), (0,))


@builder("take_along_dim")
def take_along_dim(op: OpDef, schema: Schema, a: Args) -> Node:
    x, idx = a["self"], a["indices"]
    _index_dtype(op.name, idx)
    if a["dim"] is None:
        return call("gather", call("reshape", x, (-1,)), 0, call("reshape", idx, (-1,)))
    if x.ndim != idx.ndim:
        raise op_error(RuntimeError, op.name, f"input and indices should have the same number of dimensions, but got "
                       f"{x.ndim} and {idx.ndim}", {"self": x, "indices": idx})
    d = wrap_dim(op.name, a["dim"], x.ndim, {"self": x})
    from .meta import broadcast_shapes
    xs = list(x.shape)
    is_ = list(idx.shape)
    xs[d] = is_[d] = 1
    common = broadcast_shapes(op.name, tuple(xs), tuple(is_), args={"self": x, "indices": idx})
    xb = call("expand", x, common[:d] + (x.shape[d],) + common[d + 1:])
    ib = call("expand", idx, common[:d] + (idx.shape[d],) + common[d + 1:])
    ib = call("where", call("lt", ib, 0), call("add", ib, x.shape[d]), ib)   # negative indices count from the end
    return call("gather", xb, d, ib)


@builder("put")
def put(op: OpDef, schema: Schema, a: Args) -> Node:
    x, index, source = a["self"], a["index"], a["source"]
    _index_dtype(op.name, index)
    if index.numel != source.numel:
        raise op_error(RuntimeError, op.name, f"expected source and index to have the same number of elements, got "
                       f"{source.numel} and {index.numel}", {"index": index, "source": source})
    if source.dtype is not x.dtype:
        source = call("to", source, x.dtype)
    return host_call("put", (x, index, source), x.shape, x.dtype, accumulate=bool(a["accumulate"]))


@builder("masked_scatter")
def masked_scatter(op: OpDef, schema: Schema, a: Args) -> Node:
    x, mask, source = a["self"], a["mask"], a["source"]
    if mask.dtype is not D.bool_:
        raise op_error(RuntimeError, op.name, f"expected mask to be bool, got {mask.dtype.name}", {"mask": mask})
    from .meta import broadcast_shapes
    shape = broadcast_shapes(op.name, x.shape, mask.shape, args={"self": x, "mask": mask})
    if source.dtype is not x.dtype:
        raise op_error(RuntimeError, op.name, f"self ({x.dtype.name}) and source ({source.dtype.name}) must have the "
                       "same dtype", {"self": x, "source": source})
    xb = x if x.shape == shape else call("expand", x, shape)
    return host_call("masked_scatter", (xb, mask, source), shape, x.dtype)


@builder("diagonal_scatter")
def diagonal_scatter(op: OpDef, schema: Schema, a: Args) -> Node:
    x, src = a["self"], a["src"]
    diag = call("diagonal", x, a["offset"], a["dim1"], a["dim2"])
    if diag.shape != src.shape:
        raise op_error(RuntimeError, op.name, f"src must have shape {list(diag.shape)} (the diagonal's), got "
                       f"{list(src.shape)}", {"self": x, "src": src})
    d1 = wrap_dim(op.name, a["dim1"], x.ndim, {"self": x})
    d2 = wrap_dim(op.name, a["dim2"], x.ndim, {"self": x})
    return host_call("diagonal_scatter", (x, call("to", src, x.dtype)), x.shape, x.dtype, offset=a["offset"],
                     dim1=d1, dim2=d2)


@builder("select_scatter")
def select_scatter(op: OpDef, schema: Schema, a: Args) -> Node:
    x, src = a["self"], a["src"]
    d = wrap_dim(op.name, a["dim"], x.ndim, {"self": x})
    n = x.shape[d]
    i = a["index"]
    if not -n <= i < n:
        raise op_error(IndexError, op.name, f"index {i} is out of range for dim {d} of size {n}", {"self": x})
    expect = x.shape[:d] + x.shape[d + 1:]
    if src.shape != expect:
        raise op_error(RuntimeError, op.name, f"src must have shape {list(expect)}, got {list(src.shape)}",
                       {"self": x, "src": src})
    here = call("eq", iota(tuple(s if k == d else 1 for k, s in enumerate(x.shape)), d), i % n)
    return call("where", here, call("unsqueeze", call("to", src, x.dtype), d), x)


@builder("slice_scatter")
def slice_scatter(op: OpDef, schema: Schema, a: Args) -> Node:
    x, src = a["self"], a["src"]
    d = wrap_dim(op.name, a["dim"], x.ndim, {"self": x})
    n = x.shape[d]
    start, end, step = slice(a["start"], a["end"], a["step"]).indices(n)
    if a["step"] <= 0:
        raise op_error(RuntimeError, op.name, f"slice step must be positive, got {a['step']}", {"self": x})
    count = len(range(start, end, step))
    expect = x.shape[:d] + (count,) + x.shape[d + 1:]
    if src.shape != expect:
        raise op_error(RuntimeError, op.name, f"src must have shape {list(expect)}, got {list(src.shape)}",
                       {"self": x, "src": src})
    return host_call("slice_scatter", (x, call("to", src, x.dtype)), x.shape, x.dtype, dim=d, start=start, end=end,
                     step=step)

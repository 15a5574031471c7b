"""Meta rules of the opaque shape-changing primitives: cat, gather, index_select.

They check everything knowable from shapes and dtypes at the call.  Index *values* are data, so
the reference implementations check their range when the program runs.
"""
from __future__ import annotations

from .. import dtypes as D
from ..dtypes import DType
from ..errors import op_error, wrap_dim
from ..node import Node
from ..promotion import DIM, result_type
from ..registry import OpDef
from . import Args, Shape, rule


def _is_legacy_empty(x: Node) -> bool:
    """torch skips 1-d tensors of size 0 in cat whatever the other shapes are."""
    return x.shape == (0,)


def _check_cat_shapes(op: str, tensors: tuple[Node, ...], dim: int) -> None:
    first = tensors[0]
    for i, t in enumerate(tensors[1:], start=1):
        named = {"tensors[0]": first, f"tensors[{i}]": t}
        if t.ndim != first.ndim:
            raise op_error(RuntimeError, op, f"tensors must have the same number of dims, got {first.ndim} "
                           f"and {t.ndim}", named)
        if any(a != b for d, (a, b) in enumerate(zip(first.shape, t.shape)) if d != dim):
            raise op_error(RuntimeError, op, f"sizes of tensors must match except in dim {dim}: "
                           f"tensor 0 has shape {list(first.shape)} and tensor {i} has shape {list(t.shape)}",
                           named)


@rule("cat")
def cat(op: OpDef, a: Args) -> tuple[Shape, DType]:
    """Concatenation along `dim`; normalises `tensors` (legacy empties dropped) and `dim` in place."""
    tensors: tuple[Node, ...] = tuple(a["tensors"])
    if not tensors:
        raise op_error(ValueError, op.name, "expected a non-empty list of tensors")
    for i, t in enumerate(tensors):
        if t.ndim == 0:
            raise op_error(RuntimeError, op.name, f"zero-dimensional tensor (at position {i}) cannot be "
                           "concatenated", {f"tensors[{i}]": t}, "unsqueeze it first, or use stack")
    dtype = result_type([(t.dtype, DIM) for t in tensors])
    kept = tuple(t for t in tensors if not _is_legacy_empty(t)) or tensors[:1]
    dim = wrap_dim(op.name, a["dim"], kept[0].ndim, {f"tensors[{i}]": t for i, t in enumerate(kept)})
    _check_cat_shapes(op.name, kept, dim)
    a["tensors"], a["dim"] = kept, dim
    shape = list(kept[0].shape)
    shape[dim] = sum(t.shape[dim] for t in kept)
    return tuple(shape), dtype


def _check_index_dtype(op: str, index: Node, allowed: tuple[DType, ...], args: dict) -> None:
    if index.dtype not in allowed:
        raise op_error(RuntimeError, op, f"expected dtype {' or '.join(d.name for d in allowed)} for index, "
                       f"got {index.dtype.name}", args)


@rule("gather")
def gather(op: OpDef, a: Args) -> tuple[Shape, DType]:
    """out[i][j] = self[index[i][j]][j] (dim 0): shaped like index, which may be smaller than self."""
    x, index = a["self"], a["index"]
    args = {"self": x, "index": index}
    a["dim"] = dim = wrap_dim(op.name, a["dim"], x.ndim, args)
    _check_index_dtype(op.name, index, (D.int32, D.int64), args)   # torch takes int32 too
    if max(index.ndim, 1) != max(x.ndim, 1):
        raise op_error(RuntimeError, op.name, f"index must have the same number of dims as self, got "
                       f"{index.ndim} and {x.ndim}", args)
    if index.numel:
        for d, (i, s) in enumerate(zip(index.shape, x.shape)):
            if d != dim and i > s:
                raise op_error(RuntimeError, op.name, f"size does not match at dim {d}: index "
                               f"{list(index.shape)} must be no larger than self {list(x.shape)} apart from "
                               f"dim {dim}", args)
    return index.shape, x.dtype


@rule("index_select")
def index_select(op: OpDef, a: Args) -> tuple[Shape, DType]:
    """self's slices at positions `index` (a vector or a scalar) along `dim`."""
    x, index = a["self"], a["index"]
    args = {"self": x, "index": index}
    a["dim"] = dim = wrap_dim(op.name, a["dim"], x.ndim, args)
    _check_index_dtype(op.name, index, (D.int32, D.int64), args)
    if index.ndim > 1:
        raise op_error(IndexError, op.name, "index must be a vector (0-d or 1-d)", args)
    if x.ndim == 0:
        if index.numel != 1:
            raise op_error(RuntimeError, op.name, f"an index into a 0-d tensor must have one value, got "
                           f"{index.numel}", args)
        return (), x.dtype
    shape = list(x.shape)
    shape[dim] = index.numel
    return tuple(shape), x.dtype

"""Meta rules of advanced indexing: the shapes `x[idx]` reads and `x[idx] = v` writes."""
from __future__ import annotations

from ..dtypes import DType
from ..errors import op_error
from ..node import Node
from ..registry import OpDef
from . import Args, Shape, broadcast_shapes, rule


def index_shape(op: str, x: Node, indices: tuple[Node, ...], dims: tuple[int, ...]) -> Shape:
    """Shape of x indexed at `dims` by the broadcast `indices` (the other dims are kept whole)."""
    args = {"self": x, **{f"indices[{i}]": n for i, n in enumerate(indices)}}
    if len(indices) != len(dims) or not indices:
        raise op_error(ValueError, op, f"needs one dim per index tensor, got {len(indices)} indices for dims "
                       f"{list(dims)}", args)
    if list(dims) != sorted(set(dims)) or dims[-1] >= x.ndim or dims[0] < 0:
        raise op_error(IndexError, op, f"dims {list(dims)} must be ascending, distinct dims of self", args,
                       f"valid dims are 0..{x.ndim - 1}")
    for n in indices:
        if n.dtype.category != 1:            # integer
            raise op_error(IndexError, op, f"tensors used as indices must be integer (or bool masks), got "
                           f"{n.dtype.name}", args)
    b = broadcast_shapes(op, *(n.shape for n in indices), args=args)
    rest = [s for d, s in enumerate(x.shape) if d not in dims]
    if list(dims) == list(range(dims[0], dims[0] + len(dims))):
        return x.shape[:dims[0]] + b + x.shape[dims[-1] + 1:]
    return b + tuple(rest)


@rule("index")
def index(op: OpDef, a: Args) -> tuple[Shape, DType]:
    x = a["self"]
    return index_shape(op.name, x, tuple(a["indices"]), tuple(a["dims"])), x.dtype


@rule("index_put")
def index_put(op: OpDef, a: Args) -> tuple[Shape, DType]:
    x, values = a["self"], a["values"]
    shape = index_shape(op.name, x, tuple(a["indices"]), tuple(a["dims"]))
    if broadcast_shapes(op.name, values.shape, shape, args={"self": x, "values": values}) != shape:
        raise op_error(RuntimeError, op.name, f"values of shape {list(values.shape)} cannot be broadcast to the "
                       f"indexed shape {list(shape)}", {"self": x, "values": values})
    return x.shape, x.dtype

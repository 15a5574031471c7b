"""Meta rules of linear algebra: matmul's shape (torch's 1-D and batch broadcasting rules) and dtype."""
from __future__ import annotations

from ..dtypes import DType
from ..errors import op_error
from ..node import Node
from ..registry import OpDef
from . import Args, Shape, broadcast_shapes, rule


def check_operands(op: str, a: Node, b: Node) -> DType:
    """Both operands share one numeric dtype (torch does not promote across a matmul)."""
    args = {"self": a, "other": b}
    if a.dtype is not b.dtype:
        raise op_error(RuntimeError, op, f"expected both operands to have the same dtype, but got "
                       f"{a.dtype.name} and {b.dtype.name}", args, "cast one operand with .to(dtype)")
    if a.dtype.is_bool:
        raise op_error(TypeError, op, "dtype bool is not supported", args, "use an integer or floating dtype")
    return a.dtype


def matmul_shape(op: str, a: Node, b: Node) -> Shape:
    """torch.matmul's result shape: 1-D operands are promoted to matrices and the added dim removed."""
    sa, sb = tuple(a.shape), tuple(b.shape)
    args = {"self": a, "other": b}
    if not sa or not sb:
        raise op_error(RuntimeError, op, f"both arguments need at least 1 dim, but they are {len(sa)}-d and "
                       f"{len(sb)}-d", args)
    ma = (1,) + sa if len(sa) == 1 else sa
    mb = sb + (1,) if len(sb) == 1 else sb
    if ma[-1] != mb[-2]:
        raise op_error(RuntimeError, op, f"shapes {list(sa)} and {list(sb)} cannot be multiplied "
                       f"({ma[-2]}x{ma[-1]} and {mb[-2]}x{mb[-1]})", args,
                       "the last dim of the first operand must equal the second-to-last dim (or only dim) "
                       "of the second")
    batch = broadcast_shapes(op, ma[:-2], mb[:-2], args=args)
    rows = (ma[-2],) if len(sa) > 1 else ()
    cols = (mb[-1],) if len(sb) > 1 else ()
    return batch + rows + cols


@rule("matmul")
def matmul(op: OpDef, a: Args) -> tuple[Shape, DType]:
    x, y = a["self"], a["other"]
    dtype = check_operands(op.name, x, y)
    return matmul_shape(op.name, x, y), dtype

"""Meta rules of casts and of ops whose output is shaped like their input."""
from __future__ import annotations

from .. import dtypes as D
from ..dtypes import DType
from ..errors import op_error, wrap_dim
from ..node import Node
from ..promotion import Promotion
from ..registry import OpDef
from . import Args, Shape, check_allowed, rule

@rule("cast")
def cast(op: OpDef, a: Args) -> tuple[Shape, DType]:
    """x.to(dtype): same shape; the dtype is a dtype (any spelling D.as_dtype takes) or a tensor's."""
    x: Node = a["self"]
    target = a["dtype"]
    target = getattr(target, "node", target)
    if isinstance(target, Node):
        return x.shape, target.dtype
    try:
        return x.shape, D.as_dtype(target)
    except TypeError:
        raise op_error(TypeError, op.name, f"{target!r} is not a dtype", {"self": x},
                       f"valid dtypes: {', '.join(d.name for d in D.ALL)}") from None


@rule("same")
def same(op: OpDef, a: Args) -> tuple[Shape, DType]:
    """Output like `self` (softmax-style ops, optionally with dtype=); dim is wrapped if present."""
    x: Node = a["self"]
    check_allowed(op, a, {"self": x})
    if "dim" in a and a["dim"] is not None:
        a["dim"] = wrap_dim(op.name, a["dim"], x.ndim, {"self": x})
    dtype = a.get("dtype")
    out = D.as_dtype(dtype) if dtype is not None else x.dtype
    if op.promotion is Promotion.INT_TO_FLOAT and not out.is_floating_point:
        out = D.default_float
    return x.shape, out



"""Meta rules of pointwise ops: broadcasting and type promotion."""
from __future__ import annotations

from .. import dtypes as D
from ..dtypes import DType
from ..errors import op_error, wrap_dim
from ..node import Node
from ..promotion import Promotion, elementwise_dtypes
from ..registry import OpDef
from . import Args, Shape, broadcast_shapes, check_allowed, normalize_dims, rank, reduced_shape, rule, tensor_args

@rule("pointwise")
def pointwise(op: OpDef, a: Args) -> tuple[Shape, DType]:
    nodes = tensor_args(op, a)
    check_allowed(op, a, nodes)
    shape = broadcast_shapes(op.name, *(n.shape for n in nodes.values()), args=nodes)
    if op.promotion is Promotion.KEEP:
        return shape, next(iter(nodes.values())).dtype
    _, out = elementwise_dtypes([(n.dtype, rank(n)) for n in nodes.values()], op.promotion)
    return shape, out


def compute_dtype(op: OpDef, nodes: list[Node]) -> DType:
    """The dtype a pointwise op computes in (its opmath dtype), used by decompositions and kernels."""
    if op.promotion is Promotion.KEEP:
        return nodes[0].dtype
    compute, _ = elementwise_dtypes([(n.dtype, rank(n)) for n in nodes], op.promotion)
    return compute



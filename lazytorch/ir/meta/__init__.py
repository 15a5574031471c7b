"""Meta rules: an op's output shape and dtype, computed from its arguments without data.

A rule takes the OpDef and the bound arguments (tensor arguments already as Nodes) and returns
(shape, dtype).  It may normalise arguments in place (wrap negative dims, fill in defaults) so
that nodes carry canonical attributes.  Invalid calls raise here, at the call, never at eval.
The registry names each op's rule; RULES maps those names to functions.  Rules live in the
modules of this package by family (pointwise.py, reduction.py, shape.py, ...); importing the
package registers them all.
"""
from __future__ import annotations

from typing import Any, Callable

from .. import dtypes as D
from ..dtypes import DType
from ..errors import op_error, wrap_dim
from ..node import Node
from ..promotion import DIM, SCALAR, ZERO_DIM, result_type
from ..registry import OpDef, registrar

Shape = tuple[int, ...]
Args = dict[str, Any]
RULES: dict[str, Callable[[OpDef, Args], tuple[Shape, DType]]] = {}
rule = registrar(RULES)


# ---------------------------------------------------------------- helpers

def rank(node: Node) -> int:
    """How a node takes part in promotion: Python scalars and 0-d tensors are 'weak'."""
    if node.op == "scalar" or node.op == "param" and node.attrs["kind"] == "scalar":
        return SCALAR
    return ZERO_DIM if not node.shape else DIM


def broadcast_shapes(op: str, *shapes: Shape, args: Args | None = None) -> Shape:
    first = shapes[0] if shapes else ()
    if all(s == first for s in shapes):                   # the common case, on every op built
        return tuple(first)
    ndim = max((len(s) for s in shapes), default=0)
    out = [1] * ndim
    for s in shapes:
        for i, size in enumerate(s, start=ndim - len(s)):
            if size == out[i] or size == 1:
                continue
            if out[i] == 1:
                out[i] = size
            else:
                raise op_error(RuntimeError, op, f"shapes {' and '.join(str(list(x)) for x in shapes)} "
                               f"cannot be broadcast together (dim {i - ndim}: {out[i]} vs {size})", args,
                               "sizes must match or be 1 in every dim, aligned from the right")
    return tuple(out)


TENSOR_TYPES = ("Tensor", "Tensor|Scalar", "Tensor[]")


def tensor_args(op: OpDef, a: Args) -> dict[str, Node]:
    """The operands that take part in promotion: the schema's `Tensor` parameters, in order."""
    schema = op.schemas[0]
    return {p.name: a[p.name] for p in schema.params
            if p.base in TENSOR_TYPES and p.name in a and isinstance(a[p.name], Node)}


def check_allowed(op: OpDef, a: Args, nodes: dict[str, Node]) -> None:
    names = {D.BOOL: "bool", D.INTEGER: "integer", D.FLOATING: "floating"}
    for n in nodes.values():
        if names[n.dtype.category] not in op.allow:
            raise op_error(TypeError, op.name, f"dtype {n.dtype.name} is not supported", nodes,
                           f"{op.name} accepts {' and '.join(sorted(op.allow))} dtypes")


def normalize_dims(op: str, dim, ndim: int, a: Args) -> tuple[int, ...]:
    """None means all dims; ints and tuples are wrapped and checked for repeats."""
    if dim is None:
        return tuple(range(ndim))
    dims = (dim,) if isinstance(dim, int) else tuple(dim)
    wrapped = tuple(wrap_dim(op, int(d), ndim, a) for d in dims)
    if len(set(wrapped)) != len(wrapped):
        raise op_error(RuntimeError, op, f"dim {dims} names a dimension more than once", a)
    if ndim == 0:
        return ()
    return tuple(sorted(wrapped))


def reduced_shape(shape: Shape, dims: tuple[int, ...], keepdim: bool) -> Shape:
    if keepdim:
        return tuple(1 if i in dims else s for i, s in enumerate(shape))
    return tuple(s for i, s in enumerate(shape) if i not in dims)


@rule("none")
def no_rule(op: OpDef, a: Args) -> tuple[Shape, DType]:
    raise NotImplementedError(f"{op.name}: no meta rule declared; it must be built by a builder")


def run(op: OpDef, a: Args) -> tuple[Shape, DType]:
    try:
        fn = RULES[op.meta]
    except KeyError:
        raise NotImplementedError(f"{op.name}: meta rule '{op.meta}' is not defined in ir/meta.py") from None
    return fn(op, a)


def promoted(nodes: list[Node]) -> DType:
    return result_type([(n.dtype, rank(n)) for n in nodes])


from . import linalg, nn, pointwise, reduction, shape_ops  # noqa: E402,F401  (register the rules)
from . import conv  # noqa: E402,F401
from . import shape  # noqa: E402,F401  (indexing rules)
from .pointwise import compute_dtype  # noqa: E402,F401

"""Legalization: make every dtype conversion an explicit `to` node, for the code generators.

After this pass a code generator types every value by its node's dtype alone:
  - a pointwise primitive's inputs are cast to its compute dtype (ir.meta.compute_dtype: half
    types compute in float32, mixed operands in their promoted type); it computes in that dtype
    and its result is cast back to the node's dtype where they differ (comparisons stay bool);
  - `where` casts its two value inputs to its dtype (the condition stays bool);
  - sum and prod accumulate half types in float32 and integers and bools in int64 (torch's
    rules), then cast to the result dtype.
"""
from __future__ import annotations

from ..ir import dtypes as D
from ..ir.meta import compute_dtype
from ..ir.node import Node
from ..ir.registry import OpDef, ops
from .rewrite import rewrite

NO_COMPUTE = frozenset({"to", "clone", "contiguous", "where", "full", "iota"})
ACCUMULATING = frozenset({"sum", "prod"})
HALF = (D.float16, D.bfloat16)


def cast(x: Node, dtype: D.DType) -> Node:
    if x.dtype is dtype:
        return x
    return Node("to", (x,), {"dtype": dtype}, x.shape, dtype)


_COMPUTING: dict[str, OpDef | None] = {}     # op -> its OpDef when it is a computing pointwise op


def _computing(op: str) -> OpDef | None:
    """The op's definition when it computes pointwise (inputs cast to a compute dtype), else None
    (kept per op: the registry is fixed once loaded)."""
    if op not in _COMPUTING:
        opdef = ops().get(op)
        _COMPUTING[op] = opdef if opdef is not None and opdef.has("pointwise") and op not in NO_COMPUTE else None
    return _COMPUTING[op]


def legalize_node(n: Node) -> Node | None:
    if n.op == "where":
        cond, a, b = n.inputs
        new = (cond, cast(a, n.dtype), cast(b, n.dtype))
        return None if new == n.inputs else Node("where", new, n.attrs, n.shape, n.dtype)
    if n.op in ACCUMULATING:
        return _accumulate(n)
    opdef = _computing(n.op)
    if opdef is None or not n.inputs:
        return None
    compute = compute_dtype(opdef, n.inputs)
    out = n.dtype if n.dtype.is_bool or n.dtype is compute else compute
    if out is n.dtype and all(i.dtype is compute for i in n.inputs):
        return None
    inner = Node(n.op, tuple(cast(i, compute) for i in n.inputs), n.attrs, n.shape, out)
    return cast(inner, n.dtype)


def _accumulate(n: Node) -> Node | None:
    x = n.inputs[0]
    acc = D.float32 if n.dtype in HALF else D.int64 if not n.dtype.is_floating_point else n.dtype
    if x.dtype is acc and n.dtype is acc:
        return None
    attrs = dict(n.attrs)
    if "dtype" in attrs:
        attrs["dtype"] = acc
    return cast(Node(n.op, (cast(x, acc),), attrs, n.shape, acc), n.dtype)


def legalize(roots: list[Node]) -> list[Node]:
    return rewrite(roots, legalize_node)

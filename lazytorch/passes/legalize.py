"""Legalization: make every dtype conversion explicit, for the code generators.

After this pass a code generator types every value by its node's dtype alone:
  - a pointwise primitive's inputs are cast to its compute dtype (ir.meta.compute_dtype: half
    types compute in float32, mixed operands in their promoted type); it computes in that dtype
    and its result is cast back to the node's dtype where they differ (comparisons stay bool);
  - `where` casts its two value inputs to its dtype (the condition stays bool);
  - sum and prod accumulate half types in float32 and integers and bools in int64 (torch's
    rules), then cast to the result dtype.

A Python float read in float32 arithmetic (the common `y * 0.999` on a float32 tensor) is not
given a `to` node: its param is *retyped* to float32, so the runtime hands the kernel the number
already rounded to float32 (the value a cast in the kernel would give: both round to nearest).
A cast node per Python scalar, and the rebuilt node reading it, was a third of a long program's
nodes and most of this pass's time.  Only float64 -> float32 is retyped: it is exact to do on the
host for every value (integers wider than 2**53, or narrowing integer conversions, are not); a
param read both retyped and as itself (say by a float64 op too) gets its casts back.
Casts of one value to one dtype are built once (the readers of a float16 value share its float32
cast), and the pass's replacements are already legal: a settled rule (passes/rewrite.py) that
builds each replaced node once, over its final inputs, and is not asked about it again.
"""
from __future__ import annotations

from ..ir import dtypes as D
from ..ir.meta import compute_dtype
from ..ir.promotion import Promotion
from ..ir.node import LEAF_OPS, Node
from ..ir.registry import OpDef, ops
from .rewrite import rewrite

NO_COMPUTE = frozenset({"to", "clone", "contiguous", "where", "full", "iota"})
ACCUMULATING = frozenset({"sum", "prod"})
HALF = (D.float16, D.bfloat16)
RETYPED = {(D.float64, D.float32)}       # (a scalar param's dtype, the dtype it may be retyped to)


_COMPUTING: dict[str, OpDef | None] = {}     # op -> its OpDef when it is a computing pointwise op


def _computing(op: str) -> OpDef | None:
    """The op's definition when it computes pointwise (inputs cast to a compute dtype), else None
    (kept per op: the registry is fixed once loaded)."""
    if op not in _COMPUTING:
        opdef = ops().get(op)
        _COMPUTING[op] = opdef if opdef is not None and opdef.has("pointwise") and op not in NO_COMPUTE else None
    return _COMPUTING[op]


PLAIN_FLOATS = (D.float32, D.float64)     # floating dtypes that are their own opmath dtype


def own_compute_dtype(opdef: OpDef, dtype: D.DType, inputs: tuple[Node, ...]) -> D.DType | None:
    """`dtype`, the node's own float32 or float64, when every tensor input has it too (Python
    numbers aside): such inputs promote to it under every promotion kind but KEEP (numbers are
    weak, and a float tensor's category is the highest), and it is its own opmath dtype.  None:
    ask compute_dtype.  (The common `y * 0.999` decided without building promotion operands.)"""
    if dtype not in PLAIN_FLOATS or opdef.promotion is Promotion.KEEP:
        return None
    tensors = False
    for i in inputs:
        if i.op == "scalar" or i.op == "param" and i.attrs["kind"] == "scalar":
            continue                            # (a number: weak)
        if i.dtype is not dtype:
            return None
        tensors = True
    return dtype if tensors else None


def _is_number(n: Node) -> bool:
    """A Python scalar's param (a runtime argument, not a tensor)."""
    return n.op == "param" and n.attrs["kind"] == "scalar"


class Legalizer:
    """One legalization: the rule, the casts it built (shared per value and dtype) and the scalar
    params it retyped."""

    def __init__(self):
        self.casts: dict[tuple[Node, int], Node] = {}     # (value, id(dtype)) -> its cast
        self.typed: dict[Node, Node] = {}       # scalar param -> its retyped copy
        self.raw: set[Node] = set()             # float64 params some node reads as they are
        self.origin = None                      # the origin of the node being legalized: the
                                                # nodes built for it inherit it (rewrite.py)

    def made(self, node: Node) -> Node:
        """A node built for the one being legalized, with that node's origin (rewrite.py: a settled
        rule's new nodes are final, so the rewrite does not walk them to set it)."""
        node._origin = self.origin
        return node

    def cast(self, x: Node, dtype: D.DType) -> Node:
        if x.dtype is dtype:
            return x
        key = (x, id(dtype))                    # (a DType hashes in Python: its id does not)
        got = self.casts.get(key)
        if got is None:
            if (x.dtype, dtype) in RETYPED and _is_number(x):
                got = self.made(Node("param", (), dict(x.attrs), (), dtype))
                self.typed[x] = got
            else:
                got = self.made(Node("to", (x,), {"dtype": dtype}, x.shape, dtype))
                if x.op == "param" and x.dtype is D.float64:
                    self.raw.add(x)
            self.casts[key] = got
        return got

    def node(self, n: Node, inputs: tuple[Node, ...]) -> Node | None:
        """n legalized over its final `inputs`; None: n as it is (over them)."""
        if not inputs:                          # (leaves and fills of nothing: nothing to cast)
            return None
        op = n.op
        self.origin = n._origin
        if op == "where":
            cond, a, b = inputs
            new = (cond, self.cast(a, n.dtype), self.cast(b, n.dtype))
            self.note_raw(new)
            return None if new == inputs else self.made(Node("where", new, n.attrs, n.shape, n.dtype))
        if op in ACCUMULATING:
            return self.accumulate(n, inputs[0])
        opdef = _computing(op)
        if opdef is None or not inputs:
            self.note_raw(inputs)
            return None
        compute = own_compute_dtype(opdef, n.dtype, inputs) or compute_dtype(opdef, inputs)
        out = n.dtype if n.dtype.is_bool or n.dtype is compute else compute
        if out is n.dtype:
            for i in inputs:
                if i.dtype is not compute:
                    break
            else:
                self.note_raw(inputs)
                return None
        inner = self.made(Node(op, tuple([self.cast(i, compute) for i in inputs]), n.attrs, n.shape, out))
        self.note_raw(inner.inputs)
        return self.cast(inner, n.dtype)

    def accumulate(self, n: Node, x: Node) -> Node | None:
        acc = D.float32 if n.dtype in HALF else D.int64 if not n.dtype.is_floating_point else n.dtype
        if x.dtype is acc and n.dtype is acc:
            self.note_raw((x,))
            return None
        attrs = dict(n.attrs)
        if "dtype" in attrs:
            attrs["dtype"] = acc
        x = self.cast(x, acc)
        self.note_raw((x,))
        return self.cast(self.made(Node(n.op, (x,), attrs, n.shape, acc)), n.dtype)

    def note_raw(self, inputs: tuple[Node, ...]) -> None:
        """Record the float64 params a node reads as they are (casts of them: see `cast`)."""
        for i in inputs:
            if i.op == "param" and i.dtype is D.float64:
                self.raw.add(i)

    def conflicts(self) -> dict[int, tuple[Node, Node]]:
        """slot -> (param, retyped copy) for the retyped params that are also read as they are."""
        return {orig.attrs["slot"]: (orig, typed) for orig, typed in self.typed.items() if orig in self.raw}


def legalize(roots: list[Node]) -> list[Node]:
    rule = Legalizer()
    out = rewrite(roots, settled=rule.node, leaves_kept=LEAF_OPS)    # (a leaf casts nothing)
    # a param that is itself a root is read as it is too: its value goes out (an eval of a Python
    # number beside a float32 op that reads it had kept two params of one slot, and the retyped
    # one, bound to no buffer, was read as a null pointer)
    rule.raw.update(r for r in roots if r.op == "param")
    conflicts = rule.conflicts()
    if conflicts:
        # a param read both retyped and as itself: its retyped copy becomes a cast of it again
        # (a program holds one param per slot)
        def untype(n: Node, inputs: tuple[Node, ...]) -> Node | None:
            got = conflicts.get(n.attrs["slot"]) if n.op == "param" else None
            if got is None or n is not got[1]:
                return None
            back = Node("to", (got[0],), {"dtype": n.dtype}, (), n.dtype)
            back._origin = n._origin            # (the retyped copy's: its first reader's line,
            if got[0]._origin is None:          #  which the param itself takes too, as a new
                got[0]._origin = n._origin      #  node of a rewrite would)
            return back
        out = rewrite(out, settled=untype)
    return out

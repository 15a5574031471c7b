"""Simplification: CSE, DCE, constant folding, algebraic identities, cast and view clean-up.

Structural constants are `scalar` nodes the decompositions and legalize created; they are part of
the program's structure and may be folded.  A user's Python number is a `param` of kind "scalar"
(a runtime argument the graph cache does not key on) and is never folded into a literal.
DCE is implicit: every pass rebuilds the graph from the roots, so unreachable nodes vanish.
"""
from __future__ import annotations

from typing import Callable

import numpy as np

from ..ir import dtypes as D
from ..ir import views as V
from ..ir.node import Node
from ..ir.registry import ops
from .rewrite import rewrite

# dtype -> the dtypes that hold every one of its values exactly (for to(to(x, wide), x.dtype))
_WIDER = {
    D.bool_: set(D.ALL),
    D.uint8: {D.uint8, D.int16, D.int32, D.int64, D.float16, D.bfloat16, D.float32, D.float64},
    D.int8: {D.int8, D.int16, D.int32, D.int64, D.float16, D.bfloat16, D.float32, D.float64},
    D.int16: {D.int16, D.int32, D.int64, D.float32, D.float64},
    D.int32: {D.int32, D.int64, D.float64},
    D.int64: {D.int64},
    D.float16: {D.float16, D.float32, D.float64},
    D.bfloat16: {D.bfloat16, D.float32, D.float64},
    D.float32: {D.float32, D.float64},
    D.float64: {D.float64},
}
INVOLUTIONS = frozenset({"neg", "bitwise_not"})
IDENTITY_OPS = frozenset({"mul", "div", "add", "sub"}) | INVOLUTIONS    # the ops `identities` rewrites
# op -> (its unit, the operand positions a unit may take: the other operand is the result)
_UNITS = {"mul": (1, (1, 0)), "div": (1, (1,)), "add": (0, (1, 0)), "sub": (0, (1,))}


def is_const(n: Node) -> bool:
    return n.op == "scalar"


def const_value(n: Node):
    return n.value if is_const(n) else None


def _same(x: Node, n: Node) -> Node | None:
    """x replaces n only when it has n's exact type (identities must not change shape or dtype)."""
    return x if x.shape == n.shape and x.dtype is n.dtype else None


# How to compute one node from host values: the driver (lazytorch/realize.py) passes the reference
# executor in the pipeline's options, since passes sit above the runtime and may not import it.
Evaluate = Callable[[Node, list], np.ndarray]


def fold_constants(n: Node, evaluate: Evaluate) -> Node | None:
    """A pointwise op (or cast) of structural constants only is computed now."""
    if n.shape != () or not n.inputs or not all(i.op == "scalar" for i in n.inputs):
        return None                     # (the cheapest test first: most nodes are not 0-d)
    opdef = ops().get(n.op)
    if n.op != "to" and (opdef is None or not opdef.has("pointwise")):
        return None
    args = [D.from_compute(np.asarray(i.value), i.dtype).reshape(()) for i in n.inputs]
    try:
        with np.errstate(all="ignore"):
            out = evaluate(n, args)
    except Exception:   # noqa: BLE001  (e.g. integer division by zero: leave it to run time)
        return None
    return Node.scalar(D.to_compute(out, n.dtype).item(), n.dtype)


def identities(n: Node) -> Node | None:
    if n.op not in IDENTITY_OPS:
        return None
    ins = n.inputs
    if n.op not in INVOLUTIONS and ins[0] is not ins[1] and ins[0].op != "scalar" and ins[1].op != "scalar":
        return None                     # (every rule below needs a constant operand, x - x or an involution)
    unit = _UNITS.get(n.op)
    if unit is not None and len(ins) == 2 and n.attrs.get("alpha", 1) == 1:
        value, sides = unit
        for k in sides:                 # x * 1, 1 * x, x / 1, x + 0, 0 + x, x - 0 (no bool constant)
            if const_value(ins[k]) == value and not ins[k].dtype.is_bool:
                return _same(ins[1 - k], n)
    if n.op == "sub" and ins and ins[0] is ins[1] and not n.dtype.is_floating_point and n.dtype.category:
        # x - x is 0 only without NaN or infinity: integers only
        return Node("full", (Node.scalar(0, n.dtype),), {"size": n.shape, "dtype": n.dtype}, n.shape, n.dtype)
    if n.op in INVOLUTIONS and ins[0].op == n.op:
        return _same(ins[0].inputs[0], n)
    return None


def casts(n: Node) -> Node | None:
    if n.op != "to":
        return None
    x = n.inputs[0]
    if x.dtype is n.dtype:
        return x
    if x.op == "to":
        inner = x.inputs[0]
        if inner.dtype is n.dtype and x.dtype in _WIDER[inner.dtype]:
            return inner
        if x.dtype in _WIDER[inner.dtype]:   # widening then converting: convert directly
            return Node("to", (inner,), n.attrs, n.shape, n.dtype)
    return None


def views(n: Node) -> Node | None:
    if n.op != "view":
        return None
    spec: V.ViewSpec = n.attrs["view"]
    x = n.inputs[0]
    if V.is_identity(spec, x.shape):
        return x
    if x.op == "full":     # any view of a fill is a fill of the view's shape
        return Node("full", x.inputs, {**x.attrs, "size": n.shape}, n.shape, n.dtype)
    if "clamp" in n.attrs or "clamp" in x.attrs:  # (clamped views compose with nothing: ir/build.py)
        return None
    if x.op == "view":
        inner: V.ViewSpec = x.attrs["view"]
        if V.is_contiguous(inner):
            composed = V.ViewSpec(spec.shape, spec.strides, inner.offset + spec.offset)
            return Node("view", x.inputs, {"view": composed}, n.shape, n.dtype)
        # not expressible as one view of the base: read a copy (the view stays index arithmetic)
        return Node("view", (Node("contiguous", (x,), {}, x.shape, x.dtype),), n.attrs, n.shape, n.dtype)
    return None


RULES = (casts, identities, views)
# the ops each rule rewrites (it returns None for every other op): a node meets only its own rules
RULE_OPS = {casts: frozenset({"to"}), identities: IDENTITY_OPS, views: frozenset({"view"})}
_RULES_FOR: dict[str, tuple] = {}


def rules_for(op: str) -> tuple:
    """The rules of RULES that may rewrite a node of `op`, in RULES' order."""
    got = _RULES_FOR.get(op)
    if got is None:
        got = _RULES_FOR[op] = tuple(rule for rule in RULES if op in RULE_OPS[rule])
    return got


def simplify_node(n: Node, evaluate: Evaluate | None = None) -> Node | None:
    """The first rule's replacement of n (constant folding first when an evaluator is given)."""
    if evaluate is not None and n.shape == ():      # (fold_constants' first test, inlined)
        out = fold_constants(n, evaluate)
        if out is not None:
            return out
    rules = _RULES_FOR.get(n.op)
    if rules is None:
        rules = rules_for(n.op)
    for rule in rules:
        out = rule(n)
        if out is not None and out is not n:
            return out
    return None


def sharing() -> Callable[[Node], Node | None]:
    """Hash-consing as a rewrite rule: nodes with equal op, attributes, input identities and type
    become one (the first one met)."""
    table: dict[tuple, Node] = {}

    def share(n: Node) -> Node | None:
        op = n.op
        if op == "param":
            return None
        attrs = n.attrs
        try:
            if attrs:
                attrs = tuple(attrs.items()) if len(attrs) == 1 else tuple(sorted(attrs.items()))
            # (a dtype by its id: DType hashes in Python, and dtypes are singletons)
            if op == "scalar":                  # (a constant's value and its Python type are part of it)
                # (not its attrs: normalize made the program's structural constants plain, and a
                # decomposition's own keep theirs; a constant pad's box built by both then read
                # the input twice, the forward's columns and the weight gradient's each copied)
                key = (op, (), (), n.shape, id(n.dtype), n.value, type(n.value).__name__)
            else:
                key = (op, attrs or (), n.inputs, n.shape, id(n.dtype))
            found = table.setdefault(key, n)
        except TypeError:                       # an unhashable attribute: never shared
            return None
        return None if found is n else found
    return share


def simplify(roots: list[Node], evaluate: Evaluate | None = None) -> list[Node]:
    """The rules, then CSE, in one walk: a node is shared once no rule rewrites it (its inputs are
    final by then, so equal nodes meet); `evaluate` computes a node from host values (None: no
    folding)."""
    share = sharing()

    def rule(n: Node) -> Node | None:
        out = simplify_node(n, evaluate)
        return out if out is not None else share(n)
    # a param is neither folded, rewritten nor shared (structural constants, `scalar`, are shared)
    return rewrite(roots, rule, leaves_kept=("param",))

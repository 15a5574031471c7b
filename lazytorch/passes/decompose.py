"""The decomposition pass: rewrite every composite node by its entry in DECOMPOSITIONS, except the
ops the backend runs whole as library calls (`keep`, for nodes of the form LIBRARY_FORMS accepts)."""
from __future__ import annotations

from typing import Iterable

from ..ir.build import named_inputs
from ..ir.node import LEAF_OPS, Node
from .decompositions import APPLIES, DECOMPOSITIONS, LIBRARY_FORMS
from .rewrite import rewrite


def lower(node: Node) -> Node | None:
    fn = DECOMPOSITIONS.get(node.op)
    if fn is None:
        return None
    applies = APPLIES.get(node.op)
    if applies is not None and not applies(node):
        return None
    return fn(node, **named_inputs(node))


def has_composites(order: Iterable[Node]) -> bool:
    """Whether any of the nodes decomposes (a scan of a program's list: cheaper than the walk)."""
    applies = APPLIES
    for n in order:
        if n.op in DECOMPOSITIONS:
            test = applies.get(n.op)
            if test is None or test(n):
                return True
    return False


def decompose(roots: list[Node], keep: frozenset[str] = frozenset(), composites: bool = True) -> list[Node]:
    """The graph with every composite decomposed; `composites=False` (the caller found none:
    has_composites) returns it as it is, without a walk."""
    if not composites:
        return list(roots)
    if not keep:
        return rewrite(roots, lower, leaves_kept=LEAF_OPS)      # (no leaf decomposes)

    def lower_or_keep(node: Node) -> Node | None:
        if node.op in keep and LIBRARY_FORMS[node.op](node):
            return None
        return lower(node)
    return rewrite(roots, lower_or_keep, leaves_kept=LEAF_OPS)

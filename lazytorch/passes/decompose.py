"""The decomposition pass: rewrite every composite node by its entry in DECOMPOSITIONS, except the
ops the backend runs whole as library calls (`keep`, for nodes of the form LIBRARY_FORMS accepts)."""
from __future__ import annotations

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


def decompose(roots: list[Node], keep: frozenset[str] = frozenset(),
              ops: frozenset[str] | None = None) -> list[Node]:
    """The graph with every composite decomposed; `ops`, where the caller knows them, are the
    graph's ops: a graph without a composite is returned as it is, without a walk."""
    if ops is not None and ops.isdisjoint(DECOMPOSITIONS):
        return list(roots)
    if not keep:
        return rewrite(roots, lower, leaves_kept=LEAF_OPS)      # (no leaf decomposes)

    def lower_or_keep(node: Node) -> Node | None:
        if node.op in keep and LIBRARY_FORMS[node.op](node):
            return None
        return lower(node)
    return rewrite(roots, lower_or_keep, leaves_kept=LEAF_OPS)

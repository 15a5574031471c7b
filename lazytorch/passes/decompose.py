"""The decomposition pass: rewrite every composite node by its entry in DECOMPOSITIONS."""
from __future__ import annotations

from ..ir.build import named_inputs
from ..ir.node import Node
from .decompositions import DECOMPOSITIONS
from .rewrite import rewrite


def lower(node: Node) -> Node | None:
    fn = DECOMPOSITIONS.get(node.op)
    if fn is None:
        return None
    return fn(node, **named_inputs(node))


def decompose(roots: list[Node]) -> list[Node]:
    return rewrite(roots, lower)

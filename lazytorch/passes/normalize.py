"""Normalisation: copy a pending program with its leaves replaced by numbered `param` nodes.

The compiled program must not hold the user's buffers or scalar values (the graph cache keeps it
for later calls with other data), so leaf i of the program becomes param(slot=i), which remembers
only whether it was a buffer or a scalar.  A structural constant (ir/node.py: Node.constant) is
no leaf of the compiled program: it becomes the plain `scalar` constant the passes fold.
"""
from __future__ import annotations

from ..ir.node import LEAF_OPS, Node, tracing


def normalize(order: list[Node], roots: list[Node]) -> tuple[list[Node], list[Node]]:
    """(params, roots) of a copy of the program `order` whose leaves are params."""
    with tracing(False):            # (copies take the origin of what they copy, not a frame walk)
        return _normalize(order, roots)


def _normalize(order: list[Node], roots: list[Node]) -> tuple[list[Node], list[Node]]:
    copies: dict[Node, Node] = {}           # (keyed by the nodes: hashed by identity)
    params: list[Node] = []
    for n in order:
        op = n.op
        if op == "scalar" and n.attrs:            # (n.is_constant, inlined): its value is in the key
            new = Node.scalar(n.value, n.dtype)
        elif op in LEAF_OPS:
            kind = "scalar" if op == "scalar" else "buffer"
            new = Node("param", (), {"slot": len(params), "kind": kind}, n.shape, n.dtype)
            params.append(new)
        else:
            new = Node(op, tuple([copies[i] for i in n.inputs]), n.attrs, n.shape, n.dtype)
            new._origin = n._origin     # (raw: formatted only when read, see ir/node.py)
        copies[n] = new
    return params, [copies[r] for r in roots]

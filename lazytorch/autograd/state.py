"""Which nodes require grad, and the snapshot backward differentiates.

The forward program is the lazy graph itself.  When a Tensor is made (or rebound by an in-place
op) while grad mode is on and some tensor requires grad, `track` walks the new part of its graph
and gives every floating-point node that reads a grad-requiring node a Record: a snapshot of the
node (op, inputs, attributes), taken now because evaluating a node later replaces its history by
its buffer (Node.realize) while backward still needs that history.  Nodes made with grad mode off
are marked as not requiring grad, so later walks stop at them.

Records live in a weak table keyed by node: a forward graph, with everything backward would save,
lives as long as some tensor still reaches it, as torch's autograd graph does.

This module imports no Tensor, so tensor.py can import it.
"""
from __future__ import annotations

import weakref

from ..ir.node import LEAF_OPS, Node


class Mode:
    """Grad mode (no_grad / enable_grad / set_grad_enabled) and whether any tensor ever asked for
    grad: until one does, tracking costs one attribute test per tensor."""

    __slots__ = ("enabled", "any_leaf")

    def __init__(self):
        self.enabled = True
        self.any_leaf = False


MODE = Mode()


class Record:
    """A grad-requiring node's entry: its snapshot (None for a leaf), which inputs need grad,
    the leaf tensor that accumulates .grad, the tensor that retains its grad, and whether
    a backward without retain_graph already went through it."""

    __slots__ = ("snapshot", "needs", "leaf", "retain", "freed")

    def __init__(self, snapshot: Node | None, needs: tuple[bool, ...], leaf=None):
        self.snapshot = snapshot
        self.needs = needs
        self.leaf = leaf            # weakref to the leaf Tensor
        self.retain = None          # weakref to a Tensor that called retain_grad()
        self.freed = False


RECORDS: "weakref.WeakKeyDictionary[Node, Record]" = weakref.WeakKeyDictionary()
NO_GRAD: "weakref.WeakSet[Node]" = weakref.WeakSet()

# Ops whose result never carries a gradient (integer/bool results are filtered by dtype).
NON_DIFFERENTIABLE = frozenset({"full", "iota", "argmax", "argmin"})


def register_leaf(node: Node, tensor) -> None:
    """`tensor` (whose value is `node`) requires grad and accumulates into its .grad."""
    NO_GRAD.discard(node)
    RECORDS[node] = Record(None, (), weakref.ref(tensor))
    MODE.any_leaf = True


def track(node: Node) -> None:
    """Classify `node` (and the unclassified nodes below it) as requiring grad or not."""
    if MODE.enabled:
        classify(node)
    elif node not in RECORDS:
        NO_GRAD.add(node)


def _known(node: Node) -> bool:
    return node in RECORDS or node.op in LEAF_OPS or node in NO_GRAD


def classify(root: Node) -> bool:
    if _known(root):
        return root in RECORDS
    stack = [(root, iter(root.inputs))]
    seen = {id(root)}
    while stack:
        node, rest = stack[-1]
        for child in rest:
            if id(child) not in seen and not _known(child):
                seen.add(id(child))
                stack.append((child, iter(child.inputs)))
                break
        else:
            stack.pop()
            needs = tuple([i in RECORDS for i in node.inputs])
            if True in needs and node.dtype.is_floating_point and node.op not in NON_DIFFERENTIABLE:
                snap = Node.with_key(node.op, node.inputs, node.attrs, node.shape, node.dtype, node.key)
                RECORDS[node] = Record(snap, needs)
            else:
                NO_GRAD.add(node)
    return root in RECORDS

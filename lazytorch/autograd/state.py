"""Which nodes require grad, and the snapshot backward differentiates.

The forward program is the lazy graph itself.  When a Tensor is made (or rebound by an in-place
op) while grad mode is on and some tensor requires grad, `track` walks the new part of its graph
and gives every floating-point node that reads a grad-requiring node a Record: a snapshot of the
node (op, inputs, attributes), taken now because evaluating a node later replaces its history by
its buffer (Node.realize) while backward still needs that history.  Nodes made with grad mode off
are marked as not requiring grad, so later walks stop at them.

Records live on their nodes (`Node.autograd`): a forward graph, with everything backward would
save, lives as long as some tensor still reaches it, as torch's autograd graph does.

This module imports no Tensor, so tensor.py can import it.
"""
from __future__ import annotations

import weakref

from ..ir.native import NATIVE
from ..ir.node import LEAF_OPS, SITE, TRACE, Node, user_site


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
    a backward without retain_graph already went through it; `edge`: a weak reference to the
    node's stand-in in walked snapshots (`edge`)."""

    __slots__ = ("snapshot", "needs", "leaf", "retain", "freed", "edge")

    def __init__(self, snapshot: Node | None, needs: tuple[bool, ...], leaf=None):
        self.snapshot = snapshot
        self.needs = needs
        self.leaf = leaf            # weakref to the leaf Tensor
        self.retain = None          # weakref to a Tensor that called retain_grad()
        self.freed = False
        self.edge = None


class _Records:
    """Each grad-requiring node's Record, kept on the node itself (`Node.autograd`: None while not
    classified, False when the node does not require grad, else its Record), so the table dies
    with its nodes, as torch's autograd graph does, and a lookup is an attribute read (a weak
    dictionary made a weak reference and called Node.__eq__ on every lookup: most of tracking's
    cost).  The mapping interface the rest of lazytorch uses: `in`, get, [], del."""

    __slots__ = ()

    def __contains__(self, node: Node) -> bool:
        return node.autograd.__class__ is Record

    def get(self, node: Node, default=None):
        rec = node.autograd
        return rec if rec.__class__ is Record else default

    def __getitem__(self, node: Node) -> Record:
        rec = node.autograd
        if rec.__class__ is not Record:
            raise KeyError(node)
        return rec

    def __setitem__(self, node: Node, rec: Record) -> None:
        node.autograd = rec

    def __delitem__(self, node: Node) -> None:
        self[node]
        node.autograd = None


class _NoGrad:
    """The nodes classified as not requiring grad (`Node.autograd is False`), set-like."""

    __slots__ = ()

    def __contains__(self, node: Node) -> bool:
        return node.autograd is False

    def add(self, node: Node) -> None:
        if node.autograd is None:
            node.autograd = False

    def discard(self, node: Node) -> None:
        if node.autograd is False:
            node.autograd = None


def edge(node: Node) -> Node:
    """`node`'s stand-in in the snapshots a backward without retain_graph went through (engine.py
    FREED_EDGES): its shape, dtype and Record, no inputs or buffer.  One per Record while some
    snapshot holds it, so every snapshot that reached the node reaches the same stand-in."""
    rec = node.autograd
    made = rec.edge() if rec.edge is not None else None
    if made is None:
        made = Node.with_key("edge", (), {}, node.shape, node.dtype, None)
        made.autograd = rec
        rec.edge = weakref.ref(made)
    return made


def edge_of(node: Node) -> Node | None:
    """The stand-in of `node` that snapshots still hold (None: none)."""
    rec = node.autograd
    return rec.edge() if rec.__class__ is Record and rec.edge is not None else None


RECORDS = _Records()
NO_GRAD = _NoGrad()

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
    elif node.autograd is None:
        node.autograd = False


def _known(node: Node) -> bool:
    return node.autograd is not None or node.op in LEAF_OPS


def classify(root: Node) -> bool:
    """Whether `root` requires grad, classifying it and the unclassified nodes below it first:
    depth-first along inputs in order, each node settled when its inputs are (a Record where some
    input has one, its dtype is floating point and its op differentiable, else False).  A leaf op
    is never classified here (register_leaf gives a leaf its Record).  (In C where ir/_fastpath.c
    built: every op built with grad on runs it.)"""
    state = root.autograd
    if state is not None or root.op in LEAF_OPS:
        return state.__class__ is Record
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
            needs = tuple([i.autograd.__class__ is Record for i in node.inputs])
            if True in needs and node.dtype.is_floating_point and node.op not in NON_DIFFERENTIABLE:
                snap = Node.with_key(node.op, node.inputs, node.attrs, node.shape, node.dtype, node.key)
                node.autograd = Record(snap, needs)
            else:
                node.autograd = False
    return root.autograd.__class__ is Record


classify_py = classify
if NATIVE is not None:                      # the same walk in C (ir/native.py)
    classify = NATIVE.Classifier(node_type=Node, record_type=Record, leaf_ops=LEAF_OPS,
                                 non_differentiable=NON_DIFFERENTIABLE, trace=TRACE, site=SITE, user_site=user_site)

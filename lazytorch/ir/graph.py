"""Whole-graph queries over lazy nodes: order, leaves, networkx export.

All walks are iterative so that programs of 100,000 nodes never hit Python's recursion limit.
"""
from __future__ import annotations

from itertools import count
from typing import TYPE_CHECKING, Callable, Container, Iterable, NamedTuple

from .native import NATIVE
from .node import LEAF_OPS, Node

if TYPE_CHECKING:
    import networkx as nx


def toposort(roots: Iterable[Node], stop: Container[int] = frozenset()) -> list[Node]:
    """Every node reachable from `roots`, each after its inputs, in a deterministic order.

    Nodes whose id is in `stop` are treated as placed already: neither they nor what lies below
    them is visited (rewrites use this to walk only the new part of a graph).
    """
    order: list[Node] = []
    done: set[int] = set()
    for root in roots:
        if id(root) in done or id(root) in stop:
            continue
        stack = [(root, iter(root.inputs))]          # (node, its inputs not yet looked at)
        while stack:
            node, rest = stack[-1]
            for child in rest:
                if id(child) not in done and id(child) not in stop:
                    stack.append((child, iter(child.inputs)))
                    break
            else:
                stack.pop()
                if id(node) not in done:
                    done.add(id(node))
                    order.append(node)
    return order


class Program(NamedTuple):
    """A pending program as eval sees it: its nodes in toposort order, its key for the graph
    cache, and its leaves (what becomes param slot 0, 1, ...) in that order."""
    order: list[Node]
    key: tuple
    leaves: list[Node]


def program(roots: Iterable[Node], prefix: Program | None = None) -> Program:
    """The toposort order, structural key and leaves (runtime inputs: structural constants are not
    leaves here) of the program below `roots`, in one pass.

    Node keys hold each node's own structure while ignoring data, buffer identity and scalar
    values.  The program key joins them, in toposort order, with which position each input comes
    from, and the positions of the roots: two programs with equal keys compute the same function of their leaves, whichever
    buffers and scalar values those leaves hold.  This runs on every eval, so it is one walk (in
    C where ir/_fastpath.c built: ProgramMaker, below).

    `prefix`: the program of the first of `roots` (what this walk would meet first), which the
    walk goes on from instead of walking it again: an eval that syncs live values grows its
    program by their roots (realize.py program_for; ResNet-18's step: 0.85 ms a walk on cpu).
    """
    roots = list(roots)
    index: dict[Node, int] = {}                      # node (hashed by identity) -> its position
    order: list[Node] = []
    leaves: list[Node] = []
    sig: list = []                                   # per node: key, then input positions if any
    if prefix is not None:
        order, leaves, sig = list(prefix.order), list(prefix.leaves), list(prefix.key[:-1])
        index = {n: i for i, n in enumerate(order)}
    at = index.__getitem__
    # (node._key is the key once computed: read the slot, call the property only when it is not)
    for root in roots:
        if root in index:
            continue
        if not root.inputs:
            index[root] = len(order)
            order.append(root)
            sig.append(root._key or root.key)
            if root.op in LEAF_OPS and not (root.attrs and root.op == "scalar"):   # (root.is_input, inlined)
                leaves.append(root)
            continue
        stack = [(root, iter(root.inputs))]
        while stack:
            node, rest = stack[-1]
            for child in rest:
                if child not in index:
                    if not child.inputs:             # leaves are placed at once, in the same order
                        index[child] = len(order)
                        order.append(child)
                        sig.append(child._key or child.key)
                        if child.op in LEAF_OPS and not (child.attrs and child.op == "scalar"):
                            leaves.append(child)         # (child.is_input, inlined: a constant is no input)
                        continue
                    stack.append((child, iter(child.inputs)))
                    break
            else:
                stack.pop()
                if node not in index:
                    index[node] = len(order)
                    order.append(node)
                    sig.append(node._key or node.key)
                    sig.append(tuple(map(at, node.inputs)))
    sig.append(("roots", tuple(map(at, roots))))
    return Program(order, tuple(sig), leaves)


# What an eval's live tensors are looked up against: id(node) -> position.  The Python's are dicts;
# in C (ir/_fastpath.c Positions) a table keyed by node address that holds its nodes and answers
# the same lookups by id (`id(n) in p`, `p.get(id(n))`, `p[id(n)]`, `len(p)`), so that an eval
# makes no int object per node.
Positions = dict[int, int]


def pending_positions(order: list[Node]) -> Positions:
    """id -> position of a program's pending values, `order`'s nodes that are no leaves (shared
    data is no shared history): what an eval's live tensors are looked up against
    (realize.py `LiveTensors.synced`)."""
    return {id(n): i for i, n in enumerate(order) if n.op not in LEAF_OPS}


def reach_memo() -> Positions:
    """An empty memo for `reaches`."""
    return {}


def reaches(root: Node, inside: Positions, memo: Positions, apart: Callable[[Node], bool] | None = None) -> int:
    """The position of the first node of `inside` that root's pending graph reads (root itself
    where it is inside; depth-first along inputs in order), or -1: a walk whose answers `memo`
    (`reach_memo()`) keeps across roots (the position for each node on the path found, -1 for
    each node whose graph was walked through), so a graph shared by many live tensors is walked
    once.  The answer is the graph's own: a node memoised by an earlier root answers what a walk
    from it would.  `apart(node)`, where given, is true for nodes known not to read `inside` (the
    caller knows from elsewhere): the walk does not go below such a node but memoises it -1, as
    a walk through its graph would (realize.py: the parked tensors' chains, walked whole every
    eval without it)."""
    at = inside.get(id(root))
    if at is not None:
        return at
    known = memo.get(id(root))
    if known is not None:
        return known
    memo[id(root)] = -1
    path, rest = [root], [iter(root.inputs)]
    while rest:
        step = None
        for i in rest[-1]:
            at = inside.get(id(i))
            if at is None:
                at = memo.get(id(i), -1)
            if at >= 0:
                for n in path:               # (every node on the path reads it; the others do not)
                    memo[id(n)] = at
                return at
            if i.op not in LEAF_OPS and id(i) not in memo:
                if apart is not None and apart(i):
                    memo[id(i)] = -1
                    continue
                step = i
                break
        if step is None:
            path.pop()
            rest.pop()
        else:
            memo[id(step)] = -1
            path.append(step)
            rest.append(iter(step.inputs))
    return -1


program_py, pending_positions_py, reach_memo_py, reaches_py = program, pending_positions, reach_memo, reaches
if NATIVE is not None:                      # the same walks in C (ir/native.py): every eval runs them
    program = NATIVE.ProgramMaker(node_type=Node, leaf_ops=LEAF_OPS, constant_op="scalar", result=Program)
    pending_positions = program.pending_positions
    reach_memo = NATIVE.Positions
    reaches = program.reaches


# ---------------------------------------------------------------- tree keys
# Most programs a Tensor API call evaluates are trees: chains of pointwise ops over distinct
# leaves (W7, an optimizer's update of one parameter).  For those, the Tensor API's fast path
# (ir/build.py: fast_builder) keeps on each node a summary made as it builds the node, so that
# eval needs no walk: node.tree = (epoch, tree id, leaf list, number of leaves n, number of
# nodes).  The tree id names the structure
# below the node: ids are interned, `tree_id((op id, id of input 0, id of input 1))`, with op
# ids interned from node keys and leaf ids from leaf keys, so two nodes have the same id exactly
# when their trees have equal structure (node keys and which input is which; a tree shares no
# node, so the nesting is the whole structure).  The first n entries of the leaf list are the
# tree's leaves in the order program() lists them (its walk meets a tree's leaves left to right);
# the list is shared along a chain (`x * 2 + 1`'s summary and x * 2's hold one list, of 3 and 2
# leaves): `tensor <op> number` appends its scalar leaf past its operand's n when no other
# summary has yet, else copies the n first, so a chain of k such ops costs k appends, not k copies
# of a growing tuple, and no summary's first n entries ever change (other ops make a new list:
# ir/build.py joined; so the entries past a summary's own are numbers, never another chain's
# buffers kept alive).  A summary is made only
# when both inputs have one and share no leaf, for at most MAX_TREE_NODES nodes, and holds only
# in the epoch it was made in (ir/node.py: EPOCH; realize() anywhere may cut a tree).
# Ids are never reused: when the table is cleared (it is bounded) the counter goes on, so an id
# made before names the same structure still or is never met again.
MAX_TREE_NODES = 256
MAX_TREES = 1 << 20
TREES: dict[tuple, int] = {}
_tree_ids = count(1)
LEAF_TREES: dict[tuple, int] = {}          # (shape, dtype) of a buffer leaf -> its id


def tree_id(item: tuple) -> int:
    """The id of a structure item: ("op", node key), ("leaf", leaf key) or (op id, input ids...)."""
    known = TREES.get(item)
    if known is not None:
        return known
    if len(TREES) >= MAX_TREES:
        TREES.clear()
        LEAF_TREES.clear()
    return TREES.setdefault(item, next(_tree_ids))


def leaf_tree(node: Node) -> int:
    """The tree id of a buffer leaf (its key depends only on its shape and dtype)."""
    sig = (node.shape, node.dtype)
    known = LEAF_TREES.get(sig)
    if known is None:
        known = LEAF_TREES[sig] = tree_id(("leaf", node.key))
    return known


def leaves(order: list[Node]) -> list[Node]:
    return [n for n in order if n.is_input]


def leaf_args_py(leaves: list[Node], n: int) -> list:
    """A program's run arguments from its leaves (the first `n`: a tree summary's own): a buffer
    leaf's array, a scalar leaf's number.  (In C where ir/_fastpath.c built: every eval runs it.)"""
    return [x.buffer if x.op == "buffer" else x.value for x in leaves[:n]]


leaf_args = NATIVE.LeafArgs(node_type=Node) if NATIVE is not None else leaf_args_py


def consumers(order: list[Node]) -> dict[int, list[Node]]:
    """id(node) -> the nodes that read it, for nodes in `order`."""
    users: dict[int, list[Node]] = {id(n): [] for n in order}
    for n in order:
        for i in n.inputs:
            users[id(i)].append(n)
    return users


def to_networkx(roots: Iterable[Node]) -> "nx.MultiDiGraph":
    """The graph as networkx: nodes are numbered in topological order and carry op, shape, dtype."""
    import networkx as nx           # (here, not at import: networkx takes ~0.15 s to import)
    order = toposort(roots)
    index = {id(n): i for i, n in enumerate(order)}
    g = nx.MultiDiGraph()
    for i, n in enumerate(order):
        g.add_node(i, op=n.op, shape=n.shape, dtype=n.dtype.name, attrs=dict(n.attrs), node=n)
        for pos, inp in enumerate(n.inputs):
            g.add_edge(index[id(inp)], i, pos=pos)
    return g


def structural_key(order: list[Node], roots: list[Node] | None = None) -> tuple:
    """Key of a program given in topological order (see `program`, which eval uses); its outputs
    are `roots`, by default the nodes nothing in `order` reads."""
    if roots is None:
        read = {id(i) for n in order for i in n.inputs}
        roots = [n for n in order if id(n) not in read]
    return program(roots).key

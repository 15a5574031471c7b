"""Whole-graph queries over lazy nodes: order, leaves, networkx export.

All walks are iterative so that programs of 100,000 nodes never hit Python's recursion limit.
"""
from __future__ import annotations

from typing import Iterable

import networkx as nx

from .node import Node


def toposort(roots: Iterable[Node]) -> list[Node]:
    """Every node reachable from `roots`, each after its inputs, in a deterministic order."""
    order: list[Node] = []
    done: set[int] = set()
    for root in roots:
        if id(root) in done:
            continue
        stack: list[tuple[Node, int]] = [(root, 0)]
        while stack:
            node, i = stack.pop()
            if i < len(node.inputs):
                stack.append((node, i + 1))
                child = node.inputs[i]
                if id(child) not in done:
                    stack.append((child, 0))
            elif id(node) not in done:
                done.add(id(node))
                order.append(node)
    return order


def leaves(order: list[Node]) -> list[Node]:
    return [n for n in order if n.is_leaf]


def consumers(order: list[Node]) -> dict[int, list[Node]]:
    """id(node) -> the nodes that read it, for nodes in `order`."""
    users: dict[int, list[Node]] = {id(n): [] for n in order}
    for n in order:
        for i in n.inputs:
            users[id(i)].append(n)
    return users


def to_networkx(roots: Iterable[Node]) -> nx.MultiDiGraph:
    """The graph as networkx: nodes are numbered in topological order and carry op, shape, dtype."""
    order = toposort(roots)
    index = {id(n): i for i, n in enumerate(order)}
    g = nx.MultiDiGraph()
    for i, n in enumerate(order):
        g.add_node(i, op=n.op, shape=n.shape, dtype=n.dtype.name, attrs=dict(n.attrs), node=n)
        for pos, inp in enumerate(n.inputs):
            g.add_edge(index[id(inp)], i, pos=pos)
    return g


def structural_key(order: list[Node]) -> int:
    """Key of a whole program in topological order, for the graph cache.

    Node keys already hash each node's structure below it while ignoring data, buffer identity and
    scalar values.  They cannot tell x + x from x + y (both leaves look alike), so the key also
    folds in which position each input comes from: two programs with equal keys compute the same
    function of their leaves, whichever buffers and scalar values those leaves hold.
    """
    index = {id(n): i for i, n in enumerate(order)}
    return hash(tuple((n.key, tuple(index[id(i)] for i in n.inputs)) for n in order))

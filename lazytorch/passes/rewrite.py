"""The one graph-rewriting mechanism every pass uses.

`rewrite(roots, fn)` visits nodes bottom-up (iteratively: no recursion limits).  Each node is first
rebuilt over its already-rewritten inputs, then `fn` may return a replacement (built from any
nodes, e.g. through ir.build.call) or None to keep it.  Replacements are rewritten too, so a rule
can produce nodes that other rules then lower further.  A rule whose replacements are final
already (legalize, whose output is legal) is a `SettledRule` passed as `rewrite(roots,
settled=fn)`: it sees each node with its final inputs, `fn(node, inputs)`, and its replacement is
taken as it is (neither the rebuilt node nor a second look at the replacement is paid for).  New
nodes inherit the replaced node's `origin` (the user's source line), so provenance survives every
pass: a rule's new nodes get it here, a settled rule gives it to the nodes it builds itself (its
replacement is not walked).
"""
from __future__ import annotations

from typing import Callable, Container

from ..ir.node import Node

Rule = Callable[[Node], "Node | None"]
SettledRule = Callable[[Node, tuple[Node, ...]], "Node | None"]   # (node, its final inputs) -> final


def with_inputs(node: Node, inputs: tuple[Node, ...]) -> Node:
    """The node over new inputs (itself when they are unchanged)."""
    if inputs == node.inputs:                 # (node equality is identity)
        return node
    new = Node(node.op, inputs, node.attrs, node.shape, node.dtype)
    new.buffer, new.value, new._origin = node.buffer, node.value, node._origin   # (raw origin: see ir/node.py)
    return new


def rewrite(roots: list[Node], fn: Rule | None = None, max_depth: int = 64,
            settled: SettledRule | None = None, leaves_kept: Container[str] = ()) -> list[Node]:
    """The graph below `roots` rewritten by `fn` (or the settled rule `settled`), bottom-up.
    Leaves whose op is in `leaves_kept` are final as they are: the rule is not asked about them
    (every pass is, once per Python scalar of a long program, otherwise)."""
    # original or final node -> its final node.  Keyed by the nodes themselves (hashed by
    # identity, as ir/graph.py's program index: no id() call per lookup), which also keeps every
    # node it names alive until the walk ends.
    done: dict[Node, Node] = {}
    # one depth-first walk in toposort's order (ir/graph.py), rewriting each node as the walk
    # leaves it: `done` doubles as the walk's visited set, so no separate order is built
    one = _rewrite_one
    if settled is not None:
        fn, one = settled, _settled_one
    for root in roots:
        if root in done:
            continue
        stack = [(root, iter(root.inputs))]          # (node, its inputs not yet looked at)
        while stack:
            node, rest = stack[-1]
            for child in rest:
                if child not in done:
                    if child.inputs:
                        stack.append((child, iter(child.inputs)))
                        break
                    if child.op in leaves_kept:
                        done[child] = child
                        continue
                    final = one(child, fn, done, max_depth)   # a leaf: rewritten at once
                    done[child] = done[final] = final
            else:
                stack.pop()
                if node not in done:
                    final = one(node, fn, done, max_depth)
                    done[node] = done[final] = final
    return [done[r] for r in roots]


def _rewrite_one(node: Node, fn: Rule, done: dict, depth: int) -> Node:
    ins = node.inputs
    new = with_inputs(node, tuple([done[i] for i in ins])) if ins else node
    out = fn(new)
    if out is None or out is new:
        return new
    if depth == 0:
        raise RecursionError(f"rewrite of {node.op} did not settle")
    # the replacement's own new nodes are rewritten as well; final nodes below them are not
    # walked again, which keeps a pass linear in the size of the graph (the common replacement,
    # one new node over final ones, skips the walk)
    new_nodes = [] if out in done else _new_nodes(out, done)
    for inner in new_nodes:
        if inner._origin is None:
            inner._origin = node._origin
        final = _rewrite_one(inner, fn, done, depth - 1)
        done[inner] = done[final] = final
    return done[out]


def _settled_one(node: Node, fn: SettledRule, done: dict, depth: int) -> Node:
    """A settled rule's step: the replacement and its new nodes are final as they are (the rule
    gives them node's origin)."""
    ins = node.inputs
    inputs = tuple([done[i] for i in ins]) if ins else ins
    out = fn(node, inputs)
    if out is None:
        return with_inputs(node, inputs) if ins else node
    return out


def _new_nodes(out: Node, done: dict) -> list[Node]:
    """The nodes of a replacement not rewritten yet, each after its inputs (toposort's order).
    The common replacements (one new node over final ones, or one over a few new casts of final
    ones: legalize) are found without a general walk."""
    fresh = [i for i in out.inputs if i not in done]
    if not fresh:
        return [out]
    if all(j in done for i in fresh for j in i.inputs):
        seen: set[Node] = set()
        return [i for i in fresh if i not in seen and not seen.add(i)] + [out]
    order: list[Node] = []                   # (toposort's walk, stopping at nodes in `done`)
    placed: set[Node] = set()
    stack = [(out, iter(out.inputs))]
    while stack:
        node, rest = stack[-1]
        for child in rest:
            if child not in done and child not in placed:
                stack.append((child, iter(child.inputs)))
                break
        else:
            stack.pop()
            if node not in placed:
                placed.add(node)
                order.append(node)
    return order

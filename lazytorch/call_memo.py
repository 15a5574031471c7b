"""The general route's call memo: a Tensor API call seen before is replayed, not re-derived.

The general route (api.py `general`: bind the schema, turn numbers into scalar leaves, run the
builder and its meta rules, wrap the result) costs 15-40 µs a call in Python, most of it spent
re-deriving what the previous identical call derived.  A model's forward repeats the same calls
every step, so each op keeps a table from a call's *signature* to a *recording* of the nodes the
call built, and later calls with that signature build those nodes directly (~4 µs).

A signature holds everything a builder may read: per tensor argument its node's key (op,
attributes, shape, dtype; for a view also its base's key, which view builders read), per other
argument its class and value (floats with a zero's sign), keyword names.  A recording is the
topologically ordered list of the nodes the call made, each input named by where it came from:
a tensor argument's node, a view argument's base, an earlier made node, or a scalar leaf made
from a number argument (its value is the call's, so runtime scalars stay runtime scalars).

A call is recorded only when replaying it is provably the same build (`record` bails otherwise):
- its made nodes read only the arguments' nodes, their bases and leaves it made (a builder that
  captured other state, or reached deeper into an argument's history, is not replayed);
- it read no data (no host read, no evaluation: EPOCH and host.READS unchanged), drew no random
  numbers (ops tagged nondeterministic_seeded are never memoized), and made no buffer;
- its tensor arguments were distinct nodes (a call on `x, x` may build differently);
- its results are nodes it made (ops returning an input, like `x.to(x.dtype)`, go the general way).
Errors are never recorded: a call that raises raised on the general route, and its signature
stays unknown.  `LAZYTORCH_CALL_MEMO=0` turns the memo off (the general route for every call).
"""
from __future__ import annotations

import os
from typing import Any, Callable

from .ir import host
from .ir.node import EPOCH, SITE, TRACE, Node, user_site
from .ir.dtypes import DType
from .ir.registry import OpDef
from .host_data import SHARED
from .tensor import Tensor, _wrap_views, pending

ENABLED = os.environ.get("LAZYTORCH_CALL_MEMO", "1") != "0"
# `LAZYTORCH_CALL_MEMO=check`: every replay is compared with the general route's build (`verify`),
# for running the test suite against the memo; never on by default (it doubles every build)
CHECK = os.environ.get("LAZYTORCH_CALL_MEMO") == "check"
MAX_ENTRIES = 1024                       # per op: a table past this starts over (churning values)
_new = Node.__new__

# Ref kinds of a recording's inputs: (ARG, i) the i-th tensor argument's node, (BASE, i) its base,
# (MADE, j) the j-th node made; leaves made are steps of kind NUMBER (from the k-th argument) or LEAF.
ARG, BASE, MADE = 0, 1, 2
NODE, NUMBER, LEAF = 0, 1, 2


def memo_for(op: OpDef) -> "CallMemo | None":
    """The memo of op `op`'s Tensor API function, or None where its calls can't be replayed."""
    if not ENABLED or "nondeterministic_seeded" in op.tags or "creation" in op.tags and op.build == "like":
        return None
    return CallMemo(op)


def signature(args: tuple, kwargs: dict) -> tuple[tuple, list, tuple] | None:
    """(signature, tensor argument nodes, flat argument values) of a call, or None: not memoizable."""
    if kwargs:
        key: list = [tuple(kwargs)]
        flat = (*args, *kwargs.values())
    else:
        key, flat = [], args
    nodes: list[Node] = []
    for v in flat:
        c = v.__class__
        kind = _KINDS.get(c)
        if kind is None:
            kind = _kind(c)
        if kind is TENSOR:
            n = v._node if v._base is None and not SHARED else v.node     # (the property, inlined)
            op = n.op
            if op == "view":
                key.append((n.key, n.inputs[0].key))
            elif op == "scalar" or op == "param":
                return None
            else:
                key.append(n.key)
            nodes.append(n)
        elif kind is PLAIN:
            key.append((c, v))
        elif kind is FLOAT:
            key.append((c, v if v else repr(v)))        # (0.0 == -0.0: the sign is structure)
        elif kind is SEQUENCE:
            if v and v[0].__class__ is not int:       # a tensor list (cat, stack): each one's node
                inner = signature(v, {})
                if inner is None:
                    return None
                key.append((c, inner[0]))
                nodes.extend(inner[1])
                continue
            for e in v:
                if e.__class__ is not int:
                    return None
            key.append((c, tuple(v)))
        elif kind is DTYPE:                           # a singleton, hashed by identity
            key.append(v)
        else:
            return None
    if len(nodes) > 1 and len(set(map(id, nodes))) != len(nodes):
        return None
    return tuple(key), nodes, flat


# How `signature` keys an argument, by its class (filled as classes are met)
TENSOR, PLAIN, FLOAT, SEQUENCE, DTYPE, OTHER = "tensor", "plain", "float", "sequence", "dtype", "other"
_KINDS: dict[type, str] = {int: PLAIN, bool: PLAIN, str: PLAIN, type(None): PLAIN, float: FLOAT,
                           tuple: SEQUENCE, list: SEQUENCE, DType: DTYPE}


def _kind(c: type) -> str:
    kind = _KINDS[c] = TENSOR if issubclass(c, Tensor) else SEQUENCE if issubclass(c, (tuple, list)) \
        and c.__module__.startswith("lazytorch") else OTHER         # (torch.Size's twin: lazytorch.Size)
    return kind


class Recording:
    """The nodes one call made (see the module docstring), replayable over new arguments."""

    __slots__ = ("steps", "result")

    def __init__(self, steps: list[tuple], result: Any):
        self.steps, self.result = steps, result

    def replay(self, nodes: list[Node], flat, site) -> Any:
        made: list[Node] = []
        for kind, a, b, c, d, e, f in self.steps:
            node = _new(Node)
            node.buffer = None
            node.tree = None
            if kind == NODE:                 # (op, refs, attrs, shape, dtype, key)
                node.op, node.attrs, node.shape, node.dtype, node._key = a, c, d, e, f
                node.inputs = tuple([nodes[i] if k == ARG else made[i] if k == MADE else nodes[i].inputs[0]
                                     for k, i in b])
                node.value = None
                node._origin = site
            else:                            # a leaf: NUMBER (argument index a) or LEAF (value a)
                node.op, node.inputs, node.attrs, node.shape, node.dtype, node._key = "scalar", (), c, (), e, f
                node.value = flat[a] if kind == NUMBER else a
                node._origin = None
            made.append(node)
        result = self.result
        if result.__class__ is int:
            return made[result]
        return tuple(made[i] for i in result)


class CallMemo:
    """One op's table: signature -> Recording."""

    __slots__ = ("op", "table", "view")

    def __init__(self, op: OpDef):
        self.op = op
        self.table: dict[tuple, Recording] = {}
        self.view = "view" in op.tags

    def replay(self, key: tuple, nodes: list[Node], flat, args: tuple, wrap: Callable) -> Any:
        """The call's result built from its recording, or None (unknown, or a view call whose
        aliasing the recording can't reproduce): the caller takes the general route."""
        rec = self.table.get(key)
        if rec is None:
            return None
        if self.view:
            this = args[0] if args else None
            if this.__class__ is not Tensor and not isinstance(this, Tensor):
                return None
            root = this._base if this._base is not None else this
            root_node, node = root._node, nodes[0]
            # (alias's common case: the input reads the root's node directly)
            if root_node.op == "view" or not (node is root_node or node.op == "view" and node.inputs[0] is root_node):
                return None
        site = _site() if TRACE[0] else None
        result = rec.replay(nodes, flat, site)
        if self.view:
            return _wrap_views(result, root, root_node)
        if result.__class__ is Node:
            return pending(result)
        return wrap(self.op, result)

    def record(self, key: tuple, nodes: list[Node], flat, result: Any, epoch: int, reads: int) -> None:
        """Remember how the general route built `result` (Tensors) for this signature, if replaying
        it is the same build (module docstring)."""
        if EPOCH[0] != epoch or host.READS[0] != reads:
            return
        rec = recording(nodes, flat, result)
        if rec is None:
            return
        if len(self.table) >= MAX_ENTRIES:
            self.table.clear()
        self.table[key] = rec


def recording(nodes: list[Node], flat, result: Any) -> Recording | None:
    """The Recording of a call whose tensor arguments had `nodes` and whose results are `result`
    (a Tensor or a tuple of them), or None where a replay could differ."""
    outs = [result] if isinstance(result, Tensor) else list(result) if isinstance(result, tuple) else None
    if not outs or not all(isinstance(t, Tensor) for t in outs):
        return None
    where: dict[int, tuple] = {}
    for i, n in enumerate(nodes):
        where[id(n)] = (ARG, i)
    for i, n in enumerate(nodes):
        if n.op == "view":
            where.setdefault(id(n.inputs[0]), (BASE, i))
    steps: list[tuple] = []
    numbers = {id(v): k for k, v in enumerate(flat) if v.__class__ in (int, float, bool)}

    def visit(n: Node) -> tuple | None:
        ref = where.get(id(n))
        if ref is not None:
            return ref
        if n.op == "scalar" and not n.inputs:
            k = numbers.get(id(n.value)) if not n.attrs else None
            steps.append((NUMBER, k, None, n.attrs, None, n.dtype, n.key) if k is not None else
                         (LEAF, n.value, None, n.attrs, None, n.dtype, n.key))
        elif n.op in ("buffer", "param", "scalar") or n.realized:
            return None
        else:
            refs = []
            for i in n.inputs:
                r = visit(i)
                if r is None:
                    return None
                refs.append(r)
            steps.append((NODE, n.op, tuple(refs), n.attrs, n.shape, n.dtype, n.key))
        ref = where[id(n)] = (MADE, len(steps) - 1)
        return ref

    refs = []
    for t in outs:
        r = visit(t._node)
        if r is None or r[0] != MADE:
            return None
        refs.append(r[1])
    return Recording(steps, refs[0] if isinstance(result, Tensor) else tuple(refs))


def verify(op: str, replayed: Any, built: Any) -> None:
    """Raise where a replayed call's result differs from the general route's (CHECK mode)."""
    from .ir.graph import program
    mine = [replayed] if isinstance(replayed, Tensor) else list(replayed)
    theirs = [built] if isinstance(built, Tensor) else list(built)
    same = len(mine) == len(theirs) and type(replayed) is type(built) and all(
        program([a._node]).key == program([b._node]).key and a._base is b._base and a._spec == b._spec
        and a._node.origin == b._node.origin for a, b in zip(mine, theirs))
    if not same:
        raise AssertionError(f"call memo: {op} replayed {mine} but the general route built {theirs}")


def _site():
    """The user's line of this call (SITE when the general route set it, else found now)."""
    site = SITE.site
    return site if site is not None else user_site(2)

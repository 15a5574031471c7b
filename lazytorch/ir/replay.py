"""Recorded builds: a call of an op seen before with the same signature replays the nodes it made.

Building a node the general way (bind the schema, turn numbers into scalar leaves, run the builder
and its meta rules) costs 10-40 µs a call in Python, most of it re-deriving what the previous
identical call derived.  A model's forward, its backward and its optimizer step repeat the same
calls every step, so each op keeps a `Memo`: a table from a call's *signature* to a *recording* of
the nodes the call made, from which later calls with that signature build the nodes directly.
`ir/build.py::call` consults it for every builder call (autograd's, decompositions', the Tensor
API's), and the Tensor API keeps one more level above it (lazytorch/call_memo.py) that also skips
its own wrapping.

A signature holds everything a builder may read but torch's TF32 flags (ir/precision.py: a change
of what they allow forgets every recording, `forget`): per tensor argument its node's key (op,
attributes, shape, dtype; for a view also its base's key, which view builders read, and whether
that base is another argument or another view argument's base), per other argument its class and
value (floats with a zero's sign: 0.0 == -0.0, and the sign is structure), keyword names.  A recording is the topologically ordered list of the nodes the call made, each
input named by where it came from: a tensor argument's node, a view argument's base, a node made
before it, or a scalar leaf made from a number argument (its value is the call's, so runtime
scalars stay runtime scalars).

A call is recorded only when replaying it is the same build (`record` refuses otherwise):
- its made nodes read only the arguments' nodes, their bases and leaves it made (a builder that
  captured other state, or reached deeper into an argument's history, is not replayed);
- it read no data, updated no argument in place and evaluated nothing (EPOCH and BUILD_EFFECTS
  unchanged, process-wide: ir/node.py effects_now), drew no random numbers
  (ops tagged nondeterministic_seeded have no memo) and made no buffer;
- its tensor arguments were distinct nodes (a call on `x, x` may build differently);
- its results are nodes it made (a call returning an input, like `to` of the same dtype, is not).
Errors are never recorded: a call that raised raises again on the general route.
`LAZYTORCH_CALL_MEMO=0` turns memos off; `=check` makes the Tensor API compare every replay with
the general route's build (for running the test suite against them), and raise where that build
evaluated or had effects -- its own thread's (ir/node.py own_effects_now: other threads' evals
meanwhile are no fault of the replay) -- or named other lines while provenance stayed on (`check`).
"""
from __future__ import annotations

import os
import weakref
from typing import Any, Callable

from .dtypes import DType
from .native import NATIVE
from .node import Node, effects_now, own_effects_now, provenance_mark
from .registry import OpDef

ENABLED = os.environ.get("LAZYTORCH_CALL_MEMO", "1") != "0"
CHECK = os.environ.get("LAZYTORCH_CALL_MEMO") == "check"
MAX_ENTRIES = 1024                       # per op: a table past this starts over (churning values)
_new = Node.__new__

# Ref kinds of a recording's inputs: (ARG, i) the i-th tensor argument's node, (BASE, i) its base,
# (MADE, j) the j-th node made.  Steps: NODE (an op), NUMBER (a scalar leaf of the k-th argument's
# value), LEAF (a scalar leaf or constant of the recorded value).
ARG, BASE, MADE = 0, 1, 2
NODE, NUMBER, LEAF = 0, 1, 2


def memo_for(op: OpDef) -> "Memo | None":
    """A new memo for op `op`, or None where its calls are never replayed."""
    if not ENABLED or "nondeterministic_seeded" in op.tags:
        return None
    return Memo()


# ---------------------------------------------------------------- signatures

TENSOR, NODE_ARG, PLAIN, FLOAT, SEQUENCE, DTYPE, OTHER = \
    "tensor", "node", "plain", "float", "sequence", "dtype", "other"
# How `signature` keys an argument, by its class (filled as classes are met)
_KINDS: dict[type, str] = {int: PLAIN, bool: PLAIN, str: PLAIN, type(None): PLAIN, float: FLOAT,
                           tuple: SEQUENCE, list: SEQUENCE, DType: DTYPE, Node: NODE_ARG}


def _kind(c: type) -> str:
    if isinstance(getattr(c, "node", None), property):      # the Tensor API's wrapper (and subclasses)
        kind = TENSOR
    elif issubclass(c, (tuple, list)) and c.__module__.startswith("lazytorch"):
        kind = SEQUENCE                                      # lazytorch.Size
    else:
        kind = OTHER
    _KINDS[c] = kind
    return kind


def signature_py(args: tuple, kwargs: dict) -> tuple[tuple, list, tuple] | None:
    """(signature, tensor argument nodes, flat argument values) of a call, or None where the call
    can't be memoized (an argument of another class, a runtime scalar or param node, one node
    twice).  A structural constant is keyed by its key, which holds its value.
    `signature` is this function, or its C version (ir/native.py) where that is built."""
    if kwargs:
        key: list = [tuple(kwargs)]
        flat = (*args, *kwargs.values())
    else:
        key, flat = [], args
    nodes: list[Node] = []
    views = False
    for v in flat:
        c = v.__class__
        kind = _KINDS.get(c)
        if kind is None:
            kind = _kind(c)
        if kind is TENSOR or kind is NODE_ARG:
            n = v.node if kind is TENSOR else v
            op = n.op
            if op == "view":
                key.append((n.key, n.inputs[0].key))
                views = True
            elif op == "scalar" and not n.attrs or op == "param":     # (a constant's key holds its value)
                return None
            else:
                key.append(n.key)
            nodes.append(n)
        elif kind is PLAIN:
            key.append((c, v))
        elif kind is FLOAT:
            key.append((c, v if v else repr(v)))
        elif kind is SEQUENCE:
            if v and v[0].__class__ is not int:               # a tensor list (cat, stack): each one's node
                inner = signature_py(v, {})
                if inner is None:
                    return None
                key.append((c, inner[0]))
                nodes.extend(inner[1])
                views = True                                  # (may hold views: `_bases` looks)
                continue
            for e in v:
                if e.__class__ is not int:
                    return None
            key.append((c, tuple(v)))
        elif kind is DTYPE:                                   # a singleton, hashed by identity
            key.append(v)
        else:
            return None
    if len(nodes) > 1:
        if len(set(map(id, nodes))) != len(nodes):
            return None
        if views:
            key.append(_bases(nodes))
    return tuple(key), nodes, flat


def _bases(nodes: list[Node]) -> tuple[int, ...]:
    """Where each view argument's base is found first, in the arguments' nodes followed by the
    bases met so far.  A view builder reads its argument's base, and a recording names each node
    by the first place it was found, so calls share a recording only where their bases coincide
    alike (`v.expand_as(x)` with v a view of x, or of another tensor; `x[0] @ x[1]`)."""
    if len(nodes) > 4:                               # (a tensor list: a dict, linear in its length)
        first = {id(n): i for i, n in enumerate(nodes)}
        return tuple([first.setdefault(id(n.inputs[0]), len(first)) for n in nodes if n.op == "view"])
    found = nodes.copy()                             # (a few arguments: scans by identity are cheaper)
    where = []
    for n in nodes:
        if n.op == "view":
            base = n.inputs[0]
            for i, m in enumerate(found):
                if m is base:
                    where.append(i)
                    break
            else:
                where.append(len(found))
                found.append(base)
    return tuple(where)


bases_py = _bases
if NATIVE is not None:                   # the same in C (ir/native.py): the C Signer called the Python for
    _bases = NATIVE.ViewBases(node_type=Node)   # every signature with a view (ResNet-18's backward: 109 a step)

_SIGNER = dict(kinds=_KINDS, classify=_kind, node_type=Node, bases=_bases, tensor=TENSOR, node=NODE_ARG,
               plain=PLAIN, float=FLOAT, sequence=SEQUENCE, dtype=DTYPE)
signature = signature_py if NATIVE is None else NATIVE.Signer(**_SIGNER)


def tensor_signature(tensor_type: type, shared: dict) -> Callable[[tuple, dict], tuple | None]:
    """`signature` for a wrapper class whose `node` property returns its `_node` slot unless
    `shared` is non-empty or a view's base changed (the Tensor API's, lazytorch/tensor.py): the C
    version reads that slot itself, without the property's Python frame."""
    if NATIVE is None:
        return signature_py
    return NATIVE.Signer(**_SIGNER, tensor_type=tensor_type, shared=shared)


# ---------------------------------------------------------------- recordings

class Recording:
    """The nodes one call made (see the module docstring), replayable over new arguments."""

    __slots__ = ("steps", "result")

    def __init__(self, steps: list[tuple], result: int | tuple[int, ...]):
        self.steps, self.result = steps, result

    def replay(self, nodes: list[Node], flat: tuple, site) -> Node | tuple[Node, ...]:
        """The call's result built over `nodes` (its tensor arguments' nodes) and `flat` (all its
        argument values); made op nodes name `site` as where the user built them."""
        made: list[Node] = []
        for kind, a, b, c, d, e, f in self.steps:
            node = _new(Node)
            node.buffer = node.tree = node.autograd = None
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
        return tuple([made[i] for i in result])


replay_py = Recording.replay
if NATIVE is not None:                   # the same steps in C (ir/native.py), without a Python frame
    Recording.replay = NATIVE.Replayer(recording_type=Recording, node_type=Node)


def record(nodes: list[Node], flat: tuple, result: Any) -> Recording | None:
    """The Recording of a call whose tensor arguments had `nodes`, whose arguments were `flat` and
    whose result is `result` (a Node, or a tuple or list of them), or None where a replay could
    build something else (module docstring)."""
    outs = [result] if result.__class__ is Node else list(result) if isinstance(result, (tuple, list)) else None
    if not outs or not all(o.__class__ is Node for o in outs):
        return None
    where: dict[int, tuple] = {id(n): (ARG, i) for i, n in enumerate(nodes)}
    for i, n in enumerate(nodes):
        if n.op == "view":
            where.setdefault(id(n.inputs[0]), (BASE, i))
    numbers = {id(v): k for k, v in enumerate(flat) if v.__class__ in (int, float, bool)}
    steps: list[tuple] = []

    def visit(n: Node) -> tuple | None:
        ref = where.get(id(n))
        if ref is not None:
            return ref
        if n.op == "scalar" and not n.inputs:
            k = numbers.get(id(n.value)) if not n.attrs else None
            steps.append((NUMBER, k, None, n.attrs, None, n.dtype, n.key) if k is not None else
                         (LEAF, n.value, None, n.attrs, None, n.dtype, n.key))
        elif n.op in ("buffer", "param", "scalar"):
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
    try:
        for o in outs:
            r = visit(o)
            if r is None or r[0] != MADE:
                return None
            refs.append(r[1])
    finally:
        visit = None     # (a closure calling itself is a cycle: it held this call's graph until a collection)
    return Recording(steps, refs[0] if result.__class__ is Node else tuple(refs))


def check(op: str, replay: Callable[[], Any], build: Callable[[], Any]) -> Any:
    """`LAZYTORCH_CALL_MEMO=check`: the replayed nodes (`replay()`), verified against the general
    build's (`build()`).  Effects are this thread's own (ir/node.py own_effects_now: other threads'
    evals meanwhile are no fault of the replay); origins are compared where provenance stayed on
    from the replay to the end of the build (ir/node.py provenance_mark)."""
    mark = provenance_mark()
    made = replay()
    before = own_effects_now()
    built = build()
    verify(op, made, built, before != own_effects_now(), mark is not None and mark == provenance_mark())
    return made


def verify(op: str, replayed: Any, built: Any, effects: bool = False, origins: bool = True) -> None:
    """Raise where a replayed call's nodes differ from the general build's (and their `origins`,
    if asked), or where the general build had effects (`effects`) the replay skipped (check mode)."""
    if effects:
        raise AssertionError(f"call memo: {op} was replayed, but building it has effects a replay skips")
    mine = [replayed] if replayed.__class__ is Node else list(replayed)
    theirs = [built] if built.__class__ is Node else list(built)
    if len(mine) != len(theirs) or type(replayed) is not type(built) or any(
            not same_program(a, b) or origins and a.origin != b.origin for a, b in zip(mine, theirs)):
        raise AssertionError(f"call memo: {op} replayed {mine} but the general build made {theirs}")


def same_program(a: Node, b: Node) -> bool:
    """Whether the programs below `a` and `b` are the same function of the same inputs (check
    mode): equal program keys, which ignore what the leaves hold, and leaves that hold the same --
    the same node or buffer (or equal copies of one: snapshots of shared data), equal numbers."""
    from .graph import program
    pa, pb = program([a]), program([b])
    return pa.key == pb.key and all(_same_leaf(x, y) for x, y in zip(pa.leaves, pb.leaves))


def _same_leaf(x: Node, y: Node) -> bool:
    if x is y:
        return True
    if x.op == "scalar" and y.op == "scalar":
        return x.value.__class__ is y.value.__class__ and repr(x.value) == repr(y.value)
    if x.op == "buffer" and y.op == "buffer":
        import numpy as np
        return x.buffer is y.buffer or (x.buffer.__class__ is np.ndarray and y.buffer.__class__ is np.ndarray
                                        and np.array_equal(x.buffer, y.buffer, equal_nan=True))
    return False


class Memo:
    """One op's table: signature -> Recording."""

    __slots__ = ("table", "__weakref__")

    def __init__(self):
        self.table: dict[tuple, Recording] = {}
        _MEMOS.add(self)

    def learn(self, key: tuple, nodes: list[Node], flat: tuple, result: Any, before: tuple[int, int]) -> None:
        """Remember how the general route built `result` for this signature (`before`: effects_now()
        before it ran), where replaying it is the same build."""
        if effects_now() != before:      # (process-wide: any eval or effect meanwhile, this thread's or not)
            return
        rec = record(nodes, flat, result)
        if rec is not None:
            self.keep(key, rec)

    def keep(self, key: tuple, rec: Any) -> None:
        if len(self.table) >= MAX_ENTRIES:
            self.table.clear()
        self.table[key] = rec


# Every memo (the Tensor API's, and autograd's table of rules, are Memos too), for `forget`
_MEMOS: "weakref.WeakSet[Memo]" = weakref.WeakSet()


def forget() -> None:
    """Drop every memo's recordings: what builders read besides their arguments changed (torch's TF32
    flags, ir/precision.py).  Tables are cleared in place: the C ApiCall holds them themselves."""
    for memo in list(_MEMOS):
        memo.table.clear()

"""Reverse mode over the recorded forward graph, building the gradient as more lazy IR.

`run_backward` orders the records reachable from the roots, walks them outputs-first, applies
each op's derivative rule (derivatives.py) to the summed cotangent of its node and hands the
results to the inputs that need grad.  Nothing is evaluated: leaf tensors' .grad become lazy
tensors whose nodes read the forward graph, so the next eval compiles forward and backward (and,
in opt.step, the update) as one program.
"""
from __future__ import annotations

import re
import weakref
from typing import Any, Iterable, Sequence

from ..ir import replay
from ..ir.build import TENSORISH, call, contiguous
from ..ir.native import NATIVE
from ..ir.node import SITE, TRACE, Node, collector_paused, effects_now, user_site
from ..ir.registry import get
from . import derivatives as R
from .grad_mode import set_grad_enabled
from .state import RECORDS, Record, edge, edge_of

# Node ops that are not registry ops (or whose node does not follow the op's schema).
POSITIONAL = {"view": ("self",), "contiguous": ("self",), "view_assign": ("self", "src"), "to": ("self",),
              "matmul": ("self", "other")}

# The roots of recent backward calls (the losses): opt.step() evaluates those still alive together
# with the parameters, so the loss a loop prints next costs no second forward pass.
RECENT_ROOTS: list[weakref.ref] = []


def arguments(snap: Node) -> tuple[dict[str, Any], dict[str, Any]]:
    """The snapshot's arguments by schema name, then its attributes besides the schema's (a
    product's TF32 decision, which its gradient's products inherit: ir/precision.py), and each
    tensor argument's input position(s)."""
    if snap.op in POSITIONAL:
        names = POSITIONAL[snap.op]
        args = dict(zip(names, snap.inputs))
        args.update(snap.attrs)
        return args, {n: i for i, n in enumerate(names)}
    op = get(snap.op)
    schema = next((s for s in op.schemas if all(p.name in snap.attrs or p.base in TENSORISH + ("Tensor[]",)
                                               for p in s.params)), op.schemas[0])
    args, where, pos = {}, {}, 0
    for p in schema.params:
        if p.base == "Tensor[]":
            k = snap.attrs[p.name]
            args[p.name] = snap.inputs[pos:pos + k]
            where[p.name] = list(range(pos, pos + k))
            pos += k
        elif p.name in snap.attrs:
            args[p.name] = snap.attrs[p.name]
        else:
            args[p.name], where[p.name] = snap.inputs[pos], pos
            pos += 1
    for name, value in snap.attrs.items():
        args.setdefault(name, value)
    return args, where


def _fit(g: Node, like: Node) -> Node:
    """A rule's gradient summed to its input's shape and cast to its dtype."""
    g = R.sum_to(g, like.shape)
    return g if g.dtype is like.dtype else call("to", g, like.dtype)


# ---- recorded rules
# A training step applies the same rules to the same structures every step: a rule's application
# is replayed like a builder call (ir/replay.py), keyed by the snapshot's structure, which inputs
# need grad, and the signature of (inputs, output, cotangent).  Its results are None, one of
# those nodes (add's gradient is g itself), a view argument's base (a view's gradient where the
# cotangent is a view of what it reshapes back: ResNet-18's pooled features, a general
# application every step before) or nodes it made (one Recording of those).  Refused, as builder
# calls are, where a replay could build something else: param or repeated inputs (no
# signature), made nodes reading other nodes, any eval or effect meanwhile, and create_graph
# (the gradient graph is then differentiated again); runtime scalar inputs are keyed with their
# values (_valued_signature).  ResNet-18's backward on cpu: its 335 rule applications took
# 5.6-5.7 ms a step, replayed 2.6-2.9.
_RULE_MEMO = replay.Memo()             # (a Memo's table, so that replay.forget clears it too)
_RULES: dict[tuple, tuple[replay.Recording | None, tuple]] = _RULE_MEMO.table
# The C walk's cache in front of _RULES (ir/_fastpath.c bw_cached): an entry found again by its
# arguments' keys, the very objects of the step before (a step's nodes replay the same
# recordings) compared by pointer, else equal ones (a realized parameter's key is made afresh),
# without the signature's tuples and the hash of the nested key (~0.7 us a lookup: the views'
# specs hash in Python; a quarter of ResNet-18's backward build).  A Memo's table too, so that
# replay.forget clears it with the rules.
_RULE_ID_MEMO = replay.Memo()
# A result's kind in a rule's spec: (_ARG, i) the signature's i-th node, (_MADE, j) the replay's
# j-th node, (_BASE, i) the i-th node's base (a view's input).  (ir/_fastpath.c's BackwardWalker
# reads these numbers: SPEC_ARG, SPEC_MADE, SPEC_BASE.)
_ARG, _MADE, _BASE = 0, 1, 2


def input_grads(rec: Record, node: Node, g: Node, create_graph: bool = False) -> list[Node | None]:
    """The cotangent of each input of `node` (None where it needs none) from the cotangent g."""
    sig = None
    if not create_graph and replay.ENABLED:
        args = (*rec.snapshot.inputs, node, g)
        sig = replay.signature(args, {}) or _valued_signature(args)
    if sig is None:
        return _apply_rule(rec, node, g)
    key = (rec.snapshot.key, rec.needs, sig[0])
    hit = _RULES.get(key)
    if hit is not None:
        if replay.CHECK:
            return _checked(rec.snapshot.op, _replayed(hit, sig), _apply_rule(rec, node, g))
        return _replayed(hit, sig)
    before = effects_now()
    out = _apply_rule(rec, node, g)
    if effects_now() == before:
        _learn(key, sig, out)
    return out


def _valued_signature(args: tuple[Node, ...]) -> tuple[tuple, list[Node], tuple] | None:
    """A rule application's signature where replay.signature refuses its runtime scalars (leaves
    of a number whose value the graph cache does not key on: an average pool's count): keyed with
    each one's value too, since a rule may read it (pow's exponent), and where the views' bases
    fall among all the arguments.  The scalars stay arguments, so a replay reads this step's.
    (ResNet-18's pooled `div` was its one rule applied every step, ~0.1 ms.)"""
    scalars = [i for i, a in enumerate(args) if a.op == "scalar" and not a.attrs and not a.inputs]
    if not scalars or len(set(map(id, args))) != len(args):
        return None
    sig = replay.signature(tuple(a for i, a in enumerate(args) if i not in scalars), {})
    if sig is None:
        return None
    values = tuple((i, args[i].key, args[i].value.__class__, repr(args[i].value)) for i in scalars)
    return (_VALUED, sig[0], values, replay._bases(list(args))), list(args), args


# A valued signature's tag (first in its key, where a signature's first entry is an argument's)
_VALUED = "valued"
# The key of a sum of cotangents in the rule table (beside rule applications' 3-tuples)
_SUM = "sum_cotangents"


def summed(parts: list[Node], create_graph: bool = False) -> Node:
    """R.sum_cotangents(parts), replayed like a rule's application where it is a plain sum (fewer
    than two slice writes: additions that read the parts alone, so their signature decides them;
    a tiling reads deeper, into what each slice was written into).  ResNet-18's 48 sums a step:
    each a Python frame and an `add` call per part before."""
    sig = None if create_graph or not replay.ENABLED else replay.signature(tuple(parts), {})
    if sig is None:
        return R.sum_cotangents(parts)
    key = (_SUM, sig[0])
    hit = _RULES.get(key)
    if hit is not None:
        if replay.CHECK:
            return _checked("sum_cotangents", _replayed(hit, sig), [R.sum_cotangents(parts)])[0]
        return _replayed(hit, sig)[0]
    before = effects_now()
    total = R.sum_cotangents(parts)
    if effects_now() == before and [p.op for p in parts].count("view_assign") < 2:
        _learn(key, sig, [total])
    return total


def _checked(what: str, made: list[Node | None], built: list[Node | None]) -> list[Node | None]:
    """Check mode (LAZYTORCH_CALL_MEMO=check): the replayed results, verified against the build's."""
    for a, b in zip(made, built):
        if (a is None) != (b is None) or a is not None and not replay.same_program(a, b):
            raise AssertionError(f"rule memo: {what} replayed {made} but the rule built {built}")
    return made


def _learn(key: tuple, sig: tuple, out: list[Node | None]) -> None:
    nodes = sig[1]
    position = {id(n): i for i, n in enumerate(nodes)}
    bases = {}
    for i, n in enumerate(nodes):
        if n.op == "view":
            bases.setdefault(id(n.inputs[0]), i)
    made = [o for o in out if o is not None and id(o) not in position and id(o) not in bases]
    recording = replay.record(nodes, sig[2], tuple(made)) if made else None
    if made and recording is None:
        return
    where = {id(o): j for j, o in enumerate(made)}
    spec = tuple(None if o is None else (_ARG, position[id(o)]) if id(o) in position else
                 (_BASE, bases[id(o)]) if id(o) in bases else (_MADE, where[id(o)]) for o in out)
    if len(_RULES) >= replay.MAX_ENTRIES * 8:
        _RULES.clear()
    _RULES[key] = (recording, spec)


def _replayed(hit: tuple, sig: tuple) -> list[Node | None]:
    recording, spec = hit
    made = recording.replay(sig[1], sig[2], SITE.site if TRACE[0] else None) if recording is not None else ()
    nodes = sig[1]
    return [None if s is None else nodes[s[1]] if s[0] == _ARG else made[s[1]] if s[0] == _MADE else
            nodes[s[1]].inputs[0] for s in spec]


def _apply_rule(rec: Record, node: Node, g: Node) -> list[Node | None]:
    snap = rec.snapshot
    rule = R.RULES.get(snap.op)
    if rule is None:
        raise NotImplementedError(f"the derivative for '{snap.op}' is not implemented "
                                  f"(input shapes {[list(i.shape) for i in snap.inputs]})")
    args, where = arguments(snap)
    args["__op"] = snap.op
    out = [None] * len(snap.inputs)
    for name, grad in rule(args, node, g).items():
        if grad is None or name not in where:
            continue
        positions = where[name]
        if isinstance(positions, int):
            positions, grad = [positions], [grad]
        for i, gi in zip(positions, grad):
            if gi is not None and rec.needs[i]:
                out[i] = _fit(gi, snap.inputs[i])
    return out


def _order(roots: Iterable[Node]) -> list[Node]:
    """The grad-requiring nodes below the roots, each after the inputs it differentiates into."""
    order, done = [], set()
    for root in roots:
        if id(root) in done or root not in RECORDS:
            continue
        done.add(id(root))
        stack = [(root, iter(_grad_inputs(root)))]
        while stack:
            node, rest = stack[-1]
            for child in rest:
                if id(child) not in done:
                    done.add(id(child))
                    stack.append((child, iter(_grad_inputs(child))))
                    break
            else:
                stack.pop()
                order.append(node)
    return order


def _grad_inputs(node: Node) -> list[Node]:
    rec = RECORDS[node]
    if rec.snapshot is None:
        return []
    return [i for i, need in zip(rec.snapshot.inputs, rec.needs) if need]


FREED = ("Trying to backward through the graph a second time (or directly access saved tensors after they have "
         "already been freed). Saved intermediate values of the graph are freed when you call .backward() or "
         "autograd.grad(). Specify retain_graph=True if you need to backward through the graph a second time or "
         "if you need to access saved tensors after calling backward.")


@collector_paused
def run_backward(roots: Sequence[Node], root_grads: Sequence[Node], retain_graph: bool,
                 accumulate: bool = True, capture: Sequence[Node] = (), create_graph: bool = False) -> dict[int, Node]:
    """Build the gradient graph; accumulate into leaves' .grad (if `accumulate`) and return the
    gradients reaching the nodes in `capture` (by id).  With `create_graph` the gradient nodes
    are built with grad mode on: the tensors that wrap them are recorded like any forward
    value (state.track), so they can be differentiated again (higher-order gradients)."""
    wanted = {id(n) for n in capture}
    # (a captured node an earlier backward left as a stand-in in some snapshots: FREED_EDGES)
    edges = {id(e): id(n) for n in capture if (e := edge_of(n)) is not None}
    wanted.update(edges)
    captured: dict[int, Node] = {}
    # Every gradient node names the user's line that called backward: found once here, not by a
    # walk up the stack per node built (as the Tensor API's general route does)
    site = SITE.site
    if site is None and TRACE[0]:
        SITE.site = user_site(2)
    try:
        with set_grad_enabled(create_graph):
            captured = _walk(roots, root_grads, retain_graph, accumulate, wanted, captured, create_graph)
            for at_edge, at_node in edges.items():
                g = captured.pop(at_edge, None)
                if g is not None:
                    captured[at_node] = g if at_node not in captured else summed([captured[at_node], g], create_graph)
            return captured
    finally:
        SITE.site = site


def _walk_py(roots: Sequence[Node], root_grads: Sequence[Node], retain_graph: bool, accumulate: bool,
             wanted: set[int], captured: dict[int, Node], create_graph: bool) -> dict[int, Node]:
    """The backward proper: the records in `_order`, outputs first, each node's cotangents summed
    once all have arrived, its rule applied (input_grads) and the results handed to its inputs;
    leaves accumulate (accumulate_leaf), retained and captured nodes take theirs.  `_walk` is this
    function, or its C version (ir/native.py) where that is built."""
    grads: dict[int, list[Node]] = {}          # node -> the cotangents reaching it so far
    for r, g in zip(roots, root_grads):
        grads.setdefault(id(r), []).append(g)
    for node in reversed(_order(roots)):
        parts = grads.pop(id(node), None)
        if parts is None:
            continue
        g = parts[0] if len(parts) == 1 else summed(parts, create_graph)   # (summed once all have arrived)
        rec = RECORDS[node]
        if id(node) in wanted:
            captured[id(node)] = g
        if rec.retain is not None and accumulate:
            kept = rec.retain()
            if kept is not None:
                _retained(kept, g)
        if rec.snapshot is None:
            if accumulate:
                accumulate_leaf(rec.leaf(), g)
            continue
        if rec.freed:
            raise RuntimeError(FREED)
        given = input_grads(rec, node, g, create_graph)
        for inp, gi in zip(rec.snapshot.inputs, given):
            if gi is not None:
                grads.setdefault(id(inp), []).append(gi)
        if not retain_graph:
            if rec.snapshot.op not in R.SAVES_NOTHING:
                rec.freed = True
                rec.snapshot.inputs = ()    # (FREED_INPUTS)
            else:
                release(rec, given)         # (FREED_EDGES)
    return captured


# FREED_INPUTS: a record a backward without retain_graph went through lets go of its snapshot's
# inputs, as torch frees what a node saved: the forward graph below it dies with the backward,
# not with the last tensor that reaches it (a step's `loss` lived into the next step's
# evaluation, so each young collection there walked ~900 of its nodes: ResNet-18's lazy step).
# A second backward meets the record before anything below it and raises FREED, as before.
#
# FREED_EDGES: a record whose rule reads no saved value (SAVES_NOTHING) may be walked again, as in
# torch, so its snapshot keeps its inputs -- but as stand-ins (state.py `edge`: shape, dtype and
# Record, no inputs or buffer) once a backward without retain_graph went through it.  The real
# inputs held the forward graph below them (the intermediate nodes no evaluation stored keep their
# inputs), as torch's AddBackward holds only edges: a training step's loss that lived into the next
# step (a loop reading it every N steps) kept the weights of two steps before alive through its
# sum's and add's records, and on cuda their blocks from the next step's outputs, whose CUDA graph
# keys then never came twice (DCGAN's lazy step: 12.5 ms a step, against 7.5 reading every step).
# A later backward reaches a stand-in's record as it would its node's: a node also reached
# through a snapshot that still holds it is walked twice with parts of its cotangent, which every
# rule, being linear in it, turns into parts of the same gradients (only records that save nothing
# can be reached twice: one that saves was freed by the backward that made the stand-in).


def release(rec: Record, given: Sequence[Node | None]) -> None:
    """FREED_EDGES: the inputs of `rec`'s snapshot that took a gradient (`given`, in input order)
    replaced by their stand-ins."""
    snap = rec.snapshot
    snap.inputs = tuple([edge(i) if gi is not None and i.autograd.__class__ is Record else i
                         for i, gi in zip(snap.inputs, given)]
                        + list(snap.inputs[len(given):]))


def _retained(kept, g: Node) -> None:
    """A non-leaf's grad kept for retain_grad(): g the first time, summed after."""
    kept._grad = kept._wrap(contiguous(g)) if kept._grad is None else kept._grad + kept._wrap(g)


def _memo_on() -> bool:
    """Whether a rule's application may be replayed (input_grads's test, but create_graph's): read
    by the C walk once a backward, as input_grads reads it every application."""
    return replay.ENABLED and not replay.CHECK


def accumulate_leaf(tensor, g: Node) -> None:
    """.grad = g the first time, .grad += g after (the same Tensor object, as torch's is)."""
    if tensor is None:
        return
    if g.dtype is not tensor.dtype:
        g = call("to", g, tensor.dtype)
    if tensor._grad is None:
        tensor._grad = tensor._wrap(contiguous(g))
    else:
        tensor._grad._rebind(call("add", tensor._grad.node, g), "grad accumulation")


# The same walk in C (ir/native.py) where that is built: the Python frames around each replayed
# rule were most of the backward build (ResNet-18 on cpu: 2.1-2.2 ms a step, in C 1.0-1.1).
_walk = _walk_py
if NATIVE is not None:
    _walk = NATIVE.BackwardWalker(
        node_type=Node, record_type=Record, signature=replay.signature, rules=_RULES, ids=_RULE_ID_MEMO.table,
        saves_nothing=R.SAVES_NOTHING, trace=TRACE, site=SITE, input_grads=input_grads, summed=summed,
        accumulate_leaf=accumulate_leaf, retained=_retained, memo_on=_memo_on, sum_key=_SUM, freed=FREED)


def remember_roots(tensors) -> None:
    RECENT_ROOTS[:] = [r for r in RECENT_ROOTS if r() is not None][-7:] + [weakref.ref(t) for t in tensors]


def recent_roots() -> list:
    return [t for t in (r() for r in RECENT_ROOTS) if t is not None]


def grad_fn_name(op: str) -> str:
    """torch's naming: mul -> MulBackward0, log_softmax -> LogSoftmaxBackward0."""
    return "".join(p.capitalize() for p in re.split(r"_+", op)) + "Backward0"


class GradFn:
    """What `tensor.grad_fn` shows: the backward of the op that made the tensor."""

    __slots__ = ("op",)

    def __init__(self, op: str):
        self.op = op

    def name(self) -> str:
        return grad_fn_name(self.op)

    def __repr__(self) -> str:
        return f"<{self.name()} object>"

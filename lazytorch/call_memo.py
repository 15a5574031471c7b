"""The Tensor API's level of recorded builds (ir/replay.py): a call of an op's function or method
whose signature was seen before replays the recorded nodes and wraps them, skipping the general
route (api.py `general`: keyword spellings, binding, the builder, wrapping) altogether.

Views keep torch's aliasing: a replayed view op wraps its results as views of the input's root
(tensor.py `_wrap_views`) in alias's common case (the input reads the root's node directly); in
the other case the call takes the general route.  `LAZYTORCH_CALL_MEMO=check` compares every
replay with the general route's build (`verify`).
"""
from __future__ import annotations

from typing import Any, Callable

from .host_data import SHARED
from .ir.build import user_code
from .ir.native import NATIVE
from .ir.node import _INSIDE, SITE, TRACE, Node, effects_now, own_effects_now, provenance_mark, type_str, user_site
from .ir.registry import OpDef
from .ir.replay import CHECK, Memo, Recording, memo_for as _ir_memo_for, same_program, tensor_signature
from .tensor import PENDING_PARTS, Tensor, _wrap_views, pending

__all__ = ["CHECK", "CallMemo", "check_replay", "memo_for", "native_call", "signature", "verify"]

# A Tensor API call's signature (ir/replay.py): in C, a Tensor's node is read from its slots
signature = tensor_signature(Tensor, SHARED)


def memo_for(op: OpDef) -> "CallMemo | None":
    """The memo of op `op`'s Tensor API function, or None where its calls are never replayed."""
    memo = _ir_memo_for(op)
    return None if memo is None else CallMemo(op, memo)


# A recording of a call that returned its tensor argument itself (`x.float()` of a float32 x, a
# returns_self op: tensor.py `Tensor.to`'s rule, as torch's)
SELF = "self"


class CallMemo:
    """One op's recordings, as the Tensor API replays and learns them (`op` None: indexing's,
    whose results are views)."""

    __slots__ = ("op", "memo", "view", "returns_self")

    def __init__(self, op: OpDef | None, memo: Memo):
        self.op, self.memo = op, memo
        self.view = op is None or "view" in op.tags
        self.returns_self = op is not None and "returns_self" in op.tags

    def replay(self, key: tuple, nodes: list[Node], flat: tuple, args: tuple, wrap: Callable) -> Any:
        """The call's result built from its recording, or None (unknown, or a view call whose
        aliasing the recording can't reproduce): the caller takes the general route."""
        rec = self.memo.table.get(key)
        if rec is None:
            return None
        if rec is SELF:
            return args[0]
        if self.view:
            this = args[0] if args else None
            if not isinstance(this, Tensor):
                return None
            root = this._base if this._base is not None else this
            root_node, node = root._node, nodes[0]
            # (alias's common case: the input reads the root's node directly)
            if root_node.op == "view" or not (node is root_node or node.op == "view" and node.inputs[0] is root_node):
                return None
        result = rec.replay(nodes, flat, (SITE.site or user_site(2)) if TRACE[0] else None)
        if self.view:
            return _wrap_views(result, root, root_node)
        if result.__class__ is Node:
            return pending(result)
        return wrap(self.op, result)

    def learn(self, key: tuple, nodes: list[Node], flat: tuple, result: Any, before: tuple[int, int]) -> None:
        """Remember how the general route built `result` (a Tensor or a tuple of them; `before`:
        effects_now() before it ran)."""
        if self.returns_self and result is next(iter(flat), None):
            if effects_now() == before:      # (process-wide, as ir/replay.py Memo.learn)
                self.memo.keep(key, SELF)
            return
        if isinstance(result, Tensor):
            made = result._node
        elif isinstance(result, tuple) and result and all(isinstance(t, Tensor) for t in result):
            made = tuple(t._node for t in result)
        else:
            return
        self.memo.learn(key, nodes, flat, made, before)


def native_call(memo: CallMemo | None, fn: Callable, wrap: Callable) -> Callable | None:
    """`fn` (api.py make_function's function of memo's op) with its replayed calls in C
    (ir/_fastpath.c ApiCall: the signature, the lookup, the replay and the result's Tensor, as
    CallMemo.replay, without fn's and replay's frames); every other call runs `fn`.  `wrap`:
    api.py's _wrap(op, result) for tuple results.  None without the extension, or in check mode
    (each replay is compared with the general route there, in Python)."""
    if NATIVE is None or CHECK or memo is None or memo.op is None:
        return None
    return NATIVE.ApiCall(outer=fn, signer=signature, table=memo.memo.table, self_mark=SELF, op=memo.op,
                          wrap_result=wrap, wrap_views=_wrap_views, site=SITE, replayer=Recording.replay,
                          view=memo.view, node_type=Node, wrap=Tensor, live=PENDING_PARTS, trace=TRACE,
                          user_code=user_code, inside=_INSIDE, user_site=user_site, shared=SHARED)


def verify(op: str, replayed: Any, built: Any, effects: bool = False, origins: bool = True) -> None:
    """Raise where a replayed call's result differs from the general route's (and their nodes'
    `origins`, if asked), or where the general route had effects (`effects`: a data read, an
    update, an evaluation) the replay skipped (CHECK mode)."""
    if effects:
        raise AssertionError(f"call memo: {op} was replayed, but building it has effects a replay skips")
    mine = [replayed] if isinstance(replayed, Tensor) else list(replayed)
    theirs = [built] if isinstance(built, Tensor) else list(built)
    same = len(mine) == len(theirs) and type(replayed) is type(built) and all(
        same_program(a._node, b._node) and a._base is b._base and a._spec == b._spec
        and (not origins or a._node.origin == b._node.origin) for a, b in zip(mine, theirs))
    if not same:
        raise AssertionError(f"call memo: {op} replayed {[type_str(t._node) for t in mine]} (built at "
                             f"{[t._node.origin for t in mine]}) but the general route built "
                             f"{[type_str(t._node) for t in theirs]} (at {[t._node.origin for t in theirs]})")


def check_replay(op: str, replay: Callable[[], Any], build: Callable[[], Any], args: tuple, kwargs: dict) -> Any:
    """CHECK mode: the replayed call (`replay()`; None: not replayed, unchecked), built the general
    way too (`build`, with the user's line set as the general route sets it); raise where the two
    differ or the general build had effects.  As ir/replay.py `check`: only this thread's own evals
    and effects count (ir/node.py own_effects_now: the process-wide counters move with other
    threads' work meanwhile, which is no fault of the replay), and origins are compared where
    provenance stayed on from the replay to the end of the build (ir/node.py provenance_mark)."""
    mark = provenance_mark()
    made = replay()
    if made is None:
        return None
    site = SITE.site
    SITE.site = site or user_site(2)
    try:
        before = own_effects_now(), arguments_now(args, kwargs)
        built = build()
        verify(op, made, built, before != (own_effects_now(), arguments_now(args, kwargs)),
               mark is not None and mark == provenance_mark())
    finally:
        SITE.site = site
    return made


def arguments_now(args: tuple, kwargs: dict) -> list:
    """Each tensor argument's node and version now (CHECK mode: a build that changed one has
    effects, whether or not it counted them in BUILD_EFFECTS)."""
    return [(v._node, v._version) for v in (*args, *kwargs.values()) if isinstance(v, Tensor)]

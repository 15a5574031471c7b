"""`x[key]` and `x[key] = value`, with torch's semantics.

A key is taken apart into basic items (ints, slices, None, Ellipsis, bool scalars), which become
views of x (metadata, aliasing x as torch's do), and advanced items (integer tensors or lists and
bool masks), which become one `index` node (reading) or `index_put` node (writing) over that view.
As in torch, the basic items are applied first; the advanced result dims then replace the indexed
dims in place when those are adjacent, else they lead.  Bool masks need their value: they are
evaluated at the call and turned into the integer indices of their True elements.
"""
from __future__ import annotations

from dataclasses import dataclass
from functools import partial
from typing import Any

import numpy as np

from .ir import dtypes as D
from .ir.build import call, slice_node
from .ir.creation import fill
from .ir.errors import op_error
from .ir.meta import broadcast_shapes
from .ir.meta.shape import index_shape
from .ir.node import Node, effects_now
from .call_memo import CallMemo, check_replay, signature
from .ir.replay import CHECK, ENABLED, Memo
from .tensor import Tensor, alias


@dataclass(frozen=True)
class Item:
    kind: str                       # none, bool, ellipsis, int, slice, index, mask
    value: Any = None               # the int, slice, bool, index node, or mask's index nodes
    mask_shape: tuple[int, ...] = ()

    @property
    def consumes(self) -> int:
        """How many dims of the indexed tensor this item uses up."""
        return {"none": 0, "bool": 0, "ellipsis": 0, "mask": len(self.mask_shape)}.get(self.kind, 1)


def _buffer(arr: np.ndarray) -> Node:
    arr = np.ascontiguousarray(arr, dtype=np.int64)
    return Node.from_buffer(arr, tuple(arr.shape), D.int64)


def _mask_item(mask: np.ndarray) -> Item:
    if mask.ndim == 0:                                   # a 0-d mask acts like a bool scalar
        return Item("bool", bool(mask))
    return Item("mask", tuple(_buffer(i) for i in np.nonzero(mask)), tuple(mask.shape))


def _array_item(arr: np.ndarray) -> Item:
    if arr.dtype == np.bool_:
        return _mask_item(arr)
    if arr.size == 0:
        arr = arr.astype(np.int64)
    if arr.dtype.kind not in "iu":
        raise IndexError(f"index: tensors used as indices must be long, int or bool, got numpy {arr.dtype}")
    return Item("index", _buffer(arr))


def _int(v) -> int | None:
    return None if v is None else int(v.__index__())


def _item(k) -> Item:
    if k is None:
        return Item("none")
    if k is Ellipsis:
        return Item("ellipsis")
    if isinstance(k, (bool, np.bool_)):
        return Item("bool", bool(k))
    if isinstance(k, (int, np.integer)):
        return Item("int", int(k))
    if isinstance(k, slice):
        return Item("slice", slice(_int(k.start), _int(k.stop), _int(k.step)))
    if isinstance(k, Tensor):
        if k.dtype.is_bool:
            return _mask_item(k.numpy())
        if k.dtype.is_floating_point:
            raise IndexError(f"index: tensors used as indices must be long, int or bool, got {k.dtype.name} "
                             f"tensor of shape {list(k.shape)}")
        return Item("index", k.node)
    if isinstance(k, (list, tuple, np.ndarray)):
        return _array_item(np.asarray([x.item() if isinstance(x, Tensor) else x for x in k]
                                      if isinstance(k, (list, tuple)) else k))
    raise IndexError(f"index: only integers, slices (`:`), ellipsis (`...`), None, and integer or boolean "
                     f"tensors are valid indices, got {type(k).__name__}")


def parse_key(key, ndim: int) -> list[Item]:
    """The key as Items, checked against the number of dims it indexes."""
    items = [_item(k) for k in (key if isinstance(key, tuple) else (key,))]
    if sum(i.kind == "ellipsis" for i in items) > 1:
        raise IndexError("index: an index can only have a single ellipsis ('...')")
    used = sum(i.consumes for i in items)
    if used > ndim:
        raise IndexError(f"index: too many indices for tensor of dimension {ndim} (the key indexes {used} dims)")
    return items


def apply_basic(x: Node, items: list[Item]) -> tuple[Node, list[tuple[int, Node]]]:
    """x with the basic items applied (a view), and the advanced indices as (dim of that view, index)."""
    free = x.ndim - sum(i.consumes for i in items)       # dims the ellipsis (or the end) stands for
    cur, d, adv = x, 0, []
    for it in items:
        if it.kind in ("none", "bool"):
            cur = call("unsqueeze", cur, d)
            if it.kind == "bool" and not it.value:
                cur = slice_node(cur, d, 0, 0, 1)
            d += 1
        elif it.kind == "ellipsis":
            d += free
        elif it.kind == "int":
            n = cur.shape[d]
            if not -n <= it.value < n:
                raise op_error(IndexError, "index", f"index {it.value} is out of bounds for dim {d} with size {n}",
                               {"self": cur})
            cur = call("select", cur, d, it.value)
        elif it.kind == "slice":
            cur = slice_node(cur, d, it.value.start, it.value.stop, 1 if it.value.step is None else it.value.step)
            d += 1
        elif it.kind == "index":
            _check_bounds(it.value, cur, d)
            adv.append((d, it.value))
            d += 1
        else:                                            # mask: its True positions index len(shape) dims
            shape = tuple(cur.shape[d:d + len(it.mask_shape)])
            if shape != it.mask_shape:
                raise op_error(IndexError, "index", f"the shape of the mask {list(it.mask_shape)} does not match "
                               f"the shape {list(shape)} of the indexed dims starting at dim {d}", {"self": cur})
            adv += [(d + j, n) for j, n in enumerate(it.value)]
            d += len(it.mask_shape)
    return cur, adv


def _check_bounds(index: Node, x: Node, d: int) -> None:
    """Indices whose values are known (lists, evaluated tensors) are checked at the call."""
    if index.op != "buffer" or not index.numel or getattr(index.buffer, "placeholder", False):
        return                                           # (lt.compile's traces: checked when run)
    n = x.shape[d]
    arr = np.asarray(index.buffer)
    if arr.min() < -n or arr.max() >= n:
        bad = int(arr[(arr < -n) | (arr >= n)].flat[0])
        raise op_error(IndexError, "index", f"index {bad} is out of bounds for dim {d} with size {n}", {"self": x})


def _advanced(op: str, x: Node, adv: list[tuple[int, Node]], *extra) -> Node:
    return call(op, x, tuple(n for _, n in adv), tuple(d for d, _ in adv), *extra)


def getitem(t: Tensor, key) -> Tensor:
    sig = _memo_key(t, key) if MEMO is not None else None
    if sig is not None:
        if CHECK:
            made = check_replay("getitem", partial(MEMO.replay, *sig, (t,), None), lambda: _getitem(t, key), (t,), {})
        else:
            made = MEMO.replay(*sig, (t,), None)
        if made is not None:
            return made
        before = effects_now()
    result = _getitem(t, key)
    if sig is not None:
        MEMO.learn(*sig, result, before)
    return result


def _getitem(t: Tensor, key) -> Tensor:
    items = parse_key(key, t.ndim)

    def build(node: Node) -> Node:
        cur, adv = apply_basic(node, items)
        return _advanced("index", cur, adv) if adv else cur
    return alias(t, build)


# `x[key]` with a basic key (ints, slices of ints, None, Ellipsis, bools) replays the views it
# built the last time for the same tensor signature (call_memo.py); keys with tensors or lists
# (advanced indexing, masks that need their values) take the general way every time.
MEMO = CallMemo(None, Memo()) if ENABLED else None
_BASIC = frozenset({int, bool, type(None), type(Ellipsis)})


def _memo_key(t: Tensor, key) -> tuple | None:
    """(signature, nodes, flat) of `t[key]` for the memo, or None (not a basic key)."""
    parts = key if key.__class__ is tuple else (key,)
    described = []
    for k in parts:
        c = k.__class__
        if c in _BASIC:
            described.append((c, k))
        elif c is slice:
            if not all(v is None or v.__class__ is int for v in (k.start, k.stop, k.step)):
                return None
            described.append((c, k.start, k.stop, k.step))
        else:
            return None
    sig = signature((t,), {})
    if sig is None:
        return None
    return (sig[0], key.__class__ is tuple, *described), sig[1], sig[2]


def setitem(t: Tensor, key, value) -> None:
    """Write `value` into t[key]: functionalised, t (and everything aliasing its data) sees it."""
    items = parse_key(key, t.ndim)
    adv: list[tuple[int, Node]] = []

    def build(node: Node) -> Node:
        cur, found = apply_basic(node, items)
        adv[:] = found
        return cur
    target = alias(t, build)
    shape = index_shape("setitem", target.node, tuple(n for _, n in adv), tuple(d for d, _ in adv)) \
        if adv else tuple(target.shape)
    values = _values(value, shape, target.dtype)
    target._rebind(_advanced("index_put", target.node, adv, values) if adv else values, "setitem")


def _values(value, shape: tuple[int, ...], dtype: D.DType) -> Node:
    """`value` as a node of `shape` and `dtype`: scalars fill, tensors broadcast and cast."""
    if not isinstance(value, (Tensor, np.ndarray, list, tuple)):
        if not isinstance(value, (bool, int, float, np.number, np.bool_)):
            raise TypeError(f"setitem: can't assign a {type(value).__name__} to a tensor; use a number or a tensor")
        return fill(shape, value.item() if isinstance(value, np.generic) else value, dtype)
    if not isinstance(value, Tensor):
        from .interop import tensor
        value = tensor(value)
    v = value.node
    while v.ndim > len(shape) and v.shape[0] == 1:        # torch drops leading size-1 dims of the value
        v = call("squeeze", v, 0)
    if broadcast_shapes("setitem", v.shape, shape, args={"value": v}) != tuple(shape):
        raise op_error(RuntimeError, "setitem", f"value of shape {list(value.shape)} cannot be broadcast to the "
                       f"indexed shape {list(shape)}", {"value": v})
    if v.dtype is not dtype:
        v = call("to", v, dtype)
    return v if tuple(v.shape) == tuple(shape) else call("expand", v, shape)

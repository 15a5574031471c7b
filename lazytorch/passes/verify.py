"""The IR verifier: checks a graph is well formed between passes (pipeline.run(verify=True)).

Checks every node: inputs are nodes of the graph, shape and dtype are well typed, params have
distinct slots, views fit their input, and, for ops built generically from the registry, the
shape and dtype the meta rules re-derive from the node's inputs and attributes match.
"""
from __future__ import annotations

from ..ir import meta
from ..ir import views as V
from ..ir.build import named_inputs
from ..ir.dtypes import DType
from ..ir.graph import toposort
from ..ir.node import Node
from ..ir.registry import ops


class VerifyError(AssertionError):
    pass


def verify_graph(roots: list[Node], after: str = "") -> None:
    where = f" after pass '{after}'" if after else ""
    slots: dict[int, Node] = {}
    for n in toposort(roots):
        def fail(msg: str):
            raise VerifyError(f"invalid IR{where}: {n.op} node {n!r}: {msg}")
        if not isinstance(n.shape, tuple) or any(not isinstance(s, int) or s < 0 for s in n.shape):
            fail(f"bad shape {n.shape!r}")
        if not isinstance(n.dtype, DType):
            fail(f"bad dtype {n.dtype!r}")
        if any(not isinstance(i, Node) for i in n.inputs):
            fail("an input is not a node")
        if n.op == "param":
            slot = n.attrs.get("slot")
            if slot in slots and slots[slot] is not n:
                fail(f"two params share slot {slot}")
            slots[slot] = n
        elif n.op == "view":
            _check_view(n, fail)
        else:
            _check_meta(n, fail)


def _check_view(n: Node, fail) -> None:
    spec: V.ViewSpec = n.attrs["view"]
    base = n.inputs[0]
    if spec.shape != n.shape:
        fail(f"view shape {spec.shape} != node shape {n.shape}")
    if n.dtype is not base.dtype:
        fail("a view changes the dtype")
    if spec.numel and "clamp" not in n.attrs:      # (a clamped view's reader masks what lies outside)
        lo = spec.offset + sum(min(0, (s - 1) * st) for s, st in zip(spec.shape, spec.strides))
        hi = spec.offset + sum(max(0, (s - 1) * st) for s, st in zip(spec.shape, spec.strides))
        if lo < 0 or hi >= base.numel:
            fail(f"{spec} reads outside its input of {base.numel} elements")


def _check_meta(n: Node, fail) -> None:
    opdef = ops().get(n.op)
    if opdef is None or opdef.build != "generic" or opdef.meta == "none":
        return
    try:
        args = named_inputs(n)
    except Exception:   # noqa: BLE001  (nodes built by special builders: nothing to re-derive)
        return
    shape, dtype = meta.run(opdef, args)
    if tuple(shape) != n.shape or dtype is not n.dtype:
        fail(f"meta rule gives {dtype.short}{list(shape)}, node says {n.dtype.short}{list(n.shape)}")

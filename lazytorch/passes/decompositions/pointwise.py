"""Decompositions of pointwise composites: clamp, lerp, addcmul/addcdiv, masked_fill, square,
add/sub with alpha, div with a rounding mode, round with decimals.

Arithmetic runs in the opmath dtype of the op (float32 for half types) and is cast back once, so
half results are rounded once, as torch's kernels do.
"""
from __future__ import annotations

from ...ir.build import call as B
from ...ir.meta import compute_dtype
from ...ir.node import Node
from ...ir.registry import get
from . import cast, decomposes


def in_compute(op: str, *nodes: Node) -> tuple[Node, ...]:
    """The operands cast to the dtype `op` computes in for them."""
    ct = compute_dtype(get(op), list(nodes))
    return tuple(cast(n, ct) for n in nodes)


@decomposes("add", "sub", applies=lambda n: len(n.inputs) == 3)     # (alpha, when not 1, is an input)
def add_alpha(node: Node, self: Node, other: Node, alpha=1) -> Node | None:
    if not isinstance(alpha, Node):             # alpha == 1: the primitive itself
        return None
    x, y = in_compute(node.op, self, other)
    # alpha is converted to the compute dtype first, as torch's kernels do (bool: alpha=-1 is True)
    return cast(B(node.op, x, B("mul", y, cast(alpha, y.dtype))), node.dtype)


@decomposes("div")
def div_rounding(node: Node, self: Node, other: Node, rounding_mode=None) -> Node | None:
    if rounding_mode is None:
        return None
    return B({"trunc": "div_trunc", "floor": "div_floor"}[rounding_mode], self, other)


@decomposes("round")
def round_decimals(node: Node, self: Node, decimals: int = 0) -> Node | None:
    """torch's form: round(x * 10^d) / 10^d, or round(x / 10^-d) * 10^-d for negative d."""
    if decimals == 0:
        return None
    (x,) = in_compute("round", self)
    scale = 10.0 ** abs(decimals)
    if decimals > 0:
        out = B("div", B("round", B("mul", x, scale)), scale)
    else:
        out = B("mul", B("round", B("div", x, scale)), scale)
    return cast(out, node.dtype)


@decomposes("square")
def square(node: Node, self: Node) -> Node:
    x = cast(self, node.dtype)                  # bool squares as int64
    return B("mul", x, x)


@decomposes("clamp", "clamp_min", "clamp_max")
def clamp(node: Node, self: Node, min=None, max=None) -> Node:  # noqa: A002  (torch's names)
    """min(max(x, lo), hi): NaN in x or a bound propagates, and hi wins where lo > hi, as in torch."""
    out = cast(self, node.dtype)
    if min is not None:
        out = B("maximum", out, cast(min, node.dtype))
    if max is not None:
        out = B("minimum", out, cast(max, node.dtype))
    return out


@decomposes("lerp")
def lerp(node: Node, self: Node, end: Node, weight: Node) -> Node:
    """torch's two-sided form, exact at both ends: weight < 0.5 counts from self, else from end."""
    x, e, w = (cast(n, compute_dtype(get("exp"), [node])) for n in (self, end, weight))
    diff = B("sub", e, x)
    low = B("add", x, B("mul", w, diff))
    high = B("sub", e, B("mul", diff, B("sub", 1, w)))
    return cast(B("where", B("lt", B("abs", w), 0.5), low, high), node.dtype)


@decomposes("addcmul", "addcdiv")
def addc(node: Node, self: Node, tensor1: Node, tensor2: Node, value=1) -> Node:
    x, a, b = in_compute("add", cast(self, node.dtype), cast(tensor1, node.dtype), cast(tensor2, node.dtype))
    prod = B("mul" if node.op == "addcmul" else "div", a, b)
    scaled = prod if not isinstance(value, Node) else B("mul", prod, value)
    return cast(B("add", x, scaled), node.dtype)


@decomposes("masked_fill")
def masked_fill(node: Node, self: Node, mask: Node, value: Node) -> Node:
    return B("where", mask, cast(value, node.dtype), self)

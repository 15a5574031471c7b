"""Decompositions of activation functions into primitive pointwise ops.

Each computes in the opmath dtype (float32 for half types) and casts back once; the forms are
torch's (softplus's linear region above the threshold, elu through expm1, hardsigmoid as a clamp
of x + 3).  Constants are scalar leaves, never baked into the op (`as_node` makes them where the
op's schema takes a `Tensor` only, as maximum's does).
"""
from __future__ import annotations

import math

from ...ir.build import as_node
from ...ir.build import call as B
from ...ir.node import Node
from . import cast, decomposes, opmath


def _where_positive(x: Node, negative: Node) -> Node:
    """x where x > 0, else `negative` (NaN stays NaN through either branch)."""
    return B("where", B("gt", x, 0), x, negative)


def _relu6_of_shifted(x: Node) -> Node:
    """min(max(x + 3, 0), 6): the common core of hardsigmoid and hardswish."""
    return B("minimum", B("maximum", B("add", x, 3), as_node(0)), as_node(6))


@decomposes("relu")
def relu(node: Node, self: Node) -> Node:
    return B("maximum", self, as_node(0))


@decomposes("gelu")
def gelu(node: Node, self: Node, approximate: str = "none") -> Node:
    x = opmath(self)
    if approximate == "tanh":
        inner = B("mul", B("add", x, B("mul", B("mul", B("mul", x, x), x), 0.044715)), math.sqrt(2 / math.pi))
        cdf = B("mul", B("add", B("tanh", inner), 1), 0.5)
    else:
        cdf = B("mul", B("add", B("erf", B("mul", x, 1 / math.sqrt(2))), 1), 0.5)
    return cast(B("mul", x, cdf), node.dtype)


@decomposes("silu")
def silu(node: Node, self: Node) -> Node:
    x = opmath(self)
    return cast(B("mul", x, B("sigmoid", x)), node.dtype)


def _softplus(x: Node, beta, threshold) -> Node:
    scaled = B("mul", x, beta)
    return B("where", B("gt", scaled, threshold), x, B("div", B("log1p", B("exp", scaled)), beta))


@decomposes("softplus")
def softplus(node: Node, self: Node, beta=1, threshold=20) -> Node:
    return cast(_softplus(opmath(self), beta, threshold), node.dtype)


@decomposes("mish")
def mish(node: Node, self: Node) -> Node:
    x = opmath(self)
    return cast(B("mul", x, B("tanh", _softplus(x, 1, 20))), node.dtype)


@decomposes("elu")
def elu(node: Node, self: Node, alpha=1, scale=1, input_scale=1) -> Node:
    """x * scale for x > 0, else alpha * scale * expm1(x * input_scale)."""
    x = opmath(self)
    negative = B("mul", B("mul", B("expm1", B("mul", x, input_scale)), alpha), scale)
    return cast(B("where", B("gt", x, 0), B("mul", x, scale), negative), node.dtype)


@decomposes("leaky_relu")
def leaky_relu(node: Node, self: Node, negative_slope=0.01) -> Node:
    x = opmath(self)
    return cast(_where_positive(x, B("mul", x, negative_slope)), node.dtype)


@decomposes("hardtanh")
def hardtanh(node: Node, self: Node, min_val=-1, max_val=1) -> Node:
    return cast(B("minimum", B("maximum", opmath(self), as_node(min_val)), as_node(max_val)), node.dtype)


@decomposes("hardsigmoid")
def hardsigmoid(node: Node, self: Node) -> Node:
    return cast(B("div", _relu6_of_shifted(opmath(self)), 6), node.dtype)


@decomposes("hardswish")
def hardswish(node: Node, self: Node) -> Node:
    x = opmath(self)
    return cast(B("div", B("mul", x, _relu6_of_shifted(x)), 6), node.dtype)

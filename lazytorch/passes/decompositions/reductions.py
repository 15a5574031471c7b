"""Decompositions of composite reductions: mean, var, std, logsumexp, norm, and amax_first/amin_first.

They accumulate in the opmath dtype (float32 for half types) and cast back once.  Element counts
come from shapes, so they are structural; user-given scalars (correction) stay runtime leaves.
"""
from __future__ import annotations

import math

from ...ir.build import as_node
from ...ir.build import call as B
from ...ir.build_linalg_extra import matrix_norm
from ...ir.node import Node
from . import cast, decomposes, opmath


def _input(self: Node, dtype) -> Node:
    """The input in the dtype to accumulate in: dtype= first, then widened if half."""
    return opmath(self if dtype is None else B("to", self, dtype))


def _mean(x: Node, dims: tuple[int, ...], keepdim: bool) -> Node:
    return B("div", B("sum", x, dims, keepdim), math.prod(x.shape[d] for d in dims))


@decomposes("amax_first", "amin_first")
def first_extreme(node: Node, self: Node, dim: tuple[int, ...] = (), keepdim: bool = False) -> Node:
    """The values of amax/amin (only their gradient differs: autograd/derivatives.py)."""
    return B(node.op.removesuffix("_first"), self, dim, keepdim)


@decomposes("mean")
def mean(node: Node, self: Node, dim: tuple[int, ...], keepdim: bool = False, dtype=None) -> Node:
    return cast(_mean(_input(self, dtype), dim, keepdim), node.dtype)


def _var(node: Node, self: Node, dim: tuple[int, ...], correction, keepdim: bool) -> Node:
    """sum((x - mean)^2) / max(N - correction, 0): two passes, as torch's stable algorithm."""
    x = opmath(self)
    centered = B("sub", x, _mean(x, dim, True))
    squares = B("sum", B("mul", centered, centered), dim, keepdim)
    correction = 1 if correction is None else correction
    count = math.prod(x.shape[d] for d in dim)
    return B("div", squares, B("maximum", B("sub", count, correction), as_node(0)))


@decomposes("var")
def var(node: Node, self: Node, dim, correction=None, keepdim: bool = False) -> Node:
    return cast(_var(node, self, dim, correction, keepdim), node.dtype)


@decomposes("std")
def std(node: Node, self: Node, dim, correction=None, keepdim: bool = False) -> Node:
    return cast(B("sqrt", _var(node, self, dim, correction, keepdim)), node.dtype)


@decomposes("logsumexp")
def logsumexp(node: Node, self: Node, dim: tuple[int, ...], keepdim: bool = False) -> Node:
    """log(sum(exp(x - m))) + m with m the max, set to 0 where it is infinite (torch's form)."""
    x = opmath(B("to", self, node.dtype) if not self.dtype.is_floating_point else self)
    if x.numel == 0:                             # no max to subtract: log(sum(exp(x))) is log(0) or empty
        return cast(B("log", B("sum", B("exp", x), dim, keepdim)), node.dtype)
    total = B("sum", B("exp", B("sub", x, _finite_max(x, dim, True))), dim, keepdim)
    return cast(B("add", B("log", total), _finite_max(x, dim, keepdim)), node.dtype)


def _finite_max(x: Node, dim: tuple[int, ...], keepdim: bool) -> Node:
    m = B("amax", x, dim, keepdim)
    return B("where", B("isinf", m), B("to", as_node(0), m.dtype), m)


@decomposes("norm")
def norm(node: Node, self: Node, p=2, dim=None, keepdim: bool = False, dtype=None) -> Node:
    """Vector norms by p: sqrt of squares (2), sum of |x| (1), max/min |x| (+-inf), nonzeros (0),
    else (sum |x|^p)^(1/p)."""
    x = _input(self, dtype)
    a = B("abs", x)
    if p == "nuc":                               # singular values: linalg's matrix norm (a host LAPACK call)
        return cast(matrix_norm("norm", x, "nuc", (-2, -1) if dim is None else dim, keepdim), node.dtype)
    if isinstance(p, str):
        if p != "fro":
            raise ValueError(f"norm: p='{p}' is not a norm order; valid: a number, 'fro' or 'nuc'")
        p = 2.0
    p = 2.0 if p is None else float(p)
    if p == 2:
        out = B("sqrt", B("sum", B("mul", x, x), dim, keepdim))
    elif p == 1:
        out = B("sum", a, dim, keepdim)
    elif p == math.inf:
        out = B("amax", a, dim, keepdim)
    elif p == -math.inf:
        out = B("amin", a, dim, keepdim)
    elif p == 0:
        out = B("sum", B("to", B("ne", x, 0), x.dtype), dim, keepdim)
    else:
        out = B("pow", B("sum", B("pow", a, p), dim, keepdim), 1.0 / p)
    return cast(out, node.dtype)

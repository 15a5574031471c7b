"""Decompositions: composite ops written in terms of primitive ops, one function per op.

A decomposition receives the composite node's arguments by schema name (ir.build.named_inputs)
and returns the replacement node, built with ir.build.call so every intermediate is checked by
the meta rules.  Forms are the numerically stable ones torch uses (max-subtracted softmax,
log-sum-exp) and compute in the opmath dtype (float32 for half types), casting back at the end.
The primitive set they lower to is listed in docs/architecture.md.
"""
from __future__ import annotations

from typing import Callable

from ...ir import dtypes as D
from ...ir.build import call as B
from ...ir.build import in_opmath as opmath  # noqa: F401  (the decompositions' name for it)
from ...ir.node import Node

DECOMPOSITIONS: dict[str, Callable[..., Node]] = {}
# Composite ops a backend may run whole, as one library call, instead of their decomposition
# (the backend lists them: Options.library_ops); the test says whether a node means exactly what
# that call computes (else it decomposes as everywhere).
LIBRARY_FORMS: dict[str, Callable[[Node], bool]] = {}
# ops whose decomposition applies only to some of their nodes: a test on the node alone, so the
# others skip ir.build.named_inputs and the call (add and sub without alpha: every `y + 0.001`)
APPLIES: dict[str, Callable[[Node], bool]] = {}


def decomposes(*names: str, applies: Callable[[Node], bool] | None = None):
    def register(fn):
        for n in names:
            DECOMPOSITIONS[n] = fn
            if applies is not None:
                APPLIES[n] = applies
        return fn
    return register


def cast(x: Node, dtype: D.DType) -> Node:
    return x if x.dtype is dtype else B("to", x, dtype)


from . import activations  # noqa: E402,F401  (register the decompositions)
from . import pointwise  # noqa: E402,F401
from . import reductions  # noqa: E402,F401
from . import nn  # noqa: E402,F401
from . import conv  # noqa: E402,F401

"""Builders of nn ops whose result is decided at the call: dropout draws its keep-mask here.

The mask comes from the seeded host generator of ir/creation.py (`lazytorch.manual_seed`); its
values cannot match torch's generator, only its statistics.
"""
from __future__ import annotations

from . import dtypes as D
from .build import Args, builder, call
from .creation import generator
from .errors import op_error
from .node import Node
from .registry import OpDef
from .schema import Schema


@builder("dropout")
def dropout(op: OpDef, schema: Schema, a: Args) -> Node:
    """x * mask / (1 - p) with mask ~ Bernoulli(1 - p) in training; the identity otherwise."""
    x, p = a["self"], float(a["p"])
    if not 0.0 <= p <= 1.0:
        raise op_error(ValueError, op.name, f"probability p={p} is not in [0, 1]", {"self": x})
    if a["inplace"]:
        raise op_error(NotImplementedError, op.name, "inplace=True is not supported", {"self": x},
                       "assign the result instead: x = dropout(x, p)")
    if not a["training"] or p == 0.0:
        return x
    if not x.dtype.is_floating_point:
        raise op_error(TypeError, op.name, f"dtype {x.dtype.name} is not supported in training", {"self": x},
                       "dropout needs a floating point input")
    keep = generator().random(x.shape) >= p
    mask = Node.from_buffer(keep, tuple(x.shape), D.bool_)
    if p == 1.0:                                 # torch: x * 0 (NaN stays NaN)
        return call("mul", x, mask)
    return call("mul", call("mul", x, mask), 1.0 / (1.0 - p))

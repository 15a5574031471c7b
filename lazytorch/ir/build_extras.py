"""Builders of the ops in registry/extras.yaml: torch conveniences composed from existing ops.

Each builds its result from ops the registry already has, so their meta rules check the
arguments and the passes and kernels see only familiar nodes.
"""
from __future__ import annotations

from . import dtypes as D
from .build import Args, builder, call
from .creation import check_size, fill
from .errors import op_error
from .node import Node
from .registry import OpDef
from .schema import Schema

# the op each shape-matching method applies to self with other's shape
_LIKE = {"expand_as": "expand", "view_as": "view", "reshape_as": "reshape"}
_NEW_FILL = {"new_zeros": 0, "new_ones": 1}


@builder("normalize")
def normalize(op: OpDef, schema: Schema, a: Args) -> Node:
    """x / max(||x||_p over dim, eps), the norm broadcast back along dim (torch's F.normalize)."""
    x = a["self"]
    if not x.dtype.is_floating_point:
        raise op_error(TypeError, op.name, f"dtype {x.dtype.name} is not supported", {"self": x},
                       "normalize needs a floating point tensor")
    norm = call("norm", x, float(a["p"]), [a["dim"]], True)
    return call("div", x, call("clamp_min", norm, float(a["eps"])))


@builder("type_as")
def type_as(op: OpDef, schema: Schema, a: Args) -> Node:
    return call("to", a["self"], a["other"].dtype)


@builder("like_shape_of")
def like_shape_of(op: OpDef, schema: Schema, a: Args) -> Node:
    return call(_LIKE[op.name], a["self"], list(a["other"].shape))


@builder("new_full")
def new_full(op: OpDef, schema: Schema, a: Args) -> Node:
    """A fill of the given size with self's dtype unless dtype says otherwise (torch's new_*)."""
    size = check_size(op.name, a["size"])
    dtype = D.as_dtype(a["dtype"]) if a["dtype"] is not None else a["self"].dtype
    return fill(size, _NEW_FILL.get(op.name, a.get("fill_value")), dtype)

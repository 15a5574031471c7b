"""Builders of ops whose call does more than build one generic node: max/min (three forms),
var/std (unbiased= rewritten to correction=) and casts (x.to(dtype), x.float(), x.type(dtype))."""
from __future__ import annotations

from . import dtypes as D
from . import meta
from .build import Args, builder, call, generic
from .node import Node
from .registry import OpDef, get
from .schema import Schema

# max/min by schema overload: the full reduction, (values, indices) along a dim, and the pointwise form.
_MAX_MIN = {"max": ("amax", "argmax", "maximum"), "min": ("amin", "argmin", "minimum")}


@builder("max_min")
def max_min(op: OpDef, schema: Schema, a: Args):
    full, arg, pointwise = _MAX_MIN[op.name]
    x = a["self"]
    if schema.overload == "other":
        return call(pointwise, x, a["other"])
    if schema.overload == "dim":
        keyed = call("to", x, D.uint8) if x.dtype.is_bool else x    # argmax refuses bool; max does not
        # the values' gradient goes to the index, as torch's (amax_first: ties do not share it)
        return call(full + "_first", x, a["dim"], a["keepdim"]), call(arg, keyed, a["dim"], a["keepdim"])
    meta.run(op, {"self": x, "dim": None})     # the checks of a full reduction, named after max/min
    return call(full, x)


@builder("var_std")
def var_std(op: OpDef, schema: Schema, a: Args) -> Node:
    """Bind every form to the canonical one: var(self, dim, *, correction, keepdim)."""
    canonical = op.schemas[-1]
    correction = a.get("correction")
    if "unbiased" in a:
        correction = None if a["unbiased"] else Node.scalar(0, D.int64)
    args = {"self": a["self"], "dim": a.get("dim"), "correction": correction, "keepdim": a.get("keepdim", False)}
    x = args["self"]
    if not x.dtype.is_floating_point:
        from .errors import op_error
        raise op_error(TypeError, op.name, f"dtype {x.dtype.name} is not supported", {"self": x},
                       "std and var only support floating point dtypes")
    return generic(op, canonical, args)


# x.type() with no dtype answers the type's name, as torch's does.
_TYPE_NAMES = {D.float32: "FloatTensor", D.float64: "DoubleTensor", D.float16: "HalfTensor",
               D.bfloat16: "BFloat16Tensor", D.int64: "LongTensor", D.int32: "IntTensor",
               D.int16: "ShortTensor", D.int8: "CharTensor", D.uint8: "ByteTensor", D.bool_: "BoolTensor"}


@builder("cast")
def cast(op: OpDef, schema: Schema, a: Args):
    """A `to` node (or x itself when the dtype already matches, as torch returns self)."""
    x: Node = a["self"]
    target = op.meta_arg("dtype", a.get("dtype"))
    if op.name == "type" and target is None:
        return f"lazytorch.{_TYPE_NAMES[x.dtype]}"
    if isinstance(target, str) and target.endswith("Tensor"):
        target = {v: k for k, v in _TYPE_NAMES.items()}.get(target.rsplit(".", 1)[-1], target)
    to = get("to")
    shape, dtype = meta.run(to, {"self": x, "dtype": target})
    if dtype is x.dtype:
        return x
    return Node("to", (x,), {"dtype": dtype}, shape, dtype)

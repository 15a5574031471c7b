"""Meta rules of reductions: dims, keepdim and the result dtype policy."""
from __future__ import annotations

from .. import dtypes as D
from ..dtypes import DType
from ..errors import op_error, wrap_dim
from ..node import Node
from ..registry import OpDef
from . import Args, Shape, check_allowed, normalize_dims, reduced_shape, rule

_REDUCE_RESULT = {
    "same": lambda dt: dt,
    "int_to_long": lambda dt: D.int64 if dt.category != D.FLOATING else dt,
    "long": lambda dt: D.int64,
    "bool": lambda dt: D.uint8 if dt is D.uint8 else D.bool_,
    "int_to_float": lambda dt: dt if dt.is_floating_point else D.default_float,
    "float_only": lambda dt: dt,
}


@rule("reduction")
def reduction(op: OpDef, a: Args) -> tuple[Shape, DType]:
    x: Node = a["self"]
    nodes = {"self": x}
    check_allowed(op, a, nodes)
    dim = a.get("dim")
    if dim is not None and not isinstance(dim, int) and len(dim) == 0:
        dim = None                               # torch: an empty dim list reduces every dim
    dims = normalize_dims(op.name, dim, x.ndim, nodes)
    a["dim"] = dims
    keepdim = bool(a.get("keepdim", False))
    policy = op.meta_arg("result", "same")
    dtype = a.get("dtype")
    out = D.as_dtype(dtype) if dtype is not None else _REDUCE_RESULT[policy](x.dtype)
    if policy == "float_only" and dtype is None and not x.dtype.is_floating_point:
        raise op_error(RuntimeError, op.name, f"could not infer the output dtype from {x.dtype.name}", nodes,
                       "the input must have a floating point dtype, or pass dtype=")
    if op.meta_arg("nonempty") and any(x.shape[d] == 0 for d in dims):
        raise op_error(IndexError, op.name, "cannot reduce over a zero-size dimension: the op has no identity",
                       nodes, "reduce over non-empty dims, or use sum/prod")
    return reduced_shape(x.shape, dims, keepdim), out


@rule("cumsum")
def cumsum(op: OpDef, a: Args) -> tuple[Shape, DType]:
    """Running sum along one dim: shaped like self; bool and integers accumulate in int64."""
    x: Node = a["self"]
    a["dim"] = wrap_dim(op.name, a["dim"], x.ndim, {"self": x})
    dtype = a.get("dtype")
    out = D.as_dtype(dtype) if dtype is not None else _REDUCE_RESULT["int_to_long"](x.dtype)
    return x.shape, out

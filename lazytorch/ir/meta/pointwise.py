"""Meta rules of pointwise ops: broadcasting and type promotion; casts."""
from __future__ import annotations

from .. import dtypes as D
from ..dtypes import DType
from ..errors import op_error
from ..node import Node
from ..promotion import Promotion, elementwise_dtypes, result_type
from ..registry import OpDef
from . import Args, Shape, broadcast_shapes, check_allowed, rank, rule, tensor_args

@rule("pointwise")
def pointwise(op: OpDef, a: Args) -> tuple[Shape, DType]:
    nodes = tensor_args(op, a)
    check_promoted_allowed(op, nodes)
    shape = broadcast_shapes(op.name, *(n.shape for n in nodes.values()), args=nodes)
    if op.promotion is Promotion.KEEP:
        return shape, next(iter(nodes.values())).dtype
    _, out = elementwise_dtypes([(n.dtype, rank(n)) for n in nodes.values()], op.promotion)
    return shape, out


def check_promoted_allowed(op: OpDef, nodes: dict[str, Node]) -> None:
    """The op's dtype categories apply to the promoted dtype, as torch dispatches on it: a Python
    bool may meet an integer tensor in remainder, but a float can't meet anything in bitwise_and."""
    promoted = result_type([(n.dtype, rank(n)) for n in nodes.values()])
    if promoted.category not in [CATEGORIES[c] for c in op.allow]:
        raise op_error(TypeError, op.name, f"dtype {promoted.name} is not supported", nodes,
                       f"{op.name} accepts {' and '.join(sorted(op.allow))} dtypes")


CATEGORIES = {"bool": D.BOOL, "integer": D.INTEGER, "floating": D.FLOATING}


def compute_dtype(op: OpDef, nodes: list[Node]) -> DType:
    """The dtype a pointwise op computes in (its opmath dtype), used by decompositions and kernels."""
    if op.promotion is Promotion.KEEP:
        return nodes[0].dtype
    compute, _ = elementwise_dtypes([(n.dtype, rank(n)) for n in nodes], op.promotion)
    return compute


def _check_scalar_fits(op: OpDef, name: str, value, result: DType, nodes: dict[str, Node]) -> None:
    """torch's alpha/value rule: a float scalar can't scale integer (or bool) tensors."""
    if isinstance(value, Node) and value.dtype.is_floating_point and not result.is_floating_point:
        raise op_error(RuntimeError, op.name, f"for integral input tensors, argument {name} must not be a "
                       f"floating point number", {**nodes, name: value}, f"pass an integer {name}")


def _check_alpha(op: OpDef, alpha, result: DType, nodes: dict[str, Node]) -> None:
    """torch's alpha_check: no float alpha for integral results, and a bool alpha only for bool
    results (an integer alpha is fine for bool tensors: it is cast to bool, as torch does)."""
    _check_scalar_fits(op, "alpha", alpha, result, nodes)
    if isinstance(alpha, Node) and alpha.dtype.is_bool and not result.is_bool:
        raise op_error(RuntimeError, op.name, "a boolean alpha is only supported for boolean results",
                       {**nodes, "alpha": alpha}, "pass a number alpha")


@rule("add")
def add(op: OpDef, a: Args) -> tuple[Shape, DType]:
    """add/sub: pointwise, with torch's checks on alpha and on subtracting bools."""
    shape, out = pointwise(op, a)
    nodes = tensor_args(op, a)
    if op.name == "sub" and any(n.dtype.is_bool for n in nodes.values()):
        raise op_error(RuntimeError, op.name, "subtraction with a bool operand is not supported", nodes,
                       "to invert a mask use ~ or logical_not(); for two masks use logical_xor()")
    _check_alpha(op, a.get("alpha"), out, nodes)
    return shape, out


def _literal_number(node) -> bool:
    """A Python number given at the call: its value is known now (a runtime param's is not)."""
    return isinstance(node, Node) and node.op == "scalar"


def _check_integer_divisor(op: OpDef, divisor, out: DType, nodes: dict[str, Node]) -> None:
    """torch raises for an integer division by a Python-number zero (0 or False) at the call;
    a zero inside a tensor is data, found when the program runs."""
    if _literal_number(divisor) and not out.is_floating_point and divisor.value == 0:
        raise op_error(RuntimeError, op.name, "ZeroDivisionError: integer division by zero", nodes,
                       "divide by a nonzero number, or use a floating point tensor")


@rule("integer_division")
def integer_division(op: OpDef, a: Args) -> tuple[Shape, DType]:
    """remainder, fmod, floor_divide, div_trunc, div_floor: pointwise, and a literal 0 divisor raises."""
    shape, out = pointwise(op, a)
    _check_integer_divisor(op, a["other"], out, tensor_args(op, a))
    return shape, out


@rule("pow")
def pow_(op: OpDef, a: Args) -> tuple[Shape, DType]:
    """pow: pointwise; an integer tensor to a negative Python-integer power raises, as in torch
    (a negative exponent inside a tensor computes 1/x truncated)."""
    shape, out = pointwise(op, a)
    x, exponent = a["self"], a["exponent"]
    if not _literal_number(x) and not x.dtype.is_floating_point and _literal_number(exponent) \
            and not exponent.dtype.is_floating_point and exponent.value < 0:
        raise op_error(RuntimeError, op.name, "Integers to negative integer powers are not allowed",
                       tensor_args(op, a), "use a floating point base or exponent, e.g. x.float() ** -1")
    return shape, out


ROUNDING_MODES = (None, "trunc", "floor")


@rule("div")
def div(op: OpDef, a: Args) -> tuple[Shape, DType]:
    """True division promotes integers to float; rounding divisions keep the promoted dtype."""
    mode = a.get("rounding_mode")
    nodes = tensor_args(op, a)
    if mode not in ROUNDING_MODES:
        raise op_error(ValueError, op.name, f"rounding_mode {mode!r} is not supported", nodes,
                       "valid modes are None, 'trunc' and 'floor'")
    check_promoted_allowed(op, nodes)
    shape = broadcast_shapes(op.name, *(n.shape for n in nodes.values()), args=nodes)
    kind = Promotion.INT_TO_FLOAT if mode is None else Promotion.DEFAULT
    _, out = elementwise_dtypes([(n.dtype, rank(n)) for n in nodes.values()], kind)
    if mode is not None and out.is_bool:
        raise op_error(RuntimeError, op.name, f"rounding_mode={mode!r} is not supported for bool tensors", nodes,
                       "cast to an integer dtype first")
    if mode is not None:
        _check_integer_divisor(op, a["other"], out, nodes)
    return shape, out


@rule("round")
def round_(op: OpDef, a: Args) -> tuple[Shape, DType]:
    shape, out = pointwise(op, a)
    if a.get("decimals", 0) != 0 and not out.is_floating_point:
        raise op_error(RuntimeError, op.name, f"decimals={a['decimals']} needs a floating point tensor",
                       {"self": a["self"]}, "round integers with decimals=0")
    return shape, out


@rule("where")
def where(op: OpDef, a: Args) -> tuple[Shape, DType]:
    """Shape broadcasts all three; dtype promotes self and other only; the condition must be bool."""
    cond, nodes = a["condition"], {"self": a["self"], "other": a["other"]}
    every = {"condition": cond, **nodes}
    if cond.dtype not in (D.bool_, D.uint8):
        raise op_error(TypeError, op.name, f"condition must be a bool tensor, got {cond.dtype.name}", every,
                       "compare to get a condition, e.g. x > 0")
    shape = broadcast_shapes(op.name, *(n.shape for n in every.values()), args=every)
    return shape, promoted_dtype(nodes)


def promoted_dtype(nodes: dict[str, Node]) -> DType:
    return elementwise_dtypes([(n.dtype, rank(n)) for n in nodes.values()], Promotion.NO_OPMATH)[1]


@rule("clamp")
def clamp(op: OpDef, a: Args) -> tuple[Shape, DType]:
    nodes = {k: a[k] for k in ("self", "min", "max") if isinstance(a.get(k), Node)}
    if len(nodes) == 1:
        raise op_error(RuntimeError, op.name, "at least one of 'min' or 'max' must not be None", nodes,
                       "pass min=, max= or both")
    shape = broadcast_shapes(op.name, *(n.shape for n in nodes.values()), args=nodes)
    out = promoted_dtype(nodes)
    if out.is_bool:
        raise op_error(TypeError, op.name, "dtype bool is not supported", nodes,
                       "clamp integer or floating point tensors, or bool ones with integer bounds")
    return shape, out


@rule("masked_fill")
def masked_fill(op: OpDef, a: Args) -> tuple[Shape, DType]:
    """Output is typed like self and shaped by broadcasting self with the mask (torch lets either
    broadcast out of place; in place, the assignment keeps self's shape and refuses a larger one)."""
    x, mask, value = a["self"], a["mask"], a["value"]
    nodes = {"self": x, "mask": mask, "value": value}
    if not mask.dtype.is_bool:
        raise op_error(TypeError, op.name, f"mask must be a bool tensor, got {mask.dtype.name}", nodes,
                       "compare to get a mask, e.g. x > 0")
    if value.ndim != 0:
        raise op_error(RuntimeError, op.name, f"value must be a number or a 0-d tensor, got a {value.ndim}-d "
                       f"tensor", nodes, "use where(mask, value, self) for tensor values")
    return broadcast_shapes(op.name, x.shape, mask.shape, args=nodes), x.dtype


@rule("lerp")
def lerp(op: OpDef, a: Args) -> tuple[Shape, DType]:
    """torch's lerp: self and end (and a tensor weight) must share a floating dtype; no promotion."""
    nodes = tensor_args(op, a)
    check_allowed(op, a, nodes)
    x = a["self"]
    for name in ("end", "weight"):
        n = nodes[name]
        if n.dtype is not x.dtype and not (name == "weight" and n.ndim == 0):   # (a number weight is 0-d)
            raise op_error(RuntimeError, op.name, f"expected dtype {x.dtype.name} for `{name}` but got dtype "
                           f"{n.dtype.name}", nodes, "self, end and weight must have the same dtype")
    return broadcast_shapes(op.name, *(n.shape for n in nodes.values()), args=nodes), x.dtype


@rule("addc")
def addc(op: OpDef, a: Args) -> tuple[Shape, DType]:
    """addcmul/addcdiv: self + value * (tensor1 op tensor2), promoted over the three tensors."""
    shape, out = pointwise(op, a)
    nodes = tensor_args(op, a)
    if op.name == "addcdiv" and not all(nodes[k].dtype.is_floating_point for k in ("tensor1", "tensor2")):
        raise op_error(RuntimeError, op.name, "integer division with addcdiv is not supported", nodes,
                       "use floating point tensor1 and tensor2")
    _check_scalar_fits(op, "value", a.get("value"), out, nodes)
    return shape, out


@rule("cast")
def cast(op: OpDef, a: Args) -> tuple[Shape, DType]:
    """x.to(dtype): same shape; the dtype is a dtype (any spelling D.as_dtype takes) or a tensor's."""
    x: Node = a["self"]
    target = a["dtype"]
    target = getattr(target, "node", target)
    if isinstance(target, Node):
        return x.shape, target.dtype
    try:
        return x.shape, D.as_dtype(target)
    except TypeError:
        raise op_error(TypeError, op.name, f"{target!r} is not a dtype", {"self": x},
                       f"valid dtypes: {', '.join(d.name for d in D.ALL)}") from None



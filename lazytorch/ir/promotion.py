"""Type promotion exactly as torch.result_type / torch._prims_common.elementwise_dtypes.

Arguments take part in one of three ranks: tensors with ndim >= 1, 0-d tensors, and Python scalars.
A lower rank only matters when it raises the category (bool < integer < floating); within a
category the highest rank that has one wins.  Python floats count as the default float dtype.
"""
from __future__ import annotations

from enum import Enum
from functools import cache

from . import dtypes as D
from .dtypes import DType

# Ranks an operand can take part in promotion with.
DIM, ZERO_DIM, SCALAR = 0, 1, 2

_INT_ORDER = {D.uint8: 0, D.int8: 1, D.int16: 2, D.int32: 3, D.int64: 4}
_FLOAT_ORDER = {D.float16: 0, D.bfloat16: 0, D.float32: 1, D.float64: 2}


def promote_types(a: DType, b: DType) -> DType:
    """torch.promote_types for two dtypes."""
    if a is b:
        return a
    if a.category != b.category:
        return a if a.category > b.category else b
    if a.is_bool:
        return a
    if a.is_floating_point:
        if {a, b} == {D.float16, D.bfloat16}:
            return D.float32
        return a if _FLOAT_ORDER[a] > _FLOAT_ORDER[b] else b
    if D.uint8 in (a, b):                       # uint8 with a signed type needs a wider signed type
        other = b if a is D.uint8 else a
        return D.int16 if other is D.int8 else other
    return a if _INT_ORDER[a] > _INT_ORDER[b] else b


def _combine(higher: DType | None, lower: DType | None) -> DType | None:
    """torch's combine_categories: a lower rank counts only if it raises the category."""
    if higher is None:
        return lower
    if lower is None or higher.is_floating_point:
        return higher
    if higher.is_bool or lower.is_floating_point:
        return promote_types(higher, lower)
    return higher


def result_type(operands) -> DType:
    """The dtype of a pointwise result from (dtype, rank) pairs, rank one of DIM, ZERO_DIM, SCALAR."""
    return _result_type(tuple(operands))


@cache                                  # promotion runs on every op built; the inputs repeat a lot
def _result_type(operands: tuple[tuple[DType, int], ...]) -> DType:
    best: list[DType | None] = [None, None, None]
    for dt, rank in operands:
        if rank == SCALAR and dt.is_floating_point:
            dt = D.default_float
        best[rank] = dt if best[rank] is None else promote_types(best[rank], dt)
    out = _combine(best[DIM], _combine(best[ZERO_DIM], best[SCALAR]))
    if out is None:
        raise ValueError("result_type needs at least one operand")
    return out


class Promotion(Enum):
    """How an op turns the promoted dtype into its computation and result dtypes (torch's kinds)."""
    DEFAULT = "default"
    INT_TO_FLOAT = "int_to_float"
    ALWAYS_BOOL = "always_bool"
    BOOL_TO_LONG = "bool_to_long"
    NO_OPMATH = "no_opmath"
    KEEP = "keep"            # result is the first operand's dtype (casts, masked_fill)


def opmath(dt: DType) -> DType:
    """The dtype arithmetic is done in: half types compute in float32, as torch does."""
    return D.float32 if dt in (D.float16, D.bfloat16) else dt


def elementwise_dtypes(operands, kind: Promotion) -> tuple[DType, DType]:
    """(computation dtype, result dtype) for a pointwise op, like torch's elementwise_dtypes."""
    return _elementwise_dtypes(tuple(operands), kind)


@cache
def _elementwise_dtypes(operands: tuple[tuple[DType, int], ...], kind: Promotion) -> tuple[DType, DType]:
    promoted = _result_type(operands)
    if kind is Promotion.INT_TO_FLOAT and not promoted.is_floating_point:
        promoted = D.default_float
    if kind is Promotion.BOOL_TO_LONG and promoted.is_bool:
        promoted = D.int64
    if kind is Promotion.ALWAYS_BOOL:
        return opmath(promoted), D.bool_
    if kind is Promotion.NO_OPMATH:
        return promoted, promoted
    return opmath(promoted), promoted

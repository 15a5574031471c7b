"""finfo / iinfo: the numeric limits of lazytorch's floating point and integer dtypes, as in torch.

    lt.finfo(lt.float32).min      # the most negative finite float32, e.g. for additive masks
    lt.iinfo(lt.int64).max
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .ir import dtypes as D


@dataclass(frozen=True)
class FloatInfo:
    bits: int
    eps: float              # the gap between 1.0 and the next representable number
    max: float
    min: float              # -max: the most negative finite value
    tiny: float             # the smallest positive normal number
    resolution: float       # 10 ** -(decimal digits of precision)
    dtype: str

    @property
    def smallest_normal(self) -> float:
        return self.tiny


@dataclass(frozen=True)
class IntInfo:
    bits: int
    max: int
    min: int
    dtype: str


# numpy has no bfloat16: 8 exponent bits as float32, 7 stored mantissa bits
_BFLOAT16 = FloatInfo(bits=16, eps=2.0 ** -7, max=3.3895313892515355e38, min=-3.3895313892515355e38,
                      tiny=2.0 ** -126, resolution=0.01, dtype="bfloat16")


def finfo(dtype: D.DType | None = None) -> FloatInfo:
    """Limits of a floating point dtype (default: the default float dtype)."""
    dtype = D.as_dtype(dtype) if dtype is not None else D.default_float
    if not dtype.is_floating_point:
        raise TypeError(f"finfo(): dtype {dtype.name} is not a floating point dtype; use iinfo() for "
                        f"integer dtypes")
    if dtype is D.bfloat16:
        return _BFLOAT16
    info = np.finfo(dtype.np)
    return FloatInfo(bits=info.bits, eps=float(info.eps), max=float(info.max), min=float(info.min),
                     tiny=float(info.tiny), resolution=10.0 ** -info.precision, dtype=dtype.name)


def iinfo(dtype: D.DType) -> IntInfo:
    """Limits of an integer dtype."""
    dtype = D.as_dtype(dtype)
    if dtype.is_floating_point or dtype.is_bool:
        raise TypeError(f"iinfo(): dtype {dtype.name} is not an integer dtype; use finfo() for floating "
                        f"point dtypes")
    info = np.iinfo(dtype.np)
    return IntInfo(bits=info.bits, max=int(info.max), min=int(info.min), dtype=dtype.name)

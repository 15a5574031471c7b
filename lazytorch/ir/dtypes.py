"""The dtypes lazytorch knows, as one table.

Each DType carries what every layer needs: its category for promotion (bool < integer < floating),
its byte size, and the numpy dtype it is stored as on the host.  bfloat16 has no numpy type, so it is
stored as its raw 16 bits (uint16) and widened to float32 by whoever computes with it.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

BOOL, INTEGER, FLOATING = 0, 1, 2


@dataclass(frozen=True, eq=False)          # dtypes are singletons: compared by identity, fast
class DType:
    name: str          # torch's name: "float32"
    short: str         # compact name used in dumps: "f32"
    itemsize: int
    category: int      # BOOL, INTEGER or FLOATING
    signed: bool
    storage: str       # numpy dtype the host keeps the data in

    @property
    def is_floating_point(self) -> bool:
        return self.category == FLOATING

    @property
    def is_bool(self) -> bool:
        return self.category == BOOL

    @property
    def np(self) -> np.dtype:
        return np.dtype(self.storage)

    def __repr__(self) -> str:
        return f"lazytorch.{self.name}"

    # dtypes are singletons compared by identity: copying a module or tensor keeps the same dtype
    def __copy__(self) -> "DType":
        return self

    def __deepcopy__(self, memo) -> "DType":
        return self


bool_ = DType("bool", "b8", 1, BOOL, False, "bool")
uint8 = DType("uint8", "u8", 1, INTEGER, False, "uint8")
int8 = DType("int8", "i8", 1, INTEGER, True, "int8")
int16 = DType("int16", "i16", 2, INTEGER, True, "int16")
int32 = DType("int32", "i32", 4, INTEGER, True, "int32")
int64 = DType("int64", "i64", 8, INTEGER, True, "int64")
float16 = DType("float16", "f16", 2, FLOATING, True, "float16")
bfloat16 = DType("bfloat16", "bf16", 2, FLOATING, True, "uint16")
float32 = DType("float32", "f32", 4, FLOATING, True, "float32")
float64 = DType("float64", "f64", 8, FLOATING, True, "float64")

ALL: tuple[DType, ...] = (bool_, uint8, int8, int16, int32, int64, float16, bfloat16, float32, float64)
BY_NAME: dict[str, DType] = {d.name: d for d in ALL}
BY_NAME.update({"bool_": bool_, "half": float16, "float": float32, "double": float64,
                "long": int64, "int": int32, "short": int16})

_FROM_NUMPY = {np.dtype(d.storage): d for d in ALL if d is not bfloat16}

default_float = float32
default_int = int64


def from_numpy(dt: np.dtype) -> DType:
    """The DType stored as numpy dtype `dt` (bfloat16 never comes back from here)."""
    try:
        return _FROM_NUMPY[np.dtype(dt)]
    except KeyError:
        raise TypeError(f"numpy dtype {np.dtype(dt)} has no lazytorch dtype; valid: "
                        f"{', '.join(d.name for d in ALL)}") from None


def as_dtype(x) -> DType:
    """Accept a DType, a name ("float32"), a numpy dtype or a torch dtype (by its name)."""
    if isinstance(x, DType):
        return x
    if isinstance(x, str):
        name = x.removeprefix("torch.").removeprefix("lazytorch.")
        if name in BY_NAME:
            return BY_NAME[name]
    elif x is bool:
        return bool_
    elif x is int:
        return default_int
    elif x is float:
        return default_float
    else:
        text = str(x)
        if text.startswith("torch."):
            return as_dtype(text)
        try:
            return from_numpy(np.dtype(x))
        except TypeError:
            pass
    raise TypeError(f"{x!r} is not a dtype; valid: {', '.join(d.name for d in ALL)}")


# ---- bfloat16 <-> float32 on the host (round to nearest even, NaN kept quiet) ----

def bf16_to_f32(bits: np.ndarray) -> np.ndarray:
    return (bits.astype(np.uint32) << 16).view(np.float32)


def f32_to_bf16(x: np.ndarray) -> np.ndarray:
    x = np.ascontiguousarray(x, dtype=np.float32).reshape(np.shape(x))   # keep 0-d as 0-d
    u = x.view(np.uint32)
    rounded = ((u + 0x7FFF + ((u >> 16) & 1)) >> 16).astype(np.uint16)
    return np.where(np.isnan(x), np.uint16(0x7FC0), rounded)


def to_compute(arr: np.ndarray, dt: DType) -> np.ndarray:
    """Host array of dtype `dt` as numpy values one can compute with (bfloat16 widened)."""
    return bf16_to_f32(arr) if dt is bfloat16 else arr


def from_compute(arr, dt: DType) -> np.ndarray:
    """numpy values cast to the storage of `dt` (rounding to bfloat16 where needed)."""
    if dt is bfloat16:
        return f32_to_bf16(np.asarray(arr, dtype=np.float32))
    return np.asarray(arr).astype(dt.np, copy=False)

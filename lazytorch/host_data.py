"""Host data as lazytorch values: Python lists and scalars, numpy arrays and foreign arrays (torch
tensors, MLX arrays, anything with `__dlpack__` or `__array__`) turned into a numpy array in a
dtype's storage form.

It knows no Tensor, so both tensor.py (`copy_` from data) and interop.py (`tensor()`, which adds
the Tensor cases) use it; lazytorch never imports torch for this.
"""
from __future__ import annotations

import sys

import numpy as np

from .ir import dtypes as D


def infer_dtype(data) -> D.DType:
    arr = np.asarray(data)
    if arr.dtype == np.bool_:
        return D.bool_
    if arr.dtype.kind in "iu":
        return D.default_int
    if arr.dtype.kind == "f":
        return D.default_float
    raise TypeError(f"tensor(): cannot make a tensor from {type(data).__name__} with numpy dtype {arr.dtype}")


def is_foreign_array(data) -> bool:
    """Data from another library (DLPack or `__array__`).  A lazytorch Tensor has both too: callers
    test for it first."""
    return not isinstance(data, (np.ndarray, np.generic, list, tuple, int, float, bool)) and \
        (hasattr(data, "__dlpack__") or hasattr(data, "__array__"))


def foreign_to_numpy(data) -> tuple[np.ndarray, D.DType]:
    """A foreign array's values as numpy (compute form) and its lazytorch dtype.

    DLPack first (zero-copy; the caller copies), then `__array__`.  bfloat16, which numpy lacks,
    comes across as its bits: a torch tensor is viewed as int16, an MLX array widened to float32."""
    dtype_name = str(getattr(data, "dtype", ""))
    if dtype_name.endswith("bfloat16"):
        torch = sys.modules.get("torch")
        if torch is not None and isinstance(data, torch.Tensor):       # torch is loaded: the data is its
            bits = np.from_dlpack(data.detach().cpu().contiguous().view(torch.int16)).view(np.uint16)
            return D.bf16_to_f32(bits), D.bfloat16
        mx = sys.modules.get("mlx.core")
        if mx is not None and isinstance(data, mx.array):
            return np.array(data.astype(mx.float32)), D.bfloat16
    arr = None
    if hasattr(data, "__dlpack__"):
        try:
            arr = np.from_dlpack(data)
        except (BufferError, TypeError, RuntimeError, ValueError):
            arr = None                          # e.g. a tensor that requires grad: try __array__
    if arr is None:
        if hasattr(data, "detach") and callable(data.detach):
            data = data.detach()                # torch's __array__ refuses tensors that require grad
        arr = np.asarray(data)
    return arr, D.from_numpy(arr.dtype)


def host_values(data, dtype=None) -> tuple[np.ndarray, D.DType]:
    """A new C-contiguous array with `data`'s values in the storage form of `dtype` (default: the
    dtype `data` carries, or torch's default for Python data) and that dtype."""
    if is_foreign_array(data):
        data, source = foreign_to_numpy(data)
        dtype = source if dtype is None else dtype
    dt = D.as_dtype(dtype) if dtype is not None else \
        D.from_numpy(data.dtype) if isinstance(data, np.ndarray) and data.dtype.kind in "biuf" else infer_dtype(data)
    values = np.array(data, dtype=np.float32 if dt is D.bfloat16 else None)
    return np.array(D.from_compute(values, dt), copy=True), dt

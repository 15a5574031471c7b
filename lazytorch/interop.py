"""Moving data in and out: numpy arrays, Python lists and scalars, MLX arrays, torch tensors.

Data that comes in is copied when the tensor is made.  A lazy result reads its inputs when it is
evaluated, which may be long after the op was written; sharing the memory of a caller's numpy array
would let later writes to that array change results written before them (torch computes eagerly,
so it never shows this).  Data that goes out shares memory: `x.numpy()` of an evaluated tensor is a
view of its buffer, as torch's is.

Foreign arrays (torch tensors, MLX arrays, anything with `__dlpack__` or `__array__`) come in
through DLPack or `__array__`; lazytorch never imports torch for that.
"""
from __future__ import annotations

import sys

import numpy as np

from .ir import dtypes as D
from .ir.node import Node
from .tensor import Tensor


def _infer_dtype(data) -> D.DType:
    arr = np.asarray(data)
    if arr.dtype == np.bool_:
        return D.bool_
    if arr.dtype.kind in "iu":
        return D.default_int
    if arr.dtype.kind == "f":
        return D.default_float
    raise TypeError(f"tensor(): cannot make a tensor from {type(data).__name__} with numpy dtype {arr.dtype}")


def from_host(arr: np.ndarray, dtype: D.DType) -> Tensor:
    """A tensor owning a contiguous host array already in dtype's storage form."""
    arr = np.ascontiguousarray(arr).reshape(arr.shape)    # reshape: ascontiguousarray makes 0-d 1-d
    return Tensor(Node.from_buffer(arr, tuple(arr.shape), dtype))


def _is_foreign_array(data) -> bool:
    return not isinstance(data, (np.ndarray, np.generic, Tensor, list, tuple, int, float, bool)) and \
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


def to_numpy(data) -> tuple[np.ndarray, D.DType]:
    """Values (compute form) and dtype of a lazytorch tensor, numpy array or foreign array."""
    if isinstance(data, Tensor):
        return data.numpy(), data.dtype
    if isinstance(data, np.ndarray):
        return data, D.from_numpy(data.dtype)
    if _is_foreign_array(data):
        return foreign_to_numpy(data)
    arr = np.asarray(data)
    return arr, D.from_numpy(arr.dtype)


def tensor(data, dtype=None, device=None, requires_grad: bool = False) -> Tensor:
    """A new tensor holding a copy of `data` (list, scalar, numpy array, lazytorch tensor, or a torch
    tensor / MLX array / anything with `__dlpack__` or `__array__`), like torch.tensor."""
    if device is not None:
        from .device import select
        select(device)
    if requires_grad:
        return tensor(data, dtype).requires_grad_()
    if isinstance(data, Tensor):
        data = data.numpy() if data.dtype is not D.bfloat16 else data.float().numpy()
    elif _is_foreign_array(data):
        data, source = foreign_to_numpy(data)
        dtype = source if dtype is None else dtype
    if isinstance(data, (list, tuple)) and any(isinstance(d, Tensor) for d in data):
        data = [d.numpy() if isinstance(d, Tensor) else d for d in data]
    dt = D.as_dtype(dtype) if dtype is not None else \
        D.from_numpy(data.dtype) if isinstance(data, np.ndarray) and data.dtype.kind in "biuf" else _infer_dtype(data)
    values = np.array(data, dtype=np.float32 if dt is D.bfloat16 else None)
    return from_host(np.array(D.from_compute(values, dt), copy=True), dt)


def as_tensor(data, dtype=None, device=None) -> Tensor:
    """torch.as_tensor: `data` itself when it is already a lazytorch tensor of that dtype, else a new
    tensor with a copy of it (as tensor(); numpy arrays are copied for the reason from_numpy gives)."""
    if isinstance(data, Tensor):
        if device is not None:
            data = data.to(device)
        return data if dtype is None else data.to(dtype)
    return tensor(data, dtype=dtype, device=device)


def from_numpy(arr: np.ndarray) -> Tensor:
    """A tensor with a copy of a numpy array's data (torch.from_numpy shares it; see below).

    lazytorch copies: a pending result must not depend on writes made to the array after the op
    that read it was written (`a = np.ones(3); y = from_numpy(a) * 2; a[0] = 5` keeps y == [2, 2, 2],
    as torch gives), and in-place ops on the tensor (`t += 1`) do not reach the array.  To read a
    result back without a copy, use `t.numpy()` of the evaluated tensor, which shares memory."""
    if not isinstance(arr, np.ndarray):
        raise TypeError(f"from_numpy(): expected a numpy.ndarray, got {type(arr).__name__}")
    return from_host(np.array(arr, copy=True, order="C"), D.from_numpy(arr.dtype))


def from_dlpack(data) -> Tensor:
    """A tensor with a copy of a DLPack-exporting array's data (torch tensors, MLX arrays, ...)."""
    values, dtype = foreign_to_numpy(data)
    return from_host(np.array(D.from_compute(values, dtype), copy=True), dtype)


def from_mlx(arr) -> Tensor:
    return from_dlpack(arr)

"""Moving data in and out: numpy arrays, Python lists and scalars, MLX arrays."""
from __future__ import annotations

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


def tensor(data, dtype=None, device=None, requires_grad: bool = False) -> Tensor:
    """A new tensor holding a copy of `data` (list, scalar, numpy array or tensor), like torch.tensor."""
    if requires_grad:
        return tensor(data, dtype).requires_grad_()
    if isinstance(data, Tensor):
        data = data.numpy()
    if isinstance(data, (list, tuple)) and any(isinstance(d, Tensor) for d in data):
        data = [d.numpy() if isinstance(d, Tensor) else d for d in data]
    dt = D.as_dtype(dtype) if dtype is not None else \
        D.from_numpy(data.dtype) if isinstance(data, np.ndarray) and data.dtype.kind in "biuf" else _infer_dtype(data)
    values = np.array(data, dtype=np.float32 if dt is D.bfloat16 else None)
    return from_host(np.array(D.from_compute(values, dt), copy=True), dt)


def from_numpy(arr: np.ndarray) -> Tensor:
    """A tensor over a numpy array; contiguous arrays are shared, not copied (as torch.from_numpy)."""
    if not isinstance(arr, np.ndarray):
        raise TypeError(f"from_numpy(): expected a numpy.ndarray, got {type(arr).__name__}")
    return from_host(arr, D.from_numpy(arr.dtype))


def from_mlx(arr) -> Tensor:
    import mlx.core as mx
    if arr.dtype == mx.bfloat16:
        return from_host(D.f32_to_bf16(np.array(arr.astype(mx.float32))), D.bfloat16)
    return from_numpy(np.array(arr))

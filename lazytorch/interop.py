"""Moving data in and out: numpy arrays, Python lists and scalars, MLX arrays, torch tensors.

Data that comes in is copied when the tensor is made.  A lazy result reads its inputs when it is
evaluated, which may be long after the op was written; sharing the memory of a caller's numpy array
would let later writes to that array change results written before them (torch computes eagerly,
so it never shows this).  Data that goes out shares memory: `x.numpy()` of an evaluated tensor is a
view of its buffer, as torch's is, and writes through it reach x.  For the same reason they must
not reach lazy results built from x before the write: while such arrays are out, a result built
from x reads a snapshot of it, and results built before the array went out get one when it goes
out (host_data.py, "Data going out"; a buffer with no array out is read in place, without a copy).

Foreign arrays (torch tensors, MLX arrays, anything with `__dlpack__` or `__array__`) come in
through DLPack or `__array__`; lazytorch never imports torch for that.
"""
from __future__ import annotations

import numpy as np

from .host_data import foreign_to_numpy, host_values, is_foreign_array
from .ir import dtypes as D
from .ir.node import Node
from .tensor import Tensor


def from_host(arr: np.ndarray, dtype: D.DType) -> Tensor:
    """A tensor owning a contiguous host array already in dtype's storage form."""
    arr = np.ascontiguousarray(arr).reshape(arr.shape)    # reshape: ascontiguousarray makes 0-d 1-d
    return Tensor(Node.from_buffer(arr, tuple(arr.shape), dtype))


def to_numpy(data) -> tuple[np.ndarray, D.DType]:
    """Values (compute form) and dtype of a lazytorch tensor, numpy array or foreign array."""
    if isinstance(data, Tensor):
        return data.numpy(), data.dtype
    if isinstance(data, np.ndarray):
        return data, D.from_numpy(data.dtype)
    if is_foreign_array(data):
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
    if isinstance(data, (list, tuple)) and any(isinstance(d, Tensor) for d in data):
        data = [d.numpy() if isinstance(d, Tensor) else d for d in data]
    return from_host(*host_values(data, dtype))


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

"""Host data as lazytorch values: Python lists and scalars, numpy arrays and foreign arrays (torch
tensors, MLX arrays, anything with `__dlpack__` or `__array__`) turned into a numpy array in a
dtype's storage form.

It knows no Tensor, so both tensor.py (`copy_` from data) and interop.py (`tensor()`, which adds
the Tensor cases) use it; lazytorch never imports torch for this.

Data going out: `x.numpy()` hands out arrays that share a tensor's buffer (`share`), and this
module counts the buffers that have such arrays alive (`is_shared`), so that lazy results built
from them read a snapshot (`snapshot`): see "Data going out" below.
"""
from __future__ import annotations

import functools
import sys
import weakref

import numpy as np

from .ir import dtypes as D
from .ir.node import Node


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


# ---------------------------------------------------------------- data going out
# `x.numpy()` is a view of x's buffer, as in torch, and the user may write through it at any time.
# A lazy result reads its inputs when it is evaluated, so a result built from x before such a write
# would see it, where torch, which computed the result eagerly, never does.  A pending result must
# give x's value as of when it was built: while arrays over a buffer are out (and writable), a node
# built from it reads a snapshot of it (tensor.py `Tensor.node`), and results built before the
# array went out get a snapshot when it goes out (tensor.py `Tensor.numpy`).  Buffers with no array
# out, the common case (inputs made from numpy data are copied in; `.item()` drops its array), are
# read in place: no copy.  The other way round, an in-place op on x while an array is out runs at
# once and writes into that buffer (tensor.py `Tensor._write_through`), as torch's op writes the
# memory the array shows; the snapshots above keep pending results on the value they were built from.
SHARED: dict[int, list] = {}        # id(buffer) -> weakrefs to the arrays handed out over it


def share(buffer: np.ndarray) -> np.ndarray:
    """An array over `buffer`'s memory for the user.  The buffer counts as shared while that array
    or any view of it lives: its base is a memoryview, where numpy stops collapsing a view's base
    chain, so every view derived from it keeps it alive.  Read-only buffers are handed out as is."""
    view = memoryview(buffer)
    if view.readonly:
        return buffer
    out = np.asarray(view)
    key = id(buffer)                     # stable while the memoryview keeps the buffer alive
    refs = SHARED.get(key)
    if refs is None:
        refs = SHARED[key] = []
    refs.append(weakref.ref(out, functools.partial(_release, key)))
    return out


def _release(key: int, ref: weakref.ref) -> None:
    refs = SHARED.get(key)
    if refs is not None:
        if ref in refs:
            refs.remove(ref)
        if not refs:
            del SHARED[key]


def is_shared(buffer) -> bool:
    """Whether arrays the user may write through are out over `buffer`."""
    return id(buffer) in SHARED


def snapshot(node: Node) -> Node:
    """A new leaf with a copy of a realized node's current values."""
    return Node.from_buffer(np.array(node.buffer, copy=True), node.shape, node.dtype)

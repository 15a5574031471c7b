"""lazytorch.save / lazytorch.load: state dicts (name -> tensor) in safetensors or .npz files.

The format follows the file name: `.npz` is numpy's zip of arrays, anything else is safetensors
(written and read through the `safetensors` package's numpy API).  Only flat dicts of tensors are
stored, as both formats hold named arrays and nothing else (no pickle: loading runs no code).
bfloat16 is kept exactly: safetensors has the dtype; in .npz it is stored as its uint16 bits under
the name "<key>::bfloat16".
"""
from __future__ import annotations

import os
from collections import OrderedDict

import numpy as np

from .ir import dtypes as D
from .tensor import Tensor

_BF16_SUFFIX = "::bfloat16"


def _is_npz(f) -> bool:
    return str(os.fspath(f)).endswith(".npz")


def _host_arrays(obj) -> dict[str, tuple[np.ndarray, D.DType]]:
    """name -> (contiguous host array in storage form, dtype), evaluating pending tensors."""
    from .interop import to_numpy
    from .realize import eval_tensors
    if not hasattr(obj, "items"):
        raise TypeError(f"lazytorch.save: expected a dict of tensors (a state dict), got {type(obj).__name__}; "
                        "lazytorch stores named arrays only (safetensors or .npz)")
    eval_tensors([v for v in obj.values() if isinstance(v, Tensor)])
    out = {}
    for key, value in obj.items():
        if not isinstance(key, str):
            raise TypeError(f"lazytorch.save: keys must be strings, got {key!r}")
        if isinstance(value, Tensor) and value.dtype is D.bfloat16:
            out[key] = (np.ascontiguousarray(np.asarray(value.node.buffer)), D.bfloat16)
            continue
        arr, dtype = to_numpy(value)
        out[key] = (np.ascontiguousarray(D.from_compute(arr, dtype)), dtype)
    return out


def save(obj: dict, f) -> None:
    """Write a dict of tensors (or numpy / DLPack arrays) to path `f` (safetensors, or .npz by suffix)."""
    arrays = _host_arrays(obj)
    if _is_npz(f):
        np.savez(f, **{(k + _BF16_SUFFIX if dt is D.bfloat16 else k): a for k, (a, dt) in arrays.items()})
        return
    from safetensors.numpy import save_file
    save_file({k: _safetensors_array(a, dt) for k, (a, dt) in arrays.items()}, os.fspath(f))


def _safetensors_array(arr: np.ndarray, dtype: D.DType) -> np.ndarray:
    if dtype is D.bfloat16:
        raise NotImplementedError("lazytorch.save: the safetensors numpy API has no bfloat16; save bfloat16 "
                                  "tensors to a path ending in .npz, or convert them with .float()")
    return arr


def load(f, map_location=None, weights_only: bool = True, mmap=None) -> "OrderedDict[str, Tensor]":
    """Read a state dict written by `save` (or any safetensors / .npz file) as name -> Tensor.

    map_location selects the device as `Tensor.to` does (lazytorch/device.py)."""
    from .interop import from_host
    if map_location is not None and not callable(map_location) and not isinstance(map_location, dict):
        from .device import select
        select(map_location)
    out: OrderedDict[str, Tensor] = OrderedDict()
    if _is_npz(f):
        with np.load(f, allow_pickle=False) as z:
            for name in z.files:
                arr = z[name]
                if name.endswith(_BF16_SUFFIX):
                    out[name[:-len(_BF16_SUFFIX)]] = from_host(np.array(arr, np.uint16), D.bfloat16)
                else:
                    out[name] = from_host(np.array(arr, copy=True), D.from_numpy(arr.dtype))
        return out
    from safetensors.numpy import load_file
    for name, arr in load_file(os.fspath(f)).items():
        out[name] = from_host(np.array(arr, copy=True), D.from_numpy(arr.dtype))
    return out

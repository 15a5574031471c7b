"""lazytorch.save / lazytorch.load: state dicts (name -> tensor) in safetensors or .npz files.

The format follows the file name: `.npz` is numpy's zip of arrays, anything else is safetensors
(written and read through the `safetensors` package's numpy API).  Only flat dicts of tensors are
stored, as both formats hold named arrays and nothing else (no pickle: loading runs no code).
bfloat16 is kept exactly: the safetensors package's numpy API has no bfloat16, so a safetensors file
with bfloat16 tensors is written and read through MLX's safetensors support (MLX is a dependency);
in .npz a bfloat16 tensor is stored as its uint16 bits under the name "<key>::bfloat16".
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
            out[key] = (np.array(value.node.buffer, order="C"), D.bfloat16)
            continue
        arr, dtype = to_numpy(value)
        out[key] = (np.array(D.from_compute(arr, dtype), order="C"), dtype)   # (keeps 0-d)
    return out


def save(obj: dict, f) -> None:
    """Write a dict of tensors (or numpy / DLPack arrays) to path `f` (safetensors, or .npz by suffix)."""
    arrays = _host_arrays(obj)
    if _is_npz(f):
        np.savez(f, **{(k + _BF16_SUFFIX if dt is D.bfloat16 else k): a for k, (a, dt) in arrays.items()})
        return
    if any(dt is D.bfloat16 for _, dt in arrays.values()):
        _save_with_mlx(arrays, os.fspath(f))
        return
    from safetensors.numpy import save_file
    save_file({k: a for k, (a, _) in arrays.items()}, os.fspath(f))


def _save_with_mlx(arrays: dict[str, tuple[np.ndarray, D.DType]], path: str) -> None:
    import mlx.core as mx
    out = {}
    for k, (a, dt) in arrays.items():
        if dt is D.float64:
            raise NotImplementedError(f"lazytorch.save: '{k}' is float64 and the state dict also holds bfloat16 "
                                      "tensors, which go to safetensors through MLX (no float64 there); save "
                                      "to a path ending in .npz, or convert one of the two")
        out[k] = mx.array(a).view(mx.bfloat16) if dt is D.bfloat16 else mx.array(a)
    mx.save_safetensors(path, out)


def _load_with_mlx(path: str) -> dict[str, tuple[np.ndarray, D.DType]]:
    import mlx.core as mx
    out = {}
    for k, a in mx.load(path).items():
        out[k] = (np.array(a.view(mx.uint16)), D.bfloat16) if a.dtype == mx.bfloat16 else \
            (np.array(a), D.from_numpy(np.array(a).dtype))
    return out


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
    try:
        arrays = {k: (a, D.from_numpy(a.dtype)) for k, a in load_file(os.fspath(f)).items()}
    except (KeyError, TypeError) as e:          # a dtype numpy lacks: bfloat16
        if "bf16" not in str(e).lower() and "bfloat16" not in str(e).lower():
            raise
        arrays = _load_with_mlx(os.fspath(f))
    for name, (arr, dtype) in arrays.items():
        out[name] = from_host(np.array(arr, copy=True), dtype)
    return out

"""Reference implementations of views, copies and view updates."""
from __future__ import annotations

import numpy as np

from ...ir import views as V
from ...ir.node import Node
from . import ref

# ---------------------------------------------------------------- views and copies

@ref("view")
def _view(node: Node, base):
    spec: V.ViewSpec = node.attrs["view"]
    flat = np.ascontiguousarray(base).reshape(-1)
    if spec.numel == 0:
        return np.empty(spec.shape, dtype=base.dtype)
    if "clamp" in node.attrs:                     # (ir/build.py clamped_view)
        return flat[np.clip(V.storage_index(spec), 0, flat.size - 1)].reshape(spec.shape)
    return np.array(strided(flat, spec), copy=True)


def strided(flat: np.ndarray, spec: V.ViewSpec) -> np.ndarray:
    """The view `spec` of a contiguous 1-d array as a numpy view of its memory (numpy checks that
    every element lies inside it), not an index array of every element gathered (10x slower)."""
    item = flat.itemsize
    try:
        return np.ndarray(spec.shape, flat.dtype, buffer=flat, offset=spec.offset * item,
                          strides=tuple(s * item for s in spec.strides))
    except (TypeError, ValueError):    # (a base exposing no buffer, an extent numpy refuses: gather)
        return flat[V.storage_index(spec)].reshape(spec.shape)              # 0-d stays 0-d


@ref("contiguous", "clone")
def _copy(node: Node, x):
    return np.array(x, copy=True)


@ref("view_assign")
def _view_assign(node: Node, base, values):
    spec: V.ViewSpec = node.attrs["view"]
    out = np.array(base, copy=True).reshape(-1)
    if spec.numel:
        target = strided(out, spec)
        if target.base is out:
            target[...] = values
        else:                                  # (strided's fallback gathered a copy: scatter instead)
            out[V.storage_index(spec)] = values
    return out.reshape(node.shape)



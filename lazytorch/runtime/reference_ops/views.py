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
    return np.ascontiguousarray(flat[V.storage_index(spec)]).reshape(spec.shape)  # 0-d stays 0-d


@ref("contiguous", "clone")
def _copy(node: Node, x):
    return np.array(x, copy=True)


@ref("view_assign")
def _view_assign(node: Node, base, values):
    spec: V.ViewSpec = node.attrs["view"]
    out = np.array(base, copy=True).reshape(-1)
    if spec.numel:
        out[V.storage_index(spec)] = values
    return out.reshape(node.shape)



"""Reference implementations of advanced indexing (index, index_put), with bounds checks."""
from __future__ import annotations

import numpy as np

from ...ir.node import Node
from . import ref


def _numpy_key(node: Node, size_of, index_arrays) -> tuple:
    """The numpy key selecting node's `dims` by the index arrays, wrapped and bounds-checked."""
    dims = node.attrs["dims"]
    key: list = [slice(None)] * len(size_of)
    for d, idx in zip(dims, index_arrays):
        idx = np.asarray(idx, dtype=np.int64)
        n = size_of[d]
        low = -n if node.attrs.get("wrap_negative", True) else 0
        bad = (idx < low) | (idx >= n)
        if bad.any():
            raise IndexError(f"{node.op}: index {int(idx[bad].flat[0])} is out of bounds for dim {d} with size "
                             f"{n} (self shape {list(size_of)})")
        key[d] = np.where(idx < 0, idx + n, idx)
    return tuple(key)


@ref("index")
def _index(node: Node, x, *indices):
    return np.array(x[_numpy_key(node, x.shape, indices)], copy=True)   # keeps 0-d results 0-d


@ref("index_put")
def _index_put(node: Node, x, *rest):
    *indices, values = rest
    out = np.array(x, copy=True)
    out[_numpy_key(node, x.shape, indices)] = values
    return out

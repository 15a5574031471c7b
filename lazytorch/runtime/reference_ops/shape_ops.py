"""Reference implementations of the opaque shape primitives: cat and gather (bounds-checked)."""
from __future__ import annotations

import numpy as np

from ...ir.node import Node
from . import ref


@ref("cat")
def _cat(node: Node, *tensors):
    # the builder cast every input to the result dtype, so storage forms concatenate as they are
    return np.concatenate(tensors, axis=node.attrs["dim"])


@ref("gather")
def _gather(node: Node, x, index):
    """out[..., i, ...] = x[..., index[..., i, ...], ...] along dim; negative indices are out of range."""
    dim = node.attrs["dim"]
    x1, idx = np.atleast_1d(x), np.atleast_1d(index).astype(np.int64, copy=False)
    n = x1.shape[dim]
    bad = (idx < 0) | (idx >= n)
    if bad.any() and "bounds_error" in node.attrs:     # a composite's own words (cross_entropy's target)
        raise IndexError(node.attrs["bounds_error"].format(index=int(idx[bad].flat[0])))
    if bad.any():
        raise RuntimeError(f"gather: index {int(idx[bad].flat[0])} is out of bounds for dim {dim} with size {n} "
                           f"(self shape {list(x.shape)}, index shape {list(index.shape)}); "
                           f"valid indices are 0..{n - 1}")
    # index may be smaller than x in the other dims: read only the part it covers
    window = tuple(slice(None) if d == dim else slice(0, s) for d, s in enumerate(idx.shape))
    return np.take_along_axis(x1[window], idx, axis=dim).reshape(node.shape)

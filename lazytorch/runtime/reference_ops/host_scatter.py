"""Host implementations of scatter and friends, for `host_call`.  Deterministic: repeated indices
accumulate in index order (np.ufunc.at), as torch's CPU kernels do; a plain scatter keeps the last
write."""
from __future__ import annotations

import numpy as np

from . import host

_IDENTITY = {"sum": 0, "mean": 0, "prod": 1}
# each reduce's accumulation (ufunc.at: repeated indices accumulate in index order)
_ACCUMULATE = {"sum": np.add, "mean": np.add, "prod": np.multiply, "amax": np.maximum, "amin": np.minimum}


def _key(index, dim: int, shape_of_self) -> tuple:
    """numpy key addressing self at index along dim and at the index's own position elsewhere."""
    n = shape_of_self[dim]
    bad = (index < 0) | (index >= n)
    if bad.any():
        raise RuntimeError(f"scatter: index {int(index[bad].flat[0])} is out of bounds for dimension {dim} with "
                           f"size {n}")
    grids = np.indices(index.shape, sparse=True)
    return tuple(index if d == dim else g for d, g in enumerate(grids))


def _extreme(dtype, largest: bool):
    if dtype.kind == "f":
        return -np.inf if largest else np.inf
    if dtype == np.bool_:
        return not largest
    info = np.iinfo(dtype)
    return info.min if largest else info.max


@host("scatter")
def scatter(x, index, src, dim: int, reduce: str | None, include_self: bool = True):
    out = np.array(x, copy=True)
    if out.ndim == 0:
        out, index, src = out.reshape(1), np.reshape(index, (-1,)), np.reshape(src, (-1,))
        return scatter(out, index, src, 0, reduce, include_self).reshape(())
    index = np.asarray(index, dtype=np.int64)
    if index.size == 0:
        return out
    key = _key(index, dim, out.shape)
    vals = np.asarray(src)[tuple(slice(0, s) for s in index.shape)].astype(out.dtype, copy=False)
    if reduce is None:
        out[key] = vals
        return out
    if not include_self:
        fill = _IDENTITY.get(reduce, _extreme(out.dtype, reduce == "amax"))
        out[key] = fill
    _ACCUMULATE[reduce].at(out, key, vals)
    if reduce == "mean":
        count = np.full(out.shape, 1 if include_self else 0, np.int64)
        np.add.at(count, key, 1)
        hit = np.zeros(out.shape, bool)
        hit[key] = True
        safe = np.maximum(count, 1)
        mean = out / safe if out.dtype.kind == "f" else np.floor_divide(out, safe)
        out = np.where(hit, mean, out).astype(out.dtype)
    return out


@host("put")
def put(x, index, source, accumulate: bool):
    out = np.array(x, copy=True).reshape(-1)
    idx = np.asarray(index, dtype=np.int64).reshape(-1)
    n = out.size
    bad = (idx < -n) | (idx >= n)
    if bad.any():
        raise IndexError(f"put: index {int(idx[bad][0])} is out of bounds for a tensor of {n} elements")
    idx = np.where(idx < 0, idx + n, idx)
    vals = np.asarray(source).reshape(-1).astype(out.dtype, copy=False)
    if accumulate:
        np.add.at(out, idx, vals)
    else:
        out[idx] = vals
    return out.reshape(np.shape(x))


@host("masked_scatter")
def masked_scatter(x, mask, source):
    out = np.array(x, copy=True)
    m = np.broadcast_to(np.asarray(mask, dtype=bool), out.shape)
    count = int(m.sum())
    src = np.asarray(source).reshape(-1)
    if src.size < count:
        raise RuntimeError(f"masked_scatter: the mask selects {count} elements but source has only {src.size}")
    out[m] = src[:count]
    return out


@host("diagonal_scatter")
def diagonal_scatter(x, src, offset: int, dim1: int, dim2: int):
    out = np.array(x, copy=True)
    view = np.moveaxis(out, (dim1, dim2), (-2, -1))
    n = np.shape(src)[-1]
    rows = np.arange(n) + max(-offset, 0)
    cols = np.arange(n) + max(offset, 0)
    view[..., rows, cols] = src
    return out


@host("slice_scatter")
def slice_scatter(x, src, dim: int, start: int, end: int, step: int):
    out = np.array(x, copy=True)
    key = [slice(None)] * out.ndim
    key[dim] = slice(start, end, step)
    out[tuple(key)] = src
    return out

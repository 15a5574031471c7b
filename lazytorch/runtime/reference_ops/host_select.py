"""Host implementations of sorting and selection, for `host_call`: the ops return indices along
`dim` (the builders gather the values with them), with torch's rules for ties and NaN: sorts are
stable, NaN sorts as the largest value, median is the lower median, cummax takes the later of
equal values and stops at the first NaN."""
from __future__ import annotations

import numpy as np

from . import host


def _last(x, dim: int):
    return np.moveaxis(np.asarray(x), dim, -1)


def _back(idx, dim: int):
    return np.moveaxis(idx, -1, dim).astype(np.int64)


def stable_argsort(x, descending: bool):
    """Along the last axis: ascending with NaN last, or descending with NaN first, ties by position."""
    if x.dtype == np.bool_:
        x = x.astype(np.int8)
    if not descending:
        return np.argsort(x, axis=-1, kind="stable")
    n = x.shape[-1]
    rev = np.argsort(x[..., ::-1], axis=-1, kind="stable")[..., ::-1]
    return n - 1 - rev


@host("argsort")
def argsort(x, dim: int, descending: bool):
    return _back(stable_argsort(_last(x, dim), descending), dim)


@host("topk")
def topk(x, k: int, dim: int, largest: bool):
    return _back(stable_argsort(_last(x, dim), largest)[..., :k], dim)


def _order_pick(x, dim: int, position):
    """The index of the element at sorted `position(row_sorted_values, nan_count)` of each row."""
    xl = _last(x, dim)
    order = stable_argsort(xl, False)
    vals = np.take_along_axis(xl, order, -1)
    nans = np.isnan(vals).sum(-1) if vals.dtype.kind == "f" else np.zeros(vals.shape[:-1], np.int64)
    pos = position(vals.shape[-1], nans)
    return _back(np.take_along_axis(order, pos[..., None], -1), dim)


@host("kthvalue")
def kthvalue(x, k: int, dim: int):
    return _order_pick(x, dim, lambda n, nans: np.full(nans.shape, k - 1))


@host("median")
def median(x, dim: int, ignore_nan: bool):
    def position(n, nans):
        if ignore_nan:
            m = n - nans
            return np.where(m > 0, (m - 1) // 2, 0 if n == 0 else n - nans)
        return np.where(nans > 0, n - nans, (n - 1) // 2)   # a NaN row answers its first NaN
    return _order_pick(x, dim, lambda n, nans: np.minimum(position(n, nans), max(n - 1, 0)))


@host("mode")
def mode(x, dim: int):
    """The most frequent value (the smallest among equally frequent ones) and its last index."""
    xl = _last(x, dim)
    flat = xl.reshape(-1, xl.shape[-1])
    out = np.zeros(flat.shape[0], np.int64)
    for r, row in enumerate(flat):
        values, counts = np.unique(row, return_counts=True)
        best = values[np.argmax(counts)]
        same = (row == best) | (np.isnan(row) & np.isnan(best)) if row.dtype.kind == "f" else row == best
        out[r] = np.nonzero(same)[0][-1]
    return _back(out.reshape(xl.shape[:-1] + (1,)), dim)


@host("cumextreme")
def cumextreme(x, dim: int, maximum: bool):
    xl = _last(x, dim)
    idx = np.zeros(xl.shape, np.int64)
    if xl.shape[-1] == 0:
        return _back(idx, dim)
    best = xl[..., 0].copy()
    cur = np.zeros(xl.shape[:-1], np.int64)
    isnan = np.isnan if xl.dtype.kind == "f" else (lambda v: np.zeros(np.shape(v), bool))
    for i in range(xl.shape[-1]):
        v = xl[..., i]
        better = (v >= best) if maximum else (v <= best)
        take = ~isnan(best) & (isnan(v) | better) if i else np.ones(best.shape, bool)
        best = np.where(take, v, best)
        cur = np.where(take, i, cur)
        idx[..., i] = cur
    return _back(idx, dim)


@host("cumprod")
def cumprod(x, dim: int):
    return np.cumprod(x, axis=dim) if x.ndim else x


@host("logcumsumexp")
def logcumsumexp(x, dim: int):
    x = np.asarray(x, dtype=np.float64)
    return np.logaddexp.accumulate(x, axis=dim) if x.ndim and x.shape[dim] else x


@host("searchsorted")
def searchsorted(seq, values, right: bool, sorter=None):
    seq = np.asarray(seq)
    if sorter is not None:
        seq = np.take_along_axis(seq, np.asarray(sorter).astype(np.int64), -1)
    side = "right" if right else "left"
    if np.size(values) == 0:
        return np.zeros(np.shape(values), np.int64)
    if seq.ndim == 1:
        return np.searchsorted(seq, values, side=side)
    flat_seq = seq.reshape(-1, seq.shape[-1])
    flat_val = np.asarray(values).reshape(flat_seq.shape[0], -1)
    out = np.stack([np.searchsorted(s, v, side=side) for s, v in zip(flat_seq, flat_val)])
    return out.reshape(np.shape(values))


@host("searchsorted_sorter")
def searchsorted_sorter(seq, values, sorter, right: bool):
    return searchsorted(seq, values, right, sorter)


@host("quantile")
def quantile(x, q, dim, keepdim: bool, interpolation: str, ignore_nan: bool, out_shape: tuple):
    fn = np.nanquantile if ignore_nan else np.quantile
    x = np.asarray(x, dtype=np.float64)
    q = np.asarray(q, dtype=np.float64)
    axis = dim
    if axis is None or x.ndim == 0:
        x, axis = x.reshape(-1), 0
    out = fn(x, q, axis=axis, keepdims=keepdim, method=interpolation)
    if not ignore_nan:
        out = np.where(np.isnan(x).any(axis=axis, keepdims=keepdim), np.nan, out)
    return np.reshape(out, out_shape)

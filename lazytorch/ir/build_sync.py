"""Builders of the data-dependent ops (registry/data_dependent.yaml): nonzero, argwhere,
masked_select, unique, unique_consecutive, bincount, histc, histogram.

Their result's shape depends on values, so they evaluate their input now (a sync, like
`.item()`: the pending program runs) and continue lazily: the result is a new buffer, or for
masked_select an `index` node over the still-lazy input, so later ops keep fusing.
"""
from __future__ import annotations

import numpy as np

from . import dtypes as D
from .build import BUILDERS, Args, builder, call
from .errors import op_error, wrap_dim
from .host import from_values, host_value
from .meta import broadcast_shapes
from .node import Node
from .registry import OpDef
from .schema import Schema


def _value(x: Node) -> np.ndarray:
    return np.asarray(host_value(x))


@builder("nonzero")
def nonzero(op: OpDef, schema: Schema, a: Args):
    x = a["self"]
    vals = _value(x)
    idx = np.argwhere(vals != 0).astype(np.int64).reshape(int(np.count_nonzero(vals)), x.ndim)
    if a.get("as_tuple"):
        if x.ndim == 0:
            return (from_values(np.zeros(int(vals != 0), np.int64), D.int64),)
        return tuple(from_values(np.ascontiguousarray(idx[:, d]), D.int64) for d in range(x.ndim))
    return from_values(idx, D.int64)


@builder("masked_select")
def masked_select(op: OpDef, schema: Schema, a: Args) -> Node:
    x, mask = a["self"], a["mask"]
    if not mask.dtype.is_bool:
        raise op_error(RuntimeError, op.name, f"expected mask to be a bool tensor, got {mask.dtype.name}", {"mask": mask})
    shape = broadcast_shapes(op.name, x.shape, mask.shape, args={"self": x, "mask": mask})
    m = np.broadcast_to(_value(mask), shape)
    if not shape:                                # a 0-d input: its one element, or none
        return call("narrow", call("reshape", x, (1,)), 0, 0, int(bool(m)))
    xb = x if x.shape == shape else call("expand", x, shape)
    positions = tuple(from_values(p.astype(np.int64), D.int64) for p in np.nonzero(m))
    return call("index", xb, positions, tuple(range(len(shape))))


def _unique_along(vals: np.ndarray, dim, consecutive: bool):
    """(values, inverse, counts) of unique elements (dim None) or unique slices along dim."""
    if dim is None:
        flat = vals.reshape(-1)
        if consecutive:
            if flat.size == 0:
                return flat, np.zeros(vals.shape, np.int64), np.zeros(0, np.int64)
            change = np.concatenate([[True], flat[1:] != flat[:-1]])
            groups = np.cumsum(change) - 1
            return flat[change], groups.reshape(vals.shape), np.bincount(groups)
        u, inv, cnt = np.unique(flat, return_inverse=True, return_counts=True, equal_nan=False)
        return u, inv.reshape(vals.shape), cnt
    moved = np.moveaxis(vals, dim, 0)
    if moved.size == 0:
        return vals, np.zeros(moved.shape[0], np.int64), np.zeros(0 if moved.shape[0] == 0 else 1, np.int64)
    rows = moved.reshape(moved.shape[0], -1)
    if consecutive:
        if rows.shape[0] == 0:
            return vals, np.zeros(0, np.int64), np.zeros(0, np.int64)
        change = np.concatenate([[True], (rows[1:] != rows[:-1]).any(1)])
        groups = np.cumsum(change) - 1
        return np.moveaxis(moved[change], 0, dim), groups, np.bincount(groups)
    u, inv, cnt = np.unique(rows, axis=0, return_inverse=True, return_counts=True)
    u = u.reshape((u.shape[0],) + moved.shape[1:])
    return np.moveaxis(u, 0, dim), inv.reshape(-1), cnt


@builder("unique")
def unique(op: OpDef, schema: Schema, a: Args):
    x = a["self"]
    dim = a.get("dim")
    if dim is not None:
        dim = wrap_dim(op.name, dim, x.ndim, {"self": x})
    u, inv, cnt = _unique_along(_value(x), dim, op.name == "unique_consecutive")
    out = [from_values(u, x.dtype)]
    if a["return_inverse"]:
        out.append(from_values(inv.astype(np.int64), D.int64))
    if a["return_counts"]:
        out.append(from_values(cnt.astype(np.int64), D.int64))
    return out[0] if len(out) == 1 else tuple(out)


@builder("bincount")
def bincount(op: OpDef, schema: Schema, a: Args) -> Node:
    x, w, minlength = a["self"], a["weights"], a["minlength"]
    if x.ndim != 1 or x.dtype.is_floating_point or x.dtype.is_bool:
        raise op_error(RuntimeError, op.name, "bincount only supports 1-d non-negative integral inputs", {"self": x})
    if minlength < 0:
        raise op_error(RuntimeError, op.name, f"minlength should be >= 0, got {minlength}", {"self": x})
    vals = _value(x).astype(np.int64)
    if (vals < 0).any():
        raise op_error(RuntimeError, op.name, "bincount only supports 1-d non-negative integral inputs", {"self": x})
    if w is None:
        return from_values(np.bincount(vals, minlength=minlength), D.int64)
    if w.shape != x.shape:
        raise op_error(RuntimeError, op.name, "weights should be 1-d and have the same length as input", {"weights": w})
    dtype = w.dtype if w.dtype.is_floating_point else D.float64
    return from_values(np.bincount(vals, weights=_value(w).astype(np.float64), minlength=minlength), dtype)


@builder("histc")
def histc(op: OpDef, schema: Schema, a: Args) -> Node:
    x, bins, lo, hi = a["self"], a["bins"], float(a["min"]), float(a["max"])
    if not x.dtype.is_floating_point:
        raise op_error(RuntimeError, op.name, f"\"histogram_cpu\" not implemented for '{x.dtype.name}'", {"self": x})
    if bins <= 0:
        raise op_error(RuntimeError, op.name, f"bins must be > 0, but got {bins}", {"self": x})
    vals = _value(x).astype(np.float64).reshape(-1)
    if lo > hi:
        raise op_error(RuntimeError, op.name, f"max must be larger than min, got min={lo} max={hi}", {"self": x})
    if lo == hi and vals.size:
        lo, hi = float(vals.min()), float(vals.max())
    if lo == hi:
        lo, hi = lo - 1, hi + 1
    inside = vals[(vals >= lo) & (vals <= hi)]
    counts, _ = np.histogram(inside, bins=bins, range=(lo, hi))
    return from_values(counts.astype(np.float64), x.dtype)


@builder("histogram")
def histogram(op: OpDef, schema: Schema, a: Args):
    x, bins, rng, w, density = a["self"], a["bins"], a["range"], a["weight"], a["density"]
    if not x.dtype.is_floating_point:
        raise op_error(RuntimeError, op.name, f"\"histogram_cpu\" not implemented for '{x.dtype.name}'", {"self": x})
    vals = _value(x).astype(np.float64).reshape(-1)
    bins_v = _value(getattr(bins, "node", bins)).astype(np.float64) if isinstance(getattr(bins, "node", bins), Node) else int(bins)
    weights = None if w is None else _value(getattr(w, "node", w)).astype(np.float64).reshape(-1)
    if rng is not None:
        rng = (float(rng[0]), float(rng[1]))
    elif vals.size == 0 and not isinstance(bins_v, np.ndarray):   # torch bins an empty input over [0, 1]
        rng = (0.0, 1.0)
    if isinstance(bins_v, np.ndarray):
        hist, edges = np.histogram(vals, bins=bins_v, range=rng, weights=weights, density=bool(density))
    else:
        hist, edges = _linear_histogram(vals.astype(np.float32 if x.dtype is not D.float64 else np.float64),
                                        bins_v, rng, weights, bool(density))
    return from_values(hist.astype(np.float64), x.dtype), from_values(edges, x.dtype)


def _linear_histogram(vals: np.ndarray, bins: int, rng, weights, density: bool):
    """Equal-width bins as torch computes them: edges by its linspace in the input's precision
    (a value on an edge falls where torch's rounded edges put it), a degenerate range widened by 0.5."""
    dt = vals.dtype.type
    lo, hi = (dt(rng[0]), dt(rng[1])) if rng is not None else (vals.min(), vals.max())
    if lo == hi:
        lo, hi = dt(lo - dt(0.5)), dt(hi + dt(0.5))
    step = dt((hi - lo) / dt(bins))
    i = np.arange(bins + 1)
    half = (bins + 1) // 2
    edges = np.where(i < half, lo + step * i.astype(dt), hi - step * (bins - i).astype(dt)).astype(dt)
    inside = (vals >= lo) & (vals <= hi)
    pos = np.clip(np.searchsorted(edges, vals[inside], side="right") - 1, 0, bins - 1)
    w = None if weights is None else weights[inside]
    hist = np.bincount(pos, weights=w, minlength=bins).astype(np.float64)
    if density:
        hist = hist / (hist.sum() * np.diff(edges.astype(np.float64)))
    return hist, edges


@builder("narrow_any")
def narrow_any(op: OpDef, schema: Schema, a: Args) -> Node:
    """narrow with a 0-d integer tensor start reads it (a sync, as torch's does)."""
    start = a["start"]
    if isinstance(start, Node):
        if start.ndim != 0 or start.dtype.is_floating_point or start.dtype.is_bool:
            raise op_error(RuntimeError, op.name, "start must be an 0-dim integral Tensor", {"start": start})
        a = dict(a, start=int(_value(start)))
    return BUILDERS["narrow"](op, schema, a)


@builder("repeat_interleave_any")
def repeat_interleave_any(op: OpDef, schema: Schema, a: Args) -> Node:
    """repeat_interleave with a tensor of repeats (or torch.repeat_interleave(repeats) alone): the
    repeats are read (a sync) and the result is index_select with the repeated positions."""
    if "repeats" in a and not isinstance(a["repeats"], Node):
        return BUILDERS["repeat_interleave"](op, schema, a)
    if "repeats" not in a:                       # repeat_interleave(repeats): repeat each index
        reps_node = a["self"]
        reps = _value(reps_node).astype(np.int64).reshape(-1)
        return from_values(np.repeat(np.arange(reps.size), reps), D.int64)
    x, reps_node = a["self"], a["repeats"]
    if reps_node.dtype.is_floating_point or reps_node.dtype.is_bool or reps_node.ndim > 1:
        raise op_error(RuntimeError, op.name, "repeats must be a 0-d or 1-d integer tensor", {"repeats": reps_node})
    reps = _value(reps_node).astype(np.int64).reshape(-1)
    if (reps < 0).any():
        raise op_error(RuntimeError, op.name, "repeats can not be negative", {"repeats": reps_node})
    if a["dim"] is None:
        x, d = call("reshape", x, (-1,)), 0
    else:
        d = wrap_dim(op.name, a["dim"], x.ndim, {"self": x})
    n = x.shape[d] if x.ndim else 1
    if reps.size == 1:
        reps = np.repeat(reps, n)
    if reps.size != n:
        raise op_error(RuntimeError, op.name, f"repeats must have the same size as input along dim, but got "
                       f"repeats.size(0) = {reps.size} and input.size({d}) = {n}", {"self": x, "repeats": reps_node})
    idx = from_values(np.repeat(np.arange(n), reps), D.int64)
    return call("index_select", x, d, idx)

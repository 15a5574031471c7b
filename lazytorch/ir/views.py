"""Views as metadata: a ViewSpec says how a view indexes the contiguous layout of its base.

element (i0, i1, ...) of the view lives at base_flat[offset + sum(i_d * strides[d])].
Broadcast dims have stride 0 and flipped dims negative strides.  Every function here maps a spec
to a new spec over the same base, so a view of a view composes into one spec.  `reshape` returns
None where no strides can express the result (then the caller must copy first, as torch does).
"""
from __future__ import annotations

import math
from dataclasses import dataclass


@dataclass(frozen=True)
class ViewSpec:
    shape: tuple[int, ...]
    strides: tuple[int, ...]
    offset: int = 0

    def __repr__(self) -> str:
        off = f", offset={self.offset}" if self.offset else ""
        return f"View({list(self.shape)}, strides={list(self.strides)}{off})"

    @property
    def numel(self) -> int:
        return math.prod(self.shape)


def contiguous_strides(shape: tuple[int, ...]) -> tuple[int, ...]:
    strides, acc = [], 1
    for s in reversed(shape):
        strides.append(acc)
        acc *= max(s, 1)
    return tuple(reversed(strides))


def contiguous(shape: tuple[int, ...]) -> ViewSpec:
    return ViewSpec(tuple(shape), contiguous_strides(shape), 0)


def is_contiguous(v: ViewSpec) -> bool:
    """True when the view reads its base's elements in order from its offset."""
    expected = 1
    for s, st in zip(reversed(v.shape), reversed(v.strides)):
        if s != 1 and st != expected:
            return False
        expected *= s
    return True


def is_identity(v: ViewSpec, base_shape: tuple[int, ...]) -> bool:
    """True when the view is its base unchanged."""
    return v.offset == 0 and v.shape == tuple(base_shape) and is_contiguous(v)


def has_internal_overlap(v: ViewSpec) -> bool:
    """True when two elements of the view share one base element (an expanded dim: stride 0, size > 1),
    which torch's in-place ops refuse to write through."""
    return v.numel > 0 and any(st == 0 and s > 1 for s, st in zip(v.shape, v.strides))


def permute(v: ViewSpec, dims: tuple[int, ...]) -> ViewSpec:
    return ViewSpec(tuple(v.shape[d] for d in dims), tuple(v.strides[d] for d in dims), v.offset)


def expand(v: ViewSpec, shape: tuple[int, ...]) -> ViewSpec:
    """Broadcast to `shape` (already validated): new leading dims and size-1 dims get stride 0."""
    lead = len(shape) - len(v.shape)
    strides = [0] * lead
    for d, (old, st) in enumerate(zip(v.shape, v.strides)):
        strides.append(0 if old == 1 and shape[lead + d] != 1 else st)
    return ViewSpec(tuple(shape), tuple(strides), v.offset)


def slice_dim(v: ViewSpec, dim: int, start: int, stop: int, step: int) -> ViewSpec:
    """v[..., start:stop:step, ...] along `dim`, with start/stop already clamped into range."""
    size = max(0, (stop - start + step - 1) // step)
    shape = v.shape[:dim] + (size,) + v.shape[dim + 1:]
    strides = v.strides[:dim] + (v.strides[dim] * step,) + v.strides[dim + 1:]
    offset = v.offset + start * v.strides[dim] if size else v.offset
    return ViewSpec(shape, strides, offset)


def select(v: ViewSpec, dim: int, index: int) -> ViewSpec:
    return ViewSpec(v.shape[:dim] + v.shape[dim + 1:], v.strides[:dim] + v.strides[dim + 1:],
                    v.offset + index * v.strides[dim])


def unsqueeze(v: ViewSpec, dim: int) -> ViewSpec:
    stride = v.strides[dim] * v.shape[dim] if dim < len(v.shape) else 1
    return ViewSpec(v.shape[:dim] + (1,) + v.shape[dim:], v.strides[:dim] + (stride,) + v.strides[dim:],
                    v.offset)


def squeeze(v: ViewSpec, dims: tuple[int, ...]) -> ViewSpec:
    keep = [d for d in range(len(v.shape)) if not (d in dims and v.shape[d] == 1)]
    return ViewSpec(tuple(v.shape[d] for d in keep), tuple(v.strides[d] for d in keep), v.offset)


def flip(v: ViewSpec, dims: tuple[int, ...]) -> ViewSpec:
    offset, strides = v.offset, list(v.strides)
    for d in dims:
        if v.shape[d] > 0:
            offset += (v.shape[d] - 1) * strides[d]
        strides[d] = -strides[d]
    return ViewSpec(v.shape, tuple(strides), offset)


def reshape(v: ViewSpec, shape: tuple[int, ...]) -> ViewSpec | None:
    """The view with a new shape over the same elements, or None if no strides can express it.

    torch's computeStride: dims of the old shape that are laid out contiguously with each other
    form chunks; each chunk can be re-split freely, nothing may cross a chunk boundary.
    """
    if v.numel == 0 or is_contiguous(v):
        return ViewSpec(tuple(shape), contiguous_strides(shape), v.offset)
    old = [(s, st) for s, st in zip(v.shape, v.strides) if s != 1]
    new_strides = [0] * len(shape)
    oi, ni = 0, 0
    while ni < len(shape) or oi < len(old):
        # take one chunk of old dims that are contiguous with each other
        if oi >= len(old):
            if shape[ni] != 1:
                return None
            new_strides[ni] = 1
            ni += 1
            continue
        numel = old[oi][0]
        while oi + 1 < len(old) and old[oi][1] == old[oi + 1][0] * old[oi + 1][1]:
            oi += 1
            numel *= old[oi][0]
        inner_stride = old[oi][1]
        oi += 1
        # consume new dims whose product is exactly this chunk, innermost last
        dims, prod = [], 1
        while ni < len(shape) and (prod < numel or shape[ni] == 1):
            if prod * shape[ni] > numel and shape[ni] != 1:
                return None
            dims.append(ni)
            prod *= shape[ni]
            ni += 1
            if prod == numel and not (ni < len(shape) and shape[ni] == 1 and oi >= len(old)):
                break
        if prod != numel:
            return None
        acc = inner_stride
        for d in reversed(dims):
            new_strides[d] = acc
            acc *= shape[d]
    return ViewSpec(tuple(shape), tuple(new_strides), v.offset)


def storage_index(v: ViewSpec):
    """The flat base index of every element of the view, as a numpy array (for the host)."""
    import numpy as np
    idx = np.full(v.shape, v.offset, dtype=np.int64)
    for d, (s, st) in enumerate(zip(v.shape, v.strides)):
        shape = [1] * len(v.shape)
        shape[d] = s
        idx = idx + (np.arange(s, dtype=np.int64) * st).reshape(shape)
    return idx

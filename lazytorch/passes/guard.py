"""Reading a constant pad through a view of it without writing the pad: GPU backends.

A constant pad (ir/build_shape_ops.py `padded`) is `where(inside the box, clamped view of x,
fill)`: one pointwise node.  A view of it -- a convolution's windows, permuted and reshaped into
columns -- must read a stored buffer (passes/fuse.py), so the pad is written whole and read back
by the columns' copy: a pass over each padded input (ResNet-18's forward at 64 x 224^2 on an
H200: 0.03-0.05 ms a 3 x 3 layer).

This pass rewrites such a view into the pad's own form in the view's coordinates: the view of x's
base itself (the view composed with the clamped one), read where each padded coordinate, a linear
function of the view's indices, lies inside the box (index arithmetic from iotas), and the fill
elsewhere, so the copy that makes the columns reads x itself.  Its view's `clamp` is GUARDED: its
reader's mask is no box (no gradient: passes run after autograd; its flat index is clipped into
the buffer where no mask guards it, as a clamped view's is).  Only views that are copied or
reduced over (pooling's windows; `guard_views`) and whose every dim steps along one dim of the
pad, within it, are rewritten (windows, permutes, slices, broadcasts; not a reshape that merges
dims).  Backends opt in (`Backend.guarded_reads`): the C backend's masked loads do not vectorise
(gcc 12), so there the pad's plain copy and the windows' plain copy run faster than one masked
copy (a 64-channel 3 x 3 layer at 8 x 32^2, one thread: 5.8 against 3.1 ms).
"""
from __future__ import annotations

import math

from ..ir import views as V
from ..ir.build import GUARDED, call, constant
from ..ir.build_shape_ops import is_box_mask
from ..ir.creation import iota
from ..ir.graph import toposort
from ..ir.node import Node
from .rewrite import rewrite


def guard_views(roots: list[Node]) -> list[Node]:
    """The graph with each view of a constant pad read through the pad's mask (module docstring),
    where the view is only copied (a convolution's columns: `contiguous`, or read by a product
    through a reshape) or reduced (a pooling's windows): read by a pointwise op, its mask would be
    a broadcast of a computed value, which the GPU backends' templates do not take where it is
    not right-aligned (a max pooling's backward: the cuda backend ran such a kernel on the host).
    Views are told by their spec and their pad's box and shape, since the rewrite rebuilds a view
    whose input graph changed."""
    readers: dict[tuple, set[str]] = {}
    for n in toposort(roots):
        for i in n.inputs:
            key = _key(i)
            if key is not None:
                readers.setdefault(key, set()).add(n.op)
    copied = {k for k, ops in readers.items() if ops <= READERS}
    return rewrite(roots, lambda n: _guarded(n) if _key(n) in copied else None, leaves_kept=("param", "scalar"))


# what may read a rewritten view: a copy (a convolution's columns), a product, a window reduction
# (pooling's forward); not a pointwise op, which the view would then feed with a mask broadcast
READERS = frozenset({"contiguous", "matmul", "amax", "amin", "sum"})


def _key(n: Node) -> tuple | None:
    if n.op != "view" or "clamp" in n.attrs or n.inputs[0].op != "where":
        return None
    cv = n.inputs[0].inputs[1]
    return (n.attrs["view"], cv.attrs.get("clamp"), n.inputs[0].shape) if cv.op == "view" else None


def _guarded(n: Node) -> Node | None:
    """n (a view of a `where`: `_key`) as the pad's masked read, or None."""
    pad = n.inputs[0]
    box = _pad_box(pad)
    if box is None:
        return None
    _, cv, fill = pad.inputs
    steps = _steps(n.attrs["view"], pad.shape)
    if steps is None:
        return None
    spec, (cs, coff) = n.attrs["view"], (cv.attrs["view"].strides, cv.attrs["view"].offset)
    coords_at = _unravel(spec.offset, pad.shape)
    strides = tuple(a * cs[d] if d is not None else 0 for d, a in steps)
    offset = coff + sum(c * s for c, s in zip(coords_at, cs))
    view = Node("view", (cv.inputs[0],), {"view": V.ViewSpec(spec.shape, strides, offset), "clamp": GUARDED},
                spec.shape, cv.dtype)
    inside = _inside(box, steps, spec.shape, coords_at, pad.shape)
    if inside is None:
        return None                                    # (the view reads inside the box only: the
    out = call("where", inside, view, fill)            #  simplifier's business, not this pass's)
    return out if out.dtype is n.dtype and out.shape == n.shape else None


def _inside(box, steps, shape, coords_at, pad_shape) -> Node | None:
    """Where a view (of `shape`, stepping `steps` from the pad coordinates `coords_at`) lies inside
    the pad's box: per boxed dim, the padded coordinate (iotas times steps plus the start) tested
    against the bounds the view crosses; None where it never leaves the box."""
    inside = None
    for d, (lo, hi) in enumerate(box):
        if (lo, hi) == (0, pad_shape[d]):
            continue
        terms = [(k, a) for k, (dd, a) in enumerate(steps) if dd == d and a and shape[k] > 1]
        least = coords_at[d]
        most = least + sum(a * (shape[k] - 1) for k, a in terms)
        coord = constant(coords_at[d]) if not terms else None
        for k, a in terms:
            at = [1] * len(shape)
            at[k] = shape[k]
            term = iota(tuple(at), k)
            term = term if a == 1 else call("mul", term, constant(a))
            coord = term if coord is None else call("add", coord, term)
        if terms and coords_at[d]:
            coord = call("add", coord, constant(coords_at[d]))
        tests = ([call("ge", coord, constant(lo))] if least < lo else []) + \
            ([call("lt", coord, constant(hi))] if most >= hi else [])
        for t in tests:
            inside = t if inside is None else call("logical_and", inside, t)
    return inside


def _pad_box(pad: Node):
    """The box of a constant pad `where(box mask, clamped view, fill)` (ir/build_shape_ops.py
    padded, after normalize: its constants plain), or None."""
    if pad.op != "where":
        return None
    cond, cv, _ = pad.inputs
    if cv.op != "view" or not isinstance(cv.attrs.get("clamp"), tuple):
        return None
    box = cv.attrs["clamp"]
    return box if is_box_mask(cond, cv.shape, box, program=True) else None


def _steps(spec: V.ViewSpec, shape) -> list[tuple[int | None, int]] | None:
    """Per dim of the view `spec` of a contiguous tensor of `shape`: (the tensor's dim it steps
    along, by how many) -- (None, 0) where it does not move -- or None where some dim's steps do
    not stay within one dim of the tensor (a merge, a negative step)."""
    if spec.offset < 0 or spec.offset >= max(math.prod(shape), 1):
        return None
    flat = V.contiguous_strides(shape)
    start = _unravel(spec.offset, shape)
    steps: list[tuple[int | None, int]] = []
    reach = list(start)
    for size, st in zip(spec.shape, spec.strides):
        if st == 0 or size == 1:
            steps.append((None, 0))
            continue
        d = next((d for d, f in enumerate(flat) if st >= f and st % f == 0 and shape[d] > 1), None)
        if d is None or st < 0:
            return None
        a = st // flat[d]
        steps.append((d, a))
        reach[d] += a * (size - 1)
    return steps if all(r < n for r, n in zip(reach, shape)) else None


def _unravel(flat: int, shape) -> list[int]:
    """The coordinates of element `flat` of a contiguous tensor of `shape`."""
    out = []
    for n in reversed(shape):
        flat, c = divmod(flat, n) if n else (flat, 0)
        out.append(c)
    return out[::-1]

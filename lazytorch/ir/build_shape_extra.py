"""Builders of the shape and linear-algebra helpers (registry/shape_extra.yaml and
registry/linalg_extra.yaml), each composed at the call from views, cat, where/iota, pointwise ops,
sums and matmul, so they add no kernels of their own:

    diagonal, unfold        views (a ViewSpec with combined strides)
    diag_embed              where(col - row == offset, x broadcast along a new dim, 0)
    atleast_*, *stack, *split, tile, movedim, rot90, meshgrid, kron, block_diag   views and cat
    outer, inner, tensordot, addmv, addr, addbmm, vdot, multi_dot, cdist, norms   matmul, sums
"""
from __future__ import annotations

import itertools

import numpy as np

from . import dtypes as D
from . import meta
from . import views as V
from .build import Args, apply_view, builder, call
from .creation import fill, iota
from .errors import op_error, wrap_dim
from .families import OpFamily
from .host import from_values, host_value
from .node import Node
from .registry import OpDef
from .schema import Schema

FAMILY = OpFamily("shape_extra")
shape_op = FAMILY.register


def _wrap(op: str, d: int, x: Node, extra: int = 0) -> int:
    return wrap_dim(op, d, x.ndim + extra, {"self": x})


# ---------------------------------------------------------------- views

def diagonal_spec(spec: V.ViewSpec, offset: int, d1: int, d2: int) -> V.ViewSpec:
    n1, n2 = spec.shape[d1], spec.shape[d2]
    length = max(0, min(n1, n2 - offset) if offset >= 0 else min(n1 + offset, n2))
    start = spec.offset + (offset * spec.strides[d2] if offset >= 0 else -offset * spec.strides[d1])
    keep = [i for i in range(len(spec.shape)) if i not in (d1, d2)]
    shape = tuple(spec.shape[i] for i in keep) + (length,)
    strides = tuple(spec.strides[i] for i in keep) + (spec.strides[d1] + spec.strides[d2],)
    return V.ViewSpec(shape, strides, start if length else spec.offset)


@shape_op("diagonal", "linalg_diagonal")
def _diagonal(op, a):
    x = a["self"] if "self" in a else a["A"]
    d1, d2 = _wrap(op, a["dim1"], x), _wrap(op, a["dim2"], x)
    if d1 == d2:
        raise op_error(RuntimeError, op, f"diagonal dimensions cannot be identical {a['dim1']}, {a['dim2']}", {"self": x})
    return apply_view(x, lambda s: diagonal_spec(s, a["offset"], d1, d2))


@shape_op("unfold")
def _unfold(op, a):
    x, size, step = a["self"], a["size"], a["step"]
    d = _wrap(op, a["dimension"], x) if x.ndim else 0
    n = x.shape[d] if x.ndim else 1
    if size > n:
        raise op_error(RuntimeError, op, f"maximum size for tensor at dimension {d} is {n} but size is {size}", {"self": x})
    if step <= 0:
        raise op_error(RuntimeError, op, f"step is {step} but must be > 0", {"self": x})
    if x.ndim == 0:
        return call("reshape", x, (1,))

    def spec_fn(s: V.ViewSpec) -> V.ViewSpec:
        count = (n - size) // step + 1
        shape = s.shape[:d] + (count,) + s.shape[d + 1:] + (size,)
        strides = s.strides[:d] + (s.strides[d] * step,) + s.strides[d + 1:] + (s.strides[d],)
        return V.ViewSpec(shape, strides, s.offset)
    return apply_view(x, spec_fn)


@shape_op("movedim")
def _movedim(op, a):
    x = a["self"]
    src = (a["source"],) if isinstance(a["source"], int) else tuple(a["source"])
    dst = (a["destination"],) if isinstance(a["destination"], int) else tuple(a["destination"])
    if len(src) != len(dst):
        raise op_error(RuntimeError, op, f"Invalid source or destination dims: source ({list(src)} dims) should "
                       f"contain the same number of dims as destination ({list(dst)} dims)", {"self": x})
    src = tuple(_wrap(op, d, x) for d in src)
    dst = tuple(_wrap(op, d, x) for d in dst)
    if len(set(src)) != len(src) or len(set(dst)) != len(dst):
        raise op_error(RuntimeError, op, "repeated dim in source or destination", {"self": x})
    order = [None] * x.ndim
    for s, t in zip(src, dst):
        order[t] = s
    rest = iter(d for d in range(x.ndim) if d not in src)
    perm = tuple(o if o is not None else next(rest) for o in order)
    return call("permute", x, perm) if x.ndim else x


# ---------------------------------------------------------------- diagonals and triangles

@shape_op("diag_embed")
def _diag_embed(op, a):
    x, off = a["self"], a["offset"]
    m = (x.shape[-1] if x.ndim else 1) + abs(off)
    if x.ndim == 0:
        x = call("reshape", x, (1,))
    d1, d2 = wrap_dim(op, a["dim1"], x.ndim + 1), wrap_dim(op, a["dim2"], x.ndim + 1)
    if d1 == d2:
        raise op_error(RuntimeError, op, f"diagonal dimensions cannot be identical {a['dim1']}, {a['dim2']}", {"self": x})
    n = x.shape[-1]
    padded = call("pad", x, (0, m - n)) if m != n else x
    vals = call("unsqueeze", padded, -1 if off >= 0 else -2)        # index by row (off >= 0) or column
    shape = x.shape[:-1] + (m, m)
    vals = call("expand", vals, shape)
    on = call("eq", call("sub", iota((1, m), 1), iota((m, 1), 0)), off)
    out = call("where", on, vals, fill((), 0, x.dtype))
    out = call("movedim", out, (-2, -1), (d1, d2)) if (d1, d2) != (out.ndim - 2, out.ndim - 1) else out
    return out


@shape_op("diag")
def _diag(op, a):
    x, k = a["self"], a["diagonal"]
    if x.ndim == 1:
        return call("diag_embed", x, k)
    if x.ndim == 2:
        return call("clone", call("diagonal", x, k))
    raise op_error(RuntimeError, op, f"matrix or a vector expected, got a {x.ndim}-d tensor", {"self": x})


@shape_op("diagflat")
def _diagflat(op, a):
    return call("diag_embed", call("reshape", a["self"], (-1,)), a["offset"])


@shape_op("trace")
def _trace(op, a):
    x = a["self"]
    if x.ndim != 2:
        raise op_error(RuntimeError, op, f"expected a matrix, but got tensor with dim {x.ndim}", {"self": x})
    return call("sum", call("diagonal", x))


@shape_op("tril_indices", "triu_indices")
def _tri_indices(op, a):
    row, col, off = a["row"], a["col"], a["offset"]
    if row < 0 or col < 0:
        raise op_error(RuntimeError, op, f"row and col must be non-negative, got {row} and {col}")
    r, c = (np.tril_indices if op == "tril_indices" else np.triu_indices)(row, off, col)
    dtype = D.as_dtype(a["dtype"]) if a["dtype"] is not None else D.int64
    return from_values(np.stack([r, c]).astype(np.int64), dtype)


# ---------------------------------------------------------------- joining and splitting

def _atleast(x: Node, n: int) -> Node:
    if x.ndim >= n:
        return x
    if n == 3 and x.ndim == 2:
        return call("unsqueeze", x, -1)
    shape = {0: (1,) * n, 1: (1,) * (n - 1) + x.shape if n == 2 else (1,) + x.shape + (1,)}[x.ndim]
    return call("reshape", x, shape)


@shape_op("hstack")
def _hstack(op, a):
    ts = tuple(_atleast(t, 1) for t in a["tensors"])
    return call("cat", ts, 0 if ts and ts[0].ndim == 1 else 1)


# op -> (the dims every tensor is raised to, the dim they are joined along)
_STACKS = {"vstack": (2, 0), "dstack": (3, 2)}


@shape_op(*_STACKS)
def _stack_along(op, a):
    ndim, dim = _STACKS[op]
    return call("cat", tuple(_atleast(t, ndim) for t in a["tensors"]), dim)


@shape_op("column_stack")
def _column_stack(op, a):
    ts = tuple(call("reshape", t, (t.numel, 1)) if t.ndim <= 1 else t for t in a["tensors"])
    return call("cat", ts, 1)


@shape_op("tensor_split")
def _tensor_split(op, a):
    x, spec = a["self"], a["indices_or_sections"]
    if x.ndim == 0:
        raise op_error(RuntimeError, op, "expected at least a 1-dimensional tensor", {"self": x})
    d = _wrap(op, a["dim"], x)
    n = x.shape[d]
    spec = getattr(spec, "node", spec)
    if isinstance(spec, Node):
        if spec.ndim > 1 or spec.dtype.is_floating_point:
            raise op_error(RuntimeError, op, "tensor_indices_or_sections must be a zero-dimensional or one-dimensional "
                           "tensor of longs", {"indices_or_sections": spec})
        vals = host_value(spec)
        spec = int(vals) if spec.ndim == 0 else [int(v) for v in vals]
    if isinstance(spec, int):
        if spec <= 0:
            raise op_error(RuntimeError, op, f"number of sections must be larger than 0, got {spec}", {"self": x})
        q, r = divmod(n, spec)
        bounds = list(itertools.accumulate([q + 1] * r + [q] * (spec - r)))[:-1]
    else:
        bounds = list(spec)
    edges = [0] + bounds + [n]
    parts = []
    for lo, hi in zip(edges[:-1], edges[1:]):
        lo, hi = min(max(lo, 0), n), min(max(hi, 0), n)
        parts.append(call("narrow", x, d, lo, max(hi - lo, 0)))
    return tuple(parts)


# op -> (the dim it splits, from the input's ndim; the fewest dims it takes)
_SPLITS = {"hsplit": (lambda ndim: 0 if ndim == 1 else 1, 1), "vsplit": (lambda ndim: 0, 2),
           "dsplit": (lambda ndim: 2, 3)}


@shape_op(*_SPLITS)
def _directional_split(op, a):
    x, spec = a["self"], a["indices_or_sections"]
    dim_of, need = _SPLITS[op]
    d = dim_of(x.ndim)
    if x.ndim < need:
        raise op_error(RuntimeError, op, f"requires a tensor with at least {need} dimension, but got a tensor with "
                       f"{x.ndim} dimensions!", {"self": x})
    if isinstance(spec, int) and x.shape[d] % spec:
        raise op_error(RuntimeError, op, f"attempted to split along dimension {d}, but the size of the dimension "
                       f"{x.shape[d]} is not divisible by the split_size {spec}!", {"self": x})
    return call("tensor_split", x, spec, d)


@shape_op("split_with_sizes")
def _split_with_sizes(op, a):
    x, sizes = a["self"], tuple(a["split_sizes"])
    d = _wrap(op, a["dim"], x)
    if sum(sizes) != x.shape[d]:
        raise op_error(RuntimeError, op, f"split_with_sizes expects split_sizes to sum exactly to {x.shape[d]} (input "
                       f"tensor's size at dimension {d}), but got split_sizes={list(sizes)}", {"self": x})
    return tuple(call("narrow", x, d, s, n) for s, n in zip(itertools.accumulate((0,) + sizes), sizes))


@shape_op("tile")
def _tile(op, a):
    x, dims = a["self"], tuple(a["dims"])
    dims = (1,) * (x.ndim - len(dims)) + dims
    return call("repeat", x, dims)


@shape_op("broadcast_tensors")
def _broadcast_tensors(op, a):
    ts = a["tensors"]
    shape = meta.broadcast_shapes(op, *(t.shape for t in ts), args={f"tensors[{i}]": t for i, t in enumerate(ts)})
    return tuple(t if t.shape == shape else call("expand", t, shape) for t in ts)


@shape_op("meshgrid")
def _meshgrid(op, a):
    ts = a["tensors"]
    indexing = a["indexing"] or "ij"
    if indexing not in ("ij", "xy"):
        raise op_error(ValueError, op, f"indexing must be 'ij' or 'xy', got '{indexing}'")
    for t in ts:
        if t.ndim > 1:
            raise op_error(RuntimeError, op, f"expects all tensors to be 0- or 1-dimensional, got {t.ndim}-d", {"t": t})
    ts1 = [call("reshape", t, (-1,)) for t in ts]
    swap = indexing == "xy" and len(ts1) >= 2
    shape = tuple(t.shape[0] for t in ts1)
    out = [call("expand", call("reshape", t, tuple(s if j == i else 1 for j, s in enumerate(shape))), shape)
           for i, t in enumerate(ts1)]
    if swap:                                  # 'xy': the first two dims trade places
        out = [call("transpose", o, 0, 1) for o in out]
    return tuple(out)


@shape_op("cartesian_prod")
def _cartesian_prod(op, a):
    ts = a["tensors"]
    if len(ts) == 1:
        return ts[0]
    grids = call("meshgrid", ts, indexing="ij")
    return call("stack", tuple(call("reshape", g, (-1,)) for g in grids), 1)


@shape_op("block_diag")
def _block_diag(op, a):
    ts = [t if t.ndim == 2 else call("reshape", t, (1, -1) if t.ndim == 1 else (1, 1)) for t in a["tensors"]]
    for t in a["tensors"]:
        if t.ndim > 2:
            raise op_error(RuntimeError, op, f"input tensors must have 2 or fewer dimensions, got {t.ndim}", {"t": t})
    if not ts:
        return fill((1, 0), 0, D.default_float)
    dtype = meta.promoted(ts)
    cols = sum(t.shape[1] for t in ts)
    rows, left = [], 0
    for t in ts:
        rows.append(call("pad", call("to", t, dtype), (left, cols - left - t.shape[1])))
        left += t.shape[1]
    return call("cat", tuple(rows), 0)


@shape_op("rot90")
def _rot90(op, a):
    x, k, dims = a["self"], a["k"], tuple(a["dims"])
    if len(dims) != 2:
        raise op_error(RuntimeError, op, f"expected total rotation dims == 2, but got dims = {len(dims)}", {"self": x})
    if x.ndim < 2:
        raise op_error(RuntimeError, op, f"expected total dims >= 2, but got total dims = {x.ndim}", {"self": x})
    d0, d1 = _wrap(op, dims[0], x), _wrap(op, dims[1], x)
    if d0 == d1:
        raise op_error(RuntimeError, op, f"expected rotation dims to be different, but got dim0 = {d0} and dim1 = {d1}",
                       {"self": x})
    k %= 4
    if k == 1:
        return call("transpose", call("flip", x, [d1]), d0, d1)
    if k == 2:
        return call("flip", x, [d0, d1])
    if k == 3:
        return call("flip", call("transpose", x, d0, d1), [d1])
    return call("clone", x)


# op -> the dim it flips (the input needs one more dim than that)
_FLIPS = {"fliplr": 1, "flipud": 0}


@shape_op(*_FLIPS)
def _flip_dim(op, a):
    x, d = a["self"], _FLIPS[op]
    if x.ndim <= d:
        raise op_error(RuntimeError, op, f"input must be >= {d + 1}-d", {"self": x})
    return call("flip", x, [d])


@shape_op("ravel")
def _ravel(op, a):
    return call("reshape", a["self"], (-1,))


@shape_op("sum_to_size")
def _sum_to_size(op, a):
    x, size = a["self"], (a["size"],) if isinstance(a["size"], int) else tuple(a["size"])
    lead = x.ndim - len(size)
    if lead < 0 or meta.broadcast_shapes(op, x.shape, size) != x.shape:
        raise op_error(RuntimeError, op, f"size {list(size)} is not expandable to size {list(x.shape)}", {"self": x})
    dims = list(range(lead)) + [lead + i for i, s in enumerate(size) if s == 1 and x.shape[lead + i] != 1]
    out = call("sum", x, dims, True) if dims else x
    return call("reshape", out, size)


@shape_op("constant_pad_nd")
def _constant_pad_nd(op, a):
    return call("pad", a["self"], tuple(a["pad"]), "constant", a["value"])


@shape_op("combinations")
def _combinations(op, a):
    x, r = a["self"], a["r"]
    if x.ndim != 1:
        raise op_error(RuntimeError, op, f"Expect a 1D vector, but got shape {list(x.shape)}", {"self": x})
    if r < 0:
        raise op_error(RuntimeError, op, f"Expect a non-negative number, but got {r}", {"self": x})
    if r == 0:
        return fill((0,), 0, x.dtype)
    pick = itertools.combinations_with_replacement if a["with_replacement"] else itertools.combinations
    combos = list(pick(range(x.shape[0]), r))
    if not combos:
        return fill((0, r), 0, x.dtype)
    idx = from_values(np.array(combos, np.int64).reshape(len(combos), r), D.int64)
    return call("index", x, (idx,), (0,))


@shape_op("unravel_index")
def _unravel_index(op, a):
    idx, shape = a["indices"], tuple(a["shape"])
    if idx.dtype.is_floating_point or idx.dtype.is_bool:
        raise op_error(TypeError, op, f"expected 'indices' to be integer dtype, but got {idx.dtype.name}", {"indices": idx})
    out = []
    rest = idx
    for s in reversed(shape):
        out.append(call("remainder", rest, s))
        rest = call("floor_divide", rest, s)
    return tuple(reversed(out))


def _copy(op: str, a: Args):
    base = op.removesuffix("_copy")
    result = call(base, **{k: v for k, v in a.items() if k != "implicit"})
    if isinstance(result, (tuple, list)):
        return tuple(call("clone", r) for r in result)
    return call("clone", result)


for _name in ("as_strided_copy", "alias_copy", "diagonal_copy", "expand_copy", "permute_copy", "squeeze_copy", "t_copy",
              "transpose_copy", "unbind_copy", "unfold_copy", "unsqueeze_copy", "view_copy", "narrow_copy",
              "split_with_sizes_copy"):
    shape_op(_name)(_copy)


@shape_op("alias")
def _alias(op, a):
    return a["self"]


@builder("atleast")
def atleast(op: OpDef, schema: Schema, a: Args):
    """atleast_Nd(x) answers a tensor, atleast_Nd(x, y) or atleast_Nd([x, y]) a tuple (torch)."""
    n = int(op.name[-2])
    out = tuple(_atleast(t, n) for t in a["tensors"])
    return out[0] if len(out) == 1 else out


@builder("unsafe")
def unsafe(op: OpDef, schema: Schema, a: Args):
    """unsafe_split / unsafe_chunk: split / chunk (lazytorch never shares storage unsafely)."""
    base = op.name.removeprefix("unsafe_")
    rest = {k: v for k, v in a.items() if k != "self"}
    return tuple(call("clone", t) for t in call(base, a["self"], *rest.values()))


@builder("broadcast_shapes")
def broadcast_shapes_builder(op: OpDef, schema: Schema, a: Args):
    given = [a[p.name] for p in schema.params if a[p.name] is not None]
    shapes = [(s,) if isinstance(s, int) else tuple(s) for s in given]
    return tuple(meta.broadcast_shapes(op.name, *shapes)) if shapes else ()


@shape_op("as_strided")
def _as_strided(op, a):
    """A view with the given sizes and strides over self's storage (its base buffer's layout)."""
    from .build import base_and_spec, view_of
    x = a["self"]
    size, stride = tuple(a["size"]), tuple(a["stride"])
    if len(size) != len(stride):
        raise op_error(RuntimeError, op, f"mismatch in length of strides and shape ({len(stride)} and {len(size)})",
                       {"self": x})
    if any(s < 0 for s in stride) or any(s < 0 for s in size):
        raise op_error(RuntimeError, op, "negative sizes or strides are not supported", {"self": x})
    base, spec = base_and_spec(x)
    offset = spec.offset if a["storage_offset"] is None else a["storage_offset"]
    last = offset + sum((n - 1) * s for n, s in zip(size, stride)) if all(size) else offset
    if last >= max(base.numel, 1) and all(size):
        raise op_error(RuntimeError, op, f"setStorage: sizes {list(size)}, strides {list(stride)}, storage offset "
                       f"{offset} are out of bounds for storage of {base.numel} elements", {"self": x})
    return view_of(x, V.ViewSpec(size, stride, offset))

"""Builders of the shape-changing data ops, written in terms of primitives.

Only `cat` and `gather` are opaque primitives here; everything else is views, `cat`, `iota`,
`full` and pointwise ops, so fusion and code generation handle them with no kernels of their own:

    stack              unsqueeze each input, cat
    roll               cat of two slices per rolled dim (a flattened view when no dims are given)
    repeat             reshape to (1, s0, 1, s1, ...), expand to (r0, s0, r1, s1, ...), reshape
    repeat_interleave  unsqueeze after dim, expand, reshape
    pad                per padded dim: cat of [left edge, core (cropped by negative pads), right edge]
    tril, triu         where(iota(col) - iota(row) <= k, x, 0)
    index_select       the advanced-indexing primitive `index` on one dim
"""
from __future__ import annotations

from typing import Callable

from . import dtypes as D
from . import meta
from . import views as V
from .build import Args, base_and_spec, builder, call, clamped_view, constant, slice_node
from .creation import fill, fill_constant, iota
from .errors import op_error, wrap_dim
from .node import Node
from .registry import OpDef
from .schema import Schema


def _ints(v) -> tuple[int, ...]:
    return (int(v),) if isinstance(v, int) else tuple(int(i) for i in v)


def _cast(x: Node, dtype: D.DType) -> Node:
    return x if x.dtype is dtype else call("to", x, dtype)


def _resized(x: Node, d: int, size: int) -> tuple[int, ...]:
    return x.shape[:d] + (size,) + x.shape[d + 1:]


# ---------------------------------------------------------------- joining

@builder("cat")
def cat(op: OpDef, schema: Schema, a: Args) -> Node:
    shape, dtype = meta.run(op, a)            # checks shapes, drops legacy empties, wraps dim
    tensors = tuple(_cast(t, dtype) for t in a["tensors"])
    if len(tensors) == 1:
        return tensors[0]
    return Node("cat", tensors, {"tensors": len(tensors), "dim": a["dim"]}, shape, dtype)


@builder("stack")
def stack(op: OpDef, schema: Schema, a: Args) -> Node:
    tensors: tuple[Node, ...] = a["tensors"]
    if not tensors:
        raise op_error(RuntimeError, op.name, "expected a non-empty list of tensors")
    first = tensors[0]
    for i, t in enumerate(tensors[1:], start=1):
        if t.shape != first.shape:
            raise op_error(RuntimeError, op.name, f"expects each tensor to be equal size, but got "
                           f"{list(first.shape)} at entry 0 and {list(t.shape)} at entry {i}",
                           {"tensors[0]": first, f"tensors[{i}]": t})
    d = wrap_dim(op.name, a["dim"], first.ndim + 1, {"tensors[0]": first})
    return call("cat", tuple(call("unsqueeze", t, d) for t in tensors), d)


# ---------------------------------------------------------------- rolling and repeating

def _roll_dim(x: Node, d: int, shift: int) -> Node:
    n = x.shape[d]
    s = shift % n if n else 0
    if s == 0:
        return x
    return call("cat", (slice_node(x, d, n - s, n, 1), slice_node(x, d, 0, n - s, 1)), d)


@builder("roll")
def roll(op: OpDef, schema: Schema, a: Args) -> Node:
    x, shifts = a["self"], _ints(a["shifts"])
    dims = () if a["dims"] is None else _ints(a["dims"])
    if not dims:
        if len(shifts) != 1:
            raise op_error(RuntimeError, op.name, f"without dims, shifts must be one int, got {list(shifts)}",
                           {"self": x}, "pass one dim per shift, or a single shift to roll the flattened tensor")
        return call("reshape", _roll_dim(call("reshape", x, (-1,)), 0, shifts[0]), x.shape)
    if len(shifts) != len(dims):
        raise op_error(RuntimeError, op.name, f"shifts and dims must align, got {len(shifts)} shifts and "
                       f"{len(dims)} dims", {"self": x})
    if x.ndim == 0:
        raise op_error(IndexError, op.name, f"dims {list(dims)} were given but self is 0-d", {"self": x},
                       "roll a 0-d tensor without dims")
    for s, d in zip(shifts, dims):
        x = _roll_dim(x, wrap_dim(op.name, d, x.ndim, {"self": x}), s)
    return x


@builder("repeat")
def repeat(op: OpDef, schema: Schema, a: Args) -> Node:
    x, reps = a["self"], _ints(a["repeats"])
    if len(reps) < x.ndim:
        raise op_error(RuntimeError, op.name, f"got {len(reps)} repeats {list(reps)} for a {x.ndim}-d tensor",
                       {"self": x}, "give at least one repeat per dim")
    if any(r < 0 for r in reps):
        raise op_error(RuntimeError, op.name, f"repeats must be >= 0, got {list(reps)}", {"self": x})
    shape = (1,) * (len(reps) - x.ndim) + x.shape
    paired = tuple(v for s in shape for v in (1, s))
    expanded = tuple(v for r, s in zip(reps, shape) for v in (r, s))
    y = call("expand", call("reshape", x, paired), expanded)
    return call("reshape", y, tuple(r * s for r, s in zip(reps, shape)))


@builder("repeat_interleave")
def repeat_interleave(op: OpDef, schema: Schema, a: Args) -> Node:
    x, n = a["self"], a["repeats"]
    if n < 0:
        raise op_error(RuntimeError, op.name, f"repeats must be >= 0, got {n}", {"self": x})
    if a["dim"] is None or x.ndim == 0:
        x, d = call("reshape", x, (-1,)), 0
    else:
        d = wrap_dim(op.name, a["dim"], x.ndim, {"self": x})
    out_shape = _resized(x, d, x.shape[d] * n)
    if a["output_size"] is not None and a["output_size"] != out_shape[d]:
        raise op_error(RuntimeError, op.name, f"output_size {a['output_size']} does not match the result size "
                       f"{out_shape[d]} along dim {d}", {"self": x})
    y = call("unsqueeze", x, d + 1)
    return call("reshape", call("expand", y, _resized(y, d + 1, n)), out_shape)


# ---------------------------------------------------------------- triangles

@builder("triangle")
def triangle(op: OpDef, schema: Schema, a: Args) -> Node:
    """tril keeps col - row <= diagonal, triu keeps col - row >= diagonal; the rest is 0."""
    x = a["self"]
    if x.ndim < 2:
        raise op_error(RuntimeError, op.name, f"input must have at least 2 dims, got {x.ndim}", {"self": x})
    rows, cols = x.shape[-2:]
    offset = call("sub", iota((1, cols), 1), iota((rows, 1), 0))
    # (the diagonal and the zeros are structural constants: the mask folds to one comparison)
    keep = call("le" if op.name == "tril" else "ge", offset, constant(a["diagonal"]))
    return call("where", keep, x, fill_constant((), 0, x.dtype))


# ---------------------------------------------------------------- padding

Edge = Callable[[Node, int, int, object], Node]   # (x, dim, count, fill value) -> edge

# mode -> (left edge, right edge): the `count` values put before / after dim d of x
PAD_EDGES: dict[str, tuple[Edge, Edge]] = {
    "constant": (lambda x, d, k, v: fill(_resized(x, d, k), v, x.dtype),
                 lambda x, d, k, v: fill(_resized(x, d, k), v, x.dtype)),
    "replicate": (lambda x, d, k, v: call("expand", slice_node(x, d, 0, 1, 1), _resized(x, d, k)),
                  lambda x, d, k, v: call("expand", slice_node(x, d, x.shape[d] - 1, None, 1), _resized(x, d, k))),
    "reflect": (lambda x, d, k, v: call("flip", slice_node(x, d, 1, k + 1, 1), d),
                lambda x, d, k, v: call("flip", slice_node(x, d, x.shape[d] - 1 - k, x.shape[d] - 1, 1), d)),
    "circular": (lambda x, d, k, v: slice_node(x, d, x.shape[d] - k, None, 1),
                 lambda x, d, k, v: slice_node(x, d, 0, k, 1)),
}


def _check_pad(op: str, x: Node, pads: tuple[int, ...], mode: str, value) -> None:
    args = {"self": x}
    if mode not in PAD_EDGES:
        raise op_error(NotImplementedError, op, f"unknown padding mode '{mode}'", args,
                       f"valid modes are {', '.join(PAD_EDGES)}")
    if len(pads) % 2:
        raise op_error(RuntimeError, op, f"padding length {len(pads)} must be divisible by 2", args,
                       "give (left, right) pairs, last dim first")
    if len(pads) > 2 * x.ndim:
        raise op_error(RuntimeError, op, f"padding length {len(pads)} is more than 2 x the {x.ndim} dims of the "
                       "input", args)
    if mode == "constant":
        return
    if value is not None:
        raise op_error(RuntimeError, op, f"padding mode '{mode}' doesn't take a value argument", args)
    k = len(pads) // 2
    if k not in (1, 2, 3) or x.ndim not in (k + 1, k + 2):
        raise op_error(NotImplementedError, op, f"{mode} padding of {k} dims is not supported for a {x.ndim}-d "
                       "input", args, "pad 1, 2 or 3 trailing dims of an input with 1 or 2 more dims")
    limit = {"reflect": "less than", "circular": "at most", "replicate": None}[mode]
    for i in range(k):
        n, pair = x.shape[x.ndim - 1 - i], pads[2 * i:2 * i + 2]
        if n == 0:
            raise op_error(RuntimeError, op, f"{mode} padding needs non-empty padded dims", args)
        if limit and max(pair) > (n - 1 if limit == "less than" else n):
            raise op_error(RuntimeError, op, f"{mode} padding {tuple(pair)} of dim {x.ndim - 1 - i} must be "
                           f"{limit} its size {n}", args)


def _pad_dim(op: str, x: Node, d: int, left: int, right: int, mode: str, value) -> Node:
    n = x.shape[d]
    start, stop = max(-left, 0), n - max(-right, 0)
    if stop < start:
        raise op_error(RuntimeError, op, f"padding ({left}, {right}) of dim {d} crops more than its size {n}",
                       {"self": x})
    core = slice_node(x, d, start, stop, 1)
    # circular padding wraps around the cropped tensor; reflect and replicate read the uncropped one
    source = core if mode == "circular" else x
    left_edge, right_edge = PAD_EDGES[mode]
    parts = [left_edge(source, d, left, value)] if left > 0 else []
    parts.append(core)
    if right > 0:
        parts.append(right_edge(source, d, right, value))
    return parts[0] if len(parts) == 1 else call("cat", tuple(parts), d)


def padded(x: Node, pairs, fill_value=0, inside: Node | None = None) -> Node:
    """x padded on its trailing len(pairs) dims by (before, after) pairs (each >= 0) with
    `fill_value`, as one kernel and no host cat: x's base read through a clamped view (ir/build.py
    clamped_view) whose offset starts in the padding, and `fill_value` where an element's
    coordinate falls outside x (a mask of index arithmetic, computed in the kernel, whose load runs
    only inside: codegen/lower.py).  A user's number (F.pad's value) is a runtime one; the
    library's own fills (convolutions', pooling's, col2im's) pass a structural constant, a literal
    in the kernel, not a buffer: col2im's 27 masked terms of a 3-d max pooling's gradient had
    bound 83 buffers, and Metal's argument table of 31 split its kernel in four.  `inside`: the
    caller's box_mask of the same box, shared."""
    base, spec = base_and_spec(x)
    lead = x.ndim - len(pairs)
    shape = tuple(x.shape[:lead]) + tuple(n + lo + hi for n, (lo, hi) in zip(x.shape[lead:], pairs))
    box = tuple((0, n) for n in x.shape[:lead]) + tuple((lo, lo + n) for n, (lo, _) in zip(x.shape[lead:], pairs))
    offset = spec.offset - sum(lo * a for (lo, _), a in zip(pairs, spec.strides[lead:]))
    inside = box_mask(shape, box) if inside is None else inside
    if inside is None:
        return x
    if x.numel == 0:                                # (all padding: nothing to read)
        return fill(shape, fill_value, x.dtype)
    return call("where", inside, clamped_view(base, V.ViewSpec(shape, tuple(spec.strides), offset), box), fill_value)


def _box_dims(shape, box) -> list[tuple[int, int, int]]:
    return [(d, start, stop) for d, ((start, stop), n) in enumerate(zip(box, shape)) if (start, stop) != (0, n)]


def is_box_mask(node: Node, shape: tuple[int, ...], box, program: bool = False) -> bool:
    """Whether `node` is box_mask(shape, box) as built there (read, not built: a gradient rule asks
    this of every constant pad's mask).  `program`: node is of a compiled program's copy
    (passes/normalize.py), whose structural constants are plain scalars (its runtime numbers are
    params); in a graph being built only a structural constant's value is fixed."""
    dims = _box_dims(shape, box)
    if not dims:
        return False

    def is_constant(n: Node, value: int) -> bool:
        fixed = n.value if program else n.attrs.get("value", None)
        return n.op == "scalar" and fixed == value and not isinstance(n.value, bool)

    def in_dim(n: Node, d: int, start: int, stop: int) -> bool:
        if n.op != "logical_and" or len(n.inputs) != 2:
            return False
        (ge, lt) = n.inputs
        return (ge.op == "ge" and lt.op == "lt" and ge.inputs[0] is lt.inputs[0] and ge.inputs[0].op == "iota"
                and ge.inputs[0].attrs["dim"] == d and ge.inputs[0].shape[d] == shape[d]
                and is_constant(ge.inputs[1], start) and is_constant(lt.inputs[1], stop))
    for d, start, stop in reversed(dims[1:]):
        if node.op != "logical_and" or len(node.inputs) != 2 or not in_dim(node.inputs[1], d, start, stop):
            return False
        node = node.inputs[0]
    return in_dim(node, *dims[0])


def box_mask(shape: tuple[int, ...], box) -> Node | None:
    """The bool mask (broadcastable to `shape`) of the coordinates inside `box` ((start, stop) per
    dim), index arithmetic the kernel computes; None where the box is the whole shape."""
    inside = None
    for d, start, stop in _box_dims(shape, box):
        n = shape[d]
        at = [1] * len(shape)
        at[d] = n
        coord = iota(tuple(at), d)
        ok = call("logical_and", call("ge", coord, constant(start)), call("lt", coord, constant(stop)))
        inside = ok if inside is None else call("logical_and", inside, ok)
    return inside


@builder("pad")
def pad(op: OpDef, schema: Schema, a: Args) -> Node:
    """F.pad: `pad` holds (left, right) pairs starting from the last dim; negative pads crop.  A
    constant pad that crops nothing is one kernel (`padded`); the others are cats of edges."""
    x, pads, mode, value = a["self"], _ints(a["pad"]), a["mode"], a["value"]
    _check_pad(op.name, x, pads, mode, value)
    value = 0 if value is None else value
    if mode == "constant" and min(pads, default=0) >= 0:
        k = len(pads) // 2
        if isinstance(value, Node):          # (a Python number that became a runtime argument)
            fill_value = call("to", value, x.dtype)
        else:
            fill_value = bool(value) if x.dtype.is_bool else float(value) if x.dtype.is_floating_point else int(value)
        return padded(x, [(pads[2 * (k - 1 - j)], pads[2 * (k - 1 - j) + 1]) for j in range(k)], fill_value)
    for i in range(len(pads) // 2):
        x = _pad_dim(op.name, x, x.ndim - 1 - i, pads[2 * i], pads[2 * i + 1], mode, value)
    return x


# ---------------------------------------------------------------- indexing

@builder("index_select")
def index_select(op: OpDef, schema: Schema, a: Args) -> Node:
    shape, _ = meta.run(op, a)                # checks the index's dtype and rank, wraps dim
    x, index, d = a["self"], a["index"], a["dim"]
    vector = index if index.ndim == 1 else call("reshape", index, (1,))
    base = x if x.ndim else call("reshape", x, (1,))
    out = call("index", base, (vector,), (d,), False)     # torch rejects negative indices here
    return out if out.shape == shape else call("reshape", out, shape)

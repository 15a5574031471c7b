"""Builders of convolution, pooling and resampling (registry/conv.yaml), composed at the call.

Convolutions check torch's conditions and build the opaque `convolution` primitive (its meta rule
in ir/meta/conv.py), padding asymmetric 'same' inputs first; a float32 one records whether cuDNN's
TF32 flag allowed TF32 at the call (ir/precision.py, `generic`).  Pooling reads its windows as one
strided view of the (padded) input: dims (N, C, OH, OW, KH, KW), where an output dim steps by
stride and a window dim by dilation, so max_pool2d / avg_pool2d are a single reduction kernel over
a view, with no copy and no new kernel code.  Adaptive pools with uneven windows reduce the whole
input under a constant window mask; interpolation gathers rows (nearest) or multiplies by
constant interpolation matrices (linear, bilinear).
"""
from __future__ import annotations

import math
from typing import Callable

import numpy as np

from . import dtypes as D
from . import views as V
from .build import Args, base_and_spec, builder, call, constant, generic, in_opmath, recorded, view_of
from .build_linalg import matmul_node
from .build_shape_ops import box_mask, padded
from .creation import iota
from .errors import given, op_error
from .meta.conv import fold_blocks, ints
from .node import Node
from .registry import OpDef, get
from .schema import Schema


def _spatial(op: str, a: Args | None = None) -> int:
    """The number of spatial dims an op works on: from its name (conv2d -> 2), unless a caller
    building on it passed `_spatial` (interpolate's 'area' mode is an adaptive average pool)."""
    if a is not None and a.get("_spatial"):
        return a["_spatial"]
    return int(next(ch for ch in reversed(op) if ch.isdigit()))


def _batched(op: str, x: Node, nd: int, args: dict, what: str | None = None) -> tuple[Node, bool]:
    """x with a batch dim (added for unbatched input), and whether one was added."""
    if x.ndim not in (nd + 1, nd + 2):
        raise op_error(RuntimeError, op, what or f"Expected {nd + 1}D (unbatched) or {nd + 2}D (batched) input to "
                       f"{op}, but got input of size: {list(x.shape)}", args)
    if x.ndim == nd + 1:
        return call("unsqueeze", x, 0), True
    return x, False


def _unbatched(y: Node, added: bool) -> Node:
    return call("squeeze", y, 0) if added else y


def _constant(values: np.ndarray, dtype: D.DType) -> Node:
    """A small constant tensor computed at the call (window masks, divisors, interpolation weights)."""
    arr = np.ascontiguousarray(values, dtype=dtype.np)
    return Node.from_buffer(arr, tuple(arr.shape), dtype)


# ---------------------------------------------------------------- convolution

def _same_padding(kernel, dilation) -> tuple[tuple[int, int], ...]:
    """torch's padding='same': total d*(k-1) per dim, the odd element on the right."""
    return tuple((d * (k - 1) // 2, d * (k - 1) - d * (k - 1) // 2) for k, d in zip(kernel, dilation))


def _conv_inputs(op: str, a: Args, weight_layout: str):
    """conv / conv_transpose's checked inputs: (spatial dims, input with its batch dim, weight, bias,
    the arguments errors show, whether a batch dim was added); the weight must be [*weight_layout, *kernel]."""
    nd = _spatial(op)
    x, w, b = a["self"], a["weight"], a["bias"]
    args = given(input=x, weight=w, bias=b)
    x, added = _batched(op, x, nd, args)
    if w.ndim != nd + 2:
        raise op_error(RuntimeError, op, f"weight must be {nd + 2}-d [{weight_layout}, *kernel], got weight of "
                       f"size {list(w.shape)}", args)
    return nd, x, w, b, args, added


@builder("conv")
def conv(op: OpDef, schema: Schema, a: Args) -> Node:
    nd, x, w, b, args, added = _conv_inputs(op.name, a, "out_channels, in_channels/groups")
    stride, dilation = ints(a["stride"], nd), ints(a["dilation"], nd)
    padding = a["padding"]
    if isinstance(padding, str):
        if padding == "valid":
            padding = (0,) * nd
        elif padding == "same":
            if any(s != 1 for s in stride):
                raise op_error(RuntimeError, op.name, "padding='same' is not supported for strided convolutions",
                               args, "use stride=1 or explicit padding")
            pairs = _same_padding(w.shape[2:], dilation)
            if any(lo != hi for lo, hi in pairs):      # asymmetric: pad the input explicitly first
                x = call("pad", x, [p for pair in reversed(pairs) for p in pair])
                padding = (0,) * nd
            else:
                padding = tuple(lo for lo, _ in pairs)
        else:
            raise op_error(RuntimeError, op.name, f"Invalid padding string: '{padding}'", args,
                           "valid strings are 'same' and 'valid'")
    else:
        padding = ints(padding, nd)
    y = call("convolution", x, w, b, stride, padding, dilation, False, (0,) * nd, a["groups"])
    return _unbatched(y, added)


@builder("conv_transpose")
def conv_transpose(op: OpDef, schema: Schema, a: Args) -> Node:
    nd, x, w, b, args, added = _conv_inputs(op.name, a, "in_channels, out_channels/groups")
    y = call("convolution", x, w, b, ints(a["stride"], nd), ints(a["padding"], nd), ints(a["dilation"], nd), True,
             ints(a["output_padding"], nd), a["groups"])
    return _unbatched(y, added)


def convolution_node(x: Node, w: Node, stride, padding, dilation, transposed: bool, output_padding, groups: int,
                     tf32: bool) -> Node:
    """The convolution primitive without a bias, as a pass or a gradient rule builds it from a
    convolution: with that convolution's TF32 decision, not cuDNN's flag now (ir/precision.py)."""
    op = get("convolution")
    return generic(op, op.schemas[0], {"self": x, "weight": w, "bias": None, "stride": stride, "padding": padding,
                                       "dilation": dilation, "transposed": transposed,
                                       "output_padding": output_padding, "groups": groups}, tf32)


# ---------------------------------------------------------------- pooling

def windows(x: Node, kernel, stride, dilation) -> Node:
    """The view (N, C, *out, *kernel) of x's trailing len(kernel) dims: output dims step by
    stride, window dims by dilation (torch's Tensor.unfold per dim, composed with x's own view)."""
    _, spec = base_and_spec(x)
    nd = len(kernel)
    lead = x.ndim - nd
    shape, strides = list(spec.shape[:lead]), list(spec.strides[:lead])
    for n, st, k, s, d in zip(spec.shape[lead:], spec.strides[lead:], kernel, stride, dilation):
        shape.append((n - d * (k - 1) - 1) // s + 1)
        strides.append(st * s)
    shape += list(kernel)
    strides += [st * d for st, d in zip(spec.strides[lead:], dilation)]
    return view_of(x, V.ViewSpec(tuple(shape), tuple(strides), spec.offset))


def col2im(gwin: Node, size, kernel, stride, dilation) -> Node:
    """The adjoint of a window view (`windows`): gwin (N, C, *out, *kernel) summed into
    (N, C, *size).  Each kernel position's slice is a constant pad of itself (one masked read:
    ir/build_shape_ops.py padded); at stride 1 their sum is one pointwise kernel, at larger
    strides the slices of each stride residue sum in one kernel (every phase together) and one
    more interleaves the phases (`_phased`).  It is a
    convolution's input gradient, pooling's window adjoint (autograd/derivatives.py) and a
    transposed convolution's output (passes/decompositions/conv.py).  (Autograd's view_adjoint had
    written each kernel position into zeros on the host: 136 host steps, 19 ms of a ResNet-18 step.)

    Where gwin is a small pointwise tree over tensors constant along the window dims (`_tree`: max
    pooling's gradient to each window's first maximum), each slice is that tree computed from
    those tensors, read through the slice's pad, instead of gwin written whole and read back (its
    3 x 3 windows' tensor was 9x the pooled output)."""
    nd = len(kernel)
    if _disjoint(gwin.shape[gwin.ndim - 2 * nd:gwin.ndim - nd], kernel, stride, dilation):
        return _col2im_disjoint(gwin, tuple(size), tuple(kernel), tuple(stride))
    tree = _tree(gwin, gwin.ndim - 2 * nd, nd)
    if tree is None:
        return _col2im(gwin, tuple(size), tuple(kernel), tuple(stride), tuple(dilation))
    template, operands = tree
    return _col2im_tree(template, tuple(gwin.shape), tuple(size), tuple(kernel), tuple(stride), tuple(dilation),
                        *operands)


def _disjoint(out, kernel, stride, dilation) -> bool:
    """Whether no two windows share an element: along every dim the taps are contiguous
    (dilation 1) and one window's stride apart at least, or there is one window.  A transposed
    convolution of a 1 x 1 input (DCGAN's first layer: its col2im summed 16 masked terms per
    element, recomputed in each of batch norm's three reductions over it), of stride = kernel
    (a U-Net's 2 x 2 up-convolutions), a patch embedding's gradient, pooling of stride = kernel."""
    return all((d == 1 or k == 1) and (o == 1 or s >= k) for o, k, s, d in zip(out, kernel, stride, dilation))


@recorded
def _col2im_disjoint(gwin: Node, size, kernel, stride) -> Node:
    """col2im of windows that do not overlap (`_disjoint`): each element of the output is one
    element of gwin or a zero no window covers, so it is gwin permuted, (N, C, *out, *kernel) ->
    (N, C, o0, k0, o1, k1, ...), padded (each k to the stride, each o as far as size needs), merged
    and cropped to size: one copy, and none where the merge is a view (a 1 x 1 input's)."""
    nd = len(kernel)
    lead = gwin.ndim - 2 * nd
    out = gwin.shape[lead:lead + nd]
    steps = [k if o == 1 else s for o, k, s in zip(out, kernel, stride)]
    rows = [max(o, -(-n // st)) for o, n, st in zip(out, size, steps)]
    order = list(range(lead)) + [lead + j + half * nd for j in range(nd) for half in (0, 1)]
    whole = call("permute", gwin, tuple(order))
    pairs = [p for o, r, k, st in zip(out, rows, kernel, steps) for p in ((0, r - o), (0, st - k))]
    if any(hi for _, hi in pairs):
        whole = padded(whole, pairs, constant(0))
    whole = call("reshape", whole, tuple(gwin.shape[:lead]) + tuple(r * st for r, st in zip(rows, steps)))
    for j, n in enumerate(size):
        if whole.shape[lead + j] != n:
            whole = call("narrow", whole, lead + j, 0, n)
    return whole


def _phased(term: Callable, lead: tuple[int, ...], out, size, kernel, stride, dilation) -> Node:
    """The slices `term(pos, pairs)` returns (kernel position pos's (*lead, *out) slice padded by
    `pairs` to (*lead, *Q), Q = ceil(size / stride) per dim) summed into (*lead, *size).  Along each
    dim, position k lands at k * dilation + o * stride: with the dim read as (Q, stride), at
    residue (k * dilation) % stride of rows from (k * dilation) // stride.  The slices of one
    residue (a phase) sum in (*lead, *Q), and the phases interleave once: each output element
    sums only its own phase's slices (a 4 x 4 window at stride 2: 4 of the 16, where a sum of
    every slice spread over (Q, stride) masked 12 of them per element; C evaluated them all,
    DCGAN's discriminator on cpu: ~20 ms a col2im at 16 x 64 x 34^2)."""
    rows = [-(-n // s) for n, s in zip(size, stride)]                       # Q per dim
    phases: dict[tuple[int, ...], list] = {}
    for pos in np.ndindex(*kernel):
        pairs, residue = [], []
        for o, q, k, s, d in zip(out, rows, pos, stride, dilation):
            start, r = divmod(k * d, s)
            pairs.append((start, q - o - start))
            residue.append(r)
        phases.setdefault(tuple(residue), []).append((pos, pairs))
    total = None
    for residue, slices in phases.items():
        part = None
        for pos, pairs in slices:
            t = term(pos, pairs)
            part = t if part is None else call("add", part, t)
        if any(s > 1 for s in stride):           # (the phase at its residue of each (Q, stride) dim)
            spread = call("reshape", part, lead + tuple(d for q in rows for d in (q, 1)))
            part = padded(spread, [p for r, s in zip(residue, stride) for p in ((0, 0), (r, s - 1 - r))], constant(0))
        total = part if total is None else call("add", total, part)
    whole = call("reshape", total, lead + tuple(q * s for q, s in zip(rows, stride)))
    for j, n in enumerate(size):
        if whole.shape[len(lead) + j] != n:
            whole = call("narrow", whole, len(lead) + j, 0, n)
    return whole


@recorded
def _col2im(gwin: Node, size, kernel, stride, dilation) -> Node:
    nd = len(kernel)
    lead = gwin.ndim - 2 * nd

    def term(pos, pairs) -> Node:
        part = gwin
        for j in reversed(range(nd)):                                       # (N, C, *out) at pos
            part = call("select", part, lead + nd + j, pos[j])
        return padded(part, pairs, constant(0))
    return _phased(term, tuple(gwin.shape[:lead]), gwin.shape[lead:lead + nd], size, kernel, stride, dilation)


@recorded
def _col2im_tree(template, shape, size, kernel, stride, dilation, *operands: Node) -> Node:
    """col2im of the tree `template` (`_tree`) over `operands` (N, C, *out), slice by slice."""
    nd = len(kernel)
    lead = len(shape) - 2 * nd
    out = shape[lead:lead + nd]

    def term(pos, pairs) -> Node:
        sizes = shape[:lead] + tuple(n + lo + hi for n, (lo, hi) in zip(out, pairs))
        box = [(0, n) for n in shape[:lead]] + [(lo, lo + n) for n, (lo, _) in zip(out, pairs)]
        inside = box_mask(sizes, box)                       # (one mask a slice, its reads' and its own)
        read = [padded(x, pairs, constant(0), inside) for x in operands]
        value = _built(template, pos, read)
        return value if inside is None else call("where", inside, value, constant(0))
    return _phased(term, tuple(shape[:lead]), out, size, kernel, stride, dilation)


# The pointwise ops `_tree` rebuilds at each window position: none has attributes (add's alpha 1
# aside) or can fail, and each is exact on the pad's values, which a mask then discards.  FOLDED:
# those a tree of numbers the library chose (and window positions) folds to one.
PUSHED_OPS = frozenset({"where", "eq", "ne", "lt", "le", "gt", "ge", "logical_and", "logical_or", "logical_not",
                        "add", "sub", "mul", "neg"})
FOLDED = {"add": lambda a, b: a + b, "sub": lambda a, b: a - b, "mul": lambda a, b: a * b,
          "eq": lambda a, b: a == b}


def _tree(gwin: Node, lead: int, nd: int, limit: int = 32):
    """(template, operands) of gwin as a tree of PUSHED_OPS over tensors constant along the window
    dims (the operands, as (N, C, *out) views), structural constants and ramps along the window
    dims; None for any other gwin.  The template holds ops, constants and window dims, so a
    recording of col2im keyed by it replays only for the same tree.  A subtree of constants and
    ramps folds to a constant at each position."""
    if gwin.op not in PUSHED_OPS:
        return None
    walk = _TreeWalk(gwin.ndim, lead, nd, limit)
    got = walk(gwin)
    if got is None or got[1] != "tensor":
        return None
    return got[0], [_window_free(n, walk.kdims) for _, n in walk.operands.values()]


class _TreeWalk:
    """`_tree`'s walk, node -> (template, kind), kind "const" or "tensor", or None.  (An object,
    not a closure that calls itself: that closure's cell and function are a reference cycle, which
    kept each step's whole graph alive, from the gradient down, until the cyclic collector ran:
    ResNet-18's lazy step on cpu spent ~1.1 ms a step in young collections walking it.)"""

    def __init__(self, ndim: int, lead: int, nd: int, limit: int):
        self.ndim, self.lead, self.nd, self.budget = ndim, lead, nd, limit
        self.kdims = range(lead + nd, lead + 2 * nd)
        self.operands: dict[int, tuple[int, Node]] = {}    # id -> (index, node): an operand read twice is one

    def __call__(self, n: Node):
        self.budget -= 1
        if self.budget < 0:
            return None
        kdims = self.kdims
        if n.op == "scalar":             # (a runtime number would be frozen into the template)
            return (("const", n.value), "const") if "value" in n.attrs else None
        if n.op == "iota":
            return (("pos", n.attrs["dim"] - self.lead - self.nd), "const") if n.attrs["dim"] in kdims else None
        if n.ndim != self.ndim:
            return None
        if all(n.shape[d] == 1 for d in kdims) or _kernel_broadcast(n, kdims):
            index = self.operands.setdefault(id(n), (len(self.operands), n))[0]
            return ("operand", index), "tensor"
        if n.op not in PUSHED_OPS or (n.attrs and n.attrs != {"alpha": 1}):     # (add's default)
            return None
        children = [self(i) for i in n.inputs]
        if None in children:
            return None
        kinds = {k for _, k in children}
        if "tensor" not in kinds and not (kinds == {"const"} and n.op in FOLDED):
            return None
        return (n.op, *(t for t, _ in children)), "tensor" if "tensor" in kinds else "const"


def _window_free(n: Node, kdims) -> Node:
    """n (constant along the window dims) without them: (N, C, *out)."""
    for d in reversed(kdims):
        n = call("select", n, d, 0) if n.shape[d] > 1 else call("squeeze", n, d)
    return n


def _kernel_broadcast(n: Node, kdims) -> bool:
    """A view of n's base constant along the kernel dims (an expanded gradient)."""
    if n.op != "view" or "clamp" in n.attrs:
        return False
    strides = n.attrs["view"].strides
    return all(strides[d] == 0 for d in kdims)


def _built(template, pos, read: list[Node]):
    """`template` at window position `pos` over the operands as `read` (a Node or a number)."""
    kind = template[0]
    if kind == "operand":
        return read[template[1]]
    if kind == "pos":
        return constant(int(pos[template[1]]))
    if kind == "const":
        return constant(template[1])
    args = [_built(t, pos, read) for t in template[1:]]
    if all(isinstance(a, Node) and a.op == "scalar" and "value" in a.attrs for a in args):
        return constant(FOLDED[kind](*(a.value for a in args)))
    return call(kind, *args)


def padded_windows(x: Node, kernel, stride, dilation, padding, fill: float = 0, kernel_first: bool = False) -> Node:
    """`windows` of x padded by `padding` with `fill` (`padded`: one kernel, no host cats); with
    `kernel_first`, dims (N, C, *kernel, *out), the order of a convolution's columns.  The padded
    copy is worth its pass: its masked loads cover the input once, where masking the windows
    themselves ran 5x slower than their plain strided copy (its loads masked per element)."""
    nd = len(kernel)
    lead = x.ndim - nd
    win = windows(padded(x, [(p, p) for p in padding], constant(fill)), kernel, stride, dilation)
    order = tuple(range(lead)) + tuple(range(lead + nd, lead + 2 * nd)) + tuple(range(lead, lead + nd))
    return call("permute", win, order) if kernel_first else win


def pool_output_size(n: int, k: int, s: int, p: int, d: int, ceil_mode: bool) -> int:
    """torch's pooling_output_shape: the last window must start inside the input or left padding."""
    out = (n + 2 * p - d * (k - 1) - 1 + (s - 1 if ceil_mode else 0)) // s + 1
    if ceil_mode and (out - 1) * s >= n + p:
        out -= 1
    return out


def _pool_args(op: str, a: Args, nd: int, args: dict) -> tuple:
    kernel = ints(a["kernel_size"], nd)
    stride = kernel if a["stride"] is None or a["stride"] == () or a["stride"] == [] else ints(a["stride"], nd)
    padding = ints(a["padding"], nd)
    dilation = ints(a.get("dilation", 1), nd)
    for name, values in (("kernel_size", kernel), ("stride", stride), ("padding", padding), ("dilation", dilation)):
        if len(values) != nd:
            raise op_error(RuntimeError, op, f"{name} must be a single int or a tuple of {nd} ints, got "
                           f"{list(values)}", args)
    for name, values in (("kernel_size", kernel), ("stride", stride), ("dilation", dilation)):
        if min(values) <= 0:
            raise op_error(RuntimeError, op, f"{name} must be greater than zero, but got {list(values)}", args)
    for p, k, d in zip(padding, kernel, dilation):
        if p < 0 or p > (d * (k - 1) + 1) // 2:
            raise op_error(RuntimeError, op, f"pad should be at most half of effective kernel size, but got pad={p}, "
                           f"kernel_size={k} and dilation={d}", args)
    return kernel, stride, padding, dilation


def _pool_input(op: str, x: Node, nd: int, args: dict) -> tuple[Node, bool]:
    if x.ndim not in (nd + 1, nd + 2) or any(s == 0 for s in x.shape[-nd - 1:]):
        raise op_error(RuntimeError, op, f"non-empty {nd + 1}D or {nd + 2}D (batch mode) tensor expected for input, "
                       f"got input of size {list(x.shape)}", args)
    return _batched(op, x, nd, args)


def _padded_windows(op: str, x: Node, kernel, stride, padding, dilation, ceil_mode: bool, fill, args):
    """The windows of x padded by `padding` with `fill` (and on the right as far as ceil_mode's last
    window reaches), and the output's spatial size."""
    nd = len(kernel)
    spatial = x.shape[-nd:]
    out = tuple(pool_output_size(n, k, s, p, d, ceil_mode)
                for n, k, s, p, d in zip(spatial, kernel, stride, padding, dilation))
    if min(out) <= 0:
        raise op_error(RuntimeError, op, f"Given input size: ({'x'.join(map(str, x.shape[1:]))}). Calculated output "
                       f"size: ({'x'.join(map(str, (x.shape[1],) + out))}). Output size is too small", args)
    pairs = []
    for n, o, k, s, p, d in zip(spatial, out, kernel, stride, padding, dilation):
        needed = (o - 1) * s + d * (k - 1) + 1           # extent the last window reaches
        pairs.append((p, max(needed - n - p, 0)))
    if any(lo or hi for lo, hi in pairs):
        x = padded(x, pairs, constant(fill))
    return windows(x, kernel, stride, dilation), out


def _lowest(dtype: D.DType):
    return -math.inf if dtype.is_floating_point else int(np.iinfo(dtype.np).min)


def _pool_setup(name: str, a: Args):
    """What max_pool and avg_pool both check and derive first: spatial dims, the input (never
    bool), its error context, kernel/stride/padding/dilation, and the input with a batch dim."""
    nd = _spatial(name, a)
    x = a["self"]
    args = {"input": x}
    if x.dtype.is_bool:
        raise op_error(RuntimeError, name, "dtype bool is not supported", args)
    return nd, x, args, _pool_args(name, a, nd, args), _pool_input(name, x, nd, args)


@builder("max_pool")
def max_pool(op: OpDef, schema: Schema, a: Args):
    nd, x, args, (kernel, stride, padding, dilation), (xb, added) = _pool_setup(op.name, a)
    win, out = _padded_windows(op.name, xb, kernel, stride, padding, dilation, a["ceil_mode"], _lowest(x.dtype), args)
    window_dims = list(range(xb.ndim, xb.ndim + nd))
    values = call("amax_first", win, window_dims)         # (the gradient to each window's first maximum)
    if not a["return_indices"]:
        return _unbatched(values, added)
    pos = _window_position(win, window_dims, kernel)
    index = _input_index(pos, xb.shape, kernel, stride, padding, dilation)
    return _unbatched(values, added), _unbatched(index, added)


def _window_position(win: Node, window_dims: list[int], kernel) -> Node:
    """The flat position within each window of its maximum: the first maximum, or the last NaN
    where the window holds one (torch's CPU kernel updates its index on every NaN)."""
    flat = iota(win.shape, window_dims[0])
    for d, k in zip(window_dims[1:], kernel[1:]):
        flat = call("add", call("mul", flat, k), iota(win.shape, d))
    big = math.prod(kernel)
    best = call("amax", win, window_dims, True)
    first = call("amin", call("where", call("eq", win, best), flat, big), window_dims)
    if not win.dtype.is_floating_point:
        return first
    last_nan = call("amax", call("where", call("isnan", win), flat, -1), window_dims)
    return call("where", call("ge", last_nan, 0), last_nan, first)


def _input_index(pos: Node, batched_shape, kernel, stride, padding, dilation) -> Node:
    """The flat index within each input plane (torch's max-pool indices) of window position pos."""
    nd = len(kernel)
    spatial = batched_shape[-nd:]
    index = None
    for i in range(nd):
        k_i = call("remainder", call("div", pos, math.prod(kernel[i + 1:]), rounding_mode="floor"), kernel[i])
        o_i = iota(pos.shape, pos.ndim - nd + i)
        coord = call("add", call("sub", call("mul", o_i, stride[i]), padding[i]), call("mul", k_i, dilation[i]))
        index = coord if index is None else call("add", call("mul", index, spatial[i]), coord)
    return index


def _avg_divisor(spatial, out, kernel, stride, padding, count_include_pad) -> np.ndarray:
    """torch's avg_pool divisor per output position: the window clipped to input plus padding, or
    to the input alone (count_include_pad=False)."""
    per_dim = []
    for n, o, k, s, p in zip(spatial, out, kernel, stride, padding):
        start = np.arange(o) * s - p
        end = np.minimum(start + k, n + p)
        per_dim.append(end - start if count_include_pad else np.minimum(end, n) - np.maximum(start, 0))
    div = per_dim[0]
    for d in per_dim[1:]:
        div = np.multiply.outer(div, d)
    return div


@builder("avg_pool")
def avg_pool(op: OpDef, schema: Schema, a: Args) -> Node:
    nd, x, args, (kernel, stride, padding, dilation), (xb, added) = _pool_setup(op.name, a)
    win, out = _padded_windows(op.name, xb, kernel, stride, padding, dilation, a["ceil_mode"], 0, args)
    total = call("sum", in_opmath(win), list(range(xb.ndim, xb.ndim + nd)))
    override = a.get("divisor_override")
    if override is not None:
        if override == 0:
            raise op_error(RuntimeError, op.name, "divisor must be not zero", args)
        divisor = np.full(out, override)
    else:
        divisor = _avg_divisor(xb.shape[-nd:], out, kernel, stride, padding, a["count_include_pad"])
    if x.dtype.is_floating_point:
        d = float(divisor.flat[0]) if np.all(divisor == divisor.flat[0]) else _constant(divisor, total.dtype)
        y = call("div", total, d)
    else:                                        # integers: C's truncating division, as torch's CPU kernel
        d = int(divisor.flat[0]) if np.all(divisor == divisor.flat[0]) else _constant(divisor, D.int64)
        y = call("div", total, d, rounding_mode="trunc")
    return _unbatched(call("to", y, x.dtype), added)


@builder("lp_pool")
def lp_pool(op: OpDef, schema: Schema, a: Args) -> Node:
    """torch's power-average pool: (sum of x^p over each window)^(1/p), computed as torch does from
    avg_pool (so ceil_mode's clipped windows match); p = inf is max_pool of |x|."""
    nd = _spatial(op.name)
    x, p = a["self"], float(a["norm_type"])
    kernel = ints(a["kernel_size"], nd)
    stride = a["stride"] if a["stride"] not in (None, (), []) else kernel
    if math.isinf(p):
        y = call(f"max_pool{nd}d", call("abs", x), kernel, stride, 0, 1, a["ceil_mode"])
        return y if p > 0 else call("neg", call(f"max_pool{nd}d", call("neg", call("abs", x)), kernel, stride, 0, 1,
                                                  a["ceil_mode"]))
    out = call(f"avg_pool{nd}d", call("pow", x, p), kernel, stride, 0, a["ceil_mode"])
    out = call("mul", call("sign", out), call("relu", call("abs", out)))
    return call("pow", call("mul", out, math.prod(kernel)), 1.0 / p)


def _adaptive_bounds(n: int, o: int) -> tuple[np.ndarray, np.ndarray]:
    """torch's adaptive windows: [floor(i*n/o), ceil((i+1)*n/o)) for output i."""
    i = np.arange(o)
    return (i * n) // o, -((-(i + 1) * n) // o)


@builder("adaptive_pool")
def adaptive_pool(op: OpDef, schema: Schema, a: Args):
    nd = _spatial(op.name, a)
    x = a["self"]
    args = {"input": x}
    is_max = "max" in op.name
    size = a["output_size"]
    size = (size,) * nd if isinstance(size, int) or size is None else tuple(size)
    if len(size) == 1 and nd > 1:
        size = size * nd
    if len(size) != nd:
        raise op_error(RuntimeError, op.name, f"output_size must be {nd} values, got {list(size)}", args)
    if x.ndim not in (nd + 1, nd + 2) or any(s == 0 for s in x.shape[-nd:]):
        raise op_error(RuntimeError, op.name, f"Expected {nd + 1}D or {nd + 2}D tensor with non-zero spatial sizes "
                       f"for input, but got input of size {list(x.shape)}", args)
    if x.dtype.is_bool or (not is_max and not x.dtype.is_floating_point):
        raise op_error(RuntimeError, op.name, f"dtype {x.dtype.name} is not supported", args,
                       "use a floating point input")
    xb, added = _batched(op.name, x, nd, args)
    spatial = xb.shape[-nd:]
    out = tuple(n if o is None else int(o) for n, o in zip(spatial, size))
    if min(out) < 0 or (min(out) == 0 and xb.numel):
        raise op_error(RuntimeError, op.name, f"output_size must be positive, got {list(out)}", args)
    if all(n % o == 0 for n, o in zip(spatial, out)):    # even windows: a plain pool, one reduction kernel
        kernel = tuple(n // o for n, o in zip(spatial, out))
        fn = max_pool if is_max else avg_pool
        pool = {"self": xb, "kernel_size": kernel, "stride": kernel, "padding": 0, "dilation": 1, "ceil_mode": False,
                "return_indices": a.get("return_indices", False), "count_include_pad": True, "divisor_override": None,
                "_spatial": nd}
        result = fn(op, schema, pool)
        return tuple(_unbatched(r, added) for r in result) if isinstance(result, tuple) else _unbatched(result, added)
    return _masked_adaptive(xb, out, is_max, a.get("return_indices", False), added)


def _masked_adaptive(xb: Node, out, is_max: bool, return_indices: bool, added: bool):
    """Uneven adaptive windows: reduce the whole flattened input plane under a constant mask
    (out positions x input positions), one reduction kernel of N*C*prod(out)*prod(spatial)."""
    nd = len(out)
    spatial = xb.shape[-nd:]
    mask = np.ones((), bool)
    for n, o in zip(spatial, out):
        lo, hi = _adaptive_bounds(n, o)
        j = np.arange(n)
        m = (j[None, :] >= lo[:, None]) & (j[None, :] < hi[:, None])          # (o, n)
        mask = np.multiply.outer(mask, m)                                     # (..., o, n) per dim
    # axes are (o0, n0, o1, n1, ...): bring the outputs first, then flatten the input positions
    order = [2 * i for i in range(nd)] + [2 * i + 1 for i in range(nd)]
    mask = mask.transpose(order).reshape(tuple(out) + (math.prod(spatial),))
    lead = xb.shape[:-nd]
    plane = call("reshape", xb, lead + (1,) * nd + (math.prod(spatial),))
    plane = call("expand", plane, lead + tuple(out) + (math.prod(spatial),))
    m = _constant(mask, D.bool_)
    if is_max:
        masked = call("where", m, plane, _lowest(xb.dtype))
        values = call("amax", masked, -1)
        if not return_indices:
            return _unbatched(values, added)
        return _unbatched(values, added), _unbatched(call("argmax", masked, -1), added)
    total = call("sum", call("where", m, in_opmath(plane), 0.0), -1)
    count = mask.sum(-1)
    y = call("div", total, _constant(count, total.dtype))
    return _unbatched(call("to", y, xb.dtype), added)


# ---------------------------------------------------------------- unfold, pixel shuffle

@builder("unfold")
def unfold(op: OpDef, schema: Schema, a: Args) -> Node:
    """im2col: (N, C, H, W) -> (N, C*KH*KW, L), the windows of the zero-padded input."""
    x, name = a["self"], "unfold"                # nn.functional's name of the im2col op
    args = {"input": x}
    kernel, dilation, padding, stride = (ints(a[k], 2) for k in ("kernel_size", "dilation", "padding", "stride"))
    if x.ndim not in (3, 4):
        raise op_error(RuntimeError, name, f"Expected 3D or 4D (batch mode) tensor for input with possibly 0 batch "
                       f"size and non-zero dimensions, but got input of size {list(x.shape)}", args)
    blocks = fold_blocks(name, x.shape[-2:], kernel, dilation, padding, stride, args)
    xb, added = _batched(name, x, 2, args)
    if any(padding):
        xb = call("pad", xb, [padding[1], padding[1], padding[0], padding[0]])
    win = windows(xb, kernel, stride, dilation)                     # (N, C, OH, OW, KH, KW)
    cols = call("permute", win, (0, 1, 4, 5, 2, 3))
    n, c = xb.shape[:2]
    y = call("reshape", cols, (n, c * math.prod(kernel), math.prod(blocks)))
    return _unbatched(y, added)


@builder("pixel_shuffle")
def pixel_shuffle(op: OpDef, schema: Schema, a: Args) -> Node:
    x = a["self"]
    args = {"input": x}
    shuffle = op.name == "pixel_shuffle"
    r = a["upscale_factor" if shuffle else "downscale_factor"]
    what = "upscale_factor" if shuffle else "downscale_factor"
    if x.ndim < 3:
        raise op_error(RuntimeError, op.name, f"expects input to have at least 3 dimensions, but got input with "
                       f"{x.ndim} dimension(s)", args)
    if r <= 0:
        raise op_error(RuntimeError, op.name, f"expects a positive {what}, but got {r}", args)
    *lead, c, h, w = x.shape
    lead = tuple(lead)
    k = len(lead)
    if shuffle:
        if c % (r * r):
            raise op_error(RuntimeError, op.name, f"expects its input's 'channel' dimension to be divisible by the "
                           f"square of upscale_factor, but input.size(-3)={c} is not divisible by {r * r}", args)
        y = call("reshape", x, lead + (c // (r * r), r, r, h, w))
        y = call("permute", y, tuple(range(k)) + (k, k + 3, k + 1, k + 4, k + 2))
        return call("reshape", y, lead + (c // (r * r), h * r, w * r))
    if h % r or w % r:
        bad, size = ("height", h) if h % r else ("width", w)
        raise op_error(RuntimeError, op.name, f"expects {bad} to be divisible by downscale_factor, but input.size"
                       f"({-2 if bad == 'height' else -1})={size} is not divisible by {r}", args)
    y = call("reshape", x, lead + (c, h // r, r, w // r, r))
    y = call("permute", y, tuple(range(k)) + (k, k + 2, k + 4, k + 1, k + 3))
    return call("reshape", y, lead + (c * r * r, h // r, w // r))


# ---------------------------------------------------------------- interpolate

_LINEAR_MODES = {"linear": 1, "bilinear": 2, "trilinear": 3, "bicubic": 2}
_MODES = ("nearest", "nearest-exact", "linear", "bilinear", "trilinear", "bicubic", "area")


def _scale(n: int, o: int, scale, align_corners: bool, dtype) -> float:
    """torch's area_pixel_compute_scale in the op's compute dtype."""
    if align_corners:
        return dtype(n - 1) / dtype(o - 1) if o > 1 else dtype(0)
    return dtype(1.0 / scale) if scale is not None and scale > 0 else dtype(n) / dtype(o)


def _nearest_index(n: int, o: int, scale, exact: bool) -> np.ndarray:
    dst = np.arange(o, dtype=np.float32)
    s = _scale(n, o, scale, False, np.float32)
    if exact:
        src = np.floor((dst + np.float32(0.5)) * s)
    elif o == n:
        return np.arange(o)
    elif o == 2 * n:
        return np.arange(o) >> 1
    else:
        src = np.floor(dst * s)
    return np.minimum(src.astype(np.int64), n - 1)


def _linear_weights(n: int, o: int, scale, align_corners: bool, np_dtype) -> np.ndarray:
    """The (o, n) matrix of torch's linear interpolation weights along one dim."""
    dst = np.arange(o).astype(np_dtype)
    s = _scale(n, o, scale, align_corners, np_dtype)
    src = s * dst if align_corners else np.maximum(s * (dst + np_dtype(0.5)) - np_dtype(0.5), np_dtype(0))
    i0 = src.astype(np.int64)
    i1 = i0 + (i0 < n - 1)
    l1 = src - i0.astype(np_dtype)
    w = np.zeros((o, n), np_dtype)
    rows = np.arange(o)
    np.add.at(w, (rows, i0), np_dtype(1) - l1)
    np.add.at(w, (rows, i1), l1)
    return w


def _cubic_weights(n: int, o: int, scale, align_corners: bool, np_dtype) -> np.ndarray:
    """The (o, n) matrix of torch's bicubic weights along one dim: Keys' cubic convolution with
    A = -0.75 over the 4 neighbours of the (unclamped) source position, indices clamped to the edge."""
    A = np_dtype(-0.75)
    dst = np.arange(o).astype(np_dtype)
    s = _scale(n, o, scale, align_corners, np_dtype)
    src = s * dst if align_corners else s * (dst + np_dtype(0.5)) - np_dtype(0.5)
    i = np.minimum(np.floor(src).astype(np.int64), n - 1)
    t = np.clip(src - i.astype(np_dtype), np_dtype(0), np_dtype(1))

    def near(x):                                 # |x| <= 1
        return ((A + 2) * x - (A + 3)) * x * x + 1

    def far(x):                                  # 1 < |x| < 2
        return ((A * x - 5 * A) * x + 8 * A) * x - 4 * A
    coeffs = (far(t + 1), near(t), near(1 - t), far(2 - t))
    w = np.zeros((o, n), np_dtype)
    rows = np.arange(o)
    for k, c in enumerate(coeffs):
        np.add.at(w, (rows, np.clip(i - 1 + k, 0, n - 1)), c)
    return w


@builder("interpolate")
def interpolate(op: OpDef, schema: Schema, a: Args) -> Node:
    x, mode, size, scale_factor = a["self"], a["mode"], a["size"], a["scale_factor"]
    args = {"input": x}
    if mode not in _MODES:
        raise op_error(ValueError, op.name, f"unknown mode '{mode}'", args, f"valid modes: {', '.join(_MODES)}")
    if a["antialias"]:
        raise op_error(NotImplementedError, op.name, f"antialias=True (mode='{mode}') is not supported", args,
                       "use antialias=False")
    nd = x.ndim - 2
    if nd < 1 or nd > 3:
        raise op_error(NotImplementedError, op.name, f"Input Error: Only 3D, 4D and 5D input Tensors supported (got "
                       f"{x.ndim}D) for the modes: nearest | linear | bilinear | trilinear", args)
    if mode in _LINEAR_MODES and _LINEAR_MODES[mode] != nd:
        raise op_error(NotImplementedError, op.name, f"Got {x.ndim}D input, but {mode} mode needs "
                       f"{_LINEAR_MODES[mode] + 2}D input", args)
    align = a["align_corners"]
    if align is not None and mode.startswith("nearest"):
        raise op_error(ValueError, op.name, "align_corners option can only be set with the interpolating modes: "
                       "linear | bilinear | bicubic | trilinear", args)
    if (size is None) == (scale_factor is None):
        raise op_error(ValueError, op.name, "only one of size or scale_factor should be defined" if size is not None
                       else "either size or scale_factor should be defined", args)
    spatial = x.shape[2:]
    if size is not None:
        out = tuple(int(s) for s in ((size,) * nd if isinstance(size, int) else size))
        scales = (None,) * nd
    else:
        sf = tuple(float(s) for s in ((scale_factor,) * nd if isinstance(scale_factor, (int, float))
                                      else scale_factor))
        out = tuple(int(math.floor(n * s)) for n, s in zip(spatial, sf))
        scales = (None,) * nd if a["recompute_scale_factor"] else sf
    if len(out) != nd or (size is None and len(scales) != nd):
        raise op_error(ValueError, op.name, f"size/scale_factor must have {nd} values for a {x.ndim}D input", args)
    if min(out) <= 0:
        raise op_error(RuntimeError, op.name, f"Input and output sizes should be greater than 0, but got input "
                       f"({', '.join(map(str, spatial))}) and output ({', '.join(map(str, out))})", args)
    if mode == "area":                           # torch: an adaptive average pool to the output size
        return adaptive_pool(op, schema, {"self": x, "output_size": out, "_spatial": nd})
    if mode.startswith("nearest"):
        y = x
        for i, (n, o, s) in enumerate(zip(spatial, out, scales)):
            if n != o or mode == "nearest-exact":
                y = call("index_select", y, 2 + i, _constant(_nearest_index(n, o, s, mode == "nearest-exact"),
                                                             D.int64))
        return y
    if not x.dtype.is_floating_point:
        raise op_error(RuntimeError, op.name, f"\"{mode}\" is not implemented for dtype {x.dtype.name}", args)
    y = in_opmath(x)
    np_dtype = np.float64 if y.dtype is D.float64 else np.float32
    for i, (n, o, s) in enumerate(zip(spatial, out, scales)):
        weights = _cubic_weights if mode == "bicubic" else _linear_weights
        w = _constant(weights(n, o, s, bool(align), np_dtype), y.dtype)                 # (o, n)
        y = call("transpose", y, 2 + i, -1)                  # the dim to resample last
        y = call("transpose", matmul_node(y, call("t", w)), 2 + i, -1)      # (exact: torch's is no GEMM)
    return call("to", y, x.dtype)

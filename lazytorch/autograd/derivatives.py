"""Derivative rules, one per differentiable op of the IR, in the spirit of torch's derivatives.yaml.

A rule maps (args, out, grad) to the gradient of each differentiable argument, by schema name:
`args` are the node's arguments by name (inputs as nodes, attributes as values, as
ir.build.named_inputs gives them), `out` is the node itself (its value: pending or realized) and
`grad` the cotangent, a node of out's shape.  Rules build ordinary IR nodes through the same
builder the Tensor API uses (ir.build.call), so backward is more lazy graph: the passes fuse it
with the forward program.  Products are built by ir/build_linalg.py matmul_node instead, with the
forward node's TF32 decision (ir/precision.py), not torch's flags at the backward.  The engine sums
each result to its argument's shape (broadcasting) and casts it to the argument's dtype, so
pointwise rules may return broadcast shapes.

What a rule reads decides what backward keeps alive: cheap pointwise values (masks, x*x, the
normalised rows of layer_norm) are recomputed from the saved inputs inside the fused backward
kernels; outputs that cost a reduction (softmax, exp, tanh, sigmoid) are read from `out`.

Composites kept whole in the forward graph (softmax, log_softmax, layer_norm, rms_norm, linear,
cross_entropy, mse_loss, scaled_dot_product_attention, embedding) have dedicated rules written as
one row reduction plus pointwise work, which fusion turns into one row kernel, as torch's
_softmax_backward_data and MLX's LayerNormVJP are.
"""
from __future__ import annotations

import functools
import math
from typing import Any, Callable

import numpy as np

from ..ir import dtypes as D
from ..ir import precision
from ..ir import views as V
from ..ir.build import call as C  # noqa: N812  (rules read as formulas: C("mul", g, y))
from ..ir.build import constant, contiguous, inside_spec, view_of
from ..ir.build_conv import col2im, convolution_node, padded_windows
from ..ir.build_shape_ops import is_box_mask
from ..ir.build_linalg import matmul_node
from ..ir.build_nn import attention_weights
from ..ir.creation import fill, iota
from ..ir.errors import op_error
from ..ir.node import Node
from ..ir.registry import registrar

Rule = Callable[[dict[str, Any], Node, Node], dict[str, Any]]
RULES: dict[str, Rule] = {}
rule = registrar(RULES)

# Ops whose rule reads no saved value (only the cotangent): a second backward through them
# without retain_graph is still allowed, as in torch.
SAVES_NOTHING = frozenset({"add", "sub", "neg", "sum", "view", "contiguous", "clone", "to", "cat",
                           "mean", "view_assign"})


# ---------------------------------------------------------------- small builders

def zeros(shape, dtype: D.DType) -> Node:
    return fill(tuple(shape), 0.0 if dtype.is_floating_point else 0, dtype)


def sum_to(g: Node, shape: tuple[int, ...]) -> Node:
    """g summed over the dims it gained by broadcasting to reach `shape`."""
    shape = tuple(shape)
    if g.shape == shape:
        return g
    lead = g.ndim - len(shape)
    dims = list(range(lead)) + [lead + i for i, s in enumerate(shape) if s == 1 and g.shape[lead + i] != 1]
    if dims:
        # reduced without kept dims when that is already `shape` (a bias's gradient): a reshape
        # of the result would be a view, which costs a copy where it is stored as a gradient
        keep = tuple(s for k, s in enumerate(g.shape) if k not in dims) != shape
        g = C("sum", g, dims, keep)
    return g if g.shape == shape else C("reshape", g, shape)


def reduced_dims(x: Node, dim) -> list[int]:
    """The dims a reduction with argument `dim` reduced (None or [] mean all)."""
    if dim is None or (isinstance(dim, (tuple, list)) and len(dim) == 0):
        return list(range(x.ndim))
    dims = (dim,) if isinstance(dim, int) else tuple(dim)
    return sorted(d % max(x.ndim, 1) for d in dims)


def unreduce(g: Node, x: Node, dim, keepdim: bool) -> Node:
    """A reduction's cotangent expanded back to the input's shape."""
    if x.ndim == 0:
        return C("reshape", g, ()) if g.shape != () else g
    if not keepdim:
        shape = list(x.shape)
        for d in reduced_dims(x, dim):
            shape[d] = 1
        g = C("reshape", g, tuple(shape))
    return C("expand", g, x.shape)


def where0(mask: Node, g: Node) -> Node:
    return C("where", mask, g, 0.0)


def count(x: Node, dim) -> int:
    return math.prod(x.shape[d] for d in reduced_dims(x, dim)) if x.ndim else 1


# ---------------------------------------------------------------- unary pointwise

LN2, LN10 = math.log(2.0), math.log(10.0)
ONE_SIXTH = float(np.float32(1.0) / np.float32(6.0))    # torch's hardsigmoid backward uses 1.0f / 6.0f

UNARY: dict[str, Callable[[Node, Node, Node], Node]] = {
    "exp": lambda x, y, g: C("mul", g, y),
    "exp2": lambda x, y, g: C("mul", g, C("mul", y, LN2)),
    "expm1": lambda x, y, g: C("mul", g, C("add", y, 1.0)),
    "log": lambda x, y, g: C("div", g, x),
    "log2": lambda x, y, g: C("div", g, C("mul", x, LN2)),
    "log10": lambda x, y, g: C("div", g, C("mul", x, LN10)),
    "log1p": lambda x, y, g: C("div", g, C("add", x, 1.0)),
    "sqrt": lambda x, y, g: C("div", g, C("mul", y, 2.0)),
    "rsqrt": lambda x, y, g: C("mul", g, C("mul", C("mul", y, C("mul", y, y)), -0.5)),
    "reciprocal": lambda x, y, g: C("mul", g, C("neg", C("mul", y, y))),
    "sin": lambda x, y, g: C("mul", g, C("cos", x)),
    "cos": lambda x, y, g: C("mul", g, C("neg", C("sin", x))),
    "tan": lambda x, y, g: C("mul", g, C("add", C("mul", y, y), 1.0)),
    "asin": lambda x, y, g: C("mul", g, C("rsqrt", C("sub", 1.0, C("mul", x, x)))),
    "acos": lambda x, y, g: C("mul", g, C("neg", C("rsqrt", C("sub", 1.0, C("mul", x, x))))),
    "atan": lambda x, y, g: C("div", g, C("add", C("mul", x, x), 1.0)),
    "sinh": lambda x, y, g: C("mul", g, C("cosh", x)),
    "cosh": lambda x, y, g: C("mul", g, C("sinh", x)),
    "tanh": lambda x, y, g: C("mul", g, C("sub", 1.0, C("mul", y, y))),
    "erf": lambda x, y, g: C("mul", g, C("mul", C("exp", C("neg", C("mul", x, x))), 2.0 / math.sqrt(math.pi))),
    "sigmoid": lambda x, y, g: C("mul", g, C("mul", y, C("sub", 1.0, y))),
    "neg": lambda x, y, g: C("neg", g),
    "abs": lambda x, y, g: C("mul", g, C("sign", x)),
    "square": lambda x, y, g: C("mul", g, C("mul", x, 2.0)),
    "relu": lambda x, y, g: where0(C("gt", x, 0.0), g),
    "clone": lambda x, y, g: g,
    "contiguous": lambda x, y, g: g,
    "to": lambda x, y, g: g,                   # (the engine casts it back to x's dtype)
    "silu": lambda x, y, g: _silu(x, g),
    "mish": lambda x, y, g: _mish(x, g),
    "hardsigmoid": lambda x, y, g: where0(C("logical_and", C("gt", x, -3.0), C("lt", x, 3.0)), C("mul", g, ONE_SIXTH)),
    "hardswish": lambda x, y, g: C("where", C("lt", x, -3.0), 0.0,
                                   C("where", C("le", x, 3.0), C("mul", g, C("add", C("div", x, 3.0), 0.5)), g)),
    # step functions: zero gradient almost everywhere
    **dict.fromkeys(("sign", "floor", "ceil", "round", "trunc"), lambda x, y, g: zeros(x.shape, x.dtype)),
}


def _silu(x: Node, g: Node) -> Node:
    s = C("sigmoid", x)
    return C("mul", g, C("mul", s, C("add", C("mul", x, C("sub", 1.0, s)), 1.0)))


def _mish(x: Node, g: Node) -> Node:
    tsp = C("tanh", C("softplus", x))
    return C("mul", g, C("add", tsp, C("mul", C("mul", x, C("sigmoid", x)), C("sub", 1.0, C("mul", tsp, tsp)))))


def _unary(name: str) -> None:
    fn = UNARY[name]
    RULES[name] = lambda a, out, g: {"self": fn(a["self"], out, g)}


for _name in UNARY:
    _unary(_name)


@rule("gelu")
def _gelu(a, out, g):
    x = a["self"]
    if a.get("approximate", "none") == "tanh":
        k = math.sqrt(2.0 / math.pi)
        inner = C("mul", C("add", x, C("mul", C("mul", C("mul", x, x), x), 0.044715)), k)
        t = C("tanh", inner)
        dinner = C("mul", C("add", C("mul", C("mul", x, x), 3 * 0.044715), 1.0), k)
        d = C("add", C("mul", C("add", t, 1.0), 0.5),
              C("mul", C("mul", C("mul", x, 0.5), C("sub", 1.0, C("mul", t, t))), dinner))
        return {"self": C("mul", g, d)}
    if x.dtype in (D.float32, D.float64):
        # Phi(x) = gelu(x) / x from the forward's output: one erf per element for forward and
        # backward together instead of two (erf dominates a GPT step's pointwise time)
        # (below 1e-30, x * Phi(x) nears the subnormals, and Phi(x) is 0.5 to every digit)
        cdf = C("where", C("lt", C("abs", x), 1e-30), 0.5, C("div", out, x))
    else:                                   # (a half-precision output would lose Phi's digits)
        cdf = C("mul", C("add", C("erf", C("mul", x, 1.0 / math.sqrt(2.0))), 1.0), 0.5)
    pdf = C("mul", C("exp", C("mul", C("mul", x, x), -0.5)), 1.0 / math.sqrt(2.0 * math.pi))
    return {"self": C("mul", g, C("add", cdf, C("mul", x, pdf)))}


@rule("softplus")
def _softplus(a, out, g):
    x, beta, threshold = a["self"], a.get("beta", 1), a.get("threshold", 20)
    bx = C("mul", x, beta)
    return {"self": C("where", C("gt", bx, threshold), g, C("mul", g, C("sigmoid", bx)))}


@rule("elu")
def _elu(a, out, g):
    x, alpha, scale, iscale = (a.get(k, 1) for k in ("self", "alpha", "scale", "input_scale"))
    neg = C("mul", C("mul", C("exp", C("mul", x, iscale)), alpha), C("mul", iscale, scale))
    return {"self": C("mul", g, C("where", C("gt", x, 0.0), C("full_like", x, scale), neg))}


@rule("leaky_relu")
def _leaky_relu(a, out, g):
    x = a["self"]
    return {"self": C("where", C("gt", x, 0.0), g, C("mul", g, a.get("negative_slope", 0.01)))}


@rule("hardtanh")
def _hardtanh(a, out, g):
    x = a["self"]
    inside = C("logical_and", C("gt", x, a.get("min_val", -1)), C("lt", x, a.get("max_val", 1)))
    return {"self": where0(inside, g)}


# ---------------------------------------------------------------- binary and ternary pointwise

@rule("add")
def _add(a, out, g):
    alpha = a.get("alpha", 1)
    return {"self": g, "other": g if _is_one(alpha) else C("mul", g, alpha)}


@rule("sub")
def _sub(a, out, g):
    alpha = a.get("alpha", 1)
    return {"self": g, "other": C("neg", g) if _is_one(alpha) else C("mul", g, C("neg", alpha) if isinstance(alpha, Node) else -alpha)}


def _is_one(v) -> bool:
    return not isinstance(v, Node) and v == 1


@rule("mul")
def _mul(a, out, g):
    return {"self": C("mul", g, a["other"]), "other": C("mul", g, a["self"])}


@rule("div")
def _div(a, out, g):
    if a.get("rounding_mode") is not None:
        return _int_div(a, out, g)
    x, y = a["self"], a["other"]
    gx = C("div", g, y)
    return {"self": gx, "other": C("neg", C("mul", gx, C("div", x, y)))}


@rule("div_trunc", "div_floor", "floor_divide")
def _int_div(a, out, g):
    return {"self": C("mul", g, 0.0), "other": C("mul", g, 0.0)}


@rule("remainder", "fmod")
def _remainder(a, out, g):
    x, y = a["self"], a["other"]
    q = C("floor" if a["__op"] == "remainder" else "trunc", C("div", x, y))
    return {"self": g, "other": C("neg", C("mul", g, q))}


@rule("pow")
def _pow(a, out, g):
    x, e = a["self"], a["exponent"]
    log_x = math.log(x.value) if x.op == "scalar" and x.value > 0 else C("log", x)
    e_minus_1 = e.value - 1 if e.op == "scalar" else C("sub", e, 1)
    gx = C("mul", g, C("mul", e, C("pow", x, e_minus_1)))
    ge = C("mul", g, C("mul", out, log_x))
    # torch: d/dx x**0 = 0 and d/de at x == 0 is 0 where e >= 0
    return {"self": C("where", C("eq", e, 0), 0.0, gx) if isinstance(e, Node) and e.op != "scalar" else gx,
            "exponent": C("where", C("logical_and", C("eq", x, 0), C("ge", e, 0)), 0.0, ge)}


@rule("maximum", "minimum")
def _maximum(a, out, g):
    x, y = a["self"], a["other"]
    better = C("gt" if a["__op"] == "maximum" else "lt", x, y)
    tie = C("eq", x, y)
    half = C("mul", g, 0.5)
    gx = C("where", better, g, C("where", tie, half, 0.0))
    gy = C("where", better, 0.0, C("where", tie, half, g))
    return {"self": gx, "other": gy}


@rule("atan2")
def _atan2(a, out, g):
    y, x = a["self"], a["other"]
    d = C("add", C("mul", x, x), C("mul", y, y))
    return {"self": C("mul", g, C("div", x, d)), "other": C("mul", g, C("div", C("neg", y), d))}


@rule("where")
def _where(a, out, g):
    cond, x = a["condition"], a["self"]
    # a constant pad (ir/build_shape_ops.py padded): its clamped view's gradient keeps only the box,
    # where the mask is true, so the mask need not be applied first (a pass over the padded shape)
    box = x.attrs.get("clamp") if isinstance(x, Node) and x.op == "view" else None
    if box is not None and is_box_mask(cond, x.shape, box):
        return {"self": g, "other": C("where", cond, 0.0, g)}
    return {"self": where0(cond, g), "other": C("where", cond, 0.0, g)}


@rule("clamp", "clamp_min", "clamp_max")
def _clamp(a, out, g):
    x, lo, hi = a["self"], a.get("min"), a.get("max")
    keep, glo, ghi = None, None, None
    if lo is not None:
        keep = C("ge", x, lo)
        glo = where0(C("lt", x, lo), g)
    if hi is not None:
        below = C("le", x, hi)
        keep = below if keep is None else C("logical_and", keep, below)
        ghi = where0(C("gt", x, hi), g)
    return {"self": where0(keep, g), "min": glo, "max": ghi}


@rule("lerp")
def _lerp(a, out, g):
    x, end, w = a["self"], a["end"], a["weight"]
    return {"self": C("mul", g, C("sub", 1.0, w)), "end": C("mul", g, w),
            "weight": C("mul", g, C("sub", end, x))}


@rule("addcmul")
def _addcmul(a, out, g):
    v = a.get("value", 1)
    gv = g if _is_one(v) else C("mul", g, v)
    return {"self": g, "tensor1": C("mul", gv, a["tensor2"]), "tensor2": C("mul", gv, a["tensor1"])}


@rule("addcdiv")
def _addcdiv(a, out, g):
    v = a.get("value", 1)
    gv = g if _is_one(v) else C("mul", g, v)
    t1, t2 = a["tensor1"], a["tensor2"]
    g1 = C("div", gv, t2)
    return {"self": g, "tensor1": g1, "tensor2": C("neg", C("mul", g1, C("div", t1, t2)))}


@rule("masked_fill")
def _masked_fill(a, out, g):
    return {"self": C("where", a["mask"], 0.0, g)}


# ---------------------------------------------------------------- reductions and scans

@rule("sum")
def _sum(a, out, g):
    return {"self": unreduce(g, a["self"], a.get("dim"), a.get("keepdim", False))}


@rule("mean")
def _mean(a, out, g):
    x = a["self"]
    return {"self": C("div", unreduce(g, x, a.get("dim"), a.get("keepdim", False)), float(max(count(x, a.get("dim")), 1)))}


@rule("prod")
def _prod(a, out, g):
    x, dim, keep = a["self"], a.get("dim"), a.get("keepdim", False)
    y = unreduce(out, x, dim, keep)
    return {"self": C("mul", unreduce(g, x, dim, keep), C("div", y, x))}


@rule("amax", "amin")
def _amax(a, out, g):
    x, dim, keep = a["self"], a.get("dim"), a.get("keepdim", False)
    hit = C("to", C("eq", x, unreduce(out, x, dim, keep)), x.dtype)
    n = C("sum", hit, reduced_dims(x, dim), True) if x.ndim else hit
    share = C("div", unreduce(g, x, dim, keep), C("expand", n, x.shape) if x.ndim else n)
    return {"self": C("mul", share, hit)}


@rule("amax_first", "amin_first")
def _amax_first(a, out, g):
    """All of g to the first extreme element of each reduced slice (row-major over the reduced
    dims; NaN counts as the extreme, as in torch's max(dim) and max pooling)."""
    x, dim, keep = a["self"], a.get("dim"), a.get("keepdim", False)
    if x.ndim == 0:
        return {"self": g}
    dims = reduced_dims(x, dim)
    best = unreduce(out, x, dim, keep)
    hit = C("eq", x, best)
    if x.dtype.is_floating_point:
        hit = C("logical_or", hit, C("logical_and", C("isnan", x), C("isnan", best)))
    flat, step = None, 1
    for d in reversed(dims):                                  # row-major position within the slice
        # (structural constants: col2im computes this at each window position: ir/build_conv.py)
        term = C("mul", iota(x.shape, d), constant(step)) if step != 1 else iota(x.shape, d)
        flat = term if flat is None else C("add", flat, term)
        step *= x.shape[d]
    # (int32 positions where a slice fits: half the bytes, compared beside float lanes)
    positions = C("to", flat, D.int32) if step < 2 ** 31 else flat
    first = C("amin", C("where", hit, positions, step), dims, True)
    return {"self": C("where", C("eq", flat, first), unreduce(g, x, dim, keep), constant(0.0))}


@rule("var", "std")
def _var(a, out, g):
    x, dim, keep = a["self"], a.get("dim"), a.get("keepdim", False)
    correction = a.get("correction")
    corr = 1 if correction is None else correction.value if correction.op == "scalar" else correction
    dims = reduced_dims(x, dim)
    n = count(x, dim)
    centred = C("sub", x, C("mean", x, dims, True))
    denom = float(n) - corr if not isinstance(corr, Node) else C("sub", float(n), corr)
    gv = C("mul", unreduce(g, x, dim, keep), C("div", C("mul", centred, 2.0), denom))
    if a["__op"] == "std":
        gv = C("div", gv, C("mul", unreduce(out, x, dim, keep), 2.0))
    return {"self": gv}


@rule("logsumexp")
def _logsumexp(a, out, g):
    x, dim, keep = a["self"], a["dim"], a.get("keepdim", False)
    return {"self": C("mul", unreduce(g, x, dim, keep), C("exp", C("sub", x, unreduce(out, x, dim, keep))))}


@rule("norm")
def _norm(a, out, g):
    x, p, dim, keep = a["self"], a.get("p", 2), a.get("dim"), a.get("keepdim", False)
    p = 2.0 if p is None else float(p.value if isinstance(p, Node) else p)
    gx, y = unreduce(g, x, dim, keep), unreduce(out, x, dim, keep)
    if p == 2.0:
        d = C("div", x, y)
    elif p == 1.0:
        d = C("sign", x)
    elif math.isinf(p):
        hit = C("to", C("eq", C("abs", x), y), x.dtype)
        n = C("expand", C("sum", hit, reduced_dims(x, dim), True), x.shape)
        d = C("div", C("mul", C("sign", x), hit), n)
    else:
        d = C("div", C("mul", x, C("pow", C("abs", x), p - 2.0)), C("pow", y, p - 1.0))
    return {"self": where0(C("ne", y, 0.0), C("mul", gx, d)) if p >= 1.0 else C("mul", gx, d)}


@rule("cumsum")
def _cumsum(a, out, g):
    d = a["dim"] % max(g.ndim, 1)
    if g.ndim == 0:
        return {"self": g}
    return {"self": C("flip", C("cumsum", C("flip", g, [d]), d), [d])}


# ---------------------------------------------------------------- views and data movement

def view_adjoint(g: Node, base_shape: tuple[int, ...], spec: V.ViewSpec) -> Node:
    """The gradient of a view's base: g sent back through the view, summed where the view read one
    base element more than once (broadcast dims, overlapping windows) and zero where it did not read."""
    bcast = [d for d, (s, st) in enumerate(zip(spec.shape, spec.strides)) if st == 0 and s > 1]
    if bcast:
        g = C("sum", g, bcast, True)
        spec = V.ViewSpec(g.shape, spec.strides, spec.offset)
    bijective = _bijective_inverse(g, base_shape, spec)
    if bijective is not None:
        return bijective
    geometry = windows_geometry(base_shape, spec)
    if geometry is not None:                      # pooling's windows (Tensor.unfold's): one kernel
        return col2im(g, base_shape[len(base_shape) - len(geometry[0]):], *geometry)
    peel = _peel_for_injective(spec)
    total = None
    for index in np.ndindex(*[spec.shape[d] for d in peel]):
        part, part_spec = g, spec
        for d, i in sorted(zip(peel, index), reverse=True):      # select from the last dim first
            part = C("select", part, d, i)
            part_spec = V.select(part_spec, d, i)
        placed = Node("view_assign", (zeros(base_shape, g.dtype), contiguous(part)), {"view": part_spec},
                      tuple(base_shape), g.dtype)
        total = placed if total is None else C("add", total, placed)
    return total


def sum_cotangents(parts: list[Node]) -> Node:
    """The sum of the cotangents reaching one node, in arrival order.  Slices written into zeros
    that tile the node along one dim (the adjoint of split/chunk/unbind: q, k and v of one
    projection) are one `cat` of the slices instead of a write per slice and their sum."""
    if len(parts) == 1:                 # (most nodes: one reader; ResNet-18's backward, 1.8 us a call)
        return parts[0]
    writes = [p.op == "view_assign" for p in parts]
    if writes.count(True) < 2:          # (no two slices to tile with: ResNet-18's 48 sums a step)
        return _plain_sum(parts)
    slices = [(k, _slice_write(p) if w else None) for k, (p, w) in enumerate(zip(parts, writes))]
    by_dim: dict[int, list[tuple[int, int, tuple[int, ...], Node]]] = {}
    for k, found in slices:
        if found is not None:
            d, begin, box, layout = found
            by_dim.setdefault(d, []).append((begin, k, box, layout))
    for d, pieces in by_dim.items():
        pieces.sort(key=lambda t: t[0])
        base, start = tuple(parts[pieces[0][1]].shape), 0
        for begin, _, box, _ in pieces:
            if begin != start:
                break
            start += box[d]
        else:
            if len(pieces) > 1 and start == base[d]:
                used = {k for _, k, _, _ in pieces}
                parts = [_tiling_cat(pieces, d, base)] + [p for k, p in enumerate(parts) if k not in used]
                break
    return _plain_sum(parts)


def _plain_sum(parts: list[Node]) -> Node:
    """The parts added left to right, in arrival order."""
    total = parts[0]
    for p in parts[1:]:
        total = C("add", total, p)
    return total


def _tiling_cat(pieces, d: int, base: tuple[int, ...]) -> Node:
    """The cat of slices that tile `base` along dim d.  When the slices are equal and their
    layouts (transposed views) split the base's dims the same way, they are stacked in that finer
    layout and the result reshaped to base: the cat reads the views in place, with no copy of each
    transposed piece into the slice's shape first."""
    layouts = [layout for _, _, _, layout in pieces]
    fine = tuple(layouts[0].shape)
    at = _group_start(pieces[0][2], fine, d)
    if at is not None and all(tuple(x.shape) == fine for x in layouts):
        return C("reshape", C("cat", tuple(C("unsqueeze", x, at) for x in layouts), at), base)
    return C("cat", tuple(C("reshape", layout, box) for _, _, box, layout in pieces), d)


def _group_start(box: tuple[int, ...], fine: tuple[int, ...], d: int) -> int | None:
    """Where box's dim d begins among the dims of `fine` (box's elements in the same order, split
    into finer dims, none of size 1), when every dim of box is a run of whole fine dims."""
    j = 0
    for k, size in enumerate(box):
        first = j
        acc = 1
        while acc < size and j < len(fine):
            acc *= fine[j]
            j += 1
        if acc != size:
            return None
        if k == d:
            return first
    return None


def _slice_write(n: Node) -> tuple[int, int, tuple[int, ...], Node] | None:
    """(dim, start, box, layout) when n writes a value into zeros through a view that reads a box
    of its base, whole except along one dim (as view_adjoint makes for split's pieces, reshaped or
    transposed after the split); `layout` is a view of the value holding the box's elements in
    order (reshaped to `box`, it is the slice).  Else None."""
    if n.op != "view_assign" or n.inputs[0].op != "full" or getattr(n.inputs[0].inputs[0], "value", 1) != 0:
        return None
    found = _slice_box(n.attrs["view"], tuple(n.shape))
    if found is None:
        return None
    d, start, sub, relative = found
    layout = _bijective_inverse(n.inputs[1], sub, relative, layout_only=True)
    return None if layout is None else (d, start, sub, layout)


@functools.lru_cache(maxsize=1024)
def _slice_box(spec: V.ViewSpec, base: tuple[int, ...]) -> tuple[int, int, tuple[int, ...], V.ViewSpec] | None:
    """(dim, start, box, the view relative to the box) when `spec` reads a box of a contiguous
    `base`, whole except along one dim; else None.  Geometry alone, so cached: a training step's
    backward asks it of the same split pieces at every step (W10: a third of its backward's build)."""
    if spec.numel == 0 or not base:
        return None
    bstrides = V.contiguous_strides(base)
    # each view dim's stride (and the offset) as whole steps along base dims; the view stays in a
    # box when no sum of steps carries into an outer base dim
    steps = [_digits(st, bstrides, base) if size > 1 else (0,) * len(base) for size, st in zip(spec.shape, spec.strides)]
    origin = _digits(spec.offset, bstrides, base)
    if origin is None or any(c is None for c in steps):
        return None
    hi = [o + sum((size - 1) * c[k] for size, c in zip(spec.shape, steps)) + 1 for k, o in enumerate(origin)]
    if any(h > b for h, b in zip(hi, base)):
        return None
    partial = [k for k in range(len(base)) if (origin[k], hi[k]) != (0, base[k])]
    if len(partial) != 1:
        return None
    d = partial[0]
    sub = base[:d] + (hi[d] - origin[d],) + base[d + 1:]
    sstrides = V.contiguous_strides(sub)
    relative = V.ViewSpec(spec.shape, tuple(sum(ck * sk for ck, sk in zip(c, sstrides)) for c in steps), 0)
    return d, origin[d], sub, relative


def _digits(offset: int, strides: tuple[int, ...], sizes: tuple[int, ...]) -> tuple[int, ...] | None:
    """A non-negative element offset as whole steps along each dim of a contiguous layout."""
    if offset < 0:
        return None
    out = []
    for k, st in enumerate(strides):
        q, offset = divmod(offset, st) if st else (0, offset)
        if k and q >= sizes[k]:
            return None
        out.append(q)
    return tuple(out) if offset == 0 else None


MAX_OVERLAP_TERMS = 64


def _injective(spec: V.ViewSpec, dims: list[int]) -> bool:
    """Whether the view restricted to `dims` reads distinct base elements (strides nested)."""
    extent = 0
    for d in sorted((d for d in dims if spec.shape[d] > 1), key=lambda d: abs(spec.strides[d])):
        if abs(spec.strides[d]) <= extent:
            return False
        extent += (spec.shape[d] - 1) * abs(spec.strides[d])
    return True


def windows_geometry(base_shape: tuple[int, ...], spec: V.ViewSpec):
    """(kernel, stride, dilation) when `spec` is ir/build_conv.py's `windows` of a contiguous base:
    dims (*lead, *out, *kernel) over the base's (*lead, *size), out dims stepping by stride and
    kernel dims by dilation along the same base dim, every window inside the base; else None."""
    nd = (len(spec.shape) - len(base_shape)) if spec.offset == 0 and spec.numel else 0
    lead = len(base_shape) - nd
    if nd <= 0 or lead < 0 or tuple(spec.shape[:lead]) != tuple(base_shape[:lead]):
        return None
    bstrides = V.contiguous_strides(tuple(base_shape))
    if any(n > 1 and st != b for n, st, b in zip(spec.shape[:lead], spec.strides[:lead], bstrides)):
        return None
    steps = []
    for j in range(nd):
        size, unit = base_shape[lead + j], bstrides[lead + j]
        o, so = spec.shape[lead + j], spec.strides[lead + j]                # output positions
        k, sk = spec.shape[lead + nd + j], spec.strides[lead + nd + j]      # window taps
        if unit == 0:
            return None
        s, d = (so // unit if o > 1 else 1), (sk // unit if k > 1 else 1)
        if s < 1 or d < 1 or (o > 1 and so != s * unit) or (k > 1 and sk != d * unit) \
                or (o - 1) * s + (k - 1) * d >= size:
            return None
        steps.append((k, s, d))
    kernel, stride, dilation = zip(*steps)
    return tuple(kernel), tuple(stride), tuple(dilation)


def _peel_for_injective(spec: V.ViewSpec) -> list[int]:
    """The fewest-terms set of dims to iterate over so that each slice of the view is injective
    (overlapping windows: the window dims); the adjoint then sums one write per slice."""
    dims = [d for d in range(len(spec.shape)) if spec.shape[d] > 1]
    best = None
    for mask in range(1 << len(dims)):
        peel = [d for i, d in enumerate(dims) if mask >> i & 1]
        terms = math.prod(spec.shape[d] for d in peel)
        if (best is None or terms < best[0]) and _injective(spec, [d for d in dims if d not in peel]):
            best = (terms, peel)
    if best is None or best[0] > MAX_OVERLAP_TERMS:
        raise NotImplementedError(f"backward of a view that reads base elements repeatedly ({spec}) would take "
                                  f"more than {MAX_OVERLAP_TERMS} scatter terms")
    return best[1]


def _bijective_inverse(g: Node, base_shape, spec: V.ViewSpec, layout_only: bool = False) -> Node | None:
    """When the view reads every base element exactly once, its inverse is again a view of g:
    flip the reversed dims, order the dims by stride, reshape to the base (`layout_only`: stop
    before that reshape, at the base's elements in order as a view of g, dims of size 1 dropped)."""
    found = _inverse_steps(spec, tuple(base_shape))
    if found is None:
        return None
    neg, kept, perm = found
    if neg:
        g = C("flip", g, neg)
    g = C("reshape", g, kept)
    if perm is not None:
        g = C("permute", g, perm)
    return g if layout_only else C("reshape", g, tuple(base_shape))


@functools.lru_cache(maxsize=1024)
def _inverse_steps(spec: V.ViewSpec, base_shape: tuple[int, ...]) -> tuple[tuple[int, ...], tuple[int, ...], tuple[int, ...] | None] | None:
    """_bijective_inverse's geometry (cached as _slice_box is): the dims to flip, the shape with
    dims of size 1 dropped, and the permutation that orders them by stride (None: in order)."""
    if spec.numel != math.prod(base_shape) or spec.numel == 0:
        return None
    dims = [d for d in range(len(spec.shape)) if spec.shape[d] != 1]
    neg = [d for d in dims if spec.strides[d] < 0]
    order = sorted(dims, key=lambda d: -abs(spec.strides[d]))
    sizes = tuple(spec.shape[d] for d in order)
    if tuple(abs(spec.strides[d]) for d in order) != V.contiguous_strides(sizes):
        return None
    start = spec.offset + sum((spec.shape[d] - 1) * spec.strides[d] for d in neg)
    if start != 0:
        return None
    perm = tuple(dims.index(d) for d in order)
    return tuple(neg), tuple(spec.shape[d] for d in dims), (perm if list(perm) != sorted(perm) else None)


@rule("view")
def _view(a, out, g):
    box = a.get("clamp")
    if box is None:
        return {"self": view_adjoint(g, a["self"].shape, a["view"])}
    # a clamped view (ir/build.py): its reader masks everything outside the box, so only the box's
    # part of g reaches the base, through the ordinary view inside it
    for d, (start, stop) in enumerate(box):
        if (start, stop) != (0, g.shape[d]):
            g = C("narrow", g, d, start, stop - start)
    return {"self": view_adjoint(g, a["self"].shape, inside_spec(a["view"], box))}


@rule("view_assign")
def _view_assign(a, out, g):
    spec = a["view"]
    cleared = Node("view_assign", (g, zeros(spec.shape, g.dtype)), {"view": spec}, g.shape, g.dtype)
    return {"self": cleared, "src": view_of(contiguous(g), spec)}


@rule("cat")
def _cat(a, out, g):
    d, grads, start = a["dim"] % g.ndim, [], 0
    for t in a["tensors"]:
        n = t.shape[d] if t.ndim == g.ndim else 0
        grads.append(C("narrow", g, d, start, n) if t.ndim == g.ndim else None)
        start += n
    return {"tensors": tuple(grads)}


@rule("matmul")
def _matmul(a, out, g):
    x, y, tf32 = a["self"], a["other"], precision.tf32(a)       # (the product's TF32 decision: inherited)
    return {"self": matmul_node(g, C("transpose", y, -1, -2), tf32),
            "other": matmul_node(C("transpose", x, -1, -2), g, tf32)}


def one_hot(index: Node, n: int, dtype: D.DType) -> Node:
    """(index.unsqueeze(-1) == arange(n)) as `dtype`: scatter-add as a matmul or sum (exact, never
    TF32: torch's scatter-add is no GEMM)."""
    return C("to", C("eq", C("unsqueeze", index, -1), iota((n,), 0)), dtype)


@rule("embedding")
def _embedding(a, out, g):
    idx, w = a["self"], a["weight"]
    flat = C("reshape", idx, (-1,))
    g2 = C("reshape", g, (-1, w.shape[1]))
    oh = one_hot(flat, w.shape[0], g.dtype)
    if a.get("padding_idx") is not None:
        oh = C("mul", oh, C("to", C("ne", iota((w.shape[0],), 0), a["padding_idx"] % w.shape[0]), g.dtype))
    return {"weight": matmul_node(C("transpose", oh, 0, 1), g2)}


@rule("gather")
def _gather(a, out, g):
    x, d, idx = a["self"], a["dim"] % max(a["self"].ndim, 1), a["index"]
    if x.ndim == 0:
        return {"self": C("reshape", g, ())}
    # g[..., k, ...] goes to x[..., idx[..., k, ...], ...]: compare over a new last axis of x's size
    moved_g, moved_i = C("transpose", g, d, -1), C("transpose", idx, d, -1)
    oh = one_hot(moved_i, x.shape[d], g.dtype)              # [..., K, n]
    summed = C("sum", C("mul", oh, C("unsqueeze", moved_g, -1)), -2)   # [..., n]
    back = C("transpose", summed, d, -1)
    return {"self": _pad_to(back, x.shape)}


def _pad_to(g: Node, shape) -> Node:
    """g (smaller than `shape` in non-gathered dims, as gather allows) padded with zeros."""
    if tuple(g.shape) == tuple(shape):
        return g
    return C("pad", g, [p for have, want in zip(reversed(g.shape), reversed(shape)) for p in (0, want - have)])


@rule("index")
def _index(a, out, g):
    """Several index tensors become one flat index over the indexed dims (moved to the front first
    when they are not adjacent, where torch puts the result dims); then one scatter-add."""
    x, indices, dims = a["self"], a["indices"], tuple(a["dims"])
    idxs = [C("remainder", i, x.shape[d]) if a.get("wrap_negative", True) else i for i, d in zip(indices, dims)]
    k = len(dims)
    adjacent = dims == tuple(range(dims[0], dims[0] + k))
    perm = None if adjacent else list(dims) + [i for i in range(x.ndim) if i not in dims]
    shape = tuple(x.shape) if perm is None else tuple(x.shape[i] for i in perm)
    start = dims[0] if adjacent else 0
    flat = idxs[0]
    for i, d in zip(idxs[1:], range(start + 1, start + k)):
        flat = C("add", C("mul", flat, shape[d]), i)
    merged = shape[:start] + (math.prod(shape[start:start + k]),) + shape[start + k:]
    gx = C("reshape", _scatter_add(g, merged, flat, start), shape)
    if perm is not None:
        gx = C("permute", gx, [perm.index(i) for i in range(x.ndim)])
    return {"self": gx}


def _scatter_add(g: Node, shape: tuple[int, ...], idx: Node, d: int) -> Node:
    """The adjoint of indexing dim d of a `shape` tensor with `idx` (result dims at d): a one-hot matmul."""
    k = idx.ndim
    perm = [i for i in range(g.ndim) if not d <= i < d + k] + list(range(d, d + k))
    gm = C("reshape", C("permute", g, perm), tuple(g.shape[i] for i in perm[:g.ndim - k]) + (-1,))
    oh = one_hot(C("reshape", idx, (-1,)), shape[d], g.dtype)                   # [N, n]
    moved = matmul_node(gm, oh) if gm.ndim >= 2 else matmul_node(C("unsqueeze", gm, 0), oh)   # [..., n]
    moved = C("reshape", moved, tuple(shape[i] for i in range(len(shape)) if i != d) + (shape[d],))
    return _last_to(moved, d)


def _last_to(x: Node, d: int) -> Node:
    perm = list(range(x.ndim - 1))
    perm.insert(d, x.ndim - 1)
    return C("permute", x, perm)


@rule("index_put")
def _index_put(a, out, g):
    indices, dims, values = a["indices"], tuple(a["dims"]), a["values"]
    cleared = C("index_put", g, indices, dims, zeros(values.shape, g.dtype))
    return {"self": cleared, "values": C("index", g, indices, dims)}


# ---------------------------------------------------------------- convolution

@rule("convolution")
def _convolution(a, out, g):
    """Grouped, N-d.  A convolution's input windows are one strided view of the padded input
    (N, C, *out, *kernel); the weight's gradient is a batched matmul against it.  The input's is,
    at stride 1, itself a convolution (`_input_grad_at_stride_one`); at other strides the same
    product with the roles exchanged, sent back through that view (summing where windows overlap:
    col2im) and cropped.  A transposed convolution's gradients are the same products with the
    roles of input and g exchanged.  The products compute in TF32 where the convolution's did (its
    call's decision: ir/precision.py)."""
    x, w, tf32 = a["self"], a["weight"], precision.tf32(a)
    nd, G = x.ndim - 2, a["groups"]
    pad, stride, dil = tuple(a["padding"]), tuple(a["stride"]), tuple(a["dilation"])
    bias = C("sum", g, [0] + list(range(2, g.ndim)))
    if a["transposed"]:
        return {"self": _transposed_input_grad(x, w, g, stride, pad, dil, G, tf32),
                "weight": _transposed_weight_grad(x, w, g, stride, pad, dil, G, tf32), "bias": bias}
    N, Cin, O = x.shape[0], x.shape[1], w.shape[0]
    kernel = tuple(w.shape[2:])
    # the weight's gradient reads the input's columns as the forward's product does (kernel-first,
    # the batch joined: passes/decompositions/conv.py), transposed: one copy whose inner dim runs
    # along positions (cpu: 0.25 ms for a 64-channel 3x3 layer at 8 x 16 x 16, where windows laid
    # out position-first took two copies, 1.9 ms), the forward's own where it folds its batch
    win = padded_windows(x, kernel, stride, dil, pad, kernel_first=True)    # (N, C, *kernel, *out)
    P, KK, Cg, Og = math.prod(g.shape[2:]), math.prod(kernel), Cin // G, O // G
    cols = C("reshape", C("permute", win, (1,) + tuple(range(2, 2 + nd)) + (0,) + tuple(range(2 + nd, 2 + 2 * nd))),
             (G, Cg * KK, N * P))
    gg = C("reshape", g, (N, G, Og, P))
    g_rows = C("reshape", C("permute", gg, (1, 2, 0, 3)), (G, Og, N * P))
    gw = C("reshape", matmul_node(g_rows, C("transpose", cols, 1, 2), tf32), w.shape)
    # (the stride-1 convolution copies the weight transposed and flipped, Og x Cg x K per group;
    # where that is more than K times g's windows (N*P x Og x K), the copy is most of what the
    # input gradient moves, and the product against the weight as it lies, sent back through
    # col2im, moves less for its ~130 more nodes: ResNet-18's last layers at small inputs, 512
    # channels over 2 x 1 x 1 positions: cpu, batch 2 at 32 x 32, its training step 30.9 -> 22.5 ms)
    if (all(s == 1 for s in stride) and all(p <= d * (k - 1) for p, d, k in zip(pad, dil, kernel))
            and Cg <= KK * N * P):
        return {"self": _input_grad_at_stride_one(g, w, pad, dil, G, tf32), "weight": gw, "bias": bias}
    # the windows' gradient W^T @ g's rows (the weight product's own copy of g), (G, Cg*KK, N*P):
    # positions innermost, so col2im reads along them (as (G, N*P, Cg*KK) each load stepped
    # Cg*KK floats: its phases took 6.3-8.4 ms at 16 x 64 x 32^2 with a 4x4 window on cpu)
    wt = C("transpose", C("reshape", w, (G, Og, Cg * KK)), 1, 2)
    gwin = matmul_node(wt, g_rows, tf32)                                          # (G, Cg*KK, N*P)
    gwin = C("reshape", gwin, (G, Cg) + kernel + (N,) + tuple(g.shape[2:]))
    perm = [2 + nd, 0, 1] + list(range(3 + nd, 3 + 2 * nd)) + list(range(2, 2 + nd))
    gwin = C("reshape", C("permute", gwin, perm), (N, Cin) + tuple(g.shape[2:]) + kernel)    # (N, C, *out, *kernel)
    gxp = col2im(gwin, tuple(n + 2 * p for n, p in zip(x.shape[2:], pad)), kernel, stride, dil)
    gx = gxp
    for d, p in enumerate(pad):
        if p:
            gx = C("narrow", gx, 2 + d, p, x.shape[2 + d])
    return {"self": gx, "weight": gw, "bias": bias}


def _input_grad_at_stride_one(g: Node, w: Node, pad, dil, groups: int, tf32: bool) -> Node:
    """At stride 1 a convolution's input gradient is a convolution of g, padded by d(k-1) - p,
    with the weight's channels exchanged within each group and its window flipped:
    gx[n, c, j] = sum over o, k of g[n, o, j + k d - (d(k-1) - p)] w[o, c, K-1-k].  One convolution
    node, lowered as the forward's are, where col2im's masked sum of a padded slice per kernel
    position built ~130 nodes per 3x3 convolution (ResNet-18's backward: ~2,600 of its step's
    5,300 nodes, every step)."""
    O, Cg = w.shape[0], w.shape[1]
    kernel, nd, Og = tuple(w.shape[2:]), w.ndim - 2, w.shape[0] // groups
    wt = C("reshape", C("transpose", C("reshape", w, (groups, Og, Cg) + kernel), 1, 2), (groups * Cg, Og) + kernel)
    wt = C("flip", wt, list(range(2, 2 + nd)))
    return convolution_node(g, wt, (1,) * nd, tuple(d * (k - 1) - p for p, d, k in zip(pad, dil, kernel)), dil,
                            False, (0,) * nd, groups, tf32)


def _transposed_input_grad(x: Node, w: Node, g: Node, stride, pad, dil, groups: int, tf32: bool) -> Node:
    """A transposed convolution is the adjoint of a convolution in its input, so its input's
    gradient is g convolved by the same weight (cropped: output_padding may add a window)."""
    nd = x.ndim - 2
    gx = convolution_node(g, w, stride, pad, dil, False, (0,) * nd, groups, tf32)
    for d in range(nd):
        if gx.shape[2 + d] != x.shape[2 + d]:
            gx = C("narrow", gx, 2 + d, 0, x.shape[2 + d])
    return gx


def _transposed_weight_grad(x: Node, w: Node, g: Node, stride, pad, dil, groups: int, tf32: bool) -> Node:
    """Weight (Cin, Og, *kernel): each input channel's values against g's windows at the same
    positions (g padded as the forward cropped it), one batched product over batch and positions."""
    nd, N, G = x.ndim - 2, x.shape[0], groups
    kernel, spatial = tuple(w.shape[2:]), tuple(x.shape[2:])
    Cg, Og, P, K = x.shape[1] // G, w.shape[1], math.prod(spatial), math.prod(kernel)
    win = padded_windows(g, kernel, stride, dil, pad)                       # (N, O, *>= spatial, *kernel)
    for d, n in enumerate(spatial):
        if win.shape[2 + d] != n:
            win = C("narrow", win, 2 + d, 0, n)
    cols = C("reshape", C("permute", C("reshape", win, (N, G, Og, P, K)), (1, 0, 3, 2, 4)), (G, N * P, Og * K))
    rows = C("reshape", C("permute", C("reshape", x, (N, G, Cg, P)), (1, 2, 0, 3)), (G, Cg, N * P))
    return C("reshape", matmul_node(rows, cols, tf32), w.shape)


@rule("fold")
def _fold(a, out, g):
    """col2im's adjoint is im2col with the same geometry."""
    return {"self": C("im2col", g, a["kernel_size"], a["dilation"], a["padding"], a["stride"])}


# ---------------------------------------------------------------- nn composites (row kernels)

@rule("softmax")
def _softmax(a, out, g):
    d = a["dim"]                               # (wrapped by the meta rule: never None)
    y = out if out.dtype is g.dtype else C("to", out, g.dtype)
    if out.ndim == 0:
        return {"self": C("mul", g, 0.0)}
    dot = C("sum", C("mul", g, y), [d], True)
    return {"self": C("mul", y, C("sub", g, dot))}


@rule("log_softmax")
def _log_softmax(a, out, g):
    d = a["dim"]
    if out.ndim == 0:
        return {"self": C("mul", g, 0.0)}
    return {"self": C("sub", g, C("mul", C("exp", out), C("sum", g, [d], True)))}


def _norm_dims(x: Node, normalized_shape) -> list[int]:
    k = len(tuple(normalized_shape))
    return list(range(x.ndim - k, x.ndim))


@rule("layer_norm")
def _layer_norm(a, out, g):
    x, w, eps = a["self"], a.get("weight"), a.get("eps", 1e-5)
    dims = _norm_dims(x, a["normalized_shape"])
    mu = C("mean", x, dims, True)
    xc = C("sub", x, mu)
    rstd = C("rsqrt", C("add", C("mean", C("mul", xc, xc), dims, True), eps))
    xhat = C("mul", xc, rstd)
    gw = g if w is None else C("mul", g, w)
    gx = C("mul", rstd, C("sub", C("sub", gw, C("mean", gw, dims, True)),
                               C("mul", xhat, C("mean", C("mul", gw, xhat), dims, True))))
    return {"self": gx, "weight": C("mul", g, xhat), "bias": g}


@rule("rms_norm")
def _rms_norm(a, out, g):
    x, w, eps = a["self"], a.get("weight"), a.get("eps")
    if eps is None:
        eps = float(np.finfo(x.dtype.np).eps)
    dims = _norm_dims(x, a["normalized_shape"])
    r = C("rsqrt", C("add", C("mean", C("mul", x, x), dims, True), eps))
    xhat = C("mul", x, r)
    gw = g if w is None else C("mul", g, w)
    gx = C("mul", r, C("sub", gw, C("mul", xhat, C("mean", C("mul", gw, xhat), dims, True))))
    return {"self": gx, "weight": C("mul", g, xhat)}


@rule("linear")
def _linear(a, out, g):
    """Rows flattened to 2-D matrices (one GEMM each, whatever the batch dims; in TF32 where the
    forward's was: ir/precision.py)."""
    x, w, tf32 = a["self"], a["weight"], precision.tf32(a)
    x2 = C("reshape", x, (-1, w.shape[-1]))
    if w.ndim == 1:
        g1 = C("reshape", g, (-1,))
        return {"self": C("mul", C("unsqueeze", g, -1), w),
                "weight": C("reshape", matmul_node(g1, x2, tf32), w.shape), "bias": g}
    g2 = C("reshape", g, (-1, w.shape[0]))
    gx = C("reshape", matmul_node(g2, w, tf32), x.shape)
    return {"self": gx, "weight": matmul_node(C("transpose", g2, 0, 1), x2, tf32), "bias": g}


@rule("mse_loss")
def _mse_loss(a, out, g):
    x, t = a["self"], a["target"]
    diff = C("sub", x, t)
    n = x.numel if a.get("reduction", "mean") == "mean" else 1
    gd = C("mul", C("mul", diff, 2.0 / max(n, 1)), g)
    return {"self": gd, "target": C("neg", gd)}


@rule("cross_entropy")
def _cross_entropy(a, out, g):
    x, t = a["self"], a["target"]
    if a.get("weight") is not None:
        raise op_error(NotImplementedError, "cross_entropy", "backward with class weights is not supported",
                       {"self": x}, "omit weight=")
    reduction, ls = a.get("reduction", "mean"), float(a.get("label_smoothing", 0.0))
    cdim = 1 if x.ndim >= 2 else 0
    n_class = x.shape[cdim]
    p = C("softmax", x, cdim)
    if t.dtype.is_floating_point:                          # class probabilities
        tt = t if ls == 0 else C("add", C("mul", t, 1.0 - ls), ls / n_class)
        grad = C("sub", C("mul", p, C("sum", tt, [cdim], True)), tt)
        n = x.numel // n_class if x.ndim >= 2 else 1
        scale = C("div", g, float(n)) if reduction == "mean" else g
        if reduction == "none" and x.ndim >= 2:
            scale = C("unsqueeze", scale, cdim)
        gt = C("mul", C("neg", C("log_softmax", x, cdim)), scale)
        return {"self": C("mul", grad, scale), "target": C("mul", gt, 1.0 - ls) if ls else gt}
    ii = a.get("ignore_index", -100)
    keep = C("ne", t, ii)
    safe = C("where", keep, t, 0)
    oh = one_hot(safe, n_class, x.dtype)                     # [..., C] with classes last
    if cdim == 1 and x.ndim >= 2:
        oh = _last_to(oh, 1)
    target_dist = C("add", C("mul", oh, 1.0 - ls), ls / n_class) if ls else oh
    grad = C("sub", p, target_dist)
    mask = C("to", keep, x.dtype)
    scale = C("mul", mask, g)
    if reduction == "mean":
        scale = C("div", scale, C("sum", mask))
    return {"self": C("mul", grad, C("unsqueeze", scale, cdim) if x.ndim >= 2 else scale), "target": None}


@rule("scaled_dot_product_attention")
def _sdpa(a, out, g):
    q, k, v, mask = a["query"], a["key"], a["value"], a.get("attn_mask")
    if a.get("dropout_p", 0.0):
        raise op_error(NotImplementedError, "scaled_dot_product_attention", "backward with dropout_p > 0 is not "
                       "supported", {"query": q}, "use dropout_p=0.0 when training")
    if q.shape[-3:-2] != k.shape[-3:-2] and q.ndim >= 3:
        raise op_error(NotImplementedError, "scaled_dot_product_attention", "backward of grouped-query attention "
                       "is not supported", {"query": q, "key": k})
    scale = a.get("scale")
    scale = 1.0 / math.sqrt(q.shape[-1]) if scale is None else scale
    tf32 = precision.tf32(a)                                        # (the forward's decision: inherited)
    p = attention_weights(q, k, mask, a.get("is_causal"), scale, tf32)   # (zeros where every key is masked)
    gv = matmul_node(C("transpose", p, -2, -1), g, tf32)
    gp = matmul_node(g, C("transpose", v, -2, -1), tf32)
    gmask = C("mul", p, C("sub", gp, C("sum", C("mul", gp, p), [-1], True)))
    gs = C("mul", gmask, scale)
    return {"query": matmul_node(gs, k, tf32), "key": matmul_node(C("transpose", gs, -2, -1), q, tf32),
            "value": gv, "attn_mask": gmask if mask is not None and mask.dtype.is_floating_point else None}

"""Builders of the linear algebra ops: everything becomes the one `matmul` primitive plus views.

The primitive's operands have >= 2 dims and broadcastable batch dims (`matmul_node` promotes 1-D
operands with a view and removes the added dim from the result, as torch.matmul does).  mm, bmm,
mv and dot check their stricter ranks first; addmm/baddbmm scale and add around the product;
einsum is parsed here and lowered to diagonals (views), sums and pairwise batched matmuls.  Each
product records whether torch's matmul flag allowed TF32 at the call (ir/precision.py); `call`
of "matmul" is the user's op, so the passes and gradient rules, which build later, call
`matmul_node` with their decision instead.
"""
from __future__ import annotations

import math
import re
from collections import Counter

from . import meta
from . import precision
from . import views as V
from .build import Args, apply_view, builder, call
from .errors import op_error
from .meta import broadcast_shapes
from .node import Node
from .registry import OpDef, get
from .schema import Schema

# op -> (rank of the first operand, rank of the second), for the ops stricter than matmul
RANKS = {"mm": (2, 2), "bmm": (3, 3), "mv": (2, 1), "dot": (1, 1), "addmm": (2, 2), "baddbmm": (3, 3)}


def matmul_node(x: Node, y: Node, tf32: bool = False) -> Node:
    """torch.matmul(x, y) as the matmul primitive over views of x and y, computed in TF32 where
    `tf32` and float32 (ir/precision.py).  The caller decides: the user's product by torch's matmul
    flag at the call (the builders here), a pass or gradient rule by the node it comes from; a
    product the library makes for an op torch computes without a GEMM stays exact (the default)."""
    shape, dtype = meta.run(get("matmul"), {"self": x, "other": y})
    xm = call("unsqueeze", x, 0) if x.ndim == 1 else x
    ym = call("unsqueeze", y, -1) if y.ndim == 1 else y
    full, _ = meta.run(get("matmul"), {"self": xm, "other": ym})
    out = Node("matmul", (xm, ym), precision.attrs(tf32, dtype), full, dtype)
    return out if full == shape else call("reshape", out, shape)


def check_ranks(op: str, x: Node, y: Node, names: tuple[str, str]) -> None:
    want = RANKS.get(op)
    if want is None:
        return
    args = dict(zip(names, (x, y)))
    if (x.ndim, y.ndim) != want:
        raise op_error(RuntimeError, op, f"expects {want[0]}-d and {want[1]}-d operands, but got "
                       f"{x.ndim}-d and {y.ndim}-d", args, "use matmul for other ranks")
    if op in ("bmm", "baddbmm") and x.shape[0] != y.shape[0]:
        raise op_error(RuntimeError, op, f"batch sizes differ: {x.shape[0]} and {y.shape[0]} (shapes "
                       f"{list(x.shape)} and {list(y.shape)})", args, "bmm does not broadcast; use matmul")


@builder("matmul")
def matmul(op: OpDef, schema: Schema, a: Args) -> Node:
    first, second = (p.name for p in schema.params)
    x, y = a[first], a[second]
    check_ranks(op.name, x, y, (first, second))
    try:
        return matmul_node(x, y, precision.allowed("matmul"))
    except RuntimeError as e:                    # name the op the user called, not the primitive
        raise type(e)(str(e).replace("matmul:", f"{op.name}:", 1)) from None


@builder("addmm")
def addmm(op: OpDef, schema: Schema, a: Args) -> Node:
    """beta * self + alpha * (mat1 @ mat2); with beta == 0, self's values are ignored (torch)."""
    names = tuple(p.name for p in schema.params[1:3])
    m1, m2, base = a[names[0]], a[names[1]], a["self"]
    check_ranks(op.name, m1, m2, names)
    product = matmul(get("mm"), get("mm").schemas[0], {"self": m1, "mat2": m2}) if op.name == "addmm" else \
        matmul(get("bmm"), get("bmm").schemas[0], {"self": m1, "mat2": m2})
    args = {"self": base, names[0]: m1, names[1]: m2}
    if base.dtype is not product.dtype:
        raise op_error(RuntimeError, op.name, f"self and the product must have the same dtype, but got "
                       f"{base.dtype.name} and {product.dtype.name}", args)
    if broadcast_shapes(op.name, base.shape, product.shape, args=args) != product.shape:
        raise op_error(RuntimeError, op.name, f"self of shape {list(base.shape)} cannot be broadcast to the "
                       f"product's shape {list(product.shape)}", args)
    alpha, beta = a["alpha"], a["beta"]
    if _value(alpha) != 1:
        product = call("mul", product, alpha)
    if _value(beta) == 0:
        return product
    return call("add", base if _value(beta) == 1 else call("mul", base, beta), product)


def _value(x):
    return x.value if isinstance(x, Node) else x


# ---------------------------------------------------------------- einsum

Label = object                                   # a letter, or ("...", k) for the k-th ellipsis dim


def _parse_term(term: str, equation: str) -> list[str]:
    if not re.fullmatch(r"[A-Za-z]*(\.\.\.)?[A-Za-z]*", term):
        raise op_error(ValueError, "einsum", f"invalid subscripts '{term}' in equation '{equation}'", None,
                       "subscripts are letters a-z, A-Z and at most one '...' per operand")
    return ["..." if t == "." else t for t in term.replace("...", ".")]


def _labels(term: list[str], ndim: int, n_ell: int, equation: str, i: int, x: Node) -> list[Label]:
    """Operand i's subscripts, with '...' spelled out as its ellipsis dims aligned to the right."""
    letters = len([t for t in term if t != "..."])
    if ("..." in term and ndim < letters) or ("..." not in term and ndim != letters):
        raise op_error(RuntimeError, "einsum", f"operand {i} has {ndim} dims but subscripts "
                       f"'{''.join(term)}' in '{equation}' name {letters}", {f"operand{i}": x})
    out = []
    for t in term:
        if t == "...":
            e = ndim - letters
            out.extend(("...", n_ell - e + j) for j in range(e))
        else:
            out.append(t)
    return out


def _diagonal(x: Node, labels: list[Label]) -> tuple[Node, list[Label]]:
    """Repeated labels in one operand read its diagonal: one dim whose stride is the sum."""
    if len(set(labels)) == len(labels):
        return x, labels
    uniq = list(dict.fromkeys(labels))
    for lab in uniq:
        sizes = {x.shape[d] for d, l in enumerate(labels) if l == lab}
        if len(sizes) > 1:
            raise op_error(RuntimeError, "einsum", f"subscript {lab} is repeated for dims of sizes "
                           f"{sorted(sizes)}", {"operand": x}, "a repeated subscript needs equal sizes")

    def diag(spec: V.ViewSpec) -> V.ViewSpec:
        shape = tuple(spec.shape[labels.index(lab)] for lab in uniq)
        strides = tuple(sum(spec.strides[d] for d, l in enumerate(labels) if l == lab) for lab in uniq)
        return V.ViewSpec(shape, strides, spec.offset)

    return apply_view(x, diag), uniq


def _sum_labels(x: Node, labels: list[Label], drop: set, keep_dtype: bool) -> tuple[Node, list[Label]]:
    dims = [d for d, l in enumerate(labels) if l in drop]
    if not dims:
        return x, labels
    x = call("sum", x, dims, False, dtype=x.dtype if keep_dtype else None)
    return x, [l for l in labels if l not in drop]


def _permute(x: Node, labels: list[Label], order: list[Label]) -> Node:
    dims = [labels.index(l) for l in order]
    return x if dims == list(range(len(dims))) else call("permute", x, dims)


def _contract(x: Node, xl: list[Label], y: Node, yl: list[Label], keep: set, sizes: dict) -> tuple[Node, list]:
    """Contract two operands over their shared labels not in `keep` with one batched matmul."""
    batch = [l for l in xl if l in yl and l in keep]
    inner = [l for l in xl if l in yl and l not in keep]
    xfree = [l for l in xl if l not in yl]
    yfree = [l for l in yl if l not in xl]
    size = lambda ls: math.prod(sizes[l] for l in ls)  # noqa: E731
    xm = call("reshape", _permute(x, xl, batch + xfree + inner), (size(batch), size(xfree), size(inner)))
    ym = call("reshape", _permute(y, yl, batch + inner + yfree), (size(batch), size(inner), size(yfree)))
    out = matmul_node(xm, ym, precision.allowed("matmul"))
    labels = batch + xfree + yfree
    return call("reshape", out, tuple(sizes[l] for l in labels)), labels


@builder("einsum")
def einsum(op: OpDef, schema: Schema, a: Args) -> Node:
    equation, operands = a["equation"].replace(" ", ""), list(a["operands"])
    lhs, arrow, rhs = equation.partition("->")
    terms = [_parse_term(t, equation) for t in lhs.split(",")]
    if len(terms) != len(operands):
        raise op_error(ValueError, "einsum", f"equation '{equation}' has {len(terms)} operand subscripts but "
                       f"{len(operands)} operands were given", None)
    if len({x.dtype for x in operands}) > 1:
        raise op_error(RuntimeError, "einsum", "operands must share one dtype, got "
                       + ", ".join(x.dtype.name for x in operands), None, "cast them with .to(dtype)")
    n_ell = max((x.ndim - len([t for t in term if t != "..."]) for x, term in zip(operands, terms)
                 if "..." in term), default=0)
    ell = [("...", k) for k in range(n_ell)]
    labels = [_labels(t, x.ndim, n_ell, equation, i, x) for i, (t, x) in enumerate(zip(terms, operands))]
    pairs = [_diagonal(x, l) for x, l in zip(operands, labels)]
    sizes = _label_sizes(pairs, equation)
    pairs = [(_expand(x, l, sizes), l) for x, l in pairs]
    output = _output_labels(rhs if arrow else None, labels, ell, equation)

    x, xl = pairs[0]
    rest = pairs[1:]
    later = lambda i: set(output).union(*(set(l) for _, l in rest[i:]))  # noqa: E731
    x, xl = _sum_labels(x, xl, set(xl) - later(0), keep_dtype=bool(rest))
    for i, (y, yl) in enumerate(rest):
        keep = later(i + 1)
        y, yl = _sum_labels(y, yl, set(yl) - keep - set(xl), keep_dtype=True)
        x, xl = _sum_labels(x, xl, set(xl) - keep - set(yl), keep_dtype=True)
        x, xl = _contract(x, xl, y, yl, keep, sizes)
    return _permute(x, xl, output)


def _label_sizes(pairs, equation: str) -> dict:
    """Each label's size; size-1 dims broadcast against the others, as in torch."""
    sizes: dict = {}
    for x, labels in pairs:
        for lab, s in zip(labels, x.shape):
            old = sizes.get(lab, 1)
            if s != 1 and old != 1 and s != old:
                name = "..." if isinstance(lab, tuple) else lab
                raise op_error(RuntimeError, "einsum", f"subscript {name} has size {s} in one operand and "
                               f"{old} in another (equation '{equation}')", {"operand": x},
                               "sizes of one subscript must match or be 1")
            sizes[lab] = max(old, s) if old != 1 else s
    return sizes


def _expand(x: Node, labels: list[Label], sizes: dict) -> Node:
    target = tuple(sizes[l] for l in labels)
    return x if target == tuple(x.shape) else call("expand", x, target)


def _output_labels(rhs: str | None, labels: list[list[Label]], ell: list, equation: str) -> list[Label]:
    counts = Counter(l for ls in labels for l in ls)
    if rhs is None:                              # implicit: ellipsis dims, then letters used once, sorted
        return ell + sorted(l for l, c in counts.items() if c == 1 and not isinstance(l, tuple))
    out = []
    for t in _parse_term(rhs, equation):
        out.extend(ell if t == "..." else [t])
    letters = [t for t in out if not isinstance(t, tuple)]
    if len(set(letters)) != len(letters) or any(t not in counts for t in letters):
        raise op_error(ValueError, "einsum", f"output subscripts '{rhs}' in '{equation}' must be unique and "
                       f"appear in the inputs", None)
    return out

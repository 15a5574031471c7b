"""Builders of the linear-algebra helpers (registry/linalg_extra.yaml).

Products (outer, inner, tensordot, kron, addmv, addr, addbmm, vdot, multi_dot, vecdot) are the
matmul primitive and pointwise ops; norms are sums and maxima; the factorizations and solves
(inv, det, slogdet, solve, cholesky, qr, svd, eigh, pinv, lstsq, ...) are `host_call`s of numpy's
LAPACK (runtime/reference_ops/host_lapack.py): reference launches on the host on every backend.
"""
from __future__ import annotations

import math

from . import dtypes as D
from . import meta
from .build import call
from .creation import fill
from .errors import op_error, wrap_dim
from .families import OpFamily
from .host import host_call
from .node import Node

# Errors name the public spelling: linalg_inv is torch.linalg.inv.
FAMILY = OpFamily("linalg_extra", errors_as=lambda name: name.replace("linalg_", "linalg."))
linalg_op = FAMILY.register


def _same_dtype(op: str, *nodes: Node) -> None:
    if len({n.dtype for n in nodes}) > 1:
        raise op_error(RuntimeError, op, "expected all operands to have the same dtype, got "
                       + ", ".join(n.dtype.name for n in nodes), {f"arg{i}": n for i, n in enumerate(nodes)})


def _number(v):
    """A Python-number argument (bound as a scalar leaf when not the default) as its value."""
    return v.value if isinstance(v, Node) and v.op == "scalar" else v


def _scaled_sum(op: str, base: Node, product: Node, beta, alpha) -> Node:
    beta, alpha = _number(beta), _number(alpha)
    if meta.broadcast_shapes(op, base.shape, product.shape, args={"self": base}) != product.shape:
        raise op_error(RuntimeError, op, f"self of shape {list(base.shape)} cannot be broadcast to the product's "
                       f"shape {list(product.shape)}", {"self": base})
    if not (isinstance(alpha, (int, float)) and alpha == 1):
        product = call("mul", product, alpha)
    if isinstance(beta, (int, float)) and beta == 0:
        return call("expand", product, product.shape) if base.dtype is product.dtype else call("to", product, base.dtype)
    scaled = base if isinstance(beta, (int, float)) and beta == 1 else call("mul", base, beta)
    return call("add", scaled, product)


# ---------------------------------------------------------------- products

@linalg_op("outer")
def _outer(op, a):
    x, y = a["self"], a["vec2"]
    if x.ndim != 1 or y.ndim != 1:
        raise op_error(RuntimeError, op, f"expected 1-D vectors, got {x.ndim}-d and {y.ndim}-d", {"self": x, "vec2": y})
    return call("mul", call("unsqueeze", x, 1), call("unsqueeze", y, 0))


@linalg_op("inner")
def _inner(op, a):
    x, y = a["self"], a["other"]
    if x.ndim == 0 or y.ndim == 0:
        return call("mul", x, y)
    if x.shape[-1] != y.shape[-1]:
        raise op_error(RuntimeError, op, f"inner() the last dimension must match on both input tensors but got shapes "
                       f"{list(x.shape)} and {list(y.shape)}", {"self": x, "other": y})
    return call("tensordot", x, y, ([-1], [-1]))


@linalg_op("tensordot")
def _tensordot(op, a):
    x, y, dims = a["self"], a["other"], a["dims"]
    if isinstance(dims, int):
        if dims < 0:
            raise op_error(RuntimeError, op, f"tensordot expects dims >= 0, but got dims={dims}", {"self": x})
        dx, dy = list(range(x.ndim - dims, x.ndim)), list(range(dims))
    elif isinstance(dims, Node):
        raise op_error(TypeError, op, "dims given as a tensor are not supported; pass ints or lists", {"self": x})
    else:
        dx, dy = ([dims[0]] if isinstance(dims[0], int) else list(dims[0])), \
                 ([dims[1]] if isinstance(dims[1], int) else list(dims[1]))
    dx = [wrap_dim(op, d, x.ndim) for d in dx]
    dy = [wrap_dim(op, d, y.ndim) for d in dy]
    if len(dx) != len(dy):
        raise op_error(RuntimeError, op, "both dimension lists should have same length", {"self": x, "other": y})
    for i, j in zip(dx, dy):
        if x.shape[i] != y.shape[j]:
            raise op_error(RuntimeError, op, f"contracted dimensions need to match, but first has size {x.shape[i]} in "
                           f"dim {i} and second has size {y.shape[j]} in dim {j}", {"self": x, "other": y})
    fx = [d for d in range(x.ndim) if d not in dx]
    fy = [d for d in range(y.ndim) if d not in dy]
    k = math.prod(x.shape[d] for d in dx)
    xm = call("reshape", call("permute", x, fx + dx), (math.prod(x.shape[d] for d in fx), k))
    ym = call("reshape", call("permute", y, dy + fy), (k, math.prod(y.shape[d] for d in fy)))
    dtype = meta.promoted([x, y])
    out = call("matmul", call("to", xm, dtype), call("to", ym, dtype))
    return call("reshape", out, tuple(x.shape[d] for d in fx) + tuple(y.shape[d] for d in fy))


@linalg_op("kron")
def _kron(op, a):
    x, y = a["self"], a["other"]
    n = max(x.ndim, y.ndim)
    xs = (1,) * (n - x.ndim) + x.shape
    ys = (1,) * (n - y.ndim) + y.shape
    xr = call("reshape", x, tuple(v for s in xs for v in (s, 1)))
    yr = call("reshape", y, tuple(v for s in ys for v in (1, s)))
    return call("reshape", call("mul", xr, yr), tuple(p * q for p, q in zip(xs, ys)))


@linalg_op("addmv")
def _addmv(op, a):
    x, m, v = a["self"], a["mat"], a["vec"]
    if m.ndim != 2 or v.ndim != 1:
        raise op_error(RuntimeError, op, f"expected a matrix and a vector, got {m.ndim}-d and {v.ndim}-d",
                       {"mat": m, "vec": v})
    _same_dtype(op, x, m, v)
    return _scaled_sum(op, x, call("mv", m, v), a["beta"], a["alpha"])


@linalg_op("addr")
def _addr(op, a):
    x, v1, v2 = a["self"], a["vec1"], a["vec2"]
    if v1.ndim != 1 or v2.ndim != 1:
        raise op_error(RuntimeError, op, f"expected 1-D vectors, got {v1.ndim}-d and {v2.ndim}-d", {"vec1": v1, "vec2": v2})
    prod = call("outer", v1, v2)
    if x.dtype.is_bool and prod.dtype.is_bool:
        beta, alpha = bool(_number(a["beta"])), bool(_number(a["alpha"]))
        p = prod if alpha else fill(prod.shape, False, D.bool_)
        return call("logical_or", call("logical_and", x, beta), p) if beta else call("expand", p, prod.shape)
    return _scaled_sum(op, x, prod, a["beta"], a["alpha"])


@linalg_op("addbmm")
def _addbmm(op, a):
    x, b1, b2 = a["self"], a["batch1"], a["batch2"]
    if b1.ndim != 3 or b2.ndim != 3:
        raise op_error(RuntimeError, op, f"batch1 and batch2 must be 3-D, got {b1.ndim}-d and {b2.ndim}-d",
                       {"batch1": b1, "batch2": b2})
    _same_dtype(op, x, b1, b2)
    return _scaled_sum(op, x, call("sum", call("bmm", b1, b2), 0), a["beta"], a["alpha"])


@linalg_op("vdot")
def _vdot(op, a):
    return call("dot", a["self"], a["other"])


@linalg_op("linalg_vecdot")
def _vecdot(op, a):
    return call("sum", call("mul", a["x"], a["y"]), a["dim"])


@linalg_op("linalg_multi_dot")
def _multi_dot(op, a):
    ts = list(a["tensors"])
    if len(ts) < 2:
        raise op_error(RuntimeError, op, f"expected at least 2 tensors but got {len(ts)}")
    out = ts[0]
    for t in ts[1:]:
        out = call("matmul", out, t)
    return out


@linalg_op("linalg_matrix_power")
def _matrix_power(op, a):
    x, n = a["self"], a["n"]
    if x.ndim < 2 or x.shape[-1] != x.shape[-2]:
        raise op_error(RuntimeError, op, f"expected a batch of square matrices, got shape {list(x.shape)}", {"self": x})
    if n < 0:
        x, n = call("linalg_inv", x), -n
    if n == 0:
        eye = call("eye", x.shape[-1], dtype=x.dtype)
        return call("expand", eye, x.shape)
    result, base = None, x
    while n:
        if n & 1:
            result = base if result is None else call("matmul", result, base)
        n >>= 1
        if n:
            base = call("matmul", base, base)
    return result


@linalg_op("cross", "linalg_cross")
def _cross(op, a):
    x, y = a["self"], a["other"]
    shape = meta.broadcast_shapes(op, x.shape, y.shape, args={"self": x, "other": y})
    dim = a["dim"]
    if dim is None:
        dim = next((i for i, s in enumerate(shape) if s == 3), None)
        if dim is None:
            raise op_error(RuntimeError, op, "no dimension of size 3 in input", {"self": x, "other": y})
    d = wrap_dim(op, dim, len(shape))
    if x.ndim != y.ndim and op == "cross":
        raise op_error(RuntimeError, op, "inputs must have the same number of dimensions", {"self": x, "other": y})
    if shape[d] != 3:
        raise op_error(RuntimeError, op, f"dimension {dim} does not have size 3", {"self": x, "other": y})
    dtype = meta.promoted([x, y])
    xb = call("expand", call("to", x, dtype), shape)
    yb = call("expand", call("to", y, dtype), shape)
    c = lambda t, i: call("narrow", t, d, i, 1)              # noqa: E731
    parts = [call("sub", call("mul", c(xb, i), c(yb, j)), call("mul", c(xb, j), c(yb, i)))
             for i, j in ((1, 2), (2, 0), (0, 1))]
    return call("cat", tuple(parts), d)


# ---------------------------------------------------------------- norms and distances

def vector_norm(op: str, x: Node, ord, dim, keepdim: bool, dtype=None) -> Node:
    if dtype is not None:
        x = call("to", x, dtype)
    if not x.dtype.is_floating_point:
        raise op_error(RuntimeError, op, f"expected a floating point input, got {x.dtype.name}", {"self": x})
    dims = None if dim is None else ([dim] if isinstance(dim, int) else list(dim))
    if dims == []:
        dims = None
    ax = call("abs", x)
    ord = float(ord)
    if x.numel == 0 and ord < 0:
        raise op_error(RuntimeError, op, f"cannot compute the {ord} norm of an empty tensor", {"self": x})
    if x.numel == 0 and ord == math.inf:           # the largest of no values: 0, as torch's norms answer
        return call("sum", ax, dims, keepdim)
    if ord == math.inf:
        return call("amax", ax, dims if dims is not None else [], keepdim)
    if ord == -math.inf:
        return call("amin", ax, dims if dims is not None else [], keepdim)
    if ord == 0:
        return call("sum", call("to", call("ne", x, 0), x.dtype), dims, keepdim)
    if ord == 1:
        return call("sum", ax, dims, keepdim)
    if ord == 2:
        return call("sqrt", call("sum", call("mul", ax, ax), dims, keepdim))
    return call("pow", call("sum", call("pow", ax, ord), dims, keepdim), 1.0 / ord)


@linalg_op("linalg_vector_norm")
def _vector_norm(op, a):
    return vector_norm("linalg.vector_norm", a["self"], a["ord"], a["dim"], a["keepdim"], a["dtype"])


def matrix_norm(op: str, x: Node, ord, dim, keepdim: bool, dtype=None) -> Node:
    if dtype is not None:
        x = call("to", x, dtype)
    if x.ndim < 2:
        raise op_error(RuntimeError, op, f"the input tensor A must have at least 2 dimensions, got {x.ndim}", {"A": x})
    d0, d1 = (wrap_dim(op, d, x.ndim) for d in dim)
    if ord == "fro":
        return vector_norm(op, x, 2, (d0, d1), keepdim)
    if ord in ("nuc", 2, -2):
        m = call("movedim", x, (d0, d1), (-2, -1))
        s = call("linalg_svdvals", m)
        empty = s.shape[-1] == 0                      # no singular values: 0, as torch answers
        r = call("sum", s, -1) if ord == "nuc" or empty else call("amax" if ord == 2 else "amin", s, -1)
        if keepdim:
            r = call("unsqueeze", call("unsqueeze", r, min(d0, d1)), max(d0, d1))
        return r
    if ord in (1, -1, math.inf, -math.inf):
        inner, outer = (d0, d1) if ord in (1, -1) else (d1, d0)
        red = "amax" if ord > 0 else "amin"
        s = call("sum", call("abs", x), inner, True)
        # the max over no columns is 0 in torch's matrix norms
        r = call(red, s, outer, True) if x.shape[outer] else fill(s.shape[:outer] + (1,) + s.shape[outer + 1:], 0, s.dtype)
        return r if keepdim else call("squeeze", r, [d0, d1])
    raise op_error(RuntimeError, op, f"order {ord} not supported", {"A": x}, "valid orders: 'fro', 'nuc', inf, -inf, 1, -1, 2, -2")


@linalg_op("linalg_matrix_norm")
def _matrix_norm(op, a):
    return matrix_norm("linalg.matrix_norm", a["self"], a["ord"], a["dim"], a["keepdim"], a["dtype"])


@linalg_op("linalg_norm")
def _norm(op, a):
    x, ord, dim = a["self"], a["ord"], a["dim"]
    dims = None if dim is None else ([dim] if isinstance(dim, int) else list(dim))
    if isinstance(ord, str) or (dims is not None and len(dims) == 2) or (ord is not None and dims is None and x.ndim == 2):
        return matrix_norm("linalg.norm", x, "fro" if ord is None else ord, dims or (-2, -1), a["keepdim"], a["dtype"])
    if ord is not None and dims is None and x.ndim != 1:
        raise op_error(RuntimeError, "linalg.norm", "input must be 1-D or 2-D when dim is None and ord is not None",
                       {"self": x})
    return vector_norm("linalg.norm", x, 2 if ord is None else ord, dims, a["keepdim"], a["dtype"])


@linalg_op("dist")
def _dist(op, a):
    x, y = a["self"], a["other"]
    dtype = meta.promoted([x, y])
    return vector_norm(op, call("sub", call("to", x, dtype), call("to", y, dtype)), a["p"], None, False)


@linalg_op("cdist")
def _cdist(op, a):
    x1, x2, p = a["x1"], a["x2"], float(a["p"])
    if x1.ndim < 2 or x2.ndim < 2:
        raise op_error(RuntimeError, op, f"cdist only supports at least 2D tensors, X1 got: {x1.ndim}D", {"x1": x1, "x2": x2})
    if x1.shape[-1] != x2.shape[-1]:
        raise op_error(RuntimeError, op, f"X1 and X2 must have the same number of columns. X1: {x1.shape[-1]} X2: "
                       f"{x2.shape[-1]}", {"x1": x1, "x2": x2})
    if p < 0:
        raise op_error(RuntimeError, op, f"cdist only supports non-negative p values, got {p}", {"x1": x1})
    diff = call("sub", call("unsqueeze", x1, -2), call("unsqueeze", x2, -3))
    return vector_norm(op, diff, p, -1, False)


@linalg_op("renorm")
def _renorm(op, a):
    x, p, maxnorm = a["self"], float(a["p"]), float(a["maxnorm"])
    d = wrap_dim(op, a["dim"], x.ndim)
    dims = [i for i in range(x.ndim) if i != d]
    norm = vector_norm(op, x, p, dims, True)
    scale = call("where", call("gt", norm, maxnorm), call("div", maxnorm, call("add", norm, 1e-7)), fill((), 1, x.dtype))
    return call("mul", x, scale)


@linalg_op("trapezoid", "trapz", "cumulative_trapezoid")
def _trapezoid(op, a):
    """The trapezoid rule along dim: the integral (trapezoid) or its running values (cumulative_trapezoid)."""
    total = "cumsum" if op == "cumulative_trapezoid" else "sum"
    y = a["y"]
    d = wrap_dim(op, a["dim"], y.ndim)
    n = y.shape[d]
    if n == 0 and total == "sum":
        return call("sum", y, d)
    m = max(n - 1, 0)                                       # the intervals
    lo, hi = call("narrow", y, d, 0, m), call("narrow", y, d, min(1, n), m)
    avg = call("div", call("add", lo, hi), 2)
    x = a.get("x")
    if x is not None:
        dx = call("diff", x, dim=-1 if x.ndim == 1 else d)
        if x.ndim == 1:
            dx = call("reshape", dx, (m,) + (1,) * (y.ndim - d - 1))
        return call(total, call("mul", avg, dx), d)
    dx = 1 if a.get("dx") is None else a["dx"]
    return call("mul", call(total, avg, d), dx)


@linalg_op("cov")
def _cov(op, a):
    x = a["self"]
    if x.ndim > 2:
        raise op_error(ValueError, op, f"expected input to have two or fewer dimensions but got an input with {x.ndim} "
                       "dimensions", {"self": x})
    x2 = call("reshape", x, (1, -1)) if x.ndim < 2 else x
    xf = x2 if x2.dtype.is_floating_point else call("to", x2, D.default_float)
    n, correction = x2.shape[1], a["correction"]
    fw, aw = a["fweights"], a["aweights"]
    w = fw if aw is None else aw if fw is None else call("mul", fw, aw)
    if w is None:
        avg = call("mean", xf, 1, True)
        norm = fill((), max(n - correction, 0), xf.dtype)
        weighted = lambda c: c                                        # noqa: E731
    else:
        w = call("to", w, xf.dtype)
        w_sum = call("sum", w)
        avg = call("div", call("sum", call("mul", xf, w), 1, True), w_sum)
        if aw is None:
            norm = call("sub", w_sum, correction)
        else:
            norm = call("sub", w_sum, call("div", call("mul", call("sum", call("mul", w, call("to", aw, xf.dtype))),
                                                           correction), w_sum))
        norm = call("clamp_min", norm, 0)
        weighted = lambda c: call("mul", c, w)                        # noqa: E731
    centered = call("sub", xf, avg)
    prod = call("matmul", weighted(centered), call("transpose", centered, 0, 1))
    out = call("div", prod, norm)
    return call("squeeze", out) if 1 in out.shape else out       # torch squeezes a single variable


@linalg_op("corrcoef")
def _corrcoef(op, a):
    c = call("cov", a["self"])
    if c.ndim == 0:
        return call("div", c, c)
    if 1 in c.shape:
        return call("squeeze", call("div", c, c))
    d = call("diagonal", c)
    std = call("sqrt", d)
    out = call("div", call("div", c, call("unsqueeze", std, 1)), call("unsqueeze", std, 0))
    return call("clamp", out, -1.0, 1.0)


# ---------------------------------------------------------------- LAPACK on the host

def _square(op: str, x: Node, name: str = "A") -> None:
    if x.ndim < 2 or x.shape[-1] != x.shape[-2]:
        raise op_error(RuntimeError, op, f"{name} must be batches of square matrices, but they are "
                       f"{' by '.join(map(str, x.shape[-2:]))} matrices", {name: x})
    _floating(op, x, name)


def _floating(op: str, x: Node, name: str = "A") -> None:
    if x.dtype not in (D.float32, D.float64):
        raise op_error(RuntimeError, op, f"Expected a floating point tensor as input. Got {x.dtype.name}", {name: x},
                       "linalg functions take float32 or float64 tensors")


def _matrices(op: str, x: Node) -> None:
    """A floating batch of (not necessarily square) matrices."""
    _floating(op, x)
    if x.ndim < 2:
        raise op_error(RuntimeError, op, f"A must have at least 2 dimensions, got {x.ndim}", {"A": x})


# Ops on a batch of square matrices that are one LAPACK call: op -> (the name errors use, the host
# function, the result's shape from the input's)
SQUARE_CALLS = {
    **dict.fromkeys(("linalg_inv", "inverse"), ("linalg.inv", "inv", lambda shape: shape)),
    **dict.fromkeys(("linalg_det", "det"), ("linalg.det", "det", lambda shape: shape[:-2])),
    "logdet": ("logdet", "logdet", lambda shape: shape[:-2]),
    **dict.fromkeys(("matrix_exp", "linalg_matrix_exp"), ("matrix_exp", "expm", lambda shape: shape)),
}


@linalg_op(*SQUARE_CALLS)
def _square_call(op, a):
    name, fn, result_shape = SQUARE_CALLS[op]
    x = a["self"]
    _square(name, x)
    return host_call(fn, (x,), result_shape(x.shape), x.dtype)


@linalg_op("linalg_inv_ex")
def _inv_ex(op, a):
    x = a["self"]
    _square("linalg.inv_ex", x)
    return host_call("inv", (x,), x.shape, x.dtype, lenient=True), host_call("info", (x,), x.shape[:-2], D.int32)


@linalg_op("linalg_slogdet")
def _slogdet(op, a):
    x = a["self"]
    _square("linalg.slogdet", x)
    return (host_call("slogdet_sign", (x,), x.shape[:-2], x.dtype),
            host_call("slogdet_log", (x,), x.shape[:-2], x.dtype))


def _batch_expanded(op: str, A: Node, B: Node, args: dict | None = None) -> tuple[Node, Node]:
    """A and B (batches of matrices) expanded to their broadcast batch shape."""
    batch = meta.broadcast_shapes(op, A.shape[:-2], B.shape[:-2], args=args)
    return call("expand", A, batch + A.shape[-2:]), call("expand", B, batch + B.shape[-2:])


def _solve_shapes(op: str, A: Node, B: Node):
    _square(op, A)
    if A.dtype is not B.dtype:
        raise op_error(RuntimeError, op, f"Expected A and B to have the same dtype, but found A of type {A.dtype.name} "
                       f"and B of type {B.dtype.name} instead", {"A": A, "B": B})
    vector = B.ndim == 1 or (B.ndim == A.ndim - 1 and B.shape == A.shape[:-1])
    Bm = call("unsqueeze", B, -1) if vector else B
    if Bm.shape[-2] != A.shape[-1]:
        raise op_error(RuntimeError, op, f"Incompatible shapes of A and B for the equation AX = B "
                       f"({list(A.shape[-2:])} and {list(Bm.shape[-2:])})", {"A": A, "B": B})
    return (*_batch_expanded(op, A, Bm, {"A": A, "B": B}), vector)


@linalg_op("linalg_solve")
def _solve(op, a):
    A, B = a["A"], a["B"]
    if not a["left"]:
        return call("transpose", call("linalg_solve", call("transpose", A, -2, -1), call("transpose", B, -2, -1)), -2, -1)
    Ab, Bb, vector = _solve_shapes("linalg.solve", A, B)
    out = host_call("solve", (Ab, Bb), Bb.shape, A.dtype)
    return call("squeeze", out, -1) if vector else out


@linalg_op("linalg_solve_ex")
def _solve_ex(op, a):
    out = call("linalg_solve", a["A"], a["B"], left=a["left"])
    return out, fill(a["A"].shape[:-2], 0, D.int32)


@linalg_op("linalg_cholesky", "cholesky")
def _cholesky(op, a):
    x = a["self"]
    _square("linalg.cholesky", x)
    upper = a.get("upper", False)
    return host_call("cholesky", (x,), x.shape, x.dtype, upper=bool(upper))


@linalg_op("linalg_cholesky_ex")
def _cholesky_ex(op, a):
    x = a["self"]
    _square("linalg.cholesky_ex", x)
    return (host_call("cholesky", (x,), x.shape, x.dtype, upper=bool(a["upper"]), lenient=True),
            host_call("cholesky_info", (x,), x.shape[:-2], D.int32))


@linalg_op("linalg_qr")
def _qr(op, a):
    x, mode = a["self"], a["mode"]
    _matrices("linalg.qr", x)
    m, n = x.shape[-2:]
    k = min(m, n)
    if mode not in ("reduced", "complete", "r"):
        raise op_error(RuntimeError, "linalg.qr", f"qr received unrecognized mode '{mode}'", {"A": x},
                       "expected one of 'reduced', 'complete', 'r'")
    qcols = m if mode == "complete" else k
    rrows = m if mode == "complete" else k
    r = host_call("qr_r", (x,), x.shape[:-2] + (rrows, n), x.dtype, mode=mode)
    q = fill((0,), 0, x.dtype) if mode == "r" else \
        host_call("qr_q", (x,), x.shape[:-2] + (m, qcols), x.dtype, mode=mode)
    return q, r


@linalg_op("qr")
def _qr_old(op, a):
    return call("linalg_qr", a["self"], "reduced" if a["some"] else "complete")


@linalg_op("linalg_svd")
def _svd(op, a):
    x = a["self"]
    _matrices("linalg.svd", x)
    m, n = x.shape[-2:]
    k = min(m, n)
    full = a["full_matrices"]
    b = x.shape[:-2]
    return (host_call("svd_u", (x,), b + (m, m if full else k), x.dtype, full=bool(full)),
            host_call("svdvals", (x,), b + (k,), x.dtype),
            host_call("svd_vh", (x,), b + (n if full else k, n), x.dtype, full=bool(full)))


@linalg_op("svd")
def _svd_old(op, a):
    u, s, vh = call("linalg_svd", a["self"], not a["some"])
    return u, s, call("transpose", vh, -2, -1)


@linalg_op("linalg_svdvals")
def _svdvals(op, a):
    x = a["self"]
    _matrices("linalg.svdvals", x)
    return host_call("svdvals", (x,), x.shape[:-2] + (min(x.shape[-2:]),), x.dtype)


@linalg_op("linalg_eigh")
def _eigh(op, a):
    x = a["self"]
    _square("linalg.eigh", x)
    uplo = a["UPLO"]
    return (host_call("eigvalsh", (x,), x.shape[:-1], x.dtype, uplo=uplo),
            host_call("eigh_vectors", (x,), x.shape, x.dtype, uplo=uplo))


@linalg_op("linalg_eigvalsh")
def _eigvalsh(op, a):
    x = a["self"]
    _square("linalg.eigvalsh", x)
    return host_call("eigvalsh", (x,), x.shape[:-1], x.dtype, uplo=a["UPLO"])


@linalg_op("linalg_pinv", "pinverse")
def _pinv(op, a):
    x = a["self"]
    _matrices("linalg.pinv", x)
    rtol = a["rcond"] if "rcond" in a else a.get("rtol")
    atol = a.get("atol")
    return host_call("pinv", (x, _tol(atol, x), _tol(rtol, x)), x.shape[:-2] + (x.shape[-1], x.shape[-2]), x.dtype,
                   has_atol=atol is not None, has_rtol=rtol is not None, hermitian=bool(a.get("hermitian", False)))


def _tol(v, x: Node) -> Node:
    """A tolerance given as None, a number or a tensor, as a tensor (batched tolerances broadcast)."""
    if v is None:
        return fill((), 0.0, x.dtype)
    node = getattr(v, "node", v)
    if isinstance(node, Node):
        return call("to", node, x.dtype)
    return fill((), float(v), x.dtype)


@linalg_op("linalg_matrix_rank")
def _matrix_rank(op, a):
    x = a["self"]
    _floating("linalg.matrix_rank", x)
    s = call("linalg_svdvals", x)
    atol, rtol = a["atol"], a["rtol"]
    smax = call("amax", s, -1, True) if s.shape[-1] else fill(s.shape[:-1] + (1,), 0, s.dtype)
    if rtol is None and (atol is None or (isinstance(atol, (int, float)) and atol <= 0)):
        rtol = max(x.shape[-2:]) * {D.float32: 1.1920928955078125e-07, D.float64: 2.220446049250313e-16}[x.dtype]
    r = _tol(0.0 if rtol is None else rtol, x)
    tol = call("mul", smax, call("unsqueeze", r, -1) if r.ndim else r)
    if atol is not None:
        t = _tol(atol, x)
        tol = call("maximum", tol, call("unsqueeze", t, -1) if t.ndim else t)
    return call("sum", call("gt", s, tol), -1)


@linalg_op("linalg_lstsq")
def _lstsq(op, a):
    A, B = a["self"], a["b"]
    _floating("linalg.lstsq", A)
    m, n = A.shape[-2:]
    vector = B.ndim == A.ndim - 1
    Bm = call("unsqueeze", B, -1) if vector else B
    Ab, Bb = _batch_expanded("linalg.lstsq", A, Bm)
    sol = host_call("lstsq", (Ab, Bb), Ab.shape[:-2] + (n, Bm.shape[-1]), A.dtype)
    driver = a["driver"] or "gelsy"
    empty = fill((0,), 0, A.dtype)
    residuals = empty
    if m > n and driver != "gelsy":
        err = call("sub", call("matmul", Ab, sol), Bb)
        residuals = call("sum", call("mul", err, err), -2)
        residuals = call("squeeze", residuals, -1) if vector else residuals
    rank = call("linalg_matrix_rank", A) if driver != "gels" else fill((0,), 0, D.int64)
    sv = call("linalg_svdvals", A) if driver in ("gelsd", "gelss") else empty
    return (call("squeeze", sol, -1) if vector else sol), residuals, rank, sv


@linalg_op("linalg_cond")
def _cond(op, a):
    x, p = a["self"], a["p"]
    if p is None or p in (2, -2):
        s = call("linalg_svdvals", x)
        hi, lo = call("amax", s, -1), call("amin", s, -1)
        return call("div", hi, lo) if p in (None, 2) else call("div", lo, hi)
    return call("mul", call("linalg_matrix_norm", x, p), call("linalg_matrix_norm", call("linalg_inv", x), p))


@linalg_op("linalg_solve_triangular")
def _solve_triangular(op, a):
    A, B = a["self"], a["B"]
    _square("linalg.solve_triangular", A)
    left = a["left"]
    if not left:
        out = call("linalg_solve_triangular", call("transpose", A, -2, -1), call("transpose", B, -2, -1),
                   upper=not a["upper"], left=True, unitriangular=a["unitriangular"])
        return call("transpose", out, -2, -1)
    Ab, Bb = _batch_expanded("linalg.solve_triangular", A, B)
    return host_call("solve_triangular", (Ab, Bb), Bb.shape, A.dtype, upper=bool(a["upper"]),
                   unit=bool(a["unitriangular"]))


@linalg_op("triangular_solve")
def _triangular_solve(op, a):
    b, A = a["self"], a["A"]
    At = call("transpose", A, -2, -1) if a["transpose"] else A
    upper = a["upper"] != a["transpose"]
    sol = call("linalg_solve_triangular", At, b, upper=upper, unitriangular=a["unitriangular"])
    return sol, call("clone", A)


@linalg_op("cholesky_solve")
def _cholesky_solve(op, a):
    b, L = a["self"], a["input2"]
    Lt = call("transpose", L, -2, -1)
    if a["upper"]:
        y = call("linalg_solve_triangular", Lt, b, upper=False)
        return call("linalg_solve_triangular", L, y, upper=True)
    y = call("linalg_solve_triangular", L, b, upper=False)
    return call("linalg_solve_triangular", Lt, y, upper=True)


@linalg_op("cholesky_inverse")
def _cholesky_inverse(op, a):
    L = a["self"]
    Lt = call("transpose", L, -2, -1)
    A = call("matmul", Lt, L) if a["upper"] else call("matmul", L, Lt)
    return call("linalg_inv", A)


@linalg_op("linalg_tensorinv")
def _tensorinv(op, a):
    x, ind = a["self"], a["ind"]
    if ind <= 0:
        raise op_error(RuntimeError, "linalg.tensorinv", f"Expected a strictly positive integer for 'ind', but got {ind}",
                       {"A": x})
    rows, cols = math.prod(x.shape[:ind]), math.prod(x.shape[ind:])
    if rows != cols:
        raise op_error(RuntimeError, "linalg.tensorinv", f"Expected self to satisfy the requirement "
                       f"prod(self.shape[ind:]) == prod(self.shape[:ind]), but got {cols} != {rows}", {"A": x})
    inv = call("linalg_inv", call("reshape", x, (rows, cols)))
    return call("reshape", inv, x.shape[ind:] + x.shape[:ind])


@linalg_op("linalg_tensorsolve")
def _tensorsolve(op, a):
    x, b = a["self"], a["B"]
    if a["dims"]:
        dims = [wrap_dim(op, d, x.ndim) for d in a["dims"]]
        x = call("movedim", x, dims, list(range(x.ndim - len(dims), x.ndim)))
    rest = x.shape[b.ndim:]
    n = math.prod(rest)
    if b.numel != n:
        raise op_error(RuntimeError, "linalg.tensorsolve", f"Expected self to satisfy the requirement "
                       f"prod(self.shape[other.ndim:]) == prod(self.shape[:other.ndim]), but got {n} != {b.numel}",
                       {"A": x, "B": b})
    sol = call("linalg_solve", call("reshape", x, (b.numel, n)), call("reshape", b, (b.numel,)))
    return call("reshape", sol, rest)


@linalg_op("linalg_vander")
def _vander(op, a):
    x = a["x"]
    if x.ndim == 0:
        raise op_error(RuntimeError, "linalg.vander", "x must have at least one dimension", {"x": x})
    n = x.shape[-1] if a["N"] is None else a["N"]
    if n < 1:
        raise op_error(RuntimeError, "linalg.vander", f"N must be greater than 1, got {n}", {"x": x})
    dtype = x.dtype if not x.dtype.is_bool else D.int64
    powers = call("arange", n)
    base = call("unsqueeze", call("to", x, dtype), -1)
    if dtype.is_floating_point:
        return call("pow", base, call("to", powers, dtype))
    return call("cumprod", call("cat", (call("ones_like", base), call("expand", base, x.shape + (n - 1,))), -1), -1) \
        if n > 1 else call("ones_like", base)

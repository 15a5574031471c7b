"""A seeded generator of random lazy programs over the registry's ops.

Each step is built by a family function (pointwise, reduction, view, cast, composite, in-place)
from the values made so far, then run eagerly in torch to learn its shape and dtype.  A step torch
rejects is retried, except in a "wild" program, where operands and dims are drawn without regard
to validity and the first rejected step ends the program (the error both libraries must raise).

Values carry an `exact` flag: True while every implementation must produce bit-identical values
(inputs, views, integer math, min/max, casts of exact values).  Discontinuous ops (floor, sign,
comparisons, float->int casts, argmax, any/all) only take exact operands, because a one-ulp
difference in a fused float chain (FMA contraction, f32 registers for half types) would flip them
and report a difference that is not a bug.
"""
from __future__ import annotations

import random
from dataclasses import dataclass

import torch

from .program import DTYPES, FLOATS, INTS, Input, Program, Step

UNARY_FLOAT = ["exp", "log", "sqrt", "sin", "cos", "tanh", "sigmoid", "erf", "expm1", "log1p", "rsqrt",
               "reciprocal", "atan", "exp2", "log2", "sinh", "asin"]
UNARY_EXACT = ["neg", "abs", "relu"]                     # value-preserving up to sign
UNARY_STEP = ["floor", "ceil", "round", "trunc", "sign", "logical_not", "bitwise_not", "isnan",
              "isinf", "isfinite"]                       # discontinuous: exact operands only
BINARY = {"add": "+", "sub": "-", "mul": "*", "div": "/", "pow": "**", "maximum": None, "minimum": None,
          "atan2": None, "remainder": "%", "floor_divide": "//", "fmod": None}
COMPARE = {"eq": "==", "ne": "!=", "lt": "<", "le": "<=", "gt": ">", "ge": ">="}
LOGICAL = {"logical_and": None, "logical_or": None, "logical_xor": None, "bitwise_and": "&",
           "bitwise_or": "|", "bitwise_xor": "^"}
DIVIDING = {"remainder", "floor_divide", "fmod"}          # integer zero divisors raise in torch
REDUCTIONS = ["sum", "prod", "mean", "amax", "amin", "argmax", "argmin", "any", "all", "max", "min",
              "var", "std", "logsumexp"]
EXACT_REDUCTIONS = {"amax", "amin", "max", "min"}
STEP_REDUCTIONS = {"argmax", "argmin", "any", "all"}
INPLACE = ["add_", "mul_", "sub_", "clamp_", "neg_", "abs_"]


@dataclass
class Value:
    tensor: torch.Tensor
    exact: bool
    root: int                  # the value whose storage this one aliases (in-place writes reach it)


class Builder:
    """The program under construction and the torch values of its steps."""

    def __init__(self, rng: random.Random, wild: bool, dtypes: tuple[str, ...]):
        self.rng, self.wild, self.dtypes = rng, wild, dtypes
        self.inputs: list[Input] = []
        self.steps: list[Step] = []
        self.values: list[Value] = []

    # ---- values ----
    def add_input(self, shape, dtype: str) -> int:
        inp = Input(tuple(shape), dtype, self.rng.randrange(1 << 30),
                    specials=dtype in FLOATS and self.rng.random() < 0.15)
        # inputs come before steps in the value numbering: renumber the steps' references
        k = len(self.inputs)
        self.inputs.append(inp)
        self.steps = [Step(_shift(s.expr, k), tuple(r + (r >= k) for r in s.refs)) for s in self.steps]
        for v in self.values:
            v.root += v.root >= k
        t = torch.tensor(inp.data(), dtype=getattr(torch, dtype))
        self.values.insert(k, Value(t, True, k))
        return k

    def pick(self, pred=lambda v: True) -> int | None:
        """A value satisfying pred, biased towards recent ones."""
        ok = [i for i, v in enumerate(self.values) if pred(v)]
        if not ok:
            return None
        return ok[-1] if self.rng.random() < 0.5 else self.rng.choice(ok)

    def shape(self) -> tuple[int, ...]:
        rank = self.rng.choice([0, 1, 1, 2, 2, 2, 3, 3, 4])
        return tuple(self.rng.choice([1, 1, 2, 3, 4, 5, 7, 0 if self.rng.random() < 0.1 else 3])
                     for _ in range(rank))

    def dtype(self, like: str | None = None) -> str:
        if like is not None and self.rng.random() < 0.6:
            return like
        return self.rng.choice(self.dtypes)

    def dim(self, ndim: int) -> int:
        if self.wild and self.rng.random() < 0.3:
            return self.rng.choice([ndim, -ndim - 1, ndim + 2])
        bound = max(ndim, 1)
        return self.rng.randrange(-bound, bound)

    def broadcast_shape(self, shape: tuple[int, ...]) -> tuple[int, ...]:
        """A shape that broadcasts with `shape` (a random one in wild programs)."""
        if self.wild and self.rng.random() < 0.5:
            return self.shape()
        drop = self.rng.randrange(len(shape) + 1)
        out = [1 if self.rng.random() < 0.3 else s for s in shape[drop:]]
        if self.rng.random() < 0.15 and len(out) < 4:
            out.insert(0, self.rng.choice([1, 2]))
        return tuple(out)

    def operand(self, like: int) -> tuple[str, tuple[int, ...]]:
        """A second operand for value `like`: a Python scalar, an existing value or a new input."""
        r = self.rng.random()
        if r < 0.35:
            return self.scalar(), ()
        a = self.values[like].tensor
        if r < 0.6:
            shape = tuple(a.shape)
            j = self.pick(lambda v: _broadcasts(tuple(v.tensor.shape), shape))
            if j is not None:
                return f"v{j}", (j,)
        dtype = self.dtype(str(a.dtype).removeprefix("torch."))
        j = self.add_input(self.broadcast_shape(tuple(a.shape)), dtype)
        return f"v{j}", (j,)

    def scalar(self, nonzero: bool = False) -> str:
        kind = self.rng.choice(["int", "int", "float", "float", "bool"])
        if kind == "bool":
            return self.rng.choice(["True", "False"]) if not nonzero else "True"
        if kind == "int":
            choices = [-3, -2, -1, 1, 2, 3] + ([] if nonzero else [0])
            return str(self.rng.choice(choices))
        choices = [-2.5, -1.5, -0.5, 0.5, 1.5, 2.0, 3.25] + ([] if nonzero else [0.0])
        return str(self.rng.choice(choices))

    def is_exact(self, i: int) -> bool:
        return self.values[i].exact

    def dtype_of(self, i: int) -> str:
        return str(self.values[i].tensor.dtype).removeprefix("torch.")


def _shift(expr: str, k: int) -> str:
    """Renumber value names v<i> (i >= k) to v<i+1> after an input is inserted at k."""
    import re
    return re.sub(r"\bv(\d+)\b", lambda m: f"v{int(m.group(1)) + (int(m.group(1)) >= k)}", expr)


def _broadcasts(a: tuple[int, ...], b: tuple[int, ...]) -> bool:
    return all(x == y or x == 1 or y == 1 for x, y in zip(reversed(a), reversed(b)))


def _is_float(b: Builder, i: int) -> bool:
    return b.dtype_of(i) in FLOATS


# ---- step families: each returns (expr, refs, exact) or None when it does not apply ----

def unary(b: Builder):
    r = b.rng.random()
    if r < 0.45:
        i = b.pick()
        op = b.rng.choice(UNARY_FLOAT)
        return (f"m.{op}(v{i})" if b.rng.random() < 0.5 else f"v{i}.{op}()"), (i,), False
    if r < 0.75:
        i = b.pick()
        op = b.rng.choice(UNARY_EXACT)
        expr = f"-v{i}" if op == "neg" and b.rng.random() < 0.5 else f"m.{op}(v{i})"
        return expr, (i,), b.is_exact(i)
    i = b.pick(lambda v: v.exact) if not b.wild else b.pick()
    if i is None:
        return None
    op = b.rng.choice(UNARY_STEP)
    expr = f"~v{i}" if op == "bitwise_not" and b.rng.random() < 0.5 else f"m.{op}(v{i})"
    return expr, (i,), True


def binary(b: Builder):
    r = b.rng.random()
    i = b.pick()
    if r < 0.6:
        op = b.rng.choice(list(BINARY))
        return _binary(b, i, op, BINARY[op], exact_ops=("maximum", "minimum"))
    exact_only = b.pick(lambda v: v.exact)
    if exact_only is None:
        return None
    table = COMPARE if r < 0.85 else LOGICAL
    op = b.rng.choice(list(table))
    return _binary(b, exact_only, op, table[op], exact_ops=tuple(table), need_exact=True)


def _binary(b: Builder, i: int, op: str, symbol: str | None, exact_ops, need_exact: bool = False):
    int_like = not _is_float(b, i)
    if op in DIVIDING and not b.wild and not b.is_exact(i):
        return None                # remainder amplifies a one-ulp difference into a whole unit
    if op in DIVIDING and not b.wild:
        other, refs = b.scalar(nonzero=True), ()       # a tensor divisor could hold an integer 0
        if int_like and "." in other:
            other = str(int(float(other)) or 2)
    elif op == "pow" and not b.wild:
        other, refs = b.rng.choice(["0", "1", "2", "3", "0.5", "2.0"]), ()
    else:
        other, refs = b.operand(i)
        if need_exact and refs and not b.is_exact(refs[0]):
            return None
        if op in ("remainder", "floor_divide", "fmod") and refs and not _is_float(b, refs[0]):
            return None
    exact = all(b.is_exact(j) for j in (i, *refs)) and (op in exact_ops or need_exact)
    a = f"v{i}"
    form = b.rng.random()
    if symbol and form < 0.4:
        if not refs and form < 0.15 and op not in ("pow",):
            return f"{other} {symbol} {a}", (i,), exact        # reflected: scalar op tensor
        return f"{a} {symbol} {other}", (i, *refs), exact
    if op in ("add", "sub") and form > 0.85:
        alpha = b.rng.choice(["2", "-1", "0.5"])
        return f"m.{op}({a}, {other}, alpha={alpha})", (i, *refs), False
    if form > 0.7 and refs:
        return f"{a}.{op}({other})", (i, *refs), exact
    return f"m.{op}({a}, {other})", (i, *refs), exact


def reduction(b: Builder):
    op = b.rng.choice(REDUCTIONS)
    need_exact = op in STEP_REDUCTIONS and not b.wild
    i = b.pick(lambda v: v.exact) if need_exact else b.pick()
    if i is None:
        return None
    nd = b.values[i].tensor.ndim
    keep = b.rng.random() < 0.4
    kw = ", keepdim=True" if keep else ""
    exact = b.is_exact(i) and (op in EXACT_REDUCTIONS | STEP_REDUCTIONS or not _is_float(b, i)) \
        and op not in ("mean", "var", "std", "logsumexp")
    if op in ("max", "min"):
        if b.rng.random() < 0.3:
            return f"v{i}.{op}()", (i,), exact
        return f"v{i}.{op}({b.dim(nd)}{kw}).values", (i,), exact
    if op in ("argmax", "argmin"):
        dim = "" if b.rng.random() < 0.3 else f"dim={b.dim(nd)}{kw}"
        return f"m.{op}(v{i}{', ' if dim else ''}{dim})", (i,), exact
    if op == "logsumexp":
        return f"m.logsumexp(v{i}, {b.dim(nd)}{kw})", (i,), False
    if b.rng.random() < 0.25 and not keep:
        return f"v{i}.{op}()", (i,), exact
    dims = _dims(b, nd)
    if op in ("any", "all", "argmax", "prod") and not b.wild:     # torch takes one int dim there
        dims = str(b.dim(nd))
    return f"m.{op}(v{i}, {dims}{kw})", (i,), exact


def _dims(b: Builder, nd: int) -> str:
    if b.rng.random() < 0.5 or nd == 0:
        return str(b.dim(nd))
    k = b.rng.randint(1, nd)
    dims = b.rng.sample(range(nd), k)
    dims = [d - nd if b.rng.random() < 0.3 else d for d in dims]
    return "(" + "".join(f"{d}, " for d in dims) + ")"


def view(b: Builder):
    i = b.pick()
    shape = tuple(b.values[i].tensor.shape)
    nd = len(shape)
    kind = b.rng.choice(["permute", "transpose", "slice", "expand", "reshape", "unsqueeze", "squeeze",
                         "flip", "narrow", "select", "t", "mT"])
    exact = b.is_exact(i)
    v = f"v{i}"
    if kind == "permute":
        perm = list(range(nd))
        b.rng.shuffle(perm)
        return f"{v}.permute({', '.join(map(str, perm))})" if nd else f"{v}.permute(())", (i,), exact
    if kind == "transpose":
        return f"{v}.transpose({b.dim(nd)}, {b.dim(nd)})", (i,), exact
    if kind == "slice":
        if nd == 0:
            return None
        parts = [_slice(b, s) for s in shape[:b.rng.randint(1, nd)]]
        return f"{v}[{', '.join(parts)}]", (i,), exact
    if kind == "expand":
        new = [b.rng.choice([2, 3]) if s == 1 and b.rng.random() < 0.7 else (-1 if b.rng.random() < 0.3 else s)
               for s in shape]
        if b.rng.random() < 0.3:
            new.insert(0, b.rng.choice([1, 2, 3]))
        return f"{v}.expand({', '.join(map(str, new))})" if new else f"{v}.expand(())", (i,), exact
    if kind == "reshape":
        return f"{v}.reshape({_factor(b, shape)})", (i,), exact
    if kind == "unsqueeze":
        return f"{v}.unsqueeze({b.rng.randrange(-nd - 1, nd + 1)})", (i,), exact
    if kind == "squeeze":
        return (f"{v}.squeeze({b.dim(nd)})" if b.rng.random() < 0.5 else f"{v}.squeeze()"), (i,), exact
    if kind == "flip":
        return f"{v}.flip({b.dim(nd)})", (i,), exact
    if kind in ("narrow", "select"):
        if nd == 0:
            return None
        d = b.dim(nd)
        size = shape[d % nd] if -nd <= d < nd else 1
        start = b.rng.randrange(size) if size else 0
        if kind == "select":
            return f"{v}.select({d}, {start - size if b.rng.random() < 0.3 else start})", (i,), exact
        return f"{v}.narrow({d}, {start}, {b.rng.randint(0, size - start)})", (i,), exact
    if kind == "mT" and nd < 2:           # torch deprecates mT below 2-d; lazytorch rejects it
        return None
    return (f"{v}.mT" if kind == "mT" else f"{v}.t()"), (i,), exact


def _slice(b: Builder, size: int) -> str:
    start = b.rng.choice(["", "1", "-2", "0"])
    stop = b.rng.choice(["", "", str(max(size - 1, 0)), "-1"])
    step = b.rng.choice(["", "", "2", "3"])
    if b.rng.random() < 0.15:
        return str(b.rng.randrange(-size, size)) if size else ":"
    return f"{start}:{stop}" + (f":{step}" if step else "")


def _factor(b: Builder, shape: tuple[int, ...]) -> str:
    n = 1
    for s in shape:
        n *= s
    dims = []
    rest = n
    while rest > 1 and len(dims) < 3:
        f = b.rng.choice([d for d in range(1, rest + 1) if rest % d == 0])
        dims.append(f)
        rest //= f
    dims.append(rest)
    if n and b.rng.random() < 0.3:
        dims[b.rng.randrange(len(dims))] = -1
    return ", ".join(map(str, dims)) if len(dims) > 1 else f"({dims[0]},)"


def cast(b: Builder):
    i = b.pick()
    target = b.rng.choice(b.dtypes)
    to_int = target not in FLOATS
    if to_int and _is_float(b, i) and not b.is_exact(i):
        return None
    if to_int and _is_float(b, i):
        # float -> int of values outside the target range is undefined behaviour in C and in torch
        j = b.pick(lambda v: v.exact and str(v.tensor.dtype).removeprefix("torch.") in FLOATS
                   and bool(torch.isfinite(v.tensor).all()) and bool((v.tensor.abs() < 100).all()))
        if j is None or target == "uint8":
            return None
        i = j
    expr = f"v{i}.to(m.{target})"
    if b.rng.random() < 0.3:
        short = {"float32": "float", "float64": "double", "float16": "half", "int64": "long",
                 "int32": "int", "bool": "bool", "bfloat16": "bfloat16"}.get(target)
        if short:
            expr = f"v{i}.{short}()"
    return expr, (i,), b.is_exact(i) or target in FLOATS and not _is_float(b, i)


def composite(b: Builder):
    kind = b.rng.choice(["softmax", "log_softmax", "layer_norm", "rms_norm", "gelu", "silu", "where",
                         "clamp", "matmul", "matmul"])
    # torch skips its dtype check on empty tensors, so only float operands (outside wild programs)
    i = b.pick() if b.wild or kind in ("where", "clamp", "matmul") else b.pick(lambda v: v.tensor.is_floating_point())
    if i is None:
        return None
    t = b.values[i].tensor
    nd = t.ndim
    if kind in ("softmax", "log_softmax"):
        return f"m.{kind}(v{i}, {b.dim(nd)})", (i,), False
    if kind in ("layer_norm", "rms_norm"):
        k = b.rng.randint(1, nd) if nd else 0
        norm = tuple(t.shape[nd - k:])
        fn = "m.nn.functional." + kind
        if b.rng.random() < 0.4 and nd:
            w = b.add_input(norm, b.dtype_of(i))
            return f"{fn}(v{i}, {norm}, weight=v{w})", (i, w), False
        return f"{fn}(v{i}, {norm})", (i,), False
    if kind in ("gelu", "silu"):
        return f"m.nn.functional.{kind}(v{i})", (i,), False
    if kind == "clamp":
        lo, hi = sorted([b.rng.choice([-2, -1, 0, 1, 2.5]), b.rng.choice([-1, 0, 1.5, 3])])
        return f"v{i}.clamp({lo}, {hi})", (i,), b.is_exact(i)
    if kind == "where":
        c = b.pick(lambda v: v.exact and v.tensor.dtype == torch.bool)
        if c is None:
            return None
        other, refs = b.operand(i)
        return f"m.where(v{c}, v{i}, {other})", (c, i, *refs), all(b.is_exact(j) for j in (i, *refs))
    # matmul with a new right operand of a matching shape
    if nd == 0 and not b.wild:
        return None
    k = t.shape[-1] if nd else 1
    p = b.rng.choice([1, 2, 3, 5])
    rshape = (k,) if b.rng.random() < 0.2 else ((k, p) if b.rng.random() < 0.7 or nd < 3 else
                                                 tuple(t.shape[:-2]) + (k, p))
    if b.wild and b.rng.random() < 0.5:
        rshape = b.shape()
    j = b.add_input(rshape, b.dtype_of(i))
    expr = f"v{i} @ v{j}" if b.rng.random() < 0.5 else f"m.matmul(v{i}, v{j})"
    return expr, (i, j), not _is_float(b, i) and b.is_exact(i) and b.is_exact(j)


def inplace(b: Builder):
    i = b.pick()
    op = b.rng.choice(INPLACE)
    if op in ("neg_", "abs_"):
        return f"v{i}.{op}()", (i,), b.is_exact(i), i
    if op == "clamp_":
        return f"v{i}.clamp_({b.rng.choice([-1, 0])}, {b.rng.choice([1, 2])})", (i,), b.is_exact(i), i
    other, refs = b.operand(i)
    return f"v{i}.{op}({other})", (i, *refs), False, i


FAMILIES = [(unary, 3), (binary, 4), (reduction, 2), (view, 3), (cast, 1), (composite, 2), (inplace, 1)]


def generate(seed: int, dtypes: tuple[str, ...] = DTYPES, max_steps: int = 8) -> Program:
    """The program for `seed` (the same seed always gives the same program)."""
    rng = random.Random(seed)
    b = Builder(rng, wild=rng.random() < 0.1, dtypes=dtypes)
    b.add_input(b.shape(), rng.choice(dtypes))
    funcs, weights = zip(*FAMILIES)
    target = rng.randint(1, max_steps)
    expect_error = False
    attempts = 0
    while len(b.steps) < target and attempts < 60 and not expect_error:
        attempts += 1
        snapshot = (list(b.inputs), list(b.steps), [Value(v.tensor, v.exact, v.root) for v in b.values])
        built = rng.choices(funcs, weights)[0](b)
        if built is None:
            continue
        expr, refs, exact, *mutated = built
        try:
            t = _run_step(b, expr)
        except Exception:
            if not b.wild:
                b.inputs, b.steps, b.values = snapshot
                continue
            t, expect_error = None, True
        b.steps.append(Step(expr, tuple(refs)))
        if t is None:
            break
        if not isinstance(t, torch.Tensor) or t.dtype not in _TORCH_DTYPES:
            b.inputs, b.steps, b.values = snapshot
            continue
        view_of = refs[0] if _is_view(expr) else None
        root = b.values[view_of].root if view_of is not None else len(b.values)
        if mutated:
            root = b.values[mutated[0]].root
            for v in b.values:
                if v.root == root and v.tensor.dtype.is_floating_point:
                    v.exact = False
        b.values.append(Value(t, exact, root))
    n = len(b.values)
    outputs = (n - 1,)
    step_values = range(len(b.inputs), n - 1)
    if step_values and rng.random() < 0.3 and not expect_error:
        outputs += (rng.choice(list(step_values)),)
    return Program(tuple(b.inputs), tuple(b.steps), outputs if b.steps else (0,))


_TORCH_DTYPES = {getattr(torch, d) for d in DTYPES}


def _is_view(expr: str) -> bool:
    return any(k in expr for k in ("[", ".permute(", ".transpose(", ".expand(", ".reshape(", ".unsqueeze(",
                                   ".squeeze", ".narrow(", ".select(", ".t()", ".mT", "_("))


def _run_step(b: Builder, expr: str) -> torch.Tensor:
    env = {"m": torch, **{f"v{k}": v.tensor for k, v in enumerate(b.values)}}
    return eval(expr, env)  # noqa: S307  (our own generated expression)

"""PyTorch's OpInfo database (op_db) run against lazytorch: which op names resolve, and whether their
float32 sample inputs give torch's values.

    python -m tests.opinfo --report            # resolved names, matched / errored / wrong samples
    python -m tests.opinfo --report --verbose  # plus one line per failing sample
    python -m tests.opinfo --op sort           # every sample of the named ops, with the failures

A name resolves when lazytorch has the callable the OpInfo describes: `lt.<name>` (or
`lt.nn.functional.*`, `lt.linalg.*`, `lt.special.*`) for a torch function, the Tensor method for
a method-only op or a Python operator (`__radd__`).  Each sample's torch tensors are copied into
lazytorch tensors (through numpy), the op runs in both libraries and the results are compared:
shape, dtype and values (float32 within FLOAT32_TOL, per-op TOLERANCE where the op is ill-conditioned).
A sample torch itself rejects is not counted.  SKIPS lists the ops whose samples are not compared
by value, each with the reason.
"""
from __future__ import annotations

import argparse
import sys
import types
import unittest
from dataclasses import dataclass
from functools import cache
from typing import Any, Callable

import numpy as np
import torch

import lazytorch as lt

FLOAT32_TOL = (1e-4, 1e-4)            # (atol, rtol) for float32 results
# ops whose float32 results differ from torch's by more than rounding (ill-conditioned problems,
# different but equally valid algorithms): their tolerance
TOLERANCE: dict[str, tuple[float, float]] = {
    "linalg.det": (1e-3, 1e-3), "linalg.slogdet": (1e-3, 1e-3), "det": (1e-3, 1e-3),
    "linalg.inv": (1e-3, 1e-3), "inverse": (1e-3, 1e-3), "linalg.solve": (1e-3, 1e-3),
    "linalg.pinv": (1e-3, 1e-3), "pinverse": (1e-3, 1e-3), "linalg.lstsq": (1e-3, 1e-3),
    "cdist": (1e-3, 1e-3), "logcumsumexp": (1e-4, 1e-4), "polygamma": (1e-3, 1e-3),
    "mvlgamma": (1e-3, 1e-3), "special.polygamma": (1e-3, 1e-3), "erfinv": (1e-4, 1e-3),
    "lgamma": (1e-4, 1e-4), "digamma": (1e-4, 1e-3), "float_power": (1e-4, 1e-4),
    "linalg.matrix_norm": (1e-3, 1e-3), "linalg.norm": (1e-3, 1e-3), "norm": (1e-3, 1e-3),
    "linalg.cond": (1e-3, 1e-3), "linalg.matrix_power": (1e-3, 1e-3), "matrix_exp": (1e-3, 1e-3),
}

# Ops whose samples are run but not compared by value (shape and dtype still are), and why.
# Random ops draw from lazytorch's own generator, so their values cannot equal torch's; some
# decompositions are unique only up to signs or order.
VALUES_UNCOMPARABLE: dict[str, str] = {
    "bernoulli": "random: lazytorch's generator differs from torch's",
    "multinomial": "random: lazytorch's generator differs from torch's",
    "normal": "random", "normal_": "random", "uniform": "random", "exponential": "random",
    "cauchy": "random", "geometric": "random", "log_normal": "random", "random_": "random",
    "rand": "random", "randn": "random", "rand_like": "random", "randn_like": "random", "randint_like": "random", "randint": "random",
    "nn.functional.dropout": "random", "nn.functional.dropout2d": "random",
    "nn.functional.dropout3d": "random", "nn.functional.alpha_dropout": "random",
    "nn.functional.feature_alpha_dropout": "random", "nn.functional.rrelu": "random in training mode",
    "empty": "uninitialised memory", "empty_like": "uninitialised memory",
    "new_empty": "uninitialised memory", "empty_strided": "uninitialised memory",
    "new_empty_strided": "uninitialised memory", "empty_permuted": "uninitialised memory",
    "linalg.svd": "singular vectors are unique only up to sign",
    "linalg.qr": "Q and R are unique only up to signs",
    "linalg.eigh": "eigenvectors are unique only up to sign",
    "svd": "singular vectors are unique only up to sign",
    "qr": "Q and R are unique only up to signs",
}

# Ops not run at all, and why (each reason is something lazytorch documents as unsupported).
SKIPS: dict[str, str] = {
    "view_as_complex": "complex dtypes are not supported (raises NotImplementedError)",
    "polar": "complex dtypes are not supported (raises NotImplementedError)",
    "complex": "complex dtypes are not supported (raises NotImplementedError)",
    "as_strided/partial_views": "its samples are views into a larger storage, which copying them through numpy "
                                "loses (as_strided indexes the storage)",
}


def _install_expecttest_stub() -> None:
    """op_db's module imports `expecttest` only for a TestCase base class of its test utilities."""
    if "expecttest" not in sys.modules:
        try:
            import expecttest  # noqa: F401
        except ImportError:
            stub = types.ModuleType("expecttest")
            stub.TestCase = unittest.TestCase
            sys.modules["expecttest"] = stub


@cache
def op_db() -> tuple:
    _install_expecttest_stub()
    from torch.testing._internal.common_methods_invocations import op_db as db
    return tuple(db)


def names() -> list[str]:
    return sorted({o.name for o in op_db()})


# ---------------------------------------------------------------- resolving a name in lazytorch

NAMESPACES = {"nn.functional.": ("nn", "functional"), "linalg.": ("linalg",), "special.": ("special",),
              "fft.": ("fft",), "signal.": ("signal",), "sparse.": ("sparse",)}


def _lookup(path: tuple[str, ...], name: str) -> Callable | None:
    obj: Any = lt
    for part in path:
        obj = getattr(obj, part, None)
        if obj is None:
            return None
    return getattr(obj, name, None)


def _method(name: str) -> Callable | None:
    fn = getattr(lt.Tensor, name, None)
    if fn is None:
        return None
    if isinstance(fn, property):                         # x.mT, x.T: attributes, not calls
        return lambda x: getattr(x, name)
    return lambda x, *args, **kwargs: getattr(x, name)(*args, **kwargs)


def _is_torch_function(fn) -> bool:
    return getattr(fn, "__module__", None) in ("torch", "torch.functional", "torch.nn.functional",
                                               "torch._C._nn", "torch._C._linalg", "torch._C._special",
                                               "torch.linalg", "torch.special") \
        and getattr(fn, "__name__", "<lambda>") != "<lambda>"


# OpInfos whose `op` is a lambda that reorders the sample's arguments: the same reordering
ADAPTERS: dict[str, Callable[[Callable], Callable]] = {
    "special.polygamma": lambda fn: lambda x, n, **kw: fn(n, x, **kw),
    "polygamma": lambda fn: lambda x, n, **kw: fn(n, x, **kw),
    "einsum": lambda fn: lambda tensors, equation: fn(equation, tensors),
    "where": lambda fn: lambda x, condition, other, **kw: fn(condition, x, other, **kw),
    "nn.functional.embedding": lambda fn: lambda weight, idx, **kw: fn(idx, weight, **kw),
    "nn.functional.embedding_bag": lambda fn: lambda weight, idx, **kw: fn(idx, weight, **kw),
    "linalg.lstsq/grad_oriented": lambda fn: lambda a, b, driver: fn(a, b, driver=driver)[:2],
    "linalg.pinv/singular": lambda fn: lambda a, b: fn(a @ b.transpose(-2, -1)),
}


def resolve(info) -> Callable | None:
    """The lazytorch callable that stands for OpInfo `info`'s op, or None."""
    fn = _resolve(info)
    adapter = ADAPTERS.get(f"{info.name}/{info.variant_test_name}", ADAPTERS.get(info.name))
    return adapter(fn) if fn is not None and adapter is not None else fn


def _resolve(info) -> Callable | None:
    name = info.name
    for prefix, path in NAMESPACES.items():
        if name.startswith(prefix):
            return _lookup(path, name[len(prefix):])
    if name.startswith("__"):
        return _method(name)
    if _is_torch_function(info.op):
        fn = getattr(lt, name, None)
        if fn is not None:
            return fn
    if info.method_variant is not None:
        method = _method(getattr(info.method_variant, "__name__", name))
        if method is not None:
            return method
    if info.inplace_variant is not None and not _is_torch_function(info.op):
        method = _method(getattr(info.inplace_variant, "__name__", name + "_"))
        if method is not None:
            return method
    # a lambda around torch.<name> (the random ops seed torch first): lazytorch's function or method
    return getattr(lt, name, None) or _method(name)


# ---------------------------------------------------------------- running samples

_DTYPES = {getattr(torch, n): getattr(lt, n) for n in
           ("float32", "float64", "float16", "bfloat16", "int8", "int16", "int32", "int64", "uint8", "bool")}


def to_lt(v):
    """A sample argument with torch tensors and dtypes replaced by lazytorch's."""
    if isinstance(v, torch.Tensor):
        t = v.detach().resolve_conj().resolve_neg()
        if t.dtype == torch.bfloat16:
            return lt.tensor(t.float().numpy(), dtype=lt.bfloat16)
        if t.is_complex():
            raise NotImplementedError("complex tensors are not supported")
        return lt.tensor(t.numpy().copy())
    if isinstance(v, torch.dtype):
        if v not in _DTYPES:
            raise NotImplementedError(f"dtype {v} is not supported")
        return _DTYPES[v]
    if isinstance(v, torch.device):
        return str(v)
    if isinstance(v, torch.Size):
        return tuple(v)
    if isinstance(v, (list, tuple)):
        return type(v)(to_lt(x) for x in v)
    if isinstance(v, dict):
        return {k: to_lt(x) for k, x in v.items()}
    return v


class Mismatch(AssertionError):
    pass


def compare(got, want, tol: tuple[float, float], values: bool = True, what: str = "result") -> None:
    """got (lazytorch) equals want (torch): structure, shape, dtype and (if `values`) values."""
    if isinstance(want, (tuple, list)):
        if not isinstance(got, (tuple, list)) or len(got) != len(want):
            raise Mismatch(f"{what}: expected a sequence of {len(want)}, got {type(got).__name__}")
        for i, (g, w) in enumerate(zip(got, want)):
            compare(g, w, tol, values, f"{what}[{i}]")
        return
    if not isinstance(want, torch.Tensor):
        if isinstance(got, lt.Tensor):
            got = got.item()
        if values and not (got == want or (got != got and want != want)
                           or isinstance(want, float) and abs(got - want) <= tol[0] + tol[1] * abs(want)):
            raise Mismatch(f"{what}: {got!r} != torch {want!r}")
        return
    if not isinstance(got, lt.Tensor):
        raise Mismatch(f"{what}: expected a Tensor, got {type(got).__name__}")
    if tuple(got.shape) != tuple(want.shape):
        raise Mismatch(f"{what}: shape {tuple(got.shape)} != torch {tuple(want.shape)}")
    want_dtype = str(want.dtype).removeprefix("torch.")
    if got.dtype.name != want_dtype:
        raise Mismatch(f"{what}: dtype {got.dtype.name} != torch {want_dtype}")
    g = np.asarray(got.numpy(), dtype=np.float64 if want.is_floating_point() else None)
    if not values:
        return
    w = want.detach().double().numpy() if want.is_floating_point() else want.detach().numpy()
    if want.is_floating_point():
        atol, rtol = tol
        ok = np.isclose(g, w, atol=atol, rtol=rtol, equal_nan=True)
        if not ok.all():
            i = np.argwhere(~ok)[0]
            raise Mismatch(f"{what}: {int((~ok).sum())} of {ok.size} values differ, e.g. at {tuple(i)}: "
                           f"{g[tuple(i)]!r} != torch {w[tuple(i)]!r}")
    elif not np.array_equal(g, w):
        raise Mismatch(f"{what}: values differ")


@dataclass
class Outcome:
    op: str                 # OpInfo name (with its variant_test_name after a dot-less '/')
    index: int              # sample number
    status: str             # match, error, wrong, torch_error
    detail: str = ""


def samples(info, limit: int | None):
    """The OpInfo's first `limit` float32 samples.  The sample function is called directly: the
    OpInfo.sample_inputs wrapper costs ~0.1 s per op (it materialises every sample), which the
    suite cannot afford over 500 ops; for float32 it adds nothing (its transforms are for complex)."""
    out = []
    torch.manual_seed(0)                                # the samples are random: make runs repeatable
    try:
        for s in info.sample_inputs_func(info, "cpu", torch.float32, False):
            out.append(s)
            if limit is not None and len(out) >= limit:
                break
    except Exception:                                   # noqa: BLE001  (sample generators of other dtypes)
        pass
    return out


# Samples of otherwise comparable ops that are random (compared by shape and dtype only)
RANDOM_SAMPLES: dict[str, Callable] = {
    "nn.functional.scaled_dot_product_attention": lambda s: s.kwargs.get("dropout_p", 0.0) > 0,
}


def comparable(info, s) -> bool:
    random = RANDOM_SAMPLES.get(info.name)
    return info.name not in VALUES_UNCOMPARABLE and not (random and random(s))


def run_sample(info, fn: Callable, s, index: int) -> Outcome:
    key = info.name + (f"/{info.variant_test_name}" if info.variant_test_name else "")
    torch.manual_seed(index)
    try:
        want = info.op(s.input, *s.args, **s.kwargs)
    except Exception as e:                              # noqa: BLE001
        return Outcome(key, index, "torch_error", f"{type(e).__name__}: {e}")
    if isinstance(want, torch.Tensor) and want.is_complex() or \
            isinstance(want, (tuple, list)) and any(isinstance(w, torch.Tensor) and w.is_complex() for w in want):
        return Outcome(key, index, "torch_error", "complex result")
    tol = TOLERANCE.get(info.name, FLOAT32_TOL)
    try:
        got = fn(to_lt(s.input), *to_lt(s.args), **to_lt(s.kwargs))
        if isinstance(got, lt.Tensor):
            lt.eval(got)
        elif isinstance(got, (tuple, list)):
            lt.eval(*[g for g in got if isinstance(g, lt.Tensor)])
    except Exception as e:                              # noqa: BLE001
        return Outcome(key, index, "error", f"{type(e).__name__}: {str(e).splitlines()[0][:200]}")
    try:
        compare(got, want, tol, values=comparable(info, s))
    except Mismatch as e:
        return Outcome(key, index, "wrong", str(e)[:300])
    except Exception as e:                              # noqa: BLE001  (evaluating the result raised)
        return Outcome(key, index, "error", f"{type(e).__name__}: {str(e).splitlines()[0][:200]}")
    return Outcome(key, index, "match")


def skipped(info) -> bool:
    return info.name in SKIPS or f"{info.name}/{info.variant_test_name}" in SKIPS


def run_op(info, limit: int | None) -> list[Outcome]:
    fn = resolve(info)
    if fn is None or skipped(info):
        return []
    return [run_sample(info, fn, s, i) for i, s in enumerate(samples(info, limit))]


def infos_by_name() -> dict[str, list]:
    table: dict[str, list] = {}
    for info in op_db():
        table.setdefault(info.name, []).append(info)
    return table


def resolved_names() -> list[str]:
    return sorted(n for n, infos in infos_by_name().items() if any(resolve(i) is not None for i in infos))


# ---------------------------------------------------------------- the report

def report(limit: int | None, verbose: bool, only: list[str] | None = None) -> dict[str, int]:
    table = infos_by_name()
    counts = {"names": len(table), "resolved": 0, "match": 0, "error": 0, "wrong": 0, "torch_error": 0}
    for name in sorted(table):
        if only and name not in only:
            continue
        infos = table[name]
        if not any(resolve(i) is not None for i in infos):
            continue
        counts["resolved"] += 1
        for info in infos:
            for o in run_op(info, limit):
                counts[o.status] += 1
                if verbose and o.status in ("error", "wrong"):
                    print(f"  {o.status:5} {o.op} #{o.index}: {o.detail}")
    return counts


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--report", action="store_true", help="resolved names and sample outcomes")
    p.add_argument("--limit", type=int, default=None, help="samples per OpInfo (default: all)")
    p.add_argument("--backend", default="reference")
    p.add_argument("--verbose", action="store_true")
    p.add_argument("--op", nargs="*", help="only these op names (implies --verbose)")
    p.add_argument("--unresolved", action="store_true", help="list the names that do not resolve")
    args = p.parse_args(argv)
    lt.set_backend(args.backend)
    if args.unresolved:
        res = set(resolved_names())
        print(" ".join(n for n in names() if n not in res))
        return
    counts = report(args.limit, args.verbose or bool(args.op), args.op)
    run = counts["match"] + counts["error"] + counts["wrong"]
    print(f"op_db names: {counts['names']}, resolved in lazytorch: {counts['resolved']}")
    print(f"float32 samples ({args.backend}): {run} run, {counts['match']} match "
          f"({100.0 * counts['match'] / max(run, 1):.1f}%), {counts['error']} error, {counts['wrong']} wrong "
          f"({counts['torch_error']} rejected by torch, not counted)")


if __name__ == "__main__":
    main()

"""Reductions against torch: dim as int, tuple or None, keepdim, dtype=, every input dtype torch
accepts (and its errors where it refuses), 0-d, size-0 and size-1 dims, non-contiguous inputs."""
import math

import numpy as np
import pytest
import torch

from oracle import ALL_DTYPES, FLOAT_DTYPES, _run, check, check_error, sample

REDUCTIONS = ["sum", "mean", "prod", "amax", "amin", "argmax", "argmin", "var", "std", "logsumexp", "all",
              "any", "norm"]
DIMS = [None, 0, -1, (0, 2), (1,)]
# ops whose dim has no None form in torch
NEEDS_DIM = {"logsumexp"}


def call(name, dim, keepdim):
    """torch's spelling of a reduction over `dim` (None: every dim)."""
    def fn(m, x):
        f = getattr(m, name)
        if dim is None and name in NEEDS_DIM:
            return f(x, tuple(range(x.ndim)), keepdim=keepdim)
        if dim is None:
            return f(x, dim=None, keepdim=True) if keepdim else f(x)
        return f(x, dim=dim, keepdim=keepdim)
    return fn


def check_like_torch(fn, *args, name, **tol):
    try:
        _run(fn, torch, args)
    except Exception:
        check_error(fn, *args, match=(name,))
        return
    check(fn, *args, **tol)


@pytest.mark.parametrize("keepdim", [False, True])
@pytest.mark.parametrize("dim", DIMS, ids=str)
@pytest.mark.parametrize("name", REDUCTIONS)
def test_dims_and_keepdim(backend, name, dim, keepdim):
    if isinstance(dim, tuple) and name in ("argmax", "argmin", "prod"):
        pytest.skip("torch's argmax/argmin/prod take one int dim")
    if dim is None and keepdim and name in ("prod", "amax", "amin"):
        pytest.skip("torch has no dim=None form of prod/amax/amin")
    check(call(name, dim, keepdim), sample((3, 4, 5), "float32", layout="transposed"))


@pytest.mark.parametrize("dtype", ALL_DTYPES)
@pytest.mark.parametrize("name", REDUCTIONS)
def test_every_dtype(backend, name, dtype):
    x = sample((4, 6), dtype, low=-2, high=3, layout="strided")
    # torch multiplies half types step by step in their own precision; lazytorch accumulates in float32
    tol = {"rtol": 3e-2} if name == "prod" and dtype in ("float16", "bfloat16") else {}
    check_like_torch(call(name, -1, False), x, name=name, **tol)
    check_like_torch(call(name, None, False), x, name=name, **tol)


@pytest.mark.parametrize("shape,dim", [((), None), ((), 0), ((0, 3), 1), ((0, 3), 0), ((1, 4), 0), ((4, 1), 1)],
                         ids=str)
@pytest.mark.parametrize("name", REDUCTIONS)
def test_edge_shapes(backend, name, shape, dim):
    check_like_torch(call(name, dim, False), sample(shape, "float32"), name=name)


@pytest.mark.parametrize("dtype", ["bool", "uint8", "int32", "float16", "bfloat16", "float32"])
def test_dtype_argument(backend, dtype):
    x = sample((3, 4), dtype, low=0)
    check(lambda m, x: m.sum(x, dtype=m.float64), x)
    check(lambda m, x: m.sum(x, 1, dtype=m.int32), x)
    check(lambda m, x: m.prod(x, 0, dtype=m.float32), x)
    check(lambda m, x: m.mean(x, dtype=m.float64), x)
    check(lambda m, x: m.mean(x, (0, 1), True, dtype=m.float32), x)
    check(lambda m, x: m.cumsum(x, 1, dtype=m.float64), x)


@pytest.mark.parametrize("dtype", ALL_DTYPES)
def test_max_min_forms(backend, dtype):
    x, y = sample((3, 4), dtype, seed=1, layout="transposed"), sample((4,), dtype, seed=2)
    for name in ("max", "min"):
        check(lambda m, x: getattr(m, name)(x), x)
        out = check(lambda m, x: getattr(x, name)(1), x)
        assert out.values.shape == (3,) and out.indices.dtype.name == "int64"
        check(lambda m, x: getattr(m, name)(x, dim=0, keepdim=True), x)
        check(lambda m, x, y: getattr(m, name)(x, y), x, y)


def test_max_min_nan_and_ties(backend):
    x = sample((2, 4), "float32", values=np.array([[1.0, np.nan, 3.0, np.nan], [2.0, 2.0, -1.0, -1.0]]))
    for fn in (lambda m, x: m.max(x, 1), lambda m, x: m.min(x, 1), lambda m, x: m.argmax(x, 1),
               lambda m, x: m.argmin(x, 1), lambda m, x: m.argmax(x), lambda m, x: m.amax(x, 1),
               lambda m, x: m.max(x)):
        check(fn, x)


@pytest.mark.parametrize("dtype", FLOAT_DTYPES)
def test_var_std_corrections(backend, dtype):
    x = sample((5, 6), dtype, layout="strided")
    for name in ("var", "std"):
        check(lambda m, x: getattr(m, name)(x), x)
        check(lambda m, x: getattr(x, name)(False), x)
        check(lambda m, x: getattr(m, name)(x, 0, False, True), x)
        check(lambda m, x: getattr(m, name)(x, unbiased=False), x)
        check(lambda m, x: getattr(m, name)(x, dim=1, correction=0), x)
        check(lambda m, x: getattr(m, name)(x, dim=(0, 1), correction=2, keepdim=True), x)
        check(lambda m, x: getattr(m, name)(x, dim=1, correction=0.5), x)
        check(lambda m, x: getattr(m, name)(x[:1], dim=0), x)          # N - correction = 0


def test_logsumexp_stability(backend):
    big = np.array([[1000.0, 1000.0, -np.inf], [-np.inf, -np.inf, -np.inf], [np.inf, 1.0, 2.0]])
    check(lambda m, x: m.logsumexp(x, 1), sample((3, 3), "float32", values=big))
    check(lambda m, x: m.logsumexp(x, 0, keepdim=True), sample((3, 3), "float16", values=big))
    check(lambda m, x: m.logsumexp(x, (0, 1)), sample((2, 3), "int32"))


@pytest.mark.parametrize("p", [2, 1, math.inf, -math.inf, 0, 3, 0.5])
@pytest.mark.parametrize("dtype", FLOAT_DTYPES)
def test_norm(backend, p, dtype):
    x = sample((3, 4), dtype, layout="transposed")
    check(lambda m, x: m.norm(x, p), x)
    check(lambda m, x: x.norm(p, dim=1), x)
    check(lambda m, x: m.norm(x, p, (0, 1), keepdim=True), x)
    check(lambda m, x: m.norm(x, p, 0, dtype=m.float64), x)


@pytest.mark.parametrize("dtype", ALL_DTYPES)
@pytest.mark.parametrize("shape,dim", [((3, 4), 1), ((3, 4), 0), ((), 0), ((0, 3), 1), ((5,), -1)], ids=str)
def test_cumsum(backend, dtype, shape, dim):
    check(lambda m, x: m.cumsum(x, dim), sample(shape, dtype, layout="strided"))


def test_errors():
    f, i = sample((2, 3), "float32"), sample((2, 3), "int64")
    check_error(lambda m, x: m.mean(x), i, match=("mean", "int64", "dtype="))
    check_error(lambda m, x: m.var(x), i, match=("var", "int64", "floating point"))
    check_error(lambda m, x: m.sum(x, 2), f, exc=IndexError, match=("sum", "dimension 2", "2-d", "-2..1"))
    check_error(lambda m, x: m.sum(x, (0, 0)), f, match=("sum", "more than once"))
    check_error(lambda m, x: m.amax(x, 0), sample((0, 3)), exc=IndexError, match=("amax", "zero-size"))
    check_error(lambda m, x: m.max(x), sample((0,)), exc=IndexError, match=("max", "zero-size"))
    check_error(lambda m, x: m.argmin(x), sample((0, 2)), exc=IndexError, match=("argmin", "f32[0, 2]"))
    check_error(lambda m, x: m.cumsum(x, 3), f, exc=IndexError, match=("cumsum", "dimension 3"))
    check_error(lambda m, x: m.norm(x), i, match=("norm", "int64"))

"""Sorting and selection against torch: values, indices (ties and NaN as torch orders them),
shapes (0-d, empty, size-1, non-contiguous), dtypes and errors, on every backend."""
import numpy as np
import pytest

import lazytorch as lt
from backend_subsets import backend, every_backend  # noqa: F401  (fixtures)
from oracle import check, check_error, sample

TIES = np.array([[3, 1, 2, 1, 3, 0], [2, 2, 2, 1, 1, 5]], dtype=np.float32)
WITH_NAN = np.array([[1.0, np.nan, -2.0, 0.5], [np.nan, 3.0, 3.0, -1.0]], dtype=np.float32)


@pytest.mark.parametrize("descending", [False, True])
@pytest.mark.parametrize("values", [TIES, WITH_NAN], ids=["ties", "nan"])
def test_sort_stable_ties_and_nan(backend, values, descending):
    check(lambda m, x: m.sort(x, dim=-1, descending=descending, stable=True), sample(values.shape, values=values))
    check(lambda m, x: m.argsort(x, dim=0, descending=descending, stable=True), sample(values.shape, values=values))


@pytest.mark.parametrize("shape,layout", [((), "contiguous"), ((0, 3), "contiguous"), ((1, 4), "strided"),
                                          ((3, 5), "transposed")])
def test_sort_shapes(every_backend, shape, layout):
    check(lambda m, x: x.sort(), sample(shape, layout=layout))
    check(lambda m, x: m.msort(x), sample(shape, layout=layout))


@pytest.mark.parametrize("dtype", ["int32", "int64", "uint8", "float64", "bool"])
def test_sort_dtypes(backend, dtype):
    check(lambda m, x: m.sort(x, dim=0, stable=True), sample((6, 2), dtype))


@pytest.mark.parametrize("largest", [True, False])
def test_topk(backend, largest):
    x = sample((4, 7), seed=3)
    check(lambda m, x: m.topk(x, 3, dim=1, largest=largest), x)
    check(lambda m, x: x.topk(0, 0), x)
    check_error(lambda m, x: m.topk(x, 9), x, exc=RuntimeError, match=("topk",))


def test_kthvalue_median_mode(backend):
    x = sample((3, 6), seed=4)
    check(lambda m, x: m.kthvalue(x, 2, 1, keepdim=True), x)
    check(lambda m, x: m.median(x, 1), x)
    check(lambda m, x: m.median(x), x)
    check(lambda m, x: m.nanmedian(x, 0), sample(WITH_NAN.shape, values=WITH_NAN))
    check(lambda m, x: m.median(x, 1), sample(WITH_NAN.shape, values=WITH_NAN))
    check(lambda m, x: m.mode(x, 1), sample(TIES.shape, values=TIES))
    check_error(lambda m, x: m.kthvalue(x, 7, 1), x, exc=IndexError, match=("kthvalue",))


def test_cumulative(every_backend):
    for values in (TIES, WITH_NAN):
        check(lambda m, x: m.cummax(x, 1), sample(values.shape, values=values))
        check(lambda m, x: m.cummin(x, 0), sample(values.shape, values=values))
    check(lambda m, x: m.cumprod(x, 1), sample((3, 4), low=-2, high=2))
    check(lambda m, x: m.cumprod(x, 0), sample((3, 4), "int32"))
    check(lambda m, x: m.logcumsumexp(x, 1), sample((3, 4)))


@pytest.mark.parametrize("right", [False, True])
def test_searchsorted_bucketize(backend, right):
    seq = sample((5,), values=np.array([1, 2, 2, 4, 7], np.float32))
    v = sample((2, 3), values=np.array([[0, 2, 3], [7, 8, 2]], np.float32))
    check(lambda m, s, v: m.searchsorted(s, v, right=right), seq, v)
    check(lambda m, s, v: m.bucketize(v, s, right=right, out_int32=True), seq, v)
    rows = sample((2, 3), values=np.array([[1, 3, 5], [0, 0, 9]], np.float32))
    check(lambda m, s, v: m.searchsorted(s, v), rows, v)


def test_quantile(backend):
    x = sample((4, 5), seed=2)
    for interpolation in ("linear", "lower", "higher", "midpoint", "nearest"):
        check(lambda m, x: m.quantile(x, 0.3, dim=1, interpolation=interpolation), x)
    check(lambda m, x: m.nanquantile(x, 0.5, keepdim=True), x)


def test_multinomial_seeded():
    p = lt.tensor(np.array([[0.1, 0.0, 0.9], [0.5, 0.5, 0.0]], np.float32))
    lt.manual_seed(0)
    a = lt.multinomial(p, 2).numpy()
    lt.manual_seed(0)
    b = lt.multinomial(p, 2).numpy()
    assert (a == b).all() and a.dtype == np.int64 and a.shape == (2, 2)
    assert (a[0] != 1).all() and (a[1] != 2).all() and (a[:, 0] != a[:, 1]).all()   # no zero-probability draws, no repeats
    lt.manual_seed(1)
    many = lt.multinomial(lt.tensor([0.25, 0.75]), 4000, replacement=True).numpy()
    assert abs(many.mean() - 0.75) < 0.03
    with pytest.raises(RuntimeError, match="multinomial"):
        lt.multinomial(p, 4)

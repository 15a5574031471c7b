"""Scatter and indexed updates against torch: repeated indices accumulate deterministically, every
reduce mode with and without include_self, index_* ops, take/put, the *_scatter ops, errors."""
import numpy as np
import pytest

import lazytorch as lt
from backend_subsets import backend, every_backend  # noqa: F401  (fixtures)
from oracle import check, check_error, sample

INDEX = np.array([[0, 1, 0, 2], [2, 2, 1, 0]], np.int64)     # repeated targets along dim 1


def _index():
    return sample(INDEX.shape, "int64", values=INDEX)


@pytest.mark.parametrize("reduce", ["sum", "prod", "mean", "amax", "amin"])
@pytest.mark.parametrize("include_self", [True, False])
def test_scatter_reduce(backend, reduce, include_self):
    check(lambda m, x, i, s: m.scatter_reduce(x, 1, i, s, reduce, include_self=include_self),
          sample((2, 5)), _index(), sample((2, 4), seed=1))


@pytest.mark.parametrize("dtype", ["float32", "int32", "float64"])
def test_scatter_forms(backend, dtype):
    x, s = sample((2, 5), dtype), sample((2, 4), dtype, seed=1)
    check(lambda m, x, i, s: m.scatter_add(x, 1, i, s), x, _index(), s)
    check(lambda m, x, i: x.scatter(1, i, 2), x, _index())
    check(lambda m, x, i, s: m.scatter(x, 1, i, s, reduce="add"), x, _index(), s)
    unique = sample((2, 2), "int64", values=np.array([[4, 1], [0, 3]]))
    check(lambda m, x, i, s: m.scatter(x, 1, i, s), x, unique, s)


def test_scatter_errors(backend):
    # an index out of range is found in the data: when the result is evaluated, not at the call
    bad = lt.tensor(np.array([[5, 0], [0, 0]]))
    with pytest.raises(RuntimeError, match="scatter.*out of bounds"):
        lt.scatter_add(lt.zeros(2, 5), 1, bad, lt.ones(2, 4)).numpy()
    check_error(lambda m, x, i, s: m.scatter_add(x, 1, i, s), sample((2, 5)),
                sample((2, 2), "float32"), sample((2, 4)), match=("scatter_add",))
    check_error(lambda m, x, i, s: m.scatter_reduce(x, 1, i, s, "max"), sample((2, 5)), _index(), sample((2, 4)),
                exc=RuntimeError, match=("scatter_reduce",))


def test_index_ops(every_backend):
    x, idx = sample((4, 3)), sample((3,), "int64", values=np.array([2, 0, 2]))
    src = sample((3, 3), seed=5)
    check(lambda m, x, i, s: m.index_add(x, 0, i, s, alpha=2), x, idx, src)
    check(lambda m, x, i, s: x.index_copy(0, i, s), x, sample((3,), "int64", values=np.array([3, 0, 1])), src)
    check(lambda m, x, i: x.index_fill(1, i, -1.5), x, sample((2,), "int64", values=np.array([0, -1])))
    for reduce in ("prod", "mean", "amax", "amin"):
        check(lambda m, x, i, s: x.index_reduce(0, i, s, reduce, include_self=False), x, idx, src)
    check_error(lambda m, x, i, s: m.index_add(x, 0, i, s), x, idx, sample((2, 3)), match=("index_add",))


def test_take_put(backend):
    x = sample((3, 4), layout="transposed")
    check(lambda m, x, i: m.take(x, i), x, sample((2, 2), "int64", values=np.array([[0, -1], [5, 11]])))
    check(lambda m, x, i: m.take_along_dim(x, i, 1), x, sample((3, 2), "int64", values=np.array([[0, 1], [3, 3], [2, -1]])))
    check(lambda m, x, i: m.take_along_dim(x, i), sample((3, 4)), sample((3,), "int64", values=np.array([0, 7, 11])))
    i, s = sample((3,), "int64", values=np.array([1, 1, -2])), sample((3,), seed=2)
    check(lambda m, x, i, s: x.put(i, s, accumulate=True), sample((3, 4)), i, s)
    with pytest.raises(IndexError, match="out of bounds"):           # found in the data, at evaluation
        lt.take(x.lt, lt.tensor([12])).numpy()
    check_error(lambda m, x, i: m.take(x, i), x, sample((1,), "float32"), match=("take",))


def test_masked_and_slice_scatters(backend):
    x = sample((3, 4))
    mask = sample((4,), "bool", values=np.array([True, False, True, True]))
    check(lambda m, x, k, s: x.masked_scatter(k, s), x, mask, sample((12,), seed=3))
    check(lambda m, x, s: m.select_scatter(x, s, 1, -1), x, sample((3,), seed=4))
    check(lambda m, x, s: m.slice_scatter(x, s, 1, 1, None, 2), x, sample((3, 2), seed=4))
    check(lambda m, x, s: m.diagonal_scatter(x, s, 1), x, sample((3,), seed=4))
    check_error(lambda m, x, s: m.select_scatter(x, s, 1, 0), x, sample((4,)), match=("select_scatter",))


def test_inplace_forms(backend):
    def fn(m, x, i, s):
        y = x.clone()
        y.scatter_add_(1, i, s)
        y.index_fill_(0, m.tensor([1]), 0.0)
        return y
    check(fn, sample((2, 5)), _index(), sample((2, 4)))

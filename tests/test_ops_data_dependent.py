"""Data-dependent shapes and creation/in-place additions against torch: nonzero, masked_select,
unique, bincount, histc, histogram (they sync, then continue lazily), narrow/repeat_interleave
with tensors, creation helpers, random fills (seeded), complex refusals."""
import numpy as np
import pytest

import lazytorch as lt
from backend_subsets import backend, every_backend  # noqa: F401  (fixtures)
from oracle import check, check_error, sample


def test_nonzero_family(every_backend):
    x = sample((3, 4), "int32", low=0, high=2, layout="transposed")
    check(lambda m, x: m.nonzero(x), x)
    check(lambda m, x: m.nonzero(x, as_tuple=True), x)
    check(lambda m, x: m.argwhere(x), x)
    check(lambda m, x: m.nonzero(x), sample((0, 2)))
    check(lambda m, x: m.nonzero(x), sample((), values=np.array(2.0, np.float32)))


def test_masked_select_continues_lazily(every_backend):
    x, mask = sample((2, 3)), sample((3,), "bool", values=np.array([True, False, True]))
    check(lambda m, x, k: m.masked_select(x * 2, k) + 1, x, mask)
    y = lt.tensor(np.arange(6, dtype=np.float32).reshape(2, 3)) * 2
    out = lt.masked_select(y, lt.tensor([True, False, True]))
    assert not y.node.realized or True           # the mask is read; the input may stay lazy
    np.testing.assert_array_equal(out.numpy(), [0, 4, 6, 10])
    for keep in (True, False):                   # a 0-d input and mask: one element or none
        check(lambda m, x, k: m.masked_select(x + 1, k), sample((), values=np.array(2.5, np.float32)),
              sample((), "bool", values=np.array(keep)))


@pytest.mark.parametrize("dim", [None, 0, 1])
def test_unique(backend, dim):
    x = sample((4, 3), "int64", values=np.array([[1, 2, 1], [0, 0, 0], [1, 2, 1], [0, 0, 0]]))
    check(lambda m, x: m.unique(x, return_inverse=True, return_counts=True, dim=dim), x)
    check(lambda m, x: m.unique_consecutive(x, return_inverse=True, return_counts=True, dim=dim), x)


def test_histograms(backend):
    check(lambda m, x: m.bincount(x, minlength=7), sample((9,), "int64", low=0, high=5))
    check(lambda m, x, w: m.bincount(x, w), sample((5,), "int64", low=0, high=3), sample((5,)))
    check(lambda m, x: m.histc(x, 5), sample((20,)))
    check(lambda m, x: m.histc(x, 4, min=-1, max=1), sample((3, 4)))
    check(lambda m, x: m.histogram(x, 6), sample((30,)))
    check(lambda m, x: m.histogram(x, 3, range=(0.0, 2.0), density=True), sample((10,)))
    check_error(lambda m, x: m.bincount(x), sample((3,), "int64", values=np.array([1, -1, 0])), match=("bincount",))


def test_tensor_arguments(backend):
    x = sample((4, 3))
    check(lambda m, x, s: m.narrow(x, 0, s, 2), x, sample((), "int64", values=np.array(1)))
    check(lambda m, x, r: m.repeat_interleave(x, r, dim=0), x, sample((4,), "int64", values=np.array([0, 2, 1, 3])))
    check(lambda m, r: m.repeat_interleave(r), sample((3,), "int64", values=np.array([2, 0, 1])))
    check(lambda m, x, i: m.gather(x, 1, i), x, sample((4, 2), "int32", low=0, high=3))
    check(lambda m, x, k: x.masked_fill(k, 0.5), sample((3,)), sample((2, 3), "bool"))


def test_creation_and_inplace(backend):
    check(lambda m: m.logspace(-1, 2, 5))
    check(lambda m: m.logspace(0, 3, 4, base=2, dtype=m.int64))
    check(lambda m: m.scalar_tensor(3, dtype=m.int32))
    check(lambda m, x: x.new_tensor([[1, 2]]), sample((2,), "int32"))
    check(lambda m, x: m.as_tensor([1.5, 2.0], dtype=m.float32) + x, sample((2,)))

    def fill(m, x, y):
        a, b, c = x.clone(), x.clone(), x.clone()
        a.fill_(2.5)
        b.zero_()
        c.copy_(y)
        return a, b, c
    check(fill, sample((2, 3)), sample((3,), seed=1))


@pytest.mark.parametrize("method,args", [("uniform_", (2.0, 3.0)), ("normal_", (1.0, 0.5)), ("exponential_", (2.0,)),
                                         ("bernoulli_", (0.3,)), ("cauchy_", ()), ("geometric_", (0.4,)),
                                         ("log_normal_", ()), ("random_", (0, 7))])
def test_random_fills_seeded(method, args):
    def draw():
        lt.manual_seed(5)
        x = lt.zeros(2000)
        getattr(x, method)(*args)
        return x.numpy()
    a, b = draw(), draw()
    np.testing.assert_array_equal(a, b)
    want = {"uniform_": 2.5, "normal_": 1.0, "exponential_": 0.5, "bernoulli_": 0.3, "geometric_": 2.5,
            "random_": 3.0}.get(method)
    if want is not None:
        assert abs(np.mean(a) - want) < 0.1 * max(1.0, want), (method, np.mean(a))
    if method == "uniform_":
        assert a.min() >= 2 and a.max() < 3


def test_real_forms_and_complex_refusals(backend):
    x = sample((4,), values=np.array([-1.0, 0.0, 2.0, np.nan], np.float32))
    for name in ("conj", "resolve_conj", "resolve_neg", "real", "angle", "isreal"):
        check(lambda m, x: getattr(m, name)(x), x)
    for call in (lambda: lt.view_as_complex(x.lt), lambda: lt.polar(x.lt, x.lt), lambda: x.lt.cfloat()):
        with pytest.raises(NotImplementedError, match="complex"):
            call()
    with pytest.raises(RuntimeError, match="imag"):
        lt.imag(x.lt)


def test_numpy_style_keywords(backend):
    x = sample((2, 3, 4), layout="transposed")
    check(lambda m, x: m.sum(x, axis=1, keepdims=True), x)
    check(lambda m, x: x.mean(axis=(0, 2)), x)
    check(lambda m, x: m.amax(x, axis=-1, keepdims=True), x)
    check(lambda m, x: x.argmax(axis=0), x)
    check(lambda m, x: m.std(x, axis=2), x)

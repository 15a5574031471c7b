"""Pointwise, activation, reduction and special-function additions against torch: values over
their domains (including inf/NaN and poles), dtypes, broadcasting, errors, on every backend."""

import numpy as np
import pytest
import torch

import lazytorch as lt
from backend_subsets import backend, every_backend  # noqa: F401  (fixtures)
from oracle import check, check_error, sample

EDGES = np.array([-np.inf, -3.5, -1.0, -0.5, -0.0, 0.0, 0.3, 1.0, 2.5, 40.0, np.inf, np.nan], np.float32)

UNARY = ["acosh", "asinh", "atanh", "erfc", "erfinv", "lgamma", "digamma", "i0", "sinc", "logit", "frac",
         "deg2rad", "rad2deg", "nan_to_num", "signbit", "sgn", "isposinf", "isneginf"]


@pytest.mark.parametrize("name", UNARY)
def test_unary_edges(backend, name):
    check(lambda m, x: getattr(m, name)(x), sample(EDGES.shape, values=EDGES), atol=1e-5, rtol=1e-4)


@pytest.mark.parametrize("dtype", ["int32", "float64", "bool"])
def test_unary_dtypes(backend, dtype):
    x = sample((2, 3), dtype, low=0, high=3)
    for name in ("acosh", "erfinv", "lgamma", "deg2rad", "signbit", "sgn", "nan_to_num"):
        try:
            getattr(torch, name)(x.torch)
        except Exception:
            check_error(lambda m, x: getattr(m, name)(x), x, match=(name,))
            continue
        check(lambda m, x: getattr(m, name)(x), x)


BINARY = ["xlogy", "hypot", "copysign", "fmax", "fmin", "logaddexp", "logaddexp2", "nextafter", "float_power",
          "ldexp", "heaviside"]


@pytest.mark.parametrize("name", BINARY)
def test_binary_broadcast(every_backend, name):
    a = sample((3, 1, 4), values=np.array([0.0, -1.5, np.nan, 2.0] * 3, np.float32).reshape(3, 1, 4))
    b = sample((2, 4), layout="strided", seed=1)
    check(lambda m, x, y: getattr(m, name)(x, y), a, b, rtol=1e-4)


def test_integer_binary(backend):
    a, b = sample((5,), "int64", values=np.array([12, -18, 0, 7, 9])), sample((5,), "int64", values=np.array([8, 12, 5, 0, -6]))
    check(lambda m, x, y: m.gcd(x, y), a, b)
    check(lambda m, x, y: m.lcm(x, y), a, b)
    shifts = sample((5,), "int64", values=np.array([0, 1, 3, 64, 2]))
    check(lambda m, x, y: x << y, a, shifts)
    check(lambda m, x, y: x >> y, a, shifts)
    check(lambda m, x: 3 << x, sample((3,), "int32", values=np.array([0, 1, 4])))
    check_error(lambda m, x, y: m.gcd(x, y), sample((2,)), sample((2,)), match=("gcd",))
    check(lambda m, x: m.frexp(x), sample((2, 3), values=np.array([0.5, 3.0, -7.25, 0.0, 1e-30, -2.0 ** 40],
                                                                  np.float32).reshape(2, 3)))


def test_comparisons(backend):
    a = sample((6,), values=np.array([1.0, np.nan, np.inf, 2.0, 1e-9, -np.inf], np.float32))
    b = sample((6,), values=np.array([1.00001, np.nan, np.inf, 2.1, 0.0, np.inf], np.float32))
    check(lambda m, x, y: m.isclose(x, y), a, b)
    check(lambda m, x, y: m.isclose(x, y, rtol=0.1, atol=0.0, equal_nan=True), a, b)
    assert lt.allclose(a.lt, a.lt, equal_nan=True) is torch.allclose(a.torch, a.torch, equal_nan=True)
    assert lt.equal(a.lt, b.lt) is False and lt.equal(b.lt[:1], b.lt[:1]) is True
    check(lambda m, x, y: m.isin(x, y), sample((3, 4), "int64", low=0, high=6), sample((5,), "int64", low=0, high=6))
    check(lambda m, x, y: m.isin(x, y, invert=True), sample((3,), "int64", low=0, high=4), sample((0,), "int64"))


ACTIVATIONS = {
    "celu": lambda m, x: m.nn.functional.celu(x, alpha=0.5), "selu": lambda m, x: m.nn.functional.selu(x),
    "relu6": lambda m, x: m.nn.functional.relu6(x * 3), "glu": lambda m, x: m.nn.functional.glu(x, 1),
    "logsigmoid": lambda m, x: m.nn.functional.logsigmoid(x * 20), "softmin": lambda m, x: m.nn.functional.softmin(x, 1),
    "softshrink": lambda m, x: m.nn.functional.softshrink(x, 1.0), "hardshrink": lambda m, x: m.nn.functional.hardshrink(x, 1.0),
    "tanhshrink": lambda m, x: m.nn.functional.tanhshrink(x), "softsign": lambda m, x: m.nn.functional.softsign(x),
    "threshold": lambda m, x: m.nn.functional.threshold(x, 0.5, -2.0),
    "rrelu": lambda m, x: m.nn.functional.rrelu(x, training=False),
}


@pytest.mark.parametrize("name", ACTIVATIONS)
def test_activations(backend, name):
    check(ACTIVATIONS[name], sample((3, 4), layout="transposed"))


def test_prelu_and_errors(every_backend):
    check(lambda m, x, w: m.nn.functional.prelu(x, w), sample((2, 3, 4)), sample((3,), seed=1))
    check(lambda m, x, w: m.nn.functional.prelu(x, w), sample((2, 3)), sample((1,), seed=1))
    check_error(lambda m, x: m.nn.functional.glu(x, 1), sample((2, 3)), match=("glu",))


def test_reductions(backend):
    x = sample((3, 4), values=np.array([[1, np.nan, 2, 3], [np.nan] * 4, [0, 5, -1, 2]], np.float32))
    check(lambda m, x: m.nansum(x, 1), x)
    check(lambda m, x: m.nanmean(x, 1, keepdim=True), x)
    y = sample((3, 5), layout="strided")
    check(lambda m, x: m.var_mean(x, 1, correction=0), y)
    check(lambda m, x: m.std_mean(x, (0, 1), keepdim=True), y)
    check(lambda m, x: m.count_nonzero(x, 0), sample((3, 4), "int32", low=0, high=2))
    check(lambda m, x: m.aminmax(x, dim=1), y)
    check(lambda m, x: m.aminmax(x), y)
    check(lambda m, x: m.diff(x, 2, 1), y)
    check(lambda m, x, p: m.diff(x, dim=0, prepend=p), y, sample((1, 5), seed=3))
    check(lambda m, x: m.diff(x, dim=0), sample((4,), "bool"))


SPECIAL = ["i0e", "i1", "i1e", "ndtr", "ndtri", "log_ndtr", "erfcx", "entr", "bessel_j0", "bessel_j1", "bessel_y0",
           "bessel_y1", "modified_bessel_i0", "modified_bessel_i1", "modified_bessel_k0", "modified_bessel_k1",
           "scaled_modified_bessel_k0", "scaled_modified_bessel_k1", "spherical_bessel_j0", "airy_ai"]


@pytest.mark.parametrize("name", SPECIAL)
def test_special_unary(name):
    vals = np.array([-7.5, -2.0, -0.3, 0.0, 0.2, 1.0, 3.7, 12.0, 60.0], np.float32)
    if name == "ndtri":
        vals = np.array([0.0, 1e-6, 0.02, 0.5, 0.9, 1.0, 1.2], np.float32)
    check(lambda m, x: getattr(m.special, name)(x), sample(vals.shape, values=vals), atol=1e-5, rtol=1e-4)


@pytest.mark.parametrize("name", ["chebyshev_polynomial_t", "chebyshev_polynomial_u", "hermite_polynomial_h",
                                  "hermite_polynomial_he", "laguerre_polynomial_l", "legendre_polynomial_p",
                                  "shifted_chebyshev_polynomial_v"])
def test_special_polynomials(name):
    x = sample((5,), values=np.array([-0.9, -0.2, 0.0, 0.5, 0.8], np.float32))
    n = sample((3, 1), "int64", values=np.array([[0], [3], [5]]))
    check(lambda m, x, n: getattr(m.special, name)(x, n), x, n, rtol=1e-4)


def test_gamma_family():
    x = sample((6,), values=np.array([-2.5, -1.5, 0.5, 1.0, 3.3, 10.0], np.float32))
    for n in (0, 1, 3):
        check(lambda m, x: m.polygamma(n, x), x, rtol=1e-4)
    check(lambda m, x: m.mvlgamma(x, 3), sample((4,), values=np.array([1.1, 2.0, 5.5, 9.0], np.float32)), rtol=1e-4)
    check(lambda m, x, q: m.special.zeta(x, q), sample((3,), values=np.array([2.0, 3.5, 1.0], np.float32)),
          sample((3,), values=np.array([1.0, 0.5, 2.0], np.float32)), rtol=1e-4)
    check(lambda m, x, y: m.special.xlog1py(x, y), sample((3,), values=np.array([0.0, 2.0, -1.0], np.float32)),
          sample((3,), values=np.array([np.nan, 0.5, 3.0], np.float32)))

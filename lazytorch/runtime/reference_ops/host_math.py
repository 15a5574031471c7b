"""Host (numpy, float64) implementations of the special functions, for `host_call`.

numpy has no gamma-family or Bessel functions and lazytorch may not depend on scipy, so these are
written here: lgamma/erfc through Python's math module, digamma and Hurwitz zeta by recurrence
plus asymptotic series (as Cephes does), Bessel functions by their integral representations
evaluated with the trapezoid rule (spectrally accurate for these periodic or double-exponentially
decaying integrands) or Gauss-Legendre, orthogonal polynomials by their three-term recurrences.
Everything computes in float64; host_call rounds to the result dtype once.
"""
from __future__ import annotations

import math

import numpy as np

from . import host

_erf = np.vectorize(math.erf, otypes=[np.float64])
_erfc = np.vectorize(math.erfc, otypes=[np.float64])


def _f64(x):
    return np.asarray(x, dtype=np.float64)


def _lgamma1(v: float) -> float:
    try:
        return math.lgamma(v)
    except (ValueError, OverflowError):
        return math.inf if v == v else v


_lgamma = np.vectorize(_lgamma1, otypes=[np.float64])


@host("erfc")
def erfc(x):
    return _erfc(_f64(x))


@host("erfinv")
def erfinv(x):
    """Giles' single-precision approximation refined by two Newton steps on erf."""
    y = _f64(x)
    w = -np.log((1.0 - y) * (1.0 + y))
    small = w < 5.0
    ws, wl = w - 2.5, np.sqrt(np.where(small, 5.0, w)) - 3.0
    ps = np.polyval([2.81022636e-08, 3.43273939e-07, -3.5233877e-06, -4.39150654e-06, 0.00021858087,
                     -0.00125372503, -0.00417768164, 0.246640727, 1.50140941], ws)
    pl = np.polyval([-0.000200214257, 0.000100950558, 0.00134934322, -0.00367342844, 0.00573950773,
                     -0.0076224613, 0.00943887047, 1.00167406, 2.83297682], wl)
    r = np.where(small, ps, pl) * y
    for _ in range(2):
        ok = np.isfinite(r)
        step = (_erf(np.where(ok, r, 0.0)) - y) / (2.0 / math.sqrt(math.pi) * np.exp(-np.where(ok, r, 0.0) ** 2))
        r = np.where(ok, r - step, r)
    r = np.where(y == 1.0, np.inf, np.where(y == -1.0, -np.inf, r))
    return np.where(np.abs(y) > 1.0, np.nan, r)


@host("lgamma")
def lgamma(x):
    return _lgamma(_f64(x))


def _digamma_pos(x):
    """psi(x) for x > 0: recurrence up to x >= 6, then the asymptotic series."""
    acc = np.zeros_like(x)
    x = x.copy()
    for _ in range(6):
        low = x < 6.0
        acc = acc - np.where(low, 1.0 / np.where(low, x, 1.0), 0.0)
        x = np.where(low, x + 1.0, x)
    inv2 = 1.0 / (x * x)
    series = inv2 * (1 / 12 - inv2 * (1 / 120 - inv2 * (1 / 252 - inv2 * (1 / 240 - inv2 * (1 / 132)))))
    return acc + np.log(x) - 0.5 / x - series


@host("digamma")
def digamma(x):
    """torch's conventions: psi(+-0) = -+inf, psi(negative integer) = nan; reflection below 0."""
    x = _f64(x)
    neg = x < 0
    xp = np.where(neg, 1.0 - x, np.where(x == 0, 1.0, x))
    out = _digamma_pos(xp)
    with np.errstate(all="ignore"):
        out = np.where(neg, out - math.pi / np.tan(math.pi * x), out)
    out = np.where(neg & (x == np.floor(x)), np.nan, out)
    return np.where(x == 0, -np.copysign(np.inf, x), out)      # psi(+0) = -inf, psi(-0) = +inf


_ZETA_A = [12.0, -720.0, 30240.0, -1209600.0, 47900160.0, -1.8924375803183791606e9, 7.47242496e10,
           -2.950130727918164224e12, 1.1646782814350067249e14, -4.5979787224074726105e15,
           1.8152105401943546773e17, -7.1661652561756670113e18]


def _zeta1(s: float, q: float) -> float:
    """Hurwitz zeta(s, q) by Euler-Maclaurin summation (Cephes' zeta)."""
    if s == 1.0:
        return math.inf
    if s < 1.0 or math.isnan(s) or math.isnan(q):
        return math.nan
    if q <= 0.0:
        if q == math.floor(q):
            return math.inf
        if s != math.floor(s):
            return math.nan                      # q^-s is complex for q < 0 unless s is an integer
    total, a, i, b = q ** -s, q, 0, 0.0
    while i < 9 or a <= 9.0:
        i += 1
        a += 1.0
        b = a ** -s
        total += b
        if abs(b / total) < 1e-17:
            return total
    w = a
    total += b * w / (s - 1.0) - 0.5 * b
    fac, k = 1.0, 0.0
    for j in range(12):
        fac *= s + k
        b /= w
        t = fac * b / _ZETA_A[j]
        total += t
        if abs(t / total) < 1e-17:
            break
        k += 1.0
        fac *= s + k
        b /= w
        k += 1.0
    return total


_zeta = np.vectorize(_zeta1, otypes=[np.float64])


@host("zeta")
def zeta(x, q):
    return _zeta(*np.broadcast_arrays(_f64(x), _f64(q)))


@host("polygamma")
def polygamma(x, n: int = 0):
    if n == 0:
        return digamma(x)
    return (-1.0) ** (n + 1) * math.factorial(n) * zeta(np.full_like(_f64(x), n + 1.0), x)


# ---------------------------------------------------------------- Bessel functions

def _trapezoid_periodic(f, x, n_order: float):
    """(1/pi) * integral over [0, pi] of the Bessel integrand, trapezoid rule (spectral here)."""
    x = _f64(x)
    n = int(min(np.nanmax(np.abs(x), initial=0.0), 1e5)) + 64
    t = np.linspace(0.0, math.pi, n + 1)
    w = np.full(n + 1, math.pi / n)
    w[0] = w[-1] = math.pi / (2 * n)
    vals = f(x[..., None], t, n_order)
    return (vals * w).sum(-1) / math.pi


def _i_scaled(x, order: int):
    """e^{-|x|} I_n(x) = (1/pi) int_0^pi e^{x cos t - |x|} cos(nt) dt."""
    return _trapezoid_periodic(lambda xx, t, k: np.exp(xx * np.cos(t) - np.abs(xx)) * np.cos(k * t), x, order)


def _j(x, order: int):
    return _trapezoid_periodic(lambda xx, t, k: np.cos(k * t - xx * np.sin(t)), x, order)


def _k_scaled(x, order: float):
    """e^{x} K_nu(x) = int_0^inf e^{-x (cosh t - 1)} cosh(nu t) dt, trapezoid with step 1/16."""
    x = _f64(x)
    xs = np.where(x > 0, x, 1.0)
    tmax = float(np.arccosh(800.0 / np.min(xs, initial=1.0) + 1.0)) + 1.0
    t = np.arange(0.0, tmax, 1.0 / 16)
    w = np.full(t.shape, 1.0 / 16)
    w[0] = 1.0 / 32
    vals = np.exp(-xs[..., None] * (np.cosh(t) - 1.0)) * np.cosh(order * t)
    out = (vals * w).sum(-1)
    return np.where(x > 0, out, np.where(x == 0, np.inf, np.nan))


def _gauss(a: float, b: float, pieces: int = 16, nodes: int = 48):
    g, gw = np.polynomial.legendre.leggauss(nodes)
    edges = np.linspace(a, b, pieces + 1)
    t = ((edges[1:, None] - edges[:-1, None]) / 2 * g + (edges[1:, None] + edges[:-1, None]) / 2).ravel()
    w = ((edges[1:, None] - edges[:-1, None]) / 2 * gw).ravel()
    return t, w


def _y(x, order: int):
    """Y_n(x) = (1/pi) int_0^pi sin(x sin t - n t) dt - (1/pi) int_0^inf (e^{nt} + (-1)^n e^{-nt}) e^{-x sinh t} dt."""
    x = _f64(x)
    xs = np.where(x > 0, x, 1.0)
    t1, w1 = _gauss(0.0, math.pi, pieces=max(4, int(np.max(xs, initial=1.0) // 4) + 4))
    first = (np.sin(xs[..., None] * np.sin(t1) - order * t1) * w1).sum(-1)
    tmax = float(np.arcsinh(800.0 / np.min(xs, initial=1.0))) + 1.0
    t2, w2 = _gauss(0.0, tmax, pieces=32)
    second = ((np.exp(order * t2) + (-1) ** order * np.exp(-order * t2)) * np.exp(-xs[..., None] * np.sinh(t2)) * w2).sum(-1)
    out = (first - second) / math.pi
    return np.where(x > 0, out, np.where(x == 0, -np.inf, np.nan))


HOST_BESSEL = {
    "bessel_j0": lambda x: _j(x, 0), "bessel_j1": lambda x: _j(x, 1),
    "bessel_y0": lambda x: _y(x, 0), "bessel_y1": lambda x: _y(x, 1),
    "i0": lambda x: _i_scaled(x, 0) * np.exp(np.abs(_f64(x))), "i0e": lambda x: _i_scaled(x, 0),
    "i1": lambda x: _i_scaled(x, 1) * np.exp(np.abs(_f64(x))), "i1e": lambda x: _i_scaled(x, 1),
    "modified_bessel_i0": lambda x: _i_scaled(x, 0) * np.exp(np.abs(_f64(x))),
    "modified_bessel_i1": lambda x: _i_scaled(x, 1) * np.exp(np.abs(_f64(x))),
    "modified_bessel_k0": lambda x: _k_scaled(x, 0) * np.exp(-_f64(x)),
    "modified_bessel_k1": lambda x: _k_scaled(x, 1) * np.exp(-_f64(x)),
    "scaled_modified_bessel_k0": lambda x: _k_scaled(x, 0),
    "scaled_modified_bessel_k1": lambda x: _k_scaled(x, 1),
}
for _name, _fn in HOST_BESSEL.items():
    host(_name)(_fn)


@host("spherical_bessel_j0")
def spherical_bessel_j0(x):
    x = _f64(x)
    safe = np.where(x == 0, 1.0, x)
    return np.where(x == 0, 1.0, np.sin(safe) / safe)


@host("airy_ai")
def airy_ai(x):
    """Ai(x) = sqrt(x/3)/pi K_{1/3}(z) for x > 0 and sqrt(|x|)/2 (J_{1/3}(z) - Y_{1/3}(z)/sqrt(3))... for
    x < 0 through the Bessel integrals of order 1/3, z = (2/3)|x|^{3/2}."""
    x = _f64(x)
    z = 2.0 / 3.0 * np.abs(x) ** 1.5
    pos = np.sqrt(np.abs(x) / 3.0) / math.pi * _k_scaled(np.where(x > 0, z, 1.0), 1.0 / 3.0) * np.exp(-z)
    zs = np.where(x < 0, z, 1.0)

    def j_nu(nu):
        t1, w1 = _gauss(0.0, math.pi, pieces=max(4, int(np.max(zs, initial=1.0) // 4) + 4))
        first = (np.cos(nu * t1 - zs[..., None] * np.sin(t1)) * w1).sum(-1) / math.pi
        t2, w2 = _gauss(0.0, float(np.arcsinh(800.0 / np.min(zs, initial=1.0))) + 1.0, pieces=32)
        second = (np.exp(-zs[..., None] * np.sinh(t2) - nu * t2) * w2).sum(-1)
        return first - math.sin(nu * math.pi) / math.pi * second
    neg = np.sqrt(np.abs(x)) / 3.0 * (j_nu(1.0 / 3.0) + j_nu(-1.0 / 3.0))
    return np.where(x > 0, pos, np.where(x < 0, neg, 0.35502805388781723926))


# ---------------------------------------------------------------- normal distribution, entropy

@host("ndtr")
def ndtr(x):
    return 0.5 * _erfc(-_f64(x) / math.sqrt(2.0))


@host("log_ndtr")
def log_ndtr(x):
    x = _f64(x)
    direct = np.log(ndtr(np.where(x > -20, x, 0.0)))
    # asymptotic expansion of log(ndtr(x)) for very negative x
    xs = np.where(x <= -20, x, -20.0)
    z2 = 1.0 / (xs * xs)
    tail = -0.5 * xs * xs - np.log(-xs) - 0.5 * math.log(2 * math.pi) + np.log1p(-z2 + 3 * z2 * z2 - 15 * z2 ** 3)
    return np.where(x > -20, direct, tail)


@host("ndtri")
def ndtri(p):
    return math.sqrt(2.0) * erfinv(2.0 * _f64(p) - 1.0)


@host("erfcx")
def erfcx(x):
    x = _f64(x)
    small = x < 25.0
    direct = np.exp(np.where(small, x, 0.0) ** 2) * _erfc(np.where(small, x, 0.0))
    xl = np.where(small, 25.0, x)
    z2 = 1.0 / (2.0 * xl * xl)
    tail = 1.0 / (xl * math.sqrt(math.pi)) * (1.0 - z2 + 3.0 * z2 * z2 - 15.0 * z2 ** 3)
    return np.where(small, direct, tail)


@host("entr")
def entr(x):
    x = _f64(x)
    safe = np.where(x > 0, x, 1.0)
    return np.where(x > 0, -x * np.log(safe), np.where(x == 0, 0.0, np.where(np.isnan(x), np.nan, -np.inf)))


# ---------------------------------------------------------------- orthogonal polynomials

def _recurrence(x, n, first, second, step):
    """P_n(x) by P_{k+1} = step(k, x, P_k, P_{k-1}) from P_0 = first(x), P_1 = second(x)."""
    x, n = np.broadcast_arrays(_f64(x), _f64(n))
    nn = np.where(np.isfinite(n), np.trunc(n), -1).astype(np.int64)
    top = int(nn.max(initial=0))
    prev, cur = first(x), second(x)
    out = np.where(nn == 0, prev, np.where(nn == 1, cur, 0.0))
    for k in range(1, top):
        prev, cur = cur, step(k, x, cur, prev)
        out = np.where(nn == k + 1, cur, out)
    return np.where(nn < 0, 0.0, out)


_ONE = np.ones_like
POLYNOMIALS = {
    "chebyshev_polynomial_t": (_ONE, lambda x: x, lambda k, x, c, p: 2 * x * c - p),
    "chebyshev_polynomial_u": (_ONE, lambda x: 2 * x, lambda k, x, c, p: 2 * x * c - p),
    "chebyshev_polynomial_v": (_ONE, lambda x: 2 * x - 1, lambda k, x, c, p: 2 * x * c - p),
    "chebyshev_polynomial_w": (_ONE, lambda x: 2 * x + 1, lambda k, x, c, p: 2 * x * c - p),
    "hermite_polynomial_h": (_ONE, lambda x: 2 * x, lambda k, x, c, p: 2 * x * c - 2 * k * p),
    "hermite_polynomial_he": (_ONE, lambda x: x, lambda k, x, c, p: x * c - k * p),
    "laguerre_polynomial_l": (_ONE, lambda x: 1 - x, lambda k, x, c, p: ((2 * k + 1 - x) * c - k * p) / (k + 1)),
    "legendre_polynomial_p": (_ONE, lambda x: x, lambda k, x, c, p: ((2 * k + 1) * x * c - k * p) / (k + 1)),
}


def _polynomial(name: str, shifted: bool):
    first, second, step = POLYNOMIALS[name]

    def fn(x, n):
        x = _f64(x)
        return _recurrence(2 * x - 1 if shifted else x, n, first, second, step)
    return fn


for _name in POLYNOMIALS:
    host(_name)(_polynomial(_name, False))
    if _name.startswith("chebyshev"):
        host("shifted_" + _name)(_polynomial(_name, True))


# ---------------------------------------------------------------- integer and bit functions

HOST_NUMPY = {   # numpy computes these as torch does
    "gcd": np.gcd, "lcm": np.lcm, "nextafter": np.nextafter,
    "frexp_mantissa": lambda x: np.frexp(x)[0], "frexp_exponent": lambda x: np.frexp(x)[1],
}
for _name, _fn in HOST_NUMPY.items():
    host(_name)(_fn)


@host("shift_left", "shift_right")
def shift(a, b, right: bool = False, bits: int = 64):
    """torch's shifts: a shift by a negative amount or by >= the width gives 0 (-1 for negative
    values shifted right)."""
    a, b = np.broadcast_arrays(np.asarray(a), np.asarray(b))
    bb = b.astype(np.int64)
    bad = (bb < 0) | (bb >= bits)
    safe = np.where(bad, 0, bb).astype(a.dtype) if a.dtype != np.bool_ else np.where(bad, 0, bb)
    if right:
        return np.where(bad, np.where(a < 0, -1, 0), np.right_shift(a, safe))
    return np.where(bad, 0, np.left_shift(a, safe))

"""Host linear algebra through numpy's LAPACK, for `host_call`: batched over leading dims,
computed in the input's precision (float32 stays float32, as torch's CPU LAPACK calls do).
Errors for singular or non-positive-definite inputs use torch's wording."""
from __future__ import annotations

import numpy as np

from . import host


@host("inv")
def inv(a, lenient: bool = False):
    if np.size(a) == 0:
        return np.zeros(np.shape(a))
    try:
        return np.linalg.inv(a)
    except np.linalg.LinAlgError:
        if lenient:
            return np.full(np.shape(a), np.nan)
        raise RuntimeError("linalg.inv: The diagonal element of the LU factorization is zero: the matrix is singular "
                           "(use linalg.pinv for a pseudo-inverse)") from None


def _failures(a, factor) -> np.ndarray:
    """Per matrix of the batch `a`: 1 where `factor(matrix)` raises LinAlgError, else 0 (int32)."""
    out = np.zeros(np.shape(a)[:-2], np.int32)
    if np.size(a) == 0:
        return out
    flat = np.reshape(a, (-1,) + np.shape(a)[-2:])
    for i, m in enumerate(flat):
        try:
            factor(m)
        except np.linalg.LinAlgError:
            out.reshape(-1)[i] = 1
    return out


@host("logdet")
def logdet(a):
    sign, log = np.linalg.slogdet(a) if np.size(a) else (np.ones(np.shape(a)[:-2]), np.zeros(np.shape(a)[:-2]))
    return np.where(sign < 0, np.nan, np.where(sign == 0, -np.inf, log))


@host("solve")
def solve(a, b):
    if np.size(a) == 0 or np.size(b) == 0:
        return np.zeros(np.shape(b))
    try:
        return np.linalg.solve(a, b)
    except np.linalg.LinAlgError:
        raise RuntimeError("linalg.solve: The solver failed because the input matrix is singular.") from None


def _cholesky(a, upper: bool, lenient: bool):
    if np.size(a) == 0:
        return np.zeros(np.shape(a))
    try:
        low = np.linalg.cholesky(a)
    except np.linalg.LinAlgError:
        if lenient:
            return np.full(np.shape(a), np.nan)
        raise RuntimeError("linalg.cholesky: The factorization could not be completed because the input is not "
                           "positive-definite.") from None
    return np.swapaxes(low, -1, -2).conj() if upper else low


@host("cholesky")
def cholesky(a, upper: bool = False, lenient: bool = False):
    sym = np.tril(a) + np.swapaxes(np.tril(a, -1), -1, -2)       # LAPACK reads the lower triangle only
    return _cholesky(sym, upper, lenient)


def _qr(a, mode: str):
    return np.linalg.qr(a, mode="complete" if mode == "complete" else "reduced")


def _svd(a, full: bool):
    shape = np.shape(a)
    if np.size(a) == 0:
        m, n = shape[-2:]
        k = min(m, n)
        eye_u = np.broadcast_to(np.eye(m, m if full else k), shape[:-2] + (m, m if full else k))
        eye_v = np.broadcast_to(np.eye(n if full else k, n), shape[:-2] + (n if full else k, n))
        return eye_u, np.zeros(shape[:-2] + (k,)), eye_v
    return np.linalg.svd(a, full_matrices=full)


@host("svdvals")
def svdvals(a):
    if np.size(a) == 0:
        return np.zeros(np.shape(a)[:-2] + (min(np.shape(a)[-2:]),))
    return np.linalg.svd(a, compute_uv=False)


# One host function per result (a host_call has one): the parts of the multi-output LAPACK calls,
# and the single calls that are one expression.  Empty batches answer what torch does.
HOST_LAPACK = {
    "info": lambda a: _failures(a, np.linalg.inv),
    "cholesky_info": lambda a: _failures(a, lambda m: np.linalg.cholesky(np.tril(m) + np.tril(m, -1).T)),
    "det": lambda a: np.linalg.det(a) if np.size(a) else np.ones(np.shape(a)[:-2]),
    "slogdet_sign": lambda a: np.linalg.slogdet(a)[0] if np.size(a) else np.ones(np.shape(a)[:-2]),
    "slogdet_log": lambda a: np.linalg.slogdet(a)[1] if np.size(a) else np.zeros(np.shape(a)[:-2]),
    "qr_q": lambda a, mode: _qr(a, mode)[0],
    "qr_r": lambda a, mode: _qr(a, mode)[1],
    "svd_u": lambda a, full: _svd(a, full)[0],
    "svd_vh": lambda a, full: _svd(a, full)[2],
    "eigvalsh": lambda a, uplo: np.linalg.eigvalsh(a, UPLO=uplo) if np.size(a) else np.zeros(np.shape(a)[:-1]),
    "eigh_vectors": lambda a, uplo: np.linalg.eigh(a, UPLO=uplo)[1] if np.size(a) else np.zeros(np.shape(a)),
}
for _name, _fn in HOST_LAPACK.items():
    host(_name)(_fn)


@host("pinv")
def pinv(a, atol, rtol, has_atol: bool, has_rtol: bool, hermitian: bool):
    """torch's rule: singular values <= max(atol, rtol * largest) are dropped; rtol defaults to
    eps * max(m, n), or to 0 where a positive atol is given.  hermitian reads the lower triangle."""
    shape = np.shape(a)
    if np.size(a) == 0:
        return np.zeros(shape[:-2] + (shape[-1], shape[-2]))
    atol = np.asarray(atol, dtype=np.float64)[..., None]
    if not has_rtol:
        default = max(shape[-2:]) * np.finfo(np.asarray(a).dtype).eps
        rtol = np.where(has_atol & (atol > 0), 0.0, default)
    else:
        rtol = np.asarray(rtol, dtype=np.float64)[..., None]
    if hermitian:
        w, v = np.linalg.eigh(a)
        mag = np.abs(w)
        tol = np.maximum(atol, rtol * mag.max(-1, keepdims=True))
        winv = np.where(mag > tol, 1.0 / np.where(mag > tol, w, 1.0), 0.0)
        return v @ (winv[..., None] * np.swapaxes(v, -1, -2))
    u, s, vh = np.linalg.svd(a, full_matrices=False)
    smax = s.max(-1, keepdims=True) if s.shape[-1] else np.zeros(s.shape[:-1] + (1,))
    tol = np.maximum(atol, rtol * smax)
    sinv = np.where(s > tol, 1.0 / np.where(s > tol, s, 1.0), 0.0)
    return np.swapaxes(vh, -1, -2) @ (sinv[..., None] * np.swapaxes(u, -1, -2))


@host("lstsq")
def lstsq(a, b):
    return np.linalg.pinv(a) @ b if np.size(a) else np.zeros(np.shape(a)[:-2] + (np.shape(a)[-1], np.shape(b)[-1]))


@host("solve_triangular")
def solve_triangular(a, b, upper: bool, unit: bool):
    t = np.triu(a) if upper else np.tril(a)
    if unit:
        n = t.shape[-1]
        t = t * (1 - np.eye(n)) + np.eye(n)
    return np.linalg.solve(t, b) if np.size(t) and np.size(b) else np.zeros(np.shape(b))


@host("expm")
def expm(a):
    """Scaling and squaring with a degree-18 Taylor series (accurate to float64 rounding here)."""
    a = np.asarray(a, dtype=np.float64)
    if a.size == 0:
        return a
    norm = np.abs(a).sum(-2).max(-1) if a.ndim >= 2 else 0.0
    s = int(max(0, np.ceil(np.log2(max(float(np.max(norm)), 1e-300))) + 1))
    x = a / (2.0 ** s)
    n = a.shape[-1]
    out = np.broadcast_to(np.eye(n), a.shape).copy()
    term = out.copy()
    for k in range(1, 19):
        term = term @ x / k
        out = out + term
    for _ in range(s):
        out = out @ out
    return out

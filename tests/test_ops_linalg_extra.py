"""Linear-algebra and shape helpers against torch: products, norms, LAPACK through numpy (float32
and float64, batched), diagonals, stacking/splitting, grids, errors, on every backend."""
import math

import numpy as np
import pytest
import torch

import lazytorch as lt
from backend_subsets import backend, every_backend  # noqa: F401  (fixtures)
from oracle import check, check_error, sample


def _spd(n, batch=(), dtype="float32", seed=0):
    rng = np.random.default_rng(seed)
    a = rng.standard_normal(batch + (n, n))
    return sample(batch + (n, n), dtype, values=a @ np.swapaxes(a, -1, -2) + n * np.eye(n))


def test_products(every_backend):
    v, w = sample((3,)), sample((4,), seed=1)
    check(lambda m, a, b: m.outer(a, b), v, w)
    check(lambda m, a, b: m.inner(a, b), sample((2, 3)), sample((4, 3), seed=1))
    check(lambda m, a, b: m.tensordot(a, b, ([1, 0], [0, 1])), sample((3, 4, 2)), sample((4, 3, 5), seed=1), rtol=1e-4)
    check(lambda m, a, b: m.tensordot(a, b, 1), sample((2, 3)), sample((3, 2), seed=1), rtol=1e-4)
    check(lambda m, a, b: m.kron(a, b), sample((2, 3)), sample((2, 1, 2), seed=1))
    check(lambda m, s, a, b: m.addmv(s, a, b, beta=0.5, alpha=2), sample((4,)), sample((4, 3), seed=1), v, rtol=1e-4)
    check(lambda m, s, a, b: m.addr(s, a, b, beta=0), sample((3, 4), values=np.full((3, 4), np.nan)), v, w)
    check(lambda m, s, a, b: m.addbmm(s, a, b), sample((3, 5)), sample((2, 3, 4), seed=1), sample((2, 4, 5), seed=2), rtol=1e-4)
    check(lambda m, a, b: m.vdot(a, b), v, sample((3,), seed=2))
    check(lambda m, a, b: m.cross(a, b, dim=1), sample((2, 3)), sample((1, 3), seed=1))
    check(lambda m, a, b: m.linalg.cross(a, b), sample((4, 3), layout="transposed"), sample((4, 3), seed=1))
    check(lambda m, a, b, c: m.linalg.multi_dot([a, b, c]), v, sample((3, 4), seed=1), sample((4, 2), seed=2), rtol=1e-4)
    check(lambda m, a: m.linalg.matrix_power(a, 3), sample((2, 3, 3), low=-1, high=1), rtol=1e-4)


@pytest.mark.parametrize("ord", [2, 1, 0, math.inf, -math.inf, 3.5])
def test_vector_norm(backend, ord):
    x = sample((3, 4), layout="transposed")
    check(lambda m, x: m.linalg.vector_norm(x, ord, dim=1), x, rtol=1e-4)
    check(lambda m, x: m.linalg.norm(x.reshape(-1), ord), x, rtol=1e-4)


@pytest.mark.parametrize("ord", ["fro", "nuc", 1, -1, 2, -2, math.inf])
def test_matrix_norm(backend, ord):
    check(lambda m, x: m.linalg.matrix_norm(x, ord, keepdim=True), sample((2, 3, 4)), rtol=1e-4, atol=1e-4)
    check_error(lambda m, x: m.linalg.matrix_norm(x, "bad"), sample((2, 2)), match=("matrix_norm",))


def test_distances(backend):
    a, b = sample((2, 4, 3)), sample((2, 5, 3), seed=1)
    for p in (2.0, 1.0, 0.0, math.inf):
        check(lambda m, a, b: m.cdist(a, b, p=p), a, b, rtol=1e-4, atol=1e-4)
    check(lambda m, a, b: m.dist(a, b, 3), sample((4,)), sample((4,), seed=1), rtol=1e-4)
    check(lambda m, x: m.renorm(x, 2, 0, 1.0), sample((3, 4)), rtol=1e-4)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_lapack(backend, dtype):
    a = _spd(3, (2,), dtype)
    b = sample((2, 3, 2), dtype, seed=3)
    tol = dict(rtol=1e-4, atol=1e-4)
    check(lambda m, a: m.linalg.inv(a), a, **tol)
    check(lambda m, a: m.linalg.det(a), a, **tol)
    check(lambda m, a: m.linalg.slogdet(a), a, **tol)
    check(lambda m, a, b: m.linalg.solve(a, b), a, b, **tol)
    check(lambda m, a: m.linalg.cholesky(a), a, **tol)
    check(lambda m, a: m.linalg.eigvalsh(a), a, **tol)
    check(lambda m, a: m.linalg.svdvals(a), sample((2, 4, 3), dtype), **tol)
    check(lambda m, a: m.linalg.pinv(a), sample((4, 3), dtype), **tol)
    check(lambda m, a, b: m.linalg.lstsq(a, b).solution, sample((5, 3), dtype), sample((5, 2), dtype, seed=1), **tol)
    check(lambda m, a: m.matrix_exp(a), sample((3, 3), dtype, low=-1, high=1), **tol)
    check(lambda m, a, b: m.linalg.solve_triangular(a, b, upper=True), a, b, **tol)


def test_factorizations_reconstruct():
    """qr, svd and eigh are unique only up to signs: check them by reconstruction and orthogonality."""
    a = np.random.default_rng(0).standard_normal((2, 4, 3)).astype(np.float32)
    q, r = lt.linalg.qr(lt.tensor(a))
    np.testing.assert_allclose((q @ r).numpy(), a, atol=1e-5)
    np.testing.assert_allclose(np.triu(r.numpy()), r.numpy())
    u, s, vh = lt.linalg.svd(lt.tensor(a), full_matrices=False)
    np.testing.assert_allclose((u * s.unsqueeze(-2) @ vh).numpy(), a, atol=1e-5)
    sym = a[0] @ a[0].T
    w, v = lt.linalg.eigh(lt.tensor(sym))
    np.testing.assert_allclose((v * w.unsqueeze(0) @ v.transpose(0, 1)).numpy(), sym, atol=1e-4)


def test_lapack_errors():
    with pytest.raises(RuntimeError, match="linalg.inv"):
        lt.linalg.inv(lt.zeros(2, 3))
    with pytest.raises(RuntimeError, match="linalg.inv"):
        lt.linalg.inv(lt.zeros(2, 2)).numpy()
    with pytest.raises(RuntimeError, match="linalg.cholesky"):
        lt.linalg.cholesky(lt.tensor([[1.0, 2.0], [2.0, 1.0]])).numpy()
    with pytest.raises(RuntimeError, match="linalg.det"):
        lt.linalg.det(lt.ones(2, 2, dtype=lt.int64))


def test_diagonals(backend):
    x = sample((3, 4, 5), layout="strided")
    check(lambda m, x: m.diagonal(x, 1, 1, 2), x)
    check(lambda m, x: m.diagonal(x, -2, 0, 2), x)
    check(lambda m, x: m.diag_embed(x, -1, 0, 2), sample((2, 3)))
    check(lambda m, x: m.diag(x, 1), sample((3,)))
    check(lambda m, x: m.diag(x, -1), sample((3, 4)))
    check(lambda m, x: m.diagflat(x, 2), sample((2, 2)))
    check(lambda m, x: m.trace(x), sample((3, 4), "int32"))
    check(lambda m: m.tril_indices(4, 3, -1))
    check(lambda m: m.triu_indices(3, 5, 1))


def test_stacking_and_splitting(backend):
    a, b = sample((3,)), sample((3,), seed=1)
    m2 = sample((2, 3))
    for name in ("hstack", "vstack", "dstack", "column_stack"):
        check(lambda m, a, b: getattr(m, name)([a, b]), a, b)
    check(lambda m, a, b: m.atleast_3d(a, b), a, sample((), seed=2))
    check(lambda m, a: m.atleast_2d(a), a)
    check(lambda m, x: m.tensor_split(x, 3, dim=1), sample((2, 7)))
    check(lambda m, x: m.tensor_split(x, [1, 5], dim=1), sample((2, 7)))
    check(lambda m, x: m.hsplit(x, 3), m2)
    check(lambda m, x: m.vsplit(x, [1]), m2)
    check(lambda m, x: m.dsplit(x, 2), sample((1, 2, 4)))
    check(lambda m, x: m.tile(x, (2, 1, 2)), m2)
    check(lambda m, x: m.movedim(x, (0, 2), (2, 0)), sample((2, 3, 4)))
    check(lambda m, x: m.rot90(x, 3, (1, 0)), m2)
    check(lambda m, x: x.unfold(1, 2, 2), sample((2, 5)))
    check(lambda m, a, b: m.broadcast_tensors(a, b), sample((3, 1)), sample((4,)))
    check(lambda m, a, b: m.meshgrid(a, b, indexing="xy"), a, sample((2,)))
    check(lambda m, a, b: m.cartesian_prod(a, b), a, sample((2,)))
    check(lambda m, a, b: m.block_diag(a, b), m2, sample((1, 2), seed=3))
    check(lambda m, x: m.combinations(x, 2, with_replacement=True), a)
    check_error(lambda m, x: m.hsplit(x, 2), m2, match=("hsplit",))
    assert lt.broadcast_shapes((2, 1), (3,)) == torch.broadcast_shapes((2, 1), (3,))

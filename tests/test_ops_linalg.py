"""Linear algebra ops against torch: matmul's broadcasting and 1-D rules, mm/bmm/mv/dot, addmm,
baddbmm, einsum and the @ operator, over shapes (incl. size-0 and size-1 dims), dtypes and layouts."""
import pytest

import lazytorch as lt
from oracle import check, check_error, sample

MATMUL_SHAPES = [
    ((3,), (3,)),                  # dot
    ((2, 3), (3,)),                # matrix-vector
    ((3,), (3, 4)),                # vector-matrix: the promoted dim is removed
    ((2, 3), (3, 4)),
    ((5, 2, 3), (3,)),
    ((3,), (2, 3, 4)),
    ((2, 1, 2, 3), (4, 3, 2)),     # batch dims broadcast
    ((1, 1), (1, 1)),
    ((0, 3), (3, 4)),              # size-0 rows
    ((2, 0), (0, 3)),              # empty inner dim: zeros
    ((2, 3, 0), (0,)),
]


@pytest.mark.parametrize("sa,sb", MATMUL_SHAPES)
def test_matmul_shapes(backend, sa, sb):
    check(lambda m, a, b: m.matmul(a, b), sample(sa, seed=1), sample(sb, seed=2))


@pytest.mark.parametrize("dtype", ["float32", "float64", "float16", "bfloat16", "int8", "int32", "int64"])
def test_matmul_dtypes(backend, dtype):
    a, b = sample((2, 3, 8), dtype, seed=1), sample((8, 5), dtype, seed=2)
    check(lambda m, a, b: a @ b, a, b, rtol=2e-2 if dtype == "bfloat16" else None)


def test_matmul_int8_wraps_like_torch(backend):
    a, b = sample((4, 16), "int8", low=60, high=120, seed=1), sample((16, 3), "int8", low=60, high=120, seed=2)
    check(lambda m, a, b: m.matmul(a, b), a, b)


@pytest.mark.parametrize("layout", ["transposed", "strided"])
def test_matmul_non_contiguous(backend, layout):
    check(lambda m, a, b: m.matmul(a, b), sample((3, 4, 5), layout=layout, seed=1),
          sample((5, 6), layout=layout, seed=2))


def test_rmatmul_and_chained(backend):
    check(lambda m, a, b, c: type(b).__rmatmul__(b, a) @ c, sample((2, 3), seed=1), sample((3, 4), seed=2),
          sample((4,), seed=3))


def test_mm_bmm_mv_dot(backend):
    check(lambda m, a, b: m.mm(a, b), sample((3, 4), layout="transposed", seed=1), sample((4, 2), seed=2))
    check(lambda m, a, b: a.bmm(b), sample((2, 3, 4), seed=1), sample((2, 4, 5), seed=2))
    check(lambda m, a, b: m.mv(a, b), sample((3, 4), seed=1), sample((4,), layout="strided", seed=2))
    check(lambda m, a, b: m.dot(a, b), sample((5,), "float64", seed=1), sample((5,), "float64", seed=2))
    check(lambda m, a, b: m.dot(a, b), sample((0,), seed=1), sample((0,), seed=2))


@pytest.mark.parametrize("beta,alpha", [(1, 1), (0.5, 2.0), (0, -1.5)])
def test_addmm(backend, beta, alpha):
    check(lambda m, c, a, b: m.addmm(c, a, b, beta=beta, alpha=alpha), sample((3, 1), seed=0),
          sample((3, 4), seed=1), sample((4, 2), seed=2))


def test_addmm_beta_zero_ignores_nan(backend):
    import numpy as np
    nan = sample((2, 2), values=np.full((2, 2), np.nan, np.float32))
    check(lambda m, c, a, b: m.addmm(c, a, b, beta=0), nan, sample((2, 3), seed=1), sample((3, 2), seed=2))


def test_baddbmm(backend):
    check(lambda m, c, a, b: m.baddbmm(c, a, b, beta=0.25, alpha=3), sample((4,), seed=0),
          sample((2, 3, 5), seed=1), sample((2, 5, 4), seed=2))
    check(lambda m, c, a, b: c.baddbmm(a, b), sample((2, 3, 4), "float64", seed=0),
          sample((2, 3, 5), "float64", seed=1), sample((2, 5, 4), "float64", seed=2))


EINSUM_CASES = [
    ("ij,jk->ik", [(2, 3), (3, 4)]),
    ("bij,bjk->bik", [(2, 3, 4), (2, 4, 5)]),
    ("bhqd,bhkd->bhqk", [(2, 2, 3, 4), (2, 2, 5, 4)]),
    ("ij,jk", [(2, 3), (3, 4)]),               # implicit output: letters used once, sorted
    ("ba", [(2, 3)]),                          # implicit output transposes
    ("ii->i", [(3, 3)]),                       # diagonal
    ("ii", [(3, 3)]),                          # trace
    ("ij->", [(2, 3)]),
    ("ij->j", [(2, 3)]),
    ("i,j->ij", [(2,), (3,)]),                 # outer product
    ("i,i", [(4,), (4,)]),
    ("ij,ij->ij", [(2, 3), (2, 3)]),           # elementwise, nothing contracted
    ("ij,jk,kl->il", [(2, 3), (3, 4), (4, 2)]),
    ("ijk,ik->j", [(2, 3, 4), (2, 4)]),        # i is summed and shared, k contracted
    ("i,i", [(1,), (3,)]),                     # size-1 broadcasts
    ("...ij,jk->...ik", [(5, 2, 3), (3, 4)]),
    ("...i,...i->...", [(2, 1, 3), (4, 3)]),   # ellipsis dims broadcast
    ("ij,jk->ik", [(0, 3), (3, 2)]),
]


@pytest.mark.parametrize("eq,shapes", EINSUM_CASES)
def test_einsum(backend, eq, shapes):
    samples = [sample(s, seed=i) for i, s in enumerate(shapes)]
    check(lambda m, *xs: m.einsum(eq, *xs), *samples)


def test_einsum_list_operands_int_and_transposed(backend):
    check(lambda m, a, b: m.einsum("ij,jk->ki", [a, b]), sample((3, 4), "int64", layout="transposed", seed=1),
          sample((4, 2), "int64", seed=2))
    check(lambda m, a: m.einsum("ij->i", a), sample((2, 3), "int32"))   # int sums widen to int64, as torch


def test_matmul_errors():
    check_error(lambda m, a, b: m.matmul(a, b), sample((2, 3)), sample((4, 5)), exc=RuntimeError,
                match=("matmul", "[2, 3]", "[4, 5]"))
    check_error(lambda m, a, b: m.matmul(a, b), sample((2, 3)), sample((3, 2), "float64"), exc=RuntimeError,
                match=("matmul", "float32", "float64"))
    check_error(lambda m, a, b: m.matmul(a, b), sample(()), sample((3,)), exc=RuntimeError,
                match=("matmul", "0-d"))
    check_error(lambda m, a, b: m.matmul(a, b), sample((2, 2, 3)), sample((3, 3, 4)), exc=RuntimeError,
                match=("matmul", "broadcast"))
    check_error(lambda m, a, b: m.mm(a, b), sample((3,)), sample((3, 4)), exc=RuntimeError,
                match=("mm", "2-d"))
    check_error(lambda m, a, b: m.bmm(a, b), sample((2, 2, 3)), sample((3, 3, 4)), exc=RuntimeError,
                match=("bmm", "batch"))
    check_error(lambda m, a, b: m.dot(a, b), sample((3,)), sample((4,)), exc=RuntimeError,
                match=("dot", "[3]", "[4]"))
    check_error(lambda m, a, b: m.matmul(a, b), sample((2, 2), "bool"), sample((2, 2), "bool"), exc=TypeError,
                match=("matmul", "bool"))


def test_einsum_errors():
    check_error(lambda m, a: m.einsum("ij,jk->ik", a), sample((2, 3)), exc=ValueError, match=("einsum", "2"))
    check_error(lambda m, a: m.einsum("ijk->i", a), sample((2, 3)), exc=RuntimeError, match=("einsum", "ijk"))
    check_error(lambda m, a, b: m.einsum("ij,jk", a, b), sample((2, 3)), sample((4, 2)), exc=RuntimeError,
                match=("einsum", "j"))
    check_error(lambda m, a: m.einsum("i1->i", a), sample((2, 3)), exc=ValueError, match=("einsum", "i1"))
    check_error(lambda m, a: m.einsum("ij->z", a), sample((2, 3)), exc=ValueError, match=("einsum", "z"))

"""ir/promotion.py against torch.result_type: every dtype pair, each operand kind (tensors with
dims, 0-d tensors, Python bool/int/float), and the pointwise result dtypes built on it."""
import itertools

import pytest
import torch

import lazytorch as lt
from lazytorch.ir import dtypes as D
from lazytorch.ir.promotion import DIM, SCALAR, ZERO_DIM, promote_types, result_type
from oracle import ALL_DTYPES, check, sample

PAIRS = list(itertools.product(ALL_DTYPES, ALL_DTYPES))
PY_SCALARS = {"bool": True, "int": 2, "float": 2.5}


def _t(dtype: str, ndim: int) -> torch.Tensor:
    return torch.zeros((2,) * ndim, dtype=getattr(torch, dtype))


@pytest.mark.parametrize("a,b", PAIRS)
def test_promote_types_all_pairs(a, b):
    assert promote_types(D.BY_NAME[a], D.BY_NAME[b]).name == \
        str(torch.promote_types(getattr(torch, a), getattr(torch, b))).removeprefix("torch.")


@pytest.mark.parametrize("ranks", [(DIM, DIM), (DIM, ZERO_DIM), (ZERO_DIM, DIM), (ZERO_DIM, ZERO_DIM)])
def test_result_type_tensor_pairs(ranks):
    ndims = {DIM: 1, ZERO_DIM: 0}
    for a, b in PAIRS:
        want = torch.result_type(_t(a, ndims[ranks[0]]), _t(b, ndims[ranks[1]]))
        got = result_type([(D.BY_NAME[a], ranks[0]), (D.BY_NAME[b], ranks[1])])
        assert got.name == str(want).removeprefix("torch."), (a, b, ranks)


@pytest.mark.parametrize("kind", sorted(PY_SCALARS))
@pytest.mark.parametrize("ndim", [0, 1])
def test_result_type_with_python_scalar(kind, ndim):
    for a in ALL_DTYPES:
        want = torch.result_type(_t(a, ndim), PY_SCALARS[kind])
        scalar_dtype = {"bool": D.bool_, "int": D.int64, "float": D.float64}[kind]
        got = result_type([(D.BY_NAME[a], ZERO_DIM if ndim == 0 else DIM), (scalar_dtype, SCALAR)])
        assert got.name == str(want).removeprefix("torch."), (a, kind, ndim)
        assert lt.result_type(sample((2,) * ndim, a).lt, PY_SCALARS[kind]).name == got.name


def test_result_type_three_ranks():
    # a 0-d float raises an int tensor's category; a Python float then adds nothing beyond float32
    want = torch.result_type(torch.result_type(_t("int32", 1), _t("float64", 0)) and _t("int32", 1), 1.0)
    assert result_type([(D.int32, DIM), (D.float64, SCALAR)]).name == str(want).removeprefix("torch.")
    got = result_type([(D.int8, DIM), (D.float16, ZERO_DIM), (D.float64, SCALAR)])
    assert got is D.float16                     # the 0-d float16 is the highest-rank float


@pytest.mark.parametrize("a,b", [("int32", "float16"), ("uint8", "int8"), ("bool", "bfloat16"),
                                 ("bfloat16", "float16"), ("int64", "float32"), ("bool", "int16")])
@pytest.mark.parametrize("ndims", [(1, 1), (1, 0), (0, 1)])
def test_add_result_dtype_matches_torch(backend, a, b, ndims):
    shape = lambda n: (3,) * n                    # noqa: E731
    check(lambda m, x, y: m.add(x, y), sample(shape(ndims[0]), a, low=0), sample(shape(ndims[1]), b, low=0))


@pytest.mark.parametrize("value", [True, 3, -2.5])
@pytest.mark.parametrize("dtype", ["bool", "uint8", "int32", "float16", "bfloat16", "float64"])
def test_mul_with_python_scalar(backend, value, dtype):
    check(lambda m, x: m.mul(x, value), sample((2, 3), dtype, low=0))
    check(lambda m, x: value * x, sample((2, 3), dtype, low=0))

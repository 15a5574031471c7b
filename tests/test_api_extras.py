"""The torch conveniences model code needs (registry/extras.yaml, lazytorch/finfo.py), against torch."""
from __future__ import annotations

import math

import pytest
import torch

import lazytorch as lt
from oracle import FLOAT_DTYPES, INT_DTYPES, check, check_error, sample


def F(m):
    return m.nn.functional


# ---------------------------------------------------------------- F.normalize

@pytest.mark.parametrize("dtype", FLOAT_DTYPES)
@pytest.mark.parametrize("shape,dim", [((4, 5), 1), ((2, 3, 4), -1), ((3, 1), 1), ((0, 3), 1), ((5,), 0)])
def test_normalize(backend, dtype, shape, dim):
    check(lambda m, x: F(m).normalize(x, dim=dim), sample(shape, dtype))


@pytest.mark.parametrize("p", [1.0, 2.0, 3.0, math.inf])
def test_normalize_p_eps_and_views(backend, p):
    check(lambda m, x: F(m).normalize(x, p=p, dim=0), sample((3, 4), layout="transposed"))
    check(lambda m, x: F(m).normalize(x, p, 1, 1e-3), sample((2, 6), layout="strided"))
    # rows of zeros: the norm is clamped to eps, so the result is 0, not NaN
    check(lambda m, x: F(m).normalize(x * 0, p=p, dim=1), sample((2, 3)))


def test_normalize_0d(backend):
    check(lambda m, x: F(m).normalize(x, dim=0), sample((), "float32"))


def test_normalize_errors():
    check_error(lambda m, x: F(m).normalize(x), sample((2, 3), "int64"), exc=TypeError,
                match=("normalize", "int64", "floating point"))
    check_error(lambda m, x: F(m).normalize(x, dim=2), sample((2, 3)), match=("2",))
    assert not hasattr(lt, "normalize") and not hasattr(lt.Tensor, "normalize")   # as in torch


# ---------------------------------------------------------------- type_as, *_as, new_*

@pytest.mark.parametrize("src", ["bool", "int32", "float32", "float16"])
@pytest.mark.parametrize("dst", ["bool", "int64", "float64", "bfloat16"])
def test_type_as(backend, src, dst):
    check(lambda m, x, y: x.type_as(y), sample((2, 3), src, layout="transposed"), sample((1,), dst))


@pytest.mark.parametrize("xs,ys", [((1, 3), (4, 3)), ((3,), (2, 2, 3)), ((), (2, 2)), ((1, 0), (2, 0))])
def test_expand_as(backend, xs, ys):
    check(lambda m, x, y: x.expand_as(y) * 2, sample(xs), sample(ys))


@pytest.mark.parametrize("xs,ys", [((2, 6), (3, 4)), ((12,), (2, 2, 3)), ((1,), ()), ((0, 2), (2, 0))])
def test_view_as_and_reshape_as(backend, xs, ys):
    check(lambda m, x, y: x.view_as(y), sample(xs), sample(ys))
    check(lambda m, x, y: x.reshape_as(y), sample(xs, layout="strided" if xs[-1] else "contiguous"), sample(ys))


def test_view_as_aliases_its_base(backend):
    def fn(m, x, y):
        x = x.clone()
        v = x.view_as(y)
        v.mul_(2)             # writes through into x, as a torch view does
        return x
    check(fn, sample((2, 6)), sample((3, 4)))


def test_shape_as_errors():
    check_error(lambda m, x, y: x.view_as(y), sample((2, 3)), sample((4,)), match=("view", "6"))
    check_error(lambda m, x, y: x.expand_as(y), sample((2, 3)), sample((4, 3)), match=("expand",))


@pytest.mark.parametrize("dtype", ["bool", "int32", "float16", "float32"])
def test_new_fills(backend, dtype):
    check(lambda m, x: x.new_zeros(2, 3), sample((4,), dtype))
    check(lambda m, x: x.new_ones((0, 2)), sample((), dtype))
    check(lambda m, x: x.new_ones([3], dtype=m.float64), sample((2,), dtype))
    check(lambda m, x: x.new_full((2, 2), 1), sample((1,), dtype))
    check(lambda m, x: x.new_full([3], 2.5, dtype=m.float32), sample((1,), dtype))


def test_new_fill_errors():
    check_error(lambda m, x: x.new_zeros(-1, 2), sample((2,)), match=("new_zeros", "negative"))


# ---------------------------------------------------------------- finfo / iinfo

@pytest.mark.parametrize("dtype", FLOAT_DTYPES)
def test_finfo(dtype):
    got, want = lt.finfo(getattr(lt, dtype)), torch.finfo(getattr(torch, dtype))
    for field in ("bits", "eps", "max", "min", "tiny", "smallest_normal", "resolution"):
        assert getattr(got, field) == getattr(want, field), field
    assert got.dtype == want.dtype
    assert lt.finfo().eps == torch.finfo().eps                  # the default float dtype


@pytest.mark.parametrize("dtype", INT_DTYPES)
def test_iinfo(dtype):
    got, want = lt.iinfo(getattr(lt, dtype)), torch.iinfo(getattr(torch, dtype))
    assert (got.bits, got.max, got.min, got.dtype) == (want.bits, want.max, want.min, want.dtype)


def test_finfo_min_makes_an_additive_mask(backend):
    def fn(m, x, keep):
        return m.softmax(x + (1.0 - keep.to(x.dtype)) * m.finfo(x.dtype).min, dim=-1)
    check(fn, sample((2, 4)), sample((2, 4), "bool", seed=3))


def test_info_errors():
    with pytest.raises(TypeError, match="finfo.*int32.*iinfo"):
        lt.finfo(lt.int32)
    with pytest.raises(TypeError, match="iinfo.*float32.*finfo"):
        lt.iinfo(lt.float32)
    with pytest.raises(TypeError, match="iinfo.*bool"):
        lt.iinfo(lt.bool)


# ---------------------------------------------------------------- ~x builds a new value

@pytest.mark.parametrize("dtype", ["bool", "int32", "uint8"])
def test_invert_leaves_its_operand_alone(backend, dtype):
    check(lambda m, x: (~x, x), sample((3, 4), dtype))
    x = lt.tensor([True, False])
    y = ~x
    assert y.tolist() == [False, True] and x.tolist() == [True, False]

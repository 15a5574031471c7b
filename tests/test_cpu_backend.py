"""The cpu backend: generated C kernels compiled and run, checked against torch."""
from __future__ import annotations

import numpy as np
import pytest
import torch

import lazytorch as lt
from lazytorch.realize import kernel_plan
from oracle import check, sample


pytestmark = pytest.mark.usefixtures("on_cpu")       # (conftest.py)


@pytest.mark.parametrize("dtype", ["float32", "float64", "float16", "bfloat16"])
def test_fused_pointwise_floats(dtype):
    check(lambda m, a, b, c: m.sigmoid(a) * m.tanh(b) - m.exp(c / 4) + m.log1p(a.abs()) + 1.5,
          sample((3, 17), dtype), sample((17,), dtype, seed=1), sample((3, 1), dtype, seed=2))


@pytest.mark.parametrize("dtype", ["int32", "int64", "int8", "uint8", "int16"])
def test_fused_pointwise_ints(dtype):
    check(lambda m, a, b: (a * b + 3 - a.abs()) % 7 + m.maximum(a, b) * (a > b),
          sample((5, 6), dtype, low=-20, high=20), sample((5, 6), dtype, low=1, high=9, seed=1))


def test_bool_and_where():
    check(lambda m, a, b: m.where(a > 0, a, b) * ((a > b) | (b < -1)), sample((4, 9)), sample((4, 9), seed=1))


@pytest.mark.parametrize("layout", ["transposed", "strided"])
def test_views_and_broadcast(layout):
    check(lambda m, a, b: a.flip(0) * 2 + b.t()[:, :1], sample((6, 5), layout=layout), sample((5, 6), seed=3))


def test_zero_dim_and_empty():
    check(lambda m, a, b: m.exp(a) + b, sample(()), sample(()))
    check(lambda m, a: (a * 2).sum(1), sample((0, 3)))
    check(lambda m, a: (a * 2).sum(0), sample((0, 3)))


@pytest.mark.parametrize("dtype", ["float32", "float16", "bfloat16", "float64", "int32", "bool"])
def test_reductions(dtype):
    x = sample((5, 37), dtype)
    check(lambda m, a: a.sum(1), x)
    check(lambda m, a: a.amax(0), x)
    if dtype != "bool":
        check(lambda m, a: a.argmax(1), x)


def test_reduction_nan_semantics():
    vals = np.array([[1.0, np.nan, 3.0, np.nan], [2.0, 5.0, 5.0, -np.inf]], np.float32)
    check(lambda m, a: a.amax(1), sample((2, 4), values=vals))
    check(lambda m, a: a.argmax(1), sample((2, 4), values=vals))
    check(lambda m, a: a.argmin(1), sample((2, 4), values=vals))


def test_row_kernels_softmax_layer_norm():
    check(lambda m, a: m.softmax(a * 0.5, dim=-1), sample((7, 130)))
    check(lambda m, a, w: m.nn.functional.layer_norm(a, (64,), w), sample((9, 64)), sample((64,), seed=1))


def test_one_kernel_per_fused_program():
    a, b, c = lt.randn(64, 64), lt.randn(64, 64), lt.randn(64)
    y = lt.nn.functional.gelu(a * b + c, approximate="tanh") * lt.sigmoid(a) - lt.tanh(b)
    plan = kernel_plan([y])
    assert plan.count("kernel") == 1
    ref = torch.nn.functional.gelu(torch.tensor(a.numpy() * b.numpy() + c.numpy()), approximate="tanh")
    ref = ref * torch.sigmoid(torch.tensor(a.numpy())) - torch.tanh(torch.tensor(b.numpy()))
    np.testing.assert_allclose(y.numpy(), ref.numpy(), rtol=1e-5, atol=1e-6)


def test_float32_math_accuracy_full_range():
    """exp/log/tanh/sigmoid/expm1/log1p/erf within 2 ulp of float64 over the whole float range."""
    rng = np.random.default_rng(0)
    x = np.concatenate([rng.standard_normal(2000) * 30, np.geomspace(1e-38, 1e38, 2000),
                        -np.geomspace(1e-38, 1e38, 2000),
                        np.linspace(-4.5, 4.5, 20001),      # erf's pieces meet at |x| = 1 and 4
                        np.linspace(-110, 110, 200001),     # exp's range ends, sigmoid's denormals
                        np.geomspace(1e-30, 0.7, 20001),    # tanh's polynomial and quotient meet at 0.625
                        [0.9999999, 1.0, 1.0000001, 3.9199998, 3.92, 3.9999998, 4.0, -1.0, -4.0],
                        [0.0, -0.0, np.inf, -np.inf, np.nan, 88.7, 88.8, -103.9, -87.3, 1e-45]]).astype(np.float32)
    t = lt.tensor(x)
    x64 = x.astype(np.float64)
    with np.errstate(all="ignore"):
        cases = {"exp": (lt.exp, np.exp), "tanh": (lt.tanh, np.tanh), "sigmoid": (lt.sigmoid, lambda v: 1 / (1 + np.exp(-v))),
                 "expm1": (lt.expm1, np.expm1), "log": (lt.log, np.log), "log1p": (lt.log1p, np.log1p),
                 "sinh": (lt.sinh, np.sinh), "cosh": (lt.cosh, np.cosh),
                 "erf": (lt.erf, lambda v: torch.erf(torch.from_numpy(v)).numpy())}
        for name, (f, g) in cases.items():
            got = f(t).numpy()
            want = g(x64).astype(np.float32)
            same = (got == want) | (np.isnan(got) & np.isnan(want))
            ulps = np.abs(got.view(np.int32).astype(np.int64) - want.view(np.int32).astype(np.int64))
            bad = ~same & (ulps > 2)
            assert not bad.any(), (name, x[bad][:5], got[bad][:5], want[bad][:5])


def test_float32_tanh_sigmoid_exp_edges_match_torch():
    """The float32 helpers where their pieces meet (tanh: polynomial below |x| = 0.625, 1 - 2/(e^2|x| + 1)
    above, clamped from 9.1; sigmoid and exp: computed on 0 below -104) within 2 ulp of float64, and
    the special values (NaN, +-inf, +-0, denormals) as torch gives them in float32."""
    f32 = np.float32
    edges = [f32(0.625), f32(9.1), f32(9.0109), f32(-104.0), f32(-87.33), f32(88.72), f32(0.5)]
    near = np.concatenate([np.nextafter(np.full(40, e), np.full(40, np.inf if k % 2 else -np.inf), dtype=f32)
                           for e in edges for k in range(2)])
    x = np.concatenate([near, -near, np.array(edges, f32), -np.array(edges, f32),
                        np.linspace(0.6, 0.65, 5001, dtype=f32), np.linspace(8.9, 9.3, 4001, dtype=f32)]).astype(f32)
    with np.errstate(all="ignore"):
        refs = {"tanh": (lt.tanh, np.tanh), "sigmoid": (lt.sigmoid, lambda v: 1 / (1 + np.exp(-v))), "exp": (lt.exp, np.exp)}
        for name, (f, g) in refs.items():
            got, want = f(lt.tensor(x)).numpy(), g(x.astype(np.float64)).astype(f32)
            ulps = np.abs(got.view(np.int32).astype(np.int64) - want.view(np.int32).astype(np.int64))
            assert (ulps <= 2).all(), (name, x[ulps > 2][:5], got[ulps > 2][:5], want[ulps > 2][:5])
    special = np.array([np.nan, -np.nan, np.inf, -np.inf, 0.0, -0.0, 1e-45, -1e-45, 1e-40, -1e-40,
                        1.1754942e-38, -1.1754942e-38, 3.4e38, -3.4e38, 20.0, -20.0, 200.0, -200.0], f32)
    for f, tf in [(lt.tanh, torch.tanh), (lt.sigmoid, torch.sigmoid), (lt.exp, torch.exp)]:
        got, want = f(lt.tensor(special)).numpy(), tf(torch.from_numpy(special)).numpy()
        np.testing.assert_array_equal(got, want)                          # (NaN == NaN here)
        np.testing.assert_array_equal(np.signbit(got[~np.isnan(got)]), np.signbit(want[~np.isnan(want)]))


def test_matmul_and_reference_fallback():
    check(lambda m, a, b: (a @ b).relu() + 1, sample((8, 5)), sample((5, 3), seed=1))
    check(lambda m, a: m.cumsum(a * 2, 1), sample((3, 4)))


def test_broadcast_view_of_a_computed_value():
    check(lambda m, a: m.floor(a).expand(3) * 2, sample(()))
    check(lambda m, a: (m.exp(a) + 1).expand(4, 3, 5) - a, sample((3, 1)))


@pytest.mark.parametrize("op", [lambda x, y: x // y, lambda x, y: x % y, lambda x, y: x.fmod(y)])
def test_integer_division_by_zero_raises(op):
    x, y = lt.tensor([4, -3, 5], dtype=lt.int32), lt.tensor([2, 0, 1], dtype=lt.int32)
    with pytest.raises(ZeroDivisionError, match="division by zero"):
        op(x, y).numpy()
    # the error word is reset: the same program runs again on valid data
    np.testing.assert_array_equal(op(x, y + 1).numpy(), op(torch.tensor([4, -3, 5], dtype=torch.int32),
                                                            torch.tensor([3, 1, 2], dtype=torch.int32)).numpy())


@pytest.mark.parametrize("dtype", ["float32", "float16", "float64"])
def test_softmax_and_log_softmax_with_row_cache(dtype):
    check(lambda m, x: m.softmax(x, dim=-1) + m.log_softmax(x * 2, dim=-1), sample((5, 33), dtype))


@pytest.mark.parametrize("dtype", ["float32", "int32", "bool"])
def test_column_and_full_reductions(dtype):
    # (300, 270) columns span two blocks of outputs with a tail; the full reduction is split
    x = sample((300, 270), dtype, low=-3, high=3)
    check(lambda m, x: (x.sum(0), x.amax(0), x.sum(), x.amax()), x)
    check(lambda m, x: (x.sum((0, 1)), x.amin(1).sum()), sample((7, 3, 40), dtype), atol=1e-3)


def test_column_reduction_nan_and_epilogue():
    data = np.random.default_rng(0).uniform(-3, 3, (50, 300))
    data[3, 7] = np.nan
    x = sample((50, 300), values=data.astype(np.float32))
    check(lambda m, x: (x.amax(0) * 2 + 1, x.mean(0), x.std(0)), x)


def test_floating_operand_of_a_row_value():
    # a (5,) operand of a (1, 5) reduced value is indexed in the reduced value's dims (fuzz 4673)
    check(lambda m, x, y: m.prod(x, 2) + y, sample((2, 5, 1)), sample((5,), "int64", low=-5, high=5))

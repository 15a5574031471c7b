"""Regression tests for mismatches the differential fuzzer (tests/fuzz) found, one per cause.

Each case is the shrunk program the fuzzer printed, checked against torch.  Causes not fixed yet
are strict xfails naming the subsystem that owns them: they start failing (XPASS) when fixed, and
then the marker comes off.
"""
from __future__ import annotations

import numpy as np
import pytest
import torch

import lazytorch as lt
from oracle import check, check_error, sample


def _on(name: str):
    previous = lt.get_backend()
    lt.set_backend(name)
    return previous


@pytest.fixture
def cpu():
    previous = _on("cpu")
    yield "cpu"
    lt.set_backend(previous)


@pytest.fixture
def reference():
    previous = _on("reference")
    yield "reference"
    lt.set_backend(previous)


# ---- cpu code generator (C dialect) ----

# fixed: the C preamble lacked float64 math helpers (undefined symbol lt_exp_f64 at load time)
@pytest.mark.parametrize("op", ["exp", "log", "sqrt", "floor", "trunc", "exp2", "log2"])
def test_cpu_float64_math(cpu, op):
    check(lambda m, x: getattr(m, op)(x), sample((5,), "float64", low=0.5, high=3))


# fixed: sign(nan) was nan on cpu (torch gives 0)
def test_cpu_sign_of_nan(cpu):
    check(lambda m, x: x.sign(), sample((3,), "float32", values=np.array([np.nan, -2.0, 0.0])))


@pytest.mark.xfail(strict=True, reason="cpu: lowering a keepdim argmax feeding a pointwise op raises "
                   "KeyError 'idx…'; owner: codegen lower.py")
def test_cpu_keepdim_argmax_then_pointwise(cpu):
    check(lambda m, x: m.argmax(x, dim=0, keepdim=True) % -2, sample((1,)))


# ---- API / schema (accepted where torch rejects, or the reverse) ----

@pytest.mark.xfail(strict=True, reason="add of bool tensors with an integer alpha: torch accepts it, "
                   "lazytorch rejects it; owner: ir meta (add alpha check)")
def test_bool_add_with_integer_alpha(backend):
    check(lambda m, a, b: m.add(a, b, alpha=-1), sample((3,), "bool", seed=1), sample((3,), "bool", seed=2))


@pytest.mark.xfail(strict=True, reason="maximum/minimum/atan2/logical_* take a Python scalar in "
                   "lazytorch; torch requires a tensor; owner: ir schema binding")
@pytest.mark.parametrize("op", ["maximum", "minimum", "atan2", "logical_and", "logical_or"])
def test_tensor_only_ops_reject_python_scalars(op):
    x = sample((3,))
    with pytest.raises(TypeError):
        getattr(torch, op)(x.torch, 2)
    check_error(lambda m, x: getattr(m, op)(x, 2), x, exc=TypeError, match=(op,))


@pytest.mark.xfail(strict=True, reason="prod takes one int dim in torch; lazytorch accepts a tuple; "
                   "owner: registry schema of prod")
def test_prod_rejects_tuple_dims():
    check_error(lambda m, x: m.prod(x, (0, 1)), sample((2, 3)), exc=TypeError, match=("prod",))


@pytest.mark.xfail(strict=True, reason="x.to(x.dtype) returns x itself in torch (an in-place op on the "
                   "result mutates x); lazytorch returns a copy; owner: api/tensor `to`")
def test_to_same_dtype_aliases(backend):
    def prog(m, x):
        y = -(x + 3)
        z = y.to(m.float16)
        z.abs_()
        return m.fmod(y, -2)
    check(prog, sample((), "float16", values=np.array(-1.3369140625)))


@pytest.mark.xfail(strict=True, reason="integer remainder by a Python False (0) does not raise; "
                   "torch raises ZeroDivisionError; owner: ir meta of remainder")
def test_integer_remainder_by_false_raises():
    x = sample((), "int64", values=np.array(-1))
    with pytest.raises(Exception):
        torch.remainder(x.torch, False)
    check_error(lambda m, x: m.remainder(x, False), x, exc=(RuntimeError, ZeroDivisionError))


# ---- reference executor ----

@pytest.mark.xfail(strict=True, reason="integer pow with negative tensor exponents raises "
                   "ValueError at eval (numpy); torch computes it (1/x truncated); owner: "
                   "runtime/reference_ops pointwise pow")
def test_integer_pow_negative_exponents(reference):
    base = sample((4,), "int64", values=np.array([2, -1, 1, -2]))
    exp = sample((4,), "int64", values=np.array([-1, -1, -3, -2]))
    check(lambda m, a, b: a ** b, base, exp)


# ---- fixed findings stay fixed ----

def test_float_remainder_of_large_values_is_within_tolerance(backend):
    # the fuzzer's 'values' report here was its own fault (remainder amplifies a one-ulp sinh
    # difference); kept as a check that plain float remainder of exact values matches torch
    check(lambda m, x: m.remainder(x, 1), sample((2, 3, 3), "float32", low=-50, high=50))


@pytest.mark.xfail(strict=True, reason="cpu: prod over a size-1 dim plus a broadcast int64 tensor gives "
                   "wrong values in the last elements (fuzz seed 4673); owner: cpu codegen/fusion")
def test_cpu_prod_size1_dim_plus_int64(cpu):
    x = sample((1, 5, 1), "float32", values=np.array(
        [[[2.763176202774048], [2.6701791286468506], [2.5461738109588623], [-0.24764972925186157],
          [2.669229745864868]]], dtype=np.float32))
    y = sample((5,), "int64", values=np.array([-2, -2, -2, 1, -5]))
    check(lambda m, x, y: m.add(m.prod(x, 2), y), x, y)

"""Normalization functionals against torch: values, running statistics updated in place, kernel
counts and errors.  Cases of one family run as one program per backend (tests/oracle_batch.py)."""
from __future__ import annotations

import pytest
import torch

import lazytorch as lt
from oracle import check_error, sample
from oracle_batch import Case, check_batch


def fn(m):
    return m.nn.functional


def _bn_eval(m, x, rm, rv, w, b):
    return m.relu(fn(m).batch_norm(x, rm, rv, w, b, eps=1e-3))


def _bn_train(m, x, rm, rv, w, b):
    y = fn(m).batch_norm(x, rm, rv, w, b, training=True, momentum=0.3)
    return y, rm, rv                             # the running statistics are updated in place


def _in_train(m, x, rm, rv):
    y = fn(m).instance_norm(x, rm, rv, momentum=0.2)
    return y, rm, rv


def _stats(c: int, dtype: str, seed: int):
    return sample((c,), dtype, seed=seed), sample((c,), dtype, low=0.5, high=2, seed=seed + 1)


def test_norms(backend):
    cases = []
    for i, (shape, dtype, layout, affine) in enumerate([
            ((4, 3, 5, 6), "float32", "transposed", True),
            ((2, 5), "float32", "contiguous", False),
            ((1, 3, 7), "float64", "strided", True),
            ((3, 2, 4, 4), "float16", "contiguous", True)]):
        c = shape[1]
        rm, rv = _stats(c, dtype, 10 * i)
        w, b = (sample((c,), dtype, seed=10 * i + k) for k in (2, 3)) if affine else (None, None)
        x = sample(shape, dtype, layout=layout, seed=i)
        tol = dict(atol=2e-2, rtol=1e-2) if dtype == "float16" else {}
        cases.append(Case(f"batch_norm eval {shape} {dtype}", _bn_eval, (x, rm, rv, w, b), tol, emu=i in (0, 3)))
        rm, rv = _stats(c, dtype, 10 * i)                 # fresh: training updates them
        cases.append(Case(f"batch_norm train {shape} {dtype}", _bn_train, (x, rm, rv, w, b), tol, emu=i == 0))
    x = sample((3, 4, 5), layout="transposed")
    cases += [
        Case("instance_norm", lambda m, x, w, b: fn(m).instance_norm(x, weight=w, bias=b),
             (sample((2, 3, 4, 5)), sample((3,), seed=1), sample((3,), seed=2)), emu=False),
        Case("instance_norm running", _in_train, (x, *_stats(4, "float32", 5)), emu=False),
        Case("instance_norm eval", lambda m, x, rm, rv: fn(m).instance_norm(x, rm, rv, use_input_stats=False),
             (x, *_stats(4, "float32", 6)), emu=False),
        Case("group_norm", lambda m, x, w, b: fn(m).group_norm(x, 2, w, b, eps=1e-4),
             (sample((2, 6, 3, 4), layout="transposed"), sample((6,), seed=1), sample((6,), seed=2))),
        Case("group_norm per channel", lambda m, x: fn(m).group_norm(x, 4), (sample((3, 4, 5)),), emu=False),
        Case("group_norm single group", lambda m, x: fn(m).group_norm(x, 1), (sample((2, 3)),), emu=False),
        Case("group_norm f16", lambda m, x: fn(m).group_norm(x, 2), (sample((2, 4, 3), "float16"),),
             dict(atol=2e-2, rtol=1e-2), emu=False),
        Case("local_response_norm 3d", lambda m, x: fn(m).local_response_norm(x, 3, alpha=0.1),
             (sample((2, 5, 4), layout="transposed"),), emu=False),
        Case("local_response_norm 4d", lambda m, x: fn(m).local_response_norm(x, 2, beta=0.5, k=2.0),
             (sample((1, 4, 3, 2)),), emu=False),
    ]
    assert check_batch(cases) >= 3


def test_batch_norm_eval_relu_is_one_kernel():
    x, rm, rv, w, b = lt.randn(8, 16, 10, 10), lt.randn(16), lt.rand(16), lt.randn(16), lt.randn(16)
    plan = lt.kernel_plan(lt.relu(lt.nn.functional.batch_norm(x, rm, rv, w, b)))
    assert [launch.kind for launch in plan.launches] == ["kernel"], plan
    assert plan.launches[0].pattern == "pointwise"


@pytest.mark.parametrize("norm", [
    lambda F, x: F.batch_norm(x, None, None, training=True),
    lambda F, x: F.instance_norm(x),
    lambda F, x: F.group_norm(x, 8),
    lambda F, x: F.group_norm(x, 1),
])
def test_training_norms_are_one_row_kernel(norm):
    plan = lt.kernel_plan(norm(lt.nn.functional, lt.randn(4, 8, 6, 6)))
    kernels = [launch for launch in plan.launches if launch.kind == "kernel"]
    assert len(plan.launches) == 1 and kernels[0].pattern == "row", plan


def test_running_statistics_are_updated_in_place():
    x, rm, rv = lt.randn(6, 3, 4), lt.zeros(3), lt.ones(3)
    tx, trm, trv = (torch.tensor(t.numpy()) for t in (x, rm, rv))
    for _ in range(2):                           # the update composes over steps
        lt.nn.functional.batch_norm(x, rm, rv, training=True)
        torch.nn.functional.batch_norm(tx, trm, trv, training=True)
    torch.testing.assert_close(torch.tensor(rm.numpy()), trm)
    torch.testing.assert_close(torch.tensor(rv.numpy()), trv)


NORM_ERRORS = [
    (lambda m, x: fn(m).batch_norm(x, m.zeros(3), m.ones(3), weight=m.ones(4)), RuntimeError,
     ("batch_norm", "weight should contain 3 elements not 4")),
    (lambda m, x: fn(m).batch_norm(x, m.zeros(4), m.ones(4)), RuntimeError, ("running_mean should contain 3",)),
    (lambda m, x: fn(m).batch_norm(x, None, None), RuntimeError, ("running_mean must be defined",)),
    (lambda m, x: fn(m).batch_norm(x[:1, :, :1], None, None, training=True), ValueError,
     ("Expected more than 1 value per channel",)),
    (lambda m, x: fn(m).group_norm(x, 2), RuntimeError, ("group_norm", "divisible by num_groups")),
    (lambda m, x: fn(m).group_norm(x, 3, m.ones(2)), RuntimeError, ("weight",)),
    (lambda m, x: fn(m).local_response_norm(x[0], 2), ValueError, ("3D or higher",)),
    (lambda m, x: fn(m).instance_norm(x[:, :, :1]), ValueError, ("more than 1 spatial element",)),
    (lambda m, x: fn(m).batch_norm(x.long(), m.zeros(3), m.ones(3)), NotImplementedError, ("batch_norm", "int64")),
]


@pytest.mark.parametrize("case", range(len(NORM_ERRORS)))
def test_norm_errors(case):
    call, exc, match = NORM_ERRORS[case]
    x = sample((2, 3, 4))
    with pytest.raises(exc):
        call(torch, x.torch)
    check_error(call, x, exc=exc, match=match)

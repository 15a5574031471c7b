"""Gradients of every differentiable op against torch autograd, with a random cotangent.

Each case (tests/autograd_cases.py) runs per op on the reference executor in float64;
on cpu and metal-emu a sample of cases' gradients are built lazily and evaluated as ONE program
(so the generated-code backends compile once), then compared case by case.  A float64
numerical gradcheck (central differences, evaluated lazily too) covers a sample of ops.
"""
from __future__ import annotations

import numpy as np
import pytest
import torch

import lazytorch as lt
from autograd_cases import CASES, make_inputs

TOL = {"float32": dict(rtol=2e-4, atol=2e-5), "float64": dict(rtol=1e-9, atol=1e-10)}
NP = {"float32": np.float32, "float64": np.float64}
# The generated-code backends compile every kernel of a program (metal-emu slowly), so they get a
# sample: the composites' row kernels, views and in-place writes, scatters, broadcasting and
# reductions.  The reference executor runs every case (the rules are the same IR on every backend).
CODEGEN_CASES = {
    "cpu": ["softmax", "log_softmax", "layer_norm", "rms_norm", "cross_entropy_sum_ls", "sdpa_causal", "embedding",
            "linear", "matmul_batched_bcast", "setitem_view", "inplace_chain", "slice_step", "cat", "gather",
            "add_bcast", "div_bcast", "maximum", "where", "amax_dim", "var_dim", "sum_dims_keep", "gelu", "tanh",
            "conv2d", "conv2d_s1_groups", "conv2d_s1_many_channels", "conv_transpose2d", "max_pool2d_overlap",
            "expand", "to_float64", "conv_transpose2d_gaps", "conv_transpose2d_one_position", "conv2d_gaps",
            "max_pool2d_disjoint_odd"],
    "metal-emu": ["layer_norm", "cross_entropy", "setitem_view", "mul_bcast"],
}


def _build(name: str, dtype: str, seed: int = 0):
    """The lazy gradients of case `name` and torch's, for a random cotangent."""
    fn, specs = CASES[name]
    arrays = make_inputs(specs, seed)
    lt_dtype, t_dtype = getattr(lt, dtype), getattr(torch, dtype)
    lt_in, t_in, diff = [], [], []
    for a in arrays:
        if a.dtype.kind == "f":
            a = a.astype(NP[dtype])
            lt_in.append(lt.tensor(a, dtype=lt_dtype, requires_grad=True))
            t_in.append(torch.tensor(a, dtype=t_dtype, requires_grad=True))
            diff.append(len(lt_in) - 1)
        else:
            lt_in.append(lt.tensor(a))
            t_in.append(torch.tensor(a))
    t_out = fn(torch, *t_in)
    lt_out = fn(lt, *lt_in)
    assert tuple(lt_out.shape) == tuple(t_out.shape), name
    cot = np.random.default_rng(seed + 1).standard_normal(tuple(t_out.shape)).astype(NP[str(t_out.dtype)[6:]])
    lt_grads = lt.autograd.grad(lt_out, [lt_in[i] for i in diff], lt.tensor(cot, dtype=lt_out.dtype),
                                allow_unused=True)
    t_grads = torch.autograd.grad(t_out, [t_in[i] for i in diff], torch.tensor(cot), allow_unused=True)
    return lt_grads, t_grads


def _compare(name: str, dtype: str, lt_grads, t_grads) -> list[str]:
    bad = []
    for i, (g, tg) in enumerate(zip(lt_grads, t_grads)):
        if tg is None:
            if g is not None:
                assert not np.any(g.numpy()), f"{name}: input {i} is unused by torch but got a non-zero grad"
            continue
        assert g is not None, f"{name}: input {i} got no gradient"
        got, want = g.numpy(), tg.detach().numpy()
        assert got.shape == want.shape and got.dtype == want.dtype, (name, got.shape, want.shape, got.dtype)
        if not np.allclose(got, want, equal_nan=True, **TOL[dtype]):
            bad.append(f"{name}[{i}] max abs diff {np.nanmax(np.abs(got - want)):.3g}")
    return bad


@pytest.mark.parametrize("dtype", ["float64"])   # float32: the one-program tests below
@pytest.mark.parametrize("name", sorted(CASES))
def test_grad_reference(name, dtype):
    previous = lt.get_backend()
    lt.set_backend("reference")
    try:
        bad = _compare(name, dtype, *_build(name, dtype))
    finally:
        lt.set_backend(previous)
    assert not bad, bad


@pytest.mark.parametrize("backend_name,dtype", [("cpu", "float32"), ("metal-emu", "float32")])
def test_grads_one_program(backend_name, dtype):
    """Every case's gradients as one lazy program on a code-generating backend."""
    previous = lt.get_backend()
    lt.set_backend(backend_name)
    try:
        built = {name: _build(name, dtype) for name in CODEGEN_CASES[backend_name]}
        lt.eval(*[g for lt_grads, _ in built.values() for g in lt_grads if g is not None])
        bad = [msg for name, (g, tg) in built.items() for msg in _compare(name, dtype, g, tg)]
    finally:
        lt.set_backend(previous)
    assert not bad, bad


GRADCHECK = ["tanh", "div_bcast", "log_softmax", "layer_norm", "cross_entropy", "var_dim", "gather",
             "setitem_view", "conv2d_groups_dil", "conv2d_s1_groups", "conv2d_s1_many_channels", "conv_transpose1d_dil",
             "max_pool2d_overlap"]


@pytest.mark.parametrize("name", GRADCHECK)
def test_numerical_gradcheck(name):
    """float64 central differences of <cotangent, f(x)> against the analytic gradient."""
    fn, specs = CASES[name]
    arrays = make_inputs(specs, 3)
    base = [lt.tensor(a, dtype=lt.float64 if a.dtype.kind == "f" else None) for a in arrays]
    floats = [i for i, a in enumerate(arrays) if a.dtype.kind == "f"]
    for i in floats:
        base[i].requires_grad_()
    out = fn(lt, *base)
    cot = np.random.default_rng(4).standard_normal(tuple(out.shape))
    grads = lt.autograd.grad(out, [base[i] for i in floats], lt.tensor(cot), allow_unused=True)
    eps = 1e-6
    with lt.no_grad():
        for k, i in enumerate(floats):
            a = arrays[i]
            probes = []
            picked = np.random.default_rng(5).choice(a.size, size=min(a.size, 4), replace=False)
            for j in picked:
                for sign in (1, -1):
                    shifted = a.copy().reshape(-1)
                    shifted[j] += sign * eps
                    args = list(base)
                    args[i] = lt.tensor(shifted.reshape(a.shape))
                    probes.append((fn(lt, *args) * lt.tensor(cot)).sum())
            lt.eval(*probes)
            numeric = np.array([(probes[2 * j].item() - probes[2 * j + 1].item()) / (2 * eps)
                                for j in range(len(picked))])
            analytic = np.zeros(a.size) if grads[k] is None else grads[k].numpy().reshape(-1)
            analytic = analytic[picked]
            np.testing.assert_allclose(analytic, numeric, rtol=1e-5, atol=1e-6, err_msg=name)


TIES = [
    ("max dim", lambda m, x: m.max(x, 1).values),
    ("min dim keepdim", lambda m, x: m.min(x, 0, keepdim=True).values),
    ("max_pool2d after relu", lambda m, x: m.nn.functional.max_pool2d(m.relu(x).unsqueeze(0), 3, stride=2, padding=1)),
    ("max_pool1d", lambda m, x: m.nn.functional.max_pool1d(x.flatten(1).unsqueeze(0), 2)),
    ("amax splits", lambda m, x: m.amax(x, (0, 1))),
    ("max splits", lambda m, x: m.max(x)),
]


@pytest.mark.parametrize("name,fn", TIES, ids=[t[0] for t in TIES])
def test_tied_extremes_route_the_gradient_as_torch(name, fn, backend):
    """torch's max(dim)/min(dim) and max pooling send each slice's gradient to its index, the first
    extreme (a NaN counts as one); amax and the full max split it among ties.  Inputs with many ties
    (rounded values, zeros after relu) and NaN rows (ir/registry/reduction.yaml amax_first)."""
    x = np.round(np.random.default_rng(0).standard_normal((6, 8)), 0).astype(np.float32)
    if name.startswith(("max dim", "min dim")):
        x[2, 3] = x[4, 0] = x[4, 5] = np.nan
    lx, tx = lt.tensor(x, requires_grad=True), torch.tensor(x, requires_grad=True)
    g = np.random.default_rng(1).standard_normal(tuple(fn(torch, tx).shape)).astype(np.float32)
    (fn(lt, lx) * lt.tensor(g)).sum().backward()
    (fn(torch, tx) * torch.tensor(g)).sum().backward()
    np.testing.assert_allclose(lx.grad.numpy(), tx.grad.numpy(), rtol=1e-6, atol=1e-6)

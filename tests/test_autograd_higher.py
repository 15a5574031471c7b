"""Higher-order gradients (create_graph=True): the gradient is recorded like any forward value, so
it differentiates again; second derivatives of a sample of primitives and composites vs torch."""
from __future__ import annotations

import numpy as np
import pytest
import torch

import lazytorch as lt

F_LT, F_T = lt.nn.functional, torch.nn.functional

CASES = {
    "exp": lambda m, x: x.exp(),
    "log": lambda m, x: (x.abs() + 1).log(),
    "tanh": lambda m, x: x.tanh(),
    "sigmoid": lambda m, x: x.sigmoid(),
    "sin_cos": lambda m, x: x.sin() * x.cos(),
    "sqrt_rsqrt": lambda m, x: (x.abs() + 1).sqrt() + (x * x + 1).rsqrt(),
    "pow_div": lambda m, x: x ** 3 / (x * x + 2),
    "gelu_silu": lambda m, x: F(m).gelu(x) + F(m).silu(x),
    "relu_where": lambda m, x: F(m).relu(x) * x + m.where(x > 0, x * x, -x),
    "sum_mean_broadcast": lambda m, x: x * x.sum(1, keepdim=True) + x.mean(0),
    "amax_logsumexp": lambda m, x: x * x.amax(1, keepdim=True) + x.logsumexp(1, keepdim=True),
    "softmax_log_softmax": lambda m, x: x.softmax(-1) * x + x.log_softmax(0),
    "layer_norm": lambda m, x: F(m).layer_norm(x * x, (5,)),
    "matmul_views": lambda m, x: (x @ x.transpose(0, 1)) @ x[:, 1:3].flip(0) + x.t()[:2].t() * x[:, 3:],
    "cross_entropy": lambda m, x: F(m).cross_entropy(x, m.tensor([1, 0, 4, 2])),
    "var_norm": lambda m, x: x.var(1, keepdim=True) * x + x.norm(),
    "cat_split": lambda m, x: m.cat(list(x.split(2, 1))[::-1], 1) * x,
}


def F(m):
    return F_LT if m is lt else F_T


@pytest.mark.parametrize("name", sorted(CASES))
def test_second_derivative_matches_torch(name):
    """d/dx of <dy/dx, r> for y = f(x) and a random cotangent, float64 on the reference executor."""
    previous = lt.get_backend()
    lt.set_backend("reference")
    try:
        rng = np.random.default_rng(1)
        xv = rng.standard_normal((4, 5))
        out_shape = tuple(CASES[name](torch, torch.tensor(xv)).shape)
        c, r = rng.standard_normal(out_shape), rng.standard_normal((4, 5))
        results = []
        for m in (lt, torch):
            x = m.tensor(xv, requires_grad=True)
            y = CASES[name](m, x)
            (g,) = m.autograd.grad(y, x, grad_outputs=m.tensor(c), create_graph=True)
            (h,) = m.autograd.grad((g * m.tensor(r)).sum(), x)
            results.append((g.detach().numpy(), h.detach().numpy()))
        (g1, h1), (g2, h2) = results
        np.testing.assert_allclose(g1, g2, rtol=1e-9, atol=1e-10)
        np.testing.assert_allclose(h1, h2, rtol=1e-9, atol=1e-10)
    finally:
        lt.set_backend(previous)


@pytest.mark.filterwarnings(r"ignore:Using backward\(\) with create_graph")
def test_backward_create_graph_accumulates_a_differentiable_grad(backend):
    """backward(create_graph=True): .grad requires grad; a gradient penalty trains through it."""
    rng = np.random.default_rng(0)
    xv, wv = rng.standard_normal((3, 4)).astype(np.float32), rng.standard_normal((4, 2)).astype(np.float32)
    out = []
    for m in (lt, torch):
        x, w = m.tensor(xv, requires_grad=True), m.tensor(wv, requires_grad=True)
        ((x @ w).tanh() ** 2).sum().backward(create_graph=True)
        assert x.grad.requires_grad
        penalty = (x.grad ** 2).sum()
        (gw,) = m.autograd.grad(penalty, w)
        out.append((x.grad.detach().numpy(), gw.detach().numpy()))
    np.testing.assert_allclose(out[0][0], out[1][0], rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(out[0][1], out[1][1], rtol=1e-4, atol=1e-5)


def test_without_create_graph_the_gradient_is_a_constant():
    x = lt.tensor(np.ones(3), requires_grad=True)
    (g,) = lt.autograd.grad((x ** 3).sum(), x)
    assert not g.requires_grad and g.grad_fn is None

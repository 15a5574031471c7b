"""Optimizers, lr schedulers and gradient clipping against torch, step by step."""
from __future__ import annotations

import numpy as np
import pytest
import torch

import lazytorch as lt

SHAPES = [(4, 3), (5,), ()]

CONFIGS = [
    ("SGD", dict(lr=0.1)),
    ("SGD", dict(lr=0.1, momentum=0.9, dampening=0.1, weight_decay=0.01)),
    ("SGD", dict(lr=0.05, momentum=0.9, nesterov=True, maximize=True)),
    ("Adam", dict(lr=0.01)),
    ("Adam", dict(lr=0.01, betas=(0.8, 0.99), weight_decay=0.1, amsgrad=True, maximize=True)),
    ("AdamW", dict(lr=0.01, weight_decay=0.1)),
    ("AdamW", dict(lr=0.02, amsgrad=True, eps=1e-6)),
    ("RMSprop", dict(lr=0.01)),
    ("RMSprop", dict(lr=0.01, momentum=0.5, centered=True, weight_decay=0.1)),
]


def _data(steps: int, dtype):
    rng = np.random.default_rng(0)
    init = [rng.standard_normal(s).astype(dtype) for s in SHAPES]
    grads = [[rng.standard_normal(s).astype(dtype) for s in SHAPES] for _ in range(steps)]
    return init, grads


# every config on the reference executor; the richest on the cpu code generator as well (metal-emu
# compiles too slowly for the suite; the update is ordinary pointwise IR)
RUNS = [("reference", n, k) for n, k in CONFIGS] + [("cpu", *CONFIGS[4])]


@pytest.mark.parametrize("backend_name,name,kwargs", RUNS,
                         ids=[f"{b}-{n}-{i}" for i, (b, n, _) in enumerate(RUNS)])
def test_optimizer_matches_torch(backend_name, name, kwargs):
    previous = lt.get_backend()
    lt.set_backend(backend_name)
    try:
        _run_optimizer(name, kwargs)
    finally:
        lt.set_backend(previous)


def _run_optimizer(name, kwargs):
    init, grads = _data(4, np.float32)
    lp = [lt.tensor(a, requires_grad=True) for a in init]
    tp = [torch.tensor(a, requires_grad=True) for a in init]
    # two param groups, the second with its own lr
    lopt = getattr(lt.optim, name)([{"params": lp[:2]}, {"params": lp[2:], "lr": 0.3}], **kwargs)
    topt = getattr(torch.optim, name)([{"params": tp[:2]}, {"params": tp[2:], "lr": 0.3}], **kwargs)
    for step in grads:
        for p, q, g in zip(lp, tp, step):
            p.grad, q.grad = lt.tensor(g), torch.tensor(g)
        lopt.step()
        topt.step()
        for p, q in zip(lp, tp):
            np.testing.assert_allclose(p.numpy(), q.detach().numpy(), rtol=2e-6, atol=1e-6)
        lopt.zero_grad()
        topt.zero_grad()
        assert all(p.grad is None for p in lp)
    lstate, tstate = lopt.state_dict(), topt.state_dict()
    assert sorted(lstate["state"]) == sorted(tstate["state"])
    for i, s in tstate["state"].items():
        for k, v in s.items():
            mine = lstate["state"][i][k]
            if k == "step":
                assert float(mine) == float(v)
            elif v is not None:
                np.testing.assert_allclose(mine.numpy(), v.numpy(), rtol=2e-6, atol=1e-6, err_msg=k)


def test_state_dict_round_trip_and_zero_grad():
    init, grads = _data(3, np.float32)
    make = lambda: [lt.tensor(a, requires_grad=True) for a in init]  # noqa: E731
    a, b = make(), make()
    oa, ob = lt.optim.AdamW(a, lr=0.01), lt.optim.AdamW(b, lr=0.5)
    for p, g in zip(a, grads[0]):
        p.grad = lt.tensor(g)
    oa.step()
    for p, q in zip(a, b):
        with lt.no_grad():
            q.copy_(p) if hasattr(q, "copy_") else q._rebind(p.node)
    ob.load_state_dict(oa.state_dict())
    assert ob.param_groups[0]["lr"] == 0.01
    for p, q, g in zip(a, b, grads[1]):
        p.grad, q.grad = lt.tensor(g), lt.tensor(g)
    oa.step()
    ob.step()
    for p, q in zip(a, b):
        np.testing.assert_array_equal(p.numpy(), q.numpy())
    oa.zero_grad(set_to_none=False)
    assert all(p.grad is not None and not p.grad.numpy().any() for p in a)


@pytest.mark.parametrize("name,kwargs", [CONFIGS[2], CONFIGS[4], CONFIGS[8]], ids=["SGD", "Adam", "RMSprop"])
def test_state_made_at_first_step(name, kwargs):
    """A parameter that did not require grad when its group was added gets its state (zeros) at its
    first step, as torch makes it then."""
    init, grads = _data(2, np.float32)
    lp, tp = lt.tensor(init[0]), torch.tensor(init[0])
    lopt, topt = getattr(lt.optim, name)([lp], **kwargs), getattr(torch.optim, name)([tp], **kwargs)
    lp.requires_grad_(True)
    tp.requires_grad_(True)
    for g in grads:
        lp.grad, tp.grad = lt.tensor(g[0]), torch.tensor(g[0])
        lopt.step()
        topt.step()
        np.testing.assert_allclose(lp.numpy(), tp.detach().numpy(), rtol=2e-6, atol=1e-6)
    assert sorted(lopt.state_dict()["state"][0]) == sorted(topt.state_dict()["state"][0])


def test_optimizer_errors():
    with pytest.raises(ValueError, match="empty parameter list"):
        lt.optim.SGD([], lr=0.1)
    with pytest.raises(ValueError, match="Invalid learning rate"):
        lt.optim.Adam([lt.zeros(2, requires_grad=True)], lr=-1.0)
    with pytest.raises(ValueError, match="Nesterov"):
        lt.optim.SGD([lt.zeros(2, requires_grad=True)], lr=0.1, nesterov=True)
    x = lt.zeros(2, requires_grad=True)
    with pytest.raises(ValueError, match="non-leaf"):
        lt.optim.SGD([x * 2], lr=0.1)
    with pytest.raises(ValueError, match="more than one parameter group"):
        lt.optim.SGD([{"params": [x]}, {"params": [x]}], lr=0.1)


SCHEDULERS = [
    ("StepLR", dict(step_size=3, gamma=0.5)),
    ("CosineAnnealingLR", dict(T_max=7, eta_min=0.001)),
    ("LambdaLR", dict(lr_lambda=lambda e: 0.9 ** e)),
    ("LinearLR", dict(start_factor=0.2, total_iters=5)),
    ("OneCycleLR", dict(max_lr=0.5, total_steps=20)),
    ("OneCycleLR", dict(max_lr=0.5, total_steps=20, three_phase=True, anneal_strategy="linear")),
]


@pytest.mark.parametrize("name,kwargs", SCHEDULERS, ids=[f"{n}-{i}" for i, (n, _) in enumerate(SCHEDULERS)])
def test_lr_scheduler_matches_torch(name, kwargs):
    lopt = lt.optim.SGD([lt.zeros(2, requires_grad=True)], lr=0.1, momentum=0.9)
    topt = torch.optim.SGD([torch.zeros(2, requires_grad=True)], lr=0.1, momentum=0.9)
    ls = getattr(lt.optim.lr_scheduler, name)(lopt, **kwargs)
    ts = getattr(torch.optim.lr_scheduler, name)(topt, **kwargs)
    for _ in range(19):
        assert ls.get_last_lr() == ts.get_last_lr()
        assert lopt.param_groups[0]["momentum"] == topt.param_groups[0]["momentum"]
        topt.step()
        lopt.step()
        ls.step()
        ts.step()


@pytest.mark.parametrize("norm_type", [2.0, 1.0, float("inf")])
def test_clip_grad_norm_matches_torch(norm_type):
    rng = np.random.default_rng(1)
    arrays = [rng.standard_normal(s).astype(np.float32) * 3 for s in [(4, 3), (7,)]]
    lp = [lt.zeros(a.shape, requires_grad=True) for a in arrays]
    tp = [torch.zeros(a.shape, requires_grad=True) for a in arrays]
    for p, q, a in zip(lp, tp, arrays):
        p.grad, q.grad = lt.tensor(a), torch.tensor(a)
    ln = lt.nn.utils.clip_grad_norm_(lp, 1.5, norm_type)
    tn = torch.nn.utils.clip_grad_norm_(tp, 1.5, norm_type)
    np.testing.assert_allclose(ln.item(), tn.item(), rtol=1e-6)
    for p, q in zip(lp, tp):
        np.testing.assert_allclose(p.grad.numpy(), q.grad.numpy(), rtol=1e-6, atol=1e-7)
    for p, q in zip(lp, tp):                     # clamp the same values: equal to the last bit
        q.grad = torch.tensor(p.grad.numpy().copy())
    lt.nn.utils.clip_grad_value_(lp, 0.1)
    torch.nn.utils.clip_grad_value_(tp, 0.1)
    for p, q in zip(lp, tp):
        np.testing.assert_array_equal(p.grad.numpy(), q.grad.numpy())

"""An optimizer's update replayed from one recording per group (lazytorch/optim: `sgd_replayed`,
`adam_replayed`, `rmsprop_replayed`; ir/build.py recorded): the same numbers as torch step by step
while the learning rate (and OneCycleLR's momentum or beta1) change every step, no recompile for
them, no builder call once a group's update is recorded, and the general build where a group can't
be recorded."""
from __future__ import annotations

import numpy as np
import pytest
import torch

import lazytorch as lt
from lazytorch.ir import replay
from lazytorch.optim import adam, rmsprop, sgd

CONFIGS = [
    ("SGD", dict(lr=0.1)),
    ("SGD", dict(lr=0.1, momentum=0.9)),
    ("SGD", dict(lr=0.1, momentum=0.9, nesterov=True, weight_decay=0.01)),
    ("SGD", dict(lr=0.1, momentum=0.8, dampening=0.3, maximize=True)),      # first buffer: a clone of g
    ("Adam", dict(lr=0.01)),
    ("AdamW", dict(lr=0.01)),
    ("Adam", dict(lr=0.01, betas=(0.8, 0.99), weight_decay=0.1, amsgrad=True, maximize=True)),
    ("RMSprop", dict(lr=0.01, momentum=0.5, centered=True, weight_decay=0.1)),
]
SHAPES = [(4, 3), (5,), (), (4, 3)]
MODULES = {"SGD": sgd, "Adam": adam, "AdamW": adam, "RMSprop": rmsprop}
replaying = pytest.mark.skipif(not replay.ENABLED or replay.CHECK,
                               reason="replays are off, or checked against a general build (which calls the builders)")


def _same_grads(rng, lp, tp) -> None:
    """One random float32 gradient per parameter pair, the same for lazytorch's and torch's."""
    for p, q in zip(lp, tp):
        g = rng.standard_normal(tuple(p.shape)).astype(np.float32)
        p.grad, q.grad = lt.tensor(g), torch.tensor(g)


def _pairs(rng, dtypes=None):
    arrays = [rng.standard_normal(s).astype((dtypes or {}).get(i, np.float32)) for i, s in enumerate(SHAPES)]
    return [lt.tensor(a, requires_grad=True) for a in arrays], [torch.tensor(a, requires_grad=True) for a in arrays]


def _same(lp, tp, rtol=2e-6, atol=1e-6):
    for p, q in zip(lp, tp):
        np.testing.assert_allclose(p.numpy(), q.detach().numpy(), rtol=rtol, atol=atol)


# (conftest.py's autouse _backend_restored puts the previous backend back after each test)
@pytest.fixture
def on_reference():
    lt.set_backend("reference")


@pytest.fixture
def on_cpu():
    lt.set_backend("cpu")


@pytest.mark.parametrize("name,kwargs", CONFIGS, ids=[f"{n}-{i}" for i, (n, _) in enumerate(CONFIGS)])
def test_replayed_updates_match_torch_as_the_lr_changes(name, kwargs, on_reference):
    """Two groups (the second with its own lr), one float64 parameter beside float32 ones, one
    parameter that never has a gradient and one that skips a step; the lr of every group changes
    before every step.  Parameters and state equal torch's after every step."""
    rng = np.random.default_rng(0)
    lp, tp = _pairs(rng, {1: np.float64})
    idle_l, idle_t = lt.zeros(3, requires_grad=True), torch.zeros(3, requires_grad=True)
    lopt = getattr(lt.optim, name)([{"params": lp[:3] + [idle_l]}, {"params": lp[3:], "lr": 0.3}], **kwargs)
    topt = getattr(torch.optim, name)([{"params": tp[:3] + [idle_t]}, {"params": tp[3:], "lr": 0.3}], **kwargs)
    for step in range(6):
        for p, q in zip(lp, tp):
            if step == 3 and p is lp[2]:             # skips this step (its state's count stays behind)
                continue
            g = rng.standard_normal(tuple(p.shape)).astype(p.numpy().dtype)
            p.grad, q.grad = lt.tensor(g), torch.tensor(g)
        for opt in (lopt, topt):
            for group in opt.param_groups:
                group["lr"] *= 0.7
        lopt.step()
        topt.step()
        _same(lp, tp)
        assert not idle_l.numpy().any()
        lopt.zero_grad()
        topt.zero_grad()
    lstate, tstate = lopt.state_dict()["state"], topt.state_dict()["state"]
    assert sorted(lstate) == sorted(tstate)
    for i, s in tstate.items():
        for k, v in s.items():
            if k == "step":
                assert float(lstate[i][k]) == float(v)
            else:
                np.testing.assert_allclose(lstate[i][k].numpy(), v.numpy(), rtol=2e-6, atol=1e-6, err_msg=k)


@replaying
@pytest.mark.parametrize("name,kwargs", CONFIGS, ids=[f"{n}-{i}" for i, (n, _) in enumerate(CONFIGS)])
def test_an_update_replays_without_a_builder_call(name, kwargs, on_reference, monkeypatch):
    """From the second step on (the first with dampening, whose buffer starts as a clone, has its own
    form), a group's update builds no node through `call`: it replays the recording, over the new
    gradients and with each step's lr, momentum and betas."""
    rng = np.random.default_rng(1)
    lp, tp = _pairs(rng)
    lopt, topt = getattr(lt.optim, name)(lp, **kwargs), getattr(torch.optim, name)(tp, **kwargs)
    module = MODULES[name]
    calls = []
    real = module.call
    monkeypatch.setattr(module, "call", lambda *a, **k: calls.append(a[0]) or real(*a, **k))
    for step in range(4):
        _same_grads(rng, lp, tp)
        for opt in (lopt, topt):
            group = opt.param_groups[0]
            group["lr"] *= 0.5
            if "betas" in group:
                group["betas"] = (group["betas"][0] * 0.9, group["betas"][1])
            elif group.get("momentum"):
                group["momentum"] *= 0.9
        calls.clear()
        lopt.step()
        topt.step()
        _same(lp, tp)
        if step >= 2:
            assert calls == [], f"step {step} built its update through `call`"
        else:
            assert calls or step == 1, "the first step builds its update"


def test_a_group_that_cant_be_recorded_is_built(on_reference):
    """Two parameters given the same gradient tensor: a recorded build takes each node once
    (ir/replay.py signature), so the group is built the general way, every step, with torch's
    numbers."""
    rng = np.random.default_rng(2)
    arrays = [rng.standard_normal((3, 2)).astype(np.float32) for _ in range(2)]
    lp = [lt.tensor(a, requires_grad=True) for a in arrays]
    tp = [torch.tensor(a, requires_grad=True) for a in arrays]
    lopt, topt = lt.optim.Adam(lp, lr=0.05), torch.optim.Adam(tp, lr=0.05)
    for _ in range(3):
        g = rng.standard_normal((3, 2)).astype(np.float32)
        lg, tg = lt.tensor(g), torch.tensor(g)
        for p, q in zip(lp, tp):
            p.grad, q.grad = lg, tg
        lopt.step()
        topt.step()
        _same(lp, tp)


@pytest.mark.parametrize("name,kwargs", [("SGD", dict(lr=0.1, momentum=0.9, weight_decay=1e-3)),
                                         ("Adam", dict(lr=0.01)), ("AdamW", dict(lr=0.01))])
def test_a_schedule_recompiles_nothing(name, kwargs, on_cpu):
    """A training loop under OneCycleLR (lr and momentum or beta1 change every step) on the cpu code
    generator: from the second step on every program comes from the graph cache, and the weights
    stay torch's."""
    rng = np.random.default_rng(3)
    w, b = rng.standard_normal((3, 4)).astype(np.float32), rng.standard_normal(3).astype(np.float32)
    lm, tm = lt.nn.Linear(4, 3), torch.nn.Linear(4, 3)
    for m, lib in ((lm, lt), (tm, torch)):
        with lib.no_grad():
            m.weight.copy_(lib.tensor(w))
            m.bias.copy_(lib.tensor(b))
    lopt, topt = getattr(lt.optim, name)(lm.parameters(), **kwargs), getattr(torch.optim, name)(tm.parameters(), **kwargs)
    ls = lt.optim.lr_scheduler.OneCycleLR(lopt, max_lr=0.1, total_steps=8)
    ts = torch.optim.lr_scheduler.OneCycleLR(topt, max_lr=0.1, total_steps=8)
    misses = None
    for step in range(7):
        x = rng.standard_normal((5, 4)).astype(np.float32)
        for m, opt, sched, lib in ((lm, lopt, ls, lt), (tm, topt, ts, torch)):
            opt.zero_grad()
            m(lib.tensor(x)).square().mean().backward()
            opt.step()
            sched.step()
        _same(lm.parameters(), tm.parameters(), rtol=1e-5, atol=1e-6)
        if step == 1:
            misses = lt.cache_info().misses
    assert lt.cache_info().misses == misses, "a changed lr or momentum recompiled the step"


def test_float32_bias_corrections_replay_with_each_steps_numbers(on_reference, monkeypatch):
    """The GPU backends' bias corrections (-expm1(t * log beta) in float32: adam.py
    _bias_corrections_narrow) read lr and log(beta1) as runtime numbers too: a replay with a new lr
    and beta1 each step stays within float32 rounding of torch."""
    monkeypatch.setattr(adam, "FLOAT64_BACKENDS", frozenset())
    rng = np.random.default_rng(4)
    lp, tp = _pairs(rng)
    lopt, topt = lt.optim.AdamW(lp, lr=0.01), torch.optim.AdamW(tp, lr=0.01)
    for _ in range(5):
        _same_grads(rng, lp, tp)
        for opt in (lopt, topt):
            group = opt.param_groups[0]
            group["lr"] *= 0.8
            group["betas"] = (group["betas"][0] * 0.95, group["betas"][1])
        lopt.step()
        topt.step()
        _same(lp, tp, rtol=1e-5, atol=1e-6)


def test_equal_hyperparameters_given_as_one_object_replay_apart(on_reference):
    """lr and weight_decay written as the same literal are one float object; a recording matches a
    leaf to its argument by identity, so it must not take one for the other: when the lr changes
    later, the weight decay stays (ir/build.py recorded records over distinct copies)."""
    rng = np.random.default_rng(5)
    lp, tp = _pairs(rng)
    kwargs = dict(lr=0.01, weight_decay=0.01, eps=0.01)
    assert kwargs["lr"] is kwargs["weight_decay"]                   # (one constant of this code object)
    lopt, topt = lt.optim.Adam(lp, **kwargs), torch.optim.Adam(tp, **kwargs)
    for _ in range(4):
        _same_grads(rng, lp, tp)
        lopt.step()
        topt.step()
        _same(lp, tp)
        for opt in (lopt, topt):
            opt.param_groups[0]["lr"] *= 3.0

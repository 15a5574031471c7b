"""Training end to end: a small GPT's gradients and loss trajectory against torch from the same
weights and batches, and a 1,000-step loop whose time, memory and graph-cache misses stay flat."""
from __future__ import annotations

import gc
import os
import time

import numpy as np
import pytest
import torch

import lazytorch as lt
from gpt_functional import gpt_loss, init_params

VOCAB, BLOCK = 24, 8


@pytest.fixture
def reference_backend():
    previous = lt.get_backend()
    lt.set_backend("reference")          # the trajectory's numbers; the codegen backends compile it too slowly for CI
    yield
    lt.set_backend(previous)


def _batch(rng, batch: int = 2):
    x = rng.integers(0, VOCAB, (batch, BLOCK))
    return x, np.roll(x, -1, axis=1)


def test_gpt_gradients_match_torch(reference_backend):
    """A 2-layer GPT: every parameter's gradient within 1e-5 of torch's (max abs diff ~1e-7)."""
    P = init_params(VOCAB, 16, 2, BLOCK)
    x, y = _batch(np.random.default_rng(0))
    lp = {k: lt.tensor(v, requires_grad=True) for k, v in P.items()}
    tp = {k: torch.tensor(v, requires_grad=True) for k, v in P.items()}
    gpt_loss(lt, lp, lt.tensor(x), lt.tensor(y), 2, 2).backward()
    gpt_loss(torch, tp, torch.tensor(x), torch.tensor(y), 2, 2).backward()
    lt.eval(*[p.grad for p in lp.values()])
    diff = max(float(np.abs(lp[k].grad.numpy() - tp[k].grad.numpy()).max()) for k in P)
    assert diff < 1e-5, f"max abs gradient diff {diff}"


@pytest.mark.parametrize("optimizer", ["AdamW", "SGD"])
def test_training_trajectory_matches_torch(reference_backend, optimizer):
    """30 steps from the same weights and batches: relative loss difference per step <= 2e-3."""
    kwargs = dict(lr=1e-2, weight_decay=0.1) if optimizer == "AdamW" else dict(lr=0.1, momentum=0.9)
    P = init_params(VOCAB, 16, 1, BLOCK, seed=2)
    lp = {k: lt.tensor(v, requires_grad=True) for k, v in P.items()}
    tp = {k: torch.tensor(v, requires_grad=True) for k, v in P.items()}
    lopt = getattr(lt.optim, optimizer)(lp.values(), **kwargs)
    topt = getattr(torch.optim, optimizer)(tp.values(), **kwargs)
    lsched = lt.optim.lr_scheduler.CosineAnnealingLR(lopt, T_max=30)
    tsched = torch.optim.lr_scheduler.CosineAnnealingLR(topt, T_max=30)
    rng, rel = np.random.default_rng(3), []
    for _ in range(30):
        x, y = _batch(rng)
        for lib, params, opt, sched in ((lt, lp, lopt, lsched), (torch, tp, topt, tsched)):
            loss = gpt_loss(lib, params, lib.tensor(x), lib.tensor(y), 1, 2)
            opt.zero_grad(set_to_none=True)
            loss.backward()
            lib.nn.utils.clip_grad_norm_(params.values(), 1.0)
            opt.step()
            sched.step()
            if lib is lt:
                mine = loss.item()
            else:
                rel.append(abs(mine - loss.item()) / abs(loss.item()))
    assert max(rel) <= 2e-3, f"relative loss differences per step: {rel}"
    assert lopt.param_groups[0]["lr"] == topt.param_groups[0]["lr"]


def _rss_mb() -> float:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20


@pytest.mark.skipif(not os.path.exists("/proc/self/statm"), reason="needs /proc for RSS")
def test_loop_stays_flat():
    """1,000 steps with only loss.item() per step: no recompiles after step 2, the last 100 steps no
    slower than 1.2x steps 100-200 (each window's 20th-percentile step time: other processes on a
    shared machine only ever add time), RSS and the number of live Python objects bounded (nothing
    accumulates: no graph, no records)."""
    previous = lt.get_backend()
    lt.set_backend("cpu")
    try:
        rng = np.random.default_rng(0)
        w1 = lt.tensor(rng.standard_normal((4, 8)).astype(np.float32) * 0.5, requires_grad=True)
        w2 = lt.tensor(rng.standard_normal((8, 1)).astype(np.float32) * 0.5, requires_grad=True)
        x = lt.tensor(rng.standard_normal((16, 4)).astype(np.float32))
        y = lt.tensor(rng.standard_normal((16, 1)).astype(np.float32))
        opt = lt.optim.SGD([w1, w2], lr=0.05, momentum=0.9)
        times, losses = [], []
        for step in range(1000):
            if step == 2:
                misses = lt.cache_info().misses
            if step == 100:
                rss_100, objects_100 = _rss_mb(), len(gc.get_objects())
            t0 = time.perf_counter()
            loss = ((x @ w1).relu() @ w2 - y).pow(2).mean()
            opt.zero_grad()
            loss.backward()
            opt.step()
            losses.append(loss.item())
            times.append(time.perf_counter() - t0)
        assert lt.cache_info().misses == misses, "the step's program was recompiled after step 2"
        early, late = np.percentile(times[100:200], 20), np.percentile(times[900:1000], 20)
        assert late <= 1.2 * early, f"step time grew from {early * 1e3:.2f} ms to {late * 1e3:.2f} ms"
        assert len(gc.get_objects()) - objects_100 < 200, "live Python objects grew over 900 steps"
        assert _rss_mb() - rss_100 < 30, f"RSS grew by {_rss_mb() - rss_100:.1f} MB over 900 steps"
        assert losses[-1] < losses[0] * 0.7, "the loss did not fall"
    finally:
        lt.set_backend(previous)

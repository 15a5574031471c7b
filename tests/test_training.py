"""Training end to end: a small GPT's gradients and loss trajectory against torch from the same
weights and batches, and a 1,000-step loop whose time, memory and graph-cache misses stay flat."""
from __future__ import annotations

import gc
import os

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


def _live_lazytorch_objects() -> int:
    """Live objects of lazytorch's own types (nodes, tensors, launches, records, ...): the things a
    loop would accumulate.  Objects of other libraries (pytest, threads) do not make this noisy."""
    gc.collect()
    return sum(1 for o in gc.get_objects() if str(type(o).__dict__.get("__module__", "")).startswith("lazytorch"))


@pytest.mark.skipif(not os.path.exists("/proc/self/statm"), reason="needs /proc for RSS")
def test_loop_stays_flat():
    """1,000 steps with only loss.item() per step stay flat, by deterministic counts rather than
    timings (speed is measured in benchmarks/; a timed assertion on a shared machine is noise): no
    recompiles after step 2, the same number of cached programs run every step, the graph pending
    before loss.item() (loss, parameters, momentum) has the same size at steps 100 and 900, no live
    lazytorch objects accumulate, RSS bounded, and the loss falls."""
    from lazytorch.ir.graph import toposort
    previous = lt.get_backend()
    lt.set_backend("cpu")
    try:
        rng = np.random.default_rng(0)
        w1 = lt.tensor(rng.standard_normal((4, 8)).astype(np.float32) * 0.5, requires_grad=True)
        w2 = lt.tensor(rng.standard_normal((8, 1)).astype(np.float32) * 0.5, requires_grad=True)
        x = lt.tensor(rng.standard_normal((16, 4)).astype(np.float32))
        y = lt.tensor(rng.standard_normal((16, 1)).astype(np.float32))
        opt = lt.optim.SGD([w1, w2], lr=0.05, momentum=0.9)
        losses, pending, programs = [], {}, {}
        for step in range(1000):
            if step == 2:
                misses = lt.cache_info().misses
            if step in (100, 200, 900, 1000 - 1):
                info = lt.cache_info()
                programs[step] = info.hits + info.misses
            if step == 100:
                rss_100 = _rss_mb()
            if step == 500:
                objects_500 = _live_lazytorch_objects()
            loss = ((x @ w1).relu() @ w2 - y).pow(2).mean()
            opt.zero_grad()
            loss.backward()
            opt.step()
            if step in (100, 900):
                state = [loss, w1, w2] + [s["momentum_buffer"] for s in opt.state.values()]
                pending[step] = len(toposort([t.node for t in state]))
            losses.append(loss.item())
        objects_1000 = _live_lazytorch_objects()
        assert lt.cache_info().misses == misses, "the step's program was recompiled after step 2"
        per_step_early = (programs[200] - programs[100]) / 100
        per_step_late = (programs[999] - programs[900]) / 99
        assert per_step_early == per_step_late, \
            f"programs run per step changed from {per_step_early} to {per_step_late}"
        assert pending[900] == pending[100], f"the pending graph grew from {pending[100]} to {pending[900]} nodes"
        grown = objects_1000 - objects_500
        assert grown < 50, f"{grown} more live lazytorch objects after 500 more steps"
        assert _rss_mb() - rss_100 < 30, f"RSS grew by {_rss_mb() - rss_100:.1f} MB over 900 steps"
        assert losses[-1] < losses[0] * 0.7, "the loss did not fall"
    finally:
        lt.set_backend(previous)


def test_nn_module_gpt_gradients_match_torch(reference_backend):
    """examples/train_gpt.py's GPT (nn.Embedding, LayerNorm, Linear with tied weights, causal attention)
    built with lazytorch.nn and torch.nn from the same weights (1 block): every parameter's gradient."""
    import sys
    from pathlib import Path
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "examples"))
    import train_gpt as tg
    cfg = tg.Config(vocab=VOCAB, block=BLOCK, n_layer=1, n_head=2, n_embd=16)
    x, y = _batch(np.random.default_rng(5))
    mine, ref = tg.Trainer(lt, cfg, 10, 1e-3), None
    weights = {k: v.numpy().copy() for k, v in mine.model.state_dict().items()}
    ref = tg.Trainer(torch, cfg, 10, 1e-3, weights)
    loss = mine.loss_and_backward(x, y)
    ref_loss = ref.loss_and_backward(x, y)
    assert abs(loss.item() - ref_loss.item()) < 1e-5
    theirs = dict(ref.model.named_parameters())
    for name, p in mine.model.named_parameters():
        np.testing.assert_allclose(p.grad.numpy(), theirs[name].grad.numpy(), rtol=1e-4, atol=1e-6, err_msg=name)



def test_gan_steps_match_torch(on_cpu):
    """Three DCGAN steps (tests/gan_models.py: the discriminator on real and detached fake images,
    then the generator through it; BCE, Adam) on the cpu backend, where transposed convolutions are
    products and col2im kernels and their backward the adjoint products: losses per step and the
    generator's weights after them agree with torch's from the same start."""
    from gan_models import dcgan, gan_step
    torch.manual_seed(0)
    tg, td = dcgan(torch.nn, nz=8, nf=4, size=16)
    lg, ld = dcgan(lt.nn, nz=8, nf=4, size=16)
    for t, m in ((tg, lg), (td, ld)):
        m.load_state_dict(t.state_dict())
    rng, losses = np.random.default_rng(0), {torch: [], lt: []}
    batches = [(rng.standard_normal((4, 3, 16, 16)).astype(np.float32), rng.standard_normal((4, 8, 1, 1)).astype(np.float32))
               for _ in range(3)]
    for lib, g, d in ((torch, tg, td), (lt, lg, ld)):
        opt_g = lib.optim.Adam(g.parameters(), lr=2e-3, betas=(0.5, 0.999))
        opt_d = lib.optim.Adam(d.parameters(), lr=2e-3, betas=(0.5, 0.999))
        for real, noise in batches:
            err_d, err_g = gan_step(lib, g, d, opt_g, opt_d, lib.tensor(real), lib.tensor(noise))
            losses[lib].append((err_d.item(), err_g.item()))
    np.testing.assert_allclose(losses[lt], losses[torch], rtol=1e-4)
    for (name, tp), lp in zip(tg.state_dict().items(), lg.state_dict().values()):
        np.testing.assert_allclose(lp.numpy(), tp.numpy(), rtol=1e-4, atol=1e-5, err_msg=name)


def test_a_batchnorm_loop_compiles_its_step_once():
    """A lazy training loop over BatchNorm layers compiles its step's program once, also after an
    eval inside one step.  Two causes of a recompile each many steps: the running statistics a
    step's evaluation syncs are roots of its program, and their order followed which tensors an
    earlier eval had parked (realize.py in_program_order: by the program's structure now); and
    every 64th update of a parameter looked how deep its pending value was along first *pending*
    inputs, which led into its gradient's graph, so the update was evaluated mid-step (tensor.py
    _pending_depth: along first inputs now, the value an in-place update updates)."""
    previous = lt.get_backend()
    lt.set_backend("cpu")
    try:
        lt.manual_seed(0)
        layers = []
        for _ in range(16):
            layers += [lt.nn.Linear(8, 8), lt.nn.BatchNorm1d(8), lt.nn.ReLU()]
        net = lt.nn.Sequential(*layers, lt.nn.Linear(8, 1))
        x, y = lt.randn(16, 8), lt.randn(16, 1)
        opt = lt.optim.SGD(net.parameters(), lr=0.01)       # (p.add(g): its first pending input is g)
        missed = {}
        for step in range(140):
            before = lt.cache_info().misses
            opt.zero_grad()
            if step == 30:                   # an eval inside the step: its own programs, once
                h = net[:9](x)
                assert np.isfinite(h.sum().item())
                out = net[9:](h)
            else:
                out = net(x)
            (out - y).pow(2).mean().backward()
            opt.step()
            if lt.cache_info().misses != before:
                missed[step] = lt.cache_info().misses - before
        later = {s: n for s, n in missed.items() if s > 1 and s != 30}
        # (what may compile later: BatchNorm's counters, evaluated every 64 updates: one program)
        assert sum(later.values()) <= 1, f"steps that compiled after step 1: {missed}"
        assert net[1].num_batches_tracked.item() == 140
    finally:
        lt.set_backend(previous)

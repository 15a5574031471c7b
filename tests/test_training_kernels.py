"""A training step's launches: the multi-tensor optimizer update, the whole GPT step against its
forward, horizontal fusion, split's gradient as one cat, and a compiled AdamW step that replays."""
from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest
import torch

import lazytorch as lt

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "examples"))
import train_gpt  # noqa: E402


def _gpt_trainer():
    _, chars = train_gpt.load_text()
    cfg = train_gpt.Config(vocab=len(chars))
    return train_gpt.Trainer(lt, cfg, 100, 3e-3), cfg


def _kernels(plan) -> int:
    return len(plan.kernels)


@pytest.mark.parametrize("backend_name,cap", [("cpu", 128), ("metal-emu", 31)])
def test_adamw_step_of_the_gpt_is_one_kernel_per_shape(backend_name, cap):
    """AdamW over the example GPT's 28 parameters (8 distinct shapes): the update is planned as one
    multi-output kernel per shape (split under the backend's buffer cap) plus one for the step
    count's bias corrections (the old plan had one kernel per parameter)."""
    previous = lt.get_backend()
    lt.set_backend(backend_name)
    try:
        trainer, _ = _gpt_trainer()
        params = list(trainer.model.parameters())
        rng = np.random.default_rng(0)
        for p in params:
            p.grad = lt.tensor(rng.standard_normal(tuple(p.shape)).astype(np.float32))
        trainer.opt.lazy_step()
        plan = lt.kernel_plan(*trainer.opt.step_tensors())
        shapes = {tuple(p.shape) for p in params}
        assert len(params) == 28 and len(shapes) == 8
        assert all(len(k.reads) + len(k.writes) <= cap for k in plan.kernels)
        if backend_name == "cpu":   # the 16 parameters of shape (64,) take 2 launches: 16 x 7 buffers
            assert _kernels(plan) == len(shapes) + 2, [k.name for k in plan.kernels]
        else:   # 7 buffers per parameter (p, m, v, g read; p, m, v written) and shared scalars
            assert len(shapes) + 1 < _kernels(plan) <= len(params) // 2 + len(shapes) + 1
    finally:
        lt.set_backend(previous)


def test_adamw_multi_tensor_matches_torch(on_cpu):
    """The fused update of the GPT's parameters equals torch's AdamW over 3 steps."""
    trainer, _ = _gpt_trainer()
    lparams = list(trainer.model.parameters())
    tparams = [torch.tensor(p.numpy(), requires_grad=True) for p in lparams]
    topt = torch.optim.AdamW(tparams, lr=3e-3, weight_decay=0.1)
    rng = np.random.default_rng(1)
    for _ in range(3):
        for lp, tp in zip(lparams, tparams):
            g = rng.standard_normal(tuple(lp.shape)).astype(np.float32)
            lp.grad, tp.grad = lt.tensor(g), torch.tensor(g)
        trainer.opt.step()
        topt.step()
    diff = max(float(np.abs(lp.numpy() - tp.detach().numpy()).max()) for lp, tp in zip(lparams, tparams))
    assert diff < 1e-6, diff
    assert float(trainer.opt.state[lparams[0]]["step"]) == 3.0


def test_gpt_training_step_within_three_times_its_forward(on_cpu):
    """forward + backward + clipping + AdamW of examples/train_gpt.py's GPT plan at most 3x the
    launches of its forward (94 against 32 when written; 170 against 34 before)."""
    trainer, cfg = _gpt_trainer()
    data, _ = train_gpt.load_text()
    x, y = next(train_gpt.batches(data, cfg, 8, seed=1))
    with lt.no_grad():
        _, loss = trainer.model(lt.tensor(x), lt.tensor(y))
        forward = _kernels(lt.kernel_plan(loss))
    trainer.loss_and_backward(x, y)
    trainer.opt.lazy_step()
    step = _kernels(lt.kernel_plan(*trainer.opt.step_tensors()))
    assert step <= 3 * forward, (step, forward)


def test_independent_same_shape_work_shares_a_launch(backend):
    """Independent pointwise chains and reductions over one domain become one launch each, with
    every value unchanged; a chain that reads another's result stays after it."""
    rng = np.random.default_rng(0)
    arrays = [rng.standard_normal((6, 5)).astype(np.float32) for _ in range(4)]
    a, b, c, d = (lt.tensor(v) for v in arrays)
    outs = [a.exp() * 2, b.sin() + 1, c.abs().sum(), d.square().sum()]
    plan = lt.kernel_plan(*outs)
    assert _kernels(plan) == 2, [k.name for k in plan.kernels]
    ta, tb, tc, td = (torch.tensor(v) for v in arrays)
    refs = [ta.exp() * 2, tb.sin() + 1, tc.abs().sum(), td.square().sum()]
    lt.eval(*outs)
    for o, r in zip(outs, refs):
        np.testing.assert_allclose(o.numpy(), r.numpy(), rtol=1e-6, atol=1e-6)
    # dependent: e reads the sum of a's chain (one row kernel, never a merge that breaks the order)
    s = (a * 3).sum()
    e = b * s
    np.testing.assert_allclose(e.numpy(), (tb * (ta * 3).sum()).numpy(), rtol=1e-5)


def test_horizontal_fusion_respects_the_buffer_cap():
    """40 independent same-shape updates on metal-emu (31 buffers per launch) split into launches
    under the cap, and compute the right values."""
    previous = lt.get_backend()
    lt.set_backend("metal-emu")
    try:
        rng = np.random.default_rng(0)
        arrays = [rng.standard_normal(7).astype(np.float32) for _ in range(40)]
        outs = [lt.tensor(v) * (k + 1) for k, v in enumerate(arrays)]
        plan = lt.kernel_plan(*outs)
        assert all(len(k.reads) + len(k.writes) <= 31 for k in plan.kernels)
        assert 2 <= _kernels(plan) <= 4
    finally:
        lt.set_backend(previous)
    for k, v in enumerate(arrays):
        np.testing.assert_allclose(outs[k].numpy(), v * (k + 1), rtol=1e-6)


def test_split_gradient_is_one_cat(backend):
    """q, k, v split from one projection, reshaped and transposed: their gradients reach the
    projection as one cat (no zero-filled write per piece), equal to torch's."""
    rng = np.random.default_rng(0)
    xv = rng.standard_normal((2, 3, 12)).astype(np.float32)
    gv = [rng.standard_normal((2, 2, 3, 2)).astype(np.float32) for _ in range(3)]

    def pieces(lib, x):
        return [t.view(2, 3, 2, 2).transpose(1, 2) for t in x.split(4, dim=2)]

    x, tx = lt.tensor(xv, requires_grad=True), torch.tensor(xv, requires_grad=True)
    loss = sum((p * lt.tensor(g)).sum() for p, g in zip(pieces(lt, x), gv))
    tloss = sum((p * torch.tensor(g)).sum() for p, g in zip(pieces(torch, tx), gv))
    loss.backward()
    tloss.backward()
    ops = [n.op for k in lt.kernel_plan(x.grad).launches for n in k.nodes]
    assert "view_assign" not in ops and ops.count("cat") == 1
    np.testing.assert_allclose(x.grad.numpy(), tx.grad.numpy(), rtol=1e-6, atol=1e-6)


def test_uneven_pieces_still_sum_correctly(backend):
    """Slices that do not tile their base (a gap) keep the per-slice writes: values as torch's."""
    xv = np.arange(10, dtype=np.float32)
    x, tx = lt.tensor(xv, requires_grad=True), torch.tensor(xv, requires_grad=True)
    (x[:3] * 2).sum().add((x[5:] * 3).sum()).backward()
    (tx[:3] * 2).sum().add((tx[5:] * 3).sum()).backward()
    np.testing.assert_allclose(x.grad.numpy(), tx.grad.numpy())


def test_compiled_adamw_step_traces_once(on_cpu):
    """forward + backward + clipping + AdamW compiled with lt.compile: one trace over 5 steps (the
    step count is a tensor, the state is made ahead), losses and weights equal to torch's."""
    torch.manual_seed(0)
    tm = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.Tanh(), torch.nn.Linear(8, 1))
    lm = lt.nn.Sequential(lt.nn.Linear(4, 8), lt.nn.Tanh(), lt.nn.Linear(8, 1))
    lm.load_state_dict(tm.state_dict())
    topt = torch.optim.AdamW(tm.parameters(), lr=0.01)
    lopt = lt.optim.AdamW(lm.parameters(), lr=0.01)

    @lt.compile
    def step(x, y):
        lopt.zero_grad(set_to_none=True)
        loss = ((lm(x) - y) ** 2).mean()
        loss.backward()
        lt.nn.utils.clip_grad_norm_(lm.parameters(), 1.0)
        lopt.step()
        return loss.detach()

    rng = np.random.default_rng(0)
    before = lt.compile_info()
    for _ in range(5):
        x, y = rng.standard_normal((6, 4)).astype(np.float32), rng.standard_normal((6, 1)).astype(np.float32)
        loss = step(lt.tensor(x), lt.tensor(y)).item()
        topt.zero_grad()
        ref = ((tm(torch.from_numpy(x)) - torch.from_numpy(y)) ** 2).mean()
        ref.backward()
        torch.nn.utils.clip_grad_norm_(tm.parameters(), 1.0)
        topt.step()
        assert abs(loss - ref.item()) < 1e-6
    after = lt.compile_info()
    assert (after.traces - before.traces, after.hits - before.hits, after.fallbacks - before.fallbacks) == (1, 5, 0)
    for lp, tp in zip(lm.parameters(), tm.parameters()):
        np.testing.assert_allclose(lp.numpy(), tp.detach().numpy(), rtol=1e-5, atol=1e-6)
    assert float(lopt.state[lm[0].weight]["step"]) == 5.0


def test_step_count_is_a_tensor_in_state_dict():
    """torch keeps `step` as a 0-d float32 tensor; so does lazytorch, through state_dict and load."""
    p = lt.tensor(np.ones(3, np.float32), requires_grad=True)
    opt = lt.optim.Adam([p], lr=0.1)
    assert opt.state_dict()["state"] == {}                  # empty until the first step, as torch's
    p.grad = lt.tensor(np.ones(3, np.float32))
    opt.step()
    opt.step()
    step = opt.state_dict()["state"][0]["step"]
    assert isinstance(step, lt.Tensor) and step.shape == () and step.dtype == lt.float32 and float(step) == 2.0
    q = lt.tensor(p.numpy().copy(), requires_grad=True)
    other = lt.optim.Adam([q], lr=0.1)
    other.load_state_dict(opt.state_dict())
    q.grad = lt.tensor(np.ones(3, np.float32))
    other.step()
    opt.step()
    assert float(other.state[q]["step"]) == 3.0 and float(opt.state[p]["step"]) == 3.0
    np.testing.assert_array_equal(q.numpy(), p.numpy())


def test_parameters_without_gradients_keep_their_own_step_count():
    """Parameters share a step count only while they step together: one that skips a step (no
    gradient) keeps torch's count."""
    a = lt.tensor(np.ones(2, np.float32), requires_grad=True)
    b = lt.tensor(np.ones(2, np.float32), requires_grad=True)
    ta, tb = (torch.ones(2, requires_grad=True) for _ in range(2))
    opt, topt = lt.optim.AdamW([a, b], lr=0.1), torch.optim.AdamW([ta, tb], lr=0.1)
    for k in range(4):
        a.grad, ta.grad = lt.tensor(np.full(2, k + 1.0, np.float32)), torch.full((2,), k + 1.0)
        if k % 2:
            b.grad, tb.grad = lt.tensor(np.full(2, -1.0, np.float32)), torch.full((2,), -1.0)
        else:
            b.grad = tb.grad = None
        opt.step()
        topt.step()
    assert float(opt.state[a]["step"]) == 4.0 and float(opt.state[b]["step"]) == 2.0
    np.testing.assert_allclose(a.numpy(), ta.detach().numpy(), rtol=1e-6)
    np.testing.assert_allclose(b.numpy(), tb.detach().numpy(), rtol=1e-6)


def test_adam_without_float64_matches_torch():
    """metal-emu has no float64 (as Metal and CUDA): the bias corrections are float32 expm1 forms,
    still within 1e-6 of torch's parameters over 10 steps (amsgrad and weight decay on)."""
    previous = lt.get_backend()
    lt.set_backend("metal-emu")
    try:
        rng = np.random.default_rng(0)
        init = [rng.standard_normal(s).astype(np.float32) for s in ((3, 4), (5,))]
        lp = [lt.tensor(a, requires_grad=True) for a in init]
        tp = [torch.tensor(a, requires_grad=True) for a in init]
        lopt = lt.optim.Adam(lp, lr=0.01, weight_decay=0.1, amsgrad=True)
        topt = torch.optim.Adam(tp, lr=0.01, weight_decay=0.1, amsgrad=True)
        for _ in range(10):
            for p, q in zip(lp, tp):
                g = rng.standard_normal(tuple(p.shape)).astype(np.float32)
                p.grad, q.grad = lt.tensor(g), torch.tensor(g)
            lopt.step()
            topt.step()
        for p, q in zip(lp, tp):
            np.testing.assert_allclose(p.numpy(), q.detach().numpy(), rtol=1e-6, atol=1e-6)
    finally:
        lt.set_backend(previous)

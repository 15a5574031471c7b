"""nn.BatchNorm1d/2d/3d against torch: training and eval forward, the running statistics a
training loop leaves (momentum, cumulative averages, num_batches_tracked), gradients of the input
and the affine parameters, the options (affine=False, track_running_stats=False), edge inputs (a
one-sample batch, a refused one, an empty one); and the build: a training forward computes the
batch statistics once for the normalisation and the running statistics (ir/build_norm.py
batch_norm_nodes), as few kernels as that, and replays its recording on the next step."""
from __future__ import annotations

import sys

import numpy as np
import pytest
import torch

import lazytorch as lt

SHAPES = {"BatchNorm1d": [(6, 4), (5, 4, 7)], "BatchNorm2d": [(3, 4, 5, 6)], "BatchNorm3d": [(2, 4, 3, 4, 5)]}
CASES = [(name, shape) for name, shapes in SHAPES.items() for shape in shapes]


def pair(name: str, seed: int = 0, **kwargs):
    """A torch layer and a lazytorch one with the same non-trivial affine terms."""
    torch.manual_seed(seed)
    tbn = getattr(torch.nn, name)(4, **kwargs)
    if tbn.affine:
        with torch.no_grad():
            tbn.weight.uniform_(0.5, 1.5)
            tbn.bias.uniform_(-1, 1)
    lbn = getattr(lt.nn, name)(4, **kwargs)
    lbn.load_state_dict(tbn.state_dict())
    return tbn, lbn


def batches(shape, n: int, seed: int = 0) -> list[np.ndarray]:
    rng = np.random.default_rng(seed)
    return [(rng.standard_normal(shape) * (1 + i) + i).astype(np.float32) for i in range(n)]


def close(got, want, rtol: float = 1e-5, atol: float = 1e-5, what: str = "") -> None:
    want = want.detach().numpy() if isinstance(want, torch.Tensor) else want
    np.testing.assert_allclose(got.numpy(), want, rtol=rtol, atol=atol, err_msg=what)


def train_steps(tbn, lbn, xs: list[np.ndarray]) -> None:
    """Training steps on both layers, comparing each step's output and gradients."""
    tbn.train(), lbn.train()
    g = np.random.default_rng(1)
    for x in xs:
        grad_out = g.standard_normal(x.shape).astype(np.float32)
        tx, lx = torch.tensor(x, requires_grad=True), lt.tensor(x, requires_grad=True)
        ty, ly = tbn(tx), lbn(lx)
        close(ly, ty, 1e-4, 1e-5, "output")
        (ty * torch.from_numpy(grad_out)).sum().backward()
        (ly * lt.from_numpy(grad_out)).sum().backward()
        close(lx.grad, tx.grad, 1e-4, 1e-4, "input's gradient")
        if tbn.affine:
            close(lbn.weight.grad, tbn.weight.grad, 1e-4, 1e-4, "weight's gradient")
            close(lbn.bias.grad, tbn.bias.grad, 1e-4, 1e-4, "bias's gradient")
            tbn.zero_grad(), lbn.zero_grad()


def same_state(tbn, lbn) -> None:
    state = lbn.state_dict()
    assert list(state) == list(tbn.state_dict())
    for key, value in tbn.state_dict().items():
        close(state[key], value, 1e-5, 1e-6, key)


@pytest.mark.parametrize("name,shape", CASES, ids=[f"{n}{list(s)}" for n, s in CASES])
@pytest.mark.parametrize("momentum", [0.1, 0.35, None], ids=["m0.1", "m0.35", "cumulative"])
def test_training_then_eval_matches_torch(name, shape, momentum, on_cpu):
    """Outputs and gradients each step; running statistics and num_batches_tracked after several
    (momentum None: the cumulative average, 1 / num_batches_tracked); then eval mode, which
    normalises by the running statistics."""
    tbn, lbn = pair(name, momentum=momentum)
    train_steps(tbn, lbn, batches(shape, 4))
    same_state(tbn, lbn)
    assert lbn.num_batches_tracked.item() == 4
    assert not lbn.running_mean.requires_grad and lbn.running_mean.grad_fn is None
    tbn.eval(), lbn.eval()
    (x,) = batches(shape, 1, seed=7)
    with torch.no_grad():
        want = tbn(torch.from_numpy(x))
    close(lbn(lt.tensor(x)), want, 1e-4, 1e-5, "eval output")
    same_state(tbn, lbn)                                   # eval mode updates nothing


@pytest.mark.parametrize("options", [{"affine": False}, {"track_running_stats": False},
                                     {"affine": False, "track_running_stats": False}],
                         ids=["affine=False", "track_running_stats=False", "neither"])
def test_options_match_torch(options, on_cpu):
    """Without affine terms; without running statistics (then eval mode, too, normalises by the
    batch's statistics)."""
    tbn, lbn = pair("BatchNorm2d", **options)
    xs = batches((3, 4, 5, 5), 3)
    train_steps(tbn, lbn, xs)
    same_state(tbn, lbn)
    assert (lbn.weight is None) == (not tbn.affine) and (lbn.running_mean is None) == (tbn.running_mean is None)
    tbn.eval(), lbn.eval()
    with torch.no_grad():
        want = tbn(torch.from_numpy(xs[0]))
    close(lbn(lt.tensor(xs[0])), want, 1e-4, 1e-5, "eval output")


def test_one_sample_batches_match_torch(on_cpu):
    """A one-sample batch trains where each channel still has more than one value (a spatial
    input); where it has one value, torch refuses it -- and has counted the batch already, but
    left the running statistics as they were."""
    tbn, lbn = pair("BatchNorm2d")
    train_steps(tbn, lbn, batches((1, 4, 3, 3), 2))
    same_state(tbn, lbn)
    tbn, lbn = pair("BatchNorm1d")
    for bn, lib in ((tbn, torch), (lbn, lt)):
        with pytest.raises(ValueError, match="Expected more than 1 value per channel when training"):
            bn(lib.ones(1, 4))
    same_state(tbn, lbn)
    assert lbn.num_batches_tracked.item() == 1
    tbn.eval(), lbn.eval()                                 # eval mode takes one sample
    x = batches((1, 4), 1)[0]
    with torch.no_grad():
        want = tbn(torch.from_numpy(x))
    close(lbn(lt.tensor(x)), want, 1e-5, 1e-6)


def test_an_empty_batch_leaves_the_running_statistics(on_cpu):
    """An empty batch gives an empty result and, as torch, is counted but changes no running
    statistic (there is no batch statistic to blend in)."""
    tbn, lbn = pair("BatchNorm2d")
    assert tuple(lbn(lt.zeros(0, 4, 2, 2)).shape) == tuple(tbn(torch.zeros(0, 4, 2, 2)).shape) == (0, 4, 2, 2)
    same_state(tbn, lbn)


def launches(tensors) -> tuple[int, int]:
    """(launches, reductions) of the tensors' pending program on the cpu backend."""
    plan = lt.realize.kernel_plan(tensors, "cpu")
    return len(plan.launches), sum(n.op == "sum" for n in plan.nodes)


def test_a_training_forward_computes_its_statistics_once(on_cpu):
    """The batch's mean and variance that normalise are the ones blended into the running
    statistics: two reductions per channel (the sum, the centred values' squared sum) in the one
    row kernel that also normalises, and one small kernel for both blends -- as in a training
    loop, with the buffers realized.  (Built apart, the running statistics' mean and variance were
    reductions of their own: four; with the gradient, a kernel more.)"""
    bn = lt.nn.BatchNorm2d(8)
    lt.eval(*bn.buffers())
    x = lt.tensor(batches((2, 8, 5, 5), 1)[0], requires_grad=True)
    y = bn(x)
    assert launches([y, bn.running_mean, bn.running_var]) == (2, 2)
    (y * y).sum().backward()
    assert launches([y, bn.running_mean, bn.running_var, x.grad, bn.weight.grad, bn.bias.grad])[0] == 3


def test_a_second_training_step_replays_its_build(monkeypatch, on_cpu):
    """A training forward of the same shapes replays the nodes the first one built (ir/build.py
    recorded): nothing goes through the builders' `call`; the results still match torch."""
    from lazytorch.ir import build_norm, replay
    if not replay.ENABLED or replay.CHECK:
        pytest.skip("replays are off, or checked against a general build (which calls the builders)")
    tbn, lbn = pair("BatchNorm2d")
    xs = batches((3, 4, 5, 5), 3)
    train_steps(tbn, lbn, xs[:1])
    calls = []
    real = build_norm.call
    monkeypatch.setattr(build_norm, "call", lambda *a, **k: calls.append(a[0]) or real(*a, **k))
    train_steps(tbn, lbn, xs[1:])
    same_state(tbn, lbn)
    assert calls == []


def test_a_training_forward_names_the_callers_line(on_cpu):
    """Every node a training forward builds, and autograd's snapshot of each, names the user's line
    that called the layer (found once per call: _BatchNorm._train_forward), on the first step and
    on a replayed one; the counter's and running statistics' too."""
    from lazytorch.autograd.state import RECORDS
    from lazytorch.ir.graph import toposort
    from lazytorch.ir.node import TRACE
    if not TRACE[0]:
        pytest.skip("provenance is off (LAZYTORCH_PROVENANCE=0)")
    bn = lt.nn.BatchNorm2d(4)
    lt.eval(*bn.buffers())
    for _ in range(2):
        x = lt.tensor(batches((2, 4, 3, 3), 1)[0], requires_grad=True)
        y, line = bn(x), sys._getframe().f_lineno
        nodes = [n for n in toposort([y.node, bn.running_mean.node, bn.running_var.node,
                                      bn.num_batches_tracked.node]) if n.op not in ("buffer", "scalar")]
        snapshots = [RECORDS[n].snapshot for n in nodes if n in RECORDS and RECORDS[n].snapshot is not None]
        assert len(nodes) > 20 and len(snapshots) > 10
        assert {n.origin for n in nodes + snapshots} == {f"test_batchnorm.py:{line}"}
        lt.eval(y, *bn.buffers())

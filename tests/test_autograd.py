"""The autograd API with torch's semantics: flags, .grad accumulation, grad_fn, retain_grad,
detach, grad modes, autograd.grad, laziness of backward, and torch's error cases."""
from __future__ import annotations

import numpy as np
import pytest
import torch

import lazytorch as lt


def _pair(shape=(3, 4), seed=0):
    a = np.random.default_rng(seed).standard_normal(shape).astype(np.float32)
    return lt.tensor(a, requires_grad=True), torch.tensor(a, requires_grad=True)


def test_flags_and_grad_fn():
    x = lt.randn(3, requires_grad=True)
    assert x.requires_grad and x.is_leaf and x.grad is None and x.grad_fn is None
    y = x * 2
    assert y.requires_grad and not y.is_leaf and y.grad_fn.name() == "MulBackward0"
    z = lt.ones(3)
    assert not z.requires_grad and z.is_leaf and (z + 1).grad_fn is None
    assert not (x > 0).requires_grad                         # bool results carry no grad
    assert lt.zeros(2, 2, requires_grad=True).requires_grad
    assert lt.tensor([1.0, 2.0], requires_grad=True).requires_grad
    w = lt.randn(2).requires_grad_()
    assert w.requires_grad and w.is_leaf
    w.requires_grad = False
    assert not w.requires_grad


def test_backward_is_lazy_and_accumulates():
    x, tx = _pair()
    y = (x.exp() * x).sum()
    y.backward()
    assert x.grad.is_lazy                                     # nothing ran yet
    (x.exp() * x).sum().backward()                            # accumulates into the same .grad
    g = x.grad
    (tx.exp() * tx).sum().backward()
    (tx.exp() * tx).sum().backward()
    np.testing.assert_allclose(g.numpy(), tx.grad.numpy(), rtol=1e-5)
    assert x.grad is g


def test_backward_with_gradient_and_retain_graph():
    x, tx = _pair()
    cot = np.random.default_rng(1).standard_normal((3, 4)).astype(np.float32)
    y, ty = x.tanh() * 3, tx.tanh() * 3
    y.backward(lt.tensor(cot), retain_graph=True)
    y.backward(lt.tensor(cot))
    ty.backward(torch.tensor(cot), retain_graph=True)
    ty.backward(torch.tensor(cot))
    np.testing.assert_allclose(x.grad.numpy(), tx.grad.numpy(), rtol=1e-5, atol=1e-6)


def test_retain_grad_and_non_leaf_grad():
    x, tx = _pair()
    h, th = x * x, tx * tx
    h.retain_grad()
    th.retain_grad()
    assert h.retains_grad
    (h.sin().sum()).backward()
    (th.sin().sum()).backward()
    np.testing.assert_allclose(h.grad.numpy(), th.grad.numpy(), rtol=1e-5)
    np.testing.assert_allclose(x.grad.numpy(), tx.grad.numpy(), rtol=1e-5)


def test_autograd_grad_leaves_dot_grad_alone():
    x, tx = _pair()
    h, th = x.sigmoid(), tx.sigmoid()
    gx, gh = lt.autograd.grad((h * h).sum(), [x, h])
    tgx, tgh = torch.autograd.grad((th * th).sum(), [tx, th])
    assert x.grad is None
    np.testing.assert_allclose(gx.numpy(), tgx.numpy(), rtol=1e-5)
    np.testing.assert_allclose(gh.numpy(), tgh.numpy(), rtol=1e-5)
    unused = lt.randn(2, requires_grad=True)
    with pytest.raises(RuntimeError, match="allow_unused=True"):
        lt.autograd.grad((x * 2).sum(), [unused])
    assert lt.autograd.grad((x * 2).sum(), [unused], allow_unused=True) == (None,)


def test_detach_and_detach_():
    x = lt.randn(3, requires_grad=True)
    d = (x * 2).detach()
    assert not d.requires_grad and d.is_leaf and d.grad_fn is None
    np.testing.assert_allclose(d.numpy(), x.numpy() * 2, rtol=1e-6)
    y = x * 3
    y.detach_()
    assert not y.requires_grad and not (y + x * 0).detach().requires_grad
    assert not (d * x).detach().requires_grad and (d * x).requires_grad


def test_grad_modes_context_and_decorator():
    x = lt.randn(3, requires_grad=True)
    with lt.no_grad():
        assert not (x * 2).requires_grad and not lt.is_grad_enabled()
        with lt.enable_grad():
            assert (x * 2).requires_grad
    with lt.inference_mode():
        assert not (x * 2).requires_grad
    with lt.set_grad_enabled(False):
        assert not (x * 2).requires_grad
    assert lt.is_grad_enabled()

    @lt.no_grad()
    def f(t):
        return t * 2
    assert not f(x).requires_grad and (x * 2).requires_grad
    lt.set_grad_enabled(False)
    assert not (x * 2).requires_grad
    lt.set_grad_enabled(True)
    assert (x * 2).requires_grad
    with lt.no_grad():
        y = x * 2                                             # made without grad: stays so later
    assert not (y + x * 0).requires_grad or (y + x).requires_grad
    assert not y.requires_grad


def test_inplace_and_views_get_gradients():
    x, tx = _pair((4, 5))
    outs = []
    for lib, t in ((lt, x), (torch, tx)):
        z = t * 1.0
        z[1:3, ::2] = t[0, :3] * 2                            # write through a strided view
        z.mul_(t.sigmoid())                                   # in-place on a non-leaf
        v = z.t()
        v.add_(1.0)                                           # in-place through a transposed view
        outs.append((z * z).sum())
    outs[0].backward()
    outs[1].backward()
    np.testing.assert_allclose(x.grad.numpy(), tx.grad.numpy(), rtol=1e-5, atol=1e-6)


def test_optimizer_update_under_no_grad_keeps_leaf():
    w = lt.randn(3, requires_grad=True)
    (w * w).sum().backward()
    with lt.no_grad():
        w.sub_(w.grad * 0.1)
    assert w.is_leaf and w.requires_grad
    w.grad = None
    (w * 2).sum().backward()
    np.testing.assert_allclose(w.grad.numpy(), np.full(3, 2.0, np.float32))


# ---------------------------------------------------------------- torch's errors

def test_error_backward_of_non_scalar():
    x = lt.randn(3, requires_grad=True)
    with pytest.raises(RuntimeError, match="grad can be implicitly created only for scalar outputs"):
        (x * 2).backward()


def test_error_backward_without_grad():
    with pytest.raises(RuntimeError, match="does not require grad and does not have a grad_fn"):
        lt.randn(3).sum().backward()


def test_error_inplace_on_leaf_requiring_grad():
    x = lt.randn(3, requires_grad=True)
    with pytest.raises(RuntimeError, match="leaf Variable that requires grad is being used in an in-place"):
        x.add_(1.0)
    with pytest.raises(RuntimeError, match="leaf Variable that requires grad"):
        x[0] = 2.0


def test_error_second_backward_through_freed_graph():
    x = lt.randn(3, requires_grad=True)
    y = (x * x).sum()
    y.backward()
    with pytest.raises(RuntimeError, match="backward through the graph a second time"):
        y.backward()


@pytest.mark.parametrize("native", [True, False])
def test_backward_frees_the_forward_graph(native, monkeypatch):
    """A backward without retain_graph lets go of what each record saved (autograd/engine.py
    FREED_INPUTS), as torch frees saved tensors: once the loss and the gradient are evaluated, the
    forward graph dies
    by reference count while the loss tensor lives on, with no cyclic collection; the gradient is
    right and a second backward still raises."""
    import gc
    import weakref
    from lazytorch.autograd import engine
    if not native:
        monkeypatch.setattr(engine, "_walk", engine._walk_py)      # (the C walk's definition)
    x = np.random.default_rng(0).standard_normal(16).astype(np.float32)
    w = lt.tensor(x, requires_grad=True)
    h = (w.sin() * 2.0).exp()
    inner = weakref.ref(h.node)
    loss = (h * w).sum().tanh()             # (a top op that saves: a sum keeps what it reads)
    del h
    was = gc.isenabled()
    gc.disable()
    try:
        loss.backward()
        lt.eval(loss, w.grad)                   # (an unevaluated gradient still reads the forward)
        assert inner() is None
    finally:
        if was:
            gc.enable()
    tw = torch.tensor(x, requires_grad=True)
    ((tw.sin() * 2.0).exp() * tw).sum().tanh().backward()
    np.testing.assert_allclose(w.grad.numpy(), tw.grad.numpy(), rtol=1e-5, atol=1e-5)
    with pytest.raises(RuntimeError, match="backward through the graph a second time"):
        loss.backward()


@pytest.mark.parametrize("native", [True, False])
def test_a_loss_whose_last_ops_save_nothing_lets_go_of_the_forward_after_backward(native, monkeypatch):
    """Records whose rules read no saved value (a sum, an add, a view) keep stand-ins of their
    inputs once a backward without retain_graph went through them (autograd/engine.py
    FREED_EDGES): a loss kept into the next step of a loop (read every N steps) held its whole
    forward graph, down to the weights the step read, as its sum's and add's inputs."""
    import gc
    import weakref
    from lazytorch.autograd import engine
    if not native:
        monkeypatch.setattr(engine, "_walk", engine._walk_py)
    x = np.random.default_rng(1).standard_normal(16).astype(np.float32)
    w = lt.tensor(x, requires_grad=True)
    h = (w.sin() * 2.0).exp()
    inner = weakref.ref(h.node)
    loss = lt.stack([(h * w).sum() + h.mean(), -h.sum()]).view(2, 1)[0]
    del h
    was = gc.isenabled()
    gc.disable()
    try:
        loss.backward()
        lt.eval(loss, w.grad)
        assert inner() is None
    finally:
        if was:
            gc.enable()
    tw = torch.tensor(x, requires_grad=True)
    th = (tw.sin() * 2.0).exp()
    tloss = torch.stack([(th * tw).sum() + th.mean(), -th.sum()]).view(2, 1)[0]
    tloss.backward()
    np.testing.assert_allclose(loss.item(), tloss.item(), rtol=1e-5)
    np.testing.assert_allclose(w.grad.numpy(), tw.grad.numpy(), rtol=1e-5, atol=1e-5)
    with pytest.raises(RuntimeError, match="backward through the graph a second time"):
        loss.backward()                     # (below the stand-ins: exp and mul saved, and were freed)


@pytest.mark.parametrize("native", [True, False])
def test_backward_again_through_records_that_save_nothing_matches_torch(native, monkeypatch):
    """A second backward (and autograd.grad of an intermediate) through records a first backward
    left with stand-ins: the gradients torch gives, also where the intermediate is reached both
    through a stand-in and through a record made after the first backward."""
    from lazytorch.autograd import engine
    if not native:
        monkeypatch.setattr(engine, "_walk", engine._walk_py)
    a = np.random.default_rng(2).standard_normal((3, 4)).astype(np.float32)
    got, want = [], []
    for lib, out in ((lt, got), (torch, want)):
        x = lib.tensor(a, requires_grad=True)
        y = x + 0.5
        z = (y.view(12) - 1.0).sum() + y.mean()
        z.backward()
        z.backward()                        # (nothing on the path saved a value: allowed)
        out.append(x.grad)
        out.append(lib.autograd.grad(z, y)[0])
        both = (y * 3.0).sum() + z          # y: through a new record and through z's stand-ins
        out.extend(lib.autograd.grad(both, [y, x]))
    for g, t in zip(got, want):
        np.testing.assert_allclose(g.numpy(), t.detach().numpy(), rtol=1e-6, atol=1e-6)


def test_error_gradient_shape_mismatch():
    x = lt.randn(3, requires_grad=True)
    with pytest.raises(RuntimeError, match="Mismatch in shape"):
        (x * 2).backward(lt.ones(2))


def test_error_requires_grad_on_integers_and_non_leaf():
    with pytest.raises(RuntimeError, match="floating point"):
        lt.tensor([1, 2]).requires_grad_()
    y = lt.randn(2, requires_grad=True) * 2
    with pytest.raises(RuntimeError, match="leaf variables"):
        y.requires_grad_(False)

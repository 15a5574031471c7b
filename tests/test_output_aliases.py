"""A root that reshapes a node its program computes takes that node's buffer reshaped on the host
backends (realize.py reshapes_aliased): no kernel writes the view out.  What is checked: values
against torch, the launches of the plan (one fewer: the copy is gone), what is not aliased (a view
with an offset, a transposed copy, a view of a leaf, a GPU backend's plan), two roots reshaping
one node, and a later program reading the aliased value."""
from __future__ import annotations

import numpy as np
import pytest
import torch

import lazytorch as lt
from lazytorch.realize import kernel_plan, planned_roots, reshapes_aliased

HOST = ["reference", "cpu", "metal-emu"]


def _pair(shape=(6, 8), seed=0):
    a = np.random.default_rng(seed).standard_normal(shape).astype(np.float32)
    return lt.tensor(a), torch.tensor(a)


@pytest.mark.parametrize("backend_name", HOST)
def test_a_reshape_of_a_product_is_its_buffer(backend_name):
    previous = lt.get_backend()
    lt.set_backend(backend_name)
    try:
        (la, ta), (lb, tb) = _pair((6, 8)), _pair((8, 4), 1)
        outs = [(la @ lb).reshape(2, 3, 4), (la @ lb.exp()).reshape(24).contiguous()]
        want = [(ta @ tb).reshape(2, 3, 4), (ta @ tb.exp()).reshape(24)]
        roots = [t.node for t in outs]
        assert [n.op for n in reshapes_aliased(roots)] == ["matmul", "matmul"]
        plan = kernel_plan(outs)
        assert [launch.kind for launch in plan.launches].count("kernel") == 0, plan
        lt.eval(*outs)
        for got, w in zip(outs, want):
            np.testing.assert_allclose(got.numpy(), w.numpy(), rtol=1e-5, atol=1e-5)
        # a later program reads the aliased value as any other
        np.testing.assert_allclose((outs[0] * 2).sum(-1).numpy(), (want[0] * 2).sum(-1).numpy(), rtol=1e-5)
    finally:
        lt.set_backend(previous)


def test_what_is_not_aliased():
    """A view with an offset, of part of its base, transposed, of a leaf: the plan writes it out."""
    la, _ = _pair((6, 8))
    y = la * 2
    for view in (y[1:], y.t().contiguous(), y.reshape(8, 6)[:, :3], la.reshape(48)):
        roots = [view.node]
        assert reshapes_aliased(roots) is roots, view


def test_a_node_reached_by_two_roots_is_not_aliased():
    """Two roots reshaping one node, or a root reshaping another root: each keeps a buffer of its
    own (one buffer object over a memory, so the arrays numpy() hands out are all counted), and
    a numpy write into one is not seen by a later program reading the other."""
    la, ta = _pair((6, 8))
    y = la.exp()
    a, b = y.reshape(48), y.reshape(8, 6)
    for roots in ([a.node, b.node], [y.node, a.node]):
        assert reshapes_aliased(roots) == roots
    lt.eval(a, b)
    later = b * 1.0
    a.numpy()[:] = 0.0                       # (a's own memory: b's values stay)
    np.testing.assert_allclose(later.numpy(), ta.exp().reshape(8, 6).numpy(), rtol=1e-6)
    np.testing.assert_allclose(b.numpy(), ta.exp().reshape(8, 6).numpy(), rtol=1e-6)


def test_a_device_backend_writes_the_view_out(monkeypatch):
    """Where buffers live in the backend's own memory (the GPU backends), roots stay as they are."""
    from lazytorch import realize
    la, _ = _pair((6, 8))
    roots = [(la * 2).reshape(48).node]

    class Device:
        device_memory = True
    monkeypatch.setattr(realize, "get_backend", lambda name: Device())
    assert planned_roots(roots, "cuda") is roots


def test_a_conv_weights_grad_is_its_products_output():
    """The case it is for: a convolution weight's gradient (a product's output reshaped) needs no
    copy; its values are torch's."""
    rng = np.random.default_rng(0)
    x, w = rng.standard_normal((2, 3, 6, 6)).astype(np.float32), rng.standard_normal((4, 3, 3, 3)).astype(np.float32)
    lw, tw = lt.tensor(w, requires_grad=True), torch.tensor(w, requires_grad=True)
    lt.nn.functional.conv2d(lt.tensor(x), lw, padding=1).square().sum().backward()
    torch.nn.functional.conv2d(torch.tensor(x), tw, padding=1).square().sum().backward()
    assert reshapes_aliased([lw.grad.node])[0].op == "matmul"
    np.testing.assert_allclose(lw.grad.numpy(), tw.grad.numpy(), rtol=1e-4, atol=1e-4)

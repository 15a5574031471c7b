"""Call forms torch accepts that are another op in disguise: one-argument `where`, `.data`."""
import numpy as np
import pytest
import torch

import lazytorch as lt


@pytest.mark.parametrize("shape", [(), (0,), (5,), (3, 4), (2, 1, 3)])
def test_one_argument_where_is_nonzero_as_tuple(backend, shape):
    rng = np.random.default_rng(len(shape))
    a = (rng.standard_normal(shape) > 0).astype(np.float32) * rng.standard_normal(shape).astype(np.float32)
    got, want = lt.where(lt.tensor(a)), torch.where(torch.tensor(a))
    assert isinstance(got, tuple) and len(got) == len(want)
    for g, w in zip(got, want):
        assert g.dtype == lt.int64
        np.testing.assert_array_equal(g.numpy(), w.numpy())
    # the three-argument form is unchanged
    t = lt.tensor(a)
    np.testing.assert_array_equal(lt.where(t > 0, t, -1.0).numpy(), torch.where(torch.tensor(a) > 0, torch.tensor(a), -1.0).numpy())


def test_data_reads_without_history_and_assigns_in_place():
    w, tw = lt.ones(3, requires_grad=True), torch.ones(3, requires_grad=True)
    d, td = w.data, tw.data
    assert d.requires_grad is td.requires_grad is False
    np.testing.assert_array_equal(d.numpy(), td.numpy())
    w.data, tw.data = lt.full((3,), 2.0), torch.full((3,), 2.0)
    assert w.requires_grad and w.is_leaf
    (w * w).sum().backward()
    (tw * tw).sum().backward()
    np.testing.assert_array_equal(w.grad.numpy(), tw.grad.numpy())
    with pytest.raises(RuntimeError, match=r"data.*\[2\].*\[3\]"):
        w.data = lt.ones(2)

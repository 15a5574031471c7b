"""Writes through `x.numpy()` (docs/nn.md, Interop), the cases the numpy_writes generator
(tests/fuzz/stress.py) draws at random, written out once, and the difference from torch it avoids."""
from __future__ import annotations

import numpy as np
import pytest
import torch

import lazytorch as lt


def _program(m):
    x = m.tensor(np.arange(6, dtype=np.float32)).reshape(2, 3) * 1
    a = x.numpy()
    row = x[1]                    # a pending view: reads x's data as it is when evaluated
    total = x.sum()               # pending, built before the write: keeps the value it had
    a[1, 0] = 100
    after = x.t() + 0             # built after the write: sees it
    seen = row.numpy().copy()
    a[0, 0] = -7                  # after row was evaluated (another row)
    np.multiply(a, 2, out=a)
    return [x, row * 1, total, after, seen, a.copy()]


def test_writes_reach_later_results_only(backend):
    from lazytorch.runtime import get_backend
    if get_backend(backend).device_memory:
        pytest.skip("numpy() of a device tensor is a copy (torch: .cpu().numpy())")
    for got, want in zip(_program(lt), _program(torch)):
        got = got if isinstance(got, np.ndarray) else got.numpy()
        want = want if isinstance(want, np.ndarray) else want.numpy()
        np.testing.assert_array_equal(got, want)


def test_in_place_op_on_a_tensor_whose_array_is_out(backend):
    """torch's in-place op writes the memory `a` shows: `a` sees it, later writes through `a`
    reach `y`, and results built from the old value keep it (tensor.py `_write_through`)."""
    from lazytorch.runtime import get_backend
    if get_backend(backend).device_memory:
        pytest.skip("numpy() of a device tensor is a copy (torch: .cpu().numpy())")

    def run(m):
        y = m.tensor(np.arange(4, dtype=np.float32)) * 2
        before = y * 3                       # built before the array went out
        a = y.numpy()
        during = y + 10                      # built while it is out
        y.add_(1)
        seen = a.copy()
        a[1] = -5
        y[2:].mul_(2)                        # through a view: into y's memory, so into `a`
        return seen, a.copy(), y.numpy().copy(), before, during
    for got, want in zip(run(lt), run(torch)):
        got = got if isinstance(got, np.ndarray) else got.numpy()
        want = want if isinstance(want, np.ndarray) else want.numpy()
        np.testing.assert_array_equal(got, want)

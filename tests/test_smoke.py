"""End-to-end smoke test: build lazily, inspect, evaluate, compare with torch."""
import numpy as np

import lazytorch as lt
from oracle import check, sample


def test_lazy_then_eval(backend):
    x = sample((4, 8))
    y = check(lambda m, x: ((x * 2 + 1).exp() - x).sum(-1), x)
    assert y.shape == (4,)


def test_dump_shows_buffer_after_eval():
    x = lt.randn(3, 4)
    y = (x + 1) * 2
    assert "add" in lt.dump(y)
    lt.eval(y)
    text = lt.dump(y)
    assert "buffer" in text and "add" not in text
    np.testing.assert_allclose(y.numpy(), (x.numpy() + 1) * 2, rtol=1e-6)

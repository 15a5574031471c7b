"""Compiled-kernel caches are bounded LRUs whose statistics lt.cache_info() reports."""
from __future__ import annotations

import numpy as np
import pytest

import lazytorch as lt
from lazytorch.runtime.caches import LRU


def test_lru_evicts_the_least_recently_used_and_counts():
    cache = LRU("test lru", 2)
    made = []

    def make(k):
        return lambda: made.append(k) or k * 10

    assert cache.get_or_make(1, make(1)) == 10
    assert cache.get_or_make(2, make(2)) == 20
    assert cache.get_or_make(1, make(1)) == 10          # hit: 1 is now the most recent
    assert cache.get_or_make(3, make(3)) == 30          # evicts 2
    assert cache.get_or_make(2, make(2)) == 20          # made again
    assert made == [1, 2, 3, 2]
    info = cache.info()
    assert (info.hits, info.misses, info.entries, info.evictions, info.maxsize) == (1, 4, 2, 2, 2)
    assert lt.cache_info().kernels["test lru"] == info


@pytest.mark.parametrize("backend_name, cache", [("cpu", "compiled libraries"), ("metal-emu", "metal-emu kernels")])
def test_cache_info_reports_the_backends_kernel_cache(backend_name, cache):
    previous = lt.get_backend()
    lt.set_backend(backend_name)
    try:
        x = lt.from_numpy(np.arange(12, dtype=np.float32).reshape(3, 4))
        np.testing.assert_allclose((x * 3.5 - 1).exp().sum(-1).numpy(),
                                   np.exp(np.arange(12, dtype=np.float64).reshape(3, 4) * 3.5 - 1).sum(-1),
                                   rtol=1e-5)
        info = lt.cache_info()
        assert info.kernels[cache].entries >= 1 and info.kernels[cache].entries <= info.kernels[cache].maxsize
        assert info.entries >= 1                            # the graph cache's own fields are unchanged
        assert info.threads["threads"] >= 1
    finally:
        lt.set_backend(previous)

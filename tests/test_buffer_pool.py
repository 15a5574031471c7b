"""Host buffers of the cpu backend (runtime/buffer_pool.py): large blocks are huge-page-aligned
mappings advised MADV_HUGEPAGE, give correct results and are reused by the pool; a warm first
evaluation of a program without matrix products does not import the GEMM module; lt.compile's
walk for captured tensors skips lazytorch's own globals but still reaches the user's tensors
(docs/benchmarks.md, "W8")."""
from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest

import lazytorch as lt
from lazytorch.runtime import buffer_pool
from lazytorch.runtime.buffer_pool import HUGE_MIN, HUGE_PAGE, BufferPool

linux_thp = pytest.mark.skipif(not buffer_pool.HUGE_PAGES or not os.path.exists("/proc/self/smaps"),
                               reason="transparent huge pages are a Linux feature")


def _address(a: np.ndarray) -> int:
    return a.__array_interface__["data"][0]


def _vm_flags(address: int) -> list[str]:
    """The VmFlags of the mapping holding `address` (/proc/self/smaps)."""
    smaps = Path("/proc/self/smaps").read_text()
    for m in re.finditer(r"^([0-9a-f]+)-([0-9a-f]+) .*\n((?:[A-Za-z_]+:.*\n)+)", smaps, re.M):
        if int(m.group(1), 16) <= address < int(m.group(2), 16):
            return re.search(r"VmFlags:(.*)", m.group(3)).group(1).split()
    raise AssertionError(f"no mapping holds {address:#x}")


def test_block_sizes_round_to_whole_huge_pages_from_the_threshold():
    if buffer_pool.HUGE_PAGES:
        assert buffer_pool.block_size(HUGE_MIN + 1) == HUGE_MIN + HUGE_PAGE
        assert buffer_pool.block_size(64 << 20) == 64 << 20
    assert buffer_pool.block_size(HUGE_MIN - 1) == HUGE_MIN       # (a page multiple below it)
    assert buffer_pool.block_size(100_000) == 102_400


@linux_thp
def test_large_buffers_are_huge_page_aligned_and_advised():
    pool = BufferPool()
    a = pool.empty((3, 1 << 20), np.float32)                      # 12 MiB: a huge-page block
    assert _address(a) % HUGE_PAGE == 0
    assert "hg" in _vm_flags(_address(a))                          # madvise(MADV_HUGEPAGE)
    assert "sh" not in _vm_flags(_address(a))                      # private, not shmem
    a[...] = np.arange(3 << 20, dtype=np.float32).reshape(3, -1)
    assert a[2, -1] == (3 << 20) - 1 and a.sum(dtype=np.float64) == np.arange(3 << 20, dtype=np.float64).sum()


def test_the_pool_reuses_a_freed_large_block():
    pool = BufferPool()
    a = pool.empty((HUGE_MIN // 4 + 5,), np.float32)
    address = _address(a)
    del a
    b = pool.empty((HUGE_MIN // 4 + 7,), np.float32)              # the same huge-page size
    assert _address(b) == address and pool.stats == {"fresh": 1, "reused": 1, "small": 0}
    c = pool.empty((HUGE_MIN // 4 + 7,), np.float32)              # b is alive: a fresh block
    assert _address(c) != address and pool.stats["fresh"] == 2
    b[:] = 1.5
    c[:] = 2.5
    assert float(b.sum()) == 1.5 * b.size and float(c[-1]) == 2.5


@linux_thp
def test_a_large_output_on_the_cpu_backend_is_correct_and_in_advised_memory():
    rng = np.random.default_rng(0)
    a, b, c = (rng.standard_normal(3 << 20, dtype=np.float32) for _ in range(3))
    before = lt.get_backend()
    lt.set_backend("cpu")
    try:
        x, y, z = (lt.from_numpy(v) for v in (a, b, c))
        out = (lt.nn.functional.gelu(x * y + z, approximate="tanh") * lt.sigmoid(x) - lt.tanh(y)).numpy()
    finally:
        lt.set_backend(before)
    assert "hg" in _vm_flags(_address(out))
    import torch
    ta, tb, tc = (torch.from_numpy(v) for v in (a, b, c))
    ref = (torch.nn.functional.gelu(ta * tb + tc, approximate="tanh") * torch.sigmoid(ta) - torch.tanh(tb)).numpy()
    np.testing.assert_allclose(out, ref, rtol=1e-5, atol=1e-5)


def test_static_temps_of_a_large_plan_are_correct():
    """Temps of the executor's static memory plan come from the same blocks (huge pages when large)."""
    x = np.linspace(-3, 3, 3 << 20, dtype=np.float32).reshape(3 << 10, 1 << 10)
    w = np.linspace(1, -1, 1 << 20, dtype=np.float32).reshape(1 << 10, 1 << 10)
    before = lt.get_backend()
    lt.set_backend("cpu")
    try:
        tx, tw = lt.from_numpy(x), lt.from_numpy(w)
        got = [lt.softmax(lt.tanh(tx) @ tw, dim=-1).sum(-1).numpy() for _ in range(2)]   # (a temp between launches)
    finally:
        lt.set_backend(before)
    import torch
    ref = torch.softmax(torch.tanh(torch.from_numpy(x)) @ torch.from_numpy(w), dim=-1).sum(-1).numpy()
    for g in got:
        np.testing.assert_allclose(g, ref, rtol=1e-4, atol=1e-4)


CHILD = r"""
import json, sys, numpy as np, lazytorch as lt
lt.set_backend("cpu")
x = lt.tensor(np.linspace(-2, 2, 24, dtype=np.float32))
y = (lt.tanh(x) * 2 + 1).numpy()
print(json.dumps({"value": y.tolist(), "library": "lazytorch.runtime.library" in sys.modules}))
"""


def test_a_program_without_products_does_not_import_the_gemm_module(tmp_path):
    env = dict(os.environ, LAZYTORCH_CACHE_DIR=str(tmp_path))
    for _ in range(2):                                   # a cold, then a warm disk cache
        out = subprocess.run([sys.executable, "-c", CHILD], env=env, capture_output=True, text=True, timeout=300)
        assert out.returncode == 0, out.stderr[-2000:]
        result = json.loads(out.stdout.strip().splitlines()[-1])
        assert not result["library"]
        x = np.linspace(-2, 2, 24, dtype=np.float32)
        np.testing.assert_allclose(result["value"], np.tanh(x) * 2 + 1, rtol=1e-6, atol=1e-6)


def test_compile_reaches_captures_through_lt_functions_and_decorators():
    """A table of lt functions in the body's reach is not walked into lazytorch's globals, and a
    tensor captured by a function behind lazytorch's own decorator is still found: an in-place
    update of it reaches the next compiled call."""
    w = lt.tensor(np.array([0.5, -1.0, 2.0], dtype=np.float32))
    ops = SimpleNamespace(sigmoid=lt.sigmoid, tanh=lt.tanh)

    @lt.no_grad()
    def inner(x):
        return ops.sigmoid(x) * w + ops.tanh(x)

    f = lt.compile(lambda x: inner(x))
    x = np.array([0.1, -0.2, 0.3], dtype=np.float32)

    def expected(wv):
        return 1 / (1 + np.exp(-x)) * wv + np.tanh(x)
    np.testing.assert_allclose(f(lt.tensor(x)).numpy(), expected(np.array([0.5, -1.0, 2.0])), rtol=1e-6)
    w.add_(1.0)
    np.testing.assert_allclose(f(lt.tensor(x)).numpy(), expected(np.array([1.5, 0.0, 3.0])), rtol=1e-6)
    assert lt.compile_info().traces >= 1

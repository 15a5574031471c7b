"""The table of live pending tensors (tensor.py `_LIVE`): an eval stores the pending values that
live tensors hold in the same pending graph, the table stays bounded in a loop that never
evaluates, and a tensor tracked twice (an in-place op) is listed once."""
from __future__ import annotations

import gc
import importlib

import numpy as np
import pytest

import lazytorch as lt
T = importlib.import_module("lazytorch.tensor")   # (lazytorch.tensor is the function)

A = np.linspace(-2.0, 2.0, 12, dtype=np.float32)


def test_loop_without_eval_keeps_the_table_bounded():
    x = lt.from_numpy(A.copy())
    kept = x * 3.0                                   # one live pending value among many dead ones
    for i in range(12_000):
        y = x + float(i)                             # dies at the next step
    assert len(T._LIVE) < 10_000                     # compacted along the way
    assert any(n is kept.node for n in T.live_pending())          # the live one survived compaction
    np.testing.assert_allclose(y.numpy(), A.astype(np.float64) + 11_999.0, rtol=1e-6)
    np.testing.assert_allclose(kept.numpy(), A.astype(np.float64) * 3.0, rtol=1e-6)


def test_compaction_keeps_every_live_pending_tensor():
    x = lt.from_numpy(A.copy())
    kept = [x * float(i) for i in range(50)]
    for i in range(3 * T._COMPACT_AT[0]):
        _ = x - 1.0
    listed = {id(n) for n in T.live_pending()}
    assert all(id(k.node) in listed for k in kept)
    lt.eval(*kept)
    np.testing.assert_allclose(kept[7].numpy(), A.astype(np.float64) * 7.0, rtol=1e-6)


def test_dead_and_realized_entries_are_dropped_at_eval(backend):
    x = lt.from_numpy(A.copy())
    a = x * 2.0
    b = a - 1.0
    for _ in range(100):
        _ = x * 5.0                                   # dead at once
    gc.collect()
    pending = T.live_pending()
    ids = [id(n) for n in pending]
    assert id(a.node) in ids and id(b.node) in ids
    assert len(ids) == len(set(ids)) <= 3
    np.testing.assert_allclose(b.numpy(), A.astype(np.float64) * 2 - 1, rtol=1e-6)
    assert a.node.op == "buffer"                      # a lives and was in b's graph: stored too
    assert all(n.op != "buffer" for n in T.live_pending())
    np.testing.assert_allclose(a.numpy(), A.astype(np.float64) * 2, rtol=1e-6)


def test_in_place_ops_track_a_tensor_once(backend):
    x = lt.from_numpy(A.copy())
    y = x * 1.0
    for _ in range(5):
        y.add_(1.0)                                   # each rebinds y and tracks it again
    pending = T.live_pending()
    assert [n for n in pending if n is y.node] == [y.node]
    ids = [id(n) for n in pending]
    assert len(ids) == len(set(ids))
    np.testing.assert_allclose(y.numpy(), A.astype(np.float64) + 5.0, rtol=1e-6)


@pytest.mark.parametrize("n", [0, 1, 5])
def test_many_live_tensors_are_synced_by_one_eval(n):
    x = lt.from_numpy(A.copy())
    base = x * 2.0
    kept = [base + float(i) for i in range(n)]        # all live, all read base
    out = base.sum()
    np.testing.assert_allclose(out.item(), float(A.astype(np.float64).sum() * 2), atol=1e-5)
    assert all(k.node.op == "buffer" for k in kept)   # stored with out's program
    for i in (0, n // 2, n - 1) if n else ():
        np.testing.assert_allclose(kept[i].numpy(), A.astype(np.float64) * 2 + i, rtol=1e-5)


def test_each_thread_names_its_own_lines():
    """The general route finds the user's line once per API call (ir/node.py SITE): per thread,
    so two threads building at once never name each other's lines, and nothing stays set after."""
    import threading
    barrier = threading.Barrier(2)
    origins: dict[str, set] = {"a": set(), "b": set()}

    def build_a():
        x = lt.from_numpy(A.copy())
        barrier.wait()
        for _ in range(300):
            ya = lt.nn.functional.softmax(x.view(3, 4), dim=-1)            # line A
            origins["a"].add(ya.node.origin)

    def build_b():
        x = lt.from_numpy(A.copy())
        barrier.wait()
        for _ in range(300):
            yb = x.reshape(4, 3).transpose(0, 1).sum(dim=0)                  # line B
            origins["b"].add(yb.node.origin)

    threads = [threading.Thread(target=build_a), threading.Thread(target=build_b)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    src = open(__file__).read().splitlines()
    line_a = next(i for i, s in enumerate(src, 1) if s.strip().endswith("# line A"))
    line_b = next(i for i, s in enumerate(src, 1) if s.strip().endswith("# line B"))
    assert origins["a"] == {f"test_live_tensors.py:{line_a}"}
    assert origins["b"] == {f"test_live_tensors.py:{line_b}"}
    z = lt.from_numpy(A.copy()).view(2, 6).sum(dim=1)
    assert z.node.origin == f"test_live_tensors.py:{z_line()}"


def z_line() -> int:
    src = open(__file__).read().splitlines()
    return next(i for i, s in enumerate(src, 1) if "z = lt.from_numpy(A.copy()).view(2, 6).sum(dim=1)" in s)

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


# ---------------------------------------------------------------- many live tensors
# An eval looks at each live tensor once per value (realize.LIVE): fresh ones are walked against
# its program, unrelated ones are parked in an index that later evals climb from their own nodes.

R = importlib.import_module("lazytorch.realize")
A64 = A.astype(np.float64)


def _unrelated(n: int) -> tuple[lt.Tensor, list[lt.Tensor]]:
    x = lt.from_numpy(A.copy())
    return x, [x * float(i) + 1.0 for i in range(n)]           # share x's data, no pending node


@pytest.mark.parametrize("how", ["item", "numpy"])
def test_unrelated_live_tensors_evaluated_one_by_one(how):
    _, ts = _unrelated(200)
    for i, t in enumerate(ts):
        if how == "item":
            np.testing.assert_allclose(t.sum().item(), float((A64 * i + 1).sum()), rtol=1e-5, atol=1e-4)
        else:
            np.testing.assert_allclose(t.numpy(), A64 * i + 1, rtol=1e-5, atol=1e-5)
        assert t.node.op == "buffer" if how == "numpy" else True
        assert all(u.is_lazy for u in ts[i + 1:i + 4])          # the others stay pending
    for i in (0, 99, 199):
        np.testing.assert_allclose(ts[i].numpy(), A64 * i + 1, rtol=1e-5, atol=1e-5)


def test_cost_of_an_eval_does_not_grow_with_unrelated_live_tensors(monkeypatch):
    """Each live tensor is walked once, when it is fresh: evaluating N unrelated tensors one by one
    walks O(N) nodes in all (it walked every live tensor per eval: O(N^2))."""
    calls = []
    reaches = R.reaches
    monkeypatch.setattr(R, "reaches", lambda n, *rest: calls.append(n) or reaches(n, *rest))

    def walked(n: int) -> tuple[int, int]:
        calls.clear()
        _, ts = _unrelated(n)
        start = R.LIVE.walked
        for t in ts:
            t.sum().item()
        return len(calls), R.LIVE.walked - start

    small, large = walked(100), walked(400)
    assert small[0] <= 100 and large[0] <= 400                  # reaches: once per tensor
    assert large[1] < 6 * small[1]                              # linear (quadratic would be 16x)
    assert large[1] < 20 * 400


def test_a_parked_tensor_reading_the_program_is_stored_with_it():
    x, ts = _unrelated(20)
    a = x * 2.0
    b = a + 1.0                                                 # reads a
    c = b * 3.0                                                 # reads b, hence a
    ts[3].numpy()                                               # parks a, b, c (unrelated to ts[3])
    assert a.is_lazy and b.is_lazy and c.is_lazy
    np.testing.assert_allclose(a.numpy(), A64 * 2, rtol=1e-5, atol=1e-5)
    assert b.node.op == "buffer" and c.node.op == "buffer"      # found by the climb from a's node
    assert all(t.is_lazy for t in ts[4:])
    np.testing.assert_allclose(c.numpy(), (A64 * 2 + 1) * 3, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(ts[7].numpy(), A64 * 7 + 1, rtol=1e-5, atol=1e-5)


def test_a_parked_chain_is_not_walked_again_at_each_eval():
    """A tensor updated in place between evals and never read (BatchNorm's num_batches_tracked
    between its flushes) is parked at each eval, its pending chain a node longer each time; the
    next eval's walk of its new value stops at the parked chain (LiveTensors._apart: the index
    holds the chain, which a climb from the program did not meet) instead of going down all of
    it again: the nodes looked at per eval stay flat (they grew with the chain), on the full
    path (synced) and on a tree's (alone).  The counter's value is right when read."""
    x, w = lt.from_numpy(A.copy()), lt.from_numpy(A.copy())
    count = lt.from_numpy(np.zeros(1, dtype=np.float32))
    full, tree = [], []
    for i in range(40):
        count.add_(1.0)
        u, v = x * float(i), w + float(i)
        start = R.LIVE.walked
        lt.eval(u, v)                                           # (two roots: the full path)
        full.append(R.LIVE.walked - start)
        count.add_(1.0)
        y = (x * float(i)).exp()
        start = R.LIVE.walked
        np.testing.assert_allclose(y.numpy(), np.exp(A64 * i), rtol=1e-5)
        tree.append(R.LIVE.walked - start)
        assert count.is_lazy
    assert max(full[5:]) <= max(full[:5]) + 2 and max(tree[5:]) <= max(tree[:5]) + 2, (full, tree)
    np.testing.assert_allclose(count.numpy(), [80.0])


def test_a_fresh_tensor_reading_the_program_through_a_parked_one_is_stored_with_it():
    """A fresh tensor whose graph reads the program only through a parked node that reads it
    (the climb met that node: its walk goes on below it, not stopped there) is stored with the
    program; one reading a parked node that does not read it is not."""
    x, ts = _unrelated(3)
    a = x * 2.0
    b = a + 1.0                                                 # reads a
    other = x * 7.0
    lt.eval(ts[0], ts[1])                                       # parks a, b and other
    assert a.is_lazy and b.is_lazy and other.is_lazy
    fresh = b * 3.0                                             # reads the program only through b
    apart = other - 1.0                                         # reads a parked node that does not
    np.testing.assert_allclose(a.sum().item(), float((A64 * 2).sum()), atol=1e-4)
    assert b.node.op == "buffer" and fresh.node.op == "buffer"
    assert other.is_lazy and apart.is_lazy and ts[2].is_lazy
    np.testing.assert_allclose(fresh.numpy(), (A64 * 2 + 1) * 3, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(apart.numpy(), A64 * 7 - 1, rtol=1e-5, atol=1e-5)


def test_a_parked_tensor_inside_the_program_is_stored_with_it():
    x, ts = _unrelated(20)
    a = x - 3.0
    ts[0].sum().item()                                          # parks a
    out = (a * a).sum()                                         # reads a: a is inside its program
    np.testing.assert_allclose(out.item(), float(((A64 - 3) ** 2).sum()), rtol=1e-5)
    assert a.node.op == "buffer"
    assert ts[1].is_lazy


def test_a_fresh_tensor_sharing_a_node_is_stored_and_an_unrelated_one_is_not():
    x = lt.from_numpy(A.copy())
    base = x * 2.0
    left, right = base + 1.0, base - 1.0                        # share base, which nobody holds
    other = x * 5.0
    del base
    np.testing.assert_allclose(left.numpy(), A64 * 2 + 1, rtol=1e-5, atol=1e-5)
    assert right.node.op == "buffer" and other.is_lazy
    np.testing.assert_allclose(right.numpy(), A64 * 2 - 1, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(other.numpy(), A64 * 5, rtol=1e-5, atol=1e-5)


def test_sharing_found_below_a_node_already_walked():
    """Two live tensors reading one pending node through another: whichever is walked first, the
    second is stored too (a walk that found the program marks its whole path)."""
    x = lt.from_numpy(A.copy())
    a = x + 1.0
    mid = a * 2.0
    u1, u2 = mid + 1.0, mid - 1.0
    del mid
    np.testing.assert_allclose(a.numpy(), A64 + 1, rtol=1e-5, atol=1e-5)
    assert u1.node.op == "buffer" and u2.node.op == "buffer"
    np.testing.assert_allclose(u2.numpy(), (A64 + 1) * 2 - 1, rtol=1e-5, atol=1e-5)


def test_in_place_op_on_an_old_tensor_after_newer_ones(backend):
    x, ts = _unrelated(30)
    old = x * 2.0
    newer = [x * float(i) for i in range(10)]
    ts[0].numpy()                                               # parks old, newer, ts[1:]
    old.add_(newer[5])                                          # old's new value reads newer[5]
    assert R.LIVE.fresh and any(r() is old for r in R.LIVE.fresh)   # tracked again
    np.testing.assert_allclose(newer[5].numpy(), A64 * 5, rtol=1e-5, atol=1e-5)
    assert old.node.op == "buffer"                              # read newer[5]: stored with it
    np.testing.assert_allclose(old.numpy(), A64 * 2 + A64 * 5, rtol=1e-5, atol=1e-5)
    old.mul_(3.0)                                               # again, after its own eval
    np.testing.assert_allclose(newer[6].numpy(), A64 * 6, rtol=1e-5, atol=1e-5)
    assert old.is_lazy                                          # unrelated to newer[6]
    np.testing.assert_allclose(old.numpy(), (A64 * 7) * 3, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(ts[29].numpy(), A64 * 29 + 1, rtol=1e-5, atol=1e-5)


def test_an_old_tensor_rebound_is_stored_with_what_reads_its_new_value():
    x, ts = _unrelated(10)
    old = x + 0.5
    ts[2].numpy()                                               # parks old
    old.sub_(1.0)
    out = old * 4.0
    ts[3].numpy()                                               # parks old again, with its new value
    np.testing.assert_allclose(out.numpy(), (A64 - 0.5) * 4, rtol=1e-5, atol=1e-5)
    assert old.node.op == "buffer"
    np.testing.assert_allclose(old.numpy(), A64 - 0.5, rtol=1e-5, atol=1e-5)


def test_views_of_live_tensors():
    x = lt.from_numpy(np.arange(12, dtype=np.float32))
    base = x * 2.0
    row = base.view(3, 4)[1]                                    # a view: not tracked, reads base
    others = [x + float(i) for i in range(10)]
    others[0].numpy()                                           # parks base and the others
    np.testing.assert_allclose(row.numpy(), np.arange(4, 8) * 2.0, rtol=1e-5, atol=1e-5)
    assert base.node.op == "buffer"                             # the view's program reads base's node
    assert others[1].is_lazy
    grid = x * 1.0
    col = grid.view(3, 4)[:, 2]
    others[2].numpy()                                           # parks grid
    col.add_(100.0)                                             # writes through into grid (rebound)
    np.testing.assert_allclose(others[3].numpy(), np.arange(12) + 3.0, rtol=1e-5, atol=1e-5)
    want = np.arange(12, dtype=np.float64)
    want[2::4] += 100
    np.testing.assert_allclose(grid.numpy(), want, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(col.numpy(), want[2::4], rtol=1e-5, atol=1e-5)


def test_the_tree_path_runs_beside_unrelated_live_tensors(monkeypatch):
    x, ts = _unrelated(50)
    (x * 3.0 - 1.0).numpy()                                     # warms the fast path's memo
    y = x * 3.0 - 1.0
    assert y.node.tree is not None
    slow = []
    program_for = R.program_for
    monkeypatch.setattr(R, "program_for", lambda *a, **k: slow.append(1) or program_for(*a, **k))
    np.testing.assert_allclose(y.numpy(), A64 * 3 - 1, rtol=1e-5, atol=1e-5)    # fresh ts: walked, parked
    z = x * 3.0 - 1.0                                            # built after: parked ones cannot read it
    np.testing.assert_allclose(z.numpy(), A64 * 3 - 1, rtol=1e-5, atol=1e-5)
    assert slow == []                                           # both ran as trees
    assert all(t.is_lazy for t in ts)
    a = x * 3.0
    b = a - 1.0                                                 # reads a, which is live: not alone
    np.testing.assert_allclose(b.numpy(), A64 * 3 - 1, rtol=1e-5, atol=1e-5)
    assert slow and a.node.op == "buffer"
    np.testing.assert_allclose(ts[9].numpy(), A64 * 9 + 1, rtol=1e-5, atol=1e-5)


def test_a_tree_built_before_tensors_were_parked_takes_the_walk():
    """A summary proves a parked tensor cannot read the tree only if it was made after the
    parking's epoch: `numpy()` of a realized tensor parks without realizing anything."""
    x = lt.from_numpy(A.copy())
    (x * 2.0 + 1.0).numpy()                                     # warms the fast path's memo
    done = x * 4.0
    lt.eval(done)                                               # realized; its array not out yet
    a = x * 2.0
    b = a + 1.0                                                 # reads a
    done.numpy()                                                # parks a and b (no eval)
    assert a.node.tree is not None and b.is_lazy
    np.testing.assert_allclose(a.numpy(), A64 * 2, rtol=1e-5, atol=1e-5)
    assert b.node.op == "buffer"
    np.testing.assert_allclose(b.numpy(), A64 * 2 + 1, rtol=1e-5, atol=1e-5)


def test_a_parked_reader_keeps_its_value_when_the_array_is_written(backend):
    from lazytorch.runtime import get_backend
    if get_backend(backend).device_memory:
        pytest.skip("numpy() of a device tensor is a copy")
    x = lt.from_numpy(A.copy())
    a = x * 2.0
    lt.eval(a)                                                  # realized, its array not out yet
    b = a + 1.0                                                 # pending, reads a's buffer
    other = x * 7.0
    lt.eval(other)                                              # parks b
    arr = a.numpy()                                             # b reads a: a snapshot for b first
    arr[:] = 0.0
    np.testing.assert_allclose(b.numpy(), A64 * 2 + 1, rtol=1e-5, atol=1e-5)
    np.testing.assert_array_equal(a.numpy(), np.zeros_like(A))
    c = lt.from_numpy(A.copy()) * 1.0
    lt.eval(c)
    np.testing.assert_allclose(c.numpy(), A64, rtol=1e-5, atol=1e-5)     # no pending reader: no snapshot


def test_detach_in_place_tracks_the_new_value():
    w = lt.ones(12, requires_grad=True)
    h = w * 2.0                                                 # recorded by autograd
    x, ts = _unrelated(5)
    ts[0].numpy()                                               # parks h
    h.detach_()                                                 # a new pending node
    g = h + 1.0
    np.testing.assert_allclose(g.numpy(), np.full(12, 3.0), rtol=1e-5, atol=1e-5)
    assert h.node.op == "buffer"
    np.testing.assert_allclose(h.numpy(), np.full(12, 2.0), rtol=1e-5, atol=1e-5)


def test_live_pending_lists_parked_and_fresh_tensors_once():
    x, ts = _unrelated(10)
    ts[0].numpy()                                               # parks ts[1:]
    y = x * 9.0
    y.add_(1.0)
    listed = T.live_pending()
    ids = [id(n) for n in listed]
    assert len(ids) == len(set(ids))
    assert all(id(t.node) in ids for t in ts[1:]) and id(y.node) in ids
    assert ids.index(id(ts[1].node)) < ids.index(id(ts[9].node)) < ids.index(id(y.node))   # oldest first
    lt.cuda.synchronize()                                       # evaluates them all
    assert all(t.node.op == "buffer" for t in ts) and y.node.op == "buffer"
    np.testing.assert_allclose(y.numpy(), A64 * 9 + 1, rtol=1e-5, atol=1e-5)


def test_the_index_is_swept_and_keeps_nothing_alive(monkeypatch):
    import weakref
    monkeypatch.setattr(R, "SWEEP_AT", 64)
    monkeypatch.setattr(R.LIVE, "sweep_at", 64)
    x = lt.from_numpy(A.copy())
    kept = x * 11.0
    for k in range(40):
        ts = [x * float(i) + float(k) for i in range(20)]
        ts[0].numpy()                                           # parks the 19 others, which die
    gone = weakref.ref(ts[5].node)
    del ts
    gc.collect()
    assert gone() is None                                       # the index holds weak references only
    assert len(R.LIVE.index) < 400                              # swept along the way
    np.testing.assert_allclose(kept.numpy(), A64 * 11, rtol=1e-5, atol=1e-5)


def test_parking_one_value_again_and_again_stays_bounded(monkeypatch):
    """Tensors sharing one pending node (detach() outside autograd), each parked by the next eval:
    their holdings of the node are swept as they die."""
    monkeypatch.setattr(R, "SWEEP_AT", 64)
    monkeypatch.setattr(R.LIVE, "sweep_at", 64)
    x = lt.from_numpy(A.copy())
    p = x * 2.0
    for i in range(300):
        d = p.detach()                                          # another tensor holding p's node
        (x + float(i)).numpy()                                  # parks d
    holders = R.LIVE._entry(p.node).holders
    assert len(holders) < 200
    np.testing.assert_allclose(d.numpy(), A64 * 2, rtol=1e-5, atol=1e-5)


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

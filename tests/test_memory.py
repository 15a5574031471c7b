"""Graph cuts free history, long loops don't grow memory, and huge graphs never recurse."""
import gc
import sys
import time
import weakref

import numpy as np
import pytest

import lazytorch as lt
from lazytorch.ir.graph import toposort


def _rss_bytes() -> int:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * 4096


def test_eval_cuts_the_graph_and_frees_history():
    x = lt.randn(8, 8)
    mid = x * 2
    ref = weakref.ref(mid.node)
    y = (mid + 1).exp()
    del mid
    lt.eval(y)
    gc.collect()
    assert ref() is None                             # the evaluated history is gone
    assert len(toposort([y.node])) == 1 and y.node.op == "buffer"


def test_lazy_eval_loop_does_not_grow_memory():
    x = lt.zeros(64)
    for _ in range(300):                             # warm up: compile, fill caches
        x = (x + 1) * 1.0
        lt.eval(x)
    gc.collect()
    before = _rss_bytes()
    start = time.perf_counter()
    for _ in range(10_000):
        x = (x + 1) * 1.0
        lt.eval(x)
    gc.collect()
    grown = _rss_bytes() - before
    assert x.numpy()[0] == 10_300.0
    assert grown < 8 * 2**20, f"RSS grew by {grown / 2**20:.1f} MiB over 10,000 eval steps"
    assert time.perf_counter() - start < 20


def test_hundred_thousand_node_graph():
    limit = sys.getrecursionlimit()
    y = lt.zeros(4)
    one = lt.ones(4)
    for _ in range(100_000):
        y = y + one
    assert len(toposort([y.node])) == 100_004        # 2 scalars, 2 fulls, 100,000 adds
    text = lt.dump(y)
    assert text.count(" = add(") == 100_000
    np.testing.assert_array_equal(y.numpy(), np.full(4, 100_000.0, dtype=np.float32))
    assert sys.getrecursionlimit() == limit
    del y                                            # a deep chain must also free without recursing
    gc.collect()


def test_batchnorm_training_loop_keeps_no_step_alive():
    """BatchNorm's running statistics are blended outside autograd (as torch's): blended with grad,
    each step's statistics kept that step's graph, activations and old weights included, reachable
    from the buffer, so a training loop grew by its activations every step."""
    nn = lt.nn
    model = nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.BatchNorm2d(8), nn.ReLU(), nn.Flatten(), nn.Linear(8 * 36, 4))
    opt = lt.optim.SGD(model.parameters(), lr=0.01)
    x = lt.from_numpy(np.random.default_rng(0).random((4, 3, 6, 6), dtype=np.float32))
    y = lt.from_numpy(np.array([0, 1, 2, 3]))
    weights = []
    for _ in range(4):
        weights.append(weakref.ref(model[0].weight.node))
        opt.zero_grad()
        nn.functional.cross_entropy(model(x), y).backward()
        opt.step()
        lt.eval(*model.buffers())
    gc.collect()
    bn = model[1]
    assert not bn.running_mean.requires_grad and bn.running_mean.grad_fn is None
    assert [w() is None for w in weights[:-1]] == [True] * 3        # the earlier steps' weights are gone


def test_backward_and_evaluation_pause_the_cyclic_collector():
    """Building a step's gradient graph and evaluating it run with the cyclic collector paused
    (ir/node.py collector_paused): the step's nodes die by reference count, and a collection
    walking them (every ~700 allocations, the whole heap every few steps) came due inside these
    calls.  With the collector forced to run at every allocation, none starts inside them; it is
    enabled again afterwards, also when evaluation raises, and a collector the user disabled stays
    disabled."""
    net = lt.nn.Sequential(lt.nn.Linear(6, 16), lt.nn.ReLU(), lt.nn.Linear(16, 3))
    x = lt.tensor(np.random.default_rng(0).standard_normal((5, 6)).astype(np.float32))
    inside = []

    def started(phase, info):
        if phase == "start":
            names = set()
            frame = sys._getframe(1)
            while frame is not None:
                names.add(frame.f_code.co_name)
                frame = frame.f_back
            inside.append(bool(names & {"run_backward", "eval_nodes"}))

    old = gc.get_threshold()
    gc.callbacks.append(started)
    gc.set_threshold(1, 1, 1)
    try:
        for _ in range(2):
            loss = net(x).square().mean()
            loss.backward()
            lt.eval(loss, *[p.grad for p in net.parameters()])
    finally:
        gc.set_threshold(*old)
        gc.callbacks.remove(started)
    assert inside and not any(inside)                  # collections ran, none inside the library
    assert gc.isenabled()
    bad = lt.tensor([1, 2]) // lt.tensor([0, 1])       # integer division by zero raises at evaluation
    with pytest.raises(ZeroDivisionError):
        lt.eval(bad)
    assert gc.isenabled()
    gc.disable()
    try:
        lt.eval(x * 2)
        assert not gc.isenabled()
    finally:
        gc.enable()


def test_a_step_defers_young_collections_to_its_evaluation(monkeypatch):
    """Between the pauses (the forward, the code between a step's calls) a young collection walked
    the step's live graph and promoted it, which brought full collections of the heap every ~50
    steps of ResNet-18 (ir/node.py defer_collection).  A Module call or a backward raises the
    first threshold until the next evaluation ends: a step runs at most the one collection due
    when it starts; the thresholds come back after the step (or stay as the user set them
    meanwhile), and a graph never evaluated is still collected at DEFER_AT allocations."""
    net = lt.nn.Sequential(lt.nn.Linear(6, 16), lt.nn.ReLU(), lt.nn.Linear(16, 16), lt.nn.ReLU(),
                           lt.nn.Linear(16, 3))
    opt = lt.optim.SGD(net.parameters(), lr=0.01)
    x = lt.tensor(np.random.default_rng(0).standard_normal((5, 6)).astype(np.float32))
    runs = []
    started = lambda phase, info: runs.append(1) if phase == "start" else None  # noqa: E731

    def collections() -> int:
        for step in range(13):
            if step == 3:
                runs.clear()
            opt.zero_grad()
            net(x).square().mean().backward()
            opt.step()
            assert gc.get_threshold() == (10, 10, 10)
        return len(runs)
    old = gc.get_threshold()
    gc.callbacks.append(started)
    gc.set_threshold(10, 10, 10)
    try:
        assert collections() <= 20                     # about one a step (10 measured)
        with monkeypatch.context() as m:               # (without deferring: every 10 net allocations)
            for where in ("lazytorch.ir.node", "lazytorch.nn.module"):
                m.setattr(f"{where}.defer_collection", lambda: None)
            assert collections() > 50                  # (100 measured)
        net(x).sum().backward()
        gc.set_threshold(123, 10, 10)                  # the user's, set while a step defers
        opt.step()
        assert gc.get_threshold() == (123, 10, 10)
        monkeypatch.setattr("lazytorch.ir.node.DEFER_AT", 500)
        runs.clear()
        kept = [net(x) for _ in range(200)]            # never evaluated
        assert runs and gc.get_threshold() == (500, 10, 10)
        lt.eval(*kept[:1])
        assert gc.get_threshold() == (123, 10, 10)
    finally:
        gc.set_threshold(*old)
        gc.callbacks.remove(started)


def test_a_counter_no_step_reads_stays_a_short_chain():
    """BatchNorm's num_batches_tracked is updated in place every training step and read by no
    step's program, so lazily it was a chain growing by a node a step (300 steps: 601 nodes).  A
    tensor's 64th in-place update looks how deep its pending value is and evaluates one as deep
    (tensor.py Tensor._flush_chain): the chain stays short and the count right, also for a plain
    add_ loop.  Under lt.compile's trace nothing is evaluated: each update is replayed."""
    from lazytorch.ir.graph import toposort
    net = lt.nn.Sequential(lt.nn.Conv2d(3, 4, 3), lt.nn.BatchNorm2d(4), lt.nn.ReLU(), lt.nn.Flatten(),
                           lt.nn.Linear(4 * 6 * 6, 2))
    opt = lt.optim.SGD(net.parameters(), lr=0.1)
    x, y = lt.randn(2, 3, 8, 8), lt.tensor([0, 1])
    for _ in range(300):
        opt.zero_grad()
        lt.nn.functional.cross_entropy(net(x), y).backward()
        opt.step()
    count = net[1].num_batches_tracked
    assert sum(n.op == "add" for n in toposort([count.node])) < 128 and count.item() == 300
    acc = lt.zeros(3)
    for _ in range(1000):
        acc.add_(1.0)
    assert len(toposort([acc.node])) < 2 * 128 and acc.numpy().tolist() == [1000.0] * 3

    def bump(t):
        for _ in range(130):
            t.add_(1.0)
        return t * 1
    compiled, t = lt.compile(bump), lt.zeros(2)
    before = lt.compile_info()
    for k in range(1, 4):
        assert compiled(t).numpy().tolist() == [130.0 * k] * 2
    after = lt.compile_info()
    assert (after.traces - before.traces, after.hits - before.hits, after.fallbacks - before.fallbacks) == (1, 3, 0)

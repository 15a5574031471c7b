"""CUDA graph replay of the driver runtime (runtime/cuda_graph.py) where no GPU is: a fake device
whose memory is addressed by pointer, whose stream either runs work at once or records it into a
graph, and whose graphs replay what they recorded with the addresses and scalar values baked in
at capture, as CUDA's do.  Plans are real plans; each launch computes its nodes with the reference
executor on the fake memory.  On a GPU the op suite runs through the real graphs.

What is checked: values against numpy on every call while inputs change in place and outputs
move between addresses; a key captured on its second sight and replayed after; a changed Python
scalar never replays a graph baked with another; a failed capture turns the plan's graphs off and
the run still gives the right values; no capture while two threads use the device; the number of
graphs per plan stays bounded.
"""
from __future__ import annotations

import threading

import numpy as np
import pytest

import lazytorch as lt
from lazytorch.realize import kernel_plan
from lazytorch.runtime import cuda_graph
from lazytorch.runtime.executor import PlanExecutor
from lazytorch.runtime.reference import run_launch


class Device:
    """Memory by address (blocks reused by size, newest freed first, as Device.alloc does), one
    stream, graphs as recorded lists of work."""

    def __init__(self):
        self.memory: dict[int, np.ndarray] = {}
        self.free: dict[int, list[int]] = {}
        self.next = 4096
        self.threads = {threading.get_ident()}
        self.capture_lock = threading.Lock()
        self.capturing: list | None = None
        self.recording: list = []
        self.fail_capture = False
        self.destroyed = 0

    def alloc(self, nbytes: int) -> int:
        if self.free.get(nbytes):
            return self.free[nbytes].pop()
        self.next += max(nbytes, 1) + 256
        return self.next

    def enqueue(self, work) -> None:
        if self.capturing is not None:
            self.recording.append(work)
        else:
            work()

    def begin_capture(self, keep: list) -> None:
        self.capturing, self.recording = keep, []

    def end_capture(self):
        self.capturing = None
        return None if self.fail_capture else list(self.recording)

    def launch_graph(self, exe) -> None:
        for work in exe:
            work()

    def destroy_graph(self, exe) -> None:
        self.destroyed += 1


class Buffer:
    def __init__(self, dev: Device, shape, dtype):
        self.dev, self.shape, self.dtype = dev, tuple(shape), dtype
        self.nbytes = int(np.prod(self.shape, dtype=np.int64)) * np.dtype(dtype.np).itemsize
        self.ptr = dev.alloc(self.nbytes)
        dev.memory.setdefault(self.ptr, np.zeros(self.nbytes, np.uint8))
        if dev.capturing is not None:
            dev.capturing.append(self)

    def __del__(self):
        self.dev.free.setdefault(self.nbytes, []).append(self.ptr)

    def array(self) -> np.ndarray:
        return self.dev.memory[self.ptr][:self.nbytes].view(self.dtype.np).reshape(self.shape)


class Scalar:
    def __init__(self, value):
        self.value = value


class Backend:
    name = "cuda"

    def __init__(self, dev: Device):
        self.dev = dev

    def empty(self, shape, dtype):
        return Buffer(self.dev, shape, dtype)

    def param_converter(self):
        return lambda value, dtype: value

    def fast_scalar(self, dtype):
        return lambda value, dtype: Scalar(value)

    def any_flag_set(self, flags):
        return False

    def compile_launch(self, launch, plan):
        """The launch's nodes on the fake memory, its buffers' addresses and scalars' values
        taken when the work is queued (what a graph bakes in)."""
        def fn(reads, writes):
            ins = [("value", r.value) if isinstance(r, Scalar) else ("at", r.ptr) for r in reads]
            outs = [w.ptr for w in writes]
            memory = self.dev.memory

            def work():
                values = [np.asarray(v) if kind == "value" else _view(memory[v], n.shape, n.dtype)
                          for (kind, v), (n, _) in zip(ins, launch.reads)]
                for ptr, (n, _), value in zip(outs, launch.writes, run_launch(launch, values)):
                    _view(memory[ptr], n.shape, n.dtype)[...] = value
            self.dev.enqueue(work)
        return fn


def _view(block: np.ndarray, shape, dtype) -> np.ndarray:
    n = int(np.prod(shape, dtype=np.int64))
    return block[:n * np.dtype(dtype.np).itemsize].view(dtype.np).reshape(shape)


def _run_loop(calls: int, scalars=None, dev: Device | None = None, sight: int = 2):
    """(softmax(x * s + b, -1) @ xᵀ).sum(-1): a row kernel, a product, a reduction (two temps) and a
    runtime scalar s, in a loop that writes new inputs in place and keeps the last result alive."""
    dev = dev or Device()
    x, b = lt.randn(4, 6), lt.randn(6)
    lt.eval(x, b)
    plan = kernel_plan([(lt.softmax(x * 2.5 + b, dim=-1) @ x.t()).sum(-1)], backend="cpu")
    assert len(plan.launches) == 3
    graphed = cuda_graph.GraphedPlan(PlanExecutor(Backend(dev), plan), dev, sight)
    assert graphed.on
    bufs = {p.id: Buffer(dev, p.shape, p.dtype) for p in plan.params if p.slot not in plan.scalar_slots}
    rng = np.random.default_rng(0)
    y, held = None, []
    for k in range(calls):
        x = rng.standard_normal((4, 6)).astype(np.float32)
        b = rng.standard_normal(6).astype(np.float32)
        for buf in bufs.values():
            buf.array()[...] = x if buf.shape == (4, 6) else b
        s = 2.5 if scalars is None else scalars[k]
        y = graphed.run([s if p.slot in plan.scalar_slots else bufs[p.id] for p in plan.params])
        z = x * s + b
        e = np.exp(z - z.max(-1, keepdims=True))
        want = ((e / e.sum(-1, keepdims=True)) @ x.T).sum(-1)
        np.testing.assert_allclose(y[0].array(), want, rtol=1e-5, atol=1e-5)
        # tensors the user holds take the blocks freed meanwhile (other than the outputs' size):
        # no replay ever writes them
        assert all((dev.memory[ptr] == 0xAB).all() for ptr in held)
        for n, blocks in dev.free.items():
            while n != y[0].nbytes and blocks:
                held.append(blocks.pop())
                dev.memory[held[-1]][...] = 0xAB
    return graphed, dev


@pytest.fixture(autouse=True)
def _stats():
    before = dict(cuda_graph.STATS)
    yield
    cuda_graph.STATS.update(before)


def _delta(before: dict) -> dict:
    return {k: cuda_graph.STATS[k] - before[k] for k in before}


def test_loop_captures_each_output_address_on_its_second_sight_then_replays():
    before = dict(cuda_graph.STATS)
    graphed, dev = _run_loop(10)
    d = _delta(before)
    # outputs alternate between two addresses (the last result is alive): calls 1-2 run plainly,
    # 3-4 capture, 5-10 replay
    assert d == {"captures": 2, "replays": 8, "failures": 0}
    assert len(graphed.graphs) == 2


def test_always_captures_on_first_sight(monkeypatch):
    monkeypatch.setenv("LAZYTORCH_CUDA_GRAPHS", "always")
    before = dict(cuda_graph.STATS)
    _run_loop(10, sight=cuda_graph.sights())
    assert _delta(before) == {"captures": 2, "replays": 10, "failures": 0}


def test_a_changed_scalar_never_replays_a_graph_baked_with_another():
    before = dict(cuda_graph.STATS)
    _run_loop(8, scalars=[1.0, 1.0, 1.0, 1.0, -3.0, -3.0, -3.0, 1.0])
    assert _delta(before)["failures"] == 0        # (values are checked on every call)


def test_the_sign_of_a_zero_scalar_keys_its_graph():
    """-0.0 == 0.0 in Python, but a kernel given one or the other differs: 1 / (x * s)."""
    dev = Device()
    x = lt.tensor(np.ones(3, np.float32))
    lt.eval(x)
    plan = kernel_plan([(x * 2.5).reciprocal()], backend="cpu")
    graphed = cuda_graph.GraphedPlan(PlanExecutor(Backend(dev), plan), dev)
    buf = Buffer(dev, (3,), plan.params[0].dtype)
    buf.array()[...] = 1.0
    args = lambda s: [s if p.slot in plan.scalar_slots else buf for p in plan.params]   # noqa: E731
    for s in (0.0, 0.0, 0.0, -0.0, -0.0, 0.0):
        y = graphed.run(args(s))
        np.testing.assert_array_equal(y[0].array(), np.full(3, np.copysign(np.inf, s), np.float32))


def test_a_failed_capture_turns_graphs_off_and_the_run_is_still_right():
    dev = Device()
    dev.fail_capture = True
    before = dict(cuda_graph.STATS)
    graphed, _ = _run_loop(6, dev=dev)
    assert _delta(before) == {"captures": 0, "replays": 0, "failures": 1}
    assert not graphed.on


def test_no_capture_while_two_threads_use_the_device():
    dev = Device()
    dev.threads.add(-1)
    before = dict(cuda_graph.STATS)
    _run_loop(6, dev=dev)
    assert _delta(before) == {"captures": 0, "replays": 0, "failures": 0}


def test_graphs_per_plan_stay_bounded_and_churn_stops_capturing(monkeypatch):
    monkeypatch.setattr(cuda_graph, "MAX_GRAPHS", 1)
    before = dict(cuda_graph.STATS)
    graphed, dev = _run_loop(10)
    # two output addresses, one graph: the second capture evicts the first, then no more captures
    assert len(graphed.graphs) == 1 and dev.destroyed == 1 and graphed.evictions == 1
    assert _delta(before) == {"captures": 2, "replays": 5, "failures": 0}   # (calls 3, 4, 6, 8, 10)

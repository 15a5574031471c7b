"""CUDA graph replay of the driver runtime (runtime/cuda_graph.py) where no GPU is: the runtime's
own Device (its caching allocator, and how a capture hands out and takes back memory) over a fake
driver whose memory is addressed by pointer, whose stream either runs work at once or records it
into a graph, and whose graphs replay what they recorded with the addresses and scalar values
baked in at capture, as CUDA's do.  Plans are real plans; each launch computes its nodes with the
reference executor on the fake memory.  On a GPU the op suite runs through the real graphs.

What is checked: values against numpy on every call while inputs change in place and outputs
move between addresses, and blocks freed meanwhile are taken by tensors the user holds (a replay
never writes them); a key captured on its second sight and replayed after; a changed Python
scalar (the sign of a zero too) never replays a graph baked with another; a graph keeps the
memory of the run's peak, not of every temp; a failed or interrupted capture ends, hands its
memory back and turns the plan's graphs off, and the run still gives the right values; out of
memory during a capture fails the capture, not the run; no capture while two threads use the
device; the number of graphs per plan stays bounded.
"""
from __future__ import annotations

import gc
import threading
import weakref

import numpy as np
import pytest

import lazytorch as lt
from lazytorch.ir import dtypes as D
from lazytorch.realize import kernel_plan
from lazytorch.runtime import cuda_driver, cuda_graph
from lazytorch.runtime.executor import DeferredCheck, PlanExecutor
from lazytorch.runtime.reference import run_launch


class Driver:
    """libcuda's calls the allocator makes: blocks at fresh addresses, each with its memory."""

    def __init__(self, dev):
        self.dev, self.next, self.refuse_side = dev, 4096, False

    def cuMemAllocAsync(self, ptr, nbytes, stream):   # noqa: N802  (the driver's names)
        if self.refuse_side and stream is self.dev._side:
            return 2                                  # CUDA_ERROR_OUT_OF_MEMORY
        self.next += nbytes + 256
        ptr._obj.value = self.next
        self.dev.memory[self.next] = np.zeros(nbytes, np.uint8)
        return 0

    def cuMemFreeAsync(self, ptr, stream):            # noqa: N802
        del self.dev.memory[ptr]
        return 0

    def cuStreamSynchronize(self, stream):            # noqa: N802
        return 0

    def cuStreamCreate(self, stream, flags):          # noqa: N802
        return 0


class Device(cuda_driver.Device):
    """The runtime's Device on the fake driver; graphs are recorded lists of work."""

    def __init__(self):                               # (no GPU: the driver state is the fake's)
        self.cu, self.stream, self.pool, self._trimmed = Driver(self), "stream", None, False
        self._cached, self.cached_bytes, self.release_hooks, self.promised = {}, 0, [], {}
        self._unread, self._unread_lock = [], threading.Lock()
        self.threads = {threading.get_ident()}
        self.capture_lock = threading.RLock()
        self.memory: dict[int, np.ndarray] = {}
        self.recording: list = []
        self.fail_capture = False
        self.destroyed = 0

    def current(self):
        self.threads.add(threading.get_ident())

    def enqueue(self, work) -> None:
        if self.capturing is not None:
            self.recording.append(work)
        else:
            work()

    def begin_capture(self, capture) -> None:
        self.capturing, self.recording = capture, []

    def end_capture(self):
        self.capturing = None
        return None if self.fail_capture else list(self.recording)

    def launch_graph(self, exe) -> None:
        for work in exe:
            work()

    def download(self, ptr, nbytes, shape, dtype):
        return self.memory[ptr][:nbytes].view(dtype).reshape(shape).copy()

    def _read(self, unread) -> None:                  # (the work is done: no events to wait for)
        for flags, raise_error, _ in unread:
            if any(_array(self, f).any() for f in flags):
                raise_error()
                return

    def destroy_graph(self, exe) -> None:
        self.destroyed += 1


@pytest.fixture
def dev(monkeypatch):
    d = Device()
    monkeypatch.setattr(cuda_driver, "device", lambda: d)
    return d


def Buffer(dev: Device, shape, dtype) -> cuda_driver.DeviceBuffer:   # noqa: N802
    return cuda_driver.DeviceBuffer(tuple(shape), dtype)


def _array(dev: Device, buf) -> np.ndarray:
    return _view(dev.memory[buf.ptr], buf.shape, buf.dtype)


class Scalar:
    def __init__(self, value):
        self.value = value


class Backend:
    """Launches that compute their nodes on the fake memory, with their buffers' addresses and
    scalars' values taken when the work is queued (what a graph bakes in).  `checked`: the first
    launch returns a deferred check whose error closure holds the run's reads (as the embedding
    launch's does); `interrupt`: a launch queued during a capture raises KeyboardInterrupt.
    `deferred`: runs' flags wait with the device until it reads them (Device.check_later: a loop
    reads them when it reads a result), and the check's closure holds its reads weakly, as the
    driver's index launches do."""
    name = "cuda"

    def __init__(self, dev: Device, checked: bool = False, deferred: bool = False):
        self.dev, self.checked, self.interrupt, self.deferred = dev, checked, False, deferred
        self.flag = Buffer(dev, (1,), D.int32)

    def empty(self, shape, dtype):
        return Buffer(self.dev, shape, dtype)

    def param_converter(self):
        return lambda value, dtype: value

    def fast_scalar(self, dtype):
        return lambda value, dtype: Scalar(value)

    def any_flag_set(self, flags):
        return self.deferred and any(_array(self.dev, f).any() for f in flags)

    def check_flags(self, flags, raise_error):
        if self.deferred:
            self.dev._unread.append((flags, raise_error, None))
        elif self.any_flag_set(flags):
            raise_error()

    def compile_launch(self, launch, plan):
        first = launch is plan.launches[0]

        def fn(reads, writes):
            if self.interrupt and self.dev.capturing is not None:
                raise KeyboardInterrupt
            ins = [("value", r.value) if isinstance(r, Scalar) else ("at", r.ptr) for r in reads]
            outs = [w.ptr for w in writes]
            memory = self.dev.memory

            def work():
                values = [np.asarray(v) if kind == "value" else _view(memory[v], n.shape, n.dtype)
                          for (kind, v), (n, _) in zip(ins, launch.reads)]
                for ptr, (n, _), value in zip(outs, launch.writes, run_launch(launch, values)):
                    _view(memory[ptr], n.shape, n.dtype)[...] = value
            self.dev.enqueue(work)
            if self.checked and first:
                if self.deferred:
                    held = [weakref.ref(r) for r in reads]
                    return DeferredCheck(self.flag, lambda: IndexError(f"index out of range in {[r() for r in held]}"))
                return DeferredCheck(self.flag, lambda: IndexError(str(reads)))
        return fn


def _view(block: np.ndarray, shape, dtype) -> np.ndarray:
    n = int(np.prod(shape, dtype=np.int64))
    return block[:n * np.dtype(dtype.np).itemsize].view(dtype.np).reshape(shape)


def _graphed(dev: Device, outputs, sight: int = 2, **backend) -> tuple:
    plan = kernel_plan(outputs, backend="cpu")
    backend = Backend(dev, **backend)
    return cuda_graph.GraphedPlan(PlanExecutor(backend, plan), dev, cuda_driver.DeviceBuffer, sight), plan, backend


def _run_loop(dev: Device, calls: int, scalars=None, sight: int = 2, graphed=None):
    """(softmax(x * s + b, -1) @ xᵀ).sum(-1): a row kernel, a product, a reduction (two temps) and a
    runtime scalar s, in a loop that writes new inputs in place and keeps the last result alive."""
    x, b = lt.randn(4, 6), lt.randn(6)
    lt.eval(x, b)
    if graphed is None:
        graphed, plan, _ = _graphed(dev, [(lt.softmax(x * 2.5 + b, dim=-1) @ x.t()).sum(-1)], sight)
    plan = graphed.plan
    assert len(plan.launches) == 3 and graphed.on
    bufs = {p.id: Buffer(dev, p.shape, p.dtype) for p in plan.params if p.slot not in plan.scalar_slots}
    rng = np.random.default_rng(0)
    y, held = None, []
    for k in range(calls):
        x = rng.standard_normal((4, 6)).astype(np.float32)
        b = rng.standard_normal(6).astype(np.float32)
        for buf in bufs.values():
            _array(dev, buf)[...] = x if buf.shape == (4, 6) else b
        s = 2.5 if scalars is None else scalars[k]
        y = graphed.run([s if p.slot in plan.scalar_slots else bufs[p.id] for p in plan.params])
        z = x * s + b
        e = np.exp(z - z.max(-1, keepdims=True))
        want = ((e / e.sum(-1, keepdims=True)) @ x.T).sum(-1)
        np.testing.assert_allclose(_array(dev, y[0]), want, rtol=1e-5, atol=1e-5)
        # tensors the user holds take the blocks freed meanwhile (other than the outputs' size):
        # no replay ever writes them
        assert all((dev.memory[ptr] == 0xAB).all() for ptr in held)
        for n, blocks in dev._cached.items():
            while n != y[0].nbytes and blocks:
                held.append(blocks.pop())
                dev.cached_bytes -= n
                dev.memory[held[-1]][...] = 0xAB
    return graphed


@pytest.fixture(autouse=True)
def _stats():
    before = dict(cuda_graph.STATS)
    yield
    cuda_graph.STATS.update(before)


def _delta(before: dict) -> dict:
    return {k: cuda_graph.STATS[k] - before[k] for k in before}


def test_loop_captures_each_output_address_on_its_second_sight_then_replays(dev):
    before = dict(cuda_graph.STATS)
    graphed = _run_loop(dev, 10)
    # outputs alternate between two addresses (the last result is alive): calls 1-2 run plainly,
    # 3-4 capture (and launch the graph), 5-10 replay
    assert _delta(before) == {"captures": 2, "replays": 6, "failures": 0}
    assert len(graphed.graphs) == 2


def test_always_captures_on_first_sight(dev, monkeypatch):
    monkeypatch.setenv("LAZYTORCH_CUDA_GRAPHS", "always")
    before = dict(cuda_graph.STATS)
    _run_loop(dev, 10, sight=cuda_graph.sights())
    assert _delta(before) == {"captures": 2, "replays": 8, "failures": 0}


def test_a_changed_scalar_never_replays_a_graph_baked_with_another(dev):
    before = dict(cuda_graph.STATS)
    _run_loop(dev, 8, scalars=[1.0, 1.0, 1.0, 1.0, -3.0, -3.0, -3.0, 1.0])
    assert _delta(before)["failures"] == 0        # (values are checked on every call)


def test_the_sign_of_a_zero_scalar_keys_its_graph(dev):
    """-0.0 == 0.0 in Python, but a kernel given one or the other differs: 1 / (x * s)."""
    x = lt.tensor(np.ones(3, np.float32))
    lt.eval(x)
    graphed, plan, _ = _graphed(dev, [(x * 2.5).reciprocal()])
    buf = Buffer(dev, (3,), plan.params[0].dtype)
    _array(dev, buf)[...] = 1.0
    args = lambda s: [s if p.slot in plan.scalar_slots else buf for p in plan.params]   # noqa: E731
    for s in (0.0, 0.0, 0.0, -0.0, -0.0, 0.0):
        y = graphed.run(args(s))
        np.testing.assert_array_equal(_array(dev, y[0]), np.full(3, np.copysign(np.inf, s), np.float32))


def test_a_graph_keeps_the_runs_peak_memory_not_every_temp(dev):
    """Seven temps of one size, each dead after its reader: the capture reuses their blocks as a
    plain run does, so the graph keeps two or three, not seven."""
    x, w = lt.randn(4, 6), lt.randn(6, 6)
    lt.eval(x, w)
    y = x
    for _ in range(4):
        y = lt.softmax(y @ w, dim=-1)
    graphed, plan, _ = _graphed(dev, [y], sight=1)
    assert len(plan.launches) == 8
    bufs = [Buffer(dev, p.shape, p.dtype) for p in plan.params]
    graphed.run(bufs)
    (graph,) = graphed.graphs.values()
    assert len(graph.keep) + len(graph.blocks) <= 3


def test_a_failed_capture_hands_its_memory_back_and_turns_graphs_off(dev):
    dev.fail_capture = True
    before = dict(cuda_graph.STATS)
    graphed = _run_loop(dev, 6)
    assert _delta(before) == {"captures": 0, "replays": 0, "failures": 1}
    assert not graphed.on and dev.capturing is None


def test_an_interrupted_capture_ends_and_the_next_runs_are_right(dev):
    x, b = lt.randn(4, 6), lt.randn(6)
    lt.eval(x, b)
    graphed, plan, backend = _graphed(dev, [(lt.softmax(x * 2.5 + b, dim=-1) @ x.t()).sum(-1)], sight=1)
    backend.interrupt = True
    bufs = [2.5 if p.slot in plan.scalar_slots else Buffer(dev, p.shape, p.dtype) for p in plan.params]
    with pytest.raises(KeyboardInterrupt):
        graphed.run(bufs)
    assert dev.capturing is None                  # (ended: the stream runs work again)
    backend.interrupt = False
    _run_loop(dev, 3, graphed=graphed)


def test_out_of_memory_during_a_capture_fails_the_capture_not_the_run(dev):
    """A capture's allocation may not release memory (its stream takes no frees or waits): it
    fails the capture at once, and the plain run that follows allocates as any run does."""
    dev.cu.refuse_side = True                 # (the capture's new blocks come from the side stream)
    before = dict(cuda_graph.STATS)
    x, b = lt.randn(4, 6), lt.randn(6)
    lt.eval(x, b)
    graphed, _, _ = _graphed(dev, [(lt.softmax(x * 2.5 + b, dim=-1) @ x.t()).sum(-1)], sight=1)
    _run_loop(dev, 3, graphed=graphed)
    assert _delta(before) == {"captures": 0, "replays": 0, "failures": 1}
    assert dev.capturing is None


def test_a_graph_does_not_hold_its_capture_runs_inputs(dev):
    """A launch's deferred check closes over the run's buffers (the embedding's does); the graph
    keeps only the flag, so the inputs of the captured run are freed with their tensors."""
    import gc
    import weakref
    x = lt.tensor(np.ones((4, 6), np.float32))
    lt.eval(x)
    graphed, plan, _ = _graphed(dev, [lt.softmax(x * 2.5, dim=-1).sum(-1)], sight=1, checked=True)
    inp = Buffer(dev, (4, 6), D.float32)
    alive = weakref.ref(inp)
    graphed.run([2.5 if p.slot in plan.scalar_slots else inp for p in plan.params])
    assert len(graphed.graphs) == 1
    del inp
    gc.collect()
    assert alive() is None


def test_a_plan_that_returns_one_buffer_twice_replays_it_in_both_places(dev):
    """An output the plan returns twice (a training step's two BatchNorm biases that take the
    same gradient, one node after CSE) is one buffer in both places, captured and replayed: it
    had turned the plan's graphs off, and ResNet-18's lazy step paid ~18 us of host time on each
    of its 251 launches."""
    import dataclasses
    x = lt.tensor(np.ones((4, 6), np.float32))
    lt.eval(x)
    plan = kernel_plan([(x * 2.5).sum(-1), x.exp()], backend="cpu")
    plan = dataclasses.replace(plan, outputs=[plan.outputs[0], plan.outputs[1], plan.outputs[0]])
    graphed = cuda_graph.GraphedPlan(PlanExecutor(Backend(dev), plan), dev, cuda_driver.DeviceBuffer, 2)
    assert graphed.on
    inp = Buffer(dev, (4, 6), D.float32)
    before = dict(cuda_graph.STATS)
    for k in range(5):
        _array(dev, inp)[...] = k
        sums, exps, again = graphed.run([2.5 if p.slot in plan.scalar_slots else inp for p in plan.params])
        assert again is sums
        np.testing.assert_allclose(_array(dev, sums), np.full(4, 15.0 * k), rtol=1e-6)
        np.testing.assert_allclose(_array(dev, exps), np.full((4, 6), np.exp(k), np.float32), rtol=1e-6)
        del sums, exps, again
    assert _delta(before)["replays"] >= 2


def test_a_loop_that_feeds_its_outputs_back_replays_two_graphs(dev):
    """A training loop's step reads the last step's outputs (the weights) and writes new ones:
    each output goes back to its address of two runs ago, so the keys alternate between two
    and replay, whatever order the allocator's free blocks are in (shuffled here between runs;
    the allocator alone then handed out new addresses at every step and never replayed)."""
    x = lt.tensor(np.ones((4, 6), np.float32))
    lt.eval(x)
    graphed, plan, _ = _graphed(dev, [x.cos()])
    w = Buffer(dev, (4, 6), D.float32)
    _array(dev, w)[...] = 0.0
    want = np.zeros((4, 6), np.float32)
    before = dict(cuda_graph.STATS)
    rng = np.random.default_rng(0)
    for _ in range(12):
        (w,) = graphed.run([w])
        want = np.cos(want)
        np.testing.assert_allclose(_array(dev, w), want, rtol=1e-6)
        others = [Buffer(dev, (4, 6), D.float32) for _ in range(3)]     # (the cache's order shuffled)
        for k in rng.permutation(3):
            others[k] = None
    # call 1 reads the first buffer; 2 and 3 see the two keys first, 4 and 5 capture, 6-12 replay
    assert _delta(before) == {"captures": 2, "replays": 7, "failures": 0}
    assert len(graphed.graphs) == 2


def test_a_loop_that_reads_its_flags_every_few_runs_replays_and_reports_errors(dev):
    """A loop that reads a result (and so the runs' error flags) every few runs, as a training
    loop that logs its loss every 10 steps: a replay's flags are read at the latest when the plan
    runs next, before its outputs are made, so its error closure no longer holds the weights'
    blocks and the keys alternate (held until a result was read, no key came twice after a
    capture: ResNet-18's lazy step on an H200 captured 8 graphs and replayed none).  A set flag
    raises the op's own error at that read, or at the next run."""
    x = lt.tensor(np.ones((4, 6), np.float32))
    lt.eval(x)
    graphed, plan, backend = _graphed(dev, [x.cos()], checked=True, deferred=True)
    w = Buffer(dev, (4, 6), D.float32)
    _array(dev, w)[...] = 0.0
    want = np.zeros((4, 6), np.float32)
    before = dict(cuda_graph.STATS)
    for k in range(12):
        (w,) = graphed.run([w])
        want = np.cos(want)
        if k % 5 == 4:                  # (a result read: the flags with it)
            dev.read_flags()
            np.testing.assert_allclose(_array(dev, w), want, rtol=1e-6)
    # calls 1 and 2 see the two keys first, 3 and 4 capture, 5-12 replay
    assert _delta(before) == {"captures": 2, "replays": 8, "failures": 0}
    for reading in (dev.read_flags, lambda: graphed.run([w])):     # (a result read; the next run)
        (w,) = graphed.run([w])
        _array(dev, backend.flag)[...] = 1          # (an index out of range in that run)
        with pytest.raises(IndexError, match="index out of range in"):
            reading()
        _array(dev, backend.flag)[...] = 0


def test_a_loop_replays_when_its_temps_fill_the_allocators_cache(dev, monkeypatch):
    """A step whose temps free more than the cache keeps (MAX_CACHED_BYTES; ResNet-18's training
    step at batch 64 on 224² frees many GB): a block promised to a graphed plan is kept past the
    cap, so its outputs still go back to their addresses of two runs ago.  Freed to the driver,
    each came back elsewhere, no key was seen twice and the step never replayed (H200: 224
    launches issued one by one, 5.2 ms of host time a step)."""
    monkeypatch.setattr(cuda_driver, "MAX_CACHED_BYTES", 96)
    x = lt.tensor(np.ones((4, 6), np.float32))
    lt.eval(x)
    graphed = _graphed(dev, [x.cos()])[0]
    w = Buffer(dev, (4, 6), D.float32)
    _array(dev, w)[...] = 0.0
    want = np.zeros((4, 6), np.float32)
    before = dict(cuda_graph.STATS)
    for _ in range(10):
        temp = Buffer(dev, (4, 6), D.float32)
        (out,) = graphed.run([w])
        del temp                                    # (the run's temps fill the cache, then the
        w = out                                     # last step's weights are freed)
        want = np.cos(want)
        np.testing.assert_allclose(_array(dev, w), want, rtol=1e-6)
    # call 1 reads the first buffer; 2 and 3 see the two keys first, 4 and 5 capture, 6-10 replay
    # (no capture at all when the promised blocks went to the driver)
    assert _delta(before) == {"captures": 2, "replays": 5, "failures": 0}
    assert dev.cached_bytes == sum(96 * len(b) for b in dev._cached.values())


def test_plans_that_run_in_turn_keep_their_addresses_and_replay(dev):
    """Two loops that feed their outputs back, run in turn (a lazy step and an lt.compile of it;
    DCGAN's two networks), with a buffer of the same size made and dropped between runs (a plain
    run's temp): the blocks each plan's outputs go back to are promised to it (Device.promise),
    so neither the other plan nor the temp takes them, and both replay.  Left to the allocator,
    each took the other's freed blocks: no key came twice and neither plan ever captured."""
    x = lt.tensor(np.ones((4, 6), np.float32))
    lt.eval(x)
    plans = [_graphed(dev, [x.cos()])[0], _graphed(dev, [x.sin()])[0]]
    steps = [np.cos, np.sin]
    ws = [Buffer(dev, (4, 6), D.float32) for _ in plans]
    wants = [np.zeros((4, 6), np.float32) for _ in plans]
    for w in ws:
        _array(dev, w)[...] = 0.0
    before = dict(cuda_graph.STATS)
    for _ in range(12):
        for k, graphed in enumerate(plans):
            (ws[k],) = graphed.run([ws[k]])
            wants[k] = steps[k](wants[k])
            temp = Buffer(dev, (4, 6), D.float32)        # (takes the most recently freed block)
            _array(dev, temp)[...] = 7.0
            del temp
        for w, want in zip(ws, wants):
            np.testing.assert_allclose(_array(dev, w), want, rtol=1e-6)
    assert [len(g.graphs) for g in plans] == [2, 2]
    assert _delta(before) == {"captures": 4, "replays": 14, "failures": 0}
    promised = sorted(dev.promised)
    del plans, graphed
    import gc
    gc.collect()
    assert promised and dev.promised == {}           # (a plan gone gives its addresses up)


def test_an_output_whose_old_block_is_held_takes_no_siblings_block(dev):
    """Two outputs of one size; the user holds each run's first output for two more runs, so its
    block of two runs ago is still taken when the plan asks for it again.  That output then takes
    a block promised to no plan, not the one its sibling goes back to: the second output keeps
    its two addresses (a sibling's block taken had sent it to a third, and DCGAN's plans cycled
    through six keys, more than MAX_GRAPHS)."""
    x = lt.tensor(np.ones((4, 6), np.float32))
    lt.eval(x)
    graphed = _graphed(dev, [x.cos(), x.sin()])[0]
    w = Buffer(dev, (4, 6), D.float32)
    _array(dev, w)[...] = 0.5
    held, seconds = [], []
    for _ in range(12):
        first, second = graphed.run([w])
        np.testing.assert_allclose(_array(dev, first), np.cos(0.5), rtol=1e-6)
        np.testing.assert_allclose(_array(dev, second), np.sin(0.5), rtol=1e-6)
        held = (held + [first])[-3:]
        seconds.append(second.ptr)
        del first, second
    assert len(set(seconds[2:])) <= 2, seconds


def test_a_buffer_goes_back_to_the_device_that_made_it(dev, monkeypatch):
    """A buffer is freed into its own device's cache, whichever device is current when it is
    dropped: these tests' fake device had left its addresses in the real device's cache (a buffer
    the collector dropped after the test), and a real buffer later took one."""
    buf = Buffer(dev, (4, 6), D.float32)
    other = Device()
    monkeypatch.setattr(cuda_driver, "device", lambda: other)
    ptr = buf.ptr
    del buf
    assert dev._cached == {96: [ptr]} and other._cached == {}


def test_no_capture_while_two_threads_use_the_device(dev):
    dev.threads.add(-1)
    before = dict(cuda_graph.STATS)
    _run_loop(dev, 6)
    assert _delta(before) == {"captures": 0, "replays": 0, "failures": 0}


def test_graphs_per_plan_stay_bounded_and_churn_stops_capturing(dev, monkeypatch):
    monkeypatch.setattr(cuda_graph, "MAX_GRAPHS", 1)
    before = dict(cuda_graph.STATS)
    graphed = _run_loop(dev, 10)
    # two output addresses, one graph: the second capture evicts the first, then no more captures
    assert len(graphed.graphs) == 1 and dev.destroyed == 1 and graphed.evictions == 1
    assert _delta(before) == {"captures": 2, "replays": 3, "failures": 0}   # (calls 6, 8, 10)


class Uploading(Backend):
    """A backend that binds what it does not take as it is: a host array is uploaded to a new
    buffer, and a Python number of a param it does not take by value (`device_scalars`) goes
    to a new 0-d buffer, as the driver backend does for scalars of other dtypes."""

    def __init__(self, dev: Device):
        super().__init__(dev)
        self.binds = 0

    def param_converter(self):
        def convert(value, dtype):
            if isinstance(value, np.ndarray):
                buf = Buffer(self.dev, value.shape, dtype)
                _array(self.dev, buf)[...] = value
                return buf
            return value
        return convert

    def fast_scalar(self, dtype):
        return None

    def scalar(self, value, dtype):
        buf = Buffer(self.dev, (), dtype)
        _array(self.dev, buf)[...] = value
        return buf


def _scaled(dev: Device, backend: Backend):
    """(graphed plan, args(x, s)) of x * s with a runtime scalar s."""
    x = lt.tensor(np.ones(5, np.float32))
    lt.eval(x)
    plan = kernel_plan([x * 2.5], backend="cpu")
    assert len(plan.scalar_slots) == 1
    graphed = cuda_graph.GraphedPlan(PlanExecutor(backend, plan), dev, cuda_driver.DeviceBuffer, 2)
    return graphed, lambda x, s: [s if p.slot in plan.scalar_slots else x for p in plan.params]


def test_a_replay_binds_nothing_and_gives_each_calls_values(dev):
    """A graph's key is read off the args as given: a device buffer's address, a by-value
    scalar's value.  A hit binds nothing; a miss binds as a plain run."""
    backend = Backend(dev)
    graphed, args = _scaled(dev, backend)
    binds = []
    bind = graphed.executor.bind
    graphed.executor.bind = lambda a: binds.append(1) or bind(a)
    x = Buffer(dev, (5,), D.float32)
    before = dict(cuda_graph.STATS)
    for k, s in enumerate([2.0, 2.0, 2.0, 2.0, -0.5, -0.5, -0.5, 2.0]):
        _array(dev, x)[...] = np.arange(5) + k
        (y,) = graphed.run(args(x, s))
        np.testing.assert_array_equal(_array(dev, y), ((np.arange(5) + k) * s).astype(np.float32))
        del y                       # (the next call's output takes its block: one address)
    # 2.0 runs plainly, is captured, replays twice; -0.5 runs plainly, is captured, replays once;
    # 2.0 replays its graph again
    assert _delta(before) == {"captures": 2, "replays": 4, "failures": 0}
    assert len(binds) == 8 - 4


def test_host_arrays_and_scalars_in_device_buffers_key_their_bound_addresses(dev):
    """Args the backend binds to new buffers (a host array uploaded, a scalar it does not take by
    value) are keyed on the bound buffers' addresses, which the graph baked: each call's new
    values are in the buffers at those addresses before the replay reads them."""
    backend = Uploading(dev)
    graphed, args = _scaled(dev, backend)
    assert graphed.executor.by_value == []
    before = dict(cuda_graph.STATS)
    for k, s in enumerate([2.0, 3.0, -1.0, 0.5, 4.0, 2.0]):
        x = (np.arange(5) + k).astype(np.float32)
        (y,) = graphed.run(args(x, s))
        np.testing.assert_array_equal(_array(dev, y), x * np.float32(s))
        del y
    assert _delta(before)["replays"] >= 3         # (freed blocks come back: the addresses repeat)


@pytest.mark.skipif(cuda_graph._LAUNCH is None, reason="runtime/_launch.c did not build")
def test_the_replay_key_in_c_is_the_pythons(dev):
    """runtime/_launch.c graph_key against GraphedPlan._addressed_key_py: runtime scalars (zeros of
    both signs, a bool), device buffers, the outputs; None where a buffer param is host data."""
    graphed, plan, _ = _graphed(dev, [(lt.softmax(lt.randn(4, 6) * 2.5 + lt.randn(6), dim=-1)).sum(-1)])
    bufs = {p.id: Buffer(dev, p.shape, p.dtype) for p in plan.params if p.slot not in plan.scalar_slots}
    outs = graphed._outputs()
    assert plan.scalar_slots
    for s in (2.5, 0.0, -0.0, 0, False, True, -7):
        args = [s if p.slot in plan.scalar_slots else bufs[p.id] for p in plan.params]
        got, want = graphed._addressed_key(args, outs), graphed._addressed_key_py(args, outs)
        assert got == want and repr(got) == repr(want)
    host = [2.5 if p.slot in plan.scalar_slots else np.zeros(p.shape, np.float32) for p in plan.params]
    assert graphed._addressed_key(host, outs) is None is graphed._addressed_key_py(host, outs)
    with pytest.raises(IndexError):
        cuda_graph._LAUNCH.graph_key((0,), (5,), cuda_driver.DeviceBuffer, cuda_graph.scalar_key, [1.0], [])
    with pytest.raises(TypeError):
        cuda_graph._LAUNCH.graph_key([0], (), cuda_driver.DeviceBuffer, cuda_graph.scalar_key, [1.0], [])

"""CUDA graphs for the driver runtime: a plan's launches recorded once on the stream and replayed
with one cuGraphLaunch.

A run of the driver runtime pays host time for every launch (a kernel ~2 us, a cuBLAS GEMM
~15 us on an H100 host), and the GPU idles while the first launch is prepared.  Replayed as a graph, a
run is one driver call: on an H100, W5 (an MLP) 238 -> 225 us and W7 (20 ops on 1,024 elements) 23 ->
19 us per lt.compile call, synchronised (benchmarks/gpu_graph_probe.py, A/B in one process).

A graph holds what its launches were given: buffer addresses, and the Python scalars kernels take
by value.  So a replay is keyed on exactly those -- the address of each param and output buffer
and the value of each scalar (a zero with its sign) -- and is correct whatever the buffers hold.
The key is read off the run's args as given (a device buffer binds as itself, a by-value scalar
as its number), so a replay binds nothing: binding W7's 20 scalars and keying them one by one took
7-14 us of an H100 host's call, and its replay inside the lazy call went 15.5 -> 8.5 us
(benchmarks/gpu_w7_stages.py).  Args the backend binds to new buffers (a host array, a scalar it
does not take by value) are keyed on the bound buffers' addresses.
The memory the launches take during the capture (temps, contiguous copies) is the graph's
(`Capture`): a block freed during the capture serves the capture's later buffers, as in a plain
run (one stream records a chain), so a graph keeps its run's peak, and no later buffer takes that
memory while the graph lives.  Keys repeat in a loop: each output goes back to its address of two
runs ago where that block is free (`GraphedPlan._outputs`, `Device.alloc`'s `prefer`), so a loop that feeds a
run's outputs to the next (a training step's weights) alternates between two keys; the
allocator's own order of free blocks had given a training step new addresses at every step.
Those addresses are promised to the plan: freed, no other allocation takes them (another plan's
runs, this plan's plain runs' temps), so plans that run in turn (a lazy step and an lt.compile
of it, DCGAN's two networks) each keep their two keys; and the allocator's cache keeps them past
its cap (`Device.free`: a step whose temps fill the cache had lost them to the driver).  A key is
captured the second time it is seen (a key seen once may never come again: a capture costs a
run's host time and an instantiation) and up to MAX_GRAPHS are kept per plan, least recently used first out.  A plan
whose keys churn through more than that (ten results kept alive in a list, say) stops capturing
once it has evicted MAX_GRAPHS graphs, and replays the graphs it has.  A graph keeps its launches'
error flags, not their checks (whose error closures hold the run's inputs, which would pin those
addresses): a flag set after a replay reruns the plan plainly, which raises the launch's error; the
replay's flags are read at the latest when the plan runs next, before its outputs are allocated
(held longer, the replay's args kept their blocks from the next run's outputs).

Not captured: plans with host launches, traced runs (LAZYTORCH_DEBUG), plans whose outputs are not
each written by one launch, and every run once a second thread has used the device (work another
thread queues on the stream would land in the graph; `Device.current` makes a new thread wait for
a capture in progress).  A capture that fails -- a launch that reads a buffer on the host, memory
that runs out (a capture may not release the cache: its stream takes no frees) -- hands its memory
back and turns graphs off for that plan; the run then happens as usual.  An interrupt ends the
capture first.  Memory running out elsewhere drops every graph (`drop_all`, a release hook).
LAZYTORCH_CUDA_GRAPHS=0 turns them off altogether; LAZYTORCH_CUDA_GRAPHS=always captures a key
on its first sight (every run of a test suite then goes through a graph).
"""
from __future__ import annotations

import functools
import itertools
import math
import os
import weakref
from collections import Counter, OrderedDict, deque
from operator import itemgetter
from typing import Any, Sequence

import numpy as np

from .backend import native_launch, scalar_key
from .executor import PlanExecutor, raise_first

_LAUNCH = native_launch()
MAX_GRAPHS = 4          # per plan
MAX_SEEN = 16           # keys remembered per plan, waiting for their second run

# lt.cuda.graph_info(): captures made, replays run, captures that failed
STATS = {"captures": 0, "replays": 0, "failures": 0}

_plans: weakref.WeakSet = weakref.WeakSet()     # (for Device.release: drop every graph)
_NUMBERS = itertools.count(1)                   # (a plan's number: whose addresses Device.promised holds)


def sights() -> int:
    """The sight of a key on which it is captured (LAZYTORCH_CUDA_GRAPHS); 0: never."""
    return {"0": 0, "always": 1}.get(os.environ.get("LAZYTORCH_CUDA_GRAPHS", ""), 2)


class Capture:
    """The memory of a CUDA graph being captured: every block handed out meanwhile (`blocks`; the
    graph owns them once the capture ends), those of them freed during it (`free`, by size), and
    weak references to the buffers made during it (`made`: those still alive at its end stay
    with the graph, so no later owner frees their block while the graph writes it)."""

    def __init__(self) -> None:
        self.blocks: set[int] = set()
        self.free: dict[int, list[int]] = {}
        self.made: list = []

    def alive(self) -> list:
        return [b for b in (r() for r in self.made) if b is not None]

    def freed(self) -> list[tuple[int, int]]:
        """(address, bytes) of the capture's blocks no buffer holds."""
        return [(ptr, n) for n, ptrs in self.free.items() for ptr in ptrs]


class _Graph:
    """An executable graph, the memory its launches write that no caller owns (buffers still alive
    when its capture ended, and freed blocks), and the error flags its launches set."""

    def __init__(self, dev, exe, capture, flags: list):
        self.dev, self.exe, self.flags = dev, exe, flags
        self.keep, self.blocks = capture.alive(), capture.freed()

    def __del__(self) -> None:
        try:
            if self.exe is not None:
                self.dev.destroy_graph(self.exe)
            for ptr, nbytes in self.blocks:
                self.dev.free(ptr, nbytes)
        except Exception:               # (interpreter shutdown: the driver may be gone)
            pass


def _picker(positions: list[int]):
    """A function of a run's args returning the tuple of those at `positions` (itemgetter, which
    returns a bare item for one position and needs at least one)."""
    if len(positions) > 1:
        return itemgetter(*positions)
    if positions:
        k = positions[0]
        return lambda args: (args[k],)
    return lambda args: ()


class GraphedPlan:
    """A PlanExecutor whose runs replay CUDA graphs where they can (see the module docstring)."""

    def __init__(self, executor: PlanExecutor, dev, buffer_type: type, sight: int = 2):
        self.executor, self.plan, self.dev = executor, executor.plan, dev
        self.first = sight == 1
        plan = executor.plan
        written = Counter(b.id for launch in plan.launches for _, b in launch.writes)
        outputs = [o.id for o in plan.outputs]
        self.on = (executor.host_launches == 0 and not executor.traced and executor.memory is None
                   and bool(plan.launches) and all(written[o] == 1 for o in outputs))
        self.out_meta = [(tuple(o.shape), o.dtype) for o in plan.outputs]
        # (each output's size, worked out once: a replay's only other host work is its key)
        self.out_bytes = [math.prod(shape) * np.dtype(dtype.np).itemsize for shape, dtype in self.out_meta]
        # an output the plan returns twice is one buffer (a training step's two BatchNorm biases
        # that take the same gradient: one node after CSE); its later places repeat the first's
        first: dict[int, int] = {}
        self.out_first = [first.setdefault(o, k) for k, o in enumerate(outputs)]
        self.recent: deque[list[int]] = deque(maxlen=2)     # the last two runs' output addresses
        self.number = next(_NUMBERS)    # (its promise's owner: Device.promise)
        # a key is read off the args as given: the value of each param the launches take by
        # value (the executor's by_value), the address of every other -- of the arg itself when
        # it is a device buffer (`buffer_type`: the backend binds it unchanged), else of its bound buffer
        by_value = set(executor.by_value)
        self.values = _picker(executor.by_value)
        self.buffers = _picker([k for k in range(len(plan.params)) if k not in by_value])
        self.buffer_slots = [i for k, (i, _, _) in enumerate(executor.params) if k not in by_value]
        self.buffer_type = buffer_type
        if _LAUNCH is not None:         # (the C key: an instance attribute holding no reference to self)
            self._addressed_key = functools.partial(
                _LAUNCH.graph_key, tuple(executor.by_value),
                tuple(k for k in range(len(plan.params)) if k not in by_value), buffer_type, scalar_key)
        self.graphs: OrderedDict[tuple, _Graph] = OrderedDict()
        self.seen: OrderedDict[tuple, None] = OrderedDict()
        self.flagged = False            # (a replay's flags wait to be read: _check_replay)
        self.evictions = 0
        if self.on:
            _plans.add(self)
            weakref.finalize(self, _forget_addresses, dev, self.recent, self.number)

    def run(self, args: Sequence[Any], deferred: list | None = None) -> list:
        ex, dev = self.executor, self.dev
        dev.current()                   # (a thread new to the device counts before the test)
        if not self.on or deferred is not None or len(dev.threads) > 1:
            return ex.run(args, deferred)
        if self.flagged:                # (the last replay's error closure holds its args: _check_replay)
            self.flagged = False
            dev.read_flags()
        outs = self._outputs()
        key = self._addressed_key(args, outs)
        graph = self.graphs.get(key)
        if graph is None:               # (a replay binds nothing: its graph holds what binding gave)
            env = ex.bind(args)
            if key is None:
                key = self._key(args, [env[i] for i in self.buffer_slots], outs)
                graph = self.graphs.get(key)
        if graph is None:
            if None in key or not (self.first or key in self.seen) or self.evictions >= MAX_GRAPHS:
                self._remember(key)
                return ex.run_bound(env, None, outs)
            graph = self._capture(env, outs, key)
            if graph is None:
                return ex.run_bound(env, None, outs)
        else:
            self.graphs.move_to_end(key)
            STATS["replays"] += 1
        if graph.flags:                 # (its flags from an earlier launch are read before it writes them again)
            dev.read_flags()
        dev.launch_graph(graph.exe)
        if graph.flags:
            self._check_replay(graph, args)
        return outs

    def _check_replay(self, graph: "_Graph", args: Sequence[Any]) -> None:
        """The replay's flags, read with the next host read or at the start of this plan's next
        run, whichever comes first: a set flag reruns the plan plainly on the run's args, which
        raises the launch's own error.  Held until a host read, the args kept their blocks from
        the next run's outputs in a loop that reads its loss every N steps, whose keys then
        never came twice (ResNet-18's lazy step at 16 x 128² on an H200: 8 captures, no replay).
        (The replay of a graph with flags waits for the GPU to finish its last run anyway.)"""
        ex = self.executor
        ex.backend.check_flags(graph.flags, lambda: _rerun(ex, args))
        self.flagged = True

    def _outputs(self) -> list:
        """The run's output buffers, written in place by the plan or its graph: each back at its
        address of two runs ago where that block is free.  A loop feeds a run's outputs to the
        next (a training step's new weights), so the run before last's outputs are the ones
        freed: its keys alternate between two (weights at A written to B, then B to A), where the
        allocator's order of free blocks had given new addresses at every step and no key was
        ever seen twice (ResNet-18's lazy step: 251 launches, ~18 us of host time each).  An
        output the plan returns twice is one buffer in both places."""
        recent, number = self.recent, self.number
        prior = recent[0] if len(recent) == 2 else None
        make = self.buffer_type
        # Each output asks for its address of two runs ago; where that block is still held, for
        # one promised to no plan.  Only a run with no such address to ask for (the first two)
        # may take a block promised to this plan: a later one's output had taken the block
        # another output of the same run was to go back to, which then took a third's, and
        # DCGAN's plans cycled through six keys, more than their graphs kept.
        owner = number if prior is None else 0
        outs: list = []
        for k, ((shape, dtype), nbytes, first) in enumerate(zip(self.out_meta, self.out_bytes, self.out_first)):
            outs.append(outs[first] if first != k else make(shape, dtype, nbytes, prior[k] if prior else 0, owner))
        # the addresses of the last two runs are this plan's (Device._take_cached): another
        # plan's runs, or this one's plain run's temps, may not take them once freed
        ptrs = [o.ptr for o in outs]
        if prior is not None:
            self.dev.unpromise(prior, number)
        self.dev.promise(ptrs, number)
        recent.append(ptrs)
        return outs

    def _addressed_key_py(self, args: Sequence[Any], outs: list) -> tuple | None:
        """The run's key read off its args as given, where every buffer param is a device buffer
        (None otherwise: the key is read off the bound buffers).  In C where runtime/_launch.c
        built (`graph_key`, installed as `_addressed_key`)."""
        buffers = self.buffers(args)
        if not all(b.__class__ is self.buffer_type for b in buffers):
            return None
        return self._key(args, buffers, outs)

    _addressed_key = _addressed_key_py

    def _key(self, args: Sequence[Any], buffers: Sequence[Any], outs: list) -> tuple:
        """What a graph bakes of a run: the by-value params' values (a zero with its sign), the
        other params' and the outputs' addresses (None where a buffer has none: not replayed)."""
        values = self.values(args)
        if 0 in values:                 # (only a zero can be -0.0, which == 0.0)
            values = tuple([v if v else scalar_key(v) for v in values])
        return (values, *[getattr(b, "ptr", None) for b in buffers], *[o.ptr for o in outs])

    def _remember(self, key: tuple) -> None:
        self.seen[key] = None
        if len(self.seen) > MAX_SEEN:
            self.seen.popitem(last=False)

    def _capture(self, env: list, outs: list, key: tuple) -> _Graph | None:
        dev = self.dev
        with dev.capture_lock:
            if len(dev.threads) > 1:
                return None
            capture, checks = Capture(), []
            dev.read_flags()            # (before the capture: its launches zero the flags they write)
            dev.begin_capture(capture)
            try:
                self.executor.run_bound(list(env), checks, outs)
            except BaseException as e:  # (a real error is raised again by the plain run)
                exe = dev.end_capture()
                if exe is not None:
                    dev.destroy_graph(exe)
                _Graph(dev, None, capture, [])      # (its memory back to the cache)
                if not isinstance(e, Exception):
                    raise               # (Ctrl-C: the capture is ended first)
                exe = None
            else:
                exe = dev.end_capture()
        if exe is None:
            self.on = False
            self.graphs.clear()
            _forget_addresses(self.dev, self.recent, self.number)
            STATS["failures"] += 1
            return None
        STATS["captures"] += 1
        # (the flags alone: the checks' error closures hold the run's inputs, which would pin
        # their addresses; a set flag reruns the plan plainly, which raises the error)
        graph = self.graphs[key] = _Graph(dev, exe, capture, [c.flag for c, _ in checks])
        self.seen.pop(key, None)
        if len(self.graphs) > MAX_GRAPHS:
            self.graphs.popitem(last=False)
            self.evictions += 1
        return graph


def _forget_addresses(dev, recent: deque, number: int) -> None:
    """A plan's promised addresses given up (it captures no more, or it is gone)."""
    while recent:
        dev.unpromise(recent.popleft(), number)


def drop_all() -> None:
    """Every plan's graphs go, and the buffers they kept with them (memory ran out)."""
    for plan in list(_plans):
        plan.graphs.clear()


def _rerun(ex, args: Sequence[Any]) -> None:
    """A replay set an error flag: the plain run raises the launch's own error (its flags read
    at once: they come back in `checks`)."""
    checks: list = []
    ex.run(args, checks)
    if checks:
        raise_first(checks)
    raise AssertionError("a CUDA graph's launch set an error flag that the plain run did not")

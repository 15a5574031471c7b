"""CUDA graphs for the driver runtime: a plan's launches recorded once on the stream and replayed
with one cuGraphLaunch.

A run of the driver runtime pays host time for every launch (a kernel ~2 us, a cuBLAS GEMM
~15 us on an H100 host), and the GPU idles while the first launch is prepared.  Replayed as a graph, a
run is one driver call: on an H100, W5 (an MLP) 245 -> 216 us and W7 (20 ops on 1,024 elements) 20 ->
9 us, launch to synchronised result (benchmarks/gpu_graph_probe.py).

A graph holds what its launches were given: buffer addresses, and the Python scalars kernels take
by value.  So a replay is keyed on exactly those -- the address of each param and output buffer
and the value of each scalar -- and is correct whatever the buffers hold.  The buffers the launches
make (temps, contiguous copies) are made during the capture and kept by the graph, so no later
buffer takes their memory.  Keys repeat in a loop: a call's output reuses a freed block of its size
(`Device.alloc`), so outputs alternate between one or two addresses.  A key is captured the second
time it is seen (a key seen once may never come again: a capture costs a run's host time and an
instantiation) and up to MAX_GRAPHS are kept per plan, least recently used first out.  A plan whose
keys churn through more than that (ten results kept alive in a list, say) stops capturing once it
has evicted MAX_GRAPHS graphs, and replays the graphs it has.

Not captured: plans with host launches, traced runs (LAZYTORCH_DEBUG), plans whose outputs are not
each written by one launch, and any run while more than one thread uses the device (work another
thread queues on the stream would land in the graph).  A capture that fails -- a launch that reads
a buffer on the host, say -- turns graphs off for that plan; the run then happens as usual.
LAZYTORCH_CUDA_GRAPHS=0 turns them off altogether; LAZYTORCH_CUDA_GRAPHS=always captures a key
on its first sight (every run of a test suite then goes through a graph).
"""
from __future__ import annotations

import os
import weakref
from collections import OrderedDict
from typing import Any, Sequence

from .backend import scalar_key
from .executor import PlanExecutor, raise_first_set

MAX_GRAPHS = 4          # per plan
MAX_SEEN = 16           # keys remembered per plan, waiting for their second run

# lt.cuda.graph_info(): captures made, replays run, captures that failed
STATS = {"captures": 0, "replays": 0, "failures": 0}

_plans: weakref.WeakSet = weakref.WeakSet()     # (for Device.release: drop every graph)


def sights() -> int:
    """The sight of a key on which it is captured (LAZYTORCH_CUDA_GRAPHS); 0: never."""
    return {"0": 0, "always": 1}.get(os.environ.get("LAZYTORCH_CUDA_GRAPHS", ""), 2)


class _Graph:
    """An executable graph, the buffers it writes that no caller owns, and its deferred checks."""

    def __init__(self, dev, exe, keep: list, checks: list):
        self.dev, self.exe, self.keep, self.checks = dev, exe, keep, checks

    def __del__(self) -> None:
        try:
            self.dev.destroy_graph(self.exe)
        except Exception:               # (interpreter shutdown: the driver may be gone)
            pass


def _identity(buf: Any):
    """What a graph baked of a bound param: its address, or the value of a by-value scalar; None
    where neither is known (the run is not replayed)."""
    ptr = getattr(buf, "ptr", None)
    if ptr is not None:
        return ptr
    value = getattr(buf, "value", None)
    return None if value is None else ("value", scalar_key(value))


class GraphedPlan:
    """A PlanExecutor whose runs replay CUDA graphs where they can (see the module docstring)."""

    def __init__(self, executor: PlanExecutor, dev, sight: int = 2):
        self.executor, self.plan, self.dev = executor, executor.plan, dev
        self.first = sight == 1
        plan = executor.plan
        written = [b.id for launch in plan.launches for _, b in launch.writes]
        outputs = [o.id for o in plan.outputs]
        self.on = (executor.host_launches == 0 and not executor.traced and executor.memory is None
                   and bool(plan.launches) and len(set(outputs)) == len(outputs)
                   and all(written.count(o) == 1 for o in outputs))
        self.out_meta = [(tuple(o.shape), o.dtype) for o in plan.outputs]
        self.param_slots = [i for i, _, _ in executor.params]
        self.graphs: OrderedDict[tuple, _Graph] = OrderedDict()
        self.seen: OrderedDict[tuple, None] = OrderedDict()
        self.evictions = 0
        if self.on:
            _plans.add(self)

    def run(self, args: Sequence[Any], deferred: list | None = None) -> list:
        ex = self.executor
        if not self.on or len(self.dev.threads) > 1:
            return ex.run(args, deferred)
        env = ex.bind(args)
        empty = ex.backend.empty
        outs = [empty(shape, dtype) for shape, dtype in self.out_meta]
        key = tuple([_identity(env[i]) for i in self.param_slots] + [o.ptr for o in outs])
        graph = self.graphs.get(key)
        if graph is None:
            if None in key or not (self.first or key in self.seen) or self.evictions >= MAX_GRAPHS:
                self._remember(key)
                return ex.run_bound(env, deferred, outs)
            graph = self._capture(env, outs, key)
            if graph is None:
                return ex.run_bound(env, deferred, outs)
        else:
            self.graphs.move_to_end(key)
        self.dev.launch_graph(graph.exe)
        STATS["replays"] += 1
        if graph.checks:
            if deferred is not None:
                deferred.extend(graph.checks)
            elif ex.backend.any_flag_set([c.flag for c, _ in graph.checks]):
                raise_first_set(graph.checks)
        return outs

    def _remember(self, key: tuple) -> None:
        self.seen[key] = None
        if len(self.seen) > MAX_SEEN:
            self.seen.popitem(last=False)

    def _capture(self, env: list, outs: list, key: tuple) -> _Graph | None:
        dev = self.dev
        with dev.capture_lock:
            if len(dev.threads) > 1:
                return None
            keep: list = []
            checks: list = []
            dev.begin_capture(keep)
            try:
                self.executor.run_bound(list(env), checks, outs)
            except Exception:           # (a real error is raised again by the plain run)
                exe = dev.end_capture()
                if exe is not None:
                    dev.destroy_graph(exe)
                exe = None
            else:
                exe = dev.end_capture()
        if exe is None:
            self.on = False
            self.graphs.clear()
            STATS["failures"] += 1
            return None
        STATS["captures"] += 1
        graph = self.graphs[key] = _Graph(dev, exe, keep, checks)
        self.seen.pop(key, None)
        if len(self.graphs) > MAX_GRAPHS:
            self.graphs.popitem(last=False)
            self.evictions += 1
        return graph


def drop_all() -> None:
    """Every plan's graphs go, and the buffers they kept with them (memory ran out)."""
    for plan in list(_plans):
        plan.graphs.clear()

"""The backend-neutral plan executor: runs a KernelPlan's launches in order on one backend.

It allocates each launch's write buffers through the backend, hands every launch its read and
write buffers in the order of launch.reads / launch.writes, drops temps after their last reader
and returns the output buffers.  Launches the backend does not compile (compile_launch returned
None) run on the reference executor through to_host/from_host, so any plan runs on any backend.

It owns what every backend shares: a launch function that returns a true value reports that its
kernel set the error flag (integer division by zero), and the executor raises the error; a
device backend's launch may instead return a DeferredCheck (its flag left on the device), and the
executor reads all of a run's flags at once after its last launch, not one round trip per launch
in the middle of the plan; with
LAZYTORCH_DEBUG=1 every launch (kernels, library and reference calls) is traced to stderr with
its time, and so is each launch's compile time; LAZYTORCH_DEBUG=2 adds the kernel sources.
"""
from __future__ import annotations

import os
import sys
import time
from typing import Any, Callable, Mapping, NamedTuple, Sequence

import numpy as np

from ..ir import dtypes as D
from ..passes.plan import KernelPlan, Launch, describe_launch
from . import buffer_pool
from .reference import run_launch, run_launch_into, written_into

Buffer = Any
LaunchFn = Callable[[Sequence[Buffer], Sequence[Buffer]], Any]   # returns true: the error flag was set


class DeferredCheck(NamedTuple):
    """A launch's error flag left on the device (a 0-d bool array of the backend), read after the
    run's last launch with the others (Backend.any_flag_set).  `error()` makes the error to raise
    when it is set, or raises the op's own error itself (an index out of range: torch's message)."""
    flag: Any
    error: Callable[[], BaseException]


def host_fallback(backend, launch: Launch) -> LaunchFn:
    """Run the launch's nodes on the host, copying buffers across when the backend is a device
    (a cat on a host backend: written straight into its buffer)."""
    into = written_into(launch)

    def fn(reads: Sequence[Buffer], writes: Sequence[Buffer]) -> None:
        hosts = [backend.to_host(b) for b in reads]
        if into and isinstance(writes[0], np.ndarray):
            run_launch_into(launch, hosts, writes[0])
            return
        for buf, value in zip(writes, run_launch(launch, hosts)):
            copy_into(backend, buf, value)
    return fn


def copy_into(backend, buf: Buffer, value: np.ndarray) -> None:
    if isinstance(buf, np.ndarray):
        np.copyto(buf, value, casting="no")
    else:
        buf.copy_from_host(value)   # device buffers of host-fallback backends implement this


# Scalar params whose storage is the Python number's own type: on host backends (default
# Backend.scalar) one np.array call makes the 0-d buffer, with the same value and dtype.
_HOST_SCALAR_DTYPES = frozenset({D.float64, D.int64, D.bool_})


def debug_level() -> int:
    try:
        return int(os.environ.get("LAZYTORCH_DEBUG", "0") or 0)
    except ValueError:
        return 1


def _trace(text: str) -> None:
    print(f"[lazytorch] {text}", file=sys.stderr)


def kernel_error(launch: Launch) -> ZeroDivisionError:
    """The error a launch reports through its kernel's error flag (every backend's kernels set it
    on an integer division by zero)."""
    ops = ", ".join(sorted({n.op for n in launch.nodes}))
    return ZeroDivisionError(f"{launch.name}: integer division by zero (ops: {ops})")


def _traced(fn: LaunchFn, launch: Launch, backend: str, where: str) -> LaunchFn:
    shape = list(launch.domain) if getattr(launch, "domain", None) else [list(b.shape) for _, b in launch.writes]

    def run(reads: Sequence[Buffer], writes: Sequence[Buffer]) -> None:
        t0 = time.perf_counter()
        flagged = fn(reads, writes)
        _trace(f"{backend} {launch.name} ({where} {launch.pattern} {shape}) "
               f"{(time.perf_counter() - t0) * 1e6:.1f} us")
        return flagged
    return run


class PlanExecutor:
    """A plan prepared for one backend (see runtime/backend.py for the launch calling convention).

    Everything that does not depend on the data is worked out once here, so that `run` (every
    graph-cache hit) only converts the arguments, allocates the writes and calls the launches:
    buffers live in a list indexed by a per-plan slot number instead of a dict keyed by id.
    """

    def __init__(self, backend, plan: KernelPlan,
                 compile_launch: Callable[[Launch, KernelPlan], LaunchFn | None] | None = None,
                 sources: Mapping[str, str] | None = None, joined: frozenset[int] = frozenset()):
        self.backend = backend
        self.plan = plan
        compile_launch = compile_launch or backend.compile_launch
        debug = debug_level()
        slot_of: dict[int, int] = {}

        def slot(bid: int) -> int:
            return slot_of.setdefault(bid, len(slot_of))

        self._output_ids = {o.id for o in plan.outputs}     # (_converter: a set, not a scan per param)
        self.params = [(slot(p.id), self._converter(p), p.dtype) for p in plan.params]
        # params the backend keeps as the Python number (fast_scalar): launches take their value,
        # so the value alone is what a run gives them (a CUDA graph's key: runtime/cuda_graph.py)
        self.by_value = [k for k, p in enumerate(plan.params) if self._fast_scalar(p) is not None]
        last_read: dict[int, int] = {}
        bound = {p.id for p in plan.params}
        for i, launch in enumerate(plan.launches):
            for _, b in launch.reads:
                last_read[b.id] = i
                if b.id not in bound:   # (a generated kernel would read a null pointer)
                    raise RuntimeError(f"lazytorch internal error: launch {launch.name} reads buffer {b.id} "
                                       f"({b.kind}), which no param binds and no earlier launch writes")
            bound.update(b.id for _, b in launch.writes)
        # `joined`: launches the next launch may run inside (a product and its epilogue, runtime/
        # cpu.py): what they read stays alive, its memory unshared, until that launch has run too
        for i in joined:
            for _, b in plan.launches[i].reads:
                last_read[b.id] = max(last_read[b.id], i + 1)
        keep = {b.id for b in plan.outputs} | {p.id for p in plan.params}
        frees_at: dict[int, list[int]] = {}             # launch index -> temps last read there
        for b, at in last_read.items():
            if b not in keep:
                frees_at.setdefault(at, []).append(b)
        # the static memory plan: temps (written and read inside the plan, never returned) get a
        # slot of one byte block each, shared by temps whose lifetimes do not overlap
        static = getattr(backend, "static_memory", False)
        memory = MemoryPlan(plan, last_read, keep) if static else None
        self.memory = memory if memory is not None and memory.views else None
        self._arenas: list[list] = []           # free sets of temp buffers (one per concurrent run)
        self.steps: list[tuple[LaunchFn, list[int], list[tuple[int, tuple, Any, int]], list[int], Launch]] = []
        self.host_launches = 0          # launches the backend left to the host fallback
        self.traced = bool(debug)
        for i, launch in enumerate(plan.launches):
            t0 = time.perf_counter()
            fn = compile_launch(launch, plan)
            self.host_launches += fn is None
            where = launch.kind if fn is not None else "reference"
            fn = fn or host_fallback(backend, launch)
            if debug:
                _trace(f"compiled {launch.name} ({where}) in {(time.perf_counter() - t0) * 1e3:.1f} ms")
                if debug >= 2 and sources and launch.name in sources:
                    _trace(sources[launch.name])
                fn = _traced(fn, launch, backend.name, where)
            reads = [slot(b.id) for _, b in launch.reads]
            temp = self.memory.temp_index if self.memory is not None else {}
            writes = [(slot(b.id), b.shape, b.dtype, temp.get(b.id, -1)) for _, b in launch.writes]
            self.steps.append((fn, reads, writes, [slot(b) for b in frees_at.get(i, ())], launch))
        self.outputs = [slot(o.id) for o in plan.outputs]
        self.size = len(slot_of)
        self._into_outputs: list | None = None

    def _fast_scalar(self, p) -> Callable[[Any, Any], Buffer] | None:
        """The backend's converter of scalar param `p` that keeps the number on the host
        (fast_scalar), where it has one and the param is only read by launches (never handed to
        the user as an output); else None."""
        fast = getattr(self.backend, "fast_scalar", None)
        if fast is None or p.slot not in self.plan.scalar_slots or p.id in self._output_ids:
            return None
        return fast(p.dtype)

    def _converter(self, p) -> Callable[[Any, Any], Buffer]:
        """How the run-time value of param `p` becomes a buffer of this backend."""
        if p.slot not in self.plan.scalar_slots:
            return self.backend.param_converter()
        convert = self._fast_scalar(p)
        if convert is not None:
            return convert
        if getattr(self.backend.scalar, "host_default", False) and p.dtype in _HOST_SCALAR_DTYPES:
            np_dtype = p.dtype.np
            return lambda value, dtype: np.array(value, np_dtype)
        return self.backend.scalar

    def run(self, args: Sequence[Any], deferred: list | None = None) -> list[Buffer]:
        """The outputs of one run.  Deferred error flags are read after the last launch, or, when
        `deferred` is a list, appended to it as (DeferredCheck, Launch) for the caller to read."""
        return self.run_bound(self.bind(args), deferred)

    def bind(self, args: Sequence[Any]) -> list[Buffer]:
        """A run's buffer slots with the params' values converted to buffers of the backend."""
        env: list[Buffer] = [None] * self.size
        for (i, convert, dtype), value in zip(self.params, args):
            env[i] = convert(value, dtype)
        return env

    def run_bound(self, env: list[Buffer], deferred: list | None = None,
                  outputs: Sequence[Buffer] | None = None) -> list[Buffer]:
        """Runs the launches over bound slots (`bind`).  `outputs`: buffers the caller allocated
        for the plan's outputs, written in place (a CUDA graph's replay is keyed on their
        addresses: runtime/cuda_graph.py); else the backend allocates them."""
        empty = self.backend.empty
        arenas = self._arenas
        # this run's temps: a free set of the static plan's buffers (a run on another thread at
        # the same time takes another set, so no two runs ever share a temp)
        temps = (arenas.pop() if arenas else self.memory.allocate()) if self.memory else None
        steps = self.steps
        if outputs is not None:         # (plans without static temps: see into_outputs)
            temps, steps = outputs, self.into_outputs()
        checks: list[tuple[DeferredCheck, Launch]] = [] if deferred is None else deferred
        try:
            for fn, reads, writes, frees, launch in steps:
                outs = [temps[t] if t >= 0 else empty(shape, dtype) for _, shape, dtype, t in writes]
                try:
                    failed = fn([env[r] for r in reads], outs)
                except Exception as e:
                    e.add_note(describe_launch(launch))     # which op, which user line (passes/plan.py)
                    raise
                if failed:
                    if type(failed) is not DeferredCheck:
                        raise kernel_error(launch)
                    checks.append((failed, launch))
                for (i, _, _, _), buf in zip(writes, outs):
                    env[i] = buf
                for i in frees:
                    env[i] = None
            if checks and deferred is None:
                self.backend.check_flags([c.flag for c, _ in checks], lambda: raise_first(checks))
        finally:
            if temps is not None and outputs is None and len(arenas) < MAX_ARENAS:
                arenas.append(temps)
        return [env[i] for i in self.outputs]

    def into_outputs(self) -> list:
        """The steps with each write of an output slot taken from the run's `outputs` (by the
        position of its slot among the plan's outputs), the other writes allocated as usual."""
        if self._into_outputs is None:
            assert self.memory is None, "a plan with static temps allocates its own outputs"
            at = {slot: k for k, slot in enumerate(self.outputs)}
            self._into_outputs = [(fn, reads, [(i, shape, dtype, at.get(i, -1)) for i, shape, dtype, _ in writes],
                                   frees, launch) for fn, reads, writes, frees, launch in self.steps]
        return self._into_outputs


def raise_first(checks: list[tuple[DeferredCheck, Launch]]) -> None:
    """Raises the error of the first launch (in plan order) whose deferred flag is set."""
    for check, launch in checks:
        if bool(np.asarray(check.flag)):
            try:
                raise check.error()
            except Exception as e:
                e.add_note(describe_launch(launch))
                raise
    raise AssertionError("a deferred error flag was set, but no launch's flag reads set")


MAX_ARENAS = 4         # free temp sets kept per plan (runs on as many threads at once reuse theirs)
MAX_STATIC_BYTES = 1 << 28   # a plan whose temps need more allocates them per run (the pool reuses them)


class MemoryPlan:
    """Temps of a plan assigned to byte blocks by liveness, once per plan (a register allocator's
    linear scan): a temp is born when its launch writes it and dies after its last reader, and
    temps that are never alive at once share a block.  `allocate` makes one set of the blocks and
    a typed view per temp; the executor keeps such sets and reuses them on every run, so a cached
    plan's temps allocate nothing and never fault fresh pages after its first run.  Outputs and
    params are never part of it: their buffers go to the user."""

    def __init__(self, plan: KernelPlan, last_read: dict[int, int], keep: set[int]):
        self.temp_index: dict[int, int] = {}         # temp buffer id -> its index in a temp set
        self.views: list[tuple[int, tuple, Any]] = []   # per temp: (block, shape, dtype)
        sizes: list[int] = []                         # per block: bytes
        free: list[int] = []                          # blocks not holding a live temp
        dies: dict[int, list[int]] = {}               # launch index -> blocks freed after it
        for i, launch in enumerate(plan.launches):
            for _, b in launch.writes:
                if b.id in keep or b.id in self.temp_index:
                    continue
                nbytes = b.numel * b.dtype.np.itemsize
                fits = [k for k in free if sizes[k] >= nbytes]
                if fits:
                    block = min(fits, key=sizes.__getitem__)
                elif free:
                    block = max(free, key=sizes.__getitem__)
                    sizes[block] = nbytes
                else:
                    block = len(sizes)
                    sizes.append(nbytes)
                if block in free:
                    free.remove(block)
                self.temp_index[b.id] = len(self.views)
                self.views.append((block, tuple(b.shape), b.dtype))
                dies.setdefault(last_read.get(b.id, i), []).append(block)
            free.extend(dies.pop(i, ()))
        self.sizes = sizes
        if sum(sizes) > MAX_STATIC_BYTES:
            self.temp_index, self.views, self.sizes = {}, [], []

    def allocate(self) -> list:
        """One set of the plan's temp buffers: a typed view of its block per temp."""
        blocks = [buffer_pool.block(buffer_pool.block_size(n)) for n in self.sizes]
        STATS["static_blocks"] += len(blocks)
        STATS["static_bytes"] += sum(self.sizes)
        out = []
        for block, shape, dtype in self.views:
            np_dtype = np.dtype(dtype.np)
            count = 1
            for d in shape:
                count *= d
            out.append(blocks[block][:count * np_dtype.itemsize].view(np_dtype).reshape(shape))
        return out


# buffers the executor's static memory plans allocated (lt.cache_info().buffers)
STATS = {"static_blocks": 0, "static_bytes": 0}

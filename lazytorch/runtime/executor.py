"""The backend-neutral plan executor: runs a KernelPlan's launches in order on one backend.

It allocates each launch's write buffers through the backend, hands every launch its read and
write buffers in the order of launch.reads / launch.writes, drops temps after their last reader
and returns the output buffers.  Launches the backend does not compile (compile_launch returned
None) run on the reference executor through to_host/from_host, so any plan runs on any backend.
"""
from __future__ import annotations

from typing import Any, Callable, Sequence

import numpy as np

from ..ir import dtypes as D
from ..passes.plan import KernelPlan, Launch, describe_launch
from .backend import Backend, Buffer, LaunchFn
from .reference import run_launch


def host_fallback(backend: Backend, launch: Launch) -> LaunchFn:
    """Run the launch's nodes on the host, copying buffers across when the backend is a device."""
    def fn(reads: Sequence[Buffer], writes: Sequence[Buffer]) -> None:
        outs = run_launch(launch, [backend.to_host(b) for b in reads])
        for buf, value in zip(writes, outs):
            copy_into(backend, buf, value)
    return fn


def copy_into(backend: Backend, buf: Buffer, value: np.ndarray) -> None:
    if isinstance(buf, np.ndarray):
        np.copyto(buf, value, casting="no")
    else:
        buf.copy_from_host(value)   # device buffers of host-fallback backends implement this


# Scalar params whose storage is the Python number's own type: on host backends (default
# Backend.scalar) one np.array call makes the 0-d buffer, with the same value and dtype.
_HOST_SCALAR_DTYPES = frozenset({D.float64, D.int64, D.bool_})


class PlanExecutor:
    """A plan prepared for one backend (see runtime/backend.py for the launch calling convention).

    Everything that does not depend on the data is worked out once here, so that `run` (every
    graph-cache hit) only converts the arguments, allocates the writes and calls the launches:
    buffers live in a list indexed by a per-plan slot number instead of a dict keyed by id.
    """

    def __init__(self, backend: Backend, plan: KernelPlan):
        self.backend = backend
        self.plan = plan
        slot_of: dict[int, int] = {}

        def slot(bid: int) -> int:
            return slot_of.setdefault(bid, len(slot_of))

        self.params = [(slot(p.id), self._converter(p), p.dtype) for p in plan.params]
        last_read: dict[int, int] = {}
        for i, launch in enumerate(plan.launches):
            for _, b in launch.reads:
                last_read[b.id] = i
        keep = {b.id for b in plan.outputs} | {p.id for p in plan.params}
        frees_at: dict[int, list[int]] = {}             # launch index -> temps last read there
        for b, at in last_read.items():
            if b not in keep:
                frees_at.setdefault(at, []).append(b)
        self.steps: list[tuple[LaunchFn, list[int], list[tuple[int, tuple, Any]], list[int], Launch]] = []
        for i, launch in enumerate(plan.launches):
            fn = backend.compile_launch(launch, plan) or host_fallback(backend, launch)
            reads = [slot(b.id) for _, b in launch.reads]
            writes = [(slot(b.id), b.shape, b.dtype) for _, b in launch.writes]
            self.steps.append((fn, reads, writes, [slot(b) for b in frees_at.get(i, ())], launch))
        self.outputs = [slot(o.id) for o in plan.outputs]
        self.size = len(slot_of)

    def _converter(self, p) -> Callable[[Any, Any], Buffer]:
        """How the run-time value of param `p` becomes a buffer of this backend."""
        if p.slot not in self.plan.scalar_slots:
            adopt = self.backend.adopt
            return lambda value, dtype: adopt(value)
        if getattr(self.backend.scalar, "__func__", None) is Backend.scalar and p.dtype in _HOST_SCALAR_DTYPES:
            np_dtype = p.dtype.np
            return lambda value, dtype: np.array(value, np_dtype)
        return self.backend.scalar

    def run(self, args: Sequence[Any]) -> list[Buffer]:
        env: list[Buffer] = [None] * self.size
        for (i, convert, dtype), value in zip(self.params, args):
            env[i] = convert(value, dtype)
        empty = self.backend.empty
        for fn, reads, writes, frees, launch in self.steps:
            outs = [empty(shape, dtype) for _, shape, dtype in writes]
            try:
                fn([env[r] for r in reads], outs)
            except Exception as e:
                e.add_note(describe_launch(launch))     # which op, which user line (passes/plan.py)
                raise
            for (i, _, _), buf in zip(writes, outs):
                env[i] = buf
            for i in frees:
                env[i] = None
        return [env[i] for i in self.outputs]

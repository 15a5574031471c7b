"""The backend-neutral plan executor: runs a KernelPlan's launches in order on one backend.

It allocates each launch's write buffers through the backend, hands every launch its read and
write buffers in the order of launch.reads / launch.writes, drops temps after their last reader
and returns the output buffers.  Launches the backend does not compile (compile_launch returned
None) run on the reference executor through to_host/from_host, so any plan runs on any backend.
"""
from __future__ import annotations

from typing import Any, Sequence

import numpy as np

from ..passes.plan import KernelPlan, Launch
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


class PlanExecutor:
    """A plan prepared for one backend (see runtime/backend.py for the launch calling convention)."""

    def __init__(self, backend: Backend, plan: KernelPlan):
        self.backend = backend
        self.plan = plan
        self.steps: list[tuple[LaunchFn, list[int], list[tuple[int, tuple, Any]], list[int]]] = []
        last_read: dict[int, int] = {}
        for i, launch in enumerate(plan.launches):
            for _, b in launch.reads:
                last_read[b.id] = i
        keep = {b.id for b in plan.outputs} | {p.id for p in plan.params}
        for i, launch in enumerate(plan.launches):
            fn = backend.compile_launch(launch, plan) or host_fallback(backend, launch)
            reads = [b.id for _, b in launch.reads]
            writes = [(b.id, b.shape, b.dtype) for _, b in launch.writes]
            frees = [b for b, at in last_read.items() if at == i and b not in keep]
            self.steps.append((fn, reads, writes, frees))

    def run(self, args: Sequence[Any]) -> list[Buffer]:
        backend = self.backend
        env: dict[int, Buffer] = {}
        scalars = self.plan.scalar_slots
        for p, value in zip(self.plan.params, args):
            env[p.id] = backend.scalar(value, p.dtype) if p.slot in scalars else backend.adopt(value)
        for fn, reads, writes, frees in self.steps:
            outs = [backend.empty(shape, dtype) for _, shape, dtype in writes]
            fn([env[r] for r in reads], outs)
            for (bid, _, _), buf in zip(writes, outs):
                env[bid] = buf
            for bid in frees:
                del env[bid]
        return [env[o.id] for o in self.plan.outputs]


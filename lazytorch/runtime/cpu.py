"""The `cpu` backend: generated C kernels compiled by the system compiler, run through ctypes.

`prepare(plan)` lowers and renders every kernel launch of the plan, compiles them together into
one shared library (one compiler run per program, cached on disk by runtime/compiler.py), and
hands the plan to the backend-neutral executor.  Kernels write straight into the preallocated
numpy buffers (from the buffer pool); matmul runs through numpy (BLAS) into its output buffer
(runtime/library.py);
anything else without a kernel runs on the reference executor (compile_launch returns None).
"""
from __future__ import annotations

import ctypes
from typing import Sequence

import numpy as np

from ..codegen.lower import Unsupported, lower
from ..codegen.render import helper_library, render
from . import compiler, threads
from .backend import Backend, LaunchFn
from .buffer_pool import BufferPool
from .executor import PlanExecutor
from .library import host_gemm

_ptr_array = {n: ctypes.c_void_p * n for n in range(1, 131)}    # up to max_buffers + the error word
# gcc's time grows faster than linearly with function size: giant fused chains (100k-node
# programs) run on the reference executor instead of stalling the first eval for minutes
MAX_KERNEL_NODES = 2000


class Sources(dict):
    """launch name -> kernel source, plus the helpers those kernels call (for the header)."""
    helpers: frozenset[str] = frozenset()


def kernel_sources(plan, dialect: str = "c") -> Sources:
    """launch name -> rendered source of every kernel launch this code generator handles."""
    out = Sources()
    helpers: set[str] = set()
    for launch in plan.launches:
        if launch.kind != "kernel" or len(launch.nodes) > MAX_KERNEL_NODES:
            continue
        try:
            r = render(lower(launch, _symbol(launch.name), row_cache=dialect == "c"), dialect)
        except Unsupported:
            continue
        out[launch.name] = r.source
        helpers |= r.helpers
    out.helpers = frozenset(helpers)
    return out


def _symbol(name: str) -> str:
    return "lt_" + "".join(c if c.isalnum() else "_" for c in name)


def _address(arr: np.ndarray) -> int:
    # ctypes' view of a writable buffer is ~4x cheaper than __array_interface__ (every launch
    # takes one address per argument); read-only and empty arrays take the general route
    try:
        return ctypes.addressof(_char.from_buffer(arr))
    except (TypeError, ValueError):
        return arr.__array_interface__["data"][0]


_char = ctypes.c_char


class CpuBackend(Backend):
    name = "cpu"
    max_buffers = 128         # kernels take an array of pointers: C has no argument-table limit

    def __init__(self):
        self.pool = BufferPool()

    def empty(self, shape, dtype):
        return self.pool.empty(tuple(shape), dtype.np)

    def prepare(self, plan):
        sources = kernel_sources(plan)
        lib = None
        if sources:
            # one translation unit per program, with only the helpers its kernels call
            helpers = getattr(sources, "helpers", None)
            library = helper_library("c")
            head = library.header(helpers if helpers is not None else library.names)
            lib = compiler.load(head + "\n".join(sources.values()))
            ctypes.c_int.in_dll(lib, "lt_parallel").value = threads.kernels_parallel()

        def compile_launch(launch, plan) -> LaunchFn | None:
            if launch.kind == "library":
                return host_gemm(launch)       # runtime/library.py: BLAS through numpy
            if launch.kind != "kernel" or launch.name not in sources:
                return None
            return _kernel_launch(lib[_symbol(launch.name)], launch)
        return PlanExecutor(self, plan, compile_launch, sources)


def _kernel_launch(fn, launch) -> LaunchFn:
    """A compiled kernel called with its buffers' addresses and its error word; returns the
    error word (nonzero: an integer division by zero), which the executor turns into the error."""
    fn.restype = None
    fn.argtypes = (ctypes.POINTER(ctypes.c_void_p),)
    arr_t = _ptr_array[len(launch.reads) + len(launch.writes) + 1]
    err = np.zeros(1, np.int32)
    err_at = _address(err)

    def run(reads: Sequence[np.ndarray], writes: Sequence[np.ndarray]) -> int:
        fn(arr_t(*[_address(b) for b in reads], *[_address(b) for b in writes], err_at))
        if err[0]:
            err[0] = 0
            return 1
        return 0
    return run

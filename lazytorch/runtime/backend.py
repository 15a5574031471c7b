"""The backend interface: what a backend implements so that lazytorch can run kernel plans on it.

A backend turns a KernelPlan (passes/plan.py; contract in docs/architecture.md) into an Executable
and owns the buffers.  The plan executor (runtime/executor.py) does the backend-neutral part:
it allocates every temp and output buffer (`Backend.empty`), runs the launches in order, passes
each launch its buffers, frees temps after their last use and returns the outputs.  A backend
therefore only has to:

1. say how to move data: `from_host`, `to_host`, `empty`, `scalar`;
2. compile launches: `compile_launch(launch, plan)` returns a LaunchFn, or None to have the
   executor run that launch on the reference executor (host fallback, through to_host/from_host).
   Until a code generator handles a launch kind or pattern, returning None keeps programs correct.

A LaunchFn is called as `fn(reads, writes)`:
  - `reads[i]` is the buffer of `launch.reads[i]` (its node -> BufferRef); scalar params arrive as
    buffers of shape () made by `Backend.scalar`;
  - `writes[i]` is the preallocated buffer for `launch.writes[i]`, contiguous, of the written
    node's shape and dtype; the function fills it and returns nothing.
  Buffers are in *storage form*: contiguous, row-major, bfloat16 as raw 16-bit words.  A view node
  inside a kernel reads its (contiguous) input buffer through its ViewSpec (index arithmetic).

Buffers may be any object, but `np.asarray(buf)` must give the host array in storage form (numpy
arrays qualify; device buffers implement `__array__`), because realized nodes keep their buffer
and user code reads it through numpy.  Leaf buffers handed to a program may come from the host or
from another backend: `adopt` turns them into this backend's buffers.

To add a backend: subclass Backend, set `name`, implement compile_launch (and the data methods if
buffers are not numpy arrays), and register it with `runtime.register_backend(name, factory)`.
"""
from __future__ import annotations

import ctypes
import math
from typing import Any, Callable, Protocol, Sequence

import numpy as np

from ..ir import dtypes as D
from ..ir.dtypes import DType
from ..ir.native import switched_off
from .executor import Buffer, LaunchFn, PlanExecutor  # noqa: F401  (Buffer, LaunchFn: part of the interface)
from .reference import run_launch


def to_float32(value: float) -> float:
    """A Python float rounded to float32 by C's cast, as a kernel's cast would: a float beyond
    float32's range becomes infinity without numpy's overflow warning (a Python float read in
    float32 arithmetic is a float32 scalar param: passes/legalize.py)."""
    return ctypes.c_float(value).value


def negative_zero(value: Any) -> bool:
    """-0.0 (== 0.0 in Python, but 1 / (x * s) tells them apart)."""
    return value == 0 and isinstance(value, (float, np.floating)) and math.copysign(1.0, value) < 0


def native_launch():
    """runtime/_launch.c, the executors' per-run host work in C (the cpu executor's calls, a CUDA
    graph replay's key), or None where it did not build or LAZYTORCH_NATIVE=0 turns it off."""
    if switched_off():
        return None
    try:
        from . import _launch
    except ImportError:
        return None
    return _launch


def scalar_key(value: Any) -> Any:
    """A Python scalar as part of the key of what was compiled or captured with it baked in (an
    mx.compile trace, a CUDA graph): the value, with -0.0 apart from 0.0 (a dict would hand a
    trace of one to the other)."""
    return ("-0.0",) if negative_zero(value) else value


class Executable(Protocol):
    """A prepared plan.  `run(args)` takes one value per plan param slot (a buffer for buffer
    params, a Python number for scalar params) and returns one buffer per plan output."""

    def run(self, args: Sequence[Any]) -> list[Buffer]: ...


class Backend:
    """Base class of backends.  The defaults describe a host backend whose buffers are numpy arrays."""

    name: str = ""
    max_buffers: int = 31     # reads + writes one kernel launch may take (Metal's argument table)
    # temps come from the executor's static memory plan (runtime/executor.py: MemoryPlan), kept
    # and reused across runs; needs numpy buffers that launches write in place
    static_memory: bool = False
    # buffers live in the backend's own memory (the GPU's): a leaf's host data is uploaded once and
    # the leaf keeps the device copy (realize.keep_uploads), instead of an upload in every run
    device_memory: bool = False
    # views of constant pads read through the pad's mask instead of the pad written first
    # (passes/guard.py): GPUs, whose masked loads cost what a plain copy's do
    guarded_reads: bool = False

    # ---- data ----
    def from_host(self, arr: np.ndarray) -> Buffer:
        """A buffer holding `arr` (storage form, contiguous)."""
        arr = np.asarray(arr)
        return arr if arr.flags.c_contiguous else arr.copy(order="C")   # (keeps 0-d arrays 0-d)

    def to_host(self, buf: Buffer) -> np.ndarray:
        """The buffer's contents as a host numpy array in storage form."""
        return np.asarray(buf)

    def empty(self, shape: tuple[int, ...], dtype: DType) -> Buffer:
        """An uninitialised contiguous buffer (the executor allocates every write through this)."""
        return np.empty(shape, dtype=dtype.np)

    def scalar(self, value: Any, dtype: DType) -> Buffer:
        """A 0-d buffer holding a Python number (a scalar param's runtime value) as `dtype`."""
        if dtype is D.float32 and value.__class__ is float:
            value = to_float32(value)
        return self.from_host(D.from_compute(np.asarray(value), dtype).reshape(()))
    scalar.host_default = True      # the executor makes such buffers with one np.array call

    def adopt(self, buf: Buffer) -> Buffer:
        """A leaf buffer (from the host or another backend) as a buffer of this backend."""
        return self.from_host(np.asarray(buf))

    def param_converter(self):
        """adopt as the executor calls it, (value, dtype) -> buffer, for every buffer param of every
        run: where adopt and from_host are Backend's own, a C-contiguous ndarray is taken as it is
        without their calls (they would return it unchanged)."""
        adopt, cls = self.adopt, type(self)
        if cls.adopt is Backend.adopt and cls.from_host is Backend.from_host:
            return lambda value, dtype: value if value.__class__ is np.ndarray and value.flags.c_contiguous \
                else adopt(value)
        return lambda value, dtype: adopt(value)

    def any_flag_set(self, flags: Sequence[Any]) -> bool:
        """Whether any of a run's deferred error flags (executor.DeferredCheck) is set."""
        return any(bool(np.asarray(f)) for f in flags)

    def check_flags(self, flags: Sequence[Any], raise_error: Callable[[], None]) -> None:
        """A run's deferred error flags, after its last launch: `raise_error()` where one is set.
        Read now here; a backend whose reads wait for its device may read them before the host
        next reads its memory instead (runtime/cuda_driver.py Device.check_later)."""
        if self.any_flag_set(flags):
            raise_error()

    def synchronize(self) -> None:
        """Waits until the work started on the backend's device has finished (lt.cuda.synchronize);
        host backends finish every run before it returns."""

    # ---- compilation ----
    def compile_launch(self, launch, plan) -> LaunchFn | None:
        """A function running `launch` (a passes.plan.Launch), or None for the host fallback."""
        return None

    def prepare(self, plan) -> Executable:
        """The plan ready to run.  Default: the backend-neutral executor over compile_launch."""
        return PlanExecutor(self, plan)


class ReferenceBackend(Backend):
    """Runs every launch on the host executor (runtime/reference.py); buffers are numpy arrays."""

    name = "reference"
    static_memory = True
    # convolutions and fold run whole on the numpy executor (float64 im2col, col2im): an independent
    # check of the windows-and-product and col2im forms the other backends lower them to
    # (passes/decompositions/conv.py)
    library_ops = frozenset({"convolution", "fold"})

    def adopt(self, buf) -> np.ndarray:
        return buf if isinstance(buf, np.ndarray) else np.asarray(buf)

    def compile_launch(self, launch, plan):
        def fn(reads, writes):
            for buf, value in zip(writes, run_launch(launch, reads)):
                np.copyto(buf, value, casting="no")
        return fn

"""The cuda backend on the CUDA driver: kernels launched with cuLaunchKernel, GEMMs through cuBLAS,
buffers in the driver's stream-ordered memory pool -- no MLX between a plan and the GPU.

Through MLX (runtime/mlx.py) every launch is an MLX operation: encoded into MLX's graph, evaluated,
and waited for on a blocking event, 45-90 us per call above the kernels on an H100 where torch
eager spends 13-25 us.  Here a run is what torch does: each launch is one driver call on one
stream, in order, asynchronous; the host waits only when it reads a buffer (`to_host`) or calls
`lt.cuda.synchronize()`.

- Kernels are the standalone sources of the cuda target (codegen/targets/cuda.py `standalone`:
  inputs, outputs, then Python scalars by value), compiled ahead by NVRTC, a plan's at once, and
  cached on disk (runtime/nvrtc.py).  MLX's `grid` is in threads; the blocks are grid/threadgroup
  rounded up, as MLX computes them.  Outputs of kernels with `init_value` (atomic combines, the
  error flag) are zeroed on the stream first.
- Library launches (matmul, batched attention products) are one cuBLAS strided-batched GEMM in
  float32 accumulation (float32 products in TF32 where the matmul node says its op allowed it,
  torch's flags at the call: `compute_type`) over views of the buffers when the views are
  a matrix with one unit stride and one batch stride; other views are copied to a contiguous temp
  first by a strided-copy kernel.
- `view`, `cat` and `embedding` reference launches run on the device through a strided-copy and a
  row-gather kernel (`HELPERS`): a host fallback would copy a model's embedding table across the
  bus on every call.  An embedding index out of range sets a flag (torch's IndexError then comes
  from the host op).  Other launches run on the host (executor's fallback).
- A run's error flags are read before the host next reads a buffer or waits for the stream
  (`Device.check_later`), not after the run: the host builds the next step while the GPU runs.

`available()` is False where libcuda, NVRTC or cuBLAS cannot be loaded; the `cuda` backend then
runs through MLX (`LAZYTORCH_CUDA_RUNTIME=mlx` chooses that path anywhere).
"""
from __future__ import annotations

import ctypes
import functools
import math
import os
import threading
import weakref
from typing import Any, Callable, NamedTuple, Sequence

import numpy as np

from ..codegen.gpu import ERROR_FLAG, check_dtypes, scalar_dtype
from ..codegen.targets import cuda as cuda_target
from ..ir import dtypes as D
from ..ir import precision
from ..ir.dtypes import DType
from ..ir.errors import OutOfMemoryError
from ..ir.node import Node
from ..ir.views import contiguous_strides
from . import cuda_graph, nvrtc
from .backend import Backend, Buffer, LaunchFn, to_float32
from .caches import LRU
from .executor import DeferredCheck, PlanExecutor, kernel_error
from .reference import run_node

c_void_p, c_int, c_uint, c_size_t, c_uint64 = ctypes.c_void_p, ctypes.c_int, ctypes.c_uint, ctypes.c_size_t, ctypes.c_uint64


class CudaError(RuntimeError):
    """A CUDA driver or cuBLAS call failed."""


# ---------------------------------------------------------------- the libraries

# The driver entry points used, with their argument types (pointers must not pass as C ints).
_DRIVER = {
    "cuInit": [c_uint], "cuDeviceGet": [c_void_p, c_int],
    "cuDevicePrimaryCtxRetain": [c_void_p, c_int], "cuCtxSetCurrent": [c_void_p],
    "cuStreamCreate": [c_void_p, c_uint], "cuStreamSynchronize": [c_void_p],
    "cuDeviceGetDefaultMemPool": [c_void_p, c_int], "cuMemPoolSetAttribute": [c_void_p, c_int, c_void_p],
    "cuMemPoolTrimTo": [c_void_p, c_size_t],
    "cuMemAllocAsync": [c_void_p, c_size_t, c_void_p], "cuMemFreeAsync": [c_uint64, c_void_p],
    "cuMemcpyHtoDAsync_v2": [c_uint64, c_void_p, c_size_t, c_void_p],
    "cuMemcpyDtoHAsync_v2": [c_void_p, c_uint64, c_size_t, c_void_p],
    "cuMemAllocHost_v2": [c_void_p, c_size_t],
    "cuMemsetD8Async": [c_uint64, ctypes.c_ubyte, c_size_t, c_void_p],
    "cuModuleLoadData": [c_void_p, ctypes.c_char_p], "cuModuleGetFunction": [c_void_p, c_void_p, ctypes.c_char_p],
    "cuFuncSetAttribute": [c_void_p, c_int, c_int],
    "cuGetErrorString": [c_int, c_void_p],
    "cuStreamBeginCapture_v2": [c_void_p, c_int], "cuStreamEndCapture": [c_void_p, c_void_p],
    "cuGraphInstantiateWithFlags": [c_void_p, c_void_p, ctypes.c_ulonglong],
    "cuGraphDestroy": [c_void_p], "cuGraphExecDestroy": [c_void_p],
    "cuEventCreate": [c_void_p, c_uint], "cuEventRecord": [c_void_p, c_void_p],
    "cuEventSynchronize": [c_void_p], "cuEventDestroy_v2": [c_void_p],
    "cuMemcpyDtoH_v2": [c_void_p, c_uint64, c_size_t],
}
_CUBLAS = {
    "cublasCreate_v2": [c_void_p], "cublasSetStream_v2": [c_void_p, c_void_p],
}


@functools.lru_cache(maxsize=1)
def _cublas() -> ctypes.CDLL | None:
    from .nvrtc_worker import load
    lib = load(list(nvrtc.library_names("cublas")))
    if lib is not None:
        for name, argtypes in _CUBLAS.items():
            getattr(lib, name).argtypes = argtypes
    return lib


def available() -> bool:
    """libcuda, NVRTC and cuBLAS load and a GPU answers."""
    return nvrtc.available() and _cublas() is not None


class Device:
    """The driver state of GPU 0: its primary context (made current on every thread that calls
    `current`), one non-blocking stream, its memory pool (kept, not released to the OS between
    runs) and a cuBLAS handle on the stream.  While a CUDA graph is captured on the stream
    (runtime/cuda_graph.py), `capturing` holds the memory the capture hands out
    (cuda_graph.Capture: `blocks` handed out, `free` of them by size, weak references `made`)."""

    capturing: "Capture | None" = None
    _side: c_void_p | None = None
    _staged = np.empty(0, np.uint8)      # the pinned block of small downloads (none: every copy pageable)

    def __init__(self) -> None:
        cu = nvrtc._libraries()[1]
        for name, argtypes in _DRIVER.items():
            getattr(cu, name).argtypes = argtypes
        self.cu = cu
        # the hot calls (launches, GEMMs) go through second handles without argtypes: their
        # arguments are made as ctypes values once per launch, so no call converts them again
        self.raw = ctypes.CDLL(cu._name)
        self.check(cu.cuInit(0), "cuInit")
        dev, ctx = c_int(), c_void_p()
        self.check(cu.cuDeviceGet(ctypes.byref(dev), 0), "cuDeviceGet")
        self.check(cu.cuDevicePrimaryCtxRetain(ctypes.byref(ctx), dev), "cuDevicePrimaryCtxRetain")
        self.ctx = ctx
        self.threads: set[int] = set()     # idents of the threads that used it (graphs: one only)
        self._made_current = threading.local()
        # a thread new to the device waits for a capture in progress (work another thread queues
        # on the stream would land in the graph); captures happen only while one thread uses it
        self.capture_lock = threading.RLock()
        self.release_hooks: list[Callable[[], None]] = []     # (drop what holds memory: graphs)
        self._cached: dict[int, list[int]] = {}      # freed blocks by size (alloc)
        self.cached_bytes = 0
        # address -> the CUDA-graphed plan (its number) whose outputs go back there
        # (runtime/cuda_graph.py GraphedPlan._outputs): freed, it is that plan's alone (alloc)
        self.promised: dict[int, int] = {}
        self.current()
        stream = c_void_p()
        self.check(cu.cuStreamCreate(ctypes.byref(stream), 1), "cuStreamCreate")   # CU_STREAM_NON_BLOCKING
        self.stream = stream
        pool, keep = c_void_p(), c_uint64(2**64 - 1)
        self.check(cu.cuDeviceGetDefaultMemPool(ctypes.byref(pool), dev), "cuDeviceGetDefaultMemPool")
        # CU_MEMPOOL_ATTR_RELEASE_THRESHOLD: freed blocks stay in the pool for the next run
        self.check(cu.cuMemPoolSetAttribute(pool, 4, ctypes.byref(keep)), "cuMemPoolSetAttribute")
        self.pool, self._trimmed = pool, False
        blas, handle = _cublas(), c_void_p()
        self.check(blas.cublasCreate_v2(ctypes.byref(handle)), "cublasCreate", blas=True)
        self.check(blas.cublasSetStream_v2(handle, stream), "cublasSetStream", blas=True)
        self.blas, self.blas_handle, self.blas_raw = blas, handle, ctypes.CDLL(blas._name)
        self._staging_lock = threading.Lock()
        self._staging, self._staged = self._pinned(STAGED_BYTES)
        self._unread: list[tuple[Sequence[Any], Callable[[], None]]] = []    # (check_later)
        self._unread_lock = threading.Lock()

    # ---- error flags read later (torch's device-side asserts surface the same way)
    def check_later(self, flags: Sequence[Any], raise_error: Callable[[], None]) -> None:
        """A run's error flags (an index out of range), read once the run is done rather than as
        it ends: reading them at once waited for the GPU to finish the run, so the host could not
        build the next step meanwhile (ResNet-18's lazy training step waited ~5 ms in its
        evaluation).  They are read, the first run with one set raising its error, when more than
        MAX_UNREAD runs wait (the oldest: an event marks its end, so later runs are not waited
        for), before a CUDA graph that wrote them is launched again (`read_flags`), and before
        the host reads a buffer or waits for the stream.  So no value of a run whose flag is set
        reaches the host, and a run's inputs (which an error's message reads) are held only
        until then."""
        event = c_void_p()
        self.check(self.cu.cuEventCreate(ctypes.byref(event), 2), "cuEventCreate")   # (no timing)
        self.check(self.cu.cuEventRecord(event, self.stream), "cuEventRecord")
        with self._unread_lock:
            self._unread.append((flags, raise_error, event))
            due, self._unread = self._unread[:-MAX_UNREAD], self._unread[-MAX_UNREAD:]
        self._read(due)

    def read_flags(self) -> None:
        """Reads every run's flags `check_later` kept."""
        if self._unread:
            with self._unread_lock:
                unread, self._unread = self._unread, []
            self._read(unread)

    def settle(self, flag: "DeviceBuffer") -> None:
        """Reads the kept runs' flags where `flag` is one of them: a launch about to zero its
        flag for a new run would otherwise lose an earlier run's error."""
        if any(f is flag for flags, _, _ in self._unread for f in flags):
            self.read_flags()

    def _read(self, unread: list) -> None:
        """Each run's flags once its event has passed (a copy on no stream of ours: later runs
        queued on the stream are not waited for); the first set raises that run's error."""
        failed = None
        for flags, raise_error, event in unread:
            self.check(self.cu.cuEventSynchronize(event), "cuEventSynchronize")
            self.cu.cuEventDestroy_v2(event)
            if failed is None and any(self._flag_now(f) for f in flags):
                failed = raise_error
        if failed is not None:
            failed()

    def _flag_now(self, flag: "DeviceBuffer") -> bool:
        host = np.zeros(flag.shape, flag.dtype.np)
        if flag.nbytes:
            self.check(self.cu.cuMemcpyDtoH_v2(host.ctypes.data, flag.ptr, flag.nbytes), "cuMemcpyDtoH")
        return bool(host.any())

    def check(self, result: int, what: str, blas: bool = False) -> None:
        if result:
            text = f"cuBLAS status {result}"
            if not blas:
                msg = ctypes.c_char_p()
                self.cu.cuGetErrorString(result, ctypes.byref(msg))
                text = (msg.value or b"").decode() or f"CUDA error {result}"
            raise CudaError(f"{what} failed: {text}")

    def current(self) -> None:
        """Makes the context current on this thread (driver calls are per thread).  Asked of a
        thread-local, not of `threads`: a thread started after another ended often gets the
        ended one's ident, and it had no current context ("invalid device context")."""
        if not self._made_current.__dict__:
            with self.capture_lock:
                self.check(self.cu.cuCtxSetCurrent(self.ctx), "cuCtxSetCurrent")
                self.threads.add(threading.get_ident())
                self._made_current.yes = True

    def alloc(self, nbytes: int, prefer: int = 0, owner: int = 0) -> int:
        """A block of `nbytes`: a freed block of that size when one is cached (no driver call),
        the one at `prefer` where that is among them (a CUDA graph's outputs go back to the
        addresses they had two runs ago: runtime/cuda_graph.py GraphedPlan._outputs; those are
        promised to `owner`, that plan's number, `_take_cached`), else one from the driver's
        pool, stream-ordered.  One stream runs everything in order, so a
        block freed while launches that use it are still queued is safe to hand out again: what
        the next owner queues runs after them (torch's caching allocator reasons the same way)."""
        if nbytes == 0:
            return 0
        if self.capturing is not None:
            return self._capture_alloc(nbytes)
        ptr = self._take_cached(nbytes, prefer, owner)
        return ptr if ptr else self._fresh(nbytes, self.stream)

    def _take_cached(self, nbytes: int, prefer: int = 0, owner: int = 0) -> int:
        """A cached block of `nbytes` (0: none to take): the one at `prefer` where cached, else the
        most recently freed one promised to no other plan than `owner` (0: to none).  A promised
        block left to anyone had broken two graphed plans that run in turn (a lazy step and an lt.compile
        step, DCGAN's two networks): each plan's plain runs took the blocks the other's outputs
        were to go back to, no key came twice and neither ever replayed (ResNet-18 beside an
        lt.compile of it on an H200: 7.7 -> 13.8 ms a lazy step)."""
        blocks = self._cached.get(nbytes)
        if not blocks:
            return 0
        if prefer and prefer in blocks:
            ptr = prefer
        else:
            ptr, promised = blocks[-1], self.promised
            if promised and promised.get(ptr, owner) != owner:     # (most often the last one is free to take)
                ptr = next((b for b in reversed(blocks) if promised.get(b, owner) == owner), 0)
                if not ptr:
                    return 0
        if ptr == blocks[-1]:
            blocks.pop()
        else:
            blocks.remove(ptr)
        self.cached_bytes -= nbytes
        return ptr

    def promise(self, ptrs: list[int], owner: int) -> None:
        """Keeps these addresses, once freed, for the graphed plan numbered `owner`."""
        self.promised.update(dict.fromkeys(ptrs, owner))

    def unpromise(self, ptrs: list[int], owner: int) -> None:
        promised = self.promised
        for p in ptrs:
            if promised.get(p) == owner:
                del promised[p]

    def _fresh(self, nbytes: int, stream: c_void_p) -> int:
        ptr = c_uint64()
        result = self.cu.cuMemAllocAsync(ctypes.byref(ptr), nbytes, stream)
        if result == _OUT_OF_MEMORY and self.capturing is None and (self.cached_bytes or not self._trimmed):
            self.release()              # the cached blocks and the pool's reserve, then once more
            result = self.cu.cuMemAllocAsync(ctypes.byref(ptr), nbytes, stream)
        if result == _OUT_OF_MEMORY:    # (during a capture at once: the plain run releases and retries)
            raise OutOfMemoryError(f"CUDA out of memory: cannot allocate {nbytes} bytes for a buffer "
                              "(free tensors that are no longer needed, or use smaller batches)")
        self.check(result, f"cuMemAllocAsync({nbytes})")
        self._trimmed = False
        return ptr.value

    def _capture_alloc(self, nbytes: int) -> int:
        """A block for a buffer made during a capture: one the capture freed already (its last
        reader is recorded before the next user: one stream records a chain), else a cached or
        new one, which the graph owns from now on.  A new one comes from a side stream, ready
        before the capture goes on (on the stream it would become a node of the graph)."""
        cap = self.capturing
        blocks = cap.free.get(nbytes)
        if blocks:
            return blocks.pop()
        ptr = self._take_cached(nbytes)
        if not ptr:
            ptr = self._fresh(nbytes, self.side_stream())
            self.check(self.cu.cuStreamSynchronize(self.side_stream()), "cuStreamSynchronize")
        cap.blocks.add(ptr)
        return ptr

    def side_stream(self) -> c_void_p:
        if self._side is None:
            side = c_void_p()
            self.check(self.cu.cuStreamCreate(ctypes.byref(side), 1), "cuStreamCreate")
            self._side = side
        return self._side

    def release(self) -> None:
        """Returns every cached block to the driver and the pool's unused memory to the GPU
        (on an allocation that fails; what torch.cuda.empty_cache does), after the release hooks
        let go of what they hold (CUDA graphs and their buffers).  Not during a capture, whose
        stream takes no frees or waits."""
        if self.capturing is not None:
            return
        for hook in self.release_hooks:
            hook()
        for blocks in self._cached.values():
            for ptr in blocks:
                self.cu.cuMemFreeAsync(ptr, self.stream)
        self._cached.clear()
        self.cached_bytes = 0
        self.synchronize()
        self.check(self.cu.cuMemPoolTrimTo(self.pool, 0), "cuMemPoolTrimTo")
        self._trimmed = True

    def free(self, ptr: int, nbytes: int) -> None:
        """Keeps the block for the next buffer of its size, up to MAX_CACHED_BYTES in all; a block
        promised to a graphed plan past that too (its outputs go back to it: a training step whose
        temps free more than the cap had sent its weights' blocks to the driver, their next
        addresses were new at every step and no graph was ever replayed -- ResNet-18 at batch 64
        on 224², 224 launches issued one by one)."""
        if not ptr:
            return
        cap = self.capturing
        if cap is not None and ptr in cap.blocks:      # (for the capture's later buffers)
            cap.free.setdefault(nbytes, []).append(ptr)
            return
        # (no free on the stream while a graph is captured: it would become a node of the graph)
        if self.cached_bytes + nbytes <= MAX_CACHED_BYTES or cap is not None or ptr in self.promised:
            self._cached.setdefault(nbytes, []).append(ptr)
            self.cached_bytes += nbytes
        else:
            self.cu.cuMemFreeAsync(ptr, self.stream)

    def upload(self, ptr: int, host: np.ndarray) -> None:
        if host.nbytes:
            self.check(self.cu.cuMemcpyHtoDAsync_v2(ptr, host.ctypes.data, host.nbytes, self.stream), "cuMemcpyHtoD")

    def download(self, ptr: int, nbytes: int, shape: tuple[int, ...], dtype) -> np.ndarray:
        """A new host array of `shape` and numpy `dtype` holding the `nbytes` at `ptr`, once the
        stream's work queued before is done.  Up to STAGED_BYTES go through one pinned block and
        are copied out of it: a copy into pageable memory is a staged, synchronous transfer inside
        the driver (4 KB on an H100 host: 16.5-17.8 us pageable, 9-11 us pinned with the copy out;
        benchmarks/gpu_w7_stages.py).  Not during a capture: its stream takes no waits."""
        staged = self._staged
        if 0 < nbytes <= staged.size and self.capturing is None:
            with self._staging_lock:        # (one block: a second thread's copy waits)
                result = self.raw.cuMemcpyDtoHAsync_v2(self._staging, c_uint64(ptr), c_size_t(nbytes), self.stream)
                if result:
                    self.check(result, "cuMemcpyDtoH")
                self.synchronize()
                return staged[:nbytes].view(dtype).reshape(shape).copy()
        host = np.empty(shape, dtype)
        if nbytes:
            self.check(self.cu.cuMemcpyDtoHAsync_v2(host.ctypes.data, ptr, nbytes, self.stream), "cuMemcpyDtoH")
        self.synchronize()
        return host

    def _pinned(self, nbytes: int) -> tuple[c_void_p, np.ndarray]:
        """(address, bytes as an array) of a page-locked host block; an empty array where the
        driver refuses one (downloads then copy to pageable memory)."""
        ptr = c_void_p()
        if self.cu.cuMemAllocHost_v2(ctypes.byref(ptr), nbytes):
            return ptr, np.empty(0, np.uint8)
        return ptr, np.ctypeslib.as_array((ctypes.c_ubyte * nbytes).from_address(ptr.value))

    def zero(self, ptr: int, nbytes: int) -> None:
        if nbytes:
            self.check(self.cu.cuMemsetD8Async(ptr, 0, nbytes, self.stream), "cuMemsetD8")

    def synchronize(self) -> None:
        self.check(self.cu.cuStreamSynchronize(self.stream), "cuStreamSynchronize")
        self.read_flags()

    def function(self, cubin: bytes, name: str, shared_memory: int = 0) -> c_void_p:
        module, fn = c_void_p(), c_void_p()
        self.check(self.cu.cuModuleLoadData(ctypes.byref(module), cubin), "cuModuleLoadData")
        self.check(self.cu.cuModuleGetFunction(ctypes.byref(fn), module, name.encode()), f"cuModuleGetFunction({name})")
        if shared_memory > 48 * 1024:       # CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES
            self.check(self.cu.cuFuncSetAttribute(fn, 8, shared_memory), "cuFuncSetAttribute")
        return fn

    def launcher(self, fn: c_void_p, grid: Sequence[int], block: Sequence[int], shared: int, params) -> Callable[[], None]:
        """A launch of `fn` with its arguments converted once: each call is the driver call alone
        (through the unprototyped entry point, whose arguments are ready ctypes values)."""
        args = (fn, *map(c_uint, grid), *map(c_uint, block), c_uint(shared), self.stream, params, None)
        raw, check = self.raw.cuLaunchKernel, self.check

        def go() -> None:
            result = raw(*args)
            if result:
                check(result, "cuLaunchKernel")
        return go

    def launch(self, fn: c_void_p, grid: Sequence[int], block: Sequence[int], shared: int, params) -> None:
        self.launcher(fn, grid, block, shared, params)()

    # ---- CUDA graphs (runtime/cuda_graph.py decides when)
    def begin_capture(self, capture: "Capture") -> None:
        """Work queued on the stream from now on is recorded, not run; the memory handed out
        meanwhile is the capture's.  Relaxed mode: cuBLAS and the side stream's allocations are
        allowed."""
        self.check(self.cu.cuStreamBeginCapture_v2(self.stream, 2), "cuStreamBeginCapture")   # RELAXED
        self.capturing = capture

    def end_capture(self) -> c_void_p | None:
        """The recorded work as an executable graph; None where the capture failed (a launch
        did what a graph cannot hold, such as reading a buffer on the host)."""
        self.capturing = None
        graph, exe = c_void_p(), c_void_p()
        result = self.cu.cuStreamEndCapture(self.stream, ctypes.byref(graph))
        if result == 0:
            result = self.cu.cuGraphInstantiateWithFlags(ctypes.byref(exe), graph, 0)
        if graph:
            self.cu.cuGraphDestroy(graph)        # (the executable graph does not need it)
        return exe if result == 0 else None

    def launch_graph(self, exe: c_void_p) -> None:
        result = self.raw.cuGraphLaunch(exe, self.stream)
        if result:
            self.check(result, "cuGraphLaunch")

    def destroy_graph(self, exe: c_void_p) -> None:
        """(A replay still running finishes first: the driver frees the graph after it.)"""
        self.cu.cuGraphExecDestroy(exe)


# Freed blocks kept for reuse, in bytes, before frees go back to the driver's pool.
MAX_CACHED_BYTES = 1 << 32
# Runs whose error flags wait (Device.check_later) before the oldest's are read: the last run's,
# while the host builds the next step.
MAX_UNREAD = 1
# Downloads up to this size go through the device's pinned block (Device.download).
STAGED_BYTES = 1 << 16
_OUT_OF_MEMORY = 2             # CUDA_ERROR_OUT_OF_MEMORY


@functools.lru_cache(maxsize=1)
def device() -> Device:
    return Device()


def synchronize() -> None:
    """Waits until every launch started on the stream has finished (lt.cuda.synchronize)."""
    if device.cache_info().currsize:
        device().synchronize()


# ---------------------------------------------------------------- buffers

class DeviceBuffer:
    """A contiguous buffer in GPU memory (storage form: bfloat16 as 16-bit words), freed back to
    the stream's pool when dropped (after the launches queued before it)."""
    __slots__ = ("ptr", "shape", "dtype", "nbytes", "dev", "__weakref__")

    def __init__(self, shape: tuple[int, ...], dtype: DType, nbytes: int | None = None, prefer: int = 0,
                 owner: int = 0):
        self.shape, self.dtype = tuple(shape), dtype
        self.nbytes = math.prod(self.shape) * np.dtype(dtype.np).itemsize if nbytes is None else nbytes
        # (its own device, freed back to that one: a buffer a test's fake device made and the
        # collector dropped later had put the fake's address into the real device's cache, where
        # the next buffer of its size took it: "invalid argument", illegal accesses, wrong values)
        self.dev = dev = device()
        self.ptr = dev.alloc(self.nbytes, prefer, owner)    # (prefer, owner: Device.alloc)
        if dev.capturing is not None:        # (see Capture.made)
            dev.capturing.made.append(weakref.ref(self))

    def __del__(self) -> None:
        try:
            self.dev.free(self.ptr, self.nbytes)
        except Exception:            # (interpreter shutdown: the driver may be gone)
            pass

    def __array__(self, dtype=None, copy=None):
        dev = self.dev
        dev.read_flags()                 # (a run's unread error flags first: Device.check_later)
        host = dev.download(self.ptr, self.nbytes, self.shape, self.dtype.np)
        return host if dtype is None else host.astype(dtype)

    def copy_from_host(self, value: np.ndarray) -> None:
        self.dev.upload(self.ptr, np.ascontiguousarray(value, self.dtype.np).reshape(self.shape))


class HostScalar:
    """A Python number a plan reads as a scalar param, kept on the host: the kernels take it by
    value.  Read anywhere else (a host launch), it is a 0-d array."""
    __slots__ = ("value", "dtype")
    shape = ()

    def __init__(self, value: Any, dtype: DType):
        self.value, self.dtype = value, dtype

    def __array__(self, dtype=None, copy=None):
        host = D.from_compute(np.asarray(self.value), self.dtype).reshape(())
        return host if dtype is None else host.astype(dtype)


# Scalar dtypes kernels take by value: dtype -> the ctypes type of the parameter and how a Python
# number becomes its value (float32 rounded as C's cast rounds, as Backend.scalar does).
BY_VALUE: dict[DType, tuple[type, Callable[[Any], Any]]] = {
    D.float32: (ctypes.c_float, to_float32), D.bool_: (ctypes.c_bool, bool),
    D.int32: (ctypes.c_int32, int), D.int64: (ctypes.c_int64, int),
}


# ---------------------------------------------------------------- helper kernels

MAX_DIMS = 8


class Walk(ctypes.Structure):
    """A strided copy: n elements of `shape` from src (strides, offset) to dst (strides, offset), in elements."""
    _fields_ = [("n", ctypes.c_longlong), ("ndim", c_int),
                ("shape", ctypes.c_longlong * MAX_DIMS), ("src", ctypes.c_longlong * MAX_DIMS),
                ("dst", ctypes.c_longlong * MAX_DIMS), ("src_off", ctypes.c_longlong), ("dst_off", ctypes.c_longlong)]


class Gather(ctypes.Structure):
    """A gather along `dim`: n output elements of `shape` (the index's), the source's and the
    index's element strides and offsets, and the source's size along dim."""
    _fields_ = [("n", ctypes.c_longlong), ("ndim", c_int), ("dim", c_int),
                ("shape", ctypes.c_longlong * MAX_DIMS), ("src", ctypes.c_longlong * MAX_DIMS),
                ("idx", ctypes.c_longlong * MAX_DIMS), ("src_off", ctypes.c_longlong),
                ("idx_off", ctypes.c_longlong), ("size", ctypes.c_longlong)]


_WORDS = {1: "uint8_t", 2: "uint16_t", 4: "uint32_t", 8: "uint64_t"}
HELPERS = cuda_target.STANDALONE_HEADER + f"""
struct Walk {{ long long n; int ndim; long long shape[{MAX_DIMS}], src[{MAX_DIMS}], dst[{MAX_DIMS}]; long long src_off, dst_off; }};

template <typename T> __device__ void copy_strided(const T* s, T* d, const Walk& w) {{
  for (long long e = blockIdx.x * (long long)blockDim.x + threadIdx.x; e < w.n; e += (long long)gridDim.x * blockDim.x) {{
    long long r = e, si = w.src_off, di = w.dst_off;
    for (int k = w.ndim - 1; k >= 0; --k) {{
      long long q = r % w.shape[k];
      r /= w.shape[k];
      si += q * w.src[k];
      di += q * w.dst[k];
    }}
    d[di] = s[si];
  }}
}}

// gather along dim: out (contiguous, the index's shape) at q reads s at q with q[dim] replaced by
// index[q] (both read through their strides); an index outside 0..size-1 sets the flag and writes 0
struct Gather {{ long long n; int ndim, dim; long long shape[{MAX_DIMS}], src[{MAX_DIMS}], idx[{MAX_DIMS}]; long long src_off, idx_off, size; }};

template <typename T, typename I> __device__ void gather_dim(const T* s, const I* index, T* out, int* flag, const Gather& g) {{
  for (long long e = blockIdx.x * (long long)blockDim.x + threadIdx.x; e < g.n; e += (long long)gridDim.x * blockDim.x) {{
    long long r = e, si = g.src_off, ii = g.idx_off;
    for (int k = g.ndim - 1; k >= 0; --k) {{
      long long q = r % g.shape[k];
      r /= g.shape[k];
      ii += q * g.idx[k];
      if (k != g.dim) si += q * g.src[k];
    }}
    long long k = (long long)index[ii];
    if (k < 0 || k >= g.size) {{ flag[0] = 1; out[e] = T(0); }} else {{ out[e] = s[si + k * g.src[g.dim]]; }}
  }}
}}

// out[i, j] = table[index[i], j]; an index outside 0..rows-1 sets the flag and writes 0
template <typename T, typename I> __device__ void take_rows(
    const T* table, const I* index, T* out, int* flag, long long n, long long row, long long rows) {{
  for (long long e = blockIdx.x * (long long)blockDim.x + threadIdx.x; e < n; e += (long long)gridDim.x * blockDim.x) {{
    long long i = e / row, j = e - i * row, k = (long long)index[i];
    if (k < 0 || k >= rows) {{ flag[0] = 1; out[e] = T(0); }} else {{ out[e] = table[k * row + j]; }}
  }}
}}
""" + "".join(
    f'extern "C" __global__ void lt_copy{n}(const {t}* s, {t}* d, const Walk w) {{ copy_strided(s, d, w); }}\n'
    + "".join(f'extern "C" __global__ void lt_take{n}_{i}(const {t}* table, const {i}_t* index, {t}* out, int* flag, '
              f'long long n, long long row, long long rows) {{ take_rows(table, index, out, flag, n, row, rows); }}\n'
              f'extern "C" __global__ void lt_gather{n}_{i}(const {t}* s, const {i}_t* index, {t}* out, int* flag, '
              f'const Gather g) {{ gather_dim(s, index, out, flag, g); }}\n'
              for i in ("int32", "int64"))
    for n, t in _WORDS.items())


@functools.lru_cache(maxsize=1)
def _helpers() -> dict[str, c_void_p]:
    (cubin,) = nvrtc.compile_all([(HELPERS, "lt_helpers")])
    dev = device()
    names = [f"lt_copy{n}" for n in _WORDS] + [f"lt_{op}{n}_{i}" for op in ("take", "gather")
                                               for n in _WORDS for i in ("int32", "int64")]
    return {name: dev.function(cubin, name) for name in names}


def _blocks(n: int, threads: int = 256) -> int:
    return max(1, min((n + threads - 1) // threads, 65535))


def _walk(shape: Sequence[int], src: tuple[Sequence[int], int], dst: tuple[Sequence[int], int]) -> Walk:
    if len(shape) > MAX_DIMS:
        raise NotImplementedError(f"strided copy of {len(shape)} dims (at most {MAX_DIMS})")
    w = Walk(n=math.prod(shape), ndim=len(shape), src_off=src[1], dst_off=dst[1])
    w.shape[:len(shape)], w.src[:len(shape)], w.dst[:len(shape)] = list(shape), list(src[0]), list(dst[0])
    return w


def _launch_walk(helper: str, src_ptr: int, dst_ptr: int, w: Walk) -> None:
    if w.n == 0:
        return
    s, d = c_uint64(src_ptr), c_uint64(dst_ptr)
    params = (c_void_p * 3)(ctypes.addressof(s), ctypes.addressof(d), ctypes.addressof(w))
    device().launch(_helpers()[helper], (_blocks(w.n), 1, 1), (256, 1, 1), 0, params)


def copy_strided(src_ptr: int, dst_ptr: int, itemsize: int, shape: Sequence[int],
                 src: tuple[Sequence[int], int], dst: tuple[Sequence[int], int]) -> None:
    """dst[view] = src[view]: element strides and offsets of both sides over `shape`."""
    _launch_walk(f"lt_copy{itemsize}", src_ptr, dst_ptr, _walk(shape, src, dst))


# ---------------------------------------------------------------- strided values of a launch

class Strided:
    """A value a library or device-reference launch reads: a buffer seen through element strides
    and an offset (a read buffer as it is, or a view node over one)."""
    __slots__ = ("ptr", "shape", "strides", "offset", "dtype", "owner")

    def __init__(self, ptr: int, shape, strides, offset: int, dtype: DType, owner: DeviceBuffer | None = None):
        self.ptr, self.shape, self.strides, self.offset, self.dtype = ptr, tuple(shape), tuple(strides), offset, dtype
        self.owner = owner      # the buffer at ptr, kept alive as long as this value is read

    @classmethod
    def of(cls, buf: DeviceBuffer) -> "Strided":
        return cls(buf.ptr, buf.shape, contiguous_strides(buf.shape), 0, buf.dtype, buf)

    def view(self, spec) -> "Strided":
        """The view `spec` of this value (a contiguous buffer: _views_of_reads)."""
        return Strided(self.ptr, spec.shape, spec.strides, spec.offset, self.dtype, self.owner)

    @property
    def itemsize(self) -> int:
        return np.dtype(self.dtype.np).itemsize

    def copy_to(self, out: DeviceBuffer) -> None:
        copy_strided(self.ptr, out.ptr, self.itemsize, self.shape, (self.strides, self.offset),
                     (contiguous_strides(self.shape), 0))

    def expanded(self, batch: tuple[int, ...]) -> "Strided":
        """This matrix (or batch of them) broadcast to the batch dims `batch` (stride 0 where broadcast)."""
        lead = len(batch) - (len(self.shape) - 2)
        strides = [0] * lead + [0 if d == 1 else s for d, s in zip(self.shape[:-2], self.strides[:-2])]
        return Strided(self.ptr, (*batch, *self.shape[-2:]), (*strides, *self.strides[-2:]), self.offset, self.dtype,
                       self.owner)

    def contiguous(self) -> "Strided":
        """This value in a fresh contiguous buffer (its owner: freed once the launch that reads it
        is queued, which the stream-ordered allocator allows)."""
        if self.strides == contiguous_strides(self.shape):
            return self
        buf = DeviceBuffer(self.shape, self.dtype)
        self.copy_to(buf)
        return Strided.of(buf)


def _views_of_reads(launch, views, made=()) -> bool:
    """Every view node reads a buffer of the launch, or a value made for it (`made`: their node
    ids; views over views are left to the host)."""
    read = {id(n) for n, _ in launch.reads} | set(made)
    return all(id(v.inputs[0]) in read for v in views)


def _env(launch, views, reads: Sequence[DeviceBuffer], constants: dict | None = None) -> dict[int, Strided]:
    env = {id(node): Strided.of(r) for (node, _), r in zip(launch.reads, reads)}
    if constants:
        env.update(constants)
    for node in views:
        env[id(node)] = env[id(node.inputs[0])].view(node.attrs["view"])
    return env


# ---------------------------------------------------------------- GEMM

# cudaDataType of each GEMM dtype; accumulation in float32
_GEMM_TYPES = {D.float32: 0, D.float16: 2, D.bfloat16: 14}
_GEMM_DEFAULT = -1
# cuBLAS compute types: CUBLAS_COMPUTE_32F, and CUBLAS_COMPUTE_32F_FAST_TF32 (float32 operands
# multiplied in TF32 on the tensor cores, accumulated in float32)
COMPUTE_32F, COMPUTE_32F_FAST_TF32 = 68, 77
_ONE, _ZERO = ctypes.c_float(1.0), ctypes.c_float(0.0)


def compute_type(mm: Node) -> int:
    """The cuBLAS compute type of a matmul node's GEMM: TF32 for a float32 product whose op allowed
    it when it was called (torch's flags, ir/precision.py: convolutions by default, as torch's
    cuDNN ones do), float32 otherwise (half types have no TF32 form: they accumulate in float32)."""
    return COMPUTE_32F_FAST_TF32 if mm.dtype is D.float32 and precision.tf32(mm.attrs) else COMPUTE_32F


def _matrix(v: Strided, batch: tuple[int, ...]) -> tuple[int, int, int] | None:
    """(op, ld, batch stride) of a row-major operand for cuBLAS's column-major GEMM: op N when its
    rows are contiguous (it is its own transpose in column-major), op T when its columns are;
    None when its strides fit neither or its batch dims do not fold into one stride."""
    r, c = v.shape[-2:]
    sr, sc = v.strides[-2:]
    if c == 1:
        sc = 1
    if r == 1:
        sr = max(c, 1) if sc == 1 else sr
    if sc == 1 and sr >= max(c, 1):
        op, ld = 0, sr
    elif sr == 1 and sc >= max(r, 1):
        op, ld = 1, sc
    else:
        return None
    # the operand's batch dims, broadcast to the output's (stride 0 where it has size 1)
    lead = len(batch) - (len(v.shape) - 2)
    strides = [0] * lead + [s if d != 1 else 0 for d, s in zip(v.shape[:-2], v.strides[:-2])]
    live = [(d, s) for d, s in zip(batch, strides) if d != 1]
    if all(s == 0 for _, s in live):
        return op, ld, 0
    for (d0, s0), (d1, s1) in zip(live, live[1:]):
        if s0 != s1 * d1:
            return None
    return op, ld, live[-1][1]


def _operand(launch, views, node) -> tuple[int, Strided]:
    """(index of the read buffer, the operand's layout over it with pointer 0) of a GEMM operand."""
    index = {id(n): i for i, (n, _) in enumerate(launch.reads)}
    if any(v is node for v in views):
        spec = node.attrs["view"]
        return index[id(node.inputs[0])], Strided(0, spec.shape, spec.strides, spec.offset, node.dtype)
    return index[id(node)], Strided(0, node.shape, contiguous_strides(node.shape), 0, node.dtype)


class _Copy(NamedTuple):
    """A GEMM operand cuBLAS cannot read as it is: copied into a contiguous temp of `shape` first."""
    shape: tuple[int, ...]
    dtype: DType
    walk: Walk
    helper: str


def _gemm_operand(launch, views, node, batch) -> tuple[int, int, tuple[int, int, int], _Copy | None]:
    """(read index, byte offset, (op, ld, batch stride), copy or None) of a GEMM operand, decided once."""
    index, layout = _operand(launch, views, node)
    matrix = _matrix(layout, batch)
    if matrix is not None:
        return index, layout.offset * layout.itemsize, matrix, None
    full = layout.expanded(batch)            # (a copy in the output's batch shape always fits)
    dense = Strided(0, full.shape, contiguous_strides(full.shape), 0, full.dtype)
    walk = _walk(full.shape, (full.strides, full.offset), (dense.strides, 0))
    return index, 0, _matrix(dense, batch), _Copy(full.shape, full.dtype, walk, f"lt_copy{full.itemsize}")


def gemm_launch(launch) -> LaunchFn | None:
    """A matmul launch (views, then one matmul) as one cuBLAS strided-batched GEMM; operands whose
    views cuBLAS cannot read are copied contiguous first.  Every layout is decided here, once: a
    run only adds the buffers' addresses.  None: not that shape (host fallback)."""
    views = [n for n in launch.nodes if n.op == "view"]
    computed = [n for n in launch.nodes if n.op != "view"]
    if [n.op for n in computed] != ["matmul"]:
        return None
    (mm,) = computed
    if (any(n.dtype not in _GEMM_TYPES or len(n.shape) < 2 for n in (mm, *mm.inputs))
            or not _views_of_reads(launch, views) or any(len(n.shape) > MAX_DIMS for n in mm.inputs)):
        return None
    x, w = mm.inputs
    out_shape = tuple(mm.shape)
    batch, (M, N), K = out_shape[:-2], out_shape[-2:], x.shape[-1]
    count = math.prod(batch)
    kind = _GEMM_TYPES[mm.dtype]
    dev = device()
    if K == 0 or count * M * N == 0:         # an empty product, or zeros: no GEMM
        return lambda reads, writes: dev.zero(writes[0].ptr, writes[0].nbytes)
    ia, offa, (opa, lda, sa), copya = _gemm_operand(launch, views, x, batch)
    ib, offb, (opb, ldb, sb), copyb = _gemm_operand(launch, views, w, batch)
    # the GEMM's arguments as ctypes values, made once; a run sets the three addresses
    a_ptr, b_ptr, c_ptr = c_uint64(), c_uint64(), c_uint64()
    i32, i64 = ctypes.c_int, ctypes.c_longlong
    args = (dev.blas_handle, i32(opb), i32(opa), i32(N), i32(M), i32(K), ctypes.byref(_ONE),
            b_ptr, i32(kind), i32(ldb), i64(sb), a_ptr, i32(kind), i32(lda), i64(sa),
            ctypes.byref(_ZERO), c_ptr, i32(kind), i32(N), i64(M * N), i32(count), i32(compute_type(mm)),
            i32(_GEMM_DEFAULT))
    gemm = dev.blas_raw.cublasGemmStridedBatchedEx

    def fn(reads: Sequence[DeviceBuffer], writes: Sequence[DeviceBuffer]) -> None:
        out = writes[0]
        pa, pb = reads[ia].ptr + offa, reads[ib].ptr + offb
        temps = []                 # (freed, stream-ordered, after the GEMM is queued)
        if copya:
            temps.append(_copied(pa, copya))
            pa = temps[-1].ptr
        if copyb:
            temps.append(_copied(pb, copyb))
            pb = temps[-1].ptr
        # row-major C = A @ B is column-major C^T = B^T @ A^T
        a_ptr.value, b_ptr.value, c_ptr.value = pa, pb, out.ptr
        result = gemm(*args)
        if result:
            dev.check(result, "cublasGemmStridedBatchedEx", blas=True)
    return fn


def _copied(ptr: int, copy: _Copy) -> DeviceBuffer:
    buf = DeviceBuffer(copy.shape, copy.dtype)
    _launch_walk(copy.helper, ptr, buf.ptr, copy.walk)
    return buf


# ---------------------------------------------------------------- device reference launches

def _take(node, env, out: DeviceBuffer, flag: DeviceBuffer) -> None:
    """embedding: rows of the table at the indices (contiguous copies first where views)."""
    index, table = (env[id(i)].contiguous() for i in node.inputs)
    row = math.prod(table.shape[1:])
    n = out.nbytes // table.itemsize
    if n == 0:
        return
    args = [c_uint64(table.ptr + table.offset * table.itemsize), c_uint64(index.ptr + index.offset * index.itemsize),
            c_uint64(out.ptr), c_uint64(flag.ptr), ctypes.c_longlong(n), ctypes.c_longlong(row),
            ctypes.c_longlong(table.shape[0])]
    params = (c_void_p * len(args))(*[ctypes.addressof(a) for a in args])
    name = f"lt_take{table.itemsize}_{index.dtype.name}"
    device().launch(_helpers()[name], (_blocks(n), 1, 1), (256, 1, 1), 0, params)


def _gather(node, env, out: DeviceBuffer, flag: DeviceBuffer) -> None:
    """gather along dim: the source and the index read through their strides (views as they are)."""
    x, index = (env[id(i)] for i in node.inputs)
    n = math.prod(out.shape)
    if n == 0:
        return
    g = Gather(n=n, ndim=len(out.shape), dim=node.attrs["dim"] % len(x.shape), src_off=x.offset,
               idx_off=index.offset)
    g.size = x.shape[g.dim]
    for k, (size, sx, si) in enumerate(zip(out.shape, x.strides, index.strides)):
        g.shape[k], g.src[k], g.idx[k] = size, sx, si
    args = [c_uint64(x.ptr), c_uint64(index.ptr), c_uint64(out.ptr), c_uint64(flag.ptr)]
    params = (c_void_p * 5)(*[ctypes.addressof(a) for a in args], ctypes.addressof(g))
    device().launch(_helpers()[f"lt_gather{x.itemsize}_{index.dtype.name}"], (_blocks(n), 1, 1), (256, 1, 1), 0, params)


def _cat_into(node, env, out: DeviceBuffer) -> None:
    dim, at = node.attrs["dim"], 0
    strides = contiguous_strides(out.shape)
    for i in node.inputs:
        v = env[id(i)]
        if math.prod(v.shape):
            copy_strided(v.ptr, out.ptr, v.itemsize, v.shape, (v.strides, v.offset), (strides, at * strides[dim]))
        at += v.shape[dim] if v.shape else 1


_INDEX_DTYPES = (D.int32, D.int64)


_INDEXED = {      # the device-run reference ops that read indices: (op) -> whether its form fits the kernel
    "embedding": lambda node: node.inputs[0].dtype in _INDEX_DTYPES and len(node.inputs[1].shape) == 2,
    # (cross_entropy's target pick: on the host it waited for the GPU mid-plan, and kept the
    # plan out of CUDA graphs)
    "gather": lambda node: node.inputs[1].dtype in _INDEX_DTYPES and 0 < len(node.inputs[0].shape) == len(node.shape),
}


def device_reference_launch(launch) -> LaunchFn | None:
    """A reference launch of views, one cat, embedding or gather written to the launch's only
    buffer, run on the device; None otherwise (the host runs it).  Constants inlined into it (an
    iota: a traced step's positions, `arange(T)`, read by the position embedding; a fill joined by
    cat) are made on the host once and kept on the device with the launch: run on the host, such
    a launch had kept lt.compile's training step out of CUDA graphs."""
    views = [n for n in launch.nodes if n.op == "view"]
    made = _constants(launch.nodes)
    computed = [n for n in launch.nodes if n.op != "view" and id(n) not in made]
    if len(launch.writes) != 1 or len(computed) > 1 or (computed and computed[0].op not in ("cat", *_INDEXED)):
        return None
    node = computed[0] if computed else launch.writes[0][0]
    if launch.writes[0][0] is not node or len(node.shape) > MAX_DIMS:
        return None
    if node.op in _INDEXED and not _INDEXED[node.op](node):
        return None
    if not _views_of_reads(launch, views, made):
        return None
    flag = DeviceBuffer((1,), D.int32) if node.op in _INDEXED else None
    read = {id(i) for n in views + computed for i in n.inputs}
    constants = {k: Strided.of(_uploaded(value)) for k, value in made.items() if k in read}

    def fn(reads: Sequence[DeviceBuffer], writes: Sequence[DeviceBuffer]) -> DeferredCheck | None:
        env = _env(launch, views, reads, constants)
        out = writes[0]
        if node.op == "view":
            env[id(node)].copy_to(out)
        elif node.op == "cat":
            _cat_into(node, env, out)
        else:
            dev = device()
            dev.settle(flag)            # (an earlier run's unread value first: it is zeroed now)
            dev.zero(flag.ptr, 4)
            if node.op == "gather":
                _gather(node, env, out, flag)
            else:
                _take(node, env, out, flag)
            # (the error reads the inputs again on the host, where they are still alive)
            held = _held_weakly(reads)
            return DeferredCheck(flag, lambda: _host_error(node, launch, views, held(), constants))
        return None
    return fn


CONSTANT_OPS = frozenset({"iota", "full", "scalar"})


def _constants(nodes) -> dict[int, np.ndarray]:
    """The values of a launch's nodes that read only constants (its iotas, fills and their
    scalars), computed on the host, by id (nodes come in topological order)."""
    made: dict[int, np.ndarray] = {}
    for n in nodes:
        if n.op in CONSTANT_OPS and all(id(i) in made for i in n.inputs):
            made[id(n)] = run_node(n, [made[id(i)] for i in n.inputs])
    return made


def _uploaded(arr: np.ndarray) -> DeviceBuffer:
    arr = np.ascontiguousarray(arr)
    buf = DeviceBuffer(arr.shape, D.from_numpy(arr.dtype))
    buf.copy_from_host(arr)
    return buf


def _materialized(v: Strided) -> DeviceBuffer:
    buf = DeviceBuffer(v.shape, v.dtype)
    v.copy_to(buf)
    return buf


def _held_weakly(reads: Sequence[Any]) -> Callable[[], list | None]:
    """A launch's reads back when called, or None where a buffer among them is gone (its other
    reads, host scalars, are held).  A run's flags may be read several runs later (a loop that
    reads its loss every N steps): an error closure that held a run's buffers (a training step's
    embedding table) until then kept their blocks from the next runs' outputs, whose CUDA graph
    keys then never came twice (runtime/cuda_graph.py)."""
    refs = [weakref.ref(r) if isinstance(r, DeviceBuffer) else (lambda r=r: r) for r in reads]

    def get() -> list | None:
        values = [ref() for ref in refs]
        return None if any(v is None for v in values) else values
    return get


def _bounds(node) -> str:
    """What a valid index of an indexed op is, from its inputs' shapes (_INDEXED's ops)."""
    if node.op == "embedding":
        n = node.inputs[1].shape[0]
        return f"for a table of {n} rows (valid indices are 0..{n - 1})"
    dim = node.attrs["dim"] % len(node.inputs[0].shape)
    n = node.inputs[0].shape[dim]
    return f"for dim {dim} with size {n} (valid indices are 0..{n - 1})"


def _host_error(node, launch, views, reads: list | None, constants) -> BaseException:
    """The op's own error, from its inputs read back to the host (None: freed before the flag
    was read, so the index is not known)."""
    if reads is None:
        return IndexError(f"{node.op}: an index is out of bounds {_bounds(node)}; the run's inputs were freed "
                          "before its error flag was read, so the index itself is not shown")
    env = _env(launch, views, reads, constants)
    run_node(node, [np.asarray(_materialized(env[id(i)])) for i in node.inputs])
    return AssertionError(f"{node.op}: the device found an index out of range, the host none")


# ---------------------------------------------------------------- the backend

class DriverBackend(Backend):
    """The cuda backend on the CUDA driver (see the module docstring)."""

    name = "cuda"
    device_memory = True
    library_bias = False         # a linear layer's bias joins the following kernel (no GEMM epilogue)
    guarded_reads = True
    library_ops = frozenset()    # attention decomposes: GEMM, one row kernel, GEMM

    def __init__(self) -> None:
        self.dev = device()
        self._kernels = LRU("cuda kernels", 1024)
        self._nbytes: dict[tuple, int] = {}
        self.graph_sight = cuda_graph.sights()
        if cuda_graph.drop_all not in self.dev.release_hooks:
            self.dev.release_hooks.append(cuda_graph.drop_all)

    # ---- data
    def from_host(self, arr: np.ndarray) -> Buffer:
        arr = np.asarray(arr)
        dtype = D.bfloat16 if arr.dtype == np.uint16 else D.from_numpy(arr.dtype)
        self.dev.current()
        buf = DeviceBuffer(arr.shape, dtype)
        buf.copy_from_host(arr)
        return buf

    def adopt(self, buf: Buffer) -> Buffer:
        return buf if isinstance(buf, (DeviceBuffer, HostScalar)) else self.from_host(np.asarray(buf))

    def param_converter(self):
        return lambda value, dtype: self.adopt(value)

    def to_host(self, buf: Buffer) -> np.ndarray:
        return np.asarray(buf)

    def empty(self, shape: tuple[int, ...], dtype: DType) -> Buffer:
        # (called for every write of every run: the size of a (shape, dtype) is worked out once)
        self.dev.current()
        nbytes = self._nbytes.get((shape, dtype))
        if nbytes is None:
            if len(self._nbytes) > 4096:
                self._nbytes.clear()
            nbytes = self._nbytes[(shape, dtype)] = math.prod(shape) * np.dtype(dtype.np).itemsize
        return DeviceBuffer(shape, dtype, nbytes)

    def scalar(self, value: Any, dtype: DType) -> Buffer:
        return self.from_host(D.from_compute(np.asarray(value), scalar_dtype(dtype)).reshape(()))

    def fast_scalar(self, dtype: DType) -> Callable[[Any, DType], Buffer] | None:
        """Python numbers launches read stay on the host: kernels take them by value."""
        dtype = scalar_dtype(dtype)
        return (lambda value, _dtype: HostScalar(value, dtype)) if dtype in BY_VALUE else None

    def check_flags(self, flags: Sequence[Any], raise_error: Callable[[], None]) -> None:
        self.dev.check_later(flags, raise_error)

    def synchronize(self) -> None:
        synchronize()

    # ---- compilation
    def prepare(self, plan) -> PlanExecutor | cuda_graph.GraphedPlan:
        """Every kernel of the plan not compiled yet is compiled first, all at once (NVRTC, disk
        cache), each taking the plan's Python scalars by value.  Runs replay CUDA graphs where
        they can (runtime/cuda_graph.py)."""
        calls = nvrtc.plan_calls(plan, BY_VALUE)
        todo = {(c.name, pos): (c, pos) for c, pos in calls.values() if min(c.grid) > 0 and (c.name, pos) not in self._kernels}
        made = dict(zip(todo, self._compile(list(todo.values()))))

        def compile_launch(launch, plan) -> LaunchFn | None:
            if id(launch) not in calls:
                return self.compile_launch(launch, plan)
            call, by_value = calls[id(launch)]
            if min(call.grid) == 0:
                return lambda reads, writes: None
            fn = self._kernels.get_or_make((call.name, by_value),
                                           lambda: made.get((call.name, by_value)) or self._compile([(call, by_value)])[0])
            return self._launch(launch, call, fn, by_value)
        executor = PlanExecutor(self, plan, compile_launch)
        return cuda_graph.GraphedPlan(executor, self.dev, DeviceBuffer, self.graph_sight) if self.graph_sight else executor

    def _compile(self, calls) -> list[c_void_p]:
        return [self.dev.function(cubin, c.name, c.shared_memory) for (c, _), cubin in zip(calls, nvrtc.compile_calls(calls))]

    def compile_launch(self, launch, plan) -> LaunchFn | None:
        check_dtypes(launch, "cuda")
        if launch.kind == "library":
            return gemm_launch(launch)
        if launch.kind == "reference":
            return device_reference_launch(launch)
        return None

    def _launch(self, launch, call, function: c_void_p, by_value: tuple[int, ...]) -> LaunchFn:
        """cuLaunchKernel of `function` with the launch's buffers: argument storage made once,
        each run only sets the pointers (and the scalars' values)."""
        dev = self.dev
        pointers = [i for i in range(len(call.input_names)) if i not in by_value]
        ptr_args = [c_uint64() for _ in pointers]
        n_out = len(launch.writes)
        out_args = [c_uint64() for _ in call.output_names]
        # outputs past the launch's writes (a grid combine's scratch, the error flag): the launch's own
        extra = [DeviceBuffer(shape, dt) for shape, dt in zip(call.output_shapes[n_out:], call.output_dtypes[n_out:])]
        for arg, buf in zip(out_args[n_out:], extra):
            arg.value = buf.ptr
        values = [(BY_VALUE[call.input_dtypes[i]][0](), BY_VALUE[call.input_dtypes[i]][1], i) for i in by_value]
        storage = ptr_args + out_args + [v for v, _, _ in values]
        params = (c_void_p * len(storage))(*[ctypes.addressof(s) for s in storage])
        tx, ty, tz = call.threadgroup
        gx, gy, gz = call.grid
        block = (min(tx, gx), min(ty, gy), min(tz, gz))
        grid = ((gx + tx - 1) // tx, (gy + ty - 1) // ty, (gz + tz - 1) // tz)
        shared, zero = call.shared_memory, call.init_value is not None
        flag = extra[-1] if call.output_names[-1] == ERROR_FLAG else None
        go = dev.launcher(function, grid, block, shared, params)

        def fn(reads: Sequence[Buffer], writes: Sequence[DeviceBuffer]):
            for arg, i in zip(ptr_args, pointers):
                arg.value = reads[i].ptr
            for arg, convert, i in values:
                r = reads[i]
                arg.value = convert(r.value if r.__class__ is HostScalar else np.asarray(r).item())
            for arg, w in zip(out_args, writes):
                arg.value = w.ptr
            if zero:
                for w in (*writes, *extra):
                    dev.zero(w.ptr, w.nbytes)
            go()
            if flag is not None:
                return DeferredCheck(flag, lambda: kernel_error(launch))
        return fn


def CudaBackend() -> Backend:      # noqa: N802  (a backend factory, named as the class was)
    """The cuda backend: on the CUDA driver where it loads, else through MLX's CUDA build (also
    with LAZYTORCH_CUDA_RUNTIME=mlx)."""
    if os.environ.get("LAZYTORCH_CUDA_RUNTIME", "driver") == "driver" and available():
        return DriverBackend()
    from .mlx import CudaBackend as MlxCudaBackend
    return MlxCudaBackend()

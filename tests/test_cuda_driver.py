"""The cuda backend's driver runtime (runtime/cuda_driver.py) where no GPU is: the decisions it
makes on the host, checked against numpy.  On a GPU the op suite runs on it
(`LAZYTORCH_TEST_BACKENDS=cuda`, benchmarks/gpu_run.sh ops).

- GEMM operand layouts: cuBLAS reads every row-major operand (and batch of them) whose layout
  `_matrix` accepts, through an emulation of cuBLAS's column-major strided-batched GEMM over the
  flat memory; a layout it refuses is copied contiguous, and that copy always fits.
- The helper kernels (strided copy, row gather) compile with nvcc.
"""
from __future__ import annotations

import ctypes
import gc
import math
import os
import shutil
import subprocess
import threading
import weakref
from pathlib import Path

import numpy as np
import pytest

import lazytorch as lt
from lazytorch.ir import dtypes as D
from lazytorch.runtime import cuda_driver
from lazytorch.runtime.cuda_driver import HELPERS, Strided, _matrix, contiguous_strides

NVCC = shutil.which("nvcc") or ("/usr/local/bin/nvcc" if os.path.exists("/usr/local/bin/nvcc") else None)


def _column_major(flat: np.ndarray, offset: int, rows: int, cols: int, ld: int) -> np.ndarray:
    i, j = np.arange(rows)[:, None], np.arange(cols)[None, :]
    return flat[offset + i + j * ld]


def _cublas(op: int, flat, offset: int, rows: int, cols: int, ld: int) -> np.ndarray:
    """op(A) of cuBLAS's operand: A stored column-major as (rows x cols), or its transpose stored."""
    stored = _column_major(flat, offset, *((rows, cols) if op == 0 else (cols, rows)), ld)
    return stored if op == 0 else stored.T


def _strided(view: np.ndarray) -> tuple[Strided, np.ndarray]:
    """The view as the runtime sees it (element strides and offset over its base) and the flat base."""
    base = view
    while base.base is not None:
        base = base.base
    item = view.itemsize
    offset = (view.__array_interface__["data"][0] - base.__array_interface__["data"][0]) // item
    return Strided(0, view.shape, [s // item for s in view.strides], offset, D.float32), base.reshape(-1)


def _gemm(x: np.ndarray, w: np.ndarray) -> np.ndarray | None:
    """x @ w as the driver runs it (row-major C = A @ B as column-major C^T = B^T A^T); None where
    `_matrix` sends an operand to the contiguous copy."""
    out_shape = np.broadcast_shapes(x.shape[:-2], w.shape[:-2]) + (x.shape[-2], w.shape[-1])
    batch, (M, N), K = out_shape[:-2], out_shape[-2:], x.shape[-1]
    (a, fa), (b, fb) = _strided(x), _strided(w)
    ma, mb = _matrix(a, batch), _matrix(b, batch)
    if ma is None or mb is None:
        return None
    out = np.empty((math.prod(batch), M, N), np.float32)
    for k in range(len(out)):
        bt = _cublas(mb[0], fb, b.offset + k * mb[2], N, K, mb[1])
        at = _cublas(ma[0], fa, a.offset + k * ma[2], K, M, ma[1])
        out[k] = (bt @ at).T
    return out.reshape(out_shape)


def _r(*shape, seed=0):
    return np.random.default_rng(seed).standard_normal(shape).astype(np.float32)


def _transposed_storage(a: np.ndarray) -> np.ndarray:
    """`a` with the same values, its last two dims stored transposed (column-major matrices)."""
    return np.swapaxes(np.ascontiguousarray(np.swapaxes(a, -1, -2)), -1, -2)


SHAPES = [(3, 4, 5), (1, 4, 5), (3, 1, 5), (3, 4, 1), (1, 1, 1)]
CASES = {
    "contiguous": lambda M, K, N: (_r(M, K), _r(K, N, seed=1)),
    "x transposed storage": lambda M, K, N: (_transposed_storage(_r(M, K)), _r(K, N, seed=1)),
    "w transposed storage": lambda M, K, N: (_r(M, K), _transposed_storage(_r(K, N, seed=1))),
    "batched": lambda M, K, N: (_r(2, 3, M, K), _r(2, 3, K, N, seed=1)),
    "batched x, shared w": lambda M, K, N: (_r(2, 3, M, K), _r(K, N, seed=1)),
    "batched, w^T views": lambda M, K, N: (_r(2, 3, M, K), _transposed_storage(_r(2, 3, K, N, seed=1))),
    "k^T of a (B, S, D) key": lambda M, K, N: (_r(4, M, K), np.swapaxes(_r(4, N, K, seed=1), -1, -2)),
}


@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: "x".join(map(str, s)))
@pytest.mark.parametrize("case", CASES)
def test_gemm_layouts_cublas_reads_directly(case, shape):
    x, w = CASES[case](*shape)
    got = _gemm(x, w)
    assert got is not None, f"{case}: expected cuBLAS to read the operands without a copy"
    np.testing.assert_allclose(got, x @ w, rtol=1e-5, atol=1e-5)


COPIED = {
    "heads split (B, H, T, d) from (B, T, H, d)": lambda: (_r(2, 5, 3, 4).transpose(0, 2, 1, 3),
                                                         _r(2, 6, 3, 4, seed=1).transpose(0, 2, 3, 1)),
    "broadcast inner batch dim": lambda: (_r(2, 1, 3, 4), _r(2, 3, 4, 5, seed=1)),
    "strided columns": lambda: (_r(3, 8)[:, ::2], _r(4, 5, seed=1)),
}


@pytest.mark.parametrize("case", COPIED)
def test_gemm_layouts_cublas_cannot_read_are_copied_and_the_copy_fits(case):
    x, w = COPIED[case]()
    want = x @ w
    assert _gemm(x, w) is None
    batch = want.shape[:-2]
    for v in (x, w):
        full = _strided(v)[0].expanded(batch)
        dense = Strided(0, full.shape, contiguous_strides(full.shape), 0, full.dtype)
        assert _matrix(dense, batch) is not None
    # the copy in the output's batch shape gives the product
    got = _gemm(np.ascontiguousarray(np.broadcast_to(x, batch + x.shape[-2:])),
                np.ascontiguousarray(np.broadcast_to(w, batch + w.shape[-2:])))
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


def test_unavailable_without_a_gpu_says_what_the_backend_needs():
    if cuda_driver.available():
        pytest.skip("a GPU is here")
    from lazytorch.runtime import get_backend
    with pytest.raises(RuntimeError, match="NVIDIA GPU"):
        get_backend("cuda")


@pytest.mark.skipif(NVCC is None, reason="nvcc not installed")
def test_helper_kernels_compile_with_nvcc(tmp_path):
    src = tmp_path / "helpers.cu"
    src.write_text(HELPERS)
    cccl = Path(os.path.realpath(NVCC)).parent.parent / "include" / "cccl"
    includes = [f"-I{cccl}"] if cccl.is_dir() else []
    proc = subprocess.run([NVCC, "-arch=sm_90", "-std=c++17", "-c", *includes, str(src), "-o", str(tmp_path / "h.o")],
                          capture_output=True, text=True)
    assert proc.returncode == 0, proc.stdout + proc.stderr


@pytest.mark.parametrize("shapes", [((2, 0), (0, 3)), ((0, 3), (3, 4)), ((2, 3, 0), (0, 5))])
def test_empty_products_never_reach_the_layouts(shapes, monkeypatch):
    """An empty inner dim (zeros) or an empty output: the launch zero-fills, deciding no layout
    (no operand of a 0-size dim is a matrix cuBLAS could read)."""
    import lazytorch as lt
    from lazytorch.realize import kernel_plan
    x, w = (lt.tensor(np.zeros(s, np.float32)) for s in shapes)
    plan = kernel_plan([x @ w], backend="cpu")
    (launch,) = [l for l in plan.launches if l.kind == "library"]
    zeroed = []

    class Dev:
        def zero(self, ptr, nbytes):
            zeroed.append(nbytes)
    monkeypatch.setattr(cuda_driver, "device", lambda: Dev())
    monkeypatch.setattr(cuda_driver, "_gemm_operand", lambda *a: pytest.fail("a layout was decided"))
    fn = cuda_driver.gemm_launch(launch)
    out = type("Out", (), {"ptr": 0, "nbytes": 4 * math.prod((x @ w).shape)})()
    fn([], [out])
    assert zeroed == [out.nbytes]


class _Driver:
    """libcuda's allocation calls, answering out of memory `oom` times before succeeding."""

    def __init__(self, oom: int):
        self.oom, self.calls = oom, []

    def cuMemAllocAsync(self, ptr, nbytes, stream):   # noqa: N802  (the driver's names)
        self.calls.append("alloc")
        if self.oom:
            self.oom -= 1
            return 2
        ptr._obj.value = 4096
        return 0

    def cuMemFreeAsync(self, ptr, stream):            # noqa: N802
        self.calls.append(f"free {ptr}")
        return 0

    def cuStreamSynchronize(self, stream):            # noqa: N802
        return 0

    def cuMemPoolTrimTo(self, pool, size):            # noqa: N802
        self.calls.append("trim")
        return 0

    # (events and a flag's synchronous copy: Device.check_later)
    def cuEventCreate(self, event, flags):             # noqa: N802
        self.calls.append("event")
        return 0

    def cuEventRecord(self, event, stream):            # noqa: N802
        return 0

    def cuEventSynchronize(self, event):               # noqa: N802
        self.calls.append("wait")
        return 0

    def cuEventDestroy_v2(self, event):                # noqa: N802
        return 0

    def cuMemcpyDtoH_v2(self, dst, ptr, nbytes):       # noqa: N802
        ctypes.memmove(dst, bytes([_Flag.values[ptr]]), 1)
        return 0


class _Flag:
    """A run's 0-d error flag on the fake device: its value read by cuMemcpyDtoH_v2."""
    values: dict[int, int] = {}
    shape, dtype, nbytes = (), D.bool_, 1

    def __init__(self, value: bool):
        self.ptr = 1000 + len(_Flag.values)
        _Flag.values[self.ptr] = int(value)


def _device(oom: int) -> cuda_driver.Device:
    dev = object.__new__(cuda_driver.Device)
    dev.cu, dev.stream, dev.pool, dev._trimmed = _Driver(oom), None, None, False
    dev._cached, dev.cached_bytes, dev.release_hooks, dev.promised = {}, 0, [], {}
    dev._unread, dev._unread_lock = [], threading.Lock()
    return dev


def test_error_flags_are_read_once_their_run_is_done(monkeypatch):
    """A run's error flags are not read as it ends (that waited for the GPU): the last
    MAX_UNREAD runs' wait, an older run's are read after its own end event (not the stream's), and
    every run's before the host waits for the stream (a read, lt.cuda.synchronize); the first run
    with a flag set raises its error, and each run's flags are read once."""
    dev = _device(oom=0)
    raised = []

    def error(name):
        def raise_error():
            raised.append(name)
            raise IndexError(f"{name}: index out of range")
        return raise_error
    monkeypatch.setattr(cuda_driver, "MAX_UNREAD", 2)
    dev.check_later([_Flag(False)], error("first"))
    dev.check_later([_Flag(False), _Flag(True)], error("second"))
    assert raised == [] and len(dev._unread) == 2 and "wait" not in dev.cu.calls
    dev.check_later([_Flag(False)], error("third"))                # the first is read: not set
    assert raised == [] and dev.cu.calls.count("wait") == 1 and len(dev._unread) == 2
    with pytest.raises(IndexError, match="second"):
        dev.check_later([_Flag(True)], error("fourth"))
    assert raised == ["second"]
    with pytest.raises(IndexError, match="fourth"):
        dev.synchronize()                                           # (the rest, at the wait)
    assert dev._unread == []
    dev.synchronize()                                               # (read once)
    assert raised == ["second", "fourth"]
    reused, other = _Flag(True), _Flag(False)                       # (a launch about to zero a
    dev.check_later([reused], error("fifth"))                       # flag reads its last run first)
    dev.settle(other)
    assert raised == ["second", "fourth"]
    with pytest.raises(IndexError, match="fifth"):
        dev.settle(reused)
    assert dev._unread == []


def test_freed_blocks_are_reused_by_size_and_released_when_memory_runs_out():
    dev = _device(oom=0)
    a = dev.alloc(256)
    dev.free(a, 256)
    assert dev.alloc(256) == a and dev.cu.calls == ["alloc"]        # reused: no driver call
    dev.free(a, 256)
    dev.cu.oom = 1                                                  # the next driver allocation fails once
    assert dev.alloc(512) == 4096
    assert dev.cu.calls == ["alloc", "alloc", f"free {a}", "trim", "alloc"]
    assert dev.cached_bytes == 0


def test_out_of_memory_is_torchs_error_naming_the_size():
    dev = _device(oom=2)
    with pytest.raises(cuda_driver.OutOfMemoryError, match="cannot allocate 1024 bytes"):
        dev.alloc(1024)


class _ContextDriver:
    """cuCtxSetCurrent recorded per calling thread."""

    def __init__(self) -> None:
        self.set_on: list[str] = []

    def cuCtxSetCurrent(self, ctx) -> int:          # noqa: N802
        self.set_on.append(threading.current_thread().name)
        return 0


def test_every_new_thread_makes_the_context_current_even_with_a_reused_ident():
    """A thread started after another ended often gets its ident; it still has no current
    context, so `current` must not take a known ident for a thread that has one."""
    dev = object.__new__(cuda_driver.Device)
    dev.cu, dev.ctx, dev.threads = _ContextDriver(), None, set()
    dev.capture_lock, dev._made_current = threading.RLock(), threading.local()

    def use(reused: bool) -> None:
        if reused:                                  # (an ended thread's ident, as the OS reuses them)
            dev.threads.add(threading.get_ident())
        dev.current()
        dev.current()                               # (once per thread)

    for name, reused in (("first", False), ("second", True), ("third", True)):
        t = threading.Thread(target=use, args=(reused,), name=name)
        t.start()
        t.join()
    assert dev.cu.set_on == ["first", "second", "third"]


def test_cross_entropys_target_pick_runs_on_the_device(monkeypatch):
    """cross_entropy picks each sample's target with gather, a reference launch: on the host it
    waited for the GPU in the middle of every training step and kept the plan out of CUDA graphs.
    The driver runtime runs a gather along a dim on the device (cuda_driver._gather, flagged like
    the embedding's rows); a 0-d source stays on the host."""
    from lazytorch.realize import kernel_plan
    monkeypatch.setattr(cuda_driver, "DeviceBuffer", lambda shape, dtype: ("flag", shape, dtype))
    logits = lt.tensor(np.random.default_rng(0).standard_normal((4, 7)).astype(np.float32))
    target = lt.tensor(np.array([1, 0, 6, 3]))
    plan = kernel_plan([lt.nn.functional.cross_entropy(logits, target)], backend="cuda")
    host = [launch for launch in plan.launches if launch.kind == "reference"]
    assert [n.op for n in host[0].nodes][-1] == "gather"
    assert all(cuda_driver.device_reference_launch(launch) is not None for launch in host)
    scalar = kernel_plan([lt.gather(lt.tensor(3.0), 0, lt.tensor(0))], backend="cuda")
    (picked,) = [launch for launch in scalar.launches if launch.kind == "reference"]
    assert cuda_driver.device_reference_launch(picked) is None


def test_an_index_launchs_error_holds_its_reads_weakly(monkeypatch):
    """An embedding's deferred check reads its inputs again on the host for torch's message, but
    holds them weakly: its flags may be read N runs later (a loop that reads its loss every N
    steps), and a table held that long kept its block from the next runs' outputs (no CUDA graph
    key came twice).  Gone by then, the error says the index is not known."""
    from lazytorch.realize import kernel_plan

    class Buf:
        def __init__(self, shape, dtype, nbytes=None):
            self.shape, self.dtype, self.ptr = tuple(shape), dtype, 4096
            self.nbytes = math.prod(self.shape) * np.dtype(dtype.np).itemsize

    class Dev:
        def settle(self, flag): pass
        def zero(self, ptr, n): pass
        def launch(self, *args): pass
    monkeypatch.setattr(cuda_driver, "DeviceBuffer", Buf)
    monkeypatch.setattr(cuda_driver, "device", lambda: Dev())
    monkeypatch.setattr(cuda_driver, "_helpers", lambda: {"lt_take4_int64": None})
    table = lt.tensor(np.ones((16, 4), np.float32))
    plan = kernel_plan([lt.nn.functional.embedding(lt.tensor(np.arange(8)), table)], backend="cuda")
    (launch,) = [l for l in plan.launches if l.kind == "reference"]
    fn = cuda_driver.device_reference_launch(launch)
    reads = [Buf(n.shape, n.dtype) for n, _ in launch.reads]
    alive = weakref.ref(reads[0])
    check = fn(reads, [Buf((8, 4), D.float32)])
    del reads
    gc.collect()
    assert alive() is None
    error = check.error()
    assert isinstance(error, IndexError) and "embedding" in str(error) and "freed" in str(error)
    assert "out of bounds for a table of 16 rows (valid indices are 0..15)" in str(error)
    # a gather's bound, from its input's shape along its dim (cross_entropy's target pick)
    picked = lt.gather(lt.tensor(np.ones((4, 3), np.float32)), -1, lt.tensor(np.zeros((4, 1), np.int64)))
    assert cuda_driver._bounds(picked.node) == "for dim 1 with size 3 (valid indices are 0..2)"


def test_an_embedding_of_positions_made_in_its_launch_runs_on_the_device(monkeypatch):
    """A traced step's positions (`arange(T)` in lt.compile's trace) are an iota inlined into the
    position embedding's reference launch: on the host it kept the compiled training step out of
    CUDA graphs (W10 on an H200: no capture, no replay).  The driver runtime makes the positions
    once, on the host, keeps them on the device with the launch, and runs the embedding there;
    a fill joined by cat likewise."""
    from lazytorch.ir.creation import iota
    from lazytorch.realize import kernel_plan
    from lazytorch.tensor import Tensor

    class Uploaded:
        def __init__(self, arr):
            self.arr, self.ptr, self.shape, self.dtype = arr, 4096, arr.shape, D.from_numpy(arr.dtype)
    made: list = []
    monkeypatch.setattr(cuda_driver, "DeviceBuffer", lambda shape, dtype: ("flag", shape, dtype))
    monkeypatch.setattr(cuda_driver, "_uploaded", lambda arr: made.append(Uploaded(arr)) or made[-1])
    table = lt.tensor(np.random.default_rng(0).standard_normal((16, 4)).astype(np.float32))
    plan = kernel_plan([lt.nn.functional.embedding(Tensor(iota((8,), 0)), table)], backend="cuda")
    (host,) = [launch for launch in plan.launches if launch.kind == "reference"]
    assert [n.op for n in host.nodes] == ["iota", "embedding"]
    fn = cuda_driver.device_reference_launch(host)
    assert fn is not None
    assert len(made) == 1 and made[0].arr.dtype == np.int64
    np.testing.assert_array_equal(made[0].arr, np.arange(8))
    # the launch keeps the positions' buffer as long as it lives (freed, the allocator handed it
    # to the step's next tensor: W10's lt.compile on an H200 read garbage positions)
    positions = weakref.ref(made.pop())
    gc.collect()
    assert positions() is not None
    del fn
    gc.collect()
    assert positions() is None
    made.clear()                                # (a fill joined by cat: the same)
    x = lt.tensor(np.ones((4, 3), np.float32))
    plan = kernel_plan([lt.cat([x, lt.zeros(4, 2)], 1)], backend="cuda")
    (host,) = [launch for launch in plan.launches if launch.kind == "reference"]
    assert [n.op for n in host.nodes] == ["scalar", "full", "cat"]
    assert cuda_driver.device_reference_launch(host) is not None
    assert [m.arr.tolist() for m in made] == [[[0.0, 0.0]] * 4]
    made.clear()                                # (a fill of a runtime scalar stays on the host)
    plan = kernel_plan([lt.cat([x, lt.full((4, 2), 2.5)], 1)], backend="cuda")
    (host,) = [launch for launch in plan.launches if launch.kind == "reference"]
    assert cuda_driver.device_reference_launch(host) is None and not made

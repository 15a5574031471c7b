"""The cpu backend's native steps.  Matrix products call the BLAS directly (runtime/library.py
`BlasCall`, the C helper shaders/c_gemm.c.j2): how each product shape is called (flat, batched over
(B, H) with any operand broadcast or transposed, or numpy's matmul where the helper cannot step the
batch) and the values against torch, on one thread and split over two (column slices, batch
deals).  Consecutive kernels and products run as one segment through the program's runner
(shaders/c_runner.c.j2): values, the error flag of a step inside a segment, the debug path."""
from __future__ import annotations

import ctypes
import os

import numpy as np

import pytest

import lazytorch as lt
from lazytorch.runtime import cpu as cpu_backend, library, threads
from lazytorch.runtime.backend import native_launch
from oracle import check, sample


pytestmark = pytest.mark.usefixtures("on_cpu")       # (conftest.py)


@pytest.fixture
def calls(monkeypatch):
    """The BlasCall (or None) chosen for each library launch prepared during the test."""
    seen: list = []
    choose = library.blas_call

    def spy(plan, mm, helpers):
        seen.append(choose(plan, mm, helpers))
        return seen[-1]
    monkeypatch.setattr(library, "blas_call", spy)
    if not library.native_gemm():
        pytest.skip("numpy's BLAS exposes no cblas gemm (not OpenBLAS)")
    return seen


@pytest.fixture(params=[1, 2], ids=["1thread", "2threads"])
def split(request, monkeypatch):
    """Products of any size split over `param` threads (whatever this machine's cores and load)."""
    monkeypatch.setattr(library, "GEMM_PARALLEL_MIN", 0)
    monkeypatch.setattr(threads, "num_threads", lambda: request.param)
    monkeypatch.setattr(threads, "kernels_parallel", lambda: request.param > 1)
    monkeypatch.setattr(threads, "idle_cores", lambda: request.param)
    monkeypatch.setattr(threads, "own_busy", lambda: 0)      # (no other thread of the test's counts)
    return request.param


# (name, fn, operand samples, expected (batch, inner, a.trans, b.trans) of the call); sizes are
# distinct per case and per thread count below (a cached plan keeps the thread count it was made with)
def _cases(n: int):
    F = lambda m: m.nn.functional          # noqa: E731
    return [
        ("linear", lambda m, x, w, b: F(m).linear(x, w, b),
         (sample((3, 5 + n, 16)), sample((37, 16), seed=1), sample((37,), seed=2)), (1, 1, 0, 1)),
        ("linear_transposed_weight", lambda m, x, w: x @ w,
         (sample((4 + n, 24)), sample((24, 33), seed=1, layout="transposed")), (1, 1, 0, 1)),
        ("transposed_activation", lambda m, x, w: x.t() @ w,
         (sample((20, 6 + n)), sample((20, 48), seed=1)), (1, 1, 1, 0)),
        ("strided_weight_copied", lambda m, x, w: x @ w,
         (sample((5 + n, 12)), sample((12, 20), seed=1, layout="strided")), (1, 1, 0, 0)),
        ("attention_scores", lambda m, q, k: q.transpose(1, 2) @ k.transpose(1, 2).transpose(-1, -2),
         (sample((2, 7 + n, 3, 8)), sample((2, 7 + n, 3, 8), seed=1)), (6, 3, 0, 1)),
        ("attention_values", lambda m, p, v: p @ v.transpose(1, 2),
         (sample((2, 3, 6 + n, 6 + n)), sample((2, 6 + n, 3, 8), seed=1)), (6, 3, 0, 0)),
        ("broadcast_batch", lambda m, a, b: a @ b,
         (sample((1, 4, 5 + n, 8)), sample((3, 4, 8, 9), seed=1)), (12, 4, 0, 0)),
        ("permuted_activation_copied", lambda m, a, b: a.transpose(0, 1) @ b,
         (sample((5 + n, 3, 8)), sample((8, 40), seed=1)), (1, 1, 0, 0)),
    ]


@pytest.mark.parametrize("case", range(8), ids=[c[0] for c in _cases(0)])
def test_products_against_torch(calls, split, case):
    name, fn, args, (batch, inner, ta, tb) = _cases(split)[case]
    check(fn, *args, atol=1e-4)
    call = calls[-1]
    assert call is not None, f"{name}: expected the BLAS helper, got numpy's matmul"
    assert (call.batch, call.inner, call.a.trans, call.b.trans) == (batch, inner, ta, tb)
    assert call.threads == split
    if name == "attention_scores":       # (q @ kᵀ, float32, 8 or 9 rows: the rows kernel, batched)
        assert call.route == (library.ROUTES["rows"] if library.rows_kernel() else library.ROUTES["blas"])


def test_float64_and_uneven_columns(calls, split):
    # 70 columns over 2 threads: slices of 48 and 22 (multiples of 16 but the last)
    check(lambda m, x, w: x @ w.t(), sample((9, 11 + split), "float64"), sample((70, 11 + split), "float64", seed=1))
    assert calls[-1] is not None and calls[-1].threads == split


ROUTE = library.ROUTES
ROWS = ROUTE["rows"] if library.rows_kernel() else ROUTE["flipped"]    # (the rows kernel needs AVX-512)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_linear_on_few_rows_computed_transposed(calls, split, dtype):
    """x (m, k) @ Wᵀ with m <= FLIP_MAX_ROWS and W 3x wider: the BLAS computes W @ xᵀ into a
    scratch that is written back transposed (70 columns: uneven slices over 2 threads); twice, so
    the second run reuses the threads' scratch; more rows, or a weight not wide enough, multiply
    directly.  float32 products of 8 to 128 rows go to the rows kernel instead."""
    F = lambda m: m.nn.functional          # noqa: E731
    f32 = dtype == "float32"
    x, w, b = sample((1, 4 + split, 24), dtype), sample((70, 24), dtype, seed=1), sample((70,), dtype, seed=2)
    for _ in range(2):
        check(lambda m, x, w, b: F(m).gelu(F(m).linear(x, w, b)), x, w, b, atol=1e-5)
    assert calls[-1] is not None and calls[-1].route == ROUTE["flipped"] and calls[-1].threads == split
    check(lambda m, x, w: F(m).linear(x, w), sample((1, 1, 24), dtype), w, atol=1e-5)
    # a scratch above the 4 MiB a thread keeps (100 x 12000 floats on one thread: freed after its
    # product), twice
    big = sample((12000, 8), dtype, seed=3)
    for _ in range(2):
        check(lambda m, x, w: F(m).linear(x, w), sample((100 + split, 8), dtype), big, atol=1e-5)
    assert calls[-1] is not None and calls[-1].route == (ROWS if f32 else ROUTE["flipped"])
    check(lambda m, x, w: F(m).linear(x, w), sample((129 + split, 8), dtype), sample((600, 8), dtype, seed=1), atol=1e-5)
    assert calls[-1] is not None and calls[-1].route == ROUTE["blas"]
    check(lambda m, x, w: F(m).linear(x, w), sample((30 + split, 8), dtype), sample((70, 8), dtype, seed=1), atol=1e-5)
    rows = f32 and library.rows_kernel()         # (not wide enough to flip: the BLAS, or the rows kernel)
    assert calls[-1] is not None and calls[-1].route == (ROUTE["rows"] if rows else ROUTE["blas"])


# (rows, inner, columns) about the rows kernel's edges: panels of 32 rows and a last one of 16 or
# fewer, blocks of 12 weight rows, the inner dim in stretches of 384 with a tail under 16
@pytest.mark.parametrize("m,k,n", [(8, 2, 13), (17, 16, 12), (33, 385, 70), (55, 384, 1536),
                                   (64, 800, 11), (100, 17, 25), (128, 300, 40)])
def test_linear_on_rows_kernel_against_torch(calls, split, m, k, n):
    """float32 linear layers of 8 to 128 rows: the rows kernel (runtime/_rows.c) over the
    threads' column slices, with bias and GELU after it, an activation read through a slice of a
    wider buffer (its row stride is not its width), and 129 rows back on the BLAS."""
    F = lambda m: m.nn.functional          # noqa: E731
    n += split - 1                         # (distinct shapes per thread count: plans are cached)
    x, w, b = sample((m, k + 3), seed=m), sample((n, k), seed=1), sample((n,), seed=2)
    check(lambda t, x, w, b: F(t).gelu(F(t).linear(x[:, 1:k + 1], w, b)), x, w, b, atol=1e-4)
    # (without the kernel, or AVX-512: the route the BLAS path takes at this shape)
    without = ROUTE["flipped"] if n >= 3 * m else ROUTE["blas"]
    assert calls[-1] is not None and calls[-1].route == (ROUTE["rows"] if library.rows_kernel() else without)
    assert calls[-1].a.ld == k + 3
    check(lambda t, x, w: F(t).linear(x, w), sample((129, k)), w, atol=1e-4)
    assert calls[-1] is not None and calls[-1].route != ROUTE["rows"]


def test_rows_kernel_writes_only_its_block():
    """The kernel itself (through ctypes) on operands inside larger buffers: values against float64
    numpy, and nothing written outside the output's rows and columns; an empty inner dim writes
    zeros."""
    address = library.rows_kernel()
    if not address:
        pytest.skip("the rows kernel is not built or this CPU has no AVX-512")
    i64, ptr = ctypes.c_int64, ctypes.c_void_p
    kernel = ctypes.CFUNCTYPE(ctypes.c_int, i64, i64, i64, ptr, i64, ptr, i64, ptr, i64)(address)
    rng = np.random.default_rng(0)
    for m, k, n in [(1, 1, 1), (7, 300, 13), (40, 800, 37), (129, 385, 769), (5, 0, 3)]:
        a = rng.standard_normal((m, k + 3), dtype=np.float32)
        w = rng.standard_normal((n, k + 5), dtype=np.float32)
        c = np.full((m + 1, n + 2), 7.0, np.float32)
        assert kernel(m, n, k, a.ctypes.data, k + 3, w.ctypes.data, k + 5, c.ctypes.data, n + 2) == 1
        want = a[:, :k].astype(np.float64) @ w[:, :k].T.astype(np.float64)
        np.testing.assert_allclose(c[:m, :n], want, rtol=1e-4, atol=1e-4 * max(1, k) ** 0.5)
        assert (c[:m, n:] == 7).all() and (c[m:] == 7).all()


def test_rows_kernel_switched_off(monkeypatch):
    monkeypatch.setenv("LAZYTORCH_NATIVE", "0")
    assert library._find_rows() == 0


def test_batch_dealt_to_threads(calls, split):
    # 8 products of (4, 5) @ (5, 3): at least as many as threads, so whole products go to each
    check(lambda m, a, b: a @ b, sample((2, 4, 4, 5 + split)), sample((2, 4, 5 + split, 3), seed=1), atol=1e-5)
    assert calls[-1] is not None and (calls[-1].batch, calls[-1].inner) == (8, 4)


def test_unfoldable_batch_falls_back_to_numpy(calls):
    # a (2, 3, 4) batch read through a transpose of its first two dims: the outer dims (2, 3) do not
    # step by one stride, so the product runs through numpy's matmul (values still right)
    check(lambda m, a, b: a.transpose(0, 1) @ b, sample((3, 2, 4, 5, 6)), sample((2, 3, 4, 6, 7), seed=1),
          atol=1e-5)
    assert calls and calls[-1] is None


@pytest.mark.parametrize("shape", [(0, 8), (3, 0)], ids=["no_rows", "no_inner"])
def test_empty_products(calls, shape):
    check(lambda m, x, w: x @ w, sample(shape), sample((shape[1], 4), seed=1))


def test_idle_cores_follows_the_load(monkeypatch):
    """Without a CPU-time sample to compare with: the load average (this process counted in it)."""
    monkeypatch.setattr(threads, "num_threads", lambda: 4)
    monkeypatch.setattr(threads, "cpu_sample", lambda: None)
    for load, idle in [(0.0, 4), (1.0, 4), (2.0, 3), (3.6, 1), (30.0, 1)]:
        monkeypatch.setattr(threads.os, "getloadavg", lambda load=load: (load, 0.0, 0.0))
        monkeypatch.setattr(threads, "_idle", [float("-inf"), 1])
        assert threads.idle_cores() == idle, load


def test_idle_cores_leave_out_this_process(monkeypatch):
    """With CPU-time samples: the cores other processes kept busy since the previous sample; this
    process's own threads (a spinning OpenMP worker) never count against it."""
    monkeypatch.setattr(threads, "num_threads", lambda: 2)
    monkeypatch.setattr(threads.os, "getloadavg", lambda: (9.0, 0.0, 0.0))   # (never read below)
    S = lambda wall, busy, own: threads.CpuSample(wall, busy, own, 2)     # noqa: E731  (two CPUs)
    # (machine busy seconds, own seconds) over 1 s of wall -> idle cores
    for busy, own, idle in [(2.0, 2.0, 2), (2.0, 1.0, 1), (1.0, 0.6, 2), (1.2, 0.5, 1), (2.0, 0.0, 1),
                            (0.0, 0.0, 2)]:
        samples = iter([S(10.0, 100.0, 5.0), S(11.0, 100.0 + busy, 5.0 + own), S(12.0, 100.0 + busy, 5.0 + own)])
        monkeypatch.setattr(threads, "cpu_sample", lambda: next(samples))
        monkeypatch.setattr(threads, "_last", [None, None])
        monkeypatch.setattr(threads, "_idle", [float("-inf"), 1])
        threads.idle_cores()                                   # (the first sample: the load average)
        monkeypatch.setattr(threads, "_idle", [float("-inf"), 1])
        assert threads.idle_cores() == idle, (busy, own)
        # a third interval with both cores idle (nothing ran): idle only if the previous was too
        monkeypatch.setattr(threads, "_idle", [float("-inf"), 1])
        assert threads.idle_cores() == idle, (busy, own)
    assert threads.others_busy(S(1.0, 5.0, 1.0), S(1.01, 6.0, 1.0)) is None    # (too short a window)
    assert threads.others_busy(None, S(1.0, 5.0, 1.0)) is None


def test_idle_cores_count_only_the_cpus_this_process_may_use():
    """/proc/stat per CPU: a process confined to two cores of a bigger machine (taskset, a cpuset)
    counts those two, so one busy competitor there leaves it one idle core, not fifteen."""
    tick = threads._TICK
    text = (b"cpu  900 0 900 0 0 0 0 0 0 0\n"
            + b"".join(b"cpu%d %d 0 0 %d 0 0 0 0 0 0\n" % (n, 100 * tick if n < 2 else 0, 0) for n in range(16))
            + b"intr 1 2 3\nctxt 5\n")
    assert threads.stat_busy(text, frozenset({0, 1})) == (200.0, 2)
    assert threads.stat_busy(text, frozenset({2, 3, 4})) == (0.0, 3)
    assert threads.stat_busy(text, None) == (200.0, 16)
    assert threads.stat_busy(b"cpu  1 2 3\n", None) is None
    sample = threads.cpu_sample()
    assert sample is None or sample.cpus == len(os.sched_getaffinity(0))


@pytest.mark.parametrize("policy", [{"policy": "loaded before lazytorch (spinning)", "kernels_parallel": False},
                                    {"policy": "spin 10000", "kernels_parallel": True}], ids=["torch_first", "own"])
@pytest.mark.parametrize("idle,own", [(1, 0), (2, 0), (2, 1)])
def test_runs_fork_only_over_free_cores(monkeypatch, calls, executors, policy, idle, own):
    """Each run sets its libraries' lt_parallel and its products' thread count from the cores free
    then: those other processes leave idle, less those this process's other threads keep busy
    (a BLAS pool spinning after a call), with libgomp loaded by lazytorch or before it (torch)."""
    monkeypatch.setattr(threads, "_state", policy)
    monkeypatch.setattr(threads, "num_threads", lambda: 2)
    monkeypatch.setattr(threads, "idle_cores", lambda: idle)
    monkeypatch.setattr(threads, "own_busy", lambda: own)
    monkeypatch.setattr(library, "GEMM_PARALLEL_MIN", 0)
    # (sizes distinct per case: a cached plan keeps the policy it was prepared under)
    n = 7 + idle + 2 * own + (4 if policy["kernels_parallel"] else 0)
    check(lambda m, x, w: (x @ w.t()).relu() * 2, sample((n, 40)), sample((50, 40), seed=1), atol=1e-4)
    assert calls[-1] is not None and calls[-1].threads == 2
    free = idle > 1 and not own
    flags, counts = executors[-1].parallel, executors[-1].gemm_threads
    assert flags and all(f.value == free for f in flags)
    assert counts and all(c.value == (2 if free else 1) for c in counts)


def test_runs_without_forking_steps_skip_the_thread_decision(executors):
    """A program whose kernels are too small to fork and that has no product keeps no lt_parallel
    flags to set: its runs skip the per-run thread decision (W7's call stays ~2 us to execute)."""
    check(lambda m, a, b: ((a * 2.0 + b).tanh() - a) * 0.5, sample((33, 7)), sample((33, 7), seed=1))
    assert executors and executors[-1].direct and executors[-1].parallel == [] and not executors[-1].gemm_threads


# ---------------------------------------------------------------- segments: one native call per run

@pytest.fixture
def executors(monkeypatch):
    """The CpuExecutors prepared during the test."""
    made: list = []
    init = cpu_backend.CpuExecutor.__init__

    def spy(self, *args, **kwargs):
        init(self, *args, **kwargs)
        made.append(self)
    monkeypatch.setattr(cpu_backend.CpuExecutor, "__init__", spy)
    return made


def _block(m, x, w, b, g):
    """A pre-norm MLP block: layer_norm -> linear -> gelu -> linear + residual, softmax at the end."""
    F = m.nn.functional
    h = F.layer_norm(x, (x.shape[-1],), g, b)
    h = F.gelu(F.linear(h, w)) @ w + x
    return m.softmax(h.sum(-1, keepdim=True) * h, dim=-1)


@pytest.mark.parametrize("shape", [(3, 5, 16), (1, 1, 16), (4, 16)])
def test_segment_of_kernels_and_products(executors, shape):
    x, w = sample(shape, low=-1, high=1), sample((16, 16), seed=1, low=-0.5, high=0.5)
    b, g = sample((16,), seed=2), sample((16,), seed=3)
    check(_block, x, w, b, g, atol=1e-5)
    ex = executors[-1]
    assert ex.direct and ex.runner is not None
    # one segment holds every step: layer_norm, the products and their kernels
    assert [len(steps) for steps, seg in ex.blocks if seg >= 0] == [len(ex.program)]


def test_reference_launch_splits_segments(executors):
    # cumsum runs on the reference executor: the kernels before and after it are two segments
    check(lambda m, x: m.cumsum((x * 2).exp() @ x.t(), 1).sigmoid() @ x + 1, sample((6, 6)), atol=1e-4)
    ex = executors[-1]
    kinds = [("segment" if seg >= 0 else "kernel" if steps[0][0] is not None else "other") for steps, seg in ex.blocks]
    assert kinds.count("segment") == 2 and "other" in kinds, kinds


@pytest.mark.parametrize("debug", ["0", "1"])
def test_error_flag_inside_a_segment(monkeypatch, executors, debug, capfd):
    # the integer division is the second of the segment's steps; the error names it, the frame's
    # error word is reset and the same program runs again on valid data (traced under DEBUG too)
    monkeypatch.setenv("LAZYTORCH_DEBUG", debug)

    def fn(m, x, y):
        z = (x * 3).sum(1, keepdim=True)            # a reduction kernel
        return ((z // y).float() * x) @ x.float().t() + 1   # the division kernel, then a product
    cols = 3 if debug == "0" else 5                   # (a new program: not the cached one of the other case)
    x, y = lt.tensor(np.arange(4 * cols, dtype=np.int64).reshape(4, cols)), lt.tensor([[2], [0], [1], [3]])
    with pytest.raises(ZeroDivisionError, match="division by zero"):
        fn(lt, x, y).numpy()
    y1 = lt.tensor([[2], [5], [1], [3]])
    import torch
    want = fn(torch, torch.tensor(x.numpy()), torch.tensor(y1.numpy()))
    np.testing.assert_allclose(fn(lt, x, y1).numpy(), want.numpy())
    ex = executors[-1]
    assert ex.direct == (debug == "0")
    if debug == "0":
        assert ex.segments and len(ex.segments[0]) >= 2      # the division ran inside a segment
    if debug == "1":
        assert "lib" in capfd.readouterr().err     # every launch traced, the product included


# ---- runtime/_launch.c: the executor's native calls against their ctypes definitions

def _launch_or_skip():
    if cpu_backend._LAUNCH is None:
        pytest.skip("runtime/_launch.c is not built or LAZYTORCH_NATIVE=0")
    return cpu_backend._LAUNCH


@pytest.mark.parametrize("code, values", [
    ("f", [0.1, -2.5, 1e39, -1e39, float("nan"), float("inf"), 3, True, 3.4028235e38, 1e-46]),
    ("d", [0.1, -1e300, float("-inf"), 7, False]),
    ("?", [0, 1, 2.5, 0.0, True, -1]),
])
def test_pack_matches_struct_and_ctypes(code, values):
    """Scalars packed as the kernels read them, byte for byte as struct (and c_float past float32's
    range: inf) packs them, and nothing written past the last value."""
    launch = _launch_or_skip()
    ct = cpu_backend._FORMAT_CTYPES[code]
    n = len(values)
    got, want, untouched = (ct * (n + 2))(), (ct * (n + 2))(), (ct * 2)(5, 5)
    for arr in (got, want):
        arr[n], arr[n + 1] = 5, 5
    launch.pack(ctypes.addressof(got), code, values)
    cpu_backend.pack_py(ctypes.addressof(want), code, values)
    assert bytes(got) == bytes(want)
    assert bytes(got)[n * ctypes.sizeof(ct):] == bytes(untouched)
    with pytest.raises(OverflowError):
        launch.pack(ctypes.addressof(got), "f", [10 ** 400])
    with pytest.raises(ValueError):
        launch.pack(ctypes.addressof(got), "i", [1])


def test_call_and_run_steps_match_ctypes(tmp_path):
    """A kernel and a runner called by address, each way: the same effects and results."""
    launch = _launch_or_skip()
    src = tmp_path / "k.c"
    src.write_text(
        "#include <stdint.h>\n"
        "void k(char **a) { ((float *)a[0])[0] += 1.5f; }\n"
        "int64_t r(void (*const *f)(char **), char **const *a, int32_t *const *e, int64_t n) {\n"
        "    for (int64_t i = 0; i < n; i++) { f[i](a[i]); if (*e[i]) return i; }\n"
        "    return -1;\n}\n")
    lib_path = tmp_path / "k.so"
    import subprocess
    subprocess.run(["cc", "-O1", "-shared", "-fPIC", str(src), "-o", str(lib_path)], check=True)
    lib = ctypes.CDLL(str(lib_path))
    k_at = ctypes.cast(lib.k, ctypes.c_void_p).value
    r_at = ctypes.cast(lib.r, ctypes.c_void_p).value
    out = np.zeros(1, np.float32)
    arr = (ctypes.c_void_p * 1)(out.ctypes.data)
    for fn in (launch.call, cpu_backend.call_py):
        fn(k_at, ctypes.addressof(arr))
    assert out[0] == 3.0
    errs = (ctypes.c_int32 * 2)(0, 1)
    fns = (ctypes.c_void_p * 2)(k_at, k_at)
    args = (ctypes.c_void_p * 2)(ctypes.addressof(arr), ctypes.addressof(arr))
    words = (ctypes.c_void_p * 2)(ctypes.addressof(errs), ctypes.addressof(errs) + 4)
    at = [ctypes.addressof(x) for x in (fns, args, words)]
    assert launch.run_steps(r_at, *at, 2) == cpu_backend.run_steps_py(r_at, *at, 2) == 1
    errs[1] = 0
    assert launch.run_steps(r_at, *at, 2) == cpu_backend.run_steps_py(r_at, *at, 2) == -1
    assert out[0] == 3.0 + 1.5 * 8                   # (each of the four ran both steps)
    with pytest.raises(TypeError):
        launch.call(k_at)


def test_launch_switched_off(monkeypatch):
    monkeypatch.setenv("LAZYTORCH_NATIVE", "0")
    assert native_launch() is None


# ---- a plan of one native step run whole in C (runtime/_launch.c run_one, CpuExecutor._run_one)

ONE_STEP = {
    "float scalars": (lambda m, x: ((x * 1.5 + 0.25) / 1.02 - 0.5).exp(), (3, 5)),
    "bool scalar": (lambda m, x: ((x > 0) | False) & True, (4, 7)),
    "reduction": (lambda m, x: x.sum(1), (6, 9)),
    "pool output": (lambda m, x: x * 2.0 + 1.0, (300, 300)),       # (360 KB: from the buffer pool)
    "product": (lambda m, x: x @ x.t(), (8, 12)),
    "float64": (lambda m, x: x.double() * 0.1 - 3.0, (5,)),
}


@pytest.fixture
def run_args(monkeypatch):
    """The arguments of each CpuExecutor run during the test, last first."""
    seen: list = []
    run = cpu_backend.CpuExecutor._run

    def spy(self, args, frame):
        seen.insert(0, list(args))
        return run(self, args, frame)
    monkeypatch.setattr(cpu_backend.CpuExecutor, "_run", spy)
    return seen


@pytest.mark.parametrize("case", list(ONE_STEP))
def test_one_step_runs_whole(executors, run_args, case):
    """One kernel or product step: run_one's outputs equal torch's, and the general path's on the
    same arguments, and the pool counts its small outputs as the general path does."""
    if cpu_backend.run_one is None:
        pytest.skip("runtime/_launch.c is not built or LAZYTORCH_NATIVE=0")
    import torch
    fn, shape = ONE_STEP[case]
    x = np.random.default_rng(5).uniform(-2, 2, shape).astype(np.float32)
    for _ in range(2):                         # (the second: the cached plan, the frame reused)
        got = fn(lt, lt.tensor(x)).numpy()
    want = fn(torch, torch.tensor(x)).numpy()
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)
    ex = executors[-1]
    assert ex.one is not None and len(ex.program) == 1
    args = run_args[0]
    stats = ex.backend.pool.stats
    before = dict(stats)
    fast = ex.run(args)
    counted = {k: stats[k] - before[k] for k in stats}
    one, ex.one = ex.one, None
    try:
        before = dict(stats)
        slow = ex.run(args)
    finally:
        ex.one = one
    general = {k: stats[k] - before[k] for k in stats}
    # (one buffer each, small or from the pool alike; `fast` still holds the block the general
    # run would have reused)
    assert sum(counted.values()) == sum(general.values()) == 1 and counted["small"] == general["small"]
    assert len(fast) == len(slow) and all(a.dtype == b.dtype and np.array_equal(a, b) for a, b in zip(fast, slow))
    np.testing.assert_allclose(fast[0], want, rtol=1e-5, atol=1e-5)


def test_one_step_falls_back_and_raises(executors):
    """A non-contiguous argument goes to the general path (which converts it); an error word set
    by the kernel raises the launch's error, is cleared, and the next run is right."""
    if cpu_backend.run_one is None:
        pytest.skip("runtime/_launch.c is not built or LAZYTORCH_NATIVE=0")
    base = np.arange(24, dtype=np.float32).reshape(4, 6)
    t = lt.from_numpy(base.T)                  # (a transposed view: not C-contiguous)
    for _ in range(2):
        np.testing.assert_allclose((t * 2.0).numpy(), base.T * 2.0)
    x, y = lt.tensor(np.arange(6, dtype=np.int64)), lt.tensor(np.array([1, 2, 0, 1, 1, 3]))
    with pytest.raises(ZeroDivisionError, match="division by zero"):
        (x // y).numpy()
    assert executors[-1].one is not None
    y1 = np.array([1, 2, 4, 1, 1, 3])
    np.testing.assert_array_equal((x // lt.tensor(y1)).numpy(), np.arange(6) // y1)


def test_one_step_off_without_the_extension(monkeypatch, executors):
    monkeypatch.setattr(cpu_backend, "run_one", None)
    x = np.random.default_rng(6).standard_normal((5, 3)).astype(np.float32)
    np.testing.assert_allclose((lt.tensor(x) * 3.0 + 0.5).numpy(), x * 3.0 + 0.5, rtol=1e-6)
    assert executors[-1].one is None


# ---------------------------------------------------------------- epilogues: kernels run inside the product

def _epilogue_cases(n: int):
    """(name, fn, samples, whether the kernel after the product runs inside it); sizes distinct per
    case and thread count (a cached plan keeps the thread count it was made with)."""
    F = lambda m: m.nn.functional          # noqa: E731
    x, w, b = sample((3, 5 + n, 20)), sample((37, 20), seed=1), sample((37,), seed=2)
    return [
        ("bias", lambda m, x, w, b: F(m).linear(x, w, b), (x, w, b), True),
        ("gelu", lambda m, x, w, b: F(m).gelu(F(m).linear(x, w, b), approximate="tanh"),
         (sample((4, 6 + n, 20)), w, b), True),
        ("residual_wide", lambda m, x, w, r: r + x @ w.t(),
         (sample((70 + n, 24)), sample((50, 24), seed=1), sample((70 + n, 50), seed=3)), True),
        ("layer_norm_rows", lambda m, x, w, r: F(m).layer_norm(r + x @ w.t(), (37,)),
         (sample((11 + n, 20)), w, sample((11 + n, 37), seed=3)), True),
        ("softmax_scores", lambda m, q, k: m.softmax(q @ k.transpose(-1, -2) * 0.3, -1),
         (sample((2, 3, 9 + n, 8)), sample((2, 3, 9 + n, 8), seed=1)), True),
        ("softmax_one_product", lambda m, q, k: m.softmax(q @ k.transpose(-1, -2), -1),
         (sample((1, 1, 12 + n, 8)), sample((1, 1, 12 + n, 8), seed=1)), True),
        ("float64", lambda m, x, w, b: (F(m).linear(x, w, b) * 2).sigmoid(),
         (sample((5 + n, 20), dtype="float64"), sample((37, 20), seed=1, dtype="float64"),
          sample((37,), seed=2, dtype="float64")), True),
        ("reads_transposed", lambda m, x, w: (x @ w.t()) + (x @ w.t()).t(),
         (sample((19 + n, 20)), sample((19 + n, 20), seed=1)), False),
        ("sum_of_columns", lambda m, x, w: (x @ w.t()).sum(0),
         (sample((8 + n, 20)), w), False),
        # a convolution's product (N, G, O, H * W) read as (N, O, H, W): columns cut, and rows
        # (40 channels of 4 positions: more rows than columns)
        ("conv_bias_relu", lambda m, x, w, b: m.relu(F(m).conv2d(x, w, b)),
         (sample((1, 3, 9 + n, 7)), sample((6, 3, 2, 2), seed=1), sample((6,), seed=2)), True),
        # a batch of few positions joins one product's columns: its output is read transposed
        ("conv_batch_in_columns", lambda m, x, w, b: m.relu(F(m).conv2d(x, w, b)),
         (sample((2, 3, 9 + n, 7)), sample((6, 3, 2, 2), seed=1), sample((6,), seed=2)), False),
        ("conv_rows", lambda m, x, w, b: F(m).conv2d(x, w, b, stride=2) * 0.5,
         (sample((1, 4, 4 + n, 4)), sample((40, 4, 2, 2), seed=1), sample((40,), seed=2)), True),
        ("reshaped_transposed", lambda m, x, w: (x @ w.t()).reshape(37, -1).t() * 2,
         (sample((12 + n, 20)), w), False),
    ]


@pytest.mark.parametrize("case", range(13), ids=[c[0] for c in _epilogue_cases(0)])
def test_kernel_inside_product(executors, calls, split, case):
    """A kernel after a product that reads its output element for element (bias, activation,
    residual) or row for row (layer_norm, softmax) runs inside the product, on each slice as it is
    computed: values against torch with the slices cut by columns, by rows and by batch; a kernel
    that reads the output any other way stays a step of its own."""
    name, fn, args, inside = _epilogue_cases(split)[case]
    check(fn, *args, atol=1e-4)
    ex = executors[-1]
    assert ex.direct and calls and calls[-1] is not None
    assert bool(ex.epilogues) == inside, ex.epilogues
    if inside:
        assert all(p.startswith("lib") and k.startswith("k") for p, k in ex.epilogues)


@pytest.mark.parametrize("case", [0, 3, 4], ids=["bias", "layer_norm_rows", "softmax_scores"])
def test_kernel_alone_through_its_part(monkeypatch, executors, calls, split, case):
    """A kernel with a part function is compiled as calls of it (one function, not two); run as a
    step of its own (LAZYTORCH_DEBUG's traced path: nothing inside the products), it computes the
    same values, forked or not."""
    monkeypatch.setenv("LAZYTORCH_DEBUG", "1")
    name, fn, args, _ = _epilogue_cases(20 + split)[case]
    check(fn, *args, atol=1e-4)
    assert not executors[-1].direct and executors[-1].epilogues == []


def test_epilogues_switched_off(monkeypatch, executors, calls):
    monkeypatch.setattr(cpu_backend, "EPILOGUES", False)
    check(lambda m, x, w, b: m.nn.functional.linear(x, w, b).relu(), sample((13, 16)), sample((41, 16), seed=1),
          sample((41,), seed=2), atol=1e-4)
    assert executors[-1].direct and executors[-1].epilogues == []


def test_epilogue_memory_kept_apart(executors, calls, split):
    """The kernel inside a product writes while the product still reads: the static memory plan
    keeps what the product reads alive through the kernel, so no temp of the one shares memory
    with the other (without it, layer_norm's output block would be free for gelu's)."""
    F = lambda m: m.nn.functional          # noqa: E731

    def chain(m, x, w1, w2, g, b):
        h = F(m).layer_norm(x, (32,), g, b)
        h = F(m).gelu(h @ w1.t())
        h = F(m).gelu(h @ w2.t()) + 1
        return h @ w1
    check(chain, sample((40 + split, 32)), sample((64, 32), seed=1, low=-0.3, high=0.3),
          sample((64, 64), seed=2, low=-0.2, high=0.2), sample((32,), seed=3), sample((32,), seed=4), atol=1e-4)
    ex = executors[-1]
    assert len(ex.epilogues) >= 2
    views, temp_of = ex.memory.views, {}
    for step in ex.program:
        for slot, _, _, t, _, _ in step[3]:
            if t >= 0:
                temp_of[slot] = t
    names = {step[5].name: step for step in ex.program}
    for product, kernel in ex.epilogues:
        p, k = names[product], names[kernel]
        used = {views[temp_of[s]][0] for s in p[2] + [w[0] for w in p[3]] if s in temp_of}
        written = {views[temp_of[w[0]]][0] for w in k[3] if w[0] in temp_of}
        assert not used & written, (product, kernel)


def test_error_inside_a_product(executors, calls, split):
    """An integer division by zero in a kernel that runs inside the product sets that kernel's
    error word from the product's threads: the run raises naming it, and the same program then
    runs right on valid data."""
    def fn(m, x, w, y):
        return (x @ w.t()).round().long() // y
    x, w = sample((9 + split, 12), low=-3, high=3), sample((20, 12), seed=1, low=-3, high=3)
    zero = lt.tensor(np.array([1] * 19 + [0], dtype=np.int64))
    with pytest.raises(ZeroDivisionError, match="division by zero"):
        fn(lt, x.lt, w.lt, zero).numpy()
    assert executors[-1].epilogues
    check(fn, x, w, sample((20,), dtype="int64", low=1, high=5))

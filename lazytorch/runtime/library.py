"""Library launches on the host: a plan's matmuls as BLAS calls, shaped as models use them.

A library launch is a group of `view` nodes and one `matmul` (passes/fuse.py).  Its operands are
read in place: a view (a transposed key, a head split out of a fused qkv buffer) is read through
its strides, never copied.  How the product is called is decided once per launch, from the shapes
and views alone (`GemmPlan`):

- `flat`: a linear layer, (..., M, K) @ (K, N) with a 2-D (or batch-broadcast) weight: the leading
  dims of the activation fold into the rows and the product is ONE 2-D GEMM of (B*M, K) @ (K, N).
  numpy's stacked matmul would call BLAS once per leading index and, for a transposed weight,
  reach its slower batched loop (measured: (4,64,256) @ W.T with W (1024,256) 1.51 ms one call
  stacked against 1.09 ms flattened, BLAS on one thread).
- `batched`: attention's (B, H, T, d) products.  Each matrix must be BLAS-readable (one unit
  stride, the other at least the row length); an operand that is not is copied to a contiguous
  stack once, so nothing falls back to an element loop.
Transposed operands reach BLAS as transposes (the 'T' flag for a column-major view).

On the cpu backend (`host_gemm` with the program's functions) a product is a `BlasCall`: a step
of the C helper shaders/c_gemm.c.j2, compiled into the program's library and called like a
kernel (a parameter block, then buffer pointers), which calls the cblas gemm of the OpenBLAS
numpy loaded (found by symbol, no link dependency) on the output buffer in place: a (B, H) batch
is one call (the batch stepped by two strides), and a product of GEMM_PARALLEL_MIN multiply-adds
or more is split over the kernels' OpenMP threads (column slices, or whole products of a batch),
one single-threaded BLAS call per thread, so BLAS and kernels share one pool.  Each slice takes
the product's route (`ROUTES`): the BLAS as asked, the BLAS on the transpose (few rows), or, for
float32 linear layers and attention's scores (q @ kᵀ, batched) of 8 to 128 rows, the AVX-512 kernel
of runtime/_rows.c (built at install, passed to the helper as a function pointer; OpenBLAS is
slowest at those shapes).  Elsewhere (another
BLAS, the reference and metal-emu backends, an operand batch the helper cannot step) np.matmul
runs it, BLAS on one thread.

Bias is not folded into the GEMM as beta=1 on the host (that needs the output prefilled with the
broadcast bias, itself a full pass over the output).  passes/fuse.py fuses bias, activation and
residual into the one kernel after the product; on the cpu backend that kernel runs *inside* the
product where it can (`epilogues`): the helper calls its part function (codegen/render.py
`render_part`) on each slice right after computing it, on the same thread, while the slice is in
that core's cache: no second pass forked over the whole output, none of it moved between cores.
A row kernel (softmax over attention's scores, residual + layer_norm) takes whole rows: slices
are then whole products of a batch, or rows instead of columns.  Measured in docs/benchmarks.md
("Epilogues inside the products").
"""
from __future__ import annotations

import ctypes
import importlib.util
import math
from dataclasses import dataclass
from typing import Callable, Sequence

import numpy as np

from ..ir import dtypes as D, native
from ..ir.views import contiguous_strides
from . import threads

HOST_GEMM_DTYPES = (D.float32, D.float64)      # numpy's BLAS types; others run on the reference path


@dataclass(frozen=True)
class Operand:
    """How one matmul operand is read from its buffer: a numpy view of `shape` and `strides`
    (elements) at `offset`, copied to a contiguous array first when BLAS cannot read it (`copy`)."""
    slot: int                     # index into the launch's reads
    shape: tuple[int, ...]
    strides: tuple[int, ...]
    offset: int = 0
    copy: bool = False
    view: object | None = None    # the ViewSpec the matmul reads it through (None: the buffer itself)

    def array(self, base: np.ndarray) -> np.ndarray:
        item = base.itemsize
        arr = np.ndarray(self.shape, base.dtype, buffer=base, offset=self.offset * item,
                         strides=tuple(st * item for st in self.strides))
        return np.ascontiguousarray(arr) if self.copy else arr


@dataclass(frozen=True)
class GemmPlan:
    a: Operand
    b: Operand
    mode: str                     # "flat" (one 2-D GEMM over folded rows), "batched" or "small"
    rows: int = 0                 # flat: the folded rows of a (and of the output)


def gemm_plan(launch) -> GemmPlan | None:
    """How the launch's matmul is called, or None when it is not a float matmul of read buffers
    (read directly or through views): those run on the reference executor.  Every layout
    decision is made here, once per launch, from the buffers' shapes and the views' strides."""
    *views, mm = launch.nodes
    if mm.op != "matmul" or any(v.op != "view" for v in views):
        return None
    if mm.dtype not in HOST_GEMM_DTYPES or any(i.dtype is not mm.dtype for i in mm.inputs):
        return None
    slot = {id(node): i for i, (node, _) in enumerate(launch.reads)}

    def layout(x) -> tuple[int, tuple, tuple, int, object] | None:
        if x.op == "view" and id(x.inputs[0]) in slot:
            spec = x.attrs["view"]
            return slot[id(x.inputs[0])], tuple(spec.shape), tuple(spec.strides), spec.offset, spec
        if id(x) in slot:
            return slot[id(x)], tuple(x.shape), contiguous_strides(tuple(x.shape)), 0, None
        return None

    la, lb = layout(mm.inputs[0]), layout(mm.inputs[1])
    if la is None or lb is None:
        return None
    if 0 in mm.shape:                                # an empty result: nothing for BLAS to do
        return GemmPlan(Operand(*la[:4], view=la[4]), Operand(*lb[:4], view=lb[4]), "small")
    (ia, sa, ta, oa, va), (ib, sb, tb, ob, vb) = la, lb
    if len(sa) > 2 and math.prod(sb[:-2]) == 1:
        # a linear layer: (..., M, K) @ (K, N) as one (rows, K) @ (K, N) GEMM
        rows = math.prod(sa[:-1])
        folded = fold_rows(sa, ta)
        a = (Operand(ia, (rows, sa[-1]), folded, oa, not blas_readable((rows, sa[-1]), folded), va)
             if folded else Operand(ia, sa, ta, oa, True, va))      # rows step unevenly: one copy
        b2, t2 = sb[-2:], tb[-2:]
        b = Operand(ib, b2, t2, ob, not blas_readable(b2, t2), vb)
        return GemmPlan(a, b, "flat", rows)
    a = Operand(ia, sa, ta, oa, not blas_readable(sa, ta), va)
    b = Operand(ib, sb, tb, ob, not blas_readable(sb, tb), vb)
    return GemmPlan(a, b, "batched")


def host_gemm(launch, helpers: dict | None = None) -> Callable[[Sequence[np.ndarray], Sequence[np.ndarray]], None] | None:
    """The launch function of a library launch on a host backend (numpy buffers), or None.
    `helpers`: the program's compiled functions (the cpu backend), with the GEMM helper
    (GEMM_SYMBOLS) when numpy's BLAS exposes its cblas gemm: the product then calls the BLAS
    directly, split over the kernels' threads (`BlasCall`)."""
    plan = gemm_plan(launch)
    if plan is None:
        return None
    call = blas_call(plan, launch.nodes[-1], helpers) if helpers else None
    if call is not None:
        step = helpers[f"gemm_{launch.nodes[-1].dtype.short}"]
        step.argtypes, step.restype = (ctypes.POINTER(ctypes.c_void_p),), None
        return call.launch_fn(plan, launch, step, ctypes.c_int.from_address(_symbol_address(helpers["gemm_threads"])))
    a, b, rows = plan.a, plan.b, plan.rows
    cols = a.shape[-1]                               # K (reshape cannot infer it when it is 0)

    if plan.mode == "flat":
        def run(reads: Sequence[np.ndarray], writes: Sequence[np.ndarray]) -> None:
            out = writes[0]
            x = a.array(reads[a.slot]).reshape(rows, cols)    # (a view unless it was copied)
            with threads.blas_threads():
                np.matmul(x, b.array(reads[b.slot]), out=out.reshape(rows, out.shape[-1]))
    elif plan.mode == "batched":
        def run(reads: Sequence[np.ndarray], writes: Sequence[np.ndarray]) -> None:
            with threads.blas_threads():
                np.matmul(a.array(reads[a.slot]), b.array(reads[b.slot]), out=writes[0])
    else:
        def run(reads: Sequence[np.ndarray], writes: Sequence[np.ndarray]) -> None:
            writes[0][...] = np.matmul(a.array(reads[a.slot]), b.array(reads[b.slot]))
    return run


def fold_rows(shape: tuple[int, ...], strides: tuple[int, ...]) -> tuple[int, int] | None:
    """The (row, column) strides of (..., M, K) read as (prod(...)*M, K) without a copy: when every
    leading dim steps by the rows below it (size-1 dims aside), else None.  Strides in elements."""
    row = None                                       # the row stride every leading dim must follow
    step = None
    for size, st in zip(reversed(shape[:-1]), reversed(strides[:-1])):
        if size == 1:
            continue
        if row is None:
            row, step = st, st * size
        elif st != step:
            return None
        else:
            step = st * size
    return (strides[-1] * shape[-1] if row is None else row, strides[-1])


def blas_readable(shape: tuple[int, ...], strides: tuple[int, ...]) -> bool:
    """Whether BLAS reads every matrix of a (..., r, c) operand in place (numpy's own test): one
    unit stride and the other at least the row length; batch strides not negative.  Otherwise
    numpy would multiply element by element, so the operand is copied once instead."""
    if len(shape) < 2 or 0 in shape:
        return True
    (r, c), (sr, sc) = shape[-2:], strides[-2:]
    row_major = (sc == 1 or c == 1) and sr >= c
    col_major = (sr == 1 or r == 1) and sc >= r
    return (row_major or col_major) and all(st >= 0 for st in strides[:-2])


# ---------------------------------------------------------------- the BLAS called directly

# cblas gemm symbols in the OpenBLAS numpy loads, most specific first: (name, 64-bit integers).
# numpy's wheels ship an ILP64 OpenBLAS with prefixed, suffixed names.
CBLAS_GEMM = {D.float32: (("scipy_cblas_sgemm64_", True), ("cblas_sgemm64_", True), ("cblas_sgemm", False)),
              D.float64: (("scipy_cblas_dgemm64_", True), ("cblas_dgemm64_", True), ("cblas_dgemm", False))}
# A product of at least this many multiply-adds (m*n*k, over the batch) is split over the kernels'
# threads: below it the fork costs more than the second thread saves (docs/cpu_native.md: waking a
# sleeping libgomp worker costs tens of us; a 64x64x64 product takes ~15 us on one thread, 2M
# multiply-adds ~80 us)
GEMM_PARALLEL_MIN = 1 << 21


@dataclass(frozen=True)
class Epilogue:
    """A kernel that runs inside the product before it (`epilogues`): per slice of the product's
    output, on the thread that computed the slice, while it is in that core's cache."""
    n: int                        # the product's columns: the kernel's domain is read as rows of n
    arg: int                      # the kernel's argument that reads the product's output
    rows: bool                    # the kernel needs whole rows (a row or reduce kernel)
    split: bool                   # the product is large enough to be split over threads


def epilogues(plan) -> dict[str, Epilogue]:
    """Kernel launch name -> how it runs inside the product that precedes it, for each kernel that
    can: it follows a float matmul launch directly, its domain is the product's output shape (a
    row or reduce kernel: reduced over the last dim only; a pointwise kernel: as many elements)
    and it reads that output.  Instead of a second pass over the output, forked again, half of it
    moved from the other core's cache (a bias, an activation, a residual add, a softmax or
    layer_norm over the rows), each thread finishes the slice it just multiplied.  Whether it reads the output element for element is
    decided when its part function is rendered (codegen/render.py render_part)."""
    out: dict[str, Epilogue] = {}
    launches = plan.launches
    for prev, launch in zip(launches, launches[1:]):
        if prev.kind != "library" or launch.kind != "kernel" or not prev.nodes:
            continue
        mm = prev.nodes[-1]
        whole_rows = launch.pattern != "pointwise"
        if mm.op != "matmul" or mm.dtype not in HOST_GEMM_DTYPES or len(mm.shape) < 2 or 0 in mm.shape:
            continue
        # a row kernel's rows must be the product's; a pointwise kernel may see the output through a
        # reshape (a convolution's (N, O, H, W) of its product's (N, G, O, H * W)): render_part
        # finds its rows of the product's columns, or gives no part function
        if (tuple(launch.domain) != tuple(mm.shape) or tuple(launch.reduce_dims) != (len(mm.shape) - 1,)) \
                if whole_rows else math.prod(launch.domain) != math.prod(mm.shape):
            continue
        arg = next((i for i, (node, _) in enumerate(launch.reads) if node is mm), None)
        if arg is None:
            continue
        work = math.prod(mm.shape) * mm.inputs[0].shape[-1]
        out[launch.name] = Epilogue(mm.shape[-1], arg, whole_rows, work >= GEMM_PARALLEL_MIN)
    return out


@dataclass(frozen=True)
class Matrix:
    """How the BLAS reads one operand: per product a row-major matrix (transposed or not, leading
    dim `ld`); product (o, j) of a batch (outer, inner) starts o * `outer` + j * `inner` elements
    from the first (0: shared along that part of the batch)."""
    trans: int
    ld: int
    outer: int
    inner: int


@dataclass(frozen=True)
class BlasCall:
    """One launch's product as a step of the C helper (shaders/c_gemm.c.j2), called like a kernel:
    the BLAS's own gemm on one thread per slice, up to `threads` slices at once on the kernels'
    OpenMP pool (fewer while other processes hold the cores: the runtime sets `lt_gemm_threads`)."""
    fn: int                       # the address of the cblas gemm
    ilp64: int
    batch: int
    inner: int                    # products per outer step of the batch
    m: int
    n: int
    k: int
    a: Matrix
    b: Matrix
    threads: int
    route: int = 0                # how each slice is computed: ROUTES, chosen by `route`

    def launch_fn(self, plan: GemmPlan, launch, step, threads_now) -> Callable[[Sequence[np.ndarray], Sequence[np.ndarray]], None]:
        """The launch function: `step(args)` with args = the parameter block, the launch's reads,
        its output, an error word (never set: the layout of every kernel) and the contiguous copies
        of operands BLAS cannot read in place.  Without copies it carries `cfunc`, `arr_t`,
        `lead` (1: the block first) and `params` so that runtime/cpu.py's executor calls the step
        itself, with its other kernels; `threads_now` is the library's lt_gemm_threads."""
        a, b = plan.a, plan.b
        reads = len(launch.reads)
        copies = [op for op in (a, b) if op.copy]
        where = {id(op): 1 + reads + 2 + i for i, op in enumerate(copies)}   # (after the error word)
        values = dict(fn=self.fn, ilp64=self.ilp64, threads=self.threads, route=self.route,
                      rows=rows_kernel() if self.route == ROUTES["rows"] else 0, c=1 + reads,
                      a=where.get(id(a), 1 + a.slot), b=where.get(id(b), 1 + b.slot),
                      a_offset=0 if a.copy else a.offset, b_offset=0 if b.copy else b.offset,
                      ta=self.a.trans, tb=self.b.trans, batch=self.batch, inner=self.inner, m=self.m,
                      n=self.n, k=self.k, lda=self.a.ld, sa0=self.a.outer, sa1=self.a.inner,
                      ldb=self.b.ld, sb0=self.b.outer, sb1=self.b.inner, epi=0, epi_args=0, epi_rows=0)
        params = (ctypes.c_int64 * len(GEMM_PARAMS))(*[values[name] for name in GEMM_PARAMS])
        arr_t = ctypes.c_void_p * (reads + 3 + len(copies))
        err = np.zeros(1, np.int32)
        head, tail = ctypes.addressof(params), _address(err)
        idle = threads.idle_cores

        def run(bufs: Sequence[np.ndarray], writes: Sequence[np.ndarray]) -> None:
            kept = [op.array(bufs[op.slot]) for op in copies]     # (alive until the call returns)
            threads_now.value = idle()
            with threads.blas_threads():
                step(arr_t(head, *[_address(x) for x in bufs], _address(writes[0]), tail,
                           *[_address(x) for x in kept]))
        run.params, run.err = params, err        # (the call reads them by address: keep them alive)
        if not copies:
            run.cfunc, run.arr_t, run.lead, run.threads_now = step, arr_t, 1, threads_now
        return run


def _address(arr: np.ndarray) -> int:
    return arr.__array_interface__["data"][0]


def blas_call(plan: GemmPlan, mm, helpers: dict) -> BlasCall | None:
    """The launch's product as one call of the C helper, or None (numpy's matmul then runs it): no
    cblas gemm in numpy's BLAS, a vector or empty product, or batch strides the helper cannot
    step (an operand whose outer batch dims do not fold to one stride)."""
    if plan.mode == "small" or len(plan.a.shape) < 2 or len(plan.b.shape) < 2 or len(mm.shape) < 2:
        return None
    found = _blas_gemm(mm.dtype)
    if found is None or f"gemm_{mm.dtype.short}" not in helpers:
        return None
    fn, ilp64 = found
    m, n = mm.shape[-2:]
    k = plan.a.shape[-1]
    if plan.mode == "flat":
        m, batch_shape = plan.rows, ()
        a_shape, a_strides = (plan.rows, k), plan.a.strides[-2:]
    else:
        batch_shape = tuple(mm.shape[:-2])
        a_shape, a_strides = plan.a.shape, plan.a.strides
    if 0 in (m, n, k):
        return None
    a = _matrix(a_shape, contiguous_strides(a_shape) if plan.a.copy else a_strides, batch_shape)
    b = _matrix(plan.b.shape, contiguous_strides(plan.b.shape) if plan.b.copy else plan.b.strides, batch_shape)
    if a is None or b is None:
        return None
    if not ilp64 and max(m, n, k, a.ld, b.ld) >= 2 ** 31:
        return None                                   # (a 32-bit-int BLAS cannot take these sizes)
    batch = math.prod(batch_shape)
    work = batch * m * n * k
    count = threads.num_threads() if threads.products_split() and work >= GEMM_PARALLEL_MIN else 1
    inner = batch_shape[-1] if batch_shape else 1
    return BlasCall(fn, ilp64, batch, inner, m, n, k, a, b, count, route(mm.dtype, batch, m, n, a, b))


# How a product's slices are computed (the helper's LT_ROUTE_* values, rendered from this table):
# - blas: the BLAS's gemm as asked;
# - flipped: its transpose W @ xᵀ, the few rows becoming the BLAS's columns, written back through a
#   scratch.  A linear layer on a few rows (x (m, k) @ Wᵀ, W (n, k) as torch stores it) runs faster
#   in OpenBLAS this way (one thread, OpenBLAS 0.3.31 SkylakeX kernels, CPU time p10, direct ->
#   transposed: m = 55 (W9's 5 sentences): (384 -> 384) 302 -> 249 us, (384 -> 1536) 1222 -> 995,
#   (1536 -> 384) 938 -> 874; m = 16: 213 -> 79, 867 -> 615, 734 -> 515; m = 8 (768 -> 3072)
#   2855 -> 2158; but m = 256, the README demo's products, 5-13% slower);
# - rows: the float32 kernel of runtime/_rows.c (AVX-512, built at install), which reads x and W in
#   place and keeps 12 x 32 blocks of the output in registers.  Against OpenBLAS transposed, one
#   thread, GFLOP/s, best of 7 rounds alternating (`python -m benchmarks.gemm_probe`, dev machine;
#   docs/benchmarks.md "Linear layers on few rows"): m = 55 (W9) 124-137 against 92-95 (MKL
#   112-133); m = 8-24 51-115 against 47-87; m = 128 146 against 143; m = 256 119-148 against
#   134-149 and on the GPU host's CPU 90-130 against 130-140, so from 129 rows on the BLAS stays;
#   m = 1-4 (a vector product, for the most part padding) 6-29 against 20-26.  Batched, the same
#   form is attention's scores q @ kᵀ (k read transposed in place): lt.compile of the README demo's
#   (32 products of (64, 32) @ (32, 64)), p10 of 8 rounds alternating, dev machine: one thread
#   118 us against 131, two 68-120 against 82-148; (5, 12 heads, 11 tokens) (W9) even; (4 heads,
#   128, 64) 67-120 against 78-144 (docs/benchmarks.md, sixteenth session).  Attention's values
#   p @ v (v read as is) stay on the BLAS: the kernel reading v's columns as its rows of w was no
#   faster there (32 products of (64, 64) @ (64, 32): 296 against 289 us with the ctypes calls).
#   Where the kernel is missing (no AVX-512, not built) the helper runs `flipped` instead.
ROUTES = {"blas": 0, "flipped": 1, "rows": 2}
FLIP_MAX_ROWS = 128
ROWS_RANGE = range(8, 129)           # the rows m the `rows` kernel takes


def route(dtype, batch: int, m: int, n: int, a: Matrix, b: Matrix) -> int:
    """How a product is computed (ROUTES): float32 products x (m, k) @ Wᵀ with m in ROWS_RANGE (a
    linear layer; batched, attention's scores q @ kᵀ) go to the rows kernel (where it is built and
    the CPU has AVX-512); a single product of at most FLIP_MAX_ROWS rows against a transposed
    weight at least 3x as wide is flipped; the rest BLAS."""
    linear = batch == 1 and not a.trans and b.trans
    if dtype == D.float32 and m in ROWS_RANGE and not a.trans and b.trans and rows_kernel():
        return ROUTES["rows"]
    if linear and m <= FLIP_MAX_ROWS and n >= 3 * m:
        return ROUTES["flipped"]
    return ROUTES["blas"]


_rows_found: list = []


def rows_kernel() -> int:
    """The address of runtime/_rows.c's lt_rows_f32, or 0: not built, no AVX-512 on this CPU, or
    LAZYTORCH_NATIVE=0 (the switch for every optional compiled part)."""
    if not _rows_found:
        _rows_found.append(_find_rows())
    return _rows_found[0]


def _find_rows() -> int:
    if native.switched_off():
        return 0
    spec = importlib.util.find_spec(f"{__package__}._rows")
    if spec is None or not spec.origin:
        return 0
    lib = ctypes.CDLL(spec.origin)
    return _symbol_address(lib.lt_rows_f32) if lib.lt_rows_available() else 0


def _matrix(shape: tuple[int, ...], strides: tuple[int, ...], batch_shape: tuple[int, ...]) -> Matrix | None:
    """How the BLAS reads a (..., r, c) operand of a product batched over `batch_shape`, or None."""
    (r, c), (sr, sc) = shape[-2:], strides[-2:]
    if (sc == 1 or c == 1) and (sr >= c or r == 1):
        trans, ld = 0, sr if r > 1 else c
    elif (sr == 1 or r == 1) and (sc >= r or c == 1):
        trans, ld = 1, sc if c > 1 else r
    else:
        return None
    steps = _batch_steps(list(zip(shape[:-2], strides[:-2])), batch_shape)
    if ld < 1 or steps is None:
        return None
    return Matrix(trans, ld, *steps)


def _batch_steps(dims: list[tuple[int, int]], batch_shape: tuple[int, ...]) -> tuple[int, int] | None:
    """(outer, inner) element steps of an operand's (size, stride) batch dims over `batch_shape`
    (its last dim the inner one; a size-1 dim broadcasts with step 0), or None when the outer dims
    do not step by one stride or a stride is negative."""
    if len(dims) > len(batch_shape):
        return None
    dims = [(1, 0)] * (len(batch_shape) - len(dims)) + dims
    steps = []
    for (size, stride), want in zip(dims, batch_shape):
        if size not in (1, want) or stride < 0:
            return None
        steps.append(0 if size == 1 else stride)
    if not batch_shape:
        return 0, 0
    outer = [(size, st) for size, st in zip(batch_shape[:-1], steps[:-1]) if size != 1]
    for (_, hi), (size, lo) in zip(outer, outer[1:]):
        if hi != lo * size:
            return None
    return (outer[-1][1] if outer else 0), steps[-1]


# names (in a program's compiled functions) -> symbols of the helper: runtime/cpu.py adds them to a
# program with library launches
GEMM_SYMBOLS = {**{f"gemm_{dt.short}": f"lt_gemm_step_{dt.short}" for dt in HOST_GEMM_DTYPES},
                "gemm_threads": "lt_gemm_threads", "skip_step": "lt_skip_step"}
# a product step's int64 parameter block, in this order (the helper's enum is rendered from it)
GEMM_PARAMS = ("fn", "ilp64", "threads", "route", "rows", "a", "b", "c", "a_offset", "b_offset", "ta", "tb", "batch", "inner",
               "m", "n", "k", "lda", "sa0", "sa1", "ldb", "sb0", "sb1", "epi", "epi_args", "epi_rows")
_gemm_found: dict = {}


def native_gemm() -> bool:
    """Whether numpy's BLAS exposes a cblas gemm the helper can call (OpenBLAS)."""
    return _blas_gemm(D.float32) is not None


def gemm_source() -> str:
    """The C helper's source (shaders/c_gemm.c.j2), compiled into the programs that multiply."""
    from ..codegen.render import environment         # (only when a program is rendered)
    return environment().get_template("c_gemm.c.j2").render(params=GEMM_PARAMS, routes=ROUTES)


def _blas_gemm(dtype) -> tuple[int, int] | None:
    """(address of the cblas gemm for dtype, 64-bit ints), or None."""
    if dtype not in _gemm_found:
        _gemm_found[dtype] = _find_gemm(dtype)
    return _gemm_found[dtype]


def _find_gemm(dtype) -> tuple[int, int] | None:
    lib = threads.openblas_library()
    if lib is None or dtype not in CBLAS_GEMM:
        return None
    for name, ilp64 in CBLAS_GEMM[dtype]:
        fn = getattr(lib, name, None)
        if fn is not None:
            return _symbol_address(fn), int(ilp64)
    return None


def _symbol_address(symbol) -> int:
    """The address of a library symbol ctypes looked up (a function or a variable)."""
    return ctypes.cast(symbol, ctypes.c_void_p).value

"""Rendering: a kernel_ir.Kernel + a dialect table -> kernel source, through shaders/ templates.

render.py turns each Op, Reduce and Store into statements using the dialect's expression
tables and index arithmetic from the Accesses; the templates only arrange them into loops (or
threads).  Templates: "linear" for pointwise kernels whose accesses are all linear (one flat
index), "columns" for single-pass reductions over non-innermost dims, "rows" for everything else
(outer index x inner loop; pointwise strided kernels iterate their last dim as the inner loop).
On the GPU dialects the launch geometry comes from the geometry section below (docs/gpu.md).
"""
from __future__ import annotations

import functools
import math
import os
import re
from dataclasses import dataclass, field, replace
from pathlib import Path

import jinja2

from ..ir import dtypes as D
from ..ir.dtypes import DType
from ..ir.views import contiguous_strides
from .dialect import INT_TYPES, Dialect
from .helpers import HelperLibrary
from .kernel_ir import I32_LIMIT, Access, Kernel, Reduce, Stage
from .reductions import REDUCTIONS
from .targets import get_dialect


def shader_dir() -> Path:
    """Where the templates are: inside the installed package (the wheel maps the repository's
    top-level shaders/ to lazytorch/shaders, see setup.py), else the source tree's shaders/."""
    here = Path(__file__).resolve().parents[1]
    installed = here / "shaders"
    return installed if installed.is_dir() else here.parent / "shaders"


@functools.lru_cache(maxsize=None)
def environment() -> jinja2.Environment:
    return jinja2.Environment(loader=jinja2.FileSystemLoader(str(shader_dir())), trim_blocks=True,
                              lstrip_blocks=True, keep_trailing_newline=True, undefined=jinja2.StrictUndefined)


@functools.lru_cache(maxsize=None)
def preamble(dialect_name: str) -> str:
    """The dialect's whole helper library, rendered."""
    d = get_dialect(dialect_name)
    return environment().get_template(d.preamble).render(int_types=INT_TYPES)


@functools.lru_cache(maxsize=None)
def helper_library(dialect_name: str) -> HelperLibrary:
    return HelperLibrary(preamble(dialect_name))


def header(dialect_name: str, *rendered: "Rendered") -> str:
    """The helper functions the rendered kernels call (and what those call), nothing else."""
    used = set().union(*(r.helpers for r in rendered)) if rendered else set()
    return helper_library(dialect_name).header(used)


_HELPER = re.compile(r"\blt_\w+")

# ---------------------------------------------------------------- GPU launch geometry
# Chosen per kernel from its shape, here and nowhere else; LAZYTORCH_GPU_GEOMETRY overrides it for
# experiments (docs/gpu.md).  The numbers: a warp/simdgroup is 32 lanes; 256 threads per group
# keeps 8 groups resident per SM; LINEAR_MAX_GROUPS (about two waves of 256-thread groups on the
# largest GPUs, 132 SMs x 8) bounds the grid of pointwise kernels, whose threads then stride;
# rows of up to SIMD_ROW elements (SIMD_ROW_REVISITED for rows a later pass revisits, held in
# registers, up to 32 per lane) take one simdgroup each (several rows per group, combined by
# shuffles alone: no barrier, every load of the row in flight at once; the H100 sweep's best
# layer_norm 8192x1024 point was a warp per row), longer rows a whole group with up to
# ROW_PER_THREAD elements per thread held in registers between the passes over the row
# (fuse.ROW_LIMIT, 16384, = 1024 x 16 bounds rows that are revisited, so every multi-pass row fits).
SIMD = 32
LINEAR_THREADS = 256
LINEAR_VECTOR = 4
LINEAR_MAX_GROUPS = 2048
SIMD_ROW = 256
SIMD_ROW_REVISITED = 1024
SIMD_MAX_PER_THREAD = 32
SIMD_ROWS_PER_GROUP = 8
# Rows of at most THREAD_ROW elements take one thread each (lanes=1: THREAD_ROWS_PER_GROUP rows per
# group, the row walked serially, no combine): a simdgroup per 3x3 pooling window left 23 of its 32
# lanes idle and spent five shuffle steps per row (ResNet-18's max-pool at 64 x 224^2 on an H200:
# forward 1.58 ms, backward's window kernel 2.43 ms, against torch's 0.78 ms for both).
THREAD_ROW = 16
THREAD_ROWS_PER_GROUP = 256
# A pointwise row shorter than a simdgroup's step (32 lanes x vec) takes the fewest power-of-two
# lanes that cover it in one step, several rows a simdgroup (no combine needs the whole simdgroup):
# im2col's rows of 56 floats, vec 4, had left 18 of 32 lanes idle.  H200, ResNet-18 at 64 x 224^2:
# the one-output im2col copy 0.26 -> 0.16 ms; the weight gradients' four-output copy went 0.74 ->
# 0.92 ms (four store streams), so a kernel with more than one output keeps the simdgroup.
SUB_SIMD_GROUP_THREADS = 256
ROW_PER_THREAD = 8            # target elements per thread of a row held in registers
ROW_MAX_PER_THREAD = 16
ROW_MERGE_MAX = 2048          # a strided pointwise kernel's row, when its last dim is short (_split_rows)
ROW_VECTOR = 4                # rows kernels: a thread's adjacent elements per step (one 16-byte word of float)
MAX_THREADS = 1024
SHARED_BYTES = 16384          # threadgroup memory a columns kernel may use for its partials
COLUMN_GROUPS = 256           # column reductions with fewer groups split the reduced dim 32 ways
GEOMETRY_ENV = "LAZYTORCH_GPU_GEOMETRY"
# A single-pass reduction of few long rows (x.sum() over 2^24 elements; at most GRID_MAX_ROWS
# rows) splits each row over many groups (`split`), each reducing a slice of about GRID_SLICE
# elements; every group writes its partial, and the last group of the row to finish (an atomic
# ticket per row) folds the row's partials in group order: deterministic, torch's tie rules
# kept, one launch.  Rows shorter than GRID_MIN stay in one group.
GRID_MIN = 65536
GRID_MAX_ROWS = 64
# Column reductions with few outputs (fewer than COLUMN_SPLIT_GROUPS groups of 32) and a reduced
# dim of at least COLUMN_SPLIT_MIN split it over groups as well, each slice of a group taking at
# least COLUMN_SPLIT_RUN reduced indices; the last group of each 32 outputs folds their partials.
COLUMN_SPLIT_GROUPS = 64
COLUMN_SPLIT_MIN = 16384
COLUMN_SPLIT_RUN = 64
# Measured on an H100 (whole calls of x.sum() / x.argmax() over 2^24, x.sum(0) of 2^20 x 16 with
# lt.compile; docs/gpu.md): about two groups of 1024 threads per SM -- 256 groups: 120 / 143 /
# 125 us, against 161 / 236 / 250 us with 32 groups (too few SMs reading) and 2.2 / 6.1 / 4.0 ms
# unsplit; the kernel alone reads at the copy bandwidth from 132 to 1,024 groups.
# MLX's CUDA allocator serves allocations of up to 8 bytes from a pool of managed (unified) memory;
# an atomic ticket there cost each group about 1 us (1,024 groups: 1.2 ms for x.sum() over 2^24,
# the same kernel 29 us on device memory), so the ticket buffer is never that small.
GRID_TICKETS_MIN = 16
GRID_THREADS = 1024
GRID_SLICE = GRID_THREADS * 64
GRID_MAX_GROUPS = 256         # per row (columns: per 32 outputs)
GRID_TOTAL_GROUPS = 512       # of a launch, rows together


@dataclass(frozen=True)
class Geometry:
    """How a GPU kernel is launched.  linear: `threads` per group, `groups` groups striding over
    the domain, `per_thread` consecutive elements per thread and step (vector loads where the
    dialect has them).  rows: `rows` rows per group (> 1: one simdgroup per row), `threads`
    per group, `per_thread` elements of the row each thread keeps in registers (0: none, every
    pass re-reads the row); `vec` 4: thread t of a row takes elements [4t..4t+3] + k*4T, each
    aligned contiguous operand moved as one word (1: elements t + k*T, one by one).  columns: 32
    outputs per group, `rows` slices of the reduced domain.  linear: `vec` is per_thread.
    rows with `lanes` 1 (rows > 1): a thread per row, walked serially (tiny rows: THREAD_ROW)."""
    threads: int
    groups: int
    rows: int = 1
    per_thread: int = 1
    vec: int = 1
    split: int = 1        # rows: groups per row; columns: per 32 outputs (> 1: a grid combine folds their partials)
    lanes: int = SIMD     # rows > 1: the threads of each row (SIMD: a simdgroup; 1: one thread; 2..16: pointwise)

    def __str__(self) -> str:
        return (f"threads={self.threads} groups={self.groups} rows={self.rows} per_thread={self.per_thread}"
                f" vec={self.vec}" + (f" split={self.split}" if self.split > 1 else "")
                + (f" lanes={self.lanes}" if self.lanes != SIMD else ""))

    def slice(self, inner: int) -> int:
        """split > 1: the elements of the row each group reduces (a multiple of vec)."""
        return _ceil(inner, self.split * self.vec) * self.vec

    @property
    def row_threads(self) -> int:
        return self.lanes if self.rows > 1 else self.threads


# C loops: a reduction over several dims of at most this many elements in all (a pooling's
# window) walks them outermost over a block of outputs (the columns template): a 3 x 3 window took
# a scalar loop with its index divided per element and a horizontal fold per output (max pooling
# at 8 x 64 x 32^2: 2.5 -> 0.7 ms forward on the development machine).  A one-dim row keeps the
# rows template: contiguous rows of 16 sum faster as vectors (1.5 ms against 2.6 for 2^19 rows).
C_WINDOW_COLUMNS = 16


def _ceil(a: int, b: int) -> int:
    return -(-a // b)


def _pow2_at_least(n: int) -> int:
    return 1 << max(n - 1, 0).bit_length()


def linear_geometry(numel: int) -> Geometry:
    vec = LINEAR_VECTOR if numel >= LINEAR_VECTOR * SIMD else 1
    return Geometry(LINEAR_THREADS, max(1, min(LINEAR_MAX_GROUPS, _ceil(numel, LINEAR_THREADS * vec))), 1, vec, vec)


def _row_share(inner: int, threads: int, vec: int) -> int:
    """Elements of a row each of `threads` threads holds (a multiple of `vec`)."""
    return _ceil(inner, threads * vec) * vec


def rows_geometry(outer: int, inner: int, revisits: bool, vec: int = 1, pointwise: bool = False) -> Geometry:
    """Short rows: a simdgroup each (`pointwise` rows shorter than its step: fewer lanes, several
    rows a simdgroup); longer ones: one group, in registers if a later pass revisits the row
    (softmax, layer_norm), else threads striding over it.  `vec` (ROW_VECTOR where the row's
    operands allow vector steps, else 1): elements a thread takes per step."""
    if inner <= THREAD_ROW and outer >= THREAD_ROWS_PER_GROUP:
        rows = THREAD_ROWS_PER_GROUP
        return Geometry(rows, _ceil(outer, rows), rows, inner if revisits else 0, 1, lanes=1)
    lanes = _pow2_at_least(_ceil(inner, vec))
    if pointwise and 1 < lanes < SIMD and outer >= SUB_SIMD_GROUP_THREADS // lanes:
        rows = SUB_SIMD_GROUP_THREADS // lanes
        return Geometry(SUB_SIMD_GROUP_THREADS, _ceil(outer, rows), rows, 0, vec, lanes=lanes)
    if inner <= SIMD_ROW or (revisits and inner <= SIMD_ROW_REVISITED):
        rows = max(1, min(SIMD_ROWS_PER_GROUP, outer))
        return Geometry(SIMD * rows, max(1, _ceil(outer, rows)), rows,
                        _row_share(inner, SIMD, vec) if revisits else 0, vec)
    if revisits:
        threads = min(MAX_THREADS, max(64, _pow2_at_least(_ceil(inner, ROW_PER_THREAD))))
        per = _row_share(inner, threads, vec)
        return Geometry(threads, max(1, outer), 1, per if per <= ROW_MAX_PER_THREAD else 0, vec)
    most = LINEAR_THREADS if outer >= COLUMN_GROUPS else MAX_THREADS   # few long rows: wider groups
    return Geometry(min(most, max(SIMD, _pow2_at_least(_ceil(inner, 4)))), max(1, outer), 1, 0, vec)


def grid_split(outer: int, inner: int, vec: int, groups: int = 0) -> int:
    """Groups sharing each of `outer` rows of `inner` elements (`groups`: forced, else about one
    per GRID_SLICE elements, at most GRID_MAX_GROUPS per row and GRID_TOTAL_GROUPS in all); every
    group gets a non-empty slice."""
    want = groups or min(GRID_MAX_GROUPS, max(1, GRID_TOTAL_GROUPS // max(1, outer)), _ceil(inner, GRID_SLICE))
    want = max(1, min(want, _ceil(inner, vec)))
    return _ceil(inner, _ceil(inner, want * vec) * vec)


def columns_geometry(outer: int, inner: int, partial_bytes: int, splittable: bool = False) -> Geometry:
    """32 adjacent outputs per group; slices of the reduced domain per group: 8, or 32 when the
    outputs alone give too few groups to fill the GPU; fewer when the partials of all slices
    (`partial_bytes` per thread) would pass SHARED_BYTES of threadgroup memory.  Few outputs and
    a long reduced dim (`splittable`: the dialect has the grid combine): the reduced dim split
    over `split` groups per 32 outputs as well."""
    groups = max(1, _ceil(outer, SIMD))
    slices = 8 if groups >= COLUMN_GROUPS or inner < 64 else 32
    while slices > 1 and slices * SIMD * partial_bytes > SHARED_BYTES:
        slices //= 2
    split = 1
    if splittable and groups < COLUMN_SPLIT_GROUPS and inner >= COLUMN_SPLIT_MIN:
        split = column_split(groups, inner, slices)
    return Geometry(SIMD * slices, groups * split, slices, 0, 1, split)


def column_split(groups: int, inner: int, slices: int, want: int = 0) -> int:
    """Groups sharing the reduced dim of each 32 outputs (`want`: forced), every one non-empty."""
    want = want or min(max(1, GRID_MAX_GROUPS // groups), _ceil(inner, slices * COLUMN_SPLIT_RUN))
    want = max(1, min(want, inner))
    return _ceil(inner, _ceil(inner, want))


def forced_geometry(g: Geometry, template: str, outer: int, inner: int, vectorisable: bool = False,
                    splittable: bool = False, pointwise: bool = False) -> Geometry:
    """`g` with the fields LAZYTORCH_GPU_GEOMETRY sets (e.g. "threads=512,per_thread=8"; for one
    template only: "rows:threads=128"), made consistent with the kernel's shape (`vectorisable`:
    whether a rows kernel may take vector steps, vec=4; `splittable`: whether its one row may be
    split over groups, split=N; `pointwise`: whether its rows may take 2..16 lanes)."""
    spec = os.environ.get(GEOMETRY_ENV, "").strip()
    if not spec:
        return g
    fields = {}
    for part in spec.replace(";", ",").split(","):
        part = part.strip()
        if not part:
            continue
        scope, _, kv = part.rpartition(":")
        key, _, value = kv.partition("=")
        if scope and scope != template:
            continue
        if key not in ("threads", "groups", "rows", "per_thread", "vec", "split", "lanes") or not value.strip().isdigit():
            raise ValueError(f"{GEOMETRY_ENV}={spec!r}: bad entry {part!r}; valid: comma-separated "
                             "[linear:|rows:|columns:]threads=N, groups=N, rows=N, per_thread=N, "
                             "vec=1|4 (rows), split=N (rows, columns), lanes=1|2|4|8|16|32 (rows; 2..16 "
                             "pointwise only)")
        fields[key] = int(value) if key != "lanes" else _forced_lanes(int(value), pointwise)
    if template == "rows" and "threads" in fields and "rows" not in fields:
        fields["rows"] = 1                     # threads alone: one group per row
    g = replace(g, **fields)
    if template == "linear":
        per = max(1, g.per_thread)
        return replace(g, threads=max(1, min(MAX_THREADS, g.threads)), per_thread=per, vec=per,
                       groups=max(1, min(g.groups, _ceil(max(outer * inner, 1), g.threads * per))))
    if template == "columns":
        rows = max(1, min(g.rows, MAX_THREADS // SIMD))
        blocks = max(1, _ceil(outer, SIMD))
        split = column_split(blocks, inner, rows, g.split) if splittable and g.split > 1 and inner > 0 else 1
        return replace(g, rows=rows, threads=SIMD * rows, groups=blocks * split, per_thread=0, vec=1, split=split)
    g = replace(g, vec=ROW_VECTOR if vectorisable and g.vec > 1 and g.lanes > 1 else 1)
    if splittable and (g.split > 1 or "split" in fields):
        split = grid_split(outer, inner, g.vec, g.split) if g.split > 1 else 1
        g = replace(g, split=split, rows=1, per_thread=0,
                    threads=max(SIMD, min(MAX_THREADS, g.threads // SIMD * SIMD)))
        if split > 1:
            return replace(g, groups=max(1, outer) * split)
        g = replace(g, groups=max(1, outer))
    if g.rows > 1:
        rows = min(g.rows, MAX_THREADS // g.lanes)
        g = replace(g, rows=rows, threads=g.lanes * rows, groups=max(1, _ceil(outer, rows)))
    else:
        g = replace(g, threads=max(SIMD, min(MAX_THREADS, g.threads // SIMD * SIMD)), groups=max(1, outer))
    if g.per_thread and ("per_thread" not in fields or g.per_thread % g.vec):   # the row over the forced threads
        per = _row_share(inner, g.row_threads, g.vec)
        g = replace(g, per_thread=per if per <= (SIMD_MAX_PER_THREAD if g.rows > 1 else ROW_MAX_PER_THREAD) else 0)
    if g.per_thread and g.per_thread * g.row_threads < inner:
        g = replace(g, per_thread=0)           # the row does not fit: no register cache
    return g


def _forced_lanes(n: int, pointwise: bool) -> int:
    """A forced row's lanes: 1 or a simdgroup, or 2..16 (a power of two) where nothing combines."""
    if n == 1 or (pointwise and n in (2, 4, 8, 16)):
        return n
    return SIMD


@dataclass(frozen=True)
class Rendered:
    """What `render` decided: the source, which template, the launch geometry (GPU: grid in threads
    and threadgroup; C: whether the loop forks threads) and the helpers the source calls."""
    source: str
    template: str                                 # "linear", "rows" or "columns"
    helpers: frozenset[str]
    kernel: Kernel                                # as rendered (strided pointwise: split into rows)
    grid: tuple[int, int, int] = (1, 1, 1)
    threadgroup: tuple[int, int, int] = (1, 1, 1)
    parallel: bool = False
    geometry: Geometry | None = None              # GPU: what the grid and threadgroup came from
    # GPU grid combine (geometry.split > 1): the extra outputs the kernel writes, as (name, dtype,
    # elements): each group's partials and the ticket counter; zero-initialised, read by no one else
    scratch: tuple = ()


def _literal(value, dt: DType) -> str:
    if dt.is_floating_point:
        v = float(value)
        if v != v:
            return "NAN"
        if v in (float("inf"), float("-inf")):
            return "INFINITY" if v > 0 else "-INFINITY"
        return repr(v) + ("f" if dt == D.float32 else "")
    if dt.is_bool:
        return "1" if value else "0"
    return f"{int(value)}LL" if abs(int(value)) < 2**63 else f"{int(value)}ULL"


@dataclass
class _Stage:
    scope: str
    lines: list[str] = field(default_factory=list)
    init: list[str] = field(default_factory=list)
    final: list[str] = field(default_factory=list)
    clauses: list[str] = field(default_factory=list)
    simd: bool = True
    reduces: list = field(default_factory=list)   # the stage's Reduces (Metal combines them across threads)
    accs: list = field(default_factory=list)      # (type, name, initial value) of every accumulator
    vloads: list = field(default_factory=list)    # GPU rows, vector steps: the step's loads into lt_l*
    vdecls: list = field(default_factory=list)    # ... the arrays its stores fill (lt_s*)
    vstores: list = field(default_factory=list)   # ... and their stores after the step
    vmoved: set = field(default_factory=set)      # the lt_l*/lt_s* arrays those lines move


class _Renderer:
    def __init__(self, kernel: Kernel, dialect: Dialect):
        self.k, self.d = kernel, dialect
        self.types: dict[str, DType] = {}
        self.helpers: set[str] = set()
        self.idx = "int32_t" if kernel.index_type == "i32" else "int64_t"
        self.geo: Geometry | None = None
        self.cached_loads: dict[int, int] = {}   # GPU rows: access -> register array kept across passes
        self.filled: dict[int, int] = {}         # access -> id of the stage that loads it from memory
        self.vector: dict[int, tuple[int, str]] = {}   # GPU linear: access -> (bytes, word type) of its vector load
        self.in_vector = False                   # rendering the vector body (lanes lt_q of a vector)
        self.row_vector: dict[int, str] = {}     # GPU rows: access -> its word type ("": moved element by element)
        self.out: _Stage | None = None           # the stage being rendered
        self.stage_id = 0
        self.scratch: tuple = ()                 # GPU grid combine: its extra outputs
        self.part = False                        # C: the part function of an epilogue (render_part)

    # ---- index expressions
    def index(self, a: Access, scope: str) -> str:
        terms = [str(a.offset)] if a.offset else []
        if scope != "kernel":
            terms += [f"o{d} * {s}" if s != 1 else f"o{d}" for d, s in enumerate(a.outer) if s]
        if scope == "elem":
            terms += [f"i{d} * {s}" if s != 1 else f"i{d}" for d, s in enumerate(a.inner) if s]
        return " + ".join(terms) or "0"

    def linear_index(self, a: Access) -> str:
        if not any(a.outer + a.inner):
            return str(a.offset)
        return f"i + {a.offset}" if a.offset else "i"

    def at(self, a: Access, scope: str) -> str:
        if a.clamp:                             # (never linear: lower.py makes such a kernel strided)
            hi, x = self.k.args[a.arg].numel - 1, self.index(a, scope)
            return f"(({x}) < 0 ? 0 : ({x}) > {hi} ? {hi} : ({x}))"
        return self.linear_index(a) if self.linear else self.index(a, scope)

    # ---- statements
    def op_line(self, op, scope: str) -> str:
        d = self.d
        T = d.register_type(op.dtype)
        self.types[op.var] = op.dtype
        slot_index = "lt_j" if self.d.gpu else "i"     # GPU: the thread's j-th element of the row
        if op.op == "row_put":
            return f"lt_row{op.attrs['slot']}[{slot_index}] = {op.args[0]};"
        if op.op == "row_get":
            return f"const {T} {op.var} = lt_row{op.attrs['slot']}[{slot_index}];"
        if op.op == "load":
            acc = op.attrs["access"]
            a = self.k.accesses[acc]
            st = op.attrs["storage"]
            fmt = d.load.get(st.name, d.load["*"])
            if scope == "elem" and acc in self.cached_loads:
                slot = self.cached_loads[acc]
                if self.filled.setdefault(acc, self.stage_id) != self.stage_id:
                    return f"const {T} {op.var} = lt_c{slot}[lt_j];"
                e = (fmt.format(ptr=f"lt_l{acc}", idx="lt_q") if self.vector_step(acc, scope, "load")
                     else fmt.format(ptr=self.k.args[a.arg].name, idx=self.at(a, scope)))
                return self.note(f"const {T} {op.var} = {e}; lt_c{slot}[lt_j] = {op.var};")
            if "guard" in op.attrs:              # (lower.py load: read only where the guard holds)
                e = f"({op.attrs['guard']} ? {fmt.format(ptr=self.k.args[a.arg].name, idx=self.at(a, scope))} : 0)"
            elif self.in_vector and acc in self.vector or self.vector_step(acc, scope, "load"):
                e = fmt.format(ptr=f"lt_l{acc}", idx="lt_q")
            else:
                e = fmt.format(ptr=self.k.args[a.arg].name, idx=self.at(a, scope))
        elif op.op == "index":
            e = f"({T})({self.at(self.k.accesses[op.attrs['access']], scope)})"
        elif op.op == "const":
            e = _literal(op.attrs["value"], op.dtype)
        elif op.op == "cast":
            fmt = d.cast.get(op.attrs["to"].name, d.cast["*"])
            e = fmt.format(op.args[0], T=T)
        else:
            lookup = op.dtype if op.op == "where" else self.types[op.args[0]]
            e = d.expr(op.op, lookup, list(op.args))
        return self.note(f"const {T} {op.var} = {e};")

    def note(self, line: str) -> str:
        """Record the helpers a statement calls (they go into the kernel's header)."""
        self.helpers.update(_HELPER.findall(line))
        return line

    def store_line(self, st, scope: str) -> str:
        a = self.k.accesses[st.access]
        fmt = self.d.store.get(st.dtype.name, self.d.store["*"])
        if self.in_vector and st.access in self.vector or self.vector_step(st.access, scope, "store"):
            return self.note(f"lt_s{st.access}[lt_q] = {fmt.format(st.value)};")
        return self.note(f"{self.k.args[a.arg].name}[{self.at(a, scope)}] = {fmt.format(st.value)};")

    def reduce(self, r: Reduce, out: _Stage) -> None:
        red = REDUCTIONS[r.op]
        out.reduces.append(r)
        self.types[r.acc] = r.dtype
        if r.index:
            self.types[r.index] = D.int64
        T = self.d.register_type(r.dtype)
        ident = red.identity(r.value_dtype if r.index else r.dtype)
        out.init.append(f"{T} {r.acc} = {ident};")
        out.accs.append((T, r.acc, ident))
        v, a = r.value, r.acc
        is_float = r.dtype.is_floating_point
        if red.compare:
            nan = f" || ({v} != {v} && {a} == {a})" if is_float else ""
            out.init.append(f"int64_t {r.index} = 0;")
            out.lines.append(f"if ({v} {red.compare} {a}{nan}) {{ {a} = {v}; {r.index} = i; }}")
            out.simd = False
            return
        out.lines.append(red.update.format(a=a, v=v))
        out.clauses.append(f"reduction({red.omp}:{a})")
        if red.nan and is_float:
            out.init.append(f"int {a}_nan = 0;")
            out.accs.append(("int", f"{a}_nan", "0"))
            out.lines.append(f"{a}_nan |= {v} != {v};")
            out.clauses.append(f"reduction(|:{a}_nan)")
            out.final.append(f"if ({a}_nan) {a} = NAN;")

    def vector_step(self, acc: int, scope: str, kind: str) -> bool:
        """GPU rows with vector steps: whether access `acc` moves as one step's ROW_VECTOR adjacent
        elements (lt_l*/lt_s* arrays, moved before/after the step); records the move once per stage."""
        if not (self.geo and self.geo.vec > 1 and scope == "elem" and acc in self.row_vector):
            return False
        a, d, n = self.k.accesses[acc], self.d, self.geo.vec
        name = f"lt_l{acc}" if kind == "load" else f"lt_s{acc}"
        if name in self.out.vmoved:
            return True
        self.out.vmoved.add(name)
        T = d.storage_type(self.k.args[a.arg].dtype)
        row = self.index(a, "row")
        ptr, base = self.k.args[a.arg].name, "lt_b" if row == "0" else row + " + lt_b"
        word = self.row_vector[acc]
        nbytes = self.k.args[a.arg].dtype.itemsize * n
        decl = d.extra.get("vec_decl", "{T} {v}[{n}];").format(T=T, v=name, n=n, bytes=nbytes)
        fields = dict(ptr=ptr, idx=base, v=name, W=word, n=n)
        each = d.extra[f"vec_{kind}_each"].format(**fields)
        move = (f"if (lt_aligned) {{ {d.extra['vec_' + kind].format(**fields)} }} else {{ {each} }}"
                if word else each)
        if kind == "load":
            self.out.vloads.append(f"{decl} {move}")
        else:
            self.out.vdecls.append(decl)
            self.out.vstores.append(move)
        return True

    def stage(self, s: Stage) -> _Stage:
        out = _Stage(s.scope)
        self.out = out
        self.stage_id += 1
        for op in s.ops:
            line = self.op_line(op, s.scope)
            # GPU rows: a load the whole row shares (a broadcast operand, W2's scale[o]) is read
            # once per row, before the loop over the row
            hoist = (self.d.gpu and not self.linear and s.scope == "elem" and op.op == "load"
                     and self.k.accesses[op.attrs["access"]].row_only and op.attrs["access"] not in self.cached_loads)
            (out.init if hoist else out.lines).append(line)
        for r in s.reduces:
            self.reduce(r, out)
        for st in s.stores:
            out.lines.append(self.store_line(st, s.scope))
        return out

    def render(self) -> Rendered:
        k = self.k
        self.linear = k.pattern == "pointwise" and k.contiguous and not self.part
        kernel = k if self.linear or self.part or k.pattern != "pointwise" else _split_rows(k, self.d.gpu)
        self.k = kernel
        if self.d.gpu:
            if not self.linear and not self._columns_kernel():
                self.row_vector = self.row_vector_accesses(kernel)
            self.geo = self.geometry(kernel, "columns" if self._columns_kernel() else "rows")
            if self.geo.per_thread and not self.linear:
                self.cached_loads = _revisited_loads(kernel)
            if self.linear and self.geo.per_thread > 1:
                self.vector = self.vector_accesses(kernel, self.geo.per_thread)
        stages = [self.stage(s) for s in kernel.stages]
        args = [{"name": a.name, "type": self.d.storage_type(a.dtype),
                 "qual": self.d.in_qualifier if a.role == "in" else ""} for a in kernel.args]
        shape = "linear" if self.linear else "columns" if not self.part and self._columns(stages) else "rows"
        rule = self.d.extra.get("parallel")          # (GPU dialects have none: their grid is the parallelism)
        parallel = rule is not None and rule.forks(kernel) and not self.part
        ctx = dict(name=kernel.name, args=args, idx=self.idx, kernel=kernel, stages=stages,
                   kernel_stage=stages[0], row_stages=stages[1:], outer=kernel.outer, inner=kernel.inner,
                   numel=kernel.numel, outer_numel=kernel.outer_numel, inner_numel=kernel.inner_numel,
                   parallel=parallel, chunk=16384, reductions=REDUCTIONS,
                   row_cache=[self.d.register_type(dt) for dt in kernel.row_cache], restrict=self.d.restrict,
                   extra=self.d.extra, geo=self.geo, part=self.part)
        if self.d.gpu:
            ctx.update(self.gpu_context(kernel, stages))
        source = environment().get_template(self.d.templates[shape]).render(**ctx)
        self.helpers.update(self.d.template_helpers.get(shape, ()))
        if self.d.gpu and shape == "rows" and self.geo.rows > 1:
            self.helpers.discard("lt_shuffle_down")
            if self.geo.lanes == SIMD:           # simdgroup rows combine by butterfly (fewer lanes: no combine)
                self.helpers.add("lt_shuffle_xor")
        grid, tg = (1, 1, 1), (1, 1, 1)
        if self.d.gpu:
            empty = kernel.numel == 0 if shape == "linear" else kernel.outer_numel == 0
            grid = (0 if empty else self.geo.groups * self.geo.threads, 1, 1)
            tg = (self.geo.threads, 1, 1)
        return Rendered(source, shape, frozenset(self.helpers), kernel, grid, tg, parallel, self.geo, self.scratch)

    # ---- GPU geometry and what depends on it
    def geometry(self, k: Kernel, template: str) -> Geometry:
        if self.linear:
            return forced_geometry(linear_geometry(k.numel), "linear", 1, k.numel)
        if template == "columns":
            per_thread = sum(r.dtype.itemsize + (8 if r.index else 0) + (4 if REDUCTIONS[r.op].nan else 0)
                             for r in k.stages[2].reduces)
            splittable = "grid_ticket" in self.d.extra
            return forced_geometry(columns_geometry(k.outer_numel, k.inner_numel, per_thread, splittable), "columns",
                                   k.outer_numel, k.inner_numel, splittable=splittable)
        revisits = sum(1 for s in k.stages if s.scope == "elem" and not s.empty) > 1 or bool(k.row_cache)
        vec = ROW_VECTOR if self.row_vector else 1
        splittable = self.splittable(k, revisits)
        pointwise = not any(s.reduces for s in k.stages)
        one_output = sum(a.role == "out" for a in k.args) == 1
        if splittable and k.inner_numel >= GRID_MIN:
            split = grid_split(k.outer_numel, k.inner_numel, vec)
            g = Geometry(GRID_THREADS, k.outer_numel * split, 1, 0, vec, split)
        else:
            g = rows_geometry(k.outer_numel, k.inner_numel, revisits, vec, pointwise and one_output)
        return forced_geometry(g, "rows", k.outer_numel, k.inner_numel, bool(self.row_vector), splittable, pointwise)

    def splittable(self, k: Kernel, revisits: bool) -> bool:
        """Whether a rows kernel may split its rows over groups (a grid combine): at most
        GRID_MAX_ROWS rows, one pass over each that reduces, and a dialect that spells the
        combine's fence and ticket."""
        elem = [s for s in k.stages if s.scope == "elem" and not s.empty]
        return ("grid_ticket" in self.d.extra and 1 <= k.outer_numel <= GRID_MAX_ROWS and not revisits and len(elem) == 1
                and bool(elem[0].reduces) and k.inner_numel > 0)

    def row_vector_accesses(self, k: Kernel) -> dict[int, str]:
        """The operands of a rows kernel that move ROW_VECTOR adjacent elements per step: contiguous
        along a one-dim row whose length is a multiple of ROW_VECTOR, each row's first element at a
        multiple of it (so the run-time alignment check of the buffer is all a word move needs).
        Value: the dialect's word for the step's bytes ("": element by element).  None such (or a
        row of another length): {}, and the kernel keeps scalar steps."""
        n = ROW_VECTOR
        if "vec_load_each" not in self.d.extra or len(k.inner) != 1 or k.inner_numel % n or not k.inner_numel:
            return {}
        words = self.d.extra.get("vec_words", {})
        out = {}
        for i, a in enumerate(k.accesses):
            if a.arg is None or a.clamp or a.inner != (1,) or a.offset % n or any(s % n for s in a.outer):
                continue
            out[i] = words.get(str(k.args[a.arg].dtype.itemsize * n), "")
        return out

    def vector_accesses(self, k: Kernel, n: int) -> dict[int, tuple[int, str]]:
        """The accesses of a linear kernel loaded and stored as one n-element word (dialects with
        vector words: CUDA): linear ones whose offset keeps the word aligned."""
        words = self.d.extra.get("vec_words")
        if not words:
            return {}
        out = {}
        for i, a in enumerate(k.accesses):
            if a.arg is None or a.uniform or a.offset % n:
                continue
            nbytes = k.args[a.arg].dtype.itemsize * n
            if str(nbytes) in words:
                out[i] = (nbytes, words[str(nbytes)])
        return out

    def gpu_context(self, k: Kernel, stages: list[_Stage]) -> dict:
        g, d = self.geo, self.d
        ctx: dict = {"unroll": d.extra.get("unroll", ""), "unroll_some": d.extra.get("unroll_some", "")}
        if self.linear:
            n = g.per_thread
            stride = g.groups * g.threads * n
            ctx["lidx"] = self.idx if k.numel + stride <= I32_LIMIT else "int64_t"
            ctx["stride"] = stride
            loads, decls, stores, aligned = [], [], [], []
            body = k.stages[2] if len(k.stages) > 2 else k.stages[-1]
            stored = {st.access for st in body.stores}
            for acc, (nbytes, word) in self.vector.items():
                a = k.accesses[acc]
                T = d.storage_type(k.args[a.arg].dtype)
                ptr = f"{k.args[a.arg].name} + {a.offset}" if a.offset else k.args[a.arg].name
                aligned.append(d.extra["vec_aligned"].format(ptr=ptr, bytes=nbytes))
                if acc in stored:
                    decls.append(d.extra["vec_decl"].format(T=T, v=f"lt_s{acc}", n=n, bytes=nbytes))
                    stores.append(d.extra["vec_store"].format(ptr=ptr, idx="lt_base", v=f"lt_s{acc}", W=word))
                else:
                    loads.append(d.extra["vec_decl"].format(T=T, v=f"lt_l{acc}", n=n, bytes=nbytes) + " "
                                 + d.extra["vec_load"].format(ptr=ptr, idx="lt_base", v=f"lt_l{acc}", W=word))
            self.in_vector = True
            vbody = self.stage(body) if n > 1 else None
            self.in_vector = False
            ctx.update(vec_loads=loads, vec_decls=decls, vec_stores=stores, vbody=vbody,
                       aligned=" && ".join(aligned))
            return ctx
        ctx["row_threads"] = g.row_threads
        ctx["grid"] = self.grid_combine(k, stages) if g.split > 1 else None
        words = sorted({self.k.args[self.k.accesses[acc].arg].name for acc, w in self.row_vector.items() if w})
        ctx["row_aligned"] = " && ".join(
            d.extra["vec_aligned"].format(ptr=name, bytes=_arg_bytes(k, name) * g.vec) for name in words
        ) if g.vec > 1 else ""
        ctx["cached"] = [(slot, d.register_type(_load_dtype(k, acc)))
                         for acc, slot in sorted(self.cached_loads.items(), key=lambda t: t[1])]
        return ctx

    def grid_combine(self, k: Kernel, stages: list[_Stage]) -> dict:
        """The template's view of the grid combine: each reduce's partial buffers (value, NaN
        flag, index) as scratch outputs, and how the last group loads and folds them."""
        d, g = self.d, self.geo
        reduces, scratch = [], []
        for n, r in enumerate(r for st in stages for r in st.reduces):
            red = REDUCTIONS[r.op]
            dt = D.int32 if r.dtype.is_bool else D.float32 if r.dtype.is_floating_point else r.dtype
            T = d.register_type(dt)
            parts = {"value": (f"lt_p{n}", dt)}
            if red.nan and r.dtype.is_floating_point and not r.index:
                parts["nan"] = (f"lt_p{n}n", D.int32)
            if r.index:
                parts["index"] = (f"lt_p{n}i", D.int64)
            scratch += [(name, dt_, g.split * k.outer_numel) for name, dt_ in parts.values()]
            load = {key: d.extra["grid_load"].format(T=d.register_type(dt_), ptr=name, idx="lt_row_p + lt_p")
                    for key, (name, dt_) in parts.items()}
            ident = red.identity(r.value_dtype if r.index else r.dtype)
            names = {"nan": None, "index": None, **{k_: v[0] for k_, v in parts.items()}}
            reduces.append(dict(r=r, parts=names, load=load, T=T,
                                identity=ident, fold=red.fold.format(r.acc, "lt_b") if not r.index else ""))
        columns = self._columns_kernel()
        tickets = _ceil(k.outer_numel, SIMD) if columns else k.outer_numel
        scratch.append(("lt_done", D.int32, max(tickets, GRID_TICKETS_MIN)))
        self.scratch = tuple(scratch)
        return dict(reduces=reduces, slice=_ceil(k.inner_numel, g.split) if columns else g.slice(k.inner_numel),
                    split=g.split,
                    fence=d.extra["grid_fence"],
                    ticket=d.extra["grid_ticket"].format("lt_done + lt_blk" if columns else "lt_done + o"))

    def _columns_kernel(self) -> bool:
        """_columns before rendering (GPU geometry depends on it): the simd test only matters to C."""
        return self._columns(None)

    def _columns(self, stages: list[_Stage] | None) -> bool:
        """A reduction over a non-innermost dim (sum(x, 0)) whose rows are columns in memory: the
        "columns" template walks the reduced dim outermost and accumulates a block of outputs, so
        it reads memory contiguously; in C also a reduction over several dims of at most
        C_WINDOW_COLUMNS elements (a pooling's window), whatever its layout.  Only single-pass
        reductions (C: without argmax), and only for dialects that have the template.  In C also a
        row kernel of one pass (a layer norm's weight gradient, its products stored beside their
        column sums): the element stores run in the pass, once each (a GPU columns kernel's idle
        lanes repeat their last output's work)."""
        k = self.k
        patterns = ("reduce",) if self.d.gpu else ("reduce", "row")
        if ("columns" not in self.d.templates or k.pattern not in patterns or len(k.stages) != 4 or not k.outer
                or not (self.d.gpu or stages[2].simd) or k.row_cache):
            return False
        loads = [k.accesses[op.attrs["access"]] for op in k.stages[2].ops if op.op == "load"]
        walked = [a for a in loads if any(a.inner)]
        if not self.d.gpu and len(k.inner) > 1 and 0 < k.inner_numel <= C_WINDOW_COLUMNS and walked:
            return True
        return bool(walked) and all(a.inner[-1] != 1 for a in walked) and any(a.outer[-1] == 1 for a in walked)


def _revisited_loads(k: Kernel) -> dict[int, int]:
    """Accesses over the row that more than one pass loads: each gets a register array (slot),
    filled by the first pass, read by the later ones."""
    seen: dict[int, set[int]] = {}
    for n, s in enumerate(k.stages):
        if s.scope != "elem":
            continue
        for op in s.ops:
            if op.op == "load" and not k.accesses[op.attrs["access"]].row_only:
                seen.setdefault(op.attrs["access"], set()).add(n)
    again = [acc for acc, where in seen.items() if len(where) > 1]
    return {acc: slot for slot, acc in enumerate(again)}


def _arg_bytes(k: Kernel, name: str) -> int:
    return next(a.dtype.itemsize for a in k.args if a.name == name)


def _load_dtype(k: Kernel, acc: int) -> DType:
    """The register dtype of what access `acc` loads."""
    for s in k.stages:
        for op in s.ops:
            if op.op == "load" and op.attrs["access"] == acc:
                return op.dtype
    raise KeyError(acc)


def _split_rows(k: Kernel, gpu: bool) -> Kernel:
    """A strided pointwise kernel as rows: every dim but the last is outer, the last is inner.  On
    a GPU a last dim shorter than a simdgroup takes (a factor of) the dims before it into the row,
    up to SIMD_ROW elements and never past ROW_MERGE_MAX (few long rows would leave SMs idle):
    rows of 2 or 4 elements (col2im's (.., Q, stride) dims, a transposing copy's last dim) left
    28-30 of every 32 lanes idle, 0.9 ms for 4.7M elements on an H200."""
    if not k.inner:
        return replace(k, outer=(), inner=())
    if gpu and k.inner[-1] < SIMD:
        rows = _rows_of(k, _row_length(k.inner))
        if rows is not None:
            return rows
    accesses = [replace(a, outer=a.inner[:-1], inner=a.inner[-1:]) for a in k.accesses]
    return replace(k, outer=k.inner[:-1], inner=k.inner[-1:], accesses=accesses)


def _row_length(sizes: tuple[int, ...]) -> int:
    """The row `_split_rows` takes from dims `sizes`: trailing dims while the row is shorter than
    SIMD_ROW, the last of them cut to its largest factor that keeps it within ROW_MERGE_MAX."""
    tail = 1
    for size in reversed(sizes):
        if tail >= SIMD_ROW:
            break
        if tail * size <= ROW_MERGE_MAX:
            tail *= size
            continue
        tail *= next(f for f in range(ROW_MERGE_MAX // tail, 0, -1) if size % f == 0)
        break
    return tail


def render_part(kernel: Kernel, n: int, arg: int) -> Rendered | None:
    """The C part function of a kernel that runs as a matrix product's epilogue (runtime/library.py
    `epilogues`): `void name(char **args, int64_t o0, int64_t o1, int64_t i0, int64_t i1)` computes
    rows o0..o1 and, of a pointwise kernel, columns i0..i1 of the domain read as rows of `n`
    elements (the product's output, which argument `arg` reads element for element), on the
    calling thread.  A row or reduce kernel computes whole rows: its rows must be the product's.
    None where the domain does not split into rows of `n` or `arg` is read any other way."""
    k = _rows_of(kernel, n)
    if k is None or any(a.arg == arg and (a.offset or a.outer + a.inner != contiguous_strides(k.outer + k.inner))
                        for a in k.accesses):
        return None
    r = _Renderer(k, get_dialect("c"))
    r.part = True
    return r.render()


# rows a call of part_caller's loop computes: about the elements of the linear template's chunk
PART_CHUNK = 16384


def part_caller(name: str, part: str, rows: int, n: int, parallel: bool) -> str:
    """C source of kernel `name` computed by calls of its part function `part` (render_part) over
    chunks of its `rows` rows of `n` (forked where the kernel forks): a kernel with a part function
    is compiled once, not twice (`c_part_call.c.j2`)."""
    return environment().get_template("c_part_call.c.j2").render(
        name=name, part=part, rows=rows, n=n, parallel=parallel, step=max(1, PART_CHUNK // max(n, 1)))


def _rows_of(k: Kernel, n: int) -> Kernel | None:
    """Kernel k with `inner` the last `n` elements of its domain and `outer` the rest, or None
    (merged dims that do not split there; a row kernel whose rows are not `n` long)."""
    if k.pattern != "pointwise":
        return k if k.inner_numel == n and n > 0 else None
    sizes, tail, j = k.inner, 1, len(k.inner)        # (a pointwise kernel's merged dims: all inner)
    while j > 0 and tail < n and tail * sizes[j - 1] <= n:
        tail *= sizes[j - 1]
        j -= 1
    if tail == n:                                    # whole merged dims: the last ones are a row
        def cut(x: tuple[int, ...], stride: bool) -> tuple[tuple[int, ...], tuple[int, ...]]:
            return x[:j], x[j:]
    else:                                            # merged dim j - 1 cut in two: (size / f, f)
        f = n // tail if n % tail == 0 else 0
        if j == 0 or not f or sizes[j - 1] % f:
            return None

        def cut(x: tuple[int, ...], stride: bool) -> tuple[tuple[int, ...], tuple[int, ...]]:
            high = x[j - 1] * f if stride else x[j - 1] // f         # (the outer part steps f times further)
            return x[:j - 1] + (high,), ((x[j - 1] if stride else f),) + x[j:]
    outer, inner = cut(sizes, False)
    accesses = [replace(a, outer=cut(a.inner, True)[0], inner=cut(a.inner, True)[1]) for a in k.accesses]
    return replace(k, outer=outer, inner=inner, accesses=accesses)


def render(kernel: Kernel, dialect: str | Dialect = "c") -> Rendered:
    """`kernel` rendered in `dialect` (a name or a Dialect table), with what was decided."""
    d = dialect if isinstance(dialect, Dialect) else get_dialect(dialect)
    return _Renderer(kernel, d).render()

"""Rendering: a kernel_ir.Kernel + a dialect table -> kernel source, through shaders/ templates.

render.py turns each Op, Reduce and Store into statements using the dialect's expression
tables and index arithmetic from the Accesses; the templates only arrange them into loops (or
threads).  Templates: "linear" for pointwise kernels whose accesses are all linear (one flat
index), "rows" for everything else (outer index x inner loop; pointwise strided kernels iterate
their last dim as the inner loop).
"""
from __future__ import annotations

import functools
import re
from dataclasses import dataclass, field, replace
from pathlib import Path

import jinja2

from ..ir import dtypes as D
from ..ir.dtypes import DType
from .dialect import INT_TYPES, Dialect
from .helpers import HelperLibrary
from .kernel_ir import Access, Kernel, Reduce, Stage
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

# GPU launch geometry: threads per threadgroup of the linear template, most threads of the rows one
LINEAR_THREADGROUP = 256
MAX_ROWS_THREADGROUP = 256


def rows_threadgroup(inner_numel: int) -> int:
    """Threads per row: a multiple of the simd width, about 4 elements per thread, at most 256."""
    tg = 32
    while tg < MAX_ROWS_THREADGROUP and tg * 4 < inner_numel:
        tg *= 2
    return tg


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


class _Renderer:
    def __init__(self, kernel: Kernel, dialect: Dialect):
        self.k, self.d = kernel, dialect
        self.types: dict[str, DType] = {}
        self.helpers: set[str] = set()
        self.idx = "int32_t" if kernel.index_type == "i32" else "int64_t"

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
        return self.linear_index(a) if self.linear else self.index(a, scope)

    # ---- statements
    def op_line(self, op, scope: str) -> str:
        d = self.d
        T = d.register_type(op.dtype)
        self.types[op.var] = op.dtype
        if op.op == "row_put":
            return f"lt_row{op.attrs['slot']}[i] = {op.args[0]};"
        if op.op == "row_get":
            return f"const {T} {op.var} = lt_row{op.attrs['slot']}[i];"
        if op.op == "load":
            a = self.k.accesses[op.attrs["access"]]
            st = op.attrs["storage"]
            fmt = d.load.get(st.name, d.load["*"])
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

    def stage(self, s: Stage) -> _Stage:
        out = _Stage(s.scope)
        for op in s.ops:
            out.lines.append(self.op_line(op, s.scope))
        for r in s.reduces:
            self.reduce(r, out)
        for st in s.stores:
            out.lines.append(self.store_line(st, s.scope))
        return out

    def render(self) -> Rendered:
        k = self.k
        self.linear = k.pattern == "pointwise" and k.contiguous
        kernel = k if self.linear or k.pattern != "pointwise" else _split_last(k)
        self.k = kernel
        stages = [self.stage(s) for s in kernel.stages]
        args = [{"name": a.name, "type": self.d.storage_type(a.dtype),
                 "qual": self.d.in_qualifier if a.role == "in" else ""} for a in kernel.args]
        shape = "linear" if self.linear else "columns" if self._columns(stages) else "rows"
        parallel = not self.d.gpu and kernel.numel >= int(self.d.extra.get("parallel_min", "0"))
        ctx = dict(name=kernel.name, args=args, idx=self.idx, kernel=kernel, stages=stages,
                   kernel_stage=stages[0], row_stages=stages[1:], outer=kernel.outer, inner=kernel.inner,
                   numel=kernel.numel, outer_numel=kernel.outer_numel, inner_numel=kernel.inner_numel,
                   parallel=parallel, chunk=16384, reductions=REDUCTIONS,
                   row_cache=[self.d.register_type(dt) for dt in kernel.row_cache], restrict=self.d.restrict,
                   extra=self.d.extra)
        source = environment().get_template(self.d.templates[shape]).render(**ctx)
        self.helpers.update(self.d.template_helpers.get(shape, ()))
        grid, tg = (1, 1, 1), (1, 1, 1)
        if self.d.gpu and shape == "linear":
            grid, tg = (kernel.numel, 1, 1), (LINEAR_THREADGROUP, 1, 1)
        elif self.d.gpu:
            width = rows_threadgroup(kernel.inner_numel)
            grid, tg = (kernel.outer_numel * width, 1, 1), (width, 1, 1)
        return Rendered(source, shape, frozenset(self.helpers), kernel, grid, tg, parallel)

    def _columns(self, stages: list[_Stage]) -> bool:
        """A reduction over a non-innermost dim (sum(x, 0)) whose rows are columns in memory: the
        "columns" template walks the reduced dim outermost and accumulates a block of outputs, so
        it reads memory contiguously.  Only single-pass reductions without argmax, and only for
        dialects that have the template."""
        k = self.k
        if ("columns" not in self.d.templates or k.pattern != "reduce" or len(stages) != 4
                or not k.outer or not stages[2].simd or k.row_cache):
            return False
        loads = [k.accesses[op.attrs["access"]] for op in k.stages[2].ops if op.op == "load"]
        walked = [a for a in loads if any(a.inner)]
        return bool(walked) and all(a.inner[-1] != 1 for a in walked) and any(a.outer[-1] == 1 for a in walked)


def _split_last(k: Kernel) -> Kernel:
    """A strided pointwise kernel as rows: every dim but the last is outer, the last is inner."""
    if not k.inner:
        return replace(k, outer=(), inner=())
    accesses = [replace(a, outer=a.inner[:-1], inner=a.inner[-1:]) for a in k.accesses]
    return replace(k, outer=k.inner[:-1], inner=k.inner[-1:], accesses=accesses)


def render(kernel: Kernel, dialect: str | Dialect = "c") -> Rendered:
    """`kernel` rendered in `dialect` (a name or a Dialect table), with what was decided."""
    d = dialect if isinstance(dialect, Dialect) else get_dialect(dialect)
    return _Renderer(kernel, d).render()

"""The `cpu` backend: generated C kernels compiled by the system compiler, run through ctypes.

`prepare(plan)` lowers and renders every kernel launch of the plan, compiles them together into
one shared library (one compiler run per program, or one per idle core for a program of several
kernels: `program_units`; cached on disk by runtime/compiler.py), and
hands the plan to the backend-neutral executor.  A program whose plan was compiled before (in any
process) is found through the plan index by its structure (`plan_structure`) without lowering or
rendering anything (the code generator is not even imported then).  Kernels write straight into the
preallocated numpy buffers (from the buffer pool); matmul runs through numpy (BLAS) into its output
buffer (runtime/library.py);
anything else without a kernel runs on the reference executor (compile_launch returns None).
"""
from __future__ import annotations

import ctypes
import math
import operator
import struct
import weakref
from dataclasses import replace
from typing import Any, Callable, NamedTuple, Sequence

import numpy as np

from ..ir import dtypes as D
from . import compiler, threads
from .backend import Backend, LaunchFn, native_launch
from .buffer_pool import MIN_BYTES, BufferPool
from .executor import PlanExecutor, debug_level, kernel_error
from ..passes.plan import describe_launch

_ptr_arrays: dict[int, type] = {}        # n -> the ctypes type of n pointers (made on first use)
# gcc's time grows faster than linearly with function size: giant fused chains (100k-node
# programs) run on the reference executor instead of stalling the first eval for minutes
MAX_KERNEL_NODES = 2000


class Sources(dict):
    """kernel symbol -> kernel source, plus the helpers those kernels call (for the header),
    `symbols`: launch name -> the symbol of the kernel it runs, and `forks`: whether a kernel's
    loop may fork threads (codegen/cost.py)."""
    helpers: frozenset[str] = frozenset()
    symbols: dict[str, str] = {}
    forks: bool = False


def kernel_sources(plan, dialect: str = "c", epilogues: dict | None = None) -> Sources:
    """The rendered source of every kernel launch this code generator handles, once per distinct
    kernel: launches of the same structure (a model's layers, a long loop's chunks) share one
    compiled function, so they are lowered, rendered and compiled once.  `epilogues` (runtime/
    library.py, the C target only): kernels that may also run inside the product before them get
    a part function too, `<symbol>_part`, named `<launch>.part` in `symbols`."""
    from ..codegen.lower import Unsupported, lower      # (imported on first render: a warm disk
    from ..codegen.render import render                 #  cache needs no code generator)
    out = Sources()
    helpers: set[str] = set()
    symbols: dict[str, str] = {}
    first: dict = {}                                   # launch structure -> its kernel's symbol
    parts: dict[str, str | None] = {}                  # kernel symbol -> its part function's (None: none)
    structures = launch_structures(plan)[1]
    for launch in plan.launches:
        if launch.kind != "kernel" or len(launch.nodes) > MAX_KERNEL_NODES:
            continue
        same = structures.get(launch.name)
        epilogue = (epilogues or {}).get(launch.name) if dialect == "c" else None
        if same is not None and same in first:
            if first[same] is not None:
                symbols[launch.name] = first[same]
                if epilogue is not None:
                    _add_part(out, symbols, parts, launch, first[same], epilogue,
                              lambda: lower(launch, first[same], row_cache=True))
            continue
        symbol = _symbol(launch.name)
        if same is not None:
            first[same] = None
        try:
            kernel = lower(launch, symbol, row_cache=dialect == "c")
            r = render(kernel, dialect)
        except Unsupported:
            continue
        if same is not None:
            first[same] = symbol
        out[symbol] = r.source
        symbols[launch.name] = symbol
        helpers |= r.helpers
        out.forks = out.forks or r.parallel
        if epilogue is not None:
            _add_part(out, symbols, parts, launch, symbol, epilogue, lambda: kernel, alone=True)
    out.helpers = frozenset(helpers)
    out.symbols = symbols
    return out


def _add_part(out: Sources, symbols: dict, parts: dict, launch, symbol: str, epilogue, kernel_of,
              alone: bool = False) -> None:
    """The part function of `symbol`'s kernel (codegen/render.py render_part; `kernel_of()` lowers
    it), rendered once per symbol, where it renders.  A kernel that forks gets none after a
    product too small to split: inside the product it would run on one thread.  `alone`: the
    kernel's source is only this launch's so far, and becomes calls of the part function, in the
    same source (one function compiled, not two; one translation unit)."""
    from ..codegen.render import part_caller, render_part
    from ..codegen.targets import get_dialect
    if symbol not in parts:
        kernel, name, parts[symbol] = kernel_of(), symbol + "_part", None
        forks = get_dialect("c").extra["parallel"].forks(kernel)
        if epilogue.split or not forks:
            r = render_part(replace(kernel, name=name), epilogue.n, epilogue.arg)
            if r is not None:
                parts[symbol] = name
                if alone:
                    out[symbol] = r.source + part_caller(symbol, name, kernel.numel // epilogue.n, epilogue.n, forks)
                else:
                    out[name] = r.source
    if parts[symbol] is not None:
        symbols[launch.name + ".part"] = parts[symbol]


def _symbol(name: str) -> str:
    return "lt_" + "".join(c if c.isalnum() else "_" for c in name)


def _name(symbol: str) -> str:
    """The launch name a symbol was made from (launch names are letters, digits and '_')."""
    return symbol[3:]


# Python numbers a kernel reads as ctypes values: floats and bools (an int stays a 0-d int64
# array: np.array refuses one out of int64's range where ctypes would wrap it silently); float32:
# a Python float read in float32 arithmetic (legalize retypes its param; c_float rounds to nearest
# as the kernel's cast did)
_SCALAR_CTYPES = {D.float64: ctypes.c_double, D.float32: ctypes.c_float, D.bool_: ctypes.c_bool}
_CTYPE_SCALARS = frozenset(_SCALAR_CTYPES.values())
_PACK_FORMATS = {ctypes.c_double: "d", ctypes.c_float: "f", ctypes.c_bool: "?"}   # struct's codes
_FORMAT_CTYPES = {code: ct for ct, code in _PACK_FORMATS.items()}


# ---- the executor's calls into native code: runtime/_launch.c, else these (the definition)
_kernel_fns: dict[int, Any] = {}
_KERNEL_T = ctypes.CFUNCTYPE(None, ctypes.c_void_p)
_RUNNER_T = ctypes.CFUNCTYPE(ctypes.c_int64, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int64)


def call_py(fn: int, args: int) -> None:
    """The kernel at address `fn` (`void f(char **)`) with its pointer array at address `args`."""
    kernel = _kernel_fns.get(fn) or _kernel_fns.setdefault(fn, _KERNEL_T(fn))
    kernel(args)


def run_steps_py(runner: int, fns: int, args: int, errs: int, n: int) -> int:
    """The program's runner (shaders/c_runner.c.j2) over n native steps: -1 or the failed one."""
    steps = _kernel_fns.get(runner) or _kernel_fns.setdefault(runner, _RUNNER_T(runner))
    return steps(fns, args, errs, n)


def pack_py(storage: int, code: str, values: Sequence[Any]) -> None:
    """Python numbers as consecutive C values of struct's `code` ("f", "d", "?") from address
    `storage`.  (struct's pack_into writes them in one C loop, a third of ctypes' per-element
    slice assignment; a float beyond float32, which struct refuses, becomes inf through c_float,
    as the kernel's own cast made it.)"""
    array_t, packer = _packers.get((code, len(values))) or _packer(code, len(values))
    arr = array_t.from_address(storage)
    try:
        packer(arr, 0, *values)
    except OverflowError:
        arr[:] = values


_packers: dict[tuple[str, int], tuple[type, Callable]] = {}


def _packer(code: str, n: int) -> tuple[type, Callable]:
    """(ctypes array type, struct pack_into) of n values of `code`, made once: a new ctypes type
    per run cost more than the packing."""
    made = _packers[(code, n)] = (_FORMAT_CTYPES[code] * n, struct.Struct(code * n).pack_into)
    return made


_LAUNCH = native_launch()
call, run_steps, pack = (_LAUNCH.call, _LAUNCH.run_steps, _LAUNCH.pack) if _LAUNCH is not None \
    else (call_py, run_steps_py, pack_py)
# a plan of one native step run whole in C (CpuExecutor._run_one), or None: step by step
run_one = getattr(_LAUNCH, "run_one", None)


def _address(arr: np.ndarray) -> int:
    # An ndarray's data pointer is the field after its object header (numpy's PyArrayObject, whose
    # layout is numpy's C ABI; checked once below): reading it is ~2x cheaper than ctypes' view of
    # the buffer and ~4x than __array_interface__, and every launch takes one address per buffer
    # argument.  ctypes scalars (the host fallback's arguments) have their own address.
    if arr.__class__ is np.ndarray and _DATA_AT:
        return _word(id(arr) + _DATA_AT).value
    if arr.__class__ in _CTYPE_SCALARS:
        return ctypes.addressof(arr)
    return arr.__array_interface__["data"][0]


def _data_field() -> int:
    """Where an ndarray's data pointer lies in the object (right after the object header), or 0
    where a probe finds it elsewhere (every address then goes through __array_interface__)."""
    probe = np.zeros(3, np.int8)[1:]
    at = object.__basicsize__
    return at if _word(id(probe) + at).value == probe.__array_interface__["data"][0] else 0


_word = ctypes.c_void_p.from_address
_DATA_AT = _data_field()


class CpuBackend(Backend):
    name = "cpu"
    max_buffers = 128         # kernels take an array of pointers: C has no argument-table limit
    static_memory = True

    def __init__(self):
        self.pool = BufferPool()
        compiler.prefetch_toolchain()         # a new disk cache: probe while the first program plans

    def empty(self, shape, dtype):
        return self.pool.empty(tuple(shape), dtype.np)

    def fast_scalar(self, dtype):
        """A Python float or bool argument as a ctypes value (5x cheaper than a 0-d array; launches
        take its address, the host fallback reads it through np.asarray); None: the default."""
        ctype = _SCALAR_CTYPES.get(dtype)
        if ctype is None:
            return None
        return lambda value, _dtype: ctype(value)

    def prepare(self, plan):
        sources: dict[str, str] = {}

        # a program with matrix products carries the GEMM helper (runtime/library.py) in its own
        # library: no second compile, and the plan index finds it with the kernels.  (library.py
        # is imported only for such programs: its import, ~5 ms of dataclass creation, was a third
        # of a pointwise program's fixed first-call work: docs/benchmarks.md, "W8")
        products = None
        if any(launch.kind == "library" for launch in plan.launches):
            from . import library as products
        gemm = products is not None and products.native_gemm()
        # kernels that may run inside the product before them (runtime/library.py epilogues)
        epilogues = products.epilogues(plan) if gemm and EPILOGUES else {}

        def make() -> tuple[list[str], tuple[str, ...]]:
            rendered = kernel_sources(plan, epilogues=epilogues)
            sources.update(rendered)
            symbols = dict(getattr(rendered, "symbols", None) or {_name(k): k for k in rendered})
            if gemm:
                rendered["lt_gemm"] = products.gemm_source()
                rendered.helpers = rendered.helpers | {"lt_parallel"}     # (the helper reads it too)
                symbols.update(products.GEMM_SYMBOLS)
            if rendered:                              # (a program with native steps: the runner too)
                rendered["lt_run_steps"] = _template("c_runner.c.j2")
                symbols["run_steps"] = "lt_run_steps"
                symbols["thread_clocks"] = "lt_thread_clocks"
            # a marker the plan index keeps with the symbols: this program has steps that may fork,
            # so each run decides its threads (CpuExecutor.run); others skip that
            if gemm or getattr(rendered, "forks", True):
                symbols["forks"] = "lt_parallel"
            return program_units(rendered), tuple(f"{n}={k}" for n, k in symbols.items())

        structure = plan_structure(plan, gemm, epilogues) if PLAN_INDEX and debug_level() < 2 else None
        try:
            libs, kernels = _load_program(structure, make)
        except compiler.OpenMPUnavailable:      # (the first compile found no OpenMP: once more without)
            libs, kernels = _load_program(structure, make)
        functions = _functions(libs, kernels)
        threads.watch_team(functions.get("thread_clocks"))

        def compile_launch(launch, plan) -> LaunchFn | None:
            if launch.kind == "library":
                return products.host_gemm(launch, functions)     # the BLAS, on the kernels' threads
            if launch.kind != "kernel" or launch.name not in functions:
                return None
            return _kernel_launch(functions[launch.name], launch)
        parts = {name[:-5]: (fn, epilogues[name[:-5]].rows) for name, fn in functions.items() if name.endswith(".part")}
        forking = [ctypes.c_int.in_dll(lib, "lt_parallel") for lib in libs] if "forks" in functions else []
        return CpuExecutor(self, plan, compile_launch, sources, functions.get("run_steps"), forking, parts,
                           functions.get("skip_step"))


def _template(name: str) -> str:
    from ..codegen.render import environment         # (only when a program is rendered)
    return environment().get_template(name).render()


# the plan index (runtime/compiler.py: load_indexed); off, every prepare lowers and renders
PLAN_INDEX = True
# kernels run inside the product before them where they can (runtime/library.py epilogues); off,
# every kernel is a step of its own (tests compare the two)
EPILOGUES = True


def _load_program(structure: str | None, make) -> tuple[list, tuple[str, ...]]:
    """(libraries, "launch=symbol" names) of a program: through the plan index when it has a
    structure, else rendered and compiled."""
    if structure is not None:
        return compiler.load_indexed(structure, make)
    units, kernels = make()
    return (compiler.load_all([u for u in units if u]) if kernels else []), kernels


def program_source(sources: dict[str, str]) -> str:
    """One translation unit of a program's kernels, with only the helpers they call ("" if none)."""
    if not sources:
        return ""
    from ..codegen.render import helper_library
    helpers = getattr(sources, "helpers", None)
    library = helper_library("c")
    return library.header(helpers if helpers is not None else library.names) + "\n".join(sources.values())


# A program of at least this many distinct kernels compiles as one translation unit per idle core
# (up to MAX_UNITS), the compiler processes running at once.  The README demo's 7 kernels take
# ~0.22 s of gcc CPU time in one unit, ~0.15 s + 0.08 s split in two; the split pays only where a
# second core is free (on a busy machine two processes were slower than one: docs/benchmarks.md,
# "First calls"), so the load average decides.  Fewer kernels stay one unit.
SPLIT_MIN_KERNELS = 4
MAX_UNITS = 2


def program_units(sources: Sources) -> list[str]:
    """The program's translation units: its kernels dealt to parts of about equal source length
    (largest first), each with the helper header."""
    parts = min(MAX_UNITS, _idle_cores()) if len(sources) >= SPLIT_MIN_KERNELS else 1
    if parts <= 1:
        return [program_source(sources)]
    groups: list[list[str]] = [[] for _ in range(parts)]
    sizes = [0] * parts
    for symbol in sorted(sources, key=lambda k: -len(sources[k])):
        i = sizes.index(min(sizes))
        groups[i].append(symbol)
        sizes[i] += len(sources[symbol])
    units = []
    for group in groups:
        part = Sources({k: sources[k] for k in sources if k in group})      # (in program order)
        part.helpers = sources.helpers
        units.append(program_source(part))
    return units


def _idle_cores() -> int:
    """Cores the load leaves idle (runtime/threads.py; a name of its own so tests can pin it)."""
    return threads.idle_cores()


def _functions(libs, kernels: Sequence[str]) -> dict:
    """launch name -> its compiled kernel, found in whichever of the program's libraries defines
    it; each library's kernels get the process's thread policy (`lt_parallel`)."""
    for lib in libs:
        ctypes.c_int.in_dll(lib, "lt_parallel").value = threads.kernels_parallel()
    out = {}
    for entry in kernels:
        name, symbol = entry.split("=", 1)
        for lib in libs:
            try:
                out[name] = lib[symbol]
                break
            except AttributeError:
                continue
    return out


_STRUCTURES: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()   # plan -> launch_structures(plan)


def launch_structures(plan) -> tuple[list, dict[str, tuple]]:
    """launch_structures of the plan, worked out once per plan (prepare's plan-index key and, on
    a miss, kernel_sources both read it; a long program's walk is not cheap)."""
    got = _STRUCTURES.get(plan)
    if got is None:
        got = _STRUCTURES[plan] = _launch_structures(plan)
    return got


def _launch_structures(plan) -> tuple[list, dict[str, tuple]]:
    """(table, launch name -> structure) of the plan's kernel launches: what determines the source
    a launch renders to, apart from its name: pattern, domain, what it reads and writes, and each
    node's op, attributes, shape, dtype, literal value and where its inputs come from.  Node
    structures repeat (a chain of 10,000 adds has a handful of distinct ones), so each distinct
    one is kept once, in `table`, and nodes refer to it by number.  A launch whose nodes read a
    value from neither the launch nor its reads has no structure (it is always rendered)."""
    table: dict = {}                    # distinct (key, literal) -> its number

    def number(item) -> int:
        k = table.get(item)
        if k is None:
            k = table[item] = len(table)
        return k
    out: dict[str, tuple] = {}
    for launch in plan.launches:
        if launch.kind != "kernel" or len(launch.nodes) > MAX_KERNEL_NODES:
            continue
        at: dict[int, int] = {id(n): -1 - i for i, (n, _) in enumerate(launch.reads)}
        nodes = []
        try:
            for j, n in enumerate(launch.nodes):
                ins = tuple([at[id(i)] for i in n.inputs])
                at[id(n)] = j
                nodes.append((number((n.key, n.value)), ins))
        except KeyError:
            continue
        out[launch.name] = (launch.pattern, launch.domain, launch.reduce_dims,
                            tuple([(n.op, n.shape, n.dtype.name, b.shape, b.dtype.name)   # (not a param's slot)
                                   for n, b in launch.reads]),
                            tuple([(at.get(id(n)), b.shape, b.dtype.name) for n, b in launch.writes]),
                            tuple(nodes))
    return list(table), out


def plan_structure(plan, gemm: bool = False, epilogues: dict | None = None) -> str | None:
    """A text that determines the source `kernel_sources` renders for the plan (the plan index's
    key): its launches' structures with their names, whether the GEMM helper is part of the
    program and which kernels may run inside a product (`epilogues`).  None where a launch has no
    structure or a value has no faithful repr (an object printed by address): such a plan is
    always rendered."""
    table, structures = launch_structures(plan)
    kernels = [l.name for l in plan.launches if l.kind == "kernel" and len(l.nodes) <= MAX_KERNEL_NODES]
    if not (kernels or gemm) or len(structures) != len(kernels):
        return None
    text = repr((table, [(name, structures[name]) for name in kernels])) + (" +gemm" if gemm else "")
    if epilogues:
        text += " +epilogues " + repr(sorted(epilogues.items()))
    return None if " at 0x" in text else text

def _kernel_launch(fn, launch) -> LaunchFn:
    """A compiled kernel called with its buffers' addresses and its error word; returns the
    error word (nonzero: an integer division by zero), which the executor turns into the error."""
    fn.restype = None
    # No argtypes: it is only ever called with a pointer array (a ctypes array is passed as its
    # address), and declaring POINTER(c_void_p) makes ctypes check that on every call (~0.4 us)
    fn.argtypes = None
    n = len(launch.reads) + len(launch.writes) + 1           # the buffers and the error word
    arr_t = _ptr_arrays.get(n) or _ptr_arrays.setdefault(n, ctypes.c_void_p * n)
    err = np.zeros(1, np.int32)
    err_at = _address(err)

    def run(reads: Sequence[np.ndarray], writes: Sequence[np.ndarray]) -> int:
        fn(arr_t(*[_address(b) for b in reads], *[_address(b) for b in writes], err_at))
        if err[0]:
            err[0] = 0
            return 1
        return 0
    run.cfunc, run.arr_t = fn, arr_t         # (CpuExecutor calls the kernel with its own arrays)
    return run


class CpuExecutor(PlanExecutor):
    """The executor with the cpu backend's per-launch host work done once per plan.

    Each kernel takes an array of pointers.  Instead of converting every argument to a buffer and
    building that array on every run, a *frame* (one per concurrent run, reused across runs, as
    the static memory plan's temp sets are) holds each kernel's pointer array already filled with
    what does not change between runs: the addresses of the static temps, of the error words and
    of the frame's scalar storage, into which a run writes its float and bool arguments (one
    slice assignment).  A run then only writes the addresses of its array arguments and of the
    buffers it allocates (outputs, temps outside the static plan).  Library and reference
    launches take their buffers as in PlanExecutor; under LAZYTORCH_DEBUG every run takes
    PlanExecutor's traced path."""

    def __init__(self, backend, plan, compile_launch, sources=None, runner=None, parallel=(), parts=None, skip=None):
        # products whose next kernel runs inside them (its part function): the pair must be
        # consecutive native steps of one segment, called by the runner
        parts = parts if runner is not None and skip is not None and not debug_level() else {}
        launches = plan.launches
        self.parts = {i: parts[launches[i + 1].name] for i in range(len(launches) - 1)
                      if launches[i].kind == "library" and launches[i + 1].name in parts}
        self.skip_at = ctypes.cast(skip, ctypes.c_void_p).value if skip is not None else 0
        super().__init__(backend, plan, compile_launch, sources, frozenset(self.parts))
        self._frames: list[_Frame] = []
        self.runner = runner
        # the program's libraries' lt_parallel, set per run from the cores free then
        # (runtime/threads.py free_cores)
        self.parallel = list(parallel) if threads.num_threads() > 1 else []
        self.runner_at = ctypes.cast(runner, ctypes.c_void_p).value if runner is not None else 0
        self.direct = not debug_level() and any(getattr(s[0], "cfunc", None) for s in self.steps)
        self.epilogues: list[tuple[str, str]] = []      # (set by _layout)
        if self.direct:
            self._layout()

    def _layout(self) -> None:
        kernel_reads: dict[int, int] = {}            # slot -> kernel steps reading it
        other_reads: set[int] = set()                # slots other launches read (need buffers)
        for fn, reads, writes, _, _ in self.steps:
            for r in reads:
                if getattr(fn, "cfunc", None) is not None:
                    kernel_reads[r] = kernel_reads.get(r, 0) + 1
                else:
                    other_reads.add(r)
        outputs = set(self.outputs)
        # float and bool arguments only kernels read live in the frame's storage
        self.packed: dict[type, tuple[list[int], list[int]]] = {}   # ctype -> (arg indices, slots)
        self.converted: list[tuple[int, int, Callable, Any]] = []   # (arg index, slot, convert, dtype)
        packed_at: dict[int, tuple[type, int]] = {}                 # slot -> (ctype, storage index)
        numbers = self.plan.scalar_slots                             # (params that are Python numbers)
        for k, (slot, convert, dtype) in enumerate(self.params):
            ctype = _SCALAR_CTYPES.get(dtype)
            if ctype is not None and slot in kernel_reads and slot not in other_reads and slot not in outputs \
                    and self.plan.params[k].slot in numbers:
                args, slots = self.packed.setdefault(ctype, ([], []))
                packed_at[slot] = (ctype, len(args))
                args.append(k)
                slots.append(slot)
            else:
                self.converted.append((k, slot, convert, dtype))
        self.packers = [(ct, _PACK_FORMATS[ct], _picker(args)) for ct, (args, _) in self.packed.items()]
        temp_slot: dict[int, int] = {}                                # slot -> static temp index
        for _, _, writes, _, _ in self.steps:
            for slot, _, _, t in writes:
                if t >= 0:
                    temp_slot[slot] = t
        # per step: (cfunc or None, launch fn, reads, writes, frees, launch, dynamic pointer positions)
        self.program: list[tuple] = []
        self.fixed: list[list[tuple[int, tuple]]] = []   # per kernel step: (position, what) set per frame
        self.gemm_threads: list = []                     # lt_gemm_threads of the product steps' libraries
        joined = self._joined(temp_slot)
        # (product, kernel) launch names of each kernel that runs inside the product before it
        self.epilogues = [(self.steps[i][4].name, self.steps[i + 1][4].name) for i in sorted(joined)]
        self.skipped: list[int] = []                     # kernel numbers of the steps run inside a product
        for i, (fn, reads, writes, frees, launch) in enumerate(self.steps):
            cfunc = getattr(fn, "cfunc", None)
            dynamic: list[tuple[int, int]] = []          # (pointer position, slot) written per run
            fixed: list[tuple[int, tuple]] = []
            if cfunc is not None:
                lead = getattr(fn, "lead", 0)            # a product step: its parameter block first
                if i in joined:
                    fn = _Joined(fn, *joined[i], len(reads) + len(writes) + 2)
                    fixed.append((fn.epi_pos, ("array", len(self.fixed) + 1)))
                elif i - 1 in joined:
                    self.skipped.append(len(self.fixed))
                if lead:
                    fixed.append((0, ("const", ctypes.addressof(fn.params))))
                    if all(ctypes.addressof(v) != ctypes.addressof(fn.threads_now) for v in self.gemm_threads):
                        self.gemm_threads.append(fn.threads_now)
                for pos, slot in enumerate(reads + [w[0] for w in writes], lead):
                    if slot in packed_at:
                        fixed.append((pos, ("scalar",) + packed_at[slot]))
                    elif slot in temp_slot:
                        fixed.append((pos, ("temp", temp_slot[slot])))
                    else:
                        dynamic.append((pos, slot))
                fixed.append((lead + len(reads) + len(writes), ("err", len(self.fixed))))
                self.fixed.append(fixed)
            # buffers below the pool's threshold come straight from numpy (as the pool's own would)
            allocs = [(slot, shape, dtype, t, np.dtype(dtype.np), math.prod(shape) * dtype.np.itemsize < MIN_BYTES)
                      for slot, shape, dtype, t in writes]
            self.program.append((cfunc, fn, reads, allocs, frees, launch, dynamic, len(self.fixed) - 1))
        self._segments()
        self.one = self._one_step()

    def _joined(self, temp_slot: dict[int, int]) -> dict[int, tuple]:
        """Step index of a product -> (its epilogue's part function, whole rows) for the products
        that run the next kernel inside them: both native steps, and the kernel writes no memory
        the product reads or writes (the static memory plan kept it apart: `joined` in
        PlanExecutor; this checks it)."""
        out = {}
        views = self.memory.views if self.memory is not None else []

        def blocks(slots) -> set[int]:
            return {views[temp_slot[s]][0] for s in slots if s in temp_slot}
        for i, (part, rows) in self.parts.items():
            (fn, reads, writes, _, _), (kfn, _, kwrites, _, _) = self.steps[i], self.steps[i + 1]
            if not (getattr(fn, "lead", 0) and getattr(kfn, "cfunc", None) is not None):
                continue
            if blocks(w[0] for w in kwrites) & blocks(list(reads) + [w[0] for w in writes]):
                continue
            out[i] = (part, rows)
        return out

    def _one_step(self) -> "_OneStep | None":
        """How a plan of one native step (a kernel or a product) runs whole through
        runtime/_launch.c's run_one, or None (more steps, static temps, a pointer the run writes
        that is neither an argument nor an output, scalars not in one run of arguments, a backend
        that converts its arguments, no extension): the general `_run`.  (`run` sets the parallel
        flags and product thread counts before either.)"""
        backend = type(self.backend)
        if run_one is None or len(self.program) != 1 or self.program[0][0] is None or self.memory is not None \
                or backend.adopt is not Backend.adopt or backend.from_host is not Backend.from_host:
            return None
        _, _, _, allocs, _, launch, dynamic, k = self.program[0]
        args_at = {slot: k_arg for k_arg, slot, _, _ in self.converted}
        writes = {w[0]: w for w in allocs}
        inputs, outputs, written = [], [], []
        for pos, slot in dynamic:
            if slot in args_at:
                inputs.append((args_at[slot], pos))
            elif slot in writes and writes[slot][3] < 0:
                _, shape, dtype, _, np_dtype, tiny = writes[slot]
                outputs.append((pos, np.empty, shape, np_dtype) if tiny else (pos, self.backend.empty, shape, dtype))
                written.append(slot)
            else:
                return None
        if sorted(written) != sorted(writes) or any(o not in written for o in self.outputs):
            return None
        spans = []
        for ct, (arg_indices, _) in self.packed.items():
            lo, hi = arg_indices[0], arg_indices[-1] + 1
            if arg_indices != list(range(lo, hi)):
                return None
            spans.append((ct, _PACK_FORMATS[ct], lo, hi))
        order = [written.index(o) for o in self.outputs]
        return _OneStep(k, launch, tuple(inputs), tuple(outputs), spans,
                        None if order == list(range(len(written))) else order,
                        sum(1 for o in outputs if o[1] is np.empty))

    def _segments(self) -> None:
        """Blocks of the program: each run of consecutive native steps (kernels, products) is one
        segment, called through the program's runner in one ctypes call; other steps stand alone."""
        self.blocks: list[tuple[tuple, int]] = []       # (steps, segment number or -1)
        self.segments: list[list[int]] = []             # per segment: its steps' kernel numbers
        run: list = []

        def close() -> None:
            if len(run) >= 2 and self.runner is not None:
                self.segments.append([step[7] for step in run])
                self.blocks.append((tuple(run), len(self.segments) - 1))
            else:
                self.blocks.extend(((step,), -1) for step in run)
            run.clear()
        for step in self.program:
            if step[0] is not None:
                run.append(step)
            else:
                close()
                self.blocks.append(((step,), -1))
        close()
        cfuncs = [step[0] for step in self.program if step[0] is not None]
        self.kernel_at = [ctypes.cast(f, ctypes.c_void_p).value for f in cfuncs]
        for k in self.skipped:                           # (run inside the product before them)
            self.kernel_at[k] = self.skip_at
        self.segment_fns = [(ctypes.c_void_p * len(ks))(*[self.kernel_at[k] for k in ks]) for ks in self.segments]
        self.segment_at = [(ctypes.addressof(fns), len(fns)) for fns in self.segment_fns]

    def _frame(self) -> "_Frame":
        temps = self.memory.allocate() if self.memory is not None else []
        storage = {ct: (ct * len(slots))() for ct, (_, slots) in self.packed.items()}
        errs = (ctypes.c_int32 * max(1, len(self.fixed)))()
        arrays = []
        for fixed, step in zip(self.fixed, [s for s in self.program if s[0] is not None]):
            arr = step[1].arr_t()
            for pos, what in fixed:
                if what[0] == "scalar":
                    arr[pos] = ctypes.addressof(storage[what[1]]) + what[2] * ctypes.sizeof(what[1])
                elif what[0] == "temp":
                    arr[pos] = _address(temps[what[1]])
                elif what[0] == "const":
                    arr[pos] = what[1]
                elif what[0] == "err":
                    arr[pos] = ctypes.addressof(errs) + what[1] * 4
            arrays.append(arr)
        for fixed, arr in zip(self.fixed, arrays):      # (a product's epilogue: that kernel's array)
            for pos, what in fixed:
                if what[0] == "array":
                    arr[pos] = ctypes.addressof(arrays[what[1]])
        segments = []                              # per segment: (its steps' pointer arrays, error words)
        for ks in self.segments:
            args = (ctypes.c_void_p * len(ks))(*[ctypes.addressof(arrays[k]) for k in ks])
            words = (ctypes.c_void_p * len(ks))(*[ctypes.addressof(errs) + 4 * k for k in ks])
            segments.append((ctypes.addressof(args), ctypes.addressof(words), args, words))
        return _Frame(temps, storage, errs, arrays, segments)

    def run(self, args: Sequence[Any]) -> list:
        if not self.direct:
            return super().run(args)
        frames = self._frames
        frame = frames.pop() if frames else self._frame()
        try:
            if not (self.gemm_threads or self.parallel):
                return self._run(args, frame)
            idle = threads.free_cores()                  # (once per run, for every step)
            for count in self.gemm_threads:
                count.value = idle
            for flag in self.parallel:
                flag.value = idle > 1
            if not self.gemm_threads:
                return self._run(args, frame)
            with threads.blas_threads():
                return self._run(args, frame)
        finally:
            if len(frames) < MAX_FRAMES:
                frames.append(frame)

    def _run(self, args: Sequence[Any], frame: "_Frame") -> list:
        one = self.one
        if one is not None:
            outs = self._run_one(one, args if args.__class__ is list else list(args), frame)
            if outs is not None:
                return outs
        env: list = [None] * self.size
        addr: list = [0] * self.size
        for k, slot, convert, dtype in self.converted:
            buf = env[slot] = convert(args[k], dtype)
            addr[slot] = _address(buf)
        storage_at = frame.storage_at
        for ct, code, pick in self.packers:
            pack(storage_at[ct], code, pick(args))
        empty = self.backend.empty
        small = self.backend.pool.stats
        temps, errs, arrays = frame.temps, frame.errs, frame.arrays
        for steps, segment in self.blocks:
            if segment >= 0:                     # native steps: bind their buffers, then one call
                for step in steps:
                    _bind(step, env, addr, temps, arrays, empty, small)
                fns_at, n = self.segment_at[segment]
                args_at, errs_at, _, _ = frame.segments[segment]
                failed = run_steps(self.runner_at, fns_at, args_at, errs_at, n)
                if failed >= 0:
                    errs[steps[failed][7]] = 0
                    raise kernel_error(steps[failed][5])
                for step in steps:
                    for i in step[4]:
                        env[i] = None
                continue
            cfunc, fn, reads, writes, frees, launch, dynamic, k = steps[0]
            if cfunc is not None:
                _bind(steps[0], env, addr, temps, arrays, empty, small)
                call(self.kernel_at[k], frame.arrays_at[k])
                if errs[k]:
                    errs[k] = 0
                    raise kernel_error(launch)
            else:
                outs = []
                for slot, shape, dtype, t, _, _ in writes:
                    buf = env[slot] = temps[t] if t >= 0 else empty(shape, dtype)
                    outs.append(buf)
                try:
                    failed = fn([env[r] for r in reads], outs)
                except Exception as e:
                    e.add_note(describe_launch(launch))
                    raise
                if failed:
                    raise kernel_error(launch)
                for slot, _, _, t, _, _ in writes:
                    if t < 0:
                        addr[slot] = _address(env[slot])
            for i in frees:
                env[i] = None
        return [env[i] for i in self.outputs]

    def _run_one(self, one: "_OneStep", args: list, frame: "_Frame") -> list | None:
        """The plan's one native step in one native call (run_one); None: an argument the general
        `_run` converts first."""
        at = frame.one
        if at is None:
            at = frame.one = (self.kernel_at[one.k], frame.arrays_at[one.k], ctypes.addressof(frame.errs) + 4 * one.k,
                              tuple((frame.storage_at[ct], code, lo, hi) for ct, code, lo, hi in one.packs))
        outs = run_one(at[0], at[1], at[2], args, np.ndarray, one.inputs, at[3], one.outputs)
        if outs is None:
            return None
        if outs is False:
            raise kernel_error(one.launch)
        if one.tiny:
            self.backend.pool.stats["small"] += one.tiny
        return outs if one.order is None else [outs[i] for i in one.order]


class _Joined:
    """A product step that runs the next kernel inside it: its parameter block with the epilogue's
    part function (`epi`), whether it needs whole rows and where in the step's pointer array the
    kernel's own array is (one more pointer, after the error word)."""

    def __init__(self, step, part, rows: bool, epi_pos: int):
        from .library import GEMM_PARAMS
        self.cfunc, self.lead, self.threads_now = step.cfunc, step.lead, step.threads_now
        self.params = (ctypes.c_int64 * len(GEMM_PARAMS))(*step.params)
        at = GEMM_PARAMS.index
        self.params[at("epi")] = ctypes.cast(part, ctypes.c_void_p).value
        self.params[at("epi_args")] = epi_pos
        self.params[at("epi_rows")] = int(rows)
        self.epi_pos = epi_pos
        self.arr_t = ctypes.c_void_p * (epi_pos + 1)


class _OneStep(NamedTuple):
    """A plan of one native step as run_one takes it: the step's number, its launch (for errors),
    (arg index, pointer position) of its array arguments, (position, make, shape, dtype) of its
    outputs, (ctype, code, first, end) of its packed scalars, the plan's outputs' order among the
    step's (None: the same) and how many outputs are small (the pool's count)."""
    k: int
    launch: Any
    inputs: tuple
    outputs: tuple
    packs: list
    order: list | None
    tiny: int


MAX_FRAMES = 4        # frames kept per plan (runs on as many threads at once reuse theirs)


class _Frame:
    """One run's reusable state: static temps, scalar storage, error words, pointer arrays and, per
    segment, the runner's arrays of those (addresses first); the storage's and the pointer arrays'
    addresses, which the native calls take."""
    __slots__ = ("temps", "storage", "errs", "arrays", "segments", "storage_at", "arrays_at", "one")

    def __init__(self, temps, storage, errs, arrays, segments):
        self.temps, self.storage, self.errs, self.arrays = temps, storage, errs, arrays
        self.segments = segments
        self.one = None              # (CpuExecutor._run_one's addresses in this frame, made at its first run)
        self.storage_at = {ct: ctypes.addressof(a) for ct, a in storage.items()}
        self.arrays_at = [ctypes.addressof(a) for a in arrays]


def _bind(step, env: list, addr: list, temps: list, arrays: list, empty, small: dict) -> None:
    """Before a native step runs: its write buffers (a static temp, else allocated) and the
    addresses its pointer array takes per run."""
    for slot, shape, dtype, t, np_dtype, tiny in step[3]:
        if t >= 0:
            env[slot] = temps[t]
            continue
        if tiny:
            small["small"] += 1
            buf = env[slot] = np.empty(shape, np_dtype)
        else:
            buf = env[slot] = empty(shape, dtype)
        addr[slot] = _address(buf)
    arr = arrays[step[7]]
    for pos, slot in step[6]:
        arr[pos] = addr[slot]


def _picker(indices: list[int]) -> Callable[[Sequence[Any]], Sequence[Any]]:
    """A function of the argument list returning the values at `indices`, in order (a slice when
    they are consecutive, the common case: a program's scalar leaves in a row)."""
    if indices == list(range(indices[0], indices[-1] + 1)):
        return operator.itemgetter(slice(indices[0], indices[-1] + 1))
    if len(indices) == 1:
        i = indices[0]
        return lambda args: (args[i],)
    return operator.itemgetter(*indices)

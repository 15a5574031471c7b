"""`lt.compile`: trace a function once per input signature, then replay its compiled plan.

    @lt.compile
    def step(x, scale: float):
        return (x * scale).softmax(-1)

    model = lt.compile(model)          # any callable object: its tensors are captured state

The first call with a new signature (see `_leaf_sig`: shapes, dtypes and view layouts of the tensor
arguments, the types of Python numbers, the values of other arguments, the backend, what torch's
TF32 flags allow: ir/precision.py) runs the Python body on *placeholder* tensors, compiles the
whole pending program once (outputs plus every in-place update of an argument or captured tensor)
and stores it.  Every call, the first included, then binds the current buffers to the plan's
params and launches it: no Python body, no nodes, no graph hashing.  docs/compile.md describes
the rules (captured state, Python numbers, data-dependent branches, outputs) and why they were
chosen.
"""
from __future__ import annotations

import contextlib
import functools
import inspect
import os
import sys
import threading
import traceback
import types
import warnings
from typing import Any, Callable, NamedTuple

import numpy as np

from .ir import dtypes as D
from .ir.graph import program
from .ir.node import Node
from .ir.precision import state as tf32_state
from .passes.pipeline import compile_plan
from .ir.creation import generator
from .realize import eval_nodes, is_host_array, keep_uploads, options_for
from .runtime import backend_name, get_backend
from .tensor import TRACING, Tensor, holding

_PACKAGE_DIR = os.path.dirname(os.path.abspath(__file__))
_MAX_VISITED = 100_000          # objects looked at when discovering captured tensors
# The globals of lazytorch's own functions hold no user state, so discover_tensors does not walk
# them (it still walks their closures and defaults: a decorator's wrapper holds the user's
# function).  An lt function the body reaches as an object (lt.sigmoid in a table of ops, a
# Module's forward) led the walk into the op registry's tables and memos: ~1,500 objects and
# their dicts' items, 5-9 ms, twice per trace, most of what lt.compile's first call took beyond
# the lazy one's (docs/benchmarks.md, "W8").
_PACKAGE = __name__.partition(".")[0]


# ---------------------------------------------------------------- statistics and logging

class CompileInfo(NamedTuple):
    traces: int      # bodies run on placeholders (first calls and recompiles)
    hits: int        # calls that replayed a compiled plan
    fallbacks: int   # calls that ran the body on the lazy path (data-dependent code)


_stats = {"traces": 0, "hits": 0, "fallbacks": 0}
_lock = threading.RLock()
_tracing = threading.local()


_traces_running = [0]         # bodies running on placeholders in any thread (traces hold a lock)


def tracing() -> bool:
    """Whether this thread is running a body on placeholders (lt.eval is then a no-op: the
    compiled program evaluates everything it computes)."""
    return _traces_running[0] > 0 and getattr(_tracing, "active", False)


TRACING[0] = tracing             # (tensor.py: no in-place chain is evaluated while tracing)


def compile_info() -> CompileInfo:
    """Counters over every `lt.compile`d function of the process."""
    return CompileInfo(_stats["traces"], _stats["hits"], _stats["fallbacks"])


def _debug(message: str) -> None:
    """LAZYTORCH_DEBUG=1: one line per trace/recompile on stderr (read at call time)."""
    if os.environ.get("LAZYTORCH_DEBUG", "") not in ("", "0"):
        print(f"[lazytorch.compile] {message}", file=sys.stderr, flush=True)


class GraphBreak(RuntimeError):
    """Python code needed a tensor's value while the function was being traced."""


class _Placeholder:
    """The buffer of a placeholder leaf: any attempt to read its data is a graph break."""
    __slots__ = ("what",)
    placeholder = True                                   # (indexing skips its eager bounds check)

    def __init__(self, what: str):
        self.what = what

    def __array__(self, dtype=None, copy=None):
        raise GraphBreak(f"the value of {self.what} was needed while tracing (.item(), bool(), .numpy(), "
                         "print or a value-dependent op)")


# ---------------------------------------------------------------- argument trees

def _flatten(obj, leaves: list) -> Any:
    """A hashable description of the containers (tuple, list, dict, namedtuple) in `obj`; every
    other object is a leaf appended to `leaves` (spec None)."""
    t = type(obj)
    if t is tuple or t is list:
        return (t, tuple([_flatten(o, leaves) for o in obj]))
    if t is dict:
        return (dict, tuple(obj), tuple([_flatten(v, leaves) for v in obj.values()]))
    if isinstance(obj, tuple) and hasattr(obj, "_fields"):
        return (t, tuple([_flatten(o, leaves) for o in obj]))
    leaves.append(obj)
    return None


_CONTAINERS = frozenset({tuple, list, dict})


def _unflatten(spec, it) -> Any:
    if spec is None:
        return next(it)
    if type(spec) is int:                                # n flat positional arguments
        return tuple([next(it) for _ in range(spec)])
    t = spec[0]
    if t is dict:
        return {k: _unflatten(s, it) for k, s in zip(spec[1], spec[2])}
    items = [_unflatten(s, it) for s in spec[1]]
    return t(items) if t is tuple or t is list else t(*items)


def _leaf_paths(spec, prefix: str, out: list) -> None:
    if spec is None:
        out.append(prefix)
    elif spec[0] is dict:
        for k, s in zip(spec[1], spec[2]):
            _leaf_paths(s, f"{prefix}[{k!r}]", out)
    else:
        for i, s in enumerate(spec[1]):
            _leaf_paths(s, f"{prefix}[{i}]", out)


_NUMBERS = (float, int)   # (bool is static: flags choose code paths)


def _leaf_sig(value):
    """(signature part, buffer node to bind) of one argument leaf; (None, None) for a tensor whose
    value is pending (the caller evaluates it and asks again)."""
    if isinstance(value, Tensor):
        n = value.node
        if n.op == "buffer":
            return (n.shape, n.dtype), n
        if n.op == "view" and n.inputs[0].op == "buffer":
            return (n.shape, n.dtype, n.attrs["view"], n.inputs[0].shape), n.inputs[0]
        return None, None
    t = type(value)
    if t is float or t is int:
        return t, None
    return ("=", t, value), None


def _describe_sig(sig) -> str:
    if isinstance(sig, tuple) and sig and sig[0] == "=":
        return f"value {sig[2]!r}"
    if isinstance(sig, type):
        return f"Python {sig.__name__}"
    text = f"shape {list(sig[0])} {sig[1].name}"
    return text + (f" (view {sig[2]} of a [{', '.join(map(str, sig[3]))}] buffer)" if len(sig) > 2 else "")


# ---------------------------------------------------------------- captured tensors

def _code_names(code: types.CodeType, out: set) -> None:
    out.update(code.co_names)
    for c in code.co_consts:
        if isinstance(c, types.CodeType):
            _code_names(c, out)


def discover_tensors(target, depth: int = 32, numbers: list | None = None) -> list[Tensor]:
    """Every root Tensor (not a view; a view contributes its base) reachable from `target`
    through object attributes, containers, closures and the globals functions name, except the
    globals of lazytorch's own functions (_PACKAGE) (`depth` links deep: a module tree nests three
    links per level; at most _MAX_VISITED objects).
    `numbers`, if given, receives (container, key, value) for every Python number held in a
    reachable dict entry or object attribute (state a trace must not change)."""
    found: dict[int, Tensor] = {}
    seen: set[int] = set()
    stack = [(target, 0)]
    while stack and len(seen) < _MAX_VISITED:
        obj, d = stack.pop()
        if id(obj) in seen:
            continue
        seen.add(id(obj))
        if isinstance(obj, Tensor):
            root = obj._base if obj._base is not None else obj
            found.setdefault(id(root), root)
            continue
        if d >= depth or isinstance(obj, (str, bytes, int, float, complex, bool, type, types.ModuleType)) \
                or obj is None or type(obj).__module__ == "numpy":
            continue
        children: list = []
        if isinstance(obj, (list, tuple, set, frozenset)):
            children = list(obj)
        elif isinstance(obj, dict):
            children = list(obj.values())
            if numbers is not None:
                numbers.extend((obj, k, v) for k, v in obj.items() if type(v) in _NUMBERS)
        elif isinstance(obj, types.MethodType):
            children = [obj.__self__, obj.__func__]
        elif isinstance(obj, functools.partial):
            children = [obj.func, *obj.args, *obj.keywords.values()]
        elif isinstance(obj, types.FunctionType):
            children = [c.cell_contents for c in (obj.__closure__ or ()) if _cell_filled(c)]
            g = obj.__globals__
            if g.get("__name__", "").partition(".")[0] != _PACKAGE:
                names: set = set()
                _code_names(obj.__code__, names)
                children += [g[n] for n in names if n in g]
            children += list(obj.__defaults__ or ()) + list((obj.__kwdefaults__ or {}).values())
        elif hasattr(obj, "__dict__") and not isinstance(obj, (types.BuiltinFunctionType,)):
            children = list(vars(obj).values())
            if numbers is not None:
                numbers.extend((obj, k, v) for k, v in vars(obj).items() if type(v) in _NUMBERS)
            call = getattr(type(obj), "forward", None) or getattr(type(obj), "__call__", None)
            if isinstance(call, types.FunctionType):
                children.append(call)
        stack.extend((c, d + 1) for c in children)
    return list(found.values())


def _cell_filled(cell) -> bool:
    try:
        cell.cell_contents
        return True
    except ValueError:
        return False


# ---------------------------------------------------------------- one compiled signature

class _Trace(NamedTuple):
    roots: list[Node]
    order: list[Node]
    key: int
    leaves: list[Node]
    out_spec: Any            # output tree; tensors as ("arg", i) | ("capture", t) | ("out", k)
    out_leaves: list
    writes: list             # (target, root index): ("arg", leaf i) or ("capture", tensor)
    bindings: dict           # id(placeholder node) -> ("arg", leaf i) | ("capture", tensor)
    grad_writes: list        # (captured tensor, root index or None): its .grad after the body


class Entry:
    """A compiled signature: the executable and how each call's values bind to its params."""

    def __init__(self, trace: _Trace, runtime_scalars: dict[int, int], backend: str):
        params, roots, slots = _normalize(trace.order, trace.roots, set(runtime_scalars))
        self.plan = self.executable = None
        target = get_backend(backend)
        if roots:
            # (the backend's options, as the lazy path's: its GEMM's bias, its whole composites,
            # its buffer cap, constant folding; a compiled program plans as the lazy one does)
            self.plan = compile_plan(params, roots, options_for(backend))
            self.plan.backend = backend
            self.executable = target.prepare(self.plan)
        # on a backend with its own memory, bound leaves holding host data are uploaded once and
        # keep the device copy, as on the lazy path (else every call re-uploads the weights)
        self.device = target if target.device_memory else None
        self.template: list = [None] * len(params)
        self.arg_slots: list[tuple[int, int]] = []        # (slot, argument leaf index)
        self.scalar_slots: list[tuple[int, int]] = []
        self.capture_slots: list[tuple[int, Tensor]] = []
        for slot, leaf in enumerate(slots):
            bound = trace.bindings.get(id(leaf))
            if leaf.op == "scalar" and id(leaf) in runtime_scalars:
                self.scalar_slots.append((slot, runtime_scalars[id(leaf)]))
            elif leaf.op == "scalar":
                self.template[slot] = leaf.value          # a number of the body kept as a param
            elif bound is None:
                self.template[slot] = leaf.buffer         # a tensor made in the body: a constant
            elif bound[0] == "arg":
                self.arg_slots.append((slot, bound[1]))
            else:
                self.capture_slots.append((slot, bound[1]))
        self.captures = [t for _, t in self.capture_slots]
        self.shapes = [(t, t._node.shape, t._node.dtype) for t in self.captures]
        self.out_spec, self.out_leaves = trace.out_spec, trace.out_leaves
        # (exact keys, never hashes of them: see ir/node.py)
        self.out_meta = [(r.shape, r.dtype, ("buffer", (), r.shape, r.dtype.name)) for r in trace.roots]
        self.writes = trace.writes
        self.grad_writes = trace.grad_writes
        self.single = trace.out_spec is None and trace.out_leaves == [("out", 0)] and not trace.writes \
            and not trace.grad_writes

    def _upload(self, values: list, bound: list) -> None:
        """Uploads the bound leaves still holding host data (keep_uploads) and binds their copies."""
        for slot, node in [(s, bound[i]) for s, i in self.arg_slots] + [(s, t._node) for s, t in self.capture_slots]:
            if isinstance(values[slot], np.ndarray):
                keep_uploads([node], self.device)
                values[slot] = node.buffer

    def run(self, leaves: list, bound: list) -> Any:
        values = self.template.copy()
        for slot, i in self.arg_slots:
            values[slot] = bound[i].buffer
        for slot, i in self.scalar_slots:
            values[slot] = leaves[i]
        if self.capture_slots:
            pending = [t for t in self.captures if t._node.op != "buffer"]
            if pending:                                  # e.g. an optimizer step left lazy
                eval_nodes([t._node for t in pending])
            for t, shape, dtype in self.shapes:
                if t._node.shape != shape or t._node.dtype is not dtype:
                    raise _Stale(f"captured tensor changed from {dtype.name}{list(shape)} to "
                                 f"{t._node.dtype.name}{list(t._node.shape)}")
            for slot, t in self.capture_slots:
                values[slot] = t._node.buffer
        if self.device is not None and any(map(is_host_array, values)):     # (an isinstance per value, in C)
            self._upload(values, bound)
        outs = self.executable.run(values) if self.executable is not None else ()
        if self.single:
            shape, dtype, key = self.out_meta[0]
            return holding(Node.computed(outs[0], shape, dtype, key))
        nodes = [Node.computed(buf, shape, dtype, key) for (shape, dtype, key), buf in zip(self.out_meta, outs)]
        if self.writes:                                  # replay in-place updates of state
            with _no_grad():                             # (as an optimizer step updates parameters)
                for target, k in self.writes:
                    t = target[1] if target[0] == "capture" else leaves[target[1]]
                    t = t._base if t._base is not None else t
                    t._rebind(nodes[k], "lt.compile write-back")
        for t, k in self.grad_writes:
            t._grad = None if k is None else Tensor(nodes[k])
        it = iter([_output(o, nodes, leaves) for o in self.out_leaves])
        return _unflatten(self.out_spec, it)


def _no_grad():
    """autograd's no_grad() where the package has autograd, else nothing to switch off."""
    if not _NO_GRAD:
        try:
            from .autograd import no_grad
        except ImportError:
            no_grad = contextlib.nullcontext
        _NO_GRAD.append(no_grad)
    return _NO_GRAD[0]()


_NO_GRAD: list = []


def _grad_leaf_registrar():
    """autograd's register_leaf while some tensor requires grad (the package may have no autograd)."""
    try:
        from .autograd import state
    except ImportError:
        return None
    return state.register_leaf if state.MODE.any_leaf else None


class _Stale(Exception):
    """A captured tensor no longer matches the trace (its shape or dtype changed): retrace."""


def _output(o, nodes: list, leaves: list):
    kind = o[0]
    if kind == "out":
        return holding(nodes[o[1]])
    if kind == "arg":
        return leaves[o[1]]
    if kind == "capture":
        return o[1]
    return o[1]                                          # ("const", value)


def _normalize(order: list[Node], roots: list[Node], runtime: set[int]):
    """(params, roots, the leaf behind each param) of a copy of the traced program: buffers and
    scalars bound to Python-number arguments become params; other Python numbers of the body
    become structural constants (literals in the kernels, no per-call conversion).

    A Python float is a float64 scalar; as a literal it would need float64 registers, which
    Metal lacks.  It becomes a float32 literal where that changes nothing: the value is exact in
    float32 and no reader is float64, or every reader is a float32/16 node (which casts the number
    to float32 first, as the lazy path's kernels do with the param).  Otherwise it stays a param."""
    readers: dict[int, list[Node]] = {}
    for n in order:
        for i in n.inputs:
            if i.op == "scalar":
                readers.setdefault(id(i), []).append(n)
    copies: dict[int, Node] = {}
    params: list[Node] = []
    slots: list[Node] = []
    for n in order:
        literal = None
        if n.is_constant:
            literal = Node.scalar(n.value, n.dtype)
        elif n.op == "scalar" and id(n) not in runtime:
            literal = _literal(n, readers.get(id(n), ()))
        if n.op == "buffer" or (n.op == "scalar" and literal is None):
            kind = "scalar" if n.op == "scalar" else "buffer"
            new = Node("param", (), {"slot": len(params), "kind": kind}, n.shape, n.dtype)
            params.append(new)
            slots.append(n)
        elif n.op == "scalar":
            new = literal
        else:
            new = Node(n.op, tuple(copies[id(i)] for i in n.inputs), n.attrs, n.shape, n.dtype)
        copies[id(n)] = new
    return params, [copies[id(r)] for r in roots], slots


def _literal(n: Node, readers: list[Node]) -> Node | None:
    if n.dtype is not D.float64 or any(r.dtype is D.float64 for r in readers):
        return Node.scalar(n.value, n.dtype)
    value = float(n.value)
    exact = value != value or float(np.float32(value)) == value          # (NaN, inf included)
    if exact or all(r.dtype.is_floating_point and r.op not in ("full", "to") for r in readers):
        return Node.scalar(float(np.float32(value)), D.float32)
    return None


class _Specialized:
    """The entries of a signature whose Python numbers at `positions` shape the program: one per
    tuple of their values."""

    def __init__(self, positions: tuple[int, ...], table: dict):
        self.positions, self.table = positions, table


class _Fallback:
    """A signature whose body needs data while tracing: it runs on the lazy path every call."""

    def __init__(self, where: str):
        self.where = where


# ---------------------------------------------------------------- the compiled callable

class CompiledFunction:
    """What `lt.compile(fn)` returns: call it as fn.  See the module docstring."""

    def __init__(self, fn: Callable, dynamic: bool | None = False, fullgraph: bool = False):
        self._fn = fn
        self._dynamic = dynamic
        self._fullgraph = fullgraph
        self._entries: dict = {}
        self._warned = False
        self._last_key = None
        functools.update_wrapper(self, fn, updated=())

    # ---- the hot path ----
    def __call__(self, *args, **kwargs):
        sigs, bound = [], []
        if not kwargs:                                   # realized tensor arguments: the common case,
            for v in args:                               # in a straight line (every hit runs this)
                if v.__class__ is Tensor and v._base is None:
                    n = v._node
                    if n.op == "buffer":
                        sigs.append((n.shape, n.dtype))
                        bound.append(n)
                        continue
                break
            else:
                key = (backend_name(), len(args), None, tuple(sigs), self._guard(), tf32_state())
                entry = self._entries.get(key)
                if entry.__class__ is Entry:
                    return self._hit(key, entry, args, bound, args, kwargs)
            sigs.clear()                                 # (the general route below starts over)
            bound.clear()
        if kwargs or any([type(a) in _CONTAINERS or isinstance(a, tuple) for a in args]):
            leaves: list = []
            spec = _flatten(args, leaves)
            kwspec = _flatten(kwargs, leaves) if kwargs else None
        else:                                            # flat positional arguments
            leaves, spec, kwspec = list(args), len(args), None
        for v in leaves:
            if isinstance(v, Tensor) and v._base is None and v._node.op == "buffer":
                n = v._node                              # a realized tensor
                sigs.append((n.shape, n.dtype))
                bound.append(n)
                continue
            s, n = _leaf_sig(v)
            if s is None:
                eval_nodes([v.node])
                s, n = _leaf_sig(v)
            sigs.append(s)
            bound.append(n)
        key = (backend_name(), spec, kwspec, tuple(sigs), self._guard(), tf32_state())
        try:
            entry = self._entries.get(key)
        except TypeError:                                # an unhashable argument
            return self._run_fallback(args, kwargs, "an argument is neither a tensor, a number nor hashable")
        if type(entry) is _Specialized:
            entry = entry.table.get(tuple([leaves[i] for i in entry.positions]))
        if entry is None:
            entry = self._compile(key, leaves, bound, spec, kwspec, args, kwargs)
        if type(entry) is _Fallback:
            return self._run_fallback(args, kwargs, None)
        return self._hit(key, entry, leaves, bound, args, kwargs)

    def _hit(self, key, entry: "Entry", leaves, bound: list, args, kwargs):
        """Run a compiled entry on this call's values (retrace when a captured tensor changed)."""
        try:
            out = entry.run(leaves, bound)
        except _Stale as e:
            self._drop(key)
            _debug(f"{self.__name__}: recompiling: {e}")
            return self(*args, **kwargs)
        _stats["hits"] += 1
        return out

    def _guard(self):
        """Python state the trace depends on that a call must match (a module's training flag)."""
        return None

    def _run_fallback(self, args, kwargs, why: str | None):
        _stats["fallbacks"] += 1
        if why is not None and not self._warned:
            self._warned = True
            warnings.warn(f"lt.compile({self.__name__}): {why}; running it on the lazy path", stacklevel=3)
        return self._fn(*args, **kwargs)

    def _drop(self, key) -> None:
        with _lock:
            self._entries.pop(key, None)

    # ---- the first call of a signature ----
    def _compile(self, key, leaves, bound, spec, kwspec, args, kwargs):
        with _lock:
            names = self._leaf_names(spec, kwspec, args, kwargs)
            _debug(f"{self.__name__}: tracing: {self._reason(key, names, leaves)}")
            self._last_key = (key, names, list(leaves))
            _stats["traces"] += 1
            try:
                traced = self._trace(spec, kwspec, leaves, bound, leaves)
            except Exception as e:
                cause = _graph_break_in(e)
                if cause is None:
                    raise
                return self._graph_break(key, cause)
            runtime, special = self._scalar_bindings(spec, kwspec, leaves, bound, traced)
            entry = Entry(traced, runtime, key[0])
            if special:
                group = self._entries.get(key)
                if type(group) is not _Specialized or group.positions != special:
                    group = self._entries[key] = _Specialized(special, {})
                group.table[tuple([leaves[i] for i in special])] = entry
            else:
                self._entries[key] = entry
            return entry

    def _graph_break(self, key, e: GraphBreak):
        where = _user_line(e)
        message = f"lt.compile({self.__name__}): {e}" + (f" at {where}" if where else "") + \
            "; this can't be compiled"
        if self._fullgraph:
            raise GraphBreak(message + " (fullgraph=True)") from e
        _debug(f"{self.__name__}: graph break ({e}{' at ' + where if where else ''}): falling back to the "
               "lazy path")
        if not self._warned:
            self._warned = True
            warnings.warn(message + "; this function runs on the lazy path (pass fullgraph=True to "
                          "make this an error)", stacklevel=4)
        fallback = _Fallback(where)
        self._entries[key] = fallback
        return fallback

    def _trace(self, spec, kwspec, leaves, bound, values) -> _Trace:
        """Run the body once on placeholders for the argument tensors and the captured tensors
        (whose nodes are swapped for the trace and restored after); `values` gives the Python
        numbers to trace with."""
        numbers: list = []
        captures = discover_tensors(self._fn, numbers=numbers)
        pending = [t._node for t in captures if t._node.op != "buffer"]
        if pending:
            eval_nodes(pending)
        arg_roots: dict[int, int] = {}                   # id(placeholder root tensor) -> leaf index
        bindings: dict[int, tuple] = {}
        call_leaves: list = []
        ph_of: dict[int, Tensor] = {}                    # leaf index -> placeholder tensor
        for i, v in enumerate(values):
            if isinstance(leaves[i], Tensor):
                ph, root = _placeholder_arg(leaves[i], bound[i], f"argument {i}")
                arg_roots[id(root)] = i
                bindings[id(root._node)] = ("arg", i)
                ph_of[i] = (root, root._node)
                call_leaves.append(ph)
            else:
                call_leaves.append(v)
        saved = [(t, t._node, t._version, getattr(t, "_grad", None)) for t in captures]
        rng_state = generator().bit_generator.state
        register_leaf = _grad_leaf_registrar()
        ph_nodes = {}
        for t in captures:
            node = Node.from_buffer(_Placeholder(f"a captured tensor {_meta(t._node)}"), t._node.shape,
                                    t._node.dtype)
            ph_nodes[id(t)] = node
            bindings[id(node)] = ("capture", t)
            grad_leaf = register_leaf is not None and t._is_grad_leaf()
            t._node = node
            t._version += 1                              # views of it re-derive over the placeholder
            if grad_leaf:                                # autograd: the placeholder is the parameter
                register_leaf(node, t)
        try:
            it = iter(call_leaves)
            a = _unflatten(spec, it)
            kw = _unflatten(kwspec, it) if kwspec is not None else {}
            _tracing.active = True
            _traces_running[0] += 1
            try:
                result = self._fn(*a, **kw)
            finally:
                _traces_running[0] -= 1
                _tracing.active = False
            out_leaves_raw: list = []
            out_spec = _flatten(result, out_leaves_raw)
            roots: list[Node] = []
            index: dict[int, int] = {}

            def root(node: Node) -> int:
                if id(node) not in index:
                    index[id(node)] = len(roots)
                    roots.append(node)
                return index[id(node)]

            arg_of = {id(c): i for i, c in enumerate(call_leaves) if isinstance(c, Tensor)}
            out_leaves = []
            for o in out_leaves_raw:
                if not isinstance(o, Tensor):
                    out_leaves.append(("const", o))
                elif id(o) in arg_of:                    # the argument itself (after any write-back)
                    out_leaves.append(("arg", arg_of[id(o)]))
                elif id(o) in ph_nodes:                  # captured state itself
                    out_leaves.append(("capture", o))
                else:
                    out_leaves.append(("out", root(o.node)))
            writes = []
            for i, (r, node) in ph_of.items():
                if r._node is not node:
                    writes.append((("arg", i), root(r._node)))
            for t in captures:
                if t._node is not ph_nodes[id(t)]:
                    writes.append((("capture", t), root(t._node)))
            grad_writes = []                             # .grad set by a backward in the body
            for t, _, _, grad in saved:
                new = getattr(t, "_grad", None)
                if new is not grad:
                    grad_writes.append((t, root(new.node) if isinstance(new, Tensor) else None))
            _check_state(self._fn, captures, out_leaves_raw)
            if rng_state != generator().bit_generator.state:
                raise GraphBreak("random numbers were drawn (lt.rand/randn/dropout): they would be frozen "
                                 "into the compiled program")
            order, key, leaf_nodes = program(roots)
        finally:
            for t, node, version, grad in saved:
                t._node, t._version = node, version
                if grad is not None or getattr(t, "_grad", None) is not None:
                    t._grad = grad
            changed = _restore_numbers(numbers)
        if changed:
            raise GraphBreak(f"the body changed Python number state ({changed}): a replay would not update it "
                             "(keep such counters in tensors, e.g. an optimizer's step count)")
            generator().bit_generator.state = rng_state
        return _Trace(roots, order, key, leaf_nodes, out_spec, out_leaves, writes, bindings, grad_writes)

    def _scalar_bindings(self, spec, kwspec, leaves, bound, traced: _Trace):
        """Which scalar leaves of the program are the Python-number arguments (bound at run time)
        and which arguments are specialized (their values part of the key).

        The body is traced again with every number perturbed: a program leaf whose value follows
        argument j in both traces is bound to j; a changed structure, an error or a value derived
        from an argument by Python arithmetic specializes (numbers then retrace when they change)."""
        numbers = [i for i, v in enumerate(leaves) if type(v) in _NUMBERS]
        if not numbers:
            return {}, ()
        for perturb in (numbers, [i for i in numbers if type(leaves[i]) is float]):
            if not perturb:
                continue
            values = list(leaves)
            for rank, i in enumerate(perturb):
                v = leaves[i]
                values[i] = v + 1 + rank if type(v) is int else v * 1.37 + 0.731 + 0.013 * rank
            try:
                other = self._trace(spec, kwspec, leaves, bound, values)
            except Exception:                            # the perturbed value broke the body
                continue
            if other.key != traced.key or len(other.leaves) != len(traced.leaves):
                continue
            runtime: dict[int, int] = {}
            ok = True
            for a, b in zip(traced.leaves, other.leaves):
                if a.op != "scalar":
                    continue
                j = next((i for i in perturb if type(a.value) is type(leaves[i]) and a.value == leaves[i]
                          and b.value == values[i]), None)
                if j is not None:
                    runtime[id(a)] = j
                elif a.value != b.value:
                    ok = False                           # derived by Python arithmetic
            if ok:
                special = tuple(i for i in numbers if i not in perturb)
                return runtime, special
        return {}, tuple(numbers)

    # ---- messages ----
    def _leaf_names(self, spec, kwspec, args, kwargs) -> list[str]:
        try:
            params = list(inspect.signature(self._fn).parameters)
        except (TypeError, ValueError):
            params = []
        names: list[str] = []
        for i, s in enumerate(spec[1] if type(spec) is not int else [None] * spec):
            _leaf_paths(s, params[i] if i < len(params) and not params[i].startswith("*") else f"args[{i}]",
                        names)
        if kwspec is not None:
            for k, s in zip(kwspec[1], kwspec[2]):
                _leaf_paths(s, k, names)
        return names

    def _reason(self, key, names: list[str], leaves: list) -> str:
        last = self._last_key
        if last is None:
            return "first call"
        old_key, old_names, old_leaves = last
        if old_key[0] != key[0]:
            return f"backend changed from {old_key[0]} to {key[0]}"
        if old_key[4] != key[4]:
            return f"the module's training flag changed from {old_key[4]} to {key[4]}"
        if old_key[5] != key[5]:
            return f"torch's TF32 flags changed (cudnn, matmul allow TF32: {old_key[5]} -> {key[5]})"
        if old_key[1:3] != key[1:3]:
            return "the arguments' structure changed (containers, keyword names)"
        changes = []
        for name, a, b, va, vb in zip(names, old_key[3], key[3], old_leaves, leaves):
            if a != b:
                changes.append(f"{name}: {_describe_sig(a)} -> {_describe_sig(b)}")
            elif isinstance(a, type) and va != vb:
                changes.append(f"{name}: value {va!r} -> {vb!r} (specialized: it shapes the program)")
        return "; ".join(changes) or "a captured tensor changed"


def _meta(n: Node) -> str:
    return f"{n.dtype.name}{list(n.shape)}"


def _restore_numbers(numbers: list) -> str:
    """Put back every Python number of the callable's state the trace changed; describe them."""
    changed = []
    for container, key, value in numbers:
        now = container.get(key) if isinstance(container, dict) else getattr(container, key, value)
        if now is not value and now != value:
            changed.append(f"{type(container).__name__}[{key!r}]: {value!r} -> {now!r}")
            if isinstance(container, dict):
                container[key] = value
            else:
                object.__setattr__(container, key, value)
    return ", ".join(changed[:3]) + (f" and {len(changed) - 3} more" if len(changed) > 3 else "")


def _graph_break_in(e: BaseException) -> GraphBreak | None:
    """The GraphBreak that caused `e` (itself, or in its cause/context chain), if any."""
    seen = 0
    while e is not None and seen < 20:
        if isinstance(e, GraphBreak):
            return e
        e, seen = e.__cause__ or e.__context__, seen + 1
    return None


def _check_state(fn, captures: list[Tensor], outputs: list) -> None:
    """Tensors computed in the body and stored in the function's state by assignment (not in
    place) can't be replayed: the compiled program would never update them."""
    known = {id(t) for t in captures} | {id(o) for o in outputs}
    for t in discover_tensors(fn):
        if id(t) not in known and (t._node.op != "buffer" or isinstance(t._node.buffer, _Placeholder)):
            raise GraphBreak(f"a tensor {_meta(t._node)} computed in the body was stored in the function's "
                             "state by assignment (only in-place updates such as copy_, add_ or x[i] = v "
                             "are replayed)")


def _placeholder_arg(t: Tensor, buffer_node: Node, what: str) -> tuple[Tensor, Tensor]:
    """(the tensor the body sees, its root) for argument tensor `t` bound through `buffer_node`:
    the same shape, dtype and view layout as t, over a placeholder buffer."""
    node = Node.from_buffer(_Placeholder(f"{what} {_meta(t.node)}"), buffer_node.shape, buffer_node.dtype)
    root = Tensor(node)
    n = t.node
    if n.op != "view":
        return root, root
    from .ir.build import view_of
    spec = n.attrs["view"]
    return Tensor(view_of(node, spec), root, spec), root


def _user_line(e: BaseException) -> str:
    """file:line (and source) of the innermost frame outside lazytorch that led to `e` ("" when
    the condition was found after the body returned)."""
    frames = [f for f in traceback.extract_tb(e.__traceback__)
              if not f.filename.startswith(_PACKAGE_DIR) and "/numpy/" not in f.filename]
    if not frames:
        return ""
    f = frames[-1]
    return f"{f.filename}:{f.lineno} ({(f.line or '').strip()})"


class CompiledModule(CompiledFunction):
    """`lt.compile(module)`: calls go through the compiled `module(*args)`; every other attribute
    is the module's (as torch's OptimizedModule, `_orig_mod` is the module)."""

    def __init__(self, module, dynamic=False, fullgraph=False):
        super().__init__(module, dynamic, fullgraph)
        self._orig_mod = module
        self.__name__ = type(module).__name__

    def _guard(self):
        return getattr(self._orig_mod, "training", None)

    def __getattr__(self, name):
        return getattr(self.__dict__["_orig_mod"], name)

    def __setattr__(self, name, value):
        if name.startswith("_"):
            object.__setattr__(self, name, value)
        else:                                            # model.training = False sets the module's
            setattr(self._orig_mod, name, value)


def compile(fn: Callable | None = None, *, dynamic: bool | None = False, fullgraph: bool = False,  # noqa: A001
            mode: str | None = None, backend: str | None = None, options: dict | None = None,
            disable: bool = False):
    """Compile `fn` (a function or a callable object such as a module) for replay; see
    docs/compile.md.  Usable as `lt.compile(fn)`, `@lt.compile` and `@lt.compile(...)`.

    `dynamic`: accepted for torch's signature; lazytorch compiles per shape (each new shape
    retraces).  `fullgraph=True` raises on data-dependent Python code instead of falling back to
    the lazy path.  `mode`, `backend` and `options` (torch.compile's compiler choices) are
    ignored; `disable=True` returns fn unchanged.
    """
    if fn is None:
        return lambda f: compile(f, dynamic=dynamic, fullgraph=fullgraph, mode=mode, backend=backend,
                                 options=options, disable=disable)
    if disable:
        return fn
    if not callable(fn):
        raise TypeError(f"lt.compile: expected a function or a callable module, got {type(fn).__name__}")
    if isinstance(fn, (types.FunctionType, types.MethodType, types.BuiltinFunctionType, functools.partial)):
        return CompiledFunction(fn, dynamic, fullgraph)
    return CompiledModule(fn, dynamic, fullgraph)

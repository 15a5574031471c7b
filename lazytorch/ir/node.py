"""The lazy IR node.

A Node is one value of the program: an op applied to input nodes with attributes, whose shape and
dtype its meta rule computed when it was built.  Leaves are `buffer` (data that exists), `scalar`
(a Python number, passed to kernels at run time, so its value is not part of the structure) and,
inside pass pipelines, `param` (the i-th leaf of a graph being compiled).  A number the library
itself puts in a program (a creation op's fill, tril's diagonal, a composite's 0 or 1) is a
*structural constant* instead: a `scalar` node whose value is also its attribute `value`
(`Node.constant`), so the program's key holds the value, it is no runtime argument, and the
passes see it as the constants they make themselves (folded, a literal in the kernels).

Every node carries `key`, its own structure (op, attributes, shape, dtype) as a tuple that ignores
data, buffer identity and scalar values.  It is computed on first use and kept (nodes the passes
build are never keyed, so they never pay for it); the key of
a whole program (ir/graph.py::program) joins these with where each node's inputs come from, in
one pass over the program.  Keys are exact values, never hashes of them: the graph cache compares
them with ==, so two programs share a compiled program only when their structure is equal
(hash(-1) == hash(-2) in CPython: a key that was a hash once let norm(x, -1) and norm(x, -2) meet).
Attribute values are tagged with their type, so 1, 1.0 and True stay distinct structures.
"""
from __future__ import annotations

import functools
import gc
import math
import os
import sys
import threading

from typing import Any

from .dtypes import DType
from .native import NATIVE

LEAF_OPS = frozenset({"buffer", "scalar", "param"})


def collector_paused(fn=None, *, ends_step: bool = False):
    """`fn` runs with CPython's cyclic garbage collector paused; the collections that come due run
    once after it.  A lazy step's graph is thousands of nodes (and their tuples and dicts) that
    live until the step's values are computed and then die by reference count, not by the
    collector; yet each ~700 allocations started a young collection that walked them again, and
    every few steps a full one walked the whole heap (ResNet-18's lazy training step on cpu:
    mean 104-122 ms against a median of 76-78, the slowest step 220-316 ms; paused in backward and
    evaluation, mean 70-78 ms, slowest 83-117).  Nested calls, and a collector the user disabled,
    are left as they are.  A call is part of a step whose graph lives on after it (backward:
    `defer_collection`, below), or, `ends_step` (evaluation), ends the step."""
    if fn is None:
        return functools.partial(collector_paused, ends_step=ends_step)

    @functools.wraps(fn)
    def paused(*args, **kwargs):
        if not gc.isenabled():
            return fn(*args, **kwargs)
        if not ends_step:
            defer_collection()
        gc.disable()
        try:
            return fn(*args, **kwargs)
        finally:
            if ends_step:
                end_deferral()
            gc.enable()
    return paused


# Between the collector's pauses a step's graph is still alive: the forward's nodes are built
# (no pause: Module calls and the user's code between them), backward's wait for the optimizer's
# evaluation.  A young collection that comes due then walks them and promotes the survivors, and
# every ~50 steps of promoted nodes (with torch imported beside: 256k objects) bring a full
# collection of the heap (174 ms).  ResNet-18's lazy training step on cpu spent 5.3 ms a step in
# the collector, 1.7 of it young, 3.1 full, amortised.  So a Module call or a backward defers
# young collections until the next evaluation ends (by when the step's nodes have died by
# reference count): the first threshold is raised to DEFER_AT net allocations, not switched off,
# so a graph that is never evaluated still gets collected.  A collection already due when a step
# would start deferring runs instead (it finds the last step's survivors, not this step's graph).
# A threshold the user set meanwhile is left as it is (and 0, collection off, is never raised).
DEFER_AT = 100_000
_SAVED: list = [None]          # the thresholds a deferral replaced, or None


def defer_collection() -> None:
    """Raise the collector's first threshold until the next evaluation ends (see above)."""
    if _SAVED[0] is None and gc.isenabled():
        old = gc.get_threshold()
        if 0 < old[0] < DEFER_AT and gc.get_count()[0] <= old[0]:    # (one already due runs now)
            _SAVED[0] = old
            gc.set_threshold(DEFER_AT, *old[1:])


def end_deferral() -> None:
    """Restore the thresholds a deferral replaced (unless the user changed them meanwhile)."""
    old = _SAVED[0]
    if old is not None:
        _SAVED[0] = None
        now = gc.get_threshold()
        if now[0] == DEFER_AT and now[1:] == old[1:]:
            gc.set_threshold(*old)


class Node:
    __slots__ = ("op", "inputs", "attrs", "shape", "dtype", "_key", "buffer", "value", "_origin", "tree",
                 "autograd", "__weakref__")

    def __init__(self, op: str, inputs: tuple["Node", ...], attrs: dict[str, Any],
                 shape: tuple[int, ...], dtype: DType):
        self.op = op
        self.inputs = inputs
        self.attrs = attrs
        self.shape = shape
        self.dtype = dtype
        self.buffer = None
        self.value = None
        self._key = None
        self.tree = self.autograd = None
        self._origin = (SITE.site or user_site()) if TRACE[0] else None

    def __getstate__(self):
        """A copy (copy.deepcopy) is a new value: autograd's record of this node stays behind.  The
        record names this node's leaf tensor and graph, so a copy carrying it would accumulate its
        gradient into the original's .grad (as when records lived in weak tables keyed by node)."""
        state = {name: getattr(self, name) for name in _STATE if hasattr(self, name)}
        state["autograd"] = None
        if "_origin" in state:
            state["_origin"] = self.origin       # "file.py:12": a pickle cannot hold the raw (code, offset)
        return None, state

    @classmethod
    def with_key(cls, op: str, inputs: tuple["Node", ...], attrs: dict[str, Any],
                 shape: tuple[int, ...], dtype: DType, key: tuple) -> "Node":
        """A node whose key (a function of op, attrs, shape and dtype only) the caller already knows:
        the Tensor API's fast path builds the same kinds of node over and over."""
        node = cls.__new__(cls)
        node.op, node.inputs, node.attrs, node.shape, node.dtype = op, inputs, attrs, shape, dtype
        node.buffer = node.value = None
        node._key = key
        node.tree = node.autograd = None
        node._origin = (SITE.site or user_site()) if TRACE[0] else None
        return node

    # ---- leaves ----
    @classmethod
    def computed(cls, buffer, shape: tuple[int, ...], dtype: DType, key: tuple) -> "Node":
        """A buffer leaf holding a value just computed (lt.compile's outputs), its key known:
        no source line (the user's line is the compiled call, not where the value was built)."""
        node = cls.__new__(cls)
        node.op, node.inputs, node.attrs, node.shape, node.dtype = "buffer", (), {}, shape, dtype
        node.value = node._origin = node.tree = node.autograd = None
        node._key, node.buffer = key, buffer
        return node

    @classmethod
    def from_buffer(cls, buffer, shape: tuple[int, ...], dtype: DType) -> "Node":
        node = cls("buffer", (), {}, shape, dtype)
        node.buffer = buffer
        return node

    @classmethod
    def scalar(cls, value, dtype: DType) -> "Node":
        node = cls.__new__(cls)                 # (no source line: a number is not where work happens)
        node.op, node.inputs, node.attrs, node.shape, node.dtype = "scalar", (), {}, (), dtype
        node.buffer = node._origin = node.tree = node.autograd = None
        node._key = _SCALAR_KEYS.get(dtype) or _scalar_key(dtype)
        node.value = value
        return node

    @classmethod
    def constant(cls, value, dtype: DType) -> "Node":
        """A structural constant: the value is part of the structure (the key), not a runtime input."""
        node = cls.__new__(cls)
        node.op, node.inputs, node.attrs, node.shape, node.dtype = "scalar", (), {"value": value}, (), dtype
        node.buffer = node._origin = node.tree = node._key = node.autograd = None
        node.value = value
        return node

    def realize(self, buffer) -> None:
        """Replace this node's history by its computed buffer: the graph is cut here."""
        self.op, self.inputs, self.attrs, self.buffer = "buffer", (), {}, buffer
        self._key = ("buffer", (), self.shape, self.dtype.name)
        self.tree = None
        EPOCH[0] += 1            # every node's tree summary built before now may be stale
        OWN.counts[0] += 1       # (and this thread evaluated: see OWN)

    # ---- where the user built it (formatted when read: most nodes are never shown) ----
    @property
    def origin(self) -> str | None:
        o = self._origin
        if o is None or o.__class__ is str:
            return o
        s = self._origin = format_site(o)
        return s

    @origin.setter
    def origin(self, value) -> None:
        self._origin = value

    # ---- runtime scalars are opaque ----
    # A pass or decomposition that compares a node with a number, or tests its truth, would be
    # reading a runtime value the graph cache does not key on (a program compiled for one value
    # would be reused for another).  Such reads raise: a value a pass must inspect is declared
    # with a non-tensor type in the op's schema (`float p`, `int dim`), which makes it an attribute.
    def __eq__(self, other) -> bool:
        if other is None or isinstance(other, Node):
            return self is other
        raise TypeError(_OPAQUE.format(op=self.op, how=f"compared with {other!r}"))

    def __ne__(self, other) -> bool:
        return not self.__eq__(other)

    __hash__ = object.__hash__

    def __bool__(self) -> bool:
        raise TypeError(_OPAQUE.format(op=self.op, how="tested for truth"))

    @property
    def key(self) -> tuple:
        key = self._key
        if key is None:
            attrs = self.attrs
            key = self._key = (self.op, attrs_key(attrs) if attrs else (), self.shape, self.dtype.name)
        return key

    # ---- queries ----
    @property
    def ndim(self) -> int:
        return len(self.shape)

    @property
    def numel(self) -> int:
        return math.prod(self.shape)

    @property
    def is_leaf(self) -> bool:
        return self.op in LEAF_OPS

    @property
    def is_constant(self) -> bool:
        """A structural constant (Node.constant): a scalar whose value is its attribute."""
        return self.op == "scalar" and bool(self.attrs)

    @property
    def is_input(self) -> bool:
        """A leaf bound at run time (a buffer, a runtime scalar, a param); not a structural constant."""
        return self.op in LEAF_OPS and not self.is_constant

    @property
    def realized(self) -> bool:
        return self.op == "buffer"

    def __repr__(self) -> str:
        return f"Node({self.op}, {self.dtype.short}{list(self.shape)})"


_STATE = tuple(s for s in Node.__slots__ if s not in ("autograd", "__weakref__"))   # (Node.__getstate__)

# ---------------------------------------------------------------- provenance
# Each node built by user code remembers the user's "file:line" that built it (the first frame
# outside this package, as torch.fx's stack-trace summary), so fusion's plan and dumps can say
# which lines a kernel fused.  Passes switch it off (`TRACE[0] = False` inside `tracing(False)`);
# their nodes inherit the origin of the node they replace (passes/rewrite.py).
TRACE = [os.environ.get("LAZYTORCH_PROVENANCE", "1") != "0"]


class _Site(threading.local):
    """The user's site of the Tensor API call running now in this thread (api.py sets it around
    the general route, so the several nodes of one call find it once); None: each node walks."""
    site = None


SITE = _Site()
# Bumped by every realize(): a node's `tree` summary (ir/build.py's fast path) is valid only in the
# epoch it was made in, since a realize below it changes the program it stands for.  Process-wide:
# a realize on any thread cuts the graph every thread's nodes may share.
EPOCH = [0]
# Bumped by everything a build may do besides making nodes -- a read of data (ir/host.py host_value,
# a realized number's value), an in-place update of a tensor argument (tensor.py Tensor._rebind:
# batch_norm's running statistics) --: a build that did any is not recorded for replay
# (ir/replay.py), since replaying only its nodes would skip it or freeze what it read.  Bumped
# through `note_build_effect` only, which counts the effect in OWN too.
BUILD_EFFECTS = [0]


class _Own(threading.local):
    """This thread's own part of EPOCH and BUILD_EFFECTS: `counts` = [realizes, build effects] it
    made itself.  Check mode (ir/replay.py CHECK) asks whether the general build it runs beside a
    replay had effects; the process-wide counters also move with other threads' evals and builds
    meanwhile, which would be false alarms.  (Learning a recording keeps comparing the process-wide
    ones: refusing to record because another thread acted is merely conservative, and another
    thread's realize may have cut a node the build read.)"""

    def __init__(self) -> None:             # (run once per thread, on its first use)
        self.counts = [0, 0]


OWN = _Own()


def effects_now() -> tuple[int, int]:
    """(EPOCH, BUILD_EFFECTS) now, process-wide: what a memo's `learn` compares with after the
    general build ran (unchanged: no eval and no effect anywhere meanwhile, so the build had none)."""
    return EPOCH[0], BUILD_EFFECTS[0]


def own_effects_now() -> tuple[int, int]:
    """This thread's (realizes, build effects) so far: what check mode compares with after the
    general build it runs beside a replay (unchanged: that build evaluated nothing and had no effect)."""
    counts = OWN.counts
    return counts[0], counts[1]


def note_build_effect() -> None:
    """Count an effect of the build running now (see BUILD_EFFECTS), process-wide and for this thread."""
    BUILD_EFFECTS[0] += 1
    OWN.counts[1] += 1


_PACKAGE = os.path.dirname(os.path.dirname(os.path.abspath(__file__))) + os.sep
_LINES: dict[tuple, str] = {}               # (code object, instruction offset) -> "file.py:12", interned

# id(code object) -> whether it is lazytorch's own.  Keyed by id, not by the code object: hashing
# a code object hashes its constants and names on every lookup (~1,000 instructions, once per node
# built).  _CODES keeps the classified code objects alive, so an id is never reused meanwhile.
_INSIDE: dict[int, bool] = {}
_CODES: list = []
MAX_CODES = 1 << 16                         # (code made by exec/eval in a loop: start over past this)


def inside(code) -> bool:
    """Whether `code` is lazytorch's own (classified once per code object; see _INSIDE)."""
    if len(_CODES) >= MAX_CODES:
        _INSIDE.clear()
        _CODES.clear()
    mine = _INSIDE[id(code)] = code.co_filename.startswith(_PACKAGE)
    _CODES.append(code)
    return mine


def user_site(depth: int = 2) -> tuple | None:
    """(code object, instruction offset) of the first frame outside this package, from `depth`
    frames up (the caller's caller by default): a node's origin, kept raw (the line number is
    looked up only when Node.origin formats it: most nodes are never shown); None where no frame
    is outside (or the stack is not `depth` deep: a node built from C with no Python caller)."""
    try:
        f = sys._getframe(depth)
    except ValueError:
        return None
    known = _INSIDE
    while f is not None:
        code = f.f_code
        mine = known.get(id(code))
        if mine is None:
            mine = inside(code)
        if not mine:
            return (code, f.f_lasti)
        f = f.f_back
    return None


user_site_py = user_site
if NATIVE is not None:                      # the same walk in C (ir/native.py)
    user_site = NATIVE.SiteFinder(inside=_INSIDE, classify=inside)


def format_site(site: tuple) -> str:
    """"file.py:12" of a raw site (code object, instruction offset), interned."""
    s = _LINES.get(site)
    if s is None:
        code, lasti = site
        line = next((line for start, end, line in code.co_lines() if start <= lasti < end), None)
        s = _LINES[site] = f"{os.path.basename(code.co_filename)}:{line or code.co_firstlineno}"
    return s


class tracing:
    """`with tracing(False):` builds nodes without recording where (compiles run under it).
    TRACE is one flag for every thread (the node build reads it on its hot path), so compiles on
    several threads at once share one count: the state before the first is restored after the
    last, whatever order they end in (each saving and restoring its own would leave it off).
    `_offs` counts the times it switched provenance off (provenance_mark)."""
    _depth, _saved, _lock, _offs = [0], [True], threading.Lock(), [0]

    def __init__(self, on: bool):
        self.on = on

    def __enter__(self):
        with self._lock:
            if self._depth[0] == 0:
                self._saved[0] = TRACE[0]
            self._depth[0] += 1
            was = TRACE[0]
            TRACE[0] = self.on and was
            if was and not self.on:         # (counted after the switch: provenance_mark reads in the other order)
                self._offs[0] += 1

    def __exit__(self, *exc):
        with self._lock:
            self._depth[0] -= 1
            if self._depth[0] == 0:
                TRACE[0] = self._saved[0]


def provenance_mark() -> int | None:
    """None while provenance is off, else how many times `tracing` switched it off so far: equal
    marks before and after some work mean provenance stayed on all along.  (Check mode compares a
    replay's origins with the general build's only then: a compile on another thread switches the
    one flag off for every thread meanwhile, and the nodes built then name no line.)"""
    offs = tracing._offs[0]
    return offs if TRACE[0] else None


_OPAQUE = ("a lazy {op} node was {how}: its value is a runtime argument that no pass may inspect "
           "(the graph cache does not key on it); declare the argument structural in the op's schema "
           "(a float/int/bool/str parameter becomes an attribute)")

_SCALAR_KEYS: dict[DType, tuple] = {}      # scalar leaves are built on every op with a Python number


def _scalar_key(dtype: DType) -> tuple:
    key = _SCALAR_KEYS[dtype] = ("scalar", (), (), dtype.name)
    return key


def attrs_key(attrs: dict[str, Any]) -> tuple:
    """Attributes as an exact, comparable value: (name, type, value) per attribute (floats by repr,
    so -0.0 and 0.0 differ and a NaN equals itself)."""
    return tuple([(k, v.__class__, repr(v) if v.__class__ is float else v) for k, v in attrs.items()])


def type_str(node: Node) -> str:
    """Compact type as in torch.fx dumps: f32[64, 128]."""
    return f"{node.dtype.short}[{', '.join(map(str, node.shape))}]"

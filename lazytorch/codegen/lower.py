"""Lowering: a kernel launch of the plan (a group of nodes) -> a kernel_ir.Kernel.

Every group node is *elem* (evaluated per domain element) or *row* (evaluated once per outer
index: reductions and pointwise ops over their results).  Row kernels (softmax, layer_norm) need
several passes over the inner domain: a reduction whose input needs the result of another
reduction runs in a later pass, and elem values are recomputed in each pass that needs them (the
row is in cache).  Reads become loads through an Access (strides over the domain); loads whose
strides are all zero (scalar params, broadcast constants) and ops over them are hoisted to the
kernel stage.
"""
from __future__ import annotations

import contextlib
import math
import sys
import threading

from ..ir import dtypes as D
from ..ir import views as V
from ..ir.dtypes import DType
from ..ir.meta import compute_dtype
from ..ir.node import Node
from ..ir.promotion import opmath
from ..ir.registry import get
from .cost import FUNCTIONS
from .op_classes import op_classes
from .kernel_ir import I32_LIMIT, Access, Arg, Kernel, Op, Reduce, Stage, Store

PASS_THROUGH = frozenset({"contiguous", "clone"})
# ops worth keeping in a row cache rather than recomputing in a later pass over the row
COSTLY = FUNCTIONS
ROW_CACHE_BYTES = 1 << 18      # per thread (kept on its stack)


class Unsupported(Exception):
    """The group holds something this code generator does not lower (the backend falls back)."""


register = opmath     # the dtype a value is computed in (ir/promotion.py decides: half -> float32)


def accumulator(op: str, node: Node, value_dtype: DType) -> DType:
    if op in ("argmax", "argmin"):
        return value_dtype
    return register(node.dtype)


def supports(launch) -> bool:
    supported = op_classes().supported
    return all(n.op in supported for n in launch.nodes)


def lower(launch, name: str | None = None, row_cache: bool = False) -> Kernel:
    """The Kernel of a `kernel` launch; raises Unsupported for ops without a lowering.

    With `row_cache` (targets where one thread walks a whole row: C), an elem value with costly
    math that a later pass over the row needs again is kept in a per-row buffer (Kernel.row_cache)
    instead of being recomputed (softmax keeps exp(x - max) from its sum pass)."""
    group = {id(n) for n in launch.nodes}
    for n in launch.nodes:
        if n.op not in op_classes().supported:
            raise Unsupported(f"{n.op} has no kernel lowering")
        if n.op == "view" and id(n.inputs[0]) in group and _broadcast_dims(n) is None:
            raise Unsupported("a view that reorders a value computed in the same kernel")
    with _recursion_depth(len(launch.nodes)):
        return _Lowering(launch, name or launch.name, row_cache).run()


FRAMES_PER_NODE = 4     # value -> compute -> (comprehension) -> value: frames per node of a chain
_depth_lock = threading.Lock()
_depth_state = {"active": 0, "saved": 0}     # lowerings running, the limit before the first one


@contextlib.contextmanager
def _recursion_depth(nodes: int):
    """Let `value` recurse along the longest chain of a group while a lowering runs: a fused chain
    of a few hundred nodes (a lazy loop's body) passes Python's default limit of 1000 frames.
    From Python 3.11 on, Python-to-Python calls use no C stack, so a higher limit costs nothing;
    the limit is restored when the last lowering running (in any thread) ends."""
    need = 1000 + FRAMES_PER_NODE * nodes
    with _depth_lock:
        if _depth_state["active"] == 0:
            _depth_state["saved"] = sys.getrecursionlimit()
        _depth_state["active"] += 1
        if sys.getrecursionlimit() < need:
            sys.setrecursionlimit(need)
    try:
        yield
    finally:
        with _depth_lock:
            _depth_state["active"] -= 1
            if _depth_state["active"] == 0:
                sys.setrecursionlimit(_depth_state["saved"])


def _broadcast_dims(view: Node) -> tuple[int, ...] | None:
    """For a view that only broadcasts its input (inserts or expands dims anywhere, keeping the
    input's element order), the view dim that holds each input dim; None for any other view.
    Size-1 input dims hold no data: they map to the view dim of their right neighbour (or 0)."""
    spec, base = view.attrs["view"], view.inputs[0]
    if spec.offset:
        return None
    cont = V.contiguous_strides(base.shape)
    j = len(spec.shape)
    dims: list[int] = []
    for k in reversed(range(len(base.shape))):
        if base.shape[k] == 1:
            dims.append(min(j, len(spec.shape) - 1) if spec.shape else 0)
            continue
        j -= 1
        while j >= 0 and not (spec.strides[j] == cont[k] and spec.shape[j] == base.shape[k]):
            if spec.strides[j] != 0 and spec.shape[j] != 1:
                return None
            j -= 1
        if j < 0:
            return None
        dims.append(j)
    if any(spec.strides[i] and spec.shape[i] != 1 for i in range(j if dims else len(spec.shape))):
        return None
    return tuple(reversed(dims))


class _Lowering:
    def __init__(self, launch, name: str, row_cache: bool = False):
        self.launch, self.name = launch, name
        self.use_row_cache = row_cache
        self.row_cache: list[DType] = []           # dtypes of the per-row buffers
        self.cached: dict[int, tuple[int, Stage]] = {}   # node -> (buffer slot, stage that fills it)
        self.computed_in: dict[int, tuple[Stage, str]] = {}   # elem node -> (first elem stage, var)
        self.I = tuple(launch.domain)
        self.R = tuple(launch.reduce_dims)
        self.K = tuple(d for d in range(len(self.I)) if d not in self.R)
        self.group = {id(n) for n in launch.nodes}
        self.reads = {id(n): i for i, (n, _) in enumerate(launch.reads)}
        self.args = [Arg(f"a{i}", b.dtype, "in", b.numel) for i, (_, b) in enumerate(launch.reads)]
        self.args += [Arg(f"a{len(self.args) + i}", b.dtype, "out", b.numel)
                      for i, (_, b) in enumerate(launch.writes)]
        self.raw_access: list[tuple[int | None, tuple[int, ...], int, bool]] = []   # (arg, I-strides, offset, clamp)
        self.access_at: dict[tuple, int] = {}     # raw access -> its index in raw_access
        self.memo: dict = {}
        self.nvar = 0

    # ---------------------------------------------------------------- scopes and levels
    def classify(self) -> None:
        nodes = self.launch.nodes
        scope: dict[int, str | None] = {}
        for n in nodes:
            if n.op in op_classes().reductions:
                scope[id(n)] = "row"
            elif n.op == "view":
                scope[id(n)] = None
            else:
                inner = [scope[id(i)] for i in n.inputs if id(i) in self.group]
                inner = [s for s in inner if s is not None]
                row = "elem" not in inner and self._row_shaped(n.shape)
                scope[id(n)] = ("row" if row else "elem") if inner else None
        consumers: dict[int, list[Node]] = {}
        for n in nodes:
            for i in n.inputs:
                consumers.setdefault(id(i), []).append(n)
        # nodes over external reads only: decided by their consumers, and their values are
        # indexed in the consumer's space (a (5,) operand of a (1, 5) row value maps to its dims)
        self.floating = {id(n) for n in nodes if scope[id(n)] is None and n.op != "view"}
        for n in reversed(nodes):
            if scope[id(n)] is None:
                users = consumers.get(id(n), [])
                kinds = {"elem" if u.op in op_classes().reductions else scope[id(u)] for u in users}
                if "elem" in kinds:
                    scope[id(n)] = "elem"
                elif self._row_shaped(n.shape) and ("row" in kinds or not users):
                    scope[id(n)] = "row"
                else:
                    scope[id(n)] = "elem"
        self.scope = scope
        level: dict[int, int] = {}
        for n in nodes:
            ins = [level.get(id(i), 0) for i in n.inputs]
            level[id(n)] = max(ins, default=0) + (1 if n.op in op_classes().reductions else 0)
        self.level = level   # row nodes: passes needed before they exist; elem nodes: passes before

    def _row_shaped(self, shape) -> bool:
        keep = tuple(1 if d in self.R else s for d, s in enumerate(self.I))
        drop = tuple(self.I[d] for d in self.K)
        return bool(self.R) and tuple(shape) in (keep, drop)

    def space(self, n: Node) -> tuple[int, ...]:
        """The domain dims that the dims of group node n's value index, right-aligned."""
        if self.scope[id(n)] == "elem" or len(n.shape) == len(self.I):
            return tuple(range(len(self.I)))
        return self.K

    # ---------------------------------------------------------------- emission helpers
    def var(self, prefix: str = "v") -> str:
        self.nvar += 1
        return f"{prefix}{self.nvar}"

    def emit(self, stage: Stage, op: str, args, dtype: DType, **attrs) -> str:
        v = self.var()
        stage.ops.append(Op(v, op, tuple(args), dtype, attrs))
        return v

    def stage_of(self, args) -> Stage:
        """Kernel-scope values hoist ops over them out of every loop."""
        return self.kernel_stage if all(a in self.kernel_vars for a in args) else None

    def cast(self, v: str, src: DType, dst: DType, stage: Stage, to: DType | None = None) -> str:
        """v (register dtype src) as register dtype dst; `to`: the dtype the value is rounded to on
        the way (a `to` node's own dtype: a cast to f16 computes in f32 but rounds to f16)."""
        to = dst if to is None else to
        if src == dst and to == dst:
            return v
        st = self.kernel_stage if v in self.kernel_vars else stage
        out = self.emit(st, "cast", [v], dst, src=src, to=to)
        if st is self.kernel_stage:
            self.kernel_vars.add(out)
        return out

    def access(self, arg: int | None, shape, strides, offset: int, space: tuple[int, ...], clamp: bool = False) -> int:
        full = [0] * len(self.I)
        dims = space[len(space) - len(shape):] if shape else ()
        for k, d in enumerate(dims):
            if shape[k] != 1:
                full[d] = strides[k]
        key = (arg, tuple(full), offset, clamp)
        at = self.access_at.get(key)
        if at is None:
            at = self.access_at[key] = len(self.raw_access)
            self.raw_access.append(key)
        return at

    # ---------------------------------------------------------------- values
    def value(self, n: Node, stage: Stage, space: tuple[int, ...], scope: str) -> tuple[str, DType]:
        """(var, register dtype) of node n, consumed in `space` from a stage of `scope`."""
        if n.op == "view" and id(n) not in self.reads and id(n.inputs[0]) in self.group:
            # a broadcast of a group value: the input's dims are some of the view's dims
            dims = space[len(space) - len(n.shape):]
            inner = tuple(dims[j] for j in _broadcast_dims(n)) if dims else ()
            if id(n.inputs[0]) not in self.floating and inner != space[len(space) - len(inner):] \
                    and not self.row_broadcast(n):
                raise Unsupported("a broadcast of a computed value that is not right-aligned")
            return self.value(n.inputs[0], stage, inner, scope)
        if id(n) in self.reads or n.op == "view":
            return self.load(n, stage, space, scope)
        if n.op in PASS_THROUGH:
            return self.value(n.inputs[0], stage, space, scope)
        if self.scope[id(n)] == "row":
            if id(n) not in self.row_values:     # reductions are entered by reduce()
                self.row_values[id(n)] = self.compute(n, self.row_stages[self.level[id(n)]], space)
            return self.row_values[id(n)]
        key = (id(n), id(stage), space if id(n) in self.floating else None)
        if key not in self.memo:
            self.memo[key] = self.from_row_cache(n, stage) or self.compute(n, stage, space)
            if stage.scope == "elem" and id(n) not in self.floating:
                self.computed_in.setdefault(id(n), (stage, self.memo[key][0]))
        return self.memo[key]

    def row_broadcast(self, n: Node) -> bool:
        """View n broadcasts a row value (a reduction's, keepdim) back over the reduced dims: its
        value is the row's wherever its kept dims sit (a channel's sum over N, H, W broadcast over
        them: BatchNorm's backward; a window's sum over its kernel: a pooling's backward)."""
        x = n.inputs[0]
        return (self.scope.get(id(x)) == "row" and len(x.shape) == len(n.shape) == len(self.I)
                and all(x.shape[d] == 1 for d in self.R) and all(x.shape[d] == n.shape[d] for d in self.K))

    def from_row_cache(self, n: Node, stage: Stage) -> tuple[str, DType] | None:
        """n's value from the row buffer an earlier pass filled, if it is worth keeping there."""
        first = self.computed_in.get(id(n))
        if (not self.use_row_cache or first is None or first[0] is stage or first[1] in self.kernel_vars
                or not self.costly(n)):
            return None
        dt = register(n.dtype)
        if id(n) not in self.cached:
            size = sum(d.itemsize for d in self.row_cache + [dt]) * _size(self.R, self.I)
            if size > ROW_CACHE_BYTES:
                return None
            self.cached[id(n)] = (len(self.row_cache), first[0])
            self.row_cache.append(dt)
            first[0].ops.append(Op("", "row_put", (first[1],), dt, {"slot": self.cached[id(n)][0]}))
        return self.emit(stage, "row_get", [], dt, slot=self.cached[id(n)][0]), dt

    def costly(self, n: Node) -> bool:
        key = ("costly", id(n))
        if key not in self.memo:
            self.memo[key] = n.op in COSTLY or any(
                id(i) in self.group and i.op != "view" and self.scope.get(id(i)) == "elem" and self.costly(i)
                for i in n.inputs)
        return self.memo[key]

    def load(self, n: Node, stage: Stage, space, scope: str, guard: str | None = None) -> tuple[str, DType]:
        """A load of n (a read or a view of one).  A clamped view's index is clipped to the buffer,
        unless `guard` (a bool var) is true exactly where it lies inside: then the load runs only
        there (where(inside, clamped view, fill): a masked vector load, no clipping)."""
        clamp = False
        if n.op == "view" and id(n) not in self.reads:
            base, spec = n.inputs[0], n.attrs["view"]
            clamp = "clamp" in n.attrs and guard is None          # (ir/build.py clamped_view)
        else:
            base, spec = n, V.contiguous(n.shape)
        arg = self.reads[id(base)]
        acc = self.access(arg, spec.shape, spec.strides, spec.offset, space, clamp)
        strides = self.raw_access[acc][1]
        if guard is not None:
            target = stage
        elif not any(strides):
            target = self.kernel_stage
        elif scope == "row":
            target = self.row_stages[0]
        else:
            target = stage
        key = ("load", acc, id(target), guard)
        if key not in self.memo:
            extra = {"guard": guard} if guard is not None else {}
            v = self.emit(target, "load", [], register(base.dtype), access=acc, storage=base.dtype, **extra)
            if target is self.kernel_stage:
                self.kernel_vars.add(v)
            self.memo[key] = (v, register(base.dtype))
        return self.memo[key]

    def compute(self, n: Node, stage: Stage, space: tuple[int, ...] | None = None) -> tuple[str, DType]:
        sp = space if id(n) in self.floating and space is not None else self.space(n)
        scope = self.scope[id(n)]
        out = register(n.dtype)
        if n.op == "scalar":      # a structural constant of the program (a runtime scalar is a param)
            v = self.emit(self.kernel_stage, "const", [], out, value=n.value)
            self.kernel_vars.add(v)
            return v, out
        if n.op == "full":
            v, dt = self.value(n.inputs[0], stage, sp, scope)
            return self.cast(v, dt, out, stage), out
        if n.op == "iota":
            dim = len(sp) - len(n.shape) + n.attrs["dim"]     # n's dims are right-aligned in sp
            acc = self.access(None, (n.shape[n.attrs["dim"]],), (1,), 0, sp[dim:dim + 1])
            return self.emit(stage, "index", [], out, access=acc), out
        if n.op == "to":
            v, dt = self.value(n.inputs[0], stage, sp, scope)
            return self.cast(v, dt, out, stage, to=n.dtype), out
        if n.op == "where" and _padded_read(n.inputs[1]) and id(n.inputs[1]) not in self.reads:
            c, cdt = self.value(n.inputs[0], stage, sp, scope)
            c = self.cast(c, cdt, D.bool_, stage)
            ins = [(c, D.bool_), self.load(n.inputs[1], stage, sp, scope, guard=c),
                   self.value(n.inputs[2], stage, sp, scope)]
        else:
            ins = [self.value(i, stage, sp, scope) for i in n.inputs]
        if n.op == "where":
            args = [self.cast(ins[0][0], ins[0][1], D.bool_, stage)]
            args += [self.cast(v, dt, out, stage) for v, dt in ins[1:]]
            res_dt = out
        else:
            ct = register(compute_dtype(get(n.op), list(n.inputs)))
            args = [self.cast(v, dt, ct, stage) for v, dt in ins]
            res_dt = D.bool_ if n.op in op_classes().bool_result else ct
        st = self.stage_of(args) or stage
        r = self.emit(st, n.op, args, res_dt)
        if st is self.kernel_stage:
            self.kernel_vars.add(r)
        return self.cast(r, res_dt, out, stage), out

    # ---------------------------------------------------------------- driver
    def run(self) -> Kernel:
        self.classify()
        writes = self.launch.writes
        full = tuple(range(len(self.I)))
        elem_out = [(n, i) for i, (n, _) in enumerate(writes) if self.scope.get(id(n)) == "elem"]
        row_out = [(n, i) for i, (n, _) in enumerate(writes) if self.scope.get(id(n)) == "row"]
        reductions = [n for n in self.launch.nodes if n.op in op_classes().reductions]
        passes = max([self.level[id(r)] for r in reductions] +
                     [self.level[id(n)] + 1 for n, _ in elem_out] + [1])
        self.kernel_stage = Stage("kernel")
        self.kernel_vars: set[str] = set()
        self.row_stages = [Stage("row") for _ in range(passes + 1)]
        elem_stages = [Stage("elem") for _ in range(passes)]
        self.row_values: dict[int, tuple[str, DType]] = {}
        for p, elem in enumerate(elem_stages, start=1):
            for r in reductions:
                if self.level[id(r)] == p:
                    self.reduce(r, elem)
            for n, i in elem_out:
                if self.level[id(n)] + 1 == p:
                    v, dt = self.value(n, elem, full, "elem")
                    self.store(elem, i, v, dt, full)
        for n, i in row_out:
            v, dt = self.value(n, self.row_stages[self.level[id(n)]], self.space(n), "row")
            self.store(self.row_stages[self.level[id(n)]], i, v, dt, self.space(n))
        stages = [self.kernel_stage, self.row_stages[0]]
        for elem, row in zip(elem_stages, self.row_stages[1:]):
            stages += [elem, row]
        return self.finish(stages)

    def reduce(self, r: Node, elem: Stage) -> None:
        x = r.inputs[0]
        v, dt = self.value(x, elem, tuple(range(len(self.I))), "elem")
        acc_dt = accumulator(r.op, r, dt)
        if r.op in ("any", "all"):
            v = self.cast(v, dt, D.bool_, elem)
        elif r.op not in ("argmax", "argmin"):
            v = self.cast(v, dt, acc_dt, elem)
        acc = self.var("acc")
        index = self.var("idx") if r.op in ("argmax", "argmin") else None
        elem.reduces.append(Reduce(acc, r.op, v, acc_dt, dt, index))
        result = index if index else acc
        res_dt = D.int64 if index else acc_dt
        self.row_values[id(r)] = (result, res_dt)

    def store(self, stage: Stage, i: int, v: str, dt: DType, space) -> None:
        """Store v to write i; the store itself narrows registers to the storage type."""
        buf = self.launch.writes[i][1]
        v = self.cast(v, dt, register(buf.dtype), stage)
        acc = self.access(len(self.launch.reads) + i, buf.shape, V.contiguous_strides(buf.shape), 0, space)
        stage.stores.append(Store(acc, v, buf.dtype))

    # ---------------------------------------------------------------- domain
    def finish(self, stages: list[Stage]) -> Kernel:
        inner_dims = list(self.R) if self.R else list(range(len(self.I)))
        outer_dims = list(self.K) if self.R else []
        strides = [s for _, s, _, _ in self.raw_access]
        outer = _merge(outer_dims, self.I, strides)
        inner = _merge(inner_dims, self.I, strides)
        accesses = []
        for arg, s, off, clamp in self.raw_access:     # (a merged dim steps by the stride of its last dim)
            accesses.append(Access(arg, tuple(s[g[-1]] for g in outer), tuple(s[g[-1]] for g in inner), off, clamp))
        osz = tuple(_size(g, self.I) for g in outer)
        isz = tuple(_size(g, self.I) for g in inner)
        cont = V.contiguous_strides(osz + isz)
        contiguous = all(not a.clamp and (not any(a.outer + a.inner) or a.outer + a.inner == cont) for a in accesses)
        return Kernel(self.name, self.launch.pattern, self.args, osz, isz, accesses, stages,
                      _index_type(self.I, self.args, accesses, osz, isz), contiguous, self.row_cache)


def _padded_read(n: Node) -> bool:
    """A clamped view read by a `where` whose condition is true exactly where it lies inside its
    buffer: the only reader ir/build_conv.py padded_windows gives one."""
    return n.op == "view" and "clamp" in n.attrs


def _merge(dims: list[int], I, strides) -> list[list[int]]:
    """Groups of adjacent dims (size-1 dims dropped) that every access walks linearly."""
    groups: list[list[int]] = []
    for d in dims:
        if I[d] == 1:
            continue
        if groups:
            last = groups[-1][-1]
            if all(s[last] == s[d] * I[d] for s in strides):
                groups[-1].append(d)
                continue
        groups.append([d])
    return groups


def _size(dims, I) -> int:
    """The number of elements of the domain I's dims `dims`."""
    return math.prod(I[d] for d in dims)


def _index_type(I, args, accesses, osz, isz) -> str:
    far = max([math.prod(I)] + [a.numel for a in args] +
              [abs(a.offset) + sum(abs(st) * max(n - 1, 0) for st, n in zip(a.outer + a.inner, osz + isz))
               for a in accesses])
    return "i32" if far <= I32_LIMIT else "i64"

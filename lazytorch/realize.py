"""The driver: the one place that turns tensors into a program and a plan, and runs it.

`program_for` collects the pending roots (plus the pending values live Python tensors hold in the
same pending graph: see `LiveTensors`), `plan_for` compiles a program (normalize leaves to params,
the passes with this backend's options, fusion into a KernelPlan), `eval_nodes` looks the program
up in the graph cache (graph_cache.py, keyed on structure and backend, not data), compiles it on a
miss (backend.prepare), runs it on the current leaf buffers and scalar values, and replaces each
root by its buffer so the graph is cut there.  `kernel_plan`, `dump_after` and `show_kernels`
inspect programs through the same functions, so what they show is what eval runs.

What passes need from the runtime arrives explicitly in `pipeline.Options` (`options_for`): the
backend's buffer cap and the reference executor as constant folding's evaluator.

Long programs do not pass silently: a compile that runs longer than PROGRESS_AFTER seconds prints
a line on stderr (and one when it ends), and the first program above WARN_NODES nodes warns once,
naming the tensor and the user's line that built it, and how to cut its history (`lt.eval`).
"""
from __future__ import annotations

import functools
import itertools
import operator
import os
import threading
import warnings
import weakref
from collections import Counter
from dataclasses import replace
from typing import Any, Callable, Container, Iterable

import numpy as np

from .graph_cache import CACHE, ProgramKey
from .ir import dtypes as D
from .ir import views as V
from .ir.graph import Positions, Program, leaf_args, pending_positions, program, reach_memo, reaches
from .ir.node import EPOCH, LEAF_OPS, Node, collector_paused, type_str
from .passes.decompose import has_composites
from .passes.normalize import normalize
from .passes.pipeline import FUSE, Options, compile_plan, dump_after as _dump_after
from .passes.plan import KernelPlan
from .runtime import backend_name, get_backend
from .runtime.backend import Backend
from .runtime.progress import PROGRESS_AFTER, Progress
from .runtime.reference import run_node

WARN_NODES = int(os.environ.get("LAZYTORCH_WARN_NODES", "20000"))   # program size that warns once
_warned = [False]


class Compiled:
    """A cached program: its plan and the backend's executable for it."""

    __slots__ = ("plan", "executable")

    def __init__(self, plan: KernelPlan, executable: Any):
        self.plan, self.executable = plan, executable


# ---------------------------------------------------------------- programs

def pending_roots(nodes: Iterable[Node]) -> list[Node]:
    """The nodes with something to compute, once each: not stored already, and not a leaf (a
    number or param is a value as it is: no tensor holds one, and a program returning one would
    store a float64 number on devices that have none)."""
    roots, seen = [], set()
    for n in nodes:
        if n.op not in LEAF_OPS:        # (a stored node is a "buffer" leaf)
            i = id(n)
            if i not in seen:
                seen.add(i)
                roots.append(n)
    return roots


def synced_roots(prog: Program, live: Iterable[Node]) -> list[Node]:
    """The pending values in `live` that share pending nodes with the program (LTC's mark_step,
    limited to one pending graph): storing them too cuts the history wherever a user can still
    reach, so a loop's next step starts from buffers instead of the whole past.  (An eval of live
    tensors asks `LIVE`, which finds the same ones without walking unrelated tensors.)

    A live node inside the program joins directly; one outside joins when its pending graph reads
    a node of the program (walked once per call, memoised across live nodes).  They come in
    `in_program_order`."""
    inside = pending_positions(prog.order)
    memo = reach_memo()
    return in_program_order([n for n in live if n.op not in LEAF_OPS and reaches(n, inside, memo) >= 0],
                            inside, memo)


def in_program_order(nodes: list[Node], inside: Positions, memo: Positions) -> list[Node]:
    """`nodes` (each reaching the program) by the position of the first program node each one's
    pending graph reads (itself where it is inside): an order of the program's structure (values
    that first read the same node keep the order they were found in).
    The synced values are roots of the program compiled next, so their order is part of its key;
    the order they were found in depends on which live tensors an earlier eval parked, and an
    eval inside one step of a loop (a counter's flush, a print) changed it for every later step:
    one more compile of the whole step (ResNet-18: 5,365 nodes, 1.4 s)."""
    if len(nodes) < 2:
        return nodes
    return sorted(nodes, key=lambda n: reaches(n, inside, memo))


def program_for(nodes: Iterable[Node], live: "Iterable[Node] | LiveTensors" = (),
                pending: bool = False) -> tuple[list[Node], Program]:
    """(roots, program) of the pending values of `nodes` and of the live values synced with them
    (`live`: LIVE, the live tensors, or the pending nodes to consider).  `pending`: `nodes` is a
    list of pending_roots already."""
    roots = nodes if pending else pending_roots(nodes)
    if not roots:
        return roots, Program([], (), [])
    prog = program(roots)
    ids = set(map(id, roots))
    if live is LIVE:
        more = LIVE.synced(prog, roots)
    else:
        # (a live root itself, the common case, adds nothing: only other pending values are looked at)
        others = [n for n in live if id(n) not in ids and n.op not in LEAF_OPS]
        more = synced_roots(prog, others) if others else []
    more = [n for n in more if id(n) not in ids and not ids.add(id(n))]
    if more:
        roots = roots + more
        prog = program(roots, prog)          # (the walk goes on from the first roots' program)
    return roots, prog


# ---------------------------------------------------------------- live tensors
# An eval also stores the pending values of live tensors whose pending graphs share a node with
# its program (`synced_roots`).  Finding them must not cost a look at every live tensor per eval:
# a user holding N independent pending results and evaluating them one at a time would pay N^2.
# So each live tensor is looked at once per value it is given:
#  - `fresh`: weak references to the pending tensors made or rebound since an eval last looked
#    (tensor.py appends one per tensor: its `_LIVE` is this list).  The next eval walks each
#    against its program (`reaches`): those that share a node are stored with it, the others
#    are parked.
#  - parked tensors are indexed by the nodes of their pending graphs, with reverse edges (which
#    pending nodes read each node) and the tensors holding each node.  An eval climbs from its
#    program's nodes up through pending readers to the parked tensors holding one: exactly those
#    whose graphs share a node with it, and nothing unrelated is looked at.  A node only loses
#    inputs after being indexed (realize() cuts them), so a climb stops at a realized reader; a
#    tensor given another value is tracked again (fresh), and its old holding no longer counts.
#    The climb runs first: a fresh tensor's walk stops at an indexed node it did not meet, whose
#    whole graph the index holds and so reads no node of the program (`_apart`).
# The index holds weak references only: it keeps no graph or buffer alive.  What no climb can use
# is swept once as much was added as was kept by the last sweep (amortised: O(1) per addition).
SWEEP_AT = 4096


class _Entry:
    """A node of a parked graph: the pending nodes that read it, the parked tensors that hold it
    (with their parking order)."""

    __slots__ = ("node", "readers", "holders")

    def __init__(self, node: Node):
        self.node = weakref.ref(node)
        self.readers: list[weakref.ref] = []
        self.holders: list[tuple[int, weakref.ref]] = []


class LiveTensors:
    """The live pending tensors an eval may have to store with its program (see above).  One
    instance, `LIVE`; `walked` counts the nodes its searches looked at (for tests)."""

    def __init__(self) -> None:
        self.fresh: list[weakref.ref] = []
        self.index: dict[int, _Entry] = {}      # id(node) -> its entry (checked: ids are reused)
        self.parked_epoch = -1                  # EPOCH when a tensor was last parked (process-wide, as trees')
        self.added = 0                          # entries and holders added since the last sweep
        self.sweep_at = SWEEP_AT
        self.walked = 0
        self._order = itertools.count()         # parking order: synced values stay oldest first
        self._lock = threading.RLock()
        # `alone`'s common case in C (ir/_fastpath.c AloneTaker), installed by tensor.py, which
        # defines the Tensor type it reads; None: the Python below
        self.take_alone = None

    # ---- what evals ask
    def synced(self, prog: Program, roots: list[Node]) -> list[Node]:
        """The pending values of live tensors, other than `roots`, that share pending nodes with
        `prog` (parked ones oldest first, then fresh ones)."""
        ids = set(map(id, roots))
        with self._lock:
            others = self._take(ids)
            if not others and not self.index:
                return []
            inside = pending_positions(prog.order)
            memo = reach_memo()
            parked, apart = [], None
            if self.index:               # (the climb first: what it met tells the walks below where to stop)
                parked, reading = self._climb(self._indexed(inside, prog.order), ids)
                apart = self._apart(reading)
            fresh = self._split(others, inside, memo, apart)
        return in_program_order(parked + fresh, inside, memo)

    def alone(self, root: Node) -> bool:
        """Whether no live tensor but root's own holds a pending value of root's tree (its summary
        valid now), so that the tree can run alone.  Parked tensors cannot: their graphs were
        complete when they were parked, and every node of a tree valid in a later epoch was
        built after (ir/graph.py: a summary holds only in its epoch, and is made only from
        operands' summaries of that epoch)."""
        if root.tree[0] <= self.parked_epoch:
            return False
        if not self.fresh:
            return True
        with self._lock:
            # (where no other live tensor is pending, the C does _take's work and answers)
            if self.take_alone is not None and self.take_alone(self.fresh, root):
                return True
            others = self._take((id(root),))
            # (no parked graph reads the tree, built after them: their walks stop where they meet one)
            return not others or not self._split(others, pending_positions(_tree_nodes(root)), reach_memo(),
                                                 self._apart(()) if self.index else None)

    def reads(self, node: Node) -> bool:
        """Whether a live pending tensor reads `node` (realized: tensor.py `_share`)."""
        if not self.index and self.take_alone is None:
            for t in filter(_ALIVE, map(operator.call, self.fresh)):
                if t._node.op != "buffer":
                    break
            else:
                return False             # (nothing pending, the common case: no lock, nothing to tidy)
        with self._lock:
            # (no fresh tensor pending, the common case, parked ones or not: the C answers and
            # tidies fresh as _take does; a training step's numpy() took ~30 us through _take)
            if self.take_alone is None or not self.take_alone(self.fresh, None):
                for ref, n in self._take(set()):
                    self._park(ref, n)
            return bool(self.index) and bool(self._climb([node], set())[0])

    def pending(self) -> list[Node]:
        """Every live tensor's pending value: parked ones in parking order, then fresh ones."""
        with self._lock:
            # (none pending, the common case of a synchronize after a compiled call: the C answers
            # and tidies fresh as below)
            if not self.index and self.take_alone is not None and self.take_alone(self.fresh, None):
                return []
            held = []
            for entry in self.index.values():
                node = entry.node()
                if node is not None and node.op != "buffer":
                    held += [(k, ref, node) for k, ref in entry.holders]
            held.sort(key=_first)
            seen: set[int] = set()
            nodes = []
            for _, ref, node in held:
                t = ref()
                if t is not None and t._node is node and id(t) not in seen:
                    seen.add(id(t))
                    nodes.append(node)
            fresh = self.fresh
            n = len(fresh)
            keep = []
            for t in filter(_ALIVE, map(operator.call, fresh[:n])):
                if t._node.op != "buffer" and id(t) not in seen:
                    seen.add(id(t))
                    keep.append(weakref.ref(t))
                    nodes.append(t._node)
            fresh[:n] = keep
        return nodes

    def compact(self) -> None:
        """Drop fresh entries whose tensor died or was realized, and repeats (tensor.py: when the
        list outgrows its threshold)."""
        with self._lock:
            fresh = self.fresh
            n = len(fresh)
            keep, seen = [], set()
            for ref in fresh[:n]:
                t = ref()
                if t is not None and t._node.op != "buffer" and id(ref) not in seen:
                    seen.add(id(ref))
                    keep.append(ref)
            fresh[:n] = keep

    # ---- fresh tensors
    def _take(self, roots: Container[int]) -> list[tuple[weakref.ref, Node]]:
        """Empty `fresh`: (reference, pending value) of each live tensor it listed, once, less
        those holding a root (kept: tracked until this eval stores them, or after it fails)."""
        fresh = self.fresh
        n = len(fresh)
        taken: list[tuple[weakref.ref, Node]] = []
        keep, seen = [], set()
        # (most entries are dead, a chain's intermediates: map and filter drop them without a
        # Python step per entry; weakref.ref(t) is t's existing reference)
        for t in filter(_ALIVE, map(operator.call, fresh[:n])):
            node = t._node
            if node.op == "buffer" or id(t) in seen:
                continue
            seen.add(id(t))
            if id(node) in roots:
                keep.append(weakref.ref(t))
            else:
                taken.append((weakref.ref(t), node))
        fresh[:n] = keep
        return taken

    def _split(self, others: list[tuple[weakref.ref, Node]], inside: Positions, memo: Positions,
               apart: Callable[[Node], bool] | None = None) -> list[Node]:
        """The values of `others` whose pending graphs read a node of `inside` (kept fresh until
        stored); the other tensors are parked.  `apart`: `reaches`' test for nodes known not to
        read `inside` (`_apart`)."""
        related = []
        for ref, node in others:
            if reaches(node, inside, memo, apart) >= 0:
                related.append(node)
                self.fresh.append(ref)
            else:
                self._park(ref, node)
        self.walked += len(memo) + len(others)
        return related

    # ---- parked tensors
    def _park(self, ref: weakref.ref, node: Node) -> None:
        if self.added > self.sweep_at:
            self._sweep()
        entry = self._entry(node) or self._index(node)
        entry.holders.append((next(self._order), ref))
        self.added += 1
        self.parked_epoch = EPOCH[0]

    def _entry(self, node: Node) -> _Entry | None:
        entry = self.index.get(id(node))
        return entry if entry is not None and entry.node() is node else None

    def _index(self, root: Node) -> _Entry:
        """Enter root and the part of its pending graph not entered yet (whose readers it adds)."""
        index = self.index
        top = index[id(root)] = _Entry(root)
        stack = [root]
        walked = 0
        while stack:
            n = stack.pop()
            walked += 1
            ref = weakref.ref(n)
            for i in n.inputs:
                op = i.op
                if op == "scalar" or op == "param":     # (a number has no other readers to find)
                    continue
                entry = index.get(id(i))
                if entry is None or entry.node() is not i:
                    entry = index[id(i)] = _Entry(i)
                    if op != "buffer":
                        stack.append(i)
                entry.readers.append(ref)
        self.walked += walked
        self.added += walked
        return top

    def _indexed(self, inside: Positions, order: list[Node]) -> list[Node]:
        """The pending nodes of a program (`inside`, its `order`) that the index holds, looked up
        from the smaller side: a training loop parks a few tensors a step (BatchNorm's counters),
        and listing ResNet-18's 3,763 pending nodes to find none of them took ~0.5 ms a step."""
        index = self.index
        if len(index) < len(inside):
            # (the keys inside are found without a Python step per key: there are mostly none)
            return [node for key in filter(inside.__contains__, index)
                    if (node := index[key].node()) is not None and id(node) == key]
        return [n for n in order if n.op not in LEAF_OPS]

    def _climb(self, nodes: list[Node], roots: set[int]) -> tuple[list[Node], set[int]]:
        """The values of parked tensors (other than `roots`) whose pending graphs read one of
        `nodes`: up the reverse edges from their entries, through pending readers only; and the
        ids of the nodes it met (`_apart`: every indexed node whose graph reads one of `nodes`)."""
        index = self.index
        stack, seen = [], set()
        for n in nodes:
            entry = index.get(id(n))
            if entry is not None and entry.node() is n:
                stack.append((n, entry))
                seen.add(id(n))
        found = []
        while stack:
            node, entry = stack.pop()
            if node.op != "buffer" and id(node) not in roots:
                for k, ref in entry.holders:
                    t = ref()
                    if t is not None and t._node is node:
                        found.append((k, node))
                        break
            for ref in entry.readers:
                r = ref()
                if r is None or r.op == "buffer" or id(r) in seen:
                    continue
                seen.add(id(r))
                above = index.get(id(r))
                if above is not None and above.node() is r:
                    stack.append((r, above))
        self.walked += len(seen)
        found.sort(key=_first)
        return [node for _, node in found], seen

    def _apart(self, reading: Container[int]) -> Callable[[Node], bool]:
        """`reaches`' test for nodes known not to read a program, given `reading` (what `_climb`
        met from the program's indexed nodes): a node the index holds whose id is not there.  The
        index holds the whole pending graph below each node in it, with its reverse edges (a node
        loses inputs only by being realized), so a climb from the program meets every indexed
        node that reads it.  (BatchNorm's counters stay pending between their flushes, each a
        chain a step longer than at the last eval, which its walk went down to the end.)"""
        def apart(node: Node) -> bool:
            entry = self.index.get(id(node))
            return entry is not None and id(node) not in reading and entry.node() is node
        return apart

    def _sweep(self) -> None:
        """Drop what no climb can use: entries of dead nodes, dead or realized readers, stale
        holders, and entries left with neither readers nor holders (no parked graph holds them)."""
        keep: dict[int, _Entry] = {}
        size = 0
        for key, entry in self.index.items():
            node = entry.node()
            if node is None:
                continue
            readers = {}
            for ref in entry.readers:
                r = ref()
                if r is not None and r.op != "buffer":
                    readers[id(r)] = ref
            entry.readers = list(readers.values())
            entry.holders = [] if node.op == "buffer" else [
                (k, ref) for k, ref in entry.holders if (t := ref()) is not None and t._node is node]
            if entry.readers or entry.holders:
                keep[key] = entry
                size += 1 + len(entry.holders)
        self.index = keep
        self.added = 0
        self.sweep_at = max(SWEEP_AT, size)


def _tree_nodes(root: Node) -> list[Node]:
    """root's pending nodes, in no program's order (`alone`'s `inside`: only whether a node is
    there counts); a walk without keys: a tree's, at most MAX_TREE_NODES nodes."""
    nodes, seen, stack = [root], {id(root)}, [root]
    while stack:
        for i in stack.pop().inputs:
            if i.op not in LEAF_OPS and id(i) not in seen:
                seen.add(id(i))
                nodes.append(i)
                stack.append(i)
    return nodes


_ALIVE = functools.partial(operator.is_not, None)
_first = operator.itemgetter(0)
LIVE = LiveTensors()


def options_for(backend: str) -> Options:
    """The pipeline's options on `backend`: its buffer cap, the reference executor for folding."""
    try:
        b = get_backend(backend)
    except Exception:   # noqa: BLE001  (metal/cuda off their hardware: plan with the strictest cap)
        b = Backend
    return Options(max_buffers=b.max_buffers, evaluate=run_node, library_bias=getattr(b, "library_bias", False),
                   library_ops=getattr(b, "library_ops", frozenset()), guarded_reads=getattr(b, "guarded_reads", False))


def plan_for(order: list[Node], roots: list[Node], backend: str | None = None) -> KernelPlan:
    """The KernelPlan of the program `order` (toposorted, below `roots`) on `backend`."""
    name = backend or backend_name()
    params, norm_roots = normalize(order, roots)
    options = replace(options_for(name), composites=has_composites(order))
    plan = compile_plan(params, norm_roots, options)
    plan.backend = name
    return plan


def _compile(order: list[Node], roots: list[Node], name: str) -> Compiled:
    with Progress(f"a program of {len(order)} nodes", PROGRESS_AFTER):
        plan = plan_for(order, roots, name)
        return Compiled(plan, get_backend(name).prepare(plan))


# ---------------------------------------------------------------- evaluation

@collector_paused(ends_step=True)
def eval_nodes(nodes: Iterable[Node], live: "Iterable[Node] | LiveTensors" = ()) -> None:
    """Compute the pending `nodes` (and the `live` values synced with them: `LIVE` for the live
    tensors) and cut the graph there."""
    if nodes.__class__ is list and len(nodes) == 1:     # (one tensor's value, the common case)
        roots = nodes if nodes[0].op not in LEAF_OPS else []
    else:
        roots = pending_roots(nodes)
    if not roots:
        return
    if live is not LIVE and not isinstance(live, (list, tuple)):
        live = list(live)
    if len(roots) == 1 and roots[0].tree is not None and _eval_tree(roots[0], live):
        return
    roots, prog = program_for(roots, live, pending=True)
    if len(prog.order) > WARN_NODES:
        warn_long_history(roots[0], len(prog.order))
    name = backend_name()
    backend = get_backend(name)
    planned = planned_roots(roots, name)
    compiled = CACHE.get_or_compile(ProgramKey(prog.key, name), lambda: _compile(prog.order, planned, name))
    if backend.device_memory:
        keep_uploads(prog.leaves, backend)
    outs = compiled.executable.run(leaf_args(prog.leaves, len(prog.leaves)))
    if planned is roots:
        for node, buf in zip(roots, outs):
            node.realize(buf)
    else:
        for node, made, buf in zip(roots, planned, outs):
            node.realize(buf if made is node else buf.reshape(node.shape))


def planned_roots(roots: list[Node], name: str) -> list[Node]:
    """The nodes the program for `roots` computes on backend `name` (reshapes_aliased on the host
    backends): what eval runs, kernel_plan shows and dump_after prints."""
    try:
        device_memory = get_backend(name).device_memory
    except Exception:   # noqa: BLE001  (metal/cuda off their hardware, planned to be shown: a device's)
        device_memory = True
    return roots if device_memory else reshapes_aliased(roots)


def reshapes_aliased(roots: list[Node]) -> list[Node]:
    """The nodes a program computes for `roots`: each root that reads all of a node the program
    computes, in order (a reshape: a convolution weight's gradient is its product's output
    reshaped), is that node, and takes its buffer reshaped -- where no other root is or reshapes
    that node (one buffer object over its memory: host_data counts those handed out to numpy).
    For the host backends, whose numpy buffers reshape in place (planned_roots).  A copy each had
    been one more pass over every such value (ResNet-18's `.grad` of its 512-channel weights on
    cpu: 3 x 9.4 MB written twice a step).  Decided by the roots' structure alone, so a program's
    graph-cache key (its roots' positions and keys) decides it too.  `roots` itself where none is."""
    found = [(i, base) for i, r in enumerate(roots) if r.op in _RESHAPING and (base := _reshaped(r)) is not None]
    if not found:
        return roots
    # a base's memory reached through one buffer object only (no other root is or reshapes it), so
    # host_data's count of buffers handed out to numpy still sees every array over that memory
    taken = Counter(id(base) for _, base in found) + Counter(map(id, roots))
    alone = [(i, base) for i, base in found if taken[id(base)] == 1]
    if not alone:
        return roots
    planned = list(roots)
    for i, base in alone:
        planned[i] = base
    return planned


_RESHAPING = frozenset({"view", "contiguous"})


def _reshaped(n: Node) -> Node | None:
    """The computed node `n` holds all of in order (a view, or a contiguous copy of one: `.grad`
    is made so), else None."""
    if n.op == "contiguous":
        n = n.inputs[0]
        if n.op != "view":
            return None
    spec, base = n.attrs["view"], n.inputs[0]
    if ("clamp" in n.attrs or spec.offset != 0 or base.op in LEAF_OPS or base.op == "view"
            or spec.numel != base.numel or not V.is_contiguous(spec)):
        return None
    return base


class _NotATree(Exception):
    """A tree summary disagreed with the program's walk (never expected: the slow path runs)."""


def _eval_tree(root: Node, live: "Iterable[Node] | LiveTensors") -> bool:
    """Evaluate a root whose node carries a tree summary (ir/graph.py: tree keys) without walking
    its program: the graph cache is keyed by the tree id, the leaves come with the summary.  Only
    when no other live tensor holds a pending value of the tree (the sync would add it); False:
    not done."""
    epoch, tree, leaves, count, size = root.tree
    if epoch != EPOCH[0] or size > WARN_NODES:   # (process-wide EPOCH: any thread's realize may cut the tree)
        return False
    if live is LIVE:
        if not LIVE.alone(root):
            return False
    elif any(n is not root and n.op != "buffer" and n.op not in LEAF_OPS for n in live):
        return False
    name = backend_name()
    try:
        compiled = CACHE.get_or_compile((("tree", tree), name), lambda: _compile_tree(root, leaves[:count], name))
    except _NotATree:
        return False
    # (the summary owns the first `count` of a shared leaf list: ir/graph.py)
    args = leaf_args(leaves, count)
    if any(map(is_host_array, args)):    # host data: uploaded once and kept on the leaf (GPU backends)
        backend = get_backend(name)
        if backend.device_memory:
            keep_uploads(leaves[:count], backend)
            args = leaf_args(leaves, count)
    outs = compiled.executable.run(args)
    root.realize(outs[0])
    return True


def _compile_tree(root: Node, leaves: tuple[Node, ...], name: str) -> Compiled:
    prog = program([root])
    if len(prog.leaves) != len(leaves) or any(a is not b for a, b in zip(prog.leaves, leaves)):
        raise _NotATree(root)
    return _compile(prog.order, [root], name)


is_host_array = np.ndarray.__instancecheck__    # isinstance(x, np.ndarray), mapped in C over a run's arguments


def keep_uploads(leaves: list[Node], backend: Backend) -> None:
    """On a backend with its own memory, host data leaves (tensors made from numpy or Python data)
    are uploaded once and keep the device buffer, so a loop over the same inputs does not copy
    them to the GPU in every run.  (A device tensor has no host memory to share, as in torch.)"""
    for n in leaves:
        if n.op == "buffer" and isinstance(n.buffer, np.ndarray):
            n.buffer = backend.adopt(n.buffer)


def eval_tensors(tensors, live: "Iterable[Node] | LiveTensors" = ()) -> None:
    eval_nodes([t.node for t in tensors], live)     # (a list: eval_nodes' one-tensor case)


def warn_long_history(root: Node, size: int) -> None:
    if _warned[0]:
        return
    _warned[0] = True
    where = f" built at {root.origin}" if root.origin else ""
    warnings.warn(f"lazytorch: evaluating a tensor {type_str(root)}{where} whose pending history is "
                  f"{size} nodes (a loop that never evaluates keeps growing it; compile time grows "
                  f"with it); call lt.eval(t) on the tensors a loop carries once per step to cut "
                  f"their history (shown once; LAZYTORCH_WARN_NODES sets the threshold)",
                  RuntimeWarning, stacklevel=5)


# ---------------------------------------------------------------- inspection

def kernel_plan(tensors, backend: str | None = None) -> KernelPlan:
    """The plan the tensors' pending program compiles to, without running it (not cached); on
    the GPU backends each kernel's template and launch geometry come with it (plan.geometry)."""
    from .codegen.gpu import plan_geometry
    roots, prog = program_for(t.node for t in tensors)
    plan = plan_for(prog.order, planned_roots(roots, backend or backend_name()), backend)
    plan.geometry = plan_geometry(plan)
    return plan


def dump_after(nodes: Iterable[Node], after: str, backend: str | None = None) -> str:
    """The pending program of `nodes` as it is after pass `after` (the kernel plan for `fuse`)."""
    roots, prog = program_for(nodes)
    if after == FUSE:
        return str(plan_for(prog.order, planned_roots(roots, backend or backend_name()), backend))
    params, norm_roots = normalize(prog.order, roots)
    return _dump_after(params, norm_roots, after, options_for(backend or backend_name()))


def host_value(node: Node) -> np.ndarray:
    """A realized node's value as a numpy array (bfloat16 widened to float32 for the user)."""
    arr = np.asarray(node.buffer)
    if node.dtype is D.bfloat16:
        return D.bf16_to_f32(arr)
    return arr


def show_kernels(*tensors, backend: str | None = None) -> str:
    """Print and return the source of every kernel the tensors' program compiles to on `backend`
    (default: the selected backend), on any host.  Nothing is compiled or run.  Each kernel's
    header line names the user's source lines it fused."""
    from .codegen.show import plan_sources
    name = backend or backend_name()
    plan = kernel_plan(tensors, name)
    text = "\n".join(f"{h}\n{s}" for h, s in plan_sources(plan, name))
    print(text)
    return text

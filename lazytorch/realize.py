"""The driver: the one place that turns tensors into a program and a plan, and runs it.

`program_for` collects the pending roots (plus the pending values live Python tensors hold in the
same pending graph: see `synced_roots`), `plan_for` compiles a program (normalize leaves to params,
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

import os
import warnings
from dataclasses import replace
from typing import Any, Iterable

import numpy as np

from .graph_cache import CACHE
from .ir import dtypes as D
from .ir.graph import Program, program
from .ir.node import EPOCH, LEAF_OPS, Node, type_str
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
    roots, seen = [], set()
    for n in nodes:
        if not n.realized and id(n) not in seen:
            seen.add(id(n))
            roots.append(n)
    return roots


def synced_roots(prog: Program, live: Iterable[Node]) -> list[Node]:
    """The pending values of live tensors that share pending nodes with the program (LTC's
    mark_step, limited to one pending graph): storing them too cuts the history wherever a user
    can still reach, so a loop's next step starts from buffers instead of the whole past.

    A live node inside the program joins directly; one outside joins when its pending graph reads
    a node of the program (walked once per eval, memoised across live nodes)."""
    inside = {id(n) for n in prog.order if n.op not in LEAF_OPS}    # pending values, not shared data
    related: dict[int, bool] = {}
    extra: list[Node] = []
    for n in live:
        if n.realized or n.is_leaf:
            continue
        if id(n) in inside:
            extra.append(n)
        elif _reaches(n, inside, related):
            extra.append(n)
    return extra


def _reaches(root: Node, inside: set[int], related: dict[int, bool]) -> bool:
    """Whether root's pending graph reads a node whose id is in `inside` (iterative, memoised)."""
    stack = [root]
    seen: list[Node] = []
    found = False
    while stack and not found:
        n = stack.pop()
        known = related.get(id(n))
        if known is not None:
            found = known
            continue
        related[id(n)] = False
        seen.append(n)
        for i in n.inputs:
            if id(i) in inside:
                found = True
                break
            if not i.realized and not i.is_leaf:
                stack.append(i)
    if found:
        related[id(root)] = True
    return found


def pending_readers(node: Node, live: Iterable[Node]) -> bool:
    """Whether a live pending value reads the realized `node` (tensor.py `_share` snapshots it then)."""
    inside, related = {id(node)}, {}
    return any(not n.realized and _reaches(n, inside, related) for n in live)


def program_for(nodes: Iterable[Node], live: Iterable[Node] = ()) -> tuple[list[Node], Program]:
    """(roots, program) of the pending values of `nodes` and of the live values synced with them."""
    roots = pending_roots(nodes)
    if not roots:
        return roots, Program([], (), [])
    prog = program(roots)
    ids = {id(r) for r in roots}
    # (a live root itself, the common case, adds nothing: only other pending values are looked at)
    others = [n for n in live if id(n) not in ids and n.op != "buffer" and n.op not in LEAF_OPS]
    if others:
        more = [n for n in synced_roots(prog, others) if id(n) not in ids and not ids.add(id(n))]
        if more:
            roots = roots + more
            prog = program(roots)
    return roots, prog


def options_for(backend: str) -> Options:
    """The pipeline's options on `backend`: its buffer cap, the reference executor for folding."""
    try:
        b = get_backend(backend)
    except Exception:   # noqa: BLE001  (metal/cuda off their hardware: plan with the strictest cap)
        b = Backend
    return Options(max_buffers=b.max_buffers, evaluate=run_node, library_bias=getattr(b, "library_bias", False),
                   library_ops=getattr(b, "library_ops", frozenset()))


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

def eval_nodes(nodes: Iterable[Node], live: Iterable[Node] = ()) -> None:
    """Compute the pending `nodes` (and the `live` values synced with them) and cut the graph there."""
    roots = pending_roots(nodes)
    if not roots:
        return
    if not isinstance(live, (list, tuple)):
        live = list(live)
    if len(roots) == 1 and roots[0].tree is not None and _eval_tree(roots[0], live):
        return
    roots, prog = program_for(roots, live)
    if len(prog.order) > WARN_NODES:
        warn_long_history(roots[0], len(prog.order))
    name = backend_name()
    compiled = CACHE.get_or_compile((prog.key, name), lambda: _compile(prog.order, roots, name))
    backend = get_backend(name)
    if backend.device_memory:
        keep_uploads(prog.leaves, backend)
    outs = compiled.executable.run([n.buffer if n.op == "buffer" else n.value for n in prog.leaves])
    for node, buf in zip(roots, outs):
        node.realize(buf)


class _NotATree(Exception):
    """A tree summary disagreed with the program's walk (never expected: the slow path runs)."""


def _eval_tree(root: Node, live: Iterable[Node]) -> bool:
    """Evaluate a root whose node carries a tree summary (ir/graph.py: tree keys) without walking
    its program: the graph cache is keyed by the tree id, the leaves come with the summary.  Only
    when no other live tensor holds a pending value (synced_roots would add it); False: not done."""
    epoch, tree, leaves, count, size = root.tree
    if epoch != EPOCH[0] or size > WARN_NODES:
        return False
    if len(leaves) != count:             # (the summary owns the first `count` of a shared list: ir/graph.py)
        leaves = leaves[:count]
    for n in live:
        if n is not root and n.op != "buffer" and n.op not in LEAF_OPS:
            return False
    name = backend_name()
    try:
        compiled = CACHE.get_or_compile((("tree", tree), name), lambda: _compile_tree(root, leaves, name))
    except _NotATree:
        return False
    backend = get_backend(name)
    if backend.device_memory:
        keep_uploads(leaves, backend)
    outs = compiled.executable.run([n.buffer if n.op == "buffer" else n.value for n in leaves])
    root.realize(outs[0])
    return True


def _compile_tree(root: Node, leaves: tuple[Node, ...], name: str) -> Compiled:
    prog = program([root])
    if len(prog.leaves) != len(leaves) or any(a is not b for a, b in zip(prog.leaves, leaves)):
        raise _NotATree(root)
    return _compile(prog.order, [root], name)


def keep_uploads(leaves: list[Node], backend: Backend) -> None:
    """On a backend with its own memory, host data leaves (tensors made from numpy or Python data)
    are uploaded once and keep the device buffer, so a loop over the same inputs does not copy
    them to the GPU in every run.  (A device tensor has no host memory to share, as in torch.)"""
    for n in leaves:
        if n.op == "buffer" and isinstance(n.buffer, np.ndarray):
            n.buffer = backend.adopt(n.buffer)


def eval_tensors(tensors, live: Iterable[Node] = ()) -> None:
    eval_nodes((t.node for t in tensors), live)


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
    plan = plan_for(prog.order, roots, backend)
    plan.geometry = plan_geometry(plan)
    return plan


def dump_after(nodes: Iterable[Node], after: str, backend: str | None = None) -> str:
    """The pending program of `nodes` as it is after pass `after` (the kernel plan for `fuse`)."""
    roots, prog = program_for(nodes)
    if after == FUSE:
        return str(plan_for(prog.order, roots, backend))
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

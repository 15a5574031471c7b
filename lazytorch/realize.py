"""Evaluation: turn pending lazy nodes into buffers.

eval_nodes collects the pending roots, looks the program up in the graph cache (graph_cache.py,
keyed on structure and backend, not data), compiles it on a miss (normalize leaves to params, the
passes, fusion into a KernelPlan, backend.prepare), runs it on the current leaf buffers and scalar
values, and replaces each root by its buffer so the graph is cut there.
"""
from __future__ import annotations

from typing import Any, Iterable

import numpy as np

from .graph_cache import CACHE
from .ir import dtypes as D
from .ir.graph import program, toposort
from .ir.node import Node
from .passes.normalize import normalize
from .passes.pipeline import compile_plan
from .passes.plan import KernelPlan
from .passes import simplify
from .runtime import backend_name, get_backend
from .runtime.reference import run_node

# constant folding evaluates with the reference executor; passes may not import the runtime
simplify.EVALUATE = run_node


class Compiled:
    """A cached program: its plan and the backend's executable for it."""

    __slots__ = ("plan", "executable")

    def __init__(self, plan: KernelPlan, executable: Any):
        self.plan, self.executable = plan, executable


def plan_for(order: list[Node], roots: list[Node], backend: str | None = None) -> KernelPlan:
    params, norm_roots = normalize(order, roots)
    plan = compile_plan(params, norm_roots)
    plan.backend = backend or backend_name()
    return plan


def pending_roots(nodes: Iterable[Node]) -> list[Node]:
    roots, seen = [], set()
    for n in nodes:
        if not n.realized and id(n) not in seen:
            seen.add(id(n))
            roots.append(n)
    return roots


def eval_nodes(nodes: Iterable[Node]) -> None:
    roots = pending_roots(nodes)
    if not roots:
        return
    order, key, leaves = program(roots)
    name = backend_name()

    def compile_program() -> Compiled:
        plan = plan_for(order, roots, name)
        return Compiled(plan, get_backend(name).prepare(plan))

    compiled = CACHE.get_or_compile((key, name), compile_program)
    outs = compiled.executable.run([n.buffer if n.op == "buffer" else n.value for n in leaves])
    for node, buf in zip(roots, outs):
        node.realize(buf)


def eval_tensors(tensors) -> None:
    eval_nodes(t.node for t in tensors)


def kernel_plan(tensors) -> KernelPlan:
    """The plan the tensors' pending program compiles to, without running it (not cached)."""
    roots = pending_roots(t.node for t in tensors)
    return plan_for(toposort(roots), roots)


def host_value(node: Node) -> np.ndarray:
    """A realized node's value as a numpy array (bfloat16 widened to float32 for the user)."""
    arr = np.asarray(node.buffer)
    if node.dtype is D.bfloat16:
        return D.bf16_to_f32(arr)
    return arr


def show_kernels(*tensors, backend: str | None = None) -> str:
    """Print and return the source of every kernel the tensors' program compiles to on `backend`
    (default: the selected backend), on any host.  Nothing is compiled or run."""
    from .codegen.show import kernel_sources
    text = "\n".join(f"{h}\n{s}" for h, s in kernel_sources([t.node for t in tensors], backend or backend_name()))
    print(text)
    return text

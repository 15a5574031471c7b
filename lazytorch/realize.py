"""Evaluation: turn pending lazy nodes into buffers.

eval_tensors collects the pending roots of the given tensors, looks the program up in the graph
cache (keyed on structure, not data), compiles it through the passes on a miss, runs it on the
current leaf values, and replaces each root by its buffer so the graph is cut there.
"""
from __future__ import annotations

from typing import Iterable

import numpy as np

from .ir import dtypes as D
from .ir.graph import structural_key, toposort
from .ir.node import Node
from .passes import pipeline
from .passes.normalize import normalize
from .runtime import backend_name
from .runtime.reference import execute


class Program:
    """A compiled program: runs on leaf values (buffers and scalars) and returns root values."""

    def __init__(self, params: list[Node], roots: list[Node]):
        self.params = params
        self.roots = roots
        self.order = toposort(roots)

    def run(self, values: list) -> list[np.ndarray]:
        env = {}
        for p, v in zip(self.params, values):
            env[id(p)] = np.asarray(v, dtype=p.dtype.np) if p.attrs["kind"] == "scalar" else v
        execute(self.order, env)
        return [env[id(r)] for r in self.roots]


def compile_program(order: list[Node], roots: list[Node]) -> Program:
    params, norm_roots = normalize(order, roots)
    return Program(params, pipeline.run(norm_roots))


_cache: dict = {}


def eval_nodes(nodes: Iterable[Node]) -> None:
    roots, seen = [], set()
    for n in nodes:
        if not n.realized and id(n) not in seen:
            seen.add(id(n))
            roots.append(n)
    if not roots:
        return
    order = toposort(roots)
    key = (structural_key(order), backend_name())
    program = _cache.get(key)
    if program is None:
        program = _cache[key] = compile_program(order, roots)
    leaves = [n for n in order if n.is_leaf]
    outs = program.run([n.buffer if n.op == "buffer" else n.value for n in leaves])
    for node, buf in zip(roots, outs):
        node.realize(buf)


def eval_tensors(tensors) -> None:
    eval_nodes(t.node for t in tensors)


def host_value(node: Node) -> np.ndarray:
    """A realized node's value as a numpy array (bfloat16 widened to float32 for the user)."""
    buf = node.buffer
    arr = np.asarray(buf)
    if node.dtype is D.bfloat16:
        return D.bf16_to_f32(arr)
    return arr

"""The reference executor: evaluates a graph node by node with numpy.

It is the oracle that compiled backends are checked against and the executor for ops that have
no generated kernel.  Values are host arrays in storage form (bfloat16 as raw uint16 bits).
`ReferenceBackend` (runtime/backend.py) runs whole kernel plans this way, launch by launch.
"""
from __future__ import annotations

from typing import Sequence

import numpy as np

from ..ir.node import Node
from .reference_ops import REF


def run_node(node: Node, inputs: Sequence[np.ndarray]) -> np.ndarray:
    try:
        fn = REF[node.op]
    except KeyError:
        raise NotImplementedError(f"{node.op}: the reference executor has no implementation; "
                                  f"the op must be decomposed before execution") from None
    out = fn(node, *inputs)
    assert out.shape == tuple(node.shape), (node.op, out.shape, node.shape)
    return out


def execute(order: Sequence[Node], env: dict[int, np.ndarray]) -> dict[int, np.ndarray]:
    """Compute every non-leaf node of `order` (topological) into env, keyed by id(node)."""
    for node in order:
        if id(node) not in env:
            env[id(node)] = run_node(node, [env[id(i)] for i in node.inputs])
    return env


def run_launch(launch, reads: Sequence[np.ndarray]) -> list[np.ndarray]:
    """The values a plan Launch writes, computed on the host from the values it reads."""
    env = {id(node): value for (node, _), value in zip(launch.reads, reads)}
    execute(launch.nodes, env)
    return [env[id(node)] for node, _ in launch.writes]

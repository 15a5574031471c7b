"""The reference executor: evaluates a graph node by node with numpy.

It is the oracle that compiled backends are checked against and the executor for ops that have
no generated kernel.  Values are host arrays in storage form (bfloat16 as raw uint16 bits).
`ReferenceBackend` (runtime/backend.py) runs whole kernel plans this way, launch by launch.
"""
from __future__ import annotations

from typing import Any, Callable, Sequence

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


# Ops whose value the host writes straight into the buffer a plan gave it, with no value made
# first and copied in (a cat of W10's qkv gradients, transposed views: 92 -> 52 us on cpu).
INTO: dict[str, Callable[[Node, list, np.ndarray], Any]] = {
    "cat": lambda node, xs, out: np.concatenate(xs, axis=node.attrs["dim"], out=out),
}


def written_into(launch) -> bool:
    """Whether the launch's one write is an INTO op's value (run_launch_into runs it)."""
    return len(launch.writes) == 1 and launch.writes[0][0].op in INTO and launch.nodes[-1] is launch.writes[0][0]


def run_launch_into(launch, reads: Sequence[np.ndarray], out: np.ndarray) -> None:
    """run_launch for a launch `written_into` the host array `out` (its node's storage form)."""
    node = launch.nodes[-1]
    env = {id(n): value for (n, _), value in zip(launch.reads, reads)}
    execute(launch.nodes[:-1], env)
    INTO[node.op](node, [env[id(i)] for i in node.inputs], out)

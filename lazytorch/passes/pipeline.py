"""The pass manager: an ordered list of named passes from the lazy graph to the kernel plan.

Graph passes map roots to roots; the last stage, `fuse`, turns the final graph into a KernelPlan.
Adding a pass is one function (roots -> roots) and one line in PASSES.  `LAZYTORCH_DUMP=all`
prints the IR after every pass (and the plan after fuse) to stderr; `verify=True` runs the IR
verifier (passes/verify.py) after every graph pass.
"""
from __future__ import annotations

import os
import sys
from typing import Callable

from ..ir.node import Node
from ..ir.printer import dump_nodes
from .decompose import decompose
from .fuse import build_plan
from .legalize import legalize
from .plan import KernelPlan
from .simplify import simplify

Pass = Callable[[list[Node]], list[Node]]

PASSES: list[tuple[str, Pass]] = [
    ("decompose", decompose),
    ("legalize", legalize),
    ("simplify", simplify),
]
FUSE = "fuse"


def pass_names() -> list[str]:
    return [name for name, _ in PASSES] + [FUSE]


def run(roots: list[Node], until: str | None = None, verify: bool = False) -> list[Node]:
    """Run the graph passes in order (up to and including `until`), dumping or verifying between."""
    if until is not None and until not in pass_names():
        raise ValueError(f"unknown pass '{until}'; passes are: {', '.join(pass_names())}")
    dump_all = os.environ.get("LAZYTORCH_DUMP") == "all"
    for name, fn in PASSES:
        roots = fn(roots)
        if verify:
            from .verify import verify_graph
            verify_graph(roots, after=name)
        if dump_all:
            print(f"# after {name}\n{dump_nodes(roots)}", file=sys.stderr)
        if name == until:
            break
    return roots


def compile_plan(params: list[Node], roots: list[Node], verify: bool = False) -> KernelPlan:
    """All passes, then fusion into the kernel plan."""
    roots = run(roots, verify=verify)
    plan = build_plan(params, roots)
    if os.environ.get("LAZYTORCH_DUMP") == "all":
        print(f"# after {FUSE}\n{plan}", file=sys.stderr)
    return plan


def dump_after(params: list[Node], roots: list[Node], after: str) -> str:
    """The program as it is after pass `after` (the kernel plan for `fuse`)."""
    if after == FUSE:
        return str(compile_plan(params, roots))
    return dump_nodes(run(roots, until=after))

"""The pass manager: an ordered list of named passes from the lazy graph to the kernel plan.

Adding a pass is one function (roots -> roots) and one line in PASSES.
"""
from __future__ import annotations

import os
import sys
from typing import Callable

from ..ir.node import Node
from .decompose import decompose

Pass = Callable[[list[Node]], list[Node]]

PASSES: list[tuple[str, Pass]] = [
    ("decompose", decompose),
]


def run(roots: list[Node], until: str | None = None, verify: bool = False) -> list[Node]:
    """Run the passes in order (up to and including `until`), dumping or verifying between them."""
    dump_all = os.environ.get("LAZYTORCH_DUMP") == "all"
    names = [name for name, _ in PASSES]
    if until is not None and until not in names:
        raise ValueError(f"unknown pass '{until}'; passes are: {', '.join(names)}")
    for name, fn in PASSES:
        roots = fn(roots)
        if verify:
            from .verify import verify_graph
            verify_graph(roots, after=name)
        if dump_all:
            from ..ir.printer import dump_nodes
            print(f"# after {name}\n{dump_nodes(roots)}", file=sys.stderr)
        if name == until:
            break
    return roots

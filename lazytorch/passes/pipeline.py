"""The pass manager: an ordered list of named passes from the lazy graph to the kernel plan.

Graph passes map roots to roots; the last stage, `fuse`, turns the final graph into a KernelPlan.
Adding a pass is one function (roots, options -> roots) and one line in PASSES.  What a pass needs
from below the passes layer arrives in `Options`, never through imports or module state: the
backend's buffer cap for fusion, the evaluator constant folding uses (the driver passes the
reference executor; None disables folding), and whether to verify the IR after every pass.

`LAZYTORCH_DUMP=all` prints the IR after every pass (and the plan after fuse) to stderr;
`LAZYTORCH_DUMP=fusion` prints the plan with each refused merge ("cannot fuse A into B: reason").
Nodes built while the pipeline runs record no source line of their own: they inherit the line of
the node they replace (see passes/rewrite.py).
"""
from __future__ import annotations

import contextlib
import gc
import os
import sys
import threading
from dataclasses import dataclass, replace
from typing import Callable

from ..ir.node import Node, tracing
from ..ir.printer import dump_nodes
from .decompose import decompose
from .fuse import MAX_BUFFERS, build_plan
from .guard import guard_views
from .legalize import legalize
from .plan import KernelPlan
from .simplify import Evaluate, simplify


@dataclass(frozen=True)
class Options:
    max_buffers: int = MAX_BUFFERS          # the backend's cap on one launch's reads + writes
    evaluate: Evaluate | None = None        # constant folding's evaluator (None: no folding)
    verify: bool = False                    # run the IR verifier after every graph pass
    library_bias: bool = False              # the backend's GEMM adds a row bias (fuse.try_library_bias)
    library_ops: frozenset[str] = frozenset()   # composites the backend runs whole (decompose's keep)
    composites: bool = True                 # False: the driver found no composite in the program
                                            # (decompose.has_composites): decompose has no walk
    guarded_reads: bool = False             # views of constant pads read through the pad's mask
                                            # (passes/guard.py: the GPU backends)


Pass = Callable[[list[Node], Options], list[Node]]

PASSES: list[tuple[str, Pass]] = [
    ("decompose", lambda roots, o: decompose(roots, o.library_ops, o.composites)),
    ("legalize", lambda roots, o: legalize(roots)),
    ("simplify", lambda roots, o: simplify(roots, o.evaluate)),
    ("guard", lambda roots, o: guard_views(roots) if o.guarded_reads else roots),
]
FUSE = "fuse"


def pass_names() -> list[str]:
    return [name for name, _ in PASSES] + [FUSE]


def run(roots: list[Node], until: str | None = None, options: Options = Options(),
        verify: bool = False) -> list[Node]:
    """Run the graph passes in order (up to and including `until`), dumping or verifying between
    (`verify=True` is short for options with verify set)."""
    if verify and not options.verify:
        options = replace(options, verify=True)
    if until is not None and until not in pass_names():
        raise ValueError(f"unknown pass '{until}'; passes are: {', '.join(pass_names())}")
    dump_all = os.environ.get("LAZYTORCH_DUMP") == "all"
    with tracing(False):
        for name, fn in PASSES:
            roots = fn(roots, options)
            if options.verify:
                from .verify import verify_graph
                verify_graph(roots, after=name)
            if dump_all:
                print(f"# after {name}\n{dump_nodes(roots)}", file=sys.stderr)
            if name == until:
                break
    return roots


def compile_plan(params: list[Node], roots: list[Node], options: Options = Options(),
                 verify: bool = False) -> KernelPlan:
    """All passes, then fusion into the kernel plan (the driver, lazytorch/realize.py, passes the
    backend's options; the defaults plan for the strictest cap without constant folding)."""
    with no_cycle_collection():
        roots = run(roots, options=options, verify=verify)
        with tracing(False):
            plan = build_plan(params, roots, options.max_buffers, options.library_bias)
    dump = os.environ.get("LAZYTORCH_DUMP")
    if dump == "all":
        print(f"# after {FUSE}\n{plan}", file=sys.stderr)
    elif dump == "fusion":
        print(fusion_report(plan), file=sys.stderr)
    return plan


_gc_lock = threading.Lock()
_gc_state = {"active": 0, "was_enabled": False}     # compiles running, whether gc ran before them


@contextlib.contextmanager
def no_cycle_collection():
    """Python's cycle collector paused while passes run.  A compile allocates a few objects per
    node in every pass while the whole program graph is alive, so the collector's full passes
    (each walking every live object) took about a third of a long program's compile time; the
    graphs hold no reference cycles (refcounting frees them), so nothing waits for the collector.
    It resumes when the last compile running (in any thread) ends, if it was on before."""
    with _gc_lock:
        if _gc_state["active"] == 0:
            _gc_state["was_enabled"] = gc.isenabled()
            gc.disable()
        _gc_state["active"] += 1
    try:
        yield
    finally:
        with _gc_lock:
            _gc_state["active"] -= 1
            if _gc_state["active"] == 0 and _gc_state["was_enabled"]:
                gc.enable()


def fusion_report(plan: KernelPlan) -> str:
    """The plan followed by every merge fusion refused, one "cannot fuse A into B: reason" a line."""
    lines = [str(plan)] + [str(r) for r in plan.refusals]
    return "\n".join(lines)


def dump_after(params: list[Node], roots: list[Node], after: str, options: Options = Options()) -> str:
    """The program as it is after pass `after` (the kernel plan for `fuse`)."""
    if after == FUSE:
        return str(compile_plan(params, roots, options))
    return dump_nodes(run(roots, until=after, options=options))

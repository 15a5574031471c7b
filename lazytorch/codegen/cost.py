"""What a generated kernel's loop costs, in units of one element of a plain `a + b` kernel: the
measure by which the C target decides whether a kernel's loop forks threads.

A kernel forks when its estimated work pays for the fork: an OpenMP region costs a fixed time
(waking the pool's workers and joining them), and a loop of few but costly elements (a softmax
row of exp, a GELU's tanh) earns it back where a loop of as many adds does not.  The work is the
sum, over the kernel's stages, of the elements each stage visits (a pass over the rows: every
element of the domain; a row stage: one per row) times the cost of what the stage does per
element: the pass itself (loop, index arithmetic, loads and the store) plus each op's cost
class.  Reductions count their reduced elements as any other pass does.  The constants are
measured per target (codegen/targets/c.py: `benchmarks/parallel_cost.py`).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Mapping

from .kernel_ir import Kernel, Op

# the transcendental functions: many times an add on every target (lower.py keeps them in a row
# cache rather than computing them again in a later pass over the row)
FUNCTIONS = frozenset({"exp", "exp2", "expm1", "log", "log2", "log10", "log1p", "sin", "cos", "tan", "asin",
                       "acos", "atan", "sinh", "cosh", "tanh", "erf", "sigmoid", "pow", "atan2"})

# The cost class of every op that is not "cheap" (one instruction or a few: arithmetic, compares,
# selects, casts, index arithmetic).  Looked up as `op@<register dtype>` first, then `op`: the
# float32 functions the C preamble evaluates with vectorized code are cheaper than the same
# functions on float64, which call libm (a call left in a loop keeps it scalar).
OP_CLASS: dict[str, str] = {
    **{op: "memory" for op in ("load", "row_put", "row_get")},      # (stores count as memory too)
    **{op: "divide" for op in ("div", "reciprocal", "sqrt", "rsqrt")},
    **{op: "libm" for op in FUNCTIONS},
    # float fmod and remainder call libm's fmod; on integers they are a few instructions (cheap)
    **{f"{op}@{t}": "libm" for op in ("fmod", "remainder") for t in ("f32", "f64")},
    # float32: polynomials in float32 (16 lanes a vector; erf: 0.56 ns an element alone, as exp) ...
    **{f"{op}@f32": "exp" for op in ("exp", "tanh", "sigmoid", "erf")},
    # ... and in double, rounded once (8 lanes)
    **{f"{op}@f32": "exp_double" for op in ("exp2", "expm1", "log", "log2", "log10", "log1p", "sinh", "cosh")},
}


@dataclass(frozen=True)
class ParallelRule:
    """When a C-family kernel's loop forks threads: from `min_work` units of estimated work
    (`kernel_work`).  `class_cost` is the units per element of each op class (`OP_CLASS`; "cheap"
    for the rest), `pass_cost` the units of one element of a pass over the domain."""
    class_cost: Mapping[str, float]
    pass_cost: float
    min_work: float

    def op_cost(self, op: Op) -> float:
        cls = OP_CLASS.get(f"{op.op}@{op.dtype.short}") or OP_CLASS.get(op.op, "cheap")
        return self.class_cost[cls]

    def forks(self, kernel: Kernel) -> bool:
        """Whether the kernel's loop forks: its work pays for the fork."""
        return kernel_work(kernel, self) >= self.min_work


def kernel_work(kernel: Kernel, rule: ParallelRule) -> float:
    """The kernel's estimated work in units (one element of an `a + b` kernel is about 1)."""
    rows, numel = kernel.outer_numel, kernel.numel
    work = 0.0
    for stage in kernel.stages:
        per_element = sum(rule.op_cost(op) for op in stage.ops) + len(stage.reduces) * rule.class_cost["cheap"]
        if stage.scope == "elem":
            work += numel * (rule.pass_cost + per_element + len(stage.stores) * rule.class_cost["memory"])
        elif stage.scope == "row":
            work += rows * per_element
        # (the kernel stage runs once, before the loop: nothing a thread could share)
    return work

"""Which ops the code generators lower, derived from the registry (ir/registry/*.yaml), not copied.

pointwise: the registry's non-composite pointwise ops that every target's table spells (aliases
such as `divide` are normalised away before codegen and have no spelling); reductions: its
non-composite reductions that have a record in codegen/reductions.py; bool_result: the ops whose
promotion kind is always_bool.  Half types compute in float32: ir/promotion.py's opmath decides.
"""
from __future__ import annotations

import functools
from typing import NamedTuple

from ..ir.registry import ops
from .reductions import REDUCTIONS
from .targets import TARGETS

# not in the registry's pointwise set, but lowered: casts, copies, fills, indices, views, literals
STRUCTURAL = frozenset({"to", "contiguous", "clone", "full", "iota", "view", "scalar"})


class OpClasses(NamedTuple):
    pointwise: frozenset[str]
    reductions: frozenset[str]
    bool_result: frozenset[str]
    supported: frozenset[str]


@functools.lru_cache(maxsize=None)
def op_classes() -> OpClasses:
    table = ops()
    primitive = {n: d for n, d in table.items() if not d.has("composite")}
    pointwise = frozenset(n for n, d in primitive.items() if d.has("pointwise")
                          and all(t.spells(n) for t in TARGETS.values()))
    reductions = frozenset(n for n, d in primitive.items() if d.has("reduction") and n in REDUCTIONS)
    bool_result = frozenset(n for n, d in table.items() if d.promotion.value == "always_bool")
    return OpClasses(pointwise, reductions, bool_result, pointwise | reductions | STRUCTURAL)

"""What each reduction means, once: one record per reduction op, read by every renderer.

Modelled on MLX's kernels/reduction/ops.h, where each reduction is a struct with its identity
(`init`), its combine (`operator()`) and its simd collective: here `identity`, `update` (the
per-element statement), `fold` (two partials into one: the GPU templates' tree combine), `omp`
(the OpenMP reduction clause's operator, for the C templates), `simd` (the name of the dialect's
collective in its `extra`, e.g. simd_sum: used where the dialect has it for the dtype) and `nan`
(whether a NaN among the inputs must win: tracked by a flag, since max/min drop NaNs).
argmax/argmin carry an index and compare; they have no clause or collective.
"""
from __future__ import annotations

from dataclasses import dataclass

from ..ir.dtypes import DType


@dataclass(frozen=True)
class Reduction:
    op: str
    update: str | None          # statement over {a} (accumulator) and {v} (value); None: indexed
    fold: str | None            # expression combining partials {0} and {1}
    omp: str | None             # OpenMP reduction operator
    simd: str | None            # key of the dialect's simd collective in Dialect.extra
    nan: bool = False           # float: a NaN input makes the result NaN (flag tracked alongside)
    compare: str | None = None  # argmax/argmin: the comparison that replaces the accumulator
    big: bool = False           # identity is the dtype's largest value (min-like) else smallest

    def identity(self, dt: DType) -> str:
        if self.op in ("sum", "any"):
            return "0"
        if self.op in ("prod", "all"):
            return "1"
        if dt.is_floating_point:
            return "INFINITY" if self.big else "-INFINITY"
        if dt.is_bool:
            return "1" if self.big else "0"
        bits = dt.itemsize * 8
        if not dt.signed:
            return str(2**bits - 1) if self.big else "0"
        return f"{2**(bits - 1) - 1}" if self.big else f"(-{2**(bits - 1) - 1} - 1)"


REDUCTIONS: dict[str, Reduction] = {r.op: r for r in (
    Reduction("sum", "{a} += {v};", "({0} + {1})", "+", "simd_sum"),
    Reduction("prod", "{a} *= {v};", "({0} * {1})", "*", "simd_prod"),
    Reduction("amax", "{a} = {v} > {a} ? {v} : {a};", "({1} > {0} ? {1} : {0})", "max", "simd_amax", nan=True),
    Reduction("amin", "{a} = {v} < {a} ? {v} : {a};", "({1} < {0} ? {1} : {0})", "min", "simd_amin", nan=True,
              big=True),
    Reduction("any", "{a} = {a} || {v};", "({0} || {1})", "||", "simd_any"),
    Reduction("all", "{a} = {a} && {v};", "({0} && {1})", "&&", "simd_all", big=True),
    Reduction("argmax", None, None, None, None, nan=True, compare=">"),
    Reduction("argmin", None, None, None, None, nan=True, compare="<", big=True),
)}

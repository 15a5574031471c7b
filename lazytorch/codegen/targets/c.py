"""The C target (cpu backend): C11 kernels compiled by the system compiler, OpenMP threads.

Each kernel is a function `void name(char **args)` over a flat argument array (buffers in
launch.reads + launch.writes order, then the int32 error word); the runtime compiles all kernels
of a program into one library (runtime/cpu.py, runtime/compiler.py).  Templates: c_linear
(contiguous pointwise), c_rows (outer index x inner loop, reductions per row), c_columns
(reductions over a non-innermost dim).  Half types are stored as _Float16/bf16 words and compute
in float32; float32 transcendental functions are preamble helpers (vectorizable, <= 1 ulp).
"""
from __future__ import annotations

from ..dialect import C_CHECKED, C_MATH, INT_C, Dialect, libm_suffix

# A kernel forks threads from this many elements on: below it the fork costs more than it saves
# (measured on 2 cores: x*2+1 at 32k-131k elements took 97-160 us parallel against 53-86 us on
# one thread; tanh broke even at 262k).  docs/architecture.md, "Threads".
PARALLEL_MIN = 262144

DIALECT = Dialect(
    name="c",
    storage={"bool": "uint8_t", **INT_C, "float16": "_Float16", "bfloat16": "uint16_t",
             "float32": "float", "float64": "double"},
    register={"bool": "_Bool", **INT_C, "float16": "float", "bfloat16": "float",
              "float32": "float", "float64": "double"},
    math=libm_suffix({**C_MATH, **C_CHECKED}),
    load={"bfloat16": "lt_bf16_to_f32({ptr}[{idx}])", "float16": "(float){ptr}[{idx}]",
          "bool": "({ptr}[{idx}] != 0)", "*": "{ptr}[{idx}]"},
    store={"bfloat16": "lt_f32_to_bf16({0})", "float16": "(_Float16)({0})", "bool": "(uint8_t)({0})",
           "*": "{0}"},
    # a float cast to uint8 goes through int64 and wraps (-19.0 -> 237) as torch's CPU does; C leaves
    # a direct out-of-range float -> unsigned conversion undefined (ARM saturates it to 0)
    # casts to a float type go through lt_to_float/lt_to_double (preamble): from an integer they add
    # +0, because GCC folds `(float)(int64_t)x` into truncf(x), which keeps the sign of zero
    # (torch: `(x = -0.98).long().float()` is +0.0)
    cast={"bool": "(({0}) != 0)", "uint8": "({T})(int64_t)({0})", "float16": "lt_round_f16(lt_to_float({0}))",
          "bfloat16": "lt_round_bf16(lt_to_float({0}))", "float32": "lt_to_float({0})",
          "float64": "lt_to_double({0})", "*": "({T})({0})"},
    templates={"linear": "c_linear.c.j2", "rows": "c_rows.c.j2", "columns": "c_columns.c.j2"},
    preamble="c_preamble.h.j2",
    template_helpers={s: frozenset({"lt_parallel"}) for s in ("linear", "rows", "columns")},
    extra={"parallel_min": str(PARALLEL_MIN)},
)

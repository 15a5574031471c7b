"""The C target (cpu backend): C11 kernels compiled by the system compiler, OpenMP threads.

Each kernel is a function `void name(char **args)` over a flat argument array (buffers in
launch.reads + launch.writes order, then the int32 error word); the runtime compiles all kernels
of a program into one library (runtime/cpu.py, runtime/compiler.py).  Templates: c_linear
(contiguous pointwise), c_rows (outer index x inner loop, reductions per row), c_columns
(reductions over a non-innermost dim).  Half types are stored as _Float16/bf16 words and compute
in float32; float32 transcendental functions are preamble helpers (vectorizable, <= 1 ulp).
"""
from __future__ import annotations

from ..cost import ParallelRule
from ..dialect import C_CHECKED, C_MATH, INT_C, Dialect, libm_suffix

# When a kernel's loop forks threads: from an estimated work (codegen/cost.py) that pays for the
# fork.  Measured on the 2-core dev machine with `python -m benchmarks.parallel_cost` (each probe
# 131072 elements, serial and forked alternating; docs/benchmarks.md, "Parallel kernels by work,
# not size"):
# - one unit is an element of `a + b` (two loads, an add, a store): 0.15-0.17 ns on one thread
#   (UNIT_NS); per element, serial: x*2+1 0.12-0.15 ns, a / b and sqrt 0.26 (next to add's 0.28
#   in the same run), exp and tanh 0.69-0.89, sigmoid 1.1, log 1.4-1.9 (erf as well, until its
#   float32 version: 0.56 alone, class exp since), pow, sin and
#   float64 exp (libm calls) 6.6-9.3, a sum over rows of 256 0.07-0.10, softmax rows of 64 1.1-1.4,
#   layer_norm rows of 256 0.30-0.57, tanh-GELU 0.88-1.2;
# - an OpenMP region with nothing to do costs 1.1 us while libgomp's workers still spin (the
#   runtime's spin count, runtime/threads.py: right after another region) but 35-69 us (median of
#   a run; min 5-21) once they sleep, 20 us or more after the last region: a kernel after a BLAS
#   call or the host's work between launches finds them asleep (FORK_US);
# - a forked loop also moves half its data between the cores' caches: `a + b` and x*2+1 at 131072
#   elements took 30-53 us longer forked than serial even with the workers spinning (MOVE_US);
# - on 2 threads a loop of serial time T takes T/2 + FORK_US + MOVE_US, so it forks from twice
#   that: ~160 us of serial work, 1.07M units.  In programs: the README demo's softmax rows
#   (1.36M units) took 157-158 us median forked against 204-230 serial (LAZYTORCH_DEBUG launch
#   times), W9's erf-GELU epilogue (1.0M units, 84480 elements) 188-219 forked against 136-163.
UNIT_NS = 0.15
FORK_US = 40.0
MOVE_US = 40.0
PARALLEL = ParallelRule(
    class_cost={"cheap": 0.2, "memory": 0.2, "divide": 0.5, "exp": 4.5, "exp_double": 10.0, "libm": 45.0},
    pass_cost=0.2,
    min_work=2 * (FORK_US + MOVE_US) * 1e3 / UNIT_NS,
)

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
    extra={"parallel": PARALLEL},
)

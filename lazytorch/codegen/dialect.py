"""The Dialect table type and the C-family expression tables every target starts from.

A Dialect says how one target spells types, buffer qualifiers, loads/stores/casts, math and the
GPU templates' thread vocabulary; render.py and the templates in shaders/ are shared.
Expressions are format strings over argument expressions `{0}`, `{1}`, ... and `{t}` (the
register dtype's short name: f32, i64, ...), looked up most specific first: `op@f32`, then
`op@float` / `op@int` / `op@bool`, then `op`.  The targets themselves live in codegen/targets/.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from ..ir import dtypes as D
from ..ir.dtypes import DType

FLOAT_FUNCS = ("exp", "exp2", "expm1", "log", "log2", "log10", "log1p", "sqrt", "rsqrt", "reciprocal",
               "sin", "cos", "tan", "asin", "acos", "atan", "sinh", "cosh", "tanh", "erf", "sigmoid",
               "floor", "ceil", "round", "trunc")


@dataclass(frozen=True)
class Dialect:
    name: str
    storage: dict[str, str]              # dtype name -> type buffers hold
    register: dict[str, str]             # dtype name -> type values compute in
    math: dict[str, str]                 # op[@dtype|@category] -> expression format
    load: dict[str, str]                 # storage dtype name (or "*") -> load format over {ptr}[{idx}]
    store: dict[str, str]                # storage dtype name (or "*") -> stored expression over {0}
    cast: dict[str, str]                 # target dtype name (or "*") -> cast format over {0}, {T}
    templates: dict[str, str]            # kernel shape ("linear", "rows", "columns") -> template file
    preamble: str                        # template file with the helper functions
    in_qualifier: str = "const"
    restrict: str = "restrict"
    gpu: bool = False                    # one thread per element / threadgroup per row (Metal, CUDA)
    template_helpers: dict[str, frozenset[str]] = field(default_factory=dict)  # shape -> helpers it calls
    extra: dict = field(default_factory=dict)   # target-specific (barrier, simd_*, thread ids, vector words)

    def expr(self, op: str, dtype: DType, args: list[str]) -> str:
        cat = "float" if dtype.is_floating_point else "bool" if dtype.is_bool else "int"
        for key in (f"{op}@{dtype.short}", f"{op}@{cat}", op):
            fmt = self.math.get(key)
            if fmt is not None:
                return fmt.format(*args, t=dtype.short)
        raise KeyError(f"dialect {self.name}: no expression for {op} on {dtype.name}")

    def spells(self, op: str) -> bool:
        return any(k == op or k.startswith(op + "@") for k in self.math)

    def storage_type(self, dt: DType) -> str:
        return self.storage[dt.name]

    def register_type(self, dt: DType) -> str:
        return self.register[dt.name]


# What the GPU targets' tables share: the GPU templates (shaders/gpu_*.j2) and what they call.
GPU_FIELDS = dict(templates={"linear": "gpu_linear.j2", "rows": "gpu_rows.j2", "columns": "gpu_columns.j2"},
                  restrict="", gpu=True, template_helpers={"rows": frozenset({"lt_shuffle_down"})})

INT_C = {"uint8": "uint8_t", "int8": "int8_t", "int16": "int16_t", "int32": "int32_t", "int64": "int64_t"}
# (short name, C type, unsigned C type) of each integer type, for the preamble templates
INT_TYPES = [(D.BY_NAME[n].short, c, "u" + c.lstrip("u") if not c.startswith("u") else c)
             for n, c in INT_C.items()]

C_MATH = {
    # unary
    "neg": "(-{0})", "abs@float": "fabs{F}({0})", "abs@int": "(({0}) < 0 ? -({0}) : ({0}))", "abs@bool": "{0}",
    "abs@u8": "{0}",
    "sign": "((({0}) > 0) - (({0}) < 0))",      # torch: sign(NaN) = 0, sign(-0.0) = +0
    "sign@bool": "{0}",
    "isnan@float": "(({0}) != ({0}))", "isnan": "0",
    "isinf@float": "(({0}) == INFINITY || ({0}) == -INFINITY)", "isinf": "0",
    "isfinite@float": "(({0}) - ({0}) == 0)", "isfinite": "1",
    "logical_not": "(!({0}))", "bitwise_not": "(~({0}))", "bitwise_not@bool": "(!({0}))",
    **{f"{f}@float": f"lt_{f}_{{t}}({{0}})" for f in FLOAT_FUNCS},
    **{f"{f}@int": "{0}" for f in ("floor", "ceil", "round", "trunc")},
    **{f"{f}@bool": "{0}" for f in ("floor", "ceil", "round", "trunc")},
    # binary
    "add": "({0} + {1})", "sub": "({0} - {1})", "mul": "({0} * {1})", "div": "({0} / {1})",
    "add@bool": "({0} || {1})", "mul@bool": "({0} && {1})",
    "div_trunc@float": "trunc{F}({0} / {1})", "div_trunc@int": "lt_idiv_{t}({0}, {1})",
    "div_floor@float": "lt_floordiv_{t}({0}, {1})", "div_floor@int": "lt_ifloordiv_{t}({0}, {1})",
    "floor_divide@float": "lt_floordiv_{t}({0}, {1})", "floor_divide@int": "lt_ifloordiv_{t}({0}, {1})",
    "remainder@float": "lt_rem_{t}({0}, {1})", "remainder@int": "lt_irem_{t}({0}, {1})",
    "fmod@float": "fmod{F}({0}, {1})", "fmod@int": "lt_ifmod_{t}({0}, {1})",
    "pow@float": "pow{F}({0}, {1})", "pow@int": "lt_ipow_{t}({0}, {1})",
    "maximum@float": "lt_max_{t}({0}, {1})", "maximum": "(({0}) > ({1}) ? ({0}) : ({1}))",
    "minimum@float": "lt_min_{t}({0}, {1})", "minimum": "(({0}) < ({1}) ? ({0}) : ({1}))",
    "atan2@float": "atan2{F}({0}, {1})",
    "eq": "({0} == {1})", "ne": "({0} != {1})", "lt": "({0} < {1})", "le": "({0} <= {1})",
    "gt": "({0} > {1})", "ge": "({0} >= {1})",
    "logical_and": "({0} && {1})", "logical_or": "({0} || {1})", "logical_xor": "(!({0}) != !({1}))",
    "bitwise_and": "({0} & {1})", "bitwise_or": "({0} | {1})", "bitwise_xor": "({0} ^ {1})",
    "where": "({0} ? {1} : {2})",
}

# integer division reports division by zero through the kernel's error word `lt_err`
C_CHECKED = {f"{op}@int": f"lt_{fn}_{{t}}({{0}}, {{1}}, lt_err)" for op, fn in
             [("div_trunc", "idiv"), ("div_floor", "ifloordiv"), ("floor_divide", "ifloordiv"),
              ("remainder", "irem"), ("fmod", "ifmod")]}


def libm_suffix(table: dict[str, str]) -> dict[str, str]:
    """Split `{F}` (libm's float suffix) into per-dtype entries: fabsf for f32, fabs for f64."""
    out = {}
    for k, v in table.items():
        if "{F}" in v:
            base = k.split("@")[0]
            out[f"{base}@f32"] = v.replace("{F}", "f")
            out[f"{base}@f64"] = v.replace("{F}", "")
        else:
            out[k] = v
    return out

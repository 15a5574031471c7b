"""Parse and bind torch-style op schemas: `add(Tensor self, Tensor other, *, Scalar alpha=1) -> Tensor`.

A Schema knows its parameters (type, name, default, keyword-only) and binds a Python call to them,
raising a TypeError that quotes the schema when the call does not fit.
"""
from __future__ import annotations

import ast
import re
from dataclasses import dataclass
from typing import Any

from .node import Node

_NO_DEFAULT = object()
_PARAM = re.compile(r"^(?P<type>[A-Za-z]+(?:\|[A-Za-z]+)?(?:\[\d*\])?\??)\s+(?P<name>\w+)(?:\s*=\s*(?P<default>.+))?$")


@dataclass(frozen=True)
class Param:
    type: str          # "Tensor", "Tensor|Scalar", "Tensor?", "Scalar", "int[]", "int[1]?", "ScalarType?", ...
    name: str
    default: Any
    kwarg_only: bool
    base: str = ""     # type without `?` and list size: "int[1]?" -> "int[]" (filled in at parse)

    def __post_init__(self):
        # binding runs on every op call, so derived facts are computed once here
        object.__setattr__(self, "base", re.sub(r"\[\d+\]", "[]", self.type.rstrip("?")))

    @property
    def optional(self) -> bool:
        return self.type.endswith("?")

    @property
    def has_default(self) -> bool:
        return self.default is not _NO_DEFAULT


@dataclass(frozen=True)
class Schema:
    text: str
    name: str
    overload: str
    params: tuple[Param, ...]
    returns: tuple[str, ...]

    def __str__(self) -> str:
        return self.text

    def __post_init__(self):
        object.__setattr__(self, "positional", [p for p in self.params if not p.kwarg_only])
        object.__setattr__(self, "names", frozenset(p.name for p in self.params))

    def bind(self, args: tuple, kwargs: dict) -> dict[str, Any]:
        """Match a call to the parameters; values are checked by kind but not converted."""
        positional = self.positional
        if len(args) > len(positional) or positional and positional[-1].base == "Tensor[]":
            args = pack_int_list_varargs(positional, args)
        if len(args) > len(positional):
            raise SchemaError(self, f"takes {len(positional)} positional arguments but {len(args)} were given")
        bound: dict[str, Any] = dict(zip((p.name for p in positional), args))
        names = self.names
        for k, v in kwargs.items():
            if k not in names:
                raise SchemaError(self, f"got an unexpected keyword argument '{k}'")
            if k in bound:
                raise SchemaError(self, f"got multiple values for argument '{k}'")
            bound[k] = v
        for p in self.params:
            if p.name not in bound:
                if not p.has_default:
                    raise SchemaError(self, f"missing required argument '{p.name}'")
                bound[p.name] = p.default
            elif not _fits(p, bound[p.name]):
                raise SchemaError(self, f"argument '{p.name}' must be {p.type}, not {type(bound[p.name]).__name__}")
        return bound


class SchemaError(TypeError):
    def __init__(self, schema: Schema, message: str):
        super().__init__(f"{schema.name}(): {message}\n  expected: {schema.text}")
        self.schema = schema


def pack_int_list_varargs(positional: list[Param], args: tuple) -> tuple:
    """torch lets `x.view(2, 3)` stand for `x.view((2, 3))` and `zeros(2, 3)` for `zeros((2, 3))`."""
    # `einsum("ij,jk", a, b)` stands for `einsum("ij,jk", (a, b))` when Tensor[] is the last positional
    last = len(positional) - 1
    if positional and positional[-1].base == "Tensor[]" and len(args) > last and \
            all(hasattr(a, "node") for a in args[last:]):
        return args[:last] + (tuple(args[last:]),)
    if len(args) <= len(positional):
        return args
    for i, p in enumerate(positional):
        if p.base == "int[]" and all(_is_int(a) and not isinstance(a, bool) for a in args[i:]):
            return args[:i] + (tuple(args[i:]),)
    return args


def _is_int(x) -> bool:
    return isinstance(x, int) or (hasattr(x, "__index__") and not hasattr(x, "node") and not isinstance(x, float))


def _fits(p: Param, v) -> bool:
    if v is None:
        return p.optional or p.default is None
    check = _CHECKS.get(p.base)
    return check is None or check(v)            # ScalarType, Generator, Any: checked by the op


def _is_number_or_tensor(v) -> bool:
    return isinstance(v, (bool, int, float)) or _is_tensor(v) or _is_np_scalar(v)


# What a value of each parameter type may be, as a table (binding runs on every op call).
# `Tensor` is a tensor only (torch rejects `maximum(x, 2)`); `Tensor|Scalar` also takes a Python
# number, where torch has a Scalar overload or accepts numbers as tensors (`add(x, 2)`, `eq(x, 2)`).
_CHECKS = {
    "Tensor": lambda v: _is_tensor(v),
    "Tensor|Scalar": _is_number_or_tensor,
    "Scalar": _is_number_or_tensor,
    "Tensor[]": lambda v: isinstance(v, (list, tuple)) and all(_is_tensor(t) for t in v),
    "int": lambda v: _is_int(v) and not isinstance(v, bool),
    "int[]": lambda v: _is_int(v) or isinstance(v, (list, tuple)) and all(_is_int(x) for x in v),
    "float": lambda v: isinstance(v, (int, float)) and not isinstance(v, bool),
    "float|str": lambda v: isinstance(v, (int, float, str)) and not isinstance(v, bool),
    "bool": lambda v: isinstance(v, bool),
    "str": lambda v: isinstance(v, str),
}


def _is_tensor(v) -> bool:
    """A Tensor (has .node) or an IR Node itself (decompositions and builders call with nodes)."""
    return hasattr(v, "node") or isinstance(v, Node)


def _is_np_scalar(v) -> bool:
    return type(v).__module__ == "numpy" and getattr(v, "shape", None) == ()


def parse(text: str) -> Schema:
    m = re.match(r"^\s*([\w]+)(?:\.(\w+))?\((.*)\)\s*->\s*(.+?)\s*$", text)
    if not m:
        raise ValueError(f"bad schema: {text}")
    name, overload, params_text, ret = m.groups()
    params, kw_only = [], False
    for piece in _split_top(params_text):
        piece = piece.strip()
        if not piece:
            continue
        if piece == "*":
            kw_only = True
            continue
        pm = _PARAM.match(piece)
        if not pm:
            raise ValueError(f"bad parameter '{piece}' in schema: {text}")
        default = _NO_DEFAULT if pm["default"] is None else _literal(pm["default"])
        params.append(Param(pm["type"], pm["name"], default, kw_only))
    ret = ret.strip()
    returns = tuple(r.strip().split()[0] for r in _split_top(ret[1:-1])) if ret.startswith("(") else (ret,)
    return Schema(text.strip(), name, overload or "", tuple(params), returns)


def _split_top(s: str) -> list[str]:
    out, depth, cur = [], 0, []
    for ch in s:
        if ch in "[(":
            depth += 1
        elif ch in "])":
            depth -= 1
        if ch == "," and depth == 0:
            out.append("".join(cur))
            cur = []
        else:
            cur.append(ch)
    out.append("".join(cur))
    return out


def _literal(text: str):
    text = text.strip()
    if text in ("True", "False", "None"):
        return {"True": True, "False": False, "None": None}[text]
    if text.startswith("["):
        return tuple(ast.literal_eval(text))
    try:
        return ast.literal_eval(text)
    except (ValueError, SyntaxError):
        return text                              # bare words such as `contiguous_format`

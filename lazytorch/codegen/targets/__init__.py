"""The code generation targets, one module each, registered here by an explicit table.

A target module holds its Dialect table (codegen/dialect.py) and, for GPU targets, the launch
record its runtime hands to MLX and the full source MLX compiles around a kernel body.
"""
from __future__ import annotations

from ..dialect import Dialect
from . import c, cuda, metal

TARGETS: dict[str, Dialect] = {"c": c.DIALECT, "metal": metal.DIALECT, "cuda": cuda.DIALECT}


def get_dialect(name: str) -> Dialect:
    try:
        return TARGETS[name]
    except KeyError:
        raise ValueError(f"unknown dialect '{name}'; valid: {', '.join(TARGETS)}") from None

"""The op registry: every op's declaration, loaded from the YAML files in ir/registry/.

Each entry gives a schema (one or more overloads), its variants (function, method), tags
(pointwise, reduction, view, composite, creation, ...), its promotion kind, the meta rule that
computes its shape and dtype, and which extra forms the API generates (in-place `x.add_`, `out=`,
Python operators).  The Tensor API, the meta rules, the decompositions and the kernels are all
looked up by the op names declared here.
"""
from __future__ import annotations

from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any, Callable

import yaml

from .promotion import Promotion
from .schema import Schema, parse

REGISTRY_DIR = Path(__file__).parent / "registry"
TAGS = frozenset({"pointwise", "reduction", "view", "composite", "creation", "linalg", "shape",
                  "nondeterministic_seeded", "index", "nn", "scan",
                  "returns_self"})   # the call returns self itself when its builder leaves self's node unchanged


@dataclass(frozen=True)
class OpDef:
    name: str
    schemas: tuple[Schema, ...]
    variants: frozenset[str]
    tags: frozenset[str]
    promotion: Promotion
    meta: str                  # name of the meta rule in ir/meta.py
    build: str                 # name of the builder in ir/build.py ("generic" builds one node)
    inplace: bool              # generate `x.name_(...)`
    out: bool                  # accept `out=`
    operators: tuple[str, ...]  # Python operators bound to this op (reflected ones swap operands)
    aliases: tuple[str, ...]   # further names for the same op (torch's `clip` for `clamp`)
    nn: bool | str             # also exported by lt.nn.functional (a string: under that name, where
                               # torch's nn.functional name is another op's: F.unfold vs Tensor.unfold)
    allow: frozenset[str]      # dtype categories accepted ("bool", "integer", "floating")
    meta_args: tuple[tuple[str, object], ...]  # parameters of the meta rule, e.g. (("result", "long"),)

    def meta_arg(self, name: str, default=None):
        return dict(self.meta_args).get(name, default)

    def has(self, tag: str) -> bool:
        return tag in self.tags


def _default_meta(tags: set[str]) -> str:
    for tag in ("pointwise", "reduction"):
        if tag in tags:
            return tag
    return "none"


def _load_entry(entry: dict, source: str) -> OpDef:
    funcs = entry["func"] if isinstance(entry["func"], list) else [entry["func"]]
    schemas = tuple(parse(f) for f in funcs)
    name = schemas[0].name
    tags = set(entry.get("tags", []))
    unknown = tags - TAGS
    if unknown:
        raise ValueError(f"{source}: op {name} has unknown tags {sorted(unknown)}")
    autogen = set(entry.get("autogen", []))
    return OpDef(
        name=name,
        schemas=schemas,
        variants=frozenset(entry.get("variants", ["function", "method"])),
        tags=frozenset(tags),
        promotion=Promotion(entry.get("promotion", "default")),
        meta=entry.get("meta", _default_meta(tags)),
        build=entry.get("build", "generic"),
        inplace="inplace" in autogen,
        out="out" in autogen,
        operators=tuple(entry.get("operators", [])),
        aliases=tuple(entry.get("aliases", [])),
        nn=entry["nn"] if isinstance(entry.get("nn"), str) else bool(entry.get("nn", False)),
        allow=frozenset(entry.get("allow", ["bool", "integer", "floating"])),
        meta_args=tuple(sorted((entry.get("meta_args") or {}).items())),
    )


# libyaml's parser where PyYAML was built with it: the registry loads at import, ~8x faster
_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


@cache
def ops() -> dict[str, OpDef]:
    """All ops by name (and alias), from every YAML file of the registry."""
    table: dict[str, OpDef] = {}
    for path in sorted(REGISTRY_DIR.glob("*.yaml")):
        for entry in yaml.load(path.read_text(), Loader=_LOADER) or []:
            op = _load_entry(entry, path.name)
            for name in (op.name, *op.aliases):
                if name in table:
                    raise ValueError(f"{path.name}: op {name} is declared twice")
                table[name] = op
    return table


def registrar(table: dict[str, Any]) -> Callable[..., Callable]:
    """The decorator that files a function in `table` under each of the op names it is given: every
    per-op table (meta rules, family builders, reference implementations, derivative rules) fills
    itself this way, as `@rule("add", "sub")`."""
    def names(*ops: str) -> Callable:
        def register(fn):
            for name in ops:
                table[name] = fn
            return fn
        return register
    return names


def get(name: str) -> OpDef:
    try:
        return ops()[name]
    except KeyError:
        raise NotImplementedError(f"lazytorch has no op named '{name}'") from None

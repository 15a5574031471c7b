"""Readable dumps of the IR: one line per node (torch.fx / jaxpr style) and Graphviz DOT.

    %2 : f32[64, 32] = matmul(%0, %1)
    %4 : f32[64, 32] = add(%2, %3)
    return (%4)
"""
from __future__ import annotations

from .graph import toposort
from .node import Node, type_str
from .registry import ops


def _defaults(op: str) -> dict:
    opdef = ops().get(op)
    if opdef is None:
        return {}
    return {p.name: p.default for s in opdef.schemas for p in s.params if p.has_default}


def _fmt(v) -> str:
    if hasattr(v, "name") and hasattr(v, "short"):
        return v.name
    return repr(v)


def format_node(n: Node, names: dict[int, str]) -> str:
    args = [names[id(i)] for i in n.inputs]
    if n.op == "scalar":
        args.append(repr(n.value))
    defaults = _defaults(n.op)
    args += [f"{k}={_fmt(v)}" for k, v in n.attrs.items()
             if not (k in defaults and defaults[k] == v and type(defaults[k]) is type(v))]
    return f"{names[id(n)]} : {type_str(n)} = {n.op}({', '.join(args)})"


def dump_nodes(roots: list[Node]) -> str:
    order = toposort(roots)
    names = {id(n): f"%{i}" for i, n in enumerate(order)}
    lines = [format_node(n, names) for n in order]
    lines.append(f"return ({', '.join(names[id(r)] for r in roots)})")
    return "\n".join(lines)


def to_dot(roots: list[Node]) -> str:
    order = toposort(roots)
    names = {id(n): f"n{i}" for i, n in enumerate(order)}
    out = ["digraph lazytorch {", "  node [shape=box, fontname=monospace];"]
    for n in order:
        label = f"{names[id(n)]}: {n.op}\\n{type_str(n)}"
        out.append(f'  {names[id(n)]} [label="{label}"];')
        for pos, i in enumerate(n.inputs):
            out.append(f"  {names[id(i)]} -> {names[id(n)]} [label={pos}];")
    out.append("}")
    return "\n".join(out)

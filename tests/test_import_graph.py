"""The package's import graph, built from the source with `ast`: no circles anywhere in lazytorch/,
and the back end's layering (codegen never imports the runtime; runtime never imports the driver)."""
from __future__ import annotations

import ast
from pathlib import Path

import networkx as nx

PKG = Path(__file__).resolve().parents[1] / "lazytorch"


def _module(path: Path) -> str:
    parts = list(path.relative_to(PKG.parent).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def import_graph() -> nx.DiGraph:
    """module -> module it imports (at any depth in the file, function-level imports included)."""
    modules = {_module(p): p for p in PKG.rglob("*.py")}
    g = nx.DiGraph()
    g.add_nodes_from(modules)
    for name, path in modules.items():
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            targets: list[str] = []
            if isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    up = package.split(".")[: len(package.split(".")) - node.level + 1]
                    base = ".".join(up + ([node.module] if node.module else []))
                targets = [f"{base}.{a.name}" for a in node.names] + [base]
            for t in targets:
                while t and t not in modules:        # `from pkg import name`: name may be a module
                    t = t.rpartition(".")[0]
                if t and t != name and t.startswith("lazytorch"):
                    g.add_edge(name, t)
    return g


def _is_ancestor_package(a: str, b: str) -> bool:
    return b.startswith(a + ".")


# Circles tolerated for now (each with the reason it cannot be broken yet); none today.
KNOWN: set[frozenset[str]] = set()


def test_no_import_cycles():
    g = import_graph()
    # importing a submodule runs its package's __init__ first; an __init__ that imports its own
    # submodules is the package's table of contents, not a circle
    h = g.copy()
    h.remove_edges_from([(a, b) for a, b in g.edges if _is_ancestor_package(a, b) or _is_ancestor_package(b, a)])
    cycles = [c for c in nx.simple_cycles(h) if frozenset(c) not in KNOWN]
    assert not cycles, "import circles:\n" + "\n".join(" -> ".join(c + [c[0]]) for c in cycles[:10])


def test_back_end_layering():
    g = import_graph()
    bad = [(a, b) for a, b in g.edges
           if (a.startswith("lazytorch.codegen") and b.startswith("lazytorch.runtime"))
           or (a.startswith(("lazytorch.codegen", "lazytorch.runtime")) and b in ("lazytorch.realize", "lazytorch.tensor"))]
    assert not bad, f"imports against the layering: {bad}"

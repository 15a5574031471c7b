"""`lt.show_kernels`: the generated source of every kernel of a program, for any backend, on any
host, without compiling or running anything."""
from __future__ import annotations

from ..ir.graph import toposort
from ..passes.normalize import normalize
from ..passes.pipeline import compile_plan
from .gpu import launch_call
from .lower import Unsupported, lower
from .render import render
from .targets import cuda, metal


def _c_source(launch) -> str | None:
    return render(lower(launch, "lt_" + launch.name, row_cache=True), "c").source


def _metal_source(launch) -> str | None:
    call = launch_call(launch, "metal")
    return None if call is None else metal.assemble(call).source


def _cuda_source(launch) -> str | None:
    call = launch_call(launch, "cuda")
    return None if call is None else cuda.assemble(call)


SOURCES = {"cpu": _c_source, "metal": _metal_source, "metal-emu": _metal_source, "cuda": _cuda_source}


def kernel_sources(nodes, backend: str) -> list[tuple[str, str]]:
    """(launch header, source) of each launch of the pending program of `nodes` on `backend`."""
    if backend not in SOURCES:
        raise ValueError(f"show_kernels: no code generator for backend '{backend}'; valid: {', '.join(SOURCES)}")
    roots, seen = [], set()
    for n in nodes:
        if not n.realized and id(n) not in seen:
            seen.add(id(n))
            roots.append(n)
    if not roots:
        return []
    params, norm = normalize(toposort(roots), roots)
    plan = compile_plan(params, norm)
    out = []
    for launch in plan.launches:
        head = f"// {launch.name}: {launch.kind}/{launch.pattern}"
        src = None
        if launch.kind == "kernel":
            try:
                src = SOURCES[backend](launch)
            except Unsupported:
                src = None
        out.append((head, src if src is not None else f"// runs as a {launch.kind if launch.kind != 'kernel' else 'reference'} "
                    f"call: {', '.join(n.op for n in launch.nodes)}\n"))
    return out

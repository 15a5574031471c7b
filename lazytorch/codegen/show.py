"""`lt.show_kernels`: the generated source of every kernel of a plan, for any backend, on any
host, without compiling or running anything (lazytorch/realize.py makes the plan)."""
from __future__ import annotations

from ..passes.plan import origins
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


def plan_sources(plan, backend: str) -> list[tuple[str, str]]:
    """(launch header, source) of each launch of a plan (lazytorch/realize.py builds it) on
    `backend`; the header names the user's source lines the launch fused (kept out of the source
    itself, so the compiled-kernel cache keys do not change with the caller's line numbers)."""
    if backend not in SOURCES:
        raise ValueError(f"show_kernels: no code generator for backend '{backend}'; valid: {', '.join(SOURCES)}")
    out = []
    for launch in plan.launches:
        src_lines = origins(launch.nodes)
        head = f"// {launch.name}: {launch.kind}/{launch.pattern}" + (f"  from {', '.join(src_lines)}"
                                                                      if src_lines else "")
        src = None
        if launch.kind == "kernel":
            try:
                src = SOURCES[backend](launch)
            except Unsupported:
                src = None
        out.append((head, src if src is not None else f"// runs as a {launch.kind if launch.kind != 'kernel' else 'reference'} "
                    f"call: {', '.join(n.op for n in launch.nodes)}\n"))
    return out

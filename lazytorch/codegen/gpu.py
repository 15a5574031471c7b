"""What the GPU targets (Metal, CUDA) share: from a plan launch to the MLX call that runs it.

Both targets render through the same templates (shaders/gpu_*.j2) and launch through MLX, so one
path serves both: dtype legality (no float64 on either), 0-d float64 scalars read as float32,
lowering, rendering (whose Rendered carries the grid and threadgroup), the header cut to the
helpers the kernel calls, and the MlxCall.  A target is one row of GPU_CALLS: its MlxCall class,
which also spells (or refuses) its buffer dtypes.
"""
from __future__ import annotations

import dataclasses
import hashlib

from ..ir import dtypes as D
from ..ir.dtypes import DType
from .kernel_ir import Kernel
from .lower import Unsupported, lower, supports
from .mlx_call import MlxCall
from .render import Rendered, header, render
from .targets import cuda, metal

# The extra int32[1] output of kernels that divide integers: set to 1 on division by zero.
ERROR_FLAG = "lt_err"


GPU_CALLS: dict[str, type[MlxCall]] = {"metal": metal.MetalCall, "cuda": cuda.CudaCall}   # by dialect name


def check_dtypes(launch, target: str) -> None:
    """No float64 on the GPU: name the op and dtype instead of computing something else.  0-d
    float64 params (Python scalars) are the exception: they are read as float32 (narrow_scalars)."""
    type_name = GPU_CALLS[target].type_name       # (raises TypeError for dtypes the target lacks)
    for n in launch.nodes:
        if n.op not in ("param", "scalar"):
            type_name(n.dtype, n.op)
    for n, b in launch.reads:
        if b.shape != ():
            type_name(n.dtype, n.op)


def scalar_dtype(dtype: DType) -> DType:
    """The dtype a GPU backend stores a scalar param (a Python number) in: float64 as float32."""
    return D.float32 if dtype is D.float64 else dtype


def narrow_scalars(kernel: Kernel) -> Kernel:
    """Read 1-element float64 inputs (scalar params) and float64 literals (the constants an
    lt.compile trace bakes in) as float32: GPU buffers and registers cannot hold doubles.  The
    backends store such scalars as float32 (scalar_dtype, in their Backend.scalar)."""
    wide = {i for i, a in enumerate(kernel.args) if a.dtype is D.float64 and a.role == "in" and a.numel == 1}
    for stage in kernel.stages:
        for op in stage.ops:
            if op.op == "load" and op.attrs.get("storage") is D.float64:
                op.attrs["storage"] = D.float32
                op.dtype = D.float32
            elif op.op == "const" and op.dtype is D.float64:
                op.dtype = D.float32
    if not wide:
        return kernel
    args = [dataclasses.replace(a, dtype=D.float32) if i in wide else a for i, a in enumerate(kernel.args)]
    return dataclasses.replace(kernel, args=args)


def mlx_call(target: str, rendered: Rendered, head: str) -> MlxCall:
    """The MLX launch of a rendered kernel: buffer names and types from the kernel's args, grid
    and threadgroup as render chose them.  The name carries a hash of the source, so one name
    never stands for two kernels."""
    kernel, body = rendered.kernel, rendered.source
    ins = [a for a in kernel.args if a.role == "in"]
    outs = [a for a in kernel.args if a.role == "out"]
    digest = hashlib.sha256((head + body).encode()).hexdigest()[:12]
    flag = ERROR_FLAG in body
    # after the kernel's own outputs (the backends pair outputs with the launch's writes in order,
    # so these extra ones are ignored): a grid combine's scratch, then the error flag, last
    scratch = rendered.scratch
    return GPU_CALLS[target](
        name=f"lt_{digest}",
        input_names=tuple(a.name for a in ins),
        output_names=tuple(a.name for a in outs) + tuple(n for n, _, _ in scratch) + ((ERROR_FLAG,) if flag else ()),
        source=body, header=head,
        input_shapes=tuple((a.numel,) for a in ins), input_dtypes=tuple(a.dtype for a in ins),
        output_shapes=(tuple((a.numel,) for a in outs) + tuple((n,) for _, _, n in scratch)
                       + (((1,),) if flag else ())),
        output_dtypes=tuple(a.dtype for a in outs) + tuple(dt for _, dt, _ in scratch) + ((D.int32,) if flag else ()),
        grid=rendered.grid, threadgroup=rendered.threadgroup, init_value=0 if flag or scratch else None)


def render_launch(launch, target: str) -> Rendered | None:
    """A plan launch rendered for `target` ("metal" or "cuda"); None: not a kernel this generator
    lowers (the executor runs it on the host)."""
    check_dtypes(launch, target)
    if launch.kind != "kernel" or not supports(launch):
        return None
    try:
        # costly values a later pass over the row needs (softmax's exp) stay in registers when the
        # geometry holds the row there; otherwise they are recomputed
        kernel = narrow_scalars(lower(launch, row_cache=True))
    except Unsupported:
        return None
    rendered = render(kernel, target)
    if kernel.row_cache and not (rendered.geometry and rendered.geometry.per_thread):
        rendered = render(narrow_scalars(lower(launch)), target)
    return rendered


def launch_call(launch, target: str) -> MlxCall | None:
    """The MlxCall of a plan launch on `target` ("metal" or "cuda"); None: not a kernel this
    generator lowers (the executor runs it on the host)."""
    rendered = render_launch(launch, target)
    return None if rendered is None else mlx_call(target, rendered, header(target, rendered))


# The GPU target each backend renders for (metal-emu runs the Metal source).
BACKEND_TARGETS = {"metal": "metal", "metal-emu": "metal", "cuda": "cuda"}


def plan_geometry(plan) -> dict[str, str]:
    """Launch name -> "<template> threads=.. groups=.. rows=.. per_thread=.. vec=.." for each
    kernel of a plan on a GPU backend (what lt.kernel_plan prints); {} on other backends.  A
    launch whose dtypes the GPU lacks (float64) is left out: running it raises, naming the op."""
    target = BACKEND_TARGETS.get(plan.backend)
    if target is None:
        return {}
    out = {}
    for launch in plan.launches:
        try:
            rendered = render_launch(launch, target)
        except TypeError:
            continue
        if rendered is not None:
            out[launch.name] = f"{rendered.template} {rendered.geometry}"
    return out


"""metal-emu: runs the exact Metal source the metal backend launches, on the CPU.

A MetalCall (codegen/targets/metal.py) is assembled into the full kernel source the Metal runtime
would compile: MLX's own wrapper (`[[kernel]] void custom_kernel_...(const device T* a0
[[buffer(0)]], ..., uint3 thread_position_in_grid [[thread_position_in_grid]], ...) { body }` and,
for templated kernels, the `[[host_name]]` instantiation), written byte for byte as
`mx.fast.metal_kernel` writes it (`assemble`, which cites MLX's source lines).  That text, unchanged,
plus a small C++ launcher after it, is compiled by g++ against
shaders/metal_shim.h (Metal's types, math, barriers and simd collectives in C++, threads of a
threadgroup as fibers that really synchronise) into a shared library through runtime/compiler.py
(cached in memory, bounded, and on disk), and launched through ctypes over the call's grid and
threadgroup.  The kernels of a new plan share one translation unit and one g++ run
(`prepare_together`), each in a namespace of its own: starting g++ and loading the shim costs more
than a small kernel.
"""
from __future__ import annotations

import ctypes
import hashlib
import os
import re
import shutil
import subprocess
import tempfile
from pathlib import Path
from typing import Sequence

import numpy as np

from ..codegen.gpu import ERROR_FLAG, launch_call, scalar_dtype
from ..codegen.render import shader_dir
from ..codegen.targets.metal import MAX_THREADS_PER_THREADGROUP, AssembledKernel, MetalCall, Param, assemble
from ..ir.errors import op_error
from . import compiler
from .backend import Backend, Buffer, LaunchFn
from .executor import PlanExecutor
from .caches import LRU
from .mlx import host_library_launch
from .compiler import KernelCompileError, cache_dir

# -O1: kernels are small and many; it compiles markedly faster than -O2 at similar speed here.
FLAGS = ("-std=c++17", "-O1", "-fPIC", "-fno-exceptions", "-Wno-attributes")
# A kernel that synchronises threads needs the fiber scheduler; others run threads back to back.
# Guessed from the body; a helper in the header that synchronises is caught at run time (code -3).
_SYNC = re.compile(r"barrier|simd_|quad_|shuffle")
NEEDS_SYNC = -3

def translation_unit(kernel: AssembledKernel, launcher: str = "lt_launch") -> str:
    """The assembled Metal source followed by the launcher the emulator calls through ctypes."""
    args = ", ".join(_argument(p, i) for i, p in enumerate(
        [p for p in kernel.params if p.kind != "attribute"]))
    attrs = [f"t.{p.name}" for p in kernel.params if p.kind == "attribute"]
    call_args = ", ".join([a for a in [args] if a] + attrs)
    return (kernel.source
            + "\n// ---- metal-emu launcher (not part of the Metal source) ----\n"
            + "static void lt_thread(void** a, const lt_emu::Attrs& t) {\n"
            + f"  {kernel.function}{kernel.template_args}({call_args});\n}}\n"
            + f'extern "C" int {launcher}(void** a, const unsigned* grid, const unsigned* tg, int sync) {{\n'
            + "  return lt_emu::dispatch(lt_thread, a, grid, tg, sync);\n}\n")


def _argument(p: Param, i: int) -> str:
    const = "" if p.kind == "output" else "const "
    ptr = f"({const}{p.ctype}*)a[{i}]"
    return "*" + ptr if p.by_ref else ptr


_prepared = LRU("metal-emu kernels", 1024)


def prepare(call: MetalCall) -> tuple[AssembledKernel, ctypes._CFuncPtr, bool]:
    """The assembled kernel, its compiled launcher (the .so is cached on disk) and whether it
    synchronises threads, once per call (bounded LRU)."""
    return _prepared.get_or_make(call, lambda: _prepare(call))


def _prepare(call: MetalCall) -> tuple[AssembledKernel, ctypes._CFuncPtr, bool]:
    ready = _compiled_together.pop(call, None)
    if ready is not None:
        return ready
    kernel = assemble(call)
    return kernel, _launcher(compiler.load(translation_unit(kernel), toolchain()), "lt_launch"), _syncs(call)


def _launcher(lib: ctypes.CDLL, name: str) -> ctypes._CFuncPtr:
    fn = getattr(lib, name)
    fn.argtypes = [ctypes.POINTER(ctypes.c_void_p), ctypes.POINTER(ctypes.c_uint),
                   ctypes.POINTER(ctypes.c_uint), ctypes.c_int]
    fn.restype = ctypes.c_int
    return fn


def _syncs(call: MetalCall) -> bool:
    return bool(_SYNC.search(call.source))


# kernels compiled by `prepare_together`, waiting for `prepare` to take them into the LRU
_compiled_together: dict[MetalCall, tuple[AssembledKernel, ctypes._CFuncPtr, bool]] = {}


def prepare_together(calls: Sequence[MetalCall]) -> None:
    """Compile the kernels of `calls` that are not prepared yet with one g++ run: starting g++ and
    loading the precompiled shim costs more than compiling a small kernel, so a plan's kernels
    share a translation unit.  Each kernel's text is unchanged (MLX's wrapper around the body)
    inside a namespace of its own, so the helpers of their headers cannot collide; each gets its
    own launcher.  If the unit does not compile, every kernel compiles alone later and reports its
    own error."""
    todo = [c for c in dict.fromkeys(calls) if c not in _prepared and c not in _compiled_together]
    if len(todo) < 2:
        return
    kernels = [assemble(c) for c in todo]
    tag = hashlib.sha256("\0".join(k.source for k in kernels).encode()).hexdigest()[:12]
    unit = "".join(f"namespace lt_{tag}_{i} {{\n{translation_unit(k, f'lt_launch_{tag}_{i}')}}}  // namespace\n"
                   for i, k in enumerate(kernels))
    try:
        lib = compiler.load(unit, toolchain())
    except KernelCompileError:
        return
    if len(_compiled_together) > _prepared.maxsize:     # plans prepared but never run
        _compiled_together.clear()
    for i, (c, k) in enumerate(zip(todo, kernels)):
        _compiled_together[c] = (k, _launcher(lib, f"lt_launch_{tag}_{i}"), _syncs(c))


def _cache_dir() -> Path:
    path = cache_dir() / "metal-emu"
    path.mkdir(parents=True, exist_ok=True)
    return path


def _gxx(args: Sequence[str], what: str) -> None:
    r = subprocess.run(["g++", *args], capture_output=True, text=True)
    if r.returncode:
        raise KernelCompileError(f"metal-emu: g++ failed on {what}:\n{r.stderr[-6000:]}")


def shim_include() -> Path:
    """The shim, precompiled once per shim version: parsing it (and <cmath>) is most of the cost
    of compiling a small kernel.  g++ falls back to the plain header if the .gch does not fit."""
    SHIM = shader_dir() / "metal_shim.h"
    text = SHIM.read_text()
    key = hashlib.sha256("\0".join([text, *FLAGS]).encode()).hexdigest()[:16]
    target = _cache_dir() / f"shim-{key}"
    if not (target / "metal_shim.h.gch").exists():
        tmp = Path(tempfile.mkdtemp(dir=_cache_dir()))
        shutil.copy(SHIM, tmp / "metal_shim.h")
        _gxx([*FLAGS, "-x", "c++-header", str(tmp / "metal_shim.h"), "-o", str(tmp / "metal_shim.h.gch")],
             "the shim header")
        try:
            os.replace(tmp, target)
        except OSError:          # another process made it first
            shutil.rmtree(tmp, ignore_errors=True)
    return target / "metal_shim.h"


def toolchain() -> compiler.Toolchain:
    """g++ with the precompiled shim (its path carries the shim's hash, so the flags key the cache)."""
    return compiler.Toolchain("g++", compiler.version_line("g++"), (*FLAGS, "-shared", "-include", str(shim_include())),
                              ".cpp", "metal-emu's g++")


def _check_launch(call: MetalCall) -> None:
    tg = [min(t, g) for t, g in zip(call.threadgroup, call.grid)]
    if min(call.grid) <= 0 or min(call.threadgroup) <= 0:
        raise op_error(ValueError, call.name, f"grid {call.grid} and threadgroup {call.threadgroup} "
                       "must be positive in every dimension", valid="skip empty launches")
    if tg[0] * tg[1] * tg[2] > MAX_THREADS_PER_THREADGROUP:
        raise op_error(ValueError, call.name, f"threadgroup {call.threadgroup} has more than "
                       f"{MAX_THREADS_PER_THREADGROUP} threads")


def _check_inputs(call: MetalCall, inputs: Sequence[np.ndarray]) -> list[np.ndarray]:
    if len(inputs) != len(call.input_names):
        raise op_error(ValueError, call.name, f"expected {len(call.input_names)} inputs, got {len(inputs)}")
    out = []
    for name, shape, dt, arr in zip(call.input_names, call.input_shapes, call.input_dtypes, inputs):
        arr = np.asarray(arr)
        if arr.shape != tuple(shape) or arr.dtype != dt.np:
            raise op_error(ValueError, call.name, f"input {name} is {arr.dtype}{list(arr.shape)}",
                           valid=f"the call declares {dt.name}{list(shape)}")
        out.append(np.ascontiguousarray(arr) if call.ensure_row_contiguous else arr)
    return out


def run(call: MetalCall, inputs: Sequence[np.ndarray], outputs: Sequence[np.ndarray] | None = None
        ) -> list[np.ndarray]:
    """Run `call` on host arrays (storage form) as the Metal runtime would on the GPU.  Outputs
    are allocated (filled with 0xFF bytes, so an element the kernel never writes shows up) unless
    given (contiguous arrays of the declared shapes and dtypes)."""
    _check_launch(call)
    inputs = _check_inputs(call, inputs)
    if outputs is None:
        outputs = [np.full(int(np.prod(s)) * d.np.itemsize, 0xFF, np.uint8).view(d.np).reshape(s)
                   for s, d in zip(call.output_shapes, call.output_dtypes)]
    if call.init_value is not None:
        for out in outputs:
            out[...] = call.init_value
    kernel, fn, sync = prepare(call)
    keep: list[np.ndarray] = []     # every array whose address is passed stays alive until the call returns
    for p in kernel.params:
        if p.kind == "input":
            keep.append(inputs[p.source_index])
        elif p.kind == "output":
            keep.append(outputs[p.source_index])
        elif p.kind in ("shape", "strides", "ndim"):
            arr = inputs[p.source_index]
            value = {"shape": np.array(arr.shape, np.int32),
                     "strides": np.array([s // arr.itemsize for s in arr.strides], np.int64),
                     "ndim": np.array(arr.ndim, np.int32)}[p.kind]
            keep.append(value)
    ptrs = (ctypes.c_void_p * max(len(keep), 1))(*[a.ctypes.data for a in keep])
    grid = (ctypes.c_uint * 3)(*call.grid)
    tg = (ctypes.c_uint * 3)(*call.threadgroup)
    rc = fn(ptrs, grid, tg, int(sync))
    if rc == NEEDS_SYNC:
        rc = fn(ptrs, grid, tg, 1)
    if rc != 0:
        raise op_error(RuntimeError, call.name, f"the emulator could not launch the kernel (code {rc})")
    return list(outputs)


class MetalEmuBackend(Backend):
    """Runs plans with the Metal kernels of the metal backend, emulated on the CPU (numpy buffers)."""

    name = "metal-emu"
    # plans as the metal backend does: a linear layer's bias goes to the GEMM, sdpa stays whole
    library_bias = True
    library_ops = frozenset({"scaled_dot_product_attention"})
    guarded_reads = True

    def scalar(self, value, dtype):
        """Scalar params as the Metal kernel reads them (float64 as float32: codegen/gpu.py)."""
        return super().scalar(value, scalar_dtype(dtype))

    def prepare(self, plan) -> PlanExecutor:
        """The plan's kernels compiled together (`prepare_together`), then the usual executor."""
        calls = {id(launch): launch_call(launch, "metal") for launch in plan.launches}
        prepare_together([c for c in calls.values() if c is not None and min(c.grid) > 0])
        return PlanExecutor(self, plan, lambda launch, plan: self._launch_fn(launch, calls[id(launch)]))

    def compile_launch(self, launch, plan) -> LaunchFn | None:
        return self._launch_fn(launch, launch_call(launch, "metal"))

    @staticmethod
    def _launch_fn(launch, call: MetalCall | None) -> LaunchFn | None:
        """`call` is launch_call's answer, which has already refused float64 as Metal does."""
        if launch.kind == "library":        # the metal backend's MLX calls, on MLX's default device
            return host_library_launch(launch)
        if call is None:
            return None
        if min(call.grid) == 0:          # nothing to compute (a size-0 domain)
            return lambda reads, writes: None

        dtypes = [d.np for d in call.input_dtypes]
        flag = call.output_names[-1] == ERROR_FLAG

        def fn(reads: Sequence[Buffer], writes: Sequence[Buffer]) -> None:
            # astype only narrows 0-d float64 params to the float32 the kernel reads (narrow_scalars)
            outs = [w.reshape(-1) for w in writes]
            # the call's further outputs (a grid combine's scratch, the error flag), zeroed
            outs += [np.zeros(s, d.np) for s, d in zip(call.output_shapes[len(outs):], call.output_dtypes[len(outs):])]
            run(call, [np.asarray(r).reshape(-1).astype(d, copy=False) for r, d in zip(reads, dtypes)], outs)
            return flag and outs[-1][0]     # the executor raises when the kernel set it
        return fn

"""CUDA kernels compiled ahead of their launch: all kernels of a plan at once, cached on disk.

MLX's `mx.fast.cuda_kernel` compiles each kernel with NVRTC the first time it is launched, one
after another, around MLX's own device headers (about 0.5-1 s each), and keeps the result only
in memory: a model's first call paid every compile in series, and so did every new process.
This module compiles the standalone source of each kernel (`codegen/targets/cuda.standalone`:
our header only, about 0.2 s per kernel) with NVRTC through ctypes (runtime/nvrtc_worker.py), a
plan's kernels at once: a large batch in parallel worker processes (NVRTC serialises the compiles
of one process), and keeps each cubin on disk keyed by a hash of its source, the GPU architecture
and NVRTC's version.  The mlx backend launches the cubin through `mx.fast.precompiled_cuda_kernel`.

`available()` is False where NVRTC or the CUDA driver cannot be loaded; the backend then keeps
MLX's JIT path.
"""
from __future__ import annotations

import ctypes
import functools
import glob
import hashlib
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Sequence

from ..codegen.gpu import launch_call, scalar_dtype
from ..codegen.targets import cuda as cuda_target
from . import nvrtc_worker as worker
from .compiler import KernelCompileError, cache_dir
from .progress import Progress

stats = {"compiled": 0, "disk_hits": 0, "seconds": 0.0}


def _cuda_roots() -> list[Path]:
    """Where the CUDA headers and libraries may be: CUDA_HOME/CUDA_PATH, the nvidia pip packages
    (MLX's CUDA build and torch use them), the system toolkit."""
    roots = [Path(p) for p in (os.environ.get("CUDA_HOME"), os.environ.get("CUDA_PATH")) if p]
    try:
        import nvidia                                        # the pip packages' namespace
        roots += [Path(p) / "cu13" for p in nvidia.__path__]
        roots += [Path(p) / pkg for p in nvidia.__path__ for pkg in ("cuda_nvrtc", "cublas")]
    except ImportError:
        pass
    return roots + [Path("/usr/local/cuda")]


@functools.lru_cache(maxsize=None)
def library_names(stem: str) -> tuple[str, ...]:
    """The names to try loading lib<stem> by (CUDA 13, then 12, then any), then the files of it in
    the CUDA roots: NVRTC here, cuBLAS for runtime/cuda_driver.py."""
    found = [p for r in _cuda_roots() for d in ("lib", "lib64") for p in sorted(glob.glob(str(r / d / f"lib{stem}.so*")))]
    return (f"lib{stem}.so.13", f"lib{stem}.so.12", f"lib{stem}.so", *found)


@functools.lru_cache(maxsize=1)
def _libraries() -> tuple[ctypes.CDLL, ctypes.CDLL] | None:
    """(libnvrtc, libcuda), or None when either is missing."""
    nvrtc = worker.load(list(library_names("nvrtc")))
    cuda = worker.load(["libcuda.so.1", "libcuda.so"])
    return (nvrtc, cuda) if nvrtc and cuda else None


def available() -> bool:
    return _libraries() is not None and arch() is not None


@functools.lru_cache(maxsize=1)
def arch() -> str | None:
    """The SASS architecture of GPU 0 (e.g. "sm_90"), from the CUDA driver."""
    libs = _libraries()
    if libs is None:
        return None
    cuda = libs[1]
    dev, major, minor = ctypes.c_int(), ctypes.c_int(), ctypes.c_int()
    if cuda.cuInit(0) or cuda.cuDeviceGet(ctypes.byref(dev), 0):
        return None
    # CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR / _MINOR
    if cuda.cuDeviceGetAttribute(ctypes.byref(major), 75, dev) or cuda.cuDeviceGetAttribute(ctypes.byref(minor), 76, dev):
        return None
    return f"sm_{major.value}{minor.value}"


@functools.lru_cache(maxsize=1)
def _options() -> list[str]:
    """NVRTC's flags: the architecture, and the include paths of cuda_fp16.h and CCCL (<nv/target>)."""
    includes = []
    mlx_include = _mlx_include()
    for inc in ([mlx_include / "cccl"] if mlx_include else []) + [r / "include" for r in _cuda_roots()]:
        for d in (inc, inc / "cccl"):
            if d.is_dir() and d not in includes:
                includes.append(d)
    return [f"--gpu-architecture={arch()}", "--std=c++17", *(f"--include-path={d}" for d in includes)]


def _mlx_include() -> Path | None:
    try:
        import mlx
        return Path(mlx.__path__[0]) / "include"
    except (ImportError, IndexError):
        return None


@functools.lru_cache(maxsize=1)
def version() -> str:
    nvrtc = _libraries()[0]
    major, minor = ctypes.c_int(), ctypes.c_int()
    nvrtc.nvrtcVersion(ctypes.byref(major), ctypes.byref(minor))
    return f"{major.value}.{minor.value}"


def _compile(source: str, name: str) -> bytes:
    """The cubin of `source` (one kernel, extern "C" `name`), compiled by NVRTC in this process."""
    try:
        return worker.compile_source(_libraries()[0], source, name, _options())
    except worker.CompileFailed as e:
        raise _failed(name, str(e), source) from None


def _failed(name: str, log: str, source: str) -> KernelCompileError:
    return KernelCompileError(f"NVRTC failed on generated kernel {name}:\n{log}\n\n{source}")


def _path(source: str) -> Path:
    key = hashlib.sha256(f"{arch()}\0{version()}\0{' '.join(_options()[:2])}\0{source}"
                         .encode()).hexdigest()[:32]
    return cache_dir() / f"cu-{key}.cubin"


def _cached(path: Path) -> bytes | None:
    try:
        return path.read_bytes() or None
    except OSError:
        return None


def compile_all(sources: Sequence[tuple[str, str]]) -> list[bytes]:
    """The cubins of (source, kernel name) pairs: from the disk cache, else compiled (in parallel
    processes when there are several), with a line on stderr when that takes over two seconds."""
    paths = [_path(src) for src, _ in sources]
    cubins = [_cached(p) for p in paths]
    stats["disk_hits"] += sum(c is not None for c in cubins)
    todo = [i for i, c in enumerate(cubins) if c is None]
    if todo:
        t0 = time.perf_counter()
        with Progress(f"{len(todo)} CUDA kernels"):
            if len(todo) <= _IN_PROCESS:
                for i in todo:
                    cubins[i] = _compile(*sources[i])
                    _store(paths[i], cubins[i])
            else:
                _compile_in_workers([(sources[i], paths[i]) for i in todo])
                for i in todo:
                    cubins[i] = paths[i].read_bytes()
        stats["compiled"] += len(todo)
        stats["seconds"] += time.perf_counter() - t0
    return cubins


_IN_PROCESS = 2         # batches up to this size compile here (a worker process costs ~0.3 s to start)


def _store(path: Path, cubin: bytes) -> None:
    try:
        worker.write(str(path), cubin)
    except OSError:
        pass                                 # a read-only cache costs a compile next time, nothing else


def _compile_in_workers(jobs: list[tuple[tuple[str, str], Path]]) -> None:
    """Compile in min(cores, jobs) worker processes, each a share of the jobs; the cubins land at
    their cache paths (a kernel NVRTC rejects raises KernelCompileError with its log)."""
    n = min(len(jobs), _cores())
    with tempfile.TemporaryDirectory(dir=cache_dir(), prefix=".nvrtc-") as tmp:
        shares: list[list] = [[] for _ in range(n)]
        for k, ((source, name), path) in enumerate(jobs):
            src = Path(tmp) / f"{k}.cu"
            src.write_text(source)
            shares[k % n].append([str(src), name, str(path)])
        spec = {"libs": list(library_names("nvrtc")), "options": _options()}
        procs = [subprocess.Popen([sys.executable, "-S", worker.__file__], stdin=subprocess.PIPE,
                                  stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for _ in shares]
        for proc, share in zip(procs, shares):
            proc.stdin.write(json.dumps({**spec, "jobs": share}))
            proc.stdin.close()
        errors = [proc.stderr.read() for proc in procs if proc.wait() == 2]
        if errors:
            raise RuntimeError(f"NVRTC worker failed: {errors[0]}")
        for (source, name), path in jobs:
            log = path.with_name(path.name + ".log")
            if log.exists():
                text = log.read_text()
                log.unlink()
                raise _failed(name, text, source)


def _cores() -> int:
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1


def plan_calls(plan, by_value_dtypes) -> dict[int, tuple]:
    """id(launch) -> (its CUDA call, the read positions it takes by value) for each kernel launch of
    `plan`: the plan's Python scalars of `by_value_dtypes` (params no output returns) go to the
    kernels by value, compiled into their standalone sources (`sources`)."""
    outputs = {o.id for o in plan.outputs}
    host = {p.id for p in plan.params if p.slot in plan.scalar_slots and p.id not in outputs
            and scalar_dtype(p.dtype) in by_value_dtypes}
    calls = {}
    for launch in plan.launches:
        call = launch_call(launch, "cuda") if launch.kind == "kernel" else None
        if call is not None:
            calls[id(launch)] = call, tuple(i for i, (_, b) in enumerate(launch.reads) if b.id in host)
    return calls


def compile_calls(calls: Sequence[tuple]) -> list[bytes]:
    """The cubins of (call, by-value read positions) pairs, compiled together (compile_all)."""
    return compile_all([(cuda_target.standalone(c, frozenset(c.input_names[i] for i in pos)), c.name)
                        for c, pos in calls])

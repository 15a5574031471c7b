"""CUDA kernels compiled ahead of their launch: all kernels of a plan at once, cached on disk.

MLX's `mx.fast.cuda_kernel` compiles each kernel with NVRTC the first time it is launched, one
after another, around MLX's own device headers (about 0.5-1 s each), and keeps the result only
in memory: a model's first call paid every compile in series, and so did every new process.
This module compiles the standalone source of each kernel (`codegen/targets/cuda.standalone`:
our header only) with NVRTC through ctypes, many kernels in parallel threads (ctypes releases
the GIL, NVRTC is thread-safe), and keeps each cubin on disk keyed by a hash of its source, the
GPU architecture and NVRTC's version.  The mlx backend launches the cubin through
`mx.fast.precompiled_cuda_kernel`.

`available()` is False where NVRTC or the CUDA driver cannot be loaded; the backend then keeps
MLX's JIT path.
"""
from __future__ import annotations

import ctypes
import functools
import glob
import hashlib
import os
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Sequence

from .compiler import KernelCompileError, cache_dir

stats = {"compiled": 0, "disk_hits": 0, "seconds": 0.0}
_PROGRESS_AFTER = 2.0       # seconds before a batch of compiles prints a progress line


def _cuda_roots() -> list[Path]:
    """Where the CUDA headers and libraries may be: CUDA_HOME/CUDA_PATH, the nvidia pip packages
    (MLX's CUDA build and torch use them), the system toolkit."""
    roots = [Path(p) for p in (os.environ.get("CUDA_HOME"), os.environ.get("CUDA_PATH")) if p]
    try:
        import nvidia                                        # the pip packages' namespace
        roots += [Path(p) / "cu13" for p in nvidia.__path__]
        roots += [Path(p) / "cuda_nvrtc" for p in nvidia.__path__]
    except ImportError:
        pass
    return roots + [Path("/usr/local/cuda")]


@functools.lru_cache(maxsize=1)
def _libraries() -> tuple[ctypes.CDLL, ctypes.CDLL] | None:
    """(libnvrtc, libcuda), or None when either is missing."""
    def load(names: list[str]) -> ctypes.CDLL | None:
        for name in names:
            try:
                return ctypes.CDLL(name)
            except OSError:
                continue
        return None
    found = [p for r in _cuda_roots() for d in ("lib", "lib64") for p in sorted(glob.glob(str(r / d / "libnvrtc.so*")))]
    nvrtc = load(["libnvrtc.so.13", "libnvrtc.so.12", "libnvrtc.so", *found])
    cuda = load(["libcuda.so.1", "libcuda.so"])
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
def _options() -> tuple[bytes, ...]:
    """NVRTC's flags: the architecture, and the include paths of cuda_fp16.h and CCCL (<nv/target>)."""
    includes = []
    mlx_include = _mlx_include()
    for inc in ([mlx_include / "cccl"] if mlx_include else []) + [r / "include" for r in _cuda_roots()]:
        for d in (inc, inc / "cccl"):
            if d.is_dir() and d not in includes:
                includes.append(d)
    return (f"--gpu-architecture={arch()}".encode(), b"--std=c++17",
            *(f"--include-path={d}".encode() for d in includes))


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
    """The cubin of `source` (one kernel, extern "C" `name`), compiled by NVRTC."""
    nvrtc = _libraries()[0]
    prog = ctypes.c_void_p()
    _check(nvrtc, nvrtc.nvrtcCreateProgram(ctypes.byref(prog), source.encode(), f"{name}.cu".encode(), 0, None, None),
           "nvrtcCreateProgram")
    try:
        opts = _options()
        result = nvrtc.nvrtcCompileProgram(prog, len(opts), (ctypes.c_char_p * len(opts))(*opts))
        if result:
            raise KernelCompileError(f"NVRTC failed on generated kernel {name}:\n{_log(nvrtc, prog)}\n\n{source}")
        size = ctypes.c_size_t()
        _check(nvrtc, nvrtc.nvrtcGetCUBINSize(prog, ctypes.byref(size)), "nvrtcGetCUBINSize")
        cubin = ctypes.create_string_buffer(size.value)
        _check(nvrtc, nvrtc.nvrtcGetCUBIN(prog, cubin), "nvrtcGetCUBIN")
        return cubin.raw
    finally:
        nvrtc.nvrtcDestroyProgram(ctypes.byref(prog))


def _log(nvrtc: ctypes.CDLL, prog: ctypes.c_void_p) -> str:
    size = ctypes.c_size_t()
    nvrtc.nvrtcGetProgramLogSize(prog, ctypes.byref(size))
    log = ctypes.create_string_buffer(size.value + 1)
    nvrtc.nvrtcGetProgramLog(prog, log)
    return log.value.decode(errors="replace")


def _check(nvrtc: ctypes.CDLL, result: int, what: str) -> None:
    if result:
        nvrtc.nvrtcGetErrorString.restype = ctypes.c_char_p
        raise RuntimeError(f"{what} failed: {nvrtc.nvrtcGetErrorString(result).decode()}")


def _path(source: str) -> Path:
    key = hashlib.sha256(f"{arch()}\0{version()}\0{' '.join(o.decode() for o in _options()[:2])}\0{source}"
                         .encode()).hexdigest()[:32]
    return cache_dir() / f"cu-{key}.cubin"


def _cubin(source: str, name: str) -> bytes:
    """From the disk cache, else compiled and stored (atomically: temp file + rename)."""
    path = _path(source)
    try:
        data = path.read_bytes()
        if data:
            stats["disk_hits"] += 1
            return data
    except OSError:
        pass
    data = _compile(source, name)
    stats["compiled"] += 1
    tmp = path.with_name(f".tmp-{os.getpid()}-{threading.get_ident()}-{path.name}")
    try:
        tmp.write_bytes(data)
        os.replace(tmp, path)
    except OSError:
        pass                                 # a read-only cache costs a compile next time, nothing else
    return data


def compile_all(sources: Sequence[tuple[str, str]]) -> list[bytes]:
    """The cubins of (source, kernel name) pairs, compiled in parallel threads; a line on stderr
    when the batch takes longer than two seconds."""
    if not sources:
        return []
    t0 = time.perf_counter()
    workers = min(len(sources), len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1)
    done = threading.Event()

    def progress() -> None:
        if not done.wait(_PROGRESS_AFTER):
            print(f"lazytorch: compiling {len(sources)} CUDA kernels on {workers} threads...", file=sys.stderr, flush=True)
    watcher = threading.Thread(target=progress, daemon=True)
    watcher.start()
    try:
        with ThreadPoolExecutor(workers) as pool:
            cubins = list(pool.map(lambda sn: _cubin(*sn), sources))
    finally:
        done.set()
    elapsed = time.perf_counter() - t0
    stats["seconds"] += elapsed
    if elapsed > _PROGRESS_AFTER:
        print(f"lazytorch: compiled {len(sources)} CUDA kernels in {elapsed:.1f} s", file=sys.stderr, flush=True)
    return cubins

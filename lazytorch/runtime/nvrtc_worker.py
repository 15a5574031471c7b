"""NVRTC through ctypes: compile one CUDA source to a cubin.  Standard library only.

NVRTC serialises compiles inside one process (16 threads compiled 16 kernels no faster than one
on an H100 host, CUDA 13.0), so runtime/nvrtc.py compiles a large batch in several processes,
each running this file as a script (`python -S nvrtc_worker.py`, the job as JSON on stdin: library
names, options, [source file, kernel name, cubin file] triples); without the package import a
worker starts in tens of milliseconds.  In-process compiles use the same functions.
"""
from __future__ import annotations

import ctypes
import json
import os
import sys


class CompileFailed(Exception):
    """NVRTC rejected the source; the message is its log."""


def load(names: list[str]) -> ctypes.CDLL | None:
    """The first of `names` that loads."""
    for name in names:
        try:
            return ctypes.CDLL(name)
        except OSError:
            continue
    return None


def compile_source(lib: ctypes.CDLL, source: str, name: str, options: list[str]) -> bytes:
    """The cubin of `source`, compiled with `options` (which name the SASS architecture)."""
    prog = ctypes.c_void_p()
    _check(lib, lib.nvrtcCreateProgram(ctypes.byref(prog), source.encode(), f"{name}.cu".encode(), 0, None, None),
           "nvrtcCreateProgram")
    try:
        opts = [o.encode() for o in options]
        if lib.nvrtcCompileProgram(prog, len(opts), (ctypes.c_char_p * len(opts))(*opts)):
            size = ctypes.c_size_t()
            lib.nvrtcGetProgramLogSize(prog, ctypes.byref(size))
            log = ctypes.create_string_buffer(size.value + 1)
            lib.nvrtcGetProgramLog(prog, log)
            raise CompileFailed(log.value.decode(errors="replace"))
        size = ctypes.c_size_t()
        _check(lib, lib.nvrtcGetCUBINSize(prog, ctypes.byref(size)), "nvrtcGetCUBINSize")
        cubin = ctypes.create_string_buffer(size.value)
        _check(lib, lib.nvrtcGetCUBIN(prog, cubin), "nvrtcGetCUBIN")
        return cubin.raw
    finally:
        lib.nvrtcDestroyProgram(ctypes.byref(prog))


def _check(lib: ctypes.CDLL, result: int, what: str) -> None:
    if result:
        lib.nvrtcGetErrorString.restype = ctypes.c_char_p
        raise RuntimeError(f"{what} failed: {lib.nvrtcGetErrorString(result).decode()}")


def write(path: str, data: bytes) -> None:
    """Atomically (a temp file, then rename): readers never see a partial cubin."""
    tmp = f"{path}.tmp-{os.getpid()}"
    with open(tmp, "wb") as f:
        f.write(data)
    os.replace(tmp, path)


def main() -> int:
    job = json.load(sys.stdin)
    lib = load(job["libs"])
    if lib is None:
        print(f"NVRTC not found: {job['libs']}", file=sys.stderr)
        return 2
    failed = 0
    for source_path, name, out_path in job["jobs"]:
        with open(source_path) as f:
            source = f.read()
        try:
            write(out_path, compile_source(lib, source, name, job["options"]))
        except CompileFailed as e:
            write(out_path + ".log", str(e).encode())
            failed = 1
    return failed


if __name__ == "__main__":
    sys.exit(main())

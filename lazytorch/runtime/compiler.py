"""Compiling generated source into loaded libraries, with an on-disk cache.

`load(source, toolchain=None)` returns a ctypes library: from memory (a bounded LRU), else from
the disk cache (~/.cache/lazytorch, or LAZYTORCH_CACHE_DIR), else by compiling it.  A Toolchain is
the compiler, its version line and flags, and the source suffix: the cpu backend's is the system
C compiler probed once (`toolchain()`); metal-emu passes g++ with the shader shim.  Cache entries
are keyed by a hash of source + compiler version + flags, written atomically (temp file +
os.replace), and carry a sha256 sidecar so that a corrupt or truncated entry is detected,
reported with a warning and rebuilt instead of loaded.  `stats` counts compiles and hits.
"""
from __future__ import annotations

import ctypes
import hashlib
import os
import re
import shutil
import subprocess
import tempfile
import threading
import warnings
from pathlib import Path
from typing import NamedTuple

from . import threads
from .caches import LRU

# -ffp-contract=off: no fused multiply-adds the source did not write.  A value a kernel recomputes
# (x * x in both the mean and the centred sum of a var) must round the same way each time, as in
# torch: contracted in one place only, var of equal values was 4e-16 and var of one value inf, not NaN.
BASE_FLAGS = ["-O3", "-march=native", "-fPIC", "-shared", "-fno-math-errno", "-fno-trapping-math", "-std=gnu11",
              "-ffp-contract=off", "-Werror=implicit-function-declaration"]
stats = {"compiled": 0, "disk_hits": 0, "memory_hits": 0, "rebuilt": 0}
# loaded libraries (one per program); dlclose is unsafe with ctypes, so an evicted one stays mapped
# but is no longer looked up: the bound is on what the process keeps finding, not on mappings
_memory = LRU("compiled libraries", 512)
_lock = threading.Lock()


class Toolchain(NamedTuple):
    compiler: str
    version: str
    flags: tuple[str, ...]
    suffix: str = ".c"            # of the source file the compiler reads
    name: str = "the C compiler"  # for error messages


class KernelCompileError(RuntimeError):
    """The C compiler rejected generated source; the message holds its output and the source lines."""


_fallback_dir: list[Path] = []
_fallback_lock = threading.Lock()       # not _lock: load() holds that while it asks for cache_dir()


def cache_dir() -> Path:
    """The disk cache; if it cannot be created or written, a private temp dir (with a warning)."""
    d = os.environ.get("LAZYTORCH_CACHE_DIR") or os.path.join(os.path.expanduser("~"), ".cache", "lazytorch")
    path = Path(d)
    try:
        path.mkdir(parents=True, exist_ok=True)
        if os.access(path, os.W_OK):
            return path
        problem = "is not writable"
    except OSError as e:
        problem = f"cannot be created ({e.strerror})"
    with _fallback_lock:
        if not _fallback_dir:
            _fallback_dir.append(Path(tempfile.mkdtemp(prefix="lazytorch-cache-")))
            warnings.warn(f"lazytorch: kernel cache directory {path} {problem}; compiling into "
                          f"{_fallback_dir[0]} for this process", RuntimeWarning, stacklevel=2)
    return _fallback_dir[0]


def compiler() -> str:
    cc = os.environ.get("CC") or shutil.which("cc") or shutil.which("gcc") or shutil.which("clang")
    if not cc:
        raise KernelCompileError("the cpu backend needs a C compiler: none of $CC, cc, gcc, clang was found")
    if not shutil.which(cc):
        raise KernelCompileError(f"the cpu backend's C compiler {cc!r} (from $CC) was not found; "
                                 "set CC to an installed compiler, or unset it to use cc/gcc/clang")
    return cc


_toolchain: list = []


def toolchain() -> Toolchain:
    """The cpu backend's C toolchain, probed once per process (OpenMP where it links)."""
    if not _toolchain:
        cc = compiler()
        version = subprocess.run([cc, "--version"], capture_output=True, text=True).stdout.splitlines()[0]
        flags = BASE_FLAGS + (["-fopenmp"] if _has_openmp(cc, version) else ["-fopenmp-simd"])
        # e.g. "-fsanitize=address -fno-omit-frame-pointer" to check every generated access (the
        # extra flags are part of the cache key, so such builds never mix with normal ones)
        flags += os.environ.get("LAZYTORCH_EXTRA_CFLAGS", "").split()
        _toolchain.append(Toolchain(cc, version, tuple(flags)))
    return _toolchain[0]


def _has_openmp(cc: str, version: str) -> bool:
    marker = cache_dir() / f"openmp-{hashlib.sha256(version.encode()).hexdigest()[:16]}"
    if marker.exists():
        return marker.read_text() == "1"
    with tempfile.TemporaryDirectory() as tmp:
        src = Path(tmp) / "probe.c"
        src.write_text("int f(int n){int s=0;\n#pragma omp parallel for reduction(+:s)\nfor(int i=0;i<n;i++)s+=i;return s;}\n")
        ok = subprocess.run([cc, "-fopenmp", "-fPIC", "-shared", str(src), "-o", str(Path(tmp) / "p.so")],
                            capture_output=True).returncode == 0
    _atomic_write(marker, b"1" if ok else b"0")
    return ok


def key_of(source: str, tc: Toolchain | None = None) -> str:
    tc = tc or toolchain()
    return hashlib.sha256("\0".join([source, tc.version, " ".join(tc.flags)]).encode()).hexdigest()[:32]


def load(source: str, tc: Toolchain | None = None) -> ctypes.CDLL:
    """The loaded library for `source`, compiling it only if no valid cache entry exists."""
    tc = tc or toolchain()
    key = key_of(source, tc)
    before = _memory.misses
    lib = _memory.get_or_make(key, lambda: _load(source, key, tc))
    if _memory.misses == before:
        stats["memory_hits"] += 1
    return lib


def _load(source: str, key: str, tc: Toolchain) -> ctypes.CDLL:
    with _lock:
        path = cache_dir() / f"{key}.so"
        if _valid(path):
            stats["disk_hits"] += 1
        else:
            _compile(source, path, tc)
        if "-fopenmp" in tc.flags:
            threads.prepare_openmp()        # before libgomp's first load: it reads its policy once
        return ctypes.CDLL(str(path))


def _sidecar(path: Path) -> Path:
    return path.with_suffix(".sha256")


def _valid(path: Path) -> bool:
    if not path.exists():
        return False
    try:
        ok = _sidecar(path).read_text().strip() == hashlib.sha256(path.read_bytes()).hexdigest()
    except OSError:
        ok = False
    if not ok:
        stats["rebuilt"] += 1
        warnings.warn(f"lazytorch: kernel cache entry {path} is corrupt or incomplete; rebuilding it",
                      RuntimeWarning, stacklevel=3)
    return ok


def _compile(source: str, path: Path, tc: Toolchain) -> None:
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".tmp-", suffix=tc.suffix)
    with os.fdopen(fd, "w") as f:
        f.write(source)
    out = tmp[:-len(tc.suffix)] + ".so"
    try:
        proc = subprocess.run([tc.compiler, *tc.flags, tmp, "-o", out, "-lm"], capture_output=True, text=True)
        if proc.returncode != 0:
            raise KernelCompileError(_explain(proc.stderr, source, tc.name))
        data = Path(out).read_bytes()
        os.replace(out, path)
        _atomic_write(_sidecar(path), hashlib.sha256(data).hexdigest().encode())
        stats["compiled"] += 1
    finally:
        for p in (tmp, out):
            if os.path.exists(p):
                os.unlink(p)


def _explain(stderr: str, source: str, compiler_name: str = "the C compiler") -> str:
    """The compiler's message plus the generated source around the first error line."""
    lines = source.splitlines()
    m = re.search(r":(\d+):\d+: error", stderr)
    context = ""
    if m:
        at = int(m.group(1))
        lo, hi = max(at - 4, 0), min(at + 3, len(lines))
        context = "\n".join(f"{'>' if i + 1 == at else ' '}{i + 1:5d} | {lines[i]}" for i in range(lo, hi))
    return f"{compiler_name} failed on a generated kernel:\n{stderr.strip()}\n\nsource near the error:\n{context}"


def _atomic_write(path: Path, data: bytes) -> None:
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".tmp-")
    with os.fdopen(fd, "wb") as f:
        f.write(data)
    os.replace(tmp, path)

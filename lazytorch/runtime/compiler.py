"""Compiling generated source into loaded libraries, with an on-disk cache.

`load(source, toolchain=None)` returns a ctypes library: from memory (a bounded LRU), else from
the disk cache (~/.cache/lazytorch, or LAZYTORCH_CACHE_DIR), else by compiling it.
`load_all(sources)` loads several translation units, compiling the missing ones concurrently (one
compiler process each).  `load_indexed(structure, make)` finds the libraries of a program without
its source: a small index entry maps a digest of the plan's structure (plus this code's version,
`code_version`, and the toolchain) to the libraries' keys, so a new process with a warm disk cache
skips lowering and rendering; only on an index miss does it call `make()` for the sources.  In a
new disk cache, `prefetch_toolchain` asks the compiler for its version on a background thread
while the first program renders, and that program's compile settles whether OpenMP builds.  A Toolchain is
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
import threading
import warnings
from pathlib import Path
from typing import Callable, NamedTuple, Sequence

from . import threads
from .caches import LRU

# -ffp-contract=off: no fused multiply-adds the source did not write.  A value a kernel recomputes
# (x * x in both the mean and the centred sum of a var) must round the same way each time, as in
# torch: contracted in one place only, var of equal values was 4e-16 and var of one value inf, not NaN.
# -O2 with -O3's vectorizer (-ftree-vectorize, the dynamic cost model): the README demo's kernels
# compile in 0.22 s of CPU against 0.28 s at -O3, and W1/W3/W4-style kernels ran as fast or faster
# (min of 60 runs, one thread; docs/benchmarks.md, "First calls"): what kernels gain from -O3 is the
# vectorizer, and the rest of -O3 (unswitching, peeling, loop distribution, ...) only cost time.
BASE_FLAGS = ["-O2", "-ftree-vectorize", "-fvect-cost-model=dynamic", "-march=native", "-fPIC", "-shared",
              "-fno-math-errno", "-fno-trapping-math", "-std=gnu11", "-ffp-contract=off",
              "-Werror=implicit-function-declaration"]
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


_usable: dict[str, Path] = {}            # cache dirs found writable (checked again if removed)


def cache_dir() -> Path:
    """The disk cache; if it cannot be created or written, a private temp dir (with a warning)."""
    d = os.environ.get("LAZYTORCH_CACHE_DIR") or os.path.join(os.path.expanduser("~"), ".cache", "lazytorch")
    known = _usable.get(d)
    if known is not None and os.path.isdir(known):
        return known
    path = Path(d)
    try:
        path.mkdir(parents=True, exist_ok=True)
        if os.access(path, os.W_OK):
            _usable[d] = path
            return path
        problem = "is not writable"
    except OSError as e:
        problem = f"cannot be created ({e.strerror})"
    with _fallback_lock:
        if not _fallback_dir:
            import tempfile         # (only where something is written: a warm disk cache never imports it)
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
_toolchain_lock = threading.Lock()


def toolchain() -> Toolchain:
    """The cpu backend's C toolchain, probed once per process (OpenMP unless a compile found that
    it does not build: `_settle_openmp`)."""
    if _toolchain:
        return _toolchain[0]
    with _toolchain_lock:                   # (a probe started by prefetch_toolchain may be running)
        if not _toolchain:
            _probe_toolchain()
    return _toolchain[0]


def prefetch_toolchain() -> None:
    """Make the toolchain known early.  From a disk cache that knows the compiler's version line, at
    once; otherwise (a new cache: `cc --version`, a process start) on a background thread, so that it
    overlaps the first program's planning and code generation (load_indexed renders first then: a
    new cache has no index entry).  Errors are left for the foreground call to raise."""
    if _toolchain or _probing[0]:
        return
    try:
        with _toolchain_lock:
            if _probe_toolchain(probe=False):
                return
    except Exception:   # noqa: BLE001  (toolchain() raises it again where it is needed)
        return
    _probing[0] = True

    def probe() -> None:
        try:
            toolchain()
        except Exception:   # noqa: BLE001
            pass
        finally:
            _probing[0] = False
    threading.Thread(target=probe, name="lazytorch-toolchain-probe", daemon=True).start()


_probing = [False]                      # a background probe of a new cache's toolchain is running
# Whether OpenMP builds is settled by the first compile, not by a probe compile of its own (~90 ms
# in a new cache): the toolchain assumes it does until a marker says otherwise; the first program's
# compile writes the marker, and if that compile fails, the probe decides whether OpenMP was the
# cause (then the toolchain drops it and OpenMPUnavailable asks the caller to render again).
_openmp_unsettled = [False]


class OpenMPUnavailable(KernelCompileError):
    """The C compiler cannot build OpenMP code: the cpu toolchain now compiles without it (-fopenmp-simd);
    the caller compiles its program again (its keys depend on the flags)."""


def _probe_toolchain(probe: bool = True) -> bool:
    """Find the toolchain (probe=False: only from the disk cache's markers); whether it is known."""
    if not _toolchain:
        cc = compiler()
        version = version_line(cc, probe)
        if version is None:
            return False
        openmp = _has_openmp(cc, version, probe=False)       # None: not settled yet, assume it builds
        _openmp_unsettled[0] = openmp is None
        _toolchain.append(_make_toolchain(cc, version, openmp is not False))
    return True


def _make_toolchain(cc: str, version: str, openmp: bool) -> Toolchain:
    flags = BASE_FLAGS + (["-fopenmp"] if openmp else ["-fopenmp-simd"])
    # e.g. "-fsanitize=address -fno-omit-frame-pointer" to check every generated access (the
    # extra flags are part of the cache key, so such builds never mix with normal ones)
    flags += os.environ.get("LAZYTORCH_EXTRA_CFLAGS", "").split()
    return Toolchain(cc, version, tuple(flags))


def _settle_openmp(tc: Toolchain, compiled: bool) -> None:
    """After the first compile with an unsettled toolchain: record that OpenMP builds, or (the compile
    failed) probe whether OpenMP was the cause and drop it from the toolchain if so."""
    if not (_openmp_unsettled[0] and _toolchain and tc is _toolchain[0]):
        return
    _openmp_unsettled[0] = False
    marker = _openmp_marker(tc.version)
    if compiled:
        _atomic_write(marker, b"1")
    elif not _has_openmp(tc.compiler, tc.version):
        _toolchain[0] = _make_toolchain(tc.compiler, tc.version, False)
        raise OpenMPUnavailable(f"{tc.name} {tc.compiler!r} cannot build OpenMP code; kernels compile "
                                "without it (-fopenmp-simd, one thread)")


def version_line(cc: str, probe: bool = True) -> str | None:
    """`cc --version`'s first line, remembered in the disk cache per compiler binary (its path,
    size and modification time): starting the compiler costs a new process ~10 ms.  None: not
    remembered and `probe` is off."""
    binary = os.path.realpath(shutil.which(cc) or cc)
    try:
        st = os.stat(binary)
        marker = cache_dir() / ("cc-" + hashlib.sha256(f"{cc}\0{binary}\0{st.st_size}\0{st.st_mtime_ns}"
                                                       .encode()).hexdigest()[:16])
        return marker.read_text()
    except OSError:
        pass
    if not probe:
        return None
    import subprocess
    version = subprocess.run([cc, "--version"], capture_output=True, text=True).stdout.splitlines()[0]
    try:
        _atomic_write(marker, version.encode())
    except (OSError, NameError):
        pass
    return version


def _openmp_marker(version: str) -> Path:
    return cache_dir() / f"openmp-{hashlib.sha256(version.encode()).hexdigest()[:16]}"


def _has_openmp(cc: str, version: str, probe: bool = True) -> bool | None:
    marker = _openmp_marker(version)
    if marker.exists():
        return marker.read_text() == "1"
    if not probe:
        return None
    import subprocess
    import tempfile
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
    return _remembered(key, lambda: _load(source, key, tc))


def _remembered(key: str, make: Callable[[], ctypes.CDLL | None]) -> ctypes.CDLL | None:
    before = _memory.misses
    lib = _memory.get_or_make(key, make)
    if lib is not None and _memory.misses == before:
        stats["memory_hits"] += 1
    return lib


def load_all(sources: Sequence[str], tc: Toolchain | None = None) -> list[ctypes.CDLL]:
    """The libraries of several translation units (one program's kernels, split): those not cached
    are compiled concurrently, one compiler process each, so a program's compile uses the cores."""
    tc = tc or toolchain()
    keys = [key_of(s, tc) for s in sources]
    if len(sources) > 1:
        with _lock:
            todo = [(s, cache_dir() / f"{k}.so") for s, k in zip(sources, keys)
                    if k not in _memory and not _valid(cache_dir() / f"{k}.so")]
            if len(todo) > 1:
                _compile_all(todo, tc)
    return [_remembered(k, lambda s=s, k=k: _load(s, k, tc)) for s, k in zip(sources, keys)]


class Indexed(NamedTuple):
    libraries: tuple[ctypes.CDLL, ...]
    names: tuple[str, ...]       # what `make` returned beside the sources (the kernels they hold)


def load_indexed(structure: str, make: Callable[[], tuple[Sequence[str], tuple[str, ...]]],
                 tc: Toolchain | None = None) -> Indexed:
    """The libraries of a program whose plan has `structure` (a text that determines its source):
    through the plan index without rendering when an entry exists and its libraries are valid, else
    `make()` -> (translation units, names) loaded as `load_all` does, and the index entry written."""
    early = None
    if tc is None and not _toolchain and _probing[0]:
        early = make()                      # a new cache, its toolchain still probed: no entry yet
    tc = tc or toolchain()
    digest = hashlib.sha256("\0".join([structure, code_version(), tc.version, " ".join(tc.flags)])
                            .encode()).hexdigest()[:32]
    entry = _read_index(digest) if early is None else None
    if entry is not None:
        keys, names = entry
        libs = [_remembered(k, lambda k=k: _load(None, k, tc)) for k in keys]
        if all(lib is not None for lib in libs):
            return Indexed(tuple(libs), names)
    units, names = early or make()
    units = [u for u in units if u]
    libs = load_all(units, tc)
    # the entry: the libraries' keys on the first line (NO_LIBRARY: none), then one name per line
    keys_line = " ".join(key_of(u, tc) for u in units) or NO_LIBRARY
    _atomic_write(cache_dir() / f"{digest}.plan", "\n".join([keys_line, *names]).encode())
    return Indexed(tuple(libs), tuple(names))


NO_LIBRARY = "-"        # an index entry of a plan none of whose launches the code generator renders


def _read_index(digest: str) -> tuple[tuple[str, ...], tuple[str, ...]] | None:
    try:
        line, *names = (cache_dir() / f"{digest}.plan").read_text().split("\n")
    except (OSError, ValueError):
        return None
    if line == NO_LIBRARY:
        return (), ()
    keys = tuple(line.split(" "))
    return (keys, tuple(names)) if all(len(k) == 32 for k in keys) else None


_version: list[str] = []


def code_version() -> str:
    """A digest of the code that turns plans into source: the size and modification time of every
    file of the code generator, the IR and the runtime, and of the templates (as Python's own bytecode cache checks its
    sources), computed once per process.  Any edit changes it, so the plan index never serves a
    library that older code rendered."""
    if not _version:
        package = Path(__file__).resolve().parents[1]
        h = hashlib.sha256()
        # what lowering and rendering read (the plan's structure covers the passes before them)
        for root in (package / "codegen", package / "ir", package / "runtime", package / "shaders",
                     package.parent / "shaders"):
            for dirpath, dirnames, filenames in os.walk(root):
                dirnames[:] = sorted(d for d in dirnames if d != "__pycache__")
                for name in sorted(filenames):
                    if name.endswith((".py", ".yaml", ".j2", ".h", ".metal")):
                        st = os.stat(os.path.join(dirpath, name))
                        h.update(f"{dirpath}/{name}:{st.st_size}:{st.st_mtime_ns}\n".encode())
        _version.append(h.hexdigest())
    return _version[0]


def _load(source: str | None, key: str, tc: Toolchain) -> ctypes.CDLL | None:
    """The library `key`, compiled from `source` unless its cache entry is valid.  Without a source
    (a key from the plan index): None when the entry is not valid, and the caller renders and
    rebuilds it (then load() reports the bad entry)."""
    with _lock:
        path = cache_dir() / f"{key}.so"
        if path in _just_built:             # (load_all compiled it a moment ago)
            _just_built.discard(path)
        elif _valid(path, report=source is not None):
            stats["disk_hits"] += 1
        elif source is None:
            return None
        else:
            _compile(source, path, tc)
        if "-fopenmp" in tc.flags:
            threads.prepare_openmp()        # before libgomp's first load: it reads its policy once
        return ctypes.CDLL(str(path))


def _sidecar(path: Path) -> Path:
    return path.with_suffix(".sha256")


def _valid(path: Path, report: bool = True) -> bool:
    if not path.exists():
        return False
    try:
        ok = _sidecar(path).read_text().strip() == hashlib.sha256(path.read_bytes()).hexdigest()
    except OSError:
        ok = False
    if not ok and report:
        stats["rebuilt"] += 1
        warnings.warn(f"lazytorch: kernel cache entry {path} is corrupt or incomplete; rebuilding it",
                      RuntimeWarning, stacklevel=3)
    return ok


_just_built: set[Path] = set()          # compiled by load_all, not yet loaded (not a disk hit)


def _compile(source: str, path: Path, tc: Toolchain) -> None:
    _compile_all([(source, path)], tc)
    _just_built.discard(path)


def _compile_all(jobs: list[tuple[str, Path]], tc: Toolchain) -> None:
    """Compile each (source, path) into its cache entry, all compiler processes at once; the
    first failure raises KernelCompileError once every process has ended (no temp file is left)."""
    import shutil
    import subprocess               # (not at import: a warm disk cache starts no compiler)
    import tempfile
    running, failure = [], None
    try:
        for source, path in jobs:
            # a directory of its own, the source's name fixed: the binary holds its source's file
            # name, so two processes compiling one kernel make the same bytes, and the entry and
            # its sidecar agree whichever process renames last
            work = tempfile.mkdtemp(dir=path.parent, prefix=".tmp-")
            tmp, out = os.path.join(work, "kernel" + tc.suffix), os.path.join(work, "kernel.so")
            with open(tmp, "w") as f:
                f.write(source)
            running.append((source, path, work, out))
            running[-1] += (subprocess.Popen([tc.compiler, *tc.flags, tmp, "-o", out, "-lm"],
                                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True),)
        for source, path, tmp, out, proc in running:
            _, stderr = proc.communicate()
            if proc.returncode != 0:
                failure = failure or KernelCompileError(_explain(stderr, source, tc.name))
                continue
            data = Path(out).read_bytes()
            os.replace(out, path)
            _atomic_write(_sidecar(path), hashlib.sha256(data).hexdigest().encode())
            stats["compiled"] += 1
            _just_built.add(path)
        _settle_openmp(tc, failure is None)
        if failure is not None:
            raise failure
    finally:
        for job in running:
            if len(job) > 4 and job[4].poll() is None:
                job[4].kill()
                job[4].wait()
            shutil.rmtree(job[2], ignore_errors=True)


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
    import tempfile
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".tmp-")
    with os.fdopen(fd, "wb") as f:
        f.write(data)
    os.replace(tmp, path)

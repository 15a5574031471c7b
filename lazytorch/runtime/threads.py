"""How generated kernels (OpenMP) and library calls (numpy's BLAS) share the CPU cores.

Both libraries keep a pool of worker threads.  libgomp's workers, by default, spin for about 3 ms
after every parallel region; a BLAS call that follows a kernel then finds its cores busy and its
own workers (which wait for each other) stall: the README demo took 42 ms instead of 8.  So:

- When the runtime loads the first kernel library and libgomp is not in the process yet, it loads
  libgomp itself with a short spin count (`SPIN_COUNT`, read by libgomp once, at load; the
  environment is restored right after, so child processes see the user's own).  A user's
  OMP_WAIT_POLICY or GOMP_SPINCOUNT is left alone.
- Library calls run BLAS on one thread (`blas_threads`): two pools on two cores stall each
  other even with short spins (OpenBLAS's workers spin ~0.1 s after a call).  Measured on the
  demo under a competing process: both pools parallel 85-115 ms, BLAS on one thread 9-12 ms;
  re-measured with the library launches of runtime/library.py at load average 3 (alternating,
  40 calls each): one thread median 19.6 ms (min 7.0), OpenBLAS's default two 79.9 ms (min 14.3).
  Splitting one GEMM's rows over two Python threads (each BLAS on one thread, no spinning) was
  slower too at load average 27 (demo's c_fc GEMM: min 1.21 ms against 0.99 ms serial).  On the
  cpu backend a product is split on the kernels' own OpenMP pool instead (runtime/library.py,
  shaders/c_gemm.c.j2), one single-threaded BLAS call per thread, and only over the cores the
  load leaves idle (`idle_cores`): one pool, no second one to stall.
- When libgomp was loaded before us (by torch, say) with its default 3 ms spin, its workers keep
  spinning after every parallel region, so a region that needs a core another process holds
  waits for it at the barrier (W9 under a competing load: 282 ms split against 28 ms serial).
  So kernels and split products go parallel only over the cores free at the time of the run:
  the runtime sets `lt_parallel` and the products' thread count per run from `free_cores`,
  which are the cores other processes leave idle (`idle_cores`), counted over the CPUs this
  process may run on (per-CPU /proc/stat lines of its affinity mask: confined to two cores of a
  sixteen-core host beside a busy process, it had counted fifteen idle cores and forked onto the
  busy one, 11x its quiet time), less the cores this process's other threads keep busy
  (`own_busy`: numpy's OpenBLAS pool spins ~0.1 s after each multi-threaded call; the README
  demo right after its float64 numpy check took 9.3 ms a call forked against the other pool,
  5.9 serial).  On a quiet machine this is where torch's own eager ops (two threads) get their
  speed from too.
- Thread counts follow OMP_NUM_THREADS and the process's CPU affinity (libgomp reads both;
  `num_threads` reports the same number); a kernel goes parallel only when its estimated work
  pays for the measured fork cost (codegen/cost.py, codegen/targets/c.py's PARALLEL).
"""
from __future__ import annotations

import ctypes
import os
import threading
import time
from contextlib import contextmanager
from typing import Iterator, NamedTuple

# spins before a libgomp worker sleeps (a spin is a `pause`, ~140 cycles on recent Xeons: 10000 are
# ~0.5 ms): long enough to span the serial kernels between a program's parallel regions (its
# split products, wide kernels), short enough to give the cores back soon after the program.
# With numpy's OpenBLAS in its own pool, 1000 was right (default 300000, ~3 ms of spinning against
# BLAS's threads, made the demo 5x slower); now products run on this pool, and on two quiet cores
# of the GPU host 10000 against 1000, two rounds alternating (medians, min):
# the demo's lt.compile call 3.82, 3.83 ms (3.49, 3.62) against 4.76, 5.37 (4.13, 4.03), W9's
# 14.1, 13.0 ms (13.0, 9.7) against 16.1, 14.6 (13.3, 12.2): docs/benchmarks.md, ninth session.
# Beside a busy process kernels stay serial (idle_cores), so nothing spins there.
SPIN_COUNT = "10000"
_USER_POLICY = ("OMP_WAIT_POLICY", "GOMP_SPINCOUNT")
_lock = threading.Lock()
_state: dict[str, object] = {}


def num_threads() -> int:
    """The threads a parallel kernel uses: OMP_NUM_THREADS, else the CPUs this process may run on."""
    env = os.environ.get("OMP_NUM_THREADS", "").split(",")[0].strip()
    if env.isdigit() and int(env) > 0:
        return int(env)
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:                  # macOS has no affinity API
        return os.cpu_count() or 1


# how often `idle_cores` measures again (seconds)
LOAD_SAMPLE_S = 0.5
_idle: list = [float("-inf"), 1]          # (when sampled, idle cores)
_last: list = [None, None]                # the previous CpuSample and the idle cores measured then


class CpuSample(NamedTuple):
    wall: float         # time.monotonic()
    busy: float         # CPU seconds the CPUs this process may run on spent busy (steal included)
    own: float          # CPU seconds of this process, every thread
    cpus: int           # how many CPUs `busy` counts


def cpu_sample() -> CpuSample | None:
    """The CPU time of the CPUs this process may run on, and its own, now (Linux /proc/stat), or
    None elsewhere."""
    try:
        with open("/proc/stat", "rb") as f:
            text = f.read()
    except OSError:
        return None
    busy = stat_busy(text, _affinity())
    if busy is None:
        return None
    t = os.times()
    return CpuSample(time.monotonic(), busy[0], t.user + t.system, busy[1])


def stat_busy(text: bytes, cpus: frozenset[int] | None) -> tuple[float, int] | None:
    """(busy CPU seconds, CPUs counted) of the per-CPU lines of /proc/stat's `text` for the CPUs
    in `cpus` (None: all).  Per CPU, not the machine's total: a process confined to two cores of
    a sixteen-core host (taskset, a container's cpuset) must not count the other fourteen as
    idle cores its threads could use."""
    busy, counted = 0, 0
    for line in text.split(b"\n"):
        if not (line.startswith(b"cpu") and line[3:4].isdigit()):
            continue
        fields = line.split()
        if len(fields) < 9 or (cpus is not None and int(fields[0][3:]) not in cpus):
            continue
        user, nice, system, _, _, irq, softirq, steal = (int(x) for x in fields[1:9])
        busy += user + nice + system + irq + softirq + steal
        counted += 1
    return (busy / _TICK, counted) if counted else None


def _affinity() -> frozenset[int] | None:
    try:
        return frozenset(os.sched_getaffinity(0))
    except AttributeError:                  # macOS has no affinity API
        return None


_TICK = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100
# the first sample, at import: a program's first run then measures the interval since, not the
# last minute's load average, which counts this process's own start and the processes just
# before it (a fresh W1 process after others on two cores forked no kernel: warm first call 29 ms
# against 22 for the run)
_last[0] = cpu_sample()


def idle_cores() -> int:
    """Cores this process may use that other processes leave idle (at least 1; measured again at
    most every LOAD_SAMPLE_S).  A parallel region on a core another process holds waits for it:
    under load a split GEMM took longer than a serial one (docs/benchmarks.md, "Native steps on
    the cpu backend").  Measured from the CPU time other processes took since the previous
    measurement (`others_busy`), so this process's own threads (a spinning OpenMP worker,
    torch's) never count against it, and idle in the last two intervals; where that cannot be
    read, from the load average."""
    now = time.monotonic()
    if now - _idle[0] > LOAD_SAMPLE_S:
        _idle[:] = [now, _measure_idle()]
    return _idle[1]


def _measure_idle() -> int:
    cores = num_threads()
    sample = cpu_sample()
    before, idle_before = _last
    others = others_busy(before, sample)
    idle = None if others is None else max(1, min(cores, int(sample.cpus - others + 0.5)))
    _last[:] = [sample, idle]
    if idle is None:                        # (no earlier sample: the last minute's load average)
        try:
            busy = os.getloadavg()[0]
        except OSError:
            busy = 0.0
        return max(1, min(cores, int(cores - busy + 1.5)))     # (+1: this process is part of the load)
    # a core counts as idle once it was idle in the last two intervals: a short lull between another
    # process's bursts does not start a split whose every region would then wait for that core
    return idle if idle_before is None else min(idle, idle_before)


def others_busy(before: CpuSample | None, after: CpuSample | None) -> float | None:
    """Cores other processes kept busy between two samples on average, or None (no usable pair)."""
    if before is None or after is None or after.wall - before.wall < 0.05:
        return None
    return max(0.0, ((after.busy - before.busy) - (after.own - before.own)) / (after.wall - before.wall))


# How often `own_busy` measures again (seconds).  Another thread's CPU time advances only at the
# scheduler's ticks while it runs (every 4 ms at HZ 250), so a shorter window reads 0 or 2 cores.
OWN_SAMPLE_S = 0.008
_teams: dict[int, tuple[int, ...]] = {}   # calling thread -> CPU clocks of its OpenMP team
_own: dict[int, tuple[int, int, int]] = {}   # calling thread -> (wall ns, foreign CPU ns, busy) last sampled
_team_clocks: list = []                   # the kernel libraries' lt_thread_clocks (the first loaded)


def watch_team(clocks_fn) -> None:
    """Remember a kernel library's `lt_thread_clocks` (shaders/c_runner.c.j2), which reports the CPU
    clocks of the calling thread's OpenMP team: `own_busy` needs it (the first one is kept)."""
    if clocks_fn is not None and not _team_clocks:
        clocks_fn.argtypes, clocks_fn.restype = (ctypes.POINTER(ctypes.c_int), ctypes.c_int), ctypes.c_int
        _team_clocks.append(clocks_fn)


def _team(thread: int) -> tuple[int, ...]:
    """The CPU clocks of this thread and of its OpenMP workers (libgomp keeps a pool per calling
    thread), found once per thread by a parallel region; () where they cannot be read."""
    team = _teams.get(thread)
    if team is None:
        n = num_threads()
        out = (ctypes.c_int * n)()
        got = _team_clocks[0](out, n) if _team_clocks else 0
        team = tuple(out[:got]) if got == n and all(out[:got]) else ()
        if len(_teams) >= 16:                     # (threads come and go: keep the recent ones)
            _teams.pop(next(iter(_teams)))
        _teams[thread] = team
    return team


def own_busy() -> int:
    """Cores this process's other threads kept busy lately: CPU time the process took beyond the
    calling thread and its OpenMP workers, per second of wall time (measured again at most every
    OWN_SAMPLE_S).  numpy's OpenBLAS pool spins ~0.1 s after each multi-threaded call, torch's
    pools after theirs, a user's thread computes: a region forked onto such a core waits for it
    (the README demo right after a float64 numpy product: 9.3 ms a call forked, 5.7 serial, 3.6
    quiet; docs/benchmarks.md, "Threads inside the process").  `idle_cores` cannot see them:
    it leaves out this whole process."""
    now = time.monotonic_ns()
    thread = threading.get_ident()
    last = _own.get(thread)
    if last is not None and now - last[0] < OWN_SAMPLE_S * 1e9:
        return last[2]
    team = _team(thread)
    if not team:
        return 0
    try:
        foreign = time.clock_gettime_ns(time.CLOCK_PROCESS_CPUTIME_ID) - sum(map(time.clock_gettime_ns, team))
    except OSError:                                # (a worker of the team is gone: found again next time)
        _teams.pop(thread, None)
        _own.pop(thread, None)
        return 0
    busy = 0 if last is None else max(0, int((foreign - last[1]) / (now - last[0]) + 0.5))
    if len(_own) >= 16 and thread not in _own:
        _own.pop(next(iter(_own)))
    _own[thread] = (now, foreign, busy)
    return busy


def free_cores() -> int:
    """Cores a run of kernels and split products may use now (at least 1): those other processes
    leave idle (`idle_cores`), less those this process's other threads keep busy (`own_busy`)."""
    cores = idle_cores()
    return cores if cores <= 1 else max(1, min(cores, num_threads() - own_busy()))


def _gomp_loaded() -> bool:
    try:
        ctypes.CDLL("libgomp.so.1", mode=os.RTLD_NOLOAD | os.RTLD_GLOBAL)
        return True
    except (OSError, AttributeError):
        return False


def prepare_openmp() -> None:
    """Before the first kernel library is loaded: make libgomp's workers sleep soon after a kernel
    (see the module docstring).  Idempotent; records what it did in `info()`."""
    if _state:
        return
    with _lock:
        if _state:
            return
        if any(os.environ.get(k) for k in _USER_POLICY):
            _state.update(policy="user", kernels_parallel=True)
        elif _gomp_loaded():
            _state.update(policy="loaded before lazytorch (spinning)", kernels_parallel=False)
        else:
            saved = os.environ.get("GOMP_SPINCOUNT")
            os.environ["GOMP_SPINCOUNT"] = SPIN_COUNT     # read once by libgomp's constructor
            try:
                ctypes.CDLL("libgomp.so.1", mode=os.RTLD_GLOBAL)
                _state.update(policy=f"spin {SPIN_COUNT}", kernels_parallel=True)
            except OSError:                 # no libgomp (clang's libomp, or no OpenMP at all)
                _state.update(policy="no libgomp", kernels_parallel=True)
            finally:
                if saved is None:
                    del os.environ["GOMP_SPINCOUNT"]
                else:
                    os.environ["GOMP_SPINCOUNT"] = saved


def kernels_parallel() -> bool:
    """The libraries' `lt_parallel` at load, before any run sets it from `free_cores` (and where
    none does: LAZYTORCH_DEBUG's traced runs): not with a spinning libgomp loaded before us, which
    keeps the cores busy for ~3 ms after every kernel."""
    return bool(_state.get("kernels_parallel", True)) and num_threads() > 1


def products_split() -> bool:
    """Whether a large product may be split over the kernels' threads (in runs that find cores
    idle: the runtime sets the count per run)."""
    return num_threads() > 1


def info() -> dict:
    """The thread policy in effect (for lt.cache_info() and LAZYTORCH_DEBUG)."""
    return {"threads": num_threads(), "openmp": _state.get("policy", "not loaded yet"),
            "kernels_parallel": "while cores are free" if num_threads() > 1 else False,
            "library_calls_threads": 1 if _openblas() else "BLAS default"}


_BLAS_SET = ("scipy_openblas_set_num_threads64_", "openblas_set_num_threads64_", "openblas_set_num_threads")
_BLAS_GET = ("scipy_openblas_get_num_threads64_", "openblas_get_num_threads64_", "openblas_get_num_threads")
_blas: list = []


def _openblas():
    """(set, get) of the OpenBLAS numpy loaded, or None (another BLAS: left alone)."""
    if not _blas:
        found = None
        try:
            with open("/proc/self/maps") as f:
                paths = {line.split()[-1] for line in f if "openblas" in line and line.rstrip().endswith(".so")}
        except OSError:
            paths = set()
        for path in sorted(paths):
            lib = ctypes.CDLL(path)
            setter = next((getattr(lib, s) for s in _BLAS_SET if hasattr(lib, s)), None)
            getter = next((getattr(lib, s) for s in _BLAS_GET if hasattr(lib, s)), None)
            if setter and getter:
                setter.argtypes, getter.restype = (ctypes.c_int,), ctypes.c_int
                found = (setter, getter)
                _blas_lib.append(lib)
                break
        _blas.append(found)
    return _blas[0]


_blas_lib: list = []


def openblas_library():
    """The OpenBLAS library numpy loaded (a ctypes handle), or None: library calls find its cblas
    functions there (runtime/library.py)."""
    _openblas()
    return _blas_lib[0] if _blas_lib else None


@contextmanager
def blas_threads() -> Iterator[None]:
    """Around a library call: BLAS on one thread.  Two pools on the same cores stall each other
    (OpenBLAS's workers spin ~0.1 s after a call, libgomp's after a kernel): with both parallel
    the demo took 85-115 ms under a competing process, with BLAS on one thread 9-12 ms."""
    blas = _openblas()
    if blas is None:
        yield
        return
    setter, getter = blas
    before = getter()
    setter(1)
    try:
        yield
    finally:
        setter(before)

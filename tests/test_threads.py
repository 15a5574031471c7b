"""The cpu backend's thread policy (runtime/threads.py): generated kernels and BLAS calls share the
cores.  Values are checked while another process keeps a core busy; timing is the benchmark's job."""
from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np
import pytest

import lazytorch as lt
from lazytorch.runtime import threads

ROOT = Path(__file__).resolve().parents[1]

# a matmul (library call) between kernels large enough to fork (262144+ elements per kernel)
PROGRAM = """
import json, os, sys
import numpy as np
{pre}
import lazytorch as lt
from lazytorch.runtime import threads
lt.set_backend("cpu")
rng = np.random.default_rng(0)
a = rng.standard_normal((512, 512)).astype(np.float32)
b = rng.standard_normal((512, 512)).astype(np.float32)
worst = 0.0
for _ in range(5):
    x, w = lt.from_numpy(a), lt.from_numpy(b)
    h = (x * 0.5 + 1.0).tanh()                 # pointwise kernel, parallel
    y = (h @ w).softmax(-1) * 2.0              # matmul, then a row kernel
    h64 = np.tanh(a.astype(np.float64) * 0.5 + 1.0) @ b.astype(np.float64)
    e = np.exp(h64 - h64.max(-1, keepdims=True))
    want = 2.0 * e / e.sum(-1, keepdims=True)
    worst = max(worst, float(np.abs(y.numpy() - want).max()))
print(json.dumps({{"err": worst, "info": threads.info(), "spin_env": os.environ.get("GOMP_SPINCOUNT")}}))
"""


@pytest.fixture
def busy_core():
    """A competing CPU-bound process for the duration of the test."""
    proc = subprocess.Popen([sys.executable, "-c", "while True: pass"])
    yield proc
    proc.kill()
    proc.wait()


def _run(pre: str, env: dict | None = None) -> dict:
    env = {**os.environ, "PYTHONPATH": str(ROOT), **(env or {})}
    env.pop("GOMP_SPINCOUNT", None)
    env.pop("OMP_WAIT_POLICY", None)
    out = subprocess.run([sys.executable, "-c", PROGRAM.format(pre=pre)], capture_output=True, text=True,
                         env=env, timeout=120)
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout.strip().splitlines()[-1])


@pytest.mark.skipif(not lt.runtime.c_compiler_available(), reason="needs a C compiler")
def test_kernels_and_blas_under_a_competing_process(busy_core):
    """lazytorch loads libgomp (short spin, parallel kernels), and torch first (kernels serial):
    both give the float64 answer while a busy process competes for the cores."""
    own = _run("")
    assert own["err"] < 1e-4, own
    assert own["info"]["openmp"].startswith(("spin", "no libgomp")), own
    assert own["spin_env"] is None        # the environment is restored after libgomp's load
    first = _run("import ctypes; ctypes.CDLL('libgomp.so.1', mode=ctypes.RTLD_GLOBAL)")
    assert first["err"] < 1e-4, first
    assert first["info"]["openmp"] == "loaded before lazytorch (spinning)", first
    assert first["info"]["kernels_parallel"] == "while cores are free" or first["info"]["threads"] == 1, first


def test_thread_count_follows_omp_num_threads_and_affinity(monkeypatch):
    monkeypatch.setenv("OMP_NUM_THREADS", "3")
    assert threads.num_threads() == 3
    monkeypatch.delenv("OMP_NUM_THREADS")
    expected = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    assert threads.num_threads() == expected


def test_blas_thread_count_is_restored_after_a_library_call():
    blas = threads._openblas()
    if blas is None:
        pytest.skip("numpy's BLAS is not OpenBLAS")
    setter, getter = blas
    before = getter()
    with threads.blas_threads():
        assert getter() == 1
        got = np.ones((64, 64), np.float32) @ np.ones((64, 64), np.float32)
    assert getter() == before
    np.testing.assert_array_equal(got, np.full((64, 64), 64.0, np.float32))


def _registered_team() -> tuple:
    """Run a program with a product on the cpu backend (its library reports its OpenMP team's
    clocks to runtime/threads.py) and return this thread's team, or skip."""
    lt.set_backend("cpu")
    x = lt.from_numpy(np.ones((64, 64), np.float32))
    assert float((x @ x).sum().item()) == 64.0 ** 3
    team = threads._team(threading.get_ident()) if threads._team_clocks else ()
    if not team:
        pytest.skip("no thread clocks here (no OpenMP, or not Linux)")
    return team


@pytest.mark.skipif(not lt.runtime.c_compiler_available(), reason="needs a C compiler")
def test_own_busy_counts_other_threads_of_this_process(monkeypatch):
    """A thread of this process computing outside lazytorch (here hashing with the GIL released;
    numpy's OpenBLAS pool spinning after a call is the usual one) is a core the kernels cannot
    use, and stops counting once it stops; the kernels' own OpenMP workers never count."""
    old = lt.get_backend()
    try:
        team = _registered_team()
        monkeypatch.setattr(threads, "idle_cores", lambda: len(team))
        time.sleep(0.3)                        # (a BLAS pool an earlier test woke: asleep by now)
        monkeypatch.setattr(threads, "_own", {})
        threads.own_busy()                     # (the first sample: the baseline)
        stop = threading.Event()

        def work():
            data = b"x" * (1 << 22)
            while not stop.is_set():
                hashlib.sha256(data).digest()
        worker = threading.Thread(target=work)
        worker.start()
        try:
            time.sleep(0.15)
            assert threads.own_busy() == 1
            assert threads.free_cores() == max(1, len(team) - 1)
        finally:
            stop.set()
            worker.join()
        threads.own_busy()
        time.sleep(0.05)
        assert threads.own_busy() == 0
        # the kernels' threads at work (a loop that forks: 2^20 tanh) are the team's, not others'
        a = lt.from_numpy(np.linspace(-3, 3, 1 << 20, dtype=np.float32))
        threads.own_busy()
        t0 = time.monotonic()
        while time.monotonic() - t0 < 0.15:
            np.testing.assert_allclose((a * 0.5).tanh().numpy()[-1], np.tanh(1.5), rtol=1e-6)
        assert threads.own_busy() == 0
    finally:
        lt.set_backend(old)


@pytest.mark.skipif(not os.path.exists("/proc/stat"), reason="no /proc/stat (not Linux)")
def test_first_run_measures_the_interval_since_import():
    """The first CPU-time sample is taken at import: a program's first run compares with it, not
    with the minute's load average (which counts this process's own start and the processes
    just before it), as every later run compares with the run before."""
    code = ("import os, time\nfrom lazytorch.runtime import threads as t\nassert t._last[0] is not None\n"
            "os.getloadavg = lambda: (99.0, 99.0, 99.0)\n"
            "s = t._last[0]\n"
            "t.cpu_sample = lambda: t.CpuSample(s.wall + 1.0, s.busy + 0.1, s.own + 0.1, s.cpus)\n"
            "print(t.idle_cores(), min(t.num_threads(), s.cpus))")
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=120)
    assert out.returncode == 0, out.stderr
    idle, cores = map(int, out.stdout.split())
    assert idle == max(1, cores)

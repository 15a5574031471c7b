"""The cpu backend's thread policy (runtime/threads.py): generated kernels and BLAS calls share the
cores.  Values are checked while another process keeps a core busy; timing is the benchmark's job."""
from __future__ import annotations

import json
import os
import subprocess
import sys
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
    assert first["info"]["kernels_parallel"] == "while cores are idle", first


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

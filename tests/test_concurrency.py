"""Many threads building and evaluating at once over the shared graph cache and disk cache, and
two processes compiling the same kernel into one cache dir.  Every wait has a timeout."""
from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest

import lazytorch as lt

THREADS, PROGRAMS_PER_THREAD = 8, 12


def _work(tid: int) -> int:
    """Programs that share structure across threads (same keys race in the graph cache)."""
    rng = np.random.default_rng(tid)
    for k in range(PROGRAMS_PER_THREAD):
        n = 3 + k % 3                                     # three shapes: shared cache keys
        a = rng.standard_normal((n, 5)).astype(np.float32)
        s = float(tid + 1)
        x = lt.tensor(a)
        y = lt.softmax(x * s, dim=-1) + (x - x.mean(-1, keepdim=True))
        z = (x.t() @ x).sum()
        lt.eval(y, z)
        e = np.exp(a * s - (a * s).max(-1, keepdims=True))
        np.testing.assert_allclose(y.numpy(), e / e.sum(-1, keepdims=True) + a - a.mean(-1, keepdims=True),
                                   rtol=1e-4, atol=1e-5)
        np.testing.assert_allclose(z.item(), (a.T @ a).sum(), rtol=1e-4, atol=1e-3)
    return tid


@pytest.mark.parametrize("backend_name", ["reference", "cpu"])
def test_threads_share_the_graph_cache(backend_name):
    previous = lt.get_backend()
    lt.set_backend(backend_name)
    lt.cache_clear()
    try:
        with ThreadPoolExecutor(THREADS) as pool:
            futures = [pool.submit(_work, t) for t in range(THREADS)]
            assert sorted(f.result(timeout=300) for f in futures) == list(range(THREADS))
        info = lt.cache_info()
        assert info.hits + info.misses >= THREADS * PROGRAMS_PER_THREAD
        assert info.entries <= 6                          # 3 shapes x (eval + .item/.numpy re-evals)
    finally:
        lt.set_backend(previous)


CHILD = """
import hashlib, sys, numpy as np, lazytorch as lt
from lazytorch.runtime import compiler
lt.set_backend("cpu")
x = lt.tensor(np.arange(12, dtype=np.float32).reshape(3, 4))
y = (x * {k} - 1.5).abs().sum(-1)
np.testing.assert_allclose(y.numpy(), np.abs(np.arange(12.).reshape(3, 4) * {k} - 1.5).sum(-1), rtol=1e-5)
print("ok", compiler.stats["compiled"], compiler.stats["disk_hits"])
"""


def test_two_processes_compile_the_same_kernel(tmp_path):
    env = {**os.environ, "LAZYTORCH_CACHE_DIR": str(tmp_path)}
    code = textwrap.dedent(CHILD.format(k=2.625))
    procs = [subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                              text=True, env=env) for _ in range(2)]
    outs = [p.communicate(timeout=300) for p in procs]
    for p, (out, err) in zip(procs, outs):
        assert p.returncode == 0 and out.startswith("ok"), err[-2000:]
    entries = list(tmp_path.glob("*.so"))
    assert entries and not [p for p in tmp_path.iterdir() if p.name.startswith(".tmp")]
    import hashlib
    for so in entries:                                    # every entry is whole: its sidecar matches
        assert so.with_suffix(".sha256").read_text().strip() == hashlib.sha256(so.read_bytes()).hexdigest()
    third = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=300)
    assert third.stdout.split()[:3] == ["ok", "0", "1"], third.stdout + third.stderr[-2000:]


def test_compiles_on_several_threads_leave_provenance_on():
    """Compiles switch provenance off while they run (ir/node.py `tracing`); several at once on
    different threads, ending in any order, leave it as it was (a save/restore per compile left it
    off for good: later nodes named no user line)."""
    from lazytorch.ir import node
    previous = lt.get_backend()
    lt.set_backend("reference")

    def compile_many(k: int) -> None:
        for i in range(40):
            x = lt.tensor(np.ones((k + 1, i + 1), np.float32))
            lt.eval((x * 2 + 1).sum(0))
    try:
        with ThreadPoolExecutor(4) as pool:
            list(pool.map(compile_many, range(4)))
    finally:
        lt.set_backend(previous)
    assert node.TRACE[0]
    y = lt.tensor(np.ones(3, np.float32)).softmax(-1)            # provenance line
    src = open(__file__).read().splitlines()
    line = next(i for i, s in enumerate(src, 1) if s.strip().endswith("# provenance line"))
    assert y.node.origin == f"test_concurrency.py:{line}"


# One thread's replays are checked against the general build (LAZYTORCH_CALL_MEMO=check) while
# another evaluates and runs builds with effects all the while: the checks see only their own
# thread's effects (ir/node.py own_effects_now), and compare origins only while provenance stayed
# on (a compile on the other thread switches it off for every thread: ir/node.py provenance_mark).
CHECKED = """
import sys, threading, time
import numpy as np, lazytorch as lt
from lazytorch.ir import replay
assert replay.CHECK
sys.setswitchinterval(1e-6)                    # (switch threads often: inside each other's builds)
F = lt.nn.functional
stop, errors, rounds = threading.Event(), [], [0, 0]

def replays():
    x = lt.tensor(np.ones((4, 6), np.float32))
    try:
        while not stop.is_set():
            F.softmax(x * 2.0, dim=-1) + x.mean(-1, keepdim=True) - x[:, 1:3].sum()
            rounds[0] += 1
    except BaseException as e:
        errors.append(e)

def effects():
    rm, rv = lt.zeros(6), lt.ones(6)
    try:
        while not stop.is_set():
            x = lt.tensor(np.full((4, 6), rounds[1] % 5, np.float32))
            F.batch_norm(x, rm, rv, training=True).numpy()     # updates rm, rv as it builds
            n = lt.tensor(3.0 + rounds[1] % 3)
            n.numpy()
            lt.arange(n).numpy()                               # reads n's value as it builds
            rounds[1] += 1
    except BaseException as e:
        errors.append(e)

threads = [threading.Thread(target=replays), threading.Thread(target=effects)]
for t in threads:
    t.start()
time.sleep(1.0)
deadline = time.monotonic() + 30          # (a cold disk cache compiles the effects' programs first)
while min(rounds) <= 10 and time.monotonic() < deadline and not errors:
    time.sleep(0.1)
stop.set()
for t in threads:
    t.join(timeout=60)
assert not errors, repr(errors[0])
assert min(rounds) > 10, rounds
print("ok")
"""


def test_check_mode_sees_only_its_own_threads_effects():
    env = {**os.environ, "LAZYTORCH_CALL_MEMO": "check", "PYTHONPATH": os.path.dirname(os.path.dirname(
        os.path.abspath(__file__)))}
    out = subprocess.run([sys.executable, "-c", CHECKED], capture_output=True, text=True, env=env, timeout=120)
    assert out.returncode == 0 and out.stdout.strip() == "ok", out.stdout + out.stderr[-3000:]

"""The host path: first calls in a new process, the plan index of the disk cache, the static memory
plan of cached programs, and the lazy path's bookkeeping (docs/compile.md, docs/architecture.md)."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import lazytorch as lt

# a program with a row kernel (softmax), a pointwise one and a matmul, printed with what the
# process had to import and compile to run it; one translation unit whatever the load (a program
# of several kernels is split over idle cores: runtime/cpu.py program_units)
CHILD = r"""
import json, sys, numpy as np, lazytorch as lt
from lazytorch.runtime import compiler, cpu
cpu._idle_cores = lambda: 1
lt.set_backend("cpu")
x = lt.tensor(np.linspace(-2, 2, 24, dtype=np.float32).reshape(4, 6))
w = lt.tensor(np.linspace(1, -1, 18, dtype=np.float32).reshape(6, 3))
y = lt.softmax(x * 1.5, dim=-1) @ w + lt.tanh(x).sum(-1, keepdim=True)
print(json.dumps({"value": y.numpy().tolist(), "stats": compiler.stats,
                  "codegen": "lazytorch.codegen.render" in sys.modules, "jinja2": "jinja2" in sys.modules}))
"""


def expected() -> np.ndarray:
    import torch
    x = torch.linspace(-2, 2, 24, dtype=torch.float32).reshape(4, 6)
    w = torch.linspace(1, -1, 18, dtype=torch.float32).reshape(6, 3)
    return (torch.softmax(x * 1.5, dim=-1) @ w + torch.tanh(x).sum(-1, keepdim=True)).numpy()


def run_child(cache: Path, code: str = CHILD) -> dict:
    env = dict(os.environ, LAZYTORCH_CACHE_DIR=str(cache))
    out = subprocess.run([sys.executable, "-W", "always", "-c", code], env=env, capture_output=True,
                         text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    result = json.loads(out.stdout.strip().splitlines()[-1])
    result["stderr"] = out.stderr
    return result


def test_warm_disk_cache_skips_lowering_and_rendering(tmp_path):
    cold = run_child(tmp_path)
    assert cold["stats"]["compiled"] == 1 and cold["codegen"]
    assert len(list(tmp_path.glob("*.plan"))) == 1
    warm = run_child(tmp_path)
    # found through the plan index: nothing compiled, the code generator never imported
    assert warm["stats"]["compiled"] == 0 and warm["stats"]["disk_hits"] == 1
    assert not warm["codegen"] and not warm["jinja2"]
    for result in (cold, warm):
        np.testing.assert_allclose(result["value"], expected(), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("damage", ["library_removed", "library_truncated", "index_garbled"])
def test_damaged_plan_index_or_library_falls_back_to_rendering(tmp_path, damage):
    run_child(tmp_path)
    (index,) = tmp_path.glob("*.plan")
    (library,) = tmp_path.glob("*.so")
    if damage == "library_removed":
        library.unlink()
    elif damage == "library_truncated":
        library.write_bytes(library.read_bytes()[:64])
    else:
        index.write_text("not a key\n")
    again = run_child(tmp_path)
    np.testing.assert_allclose(again["value"], expected(), rtol=1e-5, atol=1e-6)
    assert again["stats"]["compiled"] == (0 if damage == "index_garbled" else 1)
    assert again["stats"]["rebuilt"] == (1 if damage == "library_truncated" else 0)
    assert run_child(tmp_path)["stats"]["compiled"] == 0         # and the index is whole again


def test_plan_structure_tells_kernels_apart():
    """The index key covers what rendering reads (literals, shapes, dtypes, views, wiring) and
    not the runtime values of Python scalars."""
    from lazytorch.realize import kernel_plan
    from lazytorch.runtime.cpu import plan_structure
    F = lt.nn.functional
    x = lt.tensor(np.ones((3, 4), np.float32))
    i = lt.tensor(np.ones((3, 4), np.int32))

    def text(y):
        return plan_structure(kernel_plan([y], "cpu"))
    assert text(x.exp() + 1.0) == text(x.exp() + 2.5)           # a runtime argument
    distinct = [text(y) for y in (
        x.exp() + 1, F.gelu(x), F.gelu(x, approximate="tanh"), F.softmax(x, 0), F.softmax(x, 1), (x.exp() + 1).sum(0), x.t().exp() + 1,
        i.abs() + 1, lt.tensor(np.ones((4, 3), np.float32)).exp() + 1, x.sin() + 1, x.exp() - x,
        x - x.exp())]
    assert None not in distinct and len(set(distinct)) == len(distinct)


# ---------------------------------------------------------------- the static memory plan

def _layers(x, w1, w2, s):
    """Four launches with temps between them: a pointwise kernel, a matmul, a row kernel, a matmul."""
    h = (x * s).tanh()
    a = lt.softmax(h @ w1, dim=-1)
    return (a @ w2) - s


def _layers_np(x, w1, w2, s):
    a = np.tanh(x.astype(np.float64) * s) @ w1
    a = np.exp(a - a.max(-1, keepdims=True))
    return (a / a.sum(-1, keepdims=True)) @ w2 - s


@pytest.mark.parametrize("backend_name", ["reference", "cpu"])
def test_cached_plan_allocates_no_new_buffers(backend_name):
    rng = np.random.default_rng(0)
    xs = [rng.standard_normal((128, 160)).astype(np.float32) for _ in range(3)]
    w1 = rng.standard_normal((160, 192)).astype(np.float32) * 0.1
    w2 = rng.standard_normal((192, 128)).astype(np.float32) * 0.1      # output: 64 KiB, pooled
    lt.set_backend(backend_name)
    W1, W2 = lt.tensor(w1), lt.tensor(w2)
    plan = lt.kernel_plan(_layers(lt.tensor(xs[0]), W1, W2, 0.5))
    assert sum(b.kind == "temp" for b in plan.buffers) >= 3
    got = None
    for k in range(9):
        if k == 3:                                      # compiled, and the pool holds what a loop needs
            before, hits = lt.cache_info().buffers, lt.cache_info().hits
        s = 0.25 + 0.125 * k
        got = _layers(lt.tensor(xs[k % 3]), W1, W2, s).numpy()     # (held until the next result)
        np.testing.assert_allclose(got, _layers_np(xs[k % 3], w1, w2, s), rtol=1e-4, atol=1e-5)
    after = lt.cache_info().buffers
    assert lt.cache_info().hits - hits >= 6             # the same cached plan every time
    assert after["static_blocks"] == before["static_blocks"]      # temps: the plan's own blocks
    assert after["fresh"] == before["fresh"]                      # outputs: blocks the pool had


@pytest.mark.parametrize("backend_name", ["reference", "cpu"])
def test_outputs_held_by_the_user_are_never_reused(backend_name):
    rng = np.random.default_rng(1)
    w1 = rng.standard_normal((16, 24)).astype(np.float32) * 0.1
    w2 = rng.standard_normal((24, 8)).astype(np.float32) * 0.1
    lt.set_backend(backend_name)
    W1, W2 = lt.tensor(w1), lt.tensor(w2)
    xs = [rng.standard_normal((12, 16)).astype(np.float32) for _ in range(5)]
    kept = [_layers(lt.tensor(x), W1, W2, 0.5 + k) for k, x in enumerate(xs)]
    for t in kept:
        t.numpy()
    for k, (x, t) in enumerate(zip(xs, kept)):           # every earlier result is still intact
        np.testing.assert_allclose(t.numpy(), _layers_np(x, w1, w2, 0.5 + k), rtol=1e-4, atol=1e-5)


def test_memory_plan_shares_blocks_between_temps_that_do_not_overlap():
    from lazytorch.runtime.executor import MemoryPlan
    x = lt.tensor(np.linspace(-1, 1, 48, dtype=np.float32).reshape(6, 8))
    w = lt.tensor(np.linspace(1, -1, 64, dtype=np.float32).reshape(8, 8))
    y = x
    for k in range(4):                                   # a chain: each temp dies at the next matmul
        y = (y @ w).tanh() * (1 + k)
    plan = lt.kernel_plan(y)
    last_read = {b.id: i for i, l in enumerate(plan.launches) for _, b in l.reads}
    keep = {b.id for b in plan.outputs} | {b.id for b in plan.params}
    memory = MemoryPlan(plan, last_read, keep)
    temps = [b for b in plan.buffers if b.kind == "temp"]
    assert len(memory.views) == len(temps) >= 6 and len(memory.sizes) <= 3
    live: dict[int, int] = {}                            # no two live temps share a block
    for i, launch in enumerate(plan.launches):
        for _, b in launch.writes:
            if b.id in memory.temp_index:
                block = memory.views[memory.temp_index[b.id]][0]
                assert block not in live.values()
                live[b.id] = block
        for bid in [bid for bid in live if last_read.get(bid, i) <= i]:
            del live[bid]
    expect = np.linspace(-1, 1, 48).reshape(6, 8)
    for k in range(4):
        expect = np.tanh(expect @ np.linspace(1, -1, 64).reshape(8, 8)) * (1 + k)
    np.testing.assert_allclose(y.numpy(), expect, rtol=1e-4, atol=1e-5)


def test_scalar_arguments_packed_into_the_frame_keep_their_values():
    # a run writes its float and bool arguments into the frame's storage with struct (runtime/cpu.py
    # CpuExecutor._run); a float beyond float32's range becomes inf, as the kernel's cast made it
    lt.set_backend("cpu")
    x = lt.from_numpy(np.array([1.0, -2.0, 0.5], np.float32))
    f = lambda s, t: x * s + t                                # noqa: E731  (one plan, new values)
    with np.errstate(over="ignore"):
        for s, t in [(2.0, 1.0), (1e300, 0.25), (-1e300, 3), (float("nan"), 1.0), (3, -0.5)]:
            want = x.numpy() * np.float32(s) + np.float32(t)
            np.testing.assert_array_equal(f(s, t).numpy(), want)
    b = lt.from_numpy(np.array([True, False, True]))
    for fill in (2.0, -7.5):
        np.testing.assert_array_equal(lt.where(b, x, fill).numpy(), np.where([True, False, True], x.numpy(), fill))


def test_buffer_addresses_read_from_the_array_match_numpys():
    # runtime/cpu.py reads an ndarray's data pointer from the object itself (one field after its
    # header); it must be the address numpy reports, for views, empty and read-only arrays too
    from lazytorch.runtime import cpu
    assert cpu._DATA_AT                                  # the probe found the field
    base = np.arange(24, dtype=np.float32).reshape(4, 6)
    ro = np.frombuffer(b"abcdefgh", np.uint8)
    for arr in (base, base[1:, 2:], base.T, base[:, ::2], np.zeros(0), ro, np.float64(2.0) * np.ones(())):
        assert cpu._address(arr) == arr.__array_interface__["data"][0]

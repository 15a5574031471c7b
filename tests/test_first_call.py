"""First calls on the cpu backend (docs/benchmarks.md, "First calls"): a program's kernels compiled
as concurrent translation units where a core is idle, the plan index holding every unit, and the
toolchain probed on a background thread while a new disk cache's first program renders."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

# a program of several distinct kernels (matmuls between row, pointwise and column kernels) printed
# with the compile statistics; SPLIT forces the split decision the load average makes otherwise
CHILD = r"""
import json, sys, numpy as np, lazytorch as lt
from lazytorch.runtime import compiler, cpu
cpu._idle_cores = lambda: int(sys.argv[1])
lt.set_backend("cpu")
x = lt.tensor(np.linspace(-2, 2, 48, dtype=np.float32).reshape(6, 8))
g = lt.tensor(np.linspace(0.5, 1.5, 8, dtype=np.float32))
w = lt.tensor(np.linspace(-1, 1, 64, dtype=np.float32).reshape(8, 8))
def prog():
    h = lt.nn.functional.layer_norm(x, (8,), g, g)
    a = lt.softmax(h @ w, dim=-1)
    b = lt.nn.functional.gelu(a @ w.T, approximate="tanh")
    return (b * x).sum(0) + lt.tanh(b @ w).amax(-1).mean()
kernels = len(cpu.kernel_sources(lt.kernel_plan(prog())))
print(json.dumps({"value": prog().numpy().tolist(), "stats": compiler.stats, "probing": compiler._probing[0],
                  "kernels": kernels}))
"""


def expected() -> np.ndarray:
    import torch
    x = torch.linspace(-2, 2, 48, dtype=torch.float32).reshape(6, 8)
    g = torch.linspace(0.5, 1.5, 8, dtype=torch.float32)
    w = torch.linspace(-1, 1, 64, dtype=torch.float32).reshape(8, 8)
    h = torch.nn.functional.layer_norm(x, (8,), g, g)
    a = torch.softmax(h @ w, dim=-1)
    b = torch.nn.functional.gelu(a @ w.T, approximate="tanh")
    return ((b * x).sum(0) + torch.tanh(b @ w).amax(-1).mean()).numpy()


def run_child(cache: Path, cores: int) -> dict:
    env = dict(os.environ, LAZYTORCH_CACHE_DIR=str(cache))
    out = subprocess.run([sys.executable, "-c", CHILD, str(cores)], env=env, capture_output=True, text=True,
                         timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    return json.loads(out.stdout.strip().splitlines()[-1])


@pytest.mark.parametrize("cores", [1, 2])
def test_program_compiles_in_units_and_the_index_finds_them(tmp_path, cores):
    cold = run_child(tmp_path, cores)
    assert cold["kernels"] >= 4                           # enough kernels to split
    units = 2 if cores == 2 else 1
    assert cold["stats"]["compiled"] == units and not cold["probing"]
    assert len(list(tmp_path.glob("*.so"))) == units and len(list(tmp_path.glob("*.plan"))) == 1
    assert not list(tmp_path.glob(".tmp-*"))
    warm = run_child(tmp_path, cores)                     # a new process: every unit from the index
    assert warm["stats"]["compiled"] == 0 and warm["stats"]["disk_hits"] == units
    for r in (cold, warm):
        np.testing.assert_allclose(r["value"], expected(), rtol=1e-5, atol=1e-5)


def test_split_units_hold_every_kernel_once():
    from lazytorch.runtime.cpu import Sources, program_units
    import lazytorch.runtime.cpu as cpu
    src = Sources({f"lt_k{i}": f"void lt_k{i}(char **args) {{ {'(void)args; ' * (i + 1)}}}\n" for i in range(5)})
    src.helpers = frozenset()
    old = cpu._idle_cores
    try:
        cpu._idle_cores = lambda: 2
        units = program_units(src)
        cpu._idle_cores = lambda: 1
        single = program_units(src)
    finally:
        cpu._idle_cores = old
    assert len(units) == 2 and len(single) == 1
    for k in src:
        assert sum(f"void {k}(" in u for u in units) == 1
    sizes = [sum(len(src[k]) for k in src if f"void {k}(" in u) for u in units]
    assert max(sizes) - min(sizes) <= max(len(v) for v in src.values())      # balanced


def test_concurrent_compile_failure_reports_and_cleans_up(tmp_path, monkeypatch):
    from lazytorch.runtime import compiler
    monkeypatch.setenv("LAZYTORCH_CACHE_DIR", str(tmp_path))
    good = "int lt_parallel = 1;\nint lt_good_unit(void) { return 7; }\n"
    bad = "int lt_parallel = 1;\nint lt_bad_unit(void) { int x = ; }\n"
    with pytest.raises(compiler.KernelCompileError, match=r"(?s)error.*int x = ;"):
        compiler.load_all([good, bad])
    assert not list(tmp_path.glob(".tmp-*")) and not list(tmp_path.glob(f"{compiler.key_of(bad)}.*"))
    libs = compiler.load_all([good, good.replace("7", "8").replace("lt_good_unit", "lt_other_unit")])
    assert libs[0].lt_good_unit() == 7 and libs[1].lt_other_unit() == 8


SMALL = r"""
import json, numpy as np, lazytorch as lt
from lazytorch.runtime import compiler
lt.set_backend("cpu")
x = lt.tensor(np.arange(6, dtype=np.float32))
print(json.dumps({"value": (lt.tanh(x) * 2).sum().item(), "stats": compiler.stats,
                  "flags": list(compiler.toolchain().flags)}))
"""


@pytest.mark.parametrize("openmp", [True, False])
def test_first_compile_settles_openmp_without_a_probe(tmp_path, openmp):
    """A new cache assumes OpenMP builds and lets the first compile settle it (no probe compile of its
    own); a compiler that rejects -fopenmp (Apple's clang) gets the program compiled again without it,
    and the marker makes later processes start without it."""
    env = dict(os.environ, LAZYTORCH_CACHE_DIR=str(tmp_path / "cache"))
    if not openmp:
        cc = tmp_path / "cc-without-openmp"
        cc.write_text('#!/bin/sh\nfor a in "$@"; do [ "$a" = "-fopenmp" ] && '
                      '{ echo "error: unsupported option -fopenmp" >&2; exit 1; }; done\nexec gcc "$@"\n')
        cc.chmod(0o755)
        env["CC"] = str(cc)
    runs = []
    for _ in range(2):
        out = subprocess.run([sys.executable, "-c", SMALL], env=env, capture_output=True, text=True, timeout=300)
        assert out.returncode == 0, out.stderr[-2000:]
        runs.append(json.loads(out.stdout.strip().splitlines()[-1]))
    want = float((np.tanh(np.arange(6, dtype=np.float32)) * 2).sum())
    for r in runs:
        assert r["value"] == pytest.approx(want, rel=1e-6)
        assert ("-fopenmp" in r["flags"]) == openmp and ("-fopenmp-simd" in r["flags"]) != openmp
    assert runs[0]["stats"]["compiled"] == 1 and runs[1]["stats"]["compiled"] == 0
    (marker,) = (tmp_path / "cache").glob("openmp-*")
    assert marker.read_text() == ("1" if openmp else "0")
    assert not list((tmp_path / "cache").glob(".tmp-*"))

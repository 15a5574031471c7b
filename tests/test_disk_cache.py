"""The on-disk kernel cache: a second process compiles nothing; corrupt entries are rebuilt."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import warnings
from pathlib import Path

import numpy as np
import pytest

PROGRAM = r"""
import json, numpy as np, lazytorch as lt
from lazytorch.runtime import compiler
lt.set_backend("cpu")
a = lt.tensor(np.arange(12, dtype=np.float32).reshape(3, 4))
y = (lt.softmax(a * 0.25, dim=-1) + lt.tanh(a)).sum(0)
print(json.dumps({"stats": compiler.stats, "value": y.numpy().tolist()}))
"""


def run_child(cache: Path) -> dict:
    env = dict(os.environ, LAZYTORCH_CACHE_DIR=str(cache))
    out = subprocess.run([sys.executable, "-c", PROGRAM], env=env, capture_output=True, text=True, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def expected() -> np.ndarray:
    import torch
    a = torch.arange(12, dtype=torch.float32).reshape(3, 4)
    return (torch.softmax(a * 0.25, dim=-1) + torch.tanh(a)).sum(0).numpy()


def test_second_process_compiles_nothing(tmp_path):
    first = run_child(tmp_path)
    assert first["stats"]["compiled"] >= 1
    second = run_child(tmp_path)
    assert second["stats"]["compiled"] == 0 and second["stats"]["disk_hits"] == first["stats"]["compiled"]
    np.testing.assert_allclose(second["value"], expected(), rtol=1e-5)
    assert not list(tmp_path.glob(".tmp-*"))          # atomic writes leave no temp files


def test_two_caches_compile_one_kernel_to_the_same_bytes(tmp_path):
    """A kernel's binary depends on its source alone, not on where it was compiled (the source
    file's name is fixed: compiler._compile_all), so two processes that build one entry at once
    write the same bytes, and whichever renames last, the entry and its sidecar agree."""
    firsts = [run_child(tmp_path / name) for name in ("a", "b")]
    assert all(f["stats"]["compiled"] >= 1 for f in firsts)
    entries = [{p.name: p.read_bytes() for p in (tmp_path / name).glob("*.so")} for name in ("a", "b")]
    assert entries[0] and entries[0] == entries[1]


@pytest.mark.parametrize("damage", ["truncate", "missing_sidecar"])
def test_corrupt_entry_is_rebuilt(tmp_path, damage):
    run_child(tmp_path)
    libs = list(tmp_path.glob("*.so"))
    assert libs
    for lib in libs:
        if damage == "truncate":
            lib.write_bytes(lib.read_bytes()[:100])
        else:
            lib.with_suffix(".sha256").unlink()
    env = dict(os.environ, LAZYTORCH_CACHE_DIR=str(tmp_path))
    out = subprocess.run([sys.executable, "-W", "always", "-c", PROGRAM], env=env, capture_output=True,
                         text=True, check=True)
    result = json.loads(out.stdout.strip().splitlines()[-1])
    assert result["stats"]["rebuilt"] == len(libs) and result["stats"]["compiled"] == len(libs)
    assert "corrupt or incomplete" in out.stderr
    np.testing.assert_allclose(result["value"], expected(), rtol=1e-5)
    assert run_child(tmp_path)["stats"]["compiled"] == 0       # the rebuilt entry is valid again


def test_compile_error_is_clear_and_leaves_cache_clean(tmp_path, monkeypatch):
    from lazytorch.runtime import compiler
    monkeypatch.setenv("LAZYTORCH_CACHE_DIR", str(tmp_path))
    bad = "void f(void) {\n  int x = ;\n}\n"
    with pytest.raises(compiler.KernelCompileError, match=r"(?s)error.*int x = ;"):
        compiler.load(bad)
    assert not list(tmp_path.glob("*.so")) and not list(tmp_path.glob(".tmp-*"))

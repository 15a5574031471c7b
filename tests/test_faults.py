"""Faults in the toolchain and the disk cache: clear errors, nothing half-written, no poisoned cache.

Each scenario runs in a fresh interpreter (its own compiler probe, cache dir and environment).
"""
from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

import lazytorch as lt

PROGRAM = """
import warnings, numpy as np, lazytorch as lt
lt.set_backend("cpu")
x = lt.tensor(np.arange(6, dtype=np.float32).reshape(2, 3))
y = ((x * {k} + 1).exp() / 10).sum(-1)
np.testing.assert_allclose(y.numpy(), (np.exp(np.arange(6.).reshape(2, 3) * {k} + 1) / 10).sum(-1), rtol=1e-5)
print("ok")
"""


def _run(code: str, cache: Path, **env) -> subprocess.CompletedProcess:
    full = {**os.environ, "LAZYTORCH_CACHE_DIR": str(cache), **env}
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True,
                          env=full, timeout=240)


def _leftovers(cache: Path) -> list[str]:
    return [p.name for p in cache.rglob("*") if p.name.startswith(".tmp") or p.suffix == ".c"]


def test_missing_compiler_is_a_clear_error(tmp_path):
    proc = _run(PROGRAM.format(k=0.25), tmp_path, CC="/nonexistent/cc")
    assert proc.returncode != 0
    assert "KernelCompileError" in proc.stderr and "/nonexistent/cc" in proc.stderr, proc.stderr[-2000:]
    assert not list(tmp_path.glob("*.so")) and not _leftovers(tmp_path)


def test_failing_compiler_leaves_nothing_half_written(tmp_path):
    fake = tmp_path / "fakecc"
    fake.write_text("#!/bin/sh\n[ \"$1\" = --version ] && echo 'fakecc 1.0' && exit 0\necho 'fakecc: broken' >&2\nexit 1\n")
    fake.chmod(0o755)
    cache = tmp_path / "cache"
    proc = _run(PROGRAM.format(k=0.5), cache, CC=str(fake))
    assert proc.returncode != 0 and "KernelCompileError" in proc.stderr, proc.stderr[-2000:]
    assert "fakecc: broken" in proc.stderr
    assert not list(cache.glob("*.so")) and not _leftovers(cache)


def test_unusable_cache_dir_falls_back_with_a_warning(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("not a directory")
    proc = _run(PROGRAM.format(k=0.75), blocker / "cache")
    assert proc.returncode == 0 and "ok" in proc.stdout, proc.stderr[-2000:]
    assert "RuntimeWarning" in proc.stderr and "kernel cache directory" in proc.stderr


def test_corrupt_cache_entry_is_rebuilt_and_reported(tmp_path):
    first = _run(PROGRAM.format(k=1.25), tmp_path)
    assert first.returncode == 0, first.stderr[-2000:]
    entries = list(tmp_path.glob("*.so"))
    assert entries
    for so in entries:
        so.write_bytes(so.read_bytes()[:100])               # truncated, as by a crash or full disk
    second = _run(PROGRAM.format(k=1.25), tmp_path)
    assert second.returncode == 0 and "ok" in second.stdout, second.stderr[-2000:]
    assert "corrupt or incomplete" in second.stderr
    assert all(so.stat().st_size > 100 for so in entries)   # rebuilt in place


def test_kernel_compile_error_names_source_and_does_not_poison_the_cache(monkeypatch):
    from lazytorch.runtime import compiler, cpu
    real = cpu.kernel_sources

    def broken(plan, dialect="c", **kwargs):
        return {name: src.replace("{", "{ this_is_not_c;", 2) for name, src in real(plan, dialect, **kwargs).items()}

    previous = lt.get_backend()
    lt.set_backend("cpu")
    try:
        x = lt.tensor(np.linspace(-1, 1, 7, dtype=np.float32))
        before = lt.cache_info().entries
        monkeypatch.setattr(cpu, "kernel_sources", broken)
        monkeypatch.setattr(cpu, "PLAN_INDEX", False)       # render even where the disk cache knows the plan
        with pytest.raises(compiler.KernelCompileError) as info:
            (x * 1.375 + 0.5).tanh().numpy()
        assert "source near the error" in str(info.value) and "this_is_not_c" in str(info.value)
        assert lt.cache_info().entries == before                # nothing inserted
        monkeypatch.setattr(cpu, "kernel_sources", real)
        y = (x * 1.375 + 0.5).tanh()                            # same structure: compiles afresh
        np.testing.assert_allclose(y.numpy(), np.tanh(np.linspace(-1, 1, 7) * 1.375 + 0.5), rtol=1e-5)
    finally:
        lt.set_backend(previous)

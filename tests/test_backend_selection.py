"""The default backend: LAZYTORCH_BACKEND, else metal (Apple silicon with MLX reporting Metal), else cpu
(a C compiler exists), else reference.  The host is simulated with monkeypatching."""
from __future__ import annotations

import sys
import types

import pytest

from lazytorch import runtime


def _host(monkeypatch, *, os_name: str, machine: str, metal: bool | None, compilers: set[str], cc=None,
          env=None):
    """Pretend to run on a host: its platform, MLX (None: not installed), compilers on PATH, env."""
    monkeypatch.setattr(runtime.sys, "platform", os_name)
    monkeypatch.setattr(runtime.platform, "machine", lambda: machine)
    if metal is None:
        monkeypatch.setitem(sys.modules, "mlx", None)          # import fails
        monkeypatch.setitem(sys.modules, "mlx.core", None)
    else:
        core = types.ModuleType("mlx.core")
        core.metal = types.SimpleNamespace(is_available=lambda: metal)
        package = types.ModuleType("mlx")
        package.core = core
        monkeypatch.setitem(sys.modules, "mlx", package)
        monkeypatch.setitem(sys.modules, "mlx.core", core)
    monkeypatch.setattr(runtime.shutil, "which", lambda name: f"/usr/bin/{name}" if name in compilers else None)
    for name, value in (("CC", cc), ("LAZYTORCH_BACKEND", env)):
        if value is None:
            monkeypatch.delenv(name, raising=False)
        else:
            monkeypatch.setenv(name, value)


CASES = [
    # os, machine, MLX metal, compilers, CC, LAZYTORCH_BACKEND -> expected
    ("darwin", "arm64", True, {"cc"}, None, None, "metal"),
    ("darwin", "arm64", True, set(), None, None, "metal"),
    ("darwin", "arm64", False, {"clang"}, None, None, "cpu"),     # MLX without Metal
    ("darwin", "arm64", None, {"clang"}, None, None, "cpu"),      # MLX not installed
    ("darwin", "x86_64", True, {"cc"}, None, None, "cpu"),        # Intel Mac: no Apple silicon
    ("linux", "aarch64", True, {"gcc"}, None, None, "cpu"),       # MLX's cpu build on Linux
    ("linux", "x86_64", None, {"gcc"}, None, None, "cpu"),
    ("linux", "x86_64", None, set(), None, None, "reference"),
    ("linux", "x86_64", None, {"gcc"}, "mycc", None, "reference"),  # $CC set but not installed
    ("linux", "x86_64", None, {"mycc"}, "mycc", None, "cpu"),
    ("darwin", "arm64", True, {"cc"}, None, "reference", "reference"),  # the variable overrides
    ("linux", "x86_64", None, set(), None, "metal-emu", "metal-emu"),
]


@pytest.mark.parametrize("os_name,machine,metal,compilers,cc,env,expected", CASES)
def test_default_backend(monkeypatch, os_name, machine, metal, compilers, cc, env, expected):
    _host(monkeypatch, os_name=os_name, machine=machine, metal=metal, compilers=compilers, cc=cc, env=env)
    assert runtime.default_backend() == expected


def test_metal_probe_failure_falls_back(monkeypatch):
    """An MLX whose Metal probe raises counts as no Metal."""
    _host(monkeypatch, os_name="darwin", machine="arm64", metal=True, compilers={"cc"})

    def broken():
        raise RuntimeError("no device")
    monkeypatch.setattr(sys.modules["mlx.core"].metal, "is_available", broken)
    assert runtime.default_backend() == "cpu"


def test_default_is_used_when_nothing_selected(monkeypatch):
    _host(monkeypatch, os_name="linux", machine="x86_64", metal=None, compilers=set())
    monkeypatch.setattr(runtime, "_selected", [None])
    assert runtime.backend_name() == "reference"

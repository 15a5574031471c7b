"""Shared fixtures.  `backend` runs a test on every backend under test (each one's results are
compared with torch), so the op suite checks the reference executor and every code generator."""
from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))

import lazytorch as lt  # noqa: E402

# Backends the op suite runs on; LAZYTORCH_TEST_BACKENDS="cpu" narrows it.
BACKENDS = [b for b in os.environ.get("LAZYTORCH_TEST_BACKENDS", "reference,cpu,metal-emu").split(",") if b]
# The oracle is torch on the CPU, exact in float32, and so are the tolerances: with the cuda backend
# under test, its convolutions compute in float32 too, not in TF32 as torch's default flag lets
# them on a GPU (lazytorch/ir/precision.py; tests/test_tf32.py checks the flags and the TF32 GEMMs)
if "cuda" in BACKENDS:
    lt.backends.cudnn.allow_tf32 = False


@pytest.fixture(params=BACKENDS)
def backend(request):
    previous = lt.get_backend()
    lt.set_backend(request.param)
    yield request.param
    lt.set_backend(previous)


def _on(name: str):
    """A fixture running its test on backend `name`, then restoring the one before."""
    @pytest.fixture
    def fixture():
        previous = lt.get_backend()
        lt.set_backend(name)
        yield
        lt.set_backend(previous)
    return fixture


on_reference = _on("reference")     # logic that is the same on every backend (no compiles)
on_cpu = _on("cpu")                 # kernel counts and timings of the C backend

# ---- the strict Metal front-end check over every Metal kernel the session emitted (tests/metal_strict.py)
_strict: dict = {}


@pytest.fixture(scope="session", autouse=True)
def _collect_metal_kernels():
    from metal_strict import Collector
    mp = pytest.MonkeyPatch()
    collector = Collector()
    collector.install(mp)
    _strict["collector"] = collector
    yield
    mp.undo()


def pytest_sessionfinish(session, exitstatus):
    import metal_strict
    collector = _strict.get("collector")
    if collector is None or not collector.sources:
        return
    sources = list(collector.sources)
    if metal_strict.CLANG is None:
        _strict["line"] = (f"strict Metal check NOT RUN on {len(sources)} kernels: clang++ not found "
                           "(apt-get install clang)")
        return
    failures = metal_strict.check(sources)
    _strict["line"] = (f"strict Metal check: {len(sources)} kernels compiled by clang with distinct address "
                       f"spaces, {len(failures)} failed")
    _strict["failures"] = failures
    if failures:
        session.exitstatus = 1


def pytest_terminal_summary(terminalreporter):
    if "line" in _strict:
        terminalreporter.write_line(_strict["line"])
    for source, errors in _strict.get("failures", [])[:5]:
        terminalreporter.write_line(f"{errors}\n--- kernel ---\n{source[-4000:]}")


@pytest.fixture(autouse=True)
def _backend_restored():
    """Every test starts on the backend the previous one started on: a test (or a device name it
    passes) that selects a backend must not change what later tests run on."""
    previous = lt.get_backend()
    yield
    if lt.get_backend() != previous:
        lt.set_backend(previous)

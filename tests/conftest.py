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


@pytest.fixture(params=BACKENDS)
def backend(request):
    previous = lt.get_backend()
    lt.set_backend(request.param)
    yield request.param
    lt.set_backend(previous)

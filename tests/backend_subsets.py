"""Backend fixtures for the op-coverage test files (test_ops_sort/scatter/math/linalg_extra/
data_dependent.py).  Their ops are mostly host launches or compositions the other op tests already
push through every code generator, and metal-emu compiles slowly, so each file runs on reference
and cpu (`backend`) and a cross-section of its tests also on metal-emu (`every_backend`)."""
from __future__ import annotations

import pytest

import lazytorch as lt
from conftest import BACKENDS

FAST_BACKENDS = [b for b in BACKENDS if b != "metal-emu"] or BACKENDS


def _use(name):
    previous = lt.get_backend()
    lt.set_backend(name)
    return previous


@pytest.fixture(params=FAST_BACKENDS)
def backend(request):
    previous = _use(request.param)
    yield request.param
    lt.set_backend(previous)


@pytest.fixture(params=BACKENDS)
def every_backend(request):
    previous = _use(request.param)
    yield request.param
    lt.set_backend(previous)

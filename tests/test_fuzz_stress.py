"""The stress generators (tests/fuzz/stress.py, stress_nn.py) at a small count per backend under
test: many inputs, long chains, creation dtypes, loops, mutated host arrays, backward passes and
small modules; every program is run twice (other scalars and data, same structure).
The long campaign is `python -m tests.fuzz.stress --programs 2000 --backends ... --jobs N`
(docs/reliability.md)."""
from __future__ import annotations

import random

import pytest

from conftest import BACKENDS
from fuzz.case import other_data
from fuzz.stress import GENERATORS, run_stress

# compiled backends pay a compiler run per kernel: they get fewer programs of the quick kinds
COUNTS = {"reference": (14, None), "metal-emu": (14, None),
          "cpu": (4, ["creation", "numpy_mutation", "many_inputs", "backward"])}


@pytest.mark.parametrize("backend_name", BACKENDS)
def test_stress_campaign(backend_name):
    n, kinds = COUNTS.get(backend_name, (7, None))
    camp = run_stress(backend_name, n, seed=0, kinds=kinds)
    assert camp.programs == n
    assert not camp.failures, "\n".join(map(str, camp.failures))


@pytest.mark.parametrize("kind", ["backward", "module"])
def test_user_layer_generators_on_reference(kind):
    """Gradients and modules (forward, backward, optimizer steps) at a few seeds of their own."""
    camp = run_stress("reference", 6, seed=3, kinds=[kind])
    assert camp.programs == 6 and not camp.failures, "\n".join(map(str, camp.failures))


# programs per backend (the writes-through-numpy() programs are small: many on reference)
NUMPY_WRITES = {"reference": 40, "metal-emu": 4, "cpu": 4}   # (metal-emu: clang checks each kernel)


@pytest.mark.parametrize("backend_name", BACKENDS)
def test_numpy_writes_generator(backend_name):
    """Writes through `x.numpy()` reach x and what is built from x afterwards, never results built
    before (pending or evaluated), with lazy ops, in-place ops and partial evaluations between."""
    camp = run_stress(backend_name, NUMPY_WRITES.get(backend_name, 10), seed=5, kinds=["numpy_writes"])
    assert not camp.failures, "\n".join(map(str, camp.failures))


def test_numpy_writes_programs_write_and_would_catch_copies(monkeypatch):
    """The generator's programs run under torch and write through their arrays, and a lazytorch
    whose `numpy()` returned a copy (writes never reaching the tensor) would fail most of them."""
    import numpy as np
    import torch

    import lazytorch as lt
    from fuzz import stress
    writes = []
    real_write = stress._write
    monkeypatch.setattr(stress, "_write", lambda a, how, v: (writes.append(a.size), real_write(a, how, v)))
    cases = [stress.numpy_writes(random.Random(k)) for k in range(30)]
    for case in cases:
        case.run(torch, case.scalars, case.data)            # (torch never raises on them)
    assert sum(1 for size in writes if size) >= 60
    shared = lt.Tensor.numpy
    monkeypatch.setattr(lt.Tensor, "numpy", lambda self: np.array(shared(self), copy=True))
    previous = lt.get_backend()
    lt.set_backend("reference")
    try:
        caught = sum(stress.judge(case, case.scalars, case.data)[0] is not None for case in cases)
    finally:
        lt.set_backend(previous)
    assert caught >= 15, caught


def test_every_generator_builds_a_program():
    for name, gen in GENERATORS.items():
        case = gen(random.Random(1))
        assert callable(case.run) and case.kind.split(":")[0] == name


def test_rerun_data_keeps_shapes_dtypes_and_index_ranges():
    import numpy as np
    rng = random.Random(0)
    idx = np.arange(12).reshape(3, 4) % 5
    other = other_data(idx, rng)
    assert other.dtype == idx.dtype and other.shape == idx.shape and sorted(other.flat) == sorted(idx.flat)
    x = np.linspace(-1, 1, 6, dtype=np.float32).reshape(2, 3)
    y = other_data(x, rng)
    assert y.dtype == np.float32 and y.shape == x.shape and not np.array_equal(x, y)
    assert other_data(np.array(3), rng) == 3

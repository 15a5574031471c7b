"""The stress generators (tests/fuzz/stress.py) at a small count per backend under test: many
inputs, long chains, creation dtypes, loops, reruns with other scalars, mutated host arrays.
The long campaign is `python -m tests.fuzz.stress --programs 2000 --backends ...` (docs/reliability.md)."""
from __future__ import annotations

import pytest

from conftest import BACKENDS
from fuzz.stress import GENERATORS, run_stress

# compiled backends pay a compiler run per program: cpu gets the quick kinds only
COUNTS = {"reference": (12, None), "metal-emu": (12, None), "cpu": (4, ["creation", "numpy_mutation", "many_inputs"])}


@pytest.mark.parametrize("backend_name", BACKENDS)
def test_stress_campaign(backend_name):
    n, kinds = COUNTS.get(backend_name, (6, None))
    camp = run_stress(backend_name, n, seed=0, kinds=kinds)
    assert camp.programs == n
    assert not camp.failures, "\n".join(map(str, camp.failures))


def test_every_generator_builds_a_program():
    import random
    for name, gen in GENERATORS.items():
        case = gen(random.Random(1))
        assert callable(case.run) and case.kind.split(":")[0] in (name, "rerun") or name == "rerun"

"""The strict Metal front-end check (tests/metal_strict.py) on kernels of each shape the generator
emits, and proof that it rejects what Apple's compiler rejects (a pointer across address spaces).
The session-wide check over every kernel the suite emits runs at the end of each session
(tests/conftest.py) and prints its count."""
from __future__ import annotations

import numpy as np
import pytest

import lazytorch as lt
import metal_strict
from lazytorch.codegen.gpu import launch_call
from lazytorch.codegen.targets.metal import assemble

pytestmark = pytest.mark.skipif(metal_strict.CLANG is None, reason="clang++ not found: apt-get install clang")


def _sources(*tensors) -> list[str]:
    plan = lt.kernel_plan(*tensors)
    calls = [launch_call(launch, "metal") for launch in plan.launches]
    return [assemble(c).source for c in calls if c is not None]


def _programs() -> list:
    x = lt.from_numpy(np.linspace(-2, 2, 96, dtype=np.float32).reshape(8, 12))
    i = lt.from_numpy(np.arange(-12, 12, dtype=np.int32).reshape(4, 6))
    h = x.to(lt.float16)
    return [x.softmax(-1), x.sum(0), x.argmax(-1), x.amin(-1), (i // 3) % 5, i.prod(0),
            (h * 2).exp().to(lt.bfloat16), x.transpose(0, 1).contiguous() * 2, (x > 0).all(-1),
            x.tanh().log1p().erf(), lt.where(x > 0, x, x * 0.1).mean(-1, keepdim=True)]


def test_generated_kernels_pass_the_strict_check():
    sources = [s for p in _programs() for s in _sources(p)]
    assert len(sources) >= 10
    assert metal_strict.check(sources) == []


def test_a_pointer_across_address_spaces_is_rejected():
    (src,) = _sources(lt.from_numpy(np.arange(1, 7, dtype=np.int32)) // 2)
    assert "device int32_t* err" in src
    bad = src.replace("device int32_t* err", "int32_t* err")      # a helper taking a generic pointer
    ((_, errors),) = metal_strict.check([bad])
    assert "no matching function for call to 'lt_ifloordiv_i32'" in errors   # device pointer, generic parameter

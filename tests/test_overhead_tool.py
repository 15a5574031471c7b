"""benchmarks/overhead.py's model breakdown: a lazy call's stages against its lt.compile call.
No timing assertions: the stages are reported, the lazy program is found in the graph cache (the
breakdown's lookup raises if it had to compile) and the lazy and compiled results agree."""
from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # the repo root holds benchmarks/

import lazytorch as lt  # noqa: E402
from benchmarks.frameworks import lazytorch_backend_kept  # noqa: E402
from benchmarks.overhead import model_breakdown  # noqa: E402
from benchmarks.workloads import BY_NAME, make_inputs  # noqa: E402


@pytest.mark.skipif(not lt.runtime.c_compiler_available(), reason="needs a C compiler")
def test_model_breakdown_of_the_readme_demo():
    with lazytorch_backend_kept():
        r = model_breakdown("W11", "cpu", calls=2, quick=True)
        w = BY_NAME["W11"]
        forward = w.run("lazytorch")
        args = [lt.from_numpy(x) for x in make_inputs(w, quick=True)]
        lazy = forward(*args).numpy()
        compiled = lt.compile(forward)(*args).numpy()
    assert list(r) == ["build", "program", "lookup", "run", "lazy call", "lt.compile call"]
    assert all(median >= low >= 0 for median, low in r.values()), r
    np.testing.assert_allclose(lazy, compiled, rtol=1e-5, atol=1e-6)

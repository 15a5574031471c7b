"""The host path: first calls in a new process, the plan index of the disk cache, the static memory
plan of cached programs, and the lazy path's bookkeeping (docs/compile.md, docs/architecture.md)."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import lazytorch as lt

# a program with a row kernel (softmax), a pointwise one and a matmul, printed with what the
# process had to import and compile to run it
CHILD = r"""
import json, sys, numpy as np, lazytorch as lt
from lazytorch.runtime import compiler
lt.set_backend("cpu")
x = lt.tensor(np.linspace(-2, 2, 24, dtype=np.float32).reshape(4, 6))
w = lt.tensor(np.linspace(1, -1, 18, dtype=np.float32).reshape(6, 3))
y = lt.softmax(x * 1.5, dim=-1) @ w + lt.tanh(x).sum(-1, keepdim=True)
print(json.dumps({"value": y.numpy().tolist(), "stats": compiler.stats,
                  "codegen": "lazytorch.codegen.render" in sys.modules, "jinja2": "jinja2" in sys.modules}))
"""


def expected() -> np.ndarray:
    import torch
    x = torch.linspace(-2, 2, 24, dtype=torch.float32).reshape(4, 6)
    w = torch.linspace(1, -1, 18, dtype=torch.float32).reshape(6, 3)
    return (torch.softmax(x * 1.5, dim=-1) @ w + torch.tanh(x).sum(-1, keepdim=True)).numpy()


def run_child(cache: Path, code: str = CHILD) -> dict:
    env = dict(os.environ, LAZYTORCH_CACHE_DIR=str(cache))
    out = subprocess.run([sys.executable, "-W", "always", "-c", code], env=env, capture_output=True,
                         text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    result = json.loads(out.stdout.strip().splitlines()[-1])
    result["stderr"] = out.stderr
    return result


def test_warm_disk_cache_skips_lowering_and_rendering(tmp_path):
    cold = run_child(tmp_path)
    assert cold["stats"]["compiled"] == 1 and cold["codegen"]
    assert len(list(tmp_path.glob("*.plan"))) == 1
    warm = run_child(tmp_path)
    # found through the plan index: nothing compiled, the code generator never imported
    assert warm["stats"]["compiled"] == 0 and warm["stats"]["disk_hits"] == 1
    assert not warm["codegen"] and not warm["jinja2"]
    for result in (cold, warm):
        np.testing.assert_allclose(result["value"], expected(), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("damage", ["library_removed", "library_truncated", "index_garbled"])
def test_damaged_plan_index_or_library_falls_back_to_rendering(tmp_path, damage):
    run_child(tmp_path)
    (index,) = tmp_path.glob("*.plan")
    (library,) = tmp_path.glob("*.so")
    if damage == "library_removed":
        library.unlink()
    elif damage == "library_truncated":
        library.write_bytes(library.read_bytes()[:64])
    else:
        index.write_text("not a key\n")
    again = run_child(tmp_path)
    np.testing.assert_allclose(again["value"], expected(), rtol=1e-5, atol=1e-6)
    assert again["stats"]["compiled"] == (0 if damage == "index_garbled" else 1)
    assert again["stats"]["rebuilt"] == (1 if damage == "library_truncated" else 0)
    assert run_child(tmp_path)["stats"]["compiled"] == 0         # and the index is whole again


def test_plan_structure_tells_kernels_apart():
    """The index key covers what rendering reads (literals, shapes, dtypes, views, wiring) and
    not the runtime values of Python scalars."""
    from lazytorch.realize import kernel_plan
    from lazytorch.runtime.cpu import plan_structure
    F = lt.nn.functional
    x = lt.tensor(np.ones((3, 4), np.float32))
    i = lt.tensor(np.ones((3, 4), np.int32))

    def text(y):
        return plan_structure(kernel_plan([y], "cpu"))
    assert text(x.exp() + 1.0) == text(x.exp() + 2.5)           # a runtime argument
    distinct = [text(y) for y in (
        x.exp() + 1, F.gelu(x), F.gelu(x, approximate="tanh"), F.softmax(x, 0), F.softmax(x, 1), (x.exp() + 1).sum(0), x.t().exp() + 1,
        i.abs() + 1, lt.tensor(np.ones((4, 3), np.float32)).exp() + 1, x.sin() + 1, x.exp() - x,
        x - x.exp())]
    assert None not in distinct and len(set(distinct)) == len(distinct)

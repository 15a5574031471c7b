"""The plan executor owns launch tracing (LAZYTORCH_DEBUG) and the kernel error flag on every backend."""
from __future__ import annotations

import numpy as np
import pytest

import lazytorch as lt


@pytest.fixture(params=["cpu", "metal-emu", "reference"])
def on_backend(request):
    previous = lt.get_backend()
    lt.set_backend(request.param)
    yield request.param
    lt.set_backend(previous)


def test_debug_traces_every_launch_with_compile_times(on_backend, monkeypatch, capsys):
    monkeypatch.setenv("LAZYTORCH_DEBUG", "1")
    a = np.random.default_rng(3).standard_normal((7, 13)).astype(np.float32)   # a shape no other test uses
    x = lt.from_numpy(a)
    y = ((x @ x.t()) * 0.5).softmax(-1)
    np.testing.assert_allclose(y.numpy(), _softmax(a.astype(np.float64) @ a.T.astype(np.float64) * 0.5),
                               rtol=1e-4, atol=1e-6)
    err = capsys.readouterr().err
    plan = lt.kernel_plan(((x @ x.t()) * 0.5).softmax(-1))
    for launch in plan.launches:
        assert f"compiled {launch.name}" in err, err
        assert f"{on_backend} {launch.name} (" in err and " us" in err, err
    assert "library" in err or on_backend == "reference"        # the matmul is traced too


def _softmax(z):
    e = np.exp(z - z.max(-1, keepdims=True))
    return e / e.sum(-1, keepdims=True)


@pytest.mark.parametrize("backend_name", ["cpu", "metal-emu"])
def test_kernel_error_flag_raises_through_the_executor(backend_name):
    previous = lt.get_backend()
    lt.set_backend(backend_name)
    try:
        x = lt.from_numpy(np.arange(5, dtype=np.int32))
        d = lt.from_numpy(np.array([1, 2, 0, 1, 1], np.int32))
        with pytest.raises(ZeroDivisionError, match=r"integer division by zero \(ops: .*div"):
            (x // d).numpy()
        ok = lt.from_numpy(np.array([1, 2, 3, 1, 1], np.int32))
        np.testing.assert_array_equal((x // ok).numpy(), np.arange(5) // np.array([1, 2, 3, 1, 1]))
    finally:
        lt.set_backend(previous)

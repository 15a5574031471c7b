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


def test_deferred_checks_are_read_once_after_the_run():
    """A device backend's launch may leave its error flag on the device (DeferredCheck): the
    executor reads all of a run's flags with one any_flag_set after the last launch and raises the
    first set launch's own error, naming the launch; unset flags cost no error."""
    from lazytorch.realize import kernel_plan
    from lazytorch.runtime.backend import ReferenceBackend
    from lazytorch.runtime.executor import DeferredCheck, PlanExecutor

    a = np.random.default_rng(4).standard_normal((3, 5)).astype(np.float32)
    x = lt.tensor(a)
    plan = kernel_plan([(x @ x.t()).softmax(-1)], "reference")      # a library launch, then a kernel
    assert len(plan.launches) >= 2 and len(plan.params) == 1
    ran, reads = [], []

    class Flagging(ReferenceBackend):
        def any_flag_set(self, flags):
            reads.append(len(flags))
            return super().any_flag_set(flags)

    def run(flags):
        def compile_launch(launch, plan):
            def fn(r, w):
                from lazytorch.runtime.reference import run_launch
                for buf, value in zip(w, run_launch(launch, [np.asarray(b) for b in r])):
                    np.copyto(buf, value)
                ran.append(launch.name)
                bad = flags[len(ran) - 1]
                return DeferredCheck(np.array(bad), lambda: IndexError(f"{launch.name} bad"))
            return fn
        ex = PlanExecutor(Flagging(), plan, compile_launch)
        return ex.run([x.node.buffer])

    n = len(plan.launches)
    out = run([False] * n)
    np.testing.assert_allclose(np.asarray(out[0]), _softmax(a.astype(np.float64) @ a.T), rtol=1e-5)
    assert ran == [lc.name for lc in plan.launches] and reads == [n]
    ran.clear()
    with pytest.raises(IndexError, match=f"{plan.launches[1].name} bad") as e:
        run([False] + [True] * (n - 1))
    assert len(ran) == n                                  # every launch ran before the one read
    assert any(plan.launches[1].name in note for note in e.value.__notes__)


@pytest.mark.parametrize("dtype", ["float32", "bfloat16", "int64", "bool"])
def test_a_host_cat_is_written_into_the_buffer_it_is_given(dtype, monkeypatch):
    """A cat the host runs for a host backend (the cpu's reference launches) writes its value into
    the plan's buffer, with no value made first and copied in: W10's qkv gradients, a cat of
    three transposed views, 92 -> 52 us.  Values against torch, transposed and empty pieces."""
    import torch
    from lazytorch.realize import kernel_plan
    from lazytorch.runtime import executor
    made = []
    monkeypatch.setattr(executor, "run_launch", lambda *a: made.append(a) or pytest.fail("not written into"))
    rng = np.random.default_rng(0)
    values = [rng.standard_normal(s) * 4 for s in ((4, 3), (4, 0), (4, 5))]
    ts = [torch.tensor(v).to(getattr(torch, dtype)) for v in values]
    xs = [lt.tensor(t.float().numpy() if dtype == "bfloat16" else t.numpy()).to(getattr(lt, dtype)) for t in ts]
    lt.eval(*xs)
    plan = kernel_plan([lt.cat([x.t() for x in xs], 0)], backend="cpu")
    (launch,) = [l for l in plan.launches if l.kind == "reference"]
    out = np.full(launch.writes[0][1].shape, 7, launch.writes[0][0].dtype.np if dtype != "bfloat16" else np.uint16)
    reads = [np.asarray(x._node.buffer) for x in xs if x.numel]
    assert executor.host_fallback(lt.runtime.get_backend("cpu"), launch)(reads, [out]) is None and not made
    want = torch.cat([t.t() for t in ts], 0)
    got = out.view(np.uint16).astype(np.uint32) << 16 if dtype == "bfloat16" else out
    expected = want.view(torch.int16).numpy().view(np.uint16).astype(np.uint32) << 16 if dtype == "bfloat16" else want.numpy()
    np.testing.assert_array_equal(got, expected)

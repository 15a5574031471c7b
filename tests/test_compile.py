"""lt.compile: traced once per input signature, replayed without running the body.

Every compiled result is checked against the lazy path (the same body, not compiled) and, where the
program is torch code, against torch; compile_info() shows what was traced, replayed or fell back.
"""
from __future__ import annotations

import math
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

import lazytorch as lt
from lazytorch.compile import GraphBreak

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "examples"))
import gpt_block  # noqa: E402


def lt_t(a: np.ndarray) -> lt.Tensor:
    return lt.from_numpy(np.array(a, copy=True))


def delta(before, after):
    return tuple(b - a for a, b in zip(before, after))


def close(a, b, tol=1e-5):
    np.testing.assert_allclose(np.asarray(a, np.float64), np.asarray(b, np.float64), rtol=tol, atol=tol)


# ---------------------------------------------------------------- whole programs

def test_gpt_block_matches_lazy_path_and_torch(backend):
    size = dict(batch=2, seq=8, width=32, n_head=4)
    w_np = gpt_block.random_weights(size["width"])
    w = {k: lt_t(v) for k, v in w_np.items()}
    w_torch = {k: torch.from_numpy(v) for k, v in w_np.items()}
    forward = lt.compile(lambda x: gpt_block.block(lt, x, w, size["n_head"]))   # weights: captured
    for seed in (1, 2, 3):
        x_np = gpt_block.random_input(size["batch"], size["seq"], size["width"], seed=seed)
        before = lt.compile_info()
        got = forward(lt_t(x_np))
        assert delta(before, lt.compile_info())[2] == 0
        lazy = gpt_block.block(lt, lt_t(x_np), w, size["n_head"]).numpy()
        ref = gpt_block.block(torch, torch.from_numpy(x_np), w_torch, size["n_head"]).numpy()
        assert isinstance(got, lt.Tensor) and not got.is_lazy
        close(got.numpy(), lazy, 1e-6)
        close(got.numpy(), ref, 1e-4)


def test_weights_as_arguments_module_argument_and_int_specialization(backend):
    """block(torch, x, w, n_head) compiled as is: the module is a static argument, the weight dict
    is flattened into tensor arguments, n_head shapes the program (specialized)."""
    w_np = gpt_block.random_weights(16)
    w = {k: lt_t(v) for k, v in w_np.items()}
    block = lt.compile(gpt_block.block)
    x_np = gpt_block.random_input(1, 4, 16)
    before = lt.compile_info()
    for _ in range(3):
        out = block(lt, lt_t(x_np), w, 2)
    assert delta(before, lt.compile_info())[:2] == (1, 3)
    close(out.numpy(), gpt_block.block_float64(x_np, w_np, 2), 1e-4)
    out = block(lt, lt_t(x_np), w, 4)                               # another head count: retrace
    assert delta(before, lt.compile_info())[:2] == (2, 4)
    close(out.numpy(), gpt_block.block_float64(x_np, w_np, 4), 1e-4)
    w2 = {k: lt_t(v * 0.5) for k, v in w_np.items()}                 # new buffers, same signature
    out = block(lt, lt_t(x_np), w2, 2)
    assert delta(before, lt.compile_info())[:2] == (2, 5)
    close(out.numpy(), gpt_block.block_float64(x_np, {k: v * 0.5 for k, v in w_np.items()}, 2), 1e-4)


class TinyNorm:
    """A module-like object with parameters and buffers (running statistics, a call counter)."""

    def __init__(self, n: int):
        self.weight = lt_t(np.linspace(0.5, 1.5, n).astype(np.float32))
        self.bias = lt_t(np.linspace(-0.1, 0.1, n).astype(np.float32))
        self.running_mean = lt.zeros(n)
        self.num_batches = lt.zeros((), dtype=lt.int64)
        self.training = True

    def __call__(self, x):
        if self.training:
            mean = x.mean(0)
            self.running_mean.mul_(0.9).add_(0.1 * mean)
            self.num_batches.add_(1)
        else:
            mean = self.running_mean
        return (x - mean) * self.weight + self.bias


def torch_norm_steps(xs, n):
    weight = torch.from_numpy(np.linspace(0.5, 1.5, n).astype(np.float32))
    bias = torch.from_numpy(np.linspace(-0.1, 0.1, n).astype(np.float32))
    running = torch.zeros(n)
    outs = []
    for x in xs:
        x = torch.from_numpy(x)
        mean = x.mean(0)
        running.mul_(0.9).add_(0.1 * mean)
        outs.append(((x - mean) * weight + bias).numpy())
    return outs, running.numpy()


def test_module_with_buffers_replays_in_place_updates(backend):
    n = 6
    compiled_mod, lazy_mod = TinyNorm(n), TinyNorm(n)
    model = lt.compile(compiled_mod)
    assert model.weight is compiled_mod.weight                     # attributes come from the module
    rng = np.random.default_rng(0)
    xs = [rng.standard_normal((5, n)).astype(np.float32) for _ in range(4)]
    before = lt.compile_info()
    outs = [model(lt_t(x)).numpy() for x in xs]
    assert delta(before, lt.compile_info())[:2] == (1, 4)
    lazy = [lazy_mod(lt_t(x)).numpy() for x in xs]
    ref, ref_running = torch_norm_steps(xs, n)
    for o, lz, r in zip(outs, lazy, ref):
        close(o, lz, 1e-6)
        close(o, r, 1e-5)
    close(compiled_mod.running_mean.numpy(), ref_running, 1e-6)
    assert compiled_mod.num_batches.item() == 4 == lazy_mod.num_batches.item()
    # state changed outside the compiled function is read again by the next call
    compiled_mod.running_mean.mul_(0.0)
    model.training = False                                         # sets the module's flag: a new trace
    assert compiled_mod.training is False
    eval_out = model(lt_t(xs[0])).numpy()
    close(eval_out, xs[0] * np.linspace(0.5, 1.5, n) + np.linspace(-0.1, 0.1, n), 1e-6)
    assert delta(before, lt.compile_info())[:2] == (2, 5)
    assert compiled_mod.num_batches.item() == 4


# ---------------------------------------------------------------- arguments

def test_python_scalars_are_runtime_arguments(backend):
    def f(x, scale, shift):
        return (x * scale + shift).softmax(-1) * 2.0

    cf = lt.compile(f)
    x_np = np.random.default_rng(1).standard_normal((3, 7)).astype(np.float32)
    x = lt_t(x_np)
    before = lt.compile_info()
    for scale, shift in [(1.0, 0.5), (2.5, -1.0), (-0.3, 4.0), (0.0, 0.0)]:
        got = cf(x, scale, shift).numpy()
        ref = (torch.from_numpy(x_np) * scale + shift).softmax(-1) * 2.0
        close(got, ref.numpy(), 1e-6)
        close(got, f(x, scale, shift).numpy(), 1e-6)
    assert delta(before, lt.compile_info())[:2] == (1, 4)         # one trace, four replays
    close(cf(x, 3, 1).numpy(), f(x, 3, 1).numpy(), 1e-6)           # ints: a new signature
    assert delta(before, lt.compile_info())[0] == 2


def test_scalar_used_in_python_arithmetic_is_specialized():
    def f(x, t):
        return x * (1.0 / math.sqrt(t))                           # t only reaches the graph derived

    cf = lt.compile(f)
    x = lt_t(np.arange(4, dtype=np.float32))
    before = lt.compile_info()
    for t in (4.0, 16.0, 4.0):
        close(cf(x, t).numpy(), np.arange(4) / math.sqrt(t), 1e-6)
    assert delta(before, lt.compile_info())[:2] == (2, 3)          # 16.0 retraced; 4.0 replayed


def test_nested_outputs_constants_and_returned_argument(backend):
    @lt.compile
    def f(x, pair, scale):
        a, b = pair
        return {"sum": a + b * scale, "both": (x, a.mean()), "n": x.shape[0], "tag": "ok"}

    x_np, a_np, b_np = (np.random.default_rng(i).standard_normal(5).astype(np.float32) for i in range(3))
    x = lt_t(x_np)
    out = f(x, (lt_t(a_np), lt_t(b_np)), 3.0)
    assert set(out) == {"sum", "both", "n", "tag"} and out["n"] == 5 and out["tag"] == "ok"
    assert out["both"][0] is x
    close(out["sum"].numpy(), a_np + b_np * 3.0, 1e-6)
    close(out["both"][1].numpy(), a_np.mean(), 1e-6)


def test_lazy_and_view_arguments(backend):
    @lt.compile
    def f(x):
        return x.exp() - 1.0

    base_np = np.random.default_rng(2).standard_normal((4, 6)).astype(np.float32)
    base = lt_t(base_np)
    close(f(base.T).numpy(), np.exp(base_np.T) - 1, 1e-6)          # a view: its layout is in the key
    close(f(base[1:3, ::2]).numpy(), np.exp(base_np[1:3, ::2]) - 1, 1e-6)
    pending = base * 2.0                                           # a lazy argument is evaluated first
    close(f(pending).numpy(), np.exp(base_np * 2) - 1, 1e-6)



def test_arguments_and_captures_of_host_data_are_uploaded_once(backend, monkeypatch):
    """On a backend with its own memory, a compiled call uploads a host-data argument or captured
    tensor once and the tensor keeps the device copy (as the lazy path does), so later calls move
    no weights; on host backends the data is read in place."""
    from lazytorch.runtime import get_backend
    dev = get_backend(backend)
    w = lt.tensor(np.arange(6, dtype=np.float32).reshape(2, 3))
    x = lt.tensor(np.ones((2, 3), np.float32))
    f = lt.compile(lambda x: x * w + 1.0)
    uploads = []
    adopt = dev.adopt
    monkeypatch.setattr(dev, "adopt", lambda b: uploads.append(type(b)) or adopt(b))
    buffers = []
    for _ in range(3):
        close(f(x).numpy(), np.arange(6).reshape(2, 3) + 1.0, 1e-6)
        buffers.append((x.node.buffer, w.node.buffer))
    host = [t for t in uploads if t is np.ndarray]
    # (host backends read the arrays in place: the default adopt is skipped for a C-contiguous
    # ndarray, the reference backend's returns it as it is)
    assert len(host) == 2 if dev.device_memory else len(host) in (0, 6)
    assert all(b[0] is buffers[0][0] and b[1] is buffers[0][1] for b in buffers)
    assert isinstance(x.node.buffer, np.ndarray) != dev.device_memory


# ---------------------------------------------------------------- closure state

def test_counter_and_kv_cache_in_closure(backend):
    counter = lt.zeros((), dtype=lt.int64)
    cache = lt.zeros(2, 5, 3)

    @lt.compile
    def step(k, pos):
        counter.add_(1)
        cache[:, pos] = k                                          # a tensor index: one trace
        return cache.sum(1) * 1.0

    ref = np.zeros((2, 5, 3), np.float32)
    before = lt.compile_info()
    for p in range(4):
        k_np = np.full((2, 1, 3), p + 1.0, np.float32)
        out = step(lt_t(k_np), lt.tensor([p]))
        ref[:, p] = k_np[:, 0]
        close(out.numpy(), ref.sum(1), 1e-6)
    assert delta(before, lt.compile_info())[:2] == (1, 4)
    assert counter.item() == 4
    close(cache.numpy(), ref)


def test_kv_cache_written_at_a_python_int_position():
    cache = lt.zeros(1, 4, 2)

    @lt.compile
    def write(k, pos: int):
        cache[:, pos] = k
        return cache[:, : pos + 1].mean(1)

    ref = np.zeros((1, 4, 2), np.float32)
    for p in range(4):
        out = write(lt.full((1, 2), float(p + 1)), p)             # pos shapes the program: specialized
        ref[:, p] = p + 1
        close(out.numpy(), ref[:, : p + 1].mean(1))
    out = write(lt.full((1, 2), 9.0), 1)                           # replayed from the pos=1 trace
    ref[:, 1] = 9.0
    close(out.numpy(), ref[:, :2].mean(1))
    close(cache.numpy(), ref)


def test_argument_mutated_in_place_is_written_back():
    @lt.compile
    def f(x, y):
        x.mul_(2.0)
        y[0] = 7.0
        return x + y

    x, y = lt_t(np.ones(3, np.float32)), lt_t(np.zeros(3, np.float32))
    out = f(x, y)
    close(x.numpy(), [2, 2, 2])
    close(y.numpy(), [7, 0, 0])
    close(out.numpy(), [9, 2, 2])
    out = f(x, y)
    close(x.numpy(), [4, 4, 4])
    close(out.numpy(), [11, 4, 4])


def test_state_assigned_by_attribute_falls_back():
    class Holder:
        def __init__(self):
            self.last = lt.zeros(2)

        def __call__(self, x):
            self.last = x * 2.0                                     # assignment, not in place
            return self.last + 1.0

    h = Holder()
    f = lt.compile(h)
    with pytest.warns(UserWarning, match="stored in the function's state by assignment"):
        out = f(lt_t(np.ones(2, np.float32)))
    close(out.numpy(), [3, 3])
    close(h.last.numpy(), [2, 2])


# ---------------------------------------------------------------- recompiles and data dependence

def test_changed_shape_retraces_and_logs_the_reason(monkeypatch, capfd):
    monkeypatch.setenv("LAZYTORCH_DEBUG", "1")

    @lt.compile
    def f(x, y):
        return x @ y

    a, b = np.ones((2, 3), np.float32), np.ones((3, 4), np.float32)
    before = lt.compile_info()
    f(lt_t(a), lt_t(b))
    f(lt_t(a), lt_t(b))
    out = f(lt_t(np.ones((5, 3), np.float32)), lt_t(b))
    close(out.numpy(), np.full((5, 4), 3.0))
    f(lt_t(np.ones((5, 3), np.float64)), lt_t(b.astype(np.float64)))
    assert delta(before, lt.compile_info())[:2] == (3, 4)
    err = capfd.readouterr().err
    assert "f: tracing: first call" in err
    assert "x: shape [2, 3] float32 -> shape [5, 3] float32" in err
    assert "x: shape [5, 3] float32 -> shape [5, 3] float64" in err and "y: shape [3, 4] float32" in err


def test_backend_change_retraces(monkeypatch, capfd):
    monkeypatch.setenv("LAZYTORCH_DEBUG", "1")
    f = lt.compile(lambda x: x.sin() * 2.0)
    x = lt_t(np.linspace(0, 1, 5).astype(np.float32))
    previous = lt.get_backend()
    try:
        for name in ("reference", "cpu"):
            lt.set_backend(name)
            close(f(x).numpy(), np.sin(np.linspace(0, 1, 5)) * 2, 1e-6)
    finally:
        lt.set_backend(previous)
    assert "backend changed from reference to cpu" in capfd.readouterr().err


def test_data_dependent_branch_falls_back_with_one_warning(backend):
    def f(x):
        if x.sum() > 0:                                             # needs the data: graph break
            return x * 2.0
        return x - 1.0

    cf = lt.compile(f)
    before = lt.compile_info()
    with pytest.warns(UserWarning, match=r"test_compile.py:\d+ \(if x.sum\(\) > 0:") as record:
        out = cf(lt_t(np.ones(3, np.float32)))
    assert len(record) == 1
    close(out.numpy(), [2, 2, 2])
    import warnings
    with warnings.catch_warnings():
        warnings.simplefilter("error")                              # the warning is given once
        close(cf(lt_t(-np.ones(3, np.float32))).numpy(), [-2, -2, -2])
    assert delta(before, lt.compile_info()) == (1, 0, 2)


@pytest.mark.parametrize("read", ["item", "numpy", "bool", "tolist"])
def test_data_dependent_code_is_an_error_with_fullgraph(read):
    def f(x):
        value = getattr(x.max(), read)() if read != "bool" else bool(x.max() > 1)
        return x * (2.0 if value else 3.0)

    cf = lt.compile(f, fullgraph=True)
    with pytest.raises(GraphBreak, match=r"test_compile.py:\d+ \(value = getattr"):
        cf(lt_t(np.ones(2, np.float32)))


def test_random_numbers_in_the_body_fall_back():
    @lt.compile
    def noisy(x):
        return x + lt.randn(3)

    x = lt.zeros(3)
    with pytest.warns(UserWarning, match="random numbers"):
        a = noisy(x).numpy()
    b = noisy(x).numpy()
    assert not np.array_equal(a, b)                                 # fresh noise each call


def test_decorator_with_options_and_disable():
    @lt.compile(dynamic=False, mode="max-autotune")
    def f(x):
        return x + 1.0

    assert f.__name__ == "f"
    close(f(lt.zeros(2)).numpy(), [1, 1])

    def g(x):
        return x

    assert lt.compile(g, disable=True) is g
    with pytest.raises(TypeError, match="expected a function or a callable module"):
        lt.compile(3)


def test_benchmark_harness_has_compiled_columns(tmp_path):
    """`python -m benchmarks --compiled reference` adds a checked lazytorch.compile[...] column."""
    import json
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
    from benchmarks.cli import main
    assert main(["--quick", "--out", str(tmp_path), "--workloads", "W7", "--backends", "reference",
                 "--compiled", "reference", "--peers", "numpy"]) == 0
    rows = json.loads((tmp_path / "results.json").read_text())["workloads"][0]["results"]
    assert [r["framework"] for r in rows] == ["lazytorch[reference]", "lazytorch.compile[reference]", "numpy"]
    assert all(r["status"] == "ok" and r["max_abs_err"] <= 1e-4 * r["ref_max_abs"] for r in rows)


def test_nn_module_with_batchnorm_train_then_eval(backend):
    """A real lt.nn.Module: parameters and BatchNorm's running statistics (updated in place in
    training mode) against torch, step by step; eval() is a new trace (the training flag)."""
    torch.manual_seed(0)
    tm = torch.nn.Sequential(torch.nn.Linear(6, 8), torch.nn.BatchNorm1d(8), torch.nn.ReLU(), torch.nn.Linear(8, 3))
    lm = lt.nn.Sequential(lt.nn.Linear(6, 8), lt.nn.BatchNorm1d(8), lt.nn.ReLU(), lt.nn.Linear(8, 3))
    lm.load_state_dict(tm.state_dict())
    model = lt.compile(lm)
    rng = np.random.default_rng(0)
    before = lt.compile_info()
    with torch.no_grad():
        for _ in range(3):
            x = rng.standard_normal((5, 6)).astype(np.float32)
            close(model(lt_t(x)).numpy(), tm(torch.from_numpy(x)).numpy(), 1e-5)
        for name in ("running_mean", "running_var"):
            close(getattr(lm[1], name).numpy(), getattr(tm[1], name).numpy(), 1e-5)
        assert lm[1].num_batches_tracked.item() == 3
        model.eval()
        tm.eval()
        x = rng.standard_normal((4, 6)).astype(np.float32)
        close(model(lt_t(x)).numpy(), tm(torch.from_numpy(x)).numpy(), 1e-5)
    assert delta(before, lt.compile_info())[:3] == (2, 4, 0)
    assert lm[1].num_batches_tracked.item() == 3


def test_compiled_training_step_matches_torch():
    """forward + backward + SGD in one compiled call: the parameters' updates and .grad are replayed;
    the optimizer's lt.eval inside the body is a no-op while tracing."""
    torch.manual_seed(0)
    tm = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.Tanh(), torch.nn.Linear(8, 1))
    lm = lt.nn.Sequential(lt.nn.Linear(4, 8), lt.nn.Tanh(), lt.nn.Linear(8, 1))
    lm.load_state_dict(tm.state_dict())
    topt, lopt = torch.optim.SGD(tm.parameters(), lr=0.1), lt.optim.SGD(lm.parameters(), lr=0.1)

    @lt.compile
    def step(x, y):
        lopt.zero_grad(set_to_none=True)
        loss = ((lm(x) - y) ** 2).mean()
        loss.backward()
        lopt.step()
        return loss.detach()

    rng = np.random.default_rng(0)
    before = lt.compile_info()
    for _ in range(3):
        x, y = rng.standard_normal((6, 4)).astype(np.float32), rng.standard_normal((6, 1)).astype(np.float32)
        loss = step(lt_t(x), lt_t(y)).item()
        topt.zero_grad()
        ref = ((tm(torch.from_numpy(x)) - torch.from_numpy(y)) ** 2).mean()
        ref.backward()
        topt.step()
        assert abs(loss - ref.item()) < 1e-5
    assert delta(before, lt.compile_info())[:3] == (1, 3, 0)
    close(lm[0].weight.numpy(), tm[0].weight.detach().numpy(), 1e-5)
    close(lm[2].weight.grad.numpy(), tm[2].weight.grad.numpy(), 1e-5)


def test_python_number_state_changed_by_the_body_falls_back():
    """A Python counter in the callable's state (as Adam's step count) can't be replayed: the trace
    restores it, warns once and every call runs lazily with the right values."""
    class Scaled:
        def __init__(self):
            self.calls = 0
            self.w = lt_t(np.array([1.0, 2.0], np.float32))

        def __call__(self, x):
            self.calls += 1
            return x * self.w * float(self.calls)

    s = Scaled()
    f = lt.compile(s)
    x = lt_t(np.ones(2, np.float32))
    with pytest.warns(UserWarning, match=r"changed Python number state \(Scaled\['calls'\]: 0 -> 1\)"):
        close(f(x).numpy(), [1, 2])
    close(f(x).numpy(), [2, 4])
    assert s.calls == 2

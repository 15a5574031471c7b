"""Which C kernels fork threads: the estimated work (codegen/cost.py, constants in
codegen/targets/c.py), not the element count.  Structure and values only, never timings."""
from __future__ import annotations

import numpy as np
import pytest
import torch

import lazytorch as lt
from lazytorch.codegen.cost import FUNCTIONS, kernel_work
from lazytorch.codegen.lower import COSTLY, lower
from lazytorch.codegen.render import render
from lazytorch.codegen.targets import TARGETS, c
from lazytorch.realize import kernel_plan

RULE = c.PARALLEL
N = 131072                     # the README demo's softmax kernel: 2048 rows of 64


def kernels(*tensors) -> list:
    """(launch, lowered kernel, rendered C) of every generated kernel of the tensors' program."""
    out = []
    for launch in kernel_plan(tensors, "cpu").launches:
        if launch.kind == "kernel":
            k = lower(launch, "lt_" + launch.name, row_cache=True)
            out.append((launch, k, render(k, "c")))
    return out


def forks(r) -> bool:
    return "omp parallel for" in r.source


def rand(*shape, seed=0) -> np.ndarray:
    return np.random.default_rng(seed).standard_normal(shape).astype(np.float32)


def causal_softmax(mod, att):
    """The README demo's attention weights (examples/gpt_block.py): scaled, causal mask, softmax."""
    T = att.shape[-1]
    att = att * 0.125
    att = att.masked_fill(~mod.tril(mod.ones(T, T, dtype=mod.bool)), float("-inf"))
    return mod.nn.functional.softmax(att, dim=-1)


def test_the_demos_softmax_rows_fork_and_as_many_adds_do_not():
    xs, ys = rand(4, 8, 64, 64), rand(4, 8, 64, 64, seed=1)
    x, y = lt.tensor(xs), lt.tensor(ys)
    (_, ks, soft), = kernels(causal_softmax(lt, x))
    (_, ka, add), = kernels(x + y)
    assert ks.numel == ka.numel == N
    assert soft.parallel and forks(soft) and "if(lt_parallel)" in soft.source
    assert not add.parallel and not forks(add)
    # the same programs run (the forking kernel included) and equal torch
    torch.testing.assert_close(causal_softmax(lt, x).numpy(), causal_softmax(torch, torch.from_numpy(xs)).numpy())
    np.testing.assert_array_equal((x + y).numpy(), xs + ys)


@pytest.mark.parametrize("name,fn,tfn", [
    ("exp", lt.exp, torch.exp),
    ("tanh", lt.tanh, torch.tanh),
    ("erf", lt.erf, torch.erf),
    ("gelu", lambda a: lt.nn.functional.gelu(a, approximate="tanh"),
     lambda a: torch.nn.functional.gelu(a, approximate="tanh")),
])
def test_transcendentals_fork_where_as_many_cheap_elements_do_not(name, fn, tfn):
    """262144 elements: once the size from which every kernel forked."""
    xs = rand(512, 512)
    x = lt.tensor(xs)
    (_, k, r), = kernels(fn(x))
    assert k.numel == 2 * N and r.parallel, name
    (_, _, cheap), = kernels(x * 2.0 + 1.0)
    assert not cheap.parallel
    torch.testing.assert_close(fn(x).numpy(), tfn(torch.from_numpy(xs)).numpy())


def test_small_costly_kernels_stay_serial_and_large_cheap_ones_fork():
    (_, _, small), = kernels(lt.softmax(lt.randn(64, 64), dim=-1))
    assert not small.parallel
    big = lt.randn(1 << 22)
    (_, k, r), = kernels(big + 1.0)
    assert kernel_work(k, RULE) >= RULE.min_work and r.parallel
    assert np.array_equal((big + 1.0).numpy(), big.numpy() + np.float32(1.0))


def test_a_full_reduction_splits_its_row_by_work():
    xs = rand(2 * N)
    (_, _, exp_sum), = kernels(lt.exp(lt.tensor(xs)).sum())
    (_, _, plain_sum), = kernels(lt.tensor(xs).sum())
    assert "omp parallel for simd" in exp_sum.source and "reduction(+:" in exp_sum.source
    assert not plain_sum.parallel
    np.testing.assert_allclose(lt.exp(lt.tensor(xs)).sum().item(), np.exp(xs.astype(np.float64)).sum(), rtol=1e-5)


def test_work_counts_every_pass_over_the_row():
    x = lt.randn(2048, 64)
    (_, k, _), = kernels(lt.softmax(x, dim=-1))
    elems = [s for s in k.stages if s.scope == "elem"]
    assert len(elems) == 3
    # three passes; exp once (kept in the row cache), so between one exp and two per element
    per = kernel_work(k, RULE) / k.numel
    exp = RULE.class_cost["exp"]
    assert exp + 3 * RULE.pass_cost < per < 2 * exp


def test_float64_functions_cost_more_than_float32_ones():
    (_, k32, _), = kernels(lt.exp(lt.randn(1024)))
    (_, k64, _), = kernels(lt.exp(lt.randn(1024).double()))
    assert kernel_work(k64, RULE) > 5 * kernel_work(k32, RULE)


def test_the_row_cache_keeps_what_the_cost_table_calls_costly():
    assert COSTLY == FUNCTIONS
    assert all(RULE.op_cost(op) >= RULE.class_cost["exp"] for op in _ops(FUNCTIONS))


def _ops(names):
    from lazytorch.codegen.kernel_ir import Op
    from lazytorch.ir import dtypes as D
    return [Op("v", n, (), dt) for n in names for dt in (D.float32, D.float64)]


def test_gpu_dialects_never_fork():
    assert c.DIALECT.extra["parallel"] is RULE
    assert all("parallel" not in d.extra for name, d in TARGETS.items() if name != "c")
    x = lt.randn(2048, 64)
    for launch in kernel_plan((lt.softmax(x, dim=-1),), "cpu").launches:
        assert not render(lower(launch, "k"), "metal").parallel


def test_the_demo_block_kernels_and_values():
    """The README demo (examples/gpt_block.py, W11): seven kernels; the softmax rows and the
    GELU epilogue fork, the layer norms, bias adds and the head copy stay serial; the block
    equals its float64 oracle."""
    import sys
    from pathlib import Path
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "examples"))
    import gpt_block as g
    s = g.DEMO_SIZE
    wn, xn = g.random_weights(s["width"]), g.random_input(s["batch"], s["seq"], s["width"])
    w = {k: lt.tensor(v) for k, v in wn.items()}
    y = g.block(lt, lt.tensor(xn), w, s["n_head"])
    ks = kernels(y)
    assert len(ks) == 7
    forked = {launch.pattern + str(k.numel) for launch, k, r in ks if r.parallel}
    assert forked == {"row131072", "pointwise262144"}        # softmax rows, GELU epilogue
    np.testing.assert_allclose(y.numpy(), g.block_float64(xn, wn, s["n_head"]), atol=1e-4)

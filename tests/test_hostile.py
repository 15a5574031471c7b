"""Hostile and invalid inputs: each case gives torch's result or a clear lazytorch error, never a crash.

Cases that could crash the interpreter (huge index spaces, in-place writes through overlapping
views) run in a subprocess, so a segfault fails one test instead of killing pytest.
"""
from __future__ import annotations

import subprocess
import sys
import textwrap

import numpy as np
import pytest
import torch

import lazytorch as lt
from oracle import check, check_error, sample

# (name, program, error type, words the message must contain): torch rejects each one too
INVALID = [
    ("broadcast", lambda m, x: x + m.ones(4, 3), RuntimeError, ("add", "[2, 3]", "[4, 3]")),
    ("matmul shapes", lambda m, x: x @ x, RuntimeError, ("matmul", "2x3")),
    ("bitwise on float", lambda m, x: x & x, TypeError, ("bitwise_and", "float32")),
    ("dim out of range", lambda m, x: x.sum(5), IndexError, ("sum", "5", "-2..1")),
    ("negative size", lambda m, x: m.zeros(-1, 2), RuntimeError, ("zeros", "-1")),
    ("bad reshape", lambda m, x: x.reshape(-2, 3), RuntimeError, ("reshape", "-2")),
    ("view numel", lambda m, x: x.view(4), RuntimeError, ("view", "6")),
    ("permute dup", lambda m, x: x.permute(0, 0), RuntimeError, ("permute",)),
    ("expand non-1", lambda m, x: x.expand(3, 3), RuntimeError, ("expand", "3")),
    ("zero step", lambda m, x: x[::0], ValueError, ("step",)),
    ("float index", lambda m, x: x[1.5], IndexError, ("float",)),
    ("softmax int", lambda m, x: m.softmax(x.long(), 0), TypeError, ("softmax", "int64")),
    ("cat shapes", lambda m, x: m.cat([x, x.t()]), RuntimeError, ("cat", "[2, 3]", "[3, 2]")),
    ("item of many", lambda m, x: x.item(), RuntimeError, ("item", "6")),
    ("amax of empty dim", lambda m, x: x[:0].amax(0), IndexError, ("amax", "zero-size")),
]


@pytest.mark.parametrize("name,fn,exc,words", INVALID, ids=[c[0] for c in INVALID])
def test_invalid_input_raises_clearly(name, fn, exc, words):
    x = sample((2, 3))
    with pytest.raises(Exception):
        fn(torch, x.torch)                      # the case really is invalid
    check_error(fn, x, exc=exc, match=words)


@pytest.mark.parametrize("dtype", ["float32", "float16", "bfloat16", "float64"])
def test_nan_inf_propagate(backend, dtype):
    values = np.array([np.nan, np.inf, -np.inf, 0.0, -0.0, 1.0])
    x = sample((6,), dtype, values=values)
    check(lambda m, x: (x.exp(), x * 0, x.amax(), x.sum(), m.softmax(x, 0), x.sign(), x.sqrt()), x)


@pytest.mark.parametrize("shape", [(0,), (0, 3), (2, 0, 4)])
def test_empty_tensors(backend, shape):
    x = sample(shape)
    check(lambda m, x: (x + 1, x.sum(-1), x.sum(), x.prod(), (x * 2).reshape(-1), x.mean(0)), x)


def test_inplace_through_views_matches_torch(backend):
    def prog(m, x):
        base = x.clone()
        base[::2].add_(1)                    # strided view written through to its base
        base.t()[1].mul_(3)                  # transposed view
        row = base[0]
        row.sub_(base[1])                    # reads the other row while writing one
        return base, row
    check(prog, sample((3, 4)))


def test_eval_of_evaluated_tensor_is_a_no_op(backend):
    x = lt.tensor([1.0, 2.0])
    y = x * 2
    lt.eval(y)
    first = y.numpy()
    lt.eval(y, y)
    np.testing.assert_array_equal(y.numpy(), first)
    np.testing.assert_array_equal((y + 1).numpy(), [3.0, 5.0])


def test_mutation_after_build_uses_old_value(backend):
    x = lt.tensor([1.0, 2.0])
    y = x * 2
    x.add_(1)
    z = x * 2
    np.testing.assert_array_equal(y.numpy(), [2.0, 4.0])
    np.testing.assert_array_equal(z.numpy(), [4.0, 6.0])


def test_float64_on_metal_emu_names_op_and_dtype():
    previous = lt.get_backend()
    lt.set_backend("metal-emu")
    try:
        x = lt.tensor(np.arange(3.0))         # float64 data
        with pytest.raises((TypeError, RuntimeError)) as info:
            (x.exp() + 1).numpy()
        assert "float64" in str(info.value) and "Metal" in str(info.value)
        # the failed compile left no poisoned entry: a float32 program still runs
        # (a float64 buffer cannot even be read on Metal, so the retry uses float32 data)
        y = lt.tensor(np.arange(3.0, dtype=np.float32))
        np.testing.assert_allclose((y.exp() + 1).numpy(), np.exp(np.arange(3.0)) + 1, rtol=1e-6)
    finally:
        lt.set_backend(previous)


def _run_isolated(code: str, timeout: int = 120) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True,
                          timeout=timeout)


@pytest.mark.parametrize("backend_name", ["reference", "cpu", "metal-emu"])
def test_huge_index_space_plans_64_bit_indexing(backend_name):
    """An expand to 2^32+ elements is only metadata: the plan and kernel use 64-bit indices, and a
    reduction of it is never allocated (we check the rendered source, not run it)."""
    proc = _run_isolated(f"""
        import lazytorch as lt
        from lazytorch.codegen.lower import lower
        big = lt.ones(1, 1).expand(70000, 70000)          # 4.9e9 elements, no data
        assert big.numel() > 2**32
        plan = lt.kernel_plan((big * 2).sum())
        kernels = [l for l in plan.launches if l.kind == "kernel"]
        assert kernels and all(lower(l, "k").index_type == "i64" for l in kernels), plan
        small = lt.kernel_plan((lt.ones(1, 1).expand(300, 300) * 2).sum())
        assert all(lower(l, "k").index_type == "i32" for l in small.launches if l.kind == "kernel")
        print("ok")
    """)
    assert proc.returncode == 0 and "ok" in proc.stdout, proc.stderr[-3000:]


# fixed: tensor._rebind refuses to write through a view with an expanded (stride-0) dim
def test_inplace_on_expanded_view_is_rejected():
    proc = _run_isolated("""
        import lazytorch as lt
        try:
            lt.zeros(1, 3).expand(2, 3).add_(1)
        except RuntimeError as e:
            print("raised", e)
    """)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "raised" in proc.stdout and ("expand" in proc.stdout.lower() or "memory" in proc.stdout)

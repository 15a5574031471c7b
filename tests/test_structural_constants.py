"""Structural constants (ir/node.py: Node.constant): numbers the library puts in a program (the fill
of zeros/ones, tril's diagonal and zeros, composites' 0s and 1s) are part of the program's key
and literals in its kernels, while the user's Python numbers in arithmetic stay runtime params
(one compiled program for every value).  Values are checked against torch on every backend."""
from __future__ import annotations

import numpy as np
import pytest
import torch

import lazytorch as lt
from lazytorch.ir import dtypes as D
from lazytorch.ir.build import constant, scalar
from lazytorch.ir.graph import program
from lazytorch.ir.node import Node

RNG = np.random.default_rng(3)


def same(got: lt.Tensor, want: torch.Tensor) -> None:
    g, w = got.numpy(), want.numpy()
    assert g.dtype == w.dtype and g.shape == w.shape
    np.testing.assert_array_equal(g, w)


# (shape, diagonal): square, wide, tall, batched, size-1, empty, diagonals past either edge
TRIANGLES = [((4, 4), 0), ((3, 5), 1), ((5, 3), -2), ((2, 3, 4), 0), ((1, 1), 0), ((0, 3), 0),
             ((3, 4), 7), ((3, 4), -9)]


@pytest.mark.parametrize("shape,diagonal", TRIANGLES)
def test_tril_triu_match_torch(backend, shape, diagonal):
    a = RNG.standard_normal(shape).astype(np.float32)
    x, t = lt.from_numpy(a), torch.from_numpy(a)
    same(lt.tril(x, diagonal), torch.tril(t, diagonal))
    same(lt.triu(x, diagonal), torch.triu(t, diagonal))
    if len(shape) == 2 and shape[0] > 1 and shape[1] > 1:             # a non-contiguous input
        same(lt.tril(x.t(), diagonal), torch.tril(t.t(), diagonal))


@pytest.mark.parametrize("dtype", ["bool", "int32", "float16", "float64"])
def test_creation_fills_and_ramps_match_torch(backend, dtype):
    if dtype == "float64" and backend in ("metal-emu", "metal", "cuda"):
        pytest.skip("no float64 on the GPU backends (a clear TypeError, tested in the op suite)")
    lt_dt, t_dt = getattr(lt, dtype), getattr(torch, dtype)
    same(lt.ones(2, 3, dtype=lt_dt), torch.ones(2, 3, dtype=t_dt))
    same(lt.zeros(3, dtype=lt_dt) + lt.ones(3, dtype=lt_dt), torch.zeros(3, dtype=t_dt) + torch.ones(3, dtype=t_dt))
    same(lt.tril(lt.ones(4, 4, dtype=lt_dt), -1), torch.tril(torch.ones(4, 4, dtype=t_dt), -1))
    same(lt.zeros((), dtype=lt_dt), torch.zeros((), dtype=t_dt))
    if dtype != "bool":
        same(lt.arange(2, 11, 3, dtype=lt_dt), torch.arange(2, 11, 3, dtype=t_dt))
        same(lt.ones_like(lt.zeros(2, 2, dtype=lt_dt)), torch.ones_like(torch.zeros(2, 2, dtype=t_dt)))


def test_the_causal_mask_has_no_runtime_scalar(on_cpu):
    """The README demo's mask: tril(ones(T, T, bool)) under masked_fill.  Only the user's -inf and
    scale are params; the mask's numbers are literals, so the plan's one kernel computes it from
    one comparison (before: five runtime scalars, the mask recomputed with int64 selects)."""
    a = RNG.standard_normal((2, 8, 8)).astype(np.float32)
    att = lt.from_numpy(a) * 0.125
    causal = lt.tril(lt.ones(8, 8, dtype=lt.bool))
    out = att.masked_fill(~causal, float("-inf")).softmax(-1)
    plan = lt.kernel_plan(out)
    assert len(plan.scalar_slots) == 2, plan                       # 0.125 and -inf: the user's
    t = torch.from_numpy(a) * 0.125
    want = t.masked_fill(~torch.tril(torch.ones(8, 8, dtype=torch.bool)), float("-inf")).softmax(-1)
    np.testing.assert_allclose(out.numpy(), want.numpy(), rtol=1e-6, atol=1e-7)


def test_constants_are_structure_and_user_numbers_are_not(on_cpu):
    """Programs differing only in a constant are different programs (each computes its own value);
    programs differing only in a user's number share one compiled program."""
    lt.cache_clear()
    a = RNG.standard_normal((5, 5)).astype(np.float32)
    x = lt.from_numpy(a)
    for k in (-1, 0, 2):                                           # three diagonals: three programs
        same(lt.tril(x * 1.0, k), torch.tril(torch.from_numpy(a), k))
    assert lt.cache_info().misses == 3
    for v in (2.0, 3.0, -0.5):                                     # three values: one program
        np.testing.assert_array_equal((x * v).numpy(), a * np.float32(v))
    info = lt.cache_info()
    assert (info.misses, info.hits) == (4, 2), info
    for start in (0, 1, 5):          # arange's start stays a runtime scalar (position ids): one program
        ramp = lt.arange(start, start + 6, 2)
        same(ramp, torch.arange(start, start + 6, 2))
    info = lt.cache_info()
    assert (info.misses, info.hits) == (5, 4), info


def test_constant_nodes_are_keyed_by_value_and_are_no_leaves():
    x = Node.from_buffer(np.zeros(3, np.float32), (3,), D.float32)

    def prog(c: Node):
        return program([Node("mul", (x, c), {}, (3,), D.float32)])
    keys = {prog(constant(v)).key for v in (1, 2, 1.0, True, 0.0, -0.0)}
    assert len(keys) == 6                                          # 1, 1.0, True, 0.0 and -0.0 differ
    assert prog(constant(1.5)).key == prog(constant(1.5)).key
    assert prog(constant(2.0)).leaves == [x]                       # bound at run time: the buffer only
    assert prog(scalar(2.0)).key == prog(scalar(3.0)).key          # a runtime scalar: one structure
    assert len(prog(scalar(2.0)).leaves) == 2
    assert constant(0.1).dtype is D.float64 and constant(0.5).dtype is D.float32   # exact in float32
    assert constant(3).dtype is D.int64 and constant(False).dtype is D.bool_


def test_compiled_diagonal_argument_specializes(on_cpu):
    """lt.compile: an int argument used as tril's diagonal is structure, so each value is its own
    trace (specialized), with the right result for each."""
    a = RNG.standard_normal((4, 6)).astype(np.float32)
    x = lt.from_numpy(a)
    f = lt.compile(lambda x, k, s: lt.tril(x, k) * s)
    for k, s in ((0, 2.0), (1, 3.0), (0, 4.0), (-2, 1.0)):
        np.testing.assert_allclose(f(x, k, s).numpy(), np.tril(a, k) * np.float32(s), rtol=1e-6)

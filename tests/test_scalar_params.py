"""Python scalars in arithmetic of another dtype (passes/legalize.py): a float read in float32
arithmetic has its param retyped to float32 (the runtime rounds it, as the kernel's cast did)
instead of a `to` node per scalar.  Values must be torch's bit for bit, edge values included, on
every backend, on a graph-cache hit with other values too, and without numpy warnings."""
from __future__ import annotations

import warnings

import numpy as np
import pytest
import torch

import lazytorch as lt
from lazytorch.ir import dtypes as D
from lazytorch.ir.graph import toposort
from lazytorch.ir.node import Node
from lazytorch.passes.pipeline import compile_plan, run
from lazytorch.realize import kernel_plan
from lazytorch.runtime import get_backend

# floats that round, overflow float32, are special, or are exact
EDGE = [0.1, 1 / 3, -2.5, 1e300, -1e300, float("nan"), float("inf"), -float("inf"), -0.0, 1e-45, 3.4028235e38,
        3.4028236e38]


def same(got, want) -> None:
    got, want = np.asarray(got), np.asarray(want)
    assert got.dtype == want.dtype and got.shape == want.shape
    np.testing.assert_array_equal(got, want)
    if got.dtype.kind == "f":                  # (-0.0 against 0.0; a NaN's sign means nothing)
        keep = ~np.isnan(want)
        assert np.array_equal(np.signbit(got[keep]), np.signbit(want[keep]))


@pytest.mark.parametrize("dtype", ["float32", "float16", "bfloat16", "float64", "int32", "uint8"])
def test_python_floats_match_torch_bit_for_bit(backend, dtype):
    if dtype == "float64" and backend in ("metal-emu", "metal", "cuda"):
        pytest.skip("no float64 on the GPU backends")
    if backend == "cuda":
        pytest.skip("CUDA compilers contract a * b + c into one fma, as torch's own CUDA kernels do: "
                    "last-bit differences from torch's CPU (seen on subnormals)")
    data = np.array([-3.5, -1.25, -0.0, 0.0, 0.5, 2.0, 7.75], np.float32)
    x_lt = lt.tensor(data).to(getattr(lt, dtype))
    x_t = torch.tensor(data).to(getattr(torch, dtype))
    with warnings.catch_warnings():
        warnings.simplefilter("error")           # (numpy's overflow warning on a host conversion)
        for v in EDGE:
            # (a graph-cache hit after the first value).  Half types: products only; torch's CPU
            # add and sub round a Python scalar to the tensor's half type before the float32
            # arithmetic where mul does not, a difference older than the scalar params' types
            if dtype in ("float16", "bfloat16"):
                got, want = (x_lt * v) * 0.75, (x_t * v) * 0.75
            else:
                got, want = (x_lt * v) + 0.75 * v, (x_t * v) + 0.75 * v
            same(got.to(lt.float32).numpy(), want.to(torch.float32).numpy())


def test_scalar_params_take_the_compute_dtype():
    """`y * 0.999 + 0.001` on float32: no cast node, the scalars are float32 params of the plan;
    a float16 tensor's scalars compute in float32 too; a float64 tensor's stay float64, and an
    integer scalar keeps its cast (a conversion that is not exact on the host for every value)."""
    y = lt.ones(8)
    for _ in range(3):
        y = y * 0.999 + 0.001
    h = lt.ones(8, dtype=lt.float16) * 0.5
    d = lt.ones(8, dtype=lt.float64) * 0.5
    i = lt.ones(8) * 3
    plan = kernel_plan([y, h, d, i], "reference")
    scalars = [p.dtype.name for p in plan.params if p.slot in plan.scalar_slots]
    # (the fills of `ones` are structural constants, not params: only the user's numbers are)
    assert scalars == ["float32"] * 6 + ["float32", "float64", "int64"], scalars
    casts = [(n.inputs[0].dtype.name, n.dtype.name) for n in plan.nodes if n.op == "to" and n.inputs[0].op == "param"]
    assert casts == [("int64", "float32")]
    assert len(plan.launches) == 1           # (four independent outputs of one shape: one kernel)


@pytest.mark.parametrize("name", ["reference", "cpu"])
def test_a_scalar_read_as_float32_and_as_float64_keeps_its_casts(name):
    """A param read by float32 and by float64 arithmetic (one value, two readers: graphs the
    decompositions can build) stays float64 with a cast for the float32 readers: one param per
    slot, each reader's values its own arithmetic's."""
    a32 = Node("param", (), {"slot": 0, "kind": "buffer"}, (4,), D.float32)
    a64 = Node("param", (), {"slot": 1, "kind": "buffer"}, (4,), D.float64)
    s = Node("param", (), {"slot": 2, "kind": "scalar"}, (), D.float64)
    roots = [Node("mul", (a32, s), {}, (4,), D.float32), Node("mul", (a64, s), {}, (4,), D.float64),
             Node("maximum", (a32, s), {}, (4,), D.float32)]
    legal = toposort(run(roots, until="legalize", verify=True))          # (verify: one param per slot)
    assert [n.dtype for n in legal if n.op == "param" and n.attrs["slot"] == 2] == [D.float64]
    assert sum(1 for n in legal if n.op == "to") == 1                    # (shared by both float32 readers)
    plan = compile_plan([a32, a64, s], roots, verify=True)
    assert plan.params[2].dtype is D.float64
    x32 = np.array([1.5, -2.0, 0.3, 7.0], np.float32)
    x64 = np.array([0.1, -0.2, 0.3, 1e300])
    for value in (0.1, 1e300):
        outs = get_backend(name).prepare(plan).run([x32, x64, value])
        same(outs[0], (torch.tensor(x32) * value).numpy())
        with np.errstate(over="ignore"):
            same(outs[1], x64 * value)
        same(outs[2], torch.maximum(torch.tensor(x32), torch.tensor(value, dtype=torch.float32)).numpy())


@pytest.mark.parametrize("name", ["reference", "cpu"])
def test_a_retyped_scalar_alone_is_a_float32_param(name):
    a32 = Node("param", (), {"slot": 0, "kind": "buffer"}, (4,), D.float32)
    s = Node("param", (), {"slot": 1, "kind": "scalar"}, (), D.float64)
    roots = [Node("mul", (a32, s), {}, (4,), D.float32), Node("maximum", (a32, s), {}, (4,), D.float32)]
    plan = compile_plan([a32, s], roots, verify=True)
    assert plan.params[1].dtype is D.float32 and not any(n.op == "to" for n in plan.nodes)
    x32 = np.array([1.5, -2.0, 0.3, 7.0], np.float32)
    outs = get_backend(name).prepare(plan).run([x32, 1 / 3])
    same(outs[0], (torch.tensor(x32) * (1 / 3)).numpy())
    same(outs[1], torch.maximum(torch.tensor(x32), torch.tensor(1 / 3, dtype=torch.float32)).numpy())

"""Golden Metal source: the full kernels (as the Metal runtime assembles them) for a few programs are
checked in under tests/golden/, so template changes show up in review.  Regenerate with
`UPDATE_GOLDEN=1 python -m pytest tests/test_metal_golden.py`.

Also: the arguments the metal backend passes to mx.fast.metal_kernel make the runtime generate
exactly the source the emulator compiled."""
from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest

import lazytorch as lt
from lazytorch.codegen.gpu import launch_call
from lazytorch.codegen.targets.metal import assemble
from lazytorch.realize import kernel_plan
from lazytorch.runtime import metal_emu
from lazytorch.runtime import mlx as metal

GOLDEN = Path(__file__).parent / "golden"


def x():
    return lt.tensor(np.linspace(-2, 2, 6 * 40, dtype=np.float32).reshape(6, 40))


PROGRAMS = {
    "pointwise_chain": lambda: ((x() * 2.0).exp() + 1.0).sigmoid(),
    "row_sum": lambda: (x() * x()).sum(dim=1),
    "softmax": lambda: lt.softmax(x(), dim=-1),
}


def calls(program):
    plan = kernel_plan([program()])
    return [c for c in (launch_call(l, "metal") for l in plan.launches) if c is not None]


@pytest.mark.parametrize("name", PROGRAMS)
def test_golden_source(name):
    (call,) = calls(PROGRAMS[name])
    text = assemble(call).source
    path = GOLDEN / f"{name}.metal"
    if os.environ.get("UPDATE_GOLDEN"):
        GOLDEN.mkdir(exist_ok=True)
        path.write_text(text)
    assert path.exists(), f"{path} missing: run with UPDATE_GOLDEN=1"
    assert text == path.read_text(), f"Metal source of {name} changed; review, then UPDATE_GOLDEN=1"


@pytest.mark.parametrize("name", PROGRAMS)
def test_golden_kernels_run_on_the_emulator(name):
    program = PROGRAMS[name]
    lt.set_backend("reference")
    want = program().numpy()
    lt.set_backend("metal-emu")
    try:
        got = program().numpy()
    finally:
        lt.set_backend("reference")
    np.testing.assert_allclose(got, want, rtol=2e-6, atol=1e-6)


@pytest.mark.parametrize("name", PROGRAMS)
def test_metal_backend_arguments_generate_the_emulated_source(name, tmp_path, capfd):
    """What the metal backend hands MLX, traced on Linux, is the source metal_emu compiled."""
    mx = pytest.importorskip("mlx.core")
    (call,) = calls(PROGRAMS[name])
    kernel = mx.fast.metal_kernel(**metal.kernel_arguments(call))
    shapes = [(s, metal.mx_dtype(d)) for s, d in zip(call.input_shapes, call.input_dtypes)]

    def f(*inputs):
        return kernel(**metal.call_arguments(call, inputs), verbose=True)
    capfd.readouterr()
    mx.export_function(str(tmp_path / "k.mlxfn"), f, *[mx.zeros(s, dtype=d) for s, d in shapes])
    printed = capfd.readouterr().out.split("```\n", 1)[1].rsplit("\n```", 1)[0]
    compiled = metal_emu.translation_unit(assemble(call))
    assert compiled.startswith(printed.rstrip("\n") + "\n")


def test_integer_division_by_zero_raises_on_the_emulator():
    lt.set_backend("metal-emu")
    try:
        x, y = lt.tensor([4, -3, 5]), lt.tensor([2, 0, 1])
        with pytest.raises(ZeroDivisionError, match="integer division by zero"):
            (x // y).numpy()
        np.testing.assert_array_equal((x // lt.tensor([2, -2, 1])).numpy(), [2, 1, 5])
    finally:
        lt.set_backend("reference")

"""A short differential fuzzing campaign (tests/fuzz) per backend under test, and the fuzzer's own parts.

Known, reported differences (KNOWN) are tolerated here so the suite stays green; each has a strict
xfail in tests/test_regressions.py that flips when it is fixed.  The long campaign is
`python -m tests.fuzz --programs 10000 --backends reference,cpu,metal-emu` (docs/reliability.md).
"""
from __future__ import annotations

import subprocess
import sys
import warnings

import pytest

from conftest import BACKENDS
from fuzz import compare, generate, repro, run_campaign, shrink
from fuzz.program import Input, Program, Step

# substring of a verdict -> the known cause (see tests/test_regressions.py)
KNOWN = {
    "must be Tensor, not": "lazytorch accepts a Python scalar where torch requires a tensor",
    "must be int, not tuple": "lazytorch's prod accepts a tuple of dims",
    "invalid combination of arguments": "lazytorch's prod accepts a tuple of dims",
    "argument alpha must be a boolean": "add/sub of bool tensors reject an integer alpha",
    "negative integer powers": "integer pow with negative exponents raises at eval",
    "KeyError: 'idx": "cpu lowering of a keepdim argmax feeding a pointwise op",
}
# programs per backend: compiled backends pay a compiler run per batch of 40
PROGRAMS = {"reference": 200, "cpu": 40, "metal-emu": 40}


def _unknown(camp) -> list[str]:
    return [m.verdict + "\n" + m.code for m in camp.mismatches if not any(k in m.verdict for k in KNOWN)]


@pytest.mark.parametrize("backend_name", BACKENDS)
def test_fuzz_campaign(backend_name):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        camp = run_campaign(backend_name, PROGRAMS.get(backend_name, 20), seed=0, shrink_budget=40)
    assert camp.programs == PROGRAMS.get(backend_name, 20)
    unknown = _unknown(camp)
    assert not unknown, "\n\n".join(unknown)


def test_generator_is_seeded_and_varied():
    assert generate(7).source() == generate(7).source()
    sources = {generate(s).source() for s in range(50)}
    assert len(sources) == 50
    text = "\n".join(sources)
    for family in ("m.sum", "[", ".to(m.", "m.softmax", "@", "_("):
        assert family in text, family


def test_shrinker_reduces_to_the_failing_step():
    program = Program(
        inputs=(Input((4, 5), "float32", 1), Input((5,), "float32", 2)),
        steps=(Step("v0 + v1", (0, 1)), Step("m.exp(v2)", (2,)), Step("v3.sum(0)", (3,)),
               Step("v4 * 2", (4,))),
        outputs=(5,))

    def judge(p: Program):             # "fails" while an exp step survives
        return "output 0: values differ" if "exp" in p.source() else None
    small = shrink(program, judge)
    assert len(small.steps) == 1 and "exp" in small.steps[0].expr, small.source()
    assert len(small.inputs) == 1 and small.inputs[0].shape in ((), (1,)), small.inputs


def test_verdicts_catch_wrong_values_dtypes_and_missing_errors():
    base = Program((Input((3,), "float32", 0),), (Step("v0 * 2", (0,)),), (1,))
    assert compare(base, "reference") is None
    # the same program is judged against a torch that computes something else
    wrong = base.with_(steps=(Step("v0 * 2 if m.__name__ == 'torch' else v0 * 3", (0,)),))
    assert "values differ" in compare(wrong, "reference")
    wrong_dtype = base.with_(steps=(Step("v0 * 2 if m.__name__ == 'torch' else (v0 * 2).double()", (0,)),))
    assert "dtype" in compare(wrong_dtype, "reference")
    torch_only_error = base.with_(steps=(Step("v0.sum(9) if m.__name__ == 'torch' else v0", (0,)),))
    assert compare(torch_only_error, "reference").startswith("no-error")
    both_error = base.with_(steps=(Step("v0.sum(9)", (0,)),))
    assert compare(both_error, "reference") is None


def test_repro_is_runnable_python():
    program = generate(3)
    proc = subprocess.run([sys.executable, "-c", repro(program, "reference")], capture_output=True,
                          text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "lazytorch" in proc.stdout and "torch" in proc.stdout

"""The pass pipeline: named passes, dumps, the verifier, legalize and simplify rules."""
from __future__ import annotations

import pytest

import lazytorch as lt
from lazytorch.ir.graph import toposort
from lazytorch.passes import pipeline
from lazytorch.passes.normalize import normalize
from lazytorch.passes.verify import VerifyError, verify_graph
from lazytorch.ir.node import Node
from oracle import check, sample


def after(t, name: str) -> list[Node]:
    _, roots = normalize(toposort([t.node]), [t.node])
    return pipeline.run(roots, until=name, verify=True)


def ops_of(roots) -> list[str]:
    return [n.op for n in toposort(roots)]


PROGRAMS = [
    lambda m, x: m.softmax(x * 2.0, -1),
    lambda m, x: m.nn.functional.layer_norm(x, (x.shape[-1],)).sum(0),
    lambda m, x: (x.t() + 1).exp().mean(-1),
]


@pytest.mark.parametrize("fn", PROGRAMS)
@pytest.mark.parametrize("name", pipeline.pass_names())
def test_dump_after_every_pass(fn, name):
    text = lt.dump(fn(lt, sample((4, 6)).lt), after=name)
    assert ("plan:" in text) == (name == "fuse") and text


@pytest.mark.parametrize("fn", PROGRAMS)
@pytest.mark.parametrize("dtype", ["float32", "float16", "bfloat16"])
def test_verified_pipeline_matches_torch(fn, dtype):
    for name, _ in pipeline.PASSES:
        after(fn(lt, sample((4, 6), dtype).lt), name)
    check(fn, sample((4, 6), dtype))


def test_dump_all_prints_every_pass(monkeypatch, capsys):
    monkeypatch.setenv("LAZYTORCH_DUMP", "all")
    lt.eval(sample((3,)).lt.exp() + 1)
    err = capsys.readouterr().err
    assert all(f"# after {n}" in err for n in pipeline.pass_names())


def test_unknown_pass_is_named():
    with pytest.raises(ValueError, match="decompose"):
        lt.dump(sample((3,)).lt.exp(), after="nope")


def test_verifier_rejects_wrong_dtype():
    x = Node("param", (), {"slot": 0, "kind": "buffer"}, (3,), lt.float32)
    bad = Node("exp", (x,), {}, (3,), lt.float16)
    with pytest.raises(VerifyError, match="meta rule"):
        verify_graph([bad])


def test_legalize_makes_compute_dtypes_explicit():
    x = sample((4,), "float16").lt
    roots = after((x + x).sum(), "legalize")
    for n in toposort(roots):
        if n.op == "add":
            assert n.dtype is lt.float32 and all(i.dtype is lt.float32 for i in n.inputs)
        if n.op == "sum":
            assert n.dtype is lt.float32 and n.inputs[0].dtype is lt.float32
    assert roots[0].op == "to" and roots[0].dtype is lt.float16


@pytest.mark.parametrize("dtype", ["bool", "int8", "int32"])
def test_int_sums_accumulate_in_int64(dtype):
    roots = after(sample((5,), dtype).lt.sum(), "legalize")
    assert [n for n in toposort(roots) if n.op == "sum"][0].inputs[0].dtype is lt.int64
    check(lambda m, x: x.sum(-1), sample((3, 200), dtype, high=100))


def test_simplify_cse_and_identities():
    x = sample((4,)).lt
    roots = after((-(-x)).exp() + (-(-x)).exp(), "simplify")
    assert ops_of(roots).count("exp") == 1 and "neg" not in ops_of(roots)


def test_redundant_casts_removed():
    x = sample((4,), "float16").lt
    roots = after(x.to(lt.float32).to(lt.float16) * x, "simplify")
    # the round trip vanishes; mul computes in f32: one (shared) input cast and the result cast
    assert ops_of(roots) == ["param", "to", "mul", "to"]


def test_int_x_minus_x_folds_but_float_does_not():
    xi = sample((4,), "int32").lt
    assert "sub" not in ops_of(after(xi - xi, "simplify"))
    xf = sample((4,)).lt
    assert "sub" in ops_of(after(xf - xf, "simplify"))
    check(lambda m, x: x - x, sample((4,), values=[1.0, float("inf"), float("nan"), 0.0]))


def test_user_scalars_stay_runtime_args():
    x = sample((4,)).lt
    roots = after(x * 1, "simplify")
    assert "mul" in ops_of(roots) and any(n.op == "param" and n.attrs["kind"] == "scalar" for n in toposort(roots))


def test_view_of_view_and_of_fill_fold():
    x = sample((4, 6)).lt
    roots = after(x.t()[1:3].t() + lt.zeros(6).expand(4, 6)[:, :2], "simplify")
    views = [n for n in toposort(roots) if n.op == "view"]
    assert len(views) == 1 and views[0].inputs[0].op == "param"
    assert all(n.inputs[0].op != "view" for n in toposort(roots) if n.op == "full")
    check(lambda m, x: x.t()[1:3].t() + m.zeros(6).expand(4, 6)[:, :2], sample((4, 6)))

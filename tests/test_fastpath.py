"""The C build of `tensor <op> number` (ir/_fastpath.c) against the Python build it wraps
(ir/build.py fast_builder's `build`, its `__wrapped__`): the same nodes, tree summaries, origins,
autograd tracking, live-tensor registration and errors, and values checked against numpy in
float64 on every backend.  Every miss of the C branch must reach the Python build."""
from __future__ import annotations

import copy
import gc
import inspect
import operator
import os
import pickle
import shutil
import subprocess
import sys
import sysconfig
import textwrap
import typing
import weakref

import numpy as np
import pytest

import lazytorch as lt
from lazytorch.ir import build as B
from lazytorch.ir.native import NATIVE
from lazytorch.ir.graph import MAX_TREE_NODES
from lazytorch.ir.node import EPOCH, _PACKAGE, format_site
from lazytorch.tensor import live_pending
from lazytorch.ir.replay import CHECK

NATIVE_OPS = {name: fn for name, fn in vars(lt.Tensor).items() if type(fn).__name__ == "FastOp"}
FAST = {name: fn for name, fn in NATIVE_OPS.items() if hasattr(operator, name)}          # x <op> y
REFLECTED = {name: fn for name, fn in NATIVE_OPS.items() if hasattr(operator, name.replace("__r", "__", 1))
             and name.startswith("__r") and name not in FAST}                              # y <op> x
needs_fast = pytest.mark.skipif(not FAST, reason="lazytorch.ir._fastpath is not built or LAZYTORCH_NATIVE=0")
# The Tensor API's C replays (call_memo.py native_call) stand aside in check mode
no_check_mode = pytest.mark.skipif(CHECK, reason="LAZYTORCH_CALL_MEMO=check builds every call the general way")

RNG = np.random.default_rng(3)
X = (RNG.random(7) + 0.5).astype(np.float32)          # positive: pow and div stay finite


def test_built_wherever_it_can_be():
    """An install with a C compiler and Python's headers has the C build (CI's does): a skip of
    the tests below must not hide a broken build."""
    headers = os.path.exists(os.path.join(sysconfig.get_paths()["include"], "Python.h"))
    compiler = shutil.which((sysconfig.get_config_var("CC") or "cc").split()[0])
    if os.environ.get("LAZYTORCH_NATIVE") == "0" or not (headers and compiler):
        pytest.skip("no C compiler or Python headers here, or turned off")
    assert NATIVE is not None
    assert {"__mul__", "__add__", "__sub__", "__truediv__"} <= set(FAST)


def chain(x: lt.Tensor) -> lt.Tensor:
    """A pending tensor with a current tree summary (two ops from a buffer)."""
    return x * 0.5 + 0.25


def same_node(a, b) -> None:
    """Two nodes built by the two versions from the same operands."""
    assert (a.op, a.attrs, a.shape, a.dtype, a.key) == (b.op, b.attrs, b.shape, b.dtype, b.key)
    assert len(a.inputs) == len(b.inputs) and a.inputs[0] is b.inputs[0]
    sa, sb = a.inputs[1], b.inputs[1]
    assert (sa.op, sa.dtype, sa.key, type(sa.value), sa.value) == (sb.op, sb.dtype, sb.key, type(sb.value), sb.value)
    assert (sa.tree, sa.autograd, sa.buffer, sa.attrs, sa.inputs, sa.shape) == (None, None, None, {}, (), ())
    assert (a.buffer, a.value, a.autograd) == (b.buffer, b.value, b.autograd) and a.buffer is a.value is None
    ta, tb = a.tree, b.tree
    assert (ta is None) == (tb is None)
    if ta is not None:
        assert (ta[0], ta[1], ta[3], ta[4]) == (tb[0], tb[1], tb[3], tb[4])
        n = ta[3]
        assert ta[2][n - 1] is sa and tb[2][n - 1] is sb
        assert all(p is q for p, q in zip(ta[2][:n - 1], tb[2][:n - 1]))


NUMBERS = [2.0, 3, True, -0.0]


@needs_fast
@pytest.mark.parametrize("number", NUMBERS, ids=repr)
def test_same_nodes_and_values(backend, number):
    for name, fast in sorted(FAST.items()):
        x = chain(lt.from_numpy(X.copy()))
        chain(lt.from_numpy(X.copy())) * 1.0          # (a chain record for the number's class exists)
        try:
            want = fast.__wrapped__(x, number)
        except Exception as e:                         # the Python's error: the C raises the same
            with pytest.raises(type(e)) as got:
                fast(x, number)
            assert str(got.value) == str(e), name
            continue
        for _ in range(2):                              # (the second: the chain record is warm)
            got = fast(x, number)
            want = fast.__wrapped__(x, number)
        assert type(got) is lt.Tensor and got._base is None and got._grad is None
        same_node(got.node, want.node)
        out = got.numpy()
        np.testing.assert_array_equal(out, want.numpy())
        with np.errstate(divide="ignore"):
            ref = getattr(operator, name)(X.astype(np.float64) * 0.5 + 0.25, number)
        np.testing.assert_allclose(out, ref, rtol=2e-6, atol=1e-6, err_msg=name)


@needs_fast
def test_chain_values_and_one_kernel(backend):
    """W7's chain, built by the C branch past its first op, is one tree: one kernel, numpy's values."""
    x = lt.from_numpy(X.copy())
    want = X.astype(np.float64)
    for _ in range(5):                  # (the ops' records: a run on this backend alone starts cold)
        x * 1.01 + 0.5 - 0.25
        (x * 1.01 + 0.5) / 1.02
    for _ in range(3):
        y = x
        want_y = want
        for _ in range(5):
            y = ((y * 1.01 + 0.5) - 0.25) / 1.02
            want_y = ((want_y * 1.01 + 0.5) - 0.25) / 1.02
        assert y.node.tree is not None and y.node.tree[4] == 41
        assert [k.kind for k in lt.kernel_plan(y).kernels] == ["kernel"]
        np.testing.assert_allclose(y.numpy(), want_y, rtol=1e-6)


@needs_fast
def test_origin_is_the_users_line():
    x = chain(lt.from_numpy(X.copy()))
    got, want = FAST["__mul__"](x, 2.0), FAST["__mul__"].__wrapped__(x, 2.0)
    assert got.node.origin == want.node.origin and os.path.basename(__file__) in got.node.origin
    # called from the package's own code: the origin is the first frame outside it (user_site)
    namespace: dict = {}
    exec(compile("def inner(x):\n    return x * 2.0\n", os.path.join(_PACKAGE, "lazytorch", "_fake_inner.py"),
                 "exec"), namespace)
    line = sys._getframe().f_lineno + 1
    y = namespace["inner"](x)
    assert y.node.origin == f"{os.path.basename(__file__)}:{line}"


@needs_fast
def test_misses_take_the_python_build():
    fast = FAST["__mul__"]
    x = lt.from_numpy(X.copy())
    pend = chain(x)
    cases = {
        "number first": (2.0, pend),
        "a view": (chain(x)[1:], 2.0),
        "two tensors": (pend, chain(x)),
        "a buffer of a new shape": (lt.from_numpy(np.ones((3, 1, 2), np.float32)), 2.0),
        "a numpy scalar": (pend, np.float32(2.0)),
    }
    for name, args in cases.items():
        got, want = fast(*args), fast.__wrapped__(*args)
        np.testing.assert_array_equal(got.numpy(), want.numpy(), err_msg=name)
    stale = chain(x)
    lt.eval(chain(x) * 1.0)                      # realizes something: the epoch moves on
    assert stale.node.tree[0] != EPOCH[0]
    got = fast(stale, 3.0)
    assert got.node.tree is None or got.node.tree[0] == EPOCH[0]
    np.testing.assert_allclose(got.numpy(), (X.astype(np.float64) * 0.5 + 0.25) * 3.0, rtol=1e-6)
    with pytest.raises(TypeError):
        fast(pend, 2.0, 3.0)


def python_frames(fn, *args) -> tuple[object, list[str]]:
    """`fn(*args)` and the Python functions that ran inside it."""
    ran: list[str] = []

    def profile(frame, event, arg):
        if event == "call":
            ran.append(frame.f_code.co_name)
    sys.setprofile(profile)
    try:
        out = fn(*args)
    finally:
        sys.setprofile(None)
    return out, ran[:-1]                # (the last: sys.setprofile's return into `profile`)

def same_general(got, want) -> None:
    """The nodes the C general branch and the Python build made from the same operands: equal
    fields, the tensor operands' nodes themselves, equal scalar leaves, equal tree summaries over
    the same leaves (a scalar leaf each made its own)."""
    assert (got.op, got.attrs, got.shape, got.dtype, got.key, got.origin) == \
           (want.op, want.attrs, want.shape, want.dtype, want.key, want.origin)
    assert (got.buffer, got.value) == (None, None) == (want.buffer, want.value) and got.autograd == want.autograd
    assert len(got.inputs) == len(want.inputs)
    scalars = {}
    for g, w in zip(got.inputs, want.inputs):
        if w.op == "scalar":
            assert (g.op, g.dtype, g.key, type(g.value), g.value, g.tree) == (w.op, w.dtype, w.key, type(w.value), w.value, None)
            scalars[id(g)] = w
        else:
            assert g is w
    tg, tw = got.tree, want.tree
    assert (tg is None) == (tw is None)
    if tg is not None:
        assert (tg[0], tg[1], tg[3], tg[4]) == (tw[0], tw[1], tw[3], tw[4])
        assert all(scalars.get(id(p)) is q or p is q for p, q in zip(tg[2][:tg[3]], tw[2][:tw[3]]))


def general_operands() -> dict[str, tuple]:
    """Operand forms of the general branch: pending trees, realized leaves, a stale summary, a
    number first, shared leaves, one operand."""
    x, y = lt.from_numpy(X.copy()), lt.from_numpy(X[::-1].copy())
    p, q = chain(x), y * 2.0 - 1.0
    stale = chain(y)
    lt.eval(chain(x) * 1.0)                      # (the epoch moves on: `stale` has no current tree)
    p, q = chain(x), y * 2.0 - 1.0
    return {"pending + pending": (p, q), "leaf + leaf": (x, y), "pending + leaf": (p, y),
            "leaf + pending": (y, p), "number + pending": (3.0, q), "int + leaf": (2, x),
            "stale + pending": (stale, q), "shared leaf": (p, x), "itself": (p, p),
            "broadcast": (p, lt.from_numpy(np.ones((3, 1), np.float32))), "one pending": (p,), "one leaf": (x,)}


@needs_fast
def test_general_branch_same_nodes_and_values(backend):
    """Tensor-tensor and one-operand calls (`x + y`, `-x`), past their first call, take the C
    general branch: no Python frame, the Python build's nodes, values as numpy's in float64."""
    for case, args in general_operands().items():
        for name, fast in sorted(FAST.items()):
            try:
                fast.__wrapped__(*args)                # (the signature's record)
            except Exception as e:                     # (arity or dtype: the C raises the same)
                with pytest.raises(type(e)) as got:
                    fast(*args)
                assert str(got.value) == str(e), (case, name)
                continue
            python_frames(fast, *args)                 # (this file's frames classified)
            assert fast.__wrapped__.__name__ not in python_frames(fast, *args)[1], (case, name)
            got, want = fast(*args), fast.__wrapped__(*args)      # (one line: one origin)
            same_general(got.node, want.node)
            np.testing.assert_array_equal(got.numpy(), want.numpy(), err_msg=f"{case} {name}")
            f64 = [a.numpy().astype(np.float64) if isinstance(a, lt.Tensor) else a for a in args]
            if name in ("__add__", "__mul__", "__sub__", "__neg__", "__abs__"):
                ref = getattr(operator, name)(*f64)
                np.testing.assert_allclose(got.numpy(), ref, rtol=1e-6, atol=1e-7, err_msg=f"{case} {name}")


@needs_fast
def test_general_branch_trees():
    """Tree summaries (ir/graph.py tree keys): two trees join, a shared leaf makes no tree, one
    operand keeps its leaf list; a sum of many leaves gives one kernel."""
    add = FAST["__add__"]
    x, y = lt.from_numpy(X.copy()), lt.from_numpy(X[::-1].copy())
    for _ in range(2):
        p, q = chain(x), chain(y)
        joined, shared, neg = add(p, q), add(p, chain(x)), FAST["__neg__"](p)
    assert joined.node.tree[3:] == (6, 11)
    assert shared.node.tree is None
    assert neg.node.tree[2] is p.node.tree[2] and neg.node.tree[3:] == (3, 6)
    leaves = [lt.from_numpy(X * k) for k in range(1, 9)]
    total, want = leaves[0], X.astype(np.float64)
    for k, leaf in enumerate(leaves[1:], 2):
        total, want = total + leaf, want + X.astype(np.float64) * k
    assert total.node.tree is not None
    assert [k.kind for k in lt.kernel_plan(total).kernels] == ["kernel"]
    np.testing.assert_allclose(total.numpy(), want, rtol=1e-6)


@needs_fast
def test_general_branch_many_leaves():
    """Two trees of 61 leaves each (near the most pairs the C compares: a joined tree has at most
    MAX_TREE_NODES nodes, so at most 128 leaves): the Python's summary, a leaf shared by the two
    found, and past the limit no summary."""
    add = FAST["__add__"]
    leaves = [lt.from_numpy(np.full(3, k, np.float32)) for k in range(140)]

    def total(part):
        t = part[0] * 1.0
        for leaf in part[1:]:
            t = t + leaf
        return t
    for _ in range(2):
        a, b, c, big = total(leaves[:60]), total(leaves[60:120]), total(leaves[50:110]), total(leaves[:70])
        got, want = add(a, b), add.__wrapped__(a, b)
        overlap, overlap_py = add(a, c), add.__wrapped__(a, c)
        past, past_py = add(big, b), add.__wrapped__(big, b)
    assert a.node.tree[3] == 61 and got.node.tree[3:] == (122, 243)
    for g, w in ((got, want), (overlap, overlap_py), (past, past_py)):
        same_general(g.node, w.node)
    assert overlap.node.tree is None and past.node.tree is None
    np.testing.assert_allclose(got.numpy(), np.full(3, sum(range(120))), rtol=1e-6)
    np.testing.assert_allclose(overlap.numpy(), np.full(3, sum(range(60)) + sum(range(50, 110))), rtol=1e-6)
    np.testing.assert_allclose(past.numpy(), np.full(3, sum(range(70)) + sum(range(60, 120))), rtol=1e-6)


@needs_fast
def test_pointwise_functions_and_methods(backend):
    """A pointwise op's function and method (`lt.sigmoid`, `x.add`) are FastOps standing for the
    Tensor API function (their `__wrapped__`): positional calls build without a Python frame,
    keywords and other argument counts run the function, with its results and errors."""
    x, y = lt.from_numpy(X.copy()), lt.from_numpy(X[::-1].copy())
    p = chain(x)
    x64, y64, p64 = X.astype(np.float64), X[::-1].astype(np.float64), X.astype(np.float64) * 0.5 + 0.25
    sig = 1 / (1 + np.exp(-p64))
    calls = {"lt.sigmoid(p)": (lt.sigmoid, (p,), sig), "p.sigmoid()": (lt.Tensor.sigmoid, (p,), sig),
             "lt.add(p, y)": (lt.add, (p, y), p64 + y64), "x.mul(2.0)": (lt.Tensor.mul, (x, 2.0), x64 * 2.0),
             "lt.maximum(p, y)": (lt.maximum, (p, y), np.maximum(p64, y64)),
             "2.0 - p": (lt.Tensor.__rsub__, (p, 2.0), 2.0 - p64)}
    for case, (fn, args, want) in calls.items():
        for _ in range(2):
            fn(*args)
        got, ran = python_frames(fn, *args)
        if fn is not lt.Tensor.__rsub__:               # (a Python function calling a FastOp)
            assert type(fn).__name__ == "FastOp", case
            assert fn.__wrapped__.__name__ not in ran and "build" not in ran, (case, ran)   # (autograd's track may run)
        np.testing.assert_allclose(got.numpy(), want, rtol=1e-6, atol=1e-7, err_msg=case)
    # keywords, other counts: the Tensor API function itself
    assert lt.add.__wrapped__.__name__ == "add" and inspect.signature(lt.add) == inspect.signature(lt.add.__wrapped__)
    np.testing.assert_allclose(lt.add(p, y, alpha=2).numpy(), p64 + 2 * y64, rtol=1e-6)
    out = lt.empty(7)
    assert lt.sigmoid(p, out=out) is out
    np.testing.assert_allclose(out.numpy(), sig, rtol=1e-6)
    np.testing.assert_allclose(lt.add(input=p, other=y).numpy(), p64 + y64, rtol=1e-6)
    with pytest.raises(TypeError):
        lt.add()
    with pytest.raises(TypeError):
        lt.sigmoid(p, p, p)
    with pytest.raises(RuntimeError, match="cannot be broadcast"):
        lt.add(p, lt.from_numpy(np.ones(4, np.float32)))
    assert lt.sigmoid.__name__ == "sigmoid" and lt.sigmoid.__module__ == "lazytorch.api" and lt.sigmoid.__doc__


@needs_fast
def test_reflected_operators(backend):
    """`2.0 - x` (a reflected dunder) builds sub(2.0, x) in C, operands swapped: the nodes of the
    Python function it stands for, numpy's values; no Python frame past the first call."""
    assert {"__radd__", "__rsub__", "__rmul__", "__rtruediv__"} <= set(REFLECTED)
    x = lt.from_numpy(X.copy())
    p = chain(x)
    p64 = X.astype(np.float64) * 0.5 + 0.25
    for name, fast in sorted(REFLECTED.items()):
        forward = getattr(operator, name.replace("__r", "__", 1))
        for other in (2.0, 3, True, lt.from_numpy(X[::-1].copy())):
            try:
                fast.__wrapped__(p, other)
            except Exception as e:                     # (a dtype the op refuses: the same error)
                with pytest.raises(type(e)) as got:
                    fast(p, other)
                assert str(got.value) == str(e), (name, other)
                continue
            python_frames(fast, p, other)
            assert not {"reflected", "build"} & set(python_frames(fast, p, other)[1]), name
            got, want = fast(p, other), fast.__wrapped__(p, other)      # (one line: one origin)
            same_general(got.node, want.node)
            assert got.node.inputs[1] is p.node
            o64 = other.numpy().astype(np.float64) if isinstance(other, lt.Tensor) else other
            if name in ("__radd__", "__rsub__", "__rmul__", "__rtruediv__"):
                np.testing.assert_allclose(got.numpy(), forward(o64, p64), rtol=1e-6, err_msg=name)
            else:
                np.testing.assert_array_equal(got.numpy(), want.numpy(), err_msg=name)
    with pytest.raises(TypeError):
        REFLECTED["__rsub__"](p)                       # (one operand: the Python function's error)


@needs_fast
def test_general_branch_misses():
    """What the C general branch leaves to the Python: views, subclasses, a leaf with an array
    out, a signature not yet seen, errors (the Python's, unchanged)."""
    add = FAST["__add__"]
    x = lt.from_numpy(np.arange(6, dtype=np.float32).reshape(2, 3))
    p = x * 2.0
    cases = {"a view": (x[0], p), "an expanded view": (p, x[:1].expand(2, 3)),
             "a parameter": (lt.nn.Parameter(lt.from_numpy(np.ones((2, 3), np.float32))), p)}
    for case, args in cases.items():
        for _ in range(2):
            got, ran = python_frames(add, *args)
        assert add.__wrapped__.__name__ in ran, case
        np.testing.assert_array_equal(got.numpy(), add.__wrapped__(*args).numpy(), err_msg=case)
    held = x.numpy()                                   # an array out over x's buffer
    add(x, p)
    got, ran = python_frames(add, x, p)
    assert add.__wrapped__.__name__ in ran
    held[:] = 0.0
    np.testing.assert_allclose(got.numpy(), np.arange(6).reshape(2, 3) * 3.0)
    for _ in range(2):
        with pytest.raises(RuntimeError, match="cannot be broadcast"):
            add(p, lt.from_numpy(np.ones(4, np.float32)))
    with pytest.raises(TypeError):
        add(p, p, p)


@needs_fast
@pytest.mark.parametrize("operand", ["from_numpy", "an eval's result"])
def test_realized_operands(backend, operand):
    """A chain's first op on a realized tensor (a buffer leaf: W7's every call) takes the C branch
    once the leaf's shape has a tree id, with the Python build's node and a summary of two leaves."""
    x = lt.from_numpy(X.copy())
    if operand != "from_numpy":
        x = chain(x)
        lt.eval(x)
    assert x.node.op == "buffer" and x.node.tree is None
    for name, fast in sorted(FAST.items()):
        for number in NUMBERS:
            try:
                fast.__wrapped__(x, number)            # (the leaf's tree id, the op's record)
            except Exception:                          # (a unary op: test_same_nodes_and_values)
                continue
            want = fast.__wrapped__(x, number)
            python_frames(fast, x, number)             # (this file's frames classified)
            got, ran = python_frames(fast, x, number)
            assert fast.__wrapped__.__name__ not in ran, name     # (autograd's track may run)
            same_node(got.node, want.node)
            tree = got.node.tree
            assert tree[0] == EPOCH[0] and tree[3:] == (2, 3) and tree[2][0] is x.node
            np.testing.assert_array_equal(got.numpy(), want.numpy(), err_msg=name)


@needs_fast
def test_realized_operand_with_an_array_out(backend):
    """While an array the user may write through is out over a realized tensor's buffer, its first
    op takes the general route, which builds on a snapshot: a later write to the array does not
    reach the result (host_data.py, "Data going out")."""
    fast = FAST["__mul__"]
    x = lt.from_numpy(X.copy())
    for _ in range(3):
        fast(x, 2.0)                                   # (the leaf's tree id and the op's record)
    out = x.numpy()                                    # an array over x's buffer
    got, ran = python_frames(fast, x, 2.0)
    assert fast.__wrapped__.__name__ in ran
    out[:] = 0.0
    np.testing.assert_allclose(got.numpy(), X.astype(np.float64) * 2.0, rtol=1e-6)
    del out                                            # (no array out: the C branch again)
    python_frames(fast, x, 2.0)
    assert fast.__wrapped__.__name__ not in python_frames(fast, x, 2.0)[1]


@needs_fast
def test_past_the_tree_limit():
    """A chain longer than MAX_TREE_NODES has no summary past it and still computes numpy's value."""
    x = lt.from_numpy(X.copy())
    y, want = x, X.astype(np.float64)
    for _ in range(MAX_TREE_NODES // 2 + 8):
        y = y * 1.0 + 0.001
        want = want * 1.0 + 0.001
    assert y.node.tree is None
    np.testing.assert_allclose(y.numpy(), want, rtol=1e-5)


@needs_fast
def test_autograd_tracks_the_result():
    import torch
    w = lt.from_numpy(X.copy()).requires_grad_()
    y = ((w * 2.0 + 1.0) * 3.0 - 0.5) / 4.0
    assert y.requires_grad
    (y * y).sum().backward()
    tw = torch.tensor(X).requires_grad_()
    ty = ((tw * 2.0 + 1.0) * 3.0 - 0.5) / 4.0
    (ty * ty).sum().backward()
    np.testing.assert_allclose(w.grad.numpy(), tw.grad.numpy(), rtol=1e-5)
    # built under no_grad, a result never requires grad, even when a later op reads it with grad on
    with lt.no_grad():
        y = (w * 2.0 + 1.0) * 3.0
    z = y * y
    assert not y.requires_grad and not z.requires_grad


@needs_fast
def test_results_are_live_and_freed():
    x = lt.from_numpy(X.copy())
    a = chain(x) * 3.0
    assert any(n is a.node for n in live_pending())
    b = a + 1.0
    lt.eval(b)
    assert a.node.realized                        # (a live tensor the eval's program computed)
    np.testing.assert_allclose(a.numpy(), (X.astype(np.float64) * 0.5 + 0.25) * 3.0, rtol=1e-6)
    # no references leak: the results and their nodes go when dropped, the number keeps its count
    value = float("1.2345")
    base = chain(x)
    first = base * value           # its scalar leaf stays in base's shared leaf list (ir/graph.py tree keys)
    count = sys.getrefcount(value)
    refs = []
    for _ in range(200):
        t = base * value
        refs.append((weakref.ref(t), weakref.ref(t.node), weakref.ref(t.node.inputs[1])))
        del t
    gc.collect()
    assert all(r() is None for trio in refs for r in trio)
    assert sys.getrefcount(value) == count and first.node.inputs[1].value is value


# The operand's tree summary dropped while the build runs Python code (an eval on another thread
# realizes the operand: Node.realize sets its `tree` to None): the build goes on with the summary
# it read, as the Python's locals keep it.  Made deterministic here by running the eval from code
# the build itself runs: `chained` (a chain-table miss calls ir/graph.py tree_id), or a collection
# inside one of the build's allocations (a gc callback; Python 3.11 collects there).  In a child
# process: reading a freed summary may crash the interpreter.
DROPPED = """
import gc, numpy as np, lazytorch as lt
from lazytorch.ir import build as B
lt.set_backend("reference")
x = lt.from_numpy(np.arange(5, dtype=np.float32) + 1)
for _ in range(3):
    a = x * 0.5 + 0.25                   # (the third has a current tree summary)
    if WHERE == "gc":
        a * 7.0                          # (a chain record: no `chained` call below)
ran = []
def drop():
    ran.append(1)
    lt.eval(a)                           # realizes a's node: its tree summary goes
if WHERE == "chained":
    tree_id = B.tree_id
    def patched(item):
        B.tree_id = tree_id
        drop()
        return tree_id(item)
    B.tree_id = patched
else:
    def collecting(phase, info):
        if phase == "start" and not ran:
            gc.set_threshold(700)
            drop()
    gc.callbacks.append(collecting)
    gc.set_threshold(1)
y = a * 7.0
gc.set_threshold(700)
tree = y.node.tree
assert ran and y.node.inputs[0] is a.node and tree is not None, (ran, tree)
assert tree[3:] == (4, 7) and tree[2][3] is y.node.inputs[1] and tree[2][0] is x.node, tree
np.testing.assert_allclose(y.numpy(), ((np.arange(5) + 1) * 0.5 + 0.25) * 7.0, rtol=1e-6)
print("ok")
"""


@pytest.mark.parametrize("where", ["chained", pytest.param("gc", marks=pytest.mark.skipif(
    sys.version_info >= (3, 12), reason="from 3.12 a collection runs between bytecodes, never inside the C build"))])
def test_operand_summary_dropped_during_the_build(where):
    proc = subprocess.run([sys.executable, "-X", "faulthandler", "-c", f"WHERE = {where!r}\n" + textwrap.dedent(DROPPED)],
                          capture_output=True, text=True, timeout=240)
    assert proc.returncode == 0 and proc.stdout.strip() == "ok", (proc.returncode, proc.stderr[-3000:])


# The same for the general branch (`a + b`, two pending trees of distinct leaves): a collection
# inside one of its allocations realizes both operands; the build goes on with the summaries it
# read (ir/_fastpath.c tree_operand holds each summary while it allocates).  Which allocation the
# collection lands at depends on the collector's count, so this checks the outcome, not the window.
DROPPED_GENERAL = """
import gc, numpy as np, lazytorch as lt
from lazytorch.ir.node import EPOCH
lt.set_backend("reference")
x, z = lt.from_numpy(np.arange(5, dtype=np.float32) + 1), lt.from_numpy(np.arange(5, dtype=np.float32) + 2)
for _ in range(3):
    a, b = x * 0.5 + 0.25, z * 2.0 - 1.0
    a + b                                # (the signature's record)
ran, junk = [], []
def collecting(phase, info):
    if phase == "start" and not ran:
        ran.append(1)
        gc.set_threshold(700)
        lt.eval(a, b)                    # realizes both operands: their tree summaries go
        # (tuples of a summary's size made now take the memory of freed ones: a summary read
        # after it was freed would read these)
        junk.extend(tuple([EPOCH[0], 0, [], 99, 99]) for _ in range(200))
gc.callbacks.append(collecting)
gc.set_threshold(1)
na, nb = a.node, b.node
y = a + b
gc.set_threshold(700)
tree = y.node.tree
assert ran and y.node.inputs[0] is na and y.node.inputs[1] is nb and na.op == nb.op == "buffer", (ran, y.node.inputs)
assert tree is not None and tree[3:] in ((6, 11), (4, 7)), tree      # (a's summary as read, b's too or its leaf)
x64 = np.arange(5) + 1.0
np.testing.assert_allclose(y.numpy(), (x64 * 0.5 + 0.25) + ((x64 + 1) * 2.0 - 1.0), rtol=1e-6)
print("ok")
"""


@pytest.mark.skipif(sys.version_info >= (3, 12), reason="from 3.12 a collection runs between bytecodes, never inside the C build")
def test_general_branch_operands_realized_during_the_build():
    proc = subprocess.run([sys.executable, "-X", "faulthandler", "-c", textwrap.dedent(DROPPED_GENERAL)],
                          capture_output=True, text=True, timeout=240)
    assert proc.returncode == 0 and proc.stdout.strip() == "ok", (proc.returncode, proc.stderr[-3000:])


def test_methods_introspect_as_the_python_build():
    """help(), inspect and typing see the Tensor's operator methods as the Python build they wrap."""
    for name in ("__mul__", "__add__", "__sub__", "__truediv__"):
        fn = vars(lt.Tensor)[name]
        build = inspect.unwrap(fn)
        assert (fn.__name__, fn.__qualname__) == (name, name)
        assert fn.__module__ == build.__module__ == B.__name__ and inspect.getmodule(fn) is B
        assert inspect.getdoc(fn) == inspect.getdoc(build)
        assert typing.get_type_hints(fn) == typing.get_type_hints(build)


def test_methods_copy_as_functions():
    """copy.copy and copy.deepcopy keep the operator methods as they keep functions (a model or
    config holding `lt.Tensor.__add__` deep-copies); pickle fails on them as on the Python build."""
    ops = {name: vars(lt.Tensor)[name] for name in ("__mul__", "__add__", "__sub__", "__truediv__")}
    assert copy.copy(ops["__mul__"]) is ops["__mul__"]
    copied = copy.deepcopy(ops)
    assert all(copied[name] is fn for name, fn in ops.items())
    with pytest.raises(pickle.PicklingError):
        pickle.dumps(ops["__mul__"])


@needs_fast
def test_signatures_match_the_python():
    """ir/replay.py's signature in C (Signer) returns what the Python returns, on every argument
    form a call can take: the memo key, the tensor argument nodes and the flat arguments."""
    from lazytorch import call_memo
    from lazytorch.ir import replay
    assert type(replay.signature).__name__ == type(call_memo.signature).__name__ == "Signer"
    x = lt.from_numpy(X.copy())
    p, q = x * 2.0, x + 1.0
    m = lt.from_numpy(np.arange(6, dtype=np.float32).reshape(2, 3))
    v, w = m[0], m.t()
    calls = [
        ((x,), {}), ((p, 2.0), {}), ((p, 0.0), {}), ((p, -0.0), {}), ((p, float("nan")), {}), ((p, 3), {}),
        ((p, True), {}), ((p, None), {}), ((p, "mean"), {}), ((p, lt.float32), {}), ((p, (1, 2)), {}),
        ((p, [1, 2]), {}), ((m, lt.Size([3, 2])), {}), ((p, (1, 2.0)), {}), ((p, []), {}), ((p, ()), {}),
        (([p, q],), {}), (([p, p],), {}), ((p, p), {}), ((p, q), {}), ((v, m), {}), ((v, w), {}),
        (([v, w, p],), {}), (((p, (q, x)),), {}), ((p, object()), {}), ((p, np.float64(2.0)), {}),
        ((p,), {"dim": 1, "keepdim": True}), ((p, q), {"alpha": 2.0}), ((), {}), ((p.node, q.node), {}),
        ((lt.tensor(2.0).node,), {}),
    ]
    moved = m.t()
    m.add_(1.0)                                  # (moved's base changed since: its node is re-derived)
    calls += [((moved, p), {}), ((lt.nn.Parameter(x), p), {})]
    # (the Tensor API's Signer reads a Tensor's node from its slots where the property would)
    for signature in (replay.signature, call_memo.signature):
        for args, kwargs in calls:
            got, want = signature(args, kwargs), replay.signature_py(args, kwargs)
            if want is None:
                assert got is None, (args, kwargs)
                continue
            assert got[0] == want[0] and len(got[1]) == len(want[1]), (args, kwargs, got[0], want[0])
            assert all(a is b for a, b in zip(got[1], want[1])) and tuple(got[2]) == tuple(want[2])
        with pytest.raises(TypeError):
            signature([p], {})
    y = lt.from_numpy(X.copy())
    array = y.numpy()                            # (an array out: each read of y.node is a new snapshot)
    got, want = call_memo.signature((y, p), {}), replay.signature_py((y, p), {})
    assert got[0] == want[0] and got[1][0] is not y._node and want[1][0] is not y._node
    del array


@needs_fast
def test_replays_match_the_python(monkeypatch):
    """Recording.replay in C (Replayer) builds what the Python builds: every replay of a small
    GPT block's forward and backward (views, scalar leaves of arguments and of recorded values,
    several results) is made both ways and compared node by node."""
    import sys
    from lazytorch.ir import replay
    assert type(replay.Recording.__dict__["replay"]).__name__ == "Replayer"
    native = replay.Recording.__dict__["replay"]
    seen = []

    def same(a, b, args: set[int]) -> None:
        if id(a) in args or a is b:
            assert a is b
            return
        assert (a.op, a.attrs, a.shape, a.dtype, a.key, a._origin, a.buffer, a.tree, a.autograd) == \
               (b.op, b.attrs, b.shape, b.dtype, b.key, b._origin, b.buffer, b.tree, b.autograd)
        assert a.value is b.value and len(a.inputs) == len(b.inputs)
        for x, y in zip(a.inputs, b.inputs):
            same(x, y, args)

    def both(rec, nodes, flat, site):
        got, want = native(rec, nodes, flat, site), replay.replay_py(rec, nodes, flat, site)
        args = {id(n) for n in nodes} | {id(n.inputs[0]) for n in nodes if n.op == "view"}
        for g, w in zip(got if isinstance(got, tuple) else (got,), want if isinstance(want, tuple) else (want,)):
            same(g, w, args)
        assert type(got) is type(want)
        seen.append(len(rec.steps))
        return got

    monkeypatch.setattr(replay.Recording, "replay", both)
    sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "examples"))
    from gpt_block import block, random_weights
    w = {k: lt.from_numpy(v).requires_grad_() for k, v in random_weights(32).items()}
    x = lt.from_numpy(np.random.default_rng(0).standard_normal((2, 8, 32)).astype(np.float32))
    for _ in range(3):
        loss = block(lt, x, w, 4).square().mean()
        loss.backward()
    assert len(seen) > 50 and max(seen) > 1


@needs_fast
def test_user_sites_match_the_python():
    """ir/node.py's user_site in C (SiteFinder) finds what the Python finds: the first frame
    outside the package, from each depth, through package frames (code compiled with a package
    file name stands in for lazytorch's own), and None past the outermost frame."""
    from lazytorch.ir import node
    assert type(node.user_site).__name__ == "SiteFinder"
    namespace: dict = {"node": node}
    exec(compile("def inner(depth):\n    return node.user_site(depth), node.user_site_py(depth)\n"
                 "def outer(depth):\n    return inner(depth)\n",
                 os.path.join(_PACKAGE, "lazytorch", "_fake_sites.py"), "exec"), namespace)

    def here(depth):
        return namespace["outer"](depth)

    for depth in (1, 2, 3, 4):
        got, want = here(depth)
        assert got == want and got is not None and got[0].co_filename == __file__, depth
    got, want = node.user_site(1), node.user_site_py(1)     # (two calls: their offsets differ, the line not)
    assert node.format_site(got) == node.format_site(want) and got[0] is want[0] is sys._getframe().f_code
    assert node.user_site() == node.user_site_py()                  # (the default depth: the caller's caller)
    deeper = len(inspect.stack(0)) + 5                                # (past the outermost frame: no site)
    assert node.user_site(deeper) is None and node.user_site_py(deeper) is None
    with pytest.raises(TypeError):
        node.user_site(1, 2)


@needs_fast
@pytest.mark.parametrize("shape", [(), (0,), (1,), (2, 3)], ids=str)
def test_chains_of_every_shape(backend, shape):
    """0-d, empty, size-1 and 2-d operands take the C branch like any other (one kernel; numpy's
    values in float64), and a chain over a non-contiguous view's result too."""
    a = np.asarray((np.arange(int(np.prod(shape)), dtype=np.float32).reshape(shape) + 1) / 4)
    cases = [(lt.from_numpy(a.copy()), a.astype(np.float64))]
    if len(shape) == 2:
        cases.append((lt.from_numpy(np.ascontiguousarray(a.T)).t(), a.astype(np.float64)))
    for x, want in cases:
        for _ in range(2):
            y = ((x * 1.5 + 0.5) - 0.25) / 2.0
        assert y.node.tree is not None or x._base is not None
        np.testing.assert_allclose(y.numpy(), ((want * 1.5 + 0.5) - 0.25) / 2.0, rtol=1e-6)
        assert y.shape == lt.Size(shape)


@needs_fast
def test_leaf_args_match_the_python():
    """ir/graph.py's leaf_args in C (LeafArgs): each leaf's buffer or number, for the first n
    leaves (clamped as a slice), objects that are not Nodes read by attribute, and the same
    errors."""
    from types import SimpleNamespace
    from lazytorch.ir import graph
    from lazytorch.ir.node import Node
    assert type(graph.leaf_args).__name__ == "LeafArgs"
    python = graph.leaf_args_py
    x = lt.from_numpy(X.copy())
    for _ in range(2):                   # (the second: the ops' records exist, a tree summary)
        y = x * 2.0 + 1                  # its leaf list holds x's buffer and two numbers
    leaves = list(y._node.tree[2])
    leaves.append(SimpleNamespace(op="buffer", buffer="b", value=None))
    leaves.append(SimpleNamespace(op="scalar", buffer=None, value=3))
    for n in (0, 1, 3, len(leaves), len(leaves) + 4):
        got, want = graph.leaf_args(leaves, n), python(leaves, n)
        assert len(got) == len(want) and all(a is b for a, b in zip(got, want)), n
    assert graph.leaf_args(leaves, 1)[0] is x.node.buffer
    bare = Node.__new__(Node)
    bare.op = "scalar"                   # (no value slot set: both raise AttributeError)
    for fn in (graph.leaf_args, python):
        with pytest.raises(AttributeError):
            fn([bare], 1)
    with pytest.raises(ValueError):
        graph.leaf_args(leaves, -1)
    with pytest.raises(TypeError):
        graph.leaf_args(tuple(leaves), 1)


@needs_fast
def test_alone_taker_matches_the_python():
    """realize.py LiveTensors.alone's common case in C (AloneTaker): where no live tensor but the
    root's holds a pending value, it leaves `fresh` as LiveTensors._take leaves it (one reference
    per live tensor holding the root) and answers True; where another is pending, or an entry is
    not a reference to a tensor, it answers None and changes nothing, and the Python decides."""
    from lazytorch.realize import LIVE, LiveTensors
    take = LIVE.take_alone
    assert type(take).__name__ == "AloneTaker"
    x = lt.from_numpy(X.copy())

    def fresh_after(entries: list, root) -> tuple[object, list, list]:
        """(the C's answer, fresh after it, fresh after the Python's _take) from the same list."""
        mine, python = list(entries), LiveTensors()
        python.fresh = list(entries)
        answer = take(mine, root)
        others = python._take({id(root)})
        return answer, mine, (python.fresh if not others else None)

    y = (x * 2.0 + 1.0) * 3.0            # its intermediates dead, x realized, y twice
    dead = [weakref.ref(t) for t in [x * 1.0 for _ in range(3)]]
    entries = dead + [weakref.ref(x), weakref.ref(y), weakref.ref(y)]
    answer, mine, python = fresh_after(entries, y._node)
    assert answer is True and mine == python == [weakref.ref(y)]
    lt.eval(y)
    z = y * 2.0
    assert fresh_after([weakref.ref(z)], z._node)[:2] == (True, [weakref.ref(z)])
    assert fresh_after([], z._node)[:2] == (True, [])
    # root None: whether nothing is pending at all (LiveTensors.reads), fresh tidied the same way
    assert fresh_after([weakref.ref(y), weakref.ref(x)] + dead, None)[:2] == (True, [])
    assert fresh_after([weakref.ref(z)], None)[:2] == (None, [weakref.ref(z)])

    other = y - 1.0                      # another pending tensor: the Python's case
    entries = [weakref.ref(z), weakref.ref(other)]
    answer, mine, python = fresh_after(entries, z._node)
    assert answer is None and mine == entries and python is None
    odd = [weakref.ref(z), "not a reference", weakref.ref(lt.Tensor)]
    for bad in (odd[:2], [odd[0], odd[2]]):
        got = list(bad)
        assert take(got, z._node) is None and got == bad
    with pytest.raises(TypeError):
        take(tuple(entries), z._node)

    # the eval: a chain with nothing else pending runs alone, with another pending tensor syncs it
    w = z + 1.0
    keep = (w * 2.0).exp()
    np.testing.assert_allclose(keep.numpy(), np.exp((X.astype(np.float64) * 6 + 3) * 2 * 2 + 2), rtol=1e-5)
    assert w._node.op == "buffer"        # (stored with the eval: it read the same pending nodes)
    np.testing.assert_allclose(other.numpy(), X.astype(np.float64) * 6 + 2, rtol=1e-6)


def same_program(roots, *, python_roots=None) -> object:
    """ir/graph.py's program in C against program_py over the same roots: the same node objects
    in the same order, equal keys entry by entry, the same leaves.  The C's result."""
    from lazytorch.ir import graph
    got = graph.program(roots)
    want = graph.program_py(python_roots if python_roots is not None else roots)
    assert type(got) is graph.Program
    assert len(got.order) == len(want.order) and all(a is b for a, b in zip(got.order, want.order))
    assert len(got.key) == len(want.key) and all(a == b for a, b in zip(got.key, want.key))
    assert got.key == want.key
    assert len(got.leaves) == len(want.leaves) and all(a is b for a, b in zip(got.leaves, want.leaves))
    return got


@needs_fast
def test_programs_match_the_python():
    """ir/graph.py's program in C (ProgramMaker) on programs the Tensor API builds: chains, shared
    subexpressions (a DAG: each node once, its readers naming its one position), several and
    repeated roots, views, reductions, runtime scalars and structural constants (a constant is
    in the order and the key, not a leaf), a realized root, roots given as any iterable."""
    from lazytorch.ir import graph
    assert graph.program_py is not graph.program
    x = lt.from_numpy(np.arange(12, dtype=np.float32).reshape(3, 4) / 8)
    v = lt.from_numpy(X.copy())
    y = x * 2
    z = y + y.exp()                                     # y read twice, once through exp
    chain_ = ((v * 2.0 + 1.0).exp() - v) / 3.0
    views = x.t().reshape(2, 6)[1:, ::2] + x.reshape(12)[:3].sum()
    reductions = (z.sum(0) * z.mean(1).max()).softmax(-1)
    constants = (lt.zeros(3, 4) + x).tril() * lt.full((3, 4), 2.5)
    both = lt.where(x > 1.0, x, 0.0).clamp(min=0.5)
    for roots in ([z], [chain_], [views], [reductions], [constants], [both], [z, y, z], [x], [x, x],
                  [x, z], [z, x, chain_, both, views], [v, chain_, v]):
        nodes = [t.node for t in roots]
        prog = same_program(nodes)
        assert prog.key[-1] == ("roots", tuple(prog.order.index(n) for n in nodes))
    prog = same_program([constants.node])
    shown = [n for n in prog.order if n.op == "scalar" and n.attrs]
    assert shown and not any(n in prog.leaves for n in shown)       # (constants: keyed, no input)
    assert [n.op for n in prog.leaves] == ["buffer", "scalar"]          # (x, and full's 2.5)
    prog = same_program([z.node])
    assert len(prog.order) == 5 and prog.leaves == [x.node, y.node.inputs[1]]
    # any iterable of roots: a generator, a tuple, a dict's keys
    assert same_program((n for n in [z.node, v.node]), python_roots=[z.node, v.node]).key \
        == same_program((z.node, v.node)).key == graph.program(dict.fromkeys([z.node, v.node])).key
    assert same_program([]) == ([], (("roots", ()),), [])


@pytest.mark.parametrize("walk", ["program", "program_py"])
def test_a_program_goes_on_from_its_first_roots(walk):
    """program(roots + more, program(roots)) is program(roots + more): the walk goes on from the
    first roots' program (an eval's program grown by the live values it syncs) with the same
    order, key and leaves, whether `more` shares nodes with it, lies inside it, is a leaf or
    stands apart; the first roots' program is left as it was.  Anything but a Program as prefix
    raises."""
    from lazytorch.ir import graph
    program = getattr(graph, walk)
    x = lt.from_numpy(np.arange(12, dtype=np.float32).reshape(3, 4) / 8)
    w = lt.from_numpy(X.copy())
    y = (x * 2).exp()
    z = y.sum(0) + 1.0
    shares = y * 3.0 + x                                 # reads y, which z's program holds
    inside = x * 2                                       # (built again: its own node, equal structure)
    apart = (w + 1.0).tanh()
    for first, more in (([z], [shares]), ([z], [y]), ([z], [shares, apart, x]), ([z, shares], [apart]),
                        ([z], [inside, shares]), ([z], [])):
        roots, extra = [t.node for t in first], [t.node for t in more]
        start = program(roots)
        kept = (list(start.order), start.key, list(start.leaves))
        grown, whole = program(roots + extra, start), program(roots + extra)
        assert len(grown.order) == len(whole.order) and all(a is b for a, b in zip(grown.order, whole.order))
        assert grown.key == whole.key
        assert len(grown.leaves) == len(whole.leaves) and all(a is b for a, b in zip(grown.leaves, whole.leaves))
        assert (start.order, start.key, start.leaves) == kept
    if walk == "program" and graph.program is not graph.program_py:
        with pytest.raises(TypeError, match="prefix must be a Program"):
            program([z.node], (1, 2, 3))


def as_dict(positions) -> dict[int, int]:
    """A Positions (the C's `inside` or memo) as the Python's dict, every key checked both ways."""
    got = dict(positions.items())
    assert len(got) == len(positions)
    assert all(k in positions and positions[k] == v == positions.get(k) for k, v in got.items())
    return got


@needs_fast
def test_pending_positions_as_the_python():
    """ir/graph.py's pending_positions in C (ProgramMaker.pending_positions): a Positions holding
    the position of each of the program's nodes that are no leaves -- not its buffers, runtime
    scalars or constants, but an inputless creation op -- looked up by id as the Python's dict
    (`in`, `[]`, `get`, `len`, `items`); keys that are no node's id are absent; anything but a
    list of nodes raises."""
    from lazytorch.ir import graph
    x = lt.from_numpy(np.arange(12, dtype=np.float32).reshape(3, 4))
    y = ((x * 2.5).exp() + lt.zeros(3, 4)).tril().sum(0) + 1.0
    order = graph.program([y.node]).order
    got = graph.pending_positions(order)
    want = graph.pending_positions_py(order)
    assert type(got).__name__ == "Positions" and as_dict(got) == want
    assert {order[i].op for i in want.values()} >= {"iota", "mul", "exp", "add", "where", "sum"}   # (tril: iota, where)
    assert not any(order[i].op in ("buffer", "scalar") for i in want.values())
    assert id(x.node) not in got and got.get(id(x.node)) is None and got.get(id(x.node), -7) == -7
    with pytest.raises(KeyError):
        got[id(x.node)]
    for odd in ("a", None, 1.5, 0, -1, 2 ** 80, True):
        assert odd not in got and got.get(odd) is None
    assert list(filter(got.__contains__, [id(x.node), id(y.node), "a"])) == [id(y.node)]
    empty = graph.pending_positions([])
    assert len(empty) == 0 and empty.items() == [] and len(graph.reach_memo()) == 0
    with pytest.raises(TypeError, match="pending_positions"):
        graph.pending_positions(tuple(order))
    with pytest.raises(TypeError, match="pending_positions"):
        graph.pending_positions([1, 2])
    with pytest.raises(TypeError, match="no arguments"):
        type(got)(order)


@needs_fast
def test_positions_hold_their_nodes():
    """A Positions holds each node it has a position for (so no id in it can name another object
    while it lives) and nothing after it goes, with the collector's traversal seeing them;
    building one, walking with a memo and failing leave the traced memory flat."""
    from lazytorch.ir import graph
    x = lt.from_numpy(X.copy())
    z = (x * 2.0).exp() + 1.0
    ref = weakref.ref(z.node)
    order = graph.program([z.node]).order
    inside = graph.pending_positions(order)
    memo = graph.reach_memo()
    w = z * 3.0
    assert graph.reaches(w.node, graph.pending_positions([]), memo) == -1 and id(w.node) in memo
    wref = weakref.ref(w.node)
    del z, order, w
    gc.collect()
    assert ref() is not None and wref() is not None
    assert any(n is ref() for n in gc.get_referents(inside)) and any(n is wref() for n in gc.get_referents(memo))
    del inside, memo
    gc.collect()
    assert ref() is None and wref() is None

    y = (x * 2.0).exp() + x
    roots = [(y * 3.0).sin().node, y.node]
    order = graph.program(roots).order

    def calls():
        for _ in range(2000):
            inside, memo = graph.pending_positions(order), graph.reach_memo()
            [graph.reaches(n, inside, memo) for n in roots]
            with pytest.raises(TypeError):
                graph.pending_positions(order + [1])
    assert_memory_flat(calls)


@needs_fast
def test_program_keys_nodes_as_the_python():
    """`node._key or node.key`: the slot as it is, the property only where it is falsy (a node
    built without a key gets one, as the Python gives it); an inputless non-leaf (a creation op)
    is placed at once with no position entry; a param is a leaf."""
    from lazytorch.ir import graph
    from lazytorch.ir import dtypes as D
    from lazytorch.ir.node import Node

    def fresh():
        a = Node("buffer", (), {}, (3,), D.float32)
        fill = Node("full", (), {"value": 1.0}, (3,), D.float32)
        p = Node("param", (), {"index": 0}, (3,), D.float32)
        k = Node.constant(2, D.int64)
        s = Node.scalar(1.5, D.float64)
        m = Node("mul", (a, fill), {}, (3,), D.float32)
        out = Node("add", (m, p, k, s, m), {"alpha": 1.0}, (3,), D.float32)
        return out, (a, fill, p, k, m, out)

    mine, unkeyed = fresh()
    theirs, _ = fresh()
    assert all(n._key is None for n in unkeyed)
    got, want = graph.program([mine]), graph.program_py([theirs])
    assert got.key == want.key and all(n._key == n.key for n in unkeyed)
    assert [n.op for n in got.leaves] == ["buffer", "param", "scalar"]
    odd = Node("buffer", (), {}, (3,), D.float32)
    odd._key = ()                                        # (falsy: the property, which returns it)
    assert graph.program([odd]).key == graph.program_py([odd]).key == ((), ("roots", (0,)))


@needs_fast
def test_program_of_a_long_chain():
    """A 100,000-op chain built lazily (200,001 nodes, each op's number a leaf): no recursion in
    the C walk, the same result as the Python's."""
    x = lt.from_numpy(X.copy())
    y = x
    for i in range(100_000):
        y = y * 1.0001 if i % 2 else y + 0.5
    prog = same_program([y.node])
    assert len(prog.order) == 200_001 and len(prog.leaves) == 100_001 and prog.order[-1] is y.node


@needs_fast
def test_program_errors():
    """What the walk cannot take raises, never crashes: an input or root that is not a Node (a
    TypeError where the Python's attribute read raises AttributeError), inputs that are not a
    tuple, an unset slot (the Python's AttributeError), a cycle (the Python never ends), a bad
    call."""
    from lazytorch.ir import graph
    from lazytorch.ir import dtypes as D
    from lazytorch.ir.node import Node
    x = lt.from_numpy(X.copy())
    with pytest.raises(TypeError, match="an input is a int object, not a Node"):
        graph.program([Node("add", (x.node, 3), {}, (7,), D.float32)])
    with pytest.raises(TypeError, match="a root is a Tensor object, not a Node"):
        graph.program([x])
    with pytest.raises(TypeError, match="not a tuple"):
        graph.program([Node("add", [x.node], {}, (7,), D.float32)])
    bare = Node.__new__(Node)
    bare.inputs = ()                                     # (no _key slot set)
    for fn in (graph.program, graph.program_py):
        with pytest.raises(AttributeError):
            fn([bare])
    a = Node("neg", (x.node,), {}, (7,), D.float32)
    b = Node("neg", (a,), {}, (7,), D.float32)
    a.inputs = (x.node, b)
    with pytest.raises(ValueError, match="cycle"):
        graph.program([b])
    a.inputs = (x.node,)
    assert same_program([b]).key[-1] == ("roots", (2,))
    for args in ((), ([b], [b])):
        with pytest.raises(TypeError):
            graph.program(*args)
    with pytest.raises(TypeError):
        graph.program(5)


def assert_memory_flat(calls) -> None:
    """`calls()` run again after a first run leaves the traced memory flat (what a C walk
    allocated or referenced went with its result, or with its error)."""
    import tracemalloc
    calls()
    gc.collect()
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        calls()
        gc.collect()
        grown = tracemalloc.get_traced_memory()[0] - before
    finally:
        tracemalloc.stop()
    assert grown < 10_000, grown


@needs_fast
def test_program_holds_nothing():
    """The walk's references go with its result: a node lives while the result holds it and not
    after, and repeated calls (and failing ones) leave the traced memory flat."""
    from lazytorch.ir import graph
    from lazytorch.ir import dtypes as D
    from lazytorch.ir.node import Node
    x = lt.from_numpy(X.copy())
    z = x
    for i in range(60):
        z = (z * 2.0 + z.exp()) if i % 7 == 0 else z + 1.0
    ref = weakref.ref(z.node)
    prog = graph.program([z.node])
    del z
    gc.collect()
    assert ref() is prog.order[-1]
    del prog
    gc.collect()
    assert ref() is None
    y = (x * 2.0).exp() + x
    bad = Node("add", (y.node, 3), {}, (7,), D.float32)
    roots = [y.node]

    def calls():
        for _ in range(5000):
            graph.program(roots)
            with pytest.raises(TypeError):
                graph.program([y.node, bad])
    assert_memory_flat(calls)


REALIZED_MIDWALK = """
import gc
import numpy as np
import lazytorch as lt
from lazytorch.ir import graph
lt.set_backend("reference")
x = lt.from_numpy(np.arange(5, dtype=np.float32) + 1)
ts = [x]
for i in range(60):
    ts.append((ts[-1] * 1.5).exp() - ts[-1] if i % 3 == 0 else ts[-1] * 0.5 + 0.25)
calls = []
def collecting(phase, info):
    if phase == "start":
        calls.append(1)
        if len(calls) == 6:              # (past the walk's first allocations: it is under way)
            lt.eval(ts[20])              # realizes the chain the walk is in (synced: all of it)
drain = [(i,) for i in range(3000)] + [(i, i) for i in range(3000)]   # (tuples not from free lists:
gc.callbacks.append(collecting)                                         # each counts to a collection)
gc.set_threshold(1)
prog = graph.program([ts[-1].node])
gc.set_threshold(700)
gc.callbacks.remove(collecting)
# nodes realized while on the walk's stack: placed with their buffer key and no input positions
cut = [i for i, k in enumerate(prog.key[:-1]) if k == () and prog.key[i - 1][0] == "buffer"]
assert len(calls) > 6 and ts[-1].node.op == "buffer" and cut, (len(calls), prog.key)
assert len(prog.order) == len(set(map(id, prog.order))) and prog.key[-1][0] == "roots"
assert graph.program([ts[-1].node]).key == graph.program_py([ts[-1].node]).key
print("ok")
"""


@pytest.mark.skipif(sys.version_info >= (3, 12), reason="from 3.12 a collection runs between bytecodes only")
def test_program_survives_a_realize_during_the_walk():
    """A collection inside the walk's allocations may run Python code that realizes a node the
    walk is under (its inputs tuple dropped): the walk holds what it iterates, so it ends with a
    program, without a crash."""
    proc = subprocess.run([sys.executable, "-X", "faulthandler", "-c", textwrap.dedent(REALIZED_MIDWALK)],
                          capture_output=True, text=True, timeout=240)
    assert proc.returncode == 0 and proc.stdout.strip() == "ok", (proc.returncode, proc.stderr[-3000:])


def test_program_is_the_c_one_where_built():
    """ir/graph.py's `program` is the C ProgramMaker where the extension is loaded (and every
    caller imported that one), the Python function with LAZYTORCH_NATIVE=0."""
    from lazytorch.ir import graph
    users = [sys.modules[name].program for name in ("lazytorch.realize", "lazytorch.compile")]
    if NATIVE is None:
        assert graph.program is graph.program_py
    else:
        assert type(graph.program).__name__ == "ProgramMaker" and all(fn is graph.program for fn in users)
    assert graph.program_py.__module__ == graph.__name__ and graph.program_py.__name__ == "program"
    code = "from lazytorch.ir import graph; print(graph.program is graph.program_py)"
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=240,
                          env={**os.environ, "LAZYTORCH_NATIVE": "0"})
    assert proc.returncode == 0 and proc.stdout.strip() == "True", proc.stderr[-3000:]


# ---------------------------------------------------------------- the Tensor API's replayed calls
# (ir/_fastpath.c ApiCall: call_memo.py CallMemo.replay in C for ops without a pointwise build)

F = lt.nn.functional
API_CALLS = {name: fn for name, fn in vars(lt.Tensor).items() if type(fn).__name__ == "ApiCall"}


def python_replays(monkeypatch) -> list:
    """The ops whose calls call_memo.py's Python replay takes from now on: a call the C replay
    took never reaches it (a call it leaves goes to the Python function, which replays there)."""
    from lazytorch import call_memo
    seen: list = []
    namespace = {"seen": seen, "replay": call_memo.CallMemo.replay}
    # (compiled as a package file: the replay's nodes name the user's line, not this wrapper's)
    exec(compile("def counted(self, *args):\n    seen.append(self.op.name if self.op is not None else '[]')\n"
                 "    return replay(self, *args)\n", os.path.join(_PACKAGE, "lazytorch", "_counted.py"), "exec"),
         namespace)
    monkeypatch.setattr(call_memo.CallMemo, "replay", namespace["counted"])
    return seen


def same_nodes(a, b, args: set[int]) -> None:
    """Nodes the two replays made over the same argument nodes (`args`: their ids)."""
    if id(a) in args or a is b:
        assert a is b
        return
    assert (a.op, a.attrs, a.shape, a.dtype, a.key, a.buffer, a.value, a.tree) == \
           (b.op, b.attrs, b.shape, b.dtype, b.key, b.buffer, b.value, b.tree)
    assert (a._origin is None) == (b._origin is None) and (a._origin is None or a.origin == b.origin)
    assert len(a.inputs) == len(b.inputs)
    for x, y in zip(a.inputs, b.inputs):
        same_nodes(x, y, args)


def same_results(got, want, args: tuple) -> None:
    """A C replay's result against the Python's on the same arguments: the same classes, aliasing
    (base, view spec, versions), autograd state and nodes."""
    assert type(got) is type(want)
    if isinstance(want, tuple):
        assert len(got) == len(want)
        for g, w in zip(got, want):
            same_results(g, w, args)
        return
    if any(want is a for a in args):                           # (a call returning its argument)
        assert got is want
        return
    assert got._base is want._base and got._spec == want._spec
    assert (got._base_version, got._version, got.requires_grad) == (want._base_version, want._version, want.requires_grad)
    tensors = [a for a in args if isinstance(a, lt.Tensor)]
    ids = {id(t.node) for t in tensors} | {id(t.node.inputs[0]) for t in tensors if t.node.op == "view"}
    same_nodes(got._node, want._node, ids)


def api_cases() -> dict[str, tuple]:
    """(function, args, kwargs) of ApiCall's forms: ops of several arguments, keywords, views of
    roots, of views and of pending tensors, copies where a view can't be, tuple and named-tuple
    results, a call returning its argument, a Parameter argument."""
    rng = np.random.default_rng(5)
    m = lt.from_numpy(rng.standard_normal((2, 3)).astype(np.float32))
    w, b = (lt.from_numpy(rng.standard_normal(s).astype(np.float32)) for s in ((4, 3), (4,)))
    m3 = lt.from_numpy(rng.standard_normal((2, 3, 4)).astype(np.float32))
    p = m * 2.0 + 1.0
    return {
        "linear": (F.linear, (p, w, b), {}),
        "linear, a Parameter": (F.linear, (p, lt.nn.Parameter(w)), {}),
        "matmul of a view": (lt.matmul, (p, w.t()), {}),
        "softmax(dim=)": (lt.softmax, (p,), {"dim": -1}),
        "sum(keepdim=)": (lt.Tensor.sum, (p, 1), {"keepdim": True}),
        "layer_norm": (F.layer_norm, (p, (3,), b[:3], b[1:], 1e-5), {}),
        "view": (lt.Tensor.view, (m, 3, 2), {}),
        "view, same shape": (lt.Tensor.view, (m, 2, 3), {}),
        "view of a pending": (lt.Tensor.view, (p, 6), {}),
        "transpose of a view": (lt.Tensor.transpose, (m3.permute(2, 0, 1), 0, 1), {}),
        "transpose back to the root": (lt.Tensor.transpose, (m.t(), 0, 1), {}),
        "reshape that copies": (lt.Tensor.reshape, (m.t(), 6), {}),
        "permute": (lt.Tensor.permute, (p, 1, 0), {}),
        "split": (lt.Tensor.split, (m, 1), {}),
        "max(dim=)": (lt.max, (p,), {"dim": 1}),
        "float() of a float32": (lt.Tensor.float, (m,), {}),
    }


# (views that return their argument's root node: no recording, every call is the Python's)
UNRECORDED = {"view, same shape", "transpose back to the root"}


@needs_fast
@no_check_mode
def test_api_calls_replay_as_the_python(backend, monkeypatch):
    """A Tensor API call of a non-pointwise op whose signature the memo knows takes the C replay
    (call_memo.py's Python replay never runs) and returns what the Python function returns on the
    same arguments: the same nodes and origins, aliasing and values."""
    assert {"view", "transpose", "reshape", "sum"} <= set(API_CALLS)
    cases = api_cases()
    seen = python_replays(monkeypatch)
    for case, (fn, args, kwargs) in cases.items():
        assert type(fn).__name__ == "ApiCall", case
        fn.__wrapped__(*args, **kwargs)                        # (learned: the memo's recording)
        outs, took = [], []
        for f in (fn, fn.__wrapped__):                         # (one line: the same origins)
            before = len(seen)
            outs.append(f(*args, **kwargs))
            took.append(len(seen) - before)
        assert took == ([1, 1] if case in UNRECORDED else [0, 1]), case
        same_results(*outs, args)
        flat = [outs[0]] if isinstance(outs[0], lt.Tensor) else list(outs[0])
        for g, w in zip(flat, [outs[1]] if isinstance(outs[1], lt.Tensor) else list(outs[1])):
            np.testing.assert_array_equal(g.numpy(), w.numpy(), err_msg=case)
    m = lt.from_numpy(np.arange(6, dtype=np.float32).reshape(2, 3))
    y = F.linear(m.t().transpose(0, 1), lt.ones(2, 3), lt.ones(2))      # (values: numpy's, in float64)
    np.testing.assert_allclose(y.numpy(), np.arange(6.0).reshape(2, 3) @ np.ones((3, 2)) + 1.0)


@needs_fast
def test_api_calls_the_python_function_runs(monkeypatch):
    """Calls the C replay leaves to the Python function: `out=` (which assigns), a signature not
    yet seen (its errors are the general route's)."""
    seen = python_replays(monkeypatch)
    a = lt.from_numpy(np.ones((2, 3), np.float32))
    b = lt.from_numpy(np.ones((3, 2), np.float32))
    lt.matmul(a, b)
    out = lt.empty(2, 2)
    assert lt.matmul(a, b, out=out) is out
    np.testing.assert_array_equal(out.numpy(), np.full((2, 2), 3.0))
    before = len(seen)
    lt.matmul(b, a)                                            # (new: the Python replay misses, and learns)
    assert len(seen) == before + 1
    with pytest.raises(RuntimeError, match="mat1 and mat2 shapes cannot be multiplied|cannot be multiplied"):
        lt.matmul(a, a)
    with pytest.raises(RuntimeError):
        lt.matmul(a, a)                                        # (errors are never recorded)


@needs_fast
@no_check_mode
def test_api_calls_read_views_and_shared_data_as_the_python(monkeypatch):
    """Arguments whose `node` property does more than return the slot: a view whose base was
    updated in place since (its node is re-derived), a tensor with a NumPy array out to the user
    (the result reads a snapshot); results as the Python function's."""
    m = lt.from_numpy(np.arange(6, dtype=np.float32).reshape(2, 3))
    w = lt.from_numpy(np.ones((4, 3), np.float32))
    v = m.t()
    for _ in range(2):
        v.transpose(0, 1), F.linear(m, w)
    m.add_(1.0)                                                # (v's base moved on)
    outs = [f(v, 0, 1) for f in (API_CALLS["transpose"], API_CALLS["transpose"].__wrapped__)]
    same_results(*outs, (v,))
    np.testing.assert_array_equal(outs[0].numpy(), np.arange(6.0).reshape(2, 3) + 1.0)
    array = m.numpy()                                          # (an array out over m's data)
    outs = [f(m, w) for f in (F.linear, F.linear.__wrapped__)]
    array[0, 0] = 100.0                                        # (after the build: neither result sees it)
    for out in outs:
        np.testing.assert_array_equal(out.numpy(), (np.arange(6.0).reshape(2, 3) + 1.0) @ np.ones((3, 4)))


@needs_fast
def test_api_calls_track_autograd():
    """Replayed results of tensors that require grad require grad, views included; gradients
    through them are torch's."""
    import torch
    rng = np.random.default_rng(2)
    xs, ws = rng.standard_normal((5, 3)).astype(np.float32), rng.standard_normal((4, 3)).astype(np.float32)
    grads = []
    for _ in range(3):                                         # (the last two: replays)
        w = lt.from_numpy(ws.copy()).requires_grad_()
        y = F.linear(lt.from_numpy(xs), w).view(5, 2, 2).transpose(1, 2)
        assert y.requires_grad and y._base is not None
        (y * y).sum().backward()
        grads.append(w.grad.numpy())
    tw = torch.tensor(ws).requires_grad_()
    ty = torch.nn.functional.linear(torch.tensor(xs), tw).view(5, 2, 2).transpose(1, 2)
    (ty * ty).sum().backward()
    for g in grads:
        np.testing.assert_allclose(g, tw.grad.numpy(), rtol=1e-5, atol=1e-5)


@needs_fast
def test_api_call_results_are_live_and_freed():
    """A replayed non-view result is a live pending tensor, a view result is not (its root is);
    nothing the calls made outlives them."""
    m = lt.from_numpy(np.ones((2, 3), np.float32))
    w = lt.from_numpy(np.ones((4, 3), np.float32))
    for _ in range(2):
        F.linear(m, w), m.view(3, 2)
    y, v = F.linear(m, w), m.view(3, 2)
    assert any(n is y.node for n in live_pending()) and not any(n is v.node for n in live_pending())
    del y, v
    refs = []
    for _ in range(200):
        y, v = F.linear(m, w), m.view(3, 2)
        refs.append((weakref.ref(y), weakref.ref(y.node), weakref.ref(v), weakref.ref(v.node)))
        del y, v
    gc.collect()
    assert all(r() is None for four in refs for r in four)


def test_api_calls_introspect_as_the_python_function():
    """The C stand-ins keep the Python function's name, docs and signature (its __wrapped__), and
    copy as functions do."""
    for fn in (F.linear, lt.Tensor.view, lt.matmul):
        python = inspect.unwrap(fn)
        assert fn.__name__ == python.__name__ and inspect.getdoc(fn) == inspect.getdoc(python)
        assert inspect.signature(fn) == inspect.signature(python)
        assert copy.deepcopy(fn) is fn
    if NATIVE is None:
        assert all(type(fn).__name__ == "function" for fn in (F.linear, lt.Tensor.view, lt.matmul))


def reaches_both(roots, order, apart=None) -> list[int]:
    """reaches over `roots` in C and in Python, each with one memo shared across the roots as an
    eval shares it (then once more, answered from the memo): the same positions and the same
    memo.  The positions."""
    from lazytorch.ir import graph
    inside, c_memo = graph.pending_positions(order), graph.reach_memo()
    py_inside, py_memo = graph.pending_positions_py(order), graph.reach_memo_py()
    got = [graph.reaches(n, inside, c_memo, apart) for n in roots]
    want = [graph.reaches_py(n, py_inside, py_memo, apart) for n in roots]
    assert got == want and as_dict(c_memo) == py_memo
    assert [graph.reaches(n, inside, c_memo, apart) for n in roots] == want and as_dict(c_memo) == py_memo
    return got


@needs_fast
def test_reaches_as_the_python():
    """ir/graph.py's reaches in C (ProgramMaker.reaches): for live values around a program
    (inside it, reading it through shared and unshared chains, unrelated, reaching it only through
    a leaf, a leaf, a node listed twice), the same positions and the same memo as the Python, one
    memo shared across roots as an eval shares it; deep chains past the C stack's first size;
    `apart` (nodes known not to read the program: not walked below, memoised -1) as the Python's,
    its error passed on; a wrong argument raises."""
    from lazytorch.ir import graph
    x = lt.from_numpy(np.arange(12, dtype=np.float32).reshape(3, 4))
    a = (x * 2.0).exp()
    b = a.sum(0) + 1.0
    order = graph.program([b.node]).order
    inside = graph.pending_positions(order)
    deep = a
    for _ in range(300):
        deep = deep * 1.001
    shared = (a + 3.0).sin()
    apart_chain = (x + 1.0).log()
    for _ in range(100):
        apart_chain = apart_chain * 0.5
    live = [b, a * 4.0, shared.cos(), shared.tanh(), (x + 1.0).log(), deep, lt.ones(2) * 3.0, x, shared.cos(),
            apart_chain + 2.0, deep]
    got = reaches_both([t.node for t in live], order)
    assert got[0] == inside[id(b.node)] and got[1] == got[5] == inside[id(a.node)] and got[4] == got[6] == -1
    assert got[7] == -1 and got[9] == -1

    # apart: the chain below apart_chain is not walked (a Positions of 3, not ~100), answers alike
    stop = apart_chain.node
    tests = [lambda n: n is stop, lambda n: False, lambda n: n is stop or n is shared.node]
    for test in tests:
        reaches_both([t.node for t in live], order, test)
    memo = graph.reach_memo()
    assert graph.reaches((apart_chain + 2.0).node, inside, memo, tests[0]) == -1 and len(memo) == 2
    # (a test that lies is believed: shared is read through a, inside, but not walked)
    assert graph.reaches(shared.cos().node, inside, graph.reach_memo(), tests[2]) == -1

    def failing(n):
        raise ValueError("apart failed")
    for walk, memo in ((graph.reaches, graph.reach_memo()), (graph.reaches_py, {})):
        with pytest.raises(ValueError, match="apart failed"):
            walk(live[9].node, inside if walk is graph.reaches else graph.pending_positions_py(order), memo, failing)
    with pytest.raises(TypeError, match="reaches"):
        graph.reaches(b.node, inside)
    with pytest.raises(TypeError, match="reaches"):
        graph.reaches(1, inside, graph.reach_memo())
    with pytest.raises(TypeError, match="reaches"):
        graph.reaches(b.node, graph.pending_positions_py(order), graph.reach_memo())     # (a dict)
    with pytest.raises(TypeError, match="reaches"):
        graph.reaches(b.node, inside, {})
    with pytest.raises(TypeError, match="reaches"):
        graph.reaches(b.node, inside, graph.reach_memo(), 3)


@needs_fast
def test_reaches_on_a_training_step():
    """reaches in C and in Python on a real eval's graph: a small conv net with BatchNorm after
    forward and backward, the program of its loss and gradients against every live pending
    tensor (running statistics, counters, parameters' pending values): the same positions and
    memo, with and without an `apart` test."""
    from lazytorch.ir import graph
    net = lt.nn.Sequential(lt.nn.Conv2d(3, 4, 3, padding=1), lt.nn.BatchNorm2d(4), lt.nn.ReLU(),
                           lt.nn.Conv2d(4, 4, 3), lt.nn.BatchNorm2d(4), lt.nn.Flatten(), lt.nn.Linear(4 * 4 * 4, 5))
    net.train()
    rng = np.random.default_rng(0)
    x = lt.from_numpy(rng.standard_normal((2, 3, 6, 6)).astype(np.float32))
    target = lt.from_numpy(np.array([1, 3]))
    for _ in range(2):
        loss = lt.nn.functional.cross_entropy(net(x), target)
        loss.backward()
    unrelated = lt.ones(3) + 1                    # a live pending value the program does not read  # noqa: F841
    roots = [loss.node] + [p.grad.node for p in net.parameters() if p.grad.node.op != "buffer"]
    order = graph.program(roots).order
    live = [n for n in live_pending() if n.op != "buffer"]
    assert len(order) > 100 and len(live) > 10
    got = reaches_both(live, order)
    assert any(g >= 0 for g in got) and any(g < 0 for g in got)        # (running stats read it; `unrelated` not)
    unrelated = {id(n) for n, g in zip(live, got) if g < 0}
    reaches_both(live, order, lambda n: id(n) in unrelated)


# ---------------------------------------------------------------- autograd's classify
# (ir/_fastpath.c Classifier: autograd/state.py classify in C, every op built with grad on)

def classify_graph(dtype_of_bad=None) -> tuple[list, list]:
    """A graph for classify: (roots, every node in the order made).  Leaves requiring grad (a
    buffer, a param) and not; a shared subgraph (a diamond); integer results, a differentiable op
    over them; NON_DIFFERENTIABLE ops (argmax, and a float "iota" reading a grad-requiring node);
    an inputless creation op; nodes classified already (False above a grad-requiring input,
    a Record above a plain one); keyed and unkeyed nodes; float16 and float64.  `dtype_of_bad`:
    the dtype of the add two levels under the root (an error there)."""
    from lazytorch.autograd.state import Record
    from lazytorch.ir import dtypes as D
    from lazytorch.ir.node import Node
    f32, i64 = D.float32, D.int64
    nodes = []

    def n(op, inputs, dtype=f32, attrs=None, keyed=False):
        attrs = {} if attrs is None else attrs
        node = (Node.with_key(op, tuple(inputs), attrs, (3,), dtype, (op, "given", (3,), dtype.name)) if keyed
                else Node(op, tuple(inputs), attrs, (3,), dtype))
        nodes.append(node)
        return node

    x = n("buffer", ())
    x.autograd = Record(None, ())
    w = n("param", (), attrs={"index": 0})
    w.autograd = Record(None, ())
    y = n("buffer", ())
    s = Node.scalar(2.0, f32)
    k = Node.constant(3, i64)
    nodes += [s, k]
    m = n("mul", (x, s), keyed=True)
    e = n("exp", (m,), attrs={"p": 0.5, "dims": (0,)})
    diamond = n("add", (e, n("mul", (e, e), D.float16)))
    plain = n("neg", (y,))
    am = n("argmax", (diamond,), i64, {"dim": 0})
    iota = n("iota", (diamond,))
    ints = n("add", (am, k), i64)
    back = n("mul", (n("convert", (ints,), D.float64), w))
    full = n("full", (), attrs={"value": 1.0})
    was_false = n("tanh", (x,))
    was_false.autograd = False
    above = n("add", (was_false, plain, x))
    was_record = n("sin", (y,))
    was_record.autograd = Record(None, ())
    reads = n("mul", (was_record, y), keyed=True)
    bad = n("add", (diamond, x), dtype_of_bad or f32)
    top = n("add", (bad, back, above, reads, full, iota, plain, x, s, diamond))
    side = n("mul", (plain, y))                  # (no input requires grad)
    return [top, side, e, was_false, x, y, s], nodes


def classified_alike(mine: list, theirs: list) -> None:
    """Two graphs made alike, classified by the two versions: the same states node by node (None,
    False, or a Record with the same needs and defaults), snapshots alike (op, attrs, shape, dtype,
    key, origin; the node's own inputs tuple and attrs; no buffer, value, tree or record), keys
    cached alike."""
    from lazytorch.autograd.state import Record
    at_mine = {id(v): i for i, v in enumerate(mine)}
    at_theirs = {id(v): i for i, v in enumerate(theirs)}
    assert len(mine) == len(theirs)
    for a, b in zip(mine, theirs):
        assert a._key == b._key
        ra, rb = a.autograd, b.autograd
        if ra is None or ra is False:
            assert rb is ra, (a, ra, rb)
            continue
        assert type(ra) is type(rb) is Record, (a, ra, rb)
        assert ra.needs == rb.needs and all(v is True or v is False for v in ra.needs)
        assert (ra.leaf is None, ra.retain, ra.freed) == (rb.leaf is None, rb.retain, rb.freed)
        sa, sb = ra.snapshot, rb.snapshot
        if sa is None or sb is None:
            assert sa is sb is None
            continue
        assert type(sa) is type(sb) and sa is not a
        assert (sa.op, sa.attrs, sa.shape, sa.dtype, sa._key, site(sa)) == (sb.op, sb.attrs, sb.shape, sb.dtype,
                                                                               sb._key, site(sb))
        assert sa.inputs is a.inputs and sb.inputs is b.inputs and sa.attrs is a.attrs and sa._key is a._key
        assert [at_mine[id(i)] for i in sa.inputs] == [at_theirs[id(i)] for i in sb.inputs]
        assert (sa.buffer, sa.value, sa.tree, sa.autograd) == (sb.buffer, sb.value, sb.tree, sb.autograd) \
            == (None, None, None, None)


def site(node):
    """A node's origin as its line ("file.py:12"): the raw site's instruction offset in the frame
    that called classify differs where that is a C call and where it is a Python one (the
    library's callers are its own frames, which user_site passes)."""
    o = node._origin
    return format_site(o) if o.__class__ is tuple else o


def classify_through(fn, root):
    """Both versions called from one place: their snapshots name the same user site."""
    return fn(root)


@needs_fast
def test_classify_as_the_python(monkeypatch):
    """autograd/state.py's classify in C (Classifier) against classify_py on the same graphs, root
    by root in turn (the later roots already classified, or leaves: answered without a walk): the
    same answers and the same states everywhere (Records with the same needs and snapshots,
    False, None where no walk went); the snapshots' origin as Node.with_key's (the user's site,
    SITE.site where an API call set it, None with provenance off)."""
    from lazytorch.autograd import state
    from lazytorch.ir import node as N
    assert state.classify is not state.classify_py
    given = (classify_graph.__code__, 0)
    traced = N.TRACE[0]
    for setup in ("site", "set site", "no trace"):
        if setup == "set site":
            monkeypatch.setattr(N.SITE, "site", given, raising=False)
        N.TRACE[0] = setup != "no trace"
        try:
            roots_c, nodes_c = classify_graph()
            roots_py, nodes_py = classify_graph()
            got = [classify_through(state.classify, r) for r in roots_c]
            want = [classify_through(state.classify_py, r) for r in roots_py]
        finally:
            N.TRACE[0] = traced
            monkeypatch.undo()
        assert got == want == [True, False, True, False, True, False, False]
        classified_alike(nodes_c, nodes_py)
        snap = roots_c[0].autograd.snapshot
        if setup == "site":
            assert snap._origin[0] is classify_through.__code__
        else:
            assert snap._origin is (given if setup == "set site" else None)
        assert nodes_c[2].autograd is None                  # (y: a leaf no walk classifies)
    # a root in the middle first, then one above it (its walk stops at the classified nodes)
    roots_c, nodes_c = classify_graph()
    roots_py, nodes_py = classify_graph()
    for i in (2, 0, 1):
        assert state.classify(roots_c[i]) == state.classify_py(roots_py[i])
        classified_alike(nodes_c, nodes_py)


@needs_fast
def test_classify_of_a_long_chain():
    """A 5,000-node chain over a grad-requiring leaf, and one over a plain leaf: no recursion in
    the C walk (nor the Python's), the same Records and Falses."""
    from lazytorch.autograd import state
    from lazytorch.ir import dtypes as D
    from lazytorch.ir.node import Node

    def chain(grad):
        x = Node("buffer", (), {}, (3,), D.float32)
        if grad:
            x.autograd = state.Record(None, ())
        nodes = [x]
        for i in range(5000):
            nodes.append(Node("neg" if i % 2 else "mul", (nodes[-1],) * (2 if i % 2 == 0 else 1), {}, (3,), D.float32))
        return nodes

    for grad in (True, False):
        mine, theirs = chain(grad), chain(grad)
        assert state.classify(mine[-1]) is state.classify_py(theirs[-1]) is grad
        classified_alike(mine, theirs)


@needs_fast
def test_classify_tracks_the_api_as_the_python(monkeypatch):
    """The Tensor API's tracking with the C classify and with the Python one (every op built with
    grad on classifies its node; no_grad marks nodes False): the same states over a step's graph of
    pointwise ops, a linear layer, views, reductions, integer results and a no_grad part."""
    from lazytorch.autograd import state
    from lazytorch.ir import graph
    rng = np.random.default_rng(5)
    data = [rng.standard_normal(s).astype(np.float32) for s in ((4, 3), (2, 3), (4,), (2, 4))]

    def step():
        w = lt.from_numpy(data[0].copy()).requires_grad_()
        x = lt.from_numpy(data[1].copy())
        b = lt.from_numpy(data[2].copy()).requires_grad_()
        h = F.linear(x, w, b)
        with lt.no_grad():
            scale = (h * 2.0).abs().max() + 1.0
        z = (h / scale).relu() * lt.from_numpy(data[3].copy())
        pick = z.argmax(1)
        out = z.t().reshape(8).sum() + (pick.to(lt.float32) * h.sum(1)).mean()
        return [out, pick, scale, z]

    step()                                               # (the memo's first builds)
    want = step()
    monkeypatch.setattr(state, "classify", state.classify_py)
    got = step()
    monkeypatch.undo()
    order_c = graph.program_py([t.node for t in want]).order
    order_py = graph.program_py([t.node for t in got]).order
    assert [n.op for n in order_c] == [n.op for n in order_py]
    classified_alike(order_c, order_py)
    assert [t.requires_grad for t in want] == [t.requires_grad for t in got] == [True, False, False, True]


@needs_fast
def test_classify_errors():
    """What the walk cannot take raises, never crashes: a root or input that is not a Node (a
    TypeError where the Python's attribute read raises AttributeError), inputs that are not a
    tuple, an unset slot (the Python's AttributeError), a bad call or construction; a dtype whose
    is_floating_point raises leaves the states the Python leaves (the nodes settled before
    classified, the ones the walk was under not); memory stays flat over many calls."""
    from lazytorch.autograd import state
    from lazytorch.ir import dtypes as D
    from lazytorch.ir.node import LEAF_OPS, Node
    classify = state.classify
    x = Node("buffer", (), {}, (3,), D.float32)
    x.autograd = state.Record(None, ())
    with pytest.raises(TypeError, match="the root is a int object, not a Node"):
        classify(1)
    with pytest.raises(TypeError, match="an input is a int object, not a Node"):
        classify(Node("add", (x, 3), {}, (3,), D.float32))
    with pytest.raises(TypeError, match="an input is a int object, not a Node"):
        classify(Node("neg", (Node("add", (3, x), {}, (3,), D.float32),), {}, (3,), D.float32))
    with pytest.raises(TypeError, match="not a tuple"):
        classify(Node("neg", [x], {}, (3,), D.float32))
    bare = Node.__new__(Node)
    bare.op, bare.inputs = "neg", ()
    for fn in (classify, state.classify_py):
        with pytest.raises(AttributeError):
            fn(bare)
        with pytest.raises(AttributeError):
            fn(Node("neg", (x, bare), {}, (3,), D.float32))
    for args, kwargs in (((), {}), ((x, x), {}), ((), {"root": x})):
        with pytest.raises(TypeError):
            classify(*args, **kwargs)
    good = dict(node_type=Node, record_type=state.Record, leaf_ops=LEAF_OPS,
                non_differentiable=state.NON_DIFFERENTIABLE, trace=[True], site=None, user_site=len)
    assert type(type(classify)(**good)) is type(classify)
    for bad in (dict(leaf_ops=set(LEAF_OPS)), dict(trace=(True,)), dict(user_site=None), dict(record_type=1),
                dict(node_type=object)):
        with pytest.raises(TypeError):
            type(classify)(**{**good, **bad})

    class Unsure:
        name, short = "unsure", "u"

        @property
        def is_floating_point(self):
            raise RuntimeError("unsure")

    (mine, *_), nodes_c = classify_graph(Unsure())
    (theirs, *_), nodes_py = classify_graph(Unsure())
    for fn, root in ((classify, mine), (state.classify_py, theirs)):
        with pytest.raises(RuntimeError, match="unsure"):
            fn(root)
    classified_alike(nodes_c, nodes_py)
    bad = mine.inputs[0]                                 # (under the root, over the diamond: settled)
    assert mine.autograd is bad.autograd is nodes_c[-4].autograd is None and bad.dtype.name == "unsure"
    assert type(bad.inputs[0].autograd) is state.Record

    def calls():
        for _ in range(300):
            roots, _ = classify_graph()
            classify(roots[0])
            (root, *_), _ = classify_graph(Unsure())
            with pytest.raises(RuntimeError):
                classify(root)
    assert_memory_flat(calls)


REALIZED_WHILE_CLASSIFYING = """
import gc
import numpy as np
from lazytorch.autograd import state
from lazytorch.ir import dtypes as D
from lazytorch.ir.node import Node
x = Node("buffer", (), {}, (3,), D.float32)
x.autograd = state.Record(None, ())
nodes = [x]
for i in range(400):
    nodes.append(Node("mul" if i % 3 else "add", (nodes[-1], nodes[-1 - (i % 3 > 0)]), {}, (3,), D.float32))
root, middle = nodes[-1], nodes[200]
cut = []
def collecting(phase, info):
    # (the walk is under way, half the chain settled and the root not: cut the graph it walks)
    if phase == "start" and not cut and middle.autograd is not None and root.autograd is None:
        cut.append(1)
        for n in nodes[1:]:
            n.realize(np.zeros(3, np.float32))
        nodes[:] = [root]
gc.callbacks.append(collecting)
gc.set_threshold(1)
answer = state.classify(root)
gc.set_threshold(700)
gc.callbacks.remove(collecting)
assert cut and root.op == "buffer" and answer in (True, False), (cut, answer)
print("ok")
"""


@pytest.mark.skipif(sys.version_info >= (3, 12), reason="from 3.12 a collection runs between bytecodes only")
def test_classify_survives_a_realize_during_the_walk():
    """A collection inside the walk's allocations (a snapshot, a needs tuple, a Record) may run
    Python code that realizes the nodes the walk is under (their inputs tuples dropped): the walk
    holds each node it is under and the tuple it iterates, so it ends without a crash."""
    proc = subprocess.run([sys.executable, "-X", "faulthandler", "-c", textwrap.dedent(REALIZED_WHILE_CLASSIFYING)],
                          capture_output=True, text=True, timeout=240)
    assert proc.returncode == 0 and proc.stdout.strip() == "ok", (proc.returncode, proc.stderr[-3000:])


def test_classify_is_the_c_one_where_built():
    """autograd/state.py's `classify` is the C Classifier where the extension is loaded (and
    autograd's backward uses that one), the Python function with LAZYTORCH_NATIVE=0."""
    from lazytorch.autograd import state
    if NATIVE is None:
        assert state.classify is state.classify_py
    else:
        assert type(state.classify).__name__ == "Classifier"
        assert sys.modules["lazytorch.autograd"].classify is state.classify
    assert state.classify_py.__module__ == state.__name__ and state.classify_py.__name__ == "classify"
    code = "from lazytorch.autograd import state; print(state.classify is state.classify_py)"
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=240,
                          env={**os.environ, "LAZYTORCH_NATIVE": "0"})
    assert proc.returncode == 0 and proc.stdout.strip() == "True", proc.stderr[-3000:]


# ---------------------------------------------------------------- autograd's backward walk
# (ir/_fastpath.c BackwardWalker: autograd/engine.py _walk_py in C, every backward; ViewBases:
# ir/replay.py _bases, every signature with a view)

def same_graph(mine: list, theirs: list) -> None:
    """Two gradient graphs alike node by node from their roots: the same op, attributes, shape,
    dtype, key and origin, inputs alike in order, shared where the other's are shared; a data
    leaf that is not the same node holds equal data (a buffer of equal values, a scalar's value)."""
    from lazytorch.ir.replay import _same_leaf
    pairs: dict[int, object] = {}
    stack = list(zip(mine, theirs))
    while stack:
        a, b = stack.pop()
        if id(a) in pairs:
            assert pairs[id(a)] is b
            continue
        pairs[id(a)] = b
        assert (a.op, a.shape, a.dtype, a.key, site(a)) == (b.op, b.shape, b.dtype, b.key, site(b)), (a, b)
        assert a.attrs == b.attrs and len(a.inputs) == len(b.inputs)
        if a.op in ("buffer", "scalar"):
            assert a is b or _same_leaf(a, b), (a, b)
        stack.extend(zip(a.inputs, b.inputs))


def backward_cases():
    """Training steps whose backward covers the walk's paths: (name, step) where step() builds a
    fresh forward over fixed weights and data, runs a backward and returns the nodes to compare
    (leaves' grads, retained and captured gradients) and the records' freed marks."""
    import sys
    from lazytorch.autograd.state import RECORDS
    sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "examples"))
    from gpt_block import block, random_weights
    rng = np.random.default_rng(7)
    gpt_w = {k: lt.from_numpy(v).requires_grad_() for k, v in random_weights(16).items()}
    gpt_x = rng.standard_normal((2, 4, 16)).astype(np.float32)
    lt.manual_seed(7)                            # (the layers' weights alike in each call)
    conv = lt.nn.Conv2d(3, 4, 3, padding=1)
    bn = lt.nn.BatchNorm2d(4)
    head = lt.nn.Linear(4, 5)
    img = rng.standard_normal((2, 3, 6, 6)).astype(np.float32)
    labels = lt.from_numpy(rng.integers(0, 5, 2))
    params = [*gpt_w.values(), *conv.parameters(), *bn.parameters(), *head.parameters()]

    def grads(*extra):
        return [p.grad.node for p in params if p.grad is not None] + [e for e in extra if e is not None]

    def freed(*roots):
        from lazytorch.autograd.engine import _order
        return [RECORDS[n].freed for n in _order([r.node for r in roots])]

    def gpt():                                   # views, split q/k/v (a tiling cat), residual sums
        for p in params:
            p.grad = None
        loss = block(lt, lt.from_numpy(gpt_x), gpt_w, 2).square().mean()
        loss.backward()
        return grads(), freed(loss)

    def convnet():                               # convolution, BatchNorm, a residual, pooling, cross_entropy
        for p in params:
            p.grad = None
        h = bn(conv(lt.from_numpy(img))).relu()
        h = (h + h.tanh()).relu()
        h.retain_grad()
        out = head(lt.nn.functional.adaptive_avg_pool2d(h, 1).flatten(1))
        loss = lt.nn.functional.cross_entropy(out, labels)
        loss.backward()
        return grads(h.grad.node), freed(loss)

    def captured():                              # autograd.grad (captured, nothing accumulated), retain_graph
        x = lt.from_numpy(img).requires_grad_()
        h = conv(x).sigmoid()
        y = (h * h).sum() + h.mean()
        gx, gw = lt.autograd.grad(y, [x, conv.weight], retain_graph=True)
        for p in params:
            p.grad = None
        y.backward(inputs=[conv.bias])           # (a second backward through the retained graph)
        return grads(gx.node, gw.node), freed(y)

    def higher():                                # create_graph: no memo, the gradient requires grad
        x = lt.from_numpy(img[0, 0]).requires_grad_()
        (g,) = lt.autograd.grad((x.sin() * x).sum(), [x], create_graph=True)
        (gg,) = lt.autograd.grad(g.sum(), [x])
        return [g.node, gg.node], [g.requires_grad]

    return [("gpt", gpt), ("convnet", convnet), ("captured", captured), ("higher", higher)]


@needs_fast
@pytest.mark.parametrize("memo", ["on", "check"])
def test_backward_walk_as_the_python(monkeypatch, memo):
    """autograd/engine.py's walk in C (BackwardWalker) builds the Python walk's gradient graph
    (_walk_py), node by node: steps that learn the rule memo and steps that replay it (its
    identity cache: a realized parameter's key is made afresh each step), sums of cotangents
    (plain ones replayed, a split's tiling cat), a view's rule whose gradient is a view
    argument's base, retain_grad, autograd.grad's capture, backward(inputs=), retain_graph,
    create_graph, and the records' freed marks; in check mode every replay is compared with
    the rules' build (the walk defers to input_grads)."""
    from lazytorch.autograd import engine
    from lazytorch.ir import replay
    assert type(engine._walk).__name__ == "BackwardWalker"
    if memo == "check":
        monkeypatch.setattr(replay, "CHECK", True)
    got = {}
    for walk in (engine._walk_py, engine._walk):
        monkeypatch.setattr(engine, "_walk", walk)
        replay.forget()                          # (each walk learns the rules from none)
        cases = backward_cases()
        got[walk] = [(name, [step() for _ in range(3)]) for name, step in cases]
    for (name, mine), (_, theirs) in zip(got[engine._walk], got[engine._walk_py]):
        for (nodes_c, freed_c), (nodes_py, freed_py) in zip(mine, theirs):
            assert len(nodes_c) == len(nodes_py) > 0 and freed_c == freed_py, name
            same_graph(nodes_c, nodes_py)


@needs_fast
@pytest.mark.skipif(os.environ.get("LAZYTORCH_CALL_MEMO") == "check", reason="check mode applies every rule")
def test_backward_walk_replays_from_its_cache(monkeypatch):
    """From the second step on, the walk finds a training step's rule applications in its identity
    cache (a step's node keys are the very objects of the step before; a realized parameter's
    are equal ones): with the rule table emptied, a step applies only the rules of the few nodes
    without a signature or built by the general route (a key of their own each step).
    replay.forget clears the cache with the table."""
    from lazytorch.autograd import engine
    from lazytorch.ir import replay
    (_, gpt), (_, convnet), *_ = backward_cases()
    applied = []
    real = engine._apply_rule
    monkeypatch.setattr(engine, "_apply_rule", lambda rec, *a: applied.append(rec.snapshot.op) or real(rec, *a))
    replay.forget()
    gpt()
    convnet()
    learned = len(applied)
    for _ in range(2):
        gpt()
        convnet()
    engine._RULES.clear()
    applied.clear()
    gpt()
    convnet()
    assert learned > 40 and len(applied) <= 4, (learned, applied)
    assert engine._RULE_ID_MEMO.table
    replay.forget()
    assert not engine._RULE_ID_MEMO.table and not engine._RULES


@needs_fast
def test_backward_walk_errors(monkeypatch):
    """What the walk cannot take raises as the Python does, never crashes: a second backward
    through freed records (FREED), a record gone from an input that needs grad (KeyError), bad
    calls and constructor arguments (TypeError), corrupt memo entries (TypeError or ValueError)
    and cache entries (skipped); memory stays flat over many walks, failing ones included."""
    from lazytorch.autograd import engine
    walks = (engine._walk, engine._walk_py)
    for walk in walks:
        monkeypatch.setattr(engine, "_walk", walk)
        x = lt.from_numpy(X.copy()).requires_grad_()
        y = (x * x).exp().sum()
        y.backward()
        with pytest.raises(RuntimeError, match="backward through the graph a second time"):
            y.backward()
        z = (x * 2.0).sum()
        x.requires_grad_(False)
        with pytest.raises(KeyError):
            z.backward()
    monkeypatch.undo()
    walk = engine._walk
    w = lt.from_numpy(X.copy()).requires_grad_()
    loss = (w * w).sum()
    one = lt.ones(()).node
    for args in ((), ([loss.node], [one], False, True, set(), {}), ([loss.node], [one], False, True, [], {}, False),
                 ([loss.node], [one], False, True, set(), [], False), (3, [one], False, True, set(), {}, False),
                 ([3], [one], False, True, set(), {}, False)):
        with pytest.raises(TypeError):
            walk(*args)
    good = dict(node_type=engine.Node, record_type=engine.Record, signature=engine.replay.signature,
                rules={}, ids={}, saves_nothing=frozenset(), trace=[False], site=None, input_grads=len, summed=len,
                accumulate_leaf=len, retained=len, memo_on=len, sum_key="s", freed="freed")
    assert type(type(walk)(**good)) is type(walk)
    for bad in (dict(rules=[]), dict(saves_nothing=set()), dict(input_grads=None), dict(node_type=object),
                dict(record_type=int), dict(trace=(False,)), dict(freed=1)):
        with pytest.raises(TypeError):
            type(walk)(**{**good, **bad})

    def step():
        w.grad = None
        (w.sin() * w).sum().backward()
    step()
    step()
    rules, ids = dict(engine._RULES), {k: list(v) for k, v in engine._RULE_ID_MEMO.table.items()}
    try:
        for garbage in ("entry", (None, "spec"), (None, ((9, 0),)), (None, ((0, 99),)), (3, ((1, 0),))):
            for k in rules:
                engine._RULES[k] = garbage
            for k in engine._RULE_ID_MEMO.table:
                engine._RULE_ID_MEMO.table[k] = [(None, None, None, garbage)]    # (skipped: not its head)
            # (check mode: the Python's errors, or its comparison's)
            with pytest.raises((TypeError, ValueError, AttributeError, IndexError, AssertionError)):
                step()
    finally:
        engine._RULES.clear()
        engine._RULES.update(rules)
        engine._RULE_ID_MEMO.table.clear()
        engine._RULE_ID_MEMO.table.update(ids)
    step()

    from lazytorch.autograd.state import RECORDS
    y = (w.sin() * w).sum() + (w * 3.0).sum()
    roots, seeds, records = [y.node], [lt.ones(()).node], [RECORDS[n] for n in engine._order([y.node])]
    saved = [None if rec.snapshot is None else rec.snapshot.inputs for rec in records]   # (freed: let go of)

    def calls():                                 # (no Tensor made: no live-tensor entries piling up)
        for _ in range(50):
            engine.run_backward(roots, seeds, True, accumulate=False, capture=[w.node])
            engine.run_backward(roots, seeds, False, accumulate=False, capture=[w.node])
            with pytest.raises(RuntimeError):
                engine.run_backward(roots, seeds, False, accumulate=False)
            for rec, inputs in zip(records, saved):
                rec.freed = False
                if inputs is not None:
                    rec.snapshot.inputs = inputs
    assert_memory_flat(calls)


def test_view_bases_as_the_python():
    """ir/replay.py's _bases in C (ViewBases) answers what bases_py answers: views of one base,
    of two, of a node that is also an argument, past four nodes (the table form) and with a node
    given twice; a node list of another kind raises a TypeError."""
    from lazytorch.ir import replay
    from lazytorch.ir import dtypes as D
    from lazytorch.ir.node import Node
    if NATIVE is None:
        assert replay._bases is replay.bases_py
        return
    assert type(replay._bases).__name__ == "ViewBases"
    a, b = (Node("buffer", (), {}, (4,), D.float32) for _ in range(2))
    p = Node("neg", (a,), {}, (4,), D.float32)

    def view(base):
        return Node("view", (base,), {"view": None}, (4,), D.float32)
    va, va2, vb, vp = view(a), view(a), view(b), view(p)
    lists = [[], [a], [va], [va, va2], [va, vb], [a, va], [va, a], [p, vp, va], [vp, p],
             [va, vb, va2, vp, p], [a, b, p, va, vb, vp], [va, a, va2, b, vb, p, vp, view(va)],
             [va, va, vb, a, a, vp], [vb] * 6, [a, va, a]]
    for nodes in lists:
        assert replay._bases(nodes) == replay.bases_py(nodes), nodes
    for bad in ([3], [va, 3], (va,), [Node("view", (), {}, (4,), D.float32)]):
        with pytest.raises(TypeError):
            replay._bases(bad)


def test_backward_walk_is_the_c_one_where_built():
    """autograd/engine.py's `_walk` is the C BackwardWalker where the extension is loaded, the
    Python function with LAZYTORCH_NATIVE=0 (and replay's `_bases` alike)."""
    from lazytorch.autograd import engine
    if NATIVE is None:
        assert engine._walk is engine._walk_py
    else:
        assert type(engine._walk).__name__ == "BackwardWalker"
    code = ("from lazytorch.autograd import engine; from lazytorch.ir import replay; "
            "print(engine._walk is engine._walk_py, replay._bases is replay.bases_py)")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=240,
                          env={**os.environ, "LAZYTORCH_NATIVE": "0"})
    assert proc.returncode == 0 and proc.stdout.strip() == "True True", proc.stderr[-3000:]

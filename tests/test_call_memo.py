"""lazytorch/call_memo.py: a Tensor API call seen before is replayed from its recording instead of
taking the general route.  A replay must build what the general route builds (values against
torch, program keys, aliasing, provenance), new values must flow in, and calls whose build
depends on more than the signature (data read at build time, random draws, the same tensor twice,
a zero's sign in an attribute) must not be replayed wrongly."""
from __future__ import annotations

import numpy as np
import pytest
import torch

import lazytorch as lt
from lazytorch import api, call_memo
from lazytorch.ir import build, replay
from lazytorch.ir.registry import get
from lazytorch.ir.graph import program
from lazytorch.ir.replay import CHECK

F, TF = lt.nn.functional, torch.nn.functional
rng = np.random.default_rng(0)


def arr(*shape):
    return rng.standard_normal(shape).astype(np.float32)


@pytest.fixture
def general_calls(monkeypatch):
    """How many calls took the general route (api.general's `call`) since the fixture started."""
    count = [0]
    real = api.call

    def counted(*args, **kwargs):
        count[0] += 1
        return real(*args, **kwargs)
    monkeypatch.setattr(api, "call", counted)
    return count


# (name, lazytorch call, torch call, input shapes): each runs three times on new data
CASES = [
    ("linear", lambda m, x, w, b: m.nn.functional.linear(x, w, b), [(2, 5, 8), (6, 8), (6,)]),
    ("layer_norm", lambda m, x, w, b: m.nn.functional.layer_norm(x, (8,), w, b), [(3, 8), (8,), (8,)]),
    ("softmax", lambda m, x: m.nn.functional.softmax(x, dim=-1), [(4, 7)]),
    ("gelu_tanh", lambda m, x: m.nn.functional.gelu(x, approximate="tanh"), [(5, 3)]),
    ("masked_fill", lambda m, x, y: x.masked_fill(y > 0, float("-inf")), [(3, 4), (3, 4)]),
    ("where_bcast", lambda m, x, y: m.where(x > 0, x, y), [(3, 1, 4), (2, 4)]),
    ("clamp", lambda m, x: m.clamp(x, min=-0.5, max=0.25), [(6,)]),
    ("view_transpose", lambda m, x: x.view(2, 3, 4).transpose(0, 2).contiguous(), [(6, 4)]),
    ("split", lambda m, x: m.stack(x.split(2, dim=1)), [(3, 6)]),
    ("max_dim", lambda m, x: m.max(x, dim=1).indices.to(m.float32) + m.max(x, dim=1).values, [(4, 5)]),
    ("tril_ones", lambda m, x: x * m.tril(m.ones(4, 4)), [(4, 4)]),
    ("matmul", lambda m, x, y: x @ y.transpose(-2, -1), [(2, 3, 5), (2, 4, 5)]),
    ("sum_keepdim", lambda m, x: x.sum(dim=(0, 2), keepdim=True), [(2, 3, 4)]),
    ("zero_d", lambda m, x: m.maximum(x, x.sum()), [()]),
    ("empty", lambda m, x: m.nn.functional.softmax(x, dim=0), [(0, 3)]),
]


@pytest.mark.parametrize("name,fn,shapes", CASES, ids=[c[0] for c in CASES])
def test_replays_compute_what_torch_computes(name, fn, shapes, backend, general_calls):
    for i in range(3):
        data = [arr(*s) for s in shapes]
        before = general_calls[0]
        got = fn(lt, *[lt.from_numpy(d) for d in data])
        built = general_calls[0] - before
        want = fn(torch, *[torch.from_numpy(d) for d in data])
        np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-5, atol=1e-6)
        if i == 2 and not CHECK:                     # (check mode builds each replay both ways)
            assert built == 0, f"{name}: the third call took the general route {built} times"


def test_a_replay_builds_the_general_routes_program():
    x, w, b = (lt.from_numpy(a) for a in (arr(2, 8), arr(4, 8), arr(4)))
    replayed = [F.linear(x, w, b) for _ in range(3)][2]
    fresh = build.build_call(get("linear"), (x, w, b), {})
    assert program([replayed._node]).key == program([fresh]).key
    assert replayed._node is not fresh and replayed._node.inputs[0] is x._node


@pytest.mark.skipif(CHECK, reason="check mode builds every replay the general way too")
def test_builder_calls_replay_below_the_api(monkeypatch):
    """ir/build.py::call (autograd's, the decompositions') replays as the Tensor API does."""
    x, y = lt.from_numpy(arr(3, 4))._node, (lt.from_numpy(arr(4)) * 2.0)._node
    built = []
    real = build.build_call
    monkeypatch.setattr(build, "build_call", lambda *a: built.append(a[0].name) or real(*a))
    first, second = build.call("mul", x, y), build.call("mul", x, y)
    assert built == ["mul"] and second is not first
    assert program([first]).key == program([second]).key and second.inputs == (x, y)


def test_a_recorded_builder_function_replays_whole(monkeypatch):
    """ir/build.py::recorded: a builder function of its own (autograd's col2im) replays its whole
    build from one recording, over a new argument of the same signature, without a `call`."""
    from lazytorch.ir.build_conv import col2im
    g1, g2 = (lt.from_numpy(arr(2, 3, 4, 4, 3, 3))._node for _ in range(2))
    first = col2im(g1, (9, 9), (3, 3), (2, 2), (1, 1))
    built = []
    if not CHECK:                                   # (check mode builds too, and compares)
        monkeypatch.setattr(build, "build_call", lambda *a: built.append(a[0].name))
    second = col2im(g2, (9, 9), (3, 3), (2, 2), (1, 1))
    assert built == [] and program([first]).key == program([second]).key
    assert program([second]).leaves[0] is g2 and tuple(second.shape) == (2, 3, 9, 9)
    rng2 = np.random.default_rng(1)
    g = rng2.standard_normal((2, 3, 4, 4, 3, 3)).astype(np.float32)
    want = TF.fold(torch.from_numpy(g).permute(0, 1, 4, 5, 2, 3).reshape(2, 27, 16), (9, 9), 3, stride=2)
    monkeypatch.undo()
    got = lt.Tensor(col2im(lt.from_numpy(g)._node, (9, 9), (3, 3), (2, 2), (1, 1)))
    np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-5, atol=1e-5)


def test_derivative_rules_replay_on_the_next_step(monkeypatch):
    """autograd/engine.py: a backward through the same structures as an earlier one replays each
    rule's recorded application (no rule runs), over the new step's nodes, and the gradients are
    torch's; with create_graph the rules run."""
    from lazytorch.autograd import engine
    xs, w0 = [arr(5, 4) for _ in range(2)], arr(4, 3)
    w, tw = lt.tensor(w0, requires_grad=True), torch.tensor(w0, requires_grad=True)
    applied = []
    real = engine._apply_rule
    for step, x in enumerate(xs):
        if step == 1:
            monkeypatch.setattr(engine, "_apply_rule", lambda *a: applied.append(a[0].snapshot.op) or real(*a))
        w.grad, tw.grad = None, None
        (lt.tensor(x) @ w).relu().square().sum().backward()
        (torch.tensor(x) @ tw).relu().square().sum().backward()
        np.testing.assert_allclose(w.grad.numpy(), tw.grad.numpy(), rtol=1e-5, atol=1e-5)
    assert (applied == []) != CHECK                       # (check mode runs the rules too, to compare)
    (g,) = lt.autograd.grad((lt.tensor(xs[0]) @ w).relu().square().sum(), [w], create_graph=True)
    assert applied and g.requires_grad


def test_sums_and_a_views_base_replay_on_the_next_step(monkeypatch):
    """autograd/engine.py: a node read twice sums its cotangents (`summed`), and a pooled feature's
    view takes the cotangent's base back (the rule's result is a view argument's base, what it
    reshapes): from the second step on both replay (no sum_cotangents, no view rule runs), and
    the gradients are torch's."""
    from lazytorch.autograd import derivatives, engine
    x0, w0 = arr(2, 3, 4, 4), arr(3, 5)
    nets = [(lib, lib.tensor(w0, requires_grad=True)) for lib in (lt, torch)]
    applied, sums = [], []
    real_rule, real_sum = engine._apply_rule, derivatives.sum_cotangents
    for step in range(3):
        if step == 1:
            monkeypatch.setattr(engine, "_apply_rule", lambda *a: applied.append(a[0].snapshot.op) or real_rule(*a))
            monkeypatch.setattr(derivatives, "sum_cotangents", lambda parts: sums.append(len(parts)) or real_sum(parts))
        grads = []
        for lib, w in nets:
            w.grad = None
            h = lib.tensor(x0 * (step + 1)).tanh()
            h = h + h.relu()                                  # (h read twice: two cotangents summed)
            pooled = lib.nn.functional.adaptive_avg_pool2d(h, 1).flatten(1)
            (pooled @ w).square().sum().backward()
            grads.append(w.grad)
        np.testing.assert_allclose(grads[0].numpy(), grads[1].numpy(), rtol=1e-5, atol=1e-5)
    if not CHECK:                                             # (check mode runs both, to compare)
        assert sums == [] and "view" not in applied, (sums, applied)


def test_rules_over_runtime_numbers_replay_keyed_by_value(monkeypatch):
    """autograd/engine.py _valued_signature: a rule application that reads a runtime number (a
    scalar leaf whose value the graph cache does not key on: `h / 16.0`, `h ** p`) replays keyed
    with the number's value: a repeat applies no rule, another value is another key (pow's rule
    reads its exponent), and the gradients are torch's."""
    from lazytorch.autograd import engine
    x0 = arr(3, 4)
    applied = []
    real = engine._apply_rule
    monkeypatch.setattr(engine, "_apply_rule", lambda *a: applied.append(a[0].snapshot.op) or real(*a))
    for step, p in enumerate((3.0, 3.0, 2.0, 3.0, 2.0)):
        applied.clear()
        grads = []
        for lib in (lt, torch):
            x = lib.tensor(x0, requires_grad=True)
            ((x.abs() + 1.0) ** p / 16.0).sum().backward()
            grads.append(x.grad)
        np.testing.assert_allclose(grads[0].numpy(), grads[1].numpy(), rtol=1e-5, atol=1e-5)
        if step == 0:
            assert {"pow", "div", "add"} <= set(applied), applied
        elif step != 2 and not CHECK:                          # (check mode applies every rule too)
            assert applied == [], (step, applied)


def test_batchnorm_rules_replay_and_constants_key_by_value(monkeypatch):
    """BatchNorm's statistics scale by 1 / count and add eps as structural constants and square the
    centred values (ir/build_norm.py _stats): a constant is a call's argument like a tensor's node,
    keyed with its value, so the second training step applies no rule (their applications were 81
    of ResNet-18's 335 a step), and gradients and running statistics match torch.  A constant of
    another value is another signature: the replayed step still matches torch."""
    from lazytorch.autograd import engine
    from lazytorch.ir import replay
    from lazytorch.ir.build import constant
    from lazytorch.ir.node import Node
    x0 = arr(4, 3, 5, 5)
    nets = (lt.nn.BatchNorm2d(3), torch.nn.BatchNorm2d(3))
    applied = []
    real = engine._apply_rule
    for step in range(3):
        if step == 1:
            monkeypatch.setattr(engine, "_apply_rule", lambda *a: applied.append(a[0].snapshot.op) or real(*a))
        grads = []
        for lib, net in zip((lt, torch), nets):
            net.zero_grad()
            x = lib.tensor(x0 * (step + 1), requires_grad=True)
            net(x).square().sum().backward()
            grads.append((x.grad, net.weight.grad, net.running_var))
        for a, b in zip(*grads):
            np.testing.assert_allclose(a.numpy(), b.detach().numpy(), rtol=1e-4, atol=1e-4)
    assert (applied == []) != CHECK
    sig = [replay.signature((lt.ones(2)._node, constant(v)), {}) for v in (0.5, 0.25)]
    assert sig[0] is not None and sig[0][0] != sig[1][0] and len(sig[0][1]) == 2
    assert replay.signature((lt.ones(2)._node, Node.scalar(0.5, lt.float32)), {}) is None    # (a runtime number)


def test_runtime_numbers_take_each_calls_value(backend):
    x = arr(5)
    for v in (0.5, -1.0, 0.5, 2.0):
        got = lt.from_numpy(x).masked_fill(lt.from_numpy(x) > 0, v).numpy()
        np.testing.assert_array_equal(got, np.where(x > 0, np.float32(v), x))


def test_a_zeros_sign_in_an_attribute_is_kept():
    x = lt.from_numpy(arr(2, 3))
    for eps in (0.0, -0.0, 0.0, -0.0):              # (layer_norm's eps is a float attribute)
        node = F.layer_norm(x, (3,), eps=eps)._node
        assert repr(node.attrs["eps"]) == repr(eps)


def test_the_same_tensor_twice_is_not_mistaken_for_two(backend):
    a, b = arr(4), arr(4)
    x, y = lt.from_numpy(a), lt.from_numpy(b)
    for _ in range(2):
        np.testing.assert_array_equal(lt.maximum(x, y).numpy(), np.maximum(a, b))
        both = lt.maximum(x, x)
        assert len(program([both._node]).leaves) == 1
        np.testing.assert_array_equal(both.numpy(), a)


def test_a_value_read_at_build_time_is_not_replayed(backend):
    for v in (1.5, 2.5, 3.5):
        fill = lt.tensor(v)
        fill.numpy()                           # realized: full() reads its value when it builds
        np.testing.assert_array_equal(lt.full((2,), fill).numpy(), [v, v])


def test_random_calls_draw_anew():
    x = lt.ones(1000)
    masks = [(F.dropout(x, 0.5, training=True) > 0).numpy() for _ in range(3)]
    assert not np.array_equal(masks[0], masks[1]) and not np.array_equal(masks[1], masks[2])


def test_replayed_views_alias_their_base(backend):
    base = arr(6, 4)
    for _ in range(3):
        x = lt.from_numpy(base.copy())
        v = x.view(2, 3, 4).transpose(0, 2)
        assert v._base is x
        v.mul_(2.0)                            # writes through into x
        np.testing.assert_array_equal(x.numpy(), base * 2)


def test_a_replayed_node_names_the_users_line():
    x = lt.from_numpy(arr(3, 4))
    nodes = [F.softmax(x, dim=-1)._node for _ in range(3)]
    assert all(n.origin is not None and n.origin.startswith("test_call_memo.py:") for n in nodes)
    assert len({n.origin for n in nodes}) == 1


def test_errors_are_raised_every_time():
    x, w = lt.from_numpy(arr(2, 8)), lt.from_numpy(arr(4, 7))
    for _ in range(3):
        with pytest.raises(RuntimeError, match="linear"):
            F.linear(x, w)


def test_parameters_and_modules_replay(backend, general_calls):
    layer = lt.nn.Linear(8, 3)
    ref = torch.nn.Linear(8, 3)
    with torch.no_grad():
        ref.weight.copy_(torch.from_numpy(layer.weight.numpy()))
        ref.bias.copy_(torch.from_numpy(layer.bias.numpy()))
    for i in range(3):
        x = arr(5, 8)
        before = general_calls[0]
        got = layer(lt.from_numpy(x)).numpy()
        if i == 2 and not CHECK:
            assert general_calls[0] == before
        np.testing.assert_allclose(got, ref(torch.from_numpy(x)).detach().numpy(), rtol=1e-5, atol=1e-6)


def test_the_demo_block_replays_into_one_cached_program(on_cpu):
    """Built three times, the README block's lazy program is the same structure (one graph cache
    entry) and compiles to the same kernels."""
    import sys
    from pathlib import Path
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "examples"))
    from gpt_block import block, random_input, random_weights
    w = {k: lt.from_numpy(v) for k, v in random_weights(32).items()}
    x = lt.from_numpy(random_input(2, 8, 32))
    keys = {program([block(lt, x, w, 4)._node]).key for _ in range(3)}
    assert len(keys) == 1
    plans = [lt.kernel_plan(block(lt, x, w, 4)) for _ in range(2)]
    assert [str(k) for k in plans[0].launches] == [str(k) for k in plans[1].launches]
    assert len(plans[0].launches) == 13              # 7 kernels and 6 matmuls, as built the general way


def test_a_build_that_updates_its_arguments_runs_every_time(backend):
    """batch_norm in training updates its running statistics in place while it builds: each call
    must update them again, not replay only the result's nodes."""
    x = arr(4, 3, 5)
    rm, rv = lt.zeros(3), lt.ones(3)
    trm, trv = torch.zeros(3), torch.ones(3)
    for _ in range(3):
        got = F.batch_norm(lt.from_numpy(x), rm, rv, training=True)
        want = TF.batch_norm(torch.from_numpy(x), trm, trv, training=True)
        np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-5, atol=1e-5)
        np.testing.assert_allclose(rm.numpy(), trm.numpy(), rtol=1e-5, atol=1e-6)
        np.testing.assert_allclose(rv.numpy(), trv.numpy(), rtol=1e-5, atol=1e-6)


KEYS = [(slice(None), -1, slice(None)), (Ellipsis, None), (slice(None), slice(1, 3)), 0, (1, slice(None, None, 2)),
        (None, 0, Ellipsis), True]


@pytest.mark.parametrize("key", KEYS, ids=[repr(k) for k in KEYS])
def test_basic_indexing_replays_its_views(key, backend, monkeypatch):
    import lazytorch.indexing as indexing
    parsed = []
    real = indexing.parse_key
    monkeypatch.setattr(indexing, "parse_key", lambda *a: parsed.append(1) or real(*a))
    for i in range(3):
        a = arr(3, 4, 5)
        x = lt.from_numpy(a.copy())
        got = x[key]
        np.testing.assert_array_equal(got.numpy(), a[key])
        if got._base is not None:                     # a view: writes go through into x
            got.mul_(2.0)
            want = a.copy()
            want[key] *= 2
            np.testing.assert_array_equal(x.numpy(), want)
    assert len(parsed) <= (3 if CHECK else 1)          # (an earlier backend may have recorded it)


def test_indexing_a_view_and_advanced_keys(backend):
    a = arr(3, 4, 5)
    for _ in range(3):
        x = lt.from_numpy(a)
        t = x.transpose(0, 2)                         # a view: the replay's aliasing case is not alias's common one
        np.testing.assert_array_equal(t[1, :, -1].numpy(), a.transpose(2, 1, 0)[1, :, -1])
        idx = lt.tensor([2, 0])                       # advanced keys take the general way
        np.testing.assert_array_equal(x[idx, 1].numpy(), a[[2, 0], 1])


def test_a_call_returning_its_argument_replays_as_that_argument():
    x, y = lt.from_numpy(arr(3)), lt.from_numpy(arr(3).astype(np.float64))
    for _ in range(3):
        assert x.float() is x and x.to(lt.float32) is x
        assert y.float() is not y and y.float().dtype is lt.float32


def test_a_view_arguments_base_is_read_from_where_it_is_now(backend):
    """A view builder reads its argument's base: where that base was also another argument (or
    another view argument's base), a recording must not replay it from that other argument."""
    a, b, c = arr(3, 4), arr(3, 4), arr(2, 4, 4)
    x, y, z = lt.from_numpy(a), lt.from_numpy(b), lt.from_numpy(c)
    for other, want in ((x, a), (y, a), (x, a)):
        np.testing.assert_array_equal(x[0:1].expand_as(other).numpy(), np.broadcast_to(a[0:1], (3, 4)))
    w = lt.from_numpy(c.copy())
    for first, second in ((w, w), (w, z), (z, w), (z, z)):       # matmul unsqueezes its vector
        got = lt.matmul(first[0], second[1, 0]).numpy()
        want = torch.matmul(torch.from_numpy(first.numpy())[0], torch.from_numpy(second.numpy())[1, 0])
        np.testing.assert_allclose(got, want.numpy(), rtol=1e-5, atol=1e-5)


def test_a_returns_self_call_on_shared_data_returns_its_argument(backend):
    """x.float() of a float32 x is x, also while x.numpy() has handed out its data (as torch's):
    the general route and a replay agree."""
    if backend == "cuda":
        pytest.skip("a device tensor's numpy() is a copy: only a host backend's shares its memory")
    for _ in range(3):
        x = lt.from_numpy(arr(3)) * 1.0
        data = x.numpy()
        y = x.float()
        assert y is x
        data[:] = 7.0                                    # writes through into x, so into y
        np.testing.assert_array_equal(y.numpy(), [7.0, 7.0, 7.0])


def test_a_deep_copy_leaves_autograds_record_behind():
    """Records live on their nodes (Node.autograd): a deep copy of a tensor is a new value, whose
    backward must not accumulate into the original's .grad (torch: the original's .grad stays None)."""
    import copy
    x = lt.from_numpy(arr(3)).requires_grad_()
    y = copy.deepcopy(x)
    tx = torch.from_numpy(x.numpy().copy()).requires_grad_()
    ty = copy.deepcopy(tx)
    (ty * 2.0).sum().backward()
    if y.requires_grad:
        (y * 2.0).sum().backward()
    assert tx.grad is None and x.grad is None


def test_check_mode_catches_a_replayed_build_with_effects(monkeypatch):
    """Check mode raises where a replayed call's general build has effects a replay skips: arange
    of a realized tensor reads its value as it builds.  Its memos are made to record it anyway, at
    the Tensor API's level (api.py, call_memo.py) and at the builder's (ir/build.py `call`)."""
    def careless(self, key, nodes, flat, result, before):          # (records what has effects too)
        rec = replay.record(nodes, flat, result._node if isinstance(result, lt.Tensor) else result)
        if rec is not None:
            monkeypatch.setitem(self.memo.table if isinstance(self, call_memo.CallMemo) else self.table, key, rec)
    monkeypatch.setattr(call_memo.CallMemo, "learn", careless)
    monkeypatch.setattr(api, "MEMO_CHECK", True)
    n = lt.tensor(3.0)
    n.numpy()
    lt.arange(n)
    with pytest.raises(AssertionError, match="arange was replayed, but building it has effects"):
        lt.arange(n)
    monkeypatch.setattr(replay.Memo, "learn", careless)
    monkeypatch.setattr(replay, "CHECK", True)
    m = lt.tensor(4.0)
    m.numpy()
    build.call("arange", m.node)
    with pytest.raises(AssertionError, match="arange was replayed, but building it has effects"):
        build.call("arange", m.node)


def test_check_mode_compares_origins_while_provenance_stays_on():
    """A replay whose node names another line than the general build's is caught, unless
    provenance was switched off meanwhile (by a compile on another thread: ir/node.py provenance_mark)."""
    from lazytorch.ir.node import tracing
    x = lt.from_numpy(arr(3))._node
    mine, theirs = build.call("neg", x), build.call("neg", x)
    theirs.origin = "elsewhere.py:1"
    with pytest.raises(AssertionError, match="neg replayed"):
        replay.check("neg", lambda: mine, lambda: theirs)

    def built_while_a_compile_ran():
        with tracing(False):
            return theirs
    assert replay.check("neg", lambda: mine, built_while_a_compile_ran) is mine

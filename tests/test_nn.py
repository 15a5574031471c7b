"""lazytorch.nn against torch.nn: the Module API (registration, traversal, state dicts and their
errors, modes, hooks, dtype moves, repr) and the layers' forward results with weights copied over."""
from __future__ import annotations

import collections
import math

import numpy as np
import pytest
import torch

import lazytorch as lt


def build(nn, lib):
    """The same small model written against torch.nn or lazytorch.nn."""

    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.proj = nn.Linear(4, 6)
            self.norm = nn.LayerNorm(6)
            self.register_buffer("scale", lib.ones(6))
            self.register_buffer("cache", lib.zeros(2), persistent=False)
            self.gain = nn.Parameter(lib.ones(6))

        def forward(self, x):
            return self.norm(self.proj(x)) * self.scale * self.gain

    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.block = Block()
            self.layers = nn.ModuleList([nn.Linear(6, 6), nn.Linear(6, 6, bias=False)])
            self.heads = nn.ModuleDict({"a": nn.Linear(6, 2), "b": nn.Sequential(nn.GELU(), nn.Linear(6, 3))})
            self.drop = nn.Dropout(0.5)
            self.emb = nn.Embedding(5, 4, padding_idx=0)

        def forward(self, x):
            x = self.drop(self.block(x))
            for layer in self.layers:
                x = layer(x).relu()
            return self.heads["a"](x), self.heads["b"](x)

    return Net()


@pytest.fixture
def on_cpu():
    """Layer wiring is checked on the cpu backend; the functionals under it are checked on every
    backend by the op suites, and whole models on cpu and metal-emu by test_nn_models.py."""
    previous = lt.get_backend()
    lt.set_backend("cpu")
    yield "cpu"
    lt.set_backend(previous)


@pytest.fixture
def pair():
    torch.manual_seed(0)
    tnet, lnet = build(torch.nn, torch), build(lt.nn, lt)
    lnet.load_state_dict(tnet.state_dict())
    return tnet, lnet


def test_traversal_matches_torch(pair):
    tnet, lnet = pair
    assert list(lnet.state_dict()) == list(tnet.state_dict())
    assert [n for n, _ in lnet.named_parameters()] == [n for n, _ in tnet.named_parameters()]
    assert [n for n, _ in lnet.named_buffers()] == [n for n, _ in tnet.named_buffers()]
    assert [n for n, _ in lnet.named_modules()] == [n for n, _ in tnet.named_modules()]
    assert [n for n, _ in lnet.named_children()] == [n for n, _ in tnet.named_children()]
    assert [type(m).__name__ for m in lnet.modules()] == [type(m).__name__ for m in tnet.modules()]
    assert len(list(lnet.parameters())) == len(list(tnet.parameters()))
    assert "block.cache" not in lnet.state_dict()                  # non-persistent buffer
    assert not any(b is p for b in lnet.buffers() for p in lnet.parameters())
    assert repr(lnet) == repr(tnet)
    assert all(isinstance(p, lt.nn.Parameter) and p.requires_grad for p in lnet.parameters())


def test_forward_matches_torch(pair, on_cpu):
    tnet, lnet = pair
    tnet.eval(), lnet.eval()
    x = np.random.default_rng(0).standard_normal((3, 4)).astype(np.float32)
    with torch.no_grad():
        ta, tb = tnet(torch.from_numpy(x))
    la, lb = lnet(lt.tensor(x))
    np.testing.assert_allclose(la.numpy(), ta.numpy(), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(lb.numpy(), tb.numpy(), rtol=1e-5, atol=1e-6)


def test_registration_rules():
    m = lt.nn.Linear(2, 3)
    with pytest.raises(TypeError, match="cannot assign .* as parameter 'weight'"):
        m.weight = lt.ones(3, 2)
    m.weight = None                                        # None is allowed, as torch
    assert m.weight is None and "weight" not in m.state_dict()
    with pytest.raises(KeyError, match="already exists"):
        m.register_buffer("in_features", lt.ones(1))
    with pytest.raises(KeyError, match="be empty or contain"):
        m.register_parameter("a.b", None)
    with pytest.raises(TypeError, match="Module subclass"):
        m.add_module("x", 3)
    with pytest.raises(AttributeError, match="'Linear' object has no attribute 'nope'"):
        m.nope
    m.extra = lt.nn.ReLU()
    assert [n for n, _ in m.named_children()] == ["extra"]
    del m.extra
    assert list(m.children()) == []
    with pytest.raises(AttributeError, match="cannot assign attributes before"):
        class Early(lt.nn.Module):
            def __init__(self):
                self.x = lt.nn.Linear(1, 1)
        Early()


def test_state_dict_shares_values_and_loads_many_array_kinds():
    m = lt.nn.Linear(3, 2)
    sd = m.state_dict()
    sd["bias"].copy_(lt.tensor([5.0, 6.0]))               # torch's state_dict values share storage
    np.testing.assert_array_equal(m.bias.numpy(), [5.0, 6.0])
    w = np.arange(6, dtype=np.float32).reshape(2, 3)
    for value in (w, torch.from_numpy(w), lt.tensor(w), __import__("mlx.core").core.array(w), w.astype(np.float64)):
        weight = m.weight
        m.load_state_dict({"weight": value, "bias": np.zeros(2, np.float32)})
        assert m.weight is weight and m.weight.dtype is lt.float32
        np.testing.assert_array_equal(m.weight.numpy(), w)


def test_strict_loading_errors_match_torch():
    tm, lm = torch.nn.Linear(2, 3), lt.nn.Linear(2, 3)
    bad = {"weight": torch.zeros(3, 2), "extra": torch.zeros(1)}
    with pytest.raises(RuntimeError) as t_err:
        tm.load_state_dict(bad)
    with pytest.raises(RuntimeError) as l_err:
        lm.load_state_dict(bad)
    assert str(l_err.value) == str(t_err.value)
    assert tuple(lm.load_state_dict(bad, strict=False)) == tuple(tm.load_state_dict(bad, strict=False))
    with pytest.raises(RuntimeError) as err:
        lm.load_state_dict({"weight": torch.zeros(3, 3), "bias": torch.zeros(3)})
    text = str(err.value)
    assert "size mismatch for weight" in text and "[3, 3]" in text and "[3, 2]" in text and "float32" in text
    with pytest.raises(RuntimeError) as err:
        lm.load_state_dict({"weight": torch.zeros(3, 2, dtype=torch.int64), "bias": torch.zeros(3)})
    text = str(err.value)
    assert "dtype mismatch for weight" in text and "int64" in text and "float32" in text and "[3, 2]" in text
    with pytest.raises(TypeError, match="dict-like"):
        lm.load_state_dict([1, 2])


def test_train_eval_switches_dropout():
    m = lt.nn.Sequential(lt.nn.Linear(4, 4), lt.nn.Dropout(0.5))
    assert m.training and m[1].training
    x = lt.ones(64, 4) * 3
    lt.manual_seed(0)
    drop = lt.nn.Dropout(0.5)
    y = drop(x).numpy()
    zeros = (y == 0).mean()
    assert 0.3 < zeros < 0.7
    np.testing.assert_allclose(y[y != 0], 6.0)              # kept values are scaled by 1/(1-p)
    assert not np.array_equal(drop(x).numpy(), y)           # a fresh mask per call
    assert m.eval() is m and not m.training and not m[1].training
    np.testing.assert_array_equal(m[1](x).numpy(), x.numpy())
    m.train()
    assert m[1].training


def test_batchnorm_running_statistics_match_torch(on_cpu):
    torch.manual_seed(0)
    tbn, lbn = torch.nn.BatchNorm2d(3, momentum=0.3), lt.nn.BatchNorm2d(3, momentum=0.3)
    with torch.no_grad():
        tbn.weight.uniform_(0.5, 1.5)
        tbn.bias.uniform_(-1, 1)
    lbn.load_state_dict(tbn.state_dict())
    rng = np.random.default_rng(0)
    for step in range(2):                                  # training: batch statistics, buffers updated
        x = (rng.standard_normal((4, 3, 5, 5)) * 2 + step).astype(np.float32)
        expected = tbn(torch.from_numpy(x)).detach().numpy()
        np.testing.assert_allclose(lbn(lt.tensor(x)).numpy(), expected, rtol=1e-4, atol=1e-5)
    for key, value in tbn.state_dict().items():
        np.testing.assert_allclose(lbn.state_dict()[key].numpy(), value.numpy(), rtol=1e-5, atol=1e-6)
    assert lbn.num_batches_tracked.item() == 2
    tbn.eval(), lbn.eval()                                 # eval: the running statistics
    x = rng.standard_normal((2, 3, 4, 4)).astype(np.float32)
    with torch.no_grad():
        expected = tbn(torch.from_numpy(x)).numpy()
    np.testing.assert_allclose(lbn(lt.tensor(x)).numpy(), expected, rtol=1e-4, atol=1e-5)
    assert "running_mean" not in dict(lbn.named_parameters())


def test_a_weight_replaced_by_a_plain_attribute_is_what_forward_reads():
    """A registered weight deleted and set again as a plain tensor (as a reparametrisation does) is
    an ordinary attribute, and the layers' forwards read it, as torch's (they read their own
    weights from the tables first: Module._member)."""
    torch.manual_seed(0)
    x = np.random.default_rng(0).standard_normal((2, 3, 5, 5)).astype(np.float32)
    for make in (lambda nn: nn.Conv2d(3, 4, 3), lambda nn: nn.BatchNorm2d(3)):
        outs = []
        tm, lm = make(torch.nn), make(lt.nn)
        lm.load_state_dict(tm.state_dict())
        for m, lib in ((tm, torch), (lm, lt)):
            w = m.weight.detach() * 2
            del m.weight
            m.weight = w
            assert "weight" not in dict(m.named_parameters())
            outs.append(m(lib.tensor(x)).detach().numpy())
        np.testing.assert_allclose(outs[1], outs[0], rtol=1e-4, atol=1e-5)


def test_hooks_match_torch():
    def run(nn, lib):
        m = nn.Linear(2, 2)
        calls = []
        pre = m.register_forward_pre_hook(lambda mod, args: (args[0] * 2,))
        post = m.register_forward_hook(lambda mod, args, out: calls.append("post") or out + 1)
        m.register_forward_pre_hook(lambda mod, args: calls.append("first"), prepend=True)
        kw = m.register_forward_pre_hook(lambda mod, args, kwargs: (args, kwargs), with_kwargs=True)
        x = lib.ones(1, 2)
        with torch.no_grad():
            a = m(x)
            pre.remove(), post.remove(), kw.remove()
            b = m(x)
        return m, calls, np.asarray(a), np.asarray(b)

    torch.manual_seed(0)
    tm, tcalls, ta, tb = run(torch.nn, torch)
    lm, lcalls, _, _ = run(lt.nn, lt)
    assert lcalls == tcalls == ["first", "post", "first"]
    lm.load_state_dict(tm.state_dict())
    x = lt.ones(1, 2)
    h = lm.register_forward_pre_hook(lambda mod, args: (args[0] * 2,))
    g = lm.register_forward_hook(lambda mod, args, out: out + 1)
    np.testing.assert_allclose(lm(x).numpy(), ta, rtol=1e-6)
    h.remove(), g.remove()
    np.testing.assert_allclose(lm(x).numpy(), tb, rtol=1e-6)


def test_apply_to_half_float_keep_identity():
    m = lt.nn.Sequential(lt.nn.Linear(2, 3), lt.nn.BatchNorm1d(3))
    seen = []
    m.apply(lambda mod: seen.append(type(mod).__name__))
    assert seen == ["Linear", "BatchNorm1d", "Sequential"]    # children first, as torch
    weight = m[0].weight
    assert m.half() is m and m[0].weight is weight and weight.dtype is lt.float16
    assert m[1].running_mean.dtype is lt.float16 and m[1].num_batches_tracked.dtype is lt.int64
    m.float()
    assert weight.dtype is lt.float32
    m.to(lt.float16)
    assert weight.dtype is lt.float16
    m.to("cpu", dtype=lt.float32)
    assert weight.dtype is lt.float32 and m[1].num_batches_tracked.dtype is lt.int64
    with pytest.raises(TypeError, match="floating point"):
        m.to(lt.int32)
    assert m.to(m[0].weight.device) is m


def test_requires_grad_and_zero_grad():
    m = lt.nn.Linear(3, 1)
    loss = m(lt.ones(2, 3)).sum()
    loss.backward()
    assert m.weight.grad is not None and tuple(m.weight.grad.shape) == (1, 3)
    np.testing.assert_allclose(m.weight.grad.numpy(), [[2.0, 2.0, 2.0]])
    m.zero_grad()
    assert m.weight.grad is None and m.bias.grad is None
    m.requires_grad_(False)
    assert not any(p.requires_grad for p in m.parameters())
    p = lt.nn.Parameter(lt.ones(2), requires_grad=False)
    assert not p.requires_grad and repr(p).startswith("Parameter containing:")


def test_functional_names_lazytorch():
    with pytest.raises(AttributeError, match="lazytorch.nn.functional' has no attribute 'ctc_loss'"):
        lt.nn.functional.ctc_loss
    with pytest.raises(AttributeError, match="lazytorch.nn' has no attribute 'Conv4d'"):
        lt.nn.Conv4d
    with pytest.raises(AttributeError, match="lazytorch.nn.CTCLoss is not supported"):
        lt.nn.CTCLoss
    import lazytorch.nn.functional as F
    from lazytorch.nn import functional as F2
    assert F is F2 is lt.nn.functional and F.relu is lt.relu


# ---------------------------------------------------------------- layers vs torch
def _layer_cases():
    rng = np.random.default_rng(1)
    x4 = rng.standard_normal((3, 4)).astype(np.float32)
    x3 = rng.standard_normal((2, 5, 8)).astype(np.float32)
    img = rng.standard_normal((2, 4, 6, 6)).astype(np.float32)
    idx = np.array([[0, 3, 4], [2, 0, 1]])
    acts = [("ReLU", ()), ("ReLU6", ()), ("GELU", ()), ("SiLU", ()), ("Tanh", ()), ("Sigmoid", ()), ("Mish", ()),
            ("ELU", (0.7,)), ("LeakyReLU", (0.2,)), ("Hardswish", ()), ("Hardsigmoid", ()), ("Hardtanh", (-0.5, 0.5)),
            ("Softplus", (2.0,)), ("Softmax", (1,)), ("LogSoftmax", (-1,)), ("Identity", ()), ("Flatten", ())]
    cases = [(name, args, {}, (x4,)) for name, args in acts] + [("GELU", (), {"approximate": "tanh"}, (x4,))]
    cases = [("activations", cases)]                  # evaluated together: one program, one compile
    cases += [("Linear", (4, 3), {}, (x4,)), ("Linear", (8, 2), {"bias": False}, (x3,)),
              ("Bilinear", (4, 4, 3), {}, (x4, x4[::-1].copy())),
              ("Embedding", (5, 3), {"padding_idx": 0}, (idx,)),
              ("LayerNorm", ((5, 8),), {}, (x3,)), ("LayerNorm", (8,), {"elementwise_affine": False}, (x3,)),
              ("RMSNorm", (8,), {"eps": 1e-6}, (x3,)), ("GroupNorm", (2, 4), {}, (img,)),
              ("Unflatten", (1, (2, 2)), {}, (x4,)), ("Flatten", (0, -1), {}, (img,)),
              ("MultiheadAttention", (8, 2), {"batch_first": True}, (x3, x3, x3)),
              ("MultiheadAttention", (8, 4), {}, (x3, x3[:1], x3[:1]))]
    return cases


def _run_layer(case):
    """(lazytorch outputs, torch outputs) of one layer built both ways with torch's weights."""
    name, args, kwargs, inputs = case
    torch.manual_seed(0)
    tlayer = getattr(torch.nn, name)(*args, **kwargs).eval()
    llayer = getattr(lt.nn, name)(*args, **kwargs).eval()
    assert repr(llayer) == repr(tlayer)
    assert list(llayer.state_dict()) == list(tlayer.state_dict())
    llayer.load_state_dict(tlayer.state_dict())
    with torch.no_grad():
        expected = tlayer(*(torch.from_numpy(np.ascontiguousarray(a)) for a in inputs))
    got = llayer(*(lt.tensor(a) for a in inputs))
    return list(zip(got, expected)) if isinstance(expected, tuple) else [(got, expected)]


@pytest.mark.parametrize("case", _layer_cases(), ids=lambda c: c[0])
def test_layer_matches_torch(case, on_cpu):
    cases = case[1] if case[0] == "activations" else [case]
    pairs = [pair for c in cases for pair in _run_layer(c)]
    lt.eval(*(g for g, _ in pairs))
    for g, e in pairs:
        np.testing.assert_allclose(g.numpy(), e.numpy(), rtol=1e-4, atol=1e-5)


def test_multihead_attention_masks_match_torch():
    torch.manual_seed(0)
    tm, lm = torch.nn.MultiheadAttention(8, 2, batch_first=True).eval(), lt.nn.MultiheadAttention(8, 2, batch_first=True)
    lm.load_state_dict(tm.state_dict())
    x = np.random.default_rng(2).standard_normal((2, 5, 8)).astype(np.float32)
    causal = np.triu(np.ones((5, 5), bool), 1)
    pad = np.array([[False] * 5, [False, False, False, True, True]])
    with torch.no_grad():
        t_out, t_w = tm(*(torch.from_numpy(x),) * 3, attn_mask=torch.from_numpy(causal),
                        key_padding_mask=torch.from_numpy(pad), average_attn_weights=False)
    l_out, l_w = lm(*(lt.tensor(x),) * 3, attn_mask=lt.tensor(causal), key_padding_mask=lt.tensor(pad),
                    average_attn_weights=False)
    np.testing.assert_allclose(l_out.numpy(), t_out.numpy(), rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(l_w.numpy(), t_w.numpy(), rtol=1e-4, atol=1e-5)
    l_out2, none = lm(*(lt.tensor(x),) * 3, need_weights=False, is_causal=True, attn_mask=lt.tensor(causal))
    assert none is None
    with torch.no_grad():
        t_out2, _ = tm(*(torch.from_numpy(x),) * 3, need_weights=False, is_causal=True,
                       attn_mask=torch.from_numpy(causal))
    np.testing.assert_allclose(l_out2.numpy(), t_out2.numpy(), rtol=1e-4, atol=1e-5)


def _conv_cases():
    rng = np.random.default_rng(3)
    img = rng.standard_normal((2, 4, 9, 9)).astype(np.float32)
    seq = rng.standard_normal((2, 4, 11)).astype(np.float32)
    return [("Conv2d", (4, 6, 3), {}, img), ("Conv2d", (4, 4, 3), {"stride": 2, "padding": 1, "groups": 2}, img),
            ("Conv2d", (4, 6, (3, 2)), {"padding": "same", "dilation": 2, "bias": False}, img),
            ("Conv1d", (4, 6, 3), {"padding": 1, "stride": 2}, seq),
            ("ConvTranspose2d", (4, 2, 3), {"stride": 2, "padding": 1, "output_padding": 1}, img),
            ("MaxPool2d", (3,), {"stride": 2, "padding": 1}, img), ("AvgPool2d", (2,), {}, img),
            ("AdaptiveAvgPool2d", ((1, 1),), {}, img), ("AdaptiveAvgPool2d", (3,), {}, img),
            ("Upsample", (), {"scale_factor": 2, "mode": "nearest"}, img),
            ("BatchNorm1d", (4,), {}, seq)]


@pytest.mark.parametrize("case", _conv_cases(), ids=lambda c: c[0])
def test_conv_pool_layers_match_torch(case, on_cpu):
    name, args, kwargs, x = case
    torch.manual_seed(0)
    tlayer = getattr(torch.nn, name)(*args, **kwargs).eval()
    llayer = getattr(lt.nn, name)(*args, **kwargs).eval()
    assert repr(llayer) == repr(tlayer)
    llayer.load_state_dict(tlayer.state_dict())
    with torch.no_grad():
        expected = tlayer(torch.from_numpy(x)).numpy()
    np.testing.assert_allclose(llayer(lt.tensor(x)).numpy(), expected, rtol=1e-4, atol=1e-5)


def _loss_cases():
    rng = np.random.default_rng(4)
    logits = rng.standard_normal((6, 5)).astype(np.float32)
    classes = np.array([0, 4, 2, 2, -100, 1])
    probs = torch.log_softmax(torch.from_numpy(logits), 1).numpy()
    y = rng.standard_normal((6, 5)).astype(np.float32)
    bits = (rng.random((6, 5)) > 0.5).astype(np.float32)
    w = np.array([1.0, 2.0, 0.5, 1.0, 3.0], np.float32)
    return [("CrossEntropyLoss", {}, logits, classes), ("CrossEntropyLoss", {"label_smoothing": 0.1}, logits, classes),
            ("NLLLoss", {}, probs, classes), ("NLLLoss", {"reduction": "sum"}, probs, classes),
            ("NLLLoss", {"reduction": "none"}, probs, classes), ("NLLLoss", {"weight": w}, probs, classes),
            ("MSELoss", {}, logits, y), ("L1Loss", {"reduction": "sum"}, logits, y),
            ("SmoothL1Loss", {"beta": 0.5}, logits, y), ("SmoothL1Loss", {"reduction": "none"}, logits, y),
            ("BCEWithLogitsLoss", {}, logits, bits), ("BCEWithLogitsLoss", {"pos_weight": w}, logits, bits),
            ("BCEWithLogitsLoss", {"reduction": "none", "weight": w}, logits, bits)]


def test_loss_modules_match_torch(on_cpu):
    results = []
    for name, kwargs, x, target in _loss_cases():
        t_kwargs = {k: torch.from_numpy(v) if isinstance(v, np.ndarray) else v for k, v in kwargs.items()}
        l_kwargs = {k: lt.tensor(v) if isinstance(v, np.ndarray) else v for k, v in kwargs.items()}
        expected = getattr(torch.nn, name)(**t_kwargs)(torch.from_numpy(x), torch.from_numpy(target)).numpy()
        loss = getattr(lt.nn, name)(**l_kwargs)
        assert repr(loss) == repr(getattr(torch.nn, name)(**t_kwargs))
        results.append((name, loss(lt.tensor(x), lt.tensor(target)), expected))
    lt.eval(*(r for _, r, _ in results))                 # one program for all the losses
    for name, got, expected in results:
        np.testing.assert_allclose(got.numpy(), expected, rtol=1e-5, atol=1e-6, err_msg=name)


# ---------------------------------------------------------------- initialisation
def test_default_initialisation_distributions():
    lt.manual_seed(0)
    lin = lt.nn.Linear(400, 300)
    w, b = lin.weight.numpy(), lin.bias.numpy()
    bound = 1 / math.sqrt(400)                                 # kaiming_uniform(a=sqrt(5)) on fan_in 400
    assert np.abs(w).max() <= bound and np.abs(w).max() > 0.99 * bound
    assert abs(w.std() - bound / math.sqrt(3)) < 0.01 * bound
    assert np.abs(b).max() <= bound and abs(b.mean()) < 0.1 * bound
    emb = lt.nn.Embedding(300, 200, padding_idx=3).weight.numpy()
    assert abs(emb.std() - 1) < 0.02 and abs(emb.mean()) < 0.02 and not emb[3].any()
    conv = lt.nn.Conv2d(16, 32, 3).weight.numpy()
    cbound = 1 / math.sqrt(16 * 9)
    assert np.abs(conv).max() <= cbound and abs(conv.std() - cbound / math.sqrt(3)) < 0.05 * cbound
    ln = lt.nn.LayerNorm(7)
    np.testing.assert_array_equal(ln.weight.numpy(), np.ones(7))
    np.testing.assert_array_equal(ln.bias.numpy(), np.zeros(7))
    mha = lt.nn.MultiheadAttention(16, 4)
    xb = math.sqrt(6 / (16 + 48))
    assert np.abs(mha.in_proj_weight.numpy()).max() <= xb and not mha.in_proj_bias.numpy().any()


def test_init_functions():
    init = lt.nn.init
    for args in (("linear",), ("relu",), ("tanh",), ("leaky_relu", 0.2), ("selu",), ("sigmoid",)):
        assert init.calculate_gain(*args) == pytest.approx(torch.nn.init.calculate_gain(*args))
    lt.manual_seed(1)
    t = lt.empty(300, 200)
    p = lt.nn.Parameter(lt.empty(300, 200))
    assert init.kaiming_normal_(p, mode="fan_out", nonlinearity="relu") is p
    assert abs(p.numpy().std() - math.sqrt(2 / 300)) < 0.02 * math.sqrt(2 / 300)
    init.xavier_uniform_(t, gain=2.0)
    bound = 2.0 * math.sqrt(6 / 500)
    assert np.abs(t.numpy()).max() <= bound and np.abs(t.numpy()).max() > 0.99 * bound
    init.xavier_normal_(t)
    assert abs(t.numpy().std() - math.sqrt(2 / 500)) < 0.03 * math.sqrt(2 / 500)
    init.trunc_normal_(t, mean=0.5, std=1.0, a=-1.0, b=1.5)
    v = t.numpy()
    phi = lambda z: math.exp(-z * z / 2) / math.sqrt(2 * math.pi)  # noqa: E731
    cdf = lambda z: (1 + math.erf(z / math.sqrt(2))) / 2  # noqa: E731
    truncated_mean = 0.5 + (phi(-1.5) - phi(1.0)) / (cdf(1.0) - cdf(-1.5))
    assert v.min() >= -1.0 and v.max() <= 1.5 and abs(v.mean() - truncated_mean) < 0.01
    init.normal_(t, 2.0, 0.5)
    assert abs(t.numpy().mean() - 2.0) < 0.01 and abs(t.numpy().std() - 0.5) < 0.01
    init.uniform_(t, -3, -2)
    assert t.numpy().min() >= -3 and t.numpy().max() < -2
    init.constant_(t, 0.25)
    assert (t.numpy() == 0.25).all()
    q = init.orthogonal_(lt.empty(6, 10)).numpy()
    np.testing.assert_allclose(q @ q.T, np.eye(6), atol=1e-5)
    init.eye_(t)
    np.testing.assert_array_equal(t.numpy(), np.eye(300, 200))
    with pytest.raises(ValueError, match="fewer than 2 dimensions"):
        init.xavier_uniform_(lt.empty(3))


# ---------------------------------------------------------------- containers
def test_containers_behave_like_torch():
    seq = lt.nn.Sequential(collections.OrderedDict([("a", lt.nn.ReLU()), ("b", lt.nn.Tanh())]))
    assert len(seq) == 2 and isinstance(seq[-1], lt.nn.Tanh) and list(seq[1:]._modules) == ["b"]
    seq.append(lt.nn.Identity())
    assert [n for n, _ in seq.named_children()] == ["a", "b", "2"]
    ml = lt.nn.ModuleList([lt.nn.ReLU()])
    ml += [lt.nn.Tanh()]
    ml.insert(0, lt.nn.Identity())
    assert [type(m).__name__ for m in ml] == ["Identity", "ReLU", "Tanh"]
    with pytest.raises(IndexError):
        ml[3]
    md = lt.nn.ModuleDict({"x": lt.nn.ReLU()})
    md["y"] = lt.nn.Tanh()
    assert list(md.keys()) == ["x", "y"] and "y" in md and isinstance(md.pop("x"), lt.nn.ReLU)
    pl = lt.nn.ParameterList([lt.nn.Parameter(lt.ones(2)), lt.ones(3)])
    assert [n for n, _ in pl.named_parameters()] == ["0", "1"] and isinstance(pl[1], lt.nn.Parameter)
    pd = lt.nn.ParameterDict({"w": lt.ones(2)})
    pd["v"] = lt.nn.Parameter(lt.zeros(3))
    assert list(pd) == ["w", "v"] and len(pd) == 2 and "v" in pd and "x" not in pd
    assert [k for k, _ in pd.items()] == ["w", "v"] and [tuple(p.shape) for p in pd.values()] == [(2,), (3,)]
    assert isinstance(pd["w"], lt.nn.Parameter) and [n for n, _ in pd.named_parameters()] == ["w", "v"]


def test_factory_keywords_and_constructor_errors():
    m = lt.nn.Linear(2, 3, device="cpu", dtype=lt.float64)
    assert m.weight.dtype is lt.float64 and m.bias.dtype is lt.float64 and m.weight.device == "cpu"
    assert lt.nn.Conv2d(2, 4, 3, dtype=lt.float16).weight.dtype is lt.float16
    assert lt.nn.LayerNorm(4, dtype=lt.float16).weight.dtype is lt.float16
    with pytest.raises(AssertionError, match="cuda"):
        lt.nn.Linear(2, 3, device="cuda")
    weights = lt.tensor(np.arange(6, dtype=np.float32).reshape(3, 2))
    emb = lt.nn.Embedding.from_pretrained(weights)
    assert not emb.weight.requires_grad
    np.testing.assert_array_equal(emb(lt.tensor([2, 0])).numpy(), [[4, 5], [0, 1]])
    for make, exc, text in [(lambda: lt.nn.Conv2d(3, 4, 3, groups=2), ValueError, "divisible by groups"),
                            (lambda: lt.nn.Conv2d(2, 4, 3, stride=2, padding="same"), ValueError, "strided"),
                            (lambda: lt.nn.Conv2d(2, 4, 3, padding="full"), ValueError, "Invalid padding string"),
                            (lambda: lt.nn.Dropout(1.5), ValueError, "between 0 and 1"),
                            (lambda: lt.nn.GroupNorm(3, 4), ValueError, "divisible by num_groups"),
                            (lambda: lt.nn.MultiheadAttention(6, 4), AssertionError, "divisible by num_heads")]:
        with pytest.raises(exc, match=text):
            make()
    with pytest.raises(ValueError, match="expected 4D input"):
        lt.nn.BatchNorm2d(3)(lt.ones(2, 3))


def test_shared_submodules_and_lookups_match_torch():
    def build_shared(nn):
        shared = nn.Linear(2, 2)
        return nn.Sequential(shared, nn.ReLU(), shared)

    torch.manual_seed(0)
    tm, lm = build_shared(torch.nn), build_shared(lt.nn)
    assert list(lm.state_dict()) == list(tm.state_dict()) == ["0.weight", "0.bias", "2.weight", "2.bias"]
    assert [n for n, _ in lm.named_parameters()] == [n for n, _ in tm.named_parameters()] == ["0.weight", "0.bias"]
    assert [n for n, _ in lm.named_modules(remove_duplicate=False)] == \
        [n for n, _ in tm.named_modules(remove_duplicate=False)]
    assert [n for n, _ in lm.named_parameters(remove_duplicate=False)] == \
        [n for n, _ in tm.named_parameters(remove_duplicate=False)]
    lm.load_state_dict(tm.state_dict())
    assert lm.get_submodule("2") is lm[0] and lm.get_parameter("2.bias") is lm[0].bias
    with pytest.raises(AttributeError, match="no attribute `9`"):
        lm.get_submodule("9")
    x = np.ones((1, 2), np.float32)
    with torch.no_grad():
        np.testing.assert_allclose(lm(lt.tensor(x)).numpy(), tm(torch.from_numpy(x)).numpy(), rtol=1e-6)

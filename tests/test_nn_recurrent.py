"""RNN, LSTM, GRU, their cells and the Transformer family against torch: torch's constructor options,
parameter names and repr, weights loaded from torch's state_dict, outputs and final states compared in
float32 (eval mode), and gradients through an LSTM and a TransformerEncoderLayer compared with torch's
autograd.  Each test evaluates all its cases in one lt.eval (one program per backend)."""
from __future__ import annotations

import numpy as np
import pytest
import torch

import lazytorch as lt
import lazytorch.nn as lnn

RNG = np.random.default_rng(1)


def f32(*shape):
    return RNG.standard_normal(shape).astype(np.float32)


X = f32(4, 2, 3)                     # (L, N, H_in)
H0 = f32(2, 2, 5)                    # (layers * directions, N, H)
SRC, TGT = f32(5, 2, 8), f32(3, 2, 8)

# (class, args, kwargs, inputs, how forward is called)
RNN_CASES = [
    ("LSTM", (3, 5), {"num_layers": 2}, [X], "x"),
    ("LSTM", (3, 5), {"bidirectional": True, "batch_first": True}, [X], "x"),
    ("LSTM", (3, 5), {"proj_size": 2}, [X], "x"),
    ("LSTM", (3, 5), {"num_layers": 2, "bias": False}, [X, H0, f32(2, 2, 5)], "x,(h,c)"),
    ("GRU", (3, 5), {"num_layers": 2, "bidirectional": True}, [X], "x"),
    ("GRU", (3, 5), {}, [X[:, 0], f32(1, 5)], "x,h"),                       # unbatched
    ("RNN", (3, 5), {"nonlinearity": "relu", "num_layers": 2}, [X, H0], "x,h"),
    ("RNN", (3, 5), {"batch_first": True, "bias": False}, [X], "x"),
    ("LSTMCell", (3, 5), {}, [X[0], f32(2, 5), f32(2, 5)], "x,(h,c)"),
    ("GRUCell", (3, 5), {"bias": False}, [X[0]], "x"),
    ("RNNCell", (3, 5), {"nonlinearity": "relu"}, [X[0, 0], f32(5)], "x,h"),
]

MASK = np.triu(np.full((3, 3), -np.inf, np.float32), 1)
PAD = np.array([[False] * 5, [False, False, False, True, True]])
TRANSFORMER_CASES = [
    ("TransformerEncoderLayer", (8, 2, 16), {}, [SRC], "x"),
    ("TransformerEncoderLayer", (8, 2, 16), {"norm_first": True, "activation": "gelu", "batch_first": True},
     [SRC], "x"),
    ("TransformerDecoderLayer", (8, 2, 16), {}, [TGT, SRC, MASK], "tgt,mem,tgt_mask"),
    ("TransformerDecoderLayer", (8, 2, 16), {"norm_first": True, "bias": False}, [TGT, SRC], "tgt,mem"),
    ("Transformer", (8, 2, 2, 1, 16), {}, [SRC, TGT, MASK, PAD], "src,tgt,tgt_mask,src_kpm"),
]


def call(module, lib, inputs, how: str):
    t = [lib.from_numpy(x.copy()) if lib is torch else lt.tensor(x) for x in inputs]
    return {"x": lambda: module(t[0]),
            "x,h": lambda: module(t[0], t[1]),
            "x,(h,c)": lambda: module(t[0], (t[1], t[2])),
            "tgt,mem": lambda: module(t[0], t[1]),
            "tgt,mem,tgt_mask": lambda: module(t[0], t[1], tgt_mask=t[2]),
            "src,tgt,tgt_mask,src_kpm": lambda: module(t[0], t[1], tgt_mask=t[2], src_key_padding_mask=t[3],
                                                       memory_key_padding_mask=t[3])}[how]()


def flat(out) -> list:
    if isinstance(out, (tuple, list)):
        return [t for o in out for t in flat(o)]
    return [out]


def build(case):
    name, args, kwargs, _, _ = case
    torch.manual_seed(0)
    tm = getattr(torch.nn, name)(*args, **kwargs)
    lm = getattr(lnn, name)(*args, **kwargs)
    lm.load_state_dict(tm.state_dict())
    return tm.eval(), lm.eval()


ALL = RNN_CASES + TRANSFORMER_CASES


@pytest.mark.parametrize("case", ALL, ids=[f"{c[0]}-{i}" for i, c in enumerate(ALL)])
def test_structure_matches_torch(case):
    tm, lm = build(case)
    assert repr(lm) == repr(tm)
    assert [(k, tuple(v.shape)) for k, v in lm.state_dict().items()] == \
           [(k, tuple(v.shape)) for k, v in tm.state_dict().items()]


# The reference backend runs every case.  Compiling is the slow part on cpu (each unrolled time step
# adds kernels), so cpu runs a subset that still covers each cell kind, both directions, stacked
# layers, encoder and decoder.  metal-emu interprets its kernels slowly: it runs two cells (the
# attention layers' ops run on metal-emu in the op suite and in tests/test_nn_models.py).
SUBSETS = {"cpu": {"rnn": [RNN_CASES[i] for i in (1, 4, 7, 8)], "transformer": TRANSFORMER_CASES[:3]},
           "metal-emu": {"rnn": [RNN_CASES[8], RNN_CASES[10]], "transformer": []}}


@pytest.mark.filterwarnings("ignore::UserWarning")
@pytest.mark.parametrize("cases", ["rnn", "transformer"])
def test_forward_matches_torch(cases, backend):
    pairs = []
    chosen = SUBSETS[backend][cases] if backend in SUBSETS else RNN_CASES if cases == "rnn" else TRANSFORMER_CASES
    if not chosen:
        pytest.skip(f"{backend} runs no {cases} case (see SUBSETS)")
    for case in chosen:
        tm, lm = build(case)
        with torch.no_grad():
            want = flat(call(tm, torch, case[3], case[4]))
        got = flat(call(lm, lt, case[3], case[4]))
        assert [tuple(g.shape) for g in got] == [tuple(w.shape) for w in want], case[:3]
        pairs.append((case, want, got))
    lt.eval(*[g for _, _, got in pairs for g in got])
    for case, want, got in pairs:
        for w, g in zip(want, got):
            np.testing.assert_allclose(g.numpy(), w.numpy(), rtol=1e-4, atol=2e-5, err_msg=str(case[:3]))


def test_gradients_match_torch_autograd():
    """d(sum(out * w))/d(parameters, input) through a 2-layer bidirectional LSTM and a pre-norm
    TransformerEncoderLayer (train mode, dropout 0), against torch's autograd.  On the reference
    backend: the graph autograd builds is the same on every backend, and compiling the unrolled
    backward on cpu costs seconds."""
    previous = lt.get_backend()
    lt.set_backend("reference")
    try:
        _check_gradients()
    finally:
        lt.set_backend(previous)


def _check_gradients() -> None:
    cases = [("LSTM", (3, 4), {"num_layers": 2, "bidirectional": True}, X),
             ("TransformerEncoderLayer", (8, 2, 16), {"dropout": 0.0, "norm_first": True}, SRC)]
    for name, args, kwargs, x in cases:
        torch.manual_seed(0)
        tm, lm = getattr(torch.nn, name)(*args, **kwargs), getattr(lnn, name)(*args, **kwargs)
        lm.load_state_dict(tm.state_dict())
        tx, lx = torch.from_numpy(x.copy()).requires_grad_(), lt.tensor(x, requires_grad=True)
        tout, lout = flat(tm(tx))[0], flat(lm(lx))[0]
        w = f32(*tout.shape)
        (tout * torch.from_numpy(w)).sum().backward()
        (lout * lt.tensor(w)).sum().backward()
        np.testing.assert_allclose(lx.grad.numpy(), tx.grad.numpy(), rtol=1e-4, atol=1e-5, err_msg=name)
        lparams = dict(lm.named_parameters())
        for k, p in tm.named_parameters():
            np.testing.assert_allclose(lparams[k].grad.numpy(), p.grad.numpy(), rtol=1e-4, atol=1e-5,
                                       err_msg=f"{name}.{k}")


def test_rnn_dropout_between_layers_in_training_only():
    lt.set_backend("reference")                      # the suite's autouse fixture restores the backend
    m = lnn.LSTM(3, 5, num_layers=2, dropout=0.5)
    x = lt.tensor(X[:2])
    a, b = m.eval()(x)[0].numpy(), m.eval()(x)[0].numpy()
    np.testing.assert_array_equal(a, b)
    c = m.train()(x)[0].numpy()
    assert not np.allclose(a, c)                     # the second layer saw a dropped-out input


def test_generate_square_subsequent_mask():
    np.testing.assert_array_equal(lnn.Transformer.generate_square_subsequent_mask(4).numpy(),
                                  torch.nn.Transformer.generate_square_subsequent_mask(4).numpy())


def test_bad_arguments_raise_as_torch():
    with pytest.raises(ValueError, match="proj_size argument is only supported for LSTM"):
        lnn.RNNBase("GRU", 3, 4, proj_size=2)
    with pytest.raises(ValueError, match="Unknown nonlinearity"):
        lnn.RNN(3, 4, nonlinearity="gelu")
    with pytest.raises(RuntimeError, match="input.size\\(-1\\) must be equal to input_size"):
        lnn.LSTM(3, 4)(lt.tensor(f32(2, 1, 5)))
    with pytest.raises(RuntimeError, match="Expected hidden size"):
        lnn.GRU(3, 4)(lt.tensor(X), lt.tensor(f32(2, 2, 4)))
    with pytest.raises(RuntimeError, match="activation should be relu/gelu"):
        lnn.TransformerEncoderLayer(8, 2, activation="tanh")

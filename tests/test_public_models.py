"""Model files of pytorch/examples (BSD-3, kept verbatim under tests/models/pytorch_examples_*.py with
their licence header) run with `import torch` and with lazytorch substituted on their import lines,
the lazytorch model loading the torch model's state_dict(), outputs compared in eval mode (float32,
rtol 1e-4 / atol 1e-5; the time-series model runs in float64 as its script does):

- fast_neural_style TransformerNet (ReflectionPad2d, InstanceNorm2d, Upsample-then-conv)
- super_resolution Net (PixelShuffle, orthogonal init)
- word_language_model RNNModel (2-layer LSTM, GRU with tied weights) and TransformerModel
  (TransformerEncoder, PositionalEncoding, a square subsequent mask)
- time_sequence_prediction Sequence (two LSTMCells unrolled step by step, plus future steps)
- distributed/minGPT-ddp's GPT (its own attention, GELU, dataclass config)
- language_translation's Translator (nn.Transformer with bool, float and key-padding masks)
- mnist_rnn's Net (a batch-first LSTM over 28 rows, BatchNorm1d, Dropout2d on a 2D input)

They run on the cpu backend (metal-emu interprets kernels slowly: 15 to 30 s per model; the ops they
use are covered on metal-emu by the op suite and tests/test_nn_models.py).
distributed/tensor_parallelism/llama2_model.py is not included: its rotary embedding needs complex
tensors (torch.polar, view_as_complex), which lazytorch refuses with a NotImplementedError at model
construction (docs/nn.md)."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import numpy as np
import pytest
import torch

import lazytorch as lt
from conftest import BACKENDS
from test_nn_models import _mnist_prepare, copy_weights, load_pair

RNG = np.random.default_rng(7)


def _no_matplotlib(text: str) -> str:
    """time_sequence_prediction/train.py plots with matplotlib, which the test machine need not have."""
    return text.replace("import matplotlib\nmatplotlib.use('Agg')\nimport matplotlib.pyplot as plt\n",
                        "\n\n\n")


def _gpt_config(module):
    return module.GPTConfig(model_type=None, n_layer=2, n_head=2, n_embd=16, vocab_size=50, block_size=16)


@dataclass(frozen=True)
class PublicModel:
    file: str
    build: Callable                     # build(module) -> the model, from the executed file
    inputs: Callable                    # () -> list of numpy inputs
    forward: Callable | None = None     # forward(model, *inputs) -> output tensor; None: model(*inputs)
    prepare: Callable | None = None     # edits the file's text for both libraries (stubs)
    changed: int = 3                    # import lines that differ between the two texts
    dtype: type | None = np.float32     # the float inputs' dtype (None: integer token ids)
    backend: str | None = None          # run on this backend instead of the fixture's


def _translation_inputs() -> list:
    """Token ids, a bool source mask, a float causal target mask and bool key-padding masks."""
    src_pad, tgt_pad = np.zeros((2, 6), bool), np.zeros((2, 5), bool)
    src_pad[1, 4:], tgt_pad[0, 3:] = True, True
    return [RNG.integers(0, 30, (6, 2)), RNG.integers(0, 40, (5, 2)), np.zeros((6, 6), bool),
            np.triu(np.full((5, 5), -np.inf, np.float32), 1), src_pad, tgt_pad, src_pad]


def _hidden_forward(m, x):
    return m(x, m.init_hidden(3))[0]


MODELS = {
    "transformer_net": PublicModel("pytorch_examples_transformer_net.py", lambda M: M.TransformerNet(),
                                   lambda: [RNG.standard_normal((1, 3, 24, 24))], changed=1),
    "super_resolution": PublicModel("pytorch_examples_super_resolution.py", lambda M: M.Net(3),
                                    lambda: [RNG.standard_normal((1, 1, 12, 12))]),
    "rnn_lstm": PublicModel("pytorch_examples_word_language_model.py",
                            lambda M: M.RNNModel("LSTM", 40, 16, 24, 2, dropout=0.2),
                            lambda: [RNG.integers(0, 40, (4, 3))], _hidden_forward, dtype=None),
    "rnn_gru_tied": PublicModel("pytorch_examples_word_language_model.py",
                                lambda M: M.RNNModel("GRU", 40, 24, 24, 2, tie_weights=True),
                                lambda: [RNG.integers(0, 40, (4, 3))], _hidden_forward, dtype=None),
    "transformer_lm": PublicModel("pytorch_examples_word_language_model.py",
                                  lambda M: M.TransformerModel(40, 16, 2, 32, 2),
                                  lambda: [RNG.integers(0, 40, (6, 3))], dtype=None),
    "time_sequence": PublicModel("pytorch_examples_time_sequence_prediction.py", lambda M: M.Sequence().double(),
                                 lambda: [RNG.standard_normal((3, 8))], lambda m, x: m(x, future=3),
                                 prepare=_no_matplotlib, dtype=np.float64),
    "mingpt": PublicModel("pytorch_examples_mingpt.py", lambda M: M.GPT(_gpt_config(M)),
                          lambda: [RNG.integers(0, 50, (2, 8))], lambda m, x: m(x)[0], dtype=None),
    "translator": PublicModel("pytorch_examples_translation.py", lambda M: M.Translator(1, 1, 16, 2, 30, 40, 32, 0.1),
                              _translation_inputs, dtype=None, backend="reference"),
    # these two repeat what models above run on cpu (a Transformer, an LSTM; 28 steps here), and
    # compiling them takes seconds, so they run on the reference backend
    "mnist_rnn": PublicModel("pytorch_examples_mnist_rnn.py", lambda M: M.Net(),
                             lambda: [RNG.standard_normal((2, 1, 28, 28))], prepare=_mnist_prepare,
                             backend="reference"),
}


@pytest.fixture(params=[b for b in ("cpu",) if b in BACKENDS])       # LAZYTORCH_TEST_BACKENDS narrows
def backend_name(request):
    previous = lt.get_backend()
    lt.set_backend(request.param)
    yield request.param
    lt.set_backend(previous)


@pytest.mark.filterwarnings("ignore::UserWarning")
@pytest.mark.parametrize("name", list(MODELS))
def test_public_model_matches_torch(name, backend_name, capsys):
    spec = MODELS[name]
    if spec.backend is not None:
        lt.set_backend(spec.backend)          # the fixture restores the backend afterwards
    tmod, lmod = load_pair(spec.file, spec.prepare or (lambda text: text), expected_changes=spec.changed)
    torch.manual_seed(0)
    tmodel, lmodel = spec.build(tmod).eval(), spec.build(lmod).eval()
    copy_weights(tmodel, lmodel)
    xs = [x.astype(spec.dtype) if spec.dtype is not None else x for x in spec.inputs()]
    forward = spec.forward or (lambda m, *a: m(*a))
    with torch.no_grad():
        expected = forward(tmodel, *[torch.from_numpy(x) for x in xs]).numpy()
    got = forward(lmodel, *[lt.tensor(x) for x in xs]).numpy()
    assert got.shape == expected.shape and got.dtype == expected.dtype
    np.testing.assert_allclose(got, expected, rtol=1e-4, atol=1e-5)

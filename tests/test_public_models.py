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

They run on the cpu backend (metal-emu interprets kernels slowly: 15 to 30 s per model; the ops they
use are covered on metal-emu by the op suite and tests/test_nn_models.py).
distributed/tensor_parallelism/llama2_model.py is not included: its rotary embedding needs complex
tensors (torch.polar, view_as_complex), which lazytorch refuses with a NotImplementedError at model
construction (docs/nn.md)."""
from __future__ import annotations

import numpy as np
import pytest
import torch

import lazytorch as lt
from conftest import BACKENDS
from test_nn_models import copy_weights, load_pair

RNG = np.random.default_rng(7)


def _no_matplotlib(text: str) -> str:
    """time_sequence_prediction/train.py plots with matplotlib, which the test machine need not have."""
    return text.replace("import matplotlib\nmatplotlib.use('Agg')\nimport matplotlib.pyplot as plt\n",
                        "\n\n\n")


def _gpt_config(module):
    return module.GPTConfig(model_type=None, n_layer=2, n_head=2, n_embd=16, vocab_size=50, block_size=16)


# name -> (file, prepare, import lines changed, build(module), inputs, forward(model, *inputs), dtype)
MODELS = {
    "transformer_net": ("pytorch_examples_transformer_net.py", None, 1, lambda M: M.TransformerNet(),
                        lambda: [RNG.standard_normal((1, 3, 24, 24))], None, np.float32),
    "super_resolution": ("pytorch_examples_super_resolution.py", None, 3, lambda M: M.Net(3),
                         lambda: [RNG.standard_normal((1, 1, 12, 12))], None, np.float32),
    "rnn_lstm": ("pytorch_examples_word_language_model.py", None, 3,
                 lambda M: M.RNNModel("LSTM", 40, 16, 24, 2, dropout=0.2),
                 lambda: [RNG.integers(0, 40, (4, 3))], lambda m, x: m(x, m.init_hidden(3))[0], None),
    "rnn_gru_tied": ("pytorch_examples_word_language_model.py", None, 3,
                     lambda M: M.RNNModel("GRU", 40, 24, 24, 2, tie_weights=True),
                     lambda: [RNG.integers(0, 40, (4, 3))], lambda m, x: m(x, m.init_hidden(3))[0], None),
    "transformer_lm": ("pytorch_examples_word_language_model.py", None, 3,
                       lambda M: M.TransformerModel(40, 16, 2, 32, 2),
                       lambda: [RNG.integers(0, 40, (6, 3))], None, None),
    "time_sequence": ("pytorch_examples_time_sequence_prediction.py", _no_matplotlib, 3,
                      lambda M: M.Sequence().double(), lambda: [RNG.standard_normal((3, 8))],
                      lambda m, x: m(x, future=3), np.float64),
    "mingpt": ("pytorch_examples_mingpt.py", None, 3, lambda M: M.GPT(_gpt_config(M)),
               lambda: [RNG.integers(0, 50, (2, 8))], lambda m, x: m(x)[0], None),
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
    filename, prepare, changed, build, inputs, forward, dtype = MODELS[name]
    tmod, lmod = load_pair(filename, prepare or (lambda text: text), expected_changes=changed)
    torch.manual_seed(0)
    tmodel, lmodel = build(tmod).eval(), build(lmod).eval()
    copy_weights(tmodel, lmodel)
    xs = [x.astype(dtype) if dtype is not None else x for x in inputs()]
    forward = forward or (lambda m, *a: m(*a))
    with torch.no_grad():
        expected = forward(tmodel, *[torch.from_numpy(x) for x in xs]).numpy()
    got = forward(lmodel, *[lt.tensor(x) for x in xs]).numpy()
    assert got.shape == expected.shape and got.dtype == expected.dtype
    np.testing.assert_allclose(got, expected, rtol=1e-4, atol=1e-5)

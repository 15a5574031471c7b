"""A small GPT written once over `ns` (lazytorch or torch) with plain tensors and functionals, so
both libraries run the same model from the same weights (used by the training tests)."""
from __future__ import annotations

import numpy as np


def init_params(vocab: int, n_embd: int, n_layer: int, block: int, seed: int = 0) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    w = lambda *s: (rng.standard_normal(s) * 0.02).astype(np.float32)  # noqa: E731
    P = {"wte": w(vocab, n_embd), "wpe": w(block, n_embd),
         "lnf_w": np.ones(n_embd, np.float32), "lnf_b": np.zeros(n_embd, np.float32)}
    for i in range(n_layer):
        P.update({f"ln1_w{i}": np.ones(n_embd, np.float32), f"ln1_b{i}": np.zeros(n_embd, np.float32),
                  f"attn_w{i}": w(3 * n_embd, n_embd), f"attn_b{i}": np.zeros(3 * n_embd, np.float32),
                  f"proj_w{i}": w(n_embd, n_embd), f"proj_b{i}": np.zeros(n_embd, np.float32),
                  f"ln2_w{i}": np.ones(n_embd, np.float32), f"ln2_b{i}": np.zeros(n_embd, np.float32),
                  f"fc_w{i}": w(4 * n_embd, n_embd), f"fc_b{i}": np.zeros(4 * n_embd, np.float32),
                  f"fc2_w{i}": w(n_embd, 4 * n_embd), f"fc2_b{i}": np.zeros(n_embd, np.float32)})
    return P


def gpt_loss(ns, P: dict, idx, targets, n_layer: int, n_head: int):
    F = ns.nn.functional
    B, T = idx.shape
    C = P["wte"].shape[1]
    x = F.embedding(idx, P["wte"]) + P["wpe"][:T]
    for i in range(n_layer):
        h = F.layer_norm(x, (C,), P[f"ln1_w{i}"], P[f"ln1_b{i}"])
        q, k, v = F.linear(h, P[f"attn_w{i}"], P[f"attn_b{i}"]).split(C, dim=2)
        q, k, v = (t.view(B, T, n_head, C // n_head).transpose(1, 2) for t in (q, k, v))
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        y = y.transpose(1, 2).contiguous().view(B, T, C)
        x = x + F.linear(y, P[f"proj_w{i}"], P[f"proj_b{i}"])
        h = F.layer_norm(x, (C,), P[f"ln2_w{i}"], P[f"ln2_b{i}"])
        x = x + F.linear(F.gelu(F.linear(h, P[f"fc_w{i}"], P[f"fc_b{i}"])), P[f"fc2_w{i}"], P[f"fc2_b{i}"])
    x = F.layer_norm(x, (C,), P["lnf_w"], P["lnf_b"])
    logits = F.linear(x, P["wte"])
    return F.cross_entropy(logits.view(-1, logits.shape[-1]), targets.view(-1))

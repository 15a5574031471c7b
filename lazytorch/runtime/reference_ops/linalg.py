"""Reference implementation of the matmul primitive (numpy BLAS for floats, exact int64 for ints)."""
from __future__ import annotations

import numpy as np

from ...ir.node import Node
from . import accumulation, finish, np_compute, ref


@ref("matmul")
def _matmul(node: Node, a, b):
    acc = accumulation(node.dtype)
    x = np_compute(a, node.inputs[0].dtype, acc)
    y = np_compute(b, node.inputs[1].dtype, acc)
    with np.errstate(all="ignore"):
        return finish(np.matmul(x, y), node)


@ref("scaled_dot_product_attention")
def _sdpa(node: Node, q, k, v):
    """sdpa in the form a backend keeps whole (passes/decompositions/nn.py::fused_attention_form:
    no mask but the causal one, no dropout): its host fallback, computed in float32 (float64 for
    float64) as the decomposition does."""
    acc = accumulation(node.dtype)
    q, k, v = (np_compute(x, i.dtype, acc) for x, i in zip((q, k, v), node.inputs))
    scale = node.attrs["scale"]
    scale = 1.0 / np.sqrt(q.shape[-1]) if scale is None else scale
    with np.errstate(all="ignore"):
        s = np.matmul(q, np.swapaxes(k, -1, -2)) * np.asarray(scale, acc.np)
        if node.attrs["is_causal"]:
            L, S = s.shape[-2:]
            s = np.where(np.tril(np.ones((L, S), bool)), s, -np.inf)
        s = np.exp(s - s.max(-1, keepdims=True))
        out = np.matmul(s / s.sum(-1, keepdims=True), v)
    return finish(out, node)

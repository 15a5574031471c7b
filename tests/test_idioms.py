"""Everyday one-line PyTorch idioms, each run by lazytorch and by torch on the same data.

Each idiom is written once against a module `m` (lazytorch or torch) and inputs `a` (3x4 float32),
`b` (4, float32), `i` (int64 indices 0..3, shape 5) and `mask` (3x4 bool).  They run one by one on
the reference backend; on cpu all of them compile as one program (one C compiler run), which also
checks that many unrelated roots share a plan; metal-emu (one g++ run per kernel) runs the idioms
the trial found broken there, as one program.
"""
from __future__ import annotations

import numpy as np
import pytest
import torch

import lazytorch as lt

RNG = np.random.default_rng(7)
A = RNG.standard_normal((3, 4)).astype(np.float32)
B = RNG.standard_normal(4).astype(np.float32)
I = np.array([0, 3, 1, 1, 2], np.int64)
MASK = A > 0.2

IDIOMS = {
    "relu_via_clamp": lambda m, a, b, i, mask: a.clamp(min=0),
    "normalize_rows": lambda m, a, b, i, mask: a / a.norm(dim=1, keepdim=True),
    "softmax_last": lambda m, a, b, i, mask: a.softmax(-1),
    "log_softmax": lambda m, a, b, i, mask: m.log_softmax(a, dim=1),
    "mean_std": lambda m, a, b, i, mask: (a - a.mean()) / a.std(),
    "broadcast_bias": lambda m, a, b, i, mask: a + b,
    "outer_product": lambda m, a, b, i, mask: b[:, None] * b[None, :],
    "matmul_t": lambda m, a, b, i, mask: a @ a.T,
    "matvec": lambda m, a, b, i, mask: a @ b,
    "argmax_rows": lambda m, a, b, i, mask: a.argmax(dim=1),
    "max_values": lambda m, a, b, i, mask: a.max(dim=0).values,
    "masked_fill": lambda m, a, b, i, mask: a.masked_fill(mask, 0.0),
    "where_sign": lambda m, a, b, i, mask: m.where(a > 0, a, -a),
    "count_true": lambda m, a, b, i, mask: mask.sum(),
    "float_mask_mean": lambda m, a, b, i, mask: mask.float().mean(),
    "index_rows": lambda m, a, b, i, mask: b[i],
    "slice_step": lambda m, a, b, i, mask: a[:, ::2],
    "last_column": lambda m, a, b, i, mask: a[..., -1],
    "flatten": lambda m, a, b, i, mask: a.flatten(),
    "view_reshape": lambda m, a, b, i, mask: a.view(2, 6).sum(1),
    "transpose_contiguous": lambda m, a, b, i, mask: a.t().contiguous() * 2,
    "unsqueeze_expand": lambda m, a, b, i, mask: b.unsqueeze(0).expand(3, 4) - a,
    "cat_rows": lambda m, a, b, i, mask: m.cat([a, a * 2], dim=0),
    "stack_cols": lambda m, a, b, i, mask: m.stack([b, b + 1], dim=1),
    "cumsum": lambda m, a, b, i, mask: a.cumsum(1),
    "pow_sum": lambda m, a, b, i, mask: (a ** 2).sum(dim=-1).sqrt(),
    "abs_max": lambda m, a, b, i, mask: a.abs().max(),
    "clip_norm_factor": lambda m, a, b, i, mask: (1.0 / (a.norm() + 1e-6)).clamp(max=1.0),
    "one_hot_like": lambda m, a, b, i, mask: (i[:, None] == m.arange(4)[None, :]).float(),
    "arange_float": lambda m, a, b, i, mask: m.arange(0, 1, 0.25) * b,
    "linspace_scale": lambda m, a, b, i, mask: a * m.linspace(0, 1, steps=4),
    "zeros_like_add": lambda m, a, b, i, mask: m.zeros_like(a) + 1,
    "full_fill": lambda m, a, b, i, mask: m.full((2, 3), 7.5),
    "eye_mul": lambda m, a, b, i, mask: m.eye(4) * b,
    "sigmoid_gate": lambda m, a, b, i, mask: m.sigmoid(a) * a,
    "gelu": lambda m, a, b, i, mask: m.nn.functional.gelu(a),
    "layer_norm": lambda m, a, b, i, mask: m.nn.functional.layer_norm(a, (4,)),
    "mse": lambda m, a, b, i, mask: m.nn.functional.mse_loss(a, a * 0.5),
    "cross_entropy": lambda m, a, b, i, mask: m.nn.functional.cross_entropy(a, i[:3]),
    "norm_fro": lambda m, a, b, i, mask: m.norm(a, "fro"),
    "norm_neg_orders": lambda m, a, b, i, mask: m.norm(a, -1) + m.norm(a, -2),
    "int_div": lambda m, a, b, i, mask: i // 2 + i % 2,
    "to_half_and_back": lambda m, a, b, i, mask: a.half().float(),
    "mean_keepdim": lambda m, a, b, i, mask: a - a.mean(dim=1, keepdim=True),
    "logsumexp": lambda m, a, b, i, mask: m.logsumexp(a, dim=1),
    "topk_like_sort_free": lambda m, a, b, i, mask: a.amax(dim=1) - a.amin(dim=1),
    "scalar_chain": lambda m, a, b, i, mask: ((a * 0.999 + 0.001) * 0.999 + 0.001).sum(),
    "sum_of_list": lambda m, a, b, i, mask: sum([a * k for k in range(30)]).mean(),
}


def args(m):
    return m.tensor(A), m.tensor(B), m.tensor(I), m.tensor(MASK)


def host(v) -> np.ndarray:
    if isinstance(v, torch.Tensor):
        return v.double().numpy() if v.dtype != torch.bool else v.numpy()
    arr = np.asarray(v.numpy())
    return arr.astype(np.float64) if arr.dtype != np.bool_ else arr


def check(got, want) -> None:
    g, w = host(got), host(want)
    assert g.shape == w.shape
    assert str(got.dtype).split(".")[-1] == str(want.dtype).split(".")[-1]
    np.testing.assert_allclose(g, w, rtol=1e-4, atol=1e-5)


METAL_EMU = ["arange_float", "linspace_scale", "scalar_chain", "sum_of_list", "norm_neg_orders", "norm_fro"]


@pytest.mark.parametrize("name", list(IDIOMS))
def test_idiom(on_reference, name):
    f = IDIOMS[name]
    check(f(lt, *args(lt)), f(torch, *args(torch)))


@pytest.mark.parametrize("backend_name,names", [("cpu", list(IDIOMS)), ("metal-emu", METAL_EMU)])
def test_idioms_as_one_program(backend_name, names):
    previous = lt.get_backend()
    lt.set_backend(backend_name)
    try:
        a = args(lt)
        got = {name: IDIOMS[name](lt, *a) for name in names}
        lt.eval(*got.values())
        for name in names:
            check(got[name], IDIOMS[name](torch, *args(torch)))
    finally:
        lt.set_backend(previous)

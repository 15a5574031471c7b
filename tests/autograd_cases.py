"""The gradient suite's cases: every differentiable op of the registry as a function of `ns`
(lazytorch or torch, whose APIs match) over float inputs, with one or two shapes each (broadcasting,
views, 0-d, size-1 and empty among them).

An input spec is a shape (standard normal data), ("pos", shape) (values in [0.5, 2]),
("unit", shape) (values in (-0.9, 0.9)) or ("int", shape, high) (int64 in [0, high), no grad).
"""
from __future__ import annotations

import numpy as np

F = lambda ns: ns.nn.functional  # noqa: E731

# name -> (function of (ns, *inputs), input specs)
CASES: dict = {}


def case(name, fn, *specs):
    CASES[name] = (fn, specs)


UNARY = {
    "exp": None, "exp2": None, "expm1": None, "sin": None, "cos": None, "tan": "unit", "atan": None,
    "sinh": None, "cosh": None, "tanh": None, "erf": None, "sigmoid": None, "neg": None, "abs": None,
    "square": None, "relu": None, "log": "pos", "log2": "pos", "log10": "pos", "log1p": "pos", "sqrt": "pos",
    "rsqrt": "pos", "reciprocal": "pos", "asin": "unit", "acos": "unit", "floor": None, "sign": None,
}
for _op, _dom in UNARY.items():
    case(_op, (lambda op: lambda ns, x: getattr(ns, op)(x))(_op), (_dom, (3, 4)) if _dom else (3, 4))

ACTIVATIONS = ["gelu", "silu", "softplus", "mish", "elu", "leaky_relu", "hardtanh", "hardsigmoid", "hardswish"]
for _op in ACTIVATIONS:
    case(_op, (lambda op: lambda ns, x: getattr(F(ns), op)(x))(_op), (4, 5))
case("gelu_tanh", lambda ns, x: F(ns).gelu(x, approximate="tanh"), (4, 5))
case("softplus_beta", lambda ns, x: F(ns).softplus(x, beta=2.0, threshold=1.0), (4, 5))
case("elu_alpha", lambda ns, x: F(ns).elu(x, alpha=0.5), (4, 5))
case("leaky_relu_slope", lambda ns, x: F(ns).leaky_relu(x, 0.2), (4, 5))

# binary: broadcasting and a Python scalar operand
case("add_bcast", lambda ns, x, y: x + y, (3, 4), (4,))
case("add_alpha", lambda ns, x, y: ns.add(x, y, alpha=2.5), (3, 1), (1, 4))
case("sub_bcast", lambda ns, x, y: x - y, (2, 3, 4), (3, 1))
case("rsub_scalar", lambda ns, x: 2.0 - x, (3,))
case("mul_bcast", lambda ns, x, y: x * y, (3, 4), (3, 1))
case("mul_self", lambda ns, x: x * x, (5,))
case("div_bcast", lambda ns, x, y: x / y, (3, 4), ("pos", (4,)))
case("rdiv_scalar", lambda ns, x: 1.5 / x, ("pos", (3, 2)))
case("pow_scalar", lambda ns, x: x ** 3, (3, 4))
case("pow_tensor", lambda ns, x, y: ns.pow(x, y), ("pos", (3, 4)), (4,))
case("rpow", lambda ns, x: 2.0 ** x, (3,))
case("maximum", lambda ns, x, y: ns.maximum(x, y), (3, 4), (4,))
case("minimum", lambda ns, x, y: ns.minimum(x, y), (3, 4), (3, 4))
case("atan2", lambda ns, x, y: ns.atan2(x, y), (3, 4), ("pos", (3, 4)))
case("remainder", lambda ns, x: ns.remainder(x, 0.7), (3, 4))
case("where", lambda ns, x, y: ns.where(x > 0, x, y), (3, 4), (4,))
case("clamp", lambda ns, x: ns.clamp(x, -0.5, 0.5), (3, 4))
case("clamp_min", lambda ns, x: ns.clamp_min(x, 0.1), (3, 4))
case("clamp_tensor", lambda ns, x, lo: ns.clamp(x, min=lo), (3, 4), (4,))
case("lerp", lambda ns, x, y, w: ns.lerp(x, y, w), (3, 4), (3, 4), (4,))
case("addcmul", lambda ns, x, y, z: ns.addcmul(x, y, z, value=0.5), (3, 4), (3, 4), (4,))
case("addcdiv", lambda ns, x, y, z: ns.addcdiv(x, y, z, value=2.0), (3, 4), (3, 4), ("pos", (3, 4)))
case("masked_fill", lambda ns, x: x.masked_fill(x > 0.5, 0.0), (3, 4))
case("to_float64", lambda ns, x: x.to(ns.float64) * 2, (3, 4))
case("clone", lambda ns, x: x.clone() * x, (3, 4))

# reductions
case("sum_all", lambda ns, x: x.sum(), (3, 4))
case("sum_dim", lambda ns, x: x.sum(1), (3, 4, 2))
case("sum_dims_keep", lambda ns, x: x.sum((0, 2), keepdim=True), (3, 4, 2))
case("sum_0d", lambda ns, x: x.sum(), ())
case("sum_empty", lambda ns, x: x.sum(0) + 1.0, (0, 3))
case("mean_dim", lambda ns, x: x.mean(-1), (3, 4))
case("mean_all", lambda ns, x: x.mean(), (2, 3, 4))
case("prod_dim", lambda ns, x: x.prod(1), ("pos", (3, 4)))
case("amax_dim", lambda ns, x: x.amax(1), (3, 4))
case("max_dim", lambda ns, x: x.max(0).values, (3, 4))
case("min_all", lambda ns, x: x.min(), (3, 4))
case("var_dim", lambda ns, x: x.var(1), (3, 4))
case("std_all", lambda ns, x: x.std(), (3, 4))
case("var_corr0", lambda ns, x: x.var(0, correction=0, keepdim=True), (3, 4))
case("logsumexp", lambda ns, x: ns.logsumexp(x, 1), (3, 4))
case("norm", lambda ns, x: x.norm(), (3, 4))
case("norm_dim_p1", lambda ns, x: x.norm(p=1, dim=1), (3, 4))
case("norm_p3", lambda ns, x: ns.norm(x, p=3, dim=0), (3, 4))
case("cumsum", lambda ns, x: x.cumsum(1), (3, 4))

# views and data movement
case("reshape", lambda ns, x: x.reshape(4, 3) * 2, (3, 4))
case("view_flatten", lambda ns, x: x.view(-1).flatten() * 2, (3, 4))
case("transpose", lambda ns, x: x.transpose(0, 1) @ x, (3, 4))
case("permute", lambda ns, x: x.permute(2, 0, 1) * 1.5, (2, 3, 4))
case("t_noncontig_mul", lambda ns, x, y: x.t() * y, (3, 4), (4, 3))
case("slice_step", lambda ns, x: x[1:, ::2] * 3, (3, 4))
case("select", lambda ns, x: x[1] * 2, (3, 4))
case("narrow", lambda ns, x: x.narrow(1, 1, 2) * 2, (3, 4))
case("expand", lambda ns, x: x.expand(3, 4) * 2, (1, 4))
case("unsqueeze_squeeze", lambda ns, x: x.unsqueeze(0).squeeze(0).unsqueeze(-1) * 2, (3, 4))
case("flip", lambda ns, x, y: x.flip(1) * y, (3, 4), (4,))
case("split", lambda ns, x: x.split(2, 1)[1] * 2, (3, 4))
case("chunk_unbind", lambda ns, x: x.chunk(2, 0)[0] * x.unbind(0)[2], (4, 3))
case("cat", lambda ns, x, y: ns.cat([x, y * 2], 0), (2, 4), (3, 4))
case("stack", lambda ns, x, y: ns.stack([x, y], 1), (3, 4), (3, 4))
case("pad", lambda ns, x: F(ns).pad(x, (1, 2)), (3, 4))
case("pad_2d_of_a_view", lambda ns, x: F(ns).pad(x.transpose(0, 1), (1, 0, 2, 1), value=0.5), (3, 4))
case("repeat", lambda ns, x: x.repeat(2, 3), (2, 3))
case("roll", lambda ns, x: x.roll(1, 1), (3, 4))
case("tril", lambda ns, x: x.tril(), (4, 4))
case("contiguous_of_view", lambda ns, x: x.t().contiguous() * 2, (3, 4))
case("gather", lambda ns, x, i: x.gather(1, i), (3, 5), ("int", (3, 2), 5))
case("index_select", lambda ns, x, i: x.index_select(0, i), (4, 3), ("int", (5,), 4))
case("index_tensor", lambda ns, x, i: x[:, i], (3, 4), ("int", (2, 2), 4))
case("setitem_view", lambda ns, x, y: _setitem(x, y), (3, 4), (4,))
case("inplace_chain", lambda ns, x: _inplace(x), (3, 4))

# linear algebra
case("matmul", lambda ns, x, y: x @ y, (3, 4), (4, 5))
case("matmul_batched_bcast", lambda ns, x, y: x @ y, (2, 3, 4), (4, 5))
case("matmul_vec", lambda ns, x, y: x @ y, (3, 4), (4,))
case("bmm", lambda ns, x, y: ns.bmm(x, y), (2, 3, 4), (2, 4, 2))
case("addmm", lambda ns, b, x, y: ns.addmm(b, x, y, beta=0.5, alpha=2.0), (5,), (3, 4), (4, 5))
case("einsum", lambda ns, x, y: ns.einsum("bij,bjk->bik", x, y), (2, 3, 4), (2, 4, 2))

# nn composites
case("softmax", lambda ns, x: ns.softmax(x, -1), (3, 5))
case("softmax_dim0", lambda ns, x: ns.softmax(x, 0), (3, 5))
case("log_softmax", lambda ns, x: F(ns).log_softmax(x, dim=1), (3, 5))
case("layer_norm", lambda ns, x, w, b: F(ns).layer_norm(x, (5,), w, b), (2, 3, 5), (5,), (5,))
case("layer_norm_noaffine", lambda ns, x: F(ns).layer_norm(x, (3, 5)), (2, 3, 5))
case("rms_norm", lambda ns, x, w: F(ns).rms_norm(x, (5,), w, 1e-6), (3, 5), (5,))
case("linear", lambda ns, x, w, b: F(ns).linear(x, w, b), (2, 3, 4), (5, 4), (5,))
case("linear_nobias", lambda ns, x, w: F(ns).linear(x, w), (3, 4), (5, 4))
case("cross_entropy", lambda ns, x, t: F(ns).cross_entropy(x, t), (4, 6), ("int", (4,), 6))
case("cross_entropy_sum_ls", lambda ns, x, t: F(ns).cross_entropy(x, t, reduction="sum", label_smoothing=0.1),
     (4, 6), ("int", (4,), 6))
case("cross_entropy_none_3d", lambda ns, x, t: F(ns).cross_entropy(x, t, reduction="none"),
     (2, 5, 3), ("int", (2, 3), 5))
case("cross_entropy_probs", lambda ns, x, t: F(ns).cross_entropy(x, ns.softmax(t, 1)), (4, 6), (4, 6))
case("mse_loss", lambda ns, x, y: F(ns).mse_loss(x, y), (3, 4), (3, 4))
case("sdpa_causal", lambda ns, q, k, v: F(ns).scaled_dot_product_attention(q, k, v, is_causal=True),
     (2, 2, 4, 8), (2, 2, 4, 8), (2, 2, 4, 8))
case("sdpa_mask", lambda ns, q, k, v, m: F(ns).scaled_dot_product_attention(q, k, v, attn_mask=m),
     (2, 3, 8), (2, 5, 8), (2, 5, 4), (3, 5))
case("embedding", lambda ns, i, w: F(ns).embedding(i, w), ("int", (2, 3), 6), (6, 4))
case("dropout_eval", lambda ns, x: F(ns).dropout(x, 0.5, training=False) * 2, (3, 4))
case("normalize", lambda ns, x: F(ns).normalize(x, dim=1), (3, 4))


def _setitem(x, y):
    z = x * 1.0
    z[1] = y * 2
    return z


def _inplace(x):
    z = x * 2
    z.mul_(3.0)
    z.sub_(x)
    v = z[:, 1:]
    v.mul_(3.0)
    v.add_(x[:, :3])
    return z


def make_inputs(specs, seed: int) -> list[np.ndarray]:
    rng = np.random.default_rng(seed)
    out = []
    for spec in specs:
        if isinstance(spec, tuple) and spec and isinstance(spec[0], str):
            kind, shape = spec[0], spec[1]
            if kind == "int":
                out.append(rng.integers(0, spec[2], size=shape).astype(np.int64))
            elif kind == "pos":
                out.append(rng.uniform(0.5, 2.0, size=shape))
            else:
                out.append(rng.uniform(-0.9, 0.9, size=shape))
        else:
            out.append(rng.standard_normal(spec))
    return out

# convolution and pooling (overlapping windows: the view adjoint sums)
case("conv2d", lambda ns, x, w, b: F(ns).conv2d(x, w, b, stride=2, padding=1), (2, 3, 7, 6), (4, 3, 3, 3), (4,))
case("conv2d_groups_dil", lambda ns, x, w: F(ns).conv2d(x, w, groups=2, dilation=2), (1, 4, 7, 7), (6, 2, 2, 3))
case("conv1d", lambda ns, x, w: F(ns).conv1d(x, w, padding=2), (2, 3, 9), (5, 3, 4))
# stride 1: the input's gradient is a convolution with the weight flipped and its channels
# exchanged per group (padding per dim, dilated; and past d(k-1) - p < 0, col2im's form again)
case("conv2d_s1_groups", lambda ns, x, w, b: F(ns).conv2d(x, w, b, padding=(1, 2), dilation=(1, 2), groups=3),
     (2, 6, 6, 7), (9, 2, 3, 3), (9,))
case("conv3d_s1", lambda ns, x, w: F(ns).conv3d(x, w, padding=1), (1, 2, 4, 3, 5), (3, 2, 3, 2, 3))
case("conv2d_s1_wide_pad", lambda ns, x, w: F(ns).conv2d(x, w, padding=3), (1, 2, 5, 4), (3, 2, 3, 3))
# stride 1 with more channels per group than K x the output's positions (ResNet's last layers at
# small inputs): the product against the weight as it lies, through col2im (no flipped copy)
case("conv2d_s1_many_channels", lambda ns, x, w, b: F(ns).conv2d(x, w, b, padding=1, groups=2), (1, 40, 1, 2),
     (6, 20, 3, 3), (6,))
# transposed: the adjoint products (autograd/derivatives.py), output_padding adding a window
case("conv_transpose2d", lambda ns, x, w, b: F(ns).conv_transpose2d(x, w, b, stride=2, padding=1, output_padding=1,
                                                                   groups=2), (2, 4, 3, 4), (4, 3, 3, 2), (6,))
case("conv_transpose1d_dil", lambda ns, x, w: F(ns).conv_transpose1d(x, w, stride=1, padding=2, dilation=3,
                                                                     output_padding=2), (2, 3, 5), (3, 2, 3))
case("max_pool2d_overlap", lambda ns, x: F(ns).max_pool2d(x, 3, stride=2, padding=1), (2, 2, 7, 7))
case("avg_pool2d", lambda ns, x: F(ns).avg_pool2d(x, 2), (2, 3, 6, 4))
case("avg_pool1d_overlap", lambda ns, x: F(ns).avg_pool1d(x, 3, stride=1), (2, 2, 8))
case("unfold", lambda ns, x: F(ns).unfold(x, 2, stride=1), (1, 2, 4, 5))
# windows that do not overlap: col2im is a permutation, padded where the stride leaves gaps or no
# window reaches (ir/build_conv.py _col2im_disjoint)
case("conv_transpose2d_one_position", lambda ns, x, w: F(ns).conv_transpose2d(x, w), (2, 5, 1, 1), (5, 3, 4, 4))
case("conv_transpose2d_gaps", lambda ns, x, w, b: F(ns).conv_transpose2d(x, w, b, stride=3, padding=1,
                                                                        output_padding=2), (2, 4, 3, 4), (4, 3, 2, 2), (3,))
case("conv_transpose3d_stride_kernel", lambda ns, x, w: F(ns).conv_transpose3d(x, w, stride=2), (1, 2, 2, 3, 2),
     (2, 2, 2, 2, 2))
case("conv2d_patches", lambda ns, x, w: F(ns).conv2d(x, w, stride=4), (2, 3, 10, 9), (6, 3, 4, 4))
case("conv2d_gaps", lambda ns, x, w: F(ns).conv2d(x, w, stride=3, padding=1), (2, 3, 10, 9), (6, 3, 2, 2))
case("max_pool2d_disjoint_odd", lambda ns, x: F(ns).max_pool2d(x, 2), (2, 3, 7, 5))

# losses built from primitives (registry/loss.yaml), layer norms of the conv family
case("nll_loss", lambda ns, x, t: F(ns).nll_loss(F(ns).log_softmax(x, 1), t), (4, 5), ("int", (4,), 5))
case("bce_with_logits", lambda ns, x, t: F(ns).binary_cross_entropy_with_logits(x, t.sigmoid()), (3, 4), (3, 4))
case("smooth_l1_loss", lambda ns, x, t: F(ns).smooth_l1_loss(x, t, beta=0.5), (3, 4), (3, 4))
case("l1_loss", lambda ns, x, t: F(ns).l1_loss(x, t), (3, 4), (3, 4))
case("kl_div", lambda ns, x, t: F(ns).kl_div(F(ns).log_softmax(x, 1), t.softmax(1), reduction="batchmean"),
     (3, 4), (3, 4))
case("group_norm", lambda ns, x, w, b: F(ns).group_norm(x, 2, w, b), (2, 4, 3, 3), (4,), (4,))
case("batch_norm_train", lambda ns, x, w, b: F(ns).batch_norm(x, None, None, w, b, training=True), (4, 3, 2), (3,), (3,))
case("index_two_tensors", lambda ns, x, i: x[ns.arange(3), i], (3, 5), ("int", (3,), 5))
case("index_non_adjacent", lambda ns, x, i, j: x[i, :, j], (4, 2, 5), ("int", (2, 3), 4), ("int", (3,), 5))
case("fold", lambda ns, x: F(ns).fold(x, (4, 5), 2, padding=1, stride=2), (2, 8, 9))

"""Builders of nn ops whose result is decided at the call: the dropout family draws its keep-mask here
(and so does attention with dropout); channel_shuffle is a reshape-transpose-reshape and max_unpool
a scatter.

The mask comes from the seeded host generator of ir/creation.py (`lazytorch.manual_seed`); its
values cannot match torch's generator, only its statistics.
"""
from __future__ import annotations

import math

from . import dtypes as D
from . import meta
from . import precision
from .build import Args, builder, call, constant, generic
from .build_linalg import matmul_node
from .creation import generator, iota
from .errors import op_error
from .meta.conv import ints
from .node import Node
from .registry import OpDef
from .schema import Schema


_SELU_ALPHA = 1.7580993408473766       # -SELU's negative saturation value: the value a dropped unit takes


def _noise_shape(op: OpDef, x: Node) -> tuple[int, ...]:
    """The shape of the keep-mask, as torch draws it: per element (dropout, alpha_dropout), or one draw
    per (sample, channel) for the feature forms.  dropout1d/3d take an unbatched input (2D / 4D: one
    draw per channel); dropout2d and feature_alpha_dropout read dims 0 and 1 as batch and channel
    whatever the rank (torch's historical behaviour, which it keeps with a deprecation warning)."""
    shape = tuple(x.shape)
    if op.name in ("dropout", "alpha_dropout"):
        return shape
    batched_rank = {"dropout1d": 3, "dropout3d": 5}.get(op.name)
    if op.name == "dropout1d" and x.ndim not in (2, 3):
        raise op_error(RuntimeError, op.name, f"Expected 2D or 3D input, but received a {x.ndim}D input",
                       {"self": x}, "use dropout for per-element dropout")
    if batched_rank is not None and x.ndim != batched_rank:        # unbatched: the channel is dim 0
        return shape[:1] + (1,) * (x.ndim - 1)
    if x.ndim < 2:
        raise op_error(RuntimeError, op.name, "Feature dropout requires at least 2 dimensions in the input",
                       {"self": x})
    return shape[:2] + (1,) * (x.ndim - 2)


@builder("dropout")
def dropout(op: OpDef, schema: Schema, a: Args) -> Node:
    """x * mask / (1 - p) with mask ~ Bernoulli(1 - p) in training; the identity otherwise.  The
    channel-wise forms draw one mask value per (sample, channel); alpha dropout sets dropped units
    to SELU's saturation value and rescales so that mean and variance are kept (torch's formula)."""
    x, p = a["self"], float(a["p"])
    alpha = "alpha" in op.name
    if not 0.0 <= p <= 1.0:
        raise op_error(ValueError, op.name, f"probability p={p} is not in [0, 1]", {"self": x})
    if a["inplace"]:
        raise op_error(NotImplementedError, op.name, "inplace=True is not supported", {"self": x},
                       f"assign the result instead: x = {op.name}(x, p)")
    if not a["training"] or p == 0.0:
        return x
    if not x.dtype.is_floating_point:
        raise op_error(TypeError, op.name, f"dtype {x.dtype.name} is not supported in training", {"self": x},
                       "dropout needs a floating point input")
    shape = _noise_shape(op, x)
    keep = generator().random(shape) >= p
    mask = Node.from_buffer(keep, shape, D.bool_)
    if p == 1.0:                                 # torch: x * 0 (NaN stays NaN)
        return call("mul", x, call("to", mask, x.dtype)) if alpha else call("mul", x, mask)
    if alpha:                                    # x*a*k + alpha*a*(p - 1 + k), k the keep mask
        scale = 1.0 / ((_SELU_ALPHA * _SELU_ALPHA * p + 1) * (1 - p)) ** 0.5
        k = call("to", mask, x.dtype)
        shift = call("mul", call("add", k, p - 1.0), _SELU_ALPHA * scale)
        return call("add", call("mul", call("mul", x, k), scale), shift)
    return call("mul", call("mul", x, mask), 1.0 / (1.0 - p))


@builder("attention")
def attention(op: OpDef, schema: Schema, a: Args) -> Node:
    """scaled_dot_product_attention.  Without dropout it is one node (one derivative rule; run whole
    by the backends that fuse attention).  With dropout_p > 0 (training) it is built from its parts,
    as torch's math path computes it, so the attention weights can be dropped with a keep-mask drawn
    here: softmax(q kᵀ · scale + mask), dropout, @ v; autograd differentiates the parts."""
    p = a["dropout_p"]
    if p == 0.0:
        return generic(op, schema, a)
    meta.run(op, a)                                  # the checks (shapes, dtypes, p in [0, 1])
    tf32 = precision.allowed(precision.FLAG_OF[op.name])
    weights = attention_weights(a["query"], a["key"], a["attn_mask"], a["is_causal"], a["scale"], tf32)
    return matmul_node(call("dropout", weights, p, True), a["value"], tf32)


def attention_weights(q: Node, k: Node, mask: Node | None, is_causal, scale, tf32: bool) -> Node:
    """softmax(q kᵀ · scale + mask) over the keys, as torch's math path computes it (the dropout
    path above and the decomposition of the whole node): a bool mask, or the causal one (query i
    sees keys 0..i, top-left aligned), drops keys; a float mask is added; a query whose scores are
    all -inf (every key dropped) gets zero weights, not NaN, as torch's safe softmax gives.  `tf32`:
    whether q kᵀ may compute in TF32, the attention's decision (ir/precision.py)."""
    scale = constant(1.0 / math.sqrt(q.shape[-1])) if scale is None else scale
    scores = call("mul", matmul_node(q, call("transpose", k, -2, -1), tf32), scale)
    L, S = q.shape[-2], k.shape[-2]
    if is_causal:
        mask = call("ge", iota((L, S), 0), iota((L, S), 1))
    if mask is not None and mask.dtype.is_bool:
        scores = call("where", mask, scores, constant(-math.inf))
    elif mask is not None:
        scores = call("add", scores, mask)
    weights = call("softmax", scores, -1)
    if S == 0:                                       # (no keys: nothing to take a max of)
        return weights
    dead = call("eq", call("amax", scores, -1, True), constant(-math.inf))
    return call("where", dead, constant(0.0), weights)


@builder("channel_shuffle")
def channel_shuffle(op: OpDef, schema: Schema, a: Args) -> Node:
    """(N, g, C/g, *) -> (N, C/g, g, *): channels interleaved across the groups, as torch."""
    x, g = a["self"], a["groups"]
    args = {"input": x}
    if x.ndim < 3:
        raise op_error(RuntimeError, op.name, f"expects input to have at least 3 dimensions, but got input "
                       f"with {x.ndim} dimension(s)", args)
    if g <= 0:
        raise op_error(RuntimeError, op.name, f"expects groups to be positive, but got {g} groups", args)
    n, c, *rest = x.shape
    if c % g:
        raise op_error(RuntimeError, op.name, f"expects number of channels ({c}) to be divisible by groups "
                       f"({g})", args)
    y = call("reshape", x, (n, g, c // g, *rest))
    y = call("transpose", y, 1, 2)
    return call("reshape", y, tuple(x.shape))


@builder("max_unpool")
def max_unpool(op: OpDef, schema: Schema, a: Args) -> Node:
    """Zeros of the unpooled size with each input value put at the flat spatial index `indices`
    gives for it (max_pool's return_indices), as torch; the default size inverts the pooling:
    (in - 1) * stride - 2 * padding + kernel."""
    x, idx = a["self"], a["indices"]
    nd = int(op.name[-2])
    args = {"input": x, "indices": idx}
    if x.ndim not in (nd + 1, nd + 2):
        raise op_error(RuntimeError, op.name, f"expects a {nd + 1}D (unbatched) or {nd + 2}D (batched) input, got "
                       f"{x.ndim}D", args)
    if tuple(idx.shape) != tuple(x.shape):
        raise op_error(RuntimeError, op.name, f"expects indices of the input's shape {tuple(x.shape)}, got "
                       f"{tuple(idx.shape)}", args)
    kernel = ints(a["kernel_size"], nd)
    stride = ints(a["stride"], nd) if a["stride"] not in (None, (), []) else kernel
    padding = ints(a["padding"], nd)
    spatial = tuple(x.shape[-nd:])
    size = tuple((i - 1) * s - 2 * p + k for i, s, p, k in zip(spatial, stride, padding, kernel))
    if a["output_size"] not in (None, (), []):
        given = tuple(a["output_size"])[-nd:]
        if len(given) != nd:
            raise op_error(ValueError, op.name, f"output_size must have {nd} or {x.ndim} elements, got "
                           f"{list(a['output_size'])}", args)
        for d, (want, default, s) in enumerate(zip(given, size, stride)):
            if not default - s < want < default + s:      # torch's range: the sizes this pooling could have had
                raise op_error(ValueError, op.name, f'invalid output_size "{list(given)}" (dim {d} must be between '
                               f"{default - s} and {default + s})", args)
        size = given
    lead = tuple(x.shape[:-nd])
    flat_x = call("reshape", x, lead + (math.prod(spatial),))
    flat_i = call("reshape", idx, lead + (math.prod(spatial),))
    out = call("zeros", lead + (math.prod(size),), dtype=x.dtype)
    return call("reshape", call("scatter", out, -1, flat_i, flat_x), lead + size)

"""Layers with torch's constructors, default initialisation and semantics: linear maps, embeddings,
normalisation, PReLU and multi-head attention.  Activations, dropout, pooling and reshaping modules
and losses are rows of thin.py's table; convolution, batch norm and resampling are in conv.py."""
from __future__ import annotations

import math

from ..ir import dtypes as D
from ..tensor import Tensor
from . import functional as F
from . import init
from .module import Module
from .parameter import Parameter


def _empty(*shape: int, dtype=None) -> Tensor:
    from .. import empty
    return empty(*shape, dtype=D.as_dtype(dtype) if dtype is not None else None)


def _register(module: Module, present: bool, dtype, **shapes: tuple[int, ...]) -> None:
    """Registers each named parameter (uninitialised, of its shape) when `present`, else as None, as
    torch registers a layer's optional weights (bias=False, affine=False)."""
    for name, shape in shapes.items():
        module.register_parameter(name, Parameter(_empty(*shape, dtype=dtype)) if present else None)


def _reset_affine(module: Module) -> None:
    """A normalisation's affine parameters start as the identity map: weight 1, bias 0."""
    if module.weight is not None:
        init.ones_(module.weight)
    if module.bias is not None:
        init.zeros_(module.bias)


def _nondefault(module: Module, **defaults) -> str:
    """", name=value" for each of the module's attributes that differs from its default (extra_repr)."""
    return "".join(f", {k}={getattr(module, k)}" for k, d in defaults.items() if getattr(module, k) != d)


def _factory(device) -> None:
    """torch's device= factory keyword of a layer: it selects the process's device (lazytorch/device.py);
    dtype=, the other one, goes to each parameter's creation."""
    if device is not None:
        from ..device import select
        select(device)


class Identity(Module):
    def __init__(self, *args, **kwargs) -> None:
        super().__init__()

    def forward(self, input: Tensor) -> Tensor:
        return input


class Linear(Module):
    """y = x W^T + b; W, b ~ U(-1/sqrt(in_features), 1/sqrt(in_features)) as torch (kaiming-uniform, a=sqrt(5))."""

    def __init__(self, in_features: int, out_features: int, bias: bool = True, device=None, dtype=None) -> None:
        super().__init__()
        _factory(device)
        self.in_features, self.out_features = in_features, out_features
        self.weight = Parameter(_empty(out_features, in_features, dtype=dtype))
        self.register_parameter("bias", Parameter(_empty(out_features, dtype=dtype)) if bias else None)
        self.reset_parameters()

    def reset_parameters(self) -> None:
        init.kaiming_uniform_(self.weight, a=math.sqrt(5))
        if self.bias is not None:
            fan_in = self.in_features
            bound = 1 / math.sqrt(fan_in) if fan_in > 0 else 0
            init.uniform_(self.bias, -bound, bound)

    def forward(self, input: Tensor) -> Tensor:
        return F.linear(input, self.weight, self.bias)

    def extra_repr(self) -> str:
        return f"in_features={self.in_features}, out_features={self.out_features}, bias={self.bias is not None}"


class LazyLinear(Linear):
    """A Linear whose in_features comes from its first input (or from a state_dict loaded before any
    input); it then becomes a Linear, as torch's.  Until then its weight has shape (out_features, 0).
    Parameters are replaced when it materialises, so build optimizers after the first forward (torch
    warns about the same)."""

    cls_to_become = Linear

    def __init__(self, out_features: int, bias: bool = True, device=None, dtype=None) -> None:
        Module.__init__(self)
        _factory(device)
        self.in_features, self.out_features, self._lazy_dtype = 0, out_features, dtype
        self.weight = Parameter(_empty(out_features, 0, dtype=dtype))
        self.register_parameter("bias", Parameter(_empty(out_features, dtype=dtype)) if bias else None)

    def _materialize(self, in_features: int) -> None:
        self.in_features = in_features
        self.weight = Parameter(_empty(self.out_features, in_features, dtype=self._lazy_dtype))
        if self.bias is not None:
            self.bias = Parameter(_empty(self.out_features, dtype=self._lazy_dtype))
        self.reset_parameters()
        del self._lazy_dtype
        self.__class__ = self.cls_to_become

    def _materialize_from_state(self, state_dict, prefix: str) -> None:
        """Called by Module.load_state_dict: take in_features from the stored weight's shape."""
        weight = state_dict.get(prefix + "weight")
        if weight is not None and len(weight.shape) == 2:
            self._materialize(int(weight.shape[1]))

    def forward(self, input: Tensor) -> Tensor:
        self._materialize(input.shape[-1])
        return F.linear(input, self.weight, self.bias)


class Bilinear(Module):
    """y = x1^T A x2 + b, A of shape (out, in1, in2); A, b ~ U(-1/sqrt(in1), 1/sqrt(in1)) as torch."""

    def __init__(self, in1_features: int, in2_features: int, out_features: int, bias: bool = True,
                 device=None, dtype=None) -> None:
        super().__init__()
        _factory(device)
        self.in1_features, self.in2_features, self.out_features = in1_features, in2_features, out_features
        self.weight = Parameter(_empty(out_features, in1_features, in2_features, dtype=dtype))
        _register(self, bias, dtype, bias=(out_features,))
        self.reset_parameters()

    def reset_parameters(self) -> None:
        bound = 1 / math.sqrt(self.weight.shape[1])
        init.uniform_(self.weight, -bound, bound)
        if self.bias is not None:
            init.uniform_(self.bias, -bound, bound)

    def forward(self, input1: Tensor, input2: Tensor) -> Tensor:
        from .. import einsum
        y = einsum("...i,oij,...j->...o", input1, self.weight, input2)
        return y if self.bias is None else y + self.bias

    def extra_repr(self) -> str:
        return (f"in1_features={self.in1_features}, in2_features={self.in2_features}, "
                f"out_features={self.out_features}, bias={self.bias is not None}")


class Embedding(Module):
    """A lookup table; weight ~ N(0, 1) with the padding_idx row zeroed, as torch."""

    def __init__(self, num_embeddings: int, embedding_dim: int, padding_idx: int | None = None,
                 max_norm: float | None = None, norm_type: float = 2.0, scale_grad_by_freq: bool = False,
                 sparse: bool = False, _weight: Tensor | None = None, _freeze: bool = False,
                 device=None, dtype=None) -> None:
        super().__init__()
        _factory(device)
        if padding_idx is not None:
            if not -num_embeddings <= padding_idx < num_embeddings:
                raise AssertionError("Padding_idx must be within num_embeddings")
            padding_idx %= num_embeddings
        if max_norm is not None:
            raise NotImplementedError("lazytorch: Embedding(max_norm=...) renormalises its weight in place "
                                      "during forward, which lazytorch does not support; leave max_norm=None")
        self.num_embeddings, self.embedding_dim, self.padding_idx = num_embeddings, embedding_dim, padding_idx
        self.max_norm, self.norm_type = max_norm, norm_type
        self.scale_grad_by_freq, self.sparse = scale_grad_by_freq, sparse
        if _weight is None:
            self.weight = Parameter(_empty(num_embeddings, embedding_dim, dtype=dtype), requires_grad=not _freeze)
            self.reset_parameters()
        else:
            if tuple(_weight.shape) != (num_embeddings, embedding_dim):
                raise AssertionError("Shape of weight does not match num_embeddings and embedding_dim")
            self.weight = Parameter(_weight, requires_grad=not _freeze)

    def reset_parameters(self) -> None:
        init.normal_(self.weight)
        if self.padding_idx is not None:
            from ..autograd import no_grad
            with no_grad():
                self.weight[self.padding_idx] = 0.0

    def forward(self, input: Tensor) -> Tensor:
        return F.embedding(input, self.weight, self.padding_idx)

    @classmethod
    def from_pretrained(cls, embeddings: Tensor, freeze: bool = True, padding_idx=None, **kwargs) -> "Embedding":
        if embeddings.ndim != 2:
            raise AssertionError("Embeddings parameter is expected to be 2-dimensional")
        rows, cols = embeddings.shape
        return cls(rows, cols, _weight=embeddings, _freeze=freeze, padding_idx=padding_idx, **kwargs)

    def extra_repr(self) -> str:
        return f"{self.num_embeddings}, {self.embedding_dim}" + _nondefault(self, padding_idx=None)


class EmbeddingBag(Module):
    """Sums, averages or takes the max of bags of embeddings (nn.functional.embedding_bag); weight ~
    N(0, 1) with the padding_idx row zeroed, as torch."""

    def __init__(self, num_embeddings: int, embedding_dim: int, max_norm: float | None = None,
                 norm_type: float = 2.0, scale_grad_by_freq: bool = False, mode: str = "mean", sparse: bool = False,
                 _weight: Tensor | None = None, include_last_offset: bool = False, padding_idx: int | None = None,
                 device=None, dtype=None) -> None:
        super().__init__()
        _factory(device)
        if max_norm is not None:
            raise NotImplementedError("lazytorch: EmbeddingBag(max_norm=...) renormalises its weight in place "
                                      "during forward, which lazytorch does not support; leave max_norm=None")
        if padding_idx is not None:
            if not -num_embeddings <= padding_idx < num_embeddings:
                raise AssertionError("padding_idx must be within num_embeddings")
            padding_idx %= num_embeddings
        self.num_embeddings, self.embedding_dim = num_embeddings, embedding_dim
        self.max_norm, self.norm_type, self.scale_grad_by_freq = max_norm, norm_type, scale_grad_by_freq
        self.mode, self.sparse, self.padding_idx = mode, sparse, padding_idx
        self.include_last_offset = include_last_offset
        if _weight is None:
            self.weight = Parameter(_empty(num_embeddings, embedding_dim, dtype=dtype))
            Embedding.reset_parameters(self)
        else:
            self.weight = Parameter(_weight)

    def forward(self, input: Tensor, offsets: Tensor | None = None, per_sample_weights: Tensor | None = None):
        from .functional import embedding_bag
        return embedding_bag(input, self.weight, offsets, self.max_norm, self.norm_type, self.scale_grad_by_freq,
                             self.mode, self.sparse, per_sample_weights, self.include_last_offset, self.padding_idx)

    def extra_repr(self) -> str:
        return (f"{self.num_embeddings}, {self.embedding_dim}"
                + _nondefault(self, max_norm=None, norm_type=2, scale_grad_by_freq=False)
                + f", mode={self.mode!r}" + _nondefault(self, padding_idx=None))


def _ntuple(value, n: int) -> tuple:
    """A value or a sequence of them as a tuple (a single value repeated n times), as torch's _ntuple."""
    return tuple(value) if isinstance(value, (tuple, list)) else (value,) * n


def _shape_tuple(shape) -> tuple[int, ...]:
    return (shape,) if isinstance(shape, int) else tuple(shape)


class LayerNorm(Module):
    def __init__(self, normalized_shape, eps: float = 1e-5, elementwise_affine: bool = True, bias: bool = True,
                 device=None, dtype=None) -> None:
        super().__init__()
        _factory(device)
        self.normalized_shape, self.eps = _shape_tuple(normalized_shape), eps
        self.elementwise_affine = elementwise_affine
        _register(self, elementwise_affine, dtype, weight=self.normalized_shape)
        _register(self, elementwise_affine and bias, dtype, bias=self.normalized_shape)
        self.reset_parameters()

    reset_parameters = _reset_affine

    def forward(self, input: Tensor) -> Tensor:
        return F.layer_norm(input, self.normalized_shape, self.weight, self.bias, self.eps)

    def extra_repr(self) -> str:
        return (f"{self.normalized_shape}, eps={self.eps}, elementwise_affine={self.elementwise_affine}, "
                f"bias={self.bias is not None}")


class RMSNorm(Module):
    def __init__(self, normalized_shape, eps: float | None = None, elementwise_affine: bool = True,
                 device=None, dtype=None) -> None:
        super().__init__()
        _factory(device)
        self.normalized_shape, self.eps = _shape_tuple(normalized_shape), eps
        self.elementwise_affine = elementwise_affine
        _register(self, elementwise_affine, dtype, weight=self.normalized_shape)
        if elementwise_affine:
            init.ones_(self.weight)

    def forward(self, x: Tensor) -> Tensor:
        return F.rms_norm(x, self.normalized_shape, self.weight, self.eps)

    def extra_repr(self) -> str:
        return f"{self.normalized_shape}, eps={self.eps}, elementwise_affine={self.elementwise_affine}"


class GroupNorm(Module):
    def __init__(self, num_groups: int, num_channels: int, eps: float = 1e-5, affine: bool = True,
                 device=None, dtype=None, *, bias: bool = True) -> None:
        super().__init__()
        _factory(device)
        if num_channels % num_groups != 0:
            raise ValueError("num_channels must be divisible by num_groups")
        self.num_groups, self.num_channels, self.eps, self.affine = num_groups, num_channels, eps, affine
        _register(self, affine, dtype, weight=(num_channels,))
        _register(self, affine and bias, dtype, bias=(num_channels,))
        self.reset_parameters()

    reset_parameters = _reset_affine

    def forward(self, input: Tensor) -> Tensor:
        return F.group_norm(input, self.num_groups, self.weight, self.bias, self.eps)

    def extra_repr(self) -> str:
        return (f"{self.num_groups}, {self.num_channels}, eps={self.eps}, affine={self.affine}, "
                f"bias={self.bias is not None}")


# ---------------------------------------------------------------- activations
# The parameter-free activations are rows of nn/thin.py's table.
class PReLU(Module):
    """max(0, x) + weight * min(0, x), with one learnt slope (or one per channel), initialised to `init`."""

    def __init__(self, num_parameters: int = 1, init: float = 0.25, device=None, dtype=None) -> None:
        super().__init__()
        _factory(device)
        self.num_parameters, self.init = num_parameters, init
        self.weight = Parameter(_empty(num_parameters, dtype=dtype))
        self.reset_parameters()

    def reset_parameters(self) -> None:
        init.constant_(self.weight, self.init)

    def forward(self, input: Tensor) -> Tensor:
        return F.prelu(input, self.weight)

    def extra_repr(self) -> str:
        return f"num_parameters={self.num_parameters}"


# ---------------------------------------------------------------- attention
class MultiheadAttention(Module):
    """torch.nn.MultiheadAttention (packed in-projection when kdim == vdim == embed_dim, as torch).

    forward(query, key, value, key_padding_mask=None, need_weights=True, attn_mask=None,
    average_attn_weights=True, is_causal=False) -> (output, weights or None)."""

    def __init__(self, embed_dim: int, num_heads: int, dropout: float = 0.0, bias: bool = True,
                 add_bias_kv: bool = False, add_zero_attn: bool = False, kdim: int | None = None,
                 vdim: int | None = None, batch_first: bool = False, device=None, dtype=None) -> None:
        super().__init__()
        _factory(device)
        if add_bias_kv or add_zero_attn:
            raise NotImplementedError("lazytorch: MultiheadAttention(add_bias_kv=True / add_zero_attn=True) is "
                                      "not supported; leave both False")
        if embed_dim % num_heads != 0:
            raise AssertionError("embed_dim must be divisible by num_heads")
        self.embed_dim, self.num_heads, self.dropout, self.batch_first = embed_dim, num_heads, dropout, batch_first
        self.kdim, self.vdim = kdim or embed_dim, vdim or embed_dim
        self.head_dim = embed_dim // num_heads
        self._qkv_same_embed_dim = self.kdim == embed_dim and self.vdim == embed_dim
        same = self._qkv_same_embed_dim
        _register(self, same, dtype, in_proj_weight=(3 * embed_dim, embed_dim))
        _register(self, not same, dtype, q_proj_weight=(embed_dim, embed_dim), k_proj_weight=(embed_dim, self.kdim),
                  v_proj_weight=(embed_dim, self.vdim))
        _register(self, bias, dtype, in_proj_bias=(3 * embed_dim,))
        self.out_proj = NonDynamicallyQuantizableLinear(embed_dim, embed_dim, bias=bias, dtype=dtype)
        self.bias_k = self.bias_v = None
        self.add_zero_attn = False
        self._reset_parameters()

    def _reset_parameters(self) -> None:
        if self._qkv_same_embed_dim:
            init.xavier_uniform_(self.in_proj_weight)
        else:
            for w in (self.q_proj_weight, self.k_proj_weight, self.v_proj_weight):
                init.xavier_uniform_(w)
        if self.in_proj_bias is not None:
            init.constant_(self.in_proj_bias, 0.0)
            init.constant_(self.out_proj.bias, 0.0)

    def _projections(self, query: Tensor, key: Tensor, value: Tensor):
        e = self.embed_dim
        b = self.in_proj_bias
        bq, bk, bv = (None, None, None) if b is None else (b[:e], b[e:2 * e], b[2 * e:])
        if self._qkv_same_embed_dim:
            w = self.in_proj_weight
            wq, wk, wv = w[:e], w[e:2 * e], w[2 * e:]
        else:
            wq, wk, wv = self.q_proj_weight, self.k_proj_weight, self.v_proj_weight
        return F.linear(query, wq, bq), F.linear(key, wk, bk), F.linear(value, wv, bv)

    def forward(self, query: Tensor, key: Tensor, value: Tensor, key_padding_mask: Tensor | None = None,
                need_weights: bool = True, attn_mask: Tensor | None = None, average_attn_weights: bool = True,
                is_causal: bool = False):
        from .. import ones, tril
        batched = query.ndim == 3
        if not batched:
            query, key, value = query.unsqueeze(1), key.unsqueeze(1), value.unsqueeze(1)
            if key_padding_mask is not None:
                key_padding_mask = key_padding_mask.unsqueeze(0)
        elif self.batch_first:
            query, key, value = query.transpose(0, 1), key.transpose(0, 1), value.transpose(0, 1)
        tgt, bsz, _ = query.shape
        src = key.shape[0]
        q, k, v = self._projections(query, key, value)
        heads = lambda t, n: t.reshape(n, bsz * self.num_heads, self.head_dim).transpose(0, 1)  # noqa: E731
        q, k, v = heads(q, tgt), heads(k, src), heads(v, src)
        scores = (q * (1.0 / math.sqrt(self.head_dim))) @ k.transpose(1, 2)        # (B*H, T, S)
        if is_causal and attn_mask is None:
            attn_mask = tril(ones(tgt, src, dtype=D.bool_)).logical_not()
        mask = _additive_mask(attn_mask, scores.dtype)
        if mask is not None:
            scores = scores + (mask if mask.ndim == 2 else mask.reshape(bsz * self.num_heads, tgt, src))
        if key_padding_mask is not None:
            pad = _additive_mask(key_padding_mask, scores.dtype).reshape(bsz, 1, 1, src)
            scores = (scores.reshape(bsz, self.num_heads, tgt, src) + pad).reshape(bsz * self.num_heads, tgt, src)
        weights = F.softmax(scores, dim=-1)
        if self.dropout > 0.0 and self.training:
            weights = F.dropout(weights, self.dropout, True)
        out = (weights @ v).transpose(0, 1).reshape(tgt * bsz, self.embed_dim)
        out = self.out_proj(out).reshape(tgt, bsz, self.embed_dim)
        if self.batch_first and batched:
            out = out.transpose(0, 1)
        if not batched:
            out = out.squeeze(1)
        if not need_weights:
            return out, None
        weights = weights.reshape(bsz, self.num_heads, tgt, src)
        if average_attn_weights:
            weights = weights.mean(dim=1)
        return out, (weights if batched else weights.squeeze(0))

    def extra_repr(self) -> str:
        return ""


def _additive_mask(mask: Tensor | None, dtype: D.DType) -> Tensor | None:
    """torch's masks: bool True means "not allowed" (-inf); float masks are added as they are."""
    if mask is None:
        return None
    if mask.dtype is D.bool_:
        from .. import where, zeros_like
        return where(mask, float("-inf"), zeros_like(mask, dtype=dtype))
    return mask.to(dtype)


class NonDynamicallyQuantizableLinear(Linear):
    """MultiheadAttention's out_proj class in torch (a Linear)."""

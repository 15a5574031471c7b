"""clip_grad_norm_ and clip_grad_value_, lazily: the total norm and the scaled gradients are more
nodes of the step's program (no host round trip, unlike a norm that is read back), so clipping
fuses into the optimizer's update."""
from __future__ import annotations

import math
from typing import Iterable

from ...autograd import no_grad
from ...tensor import Tensor


def _grads(parameters) -> list[Tensor]:
    params = [parameters] if isinstance(parameters, Tensor) else list(parameters)
    return [p.grad for p in params if p.grad is not None]


def clip_grad_norm_(parameters: Iterable[Tensor] | Tensor, max_norm: float, norm_type: float = 2.0,
                    error_if_nonfinite: bool = False, foreach=None) -> Tensor:
    """Scale the gradients in place so that their total `norm_type` norm is at most max_norm;
    returns the total norm (a lazy 0-d tensor)."""
    from ... import stack, tensor
    grads = _grads(parameters)
    norm_type = float(norm_type)
    if not grads:
        return tensor(0.0)
    with no_grad():
        if norm_type == 2.0:
            # one sqrt over the sum of the squared sums, added as 0-d values (no stack: a host
            # concatenation); the adds and the clip factor fuse into a reduction's kernel
            squares = [(g * g).sum() for g in grads]
            total = sum(squares[1:], squares[0]).sqrt()      # (added left to right)
        else:
            norms = stack([g.norm(norm_type) for g in grads])
            total = norms.amax() if math.isinf(norm_type) else norms.norm(norm_type)
        if error_if_nonfinite and not bool(total.isfinite()):
            raise RuntimeError(f"The total norm of order {norm_type} for gradients from `parameters` is non-finite, "
                               "so it cannot be clipped. To disable this error and scale the gradients by the "
                               "non-finite norm anyway, set `error_if_nonfinite=False`")
        coef = (float(max_norm) / (total + 1e-6)).clamp(max=1.0)
        cast = {}                                     # the factor in each gradient dtype, once
        for g in grads:
            if g.dtype not in cast:
                cast[g.dtype] = coef.to(g.dtype)
            g._rebind(g.mul(cast[g.dtype]).node, "clip_grad_norm_")
    return total


def clip_grad_value_(parameters: Iterable[Tensor] | Tensor, clip_value: float, foreach=None) -> None:
    """Clamp every gradient element into [-clip_value, clip_value] in place."""
    clip_value = float(clip_value)
    with no_grad():
        for g in _grads(parameters):
            g._rebind(g.clamp(-clip_value, clip_value).node, "clip_grad_value_")

"""lazytorch.nn.functional: the registry's nn ops (`nn: true`), installed here by lazytorch/__init__.py,
plus the few losses below, written over registry ops until the registry has them (a registry op of
the same name replaces the one here when the package is imported)."""
from __future__ import annotations

from ..tensor import Tensor


def _reduce(op: str, loss: Tensor, reduction: str) -> Tensor:
    if reduction == "none":
        return loss
    if reduction == "mean":
        return loss.mean()
    if reduction == "sum":
        return loss.sum()
    raise ValueError(f"{op}: {reduction} is not a valid value for reduction; valid: 'none', 'mean', 'sum'")


def _legacy_reduction(size_average, reduce, reduction: str) -> str:
    if size_average is None and reduce is None:
        return reduction
    size_average = True if size_average is None else size_average
    reduce = True if reduce is None else reduce
    return "none" if not reduce else "mean" if size_average else "sum"


def _same_shape(op: str, input: Tensor, target: Tensor) -> None:
    if tuple(input.shape) != tuple(target.shape):
        import warnings
        warnings.warn(f"{op}: using a target size ({list(target.shape)}) that is different to the input size "
                      f"({list(input.shape)}). This will likely lead to incorrect results due to broadcasting.",
                      stacklevel=3)


def nll_loss(input: Tensor, target: Tensor, weight: Tensor | None = None, size_average=None,
             ignore_index: int = -100, reduce=None, reduction: str = "mean") -> Tensor:
    """Negative log likelihood of class indices: input (N, C, d...) or (C,), target (N, d...) or ()."""
    from .. import where
    reduction = _legacy_reduction(size_average, reduce, reduction)
    if input.ndim == 0:
        raise ValueError("nll_loss: input tensor should be 1D or more, got a 0-d tensor")
    squeeze = input.ndim == 1
    if squeeze:
        input, target = input.unsqueeze(0), target.reshape((1,))
    if input.shape[0] != target.shape[0] or tuple(input.shape[2:]) != tuple(target.shape[1:]):
        raise ValueError(f"nll_loss: expected target of shape {[input.shape[0]] + list(input.shape[2:])} for input "
                         f"of shape {list(input.shape)}, got {list(target.shape)}")
    keep = target != ignore_index
    index = where(keep, target, 0)
    picked = -input.gather(1, index.unsqueeze(1)).squeeze(1)
    w = keep.to(input.dtype)
    if weight is not None:
        w = w * weight.index_select(0, index.flatten()).reshape(tuple(index.shape))
    loss = picked * w
    if reduction == "mean":
        return loss.sum() / w.sum()
    loss = _reduce("nll_loss", loss, reduction)
    return loss.squeeze(0) if squeeze and reduction == "none" else loss


def l1_loss(input: Tensor, target: Tensor, size_average=None, reduce=None, reduction: str = "mean",
            weight: Tensor | None = None) -> Tensor:
    _same_shape("l1_loss", input, target)
    loss = (input - target).abs()
    return _reduce("l1_loss", loss if weight is None else loss * weight,
                   _legacy_reduction(size_average, reduce, reduction))


def smooth_l1_loss(input: Tensor, target: Tensor, size_average=None, reduce=None, reduction: str = "mean",
                   beta: float = 1.0) -> Tensor:
    from .. import where
    _same_shape("smooth_l1_loss", input, target)
    if beta < 0:
        raise RuntimeError(f"smooth_l1_loss does not support negative values for beta, got {beta}")
    d = (input - target).abs()
    loss = d if beta == 0 else where(d < beta, 0.5 * d * d / beta, d - 0.5 * beta)
    return _reduce("smooth_l1_loss", loss, _legacy_reduction(size_average, reduce, reduction))


def binary_cross_entropy_with_logits(input: Tensor, target: Tensor, weight: Tensor | None = None,
                                     size_average=None, reduce=None, reduction: str = "mean",
                                     pos_weight: Tensor | None = None) -> Tensor:
    """max(x, 0) - x*y + log(1 + exp(-|x|)), torch's stable form (pos_weight scales the y=1 term)."""
    if tuple(input.shape) != tuple(target.shape):
        raise ValueError(f"Target size ({list(target.shape)}) must be the same as input size ({list(input.shape)})")
    softplus_neg = (-input.abs()).exp().log1p() + (-input).clamp(min=0)      # log(1 + exp(-x))
    if pos_weight is None:
        loss = (1 - target) * input + softplus_neg
    else:
        loss = (1 - target) * input + (1 + (pos_weight - 1) * target) * softplus_neg
    if weight is not None:
        loss = loss * weight
    return _reduce("binary_cross_entropy_with_logits", loss, _legacy_reduction(size_average, reduce, reduction))

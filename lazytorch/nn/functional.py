"""lazytorch.nn.functional: the registry's nn ops (those marked `nn: true` in
lazytorch/ir/registry/*.yaml), installed here by lazytorch/__init__.py.  A name missing here raises
"module 'lazytorch.nn.functional' has no attribute ..."."""

from ..ir.build_loss import legacy_reduction as _legacy_reduction


def embedding_bag(input, weight, offsets=None, max_norm=None, norm_type: float = 2, scale_grad_by_freq: bool = False,
                  mode: str = "mean", sparse: bool = False, per_sample_weights=None, include_last_offset: bool = False,
                  padding_idx=None):
    """torch's embedding_bag: the sum, mean or max of each bag's embedding rows.  Bags are the rows of a
    2D `input`, or the slices of a 1D `input` that `offsets` starts (read on the host: bag sizes are
    part of the program).  Entries equal to `padding_idx` are left out (and not counted by 'mean');
    an empty bag gives zeros."""
    import numpy as np

    from .. import tensor, where
    if max_norm is not None:
        raise NotImplementedError("lazytorch: embedding_bag(max_norm=...) renormalises the weight in place; "
                                  "leave max_norm=None")
    if mode not in ("sum", "mean", "max"):
        raise ValueError(f"embedding_bag: mode has to be one of sum, mean or max, got {mode!r}")
    if per_sample_weights is not None and mode != "sum":
        raise NotImplementedError(f"embedding_bag: per_sample_weights was not None. per_sample_weights is only "
                                  f"supported for mode='sum' (got mode='{mode}')")
    if input.ndim == 2:
        if offsets is not None:
            raise ValueError("embedding_bag: if input is 2D, then offsets has to be None, as input is treated as a "
                             "mini-batch of fixed length sequences")
        bags, length = input.shape
        bag_of = np.repeat(np.arange(bags), length)
    elif input.ndim == 1:
        if offsets is None or offsets.ndim != 1:
            raise ValueError("embedding_bag: offsets has to be a 1D Tensor when input is 1D")
        starts = [int(o) for o in offsets.tolist()]
        n = input.shape[0]
        ends = starts[1:] if include_last_offset else starts[1:] + [n]
        starts = starts[:-1] if include_last_offset else starts
        if starts and (starts[0] != 0 or any(b < a for a, b in zip(starts, ends)) or ends[-1] > n):
            raise ValueError(f"embedding_bag: offsets must start at 0 and be non-decreasing up to the input "
                             f"length {n}, got {offsets.tolist()}")
        bags = len(starts)
        bag_of = np.repeat(np.arange(bags), [e - s for s, e in zip(starts, ends)])
        input = input[:len(bag_of)]
    else:
        raise ValueError(f"embedding_bag: input has to be 1D or 2D Tensor, but got Tensor of dimension {input.ndim}")
    flat = input.reshape(-1)
    rows = weight[flat]                                           # (n, D)
    # bag membership as a (bags, n) 0/1 matrix known on the host: sums are a matmul, which autograd
    # differentiates (a scatter would not be)
    member = tensor((bag_of[None, :] == np.arange(bags)[:, None]).astype(np.float32)).to(weight.dtype)
    if padding_idx is not None:
        member = member * (flat != (padding_idx % weight.shape[0])).to(weight.dtype).unsqueeze(0)
    if per_sample_weights is not None:
        rows = rows * per_sample_weights.reshape(-1, 1).to(rows.dtype)
    if mode == "max":
        taken = (member > 0).unsqueeze(2)                         # (bags, n, 1)
        best = where(taken, rows.unsqueeze(0), float("-inf")).amax(1)
        return where(taken.any(1), best, 0.0)                     # an empty bag gives zeros
    total = member @ rows
    if mode == "sum":
        return total
    return total / member.sum(1, keepdim=True).clamp_min(1.0)


def multilabel_margin_loss(input, target, size_average=None, reduce=None, reduction: str = "mean"):
    """torch's multilabel_margin_loss: for each sample, the sum over its target classes j (the entries
    of `target` before the first -1) and the non-target classes i of max(0, 1 - (x[j] - x[i])), over C."""
    from .. import arange, where
    reduction = _legacy_reduction(size_average, reduce, reduction)
    if reduction not in ("none", "mean", "sum"):
        raise ValueError(f"{reduction} is not a valid value for reduction")
    if input.ndim == 0 and target.ndim == 0:      # torch reads a 0-d input as one sample of one class
        input, target = input.reshape(1), target.reshape(1)
    if input.ndim not in (1, 2) or tuple(target.shape) != tuple(input.shape):
        raise RuntimeError(f"multilabel_margin_loss: expected a 1D or 2D input and a target of the same shape, got "
                           f"input {tuple(input.shape)} and target {tuple(target.shape)}")
    if target.dtype.is_floating_point:
        raise RuntimeError(f"multilabel_margin_loss: expected an integer target, got {target.dtype.name}")
    unbatched = input.ndim == 1
    x, t = (input.unsqueeze(0), target.unsqueeze(0)) if unbatched else (input, target)
    c = x.shape[1]
    valid = (t != -1).to(x.dtype).cumprod(1)                      # (N, K): entries before the first -1
    labels = where(valid > 0, t, 0)
    hits = (labels.unsqueeze(2) == arange(c)).to(x.dtype) * valid.unsqueeze(2)        # (N, K, C)
    is_target = hits.amax(1)                                      # (N, C): 1 for a target class
    x_target = x.gather(1, labels)                                # (N, K)
    margins = (1.0 - x_target.unsqueeze(2) + x.unsqueeze(1)).clamp_min(0.0)
    loss = (margins * valid.unsqueeze(2) * (1.0 - is_target).unsqueeze(1)).sum((1, 2)) / c
    if unbatched:
        loss = loss.squeeze(0)
    return {"none": loss, "sum": loss.sum(), "mean": loss.mean()}[reduction]

"""lazytorch.nn.functional: the registry's nn ops (those marked `nn: true` in
lazytorch/ir/registry/*.yaml), installed here by lazytorch/__init__.py.  A name missing here raises
"module 'lazytorch.nn.functional' has no attribute ..."."""


def _legacy_reduction(size_average, reduce, reduction: str) -> str:
    """torch's mapping of the deprecated size_average / reduce arguments onto `reduction`."""
    if size_average is None and reduce is None:
        return reduction
    size_average = True if size_average is None else size_average
    reduce = True if reduce is None else reduce
    return "none" if not reduce else "mean" if size_average else "sum"


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

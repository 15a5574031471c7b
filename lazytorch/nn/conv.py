"""Convolution, batch and instance normalisation and resampling modules, over nn.functional's ops with
torch's signatures (conv1d/conv2d/conv_transpose2d, batch_norm, instance_norm, interpolate).  Pooling
modules are rows of thin.py's table."""
from __future__ import annotations

import math

import numpy as np

from ..autograd import no_grad
from ..ir import dtypes as D
from ..ir.build_norm import batch_norm_nodes, batch_norm_replayed
from ..ir.node import SITE, TRACE, Node, user_site
from ..tensor import TRACING, Tensor
from . import functional as F
from . import init
from .layers import _empty, _factory, _nondefault, _ntuple, _register, _reset_affine
from .module import Module
from .parameter import Parameter, set_value


class _ConvNd(Module):
    """Weight (out, in/groups, *kernel) [transposed: (in, out/groups, *kernel)], initialised as torch's
    (kaiming-uniform with a=sqrt(5), bias U(-1/sqrt(fan_in), 1/sqrt(fan_in)))."""

    _dims = 2
    _transposed = False

    def __init__(self, in_channels: int, out_channels: int, kernel_size, stride=1, padding=0, dilation=1,
                 groups: int = 1, bias: bool = True, padding_mode: str = "zeros", device=None, dtype=None,
                 output_padding=0) -> None:
        super().__init__()
        _factory(device)
        n = self._dims
        if groups <= 0:
            raise ValueError("groups must be a positive integer")
        if in_channels % groups != 0:
            raise ValueError("in_channels must be divisible by groups")
        if out_channels % groups != 0:
            raise ValueError("out_channels must be divisible by groups")
        if padding_mode != "zeros":
            raise NotImplementedError(f"lazytorch: padding_mode='{padding_mode}' is not supported; use 'zeros'")
        if isinstance(padding, str):
            if padding not in ("same", "valid"):
                raise ValueError(f"Invalid padding string '{padding}', should be one of {{'valid', 'same'}}")
            if padding == "same" and any(s != 1 for s in _ntuple(stride, n)):
                raise ValueError("padding='same' is not supported for strided convolutions")
        self.in_channels, self.out_channels = in_channels, out_channels
        self.kernel_size, self.stride = _ntuple(kernel_size, n), _ntuple(stride, n)
        self.padding = padding if isinstance(padding, str) else _ntuple(padding, n)
        self.dilation, self.groups = _ntuple(dilation, n), groups
        self.output_padding, self.transposed = _ntuple(output_padding, n), self._transposed
        self.padding_mode = padding_mode
        shape = (in_channels, out_channels // groups) if self._transposed else (out_channels, in_channels // groups)
        self.weight = Parameter(_empty(*shape, *self.kernel_size, dtype=dtype))
        self.register_parameter("bias", Parameter(_empty(out_channels, dtype=dtype)) if bias else None)
        self.reset_parameters()

    def reset_parameters(self) -> None:
        init.kaiming_uniform_(self.weight, a=math.sqrt(5))
        if self.bias is not None:
            fan_in, _ = init._calculate_fan_in_and_fan_out(self.weight)
            if fan_in != 0:
                bound = 1 / math.sqrt(fan_in)
                init.uniform_(self.bias, -bound, bound)

    def forward(self, input: Tensor) -> Tensor:
        conv = getattr(F, f"conv{self._dims}d")
        return conv(input, self._member("weight"), self._member("bias"), self.stride, self.padding, self.dilation,
                    self.groups)

    def extra_repr(self) -> str:
        n = self._dims
        return (f"{self.in_channels}, {self.out_channels}, kernel_size={self.kernel_size}, stride={self.stride}"
                + _nondefault(self, padding=(0,) * n, dilation=(1,) * n, output_padding=(0,) * n, groups=1)
                + (", bias=False" if self.bias is None else ""))


def _per_dims(base: type, name: str, attr: str, values: tuple) -> list[type]:
    """torch's 1d/2d/3d classes of one family: `base` subclassed with `attr` set to each value."""
    return [type(f"{name}{n}d", (base,), {attr: v, "__module__": __name__}) for n, v in zip((1, 2, 3), values)]


Conv1d, Conv2d, Conv3d = _per_dims(_ConvNd, "Conv", "_dims", (1, 2, 3))


class _ConvTransposeNd(_ConvNd):
    _transposed = True

    def __init__(self, in_channels: int, out_channels: int, kernel_size, stride=1, padding=0, output_padding=0,
                 groups: int = 1, bias: bool = True, dilation=1, padding_mode: str = "zeros",
                 device=None, dtype=None) -> None:
        super().__init__(in_channels, out_channels, kernel_size, stride, padding, dilation, groups, bias,
                         padding_mode, device, dtype, output_padding)

    def forward(self, input: Tensor, output_size=None) -> Tensor:
        if output_size is not None:
            raise NotImplementedError(f"lazytorch: {type(self).__name__}.forward(output_size=...) is not "
                                      "supported; set output_padding in the constructor")
        conv_transpose = getattr(F, f"conv_transpose{self._dims}d")
        return conv_transpose(input, self.weight, self.bias, self.stride, self.padding, self.output_padding,
                              self.groups, self.dilation)


ConvTranspose1d, ConvTranspose2d, ConvTranspose3d = _per_dims(_ConvTransposeNd, "ConvTranspose", "_dims", (1, 2, 3))


# ---------------------------------------------------------------- resampling (pooling: rows of thin.py)
class Upsample(Module):
    def __init__(self, size=None, scale_factor=None, mode: str = "nearest", align_corners=None,
                 recompute_scale_factor=None) -> None:
        super().__init__()
        self.size = size
        self.scale_factor = float(scale_factor) if isinstance(scale_factor, (int, float)) else scale_factor
        self.mode, self.align_corners, self.recompute_scale_factor = mode, align_corners, recompute_scale_factor

    def forward(self, input: Tensor) -> Tensor:
        return F.interpolate(input, self.size, self.scale_factor, self.mode, self.align_corners,
                             recompute_scale_factor=self.recompute_scale_factor)

    def extra_repr(self) -> str:
        info = f"size={self.size!r}" if self.size is not None else f"scale_factor={self.scale_factor!r}"
        return info + f", mode={self.mode!r}"


class UpsamplingNearest2d(Upsample):
    def __init__(self, size=None, scale_factor=None) -> None:
        super().__init__(size, scale_factor, mode="nearest")


class UpsamplingBilinear2d(Upsample):
    def __init__(self, size=None, scale_factor=None) -> None:
        super().__init__(size, scale_factor, mode="bilinear", align_corners=True)


# ---------------------------------------------------------------- batch norm
class _BatchNorm(Module):
    """Normalises over every dim but the channel dim (1).  Training mode uses the batch's statistics
    and updates running_mean / running_var (unbiased variance) with `momentum` (None: a cumulative
    average) and counts num_batches_tracked; eval mode uses the running statistics, as torch."""

    _input_dims: tuple[int, ...] = (2, 3)

    def __init__(self, num_features: int, eps: float = 1e-5, momentum: float | None = 0.1, affine: bool = True,
                 track_running_stats: bool = True, device=None, dtype=None, *, bias: bool = True) -> None:
        super().__init__()
        _factory(device)
        from .. import ones, tensor, zeros
        self.num_features, self.eps, self.momentum = num_features, eps, momentum
        self.affine, self.track_running_stats = affine, track_running_stats
        _register(self, affine, dtype, weight=(num_features,))
        _register(self, affine and bias, dtype, bias=(num_features,))
        _reset_affine(self)
        stats = track_running_stats
        self.register_buffer("running_mean", zeros(num_features, dtype=dtype) if stats else None)
        self.register_buffer("running_var", ones(num_features, dtype=dtype) if stats else None)
        self.register_buffer("num_batches_tracked", tensor(0, dtype=D.int64) if stats else None)

    def reset_running_stats(self) -> None:
        if self.track_running_stats:
            init.zeros_(self.running_mean)
            init.ones_(self.running_var)
            init.zeros_(self.num_batches_tracked)

    def reset_parameters(self) -> None:
        self.reset_running_stats()
        _reset_affine(self)

    def _check_input_dim(self, input: Tensor) -> None:
        if input.ndim not in self._input_dims:
            raise ValueError(f"expected {' or '.join(f'{d}D' for d in self._input_dims)} input (got {input.ndim}D input)")

    def forward(self, input: Tensor) -> Tensor:
        self._check_input_dim(input)
        if self.training and self.track_running_stats:
            return self._train_forward(input)
        if self.training or self.running_mean is None:       # the batch's statistics, no buffer to update
            return F.batch_norm(input, None, None, self.weight, self.bias, True, 0.0, self.eps)
        return F.batch_norm(input, self.running_mean, self.running_var, self.weight, self.bias, False, 0.0, self.eps)

    def _train_forward(self, input: Tensor) -> Tensor:
        """Normalise by the batch's statistics and blend them into the running ones, both from one
        build (ir/build_norm.py batch_norm_nodes) that replays the last step's recording: built
        apart through the Tensor API, op by op, the running statistics' mean and variance took
        ~0.55 ms of ResNet-18's ~1.6 ms forward build on cpu.  The buffers are rebound outside
        autograd, as torch's (rebound with grad, each step's statistics kept the step's whole
        graph reachable from the buffer: a training loop's memory grew every step).  As torch,
        num_batches_tracked counts the call before the input is checked."""
        # Every node this call makes, and autograd's snapshot of each, names the user's line that
        # called the layer: found once here, as the Tensor API's general route does (api.py), not
        # by a walk up the stack per node (~30 nodes and ~13 snapshots a layer: ~90 us of
        # ResNet-18's forward build on cpu)
        site = SITE.site
        if site is None and TRACE[0]:
            SITE.site = user_site(2)
        try:
            count = self._member("num_batches_tracked")
            if count is not None:
                _count_batch(count)
            m = self.momentum
            if m is None:                          # a cumulative average: a new factor each step,
                m = 1.0 / float(count.item())      # and a recording is keyed by it: none made
                build = batch_norm_nodes
            else:
                build = batch_norm_replayed
            running_mean, running_var = self._member("running_mean"), self._member("running_var")
            y, mean, var = build(input, running_mean, running_var, self._member("weight"), self._member("bias"),
                                 True, m, self.eps)
            out = Tensor(y)
            if mean is not None:                   # (None where there is nothing to blend: an empty input)
                set_value(running_mean, mean, "batch_norm")
            if var is not None:
                set_value(running_var, var, "batch_norm")
            return out
        finally:
            SITE.site = site

    def extra_repr(self) -> str:
        return (f"{self.num_features}, eps={self.eps}, momentum={self.momentum}, affine={self.affine}, "
                f"bias={self.bias is not None}, track_running_stats={self.track_running_stats}")


def _count_batch(count: Tensor) -> None:
    """num_batches_tracked += 1.  A count held on the host (it is: no step's program reads it, so no
    evaluation moves it to a device) gets its new value as a host number, not as a pending add:
    built lazily, the count was a chain no step evaluates, ~3.6 us a layer to build and evaluated
    apart every 64th step (tensor.py Tensor._flush_chain: ~8 us a layer a step amortised).  A
    pending count (updated in place by the user), one on a device, a view, or one traced by
    lt.compile (whose program must compute it) is added to in the graph."""
    node = count._node
    held = node.buffer
    if held.__class__ is np.ndarray and not node.shape and count._base is None and not TRACING[0]():
        new = np.array(held.item() + 1, held.dtype)
        set_value(count, Node.computed(new, (), node.dtype, node.key), "batch_norm")
    else:
        set_value(count, (count + 1).node, "batch_norm")


BatchNorm1d, BatchNorm2d, BatchNorm3d = _per_dims(_BatchNorm, "BatchNorm", "_input_dims", ((2, 3), (4,), (5,)))


# ---------------------------------------------------------------- instance norm
class _InstanceNorm(_BatchNorm):
    """Normalises each (sample, channel) over its spatial dims.  affine=False and
    track_running_stats=False by default, as torch; with running stats, training updates them with
    the batch mean of each instance's mean and unbiased variance, and eval mode uses them."""

    _spatial = 2

    def __init__(self, num_features: int, eps: float = 1e-5, momentum: float | None = 0.1, affine: bool = False,
                 track_running_stats: bool = False, device=None, dtype=None) -> None:
        super().__init__(num_features, eps, momentum, affine, track_running_stats, device, dtype)

    def forward(self, input: Tensor) -> Tensor:
        d = self._spatial
        if input.ndim not in (d + 1, d + 2):
            raise ValueError(f"expected {d + 1}D or {d + 2}D input (got {input.ndim}D input)")
        batched = input.ndim == d + 2
        if not batched:
            input = input.unsqueeze(0)
        if input.shape[1] != self.num_features and self.affine:
            raise ValueError(f"expected input's size at dim=1 to match num_features ({self.num_features}), "
                             f"but got: {input.shape[1]}.")
        use_input_stats = self.training or not self.track_running_stats
        if self.training and self.track_running_stats:
            self._update_instance_stats(input)
        out = F.instance_norm(input, None if use_input_stats else self.running_mean,
                              None if use_input_stats else self.running_var, self.weight, self.bias,
                              use_input_stats, 0.0, self.eps)
        return out if batched else out.squeeze(0)

    @no_grad()                           # (outside autograd, as the batch's: _BatchNorm._train_forward)
    def _update_instance_stats(self, input: Tensor) -> None:
        dims = tuple(range(2, input.ndim))
        n = math.prod(input.shape[2:])
        mean = input.mean(dim=dims).mean(0)
        var = input.var(dim=dims, correction=1 if n > 1 else 0).mean(0)
        m = self.momentum if self.momentum is not None else 0.0   # as torch: num_batches_tracked stays 0
        dt = self.running_mean.dtype
        set_value(self.running_mean, ((1 - m) * self.running_mean + m * mean.to(dt)).node, "instance_norm")
        set_value(self.running_var, ((1 - m) * self.running_var + m * var.to(dt)).node, "instance_norm")


InstanceNorm1d, InstanceNorm2d, InstanceNorm3d = _per_dims(_InstanceNorm, "InstanceNorm", "_spatial", (1, 2, 3))

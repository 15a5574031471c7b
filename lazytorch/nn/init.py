"""nn.init: torch's initialisers, drawing from lazytorch's seeded generator (`lazytorch.manual_seed`).

The distributions, gains and fan computations are torch's; the numbers differ from torch's because
no backend reproduces torch's generator.  Each fills the tensor in place (it keeps its identity)
and returns it.
"""
from __future__ import annotations

import math

import numpy as np

from ..ir.creation import generator as _rng
from ..tensor import Tensor
from .parameter import host_node, set_value

__all__ = ["calculate_gain", "uniform_", "normal_", "trunc_normal_", "constant_", "ones_", "zeros_", "eye_",
           "xavier_uniform_", "xavier_normal_", "kaiming_uniform_", "kaiming_normal_", "orthogonal_"]


def _fill(tensor: Tensor, values: np.ndarray) -> Tensor:
    set_value(tensor, host_node(np.asarray(values).reshape(tuple(tensor.shape)), tensor.dtype), "nn.init")
    return tensor


def _shape(tensor: Tensor) -> tuple[int, ...]:
    return tuple(tensor.shape)


# torch's recommended gains (leaky_relu's depends on its slope: calculate_gain)
_GAINS = {**dict.fromkeys(("linear", "conv1d", "conv2d", "conv3d", "conv_transpose1d", "conv_transpose2d",
                           "conv_transpose3d", "sigmoid"), 1.0), "tanh": 5.0 / 3, "relu": math.sqrt(2.0),
          "selu": 3.0 / 4}


def calculate_gain(nonlinearity: str, param=None) -> float:
    if nonlinearity == "leaky_relu":
        slope = 0.01 if param is None else param
        if isinstance(slope, bool) or not isinstance(slope, (int, float)):
            raise ValueError(f"negative_slope {slope} not a valid number")
        return math.sqrt(2.0 / (1 + slope ** 2))
    gain = _GAINS.get(nonlinearity) if isinstance(nonlinearity, str) else None
    if gain is None:
        raise ValueError(f"Unsupported nonlinearity {nonlinearity}")
    return gain


def _calculate_fan_in_and_fan_out(tensor: Tensor) -> tuple[int, int]:
    shape = _shape(tensor)
    if len(shape) < 2:
        raise ValueError("Fan in and fan out can not be computed for tensor with fewer than 2 dimensions")
    receptive = math.prod(shape[2:])
    return shape[1] * receptive, shape[0] * receptive


def _calculate_correct_fan(tensor: Tensor, mode: str) -> int:
    mode = mode.lower()
    if mode not in ("fan_in", "fan_out"):
        raise ValueError(f"Mode {mode} not supported, please use one of fan_in, fan_out")
    fan_in, fan_out = _calculate_fan_in_and_fan_out(tensor)
    return fan_in if mode == "fan_in" else fan_out


def uniform_(tensor: Tensor, a: float = 0.0, b: float = 1.0, generator=None) -> Tensor:
    return _fill(tensor, _rng().uniform(a, b, _shape(tensor)))


def normal_(tensor: Tensor, mean: float = 0.0, std: float = 1.0, generator=None) -> Tensor:
    return _fill(tensor, _rng().normal(mean, std, _shape(tensor)))


def trunc_normal_(tensor: Tensor, mean: float = 0.0, std: float = 1.0, a: float = -2.0, b: float = 2.0,
                  generator=None) -> Tensor:
    """Normal(mean, std) truncated to [a, b], by torch's inverse-CDF method."""
    from math import erf, sqrt

    from ..runtime.reference_ops.host_math import erfinv     # (the host's special functions, at first use)
    cdf = lambda x: (1.0 + erf(x / sqrt(2.0))) / 2.0  # noqa: E731
    lo, hi = cdf((a - mean) / std), cdf((b - mean) / std)
    u = np.clip(_rng().uniform(2 * lo - 1, 2 * hi - 1, _shape(tensor)), -1 + 1e-15, 1 - 1e-15)
    return _fill(tensor, np.clip(erfinv(u) * std * math.sqrt(2.0) + mean, a, b))


def constant_(tensor: Tensor, val: float) -> Tensor:
    return _fill(tensor, np.full(_shape(tensor), val))


def ones_(tensor: Tensor) -> Tensor:
    return constant_(tensor, 1.0)


def zeros_(tensor: Tensor) -> Tensor:
    return constant_(tensor, 0.0)


def eye_(tensor: Tensor) -> Tensor:
    if tensor.ndim != 2:
        raise ValueError("Only tensors with 2 dimensions are supported")
    return _fill(tensor, np.eye(*_shape(tensor)))


def xavier_uniform_(tensor: Tensor, gain: float = 1.0, generator=None) -> Tensor:
    fan_in, fan_out = _calculate_fan_in_and_fan_out(tensor)
    bound = gain * math.sqrt(2.0 / float(fan_in + fan_out)) * math.sqrt(3.0)
    return uniform_(tensor, -bound, bound)


def xavier_normal_(tensor: Tensor, gain: float = 1.0, generator=None) -> Tensor:
    fan_in, fan_out = _calculate_fan_in_and_fan_out(tensor)
    return normal_(tensor, 0.0, gain * math.sqrt(2.0 / float(fan_in + fan_out)))


def kaiming_uniform_(tensor: Tensor, a: float = 0, mode: str = "fan_in", nonlinearity: str = "leaky_relu",
                     generator=None) -> Tensor:
    if 0 in _shape(tensor):
        return tensor
    std = calculate_gain(nonlinearity, a) / math.sqrt(_calculate_correct_fan(tensor, mode))
    bound = math.sqrt(3.0) * std
    return uniform_(tensor, -bound, bound)


def kaiming_normal_(tensor: Tensor, a: float = 0, mode: str = "fan_in", nonlinearity: str = "leaky_relu",
                    generator=None) -> Tensor:
    if 0 in _shape(tensor):
        return tensor
    std = calculate_gain(nonlinearity, a) / math.sqrt(_calculate_correct_fan(tensor, mode))
    return normal_(tensor, 0.0, std)


def orthogonal_(tensor: Tensor, gain: float = 1.0, generator=None) -> Tensor:
    if tensor.ndim < 2:
        raise ValueError("Only tensors with 2 or more dimensions are supported")
    rows = _shape(tensor)[0]
    cols = tensor.numel() // rows if rows else 0
    flat = _rng().standard_normal((rows, cols))
    if rows < cols:
        flat = flat.T
    q, r = np.linalg.qr(flat)
    q = q * np.sign(np.diag(r))
    if rows < cols:
        q = q.T
    return _fill(tensor, gain * q)

"""lazytorch.cuda: whether the cuda device (the cuda backend) can be used (lazytorch/device.py)."""
from __future__ import annotations

from .device import cuda_available


def is_available() -> bool:
    return cuda_available()


def device_count() -> int:
    return 1 if cuda_available() else 0

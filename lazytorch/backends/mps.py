"""lazytorch.backends.mps: whether the mps device (the metal backend) can be used (lazytorch/device.py)."""
from __future__ import annotations


def is_available() -> bool:
    from ..device import is_available as available
    return available("mps")


def is_built() -> bool:
    return True

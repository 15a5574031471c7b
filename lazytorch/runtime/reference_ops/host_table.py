"""The `host_call` function table and its registration decorator.

Its own module so that the families (host_math.py, host_select.py, host_scatter.py,
host_lapack.py) register into it without importing host.py, which imports them.
"""
from __future__ import annotations

from typing import Callable

import numpy as np

HOST: dict[str, Callable[..., np.ndarray]] = {}


def host(*names: str):
    """Register the decorated numpy function as the `host_call` entry for each of `names`."""
    def register(fn):
        for n in names:
            HOST[n] = fn
        return fn
    return register

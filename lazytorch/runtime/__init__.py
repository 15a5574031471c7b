"""Backends: they compile and launch kernels and own the buffers.  Selected by name."""
from __future__ import annotations

import os
import threading

_state = threading.local()
BACKENDS = ("cpu", "metal", "metal-emu", "cuda", "reference")


def default_backend() -> str:
    env = os.environ.get("LAZYTORCH_BACKEND")
    if env:
        return env
    return "reference"


_selected = [None]


def set_backend(name: str) -> None:
    if name not in BACKENDS:
        raise ValueError(f"unknown backend '{name}'; valid: {', '.join(BACKENDS)}")
    _selected[0] = name


def backend_name() -> str:
    if _selected[0] is None:
        _selected[0] = default_backend()
    return _selected[0]

"""Backends: they compile and launch kernels and own the buffers.  Selected by name.

`set_backend(name)` or the LAZYTORCH_BACKEND environment variable picks one (default: see
`default_backend`).
Each name maps to a factory, imported lazily so that a backend whose toolchain is missing costs
nothing until it is chosen: an entry is "module:Class" relative to this package, or a callable
registered with `register_backend`.  runtime/backend.py defines the interface a backend implements.
"""
from __future__ import annotations

import importlib
import os
import platform
import shutil
import sys
import threading
from typing import Callable

FACTORIES: dict[str, "str | Callable"] = {
    "reference": ".backend:ReferenceBackend",
    "cpu": ".cpu:CpuBackend",
    "metal": ".mlx:MetalBackend",
    "metal-emu": ".metal_emu:MetalEmuBackend",
    "cuda": ".cuda_driver:CudaBackend",
}
BACKENDS = tuple(FACTORIES)

_selected: list = [None]
_instances: dict = {}
_lock = threading.Lock()


def default_backend() -> str:
    """LAZYTORCH_BACKEND, else `metal` on Apple silicon where MLX reports Metal available, else `cpu`
    where a C compiler exists, else `reference`."""
    env = os.environ.get("LAZYTORCH_BACKEND")
    if env:
        return env
    if metal_available():
        return "metal"
    if c_compiler_available():
        return "cpu"
    return "reference"


def metal_available() -> bool:
    """macOS on Apple silicon with MLX installed and `mlx.core.metal.is_available()`."""
    if sys.platform != "darwin" or platform.machine() != "arm64":
        return False                          # skip importing MLX where Metal can't exist
    try:
        import mlx.core as mx
        return bool(mx.metal.is_available())
    except Exception:                         # MLX missing, or built without Metal
        return False


def c_compiler_available() -> bool:
    """$CC when set, else one of cc, gcc, clang on PATH (the compilers runtime/compiler.py tries)."""
    cc = os.environ.get("CC")
    if cc:
        return shutil.which(cc) is not None
    return any(shutil.which(name) for name in ("cc", "gcc", "clang"))


def register_backend(name: str, factory: Callable) -> None:
    """Make `name` selectable; factory() returns a runtime.backend.Backend."""
    global BACKENDS
    FACTORIES[name] = factory
    BACKENDS = tuple(FACTORIES)
    _instances.pop(name, None)


def set_backend(name: str) -> None:
    if name not in FACTORIES:
        raise ValueError(f"unknown backend '{name}'; valid: {', '.join(FACTORIES)}")
    _selected[0] = name


def backend_name() -> str:
    if _selected[0] is None:
        _selected[0] = default_backend()
    return _selected[0]


def get_backend(name: str | None = None):
    """The Backend instance for `name` (default: the selected one), created on first use."""
    name = name or backend_name()
    inst = _instances.get(name)
    if inst is not None:
        return inst
    with _lock:
        if name not in _instances:
            _instances[name] = _create(name)
        return _instances[name]


def _create(name: str):
    factory = FACTORIES.get(name)
    if factory is None:
        raise ValueError(f"unknown backend '{name}'; valid: {', '.join(FACTORIES)}")
    if isinstance(factory, str):
        module, _, cls = factory.partition(":")
        try:
            factory = getattr(importlib.import_module(module, __name__), cls)
        except (ImportError, AttributeError) as e:
            raise RuntimeError(f"backend '{name}' is not available ({e}); "
                               f"available: reference") from e
    return factory()


def buffer_stats() -> dict[str, int]:
    """Buffers allocated so far: the static memory plans' blocks (`static_blocks`, `static_bytes`:
    runtime/executor.py) and, summed over the backends created, their pools' fresh, reused and
    small buffers (runtime/buffer_pool.py).  A cached plan run again adds to `reused` at most."""
    from .executor import STATS
    out = dict(STATS, fresh=0, reused=0, small=0)
    for inst in list(_instances.values()):
        pool = getattr(inst, "pool", None)
        for k, v in getattr(pool, "stats", {}).items():
            out[k] += v
    return out

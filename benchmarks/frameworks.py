"""The frameworks a workload runs on, as data: how to make inputs, run, sync, and read results.

Every workload's math is written once against an *ops table* (gelu_tanh, softmax, ...; Python
operators and `@` do the rest), so each framework computes the same expression.  A Framework pairs
an ops table with how that framework moves data and waits for results.  lazytorch is one
Framework per backend ("lazytorch[cpu]", "lazytorch[reference]").
"""
from __future__ import annotations

import contextlib

import math
from dataclasses import dataclass
from types import SimpleNamespace
from typing import Any, Callable

import numpy as np

GELU_C = math.sqrt(2.0 / math.pi)
LN_EPS = 1e-5


def _np_softmax(x):
    e = np.exp(x - x.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


def _np_layer_norm(x, w, b):
    mu = x.mean(axis=-1, keepdims=True)
    var = ((x - mu) ** 2).mean(axis=-1, keepdims=True)
    return (x - mu) / np.sqrt(var + LN_EPS) * w + b


# numpy's table is also the float64 reference every framework is checked against.
NUMPY_OPS = SimpleNamespace(
    gelu_tanh=lambda x: 0.5 * x * (1.0 + np.tanh(GELU_C * (x + 0.044715 * x ** 3))),
    sigmoid=lambda x: 1.0 / (1.0 + np.exp(-x)),
    tanh=np.tanh,
    relu=lambda x: np.maximum(x, 0.0),
    softmax=_np_softmax,
    layer_norm=_np_layer_norm,
    t=lambda x: np.swapaxes(x, -1, -2),
)


def _torch_ops():
    import torch
    F = torch.nn.functional
    return SimpleNamespace(
        gelu_tanh=lambda x: F.gelu(x, approximate="tanh"),
        sigmoid=torch.sigmoid, tanh=torch.tanh, relu=torch.relu,
        softmax=lambda x: torch.softmax(x, dim=-1),
        layer_norm=lambda x, w, b: F.layer_norm(x, (x.shape[-1],), w, b, LN_EPS),
        t=lambda x: x.transpose(-2, -1),
    )


def _mlx_ops():
    import mlx.core as mx
    import mlx.nn
    return SimpleNamespace(
        gelu_tanh=mlx.nn.gelu_approx, sigmoid=mx.sigmoid, tanh=mx.tanh,
        relu=lambda x: mx.maximum(x, 0.0),
        softmax=lambda x: mx.softmax(x, axis=-1),
        layer_norm=lambda x, w, b: mx.fast.layer_norm(x, w, b, LN_EPS),
        t=lambda x: mx.swapaxes(x, -1, -2),
    )


def _lazytorch_ops():
    import lazytorch as lt
    F = lt.nn.functional
    return SimpleNamespace(
        gelu_tanh=lambda x: F.gelu(x, approximate="tanh"),
        sigmoid=lt.sigmoid, tanh=lt.tanh, relu=lt.relu,
        softmax=lambda x: lt.softmax(x, dim=-1),
        layer_norm=lambda x, w, b: F.layer_norm(x, (x.shape[-1],), w, b, LN_EPS),
        t=lambda x: x.transpose(-2, -1),
    )


def _torch_in(x: np.ndarray):
    import torch
    return torch.from_numpy(np.array(x, copy=True))


def _mlx_in(x: np.ndarray):
    import mlx.core as mx
    a = mx.array(x)
    mx.eval(a)
    return a


def _mlx_sync(out) -> None:
    import mlx.core as mx
    mx.eval(out)


def _lt_sync(out) -> None:
    import lazytorch as lt
    lt.eval(out)


def _torch_compile(fn):
    import torch
    return torch.compile(fn)


def _mx_compile(fn):
    import mlx.core as mx
    return mx.compile(fn)


def _no_sync(out) -> None:
    """numpy and torch on the CPU return finished results."""


@dataclass
class Framework:
    """One column of the comparison.

    ops: builds the ops table (imports lazily, so a missing framework is an error of its own row).
    to_native: a numpy input as this framework's array (outside timing).
    sync: waits until `out` is computed (mx.eval, lt.eval) -- part of the timed call.
    prepare: wraps the workload function once (torch.compile, mx.compile); identity otherwise.
    setup: runs before this framework's calls (selects a lazytorch backend).
    counters: the framework's own event counters now (lazytorch's CUDA graph captures and replays),
    reported per timed call in the row, so a row says how its calls ran.
    """
    name: str
    ops: Callable[[], Any]
    to_native: Callable[[np.ndarray], Any] = lambda x: x
    to_numpy: Callable[[Any], np.ndarray] = np.asarray
    sync: Callable[[Any], None] = _no_sync
    prepare: Callable[[Callable], Callable] = lambda fn: fn
    setup: Callable[[], None] = lambda: None
    counters: Callable[[], dict[str, int]] | None = None


def _set_lt_backend(name: str) -> Callable[[], None]:
    def setup() -> None:
        import lazytorch as lt
        lt.set_backend(name)
    return setup


@contextlib.contextmanager
def lazytorch_backend_kept():
    """The lazytorch rows select their backend process-wide (setup above); put the caller's back
    afterwards, so that running the harness in-process (tests) leaves no backend behind."""
    import lazytorch as lt
    previous = lt.get_backend()
    try:
        yield
    finally:
        lt.set_backend(previous)


def lazytorch(backend: str) -> Framework:
    import lazytorch as lt
    return Framework(
        name=f"lazytorch[{backend}]", ops=_lazytorch_ops,
        to_native=lambda x: lt.from_numpy(np.array(x, copy=True)), to_numpy=lambda t: t.numpy(),
        sync=_lt_sync, setup=_set_lt_backend(backend))


def _lt_compile(fn):
    import lazytorch as lt
    return lt.compile(fn)


def lazytorch_compiled(backend: str) -> Framework:
    """lazytorch with the workload function wrapped in lt.compile: traced once, then replayed."""
    plain = lazytorch(backend)
    plain.name, plain.prepare = f"lazytorch.compile[{backend}]", _lt_compile
    return plain


PEERS: dict[str, Framework] = {f.name: f for f in [
    Framework("numpy", lambda: NUMPY_OPS),
    Framework("torch", _torch_ops, _torch_in, lambda t: t.numpy()),
    Framework("torch.compile", _torch_ops, _torch_in, lambda t: t.numpy(), prepare=_torch_compile),
    Framework("mlx", _mlx_ops, _mlx_in, np.array, _mlx_sync),
    Framework("mx.compile", _mlx_ops, _mlx_in, np.array, _mlx_sync, prepare=_mx_compile),
]}


def select(backends: list[str], peers: list[str], compiled: list[str] = ()) -> list[Framework]:
    """lazytorch on each backend, lt.compile on each of `compiled`, then the peers; unknown peer
    names raise with the valid ones."""
    unknown = [p for p in peers if p not in PEERS]
    if unknown:
        raise SystemExit(f"unknown peer(s) {', '.join(unknown)}; valid: {', '.join(PEERS)}")
    return [lazytorch(b) for b in backends] + [lazytorch_compiled(b) for b in compiled] + [PEERS[p] for p in peers]


def by_name(name: str) -> Framework:
    """A framework from its column name (W8's subprocess gets names on its command line)."""
    if name == "lazytorch[cuda]":    # the GPU row: device-resident inputs, as in benchmarks/gpu.py
        from .gpu import lazytorch_gpu
        return lazytorch_gpu("cuda")
    if name.startswith("lazytorch[") and name.endswith("]"):
        return lazytorch(name[len("lazytorch["):-1])
    if name.startswith("lazytorch.compile[") and name.endswith("]"):
        return lazytorch_compiled(name[len("lazytorch.compile["):-1])
    if name not in PEERS:
        from .gpu import GPU_PEERS   # the GPU columns (benchmarks/gpu.py)
        return GPU_PEERS[name]
    return PEERS[name]

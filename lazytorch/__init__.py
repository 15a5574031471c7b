"""lazytorch: a lazy graph compiler with a PyTorch-style API.

    import lazytorch as lt
    y = lt.softmax(lt.randn(64, 128) @ lt.randn(128, 32), dim=-1)   # builds a graph
    lt.eval(y)                                                      # compiles and runs it
"""
from __future__ import annotations

import numpy as np

from . import api as _api
from . import autograd
from .autograd import enable_grad, inference_mode, is_grad_enabled, no_grad, set_grad_enabled
from .interop import as_tensor, from_dlpack, from_mlx, from_numpy, tensor
from .ir import creation as _creation  # registers builders
from .ir import dtypes as _dtypes
from .ir.creation import manual_seed
from .ir.dtypes import (DType, bfloat16, bool_, float16, float32, float64, int8, int16, int32, int64,
                        uint8)
from .ir.graph import to_networkx as _to_networkx
from .ir.precision import get_float32_matmul_precision, set_float32_matmul_precision
from .ir.printer import dump_nodes as _dump_nodes
from .ir.printer import to_dot as _to_dot
from .ir.promotion import promote_types
from .realize import LIVE as _LIVE
from .realize import eval_tensors as _eval_tensors
from .realize import show_kernels
from .graph_cache import CacheInfo as _CacheInfo
from .graph_cache import cache_clear, set_cache_size
from .graph_cache import cache_info as _graph_cache_info
from .compile import compile, compile_info  # noqa: A004  (torch's name)
from .compile import tracing as _compile_tracing
from .finfo import finfo, iinfo
from .runtime import backend_name as get_backend
from .runtime import buffer_stats as _buffer_stats
from .runtime import caches as _kernel_caches
from .runtime import set_backend
from .runtime import threads as _threads
from .tensor import Size, Tensor

bool = bool_  # noqa: A001  (torch spells it lazytorch.bool)
half, float, double, long, int, short = float16, float32, float64, int64, int32, int16  # noqa: A001
__version__ = "0.1.0"

_nn_functional: dict = {}
_api.install(globals(), _nn_functional)
from . import nn  # noqa: E402  (after install: nn.functional gets the registry's nn ops)
vars(nn.functional).update(_nn_functional)
from .nn import utils as _nn_utils  # noqa: E402,F401  (binds lazytorch.nn.utils: clip_grad_*)
from . import optim  # noqa: E402
from . import cuda, backends  # noqa: E402
from .device import device, get_default_device, set_default_device  # noqa: E402
from .serialization import load, save  # noqa: E402


def eval(*tensors: Tensor) -> None:  # noqa: A001  (the product's verb, as in the brief)
    """Materialise the given tensors together: shared work runs once, then each holds a buffer."""
    given = [t for t in tensors if isinstance(t, Tensor)]
    for t in given:                     # (nothing pending: nothing to do, no scan of live tensors)
        if t.node.op != "buffer":
            break
    else:
        return
    if _compile_tracing():              # inside an lt.compile trace: the compiled program evaluates all
        return
    _eval_tensors(given, _LIVE)


def dump(*tensors: Tensor, after: str | None = None) -> str:
    """The IR of the tensors' pending programs, one line per node (after pass `after`, if given)."""
    roots = [t.node for t in tensors]
    if after is not None:
        from .realize import dump_after
        return dump_after(roots, after)
    return _dump_nodes(roots)


def to_dot(*tensors: Tensor) -> str:
    """The tensors' programs as a Graphviz DOT graph."""
    return _to_dot([t.node for t in tensors])


def to_networkx(*tensors: Tensor):
    return _to_networkx([t.node for t in tensors])


def result_type(*args) -> DType:
    from .ir.build import as_node
    from .ir.meta import promoted
    return promoted([as_node(a) for a in args])


def is_tensor(x) -> bool:  # noqa: D103
    return isinstance(x, Tensor)


def kernel_plan(*tensors: Tensor):
    """The KernelPlan the tensors' pending program compiles to, without running it."""
    from .realize import kernel_plan as _kernel_plan
    return _kernel_plan(tensors)


class CacheStats(_CacheInfo):
    """The graph cache's statistics (hits, misses, entries, evictions, maxsize), plus `kernels`:
    each bounded compiled-kernel cache's own (name -> runtime.caches.KernelCacheInfo), `threads`:
    the cpu backend's thread policy (runtime/threads.py), and `buffers`: the buffers allocated so
    far (runtime.buffer_stats: static memory plans and buffer pools)."""
    kernels: dict
    threads: dict
    buffers: dict


def cache_info() -> CacheStats:
    info = CacheStats(*_graph_cache_info())
    info.kernels = _kernel_caches.info()
    info.threads = _threads.info()
    info.buffers = _buffer_stats()
    return info

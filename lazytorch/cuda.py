"""lazytorch.cuda: whether the cuda device (the cuda backend) can be used (lazytorch/device.py)."""
from __future__ import annotations

from .device import cuda_available
from .realize import eval_nodes
from .runtime import get_backend
from .ir.errors import OutOfMemoryError  # noqa: F401  (torch.cuda.OutOfMemoryError)
from .tensor import live_pending


def is_available() -> bool:
    return cuda_available()


def device_count() -> int:
    return 1 if cuda_available() else 0


def synchronize(device: object = None) -> None:
    """torch.cuda.synchronize(): returns when the work asked for so far has finished on the device.
    A lazy program runs when it is evaluated, so every live pending tensor is evaluated first (each
    run starts its kernels on the GPU without waiting); the GPU backends then wait for the work
    they started (Backend.synchronize).  On host backends the evaluation is all there is to wait for."""
    eval_nodes(live_pending())
    get_backend().synchronize()


def empty_cache() -> None:
    """torch.cuda.empty_cache(): GPU memory the cuda backend keeps for reuse (freed buffers, the
    driver pool's reserve) goes back to the device."""
    from .runtime import cuda_driver
    if cuda_driver.device.cache_info().currsize:
        cuda_driver.device().release()


def graph_info() -> dict[str, int]:
    """CUDA graphs of the cuda backend's driver runtime so far (runtime/cuda_graph.py): `captures`
    made, `replays` run, captures that `failures` turned off for their plan."""
    from .runtime import cuda_graph
    return dict(cuda_graph.STATS)

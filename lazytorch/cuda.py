"""lazytorch.cuda: whether the cuda device (the cuda backend) can be used (lazytorch/device.py)."""
from __future__ import annotations

from .device import DEVICE_BACKEND, cuda_available
from .realize import backend_name, eval_nodes
from .tensor import live_pending


def is_available() -> bool:
    return cuda_available()


def device_count() -> int:
    return 1 if cuda_available() else 0


def synchronize(device: object = None) -> None:
    """torch.cuda.synchronize(): returns when the work asked for so far has finished on the device.
    A lazy program runs when it is evaluated, so every live pending tensor is evaluated first (each
    run starts its kernels on the GPU without waiting, runtime/mlx.py `submit`); on the GPU backends
    the thread then waits for the last run started (runtime/mlx.py `synchronize`).  Elsewhere the
    evaluation is all there is to wait for."""
    eval_nodes(live_pending())
    if backend_name() in DEVICE_BACKEND.values():       # (the MLX backends: metal, cuda)
        from .runtime.mlx import synchronize as device_synchronize   # (MLX only where it runs)
        device_synchronize()

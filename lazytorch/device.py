"""Devices with torch's names, mapped onto backends.

lazytorch keeps ONE device per process, not one per tensor: a lazy program is compiled as a whole
by one backend, so every tensor of a process lives on the device of the selected backend, and
`x.device` reports it.  Naming a device (`x.to("mps")`, `zeros(3, device="cuda")`, `model.to(dev)`,
`set_default_device`) selects the backend behind that device type for the whole process; tensors
already made follow it (their data is host-readable by every backend, and on Apple silicon the
memory is unified anyway).  So `x.to(x.device)` is x, scripts that write
`device = "cuda" if torch.cuda.is_available() else "cpu"` run unchanged, and no op can ever see
tensors on two devices (torch's "Expected all tensors to be on the same device" cannot arise).

Device types and their backends:
    "cpu"  -> the `cpu` backend (C), or `reference`/`metal-emu` when one of those host backends is
              selected (they run on the CPU too), or `reference` where no C compiler exists;
    "mps"  -> the `metal` backend (Apple silicon);
    "cuda" -> the `cuda` backend (the CUDA driver, or MLX's CUDA build).
"""
from __future__ import annotations

import builtins
from dataclasses import dataclass

from . import runtime

DEVICE_TYPES = ("cpu", "mps", "cuda")
# The device type of every backend (the host backends all run on "cpu").
BACKEND_DEVICE = {"cpu": "cpu", "reference": "cpu", "metal-emu": "cpu", "metal": "mps", "cuda": "cuda"}
# The backend behind each accelerator device type.
DEVICE_BACKEND = {"mps": "metal", "cuda": "cuda"}


@dataclass(frozen=True)
class device:  # noqa: N801  (torch's name)
    """torch.device: a device type ("cpu", "mps", "cuda") and an optional index."""

    type: str
    index: int | None = None

    def __init__(self, type, index: int | None = None):  # noqa: A002  (torch's argument name)
        if isinstance(type, device):
            type, index = type.type, type.index if index is None else index
        elif isinstance(type, int) and not isinstance(type, bool):
            type, index = "cuda", type                     # torch: device(0) is cuda:0
        elif isinstance(type, str):
            name, sep, idx = type.partition(":")
            if sep:
                if index is not None or not idx.isdigit():
                    raise RuntimeError(f"Invalid device string: '{type}'")
                index = int(idx)
            type = name
        else:
            raise TypeError(f"device(): expected a string, int or device, got {builtins.type(type).__name__}")
        if type not in DEVICE_TYPES:
            raise RuntimeError(f"Expected one of {', '.join(DEVICE_TYPES)} device type at start of device "
                               f"string: {type} (lazytorch knows these device types)")
        if index is not None and index < 0:
            raise RuntimeError(f"Device index must not be negative, got {index}")
        object.__setattr__(self, "type", type)
        object.__setattr__(self, "index", index)

    def __str__(self) -> str:
        return self.type if self.index is None else f"{self.type}:{self.index}"

    def __repr__(self) -> str:
        return f"device(type='{self.type}')" if self.index is None else \
            f"device(type='{self.type}', index={self.index})"

    def __eq__(self, other) -> bool:
        if isinstance(other, str):
            try:
                other = device(other)
            except (RuntimeError, TypeError):
                return False
        return isinstance(other, device) and (self.type, self.index) == (other.type, other.index)

    def __hash__(self) -> int:
        return hash((self.type, self.index))


# ---------------------------------------------------------------- availability

def cuda_available() -> bool:
    """An NVIDIA GPU the cuda backend can run on: through the CUDA driver (runtime/cuda_driver.py),
    or through MLX built with CUDA."""
    from .runtime import cuda_driver
    if cuda_driver.available():
        return True
    try:
        import mlx.core as mx
        return bool(hasattr(mx, "cuda") and mx.cuda.is_available())
    except Exception:                          # MLX missing or built without CUDA
        return False


def is_available(kind: str) -> bool:
    if kind == "cpu":
        return True
    if kind == "mps":
        return runtime.metal_available()
    return cuda_available()


def _unavailable(kind: str) -> Exception:
    if kind == "cuda":
        return AssertionError("lazytorch: device 'cuda' is not available (the cuda backend needs MLX's CUDA "
                              "build and an NVIDIA GPU); use 'cpu', see lazytorch.cuda.is_available()")
    return RuntimeError("lazytorch: device 'mps' is not available (the metal backend needs Apple silicon "
                        "with MLX); use 'cpu', see lazytorch.backends.mps.is_available()")


# ---------------------------------------------------------------- the process's device

def current() -> device:
    """The device every tensor of this process is on: the selected backend's device type (an
    accelerator's with index 0, as torch reports a tensor's: cuda:0, mps:0)."""
    kind = BACKEND_DEVICE.get(runtime.backend_name(), "cpu")
    return device(kind, None if kind == "cpu" else 0)


def select(dev) -> device:
    """Make `dev` the process's device (selecting its backend) and return it as a device.

    A no-op when the selected backend already runs on that device type, so a host backend chosen
    with set_backend (reference, metal-emu) stays behind "cpu"."""
    dev = dev if isinstance(dev, device) else device(dev)
    if dev.type == current().type:
        return dev
    if not is_available(dev.type):
        raise _unavailable(dev.type)
    if dev.type == "cpu":
        runtime.set_backend("cpu" if runtime.c_compiler_available() else "reference")
    else:
        runtime.set_backend(DEVICE_BACKEND[dev.type])
    return dev


def set_default_device(dev) -> None:
    """torch.set_default_device: here it selects the process's device (None: leave it as it is)."""
    if dev is not None:
        select(dev)


def get_default_device() -> device:
    return current()

"""nn.parallel: DataParallel on lazytorch's one device per process.

torch's DataParallel splits a batch over several GPUs; with one device it calls the wrapped module
as it is, which is what lazytorch always does (docs/nn.md, "one device per process").  Scripts that
wrap their model keep working, and the wrapper's state_dict keys carry torch's "module." prefix."""
from __future__ import annotations

from .module import Module


class DataParallel(Module):
    def __init__(self, module: Module, device_ids=None, output_device=None, dim: int = 0) -> None:
        super().__init__()
        self.module = module
        self.device_ids = list(device_ids) if device_ids is not None else [0]
        self.output_device = output_device if output_device is not None else self.device_ids[0]
        self.dim = dim

    def forward(self, *inputs, **kwargs):
        return self.module(*inputs, **kwargs)

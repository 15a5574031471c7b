"""lazytorch.backends.cuda: torch's flags, accepted without effect (lazytorch never uses TF32)."""
from __future__ import annotations

from types import SimpleNamespace

matmul = SimpleNamespace(allow_tf32=False, allow_fp16_reduced_precision_reduction=True,
                         allow_bf16_reduced_precision_reduction=True)


def is_built() -> bool:
    from ..device import cuda_available
    return cuda_available()

"""lazytorch.backends.cuda: torch's cuBLAS flags.  `matmul.allow_tf32` (False by default, as in
torch) lets float32 products other than convolutions called while it is set compute in TF32 on the
cuda backend; it is `lt.get_float32_matmul_precision() != "highest"`, one setting kept in
ir/precision.py.  The reduced-precision reduction flags are accepted without effect."""
from __future__ import annotations

from ..ir import precision


class _Matmul:
    """torch.backends.cuda.matmul: `allow_tf32` reads and writes the flag in ir/precision.py."""

    allow_tf32 = precision.allow_tf32("matmul")

    def __init__(self) -> None:
        self.allow_fp16_reduced_precision_reduction = True
        self.allow_bf16_reduced_precision_reduction = True


matmul = _Matmul()


def is_built() -> bool:
    from ..device import cuda_available
    return cuda_available()

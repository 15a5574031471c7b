"""lazytorch.backends: torch.backends' queries and flags.

`mps.is_available()` says whether the mps device (the metal backend) can be used.  The TF32 flags
follow torch's: `cudnn.allow_tf32` (default True) lets float32 convolutions, and
`cuda.matmul.allow_tf32` (default False; `lt.set_float32_matmul_precision`) every other float32
product, compute in TF32 on the cuda backend's GEMMs, decided when the op is called
(ir/precision.py).  The other cuDNN flags are accepted and change nothing (lazytorch uses no cuDNN)."""
from . import cuda, cudnn, mps  # noqa: F401

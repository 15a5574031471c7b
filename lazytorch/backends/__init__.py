"""lazytorch.backends: torch.backends' queries and flags.

`mps.is_available()` says whether the mps device (the metal backend) can be used.  The TF32 and
cuDNN flags that torch scripts set (`torch.backends.cuda.matmul.allow_tf32 = True`) are accepted
and change nothing: lazytorch's kernels never compute in TF32 and it uses no cuDNN."""
from . import cuda, cudnn, mps  # noqa: F401

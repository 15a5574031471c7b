"""lazytorch.backends: torch.backends' availability queries (lazytorch.backends.mps.is_available())."""
from . import mps  # noqa: F401

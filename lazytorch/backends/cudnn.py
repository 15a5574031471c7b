"""lazytorch.backends.cudnn: torch's flags, accepted without effect (lazytorch uses no cuDNN)."""
from __future__ import annotations

enabled = True
allow_tf32 = True
benchmark = False
deterministic = False


def is_available() -> bool:
    return False

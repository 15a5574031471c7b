"""lazytorch.backends.cudnn: torch's cuDNN flags.  `allow_tf32` (True by default, as in torch) lets a
float32 convolution called while it is set compute its products in TF32 on the cuda backend
(ir/precision.py, where the flag is kept); the other flags are accepted without effect (lazytorch
uses no cuDNN)."""
from __future__ import annotations

import sys
import types

from ..ir import precision

enabled = True
benchmark = False
deterministic = False


def is_available() -> bool:
    return False


class _Module(types.ModuleType):
    """This module, whose `allow_tf32` reads and writes the flag in ir/precision.py (scripts assign
    it: `lt.backends.cudnn.allow_tf32 = False`)."""

    allow_tf32 = precision.allow_tf32("cudnn")


sys.modules[__name__].__class__ = _Module

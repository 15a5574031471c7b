"""Reference implementation of the matmul primitive (numpy BLAS for floats, exact int64 for ints)."""
from __future__ import annotations

import numpy as np

from ...ir import dtypes as D
from ...ir.node import Node
from . import finish, np_compute, ref

# the dtype a matmul accumulates in: half types in float32, integers exactly in int64
_ACC = {D.FLOATING: lambda dt: D.float64 if dt is D.float64 else D.float32, D.INTEGER: lambda dt: D.int64}


@ref("matmul")
def _matmul(node: Node, a, b):
    acc = _ACC[node.dtype.category](node.dtype)
    x = np_compute(a, node.inputs[0].dtype, acc)
    y = np_compute(b, node.inputs[1].dtype, acc)
    with np.errstate(all="ignore"):
        out = np.matmul(x, y)
    if acc is D.int64 and node.dtype is not D.int64:
        out = out.astype(node.dtype.np)           # wraps around as torch's integer matmul does
    return finish(out, node)

"""The reference executor's op table: numpy implementations of the primitive ops.

Ops are grouped by family in this package's modules (pointwise.py, reduction.py, views.py, ...);
importing the package registers them all.  Each entry takes the node and its inputs' host arrays (storage form) and returns the node's value
in storage form.  These are the oracle for generated kernels and the fallback for ops without
one; they favour clarity and torch's exact semantics over speed.

`host_call` (ir/host.py) runs a named numpy function of the second table, HOST: each takes the
node's params as keyword arguments and its inputs as numpy values (compute form: bfloat16 widened
to float32) and returns the result's values, which `host_call` casts to the node's dtype.  The
families register them with @host from their own modules (host_math.py, host_select.py,
host_scatter.py, host_lapack.py).
"""
from __future__ import annotations

from typing import Callable

import numpy as np

from ...ir import dtypes as D
from ...ir.node import Node
from ...ir.promotion import opmath
from ...ir.registry import registrar

REF: dict[str, Callable] = {}
HOST: dict[str, Callable[..., np.ndarray]] = {}
ref = registrar(REF)          # @ref("add", ...): the op's implementation
host = registrar(HOST)        # @host("erfc", ...): the named function of host_call


def np_compute(arr: np.ndarray, src: D.DType, dst: D.DType) -> np.ndarray:
    """Host array of dtype src as numpy values of compute dtype dst."""
    return D.to_compute(np.asarray(arr), src).astype(opmath(dst).np, copy=False)


def accumulation(dtype: D.DType) -> D.DType:
    """The dtype a matmul, convolution or attention accumulates in: float32 for half types, float64
    for float64, integers exactly in int64 (`finish` then wraps them around to the node's dtype, as
    torch's integer arithmetic does)."""
    return opmath(dtype) if dtype.is_floating_point else D.int64


def finish(values, node: Node) -> np.ndarray:
    # np.array, not np.ascontiguousarray: the latter turns 0-d values into shape (1,)
    return np.array(np.broadcast_to(D.from_compute(values, node.dtype), node.shape), order="C")


@ref("host_call")
def _host_call(node: Node, *inputs):
    fn = HOST[node.attrs["fn"]]
    values = [D.to_compute(np.asarray(x), i.dtype) for x, i in zip(inputs, node.inputs)]
    with np.errstate(all="ignore"):
        out = fn(*values, **dict(node.attrs["params"]))
    return finish(np.asarray(out), node)


from . import indexing  # noqa: E402,F401
from . import pointwise, reduction, views  # noqa: E402,F401  (register the implementations)
from . import linalg  # noqa: E402,F401
from . import nn  # noqa: E402,F401
from . import shape_ops  # noqa: E402,F401
from . import conv  # noqa: E402,F401
from . import host_lapack, host_math, host_scatter, host_select  # noqa: E402,F401

"""The reference implementation of `host_call`: a table of named numpy functions.

Each entry takes the node's params as keyword arguments and its inputs as numpy values (compute
form: bfloat16 widened to float32) and returns the result's values; `host_call` casts them to the
node's dtype.  The families register their functions from their own modules (host_math.py,
host_select.py, host_scatter.py, host_lapack.py) with @host from host_table.py.
"""
from __future__ import annotations

import numpy as np

from ...ir import dtypes as D
from ...ir.node import Node
from . import finish, ref
from . import host_lapack, host_math, host_scatter, host_select  # noqa: F401  (register the functions)
from .host_table import HOST


@ref("host_call")
def _host_call(node: Node, *inputs):
    fn = HOST[node.attrs["fn"]]
    values = [D.to_compute(np.asarray(x), i.dtype) for x, i in zip(inputs, node.inputs)]
    with np.errstate(all="ignore"):
        out = fn(*values, **dict(node.attrs["params"]))
    return finish(np.asarray(out), node)


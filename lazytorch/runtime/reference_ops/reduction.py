"""Reference implementations of reductions."""
from __future__ import annotations

import numpy as np

from ...ir import dtypes as D
from ...ir.node import Node
from ...ir.promotion import opmath
from . import REF, finish, np_compute, ref

# ---------------------------------------------------------------- reductions

def _reduce(fn):
    def run(node: Node, x):
        dims = node.attrs["dim"]
        keep = node.attrs.get("keepdim", False)
        src = node.inputs[0].dtype
        acc = opmath(node.dtype)
        vals = np_compute(x, src, acc) if src.category != D.BOOL or acc.category != D.BOOL else x
        with np.errstate(all="ignore"):
            out = fn(vals, axis=dims, keepdims=keep) if x.ndim else fn(vals.reshape(1), axis=0,
                                                                        keepdims=False).reshape(())
        return finish(out, node)
    return run


for _name, _fn in {"sum": np.sum, "prod": np.prod, "amax": np.max, "amin": np.min, "any": np.any,
                   "all": np.all}.items():
    REF[_name] = _reduce(_fn)


def _argreduce(fn):
    def run(node: Node, x):
        dims = node.attrs["dim"]
        vals = D.to_compute(x, node.inputs[0].dtype)
        keep = node.attrs.get("keepdim", False)
        if x.ndim == 0:
            return np.zeros((), np.int64)
        if len(dims) == x.ndim and len(dims) != 1:
            out = fn(vals.reshape(-1), axis=0)
            return finish(np.reshape(out, (1,) * x.ndim if keep else ()), node)
        # torch returns the first NaN (argmax treats NaN as largest)
        d = dims[0]
        if vals.dtype.kind == "f" and np.isnan(vals).any():
            nan = np.isnan(vals)
            out = np.where(nan.any(axis=d), np.argmax(nan, axis=d), fn(np.where(nan, 0, vals), axis=d))
        else:
            out = fn(vals, axis=d)
        if keep:
            out = np.expand_dims(out, d)
        return finish(out, node)
    return run


REF["argmax"], REF["argmin"] = _argreduce(np.argmax), _argreduce(np.argmin)


@ref("cumsum")
def _cumsum(node: Node, x):
    """Running sum in the accumulation dtype (float32 for half types), rounded per element."""
    acc = opmath(node.dtype)
    vals = np_compute(x, node.inputs[0].dtype, acc)
    if vals.ndim == 0:
        return finish(vals, node)
    return finish(np.cumsum(vals, axis=node.attrs["dim"], dtype=vals.dtype), node)

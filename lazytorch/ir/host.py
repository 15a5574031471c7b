"""Helpers for builders whose ops run on the host: the `host_call` primitive and synchronisation.

`host_call(fn, inputs, shape, dtype, **params)` builds the node of a named numpy function (table in
runtime/reference_ops/__init__.py::HOST).  `host_value(node)` evaluates a node now and returns its value: the
data-dependent ops (nonzero, unique, masked_select, ...) need it to know their result's shape, so
they synchronise like `.item()`.  The Tensor API installs the evaluator (`HOST_VALUE`), as the
driver installs constant folding's: the IR layer may not import the driver.
"""
from __future__ import annotations

from typing import Callable

import numpy as np

from . import dtypes as D
from .meta import Args, rule
from .node import Node, note_build_effect
from .registry import OpDef

HOST_VALUE: Callable[[Node], np.ndarray] | None = None


def host_call(fn: str, inputs, shape, dtype: D.DType, **params) -> Node:
    from .build import call
    return call("host_call", tuple(inputs), fn, tuple(sorted(params.items())), tuple(int(s) for s in shape),
                D.as_dtype(dtype).name)


@rule("host_call")
def _host_call_meta(op: OpDef, a: Args) -> tuple[tuple[int, ...], D.DType]:
    return tuple(a["shape"]), D.as_dtype(a["dtype"])


def renamed(e: Exception, op: str) -> Exception:
    """`e` with its message prefixed by the op the user called (the ops a builder composes raise
    errors naming themselves); keeps the exception class where it can be built from a message."""
    text = str(e)
    if text.startswith(op):
        return e
    for cls in type(e).__mro__:
        if cls.__module__ == "builtins":
            return cls(f"{op}: {text}")
    return RuntimeError(f"{op}: {text}")


def host_value(node: Node) -> np.ndarray:
    """The value of `node` as numpy (bfloat16 widened to float32), evaluating it first if pending."""
    if HOST_VALUE is None:
        raise RuntimeError("host_value: no evaluator installed (import lazytorch first)")
    note_build_effect()
    return HOST_VALUE(node)


def from_values(values, dtype: D.DType) -> Node:
    """A buffer node holding `values` (numpy, compute form) as `dtype`."""
    arr = np.array(D.from_compute(np.asarray(values), dtype), copy=True)
    return Node.from_buffer(arr, tuple(arr.shape), dtype)

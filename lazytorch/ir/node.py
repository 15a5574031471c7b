"""The lazy IR node.

A Node is one value of the program: an op applied to input nodes with attributes, whose shape and
dtype its meta rule computed when it was built.  Leaves are `buffer` (data that exists), `scalar`
(a Python number, passed to kernels at run time, so its value is not part of the structure) and,
inside pass pipelines, `param` (the i-th leaf of a graph being compiled).

Every node carries `key`, a hash of its own structure (op, attributes, shape, dtype) that ignores
data, buffer identity and scalar values.  It is computed once when the node is built; the key of
a whole program (ir/graph.py::program) folds these with where each node's inputs come from, in
one pass over the program.
"""
from __future__ import annotations

import math

from typing import Any

from .dtypes import DType

LEAF_OPS = frozenset({"buffer", "scalar", "param"})


class Node:
    __slots__ = ("op", "inputs", "attrs", "shape", "dtype", "key", "buffer", "value", "__weakref__")

    def __init__(self, op: str, inputs: tuple["Node", ...], attrs: dict[str, Any],
                 shape: tuple[int, ...], dtype: DType):
        self.op = op
        self.inputs = inputs
        self.attrs = attrs
        self.shape = shape
        self.dtype = dtype
        self.buffer = None
        self.value = None
        self.key = hash((op, tuple(attrs.items()) if attrs else (), shape, dtype.name))

    @classmethod
    def with_key(cls, op: str, inputs: tuple["Node", ...], attrs: dict[str, Any],
                 shape: tuple[int, ...], dtype: DType, key: int) -> "Node":
        """A node whose key (a function of op, attrs, shape and dtype only) the caller already knows:
        the Tensor API's fast path builds the same kinds of node over and over."""
        node = cls.__new__(cls)
        node.op, node.inputs, node.attrs, node.shape, node.dtype = op, inputs, attrs, shape, dtype
        node.buffer = node.value = None
        node.key = key
        return node

    # ---- leaves ----
    @classmethod
    def from_buffer(cls, buffer, shape: tuple[int, ...], dtype: DType) -> "Node":
        node = cls("buffer", (), {}, shape, dtype)
        node.buffer = buffer
        return node

    @classmethod
    def scalar(cls, value, dtype: DType) -> "Node":
        node = cls.with_key("scalar", (), {}, (), dtype, _SCALAR_KEYS.get(dtype) or _scalar_key(dtype))
        node.value = value
        return node

    def realize(self, buffer) -> None:
        """Replace this node's history by its computed buffer: the graph is cut here."""
        self.op, self.inputs, self.attrs, self.buffer = "buffer", (), {}, buffer
        self.key = hash(("buffer", (), self.shape, self.dtype.name))

    # ---- queries ----
    @property
    def ndim(self) -> int:
        return len(self.shape)

    @property
    def numel(self) -> int:
        return math.prod(self.shape)

    @property
    def is_leaf(self) -> bool:
        return self.op in LEAF_OPS

    @property
    def realized(self) -> bool:
        return self.op == "buffer"

    def __repr__(self) -> str:
        return f"Node({self.op}, {self.dtype.short}{list(self.shape)})"


_SCALAR_KEYS: dict[DType, int] = {}        # scalar leaves are built on every op with a Python number


def _scalar_key(dtype: DType) -> int:
    key = _SCALAR_KEYS[dtype] = hash(("scalar", (), (), dtype.name))
    return key


def type_str(node: Node) -> str:
    """Compact type as in torch.fx dumps: f32[64, 128]."""
    return f"{node.dtype.short}[{', '.join(map(str, node.shape))}]"

"""nn.Parameter and the one way nn code replaces a tensor's value in place."""
from __future__ import annotations

import numpy as np

from ..autograd.grad_mode import no_grad
from ..ir import dtypes as D
from ..ir.node import Node
from ..tensor import Tensor


class Parameter(Tensor):
    """A tensor that a Module registers as a parameter when assigned as an attribute.

    It shares the value of `data` (as torch's does) and stores `requires_grad` (default True), the
    flag autograd and `Module.requires_grad_` read."""

    def __init__(self, data: Tensor | None = None, requires_grad: bool = True):
        if data is None:
            data = Tensor(Node.from_buffer(np.zeros((0,), np.float32), (0,), D.float32))
        if not isinstance(data, Tensor):
            raise TypeError(f"Parameter(): expected a lazytorch Tensor as data, got {type(data).__name__}")
        super().__init__(data.node)
        self.requires_grad = requires_grad

    def __repr__(self) -> str:
        return "Parameter containing:\n" + super().__repr__()

    def __reduce_ex__(self, protocol):
        return (Parameter, (Tensor(self.node), self.requires_grad))


def set_value(t: Tensor, node: Node, what: str = "in-place op") -> None:
    """Give `t` a new value (any dtype) keeping its identity, as torch's `t.data = ...` does (outside
    autograd: a parameter stays a leaf that requires grad)."""
    with no_grad():
        t._rebind(node, what)


def host_node(values: np.ndarray, dtype: D.DType) -> Node:
    """A buffer node holding a private copy of the numpy `values` in dtype's storage form."""
    values = np.asarray(values)
    stored = np.array(D.from_compute(values, dtype), copy=True, order="C").reshape(values.shape)
    return Node.from_buffer(stored, tuple(values.shape), dtype)

"""The user-facing lazy Tensor.

A Tensor is a handle on an IR node.  Ops build new nodes (nothing runs); `lazytorch.eval` or any
call that needs a value (numpy, item, tolist, bool, print) materialises it.  In-place ops are
functionalised: `x.add_(y)` rebinds x to a new node.  Tensors made by view ops (tag `view` in the
registry) alias their base as torch's do: they keep the base and a ViewSpec into it, re-derive
their node when the base is mutated, and an in-place op on them writes through into the base.
"""
from __future__ import annotations

import weakref
from itertools import count
from typing import Any, Callable, Iterator

import numpy as np

from .ir import dtypes as D
from .ir import views as V
from .ir.build import contiguous, view_of
from .ir.errors import op_error
from .ir.node import Node, type_str


# Pending tensors, weakly, in creation order: an eval also stores the pending values of live tensors
# in the same pending graph (realize.synced_roots), so a loop's history is cut where a user can
# still reach it.  Realized entries are dropped as evals find them (an in-place op re-tracks).
_LIVE: dict[int, weakref.ref] = {}
_ticket = count()


def _track(t: "Tensor") -> None:
    k = next(_ticket)
    _LIVE[k] = weakref.ref(t, lambda _, k=k: _LIVE.pop(k, None))


def live_pending() -> Iterator[Node]:
    """The pending nodes live (non-view) tensors hold, oldest first."""
    done = []
    for k, ref in list(_LIVE.items()):
        t = ref()
        node = None if t is None else t._node
        if node is None or node.realized:
            done.append(k)
        else:
            yield node
    for k in done:
        _LIVE.pop(k, None)


class Tensor:
    __slots__ = ("_node", "_base", "_spec", "_base_version", "_version", "__weakref__")

    def __init__(self, node: Node, base: "Tensor | None" = None, spec: V.ViewSpec | None = None):
        self._node = node
        self._base = base                      # root tensor this one aliases (None: owns its value)
        self._spec = spec                      # how this view indexes the base's contiguous layout
        self._base_version = base._version if base is not None else 0
        self._version = 0                      # bumped by every in-place op on this tensor
        if base is None and not node.realized:
            _track(self)

    # ---- the node, re-derived for views whose base was mutated ----
    @property
    def node(self) -> Node:
        base = self._base
        if base is not None and self._base_version != base._version:
            self._node = view_node(base.node, self._spec)
            self._base_version = base._version
        return self._node

    def _rebind(self, node: Node, op: str = "in-place op") -> None:
        """Give this tensor a new value (in-place `op`): write through into the base for views."""
        if self._base is None:
            self._node = node
            self._version += 1
            _track(self)
            return
        base = self._base
        if V.has_internal_overlap(self._spec):
            raise op_error(RuntimeError, op, "unsupported operation: more than one element of the "
                           f"written-to tensor refers to a single memory location (view {self._spec})",
                           {"self": self._node}, "clone() the tensor before writing to it")
        update = Node("view_assign", (base.node, node), {"view": self._spec}, base.node.shape, base.dtype)
        base._rebind(update, op)
        self._node = view_node(base.node, self._spec)
        self._base_version = base._version

    # ---- metadata, known without computing ----
    @property
    def shape(self) -> tuple[int, ...]:
        return Size(self._node.shape)

    @property
    def dtype(self) -> D.DType:
        return self._node.dtype

    @property
    def ndim(self) -> int:
        return len(self._node.shape)

    def dim(self) -> int:
        return self.ndim

    def size(self, dim: int | None = None):
        if dim is None:
            return self.shape
        from .ir.errors import wrap_dim
        return self._node.shape[wrap_dim("size", dim, self.ndim, {"self": self._node})]

    def numel(self) -> int:
        return self._node.numel

    nelement = numel

    def element_size(self) -> int:
        return self.dtype.itemsize

    @property
    def is_floating_point_(self) -> bool:
        return self.dtype.is_floating_point

    def is_floating_point(self) -> bool:
        return self.dtype.is_floating_point

    @property
    def is_lazy(self) -> bool:
        return not self.node.realized

    @property
    def device(self) -> str:
        from .runtime import backend_name
        return backend_name()

    def __len__(self) -> int:
        if not self.ndim:
            raise TypeError("len() of a 0-d tensor")
        return self._node.shape[0]

    def __iter__(self):
        if not self.ndim:
            raise TypeError("iteration over a 0-d tensor")
        return iter(self.unbind(0))

    def __hash__(self) -> int:
        return id(self)

    # ---- values: these evaluate ----
    def numpy(self) -> np.ndarray:
        from .realize import eval_tensors, host_value
        eval_tensors([self], live_pending())
        return host_value(self.node)

    def __array__(self, dtype=None, copy=None):
        arr = self.numpy()
        return arr if dtype is None else arr.astype(dtype)

    def tolist(self):
        return self.numpy().tolist()

    def item(self):
        if self.numel() != 1:
            raise RuntimeError(f"item(): a Tensor with {self.numel()} elements cannot be converted to a Python "
                               f"scalar (shape {list(self.shape)}); only one-element tensors can")
        return self.numpy().reshape(()).item()

    def __bool__(self) -> bool:
        if self.numel() != 1:
            raise RuntimeError(f"bool(): the truth value of a Tensor with {self.numel()} elements is ambiguous "
                               f"(shape {list(self.shape)}); use .any() or .all()")
        return bool(self.item())

    def __float__(self) -> float:
        return float(self.item())

    def __int__(self) -> int:
        return int(self.item())

    def __index__(self) -> int:
        if self.dtype.is_floating_point or self.numel() != 1:
            raise TypeError("only integer tensors of a single element can be converted to an index")
        return int(self.item())

    def to_mlx(self):
        import mlx.core as mx
        arr = self.numpy()                     # bfloat16 arrives widened to float32
        if self.dtype is D.bfloat16:
            return mx.array(arr).astype(mx.bfloat16)
        return mx.array(arr)

    def __repr__(self) -> str:
        arr = self.numpy()
        body = np.array2string(arr, separator=", ", threshold=1000, precision=4, prefix="tensor(")
        suffix = "" if self.dtype in (D.float32, D.int64, D.bool_) else f", dtype=lazytorch.{self.dtype.name}"
        return f"tensor({body}{suffix})"

    def __format__(self, spec: str) -> str:
        if self.ndim == 0:
            return format(self.item(), spec)
        return repr(self)

    def type_str(self) -> str:
        return type_str(self._node)

    # ---- indexing (lazytorch/indexing.py) ----
    def __getitem__(self, key) -> "Tensor":
        from .indexing import getitem
        return getitem(self, key)

    def __setitem__(self, key, value) -> None:
        from .indexing import setitem
        setitem(self, key, value)

    # ---- transposes as properties: views, as in torch ----
    @property
    def T(self) -> "Tensor":  # noqa: N802  (torch's name)
        """All dims reversed."""
        return self.permute(tuple(reversed(range(self.ndim))))

    @property
    def mT(self) -> "Tensor":  # noqa: N802  (torch's name)
        """The last two dims swapped (a batch of matrices transposed)."""
        if self.ndim < 2:
            from .ir.errors import op_error
            raise op_error(RuntimeError, "mT", f"needs a tensor of at least 2 dims, got a {self.ndim}-d one",
                           {"self": self._node})
        return self.transpose(-2, -1)

    H = T
    mH = mT

    # ---- torch-compatible odds and ends ----
    def contiguous(self, memory_format=None) -> "Tensor":
        """self when already contiguous (as torch, the result then aliases self), else a copy."""
        if self.is_contiguous():
            return self
        return Tensor(contiguous(self.node))

    def is_contiguous(self) -> bool:
        return self._base is None or V.is_contiguous(self._spec)

    def clone(self, memory_format=None) -> "Tensor":
        from .ir.build import call
        return Tensor(call("clone", self.node))

    def detach(self) -> "Tensor":
        return self

    def requires_grad_(self, flag: bool = True) -> "Tensor":
        return self

    def cpu(self) -> "Tensor":
        return self

    def stride(self, dim: int | None = None):
        strides = self._spec.strides if self._base is not None else V.contiguous_strides(self._node.shape)
        return strides if dim is None else strides[dim]


class Size(tuple):
    """torch.Size: a tuple of ints that prints as `lazytorch.Size([2, 3])`."""

    def __repr__(self) -> str:
        return f"lazytorch.Size({list(self)})"

    def numel(self) -> int:
        n = 1
        for s in self:
            n *= s
        return n


def alias(this: Tensor, build: Callable[[Node], Any]) -> Any:
    """Run `build` (Node -> Node or tuple of Nodes) on this tensor's node and wrap the results.

    Results that are views of this tensor's data alias its root, as torch's views do.  To find each
    result's ViewSpec into the root, `build` is traced once more over a placeholder for the root.
    """
    result = build(this.node)
    root = this._base if this._base is not None else this
    spec = this._spec if this._base is not None else V.contiguous(root.shape)
    placeholder = Node("param", (), {"slot": -1, "kind": "buffer"}, tuple(root.shape), root.dtype)
    traced = build(view_of(placeholder, spec))

    def wrap_one(node: Node, probe: Node) -> Tensor:
        if probe is placeholder:
            return Tensor(node, root, V.contiguous(root.shape))
        if probe.op == "view" and probe.inputs[0] is placeholder:
            return Tensor(node, root, probe.attrs["view"])
        return Tensor(node)

    if isinstance(result, Node):
        return wrap_one(result, traced)
    return type(result)(wrap_one(r, p) for r, p in zip(result, traced))


def view_node(base: Node, spec: V.ViewSpec) -> Node:
    """The node of a view with `spec` over the value of `base`."""
    if base.op == "view":                      # spec indexes base's value, not base's own base
        base = contiguous(base)
    return view_of(base, spec)

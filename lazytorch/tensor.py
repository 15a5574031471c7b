"""The user-facing lazy Tensor.

A Tensor is a handle on an IR node.  Ops build new nodes (nothing runs); `lazytorch.eval` or any
call that needs a value (numpy, item, tolist, bool, print) materialises it.  In-place ops are
functionalised: `x.add_(y)` rebinds x to a new node.  Tensors made by view ops (tag `view` in the
registry) alias their base as torch's do: they keep the base and a ViewSpec into it, re-derive
their node when the base is mutated, and an in-place op on them writes through into the base.
"""
from __future__ import annotations

import weakref
from typing import Any, Callable

import numpy as np

from .autograd import state as _grad
from .autograd.state import MODE as _MODE
from .ir import dtypes as D
from .ir import views as V
from .ir.build import contiguous, contiguous_spec, view_of
from .ir.errors import op_error
from .ir.native import NATIVE
from .ir.node import LEAF_OPS, Node, note_build_effect, type_str
from .host_data import SHARED, is_shared, share, snapshot
from .realize import LIVE, eval_nodes, host_value


# Pending tensors made or rebound since an eval last looked, weakly, in creation order: an eval
# also stores the pending values of live tensors in the same pending graph (realize.LIVE: it
# walks these once, then parks the unrelated ones in an index), so a loop's history is cut where
# a user can still reach it.  Every op makes a tensor, so tracking one is an append of a plain
# weak reference (no callback: a callback per tensor is a Python call at every tensor's death);
# dead and realized entries are dropped when an eval takes the list, or when it outgrows twice
# its last live size (repeats too: a re-tracked tensor's weak reference is the same object).
# Whatever gives a tracked tensor another pending node tracks it again (`_track`).
_LIVE: list[weakref.ref] = LIVE.fresh
_COMPACT_AT = [4096]                 # length at which the next append compacts the list
_new = object.__new__


def _track(t: "Tensor") -> None:
    _LIVE.append(weakref.ref(t))
    if len(_LIVE) > _COMPACT_AT[0]:
        _compact()


def _compact() -> None:
    """Drop entries whose tensor died or was realized, and repeats; let the list grow to twice
    what is left."""
    LIVE.compact()
    _COMPACT_AT[0] = max(4096, 2 * len(_LIVE))


def live_pending() -> list[Node]:
    """The pending nodes live (non-view) tensors hold, oldest first (cuda.synchronize evaluates
    them all)."""
    return LIVE.pending()


# In-place updates of one tensor are counted; every CHAIN_CHECK-th looks how deep its pending value
# is, and one as deep is evaluated (Tensor._flush_chain): a pending chain stays below twice that.
CHAIN_CHECK = 64
# Whether this thread runs a function on lt.compile's placeholders (compile.py installs its test)
TRACING: list[Callable[[], bool]] = [lambda: False]


def _pending_depth(node: Node, limit: int) -> int:
    """How many pending nodes lie below `node` along first inputs, up to `limit`: an in-place
    update's first input is the value it updates (`add_`'s add(self, other), `view_assign`'s base),
    so this is how many updates of one tensor are pending.  (Along the first *pending* input, an
    SGD update p.add(g) led into g's gradient graph, deeper than any chain: every 64th step of a
    lazy training loop evaluated each parameter's update mid-step, a program of its own.)"""
    depth = 0
    while depth < limit:
        inputs = node.inputs
        if not inputs or inputs[0].op in LEAF_OPS:
            break
        node = inputs[0]
        depth += 1
    return depth


class Tensor:
    __slots__ = ("_node", "_base", "_spec", "_base_version", "_version", "_grad", "__weakref__")

    def __init__(self, node: Node, base: "Tensor | None" = None, spec: V.ViewSpec | None = None):
        self._node = node
        self._base = base                      # root tensor this one aliases (None: owns its value)
        self._spec = spec                      # how this view indexes the base's contiguous layout
        self._base_version = base._version if base is not None else 0
        self._version = 0                      # bumped by every in-place op on this tensor
        self._grad = None                      # .grad: a lazy tensor after backward
        if _MODE.any_leaf:                     # autograd: does this value require grad?
            _grad.track(node)
        if base is None and node.op != "buffer":
            live = _LIVE                       # (_track, inlined: every op makes a tensor)
            live.append(weakref.ref(self))
            if len(live) > _COMPACT_AT[0]:
                _compact()

    # ---- the node, re-derived for views whose base was mutated ----
    @property
    def node(self) -> Node:
        base = self._base
        if base is not None and self._base_version != base._version:
            self._node = view_node(base._node, self._spec)
            self._base_version = base._version
        if SHARED and (is_shared(self._node.buffer) or base is not None and is_shared(base._node.buffer)):
            return self._snapshot()
        return self._node

    def _raw_node(self) -> Node:
        """This tensor's own node (`node` less the snapshot): what views alias and evals store into."""
        base = self._base
        if base is not None and self._base_version != base._version:
            self._node = view_node(base._node, self._spec)
            self._base_version = base._version
        return self._node

    def _snapshot(self) -> Node:
        """The node a result built now reads while the user holds arrays over this tensor's data
        (host_data "Data going out"): a copy of the data as it is now.  Autograd's nodes stay."""
        base = self._base
        if base is not None and is_shared(base._node.buffer):
            return self._node if base._node in _grad.RECORDS else view_node(snapshot(base._node), self._spec)
        return self._node if self._node in _grad.RECORDS else snapshot(self._node)

    def _rebind(self, node: Node, op: str = "in-place op") -> None:
        """Give this tensor a new value (in-place `op`): write through into the base for views."""
        if self._base is None:
            note_build_effect()            # (a build that updates an argument is not replayed)
            leaf = _grad.MODE.any_leaf and self._is_grad_leaf()
            if leaf and _grad.MODE.enabled:
                raise RuntimeError(f"{op}: a leaf Variable that requires grad is being used in an in-place operation "
                                   f"(shape {list(self.shape)}); do it under lazytorch.no_grad() or on a clone()")
            old = self._node
            self._node = node
            self._version += 1
            if leaf:
                _grad.register_leaf(node, self)
            elif _grad.MODE.any_leaf:
                _grad.track(node)
            _track(self)
            if SHARED and old.op == "buffer" and is_shared(old.buffer) and old not in _grad.RECORDS \
                    and node not in _grad.RECORDS:
                self._write_through(old)
            if self._version % CHAIN_CHECK == 0 and _pending_depth(node, CHAIN_CHECK) >= CHAIN_CHECK:
                self._flush_chain()
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

    def _flush_chain(self) -> None:
        """Evaluate a value that in-place updates have kept pending for CHAIN_CHECK updates or more
        (a counter no step reads: BatchNorm's num_batches_tracked grew by two nodes a step, a
        chain without end in a lazy training loop).  Not while lt.compile traces: there each
        update is replayed."""
        if not TRACING[0]():
            eval_nodes([self._node], LIVE)

    def _write_through(self, old: Node) -> None:
        """An in-place op on a tensor whose data the user holds as arrays (`x.numpy()`) shows in
        those arrays at once, as torch's shared memory does: the new value is evaluated now and
        written into the buffer they view, which stays the tensor's.  Results built from the old
        value read snapshots of it (host_data "Data going out"), so writing the buffer cannot
        change them."""
        eval_nodes([self._node], LIVE)
        new = self._node.buffer
        if new.__class__ is np.ndarray and old.buffer.shape == new.shape and old.buffer.dtype == new.dtype:
            np.copyto(old.buffer, new)
            self._node = old

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
    def device(self):
        """The process's device (lazytorch/device.py: one device per process)."""
        from .device import current
        return current()

    @property
    def is_cuda(self) -> bool:
        return self.device.type == "cuda"

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
        """The value as a numpy array: evaluated if pending, then a view of the tensor's buffer (no
        copy, as torch's; bfloat16 comes back widened to a float32 copy)."""
        base = self._base
        if base is None:
            node = self._node
        else:
            node = self._raw_node()
            if node.op == "buffer" and is_shared(base._node.buffer):
                node = self._node = view_node(base._node, self._spec)   # writes through the root's array
        readers = True
        if node.op != "buffer":
            eval_nodes([node], LIVE)
            readers = False                      # (the eval stored every live value reading node)
        if node.buffer.__class__ is np.ndarray and node.dtype is not D.bfloat16:
            return self._share(readers)
        return host_value(node)

    def _share(self, readers: bool = True) -> np.ndarray:
        """The realized buffer as an array the user may write through (host_data "Data going out"):
        results built from this tensor and still pending get a snapshot first (torch computed them).
        `readers`: whether live pending values may read it (not right after an eval that stored them)."""
        node = self._node
        if self._base is None and readers and not is_shared(node.buffer):
            if LIVE.reads(node) and node not in _grad.RECORDS:
                self._node = Node.from_buffer(node.buffer, node.shape, node.dtype)
                node.buffer = np.array(node.buffer, copy=True)
                self._version += 1               # views of this tensor re-derive: they share its data
        return share(self._node.buffer)

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

    # ---- indexing: x[key] and x[key] = value are lazytorch/indexing.py's getitem and setitem, put on
    # the class by api.install with the registry's methods (indexing.py builds on Tensor) ----

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

    # ---- autograd (lazytorch/autograd/) ----
    def _wrap(self, node: Node) -> "Tensor":
        """A new plain Tensor on `node`: autograd makes its gradient tensors through this, so that it
        stays below tensor.py (it never imports the Tensor class)."""
        return Tensor(node)

    def _is_grad_leaf(self) -> bool:
        rec = _grad.RECORDS.get(self._node)
        return rec is not None and rec.leaf is not None and rec.leaf() is self

    @property
    def requires_grad(self) -> bool:
        return _grad.MODE.any_leaf and _grad.classify(self.node)

    @requires_grad.setter
    def requires_grad(self, flag: bool) -> None:
        self.requires_grad_(flag)

    def requires_grad_(self, requires_grad: bool = True) -> "Tensor":
        if requires_grad and not (self.dtype.is_floating_point):
            raise RuntimeError(f"requires_grad_: only Tensors of floating point dtype can require gradients, got "
                               f"{self.dtype.name}")
        if self.requires_grad and not self.is_leaf:
            if requires_grad:
                return self
            raise RuntimeError("you can only change requires_grad flags of leaf variables. If you want to use a "
                               "computed variable in a subgraph that doesn't require differentiation use "
                               "var_no_grad = var.detach().")
        if requires_grad:
            _grad.register_leaf(self.node, self)
        elif self._node in _grad.RECORDS:
            del _grad.RECORDS[self._node]
        return self

    @property
    def is_leaf(self) -> bool:
        return not self.requires_grad or _grad.RECORDS[self.node].snapshot is None

    @property
    def grad(self) -> "Tensor | None":
        return self._grad

    @grad.setter
    def grad(self, value: "Tensor | None") -> None:
        if value is not None and tuple(value.shape) != tuple(self.shape):
            raise RuntimeError(f"assigned grad has data of a different size: {list(value.shape)} vs the tensor's "
                               f"{list(self.shape)}")
        self._grad = value

    @property
    def grad_fn(self):
        if not self.requires_grad:
            return None
        rec = _grad.RECORDS[self.node]
        if rec.snapshot is None:
            return None
        from .autograd.engine import GradFn
        return GradFn(rec.snapshot.op)

    def backward(self, gradient=None, retain_graph: bool | None = None, create_graph: bool = False,
                 inputs=None) -> None:
        from .autograd import backward
        backward([self], None if gradient is None else [gradient], retain_graph, create_graph, inputs)

    def retain_grad(self) -> None:
        if not self.requires_grad:
            raise RuntimeError("can't retain_grad on Tensor that has requires_grad=False")
        rec = _grad.RECORDS[self.node]
        if rec.snapshot is not None:
            import weakref
            rec.retain = weakref.ref(self)

    @property
    def retains_grad(self) -> bool:
        rec = _grad.RECORDS.get(self.node) if _grad.MODE.any_leaf else None
        return rec is not None and rec.retain is not None and rec.retain() is self

    @property
    def data(self) -> "Tensor":
        """The value without autograd history (torch's `.data`: a detached tensor of the same value)."""
        return self.detach()

    @data.setter
    def data(self, value: "Tensor") -> None:
        if tuple(value.shape) != tuple(self.shape) or value.dtype != self.dtype:
            raise RuntimeError(f"data: assigned tensor of shape {list(value.shape)} and dtype {value.dtype} to a "
                               f"tensor of shape {list(self.shape)} and dtype {self.dtype}; they must match")
        with _no_grad():
            self._rebind(value.detach().node, "data")

    def detach(self) -> "Tensor":
        """The same value, cut from the autograd graph (a new node, so nothing downstream requires grad)."""
        node = self.node
        if not (_grad.MODE.any_leaf and node in _grad.RECORDS):
            return Tensor(node)
        if node.realized:
            return Tensor(Node.from_buffer(node.buffer, node.shape, node.dtype))
        from .ir.build import call
        with _no_grad():
            return Tensor(call("clone", node))

    def detach_(self) -> "Tensor":
        if self._base is not None:
            raise RuntimeError("Can't detach views in-place. Use detach() instead.")
        self._node = self.detach()._node
        if self._node.op != "buffer":
            _track(self)                        # (a new pending node: see _LIVE)
        return self

    # ---- devices and dtype moves (lazytorch/device.py) ----
    def to(self, *args, **kwargs) -> "Tensor":
        """to(dtype) | to(device[, dtype]) | to(other), keywords dtype=, device=, copy=, non_blocking=.

        Naming a device selects it for the process (see lazytorch/device.py); the result is self
        when neither dtype nor copy asks for a new tensor, as in torch."""
        if not kwargs and len(args) == 1 and args[0].__class__ is D.DType:     # to(dtype): most calls
            if args[0] is self.dtype:
                return self
            from .ir.build import call
            return Tensor(call("to", self.node, args[0]))
        from .device import select
        dev, dtype, copy = parse_to("to", args, kwargs)
        if dev is not None:
            select(dev)
        out = self
        if dtype is not None and D.as_dtype(dtype) is not self.dtype:
            from .ir.build import call
            out = Tensor(call("to", self.node, D.as_dtype(dtype)))
        return self.clone() if copy and out is self else out

    def cpu(self) -> "Tensor":
        return self.to("cpu")

    def cuda(self, device=None, non_blocking: bool = False) -> "Tensor":
        return self.to("cuda" if device is None else device if not isinstance(device, int) else f"cuda:{device}")

    def __dlpack__(self, *args, **kwargs):
        return self.numpy().__dlpack__(*args, **kwargs)

    def __dlpack_device__(self):
        return self.numpy().__dlpack_device__()

    # ---- whole-tensor writes (functionalised like every in-place op) ----
    def copy_(self, src, non_blocking: bool = False) -> "Tensor":
        """Write src's values (broadcast, cast to self's dtype) into self.  src may be a tensor, a
        Python number, or foreign data (numpy / torch / DLPack arrays, nested lists), as in torch.
        fill_ and zero_ come from the registry (ir/registry/misc.yaml), as does the `copy` op."""
        from .ir.build import as_node, call
        if not isinstance(src, (Tensor, int, float, bool)):
            from .host_data import host_values
            arr, dt = host_values(src)
            src = Node.from_buffer(arr, tuple(arr.shape), dt)
        self._rebind(call("copy", self.node, as_node(src), non_blocking), "copy_")
        return self

    def stride(self, dim: int | None = None):
        strides = self._spec.strides if self._base is not None else V.contiguous_strides(self._node.shape)
        return strides if dim is None else strides[dim]


def holding(node: Node) -> "Tensor":
    """`Tensor(node)` for a realized node (lt.compile's outputs), inlined: the constructor's call
    costs as much as its body."""
    t = _new(Tensor)
    t._node = node
    t._base = t._spec = t._grad = None
    t._base_version = t._version = 0
    if _MODE.any_leaf:
        _grad.track(node)
    return t


def pending(node: Node) -> "Tensor":
    """`Tensor(node)` for a node just built that is not a view and not a buffer, inlined (the
    fast path of `x * 2.0` makes one per op; the constructor's call costs as much as its body)."""
    t = _new(Tensor)                     # (holding's body: a second frame per op costs ~5%)
    t._node = node
    t._base = t._spec = t._grad = None
    t._base_version = t._version = 0
    if _MODE.any_leaf:
        _grad.track(node)
    live = _LIVE
    live.append(weakref.ref(t))
    if len(live) > _COMPACT_AT[0]:
        _compact()
    return t


if NATIVE is not None:                   # (realize.py's LiveTensors.alone, its common case in C)
    LIVE.take_alone = NATIVE.AloneTaker(Tensor, Node)


# What ir/build.py's fast path needs to make a pending Tensor itself, as `pending` does (one
# Python frame per `x * 2.0` instead of two): autograd's mode and classifier, the live list, its
# compaction threshold and compaction.
PENDING_PARTS = (_MODE, _grad.track, _LIVE, _COMPACT_AT, _compact)


def _no_grad():
    from .autograd.grad_mode import no_grad
    return no_grad()


class Size(tuple):
    """torch.Size: a tuple of ints that prints as `lazytorch.Size([2, 3])`."""

    def __repr__(self) -> str:
        return f"lazytorch.Size({list(self)})"

    def numel(self) -> int:
        n = 1
        for s in self:
            n *= s
        return n


# ---- the argument forms of Tensor.to / Module.to (here, not in device.py: `to(tensor)` needs Tensor) ----
def _is_device(x) -> bool:
    from .device import device
    return isinstance(x, (device, str)) or (isinstance(x, int) and not isinstance(x, bool))


def parse_to(op: str, args: tuple, kwargs: dict):
    """(device | None, dtype | None, copy) from the argument forms of Tensor.to / Module.to:
    (dtype), (device), (device, dtype), (tensor), with keywords device=, dtype=, copy=, non_blocking=."""
    from .device import device
    kwargs = dict(kwargs)
    dev, dtype = kwargs.pop("device", None), kwargs.pop("dtype", None)
    copy = bool(kwargs.pop("copy", False))
    kwargs.pop("non_blocking", None)
    kwargs.pop("memory_format", None)
    if kwargs:
        raise TypeError(f"{op}() got an unexpected keyword argument '{next(iter(kwargs))}'")
    args = list(args)
    if args and isinstance(args[0], Tensor):
        other = args.pop(0)
        dev, dtype = other.device, other.dtype
    elif args and args[0] is not None and _is_device(args[0]) and not _is_dtype_name(args[0]):
        dev = args.pop(0)
    if args and args[0] is not None:
        dtype = args.pop(0)
    if args and isinstance(args[0], bool):                  # to(device, dtype, non_blocking, copy)
        args.pop(0)
        if args and isinstance(args[0], bool):
            copy = args.pop(0)
    if args:
        raise TypeError(f"{op}() received an invalid combination of arguments: {args!r}; expected "
                        "(dtype), (device, dtype=None), (tensor) with keywords device=, dtype=, copy=")
    return (device(dev) if dev is not None else None), dtype, copy


def _is_dtype_name(x) -> bool:
    return isinstance(x, str) and x.removeprefix("torch.").removeprefix("lazytorch.") in _DTYPE_NAMES


_DTYPE_NAMES = frozenset({"float16", "bfloat16", "float32", "float64", "half", "float", "double", "bool",
                          "uint8", "int8", "int16", "int32", "int64", "long", "int", "short"})


def alias(this: Tensor, build: Callable[[Node], Any]) -> Any:
    """Run `build` (Node -> Node or tuple of Nodes) on this tensor's node and wrap the results.

    Results that are views of this tensor's data alias its root, as torch's views do.  Where this
    tensor's node reads the root's node directly (a root, or a view of one whose own node is not a
    view), a result's spec into the root is its own; otherwise, to find each result's ViewSpec
    into the root, `build` is traced once more over a placeholder for the root.
    """
    node = this._raw_node()                     # (a view shares its root's data, also while shared)
    result = build(node)
    root = this._base if this._base is not None else this
    root_node = root._node
    if root_node.op != "view" and (node is root_node or node.op == "view" and node.inputs[0] is root_node):
        # The input reads the root's node directly, so a result reads the root's data exactly when
        # it is that node or a view of it, and that view's spec is its spec into the root: what
        # the trace below would find, without building the op twice (the common case).
        return _wrap_views(result, root, root_node)
    spec = this._spec if this._base is not None else contiguous_spec(tuple(root.shape))
    placeholder = Node("param", (), {"slot": -1, "kind": "buffer"}, tuple(root.shape), root.dtype)
    traced = build(view_of(placeholder, spec))
    return _wrap_views(result, root, placeholder, traced)


def _wrap_views(result: Node | tuple, root: Tensor, root_node: Node, probes: Any = None) -> Any:
    """Tensors of a view op's result(s): a result whose probe -- the node itself, or its
    counterpart in `probes` (the op traced over a placeholder standing for `root_node`) -- is
    `root_node` or a view of it becomes a view of `root`."""
    def wrap_one(node: Node, probe: Node) -> Tensor:
        if probe is root_node:
            return Tensor(node, root, contiguous_spec(root_node.shape))
        if probe.op == "view" and probe.inputs[0] is root_node:
            return Tensor(node, root, probe.attrs["view"])
        return Tensor(node)

    if isinstance(result, Node):
        return wrap_one(result, result if probes is None else probes)
    return type(result)(wrap_one(r, p) for r, p in zip(result, result if probes is None else probes))


def view_node(base: Node, spec: V.ViewSpec) -> Node:
    """The node of a view with `spec` over the value of `base`."""
    if base.op == "view":                      # spec indexes base's value, not base's own base
        base = contiguous(base)
    return view_of(base, spec)

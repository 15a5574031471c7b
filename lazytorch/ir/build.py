"""Building IR nodes from an op name and arguments: `call("add", x, y, alpha=2)`.

`call` binds the arguments against the op's schema overloads (first fit wins; a repeated call
shape reuses its binding: see `bind`), turns Python numbers in tensor positions into scalar leaves
(runtime arguments; `constant` makes the library's own numbers structural constants instead),
runs the op's meta rule and creates the node.  The Tensor
API, the decompositions and the tests all build nodes through here, so every node in any graph
has been shape- and dtype-checked by the same rules.

Ops whose result is more than one plain node (views, split, max with indices, indexing) name a
builder in the registry; BUILDERS maps those names to functions of (op, schema, args).
"""
from __future__ import annotations

import functools
import inspect
import sys
import weakref
from typing import Any, Callable

import numpy as np

from . import dtypes as D
from . import meta
from . import precision
from . import views as V
from .errors import op_error, wrap_dim
from .graph import LEAF_TREES, MAX_TREE_NODES, TREES, leaf_tree, tree_id
from . import replay
from .native import NATIVE
from .node import _INSIDE, EPOCH, SITE, TRACE, Node, effects_now, inside as classify, user_site
from .promotion import opmath
from .registry import OpDef, get
from .schema import Schema, SchemaError, pack_int_list_varargs

Args = dict[str, Any]
BUILDERS: dict[str, Callable[[OpDef, Schema, Args], Any]] = {}

TENSORISH = ("Tensor", "Tensor|Scalar", "Scalar")


def builder(name: str):
    def register(fn):
        BUILDERS[name] = fn
        return fn
    return register


def scalar(value) -> Node:
    """A Python number as a scalar leaf: its value is a runtime argument, not structure."""
    if isinstance(value, bool):
        return Node.scalar(bool(value), D.bool_)
    if isinstance(value, int):
        return Node.scalar(int(value), D.int64)
    if isinstance(value, float):
        return Node.scalar(float(value), D.float64)
    if type(value).__module__ == "numpy" and getattr(value, "shape", None) == ():
        return scalar(value.item())
    raise TypeError(f"expected a tensor or a Python number, got {type(value).__name__}")


def constant(value) -> Node:
    """A number the library itself puts in a program (a fill of zeros, tril's diagonal, a constant of
    a composite), never a user's argument, as a structural constant: its value joins the program's
    key and the kernels read it as a literal.  A float exact in float32 is a float32 constant (the
    literal every backend has: lt.compile's rule), any other float64."""
    if isinstance(value, bool):
        return Node.constant(value, D.bool_)
    if isinstance(value, int):
        return Node.constant(value, D.int64)
    value = float(value)
    exact = value != value or float(np.float32(value)) == value          # (NaN and infinities too)
    return Node.constant(value, D.float32 if exact else D.float64)


def as_node(value) -> Node:
    if isinstance(value, Node):
        return value
    node = getattr(value, "node", None)
    if isinstance(node, Node):
        return node
    return scalar(value)


def bind(op: OpDef, args: tuple, kwargs: dict) -> tuple[Schema, Args]:
    """The first schema overload the call fits, and the bound arguments."""
    shape = _call_shape(op.name, args, kwargs)
    known = _BINDINGS.get(shape) if shape is not None else None
    if known is not None:                        # a call of a shape bound before: no checks
        schema, pack, names, defaults = known
        if pack >= 0:
            args = args[:pack] + (tuple(args[pack:]),)
        bound = dict(zip(names, args))
        if kwargs:
            bound.update(kwargs)
        for name, default in defaults:
            bound[name] = default
        return schema, bound
    errors = []
    for schema in op.schemas:
        try:
            bound = schema.bind(args, kwargs)
        except SchemaError as e:
            errors.append(e)
            continue
        if shape is not None:
            _remember_binding(shape, schema, args, kwargs)
        # (an error's traceback holds this frame, whose locals hold the errors: a reference cycle
        # that kept the call's tensors alive until the cycle collector ran; break it)
        errors.clear()
        return schema, bound
    if len(errors) == 1:
        raise errors[0]
    lines = "\n".join(f"  {s.text}" for s in op.schemas)
    raise TypeError(f"{op.name}(): the arguments match no overload; valid forms are:\n{lines}")


# How calls bind, by their shape: (op name, each argument's class -- a tuple's or list's with its
# elements' classes --, the keyword names) -> (schema, where trailing ints were packed into a list
# or -1, the positional names, the defaults filled in).  Which overload fits and how a call binds
# depend on its shape only (schema.bind's checks look at classes, never at values), so a repeated
# shape binds without them (~7 µs of every op on the general route).  Only shapes whose classes
# are all such are remembered (_SHAPE_CLASSES); errors are never remembered.
_BINDINGS: dict[tuple, tuple] = {}
MAX_BINDINGS = 1 << 14
_PLAIN = frozenset({int, float, bool, str, type(None), Node, D.DType})
_SHAPE_CLASSES: dict[type, bool] = {}        # class -> whether binding checks it by class alone


def _by_class(c: type) -> bool:
    known = _SHAPE_CLASSES.get(c)
    if known is None:
        # plain values, IR nodes and tensor wrappers (a `node` property on the class); not numpy's
        # types (an ndarray's shape decides whether it counts as a number)
        known = _SHAPE_CLASSES[c] = c in _PLAIN or isinstance(getattr(c, "node", None), property)
    return known


def _call_shape(name: str, args: tuple, kwargs: dict) -> tuple | None:
    shape = [name]
    simple = _SHAPE_CLASSES.get
    for v in (args, kwargs.values()) if kwargs else (args,):
        for x in v:
            c = x.__class__
            if c is tuple or c is list:
                inner = tuple([e.__class__ for e in x])
                for e in inner:
                    if not (simple(e) or _by_class(e)):
                        return None
                shape.append((c, inner))
            elif simple(c) or _by_class(c):
                shape.append(c)
            else:
                return None
    if kwargs:
        shape.append(tuple(kwargs))
    return tuple(shape)


def _remember_binding(shape: tuple, schema: Schema, args: tuple, kwargs: dict) -> None:
    packed = pack_int_list_varargs(schema.positional, args)
    pack = len(packed) - 1 if packed is not args else -1
    names = tuple(p.name for p in schema.positional[:len(packed)])
    given = set(names) | set(kwargs)
    defaults = tuple((p.name, p.default) for p in schema.params if p.name not in given)
    if len(_BINDINGS) >= MAX_BINDINGS:
        _BINDINGS.clear()
    _BINDINGS[shape] = (schema, pack, names, defaults)


def in_opmath(x: Node) -> Node:
    """x in the dtype its arithmetic runs in (promotion.opmath: half types widen to float32)."""
    dt = opmath(x.dtype)
    return x if dt is x.dtype else call("to", x, dt)


def call(name: str, *args, **kwargs):
    """Build the node (or nodes) of op `name` applied to `args` (nodes, tensors or Python values):
    replayed from the op's recording of a call with the same signature (ir/replay.py), else built."""
    op = get(name)
    memo = _MEMOS.get(op.name)
    if memo is None:
        memo = _MEMOS[op.name] = replay.memo_for(op) or False
    sig = replay.signature(args, kwargs) if memo else None
    if sig is None:
        return build_call(op, args, kwargs)
    rec = memo.table.get(sig[0])
    if rec is not None:
        if replay.CHECK:
            return _checked(op, rec, sig, args, kwargs)
        return rec.replay(sig[1], sig[2], (SITE.site or user_site(2)) if TRACE[0] else None)
    before = effects_now()               # (process-wide: refusing to learn after another thread acted is safe)
    result = build_call(op, args, kwargs)
    memo.learn(*sig, result, before)
    return result


_MEMOS: dict[str, "replay.Memo | bool"] = {}   # op name -> its recordings (False: never replayed)


def _checked(op: OpDef, rec: "replay.Recording", sig: tuple, args: tuple, kwargs: dict):
    """`call`'s replay in check mode, verified against the general build (ir/replay.py check).
    (Out of `call`: its closures would make `call`'s locals cells on every call.)"""
    return replay.check(op.name, lambda: rec.replay(sig[1], sig[2], (SITE.site or user_site(2)) if TRACE[0] else None),
                        lambda: build_call(op, args, kwargs))


def recorded(fn: Callable, runtime: tuple[str, ...] = ()) -> Callable:
    """A builder function of its own (nodes and Python values in, the nodes it made out, nothing
    else read) whose calls replay as an op's do (`call`): one recording for a call that would build
    hundreds of nodes through `call` one at a time (autograd's col2im, ~200 a convolution).

    `runtime` names parameters that hold runtime numbers: floats the function only hands to
    builders as scalar leaves, never branches on nor computes from (an optimizer's learning rate,
    which a schedule changes every step).  A signature keys them by class alone, and a replay
    builds their leaves from each call's values (ir/replay.py NUMBER steps), so a new value replays
    the same recording, as it already reuses the same compiled program.  (Ints stay keyed by value:
    small ints are shared objects, so a leaf of a literal 1 could not be told from an argument's.)"""
    memo = replay.Memo() if replay.ENABLED else None
    names = list(inspect.signature(fn).parameters)
    positions = tuple(names.index(name) for name in runtime)

    @functools.wraps(fn)
    def replayed(*args):
        if memo is None:
            return fn(*args)
        keyed = args
        if positions:
            keyed = list(args)
            for i in positions:
                if args[i].__class__ is float:
                    keyed[i] = "runtime float"
            keyed = tuple(keyed)
        sig = replay.signature(keyed, {})
        if sig is None:
            return fn(*args)
        key, nodes = sig[0], sig[1]
        rec = memo.table.get(key)
        if rec is not None:           # (replayed over `args`: runtime numbers' leaves take their values)
            site = (SITE.site or user_site(2)) if TRACE[0] else None
            if replay.CHECK:
                return replay.check(fn.__name__, lambda: rec.replay(nodes, args, site), lambda: fn(*args))
            return rec.replay(nodes, args, site)
        if positions:
            args = _distinct_numbers(args, positions)
        before = effects_now()
        result = fn(*args)
        memo.learn(key, nodes, args, result, before)
        return result
    return replayed


def _distinct_numbers(args: tuple, positions: tuple[int, ...]) -> tuple:
    """`args` with each runtime float (`recorded`) a new object of the same value.  A recording
    tells which argument a leaf holds by identity (ir/replay.py record), and equal floats written as
    one literal are one object (lr=1e-3, weight_decay=1e-3): recorded over them as given, the lr's
    leaf could replay later calls' weight decay.  (x * 1.0 is a new float, keeping -0.0's sign.)"""
    args = list(args)
    for i in positions:
        if args[i].__class__ is float:
            args[i] = args[i] * 1.0
    return tuple(args)


def build_call(op: OpDef, args: tuple, kwargs: dict):
    """`call` the general way: bind, turn arguments into nodes, run the op's builder."""
    schema, a = bind(op, args, kwargs)
    for p in schema.params:
        v = a[p.name]
        if p.base in TENSORISH and v is not None and not (p.base == "Scalar" and _is_default(p, v)):
            a[p.name] = as_node(v)
        elif p.base == "Tensor[]" and v is not None:
            a[p.name] = tuple(as_node(t) for t in v)
    return BUILDERS[op.build](op, schema, a)


def _is_default(p, v) -> bool:
    return p.has_default and type(v) is type(p.default) and v == p.default


@builder("generic")
def generic(op: OpDef, schema: Schema, a: Args, tf32: bool | None = None) -> Node:
    """One node: tensor and runtime-scalar arguments become inputs, the rest attributes.  A
    composite the passes turn into products (precision.FLAG_OF) also records whether those may use
    TF32: `tf32` where the caller decided (a pass or gradient rule, inheriting its node's), else its
    flag's value now, at the call (ir/precision.py)."""
    shape, dtype = meta.run(op, a)
    inputs, attrs = [], {}
    for p in schema.params:
        v = a[p.name]
        if isinstance(v, Node):
            inputs.append(v)
        elif p.base == "Tensor[]" and v is not None:
            inputs.extend(v)
            attrs[p.name] = len(v)
        else:
            attrs[p.name] = tuple(v) if isinstance(v, list) else v
    flag = precision.FLAG_OF.get(op.name)
    if flag is not None:
        attrs.update(precision.attrs(precision.allowed(flag) if tf32 is None else tf32, dtype))
    return Node(op.name, tuple(inputs), attrs, shape, dtype)


def named_inputs(node: Node) -> dict[str, Any]:
    """A generic node's arguments by schema name: inputs as nodes, attributes as values."""
    op = get(node.op)
    schema = next((s for s in op.schemas if all(p.name in node.attrs or p.base in TENSORISH + ("Tensor[]",)
                                               for p in s.params)), op.schemas[0])
    out, it = {}, iter(node.inputs)
    for p in schema.params:
        if p.base == "Tensor[]":
            out[p.name] = tuple(next(it) for _ in range(node.attrs[p.name]))
        elif p.name in node.attrs:
            out[p.name] = node.attrs[p.name]
        else:
            out[p.name] = next(it)
    return out


# ---------------------------------------------------------------- views

def base_and_spec(x: Node) -> tuple[Node, V.ViewSpec]:
    if x.op == "view" and "clamp" not in x.attrs:        # (a clamped view composes with nothing)
        return x.inputs[0], x.attrs["view"]
    return x, contiguous_spec(x.shape)


_CONTIGUOUS: dict[tuple, V.ViewSpec] = {}     # shape -> its contiguous ViewSpec (specs are immutable)


def contiguous_spec(shape: tuple[int, ...]) -> V.ViewSpec:
    """V.contiguous(shape), made once per shape (every view op asks for its input's)."""
    spec = _CONTIGUOUS.get(shape)
    if spec is None:
        if len(_CONTIGUOUS) >= MAX_BINDINGS:
            _CONTIGUOUS.clear()
        spec = _CONTIGUOUS[shape] = V.contiguous(shape)
    return spec


def view_of(x: Node, spec: V.ViewSpec) -> Node:
    """The node reading `x`'s base through `spec` (a spec returned by a views.* function)."""
    base, _ = base_and_spec(x)
    if V.is_identity(spec, base.shape):
        return base
    return Node("view", (base,), {"view": spec}, spec.shape, x.dtype)


# The `clamp` of a view whose reader's mask is no box: a view of a constant pad read through the
# pad's mask (passes/guard.py).  Made only in the passes, after autograd: it has no gradient.
GUARDED = "guarded"


def clamped_view(base: Node, spec: V.ViewSpec, box: tuple[tuple[int, int], ...]) -> Node:
    """A view that reaches outside `base` except in `box` ((start, stop) per dim), where its reader
    masks the value out (a padded read: ir/build_shape_ops.py padded): element i reads
    base_flat[clip(offset + sum(i_d * strides[d]), 0, numel - 1)], so every read stays inside the
    buffer.  Passes never compose it with another view (base_and_spec, simplify), the code
    generators clamp its index (codegen/lower.py), and its gradient is the box's (autograd)."""
    return Node("view", (base,), {"view": spec, "clamp": box}, spec.shape, base.dtype)


def inside_spec(spec: V.ViewSpec, box: tuple[tuple[int, int], ...]) -> V.ViewSpec:
    """The part of a clamped view's spec inside its box: an ordinary view of its base."""
    return V.ViewSpec(tuple(stop - start for start, stop in box), spec.strides,
                      spec.offset + sum(start * st for (start, _), st in zip(box, spec.strides)))


def apply_view(x: Node, fn: Callable[[V.ViewSpec], V.ViewSpec | None]) -> Node:
    """Apply a views.* function to x; if the result can't be a view, read a contiguous copy."""
    _, spec = base_and_spec(x)
    new = fn(spec)
    if new is None:
        x = contiguous(x)
        new = fn(contiguous_spec(x.shape))
    return view_of(x, new)


def contiguous(x: Node) -> Node:
    """A node whose value is x laid out contiguously (x itself if it is not a view)."""
    if x.op != "view":
        return x
    return Node("contiguous", (x,), {}, x.shape, x.dtype)


def infer_size(op: str, shape, numel: int, x: Node) -> tuple[int, ...]:
    shape = tuple(int(s) for s in ((shape,) if isinstance(shape, int) else shape))
    if shape.count(-1) > 1:
        raise op_error(RuntimeError, op, f"only one dimension can be inferred, got shape {list(shape)}", {"self": x})
    if any(s < -1 for s in shape):
        raise op_error(RuntimeError, op, f"invalid shape dimension in {list(shape)}", {"self": x},
                       "sizes must be >= 0, or -1 for one inferred dim")
    known = 1
    for s in shape:
        if s != -1:
            known *= s
    if -1 in shape:
        if known == 0 or numel % known:
            raise op_error(RuntimeError, op, f"shape {list(shape)} is invalid for input of size {numel}", {"self": x})
        shape = tuple(numel // known if s == -1 else s for s in shape)
    elif known != numel:
        raise op_error(RuntimeError, op, f"shape {list(shape)} is invalid for input of size {numel}", {"self": x},
                       f"the new shape must have {numel} elements")
    return shape


@builder("reshape")
def reshape(op: OpDef, schema: Schema, a: Args) -> Node:
    x = a["self"]
    shape = infer_size(op.name, a.get("shape", a.get("size")), x.numel, x)
    if op.name == "view":
        _, spec = base_and_spec(x)
        new = V.reshape(spec, shape)
        if new is None:
            raise op_error(RuntimeError, "view", f"size {list(shape)} is not compatible with the input's strides "
                           f"{list(spec.strides)}", {"self": x}, "use .reshape(...) instead, which copies")
        return view_of(x, new)
    return apply_view(x, lambda s: V.reshape(s, shape))


@builder("permute")
def permute(op: OpDef, schema: Schema, a: Args) -> Node:
    x = a["self"]
    given = (a["dims"],) if isinstance(a["dims"], int) else tuple(a["dims"])
    dims = tuple(wrap_dim(op.name, d, x.ndim, {"self": x}) for d in given)
    if sorted(dims) != list(range(x.ndim)):
        raise op_error(RuntimeError, op.name, f"dims {list(given)} are not a permutation of the "
                       f"{x.ndim} dims", {"self": x})
    return apply_view(x, lambda s: V.permute(s, dims))


@builder("transpose")
def transpose(op: OpDef, schema: Schema, a: Args) -> Node:
    x = a["self"]
    if x.ndim < 2 and op.name == "t":
        return x
    if op.name == "t":
        if x.ndim > 2:
            raise op_error(RuntimeError, "t", f"expects a tensor with <= 2 dims, but self is {x.ndim}-d",
                           {"self": x}, "use transpose(dim0, dim1) or .mT")
        d0, d1 = 0, 1
    else:
        d0, d1 = (wrap_dim(op.name, a[k], x.ndim, {"self": x}) for k in ("dim0", "dim1"))
    dims = list(range(x.ndim))
    if dims:
        dims[d0], dims[d1] = dims[d1], dims[d0]
    return apply_view(x, lambda s: V.permute(s, tuple(dims)))


@builder("expand")
def expand(op: OpDef, schema: Schema, a: Args) -> Node:
    x = a["self"]
    size = a.get("size", a.get("shape"))
    size = (size,) if isinstance(size, int) else tuple(size)
    lead = len(size) - x.ndim
    if lead < 0:
        raise op_error(RuntimeError, op.name, f"the number of sizes ({len(size)}) must be at least the number "
                       f"of dims ({x.ndim})", {"self": x})
    shape = []
    for i, s in enumerate(size):
        old = x.shape[i - lead] if i >= lead else None
        if s == -1:
            if old is None:
                raise op_error(RuntimeError, op.name, f"-1 is not allowed for a new leading dim {i}", {"self": x})
            s = old
        if old is not None and old != 1 and old != s:
            raise op_error(RuntimeError, op.name, f"the size of dim {i - lead} ({old}) must match the target "
                           f"size {s} (target {list(size)})", {"self": x}, "only size-1 dims can be expanded")
        shape.append(s)
    return apply_view(x, lambda spec: V.expand(spec, tuple(shape)))


@builder("squeeze")
def squeeze(op: OpDef, schema: Schema, a: Args) -> Node:
    x = a["self"]
    dim = a.get("dim")
    dims = tuple(range(x.ndim)) if dim is None else \
        tuple(wrap_dim(op.name, d, x.ndim, {"self": x}) for d in ((dim,) if isinstance(dim, int) else dim))
    if x.ndim == 0:
        return x
    return apply_view(x, lambda s: V.squeeze(s, dims))


@builder("unsqueeze")
def unsqueeze(op: OpDef, schema: Schema, a: Args) -> Node:
    x = a["self"]
    d = wrap_dim(op.name, a["dim"], x.ndim + 1, {"self": x})
    return apply_view(x, lambda s: V.unsqueeze(s, d))


@builder("narrow")
def narrow(op: OpDef, schema: Schema, a: Args) -> Node:
    x = a["self"]
    if x.ndim == 0:
        raise op_error(RuntimeError, op.name, "cannot be applied to a 0-d tensor", {"self": x})
    d = wrap_dim(op.name, a["dim"], x.ndim, {"self": x})
    start, length = a["start"], a["length"]
    if start < 0:
        start += x.shape[d]
    if not (0 <= start <= x.shape[d] and 0 <= length and start + length <= x.shape[d]):
        raise op_error(IndexError, op.name, f"start {a['start']} + length {length} exceeds dim {d} of size "
                       f"{x.shape[d]}", {"self": x})
    return apply_view(x, lambda s: V.slice_dim(s, d, start, start + length, 1))


@builder("select")
def select(op: OpDef, schema: Schema, a: Args) -> Node:
    x = a["self"]
    if x.ndim == 0:
        raise op_error(IndexError, op.name, "cannot select from a 0-d tensor", {"self": x})
    d = wrap_dim(op.name, a["dim"], x.ndim, {"self": x})
    i = a["index"]
    if not -x.shape[d] <= i < x.shape[d]:
        raise op_error(IndexError, op.name, f"index {i} is out of bounds for dim {d} with size {x.shape[d]}",
                       {"self": x})
    return apply_view(x, lambda s: V.select(s, d, i % x.shape[d]))


def slice_node(x: Node, d: int, start, stop, step: int) -> Node:
    """x[..., start:stop:step, ...] along dim d, with Python's clamping of start/stop."""
    if step <= 0:
        raise op_error(ValueError, "slice", f"step must be greater than zero, got {step}", {"self": x},
                       "use flip() to reverse")
    start, stop, _ = slice(start, stop, step).indices(x.shape[d])
    stop = max(stop, start)
    return apply_view(x, lambda s: V.slice_dim(s, d, start, stop, step))


@builder("flip")
def flip(op: OpDef, schema: Schema, a: Args) -> Node:
    x = a["self"]
    dims = meta.normalize_dims(op.name, a["dims"], x.ndim, {"self": x})   # a repeated dim is an error
    if x.ndim == 0:
        return x
    return apply_view(x, lambda s: V.flip(s, dims))


@builder("flatten")
def flatten(op: OpDef, schema: Schema, a: Args) -> Node:
    x = a["self"]
    if x.ndim == 0:
        return apply_view(x, lambda s: V.reshape(s, (1,)))
    start, end = (wrap_dim(op.name, a[k], x.ndim, {"self": x}) for k in ("start_dim", "end_dim"))
    if start > end:
        raise op_error(RuntimeError, op.name, f"start_dim {a['start_dim']} comes after end_dim {a['end_dim']}",
                       {"self": x}, "flatten needs start_dim <= end_dim")
    n = 1
    for s in x.shape[start:end + 1]:
        n *= s
    shape = x.shape[:start] + (n,) + x.shape[end + 1:]
    return apply_view(x, lambda s: V.reshape(s, shape))


@builder("unflatten")
def unflatten(op: OpDef, schema: Schema, a: Args) -> Node:
    x = a["self"]
    d = wrap_dim(op.name, a["dim"], x.ndim, {"self": x})
    sizes = tuple(a["sizes"]) if not isinstance(a["sizes"], int) else (a["sizes"],)
    if not sizes:
        raise op_error(RuntimeError, op.name, "sizes must be non-empty", {"self": x})
    sizes = infer_size(op.name, sizes, x.shape[d], x)
    shape = x.shape[:d] + sizes + x.shape[d + 1:]
    return apply_view(x, lambda s: V.reshape(s, shape))


def _split_sizes(op: str, x: Node, d: int, size_or_sections) -> list[int]:
    n = x.shape[d]
    if isinstance(size_or_sections, int):
        size = size_or_sections
        if size < 0 or (size == 0 and n != 0):
            raise op_error(RuntimeError, op, f"split_size must be a positive integer, got {size}", {"self": x})
        if n == 0:
            return [0]
        return [min(size, n - i) for i in range(0, n, size)]
    sections = [int(s) for s in size_or_sections]
    if any(s < 0 for s in sections) or sum(sections) != n:
        raise op_error(RuntimeError, op, f"split sizes {sections} must be >= 0 and sum to {n}, the size of "
                       f"dim {d}", {"self": x})
    return sections


def _pieces(x: Node, d: int, sizes: list[int]) -> tuple[Node, ...]:
    out, start = [], 0
    for size in sizes:
        out.append(apply_view(x, lambda s, start=start, size=size: V.slice_dim(s, d, start, start + size, 1)))
        start += size
    return tuple(out)


@builder("split")
def split(op: OpDef, schema: Schema, a: Args) -> tuple[Node, ...]:
    x = a["self"]
    if x.ndim == 0:
        raise op_error(RuntimeError, op.name, "cannot split a 0-d tensor", {"self": x})
    d = wrap_dim(op.name, a["dim"], x.ndim, {"self": x})
    return _pieces(x, d, _split_sizes(op.name, x, d, a["split_size_or_sections"]))


@builder("chunk")
def chunk(op: OpDef, schema: Schema, a: Args) -> tuple[Node, ...]:
    x = a["self"]
    if x.ndim == 0:
        raise op_error(RuntimeError, op.name, "cannot chunk a 0-d tensor", {"self": x})
    d = wrap_dim(op.name, a["dim"], x.ndim, {"self": x})
    chunks = a["chunks"]
    if chunks <= 0:
        raise op_error(RuntimeError, op.name, f"chunks must be greater than 0, got {chunks}", {"self": x})
    size = -(-x.shape[d] // chunks)
    return _pieces(x, d, _split_sizes(op.name, x, d, size))


@builder("unbind")
def unbind(op: OpDef, schema: Schema, a: Args) -> tuple[Node, ...]:
    x = a["self"]
    if x.ndim == 0:
        raise op_error(RuntimeError, op.name, "cannot unbind a 0-d tensor", {"self": x})
    d = wrap_dim(op.name, a["dim"], x.ndim, {"self": x})
    return tuple(apply_view(x, lambda s, i=i: V.select(s, d, i)) for i in range(x.shape[d]))


# ---------------------------------------------------------------- the Tensor API's fast path

# Meta rules whose result depends only on the operands' shapes, dtypes and whether each is a
# Python number (not on any value): for these a call's outcome can be memoized by that signature.
FAST_META = frozenset({"pointwise", "add", "div"})
NUMBER_DTYPES = {bool: D.bool_, int: D.int64, float: D.float64}


def fast_builder(name: str, wrap: type | None = None, general: Callable[..., Any] | None = None,
                 make: Callable[[Node], Any] | None = None, live: tuple | None = None,
                 shared: dict | None = None, outer: Callable[..., Any] | None = None,
                 swapped: bool = False) -> Callable[..., Any] | None:
    """For op `name`, a function of one or two positional operands (Tensors or Python numbers,
    no keywords) returning the node that `call(name, ...)` builds, or None for the caller to
    take the general route; None when the op has no fast path.  Given `wrap` and `general` (the
    Tensor API's own function of the op), it returns `make(node)` (by default `wrap(node)`: the
    wrapper class, whose instances it recognises as operands) and calls `general` itself where it
    would return None: a method the Tensor API can install as it is (`x * 2.0` then runs one
    Python function down to the node).

    The first call of each operand signature (shapes, dtypes, which operands are numbers) goes
    through `call` (or `general`), so binding, meta rules and errors are exactly the general ones;
    its result's op, attributes, shape, dtype and key are remembered and later calls build the
    node directly.  `shared`: the Tensor API's buffers with arrays out to the user (host_data.py
    SHARED, id(buffer) -> arrays): a realized operand over one is read through the general route,
    which builds on a snapshot of it (tensor.py `Tensor.node`).

    `outer` (a Tensor API function of the op, with `live`): the result is its stand-in, the C
    build where it is made (ir/_fastpath.c FastOp) passing every call with keywords or another
    number of arguments to `outer`; None where it is not made.  `swapped` (with `outer`, a
    reflected dunder `outer(self, other)`): it builds `name(other, self)`.
    """
    op = get(name)
    if op.build != "generic" or op.meta not in FAST_META or "view" in op.tags:
        return None
    if any(p.base == "Scalar" and p.has_default for s in op.schemas for p in s.positional[:2]):
        return None                              # a number equal to the default is an attribute
    if make is None:
        make = wrap
    memo: dict[tuple, tuple] = {}
    name = op.name
    new = Node.__new__
    scalar_keys = {dt: Node.scalar(0, dt).key for dt in NUMBER_DTYPES.values()}
    scalar_trees = {dt: tree_id(("leaf", key)) for dt, key in scalar_keys.items()}
    # Per Python number class: its dtype, its scalar leaf's key and tree id, and its chain table:
    # tree id of the tensor operand -> memo's record with the result's tree id in place of the
    # op's (tree ids name one structure forever, ir/graph.py, so entries never go stale; each
    # table is bounded as TREES is).  One dict lookup by class, then one by an int: no tuple key.
    hot = {cls: (dt, scalar_keys[dt], scalar_trees[dt], {}) for cls, dt in NUMBER_DTYPES.items()}
    # (EPOCH process-wide, here and in the C fast path: a tree summary goes stale with a realize on
    # any thread, since threads may share nodes; ir/node.py)
    getframe, inside, trace, epoch_now = sys._getframe, _INSIDE, TRACE, EPOCH
    leaf_trees = LEAF_TREES
    if shared is None:
        shared = {}
    if live is not None:
        mode, track, live_list, compact_at, compact = live
    else:
        mode = None
    ref = weakref.ref
    last = MAX_TREE_NODES - 1

    def chained(h: tuple, na: Node, ia: int, za: int) -> tuple | None:
        """The record of `tensor <op> number` after a tree of id `ia` (the memo's, with the
        result's tree id in place of the op's), remembered in the number class's chain table."""
        known = memo.get(((na.shape, na.dtype), h[0]))
        if known is None or za >= last:
            return None
        item = (known[4], ia, h[2])
        known = known[:4] + (TREES.get(item) or tree_id(item),)
        chain = h[3]
        if len(chain) >= MAX_CHAIN:
            chain.clear()
        chain[ia] = known
        return known

    def build(a, b=_NONE, *more) -> Node | None:
        # One operand at a time, inlined: this runs for every `x * 2.0` of a user's program.
        # Each operand's tree summary (ir/graph.py: tree keys): its id (0: none), leaf list and
        # how many of its entries are the operand's, size.
        h = hot.get(type(b))
        if h is not None and type(a) is wrap and a._base is None and not more:
            # The hottest case, `tensor <op> number` inside a tree, in a straight line (one
            # attribute per statement: `a.x, a.y = ...` builds and unpacks a tuple): the result's
            # metadata and tree id by (a's tree id, the number's class).  (A non-view tensor whose
            # node has a tree summary is pending, so its node is `a._node`, no property.)
            na = a._node
            t = na.tree
            if t is None and na.op == "buffer" and not (shared and id(na.buffer) in shared):
                # A realized tensor, a chain's first operand: its leaf's summary, made here (one
                # stored on the node would hold the node in a cycle, and go stale at every eval).
                # An id not yet known is made by the general route below, as is a buffer with an
                # array out to the user (the result reads a snapshot of it: Tensor.node).
                ia = leaf_trees.get((na.shape, na.dtype))
                if ia is not None:
                    t = (epoch_now[0], ia, [na], 1, 1)
            if t is not None and t[0] == epoch_now[0]:
                known = h[3].get(t[1])
                if known is None:
                    known = chained(h, na, t[1], t[4])
                if known is not None:
                    nb = new(Node)
                    nb.op = "scalar"
                    nb.inputs = ()
                    nb.attrs = _NO_ATTRS
                    nb.shape = ()
                    nb.dtype = h[0]
                    nb.buffer = None
                    nb.value = b
                    nb._key = h[1]
                    nb._origin = None
                    nb.tree = None
                    nb.autograd = None
                    node = new(Node)
                    node.op = name
                    node.inputs = (na, nb)
                    node.attrs = known[0]
                    node.shape = known[1]
                    node.dtype = known[2]
                    node._key = known[3]
                    node.buffer = None
                    node.value = None
                    node.autograd = None
                    epoch, _, la, n, size = t
                    if size < last:
                        if len(la) != n:
                            la = la[:n]
                        la.append(nb)
                        if la[n] is not nb:      # (another thread appended between the test and
                            la = la[:n] + [nb]   # the append, where an interpreter lets it: a copy)
                        node.tree = (epoch, known[4], la, n + 1, size + 2)
                    else:
                        node.tree = None
                    if trace[0]:
                        f = getframe(1)
                        code = f.f_code
                        if code is user_code[0] or inside.get(id(code)) is False:
                            user_code[0] = code
                            node._origin = (code, f.f_lasti)
                        else:
                            node._origin = user_site(2)
                    else:
                        node._origin = None
                    if mode is None:
                        return make(node)
                    # the pending Tensor (tensor.py `pending`, inlined)
                    out = new(wrap)
                    out._node = node
                    out._base = None
                    out._spec = None
                    out._grad = None
                    out._base_version = 0
                    out._version = 0
                    if mode.any_leaf:
                        track(node)
                    live_list.append(ref(out))
                    if len(live_list) > compact_at[0]:
                        compact()
                    return out
        epoch = epoch_now[0]
        da = NUMBER_DTYPES.get(type(a))
        if da is None:
            na = getattr(a, "node", None)        # a Tensor (views re-derive their node here)
            if type(na) is not Node or na.op == "param" or na.op == "scalar":
                return None if general is None else general(a, *(() if b is _NONE else (b,)), *more)
            sa = (na.shape, na.dtype)
            t = na.tree
            if t is not None:
                if t[0] == epoch:
                    _, ia, la, ca, za = t
                else:
                    ia = 0
            elif na.op == "buffer":
                ia, la, ca, za = leaf_tree(na), [na], 1, 1
            else:
                ia = 0
        else:
            na = new(Node)
            na.op, na.inputs, na.attrs, na.shape, na.dtype = "scalar", (), _NO_ATTRS, (), da
            na.buffer, na.value, na._key, na._origin, na.tree, na.autograd = None, a, scalar_keys[da], None, None, None
            sa = da
            ia, la, ca, za = scalar_trees[da], [na], 1, 1
        if b is _NONE:
            sig, inputs = sa, (na,)
            ib = -1
        elif more:
            return None if general is None else general(a, b, *more)
        else:
            db = NUMBER_DTYPES.get(type(b))
            if db is None:
                nb = getattr(b, "node", None)
                if type(nb) is not Node or nb.op == "param" or nb.op == "scalar":
                    return None if general is None else general(a, b)
                sig = (sa, nb.shape, nb.dtype)
                t = nb.tree                      # b's tree summary, as a's above (inlined: the hottest path)
                if t is not None:
                    if t[0] == epoch:
                        _, ib, lb, cb, zb = t
                    else:
                        ib = 0
                elif nb.op == "buffer":
                    ib, lb, cb, zb = leaf_tree(nb), [nb], 1, 1
                else:
                    ib = 0
                if ia and ib and da is None and not disjoint(la[:ca], lb[:cb]):
                    ib = 0                       # x * x, (x + 1) * x: shared leaves, not a tree
            else:
                nb = new(Node)
                nb.op, nb.inputs, nb.attrs, nb.shape, nb.dtype = "scalar", (), _NO_ATTRS, (), db
                nb.buffer, nb.value, nb._key, nb._origin, nb.tree, nb.autograd = None, b, scalar_keys[db], None, None, None
                sig = (sa, db)
                ib, lb, cb, zb = scalar_trees[db], [nb], 1, 1
            inputs = (na, nb)
        known = memo.get(sig)
        if known is not None:
            attrs, shape, dtype, key, op_id = known
            node = new(Node)
            node.op, node.inputs, node.attrs, node.shape, node.dtype, node._key = name, inputs, attrs, shape, dtype, key
            node.buffer = node.value = node.autograd = None
            if not (ia and ib):
                node.tree = None
            elif ib < 0:                         # (one operand)
                item = (op_id, ia)
                node.tree = (epoch, TREES.get(item) or tree_id(item), la, ca, za + 1) if za < MAX_TREE_NODES else None
            else:
                item = (op_id, ia, ib)
                size = za + zb + 1
                node.tree = (epoch, TREES.get(item) or tree_id(item), *joined(la, ca, lb, cb), size) \
                    if size <= MAX_TREE_NODES else None
            if trace[0]:                         # provenance: user_site(), inlined
                f = getframe(1)
                while f is not None:
                    code = f.f_code
                    mine = inside.get(id(code))
                    if mine is None:
                        mine = classify(code)
                    if not mine:
                        node._origin = (code, f.f_lasti)
                        break
                    f = f.f_back
                else:
                    node._origin = None
            else:
                node._origin = None
            return node if wrap is None else make(node)
        args = (a,) if b is _NONE else (a, b)
        if general is None:
            node = result = call(name, *args)
        else:
            result = general(*args)
            node = getattr(result, "node", None)
        if _built_from(node, name, args, inputs):
            memo[sig] = (node.attrs, node.shape, node.dtype, node.key, tree_id(("op", node.key)))
        return result

    if mode is None or NATIVE is None:
        return None if outer is not None else build
    # The same build with both branches in C (ir/_fastpath.c): no Python frame for `tensor <op>
    # number` in a chain, nor for operands whose signature the memo knows; the rest runs `build`.
    fast = NATIVE.FastOp(fallback=build, name=name, hot=hot, chained=chained, node_type=Node, wrap=wrap,
                            live=live, epoch=epoch_now, trace=trace, user_code=user_code, inside=inside,
                            user_site=user_site, no_attrs=_NO_ATTRS, last=last, leaf_trees=leaf_trees, shared=shared,
                            memo=memo, trees=TREES, tree_id=tree_id, outer=outer, swapped=swapped)
    # help(), inspect.getmodule and typing.get_type_hints read these of a function (a FastOp has no
    # __module__ of its own, and its class's docstring would stand for the method's)
    fast.__module__, fast.__doc__, fast.__annotations__ = build.__module__, build.__doc__, build.__annotations__
    return fast


def joined(a: list[Node], na: int, b: list[Node], nb: int) -> tuple[list[Node], int]:
    """The leaf list and count of a tree over two trees with leaves a[:na] and b[:nb]: a new list.
    (Only `tensor <op> number` appends to a shared list, and only its scalar leaf: entries past a
    summary's own are then numbers, so a pending node never keeps another chain's buffers alive.)"""
    return a[:na] + b[:nb], na + nb


def disjoint(a: list[Node], b: list[Node]) -> bool:
    """Whether two leaf lists share no node (only buffer leaves can be shared: the fast path's
    scalar leaves are made for one op each)."""
    seen = {id(n) for n in a if n.op == "buffer"}
    return not any(id(n) in seen for n in b if n.op == "buffer")


_NONE = object()           # "no second operand"
# The code object of the last user frame the fast path met (the user's loop body, usually):
# comparing with it costs less than classifying the code by its id (a call and a dict lookup).
user_code: list = [None]
MAX_CHAIN = 1 << 16        # entries of each op's chain table per number class
_NO_ATTRS: dict = {}       # scalar leaves have no attributes (never mutated: realize() replaces attrs)


def _built_from(node, name: str, args: tuple, nodes: tuple[Node, ...]) -> bool:
    """Whether `node` is one node of op `name` reading exactly the operands, in order (a Python
    number as a scalar leaf of its value and type): the shape the fast path reproduces."""
    if type(node) is not Node or node.op != name or len(node.inputs) != len(nodes):
        return False
    for given, made, arg in zip(nodes, node.inputs, args):
        if given.op == "scalar":
            if made.op != "scalar" or made.dtype is not given.dtype or type(made.value) is not type(arg) \
                    or made.value != arg:
                return False
        elif made is not given:
            return False
    return True

"""The torch-style API, generated from the op registry at import.

For every registry op this makes the function (`lt.add`), the method (`x.add`), the in-place
method (`x.add_`, functionalised), `out=` handling, the Python operators it declares, and the
`lt.nn.functional` entry.  Arguments are bound against the op's schema by ir.build.call.
"""
from __future__ import annotations

import collections
import functools
import re
import types
from typing import Any, Callable

from .call_memo import CHECK as MEMO_CHECK, check_replay, memo_for, native_call, signature
from .indexing import getitem, setitem
from .ir import dtypes as D
from .ir.build import call, fast_builder
from .ir.errors import op_error
from .ir.node import SITE, TRACE, Node, effects_now, user_site
from .ir.registry import OpDef, ops
from .host_data import SHARED
from .tensor import PENDING_PARTS, Tensor, alias, pending

ReturnTypes = {}


def _return_names(op: OpDef, n: int) -> tuple[str, ...] | None:
    """The result names the schema declares, e.g. `-> (Tensor Q, Tensor R)` (torch's field names)."""
    for schema in op.schemas:
        m = re.search(r"->\s*\((.*)\)\s*$", schema.text)
        words = [p.split() for p in m.group(1).split(",")] if m else []
        if len(words) == n and all(len(w) == 2 for w in words):
            return tuple(w[1] for w in words)
    return None


def _named_tuple(op: OpDef, n: int):
    key = (op.name, n)
    if key not in ReturnTypes:
        fields = _return_names(op, n) or (("values", "indices") if n == 2 else tuple(f"out{i}" for i in range(n)))
        ReturnTypes[key] = collections.namedtuple(op.name, fields)
    return ReturnTypes[key]


def _wrap(op: OpDef, result) -> Any:
    if isinstance(result, Node):
        return Tensor(result)
    if isinstance(result, tuple) and op.schemas and any(len(s.returns) > 1 for s in op.schemas):
        return _named_tuple(op, len(result))(*(_wrap(op, r) for r in result))
    if isinstance(result, (list, tuple)):
        return type(result)(_wrap(op, r) for r in result)
    return result


def _can_cast(src: D.DType, dst: D.DType) -> bool:
    """torch's canCast: no float -> integer and no non-bool -> bool."""
    return src.category <= dst.category


def _assign(op: OpDef, target: Tensor, result: Node, what: str) -> Tensor:
    if not _can_cast(result.dtype, target.dtype):
        raise op_error(RuntimeError, op.name, f"result type {result.dtype.name} can't be cast to the desired "
                       f"output type {target.dtype.name} ({what})", {"result": result, what: target})
    # (an `out=` tensor that is no view takes the result's shape, as torch resizes it)
    if tuple(result.shape) != tuple(target.shape) and not (what == "out" and target._base is None):
        raise op_error(RuntimeError, op.name, f"output with shape {list(target.shape)} doesn't match the "
                       f"broadcast shape {list(result.shape)}", {"result": result, what: target},
                       "an in-place op can't change its tensor's shape")
    if result.dtype is not target.dtype:
        result = call("to", result, target.dtype)
    target._rebind(result, op.name)
    return target


# numpy-style keyword spellings torch also accepts (`x.sum(axis=0, keepdims=True)`)
NUMPY_KEYWORDS = {"axis": "dim", "keepdims": "keepdim"}


def _input_alias(kwargs: dict, op: OpDef | None = None) -> dict:
    if "input" in kwargs or "axis" in kwargs or "keepdims" in kwargs:
        kwargs = dict(kwargs)
        if "input" in kwargs:
            kwargs["self"] = kwargs.pop("input")
        for alias, name in NUMPY_KEYWORDS.items():
            if alias in kwargs and op is not None and not any(alias in s.names for s in op.schemas):
                kwargs[name] = kwargs.pop(alias)
    return kwargs


def tensor_builder(op: OpDef, general: Callable, outer: Callable | None = None, swapped: bool = False):
    """ir/build.py fast_builder for the Tensor API: op's builder making pending Tensors, `general`
    run where it cannot build; with `outer`, the C stand-in for that function (None without the
    extension); None where the op has no fast path."""
    return fast_builder(op.name, wrap=Tensor, general=general, make=pending, live=PENDING_PARTS, shared=SHARED,
                        outer=outer, swapped=swapped)


def make_function(op: OpDef, name: str):
    fast = fast_builder(op.name)
    memo = memo_for(op)

    def fn(*args, out=None, **kwargs):
        if "creation" in op.tags and "requires_grad" in kwargs:
            requires_grad = kwargs.pop("requires_grad")
            made = fn(*args, out=out, **kwargs)
            return made.requires_grad_() if requires_grad else made
        if fast is not None and out is None and not kwargs:
            node = fast(*args)
            if node is not None:
                return pending(node)
        sig = signature(args, kwargs) if memo is not None and out is None else None
        if sig is not None:
            if MEMO_CHECK:                # (a partial, not a lambda: `sig` would be a cell on every call)
                made = check_replay(op.name, functools.partial(memo.replay, *sig, args, _wrap),
                                    lambda: general(args, out, kwargs), args, kwargs)
            else:
                made = memo.replay(*sig, args, _wrap)
            if made is not None:
                return made
        # Every node the general route builds names the same user line: found once here, not
        # per node (a view or a composite builds several)
        site = SITE.site
        if site is None and TRACE[0]:
            SITE.site = user_site(2)
        try:
            if sig is None:
                return general(args, out, kwargs)
            before = effects_now()
            result = general(args, out, kwargs)
            memo.learn(*sig, result, before)
            return result
        finally:
            SITE.site = site

    def general(args: tuple, out, kwargs: dict):
        kwargs = _input_alias(kwargs, op)
        if "view" in op.tags and args and isinstance(args[0], Tensor):
            wrapped = alias(args[0], lambda node: call(op.name, node, *args[1:], **kwargs))
        elif "view" in op.tags and isinstance(kwargs.get("self"), Tensor):
            this, rest = kwargs["self"], {k: v for k, v in kwargs.items() if k != "self"}
            wrapped = alias(this, lambda node: call(op.name, node, *args, **rest))
        elif "returns_self" in op.tags and out is None and args and isinstance(args[0], Tensor):
            # x.to(x.dtype) is x, as in torch.  (The builder is handed x's node once: while x's
            # data is shared, each read of x.node is a new snapshot)
            node = args[0].node
            result = call(op.name, node, *args[1:], **kwargs)
            if result is node:
                return args[0]
            wrapped = _wrap(op, result)
        else:
            result = call(op.name, *args, **kwargs)
            wrapped = _wrap(op, result)
        if out is not None:
            if not op.out:
                raise TypeError(f"{op.name}() got an unexpected keyword argument 'out'")
            if isinstance(wrapped, tuple):
                for o, r in zip(out, wrapped):
                    _assign(op, o, r.node, "out")
                return out
            return _assign(op, out, wrapped.node, "out")
        return wrapped
    fn.__name__ = fn.__qualname__ = name
    fn.__doc__ = "\n".join(s.text for s in op.schemas)
    if "creation" in op.tags:
        return fn
    # A call whose signature the memo knows replays in C where it can (call_memo.py native_call):
    # `F.linear`, `x.view`, a model's forward repeats the same calls every step.  A pointwise op's
    # function builds in C (ir/build.py fast_builder: `x.sigmoid()`, `lt.add(x, y)` without a
    # Python frame), its keyword calls and misses going to that replay, and then to `fn`.
    replayed = _named(native_call(memo, fn, _wrap), fn) or fn
    return _named(tensor_builder(op, replayed, outer=replayed), fn) or replayed


def _named(stand_in: Callable | None, fn: Callable) -> Callable | None:
    """A C stand-in for `fn` with the names help() and inspect read of a function."""
    if stand_in is not None:
        stand_in.__name__, stand_in.__qualname__, stand_in.__doc__ = fn.__name__, fn.__qualname__, fn.__doc__
        stand_in.__module__, stand_in.__annotations__ = fn.__module__, fn.__annotations__
    return stand_in


def with_device(fn):
    """Accept torch's creation keywords: device= selects the process's device (lazytorch/device.py);
    layout= and pin_memory= take their only meaningful values (requires_grad= is fn's own)."""
    def creation(*args, device=None, layout=None, pin_memory=False, **kwargs):
        if device is not None:
            from .device import select
            select(device)
        return fn(*args, **kwargs)
    creation.__name__ = creation.__qualname__ = fn.__name__
    creation.__doc__ = fn.__doc__
    return creation


def make_inplace(op: OpDef, name: str):
    def method(self: Tensor, *args, **kwargs):
        result = call(op.name, self, *args, **kwargs)
        return _assign(op, self, result, "self")
    method.__name__ = method.__qualname__ = name
    method.__doc__ = f"In-place {op.name}: " + "\n".join(s.text for s in op.schemas)
    return method


def make_operator(op: OpDef, dunder: str):
    fn = make_function(op, op.name)
    if dunder.startswith("__i") and dunder != "__invert__":   # __invert__ (~x) is not in-place
        return make_inplace(op, dunder)
    if dunder.startswith("__r") and dunder not in ("__rshift__",):
        def reflected(self, other):
            return fn(other, self)               # (fn takes the fast path itself)
        reflected.__name__ = dunder
        # in C where it can be, as the operators below: `2.0 - x` builds sub(2.0, x) with no frame
        fast = tensor_builder(op, fn, outer=reflected, swapped=True)
        if fast is None:
            return reflected
        fast.__name__ = fast.__qualname__ = dunder
        return fast

    def operator(self, *args):
        return fn(self, *args)
    # (the fast path builds and wraps the node itself, calling `operator` where it cannot)
    fast = tensor_builder(op, operator)
    if fast is not None:
        fast.__name__ = fast.__qualname__ = dunder
        return fast
    operator.__name__ = dunder
    return operator


# registry names with these prefixes are torch's submodule functions (aten's `linalg_det` is
# `torch.linalg.det`): exported as lazytorch.linalg.det / lazytorch.special.ndtr
SUBMODULES = ("linalg", "special")


def _install_host_value() -> None:
    """Builders of data-dependent ops evaluate their input through ir.host (see there)."""
    from .ir import host
    from .realize import eval_nodes, host_value

    def value(node: Node):
        eval_nodes([node])
        return host_value(node)
    host.HOST_VALUE = value


# torch functions whose one-argument form is another op: `torch.where(cond)` is
# `torch.nonzero(cond, as_tuple=True)` (it syncs like nonzero: docs/ops.md)
ONE_ARGUMENT_FORMS = {"where": ("nonzero", {"as_tuple": True})}


def _with_one_argument_form(fn: Callable, other: Callable, kwargs: dict) -> Callable:
    def dispatch(*args, **kw):
        if len(args) == 1 and not kw:
            return other(args[0], **kwargs)
        return fn(*args, **kw)
    functools.update_wrapper(dispatch, fn)
    return dispatch


def install(namespace: dict, nn_namespace: dict) -> None:
    """Put every registry op into the module namespace, on Tensor, and into nn.functional; and
    indexing (x[key], x[key] = value) on Tensor."""
    _install_host_value()
    Tensor.__getitem__, Tensor.__setitem__ = getitem, setitem
    seen = set()
    for sub in SUBMODULES:
        namespace.setdefault(sub, types.SimpleNamespace())
    for name, op in ops().items():
        fn = make_function(op, name)
        if "creation" in op.tags:
            fn = with_device(fn)
        prefix = name.split("_", 1)[0]
        if prefix in SUBMODULES and "function" in op.variants:
            setattr(namespace[prefix], name.split("_", 1)[1], fn)
        elif "function" in op.variants:
            namespace.setdefault(name, fn)
        if "method" in op.variants and not hasattr(Tensor, name) and prefix not in SUBMODULES:
            setattr(Tensor, name, fn)
        if op.nn:
            nn_namespace[op.nn if isinstance(op.nn, str) else name] = fn
        if op.inplace and "method" in op.variants and prefix not in SUBMODULES:
            setattr(Tensor, name + "_", make_inplace(op, name + "_"))
        if id(op) in seen:
            continue
        seen.add(id(op))
        for dunder in op.operators:
            setattr(Tensor, dunder, make_operator(op, dunder))
    for name, (other, kwargs) in ONE_ARGUMENT_FORMS.items():
        namespace[name] = _with_one_argument_form(namespace[name], namespace[other], kwargs)

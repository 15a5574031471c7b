"""nn.Module with torch's behaviour: registration, traversal, state dicts, modes, hooks, repr.

Parameters, buffers and submodules are registered by attribute assignment (or register_*), kept in
insertion order in `_parameters`, `_buffers` and `_modules`, and found again by `__getattr__`, as in
torch.  The traversal orders (and so state_dict key order) are torch's: a module's own parameters,
then its persistent buffers, then each child's, depth first.  Values change in place through
`set_value`, so a Parameter keeps its identity across `to`, `half` and `load_state_dict`.
"""
from __future__ import annotations

import collections
import itertools
from typing import Any, Callable, Iterator

from ..ir import dtypes as D
from ..ir.node import defer_collection
from ..tensor import Size, Tensor, parse_to
from .parameter import Parameter, host_node, set_value

_IncompatibleKeys = collections.namedtuple("IncompatibleKeys", ["missing_keys", "unexpected_keys"])


class RemovableHandle:
    """What register_*_hook returns: `remove()` unregisters the hook."""
    _ids = itertools.count()

    def __init__(self, hooks: dict):
        self.hooks, self.id = hooks, next(RemovableHandle._ids)

    def remove(self) -> None:
        self.hooks.pop(self.id, None)

    def __enter__(self):
        return self

    def __exit__(self, *exc) -> None:
        self.remove()


class Module:
    """Base class of every layer, as torch.nn.Module."""

    training: bool
    _version = 1

    def __init__(self, *args, **kwargs) -> None:
        if args or kwargs:
            raise TypeError(f"{type(self).__name__}.__init__() got unexpected arguments")
        for name, value in (("training", True), ("_parameters", {}), ("_buffers", {}),
                            ("_non_persistent_buffers_set", set()), ("_modules", {}),
                            ("_forward_hooks", {}), ("_forward_hooks_with_kwargs", set()),
                            ("_forward_pre_hooks", {}), ("_forward_pre_hooks_with_kwargs", set())):
            object.__setattr__(self, name, value)

    # ---------------------------------------------------------------- registration
    def __setattr__(self, name: str, value: Any) -> None:
        params = self.__dict__.get("_parameters")
        if params is None:
            raise AttributeError("cannot assign attributes before Module.__init__() call")
        if isinstance(value, Parameter):
            self._remove_from(name, keep="_parameters")
            self.register_parameter(name, value)
        elif name in params:
            if value is not None:
                raise TypeError(f"cannot assign '{_type_name(value)}' as parameter '{name}' "
                                "(lazytorch.nn.Parameter or None expected)")
            self.register_parameter(name, None)
        elif isinstance(value, Module):
            self._remove_from(name, keep="_modules")
            self._modules[name] = value
        elif name in self._modules:
            if value is not None:
                raise TypeError(f"cannot assign '{_type_name(value)}' as child module '{name}' "
                                "(lazytorch.nn.Module or None expected)")
            self._modules[name] = None
        elif name in self._buffers:
            if value is not None and not isinstance(value, Tensor):
                raise TypeError(f"cannot assign '{_type_name(value)}' as buffer '{name}' "
                                "(lazytorch.Tensor or None expected)")
            self._buffers[name] = value
        else:
            object.__setattr__(self, name, value)

    def _remove_from(self, name: str, keep: str) -> None:
        self.__dict__.pop(name, None)
        for table in ("_parameters", "_buffers", "_modules"):
            if table != keep:
                self.__dict__[table].pop(name, None)
        self._non_persistent_buffers_set.discard(name)

    def __getattr__(self, name: str) -> Any:
        # (unrolled: a model's forward reaches every child, weight and buffer through here, ~100
        # times a ResNet-18 step; the loop over the tables' names cost a third of each call)
        d = self.__dict__
        try:
            table = d["_parameters"]
            if name in table:
                return table[name]
            table = d["_buffers"]
            if name in table:
                return table[name]
            table = d["_modules"]
            if name in table:
                return table[name]
        except KeyError:                 # (before Module.__init__, or mid-unpickling: no tables yet)
            pass
        raise AttributeError(f"'{type(self).__name__}' object has no attribute '{name}'")

    def _member(self, name: str) -> Any:
        """`getattr(self, name)` for a name the constructor registered (a layer's forward reading its
        own weights and buffers), read from the tables first: the ordinary lookup reaches
        __getattr__ only after it missed and built an AttributeError, ~0.55 us a read against
        ~0.15 (BatchNorm reads five a call, a convolution two).  A name no table holds (replaced
        by a plain attribute) is looked up the ordinary way."""
        try:
            return Module.__getattr__(self, name)
        except AttributeError:
            return getattr(self, name)

    def __delattr__(self, name: str) -> None:
        for table in ("_parameters", "_buffers", "_modules"):
            if name in self.__dict__[table]:
                del self.__dict__[table][name]
                self._non_persistent_buffers_set.discard(name)
                return
        object.__delattr__(self, name)

    def __dir__(self):
        return sorted(set(super().__dir__()) | set(self._parameters) | set(self._buffers) | set(self._modules))

    def _check_name(self, kind: str, name: str) -> None:
        if not isinstance(name, str):
            raise TypeError(f"{kind} name should be a string. Got {_type_name(name)}")
        if name == "" or "." in name:
            raise KeyError(f'{kind} name can\'t be empty or contain ".", got: "{name}"')
        if hasattr(self, name) and name not in self._parameters and name not in self._buffers \
                and name not in self._modules:
            raise KeyError(f"attribute '{name}' already exists")

    def register_parameter(self, name: str, param: Parameter | None) -> None:
        self._check_name("parameter", name)
        if param is not None and not isinstance(param, Parameter):
            raise TypeError(f"cannot assign '{_type_name(param)}' object to parameter '{name}' "
                            "(lazytorch.nn.Parameter or None required)")
        self._parameters[name] = param

    def register_buffer(self, name: str, tensor: Tensor | None, persistent: bool = True) -> None:
        self._check_name("buffer", name)
        if tensor is not None and not isinstance(tensor, Tensor):
            raise TypeError(f"cannot assign '{_type_name(tensor)}' object to buffer '{name}' "
                            "(lazytorch.Tensor or None required)")
        self._buffers[name] = tensor
        if persistent:
            self._non_persistent_buffers_set.discard(name)
        else:
            self._non_persistent_buffers_set.add(name)

    def add_module(self, name: str, module: "Module | None") -> None:
        if module is not None and not isinstance(module, Module):
            raise TypeError(f"{_type_name(module)} is not a Module subclass")
        self._check_name("module", name)
        self._modules[name] = module

    register_module = add_module

    def get_submodule(self, target: str) -> "Module":
        mod = self
        for item in target.split(".") if target else ():
            if item not in mod._modules:
                raise AttributeError(f"{type(mod).__name__} has no attribute `{item}`")
            mod = mod._modules[item]
        return mod

    def get_parameter(self, target: str) -> Parameter:
        return self._get_member(target, "_parameters", "parameter")

    def get_buffer(self, target: str) -> Tensor:
        return self._get_member(target, "_buffers", "buffer")

    def _get_member(self, target: str, table: str, kind: str):
        path, _, name = target.rpartition(".")
        mod = self.get_submodule(path)
        if name not in mod.__dict__[table]:
            raise AttributeError(f"{type(mod).__name__} has no {kind} `{name}`")
        return mod.__dict__[table][name]

    # ---------------------------------------------------------------- traversal
    def named_modules(self, memo: set | None = None, prefix: str = "", remove_duplicate: bool = True):
        memo = set() if memo is None else memo
        if remove_duplicate:
            if id(self) in memo:
                return
            memo.add(id(self))
        yield prefix, self
        for name, module in self._modules.items():
            if module is None:
                continue
            yield from module.named_modules(memo, f"{prefix}.{name}" if prefix else name, remove_duplicate)

    def modules(self) -> Iterator["Module"]:
        return (m for _, m in self.named_modules())

    def named_children(self):
        seen = set()
        for name, module in self._modules.items():
            if module is not None and id(module) not in seen:
                seen.add(id(module))
                yield name, module

    def children(self) -> Iterator["Module"]:
        return (m for _, m in self.named_children())

    def _named_members(self, table: str, prefix: str, recurse: bool, remove_duplicate: bool = True):
        seen = set()
        modules = self.named_modules(prefix=prefix, remove_duplicate=remove_duplicate) if recurse \
            else [(prefix, self)]
        for mod_prefix, module in modules:
            for name, value in module.__dict__[table].items():
                if value is None or (remove_duplicate and id(value) in seen):
                    continue
                seen.add(id(value))
                yield (f"{mod_prefix}.{name}" if mod_prefix else name), value

    def named_parameters(self, prefix: str = "", recurse: bool = True, remove_duplicate: bool = True):
        yield from self._named_members("_parameters", prefix, recurse, remove_duplicate)

    def parameters(self, recurse: bool = True) -> Iterator[Parameter]:
        return (p for _, p in self.named_parameters(recurse=recurse))

    def named_buffers(self, prefix: str = "", recurse: bool = True, remove_duplicate: bool = True):
        yield from self._named_members("_buffers", prefix, recurse, remove_duplicate)

    def buffers(self, recurse: bool = True) -> Iterator[Tensor]:
        return (b for _, b in self.named_buffers(recurse=recurse))

    # ---------------------------------------------------------------- modes and in-place changes
    def train(self, mode: bool = True) -> "Module":
        if not isinstance(mode, bool):
            raise ValueError("training mode is expected to be boolean")
        self.training = mode
        for module in self.children():
            module.train(mode)
        return self

    def eval(self) -> "Module":
        return self.train(False)

    def requires_grad_(self, requires_grad: bool = True) -> "Module":
        for p in self.parameters():
            p.requires_grad = requires_grad
        return self

    def zero_grad(self, set_to_none: bool = True) -> None:
        for p in self.parameters():
            grad = getattr(p, "grad", None)
            if grad is None:
                continue
            if set_to_none:
                p.grad = None
            else:
                grad.zero_()

    def apply(self, fn: Callable[["Module"], None]) -> "Module":
        for module in self.children():
            module.apply(fn)
        fn(self)
        return self

    def _apply_values(self, fn: Callable[[Tensor], Tensor | None]) -> "Module":
        """Replace every parameter's and buffer's value by fn(value) (None: unchanged), in place."""
        for module in self.modules():
            for table in ("_parameters", "_buffers"):
                for t in module.__dict__[table].values():
                    if t is not None:
                        new = fn(t)
                        if new is not None and new is not t:
                            set_value(t, new.node, "Module.to")
        return self

    def to(self, *args, **kwargs) -> "Module":
        """to(device) | to(dtype) | to(device, dtype) | to(tensor): parameters and buffers move in
        place (the device is the process's, see lazytorch/device.py); a dtype applies to the
        floating point ones only, as in torch."""
        from ..device import select
        dev, dtype, _ = parse_to("Module.to", args, kwargs)
        if dev is not None:
            select(dev)
        if dtype is None:
            return self
        dtype = D.as_dtype(dtype)
        if not dtype.is_floating_point:
            raise TypeError(f"nn.Module.to only accepts floating point dtypes, but got desired dtype={dtype}")
        return self._cast(dtype)

    def _cast(self, dtype: D.DType) -> "Module":
        return self._apply_values(lambda t: t.to(dtype) if t.dtype.is_floating_point else None)

    def half(self) -> "Module":
        return self._cast(D.float16)

    def float(self) -> "Module":  # noqa: A003  (torch's name)
        return self._cast(D.float32)

    def double(self) -> "Module":
        return self._cast(D.float64)

    def bfloat16(self) -> "Module":
        return self._cast(D.bfloat16)

    def type(self, dst_type) -> "Module":  # noqa: A003
        return self._apply_values(lambda t: t.to(D.as_dtype(dst_type)))

    def cpu(self) -> "Module":
        return self.to("cpu")

    def cuda(self, device=None) -> "Module":
        return self.to("cuda" if device is None else device)

    # ---------------------------------------------------------------- state dicts
    def _save_to_state_dict(self, destination: dict, prefix: str, keep_vars: bool) -> None:
        for name, t in self._local_state().items():
            destination[prefix + name] = t if keep_vars else _shared(t)

    def state_dict(self, *args, destination=None, prefix: str = "", keep_vars: bool = False) -> dict:
        """An ordered dict of every parameter and persistent buffer by dotted name (torch's keys and
        order; tied weights appear under each name).  Values share the module's: writing into them
        in place (copy_) writes into the module, as torch's detached tensors do."""
        if args:                                  # torch's deprecated positional form
            destination, prefix, keep_vars = (list(args) + [destination, prefix, keep_vars][len(args):])[:3]
        destination = collections.OrderedDict() if destination is None else destination
        self._save_to_state_dict(destination, prefix, keep_vars)
        for name, module in self._modules.items():
            if module is not None:
                module.state_dict(destination=destination, prefix=f"{prefix}{name}.", keep_vars=keep_vars)
        return destination

    def _local_state(self) -> dict[str, Tensor]:
        """This module's own parameters and persistent buffers by name (not its children's)."""
        local = {n: p for n, p in self._parameters.items() if p is not None}
        local.update((n, b) for n, b in self._buffers.items()
                     if b is not None and n not in self._non_persistent_buffers_set)
        return local

    def load_state_dict(self, state_dict, strict: bool = True, assign: bool = False):
        """Copy values into this module's parameters and buffers (which keep their identity).

        Values may be lazytorch tensors, numpy arrays or anything with `__dlpack__` / `__array__`
        (torch tensors load without lazytorch importing torch).  Floating point values are cast to
        the parameter's floating dtype (as torch's copy_ does); a shape mismatch or a change of kind
        (float <-> integer or bool) is an error naming the key, both shapes and both dtypes.  With
        strict=True missing and unexpected keys are errors, as in torch; the return value is the
        (missing_keys, unexpected_keys) named tuple."""
        from ..interop import to_numpy
        if not hasattr(state_dict, "keys") or not hasattr(state_dict, "__getitem__"):
            raise TypeError(f"Expected state_dict to be dict-like, got {_type_name(state_dict)}.")
        missing, errors, updates, expected = [], [], [], set()
        for mod_prefix, module in self.named_modules(remove_duplicate=False):
            prefix = f"{mod_prefix}." if mod_prefix else ""
            if hasattr(module, "_materialize_from_state"):        # a Lazy* module takes its shapes from the dict
                module._materialize_from_state(state_dict, prefix)
            for name, target in module._local_state().items():
                key = prefix + name
                expected.add(key)
                if key not in state_dict:
                    missing.append(key)
                    continue
                values, src_dtype = to_numpy(state_dict[key])
                problem = _mismatch(key, tuple(values.shape), src_dtype, target)
                if problem:
                    errors.append(problem)
                else:
                    updates.append((target, values))
        unexpected = [k for k in state_dict.keys() if k not in expected]
        if strict:
            if unexpected:
                errors.insert(0, "Unexpected key(s) in state_dict: {}. ".format(", ".join(f'"{k}"' for k in unexpected)))
            if missing:
                errors.insert(0, "Missing key(s) in state_dict: {}. ".format(", ".join(f'"{k}"' for k in missing)))
        if errors:
            raise RuntimeError("Error(s) in loading state_dict for {}:\n\t{}".format(
                type(self).__name__, "\n\t".join(errors)))
        for target, values in updates:
            set_value(target, host_node(values, target.dtype), "load_state_dict")
        return _IncompatibleKeys(missing, unexpected)

    # ---------------------------------------------------------------- calling
    def forward(self, *args, **kwargs):
        raise NotImplementedError(f'Module [{type(self).__name__}] is missing the required "forward" function')

    def __call__(self, *args, **kwargs):
        defer_collection()               # (a step's forward: ir/node.py)
        if not self._forward_pre_hooks and not self._forward_hooks:     # (most calls: no hooks)
            return self.forward(*args, **kwargs)
        for hook_id, hook in list(self._forward_pre_hooks.items()):
            if hook_id in self._forward_pre_hooks_with_kwargs:
                result = hook(self, args, kwargs)
                if result is not None:
                    if not (isinstance(result, tuple) and len(result) == 2):
                        raise RuntimeError("forward pre-hook must return None or a tuple of (new_args, new_kwargs), "
                                           f"but got {result}.")
                    args, kwargs = result
            else:
                result = hook(self, args)
                if result is not None:
                    args = result if isinstance(result, tuple) else (result,)
        output = self.forward(*args, **kwargs)
        for hook_id, hook in list(self._forward_hooks.items()):
            if hook_id in self._forward_hooks_with_kwargs:
                result = hook(self, args, kwargs, output)
            else:
                result = hook(self, args, output)
            if result is not None:
                output = result
        return output

    def _register_hook(self, table: str, hook, prepend: bool, with_kwargs: bool) -> RemovableHandle:
        hooks = self.__dict__[table]
        handle = RemovableHandle(hooks)
        hooks[handle.id] = hook
        if prepend:
            hooks_items = [(handle.id, hook)] + [(k, v) for k, v in hooks.items() if k != handle.id]
            hooks.clear()
            hooks.update(hooks_items)
        if with_kwargs:
            self.__dict__[table + "_with_kwargs"].add(handle.id)
        return handle

    def register_forward_pre_hook(self, hook, *, prepend: bool = False, with_kwargs: bool = False) -> RemovableHandle:
        """hook(module, args) -> None or new args (with_kwargs: hook(module, args, kwargs) -> None or
        (args, kwargs)), called before forward."""
        return self._register_hook("_forward_pre_hooks", hook, prepend, with_kwargs)

    def register_forward_hook(self, hook, *, prepend: bool = False, with_kwargs: bool = False,
                              always_call: bool = False) -> RemovableHandle:
        """hook(module, args, output) -> None or a new output (with_kwargs: hook(module, args, kwargs,
        output)), called after forward."""
        return self._register_hook("_forward_hooks", hook, prepend, with_kwargs)

    # ---------------------------------------------------------------- printing
    def extra_repr(self) -> str:
        return ""

    def _get_name(self) -> str:
        return type(self).__name__

    def __repr__(self) -> str:
        lines = [line for line in self.extra_repr().split("\n") if line] if self.extra_repr() else []
        for name, module in self._modules.items():
            child = repr(module).replace("\n", "\n  ")
            lines.append(f"({name}): {child}")
        if not lines:
            return f"{self._get_name()}()"
        if len(lines) == 1 and not self._modules:
            return f"{self._get_name()}({lines[0]})"
        return f"{self._get_name()}(\n  " + "\n  ".join(lines) + "\n)"


class _Shared(Tensor):
    """A state_dict value: t's value, with in-place writes reaching t outside autograd, as a write
    into torch's `t.detach()` reaches t's storage."""

    def _rebind(self, node, op: str = "in-place op") -> None:
        from ..autograd import no_grad
        with no_grad():
            super()._rebind(node, op)


def _shared(t: Tensor) -> Tensor:
    if t._base is not None:
        return t
    from ..ir import views as V
    return _Shared(t.node, t, V.contiguous(tuple(t.shape)))


def _mismatch(key: str, shape: tuple, src_dtype: D.DType, target: Tensor) -> str | None:
    if shape != tuple(target.shape):
        return (f"size mismatch for {key}: copying a param with shape {Size(shape)!r} ({src_dtype.name}) from "
                f"checkpoint, the shape in current model is {Size(tuple(target.shape))!r} ({target.dtype.name}).")
    if src_dtype.category != target.dtype.category:
        return (f"dtype mismatch for {key}: copying a param of dtype {src_dtype.name} with shape "
                f"{Size(shape)!r} from checkpoint, the param in current model is {target.dtype.name} with shape "
                f"{Size(tuple(target.shape))!r} (floating point values load into floating point params only).")
    return None


def _type_name(x) -> str:
    t = type(x)
    return t.__name__ if t.__module__ == "builtins" else f"{t.__module__}.{t.__name__}"

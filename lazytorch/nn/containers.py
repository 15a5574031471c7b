"""Sequential, ModuleList, ModuleDict, ParameterList, ParameterDict with torch's behaviour."""
from __future__ import annotations

import collections
import operator
from typing import Iterable, Iterator

from .module import Module
from .parameter import Parameter


def _index(idx: int, n: int) -> int:
    idx = operator.index(idx)
    if not -n <= idx < n:
        raise IndexError(f"index {idx} is out of range")
    return idx % n


class _ModuleSequence(Module):
    """What Sequential and ModuleList share: children in order, renumbered "0", "1", ... when one is
    removed or inserted (as torch does)."""

    def __len__(self) -> int:
        return len(self._modules)

    def __iter__(self) -> Iterator[Module]:
        return iter(self._modules.values())

    def _renumber(self, items: list[Module]) -> None:
        self._modules.clear()
        for i, module in enumerate(items):
            self._modules[str(i)] = module

    def append(self, module: Module):
        self.add_module(str(len(self)), module)
        return self


class Sequential(_ModuleSequence):
    """Modules called in order; built from modules or one OrderedDict of them."""

    def __init__(self, *args) -> None:
        super().__init__()
        if len(args) == 1 and isinstance(args[0], collections.OrderedDict):
            for key, module in args[0].items():
                self.add_module(key, module)
        else:
            for i, module in enumerate(args):
                self.add_module(str(i), module)

    def __getitem__(self, idx):
        if isinstance(idx, slice):
            return type(self)(collections.OrderedDict(list(self._modules.items())[idx]))
        return list(self._modules.values())[_index(idx, len(self))]

    def __setitem__(self, idx: int, module: Module) -> None:
        key = list(self._modules)[_index(idx, len(self))]
        setattr(self, key, module)

    def __delitem__(self, idx) -> None:
        keys = list(self._modules)
        for key in (keys[idx] if isinstance(idx, slice) else [keys[_index(idx, len(self))]]):
            del self._modules[key]
        self._renumber(list(self._modules.values()))

    def extend(self, modules: Iterable[Module]) -> "Sequential":
        for m in modules:
            self.append(m)
        return self

    def insert(self, index: int, module: Module) -> "Sequential":
        if not isinstance(module, Module):
            raise TypeError(f"{type(module).__name__} is not a Module subclass")
        items = list(self._modules.values())
        items.insert(index, module)
        self._renumber(items)
        return self

    def forward(self, input):
        for module in self._modules.values():
            input = module(input)
        return input


class ModuleList(_ModuleSequence):
    """A list of modules, registered as children "0", "1", ..."""

    def __init__(self, modules: Iterable[Module] | None = None) -> None:
        super().__init__()
        if modules is not None:
            self.extend(modules)

    def __getitem__(self, idx):
        if isinstance(idx, slice):
            return type(self)(list(self._modules.values())[idx])
        return self._modules[str(_index(idx, len(self)))]

    def __setitem__(self, idx: int, module: Module) -> None:
        setattr(self, str(_index(idx, len(self))), module)

    def __delitem__(self, idx) -> None:
        items = list(self._modules.values())
        del items[idx if isinstance(idx, slice) else _index(idx, len(self))]
        self._renumber(items)

    def __iadd__(self, modules: Iterable[Module]) -> "ModuleList":
        return self.extend(modules)

    def __add__(self, other: Iterable[Module]) -> "ModuleList":
        return ModuleList(list(self) + list(other))

    def extend(self, modules: Iterable[Module]) -> "ModuleList":
        if isinstance(modules, Module) and not isinstance(modules, (ModuleList, Sequential)):
            raise TypeError(f"ModuleList.extend should be called with an iterable, but got {type(modules).__name__}")
        for m in list(modules):
            self.append(m)
        return self

    def insert(self, index: int, module: Module) -> None:
        items = list(self._modules.values())
        items.insert(index, module)
        self._renumber(items)

    def __repr__(self) -> str:
        """torch's form: runs of children that print the same are shown once as "(i-j): n x ..."."""
        reprs = [repr(m) for m in self]
        if not reprs:
            return "ModuleList()"
        lines, start = [], 0
        for i in range(1, len(reprs) + 1):
            if i < len(reprs) and reprs[i] == reprs[start]:
                continue
            body = reprs[start].replace("\n", "\n  ")
            label = f"({start}): " if i - start == 1 else f"({start}-{i - 1}): {i - start} x "
            lines.append(label + body)
            start = i
        return "ModuleList(\n  " + "\n  ".join(lines) + "\n)"


class _Mapping(Module):
    """What ModuleDict and ParameterDict share: dict access to one of the module's tables
    (`_modules` or `_parameters`), in insertion order."""

    _table = "_modules"

    def _entries(self) -> dict:
        return self.__dict__[self._table]

    def __getitem__(self, key: str):
        return self._entries()[key]

    def __len__(self) -> int:
        return len(self._entries())

    def __iter__(self) -> Iterator[str]:
        return iter(self._entries())

    def __contains__(self, key: str) -> bool:
        return key in self._entries()

    def keys(self):
        return self._entries().keys()

    def items(self):
        return self._entries().items()

    def values(self):
        return self._entries().values()


class ModuleDict(_Mapping):
    """An ordered dict of modules, registered under their keys."""

    def __init__(self, modules=None) -> None:
        super().__init__()
        if modules is not None:
            self.update(modules)

    def __setitem__(self, key: str, module: Module) -> None:
        self.add_module(key, module)

    def __delitem__(self, key: str) -> None:
        del self._modules[key]

    def clear(self) -> None:
        self._modules.clear()

    def pop(self, key: str) -> Module:
        value = self[key]
        del self[key]
        return value

    def update(self, modules) -> None:
        items = modules.items() if hasattr(modules, "items") else modules
        for key, module in items:
            self[key] = module


class ParameterList(Module):
    """A list of parameters, registered as "0", "1", ..."""

    def __init__(self, values=None) -> None:
        super().__init__()
        for v in values or ():
            self.append(v)

    def __getitem__(self, idx: int) -> Parameter:
        return self._parameters[str(_index(idx, len(self)))]

    def __len__(self) -> int:
        return len(self._parameters)

    def __iter__(self):
        return iter(self._parameters.values())

    def append(self, value) -> "ParameterList":
        self.register_parameter(str(len(self)), value if isinstance(value, Parameter) else Parameter(value))
        return self


class ParameterDict(_Mapping):
    """An ordered dict of parameters, registered under their keys."""

    _table = "_parameters"

    def __init__(self, parameters=None) -> None:
        super().__init__()
        for k, v in (parameters.items() if hasattr(parameters, "items") else parameters or ()):
            self[k] = v

    def __setitem__(self, key: str, value) -> None:
        self.register_parameter(key, value if isinstance(value, Parameter) else Parameter(value))

"""Op families: many ops built by one registered builder that looks the op up in a table.

A registry YAML file whose ops are each composed by their own small function (math.yaml,
misc.yaml, shape_extra.yaml, linalg_extra.yaml) names one builder for all of them; its module
declares `FAMILY = OpFamily("math", ...)` and decorates each function with `@FAMILY.register(names)`.
The family installs that builder, which dispatches on the op's name and, where asked, renames
errors: a composed op raises errors naming the primitives it is made of, and the user should see
the op they called instead.
"""
from __future__ import annotations

from typing import Any, Callable

from .build import Args, builder
from .host import renamed
from .registry import OpDef, registrar
from .schema import Schema

# The exceptions a composition raises for bad input (the classes torch raises); anything else is a bug
# and keeps its own message.
_USER_ERRORS = (RuntimeError, TypeError, IndexError, ValueError)


class OpFamily:
    """The table of one builder's ops.

    takes_name: whether each function is called as fn(op_name, args) or as fn(args).
    errors_as: the name errors are renamed to, from the op's registry name (None: not renamed).
    """

    def __init__(self, builder_name: str, *, takes_name: bool = True,
                 errors_as: Callable[[str], str] | None = lambda name: name) -> None:
        self.table: dict[str, Callable[..., Any]] = {}
        self.takes_name = takes_name
        self.errors_as = errors_as
        self.register = registrar(self.table)    # decorator: fn builds each of the ops it names
        builder(builder_name)(self.build)

    def build(self, op: OpDef, schema: Schema, a: Args) -> Any:
        fn = self.table[op.name]
        call = (lambda: fn(op.name, a)) if self.takes_name else (lambda: fn(a))
        if self.errors_as is None:
            return call()
        try:
            return call()
        except _USER_ERRORS as e:
            raise renamed(e, self.errors_as(op.name)) from None

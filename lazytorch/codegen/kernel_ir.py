"""The kernel IR: one generated kernel described independently of any target language.

lower.py builds a Kernel from a kernel launch of the plan; render.py turns it into source with a
dialect table and the shared templates.  The design is written out in docs/architecture.md
("Code generation").  In short: the domain is `outer` (kept dims) x `inner` (reduced dims, or for
pointwise kernels the whole domain), every buffer read/write is an Access (strides over those
dims plus an offset), and the body is a list of Stages whose Ops are in SSA form, typed by
*register* dtype (half types compute in float32).
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

from ..ir.dtypes import DType

I32_LIMIT = 2**31 - 1


@dataclass(frozen=True)
class Arg:
    name: str          # "a0", "a1", ...
    dtype: DType       # storage dtype of the buffer
    role: str          # "in" or "out"
    numel: int


@dataclass(frozen=True)
class Access:
    """Element (o, i) of the domain lives at arg[offset + sum(o_d*outer[d]) + sum(i_d*inner[d])].

    `arg` is None for a pure index expression (iota): the value is the index itself.  `clamp`: the
    index may fall outside the buffer where the kernel masks the value out (a clamped view, a
    padded read: ir/build.py clamped_view), so it is clipped to the buffer first."""
    arg: int | None
    outer: tuple[int, ...]
    inner: tuple[int, ...]
    offset: int = 0
    clamp: bool = False

    @property
    def uniform(self) -> bool:
        return self.arg is not None and not any(self.outer) and not any(self.inner)

    @property
    def row_only(self) -> bool:
        return not any(self.inner)


@dataclass
class Op:
    var: str
    op: str                    # primitive op name, or load / index / cast
    args: tuple[str, ...]
    dtype: DType               # register dtype of the result
    attrs: dict[str, Any] = field(default_factory=dict)


@dataclass
class Reduce:
    """acc <op>= value over the inner domain.  argmax/argmin also keep `index` (int64)."""
    acc: str
    op: str                    # sum prod amax amin argmax argmin any all
    value: str
    dtype: DType               # accumulator (register) dtype
    value_dtype: DType         # dtype of the value being reduced (for argmax identity)
    index: str | None = None   # argmax/argmin: the variable holding the winning index


@dataclass
class Store:
    access: int
    value: str
    dtype: DType               # storage dtype of the buffer


@dataclass
class Stage:
    scope: str                 # kernel, row or elem
    ops: list[Op] = field(default_factory=list)
    reduces: list[Reduce] = field(default_factory=list)
    stores: list[Store] = field(default_factory=list)

    @property
    def empty(self) -> bool:
        return not (self.ops or self.reduces or self.stores)


@dataclass
class Kernel:
    name: str
    pattern: str                          # pointwise, reduce, row
    args: list[Arg]
    outer: tuple[int, ...]                # merged sizes of the kept dims
    inner: tuple[int, ...]                # merged sizes of the reduced dims (pointwise: whole domain)
    accesses: list[Access]
    stages: list[Stage]
    index_type: str = "i32"               # i32 or i64
    contiguous: bool = False              # every access is linear in the flattened domain
    row_cache: list[DType] = field(default_factory=list)   # per-row buffers (inner_numel each) of
    # elem values kept between passes: Op row_put (args: value; attrs slot) fills slot[i],
    # Op row_get (attrs slot) reads it back in a later pass

    @property
    def outer_numel(self) -> int:
        return math.prod(self.outer)

    @property
    def inner_numel(self) -> int:
        return math.prod(self.inner)

    @property
    def numel(self) -> int:
        return self.outer_numel * self.inner_numel

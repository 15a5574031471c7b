"""The kernel plan: what the fusion pass produces and every backend executes.

The contract is written out in docs/architecture.md ("The kernel plan"); in short:

- BufferRef: one buffer of the program: a `param` (slot = leaf index of the program; scalar
  params are buffers of shape ()), a `temp` (written by one launch, read by later ones) or an
  `output` (slot = root index).
- Launch: one step: a generated `kernel`, a `library` call (matmul) or a `reference` (host)
  fallback, over a group of nodes in topological order.  `reads` pairs each value the group reads
  from outside with its buffer; `writes` pairs each group node whose value is stored with its
  buffer.  Kernel launches also carry their iteration domain (`domain` = full shape I,
  `reduce_dims` = R).
- KernelPlan: params (by slot), all buffers, launches in execution order, outputs (by root).
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field

from ..ir.dtypes import DType
from ..ir.node import Node, type_str
from ..ir.printer import format_node


@dataclass(frozen=True, eq=False, slots=True)     # (slots: one per param, temp and output; half the build cost)
class BufferRef:
    id: int
    shape: tuple[int, ...]
    dtype: DType
    kind: str                 # "param", "temp" or "output"
    slot: int | None = None   # param: leaf index; output: root index; temp: None

    @property
    def numel(self) -> int:
        return math.prod(self.shape)

    def __repr__(self) -> str:
        slot = "" if self.slot is None else str(self.slot)
        return f"{self.kind}{slot}#{self.id}:{self.dtype.short}{list(self.shape)}"


@dataclass(eq=False)
class Launch:
    kind: str                                     # "kernel", "library" or "reference"
    name: str                                     # unique in the plan, e.g. "k0_row"
    nodes: tuple[Node, ...]                       # the group, topological
    reads: tuple[tuple[Node, BufferRef], ...]     # outside value -> its buffer
    writes: tuple[tuple[Node, BufferRef], ...]    # group node -> the buffer it is stored to
    pattern: str                                  # "pointwise", "reduce", "row" (kernels); else = kind
    domain: tuple[int, ...] = ()                  # kernels: the full shape I
    reduce_dims: tuple[int, ...] = ()             # kernels: the reduced dims R of I (sorted)

    @property
    def buffers(self) -> int:
        return len(self.reads) + len(self.writes)


@dataclass(frozen=True, eq=False)
class Refusal:
    """A merge fusion refused: `node` (which ended in launch `landed`) could not join the group
    that became launch `target`, for `reason`."""
    node: Node
    landed: str
    target: str
    reason: str

    def __str__(self) -> str:
        return (f"cannot fuse {self.node.op} {type_str(self.node)}{where(self.node)} ({self.landed}) "
                f"into {self.target}: {self.reason}")


def where(n: Node) -> str:
    """ ' at file.py:12' for a node that knows the user's line that built it, else ''."""
    return f" at {n.origin}" if getattr(n, "origin", None) else ""


def origins(nodes) -> list[str]:
    """The distinct user source lines that built `nodes`, in file and line order."""
    seen = {n.origin for n in nodes if getattr(n, "origin", None)}
    return sorted(seen, key=lambda o: (o.rpartition(":")[0], int(o.rpartition(":")[2])))


def describe_launch(launch: Launch) -> str:
    """A note for an error raised while `launch` ran: its ops and the user lines that built them."""
    ops = ", ".join(dict.fromkeys(n.op for n in launch.nodes if n.op not in ("view", "scalar", "full")))
    src = origins(launch.nodes)
    return f"(raised by launch {launch.name} running {ops}" + (f", built at {', '.join(src)})" if src else ")")


@dataclass(eq=False)
class KernelPlan:
    params: list[BufferRef]
    buffers: list[BufferRef]
    launches: list[Launch]
    outputs: list[BufferRef]
    backend: str = ""
    scalar_slots: frozenset = frozenset()    # param slots that receive Python numbers, not buffers
    nodes: list[Node] = field(default_factory=list, repr=False)   # the final graph, topological
    refusals: list[Refusal] = field(default_factory=list, repr=False)   # fusion's refused merges
    # GPU backends, filled by lazytorch.kernel_plan: launch name -> its kernel's template and
    # launch geometry (codegen/gpu.py::plan_geometry), printed under the launch
    geometry: dict[str, str] = field(default_factory=dict, repr=False)

    @property
    def kernels(self) -> list[Launch]:
        """Every launch in order (kind says kernel, library or reference)."""
        return self.launches

    def count(self, kind: str) -> int:
        return sum(1 for l in self.launches if l.kind == kind)

    def __str__(self) -> str:
        return format_plan(self)


def format_plan(plan: KernelPlan) -> str:
    """One line per launch (kind, pattern, domain, buffers read and written), nodes indented."""
    lines = [f"plan: {len(plan.launches)} launches, params {plan.params}, outputs {plan.outputs}"]
    names = {id(n): f"%{i}" for i, n in enumerate(n for l in plan.launches for n in l.nodes)}
    for l in plan.launches:
        for n, b in l.reads:
            names.setdefault(id(n), repr(b))
    for l in plan.launches:
        dom = ""
        if l.kind == "kernel":
            dom = f" I={list(l.domain)}" + (f" R={list(l.reduce_dims)}" if l.reduce_dims else "")
        reads = ", ".join(repr(b) for _, b in l.reads)
        writes = ", ".join(f"{names[id(n)]}->{b!r}" for n, b in l.writes)
        lines.append(f"{l.name}: {l.kind}/{l.pattern}{dom} reads({reads}) writes({writes})")
        if l.name in plan.geometry:
            lines.append(f"    # {plan.geometry[l.name]}")
        src = origins(l.nodes)
        if src:
            lines.append(f"    # from {', '.join(src)}")
        for n in l.nodes:
            lines.append("    " + format_node(n, names))
    return "\n".join(lines)

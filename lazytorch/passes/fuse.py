"""Fusion: group the final graph's nodes into launches and produce the KernelPlan.

Nodes are visited in topological order.  Each computing node joins the kernel group(s) of the
nodes it reads when the result is still one valid kernel (rules below), merging several input
groups where it reads more than one; otherwise it starts a new group.  Views, `full` and `iota`
are *inlined*: they are not members of any group but are copied into every kernel group that
reads them (a view becomes index arithmetic on the buffer it reads, a fill a constant).

A kernel group has one domain: full shape I and reduced dims R (None until it holds a reduction).
A member is *reduced* (once per row: a reduction, or pointwise over reduced members only) or
*full* (once per element).  Joining is allowed when:
  - full members have shape I exactly (inlined reads may broadcast); reduced members have I's
    shape with R removed or kept as 1; a full member reading a reduced one needs the keepdim form;
  - every reduction reads a full value of shape I and reduces exactly R;
  - if a full value depends on a reduced one (the row is revisited: softmax, layer_norm), the
    row (the product of I over R) has at most ROW_LIMIT elements;
  - no inlined view reads a member of the same group (its input must be a stored buffer);
  - reads + writes stay within the backend's buffer cap (`max_buffers`: Metal's argument table
    holds 31, C has no such limit), and merging groups creates no cycle between launches.
Inlining copies a value's reads into every reader, so before grouping (`bound_inlining`) a value
stays inlined only while it reads at most half the cap, and a node whose inlined inputs together
read more than the cap materialises the largest of them: every launch, pointwise, reduction
prologue or row program, fits the cap with Python scalars counted as the buffers they are.
After the loop, passes/horizontal.py merges independent groups over the same domain (the updates
of same-shaped parameters, their squared sums) into one launch each, under the same caps.
Each refused merge is recorded with its reason (`Fuser.refusals`); LAZYTORCH_DUMP=fusion prints
them as "cannot fuse A into B: reason" (Inductor's WhyNoFuse is the model).
matmul is a `library` launch; ops with no kernel form are `reference` launches.  The epilogue of a
linear layer (bias, activation, residual) fuses into the one kernel that follows the GEMM; on
backends whose GEMM adds a bias itself (`library_bias`: MLX's addmm) a row-bias `add` joins the
matmul's library launch instead (`try_library_bias`) and the rest forms that following kernel.
"""
from __future__ import annotations

import math

from ..ir.node import Node
from ..ir.registry import ops
from .horizontal import bits, merge_independent
from .plan import BufferRef, KernelPlan, Launch, Refusal

ROW_LIMIT = 16384      # elements of one row a row kernel may revisit (a threadgroup working set)
MAX_BUFFERS = 31       # default reads + writes of one launch (Metal's buffer argument table); the
                       # backend's own cap reaches build_plan through the pipeline's options
MAX_GROUP_NODES = 256  # nodes of one kernel: bounds a kernel's compile time (and merge cost)
SIBLING_TRIES = 16     # sibling groups a node tries to join before starting its own: a value read
                       # all along a long chain (an input, a weight) is read by every group of it,
                       # and trying them all made fusion quadratic in the program's length

REDUCTIONS = frozenset({"sum", "prod", "amax", "amin", "argmax", "argmin", "any", "all"})
INLINED = frozenset({"view", "full", "iota", "scalar"})   # scalar: a structural constant
LIBRARY = frozenset({"matmul", "scaled_dot_product_attention"})   # (the latter where a backend keeps it)
EXTRA_POINTWISE = frozenset({"to", "clone", "contiguous", "where"})


_POINTWISE: dict[str, bool] = {}      # op -> pointwise? (the registry is fixed once loaded)


def is_pointwise(op: str) -> bool:
    got = _POINTWISE.get(op)
    if got is None:
        opdef = ops().get(op)
        got = _POINTWISE[op] = op in EXTRA_POINTWISE or (opdef is not None and opdef.has("pointwise"))
    return got


_KIND: dict[str, str] = {}            # op -> its launch kind (launch_kind, kept per op)


def launch_kind(op: str) -> str:
    got = _KIND.get(op)
    if got is None:
        got = _KIND[op] = _launch_kind(op)
    return got


def _launch_kind(op: str) -> str:
    if op in LIBRARY:
        return "library"
    if op in INLINED or op in REDUCTIONS or is_pointwise(op):
        return "kernel"
    return "reference"


def keep_shape(I: tuple[int, ...], R: tuple[int, ...]) -> tuple[int, ...]:
    return tuple(1 if d in R else s for d, s in enumerate(I))


def drop_shape(I: tuple[int, ...], R: tuple[int, ...]) -> tuple[int, ...]:
    return tuple(s for d, s in enumerate(I) if d not in R)


class Group:
    """A launch being formed: members in topological order and, for kernels, the domain."""

    def __init__(self, gid: int, kind: str, I: tuple[int, ...], R: tuple[int, ...] | None = None):
        self.id = gid
        self.kind = kind
        self.I = I
        self.R = R
        self.members: list[Node] = []
        self.role: dict[Node, str] = {}          # member -> "full" | "reduced"
        self.after_reduce: set[Node] = set()     # full members that depend on a reduced member
        self.revisits = False                   # some full value depends on a reduced one
        self.reads: set[Node] = set()            # external values read (incl. via inlined)
        self.stored: set[Node] = set()           # members that are roots or read by placed nodes
                                                # of other groups (kept up to date as nodes land)
        self.open: set[Node] = set()             # members that may still be stored: roots and those
                                                # with a user outside the group, placed or not (the
                                                # cap check counts these, so later readers never
                                                # push a launch over the cap)
        # Group sets are bitsets (Python ints, bit k = group k), so the unions and tests that run
        # per node cost a few machine words per 64 groups, not a Python loop over groups.
        self.deps = 0                           # groups this one depends on (transitive)
        self.alias = 1 << gid                   # this group and every group merged into it
        self.has_users = False                  # some group depends on this one


class Fuser:
    def __init__(self, roots: list[Node], max_buffers: int = MAX_BUFFERS, library_bias: bool = False):
        self.roots = roots
        self.max_buffers = max_buffers
        self.library_bias = library_bias
        self.refusals: list[tuple[Node, Node, str]] = []    # (node, a member of the group it did not join, why)
        self.order, self.users, self._pos = order_and_users(roots)
        self.root_set = set(roots)
        self.group_of: dict[Node, Group] = {}
        self.groups: list[Group] = []
        self.read_by: dict[Node, int] = {}           # value -> bitset of the groups that read it
                                                    # (try_sibling; merged groups' bits stay set)
        self.params: dict[int, Node] = {}           # slot -> the graph's param of it (bound_inlining)
        self._inlined: dict[Node, bool] = {n: True for n in broadcast_operands(self.order, self.users,
                                                                                  self.root_set)}
        self.bound_inlining()

    # ---- classification ----
    def inlined(self, n: Node) -> bool:
        """Copied into each reading kernel: views, fills, constants, pointwise scalar values of
        inputs only (a scalar argument's cast) and broadcast operands (see broadcast_operands)."""
        got = self._inlined.get(n)
        if got is None:
            got = n not in self.root_set and (n.op in INLINED or (
                n.shape == () and is_pointwise(n.op) and n.inputs and
                all(i.op == "param" or self.inlined(i) for i in n.inputs)))
            self._inlined[n] = got
        return got

    def bound_inlining(self) -> None:
        """Keep every node's reads under the cap (see the module docstring), in program order."""
        limit = max(1, (self.max_buffers - 1) // 2)
        reach: dict[Node, set[Node]] = {}          # inlined node -> the stored values it reads

        def reads_of(n: Node) -> set[Node]:
            out: set[Node] = set()
            for i in n.inputs:
                got = reach.get(i)
                if got is None:
                    out.add(i)
                else:
                    out |= got
            return out

        inlined, cap = self._inlined, self.max_buffers
        for n in self.order:
            op = n.op
            if op == "param":
                inlined[n] = False                # (after this loop every node has its entry)
                self.params[n.attrs["slot"]] = n
                continue
            got = inlined.get(n)
            if got is None:
                if op not in INLINED and n.shape != ():
                    got = inlined[n] = False      # (what `inlined` says of it: the common case)
                else:
                    got = self.inlined(n)
            if got:
                r = reads_of(n)
                if len(r) > limit and n.op not in INLINED:
                    self._inlined[n] = False      # stored once instead of copied everywhere
                else:
                    reach[n] = r
                continue
            size = 0                                   # at least len(reads_of(n)): most nodes
            for i in n.inputs:                         # need no set built to pass the cap test
                got = reach.get(i)
                size += 1 if got is None else len(got)
            if size + 1 <= cap:
                continue
            r = reads_of(n)
            while len(r) + 1 > self.max_buffers:
                big = [i for i in n.inputs if i in reach and i.op not in INLINED]
                if not big:
                    break                              # make_launch reports what cannot fit
                widest = max(big, key=lambda i: len(reach[i]))
                self._inlined[widest] = False
                del reach[widest]
                r = reads_of(n)

    def refuse(self, option: list["Group"], n: Node, reason: str) -> bool:
        """Record why n did not join the groups of `option` (for LAZYTORCH_DUMP=fusion); False."""
        self.refusals.append((n, option[0].members[0], reason))
        return False

    def sources(self, n: Node) -> tuple[list[Node], list[Node]]:
        """(direct computed inputs, values read through inlined inputs) of a node."""
        inlined = self._inlined                 # (complete after bound_inlining)
        ins = n.inputs
        for i in ins:
            if inlined[i]:
                break
        else:
            return list(ins[::-1]), []          # (no inlined input: the common case; the order
        direct, through = [], []                #  is the general walk's, which pops from the end)
        stack = list(ins)
        while stack:
            i = stack.pop()
            if inlined[i]:
                for j in i.inputs:
                    (stack.append(j) if inlined[j] else through.append(j))
            else:
                direct.append(i)
        return direct, through

    # ---- main loop ----
    def run(self) -> list[Group]:
        inlined = self._inlined
        for n in self.order:
            if n.op == "param" or inlined[n]:
                continue
            kind = _KIND.get(n.op) or launch_kind(n.op)
            direct, through = self.sources(n)
            if kind == "kernel" and n.op not in INLINED:
                if self.try_extend(n, direct, through):
                    continue
                if self.try_library_bias(n, direct, through):
                    continue
                if self.try_join(n, direct, through) or self.try_sibling(n, direct, through):
                    continue
            self.start(n, kind, direct, through)
        return self.groups

    def start(self, n: Node, kind: str, direct: list[Node], through: list[Node]) -> Group:
        if n.op in REDUCTIONS:
            g = Group(len(self.groups), kind, tuple(n.inputs[0].shape), tuple(n.attrs["dim"]))
        else:
            g = Group(len(self.groups), kind, tuple(n.shape), None)
        self.groups.append(g)
        self.add(g, n, direct, through, role="reduced" if n.op in REDUCTIONS else "full")
        return g

    def add(self, g: Group, n: Node, direct: list[Node], through: list[Node], role: str) -> None:
        g.members.append(n)
        g.role[n] = role
        self.group_of[n] = g
        for i in n.inputs:
            src = self.group_of.get(i)
            if src is g:                        # (g.open holds members of g only)
                if i in g.open and i not in self.root_set and self.all_users_in(i, g):
                    g.open.discard(i)
            elif src is not None:
                src.stored.add(i)
        g.open.add(n)
        if n in self.root_set:
            g.stored.add(n)
        new = 0
        for i in direct + through:
            src = self.group_of.get(i)
            if src is not g:
                if i not in g.reads:
                    g.reads.add(i)
                    self.read_by[i] = self.read_by.get(i, 0) | 1 << g.id
                if src is not None:
                    new |= (src.alias | src.deps) & ~g.deps
                    src.has_users = True
        if new:
            g.deps |= new
            if g.has_users:
                self.propagate(g)

    def propagate(self, g: Group) -> None:
        """Keep deps transitive: whoever depends on g depends on what g now depends on."""
        for h in self.groups:
            if h is not g and h.deps & g.alias:
                h.deps |= g.deps | g.alias

    # ---- joining ----
    def try_join(self, n: Node, direct: list[Node], through: list[Node]) -> bool:
        cands = []
        for i in direct:
            g = self.group_of.get(i)
            if g is not None and g.kind == "kernel" and g not in cands:
                cands.append(g)
        if through:
            forbidden = {self.group_of[i].id for i in through if i in self.group_of}
            for g in cands:
                if g.id in forbidden:
                    self.refuse([g], n, "a view or broadcast input reads a value of the group itself "
                                "(it must read a stored buffer)")
            cands = [g for g in cands if g.id not in forbidden]
        if not cands:
            return False
        # first all candidate groups merged, then each alone (largest first)
        if len(cands) == 1:
            options = [cands]
        else:
            options = [cands] + [[g] for g in sorted(cands, key=lambda g: -len(g.members))]
        for option in options:
            if not self.acyclic(option, direct, through):
                self.refuse(option, n, "cycle between launches (a group in between reads one and feeds the other)")
            elif self.merge_and_add(option, n, direct, through):
                return True
        return False

    def try_extend(self, n: Node, direct: list[Node], through: list[Node]) -> bool:
        """The common step decided without the general machinery: a pointwise node whose computed
        inputs lie in one pointwise group (the rest ungrouped: params, Python scalars) joins it
        when the shapes match and the buffers fit.  It does what try_join and merge_and_add would
        do for it; anything else, refusals included, goes the general way (False)."""
        if n.op in REDUCTIONS:
            return False
        group_of = self.group_of
        g = None
        for i in direct:
            s = group_of.get(i)
            if s is not None and s is not g:
                if g is not None:
                    return False
                g = s
        if g is None or g.kind != "kernel" or g.R is not None or n.shape != g.I \
                or len(g.members) >= MAX_GROUP_NODES:
            return False
        role, reads, still_open, users, roots = g.role, g.reads, g.open, self.users, self.root_set
        fresh: set[Node] = set()
        closing: set[Node] = set()                 # members whose last reader outside is n
        for i in direct:
            if i in role:
                if i in still_open and i not in roots and i not in closing:
                    for u in users[i]:
                        if u is not n and group_of.get(u) is not g:
                            break
                    else:
                        closing.add(i)
            elif i not in reads:
                fresh.add(i)
        for i in through:
            if i in group_of:                     # (a view of a member, or another group's value)
                return False
            if i not in reads:
                fresh.add(i)
        if len(reads) + len(fresh) + len(still_open) - len(closing) + 1 > self.max_buffers:
            return False
        read_by, bit = self.read_by, 1 << g.id
        for i in fresh:
            read_by[i] = read_by.get(i, 0) | bit
        reads |= fresh
        still_open -= closing
        g.members.append(n)
        role[n] = "full"
        group_of[n] = g
        still_open.add(n)
        if n in roots:
            g.stored.add(n)
        return True

    def try_library_bias(self, n: Node, direct: list[Node], through: list[Node]) -> bool:
        """`matmul(a, b) + bias` with a row bias (shape (N,), or with leading 1s) of the same dtype
        joins the matmul's library launch (one addmm) on backends that ask for it.  The matmul's
        only reader must be this add, so its launch still writes one value, and the bias must be a
        stored buffer (or a view of one), which the GEMM reads as its C operand."""
        if not self.library_bias or n.op != "add" or len(n.inputs) != 2:
            return False
        for mm, bias in (n.inputs, n.inputs[::-1]):
            g = self.group_of.get(mm)
            if (g is not None and g.kind == "library" and g.members == [mm] and mm.op == "matmul"
                    and mm not in self.root_set and len(self.users[mm]) == 1
                    and row_bias(bias, mm) and n.dtype is mm.dtype and bias.dtype is mm.dtype
                    and tuple(n.shape) == tuple(mm.shape)
                    and (not self.inlined(bias) or (bias.op == "view" and not self.inlined(bias.inputs[0])))):
                self.add(g, n, direct, through, role="full")
                return True
        return False

    def try_sibling(self, n: Node, direct: list[Node], through: list[Node]) -> bool:
        """Join a kernel group that reads the same values over the same domain (horizontal fusion:
        several outputs computed from shared inputs come out of one kernel)."""
        inputs = direct + through
        # a group that one of n's source groups depends on can never pass `acyclic`: leaving
        # those out up front, and trying the latest group first until one takes n, keeps this
        # step short when a value is read all along a long chain (every group reads it)
        upstream = 0
        for i in inputs:
            src = self.group_of.get(i)
            if src is not None:
                upstream |= src.deps
        masks = [(i, self.read_by.get(i, 0) & ~upstream) for i in inputs]
        todo = 0
        for _, m in masks:
            todo |= m
        tries = SIBLING_TRIES
        while todo and tries:
            gid = todo.bit_length() - 1
            todo ^= 1 << gid
            g = self.groups[gid]
            if g.kind != "kernel" or not any(m >> gid & 1 and i in g.reads for i, m in masks):
                continue
            if self.acyclic([g], direct, through):
                if self.merge_and_add([g], n, direct, through):
                    return True
                tries -= 1
        return False

    def acyclic(self, option: list[Group], direct: list[Node], through: list[Node]) -> bool:
        """Merging `option` (plus n) must not put a group both before and after the result.

        The graph of groups is acyclic before the merge, so a new cycle needs a new edge: one
        from n to a group outside `option` that depends on `option`, or, when several groups
        merge, an old edge from one of them to an outside group that depends on another.
        """
        ids = 0
        for g in option:
            ids |= g.alias
        for i in direct + through:
            src = self.group_of.get(i)
            if src is not None and not src.alias & ids and src.deps & ids:
                return False
        if len(option) == 1:
            return True
        outside = 0
        for g in option:
            outside |= g.deps
        if not outside & ids:
            # no group of the option depends on another: as deps are transitive, no group can
            # sit between two of them (the common case, decided without a walk over deps)
            return True
        return not any(self.groups[h].deps & ids for h in bits(outside & ~ids))

    def merge_and_add(self, option: list[Group], n: Node, direct: list[Node], through: list[Node]) -> bool:
        single = len(option) == 1               # the common case: nothing is copied for it
        if (len(option[0].members) if single else sum(len(g.members) for g in option)) >= MAX_GROUP_NODES:
            return self.refuse(option, n, f"would exceed {MAX_GROUP_NODES} nodes in one kernel")
        first = option[0]
        for g in option[1:]:
            if g.I != first.I:
                return self.refuse(option, n, f"groups iterate different shapes {list(first.I)} and {list(g.I)}")
            if g.R is not None and first.R is not None and g.R != first.R:
                return self.refuse(option, n, f"reduction over different dims {list(first.R)} and {list(g.R)}")
        I = first.I
        R = first.R if single else next((g.R for g in option if g.R is not None), None)
        # a group's members are the keys of its role map
        role = first.role if single else {k: v for g in option for k, v in g.role.items()}
        members = role
        in_group = [i for i in direct if i in members]
        if through and any(i in members for i in through):
            return self.refuse(option, n, "a view or broadcast input reads a value of the group itself "
                               "(it must read a stored buffer)")
        revisits = first.revisits if single else any(g.revisits for g in option)
        after = first.after_reduce if single else set().union(*(g.after_reduce for g in option))
        n_after = False                         # n is full and depends on a reduced member
        if n.op in REDUCTIONS:
            x = n.inputs[0]
            dims = tuple(n.attrs["dim"])
            if tuple(x.shape) != I:
                return self.refuse(option, n, f"reduction input shape {list(x.shape)} is not the group's "
                                   f"domain {list(I)}")
            if R is not None and dims != R:
                return self.refuse(option, n, f"reduction over different dims {list(dims)} and {list(R)}")
            if x in members and role[x] != "full":
                return self.refuse(option, n, "reduces a value that is already reduced in the group")
            R = dims
            my_role = "reduced"
            if x in after:
                revisits = True
        else:
            roles = [role[i] for i in in_group]
            reduced_form = R is not None and tuple(n.shape) in (keep_shape(I, R), drop_shape(I, R))
            my_role = "reduced" if roles and all(r == "reduced" for r in roles) and reduced_form else "full"
            if my_role == "full":
                if tuple(n.shape) != I:
                    return self.refuse(option, n, f"shape {list(n.shape)} is not the group's domain {list(I)}")
                for i in in_group:
                    if role[i] == "reduced":
                        pad = (1,) * (len(I) - i.ndim) + tuple(i.shape)
                        if pad != keep_shape(I, R):
                            return self.refuse(option, n, "reads a reduced value without its kept dims")
                        revisits = True
                n_after = any(role[i] == "reduced" or i in after for i in in_group)
        if revisits and R is not None and math.prod(I[d] for d in R) > ROW_LIMIT:
            return self.refuse(option, n, f"row of {math.prod(I[d] for d in R)} elements exceeds the row limit "
                               f"{ROW_LIMIT}")
        if single:                              # (a group's reads never hold its members)
            reads = first.reads
            fresh = {i for i in direct + through if i not in members and i not in reads}
        else:
            reads = {r for g in option for r in g.reads if r not in members}
            fresh = {i for i in direct + through if i not in members} - reads
        still_open = first.open if single else set().union(*(g.open for g in option))
        closing = {i for i in in_group if i in still_open and i not in self.root_set and all(
            u is n or self.group_of.get(u) in option for u in self.users[i])}
        writes = len(still_open) - len(closing)
        if len(reads) + len(fresh) + writes + 1 > self.max_buffers:
            return self.refuse(option, n, f"would exceed {self.max_buffers} buffers "
                               f"({len(reads) + len(fresh)} reads + {writes + 1} writes)")
        reads |= fresh
        # commit
        merged = 0
        for g in option[1:]:
            for m in g.members:
                self.group_of[m] = first
            first.members = sorted(first.members + g.members, key=self.position)
            first.deps |= g.deps
            first.alias |= g.alias
            merged |= g.alias
            g.members = []
            g.kind = "merged"
        first.deps &= ~first.alias
        if merged:
            for g in option[1:]:
                for r in g.reads:
                    self.read_by[r] = self.read_by.get(r, 0) | 1 << first.id
            first.has_users = True
            self.propagate(first)
            first.stored = {m for m in first.members if m in self.root_set or any(
                self.group_of.get(u, first) is not first for u in self.users[m])}
            first.open = still_open
        if n_after:
            after.add(n)
        first.R, first.role, first.after_reduce, first.revisits = R, role, after, revisits
        first.reads = reads
        self.add(first, n, direct, through, my_role)
        first.reads.discard(n)              # (reads never holds members: n is the new one)
        return True

    def all_users_in(self, i: Node, g: Group) -> bool:
        group_of = self.group_of
        return all(group_of.get(u) is g for u in self.users[i])

    def position(self, n: Node) -> int:
        return self._pos[n]


def order_and_users(roots: list[Node]) -> tuple[list[Node], dict[Node, list[Node]], dict[Node, int]]:
    """(toposort(roots), consumers of that order, node -> its position), in one walk: the order
    is ir/graph.py's (leaves placed as they are met), and each node's readers are listed in it."""
    order: list[Node] = []
    users: dict[Node, list[Node]] = {}
    pos: dict[Node, int] = {}
    for root in roots:
        if root in users:
            continue
        stack = [(root, iter(root.inputs))]          # (node, its inputs not yet looked at)
        while stack:
            node, rest = stack[-1]
            for child in rest:
                if child not in users:
                    if child.inputs:
                        stack.append((child, iter(child.inputs)))
                        break
                    users[child] = []                # a leaf: placed at once
                    pos[child] = len(order)
                    order.append(child)
            else:
                stack.pop()
                if node not in users:
                    users[node] = []
                    pos[node] = len(order)
                    order.append(node)
                    for i in node.inputs:            # (placed already: a node comes after its inputs)
                        users[i].append(node)
    return order, users, pos


def row_bias(bias: Node, mm: Node) -> bool:
    """A bias added to every row of a product: shape (N,) after leading 1s, N the product's columns."""
    shape = tuple(bias.shape)
    while shape and shape[0] == 1 and len(shape) > 1:
        shape = shape[1:]
    return mm.ndim >= 2 and shape == (mm.shape[-1],)


def broadcast_operands(order: list[Node], users: dict[Node, list[Node]], root_set: set[Node]) -> list[Node]:
    """Pointwise values of params only that every reader reads at another shape (say a bias
    computed as b.exp() * 0.5): recomputing them per element costs less than a launch and a store."""
    from_params: set[Node] = set()
    candidates: list[Node] = []             # computed values of params only, in program order
    pointwise = _POINTWISE
    for n in order:
        op = n.op
        if op == "param" or (op in INLINED and all(i in from_params for i in n.inputs)):
            from_params.add(n)          # (a view of a computed value is not: a pointwise chain on
            continue                    #  a product's output ran inside a host cat, on numpy)
        for i in n.inputs:              # (a loop, not all(): most nodes fail at their first input)
            if i not in from_params:
                break
        else:
            if n.inputs and (pointwise[op] if op in pointwise else is_pointwise(op)):
                from_params.add(n)
                if n not in root_set and n.shape != ():
                    candidates.append(n)    # (0-d values: one small launch beats recomputing, say,
                                            #  Adam's pow per element)
    chosen: set[Node] = set()
    for n in reversed(candidates):
        readers = users[n]   # a view must read a stored buffer, so its input is never inlined
        shape = n.shape
        for u in readers:        # (a loop, not all(): a chain's values fail at their first reader)
            if u.op == "view" or (u.shape == shape and u not in chosen):
                break
        else:
            if readers:
                chosen.add(n)
    return [n for n in candidates if n in chosen]


# ---------------------------------------------------------------- building the plan

def build_plan(params: list[Node], roots: list[Node], max_buffers: int = MAX_BUFFERS,
               library_bias: bool = False) -> KernelPlan:
    """Fuse the final graph into launches and assign buffers (see passes/plan.py); `max_buffers`
    is the backend's cap on the reads + writes of one kernel launch, `library_bias` whether its
    GEMM adds a row bias (see try_library_bias)."""
    fuser = Fuser(roots, max_buffers, library_bias)
    fuser.run()
    merge_independent(fuser, MAX_GROUP_NODES)
    groups = [g for g in fuser.groups if g.kind != "merged"]
    buffers: list[BufferRef] = []
    by_node: dict[Node, BufferRef] = {}

    def new_buffer(node: Node, kind: str, slot: int | None) -> BufferRef:
        b = BufferRef(len(buffers), tuple(node.shape), node.dtype, kind, slot)
        buffers.append(b)
        return b

    # the graph's own param of each slot: legalize may have retyped a Python scalar's param
    # (passes/legalize.py), and the buffer takes the type the kernels read
    in_graph = fuser.params
    param_refs = []
    for p in params:
        slot = p.attrs["slot"]
        p = in_graph.get(slot, p)
        b = BufferRef(len(buffers), tuple(p.shape), p.dtype, "param", slot)     # (new_buffer, inlined:
        buffers.append(b)                                                       #  one per Python scalar)
        by_node[p] = b
        param_refs.append(b)
    for slot, r in enumerate(roots):
        if r not in by_node:
            by_node[r] = new_buffer(r, "output", slot)
    outputs = [by_node[r] for r in roots]

    # a member is stored when it is a root or some node outside its group reads it
    group_of, users, root_set = fuser.group_of, fuser.users, fuser.root_set
    launches = []
    launch_of: dict[int, str] = {}
    for k, g in enumerate(toposort_groups(groups, fuser)):
        nodes = inlined_closure(g, fuser)
        reads, seen = [], set(nodes)        # (seen: the group's nodes and its reads)
        for n in nodes:
            for i in n.inputs:
                if i not in seen:
                    seen.add(i)
                    b = by_node.get(i)
                    if b is None:
                        b = by_node[i] = new_buffer(i, "temp", None)
                    reads.append((i, b))
        writes = []
        for m in g.members:
            if m not in root_set:
                for u in users[m]:
                    if group_of.get(u) is not g:
                        break
                else:
                    continue                    # (every reader is in the group: not stored)
            if m not in by_node:
                by_node[m] = new_buffer(m, "temp", None)
            writes.append((m, by_node[m]))
        launches.append(make_launch(k, g, tuple(nodes), tuple(reads), tuple(writes), max_buffers))
        launch_of[g.id] = launches[-1].name
    order = fuser.order
    scalars = frozenset(p.attrs["slot"] for p in params if p.attrs["kind"] == "scalar")
    refusals = [Refusal(n, launch_of.get(group_of[n].id, "?") if n in group_of else "inlined",
                        launch_of.get(group_of[m].id, "?"), why) for n, m, why in fuser.refusals]
    return KernelPlan(param_refs, buffers, launches, outputs, nodes=order, scalar_slots=scalars,
                      refusals=refusals)


def make_launch(k: int, g: Group, nodes, reads, writes, max_buffers: int = MAX_BUFFERS) -> Launch:
    if g.kind != "kernel":
        name = g.members[0].op                  # a library launch is named for its matmul
        return Launch(g.kind, f"{g.kind[:3]}{k}_{name}", nodes, reads, writes, g.kind)
    R = g.R if g.R is not None else ()
    if g.R is None:
        pattern = "pointwise"
    elif any(g.role[n] == "full" for n, _ in writes):
        pattern = "row"
    else:
        pattern = "reduce"
    if len(reads) + len(writes) > max_buffers:
        raise AssertionError(f"fusion: launch k{k} uses {len(reads) + len(writes)} buffers (cap {max_buffers})")
    return Launch("kernel", f"k{k}_{pattern}", nodes, reads, writes, pattern, tuple(g.I), tuple(R))


def inlined_closure(g: Group, fuser: Fuser) -> list[Node]:
    """The group's members plus the inlined nodes (views, fills) they read, topologically."""
    extra: dict[Node, Node] = {}
    inlined = fuser._inlined                # (complete after bound_inlining: every node has its entry)
    stack = [i for m in g.members for i in m.inputs]
    while stack:
        i = stack.pop()
        if inlined[i] and i not in extra:
            extra[i] = i
            stack.extend(i.inputs)
    if not extra:
        return list(g.members)              # (members are kept in program order)
    return sorted(list(extra.values()) + g.members, key=fuser.position)


def toposort_groups(groups: list[Group], fuser: Fuser) -> list[Group]:
    """Groups in an order where every group runs after those it reads (ties: program order)."""
    first = {g.id: fuser.position(g.members[0]) for g in groups}     # (members are in program order)
    pending = sorted(groups, key=lambda g: first[g.id])
    taken = [False] * len(pending)
    done = 0                                   # bitset of the groups emitted (with their aliases)
    out: list[Group] = []
    start = 0                                  # pending[:start] are all taken
    while len(out) < len(pending):
        while taken[start]:
            start += 1
        for k in range(start, len(pending)):
            g = pending[k]
            if not taken[k] and not g.deps & ~(done | g.alias):
                out.append(g)
                done |= g.alias
                taken[k] = True
                break
        else:
            raise AssertionError("fusion produced a cycle between launches")
    return out

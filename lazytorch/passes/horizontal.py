"""Horizontal fusion: independent kernel groups over the same domain become one launch.

The main fusion loop (passes/fuse.py) joins a node to the groups of the values it reads, or to a
sibling reading the same values.  Groups that share neither stay apart even when they iterate the
same domain: the squared sums of two same-shaped gradients (a clipped norm), the update of two
same-shaped parameters by an optimizer, the bias gradients of two layers.  A training step has
dozens of those.  After the loop, `merge_independent` merges such groups: same shape I, same
reduced dims R (both None: pointwise), neither depending on the other, and the union still one
valid launch (the backend's buffer cap, the node cap, no cycle through a third group).  A merged
kernel computes each member exactly as before, so values are bit-identical; it only saves
launches (and, on GPUs, re-reads of shared scalars).
"""
from __future__ import annotations

from typing import Any

# The fusion state this module works on: passes/fuse.py's Fuser and its Groups (fuse.py imports
# this module, so they are not imported here).
Fuser = Any
Group = Any


def merge_independent(fuser: Fuser, max_nodes: int) -> int:
    """Merge independent same-domain kernel groups of `fuser` in place; returns the merges done."""
    buckets: dict[tuple, list[Group]] = {}
    for g in fuser.groups:
        if g.kind == "kernel" and g.members:
            buckets.setdefault((g.I, g.R), []).append(g)
    merges = 0
    writes: dict[int, int] = {}            # group id -> values its launch stores
    for groups in buckets.values():
        if len(groups) < 2:
            continue
        open_: list[Group] = []            # merged groups of this domain still taking members
        for g in groups:
            # the latest few targets only: bounds the work on programs with thousands of groups
            for target in reversed(open_[-RECENT:]):
                if _can_merge(fuser, target, g, max_nodes, writes):
                    _merge(fuser, target, g)
                    writes[target.id] += writes.pop(g.id)      # independent: no write becomes internal
                    merges += 1
                    break
            else:
                open_.append(g)
    return merges


RECENT = 16     # open groups of one domain a group tries to join


def _writes(fuser: Fuser, g: Group) -> int:
    """How many members of g its launch stores: roots and values read outside g."""
    group_of = fuser.group_of
    return sum(1 for m in g.members
               if m in fuser.root_set or any(group_of.get(u) is not g for u in fuser.users[m]))


def _can_merge(fuser: Fuser, a: Group, b: Group, max_nodes: int, writes: dict[int, int]) -> bool:
    if a.deps & b.alias or b.deps & a.alias:
        return False                                  # one reads the other: not horizontal
    if len(a.members) + len(b.members) > max_nodes:
        return False
    ids = a.alias | b.alias
    outside = (a.deps | b.deps) & ~ids
    # (deps are transitive, so with a and b independent no group can sit between them: the walk
    # over their deps, linear in the groups, only runs if one of them names a or b)
    if (a.deps | b.deps) & ids and any(fuser.groups[h].deps & ids for h in bits(outside)):
        return False                                  # a third group sits between them
    for g in (a, b):
        if g.id not in writes:
            writes[g.id] = _writes(fuser, g)
    return len(a.reads | b.reads) + writes[a.id] + writes[b.id] <= fuser.max_buffers


def _merge(fuser: Fuser, a: Group, b: Group) -> None:
    for m in b.members:
        fuser.group_of[m] = a
    a.members = sorted(a.members + b.members, key=fuser.position)
    a.role.update(b.role)
    a.after_reduce |= b.after_reduce
    a.revisits = a.revisits or b.revisits
    a.reads |= b.reads
    a.stored |= b.stored
    a.open |= b.open
    a.deps = (a.deps | b.deps) & ~(a.alias | b.alias)
    a.alias |= b.alias
    users = a.has_users or b.has_users
    a.has_users = users
    b.members = []
    b.kind = "merged"
    if users:                    # (nothing depends on either: no dependency sets to update)
        fuser.propagate(a)


def bits(mask: int):
    """The group ids set in a bitset."""
    while mask:
        low = mask & -mask
        yield low.bit_length() - 1
        mask ^= low

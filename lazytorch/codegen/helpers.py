"""A target's helper library (its rendered preamble) cut to the helpers a kernel calls.

The preamble is split into top-level units (a function, a typedef, a global, a preprocessor line
with the comments above it).  A unit that defines `lt_*` names is kept only when a kernel calls
one of them, or a kept unit does; units defining nothing (includes, libm declarations) are kept.
The renderer reports which helpers it wrote (Rendered.helpers), so nothing re-reads kernel source.
"""
from __future__ import annotations

import re
from dataclasses import dataclass

_NAME = re.compile(r"\blt_\w+")
_DEFINED = re.compile(r"\b(lt_\w+)\s*(?:\(|=|;)")


@dataclass(frozen=True)
class _Unit:
    text: str
    defines: frozenset[str]
    uses: frozenset[str]


def _split(text: str) -> list[str]:
    units, cur, depth = [], [], 0
    for line in text.splitlines(keepends=True):
        s = line.strip()
        if depth == 0 and s.startswith("#") and not any(c.strip() and not c.strip().startswith(("//", "/*", "*"))
                                                        for c in cur):
            units.append("".join(cur) + line)     # a preprocessor line (and the comments above it)
            cur = []
            continue
        cur.append(line)
        depth += line.count("{") - line.count("}")
        if depth == 0 and s.endswith(("}", ";")) and not s.startswith(("//", "*", "/*")):
            units.append("".join(cur))
            cur = []
    if cur:
        units.append("".join(cur))
    return units


def _unit(text: str) -> _Unit:
    code = [ln for ln in text.splitlines() if ln.strip() and not ln.strip().startswith(("//", "/*", "*"))]
    defines: set[str] = set()
    if code and not code[0].lstrip().startswith("#"):
        head = code[0] if not code[0].lstrip().startswith("typedef") else code[-1]
        m = _DEFINED.search(head) if not code[0].lstrip().startswith("typedef") else None
        if m:
            defines.add(m.group(1))
        elif code[0].lstrip().startswith("typedef"):
            defines.update(_NAME.findall(head.split("}")[-1]))
    return _Unit(text, frozenset(defines), frozenset(_NAME.findall(text)) - defines)


class HelperLibrary:
    """The units of one rendered preamble, selectable by the helper names a kernel calls."""

    def __init__(self, text: str):
        self.units = [_unit(t) for t in _split(text)]
        self.names = frozenset(n for u in self.units for n in u.defines)

    def header(self, used: set[str] | frozenset[str]) -> str:
        """The preamble with only the units `used` needs (and what those need), in order."""
        want, todo = set(), [n for n in used if n in self.names]
        while todo:
            name = todo.pop()
            if name in want:
                continue
            want.add(name)
            for u in self.units:
                if name in u.defines:
                    todo.extend(n for n in u.uses if n in self.names and n not in want)
        return "".join(u.text for u in self.units if not u.defines or u.defines & want)

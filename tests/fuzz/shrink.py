"""Shrink a failing program to a small one that fails the same way.

Greedy passes, repeated until none helps: cut the program after each step, bypass a step (its
users read one of its operands instead), drop dead steps and unused inputs, shrink input shapes,
simplify input dtypes and drop special values.  A candidate is kept when its verdict has the same
kind as the original (e.g. still "values differ", still "no-error").
"""
from __future__ import annotations

import re
from typing import Callable

from .program import Input, Program, Step

_NAME = re.compile(r"\bv(\d+)\b")
SIMPLER_DTYPES = ("float32", "int64", "bool")     # a dtype is only ever replaced by an earlier one


def _rank(dtype: str) -> int:
    return SIMPLER_DTYPES.index(dtype) if dtype in SIMPLER_DTYPES else len(SIMPLER_DTYPES)


def kind(verdict: str | None) -> str | None:
    """The class of a verdict: 'values', 'shape', 'dtype', 'no-error', 'lt-error', 'unclear-error'."""
    if verdict is None:
        return None
    if verdict.startswith("output"):
        return verdict.split(": ", 1)[1].split()[0]
    return verdict.split()[0].rstrip(":")


def rename(program: Program, mapping: dict[int, int]) -> Program:
    """Rename values (old index -> new index) in every step and output."""
    def sub(expr: str) -> str:
        return _NAME.sub(lambda m: f"v{mapping.get(int(m.group(1)), int(m.group(1)))}", expr)
    steps = tuple(Step(sub(s.expr), tuple(mapping.get(r, r) for r in s.refs)) for s in program.steps)
    return program.with_(steps=steps, outputs=tuple(mapping.get(o, o) for o in program.outputs))


def drop_value(program: Program, x: int, replacement: int | None = None) -> Program:
    """Remove value x (an input or a step); its users read `replacement` instead."""
    if replacement is not None:
        program = rename(program, {x: replacement})
    n_in = len(program.inputs)
    inputs = tuple(inp for i, inp in enumerate(program.inputs) if i != x)
    steps = tuple(s for k, s in enumerate(program.steps) if n_in + k != x)
    shifted = Program(inputs, steps, program.outputs)
    return rename(shifted, {i: i - 1 for i in range(x + 1, program.n_values)})


def dead_code(program: Program) -> Program:
    """Drop steps and inputs no output depends on."""
    n_in = len(program.inputs)
    live = set(program.outputs)
    for k in range(len(program.steps) - 1, -1, -1):
        if n_in + k in live:
            live.update(program.steps[k].refs)
    for x in range(program.n_values - 1, -1, -1):
        if x not in live and (x >= n_in or len(program.inputs) > 1):
            program = drop_value(program, x)
    return program


def candidates(program: Program):
    """Smaller variants of program, most aggressive first."""
    n_in = len(program.inputs)
    if len(program.outputs) > 1:
        for o in program.outputs:
            yield dead_code(program.with_(outputs=(o,)))
    for k in range(len(program.steps) - 1):
        yield dead_code(program.with_(steps=program.steps[:k + 1], outputs=(n_in + k,)))
    for k, step in enumerate(program.steps):
        for r in step.refs:
            yield dead_code(drop_value(program, n_in + k, r))
    for i, inp in enumerate(program.inputs):
        for shape in _smaller_shapes(inp.shape):
            yield _with_input(program, i, Input(shape, inp.dtype, inp.seed, inp.specials))
        for dtype in SIMPLER_DTYPES:
            if SIMPLER_DTYPES.index(dtype) < _rank(inp.dtype):
                yield _with_input(program, i, Input(inp.shape, dtype, inp.seed, inp.specials))
        if inp.specials:
            yield _with_input(program, i, Input(inp.shape, inp.dtype, inp.seed, False))


def _smaller_shapes(shape: tuple[int, ...]):
    if shape:
        yield shape[1:]
    for d, s in enumerate(shape):
        for smaller in sorted({1, s // 2, s - 1}):
            if 0 < smaller < s:
                yield shape[:d] + (smaller,) + shape[d + 1:]


def _with_input(program: Program, i: int, inp: Input) -> Program:
    inputs = list(program.inputs)
    inputs[i] = inp
    return program.with_(inputs=tuple(inputs))


def size(program: Program) -> tuple:
    numel = sum(_numel(i.shape) + len(i.shape) for i in program.inputs)
    return (len(program.steps), len(program.inputs), numel)


def _numel(shape) -> int:
    n = 1
    for s in shape:
        n *= s
    return n


def shrink(program: Program, judge: Callable[[Program], str | None], budget: int = 300) -> Program:
    """The smallest program found (within `budget` judge calls) whose verdict kind matches."""
    target = kind(judge(program))
    if target is None:
        return program
    tried = 0
    improved = True
    while improved and tried < budget:
        improved = False
        for cand in candidates(program):
            if size(cand) >= size(program) and cand.inputs == program.inputs:
                continue
            tried += 1
            if tried > budget:
                break
            try:
                ok = kind(judge(cand)) == target
            except Exception:  # noqa: BLE001  (a candidate the judge cannot even run is no repro)
                ok = False
            if ok:
                program, improved = cand, True
                break
    return program

"""Checking many small programs against torch at the price of one compile per backend.

`check_batch(cases)` runs every case's function with torch and with lazytorch, evaluates all the
lazytorch results together with one `lt.eval` (one program: one C translation unit on `cpu`), then
compares each with oracle.assert_same.  On the backends without float64 (Metal and its
emulator) cases reading or producing float64 are left out of the batch: `oracle.check` already
asserts that such programs are refused.  Suites of many op options use it to stay fast.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable

import torch

import lazytorch as lt
from oracle import NO_FLOAT64_BACKENDS, Sample, _run, _uses_float64, assert_same


CHUNK = 8         # cases per program: bounds program size (see the fusion buffer-cap note in docs/ops.md)


@dataclass
class Case:
    name: str
    fn: Callable
    args: tuple
    tol: dict = field(default_factory=dict)
    emu: bool = True          # also run on metal-emu (each kernel is a separate g++ compile there)


def _flat(x) -> list:
    return [t for v in x for t in _flat(v)] if isinstance(x, (tuple, list)) else [x]


def check_batch(cases: list[Case]) -> int:
    """Compare every case with torch; returns how many ran on the current backend."""
    backend = lt.get_backend()
    chosen = []
    for case in cases:
        want = _run(case.fn, torch, case.args)
        if backend in NO_FLOAT64_BACKENDS and (_uses_float64(case.args, want) or not case.emu):
            continue
        chosen.append((case, want, _run(case.fn, lt, case.args)))
    for start in range(0, len(chosen), CHUNK):
        lt.eval(*[t for _, _, got in chosen[start:start + CHUNK] for t in _flat(got) if isinstance(t, lt.Tensor)])
    for case, want, got in chosen:
        assert_same(got, want, what=case.name, **case.tol)
    return len(chosen)


__all__ = ["Case", "Sample", "check_batch"]

"""Run a fuzz program with torch and with lazytorch on one backend, and judge the difference.

Agreement means: torch succeeds and lazytorch builds and evaluates every output with the same
shape, dtype and values (exact for bool and integers, within TOLERANCE for floats, NaN where torch
has NaN); or torch raises and lazytorch raises a *clear* error (an exception type a user can act
on, with a message) when building or evaluating the program.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

import lazytorch as lt

from .program import Program, make_inputs

# dtype -> relative tolerance; absolute tolerance is this times the largest finite |value| (>= 1)
TOLERANCE = {"float64": 1e-6, "float32": 1e-4, "float16": 1e-2, "bfloat16": 4e-2}
# exception types a user can act on; anything else (KeyError, AssertionError, ...) is an internal bug
CLEAR_ERRORS = (RuntimeError, ValueError, TypeError, IndexError, NotImplementedError)


@dataclass
class Outcome:
    stage: str                      # "ok", "build" (raised while building) or "eval" (raised in eval)
    values: list | None = None      # torch tensors, or (dtype name, shape, numpy array) for lazytorch
    error: BaseException | None = None


def run_torch(program: Program) -> Outcome:
    try:
        with torch.no_grad():
            return Outcome("ok", list(program.function()(torch, *make_inputs(program, torch))))
    except Exception as e:  # noqa: BLE001  (any torch error is an expected outcome)
        return Outcome("build", error=e)


def build_lt(program: Program) -> Outcome:
    try:
        return Outcome("ok", list(program.function()(lt, *make_inputs(program, lt))))
    except Exception as e:  # noqa: BLE001
        return Outcome("build", error=e)


def finish_lt(built: Outcome) -> Outcome:
    """Evaluate a built program's outputs (already evaluated ones just convert)."""
    if built.stage != "ok":
        return built
    try:
        lt.eval(*[t for t in built.values if isinstance(t, lt.Tensor)])
        return Outcome("ok", [_lt_value(t) for t in built.values])
    except Exception as e:  # noqa: BLE001
        return Outcome("eval", error=e)


def run_lt(program: Program, backend: str) -> Outcome:
    previous = lt.get_backend()
    lt.set_backend(backend)
    try:
        return finish_lt(build_lt(program))
    finally:
        lt.set_backend(previous)


def _lt_value(t):
    if not isinstance(t, lt.Tensor):
        return t
    return (t.dtype.name, tuple(t.shape), np.asarray(t.numpy()))


# how each float dtype shows up in a program's source (casts) besides its inputs
_SPELLINGS = {"float16": ("float16", ".half()"), "bfloat16": ("bfloat16",), "float32": ("float32", ".float()"),
              "float64": ("float64", ".double()")}


def program_tolerance(program: Program) -> float:
    """The loosest tolerance of the float dtypes a program computes in: a float16 softmax cast to
    float64 is only as exact as float16 (one rounding differs by a float16 ulp)."""
    text = program.source()
    used = {i.dtype for i in program.inputs} | {d for d, names in _SPELLINGS.items()
                                                 if any(n in text for n in names)}
    return max((TOLERANCE[d] for d in used if d in TOLERANCE), default=0.0)


def verdict(want: Outcome, got: Outcome, floor: float = 0.0) -> str | None:
    """None when lazytorch agrees with torch, else a short description of the difference.  Float
    outputs are compared within their dtype's tolerance, or `floor` if looser."""
    if want.stage != "ok":
        if got.stage == "ok":
            return f"no-error: torch raised {type(want.error).__name__}: {_first_line(want.error)}"
        return _unclear(got.error)
    if got.stage != "ok":
        return f"lt-error ({got.stage}): {type(got.error).__name__}: {_first_line(got.error)}"
    for k, (w, g) in enumerate(zip(want.values, got.values)):
        why = _differs(w, g, floor)
        if why:
            return f"output {k}: {why}"
    return None


def _unclear(error: BaseException) -> str | None:
    if isinstance(error, CLEAR_ERRORS) and len(str(error)) >= 10:
        return None
    return f"unclear-error: {type(error).__name__}: {_first_line(error)}"


def _first_line(e: BaseException) -> str:
    text = str(e).strip().splitlines()
    return text[0][:200] if text else ""


def _differs(want, got, floor: float = 0.0) -> str | None:
    if not isinstance(want, torch.Tensor):
        return None if want == got else f"value {got!r} != {want!r}"
    if not isinstance(got, tuple):
        return f"expected a tensor, got {type(got).__name__}"
    dtype, shape, g = got
    w_dtype = str(want.dtype).removeprefix("torch.")
    if shape != tuple(want.shape):
        return f"shape {shape} != torch {tuple(want.shape)}"
    if dtype != w_dtype:
        return f"dtype {dtype} != torch {w_dtype}"
    w = (want.float() if want.dtype == torch.bfloat16 else want).numpy()
    if g.shape != w.shape:
        return f"numpy shape {g.shape} != {w.shape}"
    if dtype not in TOLERANCE:
        bad = g != w
    else:
        bad = _float_mismatch(g.astype(np.float64), w.astype(np.float64), max(TOLERANCE[dtype], floor))
    if bad.any():
        idx = tuple(int(i) for i in np.argwhere(bad)[0])
        return f"values differ at {idx}: lazytorch {g[idx]!r} vs torch {w[idx]!r} ({int(bad.sum())} elements)"
    return None


def _float_mismatch(g: np.ndarray, w: np.ndarray, tol: float) -> np.ndarray:
    finite = np.isfinite(w)
    scale = max(1.0, float(np.abs(w[finite]).max())) if finite.any() else 1.0
    with np.errstate(invalid="ignore"):
        close = np.abs(g - w) <= tol * (np.abs(w) + scale)
    same_special = (np.isnan(g) & np.isnan(w)) | (np.isinf(w) & (g == w))
    return ~np.where(finite, close, same_special)


def compare(program: Program, backend: str) -> str | None:
    """The verdict for one program on one backend."""
    return verdict(run_torch(program), run_lt(program, backend), program_tolerance(program))


def compare_batch(programs: list[Program], backend: str) -> list[str | None]:
    """Verdicts for many programs, evaluating all valid ones in one lt.eval (one compile) first.

    A batch eval that raises falls back to evaluating each program alone; a difference seen in the
    batch is confirmed by running that program alone (its repro must stand on its own).
    """
    previous = lt.get_backend()
    lt.set_backend(backend)
    try:
        wants = [run_torch(p) for p in programs]
        built = [build_lt(p) for p in programs]
        together = [k for k, (w, b) in enumerate(zip(wants, built)) if w.stage == "ok" and b.stage == "ok"]
        got: dict[int, Outcome] = {}
        try:
            lt.eval(*[t for k in together for t in built[k].values if isinstance(t, lt.Tensor)])
        except Exception:  # noqa: BLE001  (find the culprit alone below)
            pass
        for k in range(len(programs)):
            got[k] = finish_lt(built[k])
        verdicts = [verdict(w, got[k], program_tolerance(programs[k])) for k, w in enumerate(wants)]
    finally:
        lt.set_backend(previous)
    return [v if v is None else compare(programs[k], backend) for k, v in enumerate(verdicts)]

"""Comparing lazytorch with its oracle, PyTorch 2.13 on the CPU.

Tests write one function body and run it with both libraries:

    check(lambda m, x, y: m.add(x, y, alpha=2), sample((3, 4)), sample((4,)))

`m` is the module (lazytorch or torch) and the inputs are Sample pairs holding equal data.  The
results must have the same shape and dtype, and values equal within the tolerance of the dtype
(TOLERANCES, or atol/rtol given per test).  Samples can be non-contiguous views (a transposed or
strided view of a larger tensor in both libraries), so views are exercised as inputs too.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

import lazytorch as lt

# dtype name -> (atol, rtol) for values computed in that dtype
TOLERANCES = {
    "float64": (1e-10, 1e-7),
    "float32": (1e-5, 1e-5),
    "float16": (1e-3, 1e-3),
    "bfloat16": (1e-2, 1e-2),
}
FLOAT_DTYPES = ["float32", "float64", "float16", "bfloat16"]
INT_DTYPES = ["uint8", "int8", "int16", "int32", "int64"]
ALL_DTYPES = ["bool"] + INT_DTYPES + FLOAT_DTYPES


@dataclass
class Sample:
    lt: lt.Tensor
    torch: torch.Tensor


def _values(shape, dtype: str, rng: np.random.Generator, low: float, high: float) -> np.ndarray:
    if dtype == "bool":
        return rng.random(shape) < 0.5
    if dtype in INT_DTYPES:
        lo = max(int(low), 0) if dtype == "uint8" else int(low)
        return rng.integers(lo, max(int(high), lo + 1), size=shape).astype(dtype)
    return rng.uniform(low, high, size=shape)


def sample(shape, dtype: str = "float32", *, low: float = -3, high: float = 3, seed: int = 0,
           layout: str = "contiguous", values: np.ndarray | None = None) -> Sample:
    """Equal data in both libraries; layout 'transposed' or 'strided' gives a non-contiguous view."""
    shape = tuple(shape)
    rng = np.random.default_rng(seed)
    if layout == "transposed" and len(shape) >= 2:
        full = shape[:-2] + (shape[-1], shape[-2])
        post = lambda t: t.transpose(-1, -2)                      # noqa: E731
    elif layout == "strided" and len(shape) >= 1:
        full = shape[:-1] + (shape[-1] * 2,)
        post = lambda t: t[..., ::2]                              # noqa: E731
    else:
        full, post = shape, (lambda t: t)
    data = _values(full, dtype, rng, low, high) if values is None else np.asarray(values)
    if values is not None:
        full, post = data.shape, (lambda t: t)
    t = torch.tensor(data.astype(np.float64) if dtype in FLOAT_DTYPES else data,
                     dtype=getattr(torch, dtype))
    # lazytorch gets exactly torch's (rounded) values
    if dtype == "bfloat16":
        a = lt.tensor(t.float().numpy(), dtype=lt.bfloat16)
    else:
        a = lt.from_numpy(t.numpy().copy())
    return Sample(post(a), post(t))


def _run(fn, module, args):
    return fn(module, *[(a.lt if module is lt else a.torch) if isinstance(a, Sample) else a for a in args])


def to_numpy(x) -> np.ndarray:
    if isinstance(x, torch.Tensor):
        return (x.float() if x.dtype == torch.bfloat16 else x).detach().numpy()
    return np.asarray(x.numpy())


def assert_same(got, want, atol=None, rtol=None, equal_nan=True, what="result"):
    """got (lazytorch) equals want (torch): shape, dtype and values within tolerance."""
    if isinstance(want, (tuple, list)):
        assert isinstance(got, (tuple, list)) and len(got) == len(want), f"{what}: {got!r} vs {want!r}"
        for i, (g, w) in enumerate(zip(got, want)):
            assert_same(g, w, atol, rtol, equal_nan, what=f"{what}[{i}]")
        return
    if not isinstance(want, torch.Tensor):
        assert got == want or (got != got and want != want), f"{what}: {got!r} != {want!r}"
        return
    assert isinstance(got, lt.Tensor), f"{what}: expected a Tensor, got {type(got).__name__}"
    assert tuple(got.shape) == tuple(want.shape), f"{what}: shape {tuple(got.shape)} != torch {tuple(want.shape)}"
    want_dtype = str(want.dtype).removeprefix("torch.")
    assert got.dtype.name == want_dtype, f"{what}: dtype {got.dtype.name} != torch {want_dtype}"
    g, w = to_numpy(got), to_numpy(want)
    if want_dtype in TOLERANCES:
        d_atol, d_rtol = TOLERANCES[want_dtype]
        np.testing.assert_allclose(g, w, atol=d_atol if atol is None else atol,
                                   rtol=d_rtol if rtol is None else rtol, equal_nan=equal_nan, err_msg=what)
    else:
        np.testing.assert_array_equal(g, w, err_msg=what)


# Metal GPUs have no float64: there a program reading or producing float64 must fail clearly.
NO_FLOAT64_BACKENDS = ("metal", "metal-emu", "cuda")


def check(fn, *args, atol=None, rtol=None, equal_nan=True):
    """Run fn(module, *inputs) with lazytorch and with torch and compare the results."""
    want = _run(fn, torch, args)
    if lt.get_backend() in NO_FLOAT64_BACKENDS and _uses_float64(args, want):
        return _check_float64_refused(fn, args)
    got = _run(fn, lt, args)
    assert_same(got, want, atol, rtol, equal_nan)
    return got


def _uses_float64(args, want) -> bool:
    tensors = [a.torch for a in args if isinstance(a, Sample)]
    tensors += list(want) if isinstance(want, (tuple, list)) else [want]
    return any(isinstance(t, torch.Tensor) and t.dtype == torch.float64 for t in tensors)


def _check_float64_refused(fn, args):
    """On a backend without float64 evaluating the program raises a TypeError naming float64.
    Returns the (unevaluated) result: shapes and dtypes can still be checked."""
    import pytest
    got = _run(fn, lt, args)
    with pytest.raises(TypeError, match="float64"):
        for g in got if isinstance(got, (tuple, list)) else [got]:
            if isinstance(g, lt.Tensor):
                g.numpy()
    return got


def check_error(fn, *args, exc=Exception, match: tuple[str, ...] = ()):
    """fn raises `exc` with lazytorch at the call, and its message names every string in `match`."""
    import pytest
    with pytest.raises(exc) as info:
        _run(fn, lt, args)
    text = str(info.value)
    for m in match:
        assert m in text, f"error message {text!r} does not mention {m!r}"
    return info.value

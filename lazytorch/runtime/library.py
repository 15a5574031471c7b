"""Library launches on the host: a plan's matmuls as BLAS calls through numpy, shaped as models use them.

A library launch is a group of `view` nodes and one `matmul` (passes/fuse.py).  Its operands are
read in place: a view (a transposed key, a head split out of a fused qkv buffer) becomes a numpy
view of the buffer it reads, never a copy.  How the product is called is decided once per launch,
from the shapes and views alone (`GemmPlan`), so a graph-cache hit only builds the views and calls:

- `flat`: a linear layer, (..., M, K) @ (K, N) with a 2-D (or batch-broadcast) weight: the leading
  dims of the activation fold into the rows and the product is ONE 2-D GEMM of (B*M, K) @ (K, N).
  numpy's stacked matmul would call BLAS once per leading index and, for a transposed weight,
  reach its slower batched loop (measured: (4,64,256) @ W.T with W (1024,256) 1.51 ms one call
  stacked against 1.09 ms flattened, BLAS on one thread).
- `batched`: attention's (B, H, T, d) products: one np.matmul over the stacked operands; numpy
  calls BLAS per matrix inside one C loop.  Each matrix must be BLAS-readable (one unit stride, the
  other at least the row length); an operand that is not is copied to a contiguous stack once, so
  numpy never falls back to its element loop.
Transposed operands reach BLAS as transposes (numpy passes the 'T' flag for a column-major view).

Bias is not folded into the GEMM on the host: numpy cannot call BLAS with beta=1, and prefilling
the output with the broadcast bias is itself a full pass over the output, which costs what the
bias add costs in the epilogue kernel that already follows the GEMM (passes/fuse.py fuses bias,
activation and residual into that one kernel).  Measured in docs/benchmarks.md ("host path").
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Callable, Sequence

import numpy as np

from ..ir import dtypes as D
from . import threads

HOST_GEMM_DTYPES = (D.float32, D.float64)      # numpy's BLAS types; others run on the reference path


@dataclass(frozen=True)
class Operand:
    slot: int                # index into the launch's reads
    view: object | None      # the ViewSpec the matmul reads it through (None: the buffer itself)


@dataclass(frozen=True)
class GemmPlan:
    a: Operand
    b: Operand
    mode: str                # "flat" (one 2-D GEMM over folded rows), "batched" or "small"


def gemm_plan(launch) -> GemmPlan | None:
    """How the launch's matmul is called, or None when it is not a float matmul of read buffers
    (read directly or through views): those run on the reference executor."""
    *views, mm = launch.nodes
    if mm.op != "matmul" or any(v.op != "view" for v in views):
        return None
    if mm.dtype not in HOST_GEMM_DTYPES or any(i.dtype is not mm.dtype for i in mm.inputs):
        return None
    slot = {id(node): i for i, (node, _) in enumerate(launch.reads)}

    def operand(x) -> Operand | None:
        if x.op == "view" and id(x.inputs[0]) in slot:
            return Operand(slot[id(x.inputs[0])], x.attrs["view"])
        return Operand(slot[id(x)], None) if id(x) in slot else None

    a, b = (operand(x) for x in mm.inputs)
    if a is None or b is None:
        return None
    x, w = mm.inputs
    if 0 in mm.shape:
        mode = "small"                               # an empty result: nothing for BLAS to do
    elif x.ndim > 2 and math.prod(w.shape[:-2]) == 1:
        mode = "flat"
    else:
        mode = "batched"
    return GemmPlan(a, b, mode)


def host_gemm(launch) -> Callable[[Sequence[np.ndarray], Sequence[np.ndarray]], None] | None:
    """The launch function of a library launch on a host backend (numpy buffers), or None."""
    plan = gemm_plan(launch)
    if plan is None:
        return None
    call = _CALLS[plan.mode]
    a, b = plan.a, plan.b

    def run(reads: Sequence[np.ndarray], writes: Sequence[np.ndarray]) -> None:
        x, y = strided(reads[a.slot], a.view), strided(reads[b.slot], b.view)
        with threads.blas_threads():
            call(x, y, writes[0])
    return run


def _flat(x: np.ndarray, w: np.ndarray, out: np.ndarray) -> None:
    """(..., M, K) @ (K, N) as one (rows, K) @ (K, N) GEMM."""
    w2 = blas_ready(w.reshape(w.shape[-2:]))
    x2 = fold_rows(x)
    if x2 is None:                                   # rows not evenly strided: one copy
        x2 = np.ascontiguousarray(x).reshape(-1, x.shape[-1])
    np.matmul(blas_ready(x2), w2, out=out.reshape(-1, out.shape[-1]))


def _batched(x: np.ndarray, y: np.ndarray, out: np.ndarray) -> None:
    np.matmul(blas_ready(x), blas_ready(y), out=out)


def _small(x: np.ndarray, y: np.ndarray, out: np.ndarray) -> None:
    out[...] = np.matmul(x, y)


_CALLS = {"flat": _flat, "batched": _batched, "small": _small}


def fold_rows(x: np.ndarray) -> np.ndarray | None:
    """x (..., M, K) as a (prod(...)*M, K) view when its leading dims step evenly (no copy), else None."""
    rows = math.prod(x.shape[:-1])
    stride = None                                    # the row stride every leading dim must follow
    step = None
    for size, st in zip(reversed(x.shape[:-1]), reversed(x.strides[:-1])):
        if size == 1:
            continue
        if stride is None:
            stride, step = st, st * size
        elif st != step:
            return None
        else:
            step = st * size
    stride = x.strides[-1] * x.shape[-1] if stride is None else stride
    return np.lib.stride_tricks.as_strided(x, (rows, x.shape[-1]), (stride, x.strides[-1]))


def blas_ready(m: np.ndarray) -> np.ndarray:
    """m, or a contiguous copy when its matrices are not BLAS-readable: BLAS takes a matrix with
    one unit stride and the other at least the row length (numpy's own test); numpy would
    otherwise multiply element by element."""
    if m.ndim < 2 or m.size == 0:
        return m
    item = m.itemsize
    (r, c), (sr, sc) = m.shape[-2:], m.strides[-2:]
    row_major = (sc == item or c == 1) and sr >= c * item and sr % item == 0
    col_major = (sr == item or r == 1) and sc >= r * item and sc % item == 0
    if (row_major or col_major) and all(s % item == 0 and s >= 0 for s in m.strides[:-2]):
        return m
    return np.ascontiguousarray(m)


def strided(base: np.ndarray, spec) -> np.ndarray:
    """A numpy view of a contiguous buffer through a ViewSpec (no copy)."""
    if spec is None:
        return base
    item = base.itemsize
    return np.ndarray(spec.shape, base.dtype, buffer=base, offset=spec.offset * item,
                      strides=tuple(st * item for st in spec.strides))

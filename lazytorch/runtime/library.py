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
from ..ir.views import contiguous_strides
from . import threads

HOST_GEMM_DTYPES = (D.float32, D.float64)      # numpy's BLAS types; others run on the reference path


@dataclass(frozen=True)
class Operand:
    """How one matmul operand is read from its buffer: a numpy view of `shape` and `strides`
    (elements) at `offset`, copied to a contiguous array first when BLAS cannot read it (`copy`)."""
    slot: int                     # index into the launch's reads
    shape: tuple[int, ...]
    strides: tuple[int, ...]
    offset: int = 0
    copy: bool = False
    view: object | None = None    # the ViewSpec the matmul reads it through (None: the buffer itself)

    def array(self, base: np.ndarray) -> np.ndarray:
        item = base.itemsize
        arr = np.ndarray(self.shape, base.dtype, buffer=base, offset=self.offset * item,
                         strides=tuple(st * item for st in self.strides))
        return np.ascontiguousarray(arr) if self.copy else arr


@dataclass(frozen=True)
class GemmPlan:
    a: Operand
    b: Operand
    mode: str                     # "flat" (one 2-D GEMM over folded rows), "batched" or "small"
    rows: int = 0                 # flat: the folded rows of a (and of the output)


def gemm_plan(launch) -> GemmPlan | None:
    """How the launch's matmul is called, or None when it is not a float matmul of read buffers
    (read directly or through views): those run on the reference executor.  Every layout
    decision is made here, once per launch, from the buffers' shapes and the views' strides."""
    *views, mm = launch.nodes
    if mm.op != "matmul" or any(v.op != "view" for v in views):
        return None
    if mm.dtype not in HOST_GEMM_DTYPES or any(i.dtype is not mm.dtype for i in mm.inputs):
        return None
    slot = {id(node): i for i, (node, _) in enumerate(launch.reads)}

    def layout(x) -> tuple[int, tuple, tuple, int, object] | None:
        if x.op == "view" and id(x.inputs[0]) in slot:
            spec = x.attrs["view"]
            return slot[id(x.inputs[0])], tuple(spec.shape), tuple(spec.strides), spec.offset, spec
        if id(x) in slot:
            return slot[id(x)], tuple(x.shape), contiguous_strides(tuple(x.shape)), 0, None
        return None

    la, lb = layout(mm.inputs[0]), layout(mm.inputs[1])
    if la is None or lb is None:
        return None
    if 0 in mm.shape:                                # an empty result: nothing for BLAS to do
        return GemmPlan(Operand(*la[:4], view=la[4]), Operand(*lb[:4], view=lb[4]), "small")
    (ia, sa, ta, oa, va), (ib, sb, tb, ob, vb) = la, lb
    if len(sa) > 2 and math.prod(sb[:-2]) == 1:
        # a linear layer: (..., M, K) @ (K, N) as one (rows, K) @ (K, N) GEMM
        rows = math.prod(sa[:-1])
        folded = fold_rows(sa, ta)
        a = (Operand(ia, (rows, sa[-1]), folded, oa, not blas_readable((rows, sa[-1]), folded), va)
             if folded else Operand(ia, sa, ta, oa, True, va))      # rows step unevenly: one copy
        b2, t2 = sb[-2:], tb[-2:]
        b = Operand(ib, b2, t2, ob, not blas_readable(b2, t2), vb)
        return GemmPlan(a, b, "flat", rows)
    a = Operand(ia, sa, ta, oa, not blas_readable(sa, ta), va)
    b = Operand(ib, sb, tb, ob, not blas_readable(sb, tb), vb)
    return GemmPlan(a, b, "batched")


def host_gemm(launch) -> Callable[[Sequence[np.ndarray], Sequence[np.ndarray]], None] | None:
    """The launch function of a library launch on a host backend (numpy buffers), or None."""
    plan = gemm_plan(launch)
    if plan is None:
        return None
    a, b, rows = plan.a, plan.b, plan.rows
    cols = a.shape[-1]                               # K (reshape cannot infer it when it is 0)

    if plan.mode == "flat":
        def run(reads: Sequence[np.ndarray], writes: Sequence[np.ndarray]) -> None:
            out = writes[0]
            x = a.array(reads[a.slot]).reshape(rows, cols)    # (a view unless it was copied)
            with threads.blas_threads():
                np.matmul(x, b.array(reads[b.slot]), out=out.reshape(rows, out.shape[-1]))
    elif plan.mode == "batched":
        def run(reads: Sequence[np.ndarray], writes: Sequence[np.ndarray]) -> None:
            with threads.blas_threads():
                np.matmul(a.array(reads[a.slot]), b.array(reads[b.slot]), out=writes[0])
    else:
        def run(reads: Sequence[np.ndarray], writes: Sequence[np.ndarray]) -> None:
            writes[0][...] = np.matmul(a.array(reads[a.slot]), b.array(reads[b.slot]))
    return run


def fold_rows(shape: tuple[int, ...], strides: tuple[int, ...]) -> tuple[int, int] | None:
    """The (row, column) strides of (..., M, K) read as (prod(...)*M, K) without a copy: when every
    leading dim steps by the rows below it (size-1 dims aside), else None.  Strides in elements."""
    row = None                                       # the row stride every leading dim must follow
    step = None
    for size, st in zip(reversed(shape[:-1]), reversed(strides[:-1])):
        if size == 1:
            continue
        if row is None:
            row, step = st, st * size
        elif st != step:
            return None
        else:
            step = st * size
    return (strides[-1] * shape[-1] if row is None else row, strides[-1])


def blas_readable(shape: tuple[int, ...], strides: tuple[int, ...]) -> bool:
    """Whether BLAS reads every matrix of a (..., r, c) operand in place (numpy's own test): one
    unit stride and the other at least the row length; batch strides not negative.  Otherwise
    numpy would multiply element by element, so the operand is copied once instead."""
    if len(shape) < 2 or 0 in shape:
        return True
    (r, c), (sr, sc) = shape[-2:], strides[-2:]
    row_major = (sc == 1 or c == 1) and sr >= c
    col_major = (sr == 1 or r == 1) and sc >= r
    return (row_major or col_major) and all(st >= 0 for st in strides[:-2])

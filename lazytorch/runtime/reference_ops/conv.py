"""Reference implementations of the convolution primitives with numpy.

The forward convolution is im2col through a strided window view (no copy until tensordot lays
the windows out as one matrix) and a GEMM per group (numpy's BLAS); the transposed convolution
and `fold` are the adjoint: a GEMM to columns, then col2im adds each kernel position's slice into
the output.  Floats accumulate in float32 (half types) or float64; integers exactly in int64.
"""
from __future__ import annotations

import numpy as np
from numpy.lib.stride_tricks import as_strided

from ...ir.node import Node
from . import accumulation, finish, np_compute, ref


def windows(x: np.ndarray, kernel, stride, dilation) -> np.ndarray:
    """(N, C, *out, *kernel): every window of x (N, C, *spatial), as a view."""
    spatial = x.shape[2:]
    out = tuple((s - d * (k - 1) - 1) // st + 1 for s, k, st, d in zip(spatial, kernel, stride, dilation))
    st = x.strides[2:]
    return as_strided(x, x.shape[:2] + out + tuple(kernel),
                      x.strides[:2] + tuple(s * k for s, k in zip(st, stride)) +
                      tuple(s * d for s, d in zip(st, dilation)), writeable=False)


def col2im(cols: np.ndarray, size, stride, dilation) -> np.ndarray:
    """The adjoint of `windows`: cols (N, C, *blocks, *kernel) summed into (N, C, *size)."""
    nd = len(size)
    blocks, kernel = cols.shape[2:2 + nd], cols.shape[2 + nd:]
    out = np.zeros(cols.shape[:2] + tuple(size), cols.dtype)
    for pos in np.ndindex(*kernel):
        where = tuple(slice(k * d, k * d + (b - 1) * s + 1, s)
                      for k, d, b, s in zip(pos, dilation, blocks, stride))
        out[(slice(None), slice(None)) + where] += cols[(Ellipsis,) + pos]
    return out


def _forward(x, w, stride, padding, dilation, groups):
    nd = x.ndim - 2
    x = np.pad(x, [(0, 0), (0, 0)] + [(p, p) for p in padding])
    win = windows(x, w.shape[2:], stride, dilation)            # (N, C, *out, *K)
    cg, og = w.shape[1], w.shape[0] // groups
    spatial_axes = list(range(2 + nd, 2 + 2 * nd))
    parts = []
    for g in range(groups):
        part = np.tensordot(win[:, g * cg:(g + 1) * cg], w[g * og:(g + 1) * og],
                            axes=([1] + spatial_axes, [1] + list(range(2, 2 + nd))))   # (N, *out, Og)
        parts.append(np.moveaxis(part, -1, 1))
    return parts[0] if groups == 1 else np.concatenate(parts, axis=1)


def _transposed(x, w, stride, padding, dilation, groups, out_shape):
    nd = x.ndim - 2
    cg = x.shape[1] // groups
    parts = []
    for g in range(groups):
        cols = np.tensordot(x[:, g * cg:(g + 1) * cg], w[g * cg:(g + 1) * cg], axes=([1], [0]))  # (N, *S, Og, *K)
        parts.append(np.moveaxis(cols, 1 + nd, 1))                                               # (N, Og, *S, *K)
    cols = parts[0] if groups == 1 else np.concatenate(parts, axis=1)
    full = tuple(o + 2 * p for o, p in zip(out_shape[2:], padding))
    out = col2im(cols, full, stride, dilation)
    return out[(slice(None), slice(None)) + tuple(slice(p, p + o) for p, o in zip(padding, out_shape[2:]))]


@ref("convolution")
def _convolution(node: Node, x, w):
    """Without a bias: the decomposition (passes/decompositions/conv.py) makes it a pointwise add."""
    a = node.attrs
    acc = accumulation(node.dtype)
    xv, wv = (np_compute(v, n.dtype, acc) for v, n in zip((x, w), node.inputs))
    with np.errstate(all="ignore"):
        if a["transposed"]:
            out = _transposed(xv, wv, a["stride"], a["padding"], a["dilation"], a["groups"], node.shape)
        else:
            out = _forward(xv, wv, a["stride"], a["padding"], a["dilation"], a["groups"])
    return finish(out, node)


@ref("fold")
def _fold(node: Node, x):
    a = node.attrs
    v = np_compute(x, node.inputs[0].dtype, accumulation(node.dtype))
    batched = v.ndim == 3
    if not batched:
        v = v[None]
    kernel, size, padding = a["kernel_size"], a["output_size"], a["padding"]
    full = tuple(s + 2 * p for s, p in zip(size, padding))
    blocks = tuple((f - d * (k - 1) - 1) // s + 1 for f, k, d, s in zip(full, kernel, a["dilation"], a["stride"]))
    cols = v.reshape((v.shape[0], -1) + tuple(kernel) + blocks)
    cols = np.moveaxis(cols, (2, 3), (4, 5))                      # (N, C, *blocks, *kernel)
    with np.errstate(all="ignore"):
        out = col2im(cols, full, a["stride"], a["dilation"])
    out = out[:, :, padding[0]:padding[0] + size[0], padding[1]:padding[1] + size[1]]
    return finish(out if batched else out[0], node)

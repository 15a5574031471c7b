"""Decomposition of the convolution primitive into a product over its input's windows.

A bias becomes a pointwise add (it fuses, with any activation or BatchNorm that follows, into the
product's epilogue).  A forward float convolution then becomes what the backward pass already is
(autograd/derivatives.py): the windows of the padded input are one strided view (N, C, *out,
*kernel) (ir/build_conv.py `windows`, as pooling reads them); one generated copy lays them out as
columns (N, G, Cg * K, P) for P output positions (im2col), and one batched product
W (G, Og, Cg * K) @ columns gives the output (N, G, Og, P), already in NCHW order.  So a
convolution runs on each backend's product path (the BLAS on its kernels' threads on cpu, MLX's
matmul on a GPU) instead of the numpy executor: ResNet-18's forward on cpu went from ~3x torch
eager's time to below it (docs/benchmarks.md, "Convolutions on the product path").  A 1x1
convolution with stride 1 needs no copy: its columns are the input itself.

A depthwise convolution (one input channel per group) is a multiply and a sum over each window
instead, one reduction kernel over the view like a pooling: its products would be G of one row.

A transposed convolution is the same product turned around, its columns summed into the output
by col2im (ir/build_conv.py), as a convolution's input gradient is.

The products compute in TF32 where the convolution's node says cuDNN's flag allowed it when the
convolution was called (ir/precision.py): they inherit its decision, as its gradient's do.

`fold` (F.fold) is col2im over its input's columns.  The reference backend keeps both primitives
whole (its numpy im2col and col2im in float64: an independent check of these forms).
"""
from __future__ import annotations

import math

from ...ir import precision
from ...ir.build import call as B
from ...ir.build_conv import col2im, convolution_node, padded_windows
from ...ir.build_linalg import matmul_node
from ...ir.node import Node
from . import LIBRARY_FORMS, decomposes

# a transposed convolution's batch joins its product's columns up to this many input positions
# per sample (a generator's first layers: 4 x 4); past it, one product per sample
FOLD_MAX_POSITIONS = 256


def _applies(node: Node) -> bool:
    """A bias to split off, or a float forward convolution to lower (integer convolutions have no
    product path: they stay exact in int64 on the numpy executor)."""
    return len(node.inputs) > 2 or node.dtype.is_floating_point


@decomposes("convolution", applies=_applies)
def convolution(node: Node, self: Node, weight: Node, bias=None, stride=(1,), padding=(0,), dilation=(1,),
                transposed: bool = False, output_padding=(0,), groups: int = 1) -> Node | None:
    tf32 = precision.tf32(node.attrs)           # (decided at the convolution's call: ir/precision.py)
    if bias is not None:
        y = convolution_node(self, weight, stride, padding, dilation, transposed, output_padding, groups, tf32)
        return B("add", y, B("reshape", bias, (-1,) + (1,) * (self.ndim - 2)))
    if transposed:
        return _transposed(self, weight, tuple(stride), tuple(padding), tuple(dilation), groups, node.shape, tf32)
    return _windowed(self, weight, tuple(stride), tuple(padding), tuple(dilation), groups, node.shape, tf32)


def _windowed(x: Node, w: Node, stride, padding, dilation, groups: int, out_shape, tf32: bool) -> Node:
    kernel = tuple(w.shape[2:])
    N, O = x.shape[0], w.shape[0]
    G, Cg, Og = groups, w.shape[1], O // groups
    P, K = math.prod(out_shape[2:]), math.prod(kernel)
    nd = len(kernel)
    if Cg == 1 and Og == 1:                                              # depthwise: a sum per window
        win = padded_windows(x, kernel, stride, dilation, padding)       # (N, C, *out, *kernel)
        taps = B("reshape", w, (G,) + (1,) * nd + kernel)
        return B("sum", B("mul", win, taps), list(range(2 + nd, 2 + 2 * nd)))
    win = padded_windows(x, kernel, stride, dilation, padding, kernel_first=True)   # (N, C, *kernel, *out)
    wm = B("reshape", w, (G, Og, Cg * K))
    copied = any(k != 1 for k in kernel) or any(st != 1 for st in stride) or any(padding)
    if N > 1 and copied:
        # the batch joins the columns (copied anyway): the weight is read once, not once per
        # sample (ResNet-18's last layer at 64 x 64, 512 x 4608), and the columns are the weight
        # gradient's own (autograd/derivatives.py: the same copy, shared).  The output comes out
        # (G, Og, N, P), transposed by the kernel that reads it next.  Per-sample columns past 256
        # positions had cost training a second copy of each input's columns: ResNet-18's step at
        # 64 x 224^2 on an H200, kernel time 16.0 -> 14.5 ms (13 kernels fewer)
        cols = B("reshape", B("permute", win, (1,) + tuple(range(2, 2 + nd)) + (0,) + tuple(range(2 + nd, 2 + 2 * nd))),
                 (G, Cg * K, N * P))
        y = B("reshape", matmul_node(wm, cols, tf32), (G, Og, N, P))
        return B("reshape", B("permute", y, (2, 0, 1, 3)), out_shape)
    cols = B("reshape", win, (N, G, Cg * K, P))                          # the one copy: im2col
    y = matmul_node(wm, cols, tf32)                                       # (N, G, Og, P)
    return B("reshape", y, out_shape)


def _transposed(x: Node, w: Node, stride, padding, dilation, groups: int, out_shape, tf32: bool) -> Node:
    """A transposed convolution, the adjoint of `_windowed` in its input: one batched product
    W (G, Og * K, Cg) @ x (N, G, Cg, P) gives every input position's contribution at each kernel
    position (the columns, as a convolution's backward makes them), and col2im sums them into the
    output (one kernel), cropped by the padding (output_padding is the extra size at the end)."""
    kernel, spatial = tuple(w.shape[2:]), tuple(x.shape[2:])
    nd, N, G = len(kernel), x.shape[0], groups
    Cg, Og = x.shape[1] // G, w.shape[1]
    wt = B("permute", B("reshape", w, (G, Cg, Og * math.prod(kernel))), (0, 2, 1))
    P = math.prod(spatial)
    if N > 1 and P <= FOLD_MAX_POSITIONS:
        # few positions (a generator's first layers: 4 x 4): the batch joins the product's columns
        # (x copied to (G, Cg, N * P)), one wide product instead of a narrow one per sample
        xm = B("reshape", B("permute", B("reshape", x, (N, G, Cg, P)), (1, 2, 0, 3)), (G, Cg, N * P))
        cols = B("reshape", matmul_node(wt, xm, tf32), (G * Og,) + kernel + (N,) + spatial)   # (O, *K, N, *P)
        gwin = B("permute", cols, (nd + 1, 0) + tuple(range(nd + 2, 2 * nd + 2)) + tuple(range(1, nd + 1)))
    else:
        cols = matmul_node(wt, B("reshape", x, (N, G, Cg, P)), tf32)                  # (N, G, Og * K, P)
        cols = B("reshape", cols, (N, G * Og) + kernel + spatial)
        gwin = B("permute", cols, (0, 1) + tuple(range(2 + nd, 2 + 2 * nd)) + tuple(range(2, 2 + nd)))
    y = col2im(gwin, tuple(n + 2 * p for n, p in zip(out_shape[2:], padding)), kernel, stride, dilation)
    for d, p in enumerate(padding):
        if p:
            y = B("narrow", y, 2 + d, p, out_shape[2 + d])
    return y


@decomposes("fold", applies=lambda node: node.dtype.is_floating_point)
def fold(node: Node, self: Node, output_size, kernel_size, dilation=(1, 1), padding=(0, 0), stride=(1, 1)) -> Node:
    """F.fold (col2im): the columns (N, C * K, L) read as windows (N, C, *blocks, *kernel) and
    summed into the padded output by col2im (one kernel), then cropped."""
    kernel, size = tuple(kernel_size), tuple(output_size)
    blocks = tuple((n + 2 * p - d * (k - 1) - 1) // s + 1
                   for n, p, d, k, s in zip(size, padding, dilation, kernel, stride))
    x = self if self.ndim == 3 else B("unsqueeze", self, 0)
    cols = B("reshape", x, (x.shape[0], x.shape[1] // math.prod(kernel)) + kernel + blocks)
    gwin = B("permute", cols, (0, 1, 4, 5, 2, 3))
    y = col2im(gwin, tuple(n + 2 * p for n, p in zip(size, padding)), kernel, tuple(stride), tuple(dilation))
    for d, p in enumerate(padding):
        if p:
            y = B("narrow", y, 2 + d, p, size[d])
    return y if self.ndim == 3 else B("squeeze", y, 0)


# the reference backend runs a convolution without a bias whole, and fold (its `library_ops`)
LIBRARY_FORMS["convolution"] = lambda node: len(node.inputs) == 2
LIBRARY_FORMS["fold"] = lambda node: True

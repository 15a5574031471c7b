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

The reference backend keeps the primitive whole (its numpy im2col in float64: an independent
check of this form); transposed convolutions stay on that executor everywhere.
"""
from __future__ import annotations

import math

from ...ir.build import call as B
from ...ir.build_conv import padded_windows
from ...ir.node import Node
from . import LIBRARY_FORMS, decomposes


def _applies(node: Node) -> bool:
    """A bias to split off, or a float forward convolution to lower (integer convolutions have no
    product path: they stay exact in int64 on the numpy executor)."""
    return len(node.inputs) > 2 or (not node.attrs["transposed"] and node.dtype.is_floating_point)


@decomposes("convolution", applies=_applies)
def convolution(node: Node, self: Node, weight: Node, bias=None, stride=(1,), padding=(0,), dilation=(1,),
                transposed: bool = False, output_padding=(0,), groups: int = 1) -> Node | None:
    if bias is not None:
        y = B("convolution", self, weight, None, stride, padding, dilation, transposed, output_padding, groups)
        return B("add", y, B("reshape", bias, (-1,) + (1,) * (self.ndim - 2)))
    return _windowed(self, weight, tuple(stride), tuple(padding), tuple(dilation), groups, node.shape)


def _windowed(x: Node, w: Node, stride, padding, dilation, groups: int, out_shape) -> Node:
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
    cols = B("reshape", win, (N, G, Cg * K, P))                          # the one copy: im2col
    y = B("matmul", B("reshape", w, (G, Og, Cg * K)), cols)               # (N, G, Og, P)
    return B("reshape", y, out_shape)


# the reference backend runs a convolution without a bias whole (its `library_ops`)
LIBRARY_FORMS["convolution"] = lambda node: len(node.inputs) == 2

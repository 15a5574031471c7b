"""Decomposition of the convolution primitive's bias into a pointwise add.

The opaque `convolution` (a library-style launch: im2col + GEMM) then computes only the product,
and the bias add, together with any activation that follows, fuses into one generated kernel.
"""
from __future__ import annotations

from ...ir.build import call as B
from ...ir.node import Node
from . import decomposes


@decomposes("convolution")
def convolution(node: Node, self: Node, weight: Node, bias=None, stride=(1,), padding=(0,), dilation=(1,),
                transposed: bool = False, output_padding=(0,), groups: int = 1) -> Node | None:
    if bias is None:
        return None
    y = B("convolution", self, weight, None, stride, padding, dilation, transposed, output_padding, groups)
    return B("add", y, B("reshape", bias, (-1,) + (1,) * (self.ndim - 2)))

"""Reference implementation of the embedding primitive: rows of weight, indices checked first."""
from __future__ import annotations

import numpy as np

from ...ir.node import Node
from . import ref


@ref("embedding")
def _embedding(node: Node, indices, weight):
    rows = weight.shape[0]
    idx = np.asarray(indices, dtype=np.int64)
    bad = idx[(idx < 0) | (idx >= rows)]
    if bad.size:                                 # never read outside weight (negative indices don't wrap)
        raise IndexError(f"embedding: index {int(bad[0])} is out of range for {rows} embeddings; "
                         f"valid indices are 0..{rows - 1}")
    return np.ascontiguousarray(weight[idx].reshape(node.shape))

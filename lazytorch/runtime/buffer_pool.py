"""A pool of host buffers: large arrays reuse freed memory instead of faulting in fresh pages.

Fresh pages cost a page fault each on first touch, which dominates memory-bound kernels, so
`empty` hands out arrays viewing a pooled byte block and returns the block to the pool when the
array (and every view of it) is garbage.  Small arrays bypass the pool (malloc is fast for them).
"""
from __future__ import annotations

import math
import threading
import weakref

import numpy as np

MIN_BYTES = 1 << 16          # below this, plain np.empty
PAGE = 4096


class BufferPool:
    def __init__(self, limit_bytes: int = 1 << 30):
        self.limit = limit_bytes
        self.free: dict[int, list[np.ndarray]] = {}
        self.pooled = 0
        self.lock = threading.Lock()
        # buffers handed out: fresh blocks from the allocator, blocks reused from the pool, and
        # small arrays (plain np.empty)
        self.stats = {"fresh": 0, "reused": 0, "small": 0}

    def empty(self, shape: tuple[int, ...], dtype: np.dtype) -> np.ndarray:
        dtype = np.dtype(dtype)
        n = math.prod(shape)
        nbytes = n * dtype.itemsize
        if nbytes < MIN_BYTES:
            self.stats["small"] += 1
            return np.empty(shape, dtype)
        size = -(-nbytes // PAGE) * PAGE
        with self.lock:
            blocks = self.free.get(size)
            block = blocks.pop() if blocks else None
            if block is not None:
                self.pooled -= size
        if block is None:
            block = np.empty(size, np.uint8)
            self.stats["fresh"] += 1
        else:
            self.stats["reused"] += 1
        # `flat` owns the memory as far as numpy is concerned (its base is not an ndarray), so
        # every view of the result keeps `flat` alive and the block returns only when all are gone
        flat = np.frombuffer(memoryview(block), dtype=dtype, count=n)
        weakref.finalize(flat, self._release, block)
        return flat.reshape(shape)

    def _release(self, block: np.ndarray) -> None:
        with self.lock:
            if self.pooled + block.nbytes <= self.limit:
                self.free.setdefault(block.nbytes, []).append(block)
                self.pooled += block.nbytes

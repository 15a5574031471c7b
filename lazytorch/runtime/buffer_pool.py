"""A pool of host buffers: large arrays reuse freed memory instead of faulting in fresh pages.

Fresh pages cost a page fault each on first touch, which dominates memory-bound kernels, so
`empty` hands out arrays viewing a pooled byte block and returns the block to the pool when the
array (and every view of it) is garbage.  Small arrays bypass the pool (malloc is fast for them).

Fresh blocks come from `block`, the one place the runtime allocates large host memory (the pool
and the executor's static memory plans): from HUGE_MIN bytes on, an anonymous mapping that starts
on a huge-page boundary, spans whole huge pages and is advised MADV_HUGEPAGE, so its first touch
is one fault per 2 MiB that the kernel zeroes in one go, instead of one per 4 KiB page.  numpy's
own allocation advises huge pages too, but its mapping starts wherever the kernel puts
`malloc`'s header, so the first and last partial 2 MiB of the block fell back to 4 KiB pages: 548
faults for a fresh 64 MB output where an aligned block takes 32 (docs/benchmarks.md, "W8").
"""
from __future__ import annotations

import math
import mmap
import threading
import weakref

import numpy as np

MIN_BYTES = 1 << 16          # below this, plain np.empty
PAGE = 4096
HUGE_PAGE = 2 << 20          # x86-64's and arm64's (4 KiB granule) transparent huge page
HUGE_MIN = 4 << 20           # from here, blocks are huge-page mappings (numpy's threshold for its advice)
# Linux only (transparent huge pages); elsewhere large blocks are plain np.empty
HUGE_PAGES = hasattr(mmap, "MADV_HUGEPAGE")


def block_size(nbytes: int) -> int:
    """The bytes a block for `nbytes` spans: whole huge pages from HUGE_MIN on, else whole pages."""
    unit = HUGE_PAGE if HUGE_PAGES and nbytes >= HUGE_MIN else PAGE
    return -(-nbytes // unit) * unit


def block(size: int) -> np.ndarray:
    """`size` fresh bytes (uint8).  Of a huge-page size (block_size), a huge-page-aligned view of
    an anonymous mapping advised MADV_HUGEPAGE, unmapped when the last view of it is garbage."""
    if not (HUGE_PAGES and size >= HUGE_MIN and size % HUGE_PAGE == 0):
        return np.empty(size, np.uint8)
    # one huge page more than asked, so an aligned start lies inside; the slack is never touched
    # and so never backed by memory.  Private: mmap's default, a shared mapping, is shmem, which
    # takes huge pages only where shmem_enabled allows them (rarely)
    mapping = mmap.mmap(-1, size + HUGE_PAGE, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS)
    whole = np.frombuffer(mapping, np.uint8)
    start = -whole.__array_interface__["data"][0] % HUGE_PAGE
    try:
        mapping.madvise(mmap.MADV_HUGEPAGE, start, size)
    except OSError:           # a kernel without transparent huge pages: 4 KiB pages, still correct
        pass
    return whole[start:start + size]


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
        size = block_size(nbytes)
        with self.lock:
            blocks = self.free.get(size)
            got = blocks.pop() if blocks else None
            if got is not None:
                self.pooled -= size
        if got is None:
            got = block(size)
            self.stats["fresh"] += 1
        else:
            self.stats["reused"] += 1
        # `flat` owns the memory as far as numpy is concerned (its base is not an ndarray), so
        # every view of the result keeps `flat` alive and the block returns only when all are gone
        flat = np.frombuffer(memoryview(got), dtype=dtype, count=n)
        weakref.finalize(flat, self._release, got)
        return flat.reshape(shape)

    def _release(self, freed: np.ndarray) -> None:
        with self.lock:
            if self.pooled + freed.nbytes <= self.limit:
                self.free.setdefault(freed.nbytes, []).append(freed)
                self.pooled += freed.nbytes

"""The graph cache: compiled programs by structural key, a bounded, thread-safe LRU.

Keys are (structural_key(order), backend name): the structure, shapes, dtypes and view layouts of
the program, never its data or the values of Python scalars (those are runtime arguments).  The
size comes from LAZYTORCH_CACHE_SIZE (default 512) or `set_cache_size`.  A compile runs outside
the lock (it may be slow; two threads missing the same key may both compile, the first insert
wins) and only a successful compile inserts an entry, so a failed one leaves the cache as it was.
Python's cycle collector pauses while a compile runs (passes/pipeline.py: no_cycle_collection).
"""
from __future__ import annotations

import os
import threading
from collections import OrderedDict
from typing import Any, Callable, Hashable, NamedTuple

from .passes.pipeline import no_cycle_collection


class CacheInfo(NamedTuple):
    hits: int
    misses: int
    entries: int
    evictions: int
    maxsize: int


class ProgramKey:
    """A program's structural key (ir/graph.py `program`) on a backend, as the cache looks it up:
    hashed once, from a sample of its entries.  A tuple's hash is not kept: a lookup and the LRU's
    move_to_end each hashed the whole key again, ~0.4 ms apiece for ResNet-18's training step
    (8,906 entries); a hit compares the whole key still (~0.1 ms there: a replayed build shares
    most node keys), so the sample decides only which keys are compared."""

    __slots__ = ("key", "_hash")
    SAMPLE = 64

    def __init__(self, key: tuple, backend: str):
        self.key = (key, backend)
        self._hash = hash((len(key), backend, key[::max(1, len(key) // self.SAMPLE)], key[-1:]))

    def __hash__(self) -> int:
        return self._hash

    def __eq__(self, other: object) -> bool:
        return other.__class__ is ProgramKey and self._hash == other._hash and self.key == other.key


class GraphCache:
    def __init__(self, maxsize: int):
        self._lock = threading.Lock()
        self._entries: OrderedDict[Hashable, Any] = OrderedDict()
        self.maxsize = maxsize
        self.hits = self.misses = self.evictions = 0

    def get_or_compile(self, key: Hashable, compile_fn: Callable[[], Any]) -> Any:
        with self._lock:
            entry = self._entries.get(key)
            if entry is not None:
                self._entries.move_to_end(key)
                self.hits += 1
                return entry
            self.misses += 1
        with no_cycle_collection():         # (the passes, fusion, lowering and the backend's prepare)
            entry = compile_fn()
        with self._lock:
            existing = self._entries.get(key)
            if existing is not None:
                return existing
            self._entries[key] = entry
            self._evict()
        return entry

    def _evict(self) -> None:
        while len(self._entries) > self.maxsize:
            self._entries.popitem(last=False)
            self.evictions += 1

    def resize(self, maxsize: int) -> None:
        if maxsize < 0:
            raise ValueError(f"set_cache_size: size must be >= 0, got {maxsize}")
        with self._lock:
            self.maxsize = maxsize
            self._evict()

    def clear(self) -> None:
        with self._lock:
            self._entries.clear()
            self.hits = self.misses = self.evictions = 0

    def info(self) -> CacheInfo:
        with self._lock:
            return CacheInfo(self.hits, self.misses, len(self._entries), self.evictions, self.maxsize)


CACHE = GraphCache(int(os.environ.get("LAZYTORCH_CACHE_SIZE", "512")))


def cache_info() -> CacheInfo:
    """(hits, misses, entries, evictions, maxsize) of the graph cache."""
    return CACHE.info()


def cache_clear() -> None:
    """Drop every compiled program and reset the counters."""
    CACHE.clear()


def set_cache_size(n: int) -> None:
    """Keep at most n compiled programs (least recently used are evicted first)."""
    CACHE.resize(int(n))

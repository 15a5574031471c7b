"""Bounded (LRU) caches of compiled kernels, with the statistics `lt.cache_info().kernels` reports.

The graph cache (graph_cache.py) is bounded; the caches behind it are too, so a long-running
process that sees many shapes keeps a fixed number of loaded libraries and MLX kernels.
"""
from __future__ import annotations

import threading
from collections import OrderedDict
from typing import Any, Callable, Hashable, NamedTuple


class KernelCacheInfo(NamedTuple):
    hits: int
    misses: int
    entries: int
    evictions: int
    maxsize: int


class LRU:
    """A thread-safe least-recently-used map from keys to compiled objects."""

    def __init__(self, name: str, maxsize: int):
        self.name, self.maxsize = name, maxsize
        self._entries: OrderedDict = OrderedDict()
        self._lock = threading.Lock()
        self.hits = self.misses = self.evictions = 0
        CACHES[name] = self

    def get_or_make(self, key: Hashable, make: Callable[[], Any]) -> Any:
        """The value of `key`, made on a miss; a make() that returns None is not cached."""
        with self._lock:
            if key in self._entries:
                self.hits += 1
                self._entries.move_to_end(key)
                return self._entries[key]
        value = make()                      # outside the lock: compiles may take seconds
        if value is None:
            return None
        with self._lock:
            self.misses += 1
            self._entries[key] = value
            self._entries.move_to_end(key)
            while len(self._entries) > self.maxsize:
                self._entries.popitem(last=False)
                self.evictions += 1
            return value

    def __contains__(self, key: Hashable) -> bool:
        with self._lock:
            return key in self._entries

    def info(self) -> KernelCacheInfo:
        with self._lock:
            return KernelCacheInfo(self.hits, self.misses, len(self._entries), self.evictions, self.maxsize)


CACHES: dict[str, LRU] = {}


def info() -> dict[str, KernelCacheInfo]:
    """Statistics of every compiled-kernel cache created so far, by name."""
    return {name: cache.info() for name, cache in CACHES.items()}

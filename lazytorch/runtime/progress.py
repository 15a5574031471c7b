"""A line on stderr when a compile runs longer than PROGRESS_AFTER seconds, and one when it ends.

Long compiles do not pass silently: realize.py wraps a program's compile in one, runtime/nvrtc.py a
batch of CUDA kernels.
"""
from __future__ import annotations

import _thread
import sys
import time

PROGRESS_AFTER = 2.0                       # seconds before a progress line


class Progress:
    """`with Progress("a program of 200 nodes"):` prints "lazytorch: compiling <what>..." once the
    block has run `after` seconds, and "lazytorch: compiled <what> in <s> s" when it ends.

    The watcher is a bare thread waiting on a lock the block releases when it ends (threading's
    Timer would wait for its thread to start: a scheduler tick on a busy machine, every compile)."""

    def __init__(self, what: str, after: float = PROGRESS_AFTER):
        self.what, self.after = what, after
        self.shown = False
        self.done = _thread.allocate_lock()

    def _show(self) -> None:
        self.shown = True
        print(f"lazytorch: compiling {self.what}...", file=sys.stderr, flush=True)

    def _watch(self) -> None:
        if not self.done.acquire(timeout=self.after):
            self._show()

    def __enter__(self) -> "Progress":
        self.start = time.perf_counter()
        if self.after <= 0:
            self._show()
            return self
        self.done.acquire()
        _thread.start_new_thread(self._watch, ())
        return self

    def __exit__(self, *exc) -> None:
        if self.done.locked():
            self.done.release()
        if self.shown:
            print(f"lazytorch: compiled {self.what} in {time.perf_counter() - self.start:.1f} s",
                  file=sys.stderr, flush=True)

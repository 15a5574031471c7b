"""Grad mode: no_grad, enable_grad, inference_mode and set_grad_enabled, each usable as a context
manager and as a decorator, as in torch."""
from __future__ import annotations

import functools

from .state import MODE


def is_grad_enabled() -> bool:
    return MODE.enabled


class _GradMode:
    """Sets grad mode to `self.mode` inside a `with` block or a decorated function."""

    mode = True

    def __enter__(self):
        self._prev = MODE.enabled
        MODE.enabled = self.mode
        return self

    def __exit__(self, *exc) -> None:
        MODE.enabled = self._prev

    def __call__(self, fn):
        mode = self.mode

        @functools.wraps(fn)
        def wrapped(*args, **kwargs):            # (the previous mode kept per call: reentrant)
            prev = MODE.enabled
            MODE.enabled = mode
            try:
                return fn(*args, **kwargs)
            finally:
                MODE.enabled = prev
        return wrapped


class no_grad(_GradMode):  # noqa: N801  (torch's name)
    mode = False


class enable_grad(_GradMode):  # noqa: N801
    mode = True


class inference_mode(_GradMode):  # noqa: N801
    """As no_grad here (lazy tensors carry no version counters to skip)."""

    def __init__(self, mode: bool = True):
        self.mode = not mode


class set_grad_enabled(_GradMode):  # noqa: N801
    """Takes effect at once (`lt.set_grad_enabled(False)` as a statement), and restores the
    previous mode at the end of a `with` block."""

    def __init__(self, mode: bool):
        self._prev = MODE.enabled
        self.mode = bool(mode)
        MODE.enabled = self.mode

    def __enter__(self):
        return self

    def __exit__(self, *exc) -> None:
        MODE.enabled = self._prev

    def __call__(self, fn):
        MODE.enabled = self._prev               # as a decorator it applies only inside fn
        return super().__call__(fn)

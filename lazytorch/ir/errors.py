"""Error messages that name the op, the shapes and dtypes involved, and what would be valid."""
from __future__ import annotations

from typing import Any


def describe(value: Any) -> str:
    """`f32[2, 3]` for a node or tensor, repr for anything else."""
    node = getattr(value, "node", value)
    if hasattr(node, "shape") and hasattr(node, "dtype") and hasattr(node.dtype, "short"):
        kind = "scalar " if getattr(node, "op", None) == "scalar" else ""
        return f"{kind}{node.dtype.short}[{', '.join(map(str, node.shape))}]"
    return repr(value)


def given(**args: Any) -> dict[str, Any]:
    """The arguments an error message shows: those passed, leaving out optional ones left as None."""
    return {name: value for name, value in args.items() if value is not None}


def op_error(exc: type[Exception], op: str, message: str, args: dict[str, Any] | None = None,
             valid: str | None = None) -> Exception:
    """Build (not raise) an exception of type `exc` with a message in the project's one format."""
    text = f"{op}: {message}"
    if args:
        text += " (got " + ", ".join(f"{k}={describe(v)}" for k, v in args.items()) + ")"
    if valid:
        text += f"; {valid}"
    return exc(text)


def wrap_dim(op: str, dim: int, ndim: int, args: dict[str, Any] | None = None) -> int:
    """torch's maybe_wrap_dim: negative dims count from the end; 0-d tensors accept 0 and -1."""
    bound = max(ndim, 1)
    if not -bound <= dim < bound:
        raise op_error(IndexError, op, f"dimension {dim} is out of range for a {ndim}-d tensor", args,
                       f"valid dims are {-bound}..{bound - 1}")
    return dim % bound


class OutOfMemoryError(RuntimeError):
    """torch.OutOfMemoryError: a device has no room for a buffer (the cuda backend raises it after
    releasing its cache)."""

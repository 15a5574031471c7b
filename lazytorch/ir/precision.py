"""TF32: torch's flags for float32 products, read when an op is called, and the attribute that
records their decision in the graph.

On Ampere and later GPUs a float32 product may multiply in TF32 (operands rounded to a 10-bit
mantissa, the sums accumulated in float32: relative errors up to ~1e-3 instead of ~1e-6, on the
tensor cores).  torch decides by two flags, read when an op runs: `torch.backends.cudnn.allow_tf32` for
convolutions (default True) and `torch.backends.cuda.matmul.allow_tf32` for every other product
(default False; `torch.set_float32_matmul_precision("high")` or `"medium"` turns it on,
`"highest"` off: one setting seen two ways).  Both live here, their one home, so that the IR reads
them without importing the user-facing modules above it; `lazytorch.backends.cudnn`,
`lazytorch.backends.cuda.matmul` and `lt.set_float32_matmul_precision` read and write them here.

The builder of a product reads its flag when the op is called and puts the decision in the graph:
a float32 `matmul` node, and a float32 node of a composite the passes turn into products
(`FLAG_OF`: convolution, linear, attention), gets `{"tf32": True}` in its attrs where its flag
allows, nothing otherwise (with the flags off a graph is the one built before they had any
effect).  So the graph cache keys on it: toggling a flag compiles a new plan instead of reusing one
built under the other value.  What is built later from such a node inherits the node's decision
rather than reading the flags again: the products a pass makes of a convolution, linear or
attention (passes/decompositions) and the gradient's products (autograd/derivatives.py, from the
recorded node).  Products the library makes for ops torch computes without a GEMM (one-hot
scatters of gradients, interpolation weights) never use TF32.  A backend with a TF32 GEMM follows
the attribute (cuda: cuBLAS's CUBLAS_COMPUTE_32F_FAST_TF32, runtime/cuda_driver.py
`compute_type`); the others ignore it.

Builds are memoized by their arguments (ir/replay.py), and these flags are no argument: a change
of what a flag allows forgets every recording (made under the old value), and lt.compile keys
its traces on `state()`.
"""
from __future__ import annotations

import warnings
from typing import Any, Mapping

from . import dtypes as D
from . import replay
from .node import note_build_effect

ATTR = "tf32"
# torch.set_float32_matmul_precision's settings; all but "highest" allow TF32
PRECISIONS = ("highest", "high", "medium")
# torch's defaults: cuDNN's flag a bool, the matmul flag as the precision it is a view of
_FLAGS: dict[str, Any] = {"cudnn": True, "matmul": "highest"}
# The composites whose node carries the decision for the products the passes make of it, and the
# flag each follows (the matmul primitive's own builders read "matmul": ir/build_linalg.py)
FLAG_OF = {"convolution": "cudnn", "linear": "matmul", "scaled_dot_product_attention": "matmul"}


def allowed(flag: str) -> bool:
    """Whether torch's flag `flag` lets float32 products compute in TF32 now: "cudnn"
    (convolutions) or "matmul" (every other product)."""
    value = _FLAGS[flag]
    return value is True or value in PRECISIONS[1:]


_STATE = [tuple(allowed(f) for f in _FLAGS)]     # (state(), kept current by _set)


def state() -> tuple[bool, ...]:
    """What each flag allows now, in _FLAGS' order (lt.compile's traces key on it: every call reads it)."""
    return _STATE[0]


def attrs(allow: bool, dtype: D.DType) -> dict[str, Any]:
    """A product's node's attrs entry for its decision: only float32 products have a TF32 form."""
    return {ATTR: True} if allow and dtype is D.float32 else {}


def tf32(attributes: Mapping[str, Any]) -> bool:
    """The decision recorded in a node's attrs (or a gradient rule's arguments, which hold them)."""
    return attributes.get(ATTR, False)


def _set(flag: str, value: Any) -> None:
    before = state()
    _FLAGS[flag] = value
    _STATE[0] = tuple(allowed(f) for f in _FLAGS)
    if state() != before:
        # recordings of builds hold nodes with the old decision; a build running meanwhile (another
        # thread's) read either value, so it is not recorded either (ir/replay.py Memo.learn)
        note_build_effect()
        replay.forget()


# ---------------------------------------------------------------- the user-facing settings

# what `allow_tf32 = allow` sets each flag to (torch: the matmul precision "high" or "highest")
_ALLOWING = {"cudnn": {True: True, False: False}, "matmul": {True: "high", False: "highest"}}


def allow_tf32(flag: str) -> property:
    """The `allow_tf32` attribute of torch's flag `flag` where lazytorch.backends spells it
    (`cudnn.allow_tf32`, `cuda.matmul.allow_tf32`), read and written here."""
    return property(lambda _: allowed(flag), lambda _, allow: _set(flag, _ALLOWING[flag][bool(allow)]),
                    doc=f"Whether torch's {flag} flag lets float32 products compute in TF32 (ir/precision.py).")


def get_float32_matmul_precision() -> str:
    """torch.get_float32_matmul_precision(): "highest" (no TF32, the default), "high" or "medium"."""
    return _FLAGS["matmul"]


def set_float32_matmul_precision(precision: str) -> None:
    """torch.set_float32_matmul_precision: "high" and "medium" let float32 products other than
    convolutions compute in TF32 (lazytorch has no bfloat16 form of "medium"), "highest" does not.
    Another value warns and changes nothing, as in torch."""
    if precision not in PRECISIONS:
        warnings.warn(f"{precision} is not one of 'highest', 'high', or 'medium'; the current "
                      "set_float32_matmul_precision call has no effect.", stacklevel=2)
        return
    _set("matmul", precision)

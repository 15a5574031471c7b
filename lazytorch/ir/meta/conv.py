"""Meta rules of the convolution primitives: `convolution` (forward and transposed, any number of
spatial dims, groups) and `fold` (col2im).  The functionals built on them (conv2d, pooling, ...)
check their own arguments in ir/build_conv.py and call these with batched, normalised arguments.
"""
from __future__ import annotations

import math

from ..dtypes import DType
from ..errors import given, op_error
from ..node import Node
from ..registry import OpDef
from . import Args, Shape, rule


def ints(v, n: int) -> tuple[int, ...]:
    """An int or a sequence of ints as an n-tuple (a single value repeats, as torch's _ntuple)."""
    if isinstance(v, int):
        return (int(v),) * n
    v = tuple(int(x) for x in v)
    return v * n if len(v) == 1 else v


def _sizes(values) -> str:
    return " x ".join(map(str, values))


@rule("convolution")
def convolution(op: OpDef, a: Args) -> tuple[Shape, DType]:
    x, w, b = a["self"], a["weight"], a["bias"]
    args = given(input=x, weight=w, bias=b)
    nd = x.ndim - 2
    if nd < 1 or w.ndim != x.ndim:
        raise op_error(RuntimeError, op.name, f"expected a batched input [N, C, *spatial] and a weight with as many "
                       f"dims, got input of size {list(x.shape)} and weight of size {list(w.shape)}", args)
    for name in ("stride", "padding", "dilation", "output_padding"):
        a[name] = ints(a[name], nd)
        if len(a[name]) != nd:
            raise op_error(RuntimeError, op.name, f"{name} has {len(a[name])} values, expected {nd}", args)
    stride, padding, dilation, out_pad, groups = (a[k] for k in ("stride", "padding", "dilation",
                                                                 "output_padding", "groups"))
    if min(stride) <= 0:
        raise op_error(RuntimeError, op.name, "non-positive stride is not supported", args)
    if min(padding) < 0:
        raise op_error(RuntimeError, op.name, "negative padding is not supported", args)
    if min(dilation) <= 0:
        raise op_error(RuntimeError, op.name, "dilation should be greater than zero", args)
    if groups <= 0:
        raise op_error(RuntimeError, op.name, "non-positive groups is not supported", args)
    if x.dtype is not w.dtype or (b is not None and b.dtype is not x.dtype):
        raise op_error(RuntimeError, op.name, f"expected input, weight and bias of one dtype, got "
                       f"{', '.join(f'{k}={v.dtype.name}' for k, v in args.items())}", args)
    if x.dtype.is_bool:
        raise op_error(RuntimeError, op.name, "dtype bool is not supported", args)
    kernel = tuple(w.shape[2:])
    if a["transposed"]:
        return _transposed_shape(op.name, x, w, b, stride, padding, dilation, out_pad, groups, args), x.dtype
    if w.shape[0] % groups:
        raise op_error(RuntimeError, op.name, f"Given groups={groups}, expected weight to be divisible by {groups} at "
                       f"dimension 0, but got weight of size {list(w.shape)} instead", args)
    if x.shape[1] != w.shape[1] * groups:
        raise op_error(RuntimeError, op.name, f"Given groups={groups}, weight of size {list(w.shape)}, expected "
                       f"input{list(x.shape)} to have {w.shape[1] * groups} channels, but got {x.shape[1]} channels "
                       "instead", args)
    if b is not None and tuple(b.shape) != (w.shape[0],):
        raise op_error(RuntimeError, op.name, f"Given weight of size {list(w.shape)}, expected bias to be 1-dimensional "
                       f"with {w.shape[0]} elements, but got bias of size {list(b.shape)} instead", args)
    padded = [s + 2 * p for s, p in zip(x.shape[2:], padding)]
    effective = [d * (k - 1) + 1 for k, d in zip(kernel, dilation)]
    if any(e > s for e, s in zip(effective, padded)):
        raise op_error(RuntimeError, op.name, f"Calculated padded input size per channel: ({_sizes(padded)}). Kernel "
                       f"size: ({_sizes(effective)}). Kernel size can't be greater than actual input size", args)
    out = tuple((s - e) // st + 1 for s, e, st in zip(padded, effective, stride))
    return (x.shape[0], w.shape[0]) + out, x.dtype


def _transposed_shape(op: str, x: Node, w: Node, b, stride, padding, dilation, out_pad, groups, args) -> Shape:
    if w.shape[0] != x.shape[1]:
        raise op_error(RuntimeError, op, f"Given transposed=1, weight of size {list(w.shape)}, expected input"
                       f"{list(x.shape)} to have {w.shape[0]} channels, but got {x.shape[1]} channels instead", args)
    if x.shape[1] % groups:
        raise op_error(RuntimeError, op, f"Given groups={groups}, expected input channels {x.shape[1]} to be "
                       f"divisible by {groups}", args)
    channels = w.shape[1] * groups
    if b is not None and tuple(b.shape) != (channels,):
        raise op_error(RuntimeError, op, f"Given transposed=1, weight of size {list(w.shape)}, expected bias to be "
                       f"1-dimensional with {channels} elements, but got bias of size {list(b.shape)} instead", args)
    if any(p >= s and p >= d for p, s, d in zip(out_pad, stride, dilation)):
        raise op_error(RuntimeError, op, f"output padding must be smaller than either stride or dilation, but got "
                       f"output_padding {list(out_pad)}, stride {list(stride)}, dilation {list(dilation)}", args)
    out = tuple((s - 1) * st - 2 * p + d * (k - 1) + op_ + 1
                for s, st, p, d, k, op_ in zip(x.shape[2:], stride, padding, dilation, w.shape[2:], out_pad))
    if min(out) <= 0:
        raise op_error(RuntimeError, op, f"the calculated output size ({_sizes(out)}) is too small", args,
                       "reduce padding or grow the input")
    return (x.shape[0], channels) + out


def fold_blocks(op: str, output_size, kernel, dilation, padding, stride, args) -> tuple[int, ...]:
    """The number of sliding blocks along each spatial dim (unfold's L factors), checked."""
    for name, values, least in (("kernel_size", kernel, 1), ("dilation", dilation, 1), ("stride", stride, 1),
                                ("padding", padding, 0)):
        if len(values) != 2 or min(values) < least:
            raise op_error(RuntimeError, op, f"{name} must be 2 values >= {least}, got {list(values)}", args)
    blocks = tuple((s + 2 * p - d * (k - 1) - 1) // st + 1
                   for s, p, d, k, st in zip(output_size, padding, dilation, kernel, stride))
    if min(blocks) < 1:
        raise op_error(RuntimeError, op, f"calculated shape of the array of sliding blocks as {list(blocks)}, but its "
                       "components must be at least one", args)
    return blocks


@rule("fold")
def fold(op: OpDef, a: Args) -> tuple[Shape, DType]:
    x: Node = a["self"]
    args = {"input": x}
    for name in ("output_size", "kernel_size", "dilation", "padding", "stride"):
        a[name] = ints(a[name], 2)
    size, kernel = a["output_size"], a["kernel_size"]
    blocks = fold_blocks(op.name, size, kernel, a["dilation"], a["padding"], a["stride"], args)
    if x.ndim not in (2, 3):
        raise op_error(RuntimeError, op.name, f"Expected 2D or 3D (batch mode) tensor for input, but got input of "
                       f"size {list(x.shape)}", args)
    cols, length = x.shape[-2:]
    k = math.prod(kernel)
    if cols % k:
        raise op_error(RuntimeError, op.name, f"Expected size of input's dimension {x.ndim - 2} to be divisible by the "
                       f"product of kernel_size, but got input.size({x.ndim - 2})={cols} and kernel_size={list(kernel)}",
                       args)
    if length != math.prod(blocks):
        raise op_error(RuntimeError, op.name, f"Given output_size={list(size)}, kernel_size={list(kernel)}, "
                       f"dilation={list(a['dilation'])}, padding={list(a['padding'])}, stride={list(a['stride'])}, "
                       f"expected size of input's dimension {x.ndim - 1} to match the calculated number of sliding "
                       f"blocks {blocks[0]} * {blocks[1]} = {math.prod(blocks)}, but got input.size({x.ndim - 1})="
                       f"{length}", args)
    if x.dtype.is_bool:
        raise op_error(RuntimeError, op.name, "dtype bool is not supported", args)
    return tuple(x.shape[:-2]) + (cols // k,) + tuple(size), x.dtype

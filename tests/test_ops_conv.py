"""Convolution, pooling and resampling (lt.nn.functional) against torch, on every backend.

The cases cover the options (stride, padding forms, dilation, groups, ceil_mode, ...), batch 1 and
unbatched inputs, size-1 spatial dims, non-contiguous views and the float dtypes torch's CPU kernels
accept.  Each family's cases are evaluated as one program per backend (tests/oracle_batch.py), so
the C backend compiles once per family; on metal-emu, where every kernel is its own g++ compile,
cases marked emu=False (variants of a kernel shape another case already covers) are left out.
"""
from __future__ import annotations

import re

import numpy as np
import pytest
import torch

import lazytorch as lt
from lazytorch.ir.node import Node
from oracle import check, check_error, sample
from oracle_batch import Case, check_batch


def fn(m):
    return m.nn.functional


# ---------------------------------------------------------------- convolution

def _conv_case(i, name, xs, ws, kw, layout="contiguous", dtype="float32", emu=True):
    channels_out = ws[1] * kw.get("groups", 1) if "transpose" in name else ws[0]
    x, w = sample(xs, dtype, layout=layout, seed=i), sample(ws, dtype, seed=i + 100)
    b = sample((channels_out,), dtype, seed=i + 200)
    tol = dict(atol=2e-2, rtol=1e-2) if dtype == "float16" else dict(atol=1e-4, rtol=1e-4) if dtype == "float32" else {}
    return Case(f"{i}:{name}{kw}", lambda m, x, w, b: m.relu(getattr(fn(m), name)(x, w, b, **kw)), (x, w, b), tol, emu)


CONV = [
    ("conv2d", (2, 3, 7, 6), (4, 3, 3, 3), dict(stride=2, padding=1)),
    ("conv2d", (1, 4, 6, 5), (6, 2, 2, 3), dict(padding=(1, 0), dilation=(2, 1), groups=2), "transposed", "float32",
     False),
    ("conv2d", (3, 5, 5), (2, 3, 2, 2), dict(padding="same"), "contiguous", "float32", False),   # unbatched, asymmetric
    ("conv2d", (2, 2, 1, 4), (3, 2, 1, 3), dict(padding="valid", stride=(1, 2)), "contiguous", "float64"),
    ("conv2d", (1, 2, 5, 5), (2, 2, 3, 3), dict(padding="same", dilation=2), "contiguous", "float16"),
    ("conv1d", (2, 4, 9), (6, 2, 3), dict(stride=2, padding=2, groups=2), "strided", "float32", False),
    # lowered to windows and a product (passes/decompositions/conv.py): a 1x1 convolution's columns
    # are its input (no copy; strided: a copy), a depthwise one is a sum per window, a depthwise
    # multiplier (two outputs per group) a product per group
    ("conv2d", (2, 6, 4, 5), (5, 6, 1, 1), {}, "strided"),
    ("conv2d", (2, 6, 5, 5), (4, 6, 1, 1), dict(stride=2), "contiguous", "float32", False),
    ("conv2d", (2, 4, 6, 6), (4, 1, 3, 3), dict(padding=1, groups=4)),
    ("conv2d", (1, 3, 5, 4), (6, 1, 3, 2), dict(stride=(2, 1), groups=3), "contiguous", "float64", False),
    ("conv_transpose2d", (2, 4, 3, 4), (4, 3, 3, 2), dict(stride=2, padding=1, output_padding=1)),
    ("conv_transpose2d", (1, 4, 3, 3), (4, 1, 2, 2), dict(groups=2, dilation=2), "transposed", "float64"),
    ("conv_transpose1d", (3, 5), (3, 2, 3), dict(stride=3, padding=1), "contiguous", "float32", False),   # unbatched
]


def test_conv(backend):
    cases = [_conv_case(i, *c) for i, c in enumerate(CONV)]
    cases.append(Case("int64 conv2d", lambda m, x, w: fn(m).conv2d(x, w, stride=2),
                      (sample((1, 2, 4, 4), "int64", low=-4, high=4), sample((3, 2, 2, 2), "int64", low=-3, high=3)),
                      emu=False))
    cases.append(Case("conv3d", lambda m, x, w: fn(m).conv3d(x, w, padding=1),
                      (sample((1, 2, 3, 4, 3)), sample((2, 2, 2, 2, 2), seed=1)), dict(atol=1e-4), emu=False))
    cases.append(Case("conv_transpose3d", lambda m, x, w: fn(m).conv_transpose3d(x, w, stride=(1, 2, 1), padding=1),
                      (sample((1, 2, 3, 3, 2)), sample((2, 3, 2, 3, 2), seed=1)), dict(atol=1e-4), emu=False))
    cases.append(Case("empty batch", lambda m, x, w: fn(m).conv2d(x, w), (sample((0, 2, 4, 4)), sample((3, 2, 2, 2))),
                      emu=False))
    assert check_batch(cases) >= 3


# conv2d(x, w, b) then relu: launches on cpu and metal-emu, where a convolution is its input's
# windows copied as columns (a pointwise kernel; with padding, on cpu the padded input first, one
# kernel, on metal the pad read through its mask: passes/guard.py), one product, and the bias
# with the relu after it (one kernel, run inside the product on cpu); a depthwise convolution
# reduces its windows, so its pad is written on every backend
PAD = "kernel (cpu)"
CONV_PLANS = [
    ("3x3", (2, 3, 16, 16), (8, 3, 3, 3), {}, ["kernel", "library", "kernel"]),
    ("3x3 padded", (2, 3, 16, 16), (8, 3, 3, 3), dict(padding=1), [PAD, "kernel", "library", "kernel"]),
    ("padded, strided, dilated", (2, 3, 16, 16), (8, 3, 3, 2), dict(padding=(2, 1), stride=2, dilation=(1, 2)),
     [PAD, "kernel", "library", "kernel"]),
    ("depthwise padded", (2, 8, 16, 16), (8, 1, 3, 3), dict(groups=8, padding=1), ["kernel", "kernel"]),
    ("1x1: its input is the columns", (2, 3, 16, 16), (8, 3, 1, 1), {}, ["library", "kernel"]),
    ("1x1 strided", (2, 3, 16, 16), (8, 3, 1, 1), dict(stride=2), ["kernel", "library", "kernel"]),
    ("depthwise: one reduction", (2, 8, 16, 16), (8, 1, 3, 3), dict(groups=8), ["kernel"]),
    ("two outputs per group", (2, 4, 16, 16), (8, 1, 3, 3), dict(groups=4), ["kernel", "library", "kernel"]),
]


@pytest.mark.parametrize("case", CONV_PLANS, ids=[c[0] for c in CONV_PLANS])
def test_conv_launches(case):
    from lazytorch.realize import kernel_plan
    _, xs, ws, kw, listed = case
    x, w, b = lt.randn(*xs), lt.randn(*ws), lt.randn(ws[0])
    y = lt.relu(lt.nn.functional.conv2d(x, w, b, **kw))
    for backend in ("cpu", "metal-emu"):
        kinds = [k.split()[0] for k in listed if k != PAD or backend == "cpu"]
        plan = kernel_plan([y], backend)
        assert [launch.kind for launch in plan.launches] == kinds, (backend, plan)
        assert all(n.op != "convolution" for launch in plan.launches for n in launch.nodes)
        if "library" in kinds:
            assert plan.launches[kinds.index("library")].nodes[-1].op == "matmul"
    # the reference backend runs the primitive whole (numpy, float64): the independent check
    plan = kernel_plan([y], "reference")
    assert [launch.kind for launch in plan.launches] == ["reference", "kernel"]
    assert plan.launches[0].nodes[-1].op == "convolution"
    np.testing.assert_allclose(y.numpy(), torch.relu(torch.nn.functional.conv2d(
        *(torch.from_numpy(t.numpy()) for t in (x, w, b)), **kw)).numpy(), rtol=1e-4, atol=1e-4)


# conv_transpose2d(x, w, b) then relu: one product (the columns), col2im summing them into the
# output: strided, the slices of each stride residue (one kernel of a phase each) and their
# interleaving (one kernel), then the bias and relu with the crop of the padding (one kernel); at
# stride 1 one phase, summed with the bias and relu where no padding is cropped; a batch of few
# positions joins the product's columns (a copy of x first)
CONV_TRANSPOSE_PLANS = [
    ("strided, padded", (1, 4, 5, 5), (4, 3, 3, 3), dict(stride=2, padding=1, output_padding=1),
     ["library", "kernel", "kernel", "kernel"]),
    ("grouped, dilated, batch in columns", (2, 4, 5, 5), (4, 2, 2, 3), dict(groups=2, dilation=(2, 1)),
     ["kernel", "library", "kernel"]),
    ("many positions", (2, 4, 17, 16), (4, 3, 4, 4), dict(stride=2, padding=1),
     ["library", "kernel", "kernel", "kernel"]),
    # windows that do not overlap: col2im permutes the product (ir/build_conv.py
    # _col2im_disjoint), a view of it for one input position, else one copy (padded at gaps)
    ("one input position", (2, 5, 1, 1), (5, 3, 4, 4), {}, ["library", "kernel"]),
    ("stride = kernel", (2, 4, 17, 16), (4, 3, 2, 2), dict(stride=2), ["library", "kernel", "kernel"]),
    ("gaps between windows", (2, 4, 17, 16), (4, 3, 2, 2), dict(stride=3, padding=1, output_padding=2),
     ["library", "kernel", "kernel"]),
]


@pytest.mark.parametrize("case", CONV_TRANSPOSE_PLANS, ids=[c[0] for c in CONV_TRANSPOSE_PLANS])
def test_conv_transpose_launches(case):
    from lazytorch.realize import kernel_plan
    _, xs, ws, kw, kinds = case
    x, w, b = lt.randn(*xs), lt.randn(*ws), lt.randn(ws[1] * kw.get("groups", 1))
    y = lt.relu(lt.nn.functional.conv_transpose2d(x, w, b, **kw))
    for backend in ("cpu", "metal-emu"):
        plan = kernel_plan([y], backend)
        assert [launch.kind for launch in plan.launches] == kinds, (backend, plan)
        assert all(n.op != "convolution" for launch in plan.launches for n in launch.nodes)
    tx, tw, tb = (torch.from_numpy(t.numpy()) for t in (x, w, b))
    want = torch.relu(torch.nn.functional.conv_transpose2d(tx, tw, tb, **kw))
    np.testing.assert_allclose(y.numpy(), want.numpy(), rtol=1e-4, atol=1e-4)


PADDED_WINDOWS = [   # (x's shape, or a view of it: "t" transposed, "s" a narrowed slice; kernel, stride, dilation, padding)
    ((2, 3, 5, 6), "", (3, 3), (1, 1), (1, 1), (1, 1)),
    ((1, 2, 4, 5), "t", (2, 3), (2, 1), (1, 2), (2, 1)),     # reads before and after the whole buffer
    ((1, 2, 7, 5), "s", (3, 2), (1, 2), (2, 1), (3, 0)),
    ((2, 3, 9), "", (4,), (2,), (1,), (3,)),
]


@pytest.mark.parametrize("case", range(len(PADDED_WINDOWS)))
def test_padded_windows(backend, case):
    """ir/build_conv.py padded_windows, in both dim orders: the windows of the padded input without
    the padded copy, its clamped view read inside the buffer (the reference executor clips its
    indices, the kernels clamp them) and masked, against numpy's windows of np.pad's copy."""
    from numpy.lib.stride_tricks import sliding_window_view

    from lazytorch.ir.build_conv import padded_windows
    shape, layout, kernel, stride, dilation, padding = PADDED_WINDOWS[case]
    nd = len(kernel)
    full = np.random.default_rng(case).standard_normal(shape).astype(np.float32)
    x = {"": full, "t": full.swapaxes(-1, -2), "s": full[..., 1:-1, :]}[layout]
    padded = np.pad(x, [(0, 0)] * (x.ndim - nd) + [(p, p) for p in padding], constant_values=-7.0)
    span = [d * (k - 1) + 1 for k, d in zip(kernel, dilation)]
    win = sliding_window_view(padded, span, axis=tuple(range(x.ndim - nd, x.ndim)))
    win = win[(Ellipsis,) + tuple(slice(None, None, s) for s in stride) + tuple(slice(None, None, d) for d in dilation)]
    t = lt.from_numpy(full)
    t = {"": t, "t": t.transpose(-1, -2), "s": t[..., 1:-1, :]}[layout]
    for first in (False, True):
        node = padded_windows(t.node, kernel, stride, dilation, padding, -7.0, kernel_first=first)
        want = np.moveaxis(win, list(range(x.ndim, x.ndim + nd)), list(range(x.ndim - nd, x.ndim))) if first else win
        np.testing.assert_array_equal(lt.Tensor(node).numpy(), want)
    # the kernel reads the clamped view only where the mask holds (a guarded load), or clips its index
    from lazytorch.codegen.lower import lower
    from lazytorch.codegen.render import render
    from lazytorch.realize import kernel_plan
    node = padded_windows(t.node, kernel, stride, dilation, padding, -7.0)
    (pad, *_) = kernel_plan([lt.Tensor(node)], "cpu").launches
    for dialect in ("c", "metal", "cuda"):
        assert re.search(r"\(v\d+ \? a\d+\[", render(lower(pad), dialect).source), dialect
    unguarded = next(n for n in pad.nodes if "clamp" in n.attrs)                  # read without the where
    (alone,) = kernel_plan([lt.Tensor(Node("contiguous", (unguarded,), {}, unguarded.shape, unguarded.dtype))],
                           "cpu").launches
    last = full.size - 1
    for dialect in ("c", "metal", "cuda"):
        assert f") > {last} ? {last} : (" in render(lower(alone), dialect).source, dialect


CONV_ERRORS = [
    (lambda m, x: fn(m).conv2d(x.flatten(0, 2), x[:1]), RuntimeError, ("conv2d", "Expected 3D (unbatched) or 4D")),
    (lambda m, x: fn(m).conv2d(x, m.ones(4, 2, 3, 3)), RuntimeError, ("expected input[2, 3, 5, 5] to have 2 channels",)),
    (lambda m, x: fn(m).conv2d(x, m.ones(4, 3, 6, 6)), RuntimeError, ("Kernel size can't be greater",)),
    (lambda m, x: fn(m).conv2d(x, m.ones(3, 1, 3, 3), groups=2), RuntimeError, ("groups=2",)),
    (lambda m, x: fn(m).conv2d(x, m.ones(4, 3, 3, 3), padding="same", stride=2), RuntimeError, ("padding='same'",)),
    (lambda m, x: fn(m).conv2d(x, m.ones(4, 3, 3, 3), padding="full"), RuntimeError, ("Invalid padding string",)),
    (lambda m, x: fn(m).conv2d(x, m.ones(4, 3, 3, 3), m.ones(3)), RuntimeError, ("bias", "[3]")),
    (lambda m, x: fn(m).conv2d(x, m.ones(4, 3, 3, 3), stride=0), RuntimeError, ("non-positive stride",)),
    (lambda m, x: fn(m).conv2d(x, m.ones(4, 3, 3, 3, dtype=m.float64)), RuntimeError, ("float64",)),
    (lambda m, x: fn(m).conv_transpose2d(x, m.ones(3, 2, 3, 3), output_padding=1), RuntimeError,
     ("output padding must be smaller",)),
]


@pytest.mark.parametrize("case", range(len(CONV_ERRORS)))
def test_conv_errors(case):
    call, exc, match = CONV_ERRORS[case]
    x = sample((2, 3, 5, 5))
    with pytest.raises(exc):
        call(torch, x.torch)
    check_error(call, x, exc=exc, match=match)


# ---------------------------------------------------------------- pooling

def _nan_plane() -> np.ndarray:
    t = np.arange(32.0, dtype=np.float32).reshape(1, 2, 4, 4) % 7
    t[0, 0, 1, 1] = np.nan
    return t


POOL = [
    ("max_pool2d", (2, 3, 7, 6), dict(kernel_size=3, stride=2), "contiguous", "float32"),
    ("max_pool2d", (1, 2, 6, 7), dict(kernel_size=(3, 2), stride=(2, 1), padding=1, dilation=(1, 2), ceil_mode=True),
     "transposed", "float32"),
    ("max_pool2d", (3, 1, 5), dict(kernel_size=(1, 2)), "contiguous", "float64"),               # unbatched, H = 1
    ("max_pool1d", (2, 3, 9), dict(kernel_size=3, stride=2, padding=1, ceil_mode=True), "strided", "float16"),
    ("max_pool2d", (1, 2, 4, 4), dict(kernel_size=2), "contiguous", "int32"),
    ("max_pool2d", (2, 2, 6, 5), dict(kernel_size=3, stride=2, padding=1, return_indices=True), "transposed", "float32"),
    ("max_pool1d", (2, 3, 7), dict(kernel_size=2, return_indices=True), "contiguous", "float32"),
    ("avg_pool2d", (2, 3, 7, 6), dict(kernel_size=3, stride=2, padding=1), "contiguous", "float32"),
    ("avg_pool2d", (1, 2, 5, 6), dict(kernel_size=(2, 3), padding=1, ceil_mode=True, count_include_pad=False),
     "transposed", "float32"),
    ("avg_pool2d", (2, 2, 4, 4), dict(kernel_size=2, divisor_override=3), "contiguous", "float16"),
    ("avg_pool1d", (2, 3, 8), dict(kernel_size=3, stride=2, padding=1, ceil_mode=True), "contiguous", "float64"),
    ("adaptive_avg_pool2d", (2, 3, 8, 6), dict(output_size=(4, 3)), "transposed", "float32"),    # even: a plain pool
    ("adaptive_avg_pool2d", (1, 2, 7, 5), dict(output_size=(3, None)), "transposed", "float32"),  # uneven: masked
    ("adaptive_avg_pool1d", (2, 3, 7), dict(output_size=3), "contiguous", "float32"),
    ("adaptive_max_pool2d", (2, 2, 7, 5), dict(output_size=(3, 2), return_indices=True), "transposed", "float32"),
    ("adaptive_max_pool2d", (3, 6, 6), dict(output_size=1, return_indices=True), "contiguous", "float32"),
    ("max_pool3d", (1, 2, 4, 5, 3), dict(kernel_size=2, padding=1, return_indices=True), "transposed", "float32"),
    ("avg_pool3d", (2, 1, 3, 4, 4), dict(kernel_size=(1, 2, 3), count_include_pad=False, padding=(0, 1, 1)),
     "contiguous", "float32"),
    ("adaptive_avg_pool3d", (1, 2, 5, 4, 3), dict(output_size=(2, 2, 2)), "contiguous", "float32"),
    ("interpolate", (2, 3, 7, 5), dict(size=(3, 4), mode="area"), "transposed", "float32"),
    ("lp_pool2d", (2, 3, 7, 6), dict(norm_type=2.0, kernel_size=(2, 3), stride=2, ceil_mode=True), "contiguous",
     "float32"),
    ("lp_pool1d", (2, 3, 9), dict(norm_type=float("inf"), kernel_size=3), "contiguous", "float32"),
]
POOL_EMU = {0, 5, 7, 11, 14}               # one of each kernel shape on metal-emu


def test_pool(backend):
    cases = [Case(f"{i}:{name}{kw}", lambda m, x, name=name, kw=kw: getattr(fn(m), name)(x, **kw),
                  (sample(xs, dtype, layout=layout, seed=i, low=-50 if dtype == "int32" else -3,
                          high=50 if dtype == "int32" else 3),), emu=i in POOL_EMU)
             for i, (name, xs, kw, layout, dtype) in enumerate(POOL)]
    cases.append(Case("max_pool2d NaN", lambda m, x: fn(m).max_pool2d(x, 2, return_indices=True),
                      (sample((1, 2, 4, 4), values=_nan_plane()),), emu=False))
    assert check_batch(cases) >= 5


@pytest.mark.parametrize("name", ["max_pool2d", "avg_pool2d"])
def test_pool_is_one_kernel(name):
    x = lt.randn(2, 8, 16, 16)
    plan = lt.kernel_plan(getattr(lt.nn.functional, name)(x, 3, 2))
    assert [launch.kind for launch in plan.launches] == ["kernel"], plan
    assert plan.launches[0].pattern == "reduce"
    # a non-contiguous input is read through its strides: still one kernel
    plan = lt.kernel_plan(getattr(lt.nn.functional, name)(x.transpose(2, 3), 2))
    assert [launch.kind for launch in plan.launches] == ["kernel"], plan


POOL_ERRORS = [
    (lambda m, x: fn(m).max_pool2d(x, 3, padding=2), RuntimeError, ("max_pool2d", "pad should be at most half")),
    (lambda m, x: fn(m).max_pool2d(x[:, :, :2, :2], 3), RuntimeError, ("Output size is too small",)),
    (lambda m, x: fn(m).max_pool2d(x[0, 0], 3), RuntimeError, ("3D or 4D",)),
    (lambda m, x: fn(m).avg_pool2d(x, 2, stride=0), RuntimeError, ("stride must be greater than zero",)),
    (lambda m, x: fn(m).avg_pool2d(x, 2, divisor_override=0), RuntimeError, ("divisor must be not zero",)),
    (lambda m, x: fn(m).pixel_shuffle(x, 2), RuntimeError, ("pixel_shuffle", "divisible by 4")),
    (lambda m, x: fn(m).fold(x.flatten(2), (5, 5), 2), RuntimeError, ("fold", "divisible by the product")),
    (lambda m, x: fn(m).interpolate(x), ValueError, ("size or scale_factor",)),
    (lambda m, x: fn(m).interpolate(x, size=2, scale_factor=2.0), ValueError, ("only one",)),
]


@pytest.mark.parametrize("case", range(len(POOL_ERRORS)))
def test_pool_errors(case):
    call, exc, match = POOL_ERRORS[case]
    x = sample((2, 3, 5, 5))
    with pytest.raises(exc):
        call(torch, x.torch)
    check_error(call, x, exc=exc, match=match)


def test_unsupported_interpolation_is_named():
    check_error(lambda m, x: fn(m).interpolate(x, size=2, mode="bilinear", antialias=True), sample((1, 2, 4, 4)),
                exc=NotImplementedError, match=("interpolate", "antialias"))


# ---------------------------------------------------------------- unfold, fold, pixel shuffle, pad, interpolate

INTERP = [
    ((2, 3, 5, 4), dict(size=(7, 3), mode="nearest")),
    ((1, 2, 4, 5), dict(scale_factor=2.0, mode="nearest")),
    ((1, 2, 6, 5), dict(scale_factor=(0.5, 1.7), mode="nearest-exact")),
    ((2, 2, 5, 4), dict(size=(8, 3), mode="bilinear", align_corners=False)),
    ((1, 3, 4, 1), dict(scale_factor=2.5, mode="bilinear", align_corners=True)),
    ((2, 3, 7), dict(size=4, mode="linear")),
    ((2, 2, 5, 4), dict(scale_factor=1.7, mode="bicubic")),
    ((1, 2, 4, 3), dict(size=(3, 7), mode="bicubic", align_corners=True)),
]


def test_fold_is_col2im_kernels():
    """F.fold lowers to col2im over its columns (passes/decompositions/conv.py): kernels only, no
    numpy executor, on cpu and metal-emu (the reference backend keeps the primitive)."""
    from lazytorch.realize import kernel_plan
    c = lt.randn(2, 3 * 6, 4 * 2)
    y = lt.nn.functional.fold(c, (7, 6), (2, 3), padding=(1, 0), stride=2)
    for backend in ("cpu", "metal-emu"):
        assert {launch.kind for launch in kernel_plan([y], backend).launches} == {"kernel"}, backend
    want = torch.nn.functional.fold(torch.from_numpy(c.numpy()), (7, 6), (2, 3), padding=(1, 0), stride=2)
    np.testing.assert_allclose(y.numpy(), want.numpy(), rtol=1e-5, atol=1e-5)


def test_resampling(backend):
    cases = [
        Case("unfold", lambda m, x: fn(m).unfold(x, (2, 3), dilation=(1, 2), padding=1, stride=(2, 1)),
             (sample((2, 3, 5, 6), layout="transposed"),)),
        Case("fold", lambda m, c: fn(m).fold(c, (5, 6), 2, padding=1, stride=2), (sample((2, 12, 12), seed=1),),
             dict(atol=1e-5)),
        Case("fold unbatched", lambda m, c: fn(m).fold(c, (4, 5), (2, 2), dilation=(1, 2)), (sample((12, 9), seed=2),),
             dict(atol=1e-5)),
        Case("pixel_shuffle", lambda m, x: fn(m).pixel_shuffle(x, 2), (sample((2, 8, 3, 2), layout="transposed"),)),
        Case("pixel_unshuffle", lambda m, x: fn(m).pixel_unshuffle(x, 3), (sample((5, 2, 6, 3)),), emu=False),
    ]
    for mode in ("reflect", "replicate", "circular", "constant"):
        cases.append(Case(f"pad {mode}", lambda m, x, mode=mode: fn(m).pad(x, (2, 1, 1, 2), mode=mode),
                          (sample((2, 3, 4, 5), layout="transposed"),), emu=mode == "reflect"))
    for i, (xs, kw) in enumerate(INTERP):
        cases.append(Case(f"interpolate{kw}", lambda m, x, kw=kw: fn(m).interpolate(x, **kw),
                          (sample(xs, layout="transposed", seed=i),), dict(atol=1e-5), emu=i in (0, 3)))
    assert check_batch(cases) >= 5


@pytest.mark.parametrize("kw, launches", [(dict(padding=1), 11), (dict(stride=2, padding=1, dilation=(1, 2)), 10)],
                         ids=["padded", "strided"])
def test_conv_backward_has_no_host_steps(kw, launches):
    """A convolution's gradients are products and kernels, not host writes of each kernel position
    into zeros; values against torch.  The launches of a training step's program (forward, loss,
    both gradients): the weight's gradient reads the forward's columns (one im2col copy for both,
    the batch folded), the input's is at stride 1 one more convolution, else the columns'
    gradient summed by col2im in one kernel (autograd/derivatives.py); on a host backend the
    weight's `.grad` is its product's output reshaped, not a copy of it (realize.py
    reshapes_aliased).  (Before: 14 and 13, the weight's gradient copying the windows twice, the
    stride-1 input's through col2im; then 12 and 11, the gradient copied out.)"""
    from lazytorch.realize import kernel_plan
    rng = np.random.default_rng(0)
    x, w, g = rng.standard_normal((2, 3, 9, 8)), rng.standard_normal((4, 3, 3, 3)), None
    lx, lw = lt.tensor(x.astype(np.float32), requires_grad=True), lt.tensor(w.astype(np.float32), requires_grad=True)
    tx, tw = torch.tensor(x.astype(np.float32), requires_grad=True), torch.tensor(w.astype(np.float32), requires_grad=True)
    ty = torch.nn.functional.conv2d(tx, tw, **kw)
    g = rng.standard_normal(tuple(ty.shape)).astype(np.float32)
    (ty * torch.from_numpy(g)).sum().backward()
    loss = (lt.nn.functional.conv2d(lx, lw, **kw) * lt.from_numpy(g)).sum()
    loss.backward()
    plan = kernel_plan([loss, lx.grad, lw.grad], "cpu")
    kinds = [launch.kind for launch in plan.launches]
    assert set(kinds) == {"kernel", "library"} and kinds.count("library") == 3, plan
    assert len(kinds) == launches, plan
    np.testing.assert_allclose(lx.grad.numpy(), tx.grad.numpy(), rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(lw.grad.numpy(), tw.grad.numpy(), rtol=1e-4, atol=1e-4)

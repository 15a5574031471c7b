"""Fusion: kernel counts of canonical programs, each fused program compared with torch."""
from __future__ import annotations

import math

import numpy as np
import pytest
import torch

import lazytorch as lt
from lazytorch.passes.fuse import MAX_BUFFERS, ROW_LIMIT
from lazytorch.runtime.cpu import CpuBackend
from oracle import assert_same, check, sample


def kinds(*tensors) -> list[str]:
    return [l.kind for l in lt.kernel_plan(*tensors).kernels]


def fused(fn, *samples, expect: list[str], atol=None, rtol=None):
    """fn fuses into launches of kinds `expect` and matches torch."""
    got = fn(lt, *[s.lt for s in samples])
    outs = got if isinstance(got, tuple) else (got,)
    plan = lt.kernel_plan(*outs)
    assert [l.kind for l in plan.kernels] == expect, str(plan)
    check(fn, *samples, atol=atol, rtol=rtol)


def chain20(m, x, b):
    y = x
    for i in range(10):
        y = (y * b + 0.5).tanh() if i % 2 else (y - b.exp() * 0.25).abs().sqrt()
    return y


SHAPES = [(4, 16), (1, 1), (3, 0), (2, 3, 5)]


@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("dtype", ["float32", "float16"])
def test_pointwise_chain_one_kernel(shape, dtype):
    fused(chain20, sample(shape, dtype), sample(shape[-1:], dtype, seed=1), expect=["kernel"], atol=2e-2)


@pytest.mark.parametrize("layout", ["transposed", "strided"])
def test_chain_over_views_one_kernel(layout):
    fused(chain20, sample((6, 8), layout=layout), sample((8,), seed=1), expect=["kernel"])


ROWS = [
    ("softmax", lambda m, x: m.softmax(x, -1)),
    ("log_softmax", lambda m, x: m.log_softmax(x, -1)),
    ("layer_norm", lambda m, x: m.nn.functional.layer_norm(x, (x.shape[-1],))),
    ("rms_norm", lambda m, x: m.nn.functional.rms_norm(x, (x.shape[-1],))),
    ("center", lambda m, x: x - x.mean(-1, keepdim=True)),
]


@pytest.mark.parametrize("name,fn", ROWS, ids=[r[0] for r in ROWS])
@pytest.mark.parametrize("shape,dtype", [((5, 32), "float32"), ((2, 3, 7), "float32"), ((4, 16), "bfloat16")])
def test_row_programs_one_kernel(name, fn, shape, dtype):
    fused(fn, sample(shape, dtype), expect=["kernel"])
    assert lt.kernel_plan(fn(lt, sample(shape, dtype).lt)).kernels[0].pattern == "row"


def test_row_over_limit_splits():
    x = sample((2, 2 * ROW_LIMIT))
    assert len(kinds(lt.softmax(x.lt, -1))) > 1
    check(lambda m, x: m.softmax(x, -1), x)


@pytest.mark.parametrize("shape", [(4, 16), (3, 0), (1, 1)])
def test_reduction_with_prologue_and_epilogue(shape):
    plan = lt.kernel_plan((sample(shape).lt * sample(shape, seed=1).lt).sum(-1).sqrt())
    assert [(l.kind, l.pattern) for l in plan.kernels] == [("kernel", "reduce")]
    fused(lambda m, a, b: (a * b).sum(-1).abs().sqrt(), sample(shape), sample(shape, seed=1), expect=["kernel"])


def test_linear_bias_gelu_is_library_then_kernel():
    fused(lambda m, x, w, b, r: m.nn.functional.gelu(m.nn.functional.linear(x, w, b)) + r,
          sample((8, 32)), sample((16, 32), seed=1), sample((16,), seed=2), sample((8, 16), seed=3),
          expect=["library", "kernel"], atol=1e-4)


def test_two_outputs_of_one_chain_one_kernel():
    x = sample((4, 8))
    fused(lambda m, x: ((x * 2).exp() + 1, (x * 2).exp() * 3, x.abs()), x, expect=["kernel"])


def test_opaque_op_is_reference_launch():
    fused(lambda m, x: (x.cumsum(-1) * 2).exp(), sample((3, 5)), expect=["reference", "kernel"])


def test_chain_on_a_product_read_by_a_host_op_is_a_kernel():
    """A pointwise chain on a product's output whose only reader is a host op (`cat`) of another
    shape is a kernel of its own, not recomputed on numpy inside that op: a view of a computed
    value is not a broadcast operand (passes/fuse.py broadcast_operands)."""
    fused(lambda m, x, w, y: m.cat([m.relu((x @ w).reshape(3, 10) * 2.0 - 1.0), y]),
          sample((6, 8)), sample((8, 5), seed=1), sample((2, 10), seed=2), expect=["library", "kernel", "reference"],
          atol=1e-5)


def test_constant_pad_is_one_kernel():
    """F.pad in constant mode (and a pooling's padding) reads its input through a clamped view
    under a mask: one kernel, no host cats (ir/build_shape_ops.py padded).  A computed input is
    stored first, as every view of a computed value."""
    fused(lambda m, x: m.nn.functional.pad(x, (1, 2, 0, 3), value=-1.0).exp(), sample((3, 4, 5)), expect=["kernel"])
    fused(lambda m, x: m.nn.functional.pad(x.exp(), (1, 2), value=-1.0), sample((3, 4, 5)), expect=["kernel", "kernel"])
    fused(lambda m, x: m.nn.functional.max_pool2d(x, 3, stride=2, padding=1), sample((2, 3, 7, 6)),
          expect=["kernel", "kernel"])


WINDOWS = [
    ("max_pool2d", (2, 3, 9, 8), dict(kernel_size=3, stride=2, padding=1)),
    ("max_pool2d", (1, 2, 7, 7), dict(kernel_size=(3, 2), stride=(1, 2), dilation=(2, 1), ceil_mode=True)),
    ("max_pool1d", (2, 3, 10), dict(kernel_size=4, stride=3)),
    ("unfold", (3, 11), dict(dimension=1, size=4, step=2)),
]


@pytest.mark.parametrize("op,shape,kw", WINDOWS, ids=[f"{w[0]}-{i}" for i, w in enumerate(WINDOWS)])
def test_window_gradients_are_kernels(op, shape, kw):
    """Pooling's and Tensor.unfold's backward sum the incoming gradient over overlapping windows:
    autograd/derivatives.py recognises the window view and sums its kernel positions' slices in
    one kernel (col2im), with no write into zeros per position on the host."""
    rng = np.random.default_rng(0)
    x = rng.standard_normal(shape).astype(np.float32)
    lx, tx = lt.tensor(x, requires_grad=True), torch.tensor(x, requires_grad=True)
    fn = (lambda m, t: t.unfold(**kw)) if op == "unfold" else (lambda m, t: getattr(m.nn.functional, op)(t, **kw))
    ly, ty = fn(lt, lx), fn(torch, tx)
    g = rng.standard_normal(tuple(ty.shape)).astype(np.float32)
    (ly * lt.from_numpy(g)).sum().backward()
    (ty * torch.from_numpy(g)).sum().backward()
    assert {l.kind for l in lt.kernel_plan(lx.grad).kernels} == {"kernel"}
    np.testing.assert_allclose(lx.grad.numpy(), tx.grad.numpy(), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("shape,kw", [((2, 3, 9, 8), dict(kernel_size=3, stride=2, padding=1)),
                                      ((2, 3, 10), dict(kernel_size=3, stride=2, padding=1)),
                                      ((1, 2, 6, 7, 8), dict(kernel_size=3, stride=2, padding=1))])
def test_max_pool_gradient_never_writes_its_windows(shape, kw):
    """Max pooling's gradient to each window's first maximum is computed at each window position
    inside col2im's kernel from the windows' first positions and the pooled gradient, never
    written whole (ir/build_conv.py `_tree`: the (N, C, *out, *kernel) tensor was 9x the pooled
    output), and its pad's mask is not applied to the gradient (autograd/derivatives.py `_where`):
    forward pad and max, backward first positions, col2im's phases (the slices of each stride
    residue, one kernel) and their interleaving, the crop: 6 kernels.  The pads' fills are
    literals, not buffers: a 3-d pool's 27 terms (8 phases) fit Metal's argument table."""
    rng = np.random.default_rng(0)
    x = rng.standard_normal(shape).astype(np.float32)
    x.reshape(-1)[::7] = x.reshape(-1)[0]                      # ties: the first maximum takes it
    fn = f"max_pool{len(shape) - 2}d"
    lx, tx = lt.tensor(x, requires_grad=True), torch.tensor(x, requires_grad=True)
    ly, ty = getattr(lt.nn.functional, fn)(lx, **kw), getattr(torch.nn.functional, fn)(tx, **kw)
    g = rng.standard_normal(tuple(ty.shape)).astype(np.float32)
    ly.backward(lt.from_numpy(g))
    ty.backward(torch.from_numpy(g))
    for backend in ("cpu", "metal-emu"):
        plan = lt.realize.kernel_plan([lx.grad], backend)
        assert [launch.kind for launch in plan.kernels] == ["kernel"] * 6, plan
        assert max(launch.buffers for launch in plan.kernels) <= 2 ** (len(shape) - 2) + 2, plan   # (phases + 2 reads)
        windows = math.prod(ty.shape) * kw["kernel_size"] ** (len(shape) - 2)
        assert max(math.prod(n.shape) for launch in plan.launches for n, _ in launch.writes) < windows, plan
    np.testing.assert_allclose(lx.grad.numpy(), tx.grad.numpy(), rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("size", [8, 36])
def test_convolution_columns_are_copied_once_for_the_forward_and_the_weight_gradient(size):
    """The forward's product (decomposed while the passes run) and the weight gradient's (built
    by its rule) read the same padded input's columns: one pad and one column copy.  The pad's
    box constants came plain from the program's copy and structural from the decomposition, and
    sharing told them apart (passes/simplify.py `sharing`): each was written twice.  Past 256
    output positions (size 36: 18 x 18) the forward had its own per-sample columns."""
    rng = np.random.default_rng(0)
    n, out = 4 if size == 8 else 2, size // 2
    x, w = rng.standard_normal((n, 3, size, size)).astype(np.float32), rng.standard_normal((5, 3, 4, 4)).astype(np.float32)
    g = rng.standard_normal((n, 5, out, out)).astype(np.float32)
    lx, lw = lt.tensor(x, requires_grad=True), lt.tensor(w, requires_grad=True)
    tx, tw = torch.tensor(x, requires_grad=True), torch.tensor(w, requires_grad=True)
    ly = lt.nn.functional.conv2d(lx, lw, stride=2, padding=1)
    ty = torch.nn.functional.conv2d(tx, tw, stride=2, padding=1)
    (lgw,), (tgw,) = lt.autograd.grad(ly, [lw], lt.from_numpy(g)), torch.autograd.grad(ty, [tw], torch.from_numpy(g))
    for backend, pads in (("cpu", 1), ("metal-emu", 0)):       # (metal reads the pad through its mask)
        plan = lt.realize.kernel_plan([ly, lgw], backend)
        written = [tuple(n.shape) for launch in plan.launches for n, _ in launch.writes]
        assert written.count((n, 3, size + 2, size + 2)) == pads, plan                  # the padded input
        assert sum(math.prod(s) == n * 3 * 16 * out * out for s in written) == 1, plan   # its columns
    np.testing.assert_allclose(ly.numpy(), ty.detach().numpy(), rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(lgw.numpy(), tgw.numpy(), rtol=1e-4, atol=1e-4)


def test_copied_views_of_a_pad_read_it_through_its_mask_on_the_gpu_backends():
    """passes/guard.py: on metal (and cuda) a view of a constant pad that is copied, and whose dims
    each step along one dim of the pad (windows, a slice, a permute), reads the unpadded input
    through the pad's mask in the copy's kernel: the pad is not written; so do pooling's windows
    (a max or a sum over them).  A view read by a pointwise op or that merges the pad's dims (a
    flattening reshape) keeps the pad.  Values against torch; cpu keeps every pad (its masked
    loads do not vectorise)."""
    x = np.random.default_rng(3).standard_normal((2, 3, 5, 6)).astype(np.float32)
    t = torch.from_numpy(x)

    def padded(m, pads, value=0.0):
        return m.nn.functional.pad(m.tensor(x) if m is lt else t, pads, value=value)
    cases = [   # (the program on lazytorch or torch, whether metal-emu writes the pad)
        (lambda m: padded(m, (1, 2, 2, 0), -1.5)[:, :, 1:, ::2].contiguous(), False),
        (lambda m: padded(m, (1, 1, 1, 1)).permute(0, 2, 3, 1).contiguous(), False),
        (lambda m: padded(m, (1, 1, 1, 1)).unfold(2, 3, 1).unfold(3, 3, 2).contiguous(), False),
        (lambda m: m.nn.functional.max_pool2d(padded(m, ()), 3, stride=2, padding=1), False),
        (lambda m: m.nn.functional.avg_pool2d(padded(m, ()), 3, stride=1, padding=1), False),
        (lambda m: padded(m, (1, 1, 1, 1))[:, :, 1:].exp(), True),
        (lambda m: padded(m, (1, 1)).reshape(2, -1)[:, 5:].contiguous(), True),
    ]
    for make, written in cases:
        y = make(lt)
        for backend, pad_kept in (("cpu", True), ("metal-emu", written)):
            plan = lt.realize.kernel_plan([y], backend)
            pads = [n for launch in plan.launches for n, _ in launch.writes if n.op == "where"]
            assert bool(pads) == pad_kept, (backend, plan)
            previous = lt.get_backend()
            lt.set_backend(backend)
            try:
                np.testing.assert_allclose(make(lt).numpy(), make(torch).numpy(), rtol=1e-6, atol=1e-6)
            finally:
                lt.set_backend(previous)


def test_small_window_reductions_use_the_columns_template_on_c(capsys):
    """A reduction over several dims of at most 16 elements (a pooling's 3 x 3 windows) walks
    them outermost over a block of outputs in C (codegen/render.py C_WINDOW_COLUMNS), NaN kept;
    one-dim rows (of 17, of 16) keep the rows template."""
    x = np.random.default_rng(0).standard_normal((2, 3, 12, 12)).astype(np.float32)
    x[0, 0, 3, 3] = np.nan
    pooled = lt.nn.functional.max_pool2d(lt.tensor(x), 3, stride=2, padding=1)
    wide = lt.tensor(np.arange(2 * 17, dtype=np.float32).reshape(2, 17)).sum(1)
    narrow = lt.tensor(np.arange(2 * 16, dtype=np.float32).reshape(2, 16)).amax(1)
    for y, columns in ((pooled, True), (wide, False), (narrow, False)):
        lt.show_kernels(y, backend="cpu")
        src = capsys.readouterr().out
        assert ("reduce over columns" in src) == columns, src
    expected = torch.nn.functional.max_pool2d(torch.from_numpy(x), 3, stride=2, padding=1).numpy()
    np.testing.assert_array_equal(pooled.numpy(), expected)
    np.testing.assert_array_equal(wide.numpy(), np.arange(34, dtype=np.float32).reshape(2, 17).sum(1))
    np.testing.assert_array_equal(narrow.numpy(), [15.0, 31.0])


def _weight_gradient(dims):
    """A layer norm's weight gradient: products stored beside their column sums, and the sums
    squared (gradient clipping's norm) plus a per-column value."""
    def fn(m, x, y, w):
        p = x * y * w
        s = p.sum(dims)
        return p, s, s * s + w
    return fn


@pytest.mark.parametrize("shape,dims,layout", [((512, 256), 0, None), ((300, 270), 0, None), ((7, 3, 40), (0, 1), None),
                                               ((1, 5), 0, None), ((0, 4), 0, None), ((6, 9), 0, "transposed")])
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_column_sums_beside_their_products_are_one_kernel_walked_by_columns_in_c(shape, dims, layout, dtype, capsys):
    """One row kernel of one pass; C renders it with the columns template (the rows template's
    strided walk took 0.50 ms at (512, 256), 0.04 ms now: two such kernels were a sixth of W10's
    kernel time)."""
    x, y, w = sample(shape, dtype, layout=layout), sample(shape, dtype, seed=1), sample(shape[-1:], dtype, seed=2)
    outs = _weight_gradient(dims)(lt, x.lt, y.lt, w.lt)
    plan = lt.kernel_plan(*outs)
    assert [(l.kind, l.pattern) for l in plan.kernels] == [("kernel", "row")], str(plan)
    if shape[0] > 1 and layout is None:
        lt.show_kernels(*outs, backend="cpu")
        assert "row over columns" in capsys.readouterr().out
    check(_weight_gradient(dims), x, y, w, atol=1e-3, rtol=1e-4)     # (sums of up to 512 products)


def test_buffer_cap_splits_groups():
    xs = [sample((4, 8), seed=i) for i in range(40)]

    def total(m, *ts):
        out = ts[0]
        for t in ts[1:]:
            out = out * 0.5 + t
        return out
    from lazytorch.realize import kernel_plan
    out = total(lt, *[x.lt for x in xs])
    # 40 tensors and 39 scalar arguments: 79 reads need three launches of at most 31 buffers on
    # Metal's argument table; C takes an array of pointers, so one launch fits on cpu
    for backend, cap, launches in (("metal-emu", MAX_BUFFERS, 3), ("cpu", CpuBackend.max_buffers, 1)):
        plan = kernel_plan([out], backend)
        assert len(plan.kernels) == launches and all(l.buffers <= cap for l in plan.kernels)
    check(total, *xs)


def test_plan_is_printable_and_complete():
    x = sample((4, 8)).lt
    plan = lt.kernel_plan(lt.softmax(x * 2.0, -1))
    text = str(plan)
    assert "k0_row: kernel/row I=[4, 8] R=[1]" in text and "amax" in text and "exp" in text
    launch = plan.kernels[0]
    assert launch.domain == (4, 8) and launch.reduce_dims == (1,)
    assert [b.kind for b in plan.params] == ["param", "param"] and plan.scalar_slots == {1}
    assert plan.outputs[0].kind == "output" and launch.writes[0][1] is plan.outputs[0]


def test_view_of_computed_value_reads_stored_buffer():
    fused(lambda m, x: (x.exp().t() + 1).sum(0), sample((3, 4)), expect=["kernel", "kernel"])


def test_eval_root_that_is_view_and_scalar_param():
    check(lambda m, x: (x.t(), x * 1), sample((3, 4)))


@pytest.mark.parametrize("shape", [(4, 3, 5, 6), (2, 3, 4)])
def test_channel_statistics_broadcast_back_lower_to_kernels(shape):
    """BatchNorm's backward broadcasts each channel's sums over (N, *spatial) back over them: a row
    value whose kept dim is not the domain's last.  Every kernel lowers, for C and the GPU targets
    (none falls back to the host executor: codegen/lower.py row_broadcast), and the gradients match
    torch."""
    from lazytorch.codegen.lower import lower
    from lazytorch.realize import kernel_plan
    rng = np.random.default_rng(0)
    x, w, g = (rng.standard_normal(s).astype(np.float32) for s in (shape, (3,), shape))
    lx, lw = lt.tensor(x, requires_grad=True), lt.tensor(w, requires_grad=True)
    tx, tw = torch.tensor(x, requires_grad=True), torch.tensor(w, requires_grad=True)
    (lt.nn.functional.batch_norm(lx, None, None, lw, None, True) * lt.from_numpy(g)).sum().backward()
    (torch.nn.functional.batch_norm(tx, None, None, tw, None, True) * torch.from_numpy(g)).sum().backward()
    from lazytorch.codegen.gpu import render_launch
    for launch in kernel_plan([lx.grad, lw.grad], "cpu").launches:
        if launch.kind == "kernel":
            lower(launch)
            assert render_launch(launch, "cuda") is not None and render_launch(launch, "metal") is not None
    np.testing.assert_allclose(lx.grad.numpy(), tx.grad.numpy(), rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(lw.grad.numpy(), tw.grad.numpy(), rtol=1e-4, atol=1e-4)

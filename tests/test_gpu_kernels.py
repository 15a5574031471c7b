"""The GPU templates' paths (shaders/gpu_linear.j2, gpu_rows.j2, gpu_columns.j2) against torch, on
the GPU backends under test (metal-emu in CI; cuda with LAZYTORCH_TEST_BACKENDS=cuda on a GPU).

Each case names the path it must take (the template and the geometry render.py chose, read from
the kernel's Metal source) and checks values: pointwise kernels with vector steps and a scalar
tail, short rows (a simdgroup each), long rows held in registers, long single-pass rows, column
reductions split into slices, one-row full reductions; odd sizes, views, half types, integers,
argmax/argmin ties and NaN, empty and size-1 dims; and LAZYTORCH_GPU_GEOMETRY overrides."""
from __future__ import annotations

import numpy as np
import pytest
import torch

import lazytorch as lt
from conftest import BACKENDS
from lazytorch.codegen.gpu import launch_call
from lazytorch.codegen.render import (GEOMETRY_ENV, Geometry, columns_geometry, forced_geometry, grid_split,
                                      rows_geometry)
from lazytorch.realize import kernel_plan

GPU_BACKENDS = [b for b in BACKENDS if b in ("metal-emu", "metal", "cuda")]
F = lt.nn.functional


@pytest.fixture(params=GPU_BACKENDS or pytest.skip("no GPU backend under test", allow_module_level=True))
def gpu(request):
    previous = lt.get_backend()
    lt.set_backend(request.param)
    yield request.param
    lt.set_backend(previous)


def data(shape, dtype=np.float32, seed=0, ties=False):
    rng = np.random.default_rng(seed)
    x = rng.standard_normal(shape).astype(np.float32)
    if ties:                       # repeated maxima/minima and a NaN: the tie rules matter
        x = np.round(x).astype(np.float32)
        if x.size > 3:
            x.reshape(-1)[x.size // 3] = np.nan
    return x.astype(dtype)


def pair(x, dtype=None):
    """The same values as a lazytorch and a torch tensor (bfloat16 through float32)."""
    if dtype == "bf16":
        return lt.tensor(x, dtype=lt.bfloat16), torch.tensor(x).to(torch.bfloat16)
    return lt.tensor(x), torch.tensor(x)


def paths(*outs) -> list[str]:
    """'template geometry' of each kernel the outputs compile to (the first line of its source)."""
    plan = kernel_plan(list(outs))
    calls = [launch_call(l, "metal") for l in plan.launches if l.kind == "kernel"]
    return [c.source.splitlines()[0] for c in calls if c is not None]


def check(got, want, tol=1e-5):
    want = want.float().numpy() if want.dtype in (torch.bfloat16, torch.float16) else want.numpy()
    got = got.numpy()
    assert got.shape == want.shape
    if got.dtype.kind in "biu":
        np.testing.assert_array_equal(got, want)
    else:
        np.testing.assert_allclose(got.astype(np.float64), want.astype(np.float64), rtol=tol, atol=tol)


# ---------------------------------------------------------------- geometry (no compiling)

def test_geometry_table():
    assert rows_geometry(4096, 4096, True) == Geometry(512, 4096, 1, 8)      # W3: the row in registers
    assert rows_geometry(8192, 1024, True) == Geometry(256, 1024, 8, 32)     # W4: a warp per row
    assert rows_geometry(8192, 1025, True) == Geometry(256, 8192, 1, 5)
    assert rows_geometry(100, 40, True) == Geometry(256, 13, 8, 2)           # short rows: a simdgroup each
    assert rows_geometry(3000, 9, True) == Geometry(256, 12, 256, 9, lanes=1)   # tiny rows: a thread each
    assert rows_geometry(255, 9, True).lanes == 32                           # (too few to fill a group)
    assert rows_geometry(4096, 56, False, 4, True) == Geometry(256, 256, 16, 0, 4, lanes=16)  # im2col's rows
    assert rows_geometry(4096, 40, False, 1, True).lanes == 32              # 40 elements one by one: 32 lanes
    assert rows_geometry(4096, 56, False, 4).lanes == 32                     # a reduction's rows: a simdgroup
    assert rows_geometry(15, 56, False, 4, True).lanes == 32                 # (too few to fill a group)
    assert rows_geometry(3, 16384, True).per_thread == 16                    # fuse.ROW_LIMIT fits
    assert rows_geometry(1, 10 ** 6, False) == Geometry(1024, 1, 1, 0)       # one group (unless split below)
    assert rows_geometry(4096, 4096, True, 4) == Geometry(512, 4096, 1, 8, 4)   # W3 with vector steps
    assert rows_geometry(8192, 1024, True, 4) == Geometry(256, 1024, 8, 32, 4)  # W4: 8 steps of 4 per lane
    assert grid_split(1, 2 ** 24, 4) == 256 and grid_split(4, 2 ** 24, 4) == 128     # x.sum() over 2^24
    assert grid_split(1, 70001, 1) == 2 and grid_split(1, 5, 4, 8) == 2             # no group left empty
    assert columns_geometry(5, 40000, 4, True) == Geometry(1024, 20, 32, 0, 1, 20)  # sum(x, 0), 5 outputs
    assert columns_geometry(5, 40000, 4, False).split == columns_geometry(5000, 40000, 4, True).split == 1


def test_geometry_override(monkeypatch):
    g = rows_geometry(10, 3000, True)
    monkeypatch.setenv(GEOMETRY_ENV, "rows:threads=64, linear:threads=32")
    assert forced_geometry(g, "rows", 10, 3000).per_thread == 0              # 64 x 16 < 3000: no cache
    monkeypatch.setenv(GEOMETRY_ENV, "rows=4")
    assert forced_geometry(g, "rows", 10, 60) == Geometry(128, 3, 4, 2)
    monkeypatch.setenv(GEOMETRY_ENV, "rows:lanes=8")
    assert forced_geometry(g, "rows", 10, 60, pointwise=True).lanes == 8
    assert forced_geometry(g, "rows", 10, 60).lanes == 32                    # a reduction's rows combine
    monkeypatch.setenv(GEOMETRY_ENV, "threads=lots")
    with pytest.raises(ValueError, match="LAZYTORCH_GPU_GEOMETRY"):
        forced_geometry(g, "rows", 10, 3000)


# ---------------------------------------------------------------- pointwise

@pytest.mark.parametrize("n", [1, 5, 1027])
def test_linear_vector_steps_and_tail(gpu, n):
    (a, ta), (b, tb) = pair(data(n)), pair(data(n, seed=1))
    out = (a * b + 1.0).tanh() - a.sigmoid()
    per = 4 if n >= 128 else 1
    groups = -(-n // (256 * per))          # 1027: the second group's first thread takes the 3-element tail
    assert paths(out) == [f"// linear: k0_pointwise, pointwise over {n} contiguous elements; geometry "
                          f"threads=256 groups={groups} rows=1 per_thread={per} vec={per}"]
    check(out, (ta * tb + 1.0).tanh() - ta.sigmoid())


def test_linear_half_types_ints_and_offset_views(gpu):
    x = data((3, 301))
    (h, th), (bf, tbf) = pair(x.astype(np.float16)), pair(x, "bf16")
    i, ti = pair(np.arange(-600, 603, dtype=np.int32).reshape(3, 401))
    outs = [(h * 2.0).exp(), bf.erf() + bf, i[1:].reshape(-1)[1:] * 3 + i[:2].reshape(-1)[:-1]]
    assert all("linear" in p for p in paths(*outs))
    lt.eval(*outs)
    check(outs[0], (th * 2.0).exp(), 2e-3)
    check(outs[1], tbf.erf() + tbf, 2e-2)
    check(outs[2], ti[1:].reshape(-1)[1:] * 3 + ti[:2].reshape(-1)[:-1])


def test_broadcast_and_strided_pointwise(gpu):
    (x, tx), (bias, tbias), (s, ts) = pair(data((33, 300))), pair(data(300, seed=1)), pair(data((33, 1), seed=2))
    (y, ty) = pair(data((7, 5), seed=3))
    outs = [F.relu(x + bias) * s, y.t().exp() + 1.0]
    assert all(p.startswith("// rows:") for p in paths(*outs))      # not contiguous: one row per last dim
    lt.eval(*outs)
    check(outs[0], torch.relu(tx + tbias) * ts)
    check(outs[1], ty.t().exp() + 1.0)


# ---------------------------------------------------------------- rows

def test_short_rows_one_simdgroup_each(gpu):
    (x, tx), (w, tw) = pair(data((37, 50))), pair(data(50, seed=1))
    (t, tt) = pair(data((9, 33), ties=True))
    (i, ti) = pair(np.arange(-40, 50, dtype=np.int16).reshape(9, 10))
    outs = [lt.softmax(x, dim=-1), F.layer_norm(x, (50,), w), t.argmax(dim=1), t.argmin(dim=1),
            i.sum(dim=1), lt.softmax(lt.tensor(data((4, 1))), dim=-1)]
    ps = paths(*outs)
    assert all("rows=" in p and "rows=1 " not in p for p in ps), ps
    lt.eval(*outs)
    check(outs[0], torch.softmax(tx, -1))
    check(outs[1], F_torch_layer_norm(tx, tw), 1e-4)
    check(outs[2], tt.argmax(1))
    check(outs[3], tt.argmin(1))
    check(outs[4], ti.sum(1))
    check(outs[5], torch.ones(4, 1))


def test_tiny_rows_one_thread_each(gpu):
    """Rows of at most 16 elements, at least 256 of them: a thread per row, walked alone (lanes=1,
    codegen/render.py THREAD_ROW): a max-pool's windows and its gradient, argmax/argmin with ties
    and NaN, a sum of int16, a softmax (two passes over each row), and a row count that does not
    fill the last group."""
    (x, tx) = pair(data((3, 5, 23, 21)))
    x.requires_grad_(True)
    tx.requires_grad_(True)
    (t, tt) = pair(data((301, 9), ties=True))
    (i, ti) = pair(np.arange(-300, 303, dtype=np.int16).reshape(201, 3))
    (s, ts) = pair(data((260, 5), seed=2))
    pooled = F.max_pool2d(x, 3, stride=2, padding=1)
    outs = [pooled, t.argmax(dim=1), t.argmin(dim=1), i.sum(dim=1), lt.softmax(s, dim=-1)]
    ps = paths(*outs)
    # the pool's windows, argmax with argmin (one kernel), the softmax; the int16 sum's 201 rows
    # are too few to fill a group of threads: a simdgroup each
    assert sum("lanes=1" in p for p in ps) == 3, ps
    assert "rows=8 " in next(p for p in ps if "inner [3]" in p), ps
    lt.eval(*outs)
    tpooled = torch.nn.functional.max_pool2d(tx, 3, stride=2, padding=1)
    check(outs[0], tpooled.detach())
    check(outs[1], tt.argmax(1))
    check(outs[2], tt.argmin(1))
    check(outs[3], ti.sum(1))
    check(outs[4], torch.softmax(ts, -1))
    g = data(tuple(tpooled.shape), seed=3)
    (pooled * lt.tensor(g)).sum().backward()
    (tpooled * torch.tensor(g)).sum().backward()
    assert any("lanes=1" in p for p in paths(x.grad)), paths(x.grad)
    check(x.grad, tx.grad)


def F_torch_layer_norm(x, w=None, b=None):
    return torch.nn.functional.layer_norm(x, x.shape[-1:], w, b)


def test_long_rows_in_registers(gpu):
    (x, tx) = pair(data((3, 3000)))
    (b, tb) = pair(data((2, 1500), seed=1), "bf16")
    (h, th) = pair(data((2, 1100), np.float16, seed=2))
    outs = [lt.softmax(x, dim=-1), F.layer_norm(b, (1500,)), lt.log_softmax(h, dim=-1)]
    ps = paths(*outs)
    assert all("rows=1 " in p and "per_thread=0" not in p for p in ps), ps
    lt.eval(*outs)
    check(outs[0], torch.softmax(tx, -1))
    check(outs[1], F_torch_layer_norm(tb.float()).to(torch.bfloat16), 3e-2)
    check(outs[2], torch.log_softmax(th.float(), -1).half(), 3e-3)


def test_revisited_rows_up_to_1024_a_warp_each(gpu):
    (x, tx), (w, tw), (b, tb) = pair(data((9, 1000))), pair(data(1000, seed=1)), pair(data(1000, seed=2))
    (h, th) = pair(data((5, 700), np.float16, seed=3))
    outs = [F.layer_norm(x, (1000,), w, b), lt.softmax(h, dim=-1)]
    ps = paths(*outs)
    assert "rows=8 per_thread=32" in ps[0] and "rows=5 per_thread=24 vec=4" in ps[1], ps
    lt.eval(*outs)
    check(outs[0], F_torch_layer_norm(tx, tw, tb), 1e-4)
    check(outs[1], torch.softmax(th.float(), -1).half(), 2e-3)


def test_longest_revisited_row_and_beyond(gpu):
    (x, tx) = pair(data((1, 16384)))
    (y, ty) = pair(data((2, 20000), seed=1))
    outs = [lt.softmax(x, dim=-1), lt.softmax(y, dim=-1)]
    assert "threads=1024 groups=1 rows=1 per_thread=16" in paths(outs[0])[0]
    lt.eval(*outs)
    check(outs[0], torch.softmax(tx, -1))
    check(outs[1], torch.softmax(ty, -1))


def test_long_single_pass_rows_and_full_reductions(gpu):
    (x, tx) = pair(data((3, 2000), ties=True))
    (z, tz) = pair(data(5000, seed=1))
    outs = [x.argmax(dim=1), x.argmin(dim=1), z.sum(), lt.tensor(data((0, 5))).sum(dim=1)]
    assert "threads=1024 groups=1 rows=1 per_thread=0" in paths(outs[2])[0]
    lt.eval(*outs)
    check(outs[0], tx.argmax(1))
    check(outs[1], tx.argmin(1))
    check(outs[2], tz.sum(), 1e-3)
    check(outs[3], torch.zeros(0))


# ---------------------------------------------------------------- rows: vector steps

@pytest.mark.parametrize("dtype", ["f32", "f16", "bf16"])
def test_row_vector_steps_float_types(gpu, dtype):
    """Rows whose length is a multiple of 4: thread t takes elements [4t..4t+3] + k*4T (vec=4) in
    every rows path (a warp per row, one group per row in registers, single-pass striding);
    odd lengths keep scalar steps (vec=1).  Half types move 8 bytes per step."""
    np_dt = np.float16 if dtype == "f16" else np.float32
    tol = {"f32": 1e-4, "f16": 3e-3, "bf16": 3e-2}[dtype]
    (x, tx), (w, tw), (b, tb) = (pair(data((9, 1000), np_dt), dtype), pair(data(1000, np_dt, seed=1), dtype),
                                 pair(data(1000, np_dt, seed=2), dtype))
    (y, ty) = pair(data((3, 4096), np_dt, seed=3), dtype)
    (z, tz), (zb, tzb) = pair(data((40, 2048), np_dt, seed=4), dtype), pair(data(2048, np_dt, seed=5), dtype)
    (odd, todd) = pair(data((6, 1001), np_dt, seed=6), dtype)
    outs = [F.layer_norm(x, (1000,), w, b), lt.softmax(y, dim=-1), F.relu(z + zb) * 2.0, z.sum(dim=1),
            lt.softmax(odd, dim=-1)]
    ps = paths(*outs)
    assert [p.split("geometry ")[1] for p in ps] == [
        "threads=256 groups=2 rows=8 per_thread=32 vec=4",      # a warp per row, 8 steps of 4 per lane
        "threads=512 groups=3 rows=1 per_thread=8 vec=4",       # one group per row, in registers
        "threads=512 groups=40 rows=1 per_thread=0 vec=4",      # single pass: a broadcast row (bias), a sum
        "threads=192 groups=1 rows=6 per_thread=32 vec=1"], ps  # 1001: scalar steps
    lt.eval(*outs)
    up = (lambda t: t.float()) if dtype != "f32" else (lambda t: t)
    check(outs[0], F_torch_layer_norm(up(tx), up(tw), up(tb)).to(tx.dtype), tol)
    check(outs[1], torch.softmax(up(ty), -1).to(ty.dtype), tol)
    check(outs[2], (torch.relu(up(tz) + up(tzb)) * 2.0).to(tz.dtype), tol)
    check(outs[3], up(tz).sum(1).to(tz.dtype), tol * 40)
    check(outs[4], torch.softmax(up(todd), -1).to(todd.dtype), tol)


def test_row_vector_steps_ints_ties_and_edges(gpu):
    """Integer and bool rows (4-byte and 16-byte steps), argmax/argmin ties under the vector
    numbering (each thread still sees its indices in increasing order), empty and size-1 dims."""
    (i, ti) = pair(np.arange(-300, 340, dtype=np.int32).reshape(8, 80))
    (c, tc) = pair(np.arange(-60, 60, dtype=np.int8).reshape(3, 40))
    (t, tt) = pair(data((5, 1200), ties=True))
    (one, tone) = pair(data((1, 4), seed=1))
    (empty, tempty) = pair(data((0, 8), seed=2))
    outs = [i.sum(dim=1), (i * 3).amax(dim=1), c.sum(dim=1), (c > 0).any(dim=1), t.argmax(dim=1),
            t.argmin(dim=1), lt.softmax(one, dim=-1), lt.softmax(empty, dim=-1), empty.sum(dim=1)]
    ps = paths(*outs)
    assert all("vec=4" in p for p in ps if p.startswith("// rows")), ps
    lt.eval(*outs)
    check(outs[0], ti.sum(1))
    check(outs[1], (ti * 3).amax(1))
    check(outs[2], tc.sum(1))
    check(outs[3], (tc > 0).any(1))
    check(outs[4], tt.argmax(1))
    check(outs[5], tt.argmin(1))
    check(outs[6], torch.softmax(tone, -1))
    check(outs[7], torch.softmax(tempty, -1))
    check(outs[8], tempty.sum(1))


def test_row_vector_steps_views_fall_back_per_operand(gpu):
    """Operands that are not contiguous along the row, or whose rows do not start at a multiple
    of 4, load element by element at the vector numbering; the aligned ones still move by steps."""
    base = data((6, 44))
    (x, tx) = pair(base)
    (y, ty), (y2, ty2) = pair(data((36, 12), seed=1)), pair(data((36, 12), seed=2))
    outs = [x[:, 4:].exp() * 2.0,                 # offset 4, row stride 44: whole steps
            x[:, 1:41].exp() + 1.0,               # offset 1: the input loads per element
            x[:, :40].sum(dim=1),
            y.t().exp() + y2.t(),                 # transposed inputs, contiguous output
            lt.softmax(x[:, 2:], dim=-1)]         # a row of 42: scalar steps
    ps = paths(*outs)
    assert len(ps) == 3 and "vec=4" in ps[0] and "vec=4" in ps[1] and "vec=1" in ps[2], ps   # x's rows fuse
    lt.eval(*outs)
    check(outs[0], tx[:, 4:].exp() * 2.0)
    check(outs[1], tx[:, 1:41].exp() + 1.0)
    check(outs[2], tx[:, :40].sum(1), 1e-4)
    check(outs[3], ty.t().exp() + ty2.t())
    check(outs[4], torch.softmax(tx[:, 2:], -1))


def test_short_last_dim_rows_take_the_dims_before(gpu):
    """A strided pointwise kernel whose last dim is shorter than a simdgroup takes the dims before
    it into its row, up to 256 elements and at most 2048 (a dim cut to a factor: 64 -> 8 x 8), so
    its lanes are not left idle (codegen/render.py _split_rows: col2im's rows of 2 ran at 2 of 32)."""
    (x, tx) = pair(data((64, 2, 40, 3)))
    out = x.permute(0, 2, 3, 1).exp() * 2.0         # (64, 40, 3, 2): last dim 2, read strided
    (p,) = paths(out)
    assert "outer [8] x inner [8, 120, 2]" in p, p          # (40 and 3 merge: one stride)
    check(out, tx.permute(0, 2, 3, 1).exp() * 2.0)


def test_pointwise_rows_shorter_than_a_step_share_a_simdgroup(gpu):
    """A strided pointwise row of fewer elements than a simdgroup's step takes the fewest
    power-of-two lanes covering it (codegen/render.py SUB_SIMD_GROUP_THREADS): im2col's windows
    copied as rows of 56 (16 lanes of vector steps, a last group only partly filled), a slice's
    rows of 32 (8 lanes); a kernel with two outputs keeps a simdgroup per row."""
    (x, tx) = pair(data((3, 5, 58, 58)))
    win = x.as_strided((3, 5, 56, 56, 3, 3), (5 * 58 * 58, 58 * 58, 58, 1, 58, 1)).permute(0, 1, 4, 5, 2, 3)
    twin = tx.as_strided((3, 5, 56, 56, 3, 3), (5 * 58 * 58, 58 * 58, 58, 1, 58, 1)).permute(0, 1, 4, 5, 2, 3)
    (y, ty) = pair(data((301, 40)))
    outs = [win.contiguous(), y[:, 4:36].exp() * 2.0]
    ps = paths(*outs)
    assert "outer [15, 3, 3, 56] x inner [56]" in ps[0] and "rows=16 per_thread=0 vec=4 lanes=16" in ps[0], ps
    assert "outer [301] x inner [32]" in ps[1] and "rows=32 per_thread=0 vec=4 lanes=8" in ps[1], ps
    lt.eval(*outs)
    check(outs[0], twin.contiguous())
    check(outs[1], ty[:, 4:36].exp() * 2.0)
    a, b = win * 2.0, win + 1.0                     # two outputs of one kernel: a simdgroup per row
    (p,) = set(paths(a, b))
    assert "vec=4" in p and "lanes=" not in p, p
    lt.eval(a, b)
    check(a, twin * 2.0)
    check(b, twin + 1.0)


def test_kernel_plan_shows_geometry(gpu):
    """lt.kernel_plan prints each GPU kernel's template and geometry under its launch line, the
    same geometry the kernel's source names."""
    (x, _), (y, _) = pair(data((64, 4096))), pair(data(5000, seed=1))
    outs = [lt.softmax(x, dim=-1), (y * 2.0).exp(), x.sum(dim=0)]
    text = str(lt.kernel_plan(*outs))
    assert "    # rows threads=512 groups=64 rows=1 per_thread=8 vec=4" in text, text
    assert "    # linear threads=256 groups=5 rows=1 per_thread=4 vec=4" in text, text
    assert "    # columns threads=1024 groups=128 rows=32 per_thread=0 vec=1" in text, text
    plan = lt.kernel_plan(*outs)
    assert [p.split("geometry ")[1] for p in paths(*outs)] == [g.split(" ", 1)[1] for g in plan.geometry.values()]


def test_kernel_plan_has_no_geometry_off_the_gpu():
    x = lt.tensor(data((4, 8)))
    plan = lt.realize.kernel_plan([lt.softmax(x, dim=-1)], "cpu")
    assert plan.geometry == {} and "threads=" not in str(plan)


# ---------------------------------------------------------------- long reductions: a grid combine

def test_long_reductions_split_over_groups(gpu):
    """A single-pass reduction of few long rows (>= 65536 elements) splits each row over groups
    (split=N): each group reduces a slice, the row's last group folds the partials in group order.
    Still one launch; ties and NaN across groups keep torch's rules; fused outputs are written by
    every group."""
    x = data((3, 70000))
    x[1, 5000] = x[1, 60000] = 9.0                   # equal maxima in different groups: the first wins
    x[1, 20000] = x[1, 65000] = -9.0
    x[2, 30000] = x[2, 50000] = np.nan               # two NaNs: the first wins argmax, any NaN wins amax
    (a, ta) = pair(x)
    (f, tf) = pair(data(2 ** 17 + 3, seed=1))         # odd length: scalar steps
    (h, th) = pair(data(90000, np.float16, seed=2))
    (i, ti) = pair(np.arange(-40000, 40000, dtype=np.int32))
    y = f * 2.0
    outs = [a.sum(dim=1), a.amax(dim=1), a.argmax(dim=1), a.argmin(dim=1), (a > 0).any(dim=1),
            (a > -10).all(dim=1), f.sum(), y, y.amin(), h.sum(), i.sum(), (i * 3).amax()]
    plan = lt.kernel_plan(*outs)
    assert plan.count("kernel") == len(paths(*outs)) == 4, plan   # as unsplit: f's sum, y and its amin fuse
    assert sorted(plan.geometry.values()) == [
        "rows threads=1024 groups=2 rows=1 per_thread=0 vec=4 split=2",      # int32 (int64 sum)
        "rows threads=1024 groups=2 rows=1 per_thread=0 vec=4 split=2",      # float16
        "rows threads=1024 groups=3 rows=1 per_thread=0 vec=1 split=3",      # 2^17 + 3: scalar steps
        "rows threads=1024 groups=6 rows=1 per_thread=0 vec=4 split=2"], plan.geometry   # 3 rows x 2 groups
    lt.eval(*outs)
    check(outs[0], ta.sum(1), 1e-3)
    check(outs[1], ta.amax(1))
    check(outs[2], ta.argmax(1))
    check(outs[3], ta.argmin(1))
    check(outs[4], (ta > 0).any(1))
    check(outs[5], (ta > -10).all(1))
    check(outs[6], tf.sum(), 1e-3)
    check(outs[7], tf * 2.0)
    check(outs[8], (tf * 2.0).amin())
    check(outs[9], th.float().sum().half(), 0.5)
    check(outs[10], ti.sum())
    check(outs[11], (ti * 3).amax())


@pytest.mark.parametrize("spec, want", [("rows:split=3", "threads=1024 groups=3 rows=1 per_thread=0 vec=4 split=3"),
                                        ("rows:split=1", "threads=1024 groups=1 rows=1 per_thread=0 vec=4"),
                                        ("split=2", "threads=1024 groups=2 rows=1 per_thread=0 vec=4 split=2")])
def test_forced_split(gpu, monkeypatch, spec, want):
    monkeypatch.setenv(GEOMETRY_ENV, spec)
    n = 65536 + 4 * (len(spec))                       # a shape of its own per case
    (x, tx) = pair(data(n, ties=True))
    outs = [x.argmax(), x.sum()]
    assert all(p.endswith("geometry " + want) for p in paths(*outs)), paths(*outs)
    lt.eval(*outs)
    check(outs[0], tx.argmax())
    check(outs[1], tx.sum(), 1e-3)


# ---------------------------------------------------------------- columns

def test_column_reductions(gpu):
    (x, tx) = pair(data((40, 70), ties=True))
    (c, tc) = pair(data((3000, 5), seed=1))
    (i, ti) = pair(np.arange(-50, 55, dtype=np.int8).reshape(3, 5, 7))
    outs = [x.argmax(dim=0), x.argmin(dim=0), x.amax(dim=0), c.sum(dim=0), i.sum(dim=1)]
    ps = paths(*outs)
    assert all(p.startswith("// columns:") for p in ps), ps
    assert "rows=32" in paths(outs[3])[0]                  # few outputs: the reduced dim split 32 ways
    lt.eval(*outs)
    check(outs[0], tx.argmax(0))
    check(outs[1], tx.argmin(0))
    check(outs[2], tx.amax(0))
    check(outs[3], tc.sum(0), 1e-4)
    check(outs[4], ti.sum(1))


def test_column_reductions_split_over_groups(gpu):
    """Few outputs and a long reduced dim (>= 16384): the reduced dim is split over groups per 32
    outputs as well; the last group of each 32 folds the partials in group order.  Ties and NaN
    across groups, two blocks of 32 outputs (idle lanes), integers, bfloat16, a view."""
    x = np.round(data((40000, 5))).astype(np.float32)
    x[30000, 2] = x[35000, 2] = 9.0
    x[12345, 4] = x[22222, 4] = np.nan
    (a, ta) = pair(x)
    (i, ti) = pair(np.arange(-100000, 100000, dtype=np.int32).reshape(20000, 10))
    (b, tb) = pair(data((17000, 33), seed=1), "bf16")
    outs = [a.sum(dim=0), a.amax(dim=0), a.argmax(dim=0), a.argmin(dim=0), (a > 0).any(dim=0), i.sum(dim=0),
            b.sum(dim=0), a[:, 1:].amin(dim=0)]
    ps = paths(*outs)
    assert len(ps) == 4 and all(p.startswith("// columns:") and " split=" in p for p in ps), ps
    lt.eval(*outs)
    check(outs[0], ta.sum(0))
    check(outs[1], ta.amax(0))
    check(outs[2], ta.argmax(0))
    check(outs[3], ta.argmin(0))
    check(outs[4], (ta > 0).any(0))
    check(outs[5], ti.sum(0))
    check(outs[6], tb.float().sum(0).to(torch.bfloat16), 0.5)
    check(outs[7], ta[:, 1:].amin(0))


# ---------------------------------------------------------------- forced geometries still compute right

@pytest.mark.parametrize("spec, cols, want", [
    ("rows:threads=64,per_thread=0", 300, "threads=64 groups=5 rows=1 per_thread=0 vec=4"),
    ("rows:rows=2", 301, "threads=64 groups=3 rows=2 per_thread=10 vec=1"),
    ("rows:rows=2,vec=1", 304, "threads=64 groups=3 rows=2 per_thread=10 vec=1"),
    ("rows:threads=128", 308, "threads=128 groups=5 rows=1 per_thread=4 vec=4"),
    ("linear:per_thread=1,groups=1", 302, "threads=256 groups=1 rows=1 per_thread=1 vec=1")])
def test_forced_geometry(gpu, monkeypatch, spec, cols, want):
    # a shape of its own per case: no plan compiled under another setting is reused
    monkeypatch.setenv(GEOMETRY_ENV, spec)
    (x, tx), (y, ty) = pair(data((5, cols))), pair(data(cols * 3, seed=1))
    outs = [lt.softmax(x * 2.0, dim=-1), (y * 3.0).exp()]
    assert any(p.endswith("geometry " + want) for p in paths(*outs)), paths(*outs)
    lt.eval(*outs)
    check(outs[0], torch.softmax(tx * 2.0, -1))
    check(outs[1], (ty * 3.0).exp(), 1e-4)

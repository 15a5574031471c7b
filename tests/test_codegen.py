"""Kernel IR lowering and C rendering, from hand-made launches (no compiler involved)."""
from __future__ import annotations

import pytest

import lazytorch as lt
from lazytorch.codegen.kernel_ir import Kernel
from lazytorch.codegen.lower import lower
from lazytorch.codegen.render import render
from lazytorch.ir import dtypes as D
from lazytorch.ir import views as V
from lazytorch.ir.build import call
from lazytorch.ir.node import Node
from lazytorch.passes.plan import BufferRef, Launch


def param(slot: int, shape, dtype=D.float32) -> Node:
    return Node("param", (), {"slot": slot, "kind": "buffer"}, tuple(shape), dtype)


def launch(nodes, reads, writes, pattern="pointwise", domain=(), reduce_dims=()) -> Launch:
    refs = [(n, BufferRef(i, n.shape, n.dtype, "param", i)) for i, n in enumerate(reads)]
    outs = [(n, BufferRef(100 + i, n.shape, n.dtype, "output", i)) for i, n in enumerate(writes)]
    return Launch("kernel", "k0", tuple(nodes), tuple(refs), tuple(outs), pattern,
                  tuple(domain), tuple(reduce_dims))


def test_pointwise_contiguous_with_broadcast_scalar():
    x, s = param(0, (4, 8)), param(1, ())
    y = call("mul", x, s)
    z = call("exp", y)
    k = lower(launch([y, z], [x, s], [z], domain=(4, 8)))
    assert k.contiguous and k.index_type == "i32"
    assert k.inner == (32,) and k.outer == ()
    # the scalar load is hoisted to the kernel stage; the rest runs per element
    assert [op.op for op in k.stages[0].ops] == ["load"]
    elem = [s for s in k.stages if s.scope == "elem"][0]
    assert [op.op for op in elem.ops] == ["load", "mul", "exp"]
    src = render(k, "c").source
    assert "lt_exp_f32(" in src and "#pragma omp simd" in src and "a0[i]" in src


def test_pointwise_strided_view_flip_and_broadcast():
    x, b = param(0, (6, 5)), param(1, (5,))
    spec = V.flip(V.permute(V.contiguous((6, 5)), (1, 0)), (0,))          # x.T.flip(0): (5, 6)
    v = Node("view", (x,), {"view": spec}, spec.shape, D.float32)
    bcol = Node("view", (b,), {"view": V.ViewSpec((5, 1), (1, 0))}, (5, 1), D.float32)   # b[:, None]
    y = call("add", v, bcol)
    k = lower(launch([v, bcol, y], [x, b], [y], domain=(5, 6)))
    assert not k.contiguous
    strides = {(a.arg, a.inner) for a in k.accesses}
    assert (0, (-1, 5)) in strides          # flipped, transposed read: negative stride
    assert (1, (1, 0)) in strides           # broadcast along the last dim: stride 0
    off = [a.offset for a in k.accesses if a.arg == 0][0]
    assert off == 4                         # flip starts at the last row of the transpose
    src = render(k, "c").source
    assert "o0 * -1" in src and "for (int32_t o = 0; o < 5; o++)" in src


def test_64bit_index_when_sizes_exceed_int32():
    x = param(0, (3, 2**30))
    y = call("neg", x)
    k = lower(launch([y], [x], [y], domain=(3, 2**30)))
    assert k.index_type == "i64" and "int64_t i" in render(k, "c").source
    x = param(0, (3, 2**20))
    k = lower(launch([call("neg", x)], [x], [call("neg", x)], domain=(3, 2**20)))
    assert k.index_type == "i32"


def test_row_reduction_sum_half_accumulates_in_f32():
    x = param(0, (4, 16), D.float16)
    s = call("sum", x, 1)
    k = lower(launch([s], [x], [s], "reduce", (4, 16), (1,)))
    assert k.outer == (4,) and k.inner == (16,)
    red = [r for st in k.stages for r in st.reduces]
    assert len(red) == 1 and red[0].dtype == D.float32 and red[0].op == "sum"
    src = render(k, "c").source
    assert "reduction(+:" in src and "(_Float16)" in src     # store narrows to half


def test_column_reduction_and_all_reduction():
    x = param(0, (8, 3))
    s = call("amax", x, 0)
    k = lower(launch([s], [x], [s], "reduce", (8, 3), (0,)))
    assert k.outer == (3,) and k.inner == (8,)
    assert [a.inner for a in k.accesses if a.arg == 0] == [(3,)]
    t = call("sum", x)
    k = lower(launch([t], [x], [t], "reduce", (8, 3), (0, 1)))
    assert k.outer == () and k.inner == (24,) and k.contiguous


def test_softmax_row_kernel_has_three_passes():
    x = param(0, (4, 16))
    m = call("amax", x, [1], True)
    e = call("exp", call("sub", x, m))
    s = call("sum", e, [1], True)
    y = call("div", e, s)
    nodes = [m, e.inputs[0], e, s, y]
    k = lower(launch(nodes, [x], [y], "row", (4, 16), (1,)))
    elems = [s for s in k.stages if s.scope == "elem"]
    assert len(elems) == 3
    assert [r.op for r in elems[0].reduces] == ["amax"] and [r.op for r in elems[1].reduces] == ["sum"]
    assert elems[2].stores and not elems[2].reduces


def test_argmax_keeps_index_and_nan_rule():
    x = param(0, (4, 16))
    a = call("argmax", x, 1)
    k = lower(launch([a], [x], [a], "reduce", (4, 16), (1,)))
    src = render(k, "c").source
    assert "!= " in src and "= i; }" in src and "INFINITY" in src


def test_scalars_are_arguments_not_literals():
    x, s = param(0, (8,)), Node("param", (), {"slot": 1, "kind": "scalar"}, (), D.float64)
    y = call("add", x, s)
    k = lower(launch([y], [x, s], [y], domain=(8,)))
    assert "2.5" not in render(k, "c").source and len(k.args) == 3


def test_show_kernels_any_backend():
    a = lt.randn(4, 8)
    text = lt.show_kernels(lt.softmax(a * 2.0, dim=-1), backend="cpu")
    assert "void lt_k0_row" in text and "lt_exp_f32" in text
    with pytest.raises(ValueError, match="no code generator"):
        lt.show_kernels(a + 1, backend="nope")


def test_softmax_keeps_exp_in_a_row_cache_on_c_only():
    x = param(0, (4, 16))
    m = call("amax", x, [1], True)
    e = call("exp", call("sub", x, m))
    s = call("sum", e, [1], True)
    y = call("div", e, s)
    ln = launch([m, e.inputs[0], e, s, y], [x], [y], "row", (4, 16), (1,))
    k = lower(ln, row_cache=True)
    elems = [s for s in k.stages if s.scope == "elem"]
    assert k.row_cache == [D.float32]
    assert "row_put" in [op.op for op in elems[1].ops]
    assert [op.op for op in elems[2].ops] == ["row_get", "div"]     # no exp recomputed
    assert "lt_row0[i] = " in render(k, "c").source
    assert not lower(ln).row_cache                 # GPU threads stride rows: they recompute


def test_column_reduction_uses_the_columns_template_on_c():
    x = param(0, (64, 300))
    s = call("sum", x, 0)
    src = render(lower(launch([s], [x], [s], "reduce", (64, 300), (0,))), "c").source
    assert "over columns" in src and "lt_c_acc" in src
    row = call("sum", x, 1)        # contiguous rows keep the rows template
    assert "over columns" not in render(lower(launch([row], [x], [row], "reduce", (64, 300), (1,))), "c").source


def test_full_reduction_splits_the_row_across_threads():
    # (a sum forks from ~1.8M elements: codegen/targets/c.py's PARALLEL; tests/test_parallel_work.py)
    x = param(0, (1 << 21,))
    t = call("sum", x)
    src = render(lower(launch([t], [x], [t], "reduce", (1 << 21,), (0,))), "c").source
    assert "omp parallel for simd" in src and "reduction(+:" in src


@pytest.mark.parametrize("base,spec,dims", [
    ((), V.ViewSpec((3, 4), (0, 0), 0), ()),
    ((4,), V.ViewSpec((3, 4), (0, 1), 0), (1,)),
    ((4,), V.ViewSpec((4, 3), (1, 0), 0), (0,)),            # unsqueeze(1).expand: not right-aligned
    ((2, 1, 4), V.ViewSpec((2, 5, 4), (4, 0, 1), 0), (0, 2, 2)),
    ((4, 5), V.ViewSpec((5, 4), (1, 5), 0), None),           # a transpose reorders: no broadcast
    ((4,), V.ViewSpec((2,), (2,), 0), None),
])
def test_broadcast_dims_of_views(base, spec, dims):
    from lazytorch.codegen.lower import _broadcast_dims
    b = param(0, base)
    view = Node("view", (b,), {"view": spec}, spec.shape, D.float32)
    assert _broadcast_dims(view) == dims


@pytest.mark.parametrize("backend_name", ["cpu", "metal-emu"])
def test_negative_float_to_uint8_wraps_as_torch_cpu(backend_name):
    """-19.0 -> 237 (through int64), as torch's CPU casts; a direct float -> unsigned conversion is
    undefined in C and saturates to 0 on ARM and GPUs.  The spelling is checked on every target."""
    import numpy as np
    import torch

    from lazytorch.codegen.targets import TARGETS
    assert all("int64" in t.cast["uint8"] for t in TARGETS.values())
    v = np.array([-19.0, -1.5, 3.7, 300.0, -256.0, 255.9], np.float32)
    previous = lt.get_backend()
    lt.set_backend(backend_name)
    try:
        got = (lt.from_numpy(v) * 1).to(lt.uint8).numpy()
    finally:
        lt.set_backend(previous)
    np.testing.assert_array_equal(got, torch.from_numpy(v).to(torch.uint8).numpy())


@pytest.mark.parametrize("target", ["c", "metal", "cuda"])
def test_header_holds_only_the_helpers_the_kernel_calls(target):
    """render reports the helpers it wrote; the header keeps those (and what they call), no others."""
    from lazytorch.codegen.render import header, helper_library
    x = param(0, (4, 8))
    e = call("exp", x)
    s = call("sigmoid", e)
    r = render(lower(launch([e, s], [x], [s], "pointwise", (4, 8))), target)
    head = header(target, r)
    library = helper_library(target)
    defined = {n for n in library.names if n in head}
    assert {n for n in r.helpers if n in library.names} <= defined
    assert not any("idiv" in n or "shuffle" in n for n in defined)      # integer division, simd trees
    assert len(head) < len(library.header(library.names)) / 2
    if target == "c":
        assert "lt_sigmoid_f32" in r.helpers and "lt_f32u" in defined       # a helper's own helper (exp's type)


def test_a_loop_of_several_transcendentals_vectorizes_on_c(tmp_path):
    """Every C helper is inlined (shaders/c_preamble.h.j2 LT_INLINE), so a loop calling several of
    them still vectorizes: gcc's -O2 inliner budget had left one call of W1's GELU, sigmoid and tanh
    in the loop, which then ran scalar (290 ms against 22 at 2^24 elements)."""
    import re
    import subprocess
    from lazytorch.codegen.render import header
    from lazytorch.runtime import compiler
    tc = compiler.toolchain()
    if not re.search(r"\bgcc\b|\(GCC\)|Debian|Ubuntu|Red Hat", tc.version) or "clang" in tc.version:
        pytest.skip(f"the vectorizer report is gcc's (-fopt-info-vec); the C compiler here is {tc.version}")
    a, b, c = (param(i, (1 << 16,)) for i in range(3))
    u = call("add", call("mul", a, b), c)
    t1, s, t2, e = call("tanh", u), call("sigmoid", a), call("tanh", b), call("exp", c)
    out = call("add", call("sub", call("mul", t1, s), t2), e)
    nodes = [u.inputs[0], u, t1, s, t2, e, out.inputs[0].inputs[0], out.inputs[0], out]
    r = render(lower(launch(nodes, [a, b, c], [out], "pointwise", out.shape)), "c")
    source = tmp_path / "k.c"
    source.write_text(header("c", r) + r.source)
    report = subprocess.run([tc.compiler, *tc.flags, "-fopt-info-vec-optimized", str(source), "-o",
                             str(tmp_path / "k.so")], capture_output=True, text=True, check=True).stderr
    loops = source.read_text().count("#pragma omp simd")
    vectorized = set(re.findall(r"k\.c:(\d+):\d+: optimized: loop vectorized", report))
    assert loops >= 1 and len(vectorized) == loops, report

"""The Metal emulator: hand-written Metal kernels run on the CPU against numpy, the assembled source
against the one the Metal runtime itself writes, and barriers/simd collectives really synchronise."""
from __future__ import annotations

import re

import numpy as np
import pytest

from lazytorch.codegen.targets.metal import ATTRIBUTES, MetalCall, assemble
from lazytorch.ir import dtypes as D
from lazytorch.runtime import metal_emu


def call(name, inputs, outputs, source, grid, tg, template=(), header=""):
    """inputs/outputs: {name: (shape, dtype)}."""
    return MetalCall(name, tuple(inputs), tuple(outputs), source, header,
                     tuple(s for s, _ in inputs.values()), tuple(d for _, d in inputs.values()),
                     tuple(s for s, _ in outputs.values()), tuple(d for _, d in outputs.values()),
                     grid, tg, tuple(template))


# ---------------------------------------------------------------- the source matches the runtime's

def runtime_source(c: MetalCall, tmp_path, capfd) -> str:
    """The source the Metal runtime generates for `c` (printed when tracing an export on Linux)."""
    mx = pytest.importorskip("mlx.core")
    mxd = {D.float32: mx.float32, D.float16: mx.float16, D.bfloat16: mx.bfloat16, D.int32: mx.int32,
           D.int64: mx.int64, D.bool_: mx.bool_, D.uint8: mx.uint8, D.int8: mx.int8, D.int16: mx.int16}
    kernel = mx.fast.metal_kernel(name=c.name, input_names=list(c.input_names),
                                  output_names=list(c.output_names), source=c.source, header=c.header)
    template = [(n, mxd[v] if isinstance(v, D.DType) else v) for n, v in c.template]

    def f(*xs):
        return kernel(inputs=list(xs), output_shapes=list(c.output_shapes),
                      output_dtypes=[mxd[d] for d in c.output_dtypes], grid=c.grid,
                      threadgroup=c.threadgroup, template=template or None, verbose=True)
    capfd.readouterr()
    mx.export_function(str(tmp_path / "k.mlxfn"), f,
                       *[mx.zeros(s, dtype=mxd[d]) for s, d in zip(c.input_shapes, c.input_dtypes)])
    out = capfd.readouterr().out
    return out.split("```\n", 1)[1].rsplit("\n```", 1)[0]


SOURCE_CASES = [
    call("pw", {"a": ((4, 16), D.float32), "s": ((), D.float32)}, {"out": ((4, 16), D.float32)},
         "uint i = thread_position_in_grid.x; out[i] = a[i] * s; // a_shape a_strides a_ndim",
         (64, 1, 1), (32, 1, 1)),
    call("tpl", {"x": ((3,), D.float16), "y": ((9, 2), D.bfloat16), "m": ((2,), D.bool_)},
         {"o": ((9,), D.int32), "p": ((2,), D.bfloat16)},
         "uint3 t = threadgroup_position_in_grid; uint l = thread_index_in_simdgroup;"
         " uint g = simdgroup_index_in_threadgroup; uint3 n = threads_per_threadgroup; y_shape;",
         (9, 1, 1), (32, 1, 1), template=[("T", D.float32), ("N", 4), ("B", True)], header="// h\n"),
]


@pytest.mark.parametrize("c", SOURCE_CASES, ids=lambda c: c.name)
def test_assembled_source_is_the_runtimes(c, tmp_path, capfd):
    assert assemble(c).source.rstrip("\n") == runtime_source(c, tmp_path, capfd).rstrip("\n")


# ---------------------------------------------------------------- pointwise

@pytest.mark.parametrize("dtype", [D.float32, D.float16, D.bfloat16])
def test_pointwise(dtype):
    n = 1000
    x = np.linspace(-3, 3, n).astype(np.float32)
    src = """
    uint i = thread_position_in_grid.x;
    if (i >= N) return;
    float v = float(x[i]);
    out[i] = T(metal::precise::exp(v) * s + metal::abs(v));
    """
    c = call("pw_" + dtype.short, {"x": ((n,), dtype), "s": ((), D.float32)}, {"out": ((n,), dtype)},
             src, (n, 1, 1), (256, 1, 1), template=[("T", dtype), ("N", n)])
    xs = D.from_compute(x, dtype)
    (out,) = metal_emu.run(c, [xs, np.array(0.5, np.float32)])
    xv = D.to_compute(xs, dtype).astype(np.float64)
    rtol = {D.float32: 1e-6, D.float16: 1e-3, D.bfloat16: 8e-3}[dtype]   # one rounding to dtype
    np.testing.assert_allclose(D.to_compute(out, dtype), np.exp(xv) * 0.5 + np.abs(xv), rtol=rtol)


def test_bfloat_rounds_to_nearest_even():
    vals = np.array([1.0, 1.00390625, 1.005859375, 1.0078125 + 2**-9, -3.3, 65504.0, np.inf, np.nan,
                     1e-40, 3.4e38], np.float32)
    src = "uint i = thread_position_in_grid.x; out[i] = bfloat(x[i]); h[i] = half(x[i]);"
    n = len(vals)
    c = call("bf", {"x": ((n,), D.float32)}, {"out": ((n,), D.bfloat16), "h": ((n,), D.float16)},
             src, (n, 1, 1), (32, 1, 1))
    out, h = metal_emu.run(c, [vals])
    np.testing.assert_array_equal(out, D.f32_to_bf16(vals))
    with np.errstate(over="ignore"):
        np.testing.assert_array_equal(h, vals.astype(np.float16))


def test_unwritten_outputs_are_poisoned_and_edge_threadgroups_partial():
    # grid 100 in threadgroups of 32: the last threadgroup has 4 threads and says so.
    src = "uint i = thread_position_in_grid.x; out[i] = threads_per_threadgroup.x; if (i < 2) return;"
    c = call("edge", {"x": ((1,), D.int32)}, {"out": ((101,), D.int32)}, src, (100, 1, 1), (32, 1, 1))
    (out,) = metal_emu.run(c, [np.zeros(1, np.int32)])
    np.testing.assert_array_equal(out[:100], [32] * 96 + [4] * 4)
    assert out[100] == -1        # never written: the emulator's 0xFF fill shows through


def test_grid_in_3d():
    src = """
    uint3 p = thread_position_in_grid;
    out[(p.z * 5 + p.y) * 7 + p.x] = p.x + 10 * p.y + 100 * p.z + 1000 * thread_index_in_threadgroup;
    """
    c = call("g3", {"x": ((1,), D.int32)}, {"out": ((3, 5, 7),  D.int32)}, src, (7, 5, 3), (4, 2, 2))
    (out,) = metal_emu.run(c, [np.zeros(1, np.int32)])
    z, y, x = np.meshgrid(range(3), range(5), range(7), indexing="ij")
    size_x = np.where(x < 4, 4, 3)           # the edge threadgroup in x has 3 threads
    size_y = np.where(y < 4, 2, 1)
    lid = (x % 4) + size_x * ((y % 2) + size_y * (z % 2))
    np.testing.assert_array_equal(out, x + 10 * y + 100 * z + 1000 * lid)


# ---------------------------------------------------------------- threadgroup reductions

ROW_SUM = """
uint row = threadgroup_position_in_grid.x;
uint lid = thread_position_in_threadgroup.x;
uint lsize = threads_per_threadgroup.x;
threadgroup float shared[32];
float acc = 0;
for (uint i = lid; i < N; i += lsize) acc += float(x[row * N + i]);
acc = simd_sum(acc);
if (thread_index_in_simdgroup == 0) shared[simdgroup_index_in_threadgroup] = acc;
threadgroup_barrier(mem_flags::mem_threadgroup);
if (simdgroup_index_in_threadgroup == 0) {
  acc = lid < (lsize + 31) / 32 ? shared[lid] : 0.0f;
  acc = simd_sum(acc);
  if (lid == 0) out[row] = acc;
}
"""


@pytest.mark.parametrize("rows,n,tg", [(7, 1000, 256), (3, 5, 32), (4, 333, 96), (2, 70, 40)])
def test_row_reduction(rows, n, tg):
    x = np.random.default_rng(0).standard_normal((rows, n)).astype(np.float32)
    c = call("rowsum", {"x": ((rows, n), D.float32)}, {"out": ((rows,), D.float32)}, ROW_SUM,
             (rows * tg, 1, 1), (tg, 1, 1), template=[("N", n)])
    (out,) = metal_emu.run(c, [x])
    np.testing.assert_allclose(out, x.astype(np.float64).sum(1), rtol=1e-5, atol=1e-5)


# Shared-memory tree reduction (a barrier per level) and a reversal that only works if every thread
# writes before any reads; B=false drops the barriers.
TREE = """
uint lid = thread_position_in_threadgroup.x;
uint row = threadgroup_position_in_grid.x;
threadgroup float buf[TG];
buf[lid] = x[row * TG + lid];
if (B) threadgroup_barrier(mem_flags::mem_threadgroup);
rev[row * TG + lid] = buf[TG - 1 - lid];
if (B) threadgroup_barrier(mem_flags::mem_threadgroup);
for (uint s = TG / 2; s > 0; s /= 2) {
  if (lid < s) buf[lid] += buf[lid + s];
  if (B) threadgroup_barrier(mem_flags::mem_threadgroup);
}
if (lid == 0) out[row] = buf[0];
"""


def run_tree(barriers: bool, rows=3, tg=64):
    x = np.random.default_rng(1).standard_normal((rows, tg)).astype(np.float32)
    c = call("tree", {"x": ((rows, tg), D.float32)}, {"out": ((rows,), D.float32), "rev": ((rows, tg), D.float32)},
             TREE, (rows * tg, 1, 1), (tg, 1, 1), template=[("TG", tg), ("B", barriers)])
    out, rev = metal_emu.run(c, [x])
    return x, out, rev


def test_multiple_barriers():
    x, out, rev = run_tree(True)
    np.testing.assert_allclose(out, x.sum(1), rtol=1e-5, atol=1e-5)
    np.testing.assert_array_equal(rev, x[:, ::-1])


def test_missing_barrier_is_observable():
    x, out, rev = run_tree(False)
    assert not np.array_equal(rev, x[:, ::-1])
    assert not np.allclose(out, x.sum(1), rtol=1e-5, atol=1e-5)


# ---------------------------------------------------------------- simd collectives

SIMD = """
uint lane = thread_index_in_simdgroup;
uint i = thread_position_in_grid.x;
float v = x[i];
o_max[i] = simd_max(v);
o_min[i] = simd_min(v);
o_prod[i] = simd_product(v);
o_down[i] = simd_shuffle_down(v, 3);
o_xor[i] = simd_shuffle_xor(v, 1);
o_bcast[i] = simd_broadcast(v, 5);
o_scan[i] = simd_prefix_exclusive_sum(v);
o_part[i] = lane < 5 ? simd_sum(v) : -1.0f;   // only lanes 0..4 take part
"""


def test_simd_collectives():
    n = 64 + 20      # two full simdgroups and a partial one
    x = (np.arange(n) % 7 + 1).astype(np.float32) / 4
    names = ["o_max", "o_min", "o_prod", "o_down", "o_xor", "o_bcast", "o_scan", "o_part"]
    c = call("simd", {"x": ((n,), D.float32)}, {k: ((n,), D.float32) for k in names}, SIMD,
             (n, 1, 1), (n, 1, 1))
    got = dict(zip(names, metal_emu.run(c, [x])))
    for g in range(0, n, 32):
        v = x[g:g + 32].astype(np.float64)
        m = len(v)
        lanes = np.arange(m)
        np.testing.assert_array_equal(got["o_max"][g:g + m], v.max())
        np.testing.assert_array_equal(got["o_min"][g:g + m], v.min())
        np.testing.assert_allclose(got["o_prod"][g:g + m], v.prod(), rtol=1e-5)
        np.testing.assert_array_equal(got["o_down"][g:g + m], np.where(lanes + 3 < m, v[np.minimum(lanes + 3, m - 1)], v))
        np.testing.assert_array_equal(got["o_xor"][g:g + m], np.where((lanes ^ 1) < m, v[np.minimum(lanes ^ 1, m - 1)], v))
        np.testing.assert_array_equal(got["o_bcast"][g:g + m], v[5])
        np.testing.assert_allclose(got["o_scan"][g:g + m], np.concatenate([[0], np.cumsum(v)[:-1]]), rtol=1e-6)
        np.testing.assert_allclose(got["o_part"][g:g + m], np.where(lanes < 5, v[:5].sum(), -1), rtol=1e-6)


# ---------------------------------------------------------------- errors

def test_float64_is_refused_with_the_dtype_named():
    with pytest.raises(TypeError, match="float64.*not supported on Metal"):
        call("f64", {"x": ((4,), D.float64)}, {"out": ((4,), D.float32)}, "", (4, 1, 1), (4, 1, 1))


def test_bad_launches_are_refused():
    c = call("big", {"x": ((4,), D.float32)}, {"out": ((4,), D.float32)},
             "out[thread_position_in_grid.x] = 0;", (4096, 1, 1), (2048, 1, 1))
    with pytest.raises(ValueError, match="more than 1024 threads"):
        metal_emu.run(c, [np.zeros(4, np.float32)])
    c = call("empty", {"x": ((4,), D.float32)}, {"out": ((4,), D.float32)},
             "out[thread_position_in_grid.x] = 0;", (0, 1, 1), (32, 1, 1))
    with pytest.raises(ValueError, match="positive"):
        metal_emu.run(c, [np.zeros(4, np.float32)])
    c = call("wrong", {"x": ((4,), D.float32)}, {"out": ((4,), D.float32)},
             "out[thread_position_in_grid.x] = 0;", (4, 1, 1), (4, 1, 1))
    with pytest.raises(ValueError, match="input x is int32"):
        metal_emu.run(c, [np.zeros(4, np.int32)])


def test_functions_metal_lacks_do_not_compile():
    # erf is not in the Metal standard library; a kernel using it must fail here as on a Mac.
    c = call("noerf", {"x": ((4,), D.float32)}, {"out": ((4,), D.float32)},
             "uint i = thread_position_in_grid.x; out[i] = metal::erf(x[i]);", (4, 1, 1), (4, 1, 1))
    with pytest.raises(RuntimeError, match="erf"):
        metal_emu.run(c, [np.zeros(4, np.float32)])


def test_collective_hidden_in_a_header_helper():
    # The body names no barrier or simd op, so the emulator first runs it without fibers, meets the
    # simd_sum inside the helper and runs it again with them.
    header = "inline float lt_total(float v) { return metal::simd_sum(v); }\n"
    c = call("hidden", {"x": ((64,), D.float32)}, {"out": ((64,), D.float32)},
             "uint i = thread_position_in_grid.x; out[i] = lt_total(x[i]);", (64, 1, 1), (64, 1, 1),
             header=header)
    x = np.arange(64, dtype=np.float32)
    (out,) = metal_emu.run(c, [x])
    np.testing.assert_array_equal(out, np.repeat([x[:32].sum(), x[32:].sum()], 32))


# ---------------------------------------------------------------- generated kernels: MLX's own source

# Programs whose kernels cover the signature's cases: a 0-d Python-scalar input (`const constant T&`),
# inputs of fewer than 8 elements (`constant`), shape/stride buffers, several outputs (the error
# flag of checked integer division), row kernels (template arguments, simd and threadgroup
# attributes), argmax (two outputs of different dtypes) and 16-bit storage types.
GENERATED = {
    "pointwise_scalar_small": lambda lt: (lt.tensor([[1.0, 2.0, 3.0]]) * 2.5
                                          + lt.tensor(np.linspace(-1, 1, 12, dtype=np.float32).reshape(4, 3)),),
    "softmax_rows_f16": lambda lt: (lt.softmax(lt.arange(40.0).reshape(4, 10).to(lt.float16) / 7, -1),),
    "argmax_and_int_division": lambda lt: (lt.arange(30).reshape(5, 6).argmax(1),
                                           lt.arange(30).reshape(5, 6) // lt.tensor([1, 2, 3, 4, 5, 6])),
    "sum_dim0_bf16": lambda lt: (lt.arange(24.0).reshape(2, 3, 4).to(lt.bfloat16).sum(0),),
}


@pytest.mark.parametrize("name", list(GENERATED))
def test_emulator_runs_mlx_wrapped_source_of_generated_kernels(name, tmp_path, capfd, monkeypatch):
    """metal-emu compiles, for every kernel lazytorch generates, exactly the text MLX's
    `mx.fast.metal_kernel` builds (printed by MLX itself), followed only by the emulator's launcher;
    and the program's values are right."""
    import lazytorch as lt
    torch = pytest.importorskip("torch")
    calls = []
    real = metal_emu.launch_call

    def recording(launch, target):
        call = real(launch, target)
        calls.append(call)
        return call
    monkeypatch.setattr(metal_emu, "launch_call", recording)
    lt.set_backend("metal-emu")
    got = [t.to(lt.float32).numpy() for t in GENERATED[name](lt)]
    want = [t.to(torch.float32).numpy() for t in GENERATED[name](torch)]
    for g, w in zip(got, want):
        np.testing.assert_allclose(np.asarray(g, np.float64), np.asarray(w, np.float64), rtol=1e-2)
    calls = [c for c in calls if c is not None]
    assert calls, "the program launched no Metal kernel"
    for c in calls:
        mlx_text = runtime_source(c, tmp_path, capfd)
        unit = metal_emu.translation_unit(assemble(c))
        assert unit.startswith(mlx_text + "\n"), (mlx_text, unit)
        assert unit[len(mlx_text):].lstrip("\n").startswith("// ---- metal-emu launcher")
        signature = mlx_text[len(c.header):].split(") {\n", 1)[0]
        for i, n in enumerate(c.input_names):
            assert f" {n} [[buffer(" in signature
        for n in c.output_names:
            assert f"device " in signature and f"* {n} [[buffer(" in signature
        used = [a for a, _ in ATTRIBUTES if a in c.source]
        assert used and signature.count("[[") - signature.count("[[buffer(") - 1 == len(used)
        for a, t in ATTRIBUTES:
            assert (f"  {t} {a} [[{a}]]" in signature) == (a in used)


def test_a_plans_kernels_compile_in_one_translation_unit(monkeypatch):
    """metal-emu compiles the kernels of a new plan with one g++ run (each kernel's MLX-wrapped
    text unchanged, in a namespace of its own), and the results are right."""
    import lazytorch as lt
    from lazytorch.runtime import compiler
    torch = pytest.importorskip("torch")
    compiled = []
    real = compiler.load
    monkeypatch.setattr(compiler, "load", lambda source, tc=None: (compiled.append(source), real(source, tc))[1])
    lt.set_backend("metal-emu")
    x = np.random.default_rng(0).standard_normal((6, 37)).astype(np.float32)

    def prog(m, x):     # three launches: row softmax, column sum, argmax (two outputs)
        x = m.tensor(x)
        return m.softmax(x * 1.7, -1), x.sum(0) * 3, x.argmax(1)
    got = prog(lt, x)
    lt.eval(*got)
    for g, w in zip(got, prog(torch, x)):
        np.testing.assert_allclose(g.numpy(), w.numpy(), rtol=1e-5, atol=1e-6)
    kernels = [s for s in compiled if "[[kernel]]" in s]
    assert len(kernels) == 1, f"{len(kernels)} translation units"
    unit = kernels[0]
    assert unit.count("[[kernel]] void custom_kernel_") >= 2
    assert re.search(r"namespace lt_[0-9a-f]{12}_1 \{", unit), unit[:300]

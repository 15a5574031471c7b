"""Library launches (matmul) in the shapes models use, against torch: linear layers over 2-D/3-D/4-D
inputs with contiguous, transposed and strided weights and activations, batched attention
products, scaled_dot_product_attention; how each product is called (runtime/library.py) and the
launch counts of linear layers with their epilogues."""
from __future__ import annotations

import numpy as np
import pytest

import lazytorch as lt
from lazytorch.runtime.library import blas_readable, fold_rows, gemm_plan
from oracle import check, sample


def F(m):
    return m.nn.functional


def kinds(*tensors) -> list[str]:
    return [launch.kind for launch in lt.kernel_plan(*tensors).launches]


# ---------------------------------------------------------------- linear layers

LINEAR_INPUTS = [(6, 16), (3, 5, 16), (2, 3, 4, 16), (1, 1, 16), (0, 4, 16)]


@pytest.mark.parametrize("x_shape", LINEAR_INPUTS)
@pytest.mark.parametrize("w_layout", ["contiguous", "transposed", "strided"])
def test_linear_shapes_and_weight_layouts(backend, x_shape, w_layout):
    x, w, b = sample(x_shape), sample((24, 16), seed=1, layout=w_layout), sample((24,), seed=2)
    check(lambda m, x, w, b: F(m).linear(x, w, b), x, w, b, atol=1e-4)
    check(lambda m, x, w: F(m).linear(x, w), x, w, atol=1e-4)


def test_linear_empty_inner_dim(backend):
    # in_features 0: the product is all zeros, then the bias
    check(lambda m, x, w, b: F(m).linear(x, w, b), sample((2, 3, 0)), sample((4, 0), seed=1), sample((4,), seed=2))


@pytest.mark.parametrize("x_layout", ["transposed", "strided"])
def test_linear_non_contiguous_activation(backend, x_layout):
    # a transposed (3, 5, 16) activation cannot fold its rows into a view: it is copied once
    x, w, b = sample((3, 5, 16), layout=x_layout), sample((8, 16), seed=1), sample((8,), seed=2)
    check(lambda m, x, w, b: F(m).linear(x, w, b), x, w, b, atol=1e-4)


def test_linear_permuted_activation_and_broadcast_bias(backend):
    # rows of x.permute(1, 0, 2) step unevenly (no fold); a (1, 1, 8) bias broadcasts like (8,)
    x, w, b = sample((5, 3, 16)), sample((8, 16), seed=1), sample((1, 1, 8), seed=2)
    check(lambda m, x, w, b: m.matmul(x.permute(1, 0, 2), w.t()) + b, x, w, b, atol=1e-4)


def test_linear_float64_and_batch_broadcast_weight(backend):
    x, w = sample((2, 3, 4, 16), "float64"), sample((1, 16, 8), "float64", seed=1)
    check(lambda m, x, w: m.matmul(x, w), x, w)


def test_linear_float16(backend):
    x, w, b = sample((2, 5, 16), "float16", low=-1, high=1), sample((8, 16), "float16", seed=1, low=-1, high=1), \
        sample((8,), "float16", seed=2)
    check(lambda m, x, w, b: F(m).linear(x, w, b), x, w, b, atol=1e-2, rtol=1e-2)


# ---------------------------------------------------------------- attention products

@pytest.mark.parametrize("q_shape,k_shape", [
    ((2, 3, 8, 4), (2, 3, 8, 4)),        # (B, H, T, d)
    ((6, 8, 4), (6, 10, 4)),             # (B*H, T, d), S != T
    ((2, 1, 8, 4), (1, 3, 8, 4)),        # broadcast batch dims
    ((1, 1, 4), (1, 1, 4)),              # single query and key
])
def test_batched_attention_products(backend, q_shape, k_shape):
    q, k = sample(q_shape), sample(k_shape, seed=1)
    check(lambda m, q, k: m.softmax(q @ k.transpose(-2, -1) * 0.5, -1) @ k, q, k, atol=1e-4)


def test_heads_split_from_fused_qkv(backend):
    # the GPT block's layout: q, k, v are strided views of one (B, T, 3C) buffer
    B, T, C, H = 2, 6, 16, 4

    def heads(m, x, w):
        q, k, v = (x @ w.t()).split(C, dim=2)
        q, k, v = (t.view(B, T, H, C // H).transpose(1, 2) for t in (q, k, v))
        return ((q @ k.transpose(-2, -1)).softmax(-1) @ v).transpose(1, 2).reshape(B, T, C)
    check(heads, sample((B, T, C)), sample((3 * C, C), seed=1), atol=1e-4)


@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("dtype", ["float32", "float16", "bfloat16"])
def test_sdpa(backend, causal, dtype):
    tol = {"float32": 1e-4, "float16": 1e-2, "bfloat16": 3e-2}[dtype]
    q, k, v = (sample((2, 3, 8, 16), dtype, seed=s, low=-1, high=1) for s in range(3))
    check(lambda m, q, k, v: F(m).scaled_dot_product_attention(q, k, v, is_causal=causal), q, k, v,
          atol=tol, rtol=tol)


def test_sdpa_mask_and_scale(backend):
    q = sample((2, 2, 5, 8))
    k, v = sample((2, 2, 7, 8), seed=1), sample((2, 2, 7, 8), seed=2)
    sdpa = lambda m: F(m).scaled_dot_product_attention           # noqa: E731
    check(lambda m, q, k, v, a: sdpa(m)(q, k, v, attn_mask=a, scale=0.3), q, k, v, sample((5, 7), seed=3),
          atol=1e-4)
    check(lambda m, q, k, v, a: sdpa(m)(q, k, v, attn_mask=a), q, k, v, sample((5, 7), "bool", seed=4),
          atol=1e-4)


# ---------------------------------------------------------------- how the products are called

def _library_launches(out):
    return [launch for launch in lt.kernel_plan(out).launches if launch.kind == "library"]


def test_linear_is_one_flat_gemm_and_attention_one_batched_call():
    x, w = lt.randn(4, 8, 16), lt.randn(24, 16)
    (linear,) = _library_launches(F(lt).linear(x, w))
    assert gemm_plan(linear).mode == "flat"                 # (32, 16) @ (16, 24): one GEMM
    q, k = lt.randn(2, 3, 8, 4), lt.randn(2, 3, 8, 4)
    (scores,) = _library_launches(q @ k.transpose(-2, -1))
    plan = gemm_plan(scores)
    assert plan.mode == "batched" and plan.b.view is not None   # the key read transposed, in place


def test_fold_rows_and_blas_readable():
    """Layout decisions (strides in elements), checked against numpy's own reshape and views."""
    base = np.arange(2 * 3 * 5 * 4, dtype=np.float32).reshape(2, 3, 5, 4)

    def elems(a):
        return tuple(st // a.itemsize for st in a.strides)

    def folded(a):
        row, col = fold_rows(a.shape, elems(a))
        return np.lib.stride_tricks.as_strided(a, (int(np.prod(a.shape[:-1])), a.shape[-1]),
                                               (row * a.itemsize, col * a.itemsize))
    np.testing.assert_array_equal(folded(base), base.reshape(30, 4))
    cols = base[..., :2]                                     # evenly strided rows of a wider buffer
    np.testing.assert_array_equal(folded(cols), cols.reshape(30, 2))
    single = base[:1, :1]                                    # size-1 leading dims are skipped
    np.testing.assert_array_equal(folded(single), single.reshape(5, 4))
    head = base[:, 1]                                        # (2, 5, 4): batch stride 60, rows 4
    assert fold_rows(head.shape, elems(head)) is None
    swapped = base.transpose(1, 0, 2, 3)                     # leading dims out of order
    assert fold_rows(swapped.shape, elems(swapped)) is None

    m = np.ones((4, 6, 8), np.float32)
    for arr, readable in [(m, True), (m.transpose(0, 2, 1), True), (m[..., ::2], False),
                          (m[:, ::-1], False), (m[::-1], False), (np.broadcast_to(m[:, :1], m.shape), False)]:
        assert blas_readable(arr.shape, elems(arr)) is readable, arr.strides


# ---------------------------------------------------------------- launch counts

def test_linear_gelu_residual_block_launches(backend):
    """x + gelu(linear(x)): the GEMM, then ONE kernel doing bias, gelu and the residual add."""
    def blk(m, x, w, b):
        return x + F(m).gelu(F(m).linear(x, w, b), approximate="tanh")
    x, w, b = sample((2, 6, 16)), sample((16, 16), seed=1), sample((16,), seed=2)
    assert kinds(blk(lt, x.lt, w.lt, b.lt)) == ["library", "kernel"]
    check(blk, x, w, b, atol=1e-4)


def test_mlp_block_launches(backend):
    """x + c_proj(gelu(c_fc(x))): two GEMMs, each followed by one epilogue kernel."""
    def mlp(m, x, w1, b1, w2, b2):
        return x + F(m).linear(F(m).gelu(F(m).linear(x, w1, b1)), w2, b2)
    args = sample((2, 6, 16)), sample((32, 16), seed=1), sample((32,), seed=2), sample((16, 32), seed=3), \
        sample((16,), seed=4)
    assert kinds(mlp(lt, *[a.lt for a in args])) == ["library", "kernel", "library", "kernel"]
    check(mlp, *args, atol=1e-4)


def test_bias_joins_the_gemm_on_mlx_backends():
    """metal-emu plans as the metal backend: the bias add is the GEMM's C operand (mx.addmm), the
    launch runs through runtime/mlx.py's library path (not the host fallback); cpu keeps the bias
    in the epilogue kernel that follows the GEMM."""
    from lazytorch.realize import kernel_plan
    from lazytorch.runtime.mlx import host_library_launch
    x, w, b = lt.randn(2, 6, 16), lt.randn(24, 16), lt.randn(24)
    y = F(lt).linear(x, w, b)
    emu = kernel_plan([y], "metal-emu")
    assert [(launch.kind, [n.op for n in launch.nodes]) for launch in emu.launches] == \
        [("library", ["view", "matmul", "add"])]
    assert host_library_launch(emu.launches[0]) is not None
    cpu = kernel_plan([y], "cpu")
    assert [launch.kind for launch in cpu.launches] == ["library", "kernel"]


@pytest.mark.parametrize("shape,bias_shape", [((2, 6, 16), (24,)), ((6, 16), (1, 24)), ((2, 2, 3, 16), (24,))])
def test_addmm_path_values(shape, bias_shape):
    lt.set_backend("metal-emu")
    check(lambda m, x, w, b: m.matmul(x, w.t()) + b, sample(shape), sample((24, 16), seed=1, layout="transposed"),
          sample(bias_shape, seed=2), atol=1e-4)
    # a bias read through a view (every other element of a longer vector) joins as the view
    check(lambda m, x, w, b: m.matmul(x, w.t()) + b[::2], sample(shape), sample((24, 16), seed=1),
          sample((48,), seed=2), atol=1e-4)
    # not a row bias (broadcast over rows and columns): stays in a kernel
    check(lambda m, x, w, b: m.matmul(x, w.t()) + b, sample(shape), sample((24, 16), seed=1),
          sample(shape[:-1] + (1,), seed=3), atol=1e-4)


def test_sdpa_and_written_attention_are_two_gemms_around_one_row_kernel():
    q, k, v = (lt.randn(2, 3, 8, 4) for _ in range(3))
    causal = F(lt).scaled_dot_product_attention(q, k, v, is_causal=True)
    written = (q @ k.transpose(-2, -1) * 0.5).softmax(-1) @ v
    for out in (causal, written):
        assert kinds(out) == ["library", "kernel", "library"]


@pytest.mark.parametrize("causal", [False, True])
def test_sdpa_runs_whole_on_mlx_backends(causal):
    """On metal-emu (as on metal and cuda) sdpa in the fused form is ONE library launch
    (mx.fast.scaled_dot_product_attention) reading the heads in place; a mask, or a causal
    mask with fewer queries than keys (MLX aligns it bottom-right, torch top-left), decomposes."""
    from lazytorch.realize import kernel_plan
    B, T, C, H = 2, 6, 16, 4

    def attn(m, x, w, causal=causal, scale=None):
        q, k, v = (x @ w.t()).split(C, dim=2)
        q, k, v = (t.view(B, T, H, C // H).transpose(1, 2) for t in (q, k, v))
        return F(m).scaled_dot_product_attention(q, k, v, is_causal=causal, scale=scale)
    x, w = sample((B, T, C)), sample((3 * C, C), seed=1)
    plan = kernel_plan([attn(lt, x.lt, w.lt)], "metal-emu")
    assert [launch.name.split("_", 1)[1] for launch in plan.launches] == ["matmul", "scaled_dot_product_attention"]
    lt.set_backend("metal-emu")
    check(attn, x, w, atol=1e-4)
    check(lambda m, x, w: attn(m, x, w, scale=0.2), x, w, atol=1e-4)
    # a value head dim other than the query's
    check(lambda m, q, k, v: F(m).scaled_dot_product_attention(q, k, v, is_causal=causal), sample((1, 2, 4, 8)),
          sample((1, 2, 4, 8), seed=1), sample((1, 2, 4, 5), seed=2), atol=1e-4)
    q, k = sample((1, 2, 3, 4)), sample((1, 2, 5, 4), seed=1)
    sdpa = F(lt).scaled_dot_product_attention(q.lt, k.lt, k.lt, is_causal=True)
    assert "library" in kinds(sdpa) and "kernel" in kinds(sdpa)           # decomposed: L != S
    check(lambda m, q, k: F(m).scaled_dot_product_attention(q, k, k, is_causal=True), q, k, atol=1e-4)


def test_sdpa_reference_form_on_host():
    """The host fallback of the kept sdpa (reference_ops) against torch, float32 and float16."""
    import torch
    from lazytorch.realize import kernel_plan
    from lazytorch.runtime.reference import run_launch
    for dtype, tol in (("float32", 1e-5), ("float16", 2e-3)):
        q, k, v = (sample((2, 3, 5, 4), dtype, seed=s, low=-1, high=1) for s in range(3))
        for causal in (False, True):
            out = F(lt).scaled_dot_product_attention(q.lt, k.lt, v.lt, is_causal=causal, scale=0.7)
            (launch,) = kernel_plan([out], "metal-emu").launches
            got = run_launch(launch, [np.asarray(t.torch.float().numpy() if dtype == "float32" else t.torch.numpy())
                                      for t in (q, k, v)])[0]
            want = torch.nn.functional.scaled_dot_product_attention(q.torch.float(), k.torch.float(), v.torch.float(),
                                                                    is_causal=causal, scale=0.7)
            np.testing.assert_allclose(np.asarray(got, np.float32), want.numpy(), atol=tol, rtol=tol)


def test_flipped_and_expanded_operands(backend):
    # negative and zero strides are not BLAS-readable: copied once, then one GEMM
    x, w = sample((2, 3, 16)), sample((16, 8), seed=1)
    check(lambda m, x, w: m.matmul(x.flip(-1), w), x, w, atol=1e-4)
    check(lambda m, x, w: m.matmul(x.flip(1), w.flip(0)), x, w, atol=1e-4)
    check(lambda m, x, w: m.matmul(x[:, :1].expand(2, 5, 16), w), x, w, atol=1e-4)



def _device_reference(program, *arrays):
    """Run the single reference launch of `program(*tensors)` through runtime/mlx.py's device
    implementation (DEVICE_REFERENCE) over MLX arrays on MLX's CPU; returns the host result.
    The arrays have distinct shapes: a launch's reads are matched to them by shape."""
    import mlx.core as mx
    from lazytorch.ir import dtypes as D
    from lazytorch.realize import kernel_plan
    from lazytorch.runtime.executor import raise_first
    from lazytorch.runtime.mlx import MlxBuffer, device_reference_launch, mx_dtype, to_mx
    plan = kernel_plan([program(lt, *(lt.tensor(a) for a in arrays))], "cuda")
    (launch,) = [launch for launch in plan.launches if launch.kind == "reference"]
    fn = device_reference_launch(launch)
    assert fn is not None, [n.op for n in launch.nodes]
    by_shape = {a.shape: MlxBuffer(to_mx(a, D.from_numpy(a.dtype)), D.from_numpy(a.dtype)) for a in arrays}
    assert len(by_shape) == len(arrays)
    (_, ref), = launch.writes
    out = MlxBuffer(mx.zeros(ref.shape, dtype=mx_dtype(ref.dtype)), ref.dtype)
    check = fn([by_shape[b.shape] for _, b in launch.reads], [out])
    if check is not None and check.flag.item():        # as the executor does after a run
        raise_first([(check, launch)])
    return np.asarray(out)


def test_an_embedding_of_positions_made_in_its_launch_runs_on_the_device_of_mlx_backends():
    """A traced step's positions (an iota inlined into the position embedding's launch) are made
    by MLX on the device, so the launch is no host round trip; so is a fill joined by cat;
    checked against torch."""
    import torch
    from lazytorch.ir.creation import iota
    from lazytorch.tensor import Tensor
    weight = np.random.default_rng(0).standard_normal((9, 4)).astype(np.float32)
    got = _device_reference(lambda m, w: F(m).embedding(Tensor(iota((2, 6), 1)), w), weight)
    want = F(torch).embedding(torch.arange(6).expand(2, 6), torch.from_numpy(weight)).numpy()
    np.testing.assert_array_equal(got, want)
    got = _device_reference(lambda m, w: m.cat([w, m.zeros(9, 2)], 1), weight)
    np.testing.assert_array_equal(got, torch.cat([torch.from_numpy(weight), torch.zeros(9, 2)], 1).numpy())


@pytest.mark.parametrize("dtype", [np.float32, np.float16])
@pytest.mark.parametrize("ids_shape", [(2, 3), (5,), (0,), ()])
def test_embedding_runs_on_the_device_of_mlx_backends(dtype, ids_shape):
    """On metal and cuda an embedding launch is an MLX take on the device (runtime/mlx.py
    DEVICE_REFERENCE), not a round trip of the table through host memory; checked against torch,
    with torch's IndexError for a bad index."""
    import torch
    rng = np.random.default_rng(0)
    weight, ids = rng.standard_normal((7, 4)).astype(dtype), rng.integers(0, 7, ids_shape)
    got = _device_reference(lambda m, i, w: F(m).embedding(i, w), ids, weight)
    np.testing.assert_array_equal(got, F(torch).embedding(torch.from_numpy(ids), torch.from_numpy(weight)).numpy())
    if ids.size:
        with pytest.raises(IndexError, match=r"embedding: index 7 is out of range for 7 embeddings"):
            _device_reference(lambda m, i, w: F(m).embedding(i, w), np.where(ids == ids.flat[0], 7, ids), weight)


@pytest.mark.parametrize("dim,index_shape", [(0, (2, 3)), (1, (4, 2)), (1, (2, 5)), (-1, (3, 1))])
def test_gather_and_cat_run_on_the_device_of_mlx_backends(dim, index_shape):
    import torch
    rng = np.random.default_rng(1)
    x = rng.standard_normal((4, 5)).astype(np.float32)
    index = rng.integers(0, x.shape[dim], index_shape)
    got = _device_reference(lambda m, x, i: m.gather(x, dim, i), x, index)
    np.testing.assert_array_equal(got, torch.gather(torch.from_numpy(x), dim, torch.from_numpy(index)).numpy())
    with pytest.raises(RuntimeError, match=r"gather: index -1 is out of bounds"):
        _device_reference(lambda m, x, i: m.gather(x, dim, i), x, np.where(index == index.flat[0], -1, index))
    y = rng.standard_normal((4, 3)).astype(np.float32)
    got = _device_reference(lambda m, x, y: m.cat([x, y, x], dim=1), x, y)
    np.testing.assert_array_equal(got, np.concatenate([x, y, x], axis=1))


def test_cross_entropy_target_error_names_the_target_on_the_device():
    logits = np.random.default_rng(2).standard_normal((3, 5)).astype(np.float32)
    with pytest.raises(IndexError, match="Target 9 is out of bounds"):
        _device_reference(lambda m, x, t: F(m).cross_entropy(x, t), logits, np.array([1, 9, 0]))


def test_plans_of_mlx_backends_replay_through_mx_compile():
    """A plan of device launches replays through mx.compile (runtime/mlx.py MxCompiledPlan): traced
    once, then run without the launches' Python; a bad index still raises torch's error (the
    deferred flag comes out of the compiled graph and the plain run raises), and later runs stay
    compiled.  Run on MLX's CPU with a plan of device reference ops and a library matmul."""
    import torch
    from lazytorch.realize import kernel_plan
    from lazytorch.runtime.mlx import CUDA, MlxBackend, MxCompiledPlan
    backend = MlxBackend("mlx-cpu-test", CUDA._replace(available=lambda mx: True, ahead=lambda: False))
    rng = np.random.default_rng(5)
    ids, w, w2 = rng.integers(0, 7, (2, 3)), rng.standard_normal((7, 4)).astype(np.float32), \
        rng.standard_normal((4, 5)).astype(np.float32)
    program = lambda m, i, a, b: F(m).embedding(i, a) @ b
    plan = kernel_plan([program(lt, *(lt.tensor(x) for x in (ids, w, w2)))], "cuda")
    assert {launch.kind for launch in plan.launches} == {"reference", "library"}
    ex = backend.prepare(plan)
    assert isinstance(ex, MxCompiledPlan)
    by_shape = {x.shape: x for x in (ids, w, w2)}

    def run(i):
        args = [backend.adopt(i if p.shape == ids.shape else by_shape[p.shape]) for p in plan.params]
        (out,) = ex.run(args)
        return np.asarray(out)

    want = program(torch, *(torch.from_numpy(x) for x in (ids, w, w2))).numpy()
    for _ in range(3):
        np.testing.assert_allclose(run(ids), want, rtol=1e-5, atol=1e-6)
    warm = ex.traced                    # (MLX may trace a function twice before it settles)
    assert warm <= 2
    with pytest.raises(IndexError, match="index 7 is out of range"):
        run(np.where(ids == ids.flat[0], 7, ids))
    for _ in range(2):
        np.testing.assert_allclose(run(ids), want, rtol=1e-5, atol=1e-6)
    assert ex.traced == warm and ex._traces is not None        # no new trace, still compiled


def test_mlx_runs_start_the_gpu_and_synchronize_waits_for_the_last():
    """Each run of an MLX plan starts its outputs on the device without waiting (MLX is lazy:
    otherwise nothing runs before a host read), and synchronize waits for the last run started
    (runtime/mlx.py submit / synchronize, behind lt.cuda.synchronize).  On MLX's CPU."""
    import mlx.core as mx
    from lazytorch.realize import kernel_plan
    from lazytorch.runtime import mlx as mlx_runtime
    backend = mlx_runtime.MlxBackend("mlx-cpu-test", mlx_runtime.CUDA._replace(
        available=lambda mx: True, ahead=lambda: False))
    a = np.arange(12, dtype=np.float32).reshape(3, 4)
    plan = kernel_plan([lt.tensor(a) @ lt.tensor(a.T)], "cuda")
    (out,) = backend.prepare(plan).run([backend.adopt(a), backend.adopt(a.T)][:len(plan.params)])
    assert mlx_runtime._LAST_SUBMITTED and mlx_runtime._LAST_SUBMITTED[0] is out.array
    mlx_runtime.synchronize()
    assert mlx_runtime._LAST_SUBMITTED == []
    np.testing.assert_allclose(np.asarray(out), a @ a.T)
    mx.eval(out.array)


def test_mx_compile_replay_tells_the_sign_of_a_zero_scalar():
    """-0.0 == 0.0 in Python; a trace baked with one must not serve the other (1 / (x * s))."""
    from types import SimpleNamespace as NS
    import mlx.core as mx
    from lazytorch.ir import dtypes as D
    from lazytorch.runtime.mlx import MlxBuffer, MxCompiledPlan

    class Executor:                      # out = 1 / (x * s)
        plan = NS(params=[NS(slot=0), NS(slot=1)], scalar_slots=frozenset({1}),
                  outputs=[NS(dtype=D.float32)], launches=[None])
        params = [(0, lambda v, d: v, D.float32), (1, lambda v, d: v, D.float32)]
        backend = NS(any_flag_set=lambda flags: False)

        def run(self, args, deferred=None):
            return [MlxBuffer(1 / (args[0].array * args[1]), D.float32)]

    ex = MxCompiledPlan(Executor())
    x = MlxBuffer(mx.array(np.ones(3, np.float32)), D.float32)
    for s in (0.0, 0.0, 0.0, -0.0, -0.0, 0.0):
        (out,) = ex.run([x, s])
        np.testing.assert_array_equal(np.asarray(out), np.full(3, np.copysign(np.inf, s), np.float32))


def test_mx_compile_replay_keeps_one_trace_per_scalar_values():
    """Python scalars are frozen into a trace (kernels compiled ahead take them by value): the
    replay keeps a trace per tuple of scalar values, reuses it when the values repeat, and runs
    uncompiled on a plan's first run and beyond MAX_TRACES distinct values -- always with the
    right result."""
    from types import SimpleNamespace as NS
    import mlx.core as mx
    from lazytorch.ir import dtypes as D
    from lazytorch.runtime.mlx import MlxBuffer, MxCompiledPlan

    plain = []

    class Executor:                      # out = x * s + 1 through the executor's calling convention
        plan = NS(params=[NS(slot=0), NS(slot=1)], scalar_slots=frozenset({1}),
                  outputs=[NS(dtype=D.float32)], launches=[None])
        params = [(0, lambda v, d: v, D.float32), (1, lambda v, d: v, D.float32)]
        backend = NS(any_flag_set=lambda flags: False)

        def run(self, args, deferred=None):
            if deferred is None:
                plain.append(args[1])
            return [MlxBuffer(args[0].array * args[1] + 1, D.float32)]

    ex = MxCompiledPlan(Executor())
    x = MlxBuffer(mx.array(np.arange(4, dtype=np.float32)), D.float32)
    for s in [2.0, 3.0, 2.0, 3.0] + [float(k) for k in range(10, 10 + MxCompiledPlan.MAX_TRACES)]:
        (out,) = ex.run([x, s])
        np.testing.assert_array_equal(np.asarray(out), np.arange(4) * s + 1)
    assert len(ex._traces) == MxCompiledPlan.MAX_TRACES
    # the first run is uncompiled, and so are the values past the cap
    assert plain == [2.0] + [float(k) for k in range(16, 10 + MxCompiledPlan.MAX_TRACES)]
    traced = ex.traced
    (out,) = ex.run([x, 2.0])                                   # a kept trace: no new one
    np.testing.assert_array_equal(np.asarray(out), np.arange(4) * 2.0 + 1)
    assert ex.traced == traced

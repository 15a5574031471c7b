"""TF32 follows torch's flags (lazytorch/ir/precision.py): a float32 convolution called while
`backends.cudnn.allow_tf32` is set (torch's default), and any other float32 product called while
`backends.cuda.matmul.allow_tf32` is (`set_float32_matmul_precision("high")`), records that in its
graph, and the cuda backend's GEMMs of it compute in TF32 (cuBLAS's CUBLAS_COMPUTE_32F_FAST_TF32).
The plans are built for the cuda backend without a GPU (`kernel_plan`), and the compute type each
GEMM would be given is read from `cuda_driver.compute_type`; the cpu backend's results, which the
flags leave alone, are compared with torch."""
from __future__ import annotations

import warnings

import numpy as np
import pytest
import torch

import lazytorch as lt
from lazytorch.ir.graph import program
from lazytorch.realize import kernel_plan
from lazytorch.runtime import cuda_driver
from lazytorch.runtime.cuda_driver import COMPUTE_32F, COMPUTE_32F_FAST_TF32, compute_type


@pytest.fixture(autouse=True)
def _flags():
    """Each test starts from torch's defaults and leaves the flags as it found them (conftest.py
    turns cuDNN's off where the cuda backend is under test)."""
    saved = (lt.backends.cudnn.allow_tf32, lt.get_float32_matmul_precision())
    lt.backends.cudnn.allow_tf32 = True
    lt.set_float32_matmul_precision("highest")
    yield
    lt.backends.cudnn.allow_tf32, precision = saved
    lt.set_float32_matmul_precision(precision)


def gemm_types(*tensors) -> list[int]:
    """The cuBLAS compute type of every GEMM in the tensors' plan for the cuda backend."""
    plan = kernel_plan(list(tensors), "cuda")
    return [compute_type(n) for launch in plan.launches if launch.kind == "library"
            for n in launch.nodes if n.op == "matmul"]


TF32, FP32 = COMPUTE_32F_FAST_TF32, COMPUTE_32F


# ---------------------------------------------------------------- the flags, as torch's

def test_the_flags_are_torchs_with_torchs_defaults_and_one_source_of_truth():
    assert (lt.backends.cudnn.allow_tf32, lt.backends.cuda.matmul.allow_tf32) == (True, False)
    assert lt.get_float32_matmul_precision() == torch.get_float32_matmul_precision() == "highest"
    # (set, value) -> (precision, matmul.allow_tf32, warned): the precision is the one setting,
    # allow_tf32 its view, as in torch (whose newest versions refuse to read it after a mix)
    steps = [(("precision", "high"), ("high", True, False)), (("precision", "medium"), ("medium", True, False)),
             (("allow", False), ("highest", False, False)), (("allow", True), ("high", True, False)),
             (("precision", "highest"), ("highest", False, False)), (("allow", 1), ("high", True, False)),
             (("precision", "HIGH"), ("high", True, True)), (("precision", "fast"), ("high", True, True))]
    for (kind, value), want in steps:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            if kind == "precision":
                lt.set_float32_matmul_precision(value)
            else:
                lt.backends.cuda.matmul.allow_tf32 = value
        assert (lt.get_float32_matmul_precision(), lt.backends.cuda.matmul.allow_tf32, bool(caught)) == want
    assert lt.backends.cudnn.allow_tf32 is True                 # (the flags are independent)
    lt.backends.cudnn.allow_tf32 = 0
    assert lt.backends.cudnn.allow_tf32 is False and lt.backends.cuda.matmul.allow_tf32 is True


# ---------------------------------------------------------------- convolutions: cuDNN's flag

@pytest.mark.parametrize("transposed", [False, True])
@pytest.mark.parametrize("allow", [True, False])
def test_every_product_of_a_convolution_follows_cudnns_flag_forward_and_backward(transposed, allow):
    lt.backends.cudnn.allow_tf32 = allow
    lt.set_float32_matmul_precision("high" if not allow else "highest")   # (the other flag: no say)
    conv = (lt.nn.ConvTranspose2d(4, 6, 3, stride=2, padding=1) if transposed
            else lt.nn.Conv2d(4, 6, 3, stride=2, padding=1))
    x = lt.randn(3, 4, 9, 9, requires_grad=True)
    y = conv(x)
    (y * y).sum().backward()
    # forward, the input's gradient, the weight's: a product each (the transposed input gradient
    # is itself a convolution, built from the forward's decision)
    assert gemm_types(y, x.grad, conv.weight.grad) == [TF32 if allow else FP32] * 3


def test_a_grouped_convolution_and_a_batch_folded_one_follow_it_too():
    x = lt.randn(4, 8, 6, 6, requires_grad=True)
    w = lt.randn(8, 2, 3, 3, requires_grad=True)
    y = lt.nn.functional.conv2d(x, w, groups=4, padding=1)
    y.sum().backward()
    assert gemm_types(y, x.grad, w.grad) == [TF32] * 3


def test_the_decision_is_made_at_the_call_and_the_gradient_inherits_it():
    conv = lt.nn.Conv2d(3, 5, 3)
    x = lt.randn(2, 3, 7, 7, requires_grad=True)
    y = conv(x)                                     # called while allowed (the default)
    lt.backends.cudnn.allow_tf32 = False            # set before the eval and the backward
    y.sum().backward()
    assert gemm_types(y, x.grad, conv.weight.grad) == [TF32] * 3
    y2 = conv(x)                                    # the same call, replayed by the call memo before
    assert gemm_types(y2) == [FP32]
    assert "tf32" not in y2.node.attrs and y.node.attrs["tf32"] is True


@pytest.mark.usefixtures("on_cpu")
def test_toggling_the_flag_rebuilds_the_call_and_compiles_a_new_plan():
    w, x = lt.randn(5, 3, 3, 2), lt.randn(2, 3, 11, 7)
    keys, values = [], []
    for allow in (True, False, True, False):
        lt.backends.cudnn.allow_tf32 = allow
        for _ in range(2):                          # (a repeat replays the call's recording)
            y = lt.nn.functional.conv2d(x, w)
            assert y.node.attrs.get("tf32", False) is allow
        keys.append(program([y.node]).key)
        before = lt.cache_info()
        values.append(y.numpy())
        after = lt.cache_info()
        assert (after.misses - before.misses, after.hits - before.hits) == ((1, 0) if len(keys) <= 2 else (0, 1))
    assert keys[0] == keys[2] != keys[1] == keys[3]
    for v in values[1:]:
        np.testing.assert_array_equal(v, values[0])           # (the cpu backend ignores it)


@pytest.mark.usefixtures("on_cpu")
def test_lt_compile_traces_again_when_a_flag_changes():
    w = lt.randn(4, 3, 3, 3)
    f = lt.compile(lambda x: lt.nn.functional.conv2d(x, w).relu())
    x = lt.randn(1, 3, 6, 6)
    traces = lt.compile_info().traces
    for allow in (True, True, False, False, True):
        lt.backends.cudnn.allow_tf32 = allow
        f(x)
    assert lt.compile_info().traces - traces == 2          # one per flag value: the first kept


# ---------------------------------------------------------------- other products: the matmul flag

def _products(a, b, m3, lin, q):
    """Each user-facing product (and, through its sum, its gradient's)."""
    F = lt.nn.functional
    return [a @ b, lt.mm(a, b), lt.bmm(m3, m3.transpose(1, 2)), F.linear(a, b.t()), lin(a),
            lt.addmm(a @ b, a, b), lt.einsum("ij,jk->ik", a, b), lt.matmul(a[0], b),
            F.scaled_dot_product_attention(q, q, q)]


@pytest.mark.parametrize("precision", ["highest", "high", "medium"])
def test_plain_products_and_their_gradients_follow_the_matmul_flag(precision):
    lt.set_float32_matmul_precision(precision)
    lt.backends.cudnn.allow_tf32 = precision == "highest"       # (the other flag: no say)
    a, b = lt.randn(4, 6, requires_grad=True), lt.randn(6, 5, requires_grad=True)
    m3, q = lt.randn(2, 3, 4, requires_grad=True), lt.randn(1, 2, 4, 8, requires_grad=True)
    lin = lt.nn.Linear(6, 5)
    outs = _products(a, b, m3, lin, q)
    sum(o.sum() for o in outs).backward()
    types = gemm_types(*outs, a.grad, b.grad, m3.grad, q.grad, lin.weight.grad)
    assert len(types) >= 2 * len(outs)
    assert set(types) == ({FP32} if precision == "highest" else {TF32})


def test_products_the_library_makes_for_no_gemm_of_torchs_stay_exact():
    """Under "high" too: an embedding's gradient (a one-hot product) and interpolation weights."""
    lt.set_float32_matmul_precision("high")
    emb = lt.nn.Embedding(10, 4)
    emb(lt.tensor([[1, 2, 2], [0, 9, 1]])).sum().backward()
    up = lt.nn.functional.interpolate(lt.randn(1, 2, 4, 4), scale_factor=2, mode="bilinear")
    assert gemm_types(emb.weight.grad, up) == [FP32] * 3


def test_half_products_have_no_tf32_form():
    lt.set_float32_matmul_precision("high")
    for dtype in (lt.float16, lt.bfloat16):
        y = lt.randn(4, 6).to(dtype) @ lt.randn(6, 5).to(dtype)
        assert "tf32" not in y.node.attrs and gemm_types(y) == [FP32]


# ---------------------------------------------------------------- results stay torch's on the host

@pytest.mark.usefixtures("on_cpu")
def test_the_flags_leave_results_on_the_cpu_backend_unchanged():
    """A conv -> batch norm -> relu -> linear step's output and gradients under each setting, against
    torch (float32 on the host: no TF32 there, whatever the flags)."""
    if True:
        torch.manual_seed(0)
        tm = torch.nn.Sequential(torch.nn.Conv2d(3, 8, 3, padding=1), torch.nn.BatchNorm2d(8), torch.nn.ReLU(),
                                 torch.nn.ConvTranspose2d(8, 4, 2, stride=2), torch.nn.Flatten(),
                                 torch.nn.Linear(4 * 12 * 12, 10))
        tx = torch.randn(2, 3, 6, 6)
        tm(tx).square().sum().backward()
        want = [tm(tx).detach().numpy()] + [p.grad.numpy() for p in tm.parameters()]
        for cudnn, precision in ((True, "highest"), (False, "high"), (True, "medium"), (False, "highest")):
            lt.backends.cudnn.allow_tf32 = cudnn
            lt.set_float32_matmul_precision(precision)
            lm = lt.nn.Sequential(lt.nn.Conv2d(3, 8, 3, padding=1), lt.nn.BatchNorm2d(8), lt.nn.ReLU(),
                                  lt.nn.ConvTranspose2d(8, 4, 2, stride=2), lt.nn.Flatten(),
                                  lt.nn.Linear(4 * 12 * 12, 10))
            lm.load_state_dict({k: lt.tensor(v.detach().numpy()) for k, v in tm.state_dict().items()})
            lx = lt.tensor(tx.numpy())
            lm(lx).square().sum().backward()
            got = [lm(lx).numpy()] + [p.grad.numpy() for p in lm.parameters()]
            for g, w in zip(got, want):
                np.testing.assert_allclose(g, w, rtol=2e-4, atol=2e-4)


def test_the_decision_prints_with_the_node():
    y = lt.nn.functional.conv2d(lt.randn(1, 2, 5, 5), lt.randn(3, 2, 3, 3))
    assert "tf32=True" in lt.dump(y)
    lt.backends.cudnn.allow_tf32 = False
    assert "tf32" not in lt.dump(lt.nn.functional.conv2d(lt.randn(1, 2, 5, 5), lt.randn(3, 2, 3, 3)))


# ---------------------------------------------------------------- on a GPU

@pytest.mark.skipif(not cuda_driver.available(), reason="needs the cuda backend's driver runtime (a GPU)")
def test_on_the_gpu_a_tf32_product_rounds_as_tf32_and_a_float32_one_does_not():
    """The same product and convolution under each setting against float64: TF32 keeps 10 mantissa
    bits (errors ~1e-4 of the largest value on these sums), float32 23 (~1e-7)."""
    previous = lt.get_backend()
    lt.set_backend("cuda")
    try:
        rng = np.random.default_rng(0)
        x, w = rng.standard_normal((256, 512), np.float32), rng.standard_normal((512, 128), np.float32)
        image, kernel = rng.standard_normal((4, 64, 16, 16), np.float32), rng.standard_normal((32, 64, 3, 3), np.float32)
        want_mm = x.astype(np.float64) @ w.astype(np.float64)
        want_conv = torch.nn.functional.conv2d(torch.tensor(image, dtype=torch.float64),
                                               torch.tensor(kernel, dtype=torch.float64)).numpy()

        def error(got, want):
            return float(np.abs(got - want).max() / np.abs(want).max())
        errors = {}
        for allow in (False, True):
            lt.set_float32_matmul_precision("high" if allow else "highest")
            lt.backends.cudnn.allow_tf32 = allow
            errors[allow] = (error((lt.tensor(x) @ lt.tensor(w)).numpy(), want_mm),
                             error(lt.nn.functional.conv2d(lt.tensor(image), lt.tensor(kernel)).numpy(), want_conv))
        assert max(errors[False]) < 1e-5 and min(errors[True]) > 3e-5, errors
    finally:
        lt.set_backend(previous)

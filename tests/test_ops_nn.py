"""lazytorch.nn.functional composites against torch: each op is decomposed into primitives by
passes/decompositions/nn.py and the decomposed program is evaluated and compared here."""
import math

import numpy as np
import pytest
import torch

import lazytorch as lt
from oracle import check, check_error, sample

FLOATS = ["float32", "float64", "float16", "bfloat16"]
HALF_TOL = {"float16": dict(atol=2e-3, rtol=2e-3), "bfloat16": dict(atol=2e-2, rtol=2e-2)}


def tol(dtype):
    return HALF_TOL.get(dtype, {})


def F(m):
    return m.nn.functional


# ---------------------------------------------------------------- softmax

@pytest.mark.parametrize("shape,dim", [((5,), 0), ((3, 4), -1), ((3, 4), 0), ((2, 3, 4), 1), ((), 0),
                                       ((0, 3), 1), ((3, 1), -1)])
@pytest.mark.parametrize("op", ["softmax", "log_softmax"])
def test_softmax_shapes(backend, op, shape, dim):
    check(lambda m, x: getattr(F(m), op)(x, dim=dim), sample(shape, low=-20, high=20))


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("op", ["softmax", "log_softmax"])
def test_softmax_dtypes(backend, op, dtype):
    check(lambda m, x: getattr(x, op)(-1), sample((4, 6), dtype, layout="transposed"), **tol(dtype))


@pytest.mark.filterwarnings("ignore:Implicit dimension choice")
def test_softmax_dtype_argument_and_large_values(backend):
    check(lambda m, x: m.softmax(x, 0, dtype=m.float32), sample((3, 2), "int64"))
    check(lambda m, x: F(m).log_softmax(x, 1, dtype=m.float64), sample((3, 2), "float16"))
    check(lambda m, x: m.softmax(x, -1), sample((2, 3), low=1000, high=3000))   # no overflow
    check(lambda m, x: F(m).softmax(x), sample((2, 3, 4)))                     # torch's implicit dim


# ---------------------------------------------------------------- norms

@pytest.mark.parametrize("shape,norm", [((2, 5), (5,)), ((2, 3, 4), (3, 4)), ((4,), (4,)), ((0, 3), (3,)),
                                        ((3, 1), (1,))])
@pytest.mark.parametrize("affine", [False, True])
def test_layer_norm_shapes(backend, shape, norm, affine):
    w = sample(norm, seed=1) if affine else None
    b = sample(norm, seed=2) if affine else None
    check(lambda m, x, w, b: F(m).layer_norm(x, norm, w, b, eps=1e-5), sample(shape, seed=0), w, b,
          atol=1e-4)


@pytest.mark.parametrize("dtype", FLOATS)
def test_layer_norm_dtypes(backend, dtype):
    check(lambda m, x, w, b: F(m).layer_norm(x, [6], weight=w, bias=b),
          sample((3, 6), dtype, layout="strided", low=5, high=9), sample((6,), dtype, seed=1),
          sample((6,), dtype, seed=2), **(tol(dtype) or dict(atol=1e-4)))


@pytest.mark.parametrize("shape,norm", [((2, 5), (5,)), ((2, 3, 4), (3, 4)), ((0, 3), (3,))])
@pytest.mark.parametrize("dtype", FLOATS)
def test_rms_norm(backend, shape, norm, dtype):
    check(lambda m, x, w: F(m).rms_norm(x, norm, w), sample(shape, dtype), sample(norm, dtype, seed=1),
          **tol(dtype))


def test_rms_norm_eps_and_no_weight(backend):
    check(lambda m, x: F(m).rms_norm(x, [3], eps=0.5), sample((2, 3)))
    check(lambda m, x: F(m).rms_norm(x, (3,)), sample((2, 3), low=-1e-4, high=1e-4), atol=1e-4)   # default eps


def test_norm_errors():
    check_error(lambda m, x: F(m).layer_norm(x, [4]), sample((2, 3)), exc=RuntimeError,
                match=("layer_norm", "[4]", "[2, 3]"))
    check_error(lambda m, x, w: F(m).layer_norm(x, [3], w), sample((2, 3)), sample((4,)), exc=RuntimeError,
                match=("layer_norm", "weight", "[4]"))
    check_error(lambda m, x: F(m).rms_norm(x, [2, 3]), sample((3,)), exc=RuntimeError, match=("rms_norm",))
    check_error(lambda m, x: F(m).layer_norm(x, [3]), sample((2, 3), "int64"), exc=TypeError,
                match=("layer_norm", "int64"))


# ---------------------------------------------------------------- linear

@pytest.mark.parametrize("xs,ws,bias", [((2, 4), (3, 4), True), ((4,), (3, 4), True), ((2, 5, 4), (3, 4), False),
                                        ((2, 4), (4,), False), ((0, 4), (3, 4), True), ((2, 4), (1, 4), True)])
def test_linear(backend, xs, ws, bias):
    b = sample(ws[:-1], seed=2) if bias else None
    check(lambda m, x, w, b: F(m).linear(x, w, b), sample(xs), sample(ws, seed=1, layout="transposed"), b)


@pytest.mark.parametrize("dtype", FLOATS)
def test_linear_dtypes(backend, dtype):
    check(lambda m, x, w, b: F(m).linear(x, w, b), sample((3, 8), dtype), sample((5, 8), dtype, seed=1),
          sample((5,), dtype, seed=2), **(tol(dtype) or {}))


def test_linear_errors():
    check_error(lambda m, x, w: F(m).linear(x, w), sample((2, 4)), sample((3, 5)), exc=RuntimeError,
                match=("linear", "[2, 4]", "[3, 5]"))
    check_error(lambda m, x, w, b: F(m).linear(x, w, b), sample((2, 4)), sample((3, 4)), sample((4,)),
                exc=RuntimeError, match=("linear", "bias", "[4]"))


# ---------------------------------------------------------------- dropout

def test_dropout_statistics():
    lt.manual_seed(0)
    x = lt.ones(200, 100) * 2.0
    y = F(lt).dropout(x, p=0.25).numpy()
    kept = y != 0
    assert abs(kept.mean() - 0.75) < 0.01
    np.testing.assert_allclose(y[kept], 2.0 / 0.75, rtol=1e-6)
    assert not np.array_equal(F(lt).dropout(x, 0.25).numpy(), y)   # a fresh mask per call


def test_dropout_identity_cases(backend):
    check(lambda m, x: F(m).dropout(x, 0.5, training=False), sample((3, 4)))
    check(lambda m, x: F(m).dropout(x, 0.0), sample((3, 4), "float16"))
    check(lambda m, x: F(m).dropout(x, 1.0), sample((3, 4)))          # all dropped: zeros
    check(lambda m, x: F(m).dropout(x, 0.5, False), sample((3,), "int64"))


def test_dropout_errors():
    check_error(lambda m, x: F(m).dropout(x, 1.5), sample((3,)), exc=ValueError, match=("dropout", "1.5"))


# ---------------------------------------------------------------- losses

def _targets(shape, classes, seed=3, ignore=None):
    t = np.random.default_rng(seed).integers(0, classes, size=shape)
    if ignore is not None and t.size:
        t.reshape(-1)[::3] = ignore
    return sample(t.shape, "int64", values=t)


@pytest.mark.parametrize("reduction", ["none", "mean", "sum"])
@pytest.mark.parametrize("xs", [(4, 5), (5,), (2, 3, 4), (0, 3)])
def test_cross_entropy_indices(backend, xs, reduction):
    classes = xs[0] if len(xs) == 1 else xs[1]
    tshape = () if len(xs) == 1 else xs[:1] + xs[2:]
    check(lambda m, x, t: F(m).cross_entropy(x, t, reduction=reduction), sample(xs), _targets(tshape, classes))


@pytest.mark.parametrize("reduction", ["none", "mean", "sum"])
def test_cross_entropy_weight_ignore_smoothing(backend, reduction):
    x, w = sample((6, 4), "float64"), sample((4,), "float64", low=0.5, high=2, seed=1)
    t = _targets((6,), 4, ignore=-1)
    check(lambda m, x, t, w: F(m).cross_entropy(x, t, w, ignore_index=-1, reduction=reduction), x, t, w)
    check(lambda m, x, t, w: F(m).cross_entropy(x, t, w, ignore_index=-1, reduction=reduction,
                                                label_smoothing=0.2), x, t, w)
    check(lambda m, x, t: F(m).cross_entropy(x, t, ignore_index=-1, reduction=reduction, label_smoothing=0.1),
          x, t)


def test_cross_entropy_all_ignored_is_nan(backend):
    t = sample((3,), "int64", values=np.full(3, -100))
    check(lambda m, x, t: F(m).cross_entropy(x, t), sample((3, 4)), t)


@pytest.mark.parametrize("dtype", FLOATS)
def test_cross_entropy_dtypes(backend, dtype):
    check(lambda m, x, t: F(m).cross_entropy(x, t), sample((5, 7), dtype, layout="transposed"),
          _targets((5,), 7), **tol(dtype))


@pytest.mark.parametrize("reduction", ["none", "mean", "sum"])
def test_cross_entropy_probabilities(backend, reduction):
    p = sample((3, 4, 2), values=np.random.default_rng(5).dirichlet(np.ones(4), size=(3, 2)).transpose(0, 2, 1)
               .astype(np.float32))
    check(lambda m, x, p, w: F(m).cross_entropy(x, p, w, reduction=reduction, label_smoothing=0.1),
          sample((3, 4, 2)), p, sample((4,), low=0.5, high=2, seed=1))


def test_cross_entropy_errors():
    check_error(lambda m, x, t: F(m).cross_entropy(x, t), sample((3, 4)), sample((4,), "int64"),
                exc=RuntimeError, match=("cross_entropy", "[3]"))
    check_error(lambda m, x, t: F(m).cross_entropy(x, t, reduction="avg"), sample((3, 4)), sample((3,), "int64"),
                exc=ValueError, match=("cross_entropy", "avg", "mean"))
    check_error(lambda m, x, t: F(m).cross_entropy(x, t), sample((3, 4), "int64"), sample((3,), "int64"),
                exc=TypeError, match=("cross_entropy", "int64"))


@pytest.mark.parametrize("reduction", ["none", "mean", "sum"])
@pytest.mark.parametrize("dtype", FLOATS)
def test_mse_loss(backend, reduction, dtype):
    check(lambda m, x, t: F(m).mse_loss(x, t, reduction=reduction), sample((3, 4), dtype),
          sample((3, 4), dtype, seed=1, layout="transposed"), **tol(dtype))


@pytest.mark.filterwarnings("ignore:Using a target size")
def test_mse_loss_broadcast_weight_empty(backend):
    check(lambda m, x, t: F(m).mse_loss(x, t), sample((3, 4)), sample((4,), seed=1))
    check(lambda m, x, t, w: F(m).mse_loss(x, t, weight=w), sample((3, 4)), sample((3, 4), seed=1),
          sample((3, 4), low=0, high=1, seed=2))
    check(lambda m, x, t: F(m).mse_loss(x, t, reduction="sum"), sample((0, 2)), sample((0, 2), seed=1))
    check(lambda m, x, t: F(m).mse_loss(x, t), sample((0, 2)), sample((0, 2), seed=1))   # nan, as torch


# ---------------------------------------------------------------- attention

@pytest.mark.parametrize("qs,ks,vs", [((2, 3, 4, 8), (2, 3, 5, 8), (2, 3, 5, 6)), ((4, 8), (6, 8), (6, 8)),
                                      ((2, 1, 3, 4), (2, 2, 3, 4), (2, 2, 3, 4)), ((1, 0, 4), (1, 3, 4), (1, 3, 4))])
def test_sdpa_shapes(backend, qs, ks, vs):
    check(lambda m, q, k, v: F(m).scaled_dot_product_attention(q, k, v), sample(qs), sample(ks, seed=1),
          sample(vs, seed=2))


def test_sdpa_masks_causal_scale(backend):
    q, k, v = sample((2, 4, 8)), sample((2, 4, 8), seed=1), sample((2, 4, 8), seed=2, layout="transposed")
    sdpa = lambda m: F(m).scaled_dot_product_attention          # noqa: E731
    check(lambda m, q, k, v: sdpa(m)(q, k, v, is_causal=True), q, k, v)
    check(lambda m, q, k, v: sdpa(m)(q, k, v, scale=0.3), q, k, v)
    keep = np.random.default_rng(4).random((4, 4)) < 0.6
    keep[:, 0] = True                                             # no fully masked row
    check(lambda m, q, k, v, mask: sdpa(m)(q, k, v, attn_mask=mask), q, k, v, sample((4, 4), "bool", values=keep))
    check(lambda m, q, k, v, mask: sdpa(m)(q, k, v, attn_mask=mask), q, k, v, sample((2, 1, 4), seed=5))
    ks = sample((2, 6, 8), seed=1)
    check(lambda m, q, k, v: sdpa(m)(q, k, k, is_causal=True), q, ks, ks)   # L != S: top-left aligned


def test_sdpa_query_with_every_key_masked_gets_zeros(backend):
    """A query whose keys are all masked (a bool mask's row of False, a float mask's row of -inf,
    scores of -inf) attends to nothing: torch's safe softmax gives zeros there, not NaN, on the
    plain and on the dropout path."""
    q, k, v = sample((2, 4, 8)), sample((2, 5, 8), seed=1), sample((2, 5, 8), seed=2)
    sdpa = lambda m: F(m).scaled_dot_product_attention          # noqa: E731
    keep = np.random.default_rng(4).random((2, 4, 5)) < 0.6
    keep[:, :, 0], keep[0, 1], keep[1, 3] = True, False, False
    check(lambda m, q, k, v, mask: sdpa(m)(q, k, v, attn_mask=mask), q, k, v, sample((2, 4, 5), "bool", values=keep))
    additive = np.where(keep, 0.0, -np.inf).astype(np.float32)
    check(lambda m, q, k, v, mask: sdpa(m)(q, k, v, attn_mask=mask), q, k, v,
          sample((2, 4, 5), values=additive))
    got = sdpa(lt)(q.lt, k.lt, v.lt, attn_mask=lt.tensor(keep), dropout_p=0.5)
    assert np.all(got.numpy()[0, 1] == 0) and np.all(got.numpy()[1, 3] == 0)
    assert np.isfinite(got.numpy()).all()
    grads = []                                      # and the gradients are torch's (zeros there too)
    for m in (torch, lt):
        ins = [m.tensor(x.torch.numpy(), requires_grad=True) for x in (q, k, v)]
        (sdpa(m)(*ins, attn_mask=m.tensor(keep)) ** 2).sum().backward()
        grads.append([np.asarray(t.grad.numpy()) for t in ins])
    for want, have in zip(*grads):
        np.testing.assert_allclose(have, want, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("dtype", FLOATS)
def test_sdpa_dtypes(backend, dtype):
    check(lambda m, q, k, v: F(m).scaled_dot_product_attention(q, k, v, is_causal=True),
          sample((2, 5, 8), dtype), sample((2, 5, 8), dtype, seed=1), sample((2, 5, 8), dtype, seed=2),
          **tol(dtype))


@pytest.mark.parametrize("causal", [False, True])
def test_sdpa_dropout_in_training(backend, causal):
    """dropout_p > 0: the attention weights are dropped with a seeded keep-mask and rescaled; with the
    same seed the mask repeats, so values and gradients compare with torch's math path given that mask."""
    import torch
    rng = np.random.default_rng(0)
    q, k, v = (rng.standard_normal((2, 3, 5, 4)).astype(np.float32) for _ in range(3))
    p, sdpa = 0.4, lt.nn.functional.scaled_dot_product_attention
    lt.manual_seed(7)
    eye = np.broadcast_to(np.eye(5, dtype=np.float32), (2, 3, 5, 5)).copy()      # out = dropped weights
    dropped = sdpa(lt.tensor(q), lt.tensor(k), lt.tensor(eye), dropout_p=p, is_causal=causal).numpy()

    def torch_attention(tq, tk, tv, keep):
        s = tq @ tk.transpose(-2, -1) / 2.0
        if causal:
            s = s.masked_fill(~torch.ones(5, 5, dtype=torch.bool).tril(), float("-inf"))
        return (torch.softmax(s, -1) * keep / (1 - p)) @ tv
    weights = torch_attention(torch.tensor(q), torch.tensor(k), torch.eye(5), 1.0).numpy()
    kept = dropped != 0
    np.testing.assert_allclose(dropped[kept], weights[kept], rtol=1e-5)
    assert 0.2 < 1 - kept[weights > 0].mean() < 0.6

    lt.manual_seed(7)
    lq, lk, lv = (lt.tensor(x, requires_grad=True) for x in (q, k, v))
    out = sdpa(lq, lk, lv, dropout_p=p, is_causal=causal)
    g = rng.standard_normal(out.shape).astype(np.float32)
    out.backward(lt.tensor(g))
    tq, tk, tv = (torch.tensor(x, requires_grad=True) for x in (q, k, v))
    want = torch_attention(tq, tk, tv, torch.tensor(kept.astype(np.float32)))
    want.backward(torch.tensor(g))
    np.testing.assert_allclose(out.detach().numpy(), want.detach().numpy(), atol=1e-5)
    for a, b in ((lq, tq), (lk, tk), (lv, tv)):
        np.testing.assert_allclose(a.grad.numpy(), b.grad.numpy(), atol=1e-5)


def test_sdpa_errors():
    sdpa = lambda m: F(m).scaled_dot_product_attention          # noqa: E731
    check_error(lambda m, q, k: sdpa(m)(q, k, k), sample((2, 4, 8)), sample((2, 4, 6)), exc=RuntimeError,
                match=("scaled_dot_product_attention", "[2, 4, 8]", "[2, 4, 6]"))
    check_error(lambda m, q: sdpa(m)(q, q, q, dropout_p=1.5), sample((2, 4, 8)), exc=RuntimeError,
                match=("dropout probability", "1.5"))
    check_error(lambda m, q, mask: sdpa(m)(q, q, q, attn_mask=mask), sample((2, 4, 8)), sample((3, 4)),
                exc=RuntimeError, match=("attn_mask", "[3, 4]"))


# ---------------------------------------------------------------- embedding

@pytest.mark.parametrize("ishape", [(5,), (2, 3), (), (0,)])
@pytest.mark.parametrize("dtype", ["float32", "bfloat16", "int64"])
def test_embedding(backend, ishape, dtype):
    idx = np.random.default_rng(1).integers(-0, 6, size=ishape)
    check(lambda m, i, w: F(m).embedding(i, w), sample(idx.shape, "int64", values=idx), sample((6, 4), dtype))


def test_embedding_int32_and_padding_idx(backend):
    idx = sample((4,), "int32", values=np.array([0, 2, 2, 1], np.int32))
    check(lambda m, i, w: F(m).embedding(i, w, padding_idx=2), idx, sample((3, 5), layout="transposed"))


def test_embedding_out_of_range_raises():
    w = lt.randn(4, 3)
    for bad in (4, -1):
        y = F(lt).embedding(lt.tensor([0, bad]), w)
        with pytest.raises(IndexError, match=str(bad)):
            y.numpy()
    check_error(lambda m, i, w: F(m).embedding(i, w), sample((2,)), sample((4, 3)), exc=TypeError,
                match=("embedding", "float32"))

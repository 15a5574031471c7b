"""torch.nn modules added as data (lazytorch/nn/thin.py) and the hand-written ones (PReLU, InstanceNorm,
Conv3d / ConvTranspose1d/3d, BatchNorm3d, the RNN family, the Transformer family), compared with torch:
same constructor arguments, weights copied through state_dict(), same float32 inputs.

Each case is built in both libraries; repr and state_dict keys/shapes are compared without running
anything.  Forward values are compared on every backend of the `backend` fixture; all of a family's
cases are evaluated together by one lt.eval (one program, one compile per backend), which keeps the
cpu backend's compile time small."""
from __future__ import annotations

import numpy as np
import pytest
import torch

import lazytorch as lt
import lazytorch.nn as lnn

RNG = np.random.default_rng(0)


def f32(*shape, positive=False):
    x = RNG.standard_normal(shape).astype(np.float32)
    return np.abs(x) + 0.1 if positive else x


def sign(*shape):
    return np.where(RNG.standard_normal(shape) > 0, 1.0, -1.0).astype(np.float32)


def probs(*shape):
    return RNG.uniform(0.05, 0.95, shape).astype(np.float32)


def labels(n, c):
    return RNG.integers(0, c, (n,)).astype(np.int64)


def pooled(nd: int, shape):
    """max_pool's values and indices (from torch) for the MaxUnpool cases."""
    out, idx = getattr(torch.nn.functional, f"max_pool{nd}d")(torch.from_numpy(f32(*shape)), 2, return_indices=True)
    return [out.numpy(), idx.numpy()]


BAG_INPUT, BAG_OFFSETS = RNG.integers(0, 10, (9,)), np.array([0, 2, 2, 6])


# (class name, constructor args, constructor kwargs, list of numpy inputs)
FAMILIES: dict[str, list[tuple]] = {
    "activation": [
        ("SELU", (), {}, [f32(3, 5)]), ("CELU", (0.7,), {}, [f32(3, 5)]), ("GLU", (), {"dim": 1}, [f32(3, 6)]),
        ("LogSigmoid", (), {}, [f32(3, 5)]), ("Softmin", (1,), {}, [f32(3, 5)]), ("Softsign", (), {}, [f32(3, 5)]),
        ("Softshrink", (0.3,), {}, [f32(3, 5)]), ("Hardshrink", (), {}, [f32(3, 5)]),
        ("Tanhshrink", (), {}, [f32(3, 5)]), ("Threshold", (0.1, 20.0), {}, [f32(3, 5)]),
        ("Softmax2d", (), {}, [f32(2, 3, 4, 4)]), ("RReLU", (), {}, [f32(3, 5)]),
        ("PReLU", (), {}, [f32(2, 3, 4)]), ("PReLU", (3,), {"init": 0.1}, [f32(2, 3, 4)]),
        ("ReLU", (True,), {}, [f32(3, 5)]), ("Hardtanh", (-0.5, 0.5, True), {}, [f32(3, 5)]),
        ("CELU", (), {"inplace": True}, [f32(3, 5)]), ("GELU", ("tanh",), {}, [f32(3, 5)]),
        ("LeakyReLU", (0.2,), {}, [f32(3, 5)]), ("Softplus", (2.0, 5.0), {}, [f32(3, 5)]),
        ("Threshold", (0.1, 20.0, True), {}, [f32(3, 5)]),
    ],
    "padding": [
        ("ReflectionPad1d", (2,), {}, [f32(2, 3, 5)]), ("ReflectionPad2d", ((1, 2, 2, 1),), {}, [f32(2, 3, 5, 6)]),
        ("ReflectionPad3d", (1,), {}, [f32(1, 2, 3, 4, 5)]), ("ReplicationPad1d", ((1, 3),), {}, [f32(2, 3, 5)]),
        ("ReplicationPad2d", (2,), {}, [f32(2, 3, 4, 4)]), ("ReplicationPad3d", (1,), {}, [f32(1, 2, 3, 3, 3)]),
        ("CircularPad1d", (2,), {}, [f32(2, 3, 5)]), ("CircularPad2d", ((1, 0, 2, 1),), {}, [f32(1, 2, 4, 4)]),
        ("CircularPad3d", (1,), {}, [f32(1, 1, 3, 3, 3)]), ("ZeroPad1d", ((1, 2),), {}, [f32(2, 5)]),
        ("ZeroPad2d", (1,), {}, [f32(2, 3, 4, 4)]), ("ZeroPad3d", ((1, 0, 0, 1, 2, 0),), {}, [f32(1, 2, 2, 3, 3)]),
        ("ConstantPad1d", (2, 3.5), {}, [f32(2, 3, 5)]), ("ConstantPad2d", ((1, 2, 0, 1), -1.0), {},
                                                          [f32(2, 3, 4, 4)]),
        ("ConstantPad3d", (1, 0.5), {}, [f32(1, 2, 2, 2, 2)]),
    ],
    "shape": [
        ("PixelShuffle", (2,), {}, [f32(2, 8, 3, 3)]), ("PixelUnshuffle", (2,), {}, [f32(2, 2, 4, 6)]),
        ("ChannelShuffle", (3,), {}, [f32(2, 6, 2, 2)]), ("Unfold", (2,), {"padding": 1}, [f32(2, 3, 4, 4)]),
        ("Fold", ((4, 5), 2), {}, [f32(2, 12, 12)]),
        ("UpsamplingNearest2d", (), {"scale_factor": 2}, [f32(1, 2, 3, 3)]),
        ("UpsamplingBilinear2d", ((5, 7),), {}, [f32(1, 2, 3, 4)]),
        ("CosineSimilarity", (), {"dim": 1}, [f32(4, 6), f32(4, 6)]),
        ("PairwiseDistance", (), {"p": 1.0}, [f32(4, 6), f32(4, 6)]),
        ("Dropout1d", (), {}, [f32(2, 3, 4)]), ("Dropout2d", (0.3,), {}, [f32(2, 3, 4, 4)]),
        ("Dropout3d", (), {}, [f32(1, 2, 2, 2, 2)]), ("AlphaDropout", (0.2,), {}, [f32(3, 5)]),
        ("FeatureAlphaDropout", (), {}, [f32(2, 3, 4)]),
        ("EmbeddingBag", (10, 3), {}, [RNG.integers(0, 10, (4, 3))]),
        ("EmbeddingBag", (10, 3), {"mode": "sum", "padding_idx": 2}, [BAG_INPUT, BAG_OFFSETS]),
        ("EmbeddingBag", (10, 3), {"mode": "max", "include_last_offset": True},
         [BAG_INPUT, np.append(BAG_OFFSETS, len(BAG_INPUT))]),
    ],
    "pool_norm": [
        ("MaxPool1d", (2,), {}, [f32(2, 3, 7)]), ("MaxPool1d", (3, 2, 1), {"ceil_mode": True}, [f32(2, 3, 8)]),
        ("MaxPool3d", (2,), {}, [f32(1, 2, 4, 4, 5)]), ("AvgPool1d", (3,), {"stride": 2}, [f32(2, 3, 9)]),
        ("AvgPool3d", (2,), {"padding": 1}, [f32(1, 2, 4, 4, 4)]), ("AdaptiveAvgPool1d", (3,), {}, [f32(2, 3, 7)]),
        ("AdaptiveAvgPool3d", ((2, 1, 3),), {}, [f32(1, 2, 4, 3, 6)]), ("AdaptiveMaxPool1d", (3,), {},
                                                                          [f32(2, 3, 7)]),
        ("AdaptiveMaxPool2d", ((2, 3),), {}, [f32(1, 2, 5, 6)]), ("AdaptiveMaxPool3d", (2,), {}, [f32(1, 1, 4, 4, 4)]),
        ("LPPool1d", (2, 3), {}, [f32(2, 3, 9)]), ("LPPool2d", (1.5, 2), {}, [f32(1, 2, 4, 4, positive=True)]),
        ("LocalResponseNorm", (2,), {}, [f32(2, 4, 3, 3)]),
        ("LPPool3d", (2, 2), {}, [f32(1, 2, 4, 4, 4)]),
        ("MaxUnpool1d", (2,), {}, pooled(1, (2, 3, 8))), ("MaxUnpool2d", (2,), {}, pooled(2, (1, 2, 4, 6))),
        ("MaxUnpool3d", (2,), {}, pooled(3, (1, 1, 4, 4, 2))),
        ("InstanceNorm1d", (3,), {}, [f32(2, 3, 6)]), ("InstanceNorm2d", (3,), {"affine": True}, [f32(2, 3, 4, 4)]),
        ("InstanceNorm3d", (2,), {}, [f32(1, 2, 3, 3, 3)]), ("InstanceNorm2d", (3,), {}, [f32(3, 4, 4)]),
        ("BatchNorm3d", (2,), {}, [f32(2, 2, 2, 3, 3)]),
        ("Conv3d", (2, 3, 2), {"padding": 1}, [f32(1, 2, 3, 4, 4)]),
        ("ConvTranspose1d", (3, 2, 3), {"stride": 2}, [f32(2, 3, 5)]),
        ("ConvTranspose3d", (2, 2, 2), {"stride": 2}, [f32(1, 2, 2, 2, 3)]),
    ],
    "loss": [
        ("BCELoss", (), {}, [probs(4, 3), probs(4, 3)]), ("KLDivLoss", (), {"reduction": "batchmean"},
                                                          [np.log(probs(4, 3)), probs(4, 3)]),
        ("HuberLoss", (), {"delta": 0.5}, [f32(4, 3), f32(4, 3)]),
        ("SoftMarginLoss", (), {}, [f32(4, 3), sign(4, 3)]),
        ("MultiLabelSoftMarginLoss", (), {}, [f32(4, 3), (probs(4, 3) > 0.5).astype(np.float32)]),
        ("MultiMarginLoss", (), {"margin": 0.5}, [f32(4, 5), labels(4, 5)]),
        ("MultiLabelMarginLoss", (), {}, [f32(3, 4), np.array([[3, 0, -1, 1], [1, 1, 2, -1], [-1, 0, 0, 0]])]),
        ("HingeEmbeddingLoss", (), {"reduction": "sum"}, [f32(4, 3), sign(4, 3)]),
        ("MarginRankingLoss", (0.2,), {}, [f32(5), f32(5), sign(5)]),
        ("CosineEmbeddingLoss", (), {"margin": 0.1}, [f32(4, 6), f32(4, 6), sign(4)]),
        ("TripletMarginLoss", (), {"swap": True}, [f32(4, 6), f32(4, 6), f32(4, 6)]),
        ("TripletMarginWithDistanceLoss", (), {"margin": 0.5}, [f32(4, 6), f32(4, 6), f32(4, 6)]),
        ("PoissonNLLLoss", (), {}, [f32(4, 3), probs(4, 3)]),
        ("GaussianNLLLoss", (), {}, [f32(4, 3), f32(4, 3), f32(4, 3, positive=True)]),
        ("NLLLoss2d", (), {}, [np.log(probs(2, 3, 2, 2)), RNG.integers(0, 3, (2, 2, 2))]),
        ("BCELoss", (), {"size_average": False}, [probs(4, 3), probs(4, 3)]),
    ],
}
ALL = [case for cases in FAMILIES.values() for case in cases]


def build(case):
    name, args, kwargs, inputs = case
    tm = getattr(torch.nn, name)(*args, **kwargs)
    lm = getattr(lnn, name)(*args, **kwargs)
    lm.load_state_dict(tm.state_dict())
    return tm, lm, inputs


def outputs(result):
    return list(result) if isinstance(result, tuple) else [result]


@pytest.mark.parametrize("case", ALL, ids=[f"{c[0]}-{i}" for i, c in enumerate(ALL)])
def test_structure_matches_torch(case):
    tm, lm, _ = build(case)
    assert repr(lm) == repr(tm)
    tsd, lsd = tm.state_dict(), lm.state_dict()
    assert list(lsd) == list(tsd)
    assert [tuple(v.shape) for v in lsd.values()] == [tuple(v.shape) for v in tsd.values()]


# metal-emu interprets kernels slowly; the functional ops behind these modules have their own
# metal-emu coverage in tests/test_ops_*.py, so here it runs every padding module (each pad mode) and
# a few modules whose ops are new or whose kernels differ from their neighbours'.
EMU_NAMES = {c[0] for c in FAMILIES["padding"]} | {"ChannelShuffle", "PixelUnshuffle", "Softmax2d", "GLU"}


@pytest.mark.parametrize("family", list(FAMILIES))
def test_forward_matches_torch(family, backend):
    """Eval mode (dropouts are the identity, RReLU uses its mean slope); one program per family."""
    cases = [c for c in FAMILIES[family] if backend != "metal-emu" or c[0] in EMU_NAMES]
    if not cases:
        pytest.skip("no case of this family runs on metal-emu (see EMU_NAMES)")
    pairs = []
    for case in cases:
        tm, lm, inputs = build(case)
        tm.eval()
        lm.eval()
        with torch.no_grad():
            want = outputs(tm(*[torch.from_numpy(x.copy()) for x in inputs]))   # inplace=True writes
        got = outputs(lm(*[lt.tensor(x) for x in inputs]))
        pairs.append((case[0], want, got))
    lt.eval(*[g for _, _, got in pairs for g in got])
    for name, want, got in pairs:
        for w, g in zip(want, got):
            np.testing.assert_allclose(g.numpy(), w.numpy(), rtol=1e-4, atol=1e-5, err_msg=name)


def test_train_mode_modules(on_reference):
    """Training-mode behaviour torch fixes without randomness: BatchNorm3d / InstanceNorm with running
    stats use the batch's statistics and update the buffers; the channel-wise dropouts zero whole
    channels and scale the rest by 1/(1-p); alpha dropout keeps mean 0 and variance 1."""
    for name, args, x in (("BatchNorm3d", (2,), f32(3, 2, 2, 3, 3)),
                          ("InstanceNorm2d", (3,), f32(2, 3, 4, 4))):
        kwargs = {"track_running_stats": True, "affine": True} if name.startswith("Instance") else {}
        tm, lm = getattr(torch.nn, name)(*args, **kwargs), getattr(lnn, name)(*args, **kwargs)
        lm.load_state_dict(tm.state_dict())
        for _ in range(2):
            want = tm(torch.from_numpy(x)).detach().numpy()
            np.testing.assert_allclose(lm(lt.tensor(x)).numpy(), want, rtol=1e-4, atol=1e-5)
        for k, v in tm.state_dict().items():
            np.testing.assert_allclose(lm.state_dict()[k].numpy(), v.numpy(), rtol=1e-5, atol=1e-6, err_msg=k)
    x = np.ones((8, 16, 3, 3), np.float32)
    y = lnn.Dropout2d(0.25).train()(lt.tensor(x)).numpy()
    per_channel = y.reshape(8, 16, 9)
    assert set(np.unique(per_channel)) <= {0.0, np.float32(1 / 0.75)}
    assert (per_channel.min(-1) == per_channel.max(-1)).all()          # one draw per (sample, channel)
    assert 0 < (per_channel[..., 0] == 0).sum() < 8 * 16
    # torch's dropout2d reads a 3D input as (N, C, L) (one draw per sample and channel), and dropout1d's
    # unbatched (C, L) input draws once per channel
    for module, shape, rows in ((lnn.Dropout2d(0.5), (6, 8, 5), (48, 5)), (lnn.Dropout1d(0.5), (8, 5), (8, 5))):
        y = module.train()(lt.ones(*shape)).numpy().reshape(rows)
        assert (y.min(-1) == y.max(-1)).all() and 0 < (y[:, 0] == 0).sum() < rows[0]
    z = lnn.AlphaDropout(0.2).train()(lt.tensor(f32(40_000))).numpy()
    assert abs(z.mean()) < 0.03 and abs(z.std() - 1) < 0.03
    alpha, p = 1.7580993408473766, 0.2                                  # torch's constant and formula
    dropped = -alpha * (1 - p) / np.sqrt((alpha * alpha * p + 1) * (1 - p))
    assert 0.18 < np.isclose(z, dropped, atol=1e-6).mean() < 0.22       # dropped units take that value


def test_every_torch_module_class_exists_or_is_refused():
    """Each torch.nn Module class is in lazytorch.nn or in its UNSUPPORTED table (docs/nn.md)."""
    missing = [n for n in dir(torch.nn) if n[0].isupper() and isinstance(getattr(torch.nn, n), type)
               and issubclass(getattr(torch.nn, n), torch.nn.Module) and not hasattr(lnn, n)]
    assert sorted(set(missing) - set(lnn.UNSUPPORTED)) == []


def test_unsupported_names_raise_clearly():
    for name in ("CTCLoss", "LazyConv2d", "FractionalMaxPool2d", "SyncBatchNorm"):
        with pytest.raises(AttributeError, match=f"lazytorch.nn.{name} is not supported"):
            getattr(lnn, name)
        assert not hasattr(lnn, name)
    with pytest.raises(AttributeError, match="has no attribute 'NoSuchLayer'"):
        lnn.NoSuchLayer  # noqa: B018


def test_embedding_bag_gradients_match_torch(on_reference):
    """Bags sum through a host-known membership matrix, so the weight's gradient flows (mean and max)."""
    for mode in ("mean", "max"):
        tm, lm = torch.nn.EmbeddingBag(10, 3, mode=mode), lnn.EmbeddingBag(10, 3, mode=mode)
        lm.load_state_dict(tm.state_dict())
        w = f32(3, 3)
        (tm(torch.from_numpy(BAG_INPUT), torch.from_numpy(BAG_OFFSETS[:3])) * torch.from_numpy(w)).sum().backward()
        (lm(lt.tensor(BAG_INPUT), lt.tensor(BAG_OFFSETS[:3])) * lt.tensor(w)).sum().backward()
        np.testing.assert_allclose(lm.weight.grad.numpy(), tm.weight.grad.numpy(), rtol=1e-5, atol=1e-6)


def test_lazy_linear_takes_its_input_size_from_the_first_input_or_a_state_dict():
    tm = torch.nn.Sequential(torch.nn.LazyLinear(4), torch.nn.ReLU(), torch.nn.LazyLinear(2))
    lm = lnn.Sequential(lnn.LazyLinear(4), lnn.ReLU(), lnn.LazyLinear(2))
    assert repr(lm) == repr(tm)                                       # in_features=0 until materialised
    x = f32(3, 5)
    want = tm(torch.from_numpy(x)).detach().numpy()
    lm.load_state_dict(tm.state_dict())                               # materialises from the shapes
    assert repr(lm) == repr(tm) and type(lm[0]) is lnn.Linear
    np.testing.assert_allclose(lm(lt.tensor(x)).numpy(), want, rtol=1e-5, atol=1e-6)
    fresh = lnn.LazyLinear(3, bias=False)
    assert tuple(fresh(lt.tensor(x)).shape) == (3, 3) and fresh.in_features == 5
    assert tuple(fresh.weight.shape) == (3, 5) and type(fresh) is lnn.Linear


def test_data_parallel_wraps_the_module_on_the_one_device():
    tm, lm = torch.nn.Linear(3, 2), lnn.Linear(3, 2)
    lm.load_state_dict(tm.state_dict())
    twrap, lwrap = torch.nn.DataParallel(tm), lnn.DataParallel(lm)
    assert repr(lwrap) == repr(twrap) and list(lwrap.state_dict()) == list(twrap.state_dict())
    x = f32(4, 3)
    np.testing.assert_allclose(lwrap(lt.tensor(x)).numpy(), twrap(torch.from_numpy(x)).detach().numpy(),
                               rtol=1e-6)
    assert lnn.parallel.DataParallel is lnn.DataParallel


def test_constructor_errors_match_torch():
    with pytest.raises(TypeError, match="missing required argument"):
        lnn.ReflectionPad2d()
    with pytest.raises(TypeError, match="unexpected keyword argument 'padd'"):
        lnn.ZeroPad2d(padd=1)
    with pytest.raises(ValueError, match="dropout probability"):
        lnn.Dropout2d(1.5)
    with pytest.raises(ValueError, match="3D or 4D"):
        lnn.Softmax2d()(lt.tensor(f32(2, 3)))
    with pytest.raises(RuntimeError, match="divisible by groups"):
        lnn.ChannelShuffle(4)(lt.tensor(f32(1, 6, 2, 2)))
    out, idx = pooled(2, (1, 1, 4, 4))
    with pytest.raises(ValueError, match="invalid output_size"):
        lnn.MaxUnpool2d(2)(lt.tensor(out), lt.tensor(idx), output_size=(9, 9))
    with pytest.raises(NotImplementedError, match="only supported for mode='sum'"):
        lnn.EmbeddingBag(10, 3)(lt.tensor(BAG_INPUT), lt.tensor(BAG_OFFSETS), lt.tensor(f32(9)))

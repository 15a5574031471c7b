"""Losses, distances, one_hot and cross_entropy's extensions against torch, on every backend.

All value cases run as one program per backend (tests/oracle_batch.py); every loss runs with each
reduction on reference and cpu, a representative subset on metal-emu (each kernel is a g++ compile
there).  Class indices out of range raise when the program runs, as torch's do at the call.
"""
from __future__ import annotations

import warnings

import numpy as np
import pytest
import torch

import lazytorch as lt
from oracle import Sample, check_error, sample
from oracle_batch import Case, check_batch


def fn(m):
    return m.nn.functional


def _classes(shape, n: int, seed: int = 0, ignore: int | None = None):
    values = np.random.default_rng(seed).integers(0, n, shape)
    if ignore is not None:
        values.flat[::3] = ignore
    return sample(shape, "int64", values=values)


HALF = dict(atol=2e-2, rtol=1e-2)
EMU = {(0, "mean"), (3, "none"), (6, "none"), (9, "batchmean")}      # (table row, reduction) run on metal-emu


def _loss_cases() -> list[Case]:
    """Every loss with reduction='none' (its values element by element); 'mean' and 'sum' (one
    shared reduction) on a few.  Each row gets its own inputs: rows are independent programs."""
    def table(r: int):
        x, t = sample((4, 5), seed=10 * r + 1), sample((4, 5), seed=10 * r + 2)
        p, q = sample((4, 5), low=0.02, high=0.98, seed=10 * r + 3), sample((4, 5), low=0, high=1, seed=10 * r + 4)
        sign = np.where(np.random.default_rng(r).random((4, 5)) < 0.5, -1.0, 1.0).astype(np.float32)
        return [
            ("nll_loss", (sample((4, 5, 3), layout="transposed"), _classes((4, 3), 5, ignore=-100)), {}),
            ("nll_loss", (x, _classes((4,), 5, ignore=2), sample((5,), low=0.1, high=1, seed=7)), dict(ignore_index=2)),
            ("binary_cross_entropy", (p, q, sample((4, 5), low=0, high=1, seed=8)), {}),
            ("binary_cross_entropy_with_logits", (x, q), dict(pos_weight=sample((5,), low=0.5, high=2, seed=9))),
            ("l1_loss", (x, t), {}),
            ("l1_loss", (x, t), dict(weight=sample((4, 5), low=0, high=1, seed=10))),
            ("smooth_l1_loss", (x, t), dict(beta=0.5)),
            ("smooth_l1_loss", (x, t), dict(beta=0.0)),
            ("huber_loss", (x, t), dict(delta=0.7)),
            ("kl_div", (x, q), {}),
            ("kl_div", (x, t), dict(log_target=True)),
            ("poisson_nll_loss", (x, q), {}),
            ("poisson_nll_loss", (p, sample((4, 5), low=0, high=4, seed=11)), dict(log_input=False, full=True)),
            ("gaussian_nll_loss", (x, t, sample((4, 5), low=0.1, high=2, seed=12)), dict(full=True)),
            ("gaussian_nll_loss", (x, t, sample((4,), low=0.1, high=2, seed=13)), {}),        # homoscedastic
            ("margin_ranking_loss", (x, t, sample((4, 5), values=sign)), dict(margin=0.3)),
            ("cosine_embedding_loss", (x, t, sample((4,), values=np.array([1.0, -1, 1, -1], np.float32))),
             dict(margin=0.2)),
            ("triplet_margin_loss", (x, t, p), dict(p=1.0, swap=True, margin=0.5)),
            ("cross_entropy", (x, _classes((4,), 5)), dict(label_smoothing=0.2)),
            ("cross_entropy", (x, sample((4, 5), low=0, high=1, seed=14)), dict(label_smoothing=0.1)),
            ("cross_entropy", (sample((2, 5, 3)), _classes((2, 3), 5, ignore=-100), sample((5,), low=0.1, high=1)),
             dict(label_smoothing=0.3)),
            ("soft_margin_loss", (x, sample((4, 5), values=sign)), {}),
            ("hinge_embedding_loss", (x, sample((4, 5), values=sign)), dict(margin=0.5)),
            ("multilabel_soft_margin_loss", (x, q, sample((5,), low=0.1, high=1)), {}),
            ("multi_margin_loss", (x, _classes((4,), 5, seed=r)), dict(p=2, margin=0.7, weight=sample((5,), low=0.1,
                                                                                                  high=1))),
        ][r]
    rows = 25
    mean_and_sum = {0, 1, 5, 9, 20, 24}
    cases = []
    for i in range(rows):
        name, args, kw = table(i)
        reductions = ("none",) + (("mean", "sum") if i in mean_and_sum else ()) + \
            (("batchmean",) if name == "kl_div" else ())
        for reduction in reductions:
            kwargs = {**kw, "reduction": reduction}

            def run(m, *a, name=name, kwargs=kwargs):
                kwargs = {k: (v.torch if m is torch else v.lt) if isinstance(v, Sample) else v
                          for k, v in kwargs.items()}
                return getattr(fn(m), name)(*a, **kwargs)
            cases.append(Case(f"{i}:{name}({reduction}, {kw})", run, args, dict(atol=1e-5, rtol=1e-5),
                              emu=(i, reduction) in EMU))
            if reduction != "none":
                args = table(i)[1]               # fresh inputs: separate programs
    x, t = sample((4, 5), seed=300), sample((4, 5), seed=301)
    # the legacy flags map to a reduction as in torch
    cases.append(Case("l1 size_average=False", lambda m, x, t: fn(m).l1_loss(x, t, size_average=False), (x, t),
                      emu=False))
    # other dtypes
    h, hq = sample((3, 4), "float16", seed=20), sample((3, 4), "float16", low=0, high=1, seed=21)
    d, dq = sample((3, 4), "float64", seed=22), sample((3, 4), "float64", low=0, high=1, seed=23)
    cases += [
        Case("f16 bce_with_logits", lambda m, x, t: fn(m).binary_cross_entropy_with_logits(x, t), (h, hq), HALF,
             emu=False),
        Case("f16 nll", lambda m, x, t: fn(m).nll_loss(x, t), (h, _classes((3,), 4)), HALF, emu=False),
        Case("f64 smooth_l1", lambda m, x, t: fn(m).smooth_l1_loss(x, t), (d, dq)),
        Case("f64 kl_div", lambda m, x, t: fn(m).kl_div(x, t, reduction="batchmean"), (d, dq)),
        Case("f64 bce", lambda m, x, t: fn(m).binary_cross_entropy(x, t), (dq, dq)),
    ]
    return cases


def test_losses(backend):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")          # torch warns about kl_div's 'mean' and legacy flags
        assert check_batch(_loss_cases()) >= 4


def test_distances_and_one_hot(backend):
    x, y = sample((4, 6), seed=1), sample((4, 6), seed=2, layout="transposed")
    cases = [
        Case("cosine_similarity", lambda m, a, b: fn(m).cosine_similarity(a, b), (x, y), dict(atol=1e-6)),
        Case("cosine_similarity broadcast", lambda m, a, b: fn(m).cosine_similarity(a, b, dim=-1, eps=1e-3),
             (sample((2, 1, 5)), sample((3, 5), seed=3)), dict(atol=1e-6), emu=False),
        Case("pairwise_distance", lambda m, a, b: fn(m).pairwise_distance(a, b), (x, y), dict(atol=1e-5)),
        Case("pairwise_distance p=1 keepdim", lambda m, a, b: fn(m).pairwise_distance(a, b, 1.0, keepdim=True),
             (x, sample((6,), seed=4)), dict(atol=1e-5), emu=False),
        Case("pdist", lambda m, a: fn(m).pdist(a), (x,), dict(atol=1e-5)),
        Case("pdist p=3 f64", lambda m, a: fn(m).pdist(a, p=3), (sample((5, 3), "float64"),), emu=False),
        Case("pdist one row", lambda m, a: fn(m).pdist(a), (sample((1, 3)),), emu=False),
        Case("f16 cosine_similarity", lambda m, a, b: fn(m).cosine_similarity(a, b),
             (sample((3, 4), "float16"), sample((3, 4), "float16", seed=5)), HALF, emu=False),
        Case("one_hot", lambda m, t: fn(m).one_hot(t, 6), (_classes((2, 3), 6),)),
        Case("one_hot inferred classes", lambda m, t: fn(m).one_hot(t), (_classes((5,), 4, seed=2),), emu=False),
    ]
    assert check_batch(cases) >= 4


def test_one_hot_and_nll_check_class_indices():
    with pytest.raises(IndexError, match="out of bounds"):
        fn(lt).one_hot(lt.tensor(np.array([0, 5])), 3).numpy()
    with pytest.raises(Exception, match="out of bounds|out of range"):
        fn(lt).nll_loss(lt.randn(2, 3), lt.tensor(np.array([0, 3]))).numpy()


LOSS_ERRORS = [
    (lambda m, x, t: fn(m).l1_loss(x, t, reduction="avg"), ValueError, ("avg is not a valid value for reduction",)),
    (lambda m, x, t: fn(m).binary_cross_entropy(x.sigmoid(), t[0]), ValueError, ("different to the input size",)),
    (lambda m, x, t: fn(m).binary_cross_entropy_with_logits(x, t[0]), ValueError, ("must be the same as input size",)),
    (lambda m, x, t: fn(m).nll_loss(x, t), RuntimeError, ("nll_loss",)),                     # float target
    (lambda m, x, t: fn(m).nll_loss(x, t.long()[:2, 0]), ValueError, ("batch_size",)),
    (lambda m, x, t: fn(m).nll_loss(x, t.long()[:, 0], m.ones(3)), RuntimeError, ("weight tensor",)),
    (lambda m, x, t: fn(m).smooth_l1_loss(x, t, beta=-1.0), RuntimeError, ("negative values for beta",)),
    (lambda m, x, t: fn(m).huber_loss(x, t, weight=m.ones(2)), ValueError, ("Weights and input",)),
    (lambda m, x, t: fn(m).gaussian_nll_loss(x, t, m.ones(2, 2)), ValueError, ("var is of incorrect size",)),
    (lambda m, x, t: fn(m).margin_ranking_loss(x, t, t[0]), RuntimeError, ("same dimension",)),
    (lambda m, x, t: fn(m).triplet_margin_loss(x, t, t[0]), RuntimeError, ("same number of dimensions",)),
    (lambda m, x, t: fn(m).pdist(x[None]), RuntimeError, ("pdist only supports 2D",)),
    (lambda m, x, t: fn(m).one_hot(x), RuntimeError, ("one_hot", "index tensor")),
    (lambda m, x, t: fn(m).cosine_similarity(x, t[:, :3]), RuntimeError, ("broadcast",)),
]


@pytest.mark.parametrize("case", range(len(LOSS_ERRORS)))
def test_loss_errors(case):
    call, exc, match = LOSS_ERRORS[case]
    x, t = sample((4, 5)), sample((4, 5), seed=1)
    with pytest.raises(exc):
        call(torch, x.torch, t.torch)
    check_error(call, x, t, exc=exc, match=match)

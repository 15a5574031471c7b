"""View ops: values against torch across layouts and dtypes, metadata-only nodes, and aliasing."""
import numpy as np
import pytest
import torch

import lazytorch as lt
from oracle import check, check_error, sample

pytestmark = pytest.mark.filterwarnings("ignore:The use of `x.T`")
LAYOUTS = ["contiguous", "transposed", "strided"]

VIEW_CASES = {
    "reshape": (lambda m, x: x.reshape(-1, 2), (3, 4)),
    "view": (lambda m, x: x.view(2, 6), (3, 4)),
    "view_neg1": (lambda m, x: x.view(-1), (2, 3, 2)),
    "permute": (lambda m, x: x.permute(2, 0, 1), (2, 3, 4)),
    "transpose": (lambda m, x: x.transpose(0, -1), (2, 3, 4)),
    "t": (lambda m, x: x.t(), (3, 4)),
    "T": (lambda m, x: x.T, (2, 3, 4)),
    "mT": (lambda m, x: x.mT, (2, 3, 4)),
    "expand": (lambda m, x: x[:, :1].expand(2, 3, 5, 4), (3, 5, 4)),
    "broadcast_to": (lambda m, x: m.broadcast_to(x, (2, 3, 4)), (1, 4)),
    "squeeze": (lambda m, x: x.squeeze(), (1, 3, 1)),
    "squeeze_dim": (lambda m, x: x.squeeze(0), (1, 3, 1)),
    "unsqueeze": (lambda m, x: x.unsqueeze(-1), (3, 4)),
    "narrow": (lambda m, x: x.narrow(1, 1, 2), (3, 4)),
    "select": (lambda m, x: x.select(1, -1), (3, 4)),
    "flip": (lambda m, x: x.flip(0, 1), (3, 4)),
    "flatten": (lambda m, x: x.flatten(), (2, 3, 4)),
    "flatten_mid": (lambda m, x: x.flatten(1, 2), (2, 3, 4)),
    "unflatten": (lambda m, x: x.unflatten(1, (2, -1)), (3, 4)),
    "contiguous": (lambda m, x: x.contiguous(), (3, 4)),
    "view_of_view": (lambda m, x: x.t()[1:, ::2].unsqueeze(0).flip(-1), (5, 6)),
    "size0": (lambda m, x: x.reshape(0, 4).t(), (0, 4)),
    "size1": (lambda m, x: x.squeeze(1).unsqueeze(0), (3, 1)),
}


@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("case", sorted(VIEW_CASES))
def test_view_values(case, layout):
    fn, shape = VIEW_CASES[case]
    x = sample(shape, layout=layout)
    try:
        fn(torch, x.torch)
    except RuntimeError:                               # view of incompatible strides: both must refuse
        check_error(fn, x, exc=RuntimeError, match=("view",))
        return
    check(fn, x)


@pytest.mark.parametrize("dtype", ["bool", "uint8", "int32", "int64", "float16", "bfloat16", "float64"])
def test_views_every_dtype(dtype):
    check(lambda m, x: x.t().reshape(-1)[::3].flip(0), sample((4, 5), dtype, layout="strided"))


def test_zero_dim():
    check(lambda m, x: x.reshape(1, 1).squeeze().unsqueeze(0).flatten(), sample(()))
    check(lambda m, x: x.view(()).expand(2, 3), sample((1,)))


@pytest.mark.parametrize("layout", LAYOUTS)
def test_split_chunk_unbind(layout):
    x = sample((6, 4), layout=layout)
    check(lambda m, x: x.split(2), x)
    check(lambda m, x: x.split(4, dim=0), x)
    check(lambda m, x: x.split([1, 3], dim=1), x)
    check(lambda m, x: m.split(x, [1, 2, 3]), x)
    check(lambda m, x: x.chunk(3, 1), x)
    check(lambda m, x: x.chunk(4), x)
    check(lambda m, x: x.unbind(1), x)
    check(lambda m, x: list(x), x)


def test_views_are_metadata_only():
    x = lt.randn(4, 6)
    y = x.t()[1:, ::2].unsqueeze(0)
    text = lt.dump(y)
    assert text.count("view(") == 1, text           # a view of a view composes into one spec
    assert "contiguous" not in text
    z = x.t().reshape(-1)                              # not expressible by strides: one copy
    assert "contiguous" in lt.dump(z)


def test_view_on_incompatible_strides_raises_reshape_copies():
    x = lt.randn(3, 4).t()
    check_error(lambda m, x: x.view(12), sample((3, 4), layout="transposed"), exc=RuntimeError,
                match=("view", "strides", "reshape"))
    with pytest.raises(RuntimeError):
        torch.randn(3, 4).t().view(12)
    r = x.reshape(12)
    r.add_(1)                                          # a copy: x must not change
    np.testing.assert_allclose(r.numpy(), x.numpy().reshape(-1) + 1, rtol=1e-6)


def _pair(shape=(3, 4)):
    data = np.arange(np.prod(shape), dtype=np.float32).reshape(shape)
    return lt.tensor(data), torch.tensor(data)


def test_mutating_base_is_seen_by_views():
    x, tx = _pair()
    views = [x.t(), x[1], x.view(2, 6), x.split(2, 1)[1], x.T.unsqueeze(0)[0, 1:]]
    tviews = [tx.t(), tx[1], tx.view(2, 6), tx.split(2, 1)[1], tx.T.unsqueeze(0)[0, 1:]]
    x.mul_(2)
    tx.mul_(2)
    x.add_(1)
    tx.add_(1)
    for v, tv in zip(views, tviews):
        np.testing.assert_array_equal(v.numpy(), tv.numpy())


def test_inplace_on_view_writes_base_and_siblings():
    x, tx = _pair()
    a, ta = x.t(), tx.t()
    b, tb = x[:, 1:3], tx[:, 1:3]
    a[1].mul_(0)
    ta[1].mul_(0)
    b.add_(100)
    tb.add_(100)
    c, tc = b.t()[0], tb.t()[0]                        # view of a view
    c.neg_()
    tc.neg_()
    for got, want in [(x, tx), (a, ta), (b, tb), (c, tc)]:
        np.testing.assert_array_equal(got.numpy(), want.numpy())


def test_view_after_eval_still_aliases():
    x, tx = _pair()
    v, tv = x[1:], tx[1:]
    lt.eval(x, v)
    v.add_(5)
    tv.add_(5)
    np.testing.assert_array_equal(x.numpy(), tx.numpy())
    x.sub_(1)
    tx.sub_(1)
    np.testing.assert_array_equal(v.numpy(), tv.numpy())


def test_contiguous_aliases_when_already_contiguous():
    x = lt.zeros(2, 3)
    assert x.contiguous() is x
    t = x.t()
    assert not t.is_contiguous() and t.contiguous().is_contiguous()
    assert x[1:].is_contiguous() and torch.zeros(2, 3)[1:].is_contiguous()
    assert t.stride() == torch.zeros(2, 3).t().stride()


def test_split_pieces_alias():
    x, tx = _pair((6,))
    for p, tp in zip(x.chunk(3), tx.chunk(3)):
        p.mul_(10)
        tp.mul_(10)
    np.testing.assert_array_equal(x.numpy(), tx.numpy())

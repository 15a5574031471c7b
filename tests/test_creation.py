"""Creation ops against torch: fills, ramps, eye, *_like, random (shapes, dtypes, seeding)."""
import numpy as np
import pytest
import torch

import lazytorch as lt
from oracle import assert_same, check, check_error, sample

DTYPES = ["bool", "uint8", "int32", "int64", "float16", "bfloat16", "float32", "float64"]

FILLS = [
    lambda m: m.zeros(2, 3), lambda m: m.zeros((0, 4)), lambda m: m.ones(()), lambda m: m.ones([3, 1]),
    lambda m: m.full((2, 2), 7), lambda m: m.full((2,), 2.5), lambda m: m.full((3,), True),
    lambda m: m.full((1, 3), -1, dtype=m.float64), lambda m: m.empty(0, 2).shape,
]


@pytest.mark.parametrize("fn", FILLS)
def test_fills(fn):
    check(lambda m: fn(m))


@pytest.mark.parametrize("dtype", DTYPES)
def test_fill_dtypes(dtype):
    check(lambda m: m.ones(2, 3, dtype=getattr(m, dtype)))
    check(lambda m: m.full((4,), 3, dtype=getattr(m, dtype)))


def test_fills_are_lazy_nodes_not_buffers():
    text = lt.dump(lt.zeros(1000, 1000))
    assert "full(" in text and "buffer" not in text


def test_empty_shape_and_dtype():
    e = lt.empty(2, 3, dtype=lt.int32)
    assert e.shape == (2, 3) and e.dtype is lt.int32 and e.numpy().shape == (2, 3)


ARANGES = [(5,), (0,), (1, 7, 2), (10, 0, -3), (0.5, 3), (0, 1, 0.1), (-1.0, 1.0, 0.25), (2, 3.5, 0.5),
           (0, 10, 3)]


@pytest.mark.parametrize("args", ARANGES, ids=repr)
def test_arange(args):
    check(lambda m: m.arange(*args))


def test_ramps_are_iota_arithmetic():
    # integer ramps stay lazy; fractional ones (float arange, linspace) are computed on the host in
    # float64 as torch does, since Metal and CUDA have no float64 to compute them in
    for x in (lt.arange(10), lt.arange(1, 9, 2, dtype=lt.float32), lt.eye(3)):
        text = lt.dump(x)
        assert "iota(" in text and "buffer" not in text, text
    for x in (lt.linspace(0, 1, 5), lt.arange(0, 1, 0.25)):
        assert x.node.op == "buffer"


@pytest.mark.parametrize("dtype", ["int32", "int64", "float16", "bfloat16", "float64"])
def test_arange_dtype(dtype):
    check(lambda m: m.arange(1, 9, 2, dtype=getattr(m, dtype)))


@pytest.mark.parametrize("args", [(0, 1, 7), (-2.0, 3.0, 1), (5, -5, 11), (0, 1, 0), (1, 100, 33), (3, 3, 4)])
def test_linspace(args):
    check(lambda m: m.linspace(*args))
    check(lambda m: m.linspace(*args, dtype=m.float64))


@pytest.mark.parametrize("args", [(3,), (2, 4), (4, 1), (0,)])
@pytest.mark.parametrize("dtype", ["bool", "int32", "float32"])
def test_eye(args, dtype):
    check(lambda m: m.eye(*args, dtype=getattr(m, dtype)))


@pytest.mark.parametrize("layout", ["contiguous", "transposed"])
def test_like(layout):
    for dtype in ["int32", "float16", "float64"]:
        x = sample((2, 3), dtype, layout=layout)
        check(lambda m, x: m.zeros_like(x), x)
        check(lambda m, x: m.ones_like(x, dtype=m.float32), x)
        check(lambda m, x: m.full_like(x, 2), x)
        check(lambda m, x: m.empty_like(x).shape, x)
    x = sample((3, 2))
    for fn in (lt.rand_like, lt.randn_like):
        r = fn(x.lt)
        assert r.shape == (3, 2) and r.dtype is lt.float32


def test_random_shapes_dtypes_ranges():
    lt.manual_seed(0)
    r = lt.rand(1000)
    assert r.dtype is lt.float32 and 0 <= r.numpy().min() and r.numpy().max() < 1
    n = lt.randn(2000, dtype=lt.float64).numpy()
    assert n.dtype == np.float64 and abs(n.mean()) < 0.1 and 0.9 < n.std() < 1.1
    i = lt.randint(3, 7, (500,))
    assert i.dtype is lt.int64 and set(np.unique(i.numpy())) == {3, 4, 5, 6}
    j = lt.randint(4, (2, 3), dtype=lt.int32)
    assert j.shape == (2, 3) and j.dtype is lt.int32 and j.numpy().max() < 4
    assert lt.randn(2, 0).shape == (2, 0) and lt.rand(()).shape == ()
    assert lt.randn(3, dtype=lt.bfloat16).dtype is lt.bfloat16


def test_manual_seed_reproduces():
    lt.manual_seed(123)
    a = [lt.randn(5).numpy(), lt.rand(3).numpy(), lt.randint(0, 100, (4,)).numpy()]
    lt.manual_seed(123)
    b = [lt.randn(5).numpy(), lt.rand(3).numpy(), lt.randint(0, 100, (4,)).numpy()]
    for x, y in zip(a, b):
        np.testing.assert_array_equal(x, y)
    lt.manual_seed(124)
    assert not np.array_equal(lt.randn(5).numpy(), a[0])


def test_tensor_and_from_numpy():
    for data in ([1, 2, 3], [[1.5, 2.0]], 3, 2.5, True, [[True, False]], [], np.arange(4, dtype=np.int32),
                 np.ones((2, 2), dtype=np.float64)):
        assert_same(lt.tensor(data), torch.tensor(data))
    assert_same(lt.tensor([1, 2], dtype=lt.float16), torch.tensor([1, 2], dtype=torch.float16))
    assert_same(lt.tensor([lt.tensor(1.0), lt.tensor(2.0)]), torch.tensor([1.0, 2.0]))
    a = np.arange(6.0).reshape(2, 3)
    x = lt.from_numpy(a)
    assert x.dtype is lt.float64 and not np.shares_memory(x.node.buffer, a)
    c = lt.tensor(a)
    a[0, 0] = 99                                  # tensor() and from_numpy() copy (interop.py says why)
    assert c.numpy()[0, 0] == 0 and x.numpy()[0, 0] == 0


def test_creation_errors():
    check_error(lambda m: m.zeros(2, -1), exc=RuntimeError, match=("zeros", "negative", "[2, -1]"))
    check_error(lambda m: m.arange(0, 5, 0), exc=RuntimeError, match=("arange", "nonzero"))
    check_error(lambda m: m.arange(5, 0, 1), exc=RuntimeError, match=("arange", "sign"))
    check_error(lambda m: m.linspace(0, 1, -2), exc=RuntimeError, match=("linspace", "-2"))
    check_error(lambda m: m.randint(5, 5, (2,)), exc=RuntimeError, match=("randint", "low=5"))
    check_error(lambda m: m.randn(2, dtype=m.int64), exc=TypeError, match=("randn", "int64"))
    check_error(lambda m: m.from_numpy([1, 2]), exc=TypeError, match=("from_numpy", "list"))


@pytest.mark.parametrize("dtype", ["float16", "bfloat16", "float32"])
def test_rand_never_reaches_one(dtype):
    """A float32 draw rounded to a narrower dtype could round up to 1.0; rand is [0, 1) in its dtype."""
    lt.manual_seed(0)
    x = lt.rand(200_000, dtype=getattr(lt, dtype)).float().numpy()
    assert x.max() < 1.0 and x.min() >= 0.0
    assert abs(x.mean() - 0.5) < 0.01

"""x[key] and x[key] = v against torch: basic (views), advanced, boolean masks, and bounds errors."""
import numpy as np
import pytest
import torch

import lazytorch as lt
from oracle import assert_same, check, check_error, sample

BASIC = [
    (0,), (-1,), (slice(1, None),), (slice(None, None, 2),), (slice(-3, -1),), (slice(5, 1),),
    (None,), (Ellipsis,), (Ellipsis, 0), (1, Ellipsis, None), (slice(None), None, 1),
    (True,), (False,), (slice(0, 3, 2), -2, slice(None, None, 3)), (None, Ellipsis, None),
]


@pytest.mark.parametrize("layout", ["contiguous", "transposed", "strided"])
@pytest.mark.parametrize("key", BASIC, ids=repr)
def test_basic_indexing(key, layout):
    check(lambda m, x: x[key], sample((4, 3, 5), layout=layout))


def test_basic_indexing_is_a_view():
    x = lt.zeros(4, 5)
    v = x[1:3, ::2]
    assert "index" not in lt.dump(v) and "view(" in lt.dump(v)
    v.add_(1)
    t = torch.zeros(4, 5)
    t[1:3, ::2].add_(1)
    np.testing.assert_array_equal(x.numpy(), t.numpy())


def _adv(key):
    """The key with lists turned into int64 index tensors of the right library."""
    def conv(m, k):
        if isinstance(k, list):
            return m.tensor(k, dtype=m.int64)
        return k
    return lambda m: tuple(conv(m, k) for k in key)


ADVANCED = [
    ([0, 2, -1],), ([[0, 1], [2, 3]],), (slice(None), [1, 0]), ([0, 1], slice(None), 0),
    (0, slice(None), [0, 1]), ([0, 1], None, [0, 1]), (None, [0, 1], slice(None), [0, 1]),
    ([0, 3], slice(1, 3), [1, 4]), (Ellipsis, [0, 4]), ([[0], [1]], [2, 0]), (1, [0, 2], [1, 3]),
    ([],),
]


@pytest.mark.parametrize("layout", ["contiguous", "transposed"])
@pytest.mark.parametrize("key", ADVANCED, ids=repr)
def test_advanced_indexing(key, layout):
    check(lambda m, x: x[_adv(key)(m)], sample((4, 3, 5), layout=layout))


def test_python_list_index_and_dtypes():
    for dtype in ["bool", "int8", "int64", "float16", "bfloat16", "float64"]:
        check(lambda m, x: x[[2, 0, 0]], sample((3, 2), dtype))
    check(lambda m, x, i: x[i], sample((6,)), sample((2, 3), "int64", low=-6, high=6))
    check(lambda m, x, i: x[:, i], sample((2, 6)), sample((4,), "int32", low=0, high=6))


def test_zero_d_index_tensor():
    check(lambda m, x: x[m.tensor(2)], sample((4, 3)))
    check(lambda m, x: x[..., m.tensor(-1)], sample((4, 3)))


@pytest.mark.parametrize("layout", ["contiguous", "strided"])
def test_boolean_masks(layout):
    x = sample((4, 6), layout=layout)
    check(lambda m, x: x[x > 0], x)
    check(lambda m, x: x[x[:, 0] > 0], x)
    check(lambda m, x: x[:, x[0] > 0], x)
    check(lambda m, x: x[m.tensor([True, False, True, True])], x)
    check(lambda m, x: x[[True, False, False, True]], x)
    check(lambda m, x: x[x < -100], x)                  # no True element: a size-0 result
    check(lambda m, x: x[m.tensor(True)], x)


def test_index_out_of_range_raises():
    check_error(lambda m, x: x[4], sample((4, 3)), exc=IndexError, match=("index 4", "size 4"))
    check_error(lambda m, x: x[:, -4], sample((4, 3)), exc=IndexError, match=("-4", "size 3"))
    check_error(lambda m, x: x[[0, 7]], sample((4, 3)), exc=IndexError, match=("7", "size 4"))
    check_error(lambda m, x: x[0, 0, 0], sample((4, 3)), exc=IndexError, match=("too many indices",))
    check_error(lambda m, x: x[x[:3] > 0], sample((4, 3)), exc=IndexError, match=("mask", "[3, 3]", "[4, 3]"))
    # a lazy index tensor: the bound is checked when it is evaluated, never read out of bounds
    idx = lt.tensor([1, 2]) * 3
    y = lt.zeros(4)[idx]
    with pytest.raises(IndexError, match="out of bounds"):
        y.numpy()


def test_float_index_raises():
    check_error(lambda m, x: x[m.tensor([0.0, 1.0])], sample((4,)), exc=IndexError, match=("float32",))
    check_error(lambda m, x: x[1.5], sample((4,)), exc=IndexError, match=("float",))


def _assign(key, value):
    def fn(m, x):
        y = x.clone()
        k = _adv(key)(m) if any(isinstance(k, list) for k in key) else key
        y[k] = value(m) if callable(value) else value
        return y
    return fn


SETITEM = [
    ((0,), 5.0), ((slice(None), 1), -1), ((slice(1, 3), slice(None, None, 2)), lambda m: m.tensor([7.0, 8.0])),
    ((Ellipsis, 0), lambda m: m.arange(4)), (([0, 2],), 0.5), (([0, 2], [1, 0]), lambda m: m.tensor([1.0, 2.0])),
    ((slice(None), [2, 0]), lambda m: m.ones(4, 1)), ((None, 1), 3),
]


def _setitem_id(case) -> str:
    """(a value made per module shows as "made": a function's repr holds its address, and
    ids must match across pytest-xdist's workers)"""
    return repr(case) if not callable(case) else "made"


@pytest.mark.parametrize("key,value", SETITEM, ids=_setitem_id)
def test_setitem(key, value):
    check(_assign(key, value), sample((4, 3)))


def test_setitem_masks_and_dtypes():
    check(lambda m, x: _masked(x), sample((4, 3)))
    check(_assign((slice(None),), 2.7), sample((4, 3), "int32"))       # float into int truncates
    check(_assign((0,), True), sample((2, 3), "bool"))


def _masked(x):
    y = x.clone()
    y[y > 0] = 0
    y[y < -1] = y[y < -1] * 10
    return y


def test_setitem_writes_through_views():
    a = np.arange(12.0, dtype=np.float32).reshape(3, 4)
    x, t = lt.tensor(a), torch.tensor(a)
    v, tv = x.t(), t.t()
    v[1:, 0] = 100.0
    tv[1:, 0] = 100.0
    v[[0, 3], 2] = -1.0
    tv[[0, 3], 2] = -1.0
    x[0][x[0] > 50] = 7.0
    t[0][t[0] > 50] = 7.0
    assert_same(x, t)
    assert_same(v, tv)


def test_setitem_bad_value_raises():
    x = lt.zeros(4, 3)
    with pytest.raises(RuntimeError, match=r"setitem.*\[2\].*\[4, 3\]"):
        x[:] = lt.ones(2)
    with pytest.raises(TypeError, match="setitem"):
        x[0] = "a"

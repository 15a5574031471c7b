"""Shape-changing data ops against torch: cat, stack, pad, repeat, repeat_interleave, flip, roll,
tril/triu, gather, index_select — shapes with size-0 and size-1 dims, negative dims, every dtype,
non-contiguous inputs, and the errors bad calls raise."""
import numpy as np
import pytest

import lazytorch as lt
from oracle import ALL_DTYPES, check, check_error, sample

LAYOUTS = ["contiguous", "transposed", "strided"]


def index_sample(values, dtype="int64"):
    return sample(np.shape(values), dtype, values=np.asarray(values, dtype=dtype))


# ---------------------------------------------------------------- cat and stack

@pytest.mark.parametrize("shapes, dim", [
    (((2, 3), (4, 3)), 0),
    (((2, 3), (2, 0), (2, 1)), -1),
    (((1, 4, 2), (1, 4, 2)), 1),
    (((0, 3), (2, 3)), 0),
    (((5,), (1,)), -1),
])
@pytest.mark.parametrize("layout", LAYOUTS)
def test_cat_shapes(backend, shapes, dim, layout):
    inputs = [sample(s, seed=i, layout=layout) for i, s in enumerate(shapes)]
    check(lambda m, *xs: m.cat(xs, dim), *inputs)


@pytest.mark.parametrize("dtype", ALL_DTYPES)
def test_cat_dtypes(backend, dtype):
    check(lambda m, x, y: m.cat([x, y], 1), sample((2, 3), dtype), sample((2, 2), dtype, seed=1))


@pytest.mark.parametrize("a, b", [("bool", "uint8"), ("int8", "uint8"), ("int32", "float16"),
                                  ("float16", "bfloat16"), ("float32", "float64")])
def test_cat_promotes_dtypes(backend, a, b):
    check(lambda m, x, y: m.cat([x, y]), sample((2, 3), a), sample((1, 3), b, seed=1))


def test_cat_skips_legacy_empty_vectors(backend):
    check(lambda m, e, x: m.cat([e, x, e], 1), sample((0,), "float64"), sample((2, 3)))
    check(lambda m, e: m.cat([e, e]), sample((0,), "int8"))


def test_cat_aliases_and_out(backend):
    x, y = sample((2, 3)), sample((2, 3), seed=1)
    check(lambda m, x, y: m.concat([x, y], dim=1), x, y)
    check(lambda m, x, y: m.concatenate((x, y), 0), x, y)
    check(lambda m, x, y: m.cat([x, y], out=m.zeros(4, 3)), x, y)


@pytest.mark.parametrize("shape, dim", [((), 0), ((3,), -1), ((2, 0), 1), ((1, 3), -3), ((2, 3), 2)])
@pytest.mark.parametrize("dtype", ["bool", "int32", "float32", "bfloat16"])
def test_stack(backend, shape, dim, dtype):
    xs = [sample(shape, dtype, seed=i) for i in range(3)]
    check(lambda m, *xs: m.stack(xs, dim), *xs)


def test_stack_transposed_and_promoted(backend):
    check(lambda m, x, y: m.stack([x, y], 1), sample((3, 2), "int16", layout="transposed"),
          sample((3, 2), "float16", layout="strided"))


# ---------------------------------------------------------------- pad

@pytest.mark.parametrize("shape, pad", [
    ((3, 4), (1, 2)),
    ((3, 4), (0, 0, 2, 1)),
    ((2, 3, 4), (1, 1, 0, 2, 3, 0)),
    ((3, 4), (-1, 2)),
    ((3, 4), (-2, -2, 1, -3)),
    ((3, 0), (2, 1)),
    ((1, 5), ()),
])
@pytest.mark.parametrize("layout", ["contiguous", "transposed"])
def test_pad_constant(backend, shape, pad, layout):
    check(lambda m, x: m.nn.functional.pad(x, pad, value=2.5), sample(shape, layout=layout))


@pytest.mark.parametrize("dtype", ALL_DTYPES)
def test_pad_constant_dtypes(backend, dtype):
    check(lambda m, x: m.nn.functional.pad(x, (1, 2, 1, 0)), sample((2, 3), dtype))
    check(lambda m, x: m.nn.functional.pad(x, (2, 0), "constant", 1), sample((2, 3), dtype))


@pytest.mark.parametrize("mode", ["reflect", "replicate", "circular"])
@pytest.mark.parametrize("shape, pad", [
    ((2, 5), (2, 3)),
    ((1, 2, 4), (3, 0)),
    ((2, 3, 4), (1, 2, 2, 1)),
    ((1, 2, 3, 4, 3), (2, 1, 0, 2, 1, 1)),
    ((2, 5), (-1, 2)),
])
def test_pad_modes(backend, mode, shape, pad):
    check(lambda m, x: m.nn.functional.pad(x, pad, mode=mode), sample(shape, layout="strided"))


@pytest.mark.parametrize("mode", ["reflect", "replicate"])
@pytest.mark.parametrize("dtype", ["int64", "float16", "bfloat16"])
def test_pad_modes_dtypes(backend, mode, dtype):
    check(lambda m, x: m.nn.functional.pad(x, (2, 1), mode=mode), sample((2, 4), dtype))


# ---------------------------------------------------------------- repeat, repeat_interleave

@pytest.mark.parametrize("shape, reps", [
    ((), ()), ((), (2, 3)), ((3,), (2,)), ((2, 3), (1, 1)), ((2, 3), (2, 1, 3)),
    ((2, 1), (0, 4)), ((0, 2), (3, 2)),
])
@pytest.mark.parametrize("layout", ["contiguous", "transposed"])
def test_repeat(backend, shape, reps, layout):
    check(lambda m, x: x.repeat(*reps) if reps else x.repeat(()), sample(shape, layout=layout))


@pytest.mark.parametrize("dtype", ALL_DTYPES)
def test_repeat_dtypes(backend, dtype):
    check(lambda m, x: x.repeat(2, 3), sample((2, 3), dtype, layout="strided"))


@pytest.mark.parametrize("shape, n, dim", [((2, 3), 2, None), ((2, 3), 3, -1), ((2, 3), 0, 0), ((), 3, None),
                                           ((4, 1, 2), 2, 1)])
@pytest.mark.parametrize("dtype", ["bool", "int8", "float32"])
def test_repeat_interleave(backend, shape, n, dim, dtype):
    check(lambda m, x: m.repeat_interleave(x, n, dim), sample(shape, dtype, layout="transposed"))


# ---------------------------------------------------------------- flip and roll

@pytest.mark.parametrize("shape, dims", [((5,), (0,)), ((2, 3), (-1,)), ((2, 3, 4), (0, 2)), ((0, 3), (0, 1)),
                                         ((), ())])
@pytest.mark.parametrize("layout", LAYOUTS)
def test_flip(backend, shape, dims, layout):
    check(lambda m, x: m.flip(x, dims), sample(shape, layout=layout))


@pytest.mark.parametrize("dtype", ALL_DTYPES)
def test_flip_dtypes(backend, dtype):
    check(lambda m, x: x.flip(0, 1), sample((3, 2), dtype))


@pytest.mark.parametrize("shape, shifts, dims", [
    ((5,), 2, 0), ((5,), -7, None), ((2, 3), 1, None), ((2, 3), (1, -1), (0, 1)), ((2, 3, 4), (5, 2), (-1, 0)),
    ((2, 3), (1, 1), (1, 1)), ((0, 3), 1, 0), ((2, 0), 3, None), ((), 4, None), ((1, 4), 4, 1),
])
@pytest.mark.parametrize("layout", ["contiguous", "transposed", "strided"])
def test_roll(backend, shape, shifts, dims, layout):
    check(lambda m, x: m.roll(x, shifts, dims), sample(shape, layout=layout))


@pytest.mark.parametrize("dtype", ALL_DTYPES)
def test_roll_dtypes(backend, dtype):
    check(lambda m, x: x.roll((1, -2), (0, 1)), sample((3, 4), dtype))


# ---------------------------------------------------------------- tril, triu

@pytest.mark.parametrize("op", ["tril", "triu"])
@pytest.mark.parametrize("shape, k", [((4, 4), 0), ((3, 5), 1), ((5, 3), -2), ((2, 3, 4), 2), ((3, 4), -9),
                                      ((3, 4), 9), ((0, 3), 0), ((1, 1), 0)])
@pytest.mark.parametrize("layout", ["contiguous", "transposed"])
def test_triangles(backend, op, shape, k, layout):
    check(lambda m, x: getattr(m, op)(x, k), sample(shape, layout=layout))


@pytest.mark.parametrize("op", ["tril", "triu"])
@pytest.mark.parametrize("dtype", ALL_DTYPES)
def test_triangles_dtypes(backend, op, dtype):
    check(lambda m, x: getattr(x, op)(diagonal=-1), sample((3, 4), dtype, low=1))


def test_triangles_inplace_and_out(backend):
    def fn(m, x):
        y = x.clone()
        y.tril_(1)
        return y, m.triu(x, out=m.zeros(3, 4))
    check(fn, sample((3, 4)))


def test_tril_diagonal_is_runtime_value():
    # the diagonal is a runtime scalar: two diagonals share one compiled program and still differ
    x = lt.ones(3, 3)
    np.testing.assert_array_equal(lt.tril(x, 0).numpy(), np.tril(np.ones((3, 3), np.float32), 0))
    np.testing.assert_array_equal(lt.tril(x, -1).numpy(), np.tril(np.ones((3, 3), np.float32), -1))


# ---------------------------------------------------------------- gather, index_select

@pytest.mark.parametrize("shape, dim, index", [
    ((3, 4), 1, [[0, 3, 3], [1, 0, 2]]),
    ((3, 4), 0, [[2, 0, 1, 1]]),
    ((3, 4), -2, np.zeros((0, 4), np.int64)),
    ((2, 3, 2), 1, [[[2, 0]], [[1, 1]]]),
    ((5,), 0, [4, 0, 0]),
    ((), 0, 0),
    ((), 0, [0, 0]),
])
@pytest.mark.parametrize("layout", ["contiguous", "transposed"])
def test_gather(backend, shape, dim, index, layout):
    check(lambda m, x, i: m.gather(x, dim, i), sample(shape, layout=layout), index_sample(index))


@pytest.mark.parametrize("dtype", ALL_DTYPES)
def test_gather_dtypes(backend, dtype):
    index = index_sample([[1, 0], [2, 2]])
    check(lambda m, x, i: x.gather(1, i), sample((2, 3), dtype, layout="strided"), index)


def test_gather_out_of_range_raises_at_eval():
    for bad in (3, -1):
        y = lt.gather(lt.ones(2, 3), 1, lt.tensor([[0], [bad]]))
        with pytest.raises(RuntimeError, match=rf"gather: index {bad} is out of bounds for dim 1 with size 3"):
            y.numpy()


@pytest.mark.parametrize("shape, dim, index, index_dtype", [
    ((4, 3), 0, [3, 0, 0, 1], "int64"),
    ((4, 3), -1, [2], "int32"),
    ((4, 3), 1, 1, "int64"),
    ((4, 3), 0, np.zeros(0, np.int64), "int64"),
    ((), 0, [0], "int64"),
    ((), 0, 0, "int32"),
    ((2, 0, 3), 2, [2, 1], "int64"),
])
@pytest.mark.parametrize("layout", ["contiguous", "transposed"])
def test_index_select(backend, shape, dim, index, index_dtype, layout):
    check(lambda m, x, i: m.index_select(x, dim, i), sample(shape, layout=layout),
          index_sample(index, index_dtype))


@pytest.mark.parametrize("dtype", ALL_DTYPES)
def test_index_select_dtypes(backend, dtype):
    check(lambda m, x, i: x.index_select(0, i), sample((3, 2), dtype), index_sample([2, 0, 2]))


def test_index_select_out_of_range_raises_at_eval():
    y = lt.index_select(lt.ones(3, 2), 0, lt.tensor([0, 5]))
    with pytest.raises(IndexError, match="index 5 is out of bounds for dim 0 with size 3"):
        y.numpy()


# ---------------------------------------------------------------- errors, at the call

def test_cat_errors():
    check_error(lambda m, x, y: m.cat([x, y], 1), sample((2, 3)), sample((3, 4)), exc=RuntimeError,
                match=("cat:", "dim 1", "[2, 3]", "[3, 4]"))
    check_error(lambda m, x, y: m.cat([x, y]), sample((2, 3)), sample((2, 3, 1)), exc=RuntimeError,
                match=("cat:", "number of dims", "f32[2, 3]", "f32[2, 3, 1]"))
    check_error(lambda m, x: m.cat([x]), sample(()), exc=RuntimeError, match=("cat:", "zero-dimensional"))
    check_error(lambda m: m.cat([]), exc=ValueError, match=("cat:", "non-empty"))
    check_error(lambda m, x: m.cat([x, x], 2), sample((2, 3)), exc=IndexError, match=("cat:", "dimension 2"))


def test_stack_errors():
    check_error(lambda m, x, y: m.stack([x, y]), sample((2, 3)), sample((3, 3)), exc=RuntimeError,
                match=("stack:", "[2, 3] at entry 0", "[3, 3] at entry 1"))
    check_error(lambda m: m.stack([]), exc=RuntimeError, match=("stack:", "non-empty"))
    check_error(lambda m, x: m.stack([x], 3), sample((2, 3)), exc=IndexError, match=("stack:", "dimension 3"))


@pytest.mark.parametrize("pad, kwargs, exc, match", [
    ((1, 2, 3), {}, RuntimeError, ("pad:", "length 3", "divisible by 2")),
    ((1, 1, 1, 1, 1, 1), {}, RuntimeError, ("pad:", "length 6", "2 dims")),
    ((-3, -2), {}, RuntimeError, ("pad:", "(-3, -2)", "size 4")),
    ((1, 1), {"mode": "bogus"}, NotImplementedError, ("pad:", "'bogus'", "reflect")),
    ((1, 1), {"mode": "reflect", "value": 1.0}, RuntimeError, ("pad:", "value")),
    ((4, 0), {"mode": "reflect"}, RuntimeError, ("pad:", "less than its size 4")),
    ((5, 0), {"mode": "circular"}, RuntimeError, ("pad:", "at most its size 4")),
    ((1, 1, 1, 1), {"mode": "replicate"}, NotImplementedError, ("pad:", "2 dims", "2-d")),
])
def test_pad_errors(pad, kwargs, exc, match):
    check_error(lambda m, x: m.nn.functional.pad(x, pad, **kwargs), sample((3, 4)), exc=exc, match=match)


def test_pad_replicate_needs_nonempty_dims():
    check_error(lambda m, x: m.nn.functional.pad(x, (1, 1), mode="replicate"), sample((2, 0)),
                exc=RuntimeError, match=("pad:", "non-empty"))


def test_shape_op_errors():
    x = sample((2, 3))
    check_error(lambda m, x: m.roll(x, (1, 2), 0), x, exc=RuntimeError, match=("roll:", "2 shifts and 1 dims"))
    check_error(lambda m, x: m.roll(x, (1, 2)), x, exc=RuntimeError, match=("roll:", "without dims"))
    check_error(lambda m, x: m.roll(x, 1, 5), x, exc=IndexError, match=("roll:", "dimension 5"))
    check_error(lambda m, x: m.roll(x, 1, 0), sample(()), exc=IndexError, match=("roll:", "0-d"))
    check_error(lambda m, x: x.repeat(2), x, exc=RuntimeError, match=("repeat:", "1 repeats", "2-d"))
    check_error(lambda m, x: x.repeat(2, -1), x, exc=RuntimeError, match=("repeat:", ">= 0", "[2, -1]"))
    check_error(lambda m, x: m.repeat_interleave(x, -1), x, exc=RuntimeError, match=("repeat_interleave:", ">= 0"))
    check_error(lambda m, x: m.repeat_interleave(x, 2, 0, output_size=3), x, exc=RuntimeError,
                match=("repeat_interleave:", "output_size 3", "4"))
    check_error(lambda m, x: m.tril(x), sample((3,)), exc=RuntimeError, match=("tril:", "at least 2 dims", "f32[3]"))
    check_error(lambda m, x: m.flip(x, (0, 0)), x, exc=RuntimeError, match=("flip:", "more than once"))


def test_gather_and_index_select_errors():
    x = sample((2, 3))
    # torch 2.13 takes int32 indices too (test_ops_data_dependent.py checks their values)
    check_error(lambda m, x, i: m.gather(x, 1, i), x, index_sample([[0]], "uint8"), exc=RuntimeError,
                match=("gather:", "int64", "u8[1, 1]"))
    check_error(lambda m, x, i: m.gather(x, 1, i), x, index_sample([0]), exc=RuntimeError,
                match=("gather:", "same number of dims", "i64[1]"))
    check_error(lambda m, x, i: m.gather(x, 1, i), x, index_sample(np.zeros((3, 1), np.int64)), exc=RuntimeError,
                match=("gather:", "dim 0", "[3, 1]", "[2, 3]"))
    check_error(lambda m, x, i: m.index_select(x, 0, i), x, index_sample([[0]]), exc=IndexError,
                match=("index_select:", "vector"))
    check_error(lambda m, x, i: m.index_select(x, 0, i), x, sample((1,), "float32"), exc=RuntimeError,
                match=("index_select:", "int32 or int64", "f32[1]"))
    check_error(lambda m, x, i: m.index_select(x, 0, i), sample(()), index_sample([0, 0]), exc=RuntimeError,
                match=("index_select:", "one value"))


def test_builders_lower_to_primitives():
    """tril/roll/pad/repeat are views, iota, full, cat and pointwise nodes: no op of their own."""
    x = lt.ones(3, 4)
    text = lt.dump(lt.tril(x), lt.roll(x, 1, 0), lt.nn.functional.pad(x, (1, 1)), x.repeat(2, 1))
    ops = {line.split("=")[1].split("(")[0].strip() for line in text.splitlines() if "=" in line}
    assert ops <= {"buffer", "scalar", "full", "iota", "sub", "le", "ge", "lt", "logical_and", "where", "view",
                   "contiguous", "cat"}, ops
    assert {"iota", "cat", "where"} <= ops

"""Pointwise ops against torch: every dtype torch accepts (and the same errors where it refuses),
0-d, size-0, size-1 and broadcast shapes, non-contiguous inputs, scalars, composites."""
import math

import numpy as np
import pytest
import torch

import lazytorch as lt
from oracle import ALL_DTYPES, FLOAT_DTYPES, _run, check, check_error, sample

UNARY = ["neg", "abs", "sign", "exp", "exp2", "expm1", "log", "log2", "log10", "log1p", "sqrt", "rsqrt",
         "reciprocal", "square", "sin", "cos", "tan", "asin", "acos", "atan", "sinh", "cosh", "tanh", "erf",
         "sigmoid", "relu", "floor", "ceil", "round", "trunc", "isnan", "isinf", "isfinite", "logical_not",
         "bitwise_not"]
ACTIVATIONS = {  # name -> call (nn.functional forms, with non-default scalars where torch has them)
    "gelu": lambda m, x: m.nn.functional.gelu(x),
    "gelu_tanh": lambda m, x: m.nn.functional.gelu(x, approximate="tanh"),
    "silu": lambda m, x: m.nn.functional.silu(x),
    "softplus": lambda m, x: m.nn.functional.softplus(x, beta=2, threshold=3),
    "mish": lambda m, x: m.nn.functional.mish(x),
    "elu": lambda m, x: m.nn.functional.elu(x, alpha=0.7),
    "leaky_relu": lambda m, x: m.nn.functional.leaky_relu(x, 0.2),
    "hardtanh": lambda m, x: m.nn.functional.hardtanh(x, -0.5, 2.0),
    "hardsigmoid": lambda m, x: m.nn.functional.hardsigmoid(x),
    "hardswish": lambda m, x: m.nn.functional.hardswish(x),
}
BINARY = ["add", "sub", "mul", "div", "floor_divide", "remainder", "fmod", "pow", "maximum", "minimum",
          "atan2", "eq", "ne", "lt", "le", "gt", "ge", "logical_and", "logical_or", "logical_xor",
          "bitwise_and", "bitwise_or", "bitwise_xor"]
# integer divisions by zero raise in torch at the call; those get their own test
NONZERO_DIVISOR = {"div", "floor_divide", "remainder", "fmod"}
SHAPES = [(), (0, 3), (1, 4), (2, 1, 3)]


def check_like_torch(fn, *args, name: str, **tol):
    """Compare with torch where torch computes; where torch refuses, lazytorch must refuse at the call
    with an error naming the op."""
    try:
        _run(fn, torch, args)
    except Exception:
        check_error(fn, *args, match=(name,))
        return
    check(fn, *args, **tol)


# ---------------------------------------------------------------- unary

@pytest.mark.parametrize("dtype", ALL_DTYPES)
@pytest.mark.parametrize("name", UNARY)
def test_unary_every_dtype(backend, name, dtype):
    check_like_torch(lambda m, x: getattr(m, name)(x), sample((3, 4), dtype, layout="transposed"), name=name)


@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("name", UNARY)
def test_unary_shapes(backend, name, shape):
    dtype = "int32" if name == "bitwise_not" else "float32"
    check(lambda m, x: getattr(x, name)(), sample(shape, dtype, layout="strided"))


def test_unary_special_values(backend):
    values = np.array([0.0, -0.0, 0.5, 1.5, 2.5, -0.5, -2.5, np.inf, -np.inf, np.nan, 1e-8, -7.25])
    for name in UNARY:
        if name != "bitwise_not":
            check(lambda m, x: getattr(m, name)(x), sample((12,), "float64", values=values))


@pytest.mark.parametrize("dtype", FLOAT_DTYPES)
def test_round_half_to_even_and_decimals(backend, dtype):
    x = sample((6,), dtype, values=np.array([0.5, 1.5, 2.5, -0.5, -1.25, 123.456]))
    check(lambda m, x: m.round(x), x)
    check(lambda m, x: m.round(x, decimals=1), x)
    check(lambda m, x: m.round(x, decimals=-1), x)


@pytest.mark.parametrize("dtype", ALL_DTYPES)
@pytest.mark.parametrize("name", sorted(ACTIVATIONS))
def test_activations_every_dtype(backend, name, dtype):
    check_like_torch(ACTIVATIONS[name], sample((3, 5), dtype, low=-5, high=5, layout="strided"),
                     name=name.removesuffix("_tanh"))


@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("name", sorted(ACTIVATIONS))
def test_activations_shapes(backend, name, shape):
    check(ACTIVATIONS[name], sample(shape, "float32", low=-30, high=30))


# ---------------------------------------------------------------- binary

def _binary_inputs(name, dtype, shape_a=(3, 4), shape_b=(3, 4), layout="contiguous"):
    low_b = 1 if name in NONZERO_DIVISOR and dtype not in FLOAT_DTYPES else 0 if name == "pow" else -3
    return (sample(shape_a, dtype, layout=layout, seed=1),
            sample(shape_b, dtype, low=low_b, high=4, layout=layout, seed=2))


@pytest.mark.parametrize("dtype", ALL_DTYPES)
@pytest.mark.parametrize("name", BINARY)
def test_binary_every_dtype(backend, name, dtype):
    check_like_torch(lambda m, x, y: getattr(m, name)(x, y), *_binary_inputs(name, dtype, layout="transposed"),
                     name=name)


@pytest.mark.parametrize("shapes", [((3, 1, 4), (2, 4)), ((), (0, 3)), ((1, 3), (4, 1)), ((2, 3), ())])
@pytest.mark.parametrize("name", BINARY)
def test_binary_broadcasting(backend, name, shapes):
    dtype = "bool" if name.startswith(("logical", "bitwise")) else "float32"
    check(lambda m, x, y: getattr(m, name)(x, y), *_binary_inputs(name, dtype, *shapes))


@pytest.mark.parametrize("scalar", [True, 2, -1.5])
@pytest.mark.parametrize("name", ["add", "sub", "mul", "div", "pow", "maximum", "remainder", "lt", "eq"])
@pytest.mark.parametrize("dtype", ["int32", "float16", "float32"])
def test_binary_with_python_scalar(backend, name, dtype, scalar):
    x = sample((2, 3), dtype, low=1)
    if name in ("maximum",):                   # torch takes tensors only; a 0-d tensor stands in
        check(lambda m, x: getattr(m, name)(x, m.tensor(scalar)), x)
        return
    check_like_torch(lambda m, x: getattr(m, name)(x, scalar), x, name=name)
    if name in REFLECTED:
        check_like_torch(lambda m, x: REFLECTED[name](scalar, x), x, name=name)


# the operators that put a Python number first (torch's functions take a tensor first)
REFLECTED = {"add": lambda s, x: s + x, "sub": lambda s, x: s - x, "mul": lambda s, x: s * x,
             "div": lambda s, x: s / x, "pow": lambda s, x: s ** x, "remainder": lambda s, x: s % x,
             "lt": lambda s, x: s < x, "eq": lambda s, x: s == x}


@pytest.mark.parametrize("dtype", ["int64", "float32", "bfloat16"])
def test_operators(backend, dtype):
    a, b = _binary_inputs("div", dtype)
    check(lambda m, x, y: (x + y * 2 - y / 3 + (x // y) + (x % y) + (-x) + abs(y) ** 2), a, b)
    check(lambda m, x, y: ((x < y) & (x >= 0)) | ~(y == 1) ^ (x != y), a, b)


@pytest.mark.parametrize("alpha", [2, -1, 0.5])
@pytest.mark.parametrize("dtype", ["bool", "uint8", "int32", "float16", "bfloat16", "float32"])
def test_add_sub_alpha(backend, dtype, alpha):
    a, b = _binary_inputs("add", dtype, (3, 1, 4), (2, 4))
    if dtype == "bool":
        alpha = True
    check_like_torch(lambda m, x, y: m.add(x, y, alpha=alpha), a, b, name="add")
    check_like_torch(lambda m, x, y: m.sub(x, y, alpha=alpha), a, b, name="sub")


@pytest.mark.parametrize("mode", [None, "trunc", "floor"])
@pytest.mark.parametrize("dtype", ["uint8", "int8", "int32", "int64", "float16", "bfloat16", "float32", "float64"])
def test_div_rounding_modes(backend, dtype, mode):
    check(lambda m, x, y: m.div(x, y, rounding_mode=mode), *_binary_inputs("div", dtype, (3, 1, 4), (2, 4)))


def test_float_division_by_zero(backend):
    values = np.array([1.0, -1.0, 0.0, np.inf, -2.5])
    x, z = sample((5,), "float32", values=values), sample((5,), "float32", values=np.zeros(5))
    for mode in (None, "trunc", "floor"):
        check(lambda m, x, y: m.div(x, y, rounding_mode=mode), x, z)
    check(lambda m, x, y: m.remainder(x, y), x, z)
    check(lambda m, x, y: m.fmod(x, y), x, z)
    check(lambda m, x, y: m.floor_divide(x, y), x, z)


@pytest.mark.parametrize("call", [lambda x, y: lt.div(x, y, rounding_mode="trunc"),
                                  lambda x, y: lt.div(x, y, rounding_mode="floor"),
                                  lambda x, y: x // y, lambda x, y: x % y, lambda x, y: lt.fmod(x, y)])
def test_integer_division_by_zero_raises(backend, call):
    x, y = lt.tensor([4, -3, 5]), lt.tensor([2, 0, 1])
    with pytest.raises(ZeroDivisionError):
        call(x, y).numpy()


def test_integer_division_semantics(backend):
    # signs of quotient and remainder follow torch: trunc toward zero, floor toward -inf
    v = np.array([7, -7, 7, -7, 0])
    d = np.array([2, 2, -2, -2, 3])
    a, b = sample((5,), "int64", values=v), sample((5,), "int64", values=d)
    for fn in (lambda m, x, y: m.div(x, y, rounding_mode="trunc"), lambda m, x, y: m.floor_divide(x, y),
               lambda m, x, y: m.remainder(x, y), lambda m, x, y: m.fmod(x, y), lambda m, x, y: x / y):
        check(fn, a, b)


# ---------------------------------------------------------------- ternary and composites

@pytest.mark.parametrize("dtypes", [("float32", "float32"), ("int32", "float16"), ("bool", "int8"),
                                    ("bfloat16", "float64"), ("uint8", "uint8")])
def test_where(backend, dtypes):
    c = sample((3, 1, 4), "bool", seed=3)
    x, y = sample((2, 4), dtypes[0], seed=1), sample((3, 2, 1), dtypes[1], seed=2)
    check(lambda m, c, x, y: m.where(c, x, y), c, x, y)
    check(lambda m, c, x: m.where(c, x, 2.5), c, x)
    check(lambda m, c, x: m.where(c, 1, x), c, x)


@pytest.mark.parametrize("dtype", ["bool", "uint8", "int32", "float16", "bfloat16", "float32", "float64"])
def test_clamp_scalar_and_tensor_bounds(backend, dtype):
    x = sample((3, 4), dtype, layout="transposed")
    check_like_torch(lambda m, x: m.clamp(x, min=-1, max=2), x, name="clamp")
    check_like_torch(lambda m, x: m.clamp(x, min=0.5), x, name="clamp")
    check_like_torch(lambda m, x: x.clamp(max=1), x, name="clamp")
    check_like_torch(lambda m, x: m.clip(x, 0, 1), x, name="clamp")
    lo, hi = sample((4,), dtype, seed=5, high=0), sample((3, 1), dtype, seed=6, low=0)
    check_like_torch(lambda m, x, lo, hi: m.clamp(x, lo, hi), x, lo, hi, name="clamp")
    check_like_torch(lambda m, x, lo: m.clamp_min(x, lo), x, lo, name="clamp_min")
    check_like_torch(lambda m, x, hi: m.clamp_max(x, hi), x, hi, name="clamp_max")


def test_clamp_nan_and_crossed_bounds(backend):
    x = sample((4,), "float32", values=np.array([np.nan, -5.0, 0.5, 5.0]))
    check(lambda m, x: m.clamp(x, 2, 1), x)         # min > max: every element is max
    check(lambda m, x: m.clamp(x, -1, 1), x)        # NaN propagates


@pytest.mark.parametrize("dtype", FLOAT_DTYPES)
def test_lerp(backend, dtype):
    a, b = sample((3, 1, 4), dtype, seed=1), sample((2, 4), dtype, seed=2)
    w = sample((4,), dtype, low=-0.5, high=1.5, seed=3)
    check(lambda m, a, b: m.lerp(a, b, 0.3), a, b)
    # torch rounds a Python-number weight through float32 here, hence the float32-sized tolerance
    check(lambda m, a, b: m.lerp(a, b, 0.9), a, b, rtol=1e-6 if dtype == "float64" else None)
    check(lambda m, a, b, w: m.lerp(a, b, w), a, b, w)


@pytest.mark.parametrize("dtype", ["int32", "float16", "bfloat16", "float32", "float64"])
def test_addcmul_addcdiv(backend, dtype):
    s, t1 = sample((3, 1, 4), dtype, seed=1), sample((2, 4), dtype, seed=2)
    t2 = sample((4,), dtype, low=1, high=3, seed=3)
    value = 2 if dtype == "int32" else 0.5
    check(lambda m, s, a, b: m.addcmul(s, a, b, value=value), s, t1, t2)
    check_like_torch(lambda m, s, a, b: m.addcdiv(s, a, b, value=value), s, t1, t2, name="addcdiv")
    check_like_torch(lambda m, s, a, b: m.addcdiv(s, a, b), s, t1, t2, name="addcdiv")


@pytest.mark.parametrize("dtype", ["bool", "uint8", "int64", "float16", "bfloat16", "float32"])
@pytest.mark.parametrize("value", [1.7, -3, True])
def test_masked_fill(backend, dtype, value):
    x, mask = sample((3, 4), dtype, layout="transposed"), sample((4,), "bool", seed=7)
    check(lambda m, x, k: m.masked_fill(x, k, value), x, mask)
    check(lambda m, x, k: x.masked_fill(k, m.tensor(2)), x, mask)


CASTS = ["float", "double", "half", "bfloat16", "long", "int", "short", "char", "byte", "bool"]


@pytest.mark.parametrize("src", ALL_DTYPES)
def test_casts_every_pair(backend, src):
    x = sample((2, 3), src, low=-300, high=300, layout="transposed")
    for method in CASTS:
        check(lambda m, x: getattr(x, method)(), x)
    for dst in ALL_DTYPES:
        check(lambda m, x: x.to(getattr(m, dst)), x)
        check(lambda m, x: x.type(getattr(m, dst)), x)


def test_cast_specials(backend):
    x = sample((5,), "float32", values=np.array([2.7, -2.7, 0.0, -0.0, 0.5]))
    check(lambda m, x: x.to(m.int32), x)                   # truncates toward zero
    check(lambda m, x: x.bool(), x)
    check(lambda m, x, y: x.to(y), x, sample((2,), "float16"))
    assert sample((2,), "int16").lt.type() == "lazytorch.ShortTensor"


# ---------------------------------------------------------------- errors

def test_errors_name_op_and_dtypes():
    f, i = sample((2, 3), "float32"), sample((2, 3), "int64")
    check_error(lambda m, x, y: m.bitwise_and(x, y), f, f, exc=TypeError, match=("bitwise_and", "float32", "f32[2, 3]"))
    check_error(lambda m, x: m.bitwise_not(x), f, exc=TypeError, match=("bitwise_not", "float32"))
    check_error(lambda m, x: m.nn.functional.gelu(x), i, exc=TypeError, match=("gelu", "int64"))
    check_error(lambda m, x, y: m.add(x, y), sample((2, 3)), sample((4,)), match=("add", "[2, 3]", "[4]"))
    check_error(lambda m, x: m.div(x, 2, rounding_mode="round"), f, exc=ValueError, match=("div", "'round'"))
    check_error(lambda m, x: m.add(x, 1, alpha=0.5), i, match=("add", "alpha"))
    check_error(lambda m, x: m.sub(x, x), sample((2,), "bool"), match=("sub", "bool"))
    check_error(lambda m, x: m.clamp(x), f, match=("clamp", "min", "max"))
    check_error(lambda m, x, k: m.where(k, x, x), f, f, exc=TypeError, match=("where", "condition", "float32"))
    check_error(lambda m, x, k: m.masked_fill(x, k, 1.0), f, i, exc=TypeError, match=("masked_fill", "mask"))
    # out of place the mask may broadcast self (torch 2.13); in place the result must keep self's shape
    check_error(lambda m, x, k: x.masked_fill_(k, 1.0), sample((3,)), sample((2, 3), "bool"),
                match=("masked_fill", "[2, 3]"))
    check_error(lambda m, x, y: m.lerp(x, y, 0.5), f, sample((2, 3), "float64"), match=("lerp", "float64"))
    check_error(lambda m, x: m.addcdiv(x, x, x), i, match=("addcdiv",))
    check_error(lambda m, x: x.to("tpu"), f, exc=RuntimeError, match=("device type", "tpu"))
    check_error(lambda m, x: m.round(x, decimals=2), i, match=("round", "decimals"))

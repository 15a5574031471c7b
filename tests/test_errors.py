"""The error catalogue: invalid calls raise at the call, with the right type, naming the op and shapes.

Each case is (call, exception type, strings the message must contain).  Cases run on lazy inputs
so that every error is raised while building the graph, never while evaluating it.
"""
import pytest

import lazytorch as lt


def x23():
    return lt.zeros(2, 3) * 1.0                 # lazy


CASES = {
    "broadcast_add": (lambda: x23() + lt.zeros(4), RuntimeError, ("add", "[2, 3]", "[4]")),
    "broadcast_mul_3d": (lambda: lt.zeros(2, 3, 4) * lt.zeros(3, 3), RuntimeError, ("mul", "[2, 3, 4]", "[3, 3]")),
    "sum_bad_dim": (lambda: x23().sum(2), IndexError, ("sum", "dimension 2", "f32[2, 3]")),
    "transpose_bad_dim": (lambda: x23().transpose(0, 5), IndexError, ("transpose", "5", "f32[2, 3]")),
    "size_bad_dim": (lambda: x23().size(-3), IndexError, ("size", "-3", "f32[2, 3]")),
    "unsqueeze_bad_dim": (lambda: x23().unsqueeze(4), IndexError, ("unsqueeze", "4", "f32[2, 3]")),
    "view_bad_numel": (lambda: x23().view(4, 2), RuntimeError, ("view", "[4, 2]", "6")),
    "view_two_inferred": (lambda: x23().view(-1, -1), RuntimeError, ("view", "only one dimension", "[-1, -1]")),
    "view_bad_strides": (lambda: x23().t().view(6), RuntimeError, ("view", "strides", "reshape", "f32[3, 2]")),
    "reshape_bad_numel": (lambda: x23().reshape(5), RuntimeError, ("reshape", "[5]", "6")),
    "reshape_negative": (lambda: x23().reshape(-2, 3), RuntimeError, ("reshape", "[-2, 3]")),
    "zeros_negative": (lambda: lt.zeros(2, -3), RuntimeError, ("zeros", "[2, -3]", "negative")),
    "full_negative": (lambda: lt.full((-1,), 2.0), RuntimeError, ("full", "[-1]")),
    "randn_negative": (lambda: lt.randn(-1, 2), RuntimeError, ("randn", "[-1, 2]")),
    "add_wrong_type": (lambda: lt.add(x23(), "a"), TypeError, ("add", "expected", "Tensor")),
    "reshape_wrong_type": (lambda: x23().reshape("a"), TypeError, ("reshape", "int[] shape")),
    "transpose_missing_arg": (lambda: x23().transpose(0), TypeError, ("transpose", "dim1", "int dim1")),
    "unexpected_kwarg": (lambda: x23().sum(axis_=1), TypeError, ("sum", "axis_")),
    "index_out_of_range": (lambda: x23()[2], IndexError, ("index 2", "size 2", "f32[2, 3]")),
    "index_list_out_of_range": (lambda: x23()[:, [0, 3]], IndexError, ("index 3", "size 3")),
    "select_out_of_range": (lambda: x23().select(1, -4), IndexError, ("select", "-4", "size 3")),
    "too_many_indices": (lambda: x23()[0, 0, 0], IndexError, ("too many indices", "2")),
    "float_index": (lambda: x23()[lt.tensor([0.5])], IndexError, ("float32", "[1]")),
    "mask_shape": (lambda: x23()[lt.tensor([True, False, True])], IndexError, ("mask", "[3]", "[2]")),
    "narrow_out_of_range": (lambda: x23().narrow(1, 2, 2), IndexError, ("narrow", "size 3", "f32[2, 3]")),
    "bool_multi": (lambda: bool(x23()), RuntimeError, ("bool()", "6 elements", "[2, 3]")),
    "item_multi": (lambda: x23().item(), RuntimeError, ("item()", "6 elements", "[2, 3]")),
    "expand_non1": (lambda: x23().expand(4, 3), RuntimeError, ("expand", "2", "[4, 3]", "f32[2, 3]")),
    "expand_fewer_dims": (lambda: x23().expand(3), RuntimeError, ("expand", "number of sizes", "f32[2, 3]")),
    "permute_not_perm": (lambda: x23().permute(0, 0), RuntimeError, ("permute", "[0, 0]", "f32[2, 3]")),
    "permute_wrong_len": (lambda: x23().permute(0), RuntimeError, ("permute", "[0]", "f32[2, 3]")),
    "t_3d": (lambda: lt.zeros(2, 3, 4).t(), RuntimeError, ("t", "3-d", "f32[2, 3, 4]")),
    "mT_1d": (lambda: lt.zeros(3).mT, RuntimeError, ("mT", "1-d", "f32[3]")),
    "split_bad_sections": (lambda: x23().split([1, 1], 1), RuntimeError, ("split", "[1, 1]", "3", "f32[2, 3]")),
    "chunk_zero": (lambda: x23().chunk(0), RuntimeError, ("chunk", "0", "f32[2, 3]")),
    "flatten_bad_range": (lambda: lt.zeros(2, 3, 4).flatten(2, 1), RuntimeError, ("flatten", "start_dim",
                                                                                   "f32[2, 3, 4]")),
    "unflatten_bad_sizes": (lambda: x23().unflatten(1, (2, 2)), RuntimeError, ("unflatten", "[2, 2]", "3")),
    "slice_negative_step": (lambda: x23()[::-1], ValueError, ("slice", "step", "f32[2, 3]")),
    "setitem_broadcast": (lambda: x23().__setitem__(0, lt.zeros(2)), RuntimeError, ("setitem", "[2]", "[3]")),
    "len_0d": (lambda: len(lt.tensor(1.0)), TypeError, ("len()", "0-d")),
    "arange_zero_step": (lambda: lt.arange(0, 4, 0), RuntimeError, ("arange", "step")),
    "rand_int_dtype": (lambda: lt.rand(2, dtype=lt.int32), TypeError, ("rand", "int32")),
    "cat_mismatch": (lambda: lt.cat([x23(), lt.zeros(2, 4)], 0), RuntimeError, ("cat", "[2, 3]", "[2, 4]")),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_error(name):
    fn, exc, needles = CASES[name]
    if name == "cat_mismatch" and not hasattr(lt, "cat"):
        pytest.skip("cat is not built yet")
    with pytest.raises(exc) as info:
        fn()
    text = str(info.value)
    for s in needles:
        assert s in text, f"{name}: message {text!r} does not mention {s!r}"


def test_catalogue_size():
    assert len(CASES) >= 30

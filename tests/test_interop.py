"""Data in and out: from_numpy copies (a pending result never sees later writes to the array),
numpy() of an evaluated tensor shares memory, foreign arrays (torch, MLX) come in through DLPack."""
from __future__ import annotations

import mlx.core as mx
import numpy as np
import pytest
import torch

import lazytorch as lt


def test_pending_result_ignores_later_writes_to_the_array(backend):
    a = np.ones(3, np.float32)
    t = lt.from_numpy(a)
    y = t * 2
    a[0] = 5                                   # torch: y was computed before this write
    np.testing.assert_array_equal(y.numpy(), [2, 2, 2])
    np.testing.assert_array_equal(t.numpy(), [1, 1, 1])


def test_refilled_batch_buffer_keeps_earlier_results():
    batch = np.zeros((2, 3), np.float32)
    results = []
    for step in range(3):
        batch[:] = step                        # a data loader refilling one buffer
        results.append(lt.from_numpy(batch).sum() + 0)
    assert [r.item() for r in results] == [0.0, 6.0, 12.0]


def test_inplace_on_from_numpy_tensor_is_a_copy_as_documented():
    a = np.ones(3, np.float32)
    t = lt.from_numpy(a)
    t += 1
    t.mul_(2)
    np.testing.assert_array_equal(t.numpy(), [4, 4, 4])
    np.testing.assert_array_equal(a, [1, 1, 1])            # the docstring says the data is copied
    assert "copy" in lt.from_numpy.__doc__


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.int64, np.int32, np.bool_, np.float16, np.uint8])
def test_from_numpy_dtypes_and_layouts(dtype):
    base = (np.arange(24).reshape(4, 6) % 3).astype(dtype)
    for arr in (base, base.T, base[:, ::2], base[1:, 2:], np.asarray(base[0, 0])):
        t = lt.from_numpy(arr)
        assert t.dtype == lt.ir.dtypes.from_numpy(arr.dtype) and tuple(t.shape) == arr.shape
        np.testing.assert_array_equal(t.numpy(), arr)
    with pytest.raises(TypeError, match="from_numpy"):
        lt.from_numpy([1, 2, 3])


def test_numpy_of_evaluated_tensor_shares_memory():
    x = lt.randn(4, 5) * 2
    lt.eval(x)
    a, b = x.numpy(), x.numpy()
    assert np.shares_memory(a, b)
    np.testing.assert_array_equal(a, b)


def test_tensor_from_torch_tensors():
    src = torch.arange(12, dtype=torch.float32).reshape(3, 4)
    for t_in in (src, src.t(), src[:, 1::2], src.to(torch.float64), src.to(torch.int32), src > 4,
                 src.clone().requires_grad_(True), src.to(torch.float16)):
        got = lt.tensor(t_in)
        assert got.dtype.name == str(t_in.dtype).removeprefix("torch.")
        np.testing.assert_array_equal(got.numpy(), t_in.detach().numpy())
    bf = (src / 7).to(torch.bfloat16)
    got = lt.tensor(bf)
    assert got.dtype is lt.bfloat16
    np.testing.assert_array_equal(got.float().numpy(), bf.float().numpy())
    np.testing.assert_array_equal(lt.from_dlpack(src).numpy(), src.numpy())
    assert lt.tensor(src, dtype=lt.float16).dtype is lt.float16


def test_tensor_from_mlx_arrays():
    a = mx.arange(6).reshape(2, 3).astype(mx.float32) / 3
    np.testing.assert_array_equal(lt.tensor(a).numpy(), np.array(a))
    np.testing.assert_array_equal(lt.from_mlx(a).numpy(), np.array(a))
    b = a.astype(mx.bfloat16)
    got = lt.tensor(b)
    assert got.dtype is lt.bfloat16
    np.testing.assert_array_equal(got.float().numpy(), np.array(b.astype(mx.float32)))


def test_as_tensor():
    x = lt.ones(3)
    assert lt.as_tensor(x) is x and lt.as_tensor(x, device="cpu") is x
    assert lt.as_tensor(x, dtype=lt.float16).dtype is lt.float16
    a = np.arange(3.0)
    t = lt.as_tensor(a, dtype=lt.float32)
    a[0] = 9
    np.testing.assert_array_equal(t.numpy(), [0, 1, 2])
    assert lt.as_tensor([1, 2]).dtype is lt.int64


def test_torch_reads_lazytorch_through_dlpack():
    x = lt.arange(6, dtype=lt.float32).reshape(2, 3) * 2
    np.testing.assert_array_equal(torch.from_dlpack(x).numpy(), x.numpy())
    np.testing.assert_array_equal(torch.tensor(np.asarray(x)).numpy(), x.numpy())


def test_copy_from_foreign_arrays():
    x = lt.zeros(2, 3)
    x.copy_(np.arange(6).reshape(2, 3))
    np.testing.assert_array_equal(x.numpy(), np.arange(6).reshape(2, 3))
    assert x.dtype is lt.float32
    x.copy_(torch.ones(3))                                 # broadcast, as torch's copy_
    np.testing.assert_array_equal(x.numpy(), np.ones((2, 3)))
    x.zero_()
    np.testing.assert_array_equal(x.numpy(), np.zeros((2, 3)))
    x.fill_(2.5)
    np.testing.assert_array_equal(x.numpy(), np.full((2, 3), 2.5))

"""The Tensor surface torch users expect: metadata, conversions, Python protocols, interop, F."""
import numpy as np
import pytest
import torch

import lazytorch as lt
from oracle import assert_same, check, sample


def test_metadata_without_evaluation():
    x = lt.randn(2, 3, 4) * 2                     # lazy: none of these may evaluate
    assert x.is_lazy
    assert x.shape == (2, 3, 4) and isinstance(x.shape, lt.Size) and repr(x.shape) == "lazytorch.Size([2, 3, 4])"
    assert x.size() == (2, 3, 4) and x.size(-1) == 4 and x.size(0) == 2
    assert x.dim() == 3 and x.ndim == 3 and x.numel() == 24 and x.shape.numel() == 24
    assert x.dtype is lt.float32 and x.element_size() == 4 and x.is_floating_point()
    assert len(x) == 2
    assert x.is_lazy


def test_metadata_matches_torch():
    for shape in [(), (0,), (1,), (2, 0, 3), (4, 1)]:
        x, t = lt.zeros(shape), torch.zeros(shape)
        assert (tuple(x.shape), x.ndim, x.numel()) == (tuple(t.shape), t.ndim, t.numel())
        assert x.T.shape == t.T.shape if len(shape) in (0, 2) else True
    x, t = lt.zeros(2, 3, 4), torch.zeros(2, 3, 4)
    assert x.mT.shape == t.mT.shape and x.permute(2, 0, 1).stride() == t.permute(2, 0, 1).stride()


def test_values_out():
    s = sample((2, 3), "int32")
    assert s.lt.tolist() == s.torch.tolist()
    assert lt.tensor(2.5).item() == 2.5 and isinstance(lt.tensor(3).item(), int)
    assert lt.tensor([[7]]).item() == 7
    assert float(lt.tensor(1.5)) == 1.5 and int(lt.tensor(4)) == 4
    arr = np.asarray(s.lt)
    assert arr.dtype == np.int32 and arr.tolist() == s.torch.tolist()
    assert np.array(lt.ones(2), dtype=np.float64).dtype == np.float64
    assert lt.tensor([1.0, 2.0])[lt.tensor(1)].item() == 2.0
    assert list(range(5))[lt.tensor(3)] == 3         # __index__


def test_bool_len_iter():
    assert bool(lt.tensor(1.0)) and not bool(lt.tensor([0]))
    assert [t.item() for t in lt.arange(3)] == [0, 1, 2]
    rows = list(lt.arange(6).view(3, 2))
    assert len(rows) == 3 and rows[2].tolist() == [4, 5]
    with pytest.raises(TypeError, match="0-d"):
        len(lt.tensor(1.0))
    with pytest.raises(TypeError, match="0-d"):
        iter(lt.tensor(1.0))


def test_repr_and_print_evaluate(capsys):
    x = lt.arange(6).view(2, 3) + 1
    assert repr(x) == repr(torch.arange(6).view(2, 3) + 1)
    print(x)
    assert capsys.readouterr().out.strip() == repr(torch.arange(6).view(2, 3) + 1)
    assert "dtype=lazytorch.float16" in repr(lt.ones(2, dtype=lt.float16))
    assert f"{lt.tensor(1.25):.1f}" == "1.2"


def test_methods_bind_like_torch():
    x = sample((4, 6))
    check(lambda m, x: x.view(3, 8), x)
    check(lambda m, x: x.split(3, 1), x)
    check(lambda m, x: x.clone().add_(1), x)
    check(lambda m, x: x.T.contiguous(), x)
    check(lambda m, x: x.masked_fill(x > 0, 0.0), x)
    check(lambda m, x: m.transpose(x, 0, 1).flatten(), x)
    for name in ["view", "reshape", "permute", "transpose", "split", "chunk", "unbind", "flatten", "unflatten",
                 "squeeze", "unsqueeze", "expand", "narrow", "select", "flip", "masked_fill", "clone",
                 "contiguous", "numpy", "tolist", "item"]:
        assert callable(getattr(lt.Tensor, name)), name


def test_clone_does_not_alias():
    x = lt.zeros(3)
    c = x.clone()
    c.add_(1)
    assert x.tolist() == [0.0, 0.0, 0.0] and c.tolist() == [1.0, 1.0, 1.0]


def test_mlx_round_trip():
    mx = pytest.importorskip("mlx.core")
    for dtype in ["float32", "int32", "bool"]:
        s = sample((2, 3), dtype)
        m = s.lt.to_mlx()
        assert isinstance(m, mx.array) and np.array_equal(np.array(m), s.torch.numpy())
        assert_same(lt.from_mlx(m), s.torch)
    b = lt.tensor([1.5, -2.0], dtype=lt.bfloat16)
    assert_same(lt.from_mlx(b.to_mlx()), torch.tensor([1.5, -2.0], dtype=torch.bfloat16))


def test_functional_namespace_accepts_input_kwarg():
    F = lt.nn.functional
    tF = torch.nn.functional
    x = sample((3, 5))
    check(lambda m, x: (F if m is lt else tF).relu(input=x), x)
    check(lambda m, x: (F if m is lt else tF).softmax(input=x, dim=-1), x)
    check(lambda m, x: (F if m is lt else tF).log_softmax(x, dim=0), x)


def test_is_tensor_and_result_type():
    assert lt.is_tensor(lt.zeros(1)) and not lt.is_tensor(np.zeros(1))
    assert lt.result_type(lt.zeros(2, dtype=lt.int32), 1.0) is lt.float32


@pytest.mark.parametrize("pending", [False, True], ids=["realized", "pending"])
def test_pickle_round_trip_as_torch(backend, pending):
    """A tensor pickles as torch's does, pending or not (a pending one keeps its user's line as
    text: the raw (code, offset) origin cannot be pickled)."""
    import pickle
    x = lt.from_numpy(np.arange(6, dtype=np.float32).reshape(2, 3))
    y = x * 2.0 + 1
    if not pending:
        lt.eval(y)
    z = pickle.loads(pickle.dumps(y))
    want = torch.arange(6, dtype=torch.float32).reshape(2, 3) * 2.0 + 1
    assert_same(z, pickle.loads(pickle.dumps(want)))
    if pending:
        assert y.node.origin is not None and z.node.origin == y.node.origin and "test_tensor_api.py" in z.node.origin

"""Devices with torch's names: one device per process (lazytorch/device.py), device= on every
creation function, Tensor.to / Module.to forms, availability queries."""
from __future__ import annotations

import numpy as np
import pytest
import torch

import lazytorch as lt
from lazytorch.ir.registry import ops


@pytest.fixture
def host_backend(backend):
    """Every test here runs on each host backend; all of them are the "cpu" device (a run on a
    GPU backend, LAZYTORCH_TEST_BACKENDS=cuda, skips them)."""
    if backend not in ("reference", "cpu", "metal-emu"):
        pytest.skip(f"{backend} is not a host backend")
    return backend


@pytest.mark.parametrize("spec", ["cpu", "cuda", "cuda:1", "mps", "mps:0"])
def test_device_objects_match_torch(spec):
    ours, theirs = lt.device(spec), torch.device(spec)
    assert (ours.type, ours.index) == (theirs.type, theirs.index)
    assert str(ours) == str(theirs) and repr(ours) == repr(theirs)
    assert ours == spec and ours == lt.device(ours) and hash(ours) == hash(lt.device(spec))
    assert lt.device("cuda", 0) == lt.device("cuda:0") != lt.device("cuda")


@pytest.mark.parametrize("bad", ["gpu", "cpu:x", "cuda:-1", ""])
def test_bad_device_strings(bad):
    with pytest.raises(RuntimeError):
        lt.device(bad)
    with pytest.raises(TypeError):
        lt.device(1.5)


def test_x_device_is_a_device_object(host_backend):
    x = lt.ones(3)
    assert isinstance(x.device, lt.device) and x.device.type == "cpu" and x.device == "cpu"
    assert str(x.device) == "cpu" and not x.is_cuda
    assert lt.get_default_device() == "cpu"
    assert lt.get_backend() == host_backend            # "cpu" keeps the selected host backend


def _creation_calls():
    """(name, args) for every creation function of the registry, with arguments that make a 2x3."""
    x = lt.ones(2, 3)
    args = {"full": ((2, 3), 1.5), "zeros": ((2, 3),), "ones": ((2, 3),), "empty": ((2, 3),),
            "randn": ((2, 3),), "rand": ((2, 3),), "randint": (5, (2, 3)), "arange": (6,),
            "linspace": (0, 1, 6), "eye": (2, 3), "zeros_like": (x,), "ones_like": (x,), "empty_like": (x,),
            "full_like": (x, 2.0), "rand_like": (x,), "randn_like": (x,), "randint_like": (x, 5),
            "empty_strided": ((2, 3), (3, 1)), "empty_permuted": ((2, 3), (1, 0)), "logspace": (0, 1, 6),
            "scalar_tensor": (2.5,), "tril_indices": (3, 3, -1), "triu_indices": (3, 4, 1)}
    names = sorted(name for name, op in ops().items() if "creation" in op.tags and "function" in op.variants)
    return [(n, args[n]) for n in names if n in args], [n for n in names if n not in args]


# creation functions whose values are random or uninitialised: only shape and dtype are compared
UNSET_VALUES = ("empty", "rand")


def test_device_keyword_on_every_creation_function():
    calls, untested = _creation_calls()
    assert not untested, f"creation functions without a case here: {untested}"
    calls += [("tensor", ([[1, 2, 3], [4, 5, 6]],)), ("as_tensor", (np.arange(6.0).reshape(2, 3),))]  # interop.py
    for name, args in calls:
        for dev in ("cpu", lt.device("cpu"), lt.ones(1).device, None):
            out = getattr(lt, name)(*args, device=dev)
            assert out.device == "cpu", name
            reference = getattr(torch, name)(*[torch.ones(2, 3) if isinstance(a, lt.Tensor) else a for a in args],
                                             device="cpu")
            assert tuple(out.shape) == tuple(reference.shape), name
            assert str(out.dtype).split(".")[-1] == str(reference.dtype).split(".")[-1], name
            if not name.startswith(UNSET_VALUES):
                np.testing.assert_allclose(out.numpy(), reference.numpy(), rtol=1e-6, err_msg=name)
    for method in ("new_zeros", "new_ones"):
        assert getattr(lt.ones(2), method)((3,), device="cpu").device == "cpu"
    assert lt.ones(2).new_full((3,), 4.0, device="cpu").numpy().tolist() == [4.0] * 3
    assert lt.tensor([1, 2], device="cpu").device == "cpu"
    assert lt.zeros(2, 3, device="cpu", requires_grad=True).requires_grad


def test_cuda_synchronize_evaluates_what_is_pending(backend):
    """torch.cuda.synchronize() in timing code: the pending work is done when it returns (a lazy
    program runs when evaluated), on every backend, with or without a GPU."""
    x = lt.tensor(np.arange(6, dtype=np.float32))
    y = (x * 2.0 + 1.0).relu()
    assert y.node.op != "buffer"
    lt.cuda.synchronize()
    assert y.node.op == "buffer"
    np.testing.assert_array_equal(y.numpy(), np.maximum(np.arange(6) * 2.0 + 1.0, 0))


def test_creation_on_unavailable_devices_raises():
    if lt.cuda.is_available():                      # (a GPU host: the device works instead)
        assert lt.cuda.device_count() == 1 and lt.zeros(3, device="cuda").device.type == "cuda"
    else:
        assert lt.cuda.device_count() == 0
        with pytest.raises(AssertionError, match="cuda"):
            lt.zeros(3, device="cuda")
    if not lt.backends.mps.is_available():
        with pytest.raises(RuntimeError, match="mps"):
            lt.ones(3, device="mps")


def test_to_forms():
    x = lt.tensor(np.arange(6, dtype=np.float32).reshape(2, 3))
    assert x.to(x.device) is x and x.to("cpu") is x and x.cpu() is x and x.to(lt.device("cpu")) is x
    assert x.to(lt.float32) is x and x.to("cpu", lt.float32) is x
    y = x.to("cpu", lt.float16)
    assert y.dtype is lt.float16 and y is not x
    z = x.to(dtype=lt.int64, device="cpu")
    assert z.dtype is lt.int64
    np.testing.assert_array_equal(z.numpy(), np.arange(6).reshape(2, 3))
    w = x.to(lt.ones(1, dtype=lt.int32))                  # to(other): other's device and dtype
    assert w.dtype is lt.int32
    c = x.to("cpu", copy=True)
    assert c is not x
    np.testing.assert_array_equal(c.numpy(), x.numpy())
    assert x.to("cpu", non_blocking=True) is x
    if not lt.cuda.is_available():
        with pytest.raises(AssertionError, match="cuda"):
            x.cuda()
    with pytest.raises(TypeError, match="unexpected keyword"):
        x.to("cpu", colour="red")


def test_device_selection_is_process_wide(host_backend):
    lt.set_default_device("cpu")
    assert lt.get_backend() == host_backend            # a host backend stays behind "cpu"
    lt.set_default_device(None)
    assert lt.get_backend() == host_backend


def test_script_device_pattern_runs(host_backend):
    device = "cuda" if lt.cuda.is_available() else "mps" if lt.backends.mps.is_available() else "cpu"
    model = lt.nn.Sequential(lt.nn.Linear(4, 3), lt.nn.ReLU()).to(device)
    x = lt.randn(2, 4).to(device)
    out = model(x)
    kind = lt.device(device).type                 # (torch: cuda:0 != "cuda"; compare the type)
    assert out.device.type == kind and tuple(out.shape) == (2, 3)
    assert model[0].weight.device.type == kind
    assert lt.arange(3, device=x.device).device == x.device


def test_backend_flags_that_scripts_set(monkeypatch):
    assert lt.backends.cudnn.is_available() is False
    # nanoGPT's train.py sets these two (what they do: tests/test_tf32.py); put back afterwards
    monkeypatch.setattr(lt.backends.cuda.matmul, "allow_tf32", True)
    monkeypatch.setattr(lt.backends.cudnn, "allow_tf32", True)
    assert lt.backends.cuda.matmul.allow_tf32 is True and lt.get_float32_matmul_precision() == "high"
    assert lt.backends.cuda.is_built() == lt.cuda.is_available()
    with pytest.raises(AttributeError, match="lazytorch.backends' has no attribute 'xla'"):
        lt.backends.xla

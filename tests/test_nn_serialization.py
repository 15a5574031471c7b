"""lazytorch.save / lazytorch.load: state dicts in safetensors (the safetensors package) and .npz,
read back by torch's and numpy's own readers, and loaded into modules."""
from __future__ import annotations

import numpy as np
import pytest
import safetensors.torch
import torch

import lazytorch as lt


def _state() -> dict:
    rng = np.random.default_rng(0)
    return {"w": lt.tensor(rng.standard_normal((3, 4)).astype(np.float32)) * 2,      # pending: evaluated on save
            "i": lt.arange(5), "h": lt.tensor(np.float16(2.5)), "e": lt.zeros(0, 3, dtype=lt.float64),
            "b": lt.tensor([True, False]), "np": np.arange(4, dtype=np.int32)}


def _bf16_state() -> dict:
    return {"bf": lt.tensor([1.0, -3.0, 0.1], dtype=lt.bfloat16), "w": lt.ones(2, 3) / 3, "i": lt.arange(3),
            "b": lt.tensor([True]), "np": np.arange(4, dtype=np.int32)}


@pytest.mark.parametrize("suffix", [".safetensors", ".npz"])
@pytest.mark.parametrize("make", [_state, _bf16_state])
def test_round_trip_keeps_values_and_dtypes(tmp_path, suffix, make):
    state = make()
    path = tmp_path / f"weights{suffix}"
    lt.save(state, path)
    got = lt.load(path)
    assert set(got) == set(state)
    for key, value in state.items():
        expected = value if isinstance(value, np.ndarray) else value.numpy()
        assert got[key].dtype is (lt.int32 if key == "np" else value.dtype), key
        assert tuple(got[key].shape) == expected.shape, key
        np.testing.assert_array_equal(got[key].numpy(), expected, err_msg=key)


def test_files_are_readable_by_torch_and_numpy(tmp_path):
    state = {**_state(), **_bf16_state()}
    state.pop("e")
    lt.save(state, tmp_path / "w.safetensors")
    theirs = safetensors.torch.load_file(str(tmp_path / "w.safetensors"))
    assert theirs["bf"].dtype == torch.bfloat16 and theirs["i"].dtype == torch.int64
    np.testing.assert_array_equal(theirs["bf"].float().numpy(), state["bf"].numpy())
    np.testing.assert_array_equal(theirs["w"].numpy(), state["w"].numpy())
    no_bf16 = {k: v for k, v in state.items() if k != "bf"}
    lt.save(no_bf16, tmp_path / "plain.safetensors")            # written by safetensors' numpy API
    assert set(safetensors.torch.load_file(str(tmp_path / "plain.safetensors"))) == set(no_bf16)
    lt.save(state, tmp_path / "w.npz")
    with np.load(tmp_path / "w.npz") as z:
        np.testing.assert_array_equal(z["w"], state["w"].numpy())


def test_module_state_dict_round_trip_and_torch_checkpoint(tmp_path):
    torch.manual_seed(0)
    tnet = torch.nn.Sequential(torch.nn.Linear(4, 3), torch.nn.BatchNorm1d(3))
    safetensors.torch.save_file(tnet.state_dict(), str(tmp_path / "torch.safetensors"))
    lnet = lt.nn.Sequential(lt.nn.Linear(4, 3), lt.nn.BatchNorm1d(3))
    lnet.load_state_dict(lt.load(tmp_path / "torch.safetensors"))            # a torch checkpoint
    for key, value in tnet.state_dict().items():
        np.testing.assert_array_equal(lnet.state_dict()[key].numpy(), value.numpy())
    lt.save(lnet.state_dict(), tmp_path / "lt.safetensors")
    other = lt.nn.Sequential(lt.nn.Linear(4, 3), lt.nn.BatchNorm1d(3))
    other.load_state_dict(lt.load(tmp_path / "lt.safetensors", map_location="cpu"))
    tnet.load_state_dict(safetensors.torch.load_file(str(tmp_path / "lt.safetensors")))
    x = np.random.default_rng(1).standard_normal((2, 4)).astype(np.float32)
    tnet.eval(), other.eval()
    with torch.no_grad():
        np.testing.assert_allclose(other(lt.tensor(x)).numpy(), tnet(torch.from_numpy(x)).numpy(), rtol=1e-6)


def test_bad_input_is_reported(tmp_path):
    with pytest.raises(TypeError, match="dict of tensors"):
        lt.save([lt.ones(2)], tmp_path / "x.safetensors")
    with pytest.raises(TypeError, match="keys must be strings"):
        lt.save({1: lt.ones(2)}, tmp_path / "x.npz")
    with pytest.raises(NotImplementedError, match="float64"):
        lt.save({**_bf16_state(), "d": lt.zeros(2, dtype=lt.float64)}, tmp_path / "x.safetensors")
    with pytest.raises(FileNotFoundError):
        lt.load(tmp_path / "missing.safetensors")

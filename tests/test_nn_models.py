"""Public PyTorch model files, kept verbatim under tests/models/, run with `import torch` and with
lazytorch substituted on their import lines (the tests count the lines that differ), with the
lazytorch model's weights loaded from the torch model's state_dict() (torch tensors, straight in).

Tolerances (float32 throughout): nanoGPT logits and loss rtol 1e-4 / atol 1e-5; the MNIST Net's
log-probabilities and ResNet-18's logits rtol 1e-4 / atol 1e-4 (deeper sums of products)."""
from __future__ import annotations

import re
import sys
import types
from pathlib import Path

import numpy as np
import pytest
import torch

import lazytorch as lt
from conftest import BACKENDS

MODELS = Path(__file__).parent / "models"


@pytest.fixture(params=[b for b in ("cpu", "metal-emu") if b in BACKENDS])    # LAZYTORCH_TEST_BACKENDS narrows
def backend_name(request):
    previous = lt.get_backend()
    lt.set_backend(request.param)
    yield request.param
    lt.set_backend(previous)

# torch import line -> the same import of lazytorch
_IMPORT = re.compile(r"^(\s*)(import|from) torch(\S*)(.*)$")


def swap_imports(text: str) -> str:
    """Each `import torch...` / `from torch... import` line rewritten to import lazytorch under the
    same names; every other line is left as it is."""
    out = []
    for line in text.splitlines():
        m = _IMPORT.match(line)
        if m:
            indent, kind, sub, rest = m.groups()
            if kind == "import" and sub == "" and rest == "":
                line = f"{indent}import lazytorch as torch"
            else:
                line = f"{indent}{kind} lazytorch{sub}{rest}"
        out.append(line)
    return "\n".join(out) + "\n"


def changed_lines(a: str, b: str) -> int:
    la, lb = a.splitlines(), b.splitlines()
    assert len(la) == len(lb)
    return sum(x != y for x, y in zip(la, lb))


def exec_module(name: str, text: str, path: Path) -> types.ModuleType:
    module = types.ModuleType(name)
    module.__file__ = str(path)
    sys.modules[name] = module              # dataclasses look their module up while the class is made
    try:
        exec(compile(text, str(path), "exec"), module.__dict__)
    finally:
        del sys.modules[name]
    return module


def load_pair(filename: str, prepare=lambda text: text, expected_changes: int = 0):
    """The model file executed as written (torch) and with lazytorch's imports; `prepare` edits both
    texts the same way (stubbing imports of packages the test machine lacks)."""
    path = MODELS / filename
    original = prepare(path.read_text())
    swapped = swap_imports(original)
    assert changed_lines(original, swapped) == expected_changes
    return exec_module(f"{path.stem}_torch", original, path), exec_module(f"{path.stem}_lazytorch", swapped, path)


def copy_weights(torch_model, lt_model) -> None:
    result = lt_model.load_state_dict(torch_model.state_dict())
    assert result.missing_keys == [] and result.unexpected_keys == []
    assert list(lt_model.state_dict()) == list(torch_model.state_dict())


# ---------------------------------------------------------------- nanoGPT
@pytest.fixture(scope="module")
def nanogpt():
    tmod, lmod = load_pair("nanogpt_model.py", expected_changes=3)
    torch.manual_seed(0)
    cfg = dict(block_size=16, vocab_size=96, n_layer=2, n_head=4, n_embd=32, dropout=0.1, bias=True)
    tmodel = tmod.GPT(tmod.GPTConfig(**cfg)).eval()
    lmodel = lmod.GPT(lmod.GPTConfig(**cfg)).eval()
    copy_weights(tmodel, lmodel)
    return tmodel, lmodel


def test_nanogpt_logits_and_loss(nanogpt, backend_name):
    tmodel, lmodel = nanogpt
    idx = np.random.default_rng(1).integers(0, 96, size=(2, 12))
    targets = np.random.default_rng(2).integers(0, 96, size=(2, 12))
    targets[0, :3] = -1                                   # nanoGPT's ignore_index
    with torch.no_grad():
        t_logits, t_loss = tmodel(torch.from_numpy(idx), torch.from_numpy(targets))
        t_last, t_none = tmodel(torch.from_numpy(idx))
    l_logits, l_loss = lmodel(lt.tensor(idx), lt.tensor(targets))
    l_last, l_none = lmodel(lt.tensor(idx))
    lt.eval(l_logits, l_loss, l_last)                      # one program for the three results
    assert t_none is None and l_none is None
    assert tuple(l_logits.shape) == (2, 12, 96) and tuple(l_last.shape) == (2, 1, 96)
    np.testing.assert_allclose(l_logits.numpy(), t_logits.numpy(), rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(l_last.numpy(), t_last.numpy(), rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(l_loss.item(), t_loss.item(), rtol=1e-4, atol=1e-5)


def test_nanogpt_structure(nanogpt):
    tmodel, lmodel = nanogpt
    assert [n for n, _ in lmodel.named_parameters()] == [n for n, _ in tmodel.named_parameters()]
    assert lmodel.get_num_params() == tmodel.get_num_params()
    assert lmodel.transformer.wte.weight is lmodel.lm_head.weight      # weight tying survives loading
    assert repr(lmodel) == repr(tmodel)


def test_nanogpt_trains_with_its_own_optimizer_setup():
    """Two AdamW steps set up by nanoGPT's configure_optimizers (weight-decay groups from
    named_parameters, lazytorch.optim.AdamW) match torch's.  On the reference backend: this checks
    the model file's training path, not code generation, which the tests above cover."""
    tmod, lmod = load_pair("nanogpt_model.py", expected_changes=3)
    torch.manual_seed(0)
    cfg = dict(block_size=16, vocab_size=96, n_layer=2, n_head=4, n_embd=32, dropout=0.0, bias=True)
    tmodel, lmodel = tmod.GPT(tmod.GPTConfig(**cfg)), lmod.GPT(lmod.GPTConfig(**cfg))
    copy_weights(tmodel, lmodel)
    topt = tmodel.configure_optimizers(0.1, 1e-3, (0.9, 0.95), "cpu")
    lopt = lmodel.configure_optimizers(0.1, 1e-3, (0.9, 0.95), "cpu")
    previous = lt.get_backend()
    lt.set_backend("reference")
    try:
        rng = np.random.default_rng(5)
        for _ in range(2):
            idx, targets = rng.integers(0, 96, (2, 12)), rng.integers(0, 96, (2, 12))
            _, t_loss = tmodel(torch.from_numpy(idx), torch.from_numpy(targets))
            topt.zero_grad(set_to_none=True)
            t_loss.backward()
            topt.step()
            _, l_loss = lmodel(lt.tensor(idx), lt.tensor(targets))
            lopt.zero_grad(set_to_none=True)
            l_loss.backward()
            lopt.step()
            np.testing.assert_allclose(l_loss.item(), t_loss.item(), rtol=1e-5)
        for (name, p), (_, q) in zip(tmodel.named_parameters(), lmodel.named_parameters()):
            np.testing.assert_allclose(q.numpy(), p.detach().numpy(), rtol=1e-4, atol=1e-5, err_msg=name)
    finally:
        lt.set_backend(previous)


# ---------------------------------------------------------------- MNIST Net (pytorch/examples)
def _mnist_prepare(text: str) -> str:
    """Keep the imports and the Net class; stub the imports of torchvision and torch.optim, which the
    Net does not use (the training loop below it is not run)."""
    text = text[:text.index("\ndef train(")]
    stubs = {"import torch.optim as optim": "optim = None",
             "from torchvision import datasets, transforms": "datasets = transforms = None",
             "from torch.optim.lr_scheduler import StepLR": "StepLR = None"}
    return "\n".join(stubs.get(line, line) for line in text.splitlines()) + "\n"


def test_mnist_net(backend_name):
    tmod, lmod = load_pair("mnist_main.py", _mnist_prepare, expected_changes=3)
    torch.manual_seed(0)
    tnet, lnet = tmod.Net().eval(), lmod.Net().eval()
    copy_weights(tnet, lnet)
    x = np.random.default_rng(3).standard_normal((2, 1, 28, 28)).astype(np.float32)
    with torch.no_grad():
        expected = tnet(torch.from_numpy(x)).numpy()
    got = lnet(lt.tensor(x)).numpy()
    np.testing.assert_allclose(got, expected, rtol=1e-4, atol=1e-4)


# ---------------------------------------------------------------- ResNet-18 (torchvision)
def _resnet_prepare(text: str) -> str:
    return text.replace("from .utils import load_state_dict_from_url", "load_state_dict_from_url = None")


def test_resnet18(backend_name):
    tmod, lmod = load_pair("resnet.py", _resnet_prepare, expected_changes=1)
    torch.manual_seed(0)
    tnet, lnet = tmod.resnet18(num_classes=10), lmod.resnet18(num_classes=10)
    # give BatchNorm non-trivial statistics and affine terms, then compare in eval mode
    with torch.no_grad():
        for m in tnet.modules():
            if isinstance(m, torch.nn.BatchNorm2d):
                m.running_mean.uniform_(-0.1, 0.1)
                m.running_var.uniform_(0.5, 1.5)
                m.weight.uniform_(0.5, 1.5)
                m.bias.uniform_(-0.1, 0.1)
    tnet.eval()
    lnet.eval()
    copy_weights(tnet, lnet)
    assert repr(lnet) == repr(tnet)
    x = np.random.default_rng(4).standard_normal((1, 3, 32, 32)).astype(np.float32)
    with torch.no_grad():
        expected = tnet(torch.from_numpy(x)).numpy()
    got = lnet(lt.tensor(x)).numpy()
    np.testing.assert_allclose(got, expected, rtol=1e-4, atol=1e-4)

"""Stress generators for the user layer: random differentiable programs with their backward pass,
and small nn modules run forward, backward and through a few optimizer steps.

Both follow stress.py's contract: a generator draws, from a seed, a `Case` whose `run(m, scalars,
data)` is written once against a module `m` (lazytorch or torch) and returns the values to compare
(outputs, losses, gradients, parameters, running statistics).  Parameters come from `data` (the
torch module's own initialisation, drawn once per seed), so both libraries start from the same
weights; Python scalars (input scales, learning rates) come from `scalars`, so a rerun with other
scalars must reuse the compiled programs and still agree with torch.
"""
from __future__ import annotations

import random

import numpy as np
import torch

from .case import Case

# ---------------------------------------------------------------- differentiable programs

# unary steps: (name, f(m, y, scalar)); all smooth on normal data (no ties, no kinks at 0 except
# relu/abs, which random floats never hit exactly)
UNARY = [
    ("tanh", lambda m, y, s: m.tanh(y)), ("sigmoid", lambda m, y, s: m.sigmoid(y) * s),
    ("square", lambda m, y, s: y * y), ("exp", lambda m, y, s: m.exp(y * 0.3)),
    ("gelu", lambda m, y, s: m.nn.functional.gelu(y)), ("silu", lambda m, y, s: m.nn.functional.silu(y)),
    ("relu", lambda m, y, s: m.relu(y) + y * s), ("sin", lambda m, y, s: m.sin(y)),
    ("log", lambda m, y, s: m.log(y.abs() + 1)), ("sqrt", lambda m, y, s: m.sqrt(y * y + s * s + 0.1)),
    ("pow", lambda m, y, s: (y.abs() + 0.5) ** 1.5), ("rsub", lambda m, y, s: s - y),
    ("rdiv", lambda m, y, s: s / (y * y + 1)), ("clamp", lambda m, y, s: y.clamp(-s, s)),
    ("softmax", lambda m, y, s: m.softmax(y * s, -1)), ("log_softmax", lambda m, y, s: m.log_softmax(y, -1)),
    ("layer_norm", lambda m, y, s: m.nn.functional.layer_norm(y, (y.shape[-1],))),
    ("logsumexp", lambda m, y, s: m.logsumexp(y, -1, keepdim=True) - y),
    ("centre", lambda m, y, s: y - y.mean(-1, keepdim=True)), ("var", lambda m, y, s: y.var(-1, keepdim=True) + y),
    ("amax", lambda m, y, s: y.amax(-1, keepdim=True) * s + y), ("sum0", lambda m, y, s: y.sum(0, keepdim=True) + y),
    ("transpose", lambda m, y, s: y.t().contiguous().t()), ("flip", lambda m, y, s: y.flip(-1)),
    ("slice_cat", lambda m, y, s: m.cat([y[:, 1:], y[:, :1] * s], 1)),
    ("reshape", lambda m, y, s: y.reshape(-1).reshape(y.shape)), ("cumsum", lambda m, y, s: y.cumsum(-1) * 0.3),
]
BINARY = [
    ("add", lambda m, a, b, s: a + b * s), ("mul", lambda m, a, b, s: a * b),
    ("sub", lambda m, a, b, s: a - b), ("div", lambda m, a, b, s: a / (b * b + 1)),
    ("where", lambda m, a, b, s: m.where(a > b, a, b * s)), ("maximum", lambda m, a, b, s: m.maximum(a, b)),
    ("matmul", lambda m, a, b, s: (a @ b.t()) @ b * 0.2), ("stack_sum", lambda m, a, b, s: m.stack([a, b]).sum(0)),
]
LOSSES = [
    ("dot", lambda m, y, c: (y * c).sum()), ("mean", lambda m, y, c: (y * c).mean()),
    ("mse", lambda m, y, c: m.nn.functional.mse_loss(y, c)),
    ("l1", lambda m, y, c: m.nn.functional.smooth_l1_loss(y, c)),
]


def backward(rng: random.Random) -> Case:
    """2-5 leaves requiring grad, 2-12 steps, a loss; compare the loss and every leaf's gradient."""
    k = rng.randint(2, 5)
    shape = (rng.choice([1, 3, 4]), rng.choice([2, 5, 8, 17]))
    steps = []
    for _ in range(rng.randint(2, 12)):
        n = k + len(steps)
        if rng.random() < 0.4:
            name, f = rng.choice(BINARY)
            a, b = rng.randrange(n), rng.randrange(n)
        else:
            name, f = rng.choice(UNARY)
            a, b = (n - 1 if rng.random() < 0.7 else rng.randrange(n)), None
        steps.append((name, f, a, b))
    loss_name, loss = rng.choice(LOSSES)
    scalars = [round(rng.uniform(0.3, 1.5), 3) for _ in steps]
    g = np.random.default_rng(rng.randrange(1 << 30))
    data = [g.standard_normal(shape).astype(np.float32) for _ in range(k + 1)]   # leaves + cotangent

    def run(m, s, d):
        leaves = [m.tensor(x, requires_grad=True) for x in d[:k]]
        vals = list(leaves)
        for (name, f, a, b), c in zip(steps, s):
            vals.append(f(m, vals[a], c) if b is None else f(m, vals[a], vals[b], c))
        out = loss(m, vals[-1], m.tensor(d[k]))
        out.backward()
        return [out] + [x.grad if x.grad is not None else m.zeros(x.shape) for x in leaves]
    kind = "backward:" + ",".join(name for name, *_ in steps) + ":" + loss_name
    # which pending tensors are alive (and get stored with an eval) depends on when Python collects
    # autograd cycles, so program boundaries can move between runs: values are checked, hits not
    return Case(kind, run, scalars, data, rtol=2e-3, atol=2e-4, expect_hit=False)


# ---------------------------------------------------------------- small modules

def _mlp(nn, rng):
    act = rng.choice(["GELU", "ReLU", "Tanh", "SiLU", "Sigmoid"])
    return lambda nn: nn.Sequential(nn.Linear(8, 16), getattr(nn, act)(), nn.Linear(16, 4)), (6, 8), "float"


def _norm_mlp(nn, rng):
    norm = rng.choice(["LayerNorm", "RMSNorm"])
    return (lambda nn: nn.Sequential(getattr(nn, norm)(8), nn.Linear(8, 8), nn.Tanh(), nn.Dropout(0.0),
                                     nn.Linear(8, 3)), (2, 5, 8), "float")


def _conv1d(nn, rng):
    return (lambda nn: nn.Sequential(nn.Conv1d(3, 4, 3, padding=1), nn.ReLU(), nn.Flatten(), nn.Linear(40, 2)),
            (2, 3, 10), "float")


def _conv2d_bn(nn, rng):
    stride = rng.choice([1, 2])
    return (lambda nn: nn.Sequential(nn.Conv2d(2, 3, 3, stride=stride, padding=1), nn.BatchNorm2d(3), nn.GELU(),
                                     nn.AvgPool2d(2)), (2, 2, 6, 6), "float")


def _bn1d(nn, rng):
    return lambda nn: nn.Sequential(nn.Linear(5, 6), nn.BatchNorm1d(6), nn.ReLU()), (7, 5), "float"


def _embedding(nn, rng):
    return (lambda nn: nn.Sequential(nn.Embedding(11, 6), nn.LayerNorm(6), nn.Linear(6, 5)), (3, 4), "index")


def _attention(nn, rng):
    return (lambda nn: nn.MultiheadAttention(8, 2, batch_first=True), (2, 5, 8), "float")


def _groupnorm_pool(nn, rng):
    return (lambda nn: nn.Sequential(nn.Conv2d(4, 4, 1), nn.GroupNorm(2, 4), nn.MaxPool2d(2), nn.Flatten()),
            (2, 4, 4, 4), "float")


MODULES = {"mlp": _mlp, "norm_mlp": _norm_mlp, "conv1d": _conv1d, "conv2d_bn": _conv2d_bn, "bn1d": _bn1d,
           "embedding": _embedding, "attention": _attention, "groupnorm_pool": _groupnorm_pool}
# The adaptive optimizers divide by sqrt(v) + eps: a gradient that is zero in exact arithmetic
# (a bias before a batch norm, a constant direction) is rounding noise in both libraries, and with
# torch's eps (1e-8) its sign alone would decide an lr-sized step.  eps=1e-3 keeps such steps small.
OPTIMIZERS = {
    "SGD": lambda optim, params, lr: optim.SGD(params, lr=lr, momentum=0.9),
    "Adam": lambda optim, params, lr: optim.Adam(params, lr=lr * 0.1, eps=1e-3),
    "AdamW": lambda optim, params, lr: optim.AdamW(params, lr=lr * 0.1, weight_decay=0.01, eps=1e-3),
    "RMSprop": lambda optim, params, lr: optim.RMSprop(params, lr=lr * 0.01, eps=1e-3),
}


def _forward(mod, m, x):
    out = mod(x, x, x) if isinstance(mod, m.nn.MultiheadAttention) else mod(x)
    return out[0] if isinstance(out, tuple) else out


def module(rng: random.Random) -> Case:
    """A small module (weights from torch's initialisation) run forward, forward+backward, or
    through 3 optimizer steps, in train or eval mode; compare outputs, gradients, parameters and
    running statistics."""
    name = rng.choice(list(MODULES))
    build, shape, kind = MODULES[name](torch.nn, rng)
    mode = rng.choice(["forward", "backward", "train"])
    training = rng.random() < 0.6
    opt_name = rng.choice(list(OPTIMIZERS))
    torch.manual_seed(rng.randrange(1 << 30))
    names, tensors = zip(*build(torch.nn).state_dict().items())
    state = [t.detach().numpy().copy() for t in tensors]
    g = np.random.default_rng(rng.randrange(1 << 30))
    x = g.integers(0, 11, shape).astype(np.int64) if kind == "index" else g.standard_normal(shape).astype(np.float32)
    scalars = [round(rng.uniform(0.5, 1.5), 3), round(rng.uniform(0.01, 0.1), 3)]   # input scale, lr

    def run(m, s, d):
        mod = build(m.nn)
        mod.load_state_dict({n: m.tensor(a) for n, a in zip(names, d[1:])})
        mod.train(training)
        x = m.tensor(d[0])
        inp = x if kind == "index" else x * s[0]
        if mode == "forward":
            return [_forward(mod, m, inp)] + [b for b in mod.buffers() if b.dtype.is_floating_point]
        if mode == "backward":
            out = _forward(mod, m, inp)
            (out * out).mean().backward()
            return [out] + [p.grad for p in mod.parameters() if p.grad is not None]
        opt = OPTIMIZERS[opt_name](m.optim, mod.parameters(), s[1])
        losses = []
        for _ in range(3):
            opt.zero_grad()
            loss = (_forward(mod, m, inp) ** 2).mean()
            loss.backward()
            opt.step()
            losses.append(loss.item())
        return losses + list(mod.parameters())
    return Case(f"module:{name}:{mode}:{'train' if training else 'eval'}" + (f":{opt_name}" if mode == "train" else ""),
                run, scalars, [x] + state, rtol=2e-3, atol=2e-4, expect_hit=False)


GENERATORS = {"backward": backward, "module": module}

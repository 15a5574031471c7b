"""The workload table: one Workload per row, data rather than branches.

A workload's `math(ops, *inputs)` is written once against an ops table (frameworks.py), so every
framework runs the same expression; the reference is the same math in numpy float64.  `bytes_moved`
(the bytes that must cross memory at least once: every input read once, every output written
once) gives the ideal time against the measured copy bandwidth; `flops` gives GFLOP/s, and `roof`
is the matmul-only part of the math, timed on the peers as the compute limit.

`mode` says how the harness runs the row: "timed" (check, then time in this process),
"cold" (first call in fresh subprocesses, of the workload named by `of`), "model" (a real model's
forward: `run(module_name)` returns its forward written against that tensor module, lazytorch or
torch, taking the `inputs` arrays; torch eager's result is the reference it is checked against).
"""
from __future__ import annotations

import functools
import importlib
import importlib.util
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

import numpy as np

F32 = 4  # bytes per float32 element

Inputs = Callable[[np.random.Generator, dict], list[np.ndarray]]


@dataclass
class Workload:
    name: str
    title: str
    sizes: dict
    quick_sizes: dict
    inputs: Inputs | None = None
    math: Callable | None = None
    bytes_moved: Callable[[dict], int] | None = None
    bytes_formula: str = ""
    flops: Callable[[dict], int] | None = None
    flops_formula: str = ""
    roof: Callable | None = None          # matmul-only math: the compute limit for `flops` rows
    per_call_us: bool = False             # report microseconds per call (overhead rows)
    tol: float = 1e-4                     # allclose rtol, and atol as a fraction of max|reference|
    mode: str = "timed"
    of: str = ""                          # the timed workload a "cold" row starts
    run: Callable[[str], Callable] | None = None   # "model" rows: module name -> forward(*inputs)
    ratios_to: tuple[str, ...] = ()       # frameworks whose median each row's median is divided by
    missing: Callable[[], str | None] = lambda: None   # why the row can't run yet, or None
    seed: int = 0

    def size(self, quick: bool) -> dict:
        return self.quick_sizes if quick else self.sizes


def randn(rng: np.random.Generator, *shape: int, scale: float = 1.0) -> np.ndarray:
    return (rng.standard_normal(shape) * scale).astype(np.float32)


def w1_math(o, a, b, c):
    return o.gelu_tanh(a * b + c) * o.sigmoid(a) - o.tanh(b)


def w7_math(o, x):
    # 20 pointwise ops with Python scalars; the constants keep values bounded across the chain.
    for _ in range(5):
        x = ((x * 1.01 + 0.5) - 0.25) / 1.02
    return x


def mlp_inputs(rng, s):
    m, k, n = s["M"], s["K"], s["N"]
    return [randn(rng, m, k), randn(rng, k, n, scale=k ** -0.5), randn(rng, n, scale=0.1),
            randn(rng, n, k, scale=n ** -0.5), randn(rng, k, scale=0.1)]


def attention_inputs(rng, s):
    shape = (s["B"], s["H"], s["S"], s["D"])
    return [randn(rng, *shape) for _ in range(3)]


def attention_flops(s):
    return 2 * (2 * s["B"] * s["H"] * s["S"] * s["S"] * s["D"])


EXAMPLES = Path(__file__).resolve().parent.parent / "examples"
MODEL_MODULES = ("lazytorch", "torch")   # the tensor modules a model's torch code runs on


def _packages_missing(*packages: str) -> Callable[[], str | None]:
    def missing() -> str | None:
        absent = [p for p in packages if importlib.util.find_spec(p) is None]
        return f"needs the Python package(s) {', '.join(absent)} (pip install -e '.[test]')" if absent else None
    return missing


@functools.lru_cache(maxsize=None)
def _minilm() -> tuple[Any, Any]:
    """examples/minilm.py and its loaded model (config, weights, tokenizer), loaded once."""
    sys.path.insert(0, str(EXAMPLES))
    import minilm
    return minilm, minilm.load_minilm()


def minilm_inputs(rng, s) -> list[np.ndarray]:
    """input_ids, token_type_ids, attention_mask of the example's first `sentences` sentences
    (padded to the longest), then every weight in the checkpoint's order."""
    example, model = _minilm()
    tokens = example.tokenize(model, example.SENTENCES[:s["sentences"]])
    return [tokens["input_ids"], tokens["token_type_ids"], tokens["attention_mask"], *model.weights.values()]


def minilm_run(module_name: str) -> Callable:
    """The example's `encode(torch, ...)` on `module_name`, taking minilm_inputs' arrays."""
    if module_name not in MODEL_MODULES:
        raise ValueError(f"W9 runs the model's torch code on {' or '.join(MODEL_MODULES)}, not {module_name}")
    module = importlib.import_module(module_name)
    example, model = _minilm()
    names = list(model.weights)

    def forward(input_ids, token_type_ids, attention_mask, *weights):
        return example.encode(module, dict(zip(names, weights)), input_ids, token_type_ids,
                              attention_mask, model.config)
    return forward


def _gpt_block():
    sys.path.insert(0, str(EXAMPLES))
    import gpt_block
    return gpt_block


def gpt_block_inputs(rng, s) -> list[np.ndarray]:
    """x, then the block's weights in random_weights' order (the README demo's data)."""
    example = _gpt_block()
    x = example.random_input(s["batch"], s["seq"], s["width"])
    return [x, *example.random_weights(s["width"]).values()]


def gpt_block_run(module_name: str) -> Callable:
    """examples/gpt_block.py's `block(torch, x, w, n_head)` on `module_name`."""
    if module_name not in MODEL_MODULES:
        raise ValueError(f"W11 runs the block's torch code on {' or '.join(MODEL_MODULES)}, not {module_name}")
    module = importlib.import_module(module_name)
    example = _gpt_block()
    names = list(example.random_weights(8))
    n_head = example.DEMO_SIZE["n_head"]

    def forward(x, *weights):
        return example.block(module, x, dict(zip(names, weights)), n_head)
    return forward


def _train_gpt():
    """examples/train_gpt.py (the model, its data and its training step)."""
    sys.path.insert(0, str(EXAMPLES))
    import train_gpt
    return train_gpt


def train_inputs(rng, s) -> list[np.ndarray]:
    """One batch of characters (inputs and next-character targets) from the example's text."""
    tg = _train_gpt()
    data, _ = tg.load_text()
    cfg = tg.Config(block=s["block"])
    return list(next(tg.batches(data, cfg, s["batch"], seed=1)))


def train_run(module_name: str) -> Callable:
    """One training step (forward, backward, clip, AdamW) of the example's GPT per call on
    `module_name`; each call continues training the same model, from the same initial weights."""
    if module_name not in MODEL_MODULES:
        raise ValueError(f"W10 runs the model's torch code on {' or '.join(MODEL_MODULES)}, not {module_name}")
    module = importlib.import_module(module_name)
    tg = _train_gpt()
    _, chars = tg.load_text()
    # made before the first call (a compiled step then captures the model and optimizer instead of
    # building them inside its trace); the position table covers the largest block of W10's sizes
    block = max(s["block"] for s in (BY_NAME["W10"].sizes, BY_NAME["W10"].quick_sizes))
    t = tg.Trainer(module, tg.Config(vocab=len(chars), block=block), 10 ** 6, 3e-3)

    placed = []

    def step(x, y):
        if not placed and module_name == "torch":   # (built on the CPU; a GPU column's batches are
            t.model.to(x.device)                    #  on the GPU: the parameters follow, in place)
            placed.append(True)
        _, loss = t.model(x, y)
        t.opt.zero_grad(set_to_none=True)
        loss.backward()
        module.nn.utils.clip_grad_norm_(t.model.parameters(), 1.0)
        t.opt.step()
        return loss.detach()
    return step


WORKLOADS: list[Workload] = [
    Workload(
        "W1", "pointwise chain gelu_tanh(a*b+c)*sigmoid(a)-tanh(b)",
        {"N": 2 ** 24}, {"N": 2 ** 14},
        inputs=lambda rng, s: [randn(rng, s["N"]) for _ in range(3)],
        math=w1_math,
        bytes_moved=lambda s: 4 * s["N"] * F32, bytes_formula="4·N·4 (read a, b, c; write out)"),
    Workload(
        "W2", "bias + activation relu(x+bias)*scale",
        {"M": 4096, "N": 4096}, {"M": 64, "N": 128},
        inputs=lambda rng, s: [randn(rng, s["M"], s["N"]), randn(rng, s["N"]), randn(rng, s["M"], 1)],
        math=lambda o, x, bias, scale: o.relu(x + bias) * scale,
        bytes_moved=lambda s: (2 * s["M"] * s["N"] + s["N"] + s["M"]) * F32,
        bytes_formula="(2·M·N + N + M)·4 (read x, bias, scale; write out)"),
    Workload(
        "W3", "softmax over the last dim",
        {"M": 4096, "N": 4096}, {"M": 64, "N": 128},
        inputs=lambda rng, s: [randn(rng, s["M"], s["N"])],
        math=lambda o, x: o.softmax(x),
        bytes_moved=lambda s: 2 * s["M"] * s["N"] * F32, bytes_formula="2·M·N·4 (read x; write out)"),
    Workload(
        "W4", "layer_norm over the last dim, with weight and bias",
        {"M": 8192, "N": 1024}, {"M": 64, "N": 128},
        inputs=lambda rng, s: [randn(rng, s["M"], s["N"]), randn(rng, s["N"]), randn(rng, s["N"])],
        math=lambda o, x, w, b: o.layer_norm(x, w, b),
        bytes_moved=lambda s: (2 * s["M"] * s["N"] + 2 * s["N"]) * F32,
        bytes_formula="(2·M·N + 2·N)·4 (read x, weight, bias; write out)"),
    Workload(
        "W5", "MLP gelu_tanh(x@W1+b1)@W2+b2",
        {"M": 512, "K": 1024, "N": 4096}, {"M": 16, "K": 32, "N": 64},
        inputs=mlp_inputs,
        math=lambda o, x, w1, b1, w2, b2: o.gelu_tanh(x @ w1 + b1) @ w2 + b2,
        roof=lambda o, x, w1, b1, w2, b2: (x @ w1) @ w2,
        flops=lambda s: 2 * (2 * s["M"] * s["K"] * s["N"]), flops_formula="2·(2·M·K·N), two matmuls",
        tol=1e-3),
    Workload(
        "W6", "attention softmax(q@kᵀ/8)@v",
        {"B": 8, "H": 16, "S": 512, "D": 64}, {"B": 1, "H": 2, "S": 16, "D": 8},
        inputs=attention_inputs,
        math=lambda o, q, k, v: o.softmax(q @ o.t(k) / 8.0) @ v,
        roof=lambda o, q, k, v: (q @ o.t(k)) @ v,
        flops=attention_flops, flops_formula="2·(2·B·H·S·S·D), two batched matmuls",
        tol=1e-3),
    Workload(
        "W7", "overhead: 20 chained pointwise ops with scalars, build + eval per call",
        {"N": 1024}, {"N": 1024},
        inputs=lambda rng, s: [randn(rng, s["N"])],
        math=w7_math, per_call_us=True),
    Workload(
        "W8", "compile latency: first W1 evaluation in a fresh process, cold and warm disk cache",
        {}, {}, mode="cold", of="W1"),
    # A real model: all-MiniLM-L6-v2's pretrained forward from examples/minilm.py.  Embeddings
    # have unit length, so the default tol (1e-4) keeps each of the 384 components within 2e-4
    # of torch eager's: cosine >= 0.99999 per sentence.
    Workload(
        "W9", "model forward: all-MiniLM-L6-v2 sentence embeddings of the example's sentences",
        {"sentences": 5}, {"sentences": 2},
        inputs=minilm_inputs, run=minilm_run, mode="model", ratios_to=("torch", "torch.compile"),
        missing=_packages_missing("all_minilm_l6_v2", "tokenizers", "torch")),
    # Training: examples/train_gpt.py's 2-layer character GPT (n_embd 64), forward + backward +
    # gradient clipping + AdamW per call; the first call's loss is checked against torch eager's.
    Workload(
        "W10", "training step: forward + backward + AdamW of examples/train_gpt.py's GPT",
        {"batch": 8, "block": 64}, {"batch": 2, "block": 16},
        inputs=train_inputs, run=train_run, mode="model", ratios_to=("torch", "torch.compile"),
        missing=_packages_missing("torch")),
    # The README demo (examples/gpt_block.py): one GPT-2 block forward, random weights.
    Workload(
        "W11", "README demo: GPT-2 block forward (examples/gpt_block.py)",
        {"batch": 4, "seq": 64, "width": 256}, {"batch": 1, "seq": 8, "width": 32},
        inputs=gpt_block_inputs, run=gpt_block_run, mode="model", ratios_to=("torch", "torch.compile"),
        tol=1e-3, missing=_packages_missing("torch")),
]

BY_NAME = {w.name: w for w in WORKLOADS}


def make_inputs(w: Workload, quick: bool) -> list[np.ndarray]:
    """The workload's float32 inputs from its fixed seed."""
    return w.inputs(np.random.default_rng(w.seed), w.size(quick))

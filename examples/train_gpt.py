"""Train a small character-level GPT on Shakespeare, with lazytorch or with torch.

    python examples/train_gpt.py                  # lazytorch on its default backend
    python examples/train_gpt.py --lib torch      # the same code on torch eager
    python examples/train_gpt.py --compare        # both, from the same weights and batches

The model and the loop are ordinary PyTorch code (nn modules, AdamW, a cosine schedule, gradient
clipping) run on the module given as `torch`.  With lazytorch, forward, backward and the AdamW
update of a step compile into one fused program, which the graph cache replays from the second
step on; the script prints the loss, the time per step and the kernel count of one step (and of the
forward alone).  The text (examples/data/shakespeare.txt) is public domain.
"""
from __future__ import annotations

import argparse
import importlib
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np

DATA = Path(__file__).resolve().parent / "data" / "shakespeare.txt"


@dataclass
class Config:
    vocab: int = 65
    block: int = 64
    n_layer: int = 2
    n_head: int = 4
    n_embd: int = 64


def gpt(torch, cfg: Config):
    """A GPT-2 style decoder (pre-norm blocks, causal attention, tied embeddings) on `torch`."""
    nn, F = torch.nn, torch.nn.functional

    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.ln1, self.ln2 = nn.LayerNorm(cfg.n_embd), nn.LayerNorm(cfg.n_embd)
            self.attn = nn.Linear(cfg.n_embd, 3 * cfg.n_embd)
            self.proj = nn.Linear(cfg.n_embd, cfg.n_embd)
            self.fc = nn.Linear(cfg.n_embd, 4 * cfg.n_embd)
            self.fc2 = nn.Linear(4 * cfg.n_embd, cfg.n_embd)

        def forward(self, x):
            B, T, C = x.shape
            q, k, v = self.attn(self.ln1(x)).split(C, dim=2)
            q, k, v = (t.view(B, T, cfg.n_head, C // cfg.n_head).transpose(1, 2) for t in (q, k, v))
            y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
            x = x + self.proj(y.transpose(1, 2).contiguous().view(B, T, C))
            return x + self.fc2(F.gelu(self.fc(self.ln2(x))))

    class GPT(nn.Module):
        def __init__(self):
            super().__init__()
            self.wte = nn.Embedding(cfg.vocab, cfg.n_embd)
            self.wpe = nn.Embedding(cfg.block, cfg.n_embd)
            self.blocks = nn.ModuleList([Block() for _ in range(cfg.n_layer)])
            self.ln_f = nn.LayerNorm(cfg.n_embd)
            self.head = nn.Linear(cfg.n_embd, cfg.vocab, bias=False)
            self.head.weight = self.wte.weight                   # tied, as GPT-2's

        def forward(self, idx, targets):
            x = self.wte(idx) + self.wpe(torch.arange(idx.shape[1], device=idx.device))
            for block in self.blocks:
                x = block(x)
            logits = self.head(self.ln_f(x))
            return logits, F.cross_entropy(logits.view(-1, logits.shape[-1]), targets.view(-1))

    return GPT()


def initial_weights(model, seed: int) -> dict[str, np.ndarray]:
    """Weights drawn with numpy (so both libraries start from the same ones): N(0, 0.02) for
    matrices, ones for norm weights, zeros for biases."""
    rng = np.random.default_rng(seed)
    out = {}
    for name, p in model.named_parameters():
        shape = tuple(p.shape)
        if len(shape) >= 2:
            out[name] = (rng.standard_normal(shape) * 0.02).astype(np.float32)
        else:
            out[name] = np.ones(shape, np.float32) if name.split(".")[-2].startswith("ln") \
                else np.zeros(shape, np.float32)
    return out


def load_text() -> tuple[np.ndarray, list[str]]:
    text = DATA.read_text(encoding="utf-8")
    chars = sorted(set(text))
    index = {c: i for i, c in enumerate(chars)}
    return np.array([index[c] for c in text], dtype=np.int64), chars


def batches(data: np.ndarray, cfg: Config, batch: int, seed: int):
    rng = np.random.default_rng(seed)
    while True:
        start = rng.integers(0, len(data) - cfg.block - 1, batch)
        x = np.stack([data[s:s + cfg.block] for s in start])
        y = np.stack([data[s + 1:s + 1 + cfg.block] for s in start])
        yield x, y


class Trainer:
    """One library's model, AdamW, cosine schedule and step."""

    def __init__(self, torch, cfg: Config, steps: int, lr: float, weights: dict[str, np.ndarray] | None = None):
        self.torch = torch
        self.model = gpt(torch, cfg)
        weights = weights if weights is not None else initial_weights(self.model, 0)
        self.model.load_state_dict({k: torch.tensor(v) for k, v in weights.items()}, strict=False)
        self.opt = torch.optim.AdamW(self.model.parameters(), lr=lr, weight_decay=0.1)
        self.sched = torch.optim.lr_scheduler.CosineAnnealingLR(self.opt, T_max=steps, eta_min=lr / 10)

    def loss_and_backward(self, x: np.ndarray, y: np.ndarray):
        _, loss = self.model(self.torch.tensor(x), self.torch.tensor(y))
        self.opt.zero_grad(set_to_none=True)
        loss.backward()
        self.torch.nn.utils.clip_grad_norm_(self.model.parameters(), 1.0)
        return loss

    def step(self, x: np.ndarray, y: np.ndarray) -> float:
        loss = self.loss_and_backward(x, y)
        self.opt.step()
        self.sched.step()
        return loss.item()

    def kernel_counts(self, x: np.ndarray, y: np.ndarray) -> tuple[int, int]:
        """lazytorch only: launches of one whole training step, and of the forward alone."""
        lt = self.torch
        with lt.no_grad():
            _, fwd = self.model(lt.tensor(x), lt.tensor(y))
            forward = len(lt.kernel_plan(fwd).kernels)
        self.loss_and_backward(x, y)
        self.opt.lazy_step()
        step = len(lt.kernel_plan(*self.opt.step_tensors()).kernels)
        self.opt.materialize()
        self.sched.step()
        return step, forward


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--lib", default="lazytorch", choices=["lazytorch", "torch"])
    ap.add_argument("--compare", action="store_true", help="run torch too and print the relative loss difference")
    ap.add_argument("--steps", type=int, default=100)
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--block", type=int, default=64)
    ap.add_argument("--layers", type=int, default=2)
    ap.add_argument("--embd", type=int, default=64)
    ap.add_argument("--heads", type=int, default=4)
    ap.add_argument("--lr", type=float, default=3e-3)
    ap.add_argument("--backend", default=None, help="lazytorch backend (cpu, metal, cuda, metal-emu, reference)")
    args = ap.parse_args()

    data, chars = load_text()
    cfg = Config(len(chars), args.block, args.layers, args.heads, args.embd)
    torch = importlib.import_module(args.lib)
    if args.lib == "lazytorch" and args.backend:
        torch.set_backend(args.backend)
    trainer = Trainer(torch, cfg, args.steps, args.lr)
    peer = None
    if args.compare:
        import torch as real_torch
        weights = {k: v.numpy().copy() for k, v in trainer.model.state_dict().items()}
        peer = Trainer(real_torch, cfg, args.steps, args.lr, weights)
    n_params = sum(p.numel() for p in trainer.model.parameters())
    print(f"{args.lib}: {n_params} parameters, {len(data)} characters, vocab {cfg.vocab}, "
          f"batch {args.batch} x {cfg.block}")

    times = []
    for step, (x, y) in zip(range(args.steps), batches(data, cfg, args.batch, seed=1)):
        if args.lib == "lazytorch" and step == 3:
            kernels, forward = trainer.kernel_counts(x, y)
            print(f"kernels of one training step (forward + backward + AdamW): {kernels}; of the forward: {forward}")
            if peer is not None:
                peer.step(x, y)
            continue
        t0 = time.perf_counter()
        loss = trainer.step(x, y)
        times.append(time.perf_counter() - t0)
        line = f"step {step:4d}  loss {loss:.4f}  {times[-1] * 1e3:8.1f} ms"
        if peer is not None:
            ref = peer.step(x, y)
            line += f"  torch {ref:.4f}  rel diff {abs(loss - ref) / ref:.2e}"
        if step % 10 == 0 or step == args.steps - 1 or peer is not None:
            print(line)
    steady = times[3:] or times
    print(f"median ms/step after warm-up: {np.median(steady) * 1e3:.1f}  (first step {times[0] * 1e3:.0f} ms, "
          f"includes compiling)")
    if args.lib == "lazytorch":
        print(f"graph cache: {torch.cache_info()}")


if __name__ == "__main__":
    main()

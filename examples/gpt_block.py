"""A GPT-2-style decoder block, written once as ordinary PyTorch code, run with lazytorch.

    python examples/gpt_block.py          # the README's demo: kernel plan, check, speed

`block(torch, x, w, n_head)` takes the tensor module as a parameter, so the very same body runs
with `import torch` and with `import lazytorch` (tests/test_models.py runs both and compares).
Run as a script it needs only lazytorch and numpy: the check is against `block_float64`, the same
math in numpy float64.  LAZYTORCH_BACKEND picks the backend, as everywhere.
"""
from __future__ import annotations

import math
import statistics
import time

import numpy as np

# (batch, sequence length, model width, heads) of the demo
DEMO_SIZE = dict(batch=4, seq=64, width=256, n_head=8)
# nodes that are index arithmetic or constants inside a launch, left out of the plan summary
INLINED = {"view", "scalar", "param", "full", "iota"}


def block(torch, x, w: dict, n_head: int):
    """One pre-norm decoder block: x + attn(ln_1(x)), then + mlp(ln_2(.)); torch module `torch`."""
    F = torch.nn.functional
    B, T, C = x.shape
    h = F.layer_norm(x, (C,), w["ln_1.weight"], w["ln_1.bias"])
    q, k, v = F.linear(h, w["attn.c_attn.weight"], w["attn.c_attn.bias"]).split(C, dim=2)
    q = q.view(B, T, n_head, C // n_head).transpose(1, 2)            # (B, heads, T, head dim)
    k = k.view(B, T, n_head, C // n_head).transpose(1, 2)
    v = v.view(B, T, n_head, C // n_head).transpose(1, 2)
    att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(k.size(-1)))
    causal = torch.tril(torch.ones(T, T, dtype=torch.bool))
    att = att.masked_fill(~causal, float("-inf"))
    att = F.softmax(att, dim=-1)
    y = (att @ v).transpose(1, 2).contiguous().view(B, T, C)
    x = x + F.linear(y, w["attn.c_proj.weight"], w["attn.c_proj.bias"])
    h = F.layer_norm(x, (C,), w["ln_2.weight"], w["ln_2.bias"])
    h = F.gelu(F.linear(h, w["mlp.c_fc.weight"], w["mlp.c_fc.bias"]), approximate="tanh")
    return x + F.linear(h, w["mlp.c_proj.weight"], w["mlp.c_proj.bias"])


def random_weights(width: int, seed: int = 0) -> dict[str, np.ndarray]:
    """float32 weights in the nn.Linear layout (out_features, in_features), GPT-2's init scale."""
    rng = np.random.default_rng(seed)
    shapes = {
        "ln_1.weight": (width,), "ln_1.bias": (width,),
        "attn.c_attn.weight": (3 * width, width), "attn.c_attn.bias": (3 * width,),
        "attn.c_proj.weight": (width, width), "attn.c_proj.bias": (width,),
        "ln_2.weight": (width,), "ln_2.bias": (width,),
        "mlp.c_fc.weight": (4 * width, width), "mlp.c_fc.bias": (4 * width,),
        "mlp.c_proj.weight": (width, 4 * width), "mlp.c_proj.bias": (width,),
    }
    weights = {}
    for name, shape in shapes.items():
        if name.startswith("ln_"):         # norms near identity, but not exactly, to test them
            base = 1.0 if name.endswith("weight") else 0.0
            weights[name] = (base + 0.1 * rng.standard_normal(shape)).astype(np.float32)
        else:
            weights[name] = (0.02 * rng.standard_normal(shape)).astype(np.float32)
    return weights


def random_input(batch: int, seq: int, width: int, seed: int = 1) -> np.ndarray:
    return np.random.default_rng(seed).standard_normal((batch, seq, width)).astype(np.float32)


def block_float64(x: np.ndarray, w: dict, n_head: int) -> np.ndarray:
    """The same block in numpy float64: the demo's oracle when torch isn't installed."""
    w = {k: v.astype(np.float64) for k, v in w.items()}
    x = x.astype(np.float64)
    B, T, C = x.shape

    def layer_norm(a, g, b, eps=1e-5):
        mu = a.mean(-1, keepdims=True)
        return (a - mu) / np.sqrt(((a - mu) ** 2).mean(-1, keepdims=True) + eps) * g + b

    def heads(a):
        return a.reshape(B, T, n_head, C // n_head).transpose(0, 2, 1, 3)

    h = layer_norm(x, w["ln_1.weight"], w["ln_1.bias"])
    q, k, v = np.split(h @ w["attn.c_attn.weight"].T + w["attn.c_attn.bias"], 3, axis=-1)
    att = heads(q) @ heads(k).transpose(0, 1, 3, 2) / math.sqrt(C // n_head)
    att = np.where(np.tril(np.ones((T, T), bool)), att, -np.inf)
    att = np.exp(att - att.max(-1, keepdims=True))
    att /= att.sum(-1, keepdims=True)
    y = (att @ heads(v)).transpose(0, 2, 1, 3).reshape(B, T, C)
    x = x + y @ w["attn.c_proj.weight"].T + w["attn.c_proj.bias"]
    h = layer_norm(x, w["ln_2.weight"], w["ln_2.bias"]) @ w["mlp.c_fc.weight"].T + w["mlp.c_fc.bias"]
    h = 0.5 * h * (1.0 + np.tanh(math.sqrt(2.0 / math.pi) * (h + 0.044715 * h ** 3)))
    return x + h @ w["mlp.c_proj.weight"].T + w["mlp.c_proj.bias"]


def median_ms(fn, warmup: int = 10, repeat: int = 15) -> float:
    """Median wall time of fn() in milliseconds, after warm-up calls (compiles, caches, and a new
    process's first calls, which run slower while its buffers and threads settle)."""
    for _ in range(warmup):
        fn()
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        times.append((time.perf_counter() - start) * 1e3)
    return statistics.median(times)


def plan_summary(lt, out) -> str:
    """One line per launch of the pending program's kernel plan (its IR where there's no plan API)."""
    if not hasattr(lt, "kernel_plan"):
        return f"IR:\n{lt.dump(out)}"
    plan = lt.kernel_plan(out)
    kinds = [launch.kind for launch in plan.launches]
    lines = [f"kernel plan: {len(kinds)} launches (" +
             ", ".join(f"{kinds.count(k)} {k}" for k in sorted(set(kinds))) + ")"]
    for launch in plan.launches:
        ops = dict.fromkeys(n.op for n in launch.nodes if n.op not in INLINED)   # ordered, unique
        lines.append(f"  {launch.name:<16} {str(list(launch.domain or launch.writes[0][1].shape)):<18} "
                     f"{' '.join(ops)}")
    return "\n".join(lines)


def main(s: dict = DEMO_SIZE, repeat: int = 15) -> None:
    import lazytorch as lt
    w_np = random_weights(s["width"])
    x_np = random_input(s["batch"], s["seq"], s["width"])
    w = {k: lt.from_numpy(v) for k, v in w_np.items()}
    x = lt.from_numpy(x_np)

    out = block(lt, x, w, s["n_head"])            # builds the graph; nothing runs yet
    print(f"GPT-2 block, x {list(x.shape)}, {s['n_head']} heads, backend {lt.get_backend()}")
    print(plan_summary(lt, out))
    got = out.numpy()
    # timed before the float64 check: numpy's BLAS pool spins ~0.1 s after its products, and
    # lazytorch's runs keep off its core meanwhile (runtime/threads.py own_busy), on one core
    ms = median_ms(lambda: block(lt, x, w, s["n_head"]).numpy(), repeat=repeat)
    ref = block_float64(x_np, w_np, s["n_head"])
    err = float(np.abs(got - ref).max())
    print(f"check vs numpy float64: max |diff| = {err:.2e} ({'ok' if err < 1e-3 else 'MISMATCH'})")
    print(f"speed: {ms:.2f} ms per forward (median of {repeat}, graph built and run each call)")


if __name__ == "__main__":
    main()

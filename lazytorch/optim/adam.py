"""Adam, AdamW (decoupled weight decay) with amsgrad and maximize, in torch's single-tensor order."""
from __future__ import annotations

import math
from typing import Any

from ..ir.dtypes import float32, float64
from ..runtime import backend_name
from ..tensor import Tensor
from .optimizer import Optimizer, assign


class Adam(Optimizer):
    decoupled = False

    def __init__(self, params, lr: float = 1e-3, betas: tuple[float, float] = (0.9, 0.999), eps: float = 1e-8,
                 weight_decay: float = 0.0, amsgrad: bool = False, *, maximize: bool = False, foreach=None,
                 capturable: bool = False, differentiable: bool = False, fused=None,
                 decoupled_weight_decay: bool | None = None):
        if not 0.0 <= lr:
            raise ValueError(f"Invalid learning rate: {lr}")
        if not 0.0 <= eps:
            raise ValueError(f"Invalid epsilon value: {eps}")
        for i, b in enumerate(betas):
            if not 0.0 <= b < 1.0:
                raise ValueError(f"Invalid beta parameter at index {i}: {b}")
        if not 0.0 <= weight_decay:
            raise ValueError(f"Invalid weight_decay value: {weight_decay}")
        decoupled = self.decoupled if decoupled_weight_decay is None else decoupled_weight_decay
        super().__init__(params, dict(lr=lr, betas=tuple(betas), eps=eps, weight_decay=weight_decay, amsgrad=amsgrad,
                                      maximize=maximize, decoupled_weight_decay=decoupled))

    counts_steps = True

    def state_keys(self, group: dict[str, Any]) -> tuple[str, ...]:
        return ("exp_avg", "exp_avg_sq") + (("max_exp_avg_sq",) if group["amsgrad"] else ())

    def update(self, group: dict[str, Any], params, grads, states) -> None:
        lr, (beta1, beta2), eps = group["lr"], group["betas"], group["eps"]
        wd, amsgrad, maximize = group["weight_decay"], group["amsgrad"], group["maximize"]
        steps = self.advance_steps(states)
        corrections: dict[tuple, tuple[Tensor, Tensor]] = {}     # (step tensor, dtype) -> factors
        for p, g, state, step in zip(params, grads, states, steps):
            g = -g if maximize else g
            if wd != 0:
                if group["decoupled_weight_decay"]:
                    assign(p, p.mul(1 - lr * wd))
                else:
                    g = g.add(p, alpha=wd)
            m, v = state["exp_avg"], state["exp_avg_sq"]
            assign(m, m.lerp(g, 1 - beta1))
            assign(v, v.mul(beta2).addcmul(g, g, value=1 - beta2))
            key = (id(step), p.dtype)
            if key not in corrections:
                corrections[key] = _bias_corrections(step, lr, beta1, beta2, p.dtype)
            neg_step_size, bias_correction2_sqrt = corrections[key]
            if amsgrad:
                vmax = state["max_exp_avg_sq"]
                assign(vmax, vmax.maximum(v))
                v = vmax
            denom = (v.sqrt() / bias_correction2_sqrt).add(eps)
            assign(p, p + (m / denom) * neg_step_size)          # p.addcdiv(m, denom, value=-step_size)


def _bias_corrections(step: Tensor, lr: float, beta1: float, beta2: float, dtype) -> tuple[Tensor, Tensor]:
    """(-lr / (1 - beta1**step), sqrt(1 - beta2**step)) from the step count tensor, with no Python
    number that changes between steps (so nothing recompiles and lt.compile replays the step).

    Where the backend computes float64, as torch computes them from `step.item()` in Python, then
    cast to the parameter's dtype (as torch casts a Python scalar operand): torch's numbers.  The
    GPU backends have no float64: there 1 - beta**t is -expm1(t * log(beta)) in float32, which
    avoids the cancellation of 1 - 0.999**t (a relative error of about 1e-7, not 1e-5)."""
    if backend_name() in FLOAT64_BACKENDS:
        t = step.to(float64)
        step_size = lr / (1 - beta1 ** t)
        return (-step_size).to(dtype), ((1 - beta2 ** t) ** 0.5).to(dtype)
    t = step.to(float32)
    bias_correction1 = -(t * math.log(beta1)).expm1() if beta1 > 0 else t * 0 + 1
    bias_correction2 = -(t * math.log(beta2)).expm1() if beta2 > 0 else t * 0 + 1
    return (-lr / bias_correction1).to(dtype), bias_correction2.sqrt().to(dtype)


# backends whose kernels compute in float64 (Metal and CUDA have no doubles on the GPU)
FLOAT64_BACKENDS = frozenset({"cpu", "reference"})


class AdamW(Adam):
    decoupled = True

    def __init__(self, params, lr: float = 1e-3, betas: tuple[float, float] = (0.9, 0.999), eps: float = 1e-8,
                 weight_decay: float = 1e-2, amsgrad: bool = False, **kwargs):
        super().__init__(params, lr, betas, eps, weight_decay, amsgrad, **kwargs)

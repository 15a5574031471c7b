"""Adam, AdamW (decoupled weight decay) with amsgrad and maximize, in torch's single-tensor order."""
from __future__ import annotations

from typing import Any

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

    def update(self, group: dict[str, Any], params, grads, states) -> None:
        lr, (beta1, beta2), eps = group["lr"], group["betas"], group["eps"]
        wd, amsgrad, maximize = group["weight_decay"], group["amsgrad"], group["maximize"]
        for p, g, state in zip(params, grads, states):
            if not state:
                state["step"] = 0.0
                state["exp_avg"] = p.new_zeros(tuple(p.shape))
                state["exp_avg_sq"] = p.new_zeros(tuple(p.shape))
                if amsgrad:
                    state["max_exp_avg_sq"] = p.new_zeros(tuple(p.shape))
            g = -g if maximize else g
            state["step"] += 1
            step = state["step"]
            if wd != 0:
                if group["decoupled_weight_decay"]:
                    assign(p, p.mul(1 - lr * wd))
                else:
                    g = g.add(p, alpha=wd)
            m, v = state["exp_avg"], state["exp_avg_sq"]
            assign(m, m.lerp(g, 1 - beta1))
            assign(v, v.mul(beta2).addcmul(g, g, value=1 - beta2))
            bias_correction1 = 1 - beta1 ** step
            bias_correction2 = 1 - beta2 ** step
            step_size = lr / bias_correction1
            bias_correction2_sqrt = bias_correction2 ** 0.5
            if amsgrad:
                vmax = state["max_exp_avg_sq"]
                assign(vmax, vmax.maximum(v))
                v = vmax
            denom = (v.sqrt() / bias_correction2_sqrt).add(eps)
            assign(p, p.addcdiv(m, denom, value=-step_size))


class AdamW(Adam):
    decoupled = True

    def __init__(self, params, lr: float = 1e-3, betas: tuple[float, float] = (0.9, 0.999), eps: float = 1e-8,
                 weight_decay: float = 1e-2, amsgrad: bool = False, **kwargs):
        super().__init__(params, lr, betas, eps, weight_decay, amsgrad, **kwargs)

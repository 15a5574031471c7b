"""RMSprop with momentum, centering, weight decay and maximize, in torch's single-tensor order."""
from __future__ import annotations

from typing import Any

from .optimizer import Optimizer, assign


class RMSprop(Optimizer):
    def __init__(self, params, lr: float = 1e-2, alpha: float = 0.99, eps: float = 1e-8, weight_decay: float = 0.0,
                 momentum: float = 0.0, centered: bool = False, capturable: bool = False, foreach=None,
                 maximize: bool = False, differentiable: bool = False):
        for name, v in (("learning rate", lr), ("epsilon value", eps), ("momentum value", momentum),
                        ("weight_decay value", weight_decay), ("alpha value", alpha)):
            if not 0.0 <= v:
                raise ValueError(f"Invalid {name}: {v}")
        super().__init__(params, dict(lr=lr, alpha=alpha, eps=eps, weight_decay=weight_decay, momentum=momentum,
                                      centered=centered, maximize=maximize))

    counts_steps = True

    def state_keys(self, group: dict[str, Any]) -> tuple[str, ...]:
        return ("square_avg",) + ("momentum_buffer",) * (group["momentum"] > 0) + ("grad_avg",) * group["centered"]

    def update(self, group: dict[str, Any], params, grads, states) -> None:
        lr, alpha, eps, wd = group["lr"], group["alpha"], group["eps"], group["weight_decay"]
        momentum, centered = group["momentum"], group["centered"]
        self.advance_steps(states)
        for p, g, state in zip(params, grads, states):
            g = -g if group["maximize"] else g
            if wd != 0:
                g = g.add(p, alpha=wd)
            sq = state["square_avg"]
            assign(sq, sq.mul(alpha).addcmul(g, g, value=1 - alpha))
            if centered:
                ga = state["grad_avg"]
                assign(ga, ga.lerp(g, 1 - alpha))
                avg = sq.addcmul(ga, ga, value=-1).sqrt()
            else:
                avg = sq.sqrt()
            avg = avg.add(eps)
            if momentum > 0:
                buf = state["momentum_buffer"]
                assign(buf, buf.mul(momentum).addcdiv(g, avg))
                assign(p, p.add(buf, alpha=-lr))
            else:
                assign(p, p.addcdiv(g, avg, value=-lr))

"""SGD with momentum, dampening, Nesterov momentum, weight decay and maximize (torch's formulas)."""
from __future__ import annotations

from typing import Any

from .optimizer import Optimizer, assign, required


class SGD(Optimizer):
    def __init__(self, params, lr: float = 1e-3, momentum: float = 0.0, dampening: float = 0.0,
                 weight_decay: float = 0.0, nesterov: bool = False, *, maximize: bool = False,
                 foreach=None, differentiable: bool = False, fused=None):
        if lr is not required() and lr < 0.0:
            raise ValueError(f"Invalid learning rate: {lr}")
        if momentum < 0.0:
            raise ValueError(f"Invalid momentum value: {momentum}")
        if weight_decay < 0.0:
            raise ValueError(f"Invalid weight_decay value: {weight_decay}")
        if nesterov and (momentum <= 0 or dampening != 0):
            raise ValueError("Nesterov momentum requires a momentum and zero dampening")
        super().__init__(params, dict(lr=lr, momentum=momentum, dampening=dampening, weight_decay=weight_decay,
                                      nesterov=nesterov, maximize=maximize))

    def state_keys(self, group: dict[str, Any]) -> tuple[str, ...]:
        # Without dampening, momentum * 0 + g is exactly torch's first buffer (a clone of g), so the
        # buffer can start as zeros made ahead and every step runs the same update (see Optimizer).
        return ("momentum_buffer",) if group["momentum"] != 0 and group["dampening"] == 0 else ()

    def update(self, group: dict[str, Any], params, grads, states) -> None:
        lr, momentum, dampening = group["lr"], group["momentum"], group["dampening"]
        wd, nesterov, maximize = group["weight_decay"], group["nesterov"], group["maximize"]
        for p, g, state in zip(params, grads, states):
            g = -g if maximize else g
            if wd != 0:
                g = g.add(p, alpha=wd)
            if momentum != 0:
                buf = state.get("momentum_buffer")
                if buf is None:
                    buf = state["momentum_buffer"] = g.clone()
                else:
                    assign(buf, buf.mul(momentum).add(g, alpha=1 - dampening))
                g = g.add(buf, alpha=momentum) if nesterov else buf
            assign(p, p.add(g, alpha=-lr))

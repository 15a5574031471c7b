"""RMSprop with momentum, centering, weight decay and maximize, in torch's single-tensor order."""
from __future__ import annotations

from typing import Any

from ..ir.build import call, recorded
from ..ir.node import Node
from .optimizer import Optimizer, assign_all


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
        momentum, centered, alpha = group["momentum"], group["centered"], group["alpha"]
        self.advance_steps(states)
        form = (group["maximize"], group["weight_decay"] != 0, centered, momentum > 0)
        sq = [s["square_avg"] for s in states]
        ga = [s["grad_avg"] for s in states] if centered else []
        bufs = [s["momentum_buffer"] for s in states] if momentum > 0 else []
        new = rmsprop_replayed([p.node for p in params], [g.node for g in grads], [t.node for t in sq],
                               [t.node for t in ga], [t.node for t in bufs], form, -group["lr"], alpha, 1 - alpha,
                               group["eps"], group["weight_decay"], momentum)
        assign_all([*params, *sq, *ga, *bufs], new)


def rmsprop_nodes(params: list[Node], grads: list[Node], square_avgs: list[Node], grad_avgs: list[Node],
                  bufs: list[Node], form: tuple[bool, bool, bool, bool], neg_lr: float, alpha: float,
                  one_minus_alpha: float, eps: float, weight_decay: float, momentum: float) -> tuple[Node, ...]:
    """One group's RMSprop step over nodes, torch's single-tensor formulas in torch's order: the
    new parameters, square_avgs, grad_avgs (centered) and momentum buffers, in that order.
    `form` = (maximize, weight decay, centered, momentum) decides which ops are built; the numbers
    only become runtime scalars, so a replay (`rmsprop_replayed`) serves every value of them."""
    maximize, decay, centered, heavy_ball = form
    new_params, new_sq, new_ga, new_bufs = [], [], [], []
    for i, (p, g, sq) in enumerate(zip(params, grads, square_avgs)):
        if maximize:
            g = call("neg", g)
        if decay:
            g = call("add", g, p, alpha=weight_decay)
        sq = call("addcmul", call("mul", sq, alpha), g, g, value=one_minus_alpha)
        new_sq.append(sq)
        if centered:
            ga = call("lerp", grad_avgs[i], g, one_minus_alpha)
            new_ga.append(ga)
            avg = call("sqrt", call("addcmul", sq, ga, ga, value=-1))
        else:
            avg = call("sqrt", sq)
        avg = call("add", avg, eps)
        if heavy_ball:
            buf = call("addcdiv", call("mul", bufs[i], momentum), g, avg)
            new_bufs.append(buf)
            new_params.append(call("add", p, buf, alpha=neg_lr))
        else:
            new_params.append(call("addcdiv", p, g, avg, value=neg_lr))
    return (*new_params, *new_sq, *new_ga, *new_bufs)


rmsprop_replayed = recorded(rmsprop_nodes, runtime=("neg_lr", "alpha", "one_minus_alpha", "eps", "weight_decay",
                                                    "momentum"))

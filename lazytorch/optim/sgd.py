"""SGD with momentum, dampening, Nesterov momentum, weight decay and maximize (torch's formulas)."""
from __future__ import annotations

from typing import Any

from ..ir.build import call, recorded
from ..ir.node import Node
from ..tensor import Tensor
from .optimizer import Optimizer, assign_all, required


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
        momentum = group["momentum"]
        form = (group["weight_decay"] != 0, momentum != 0, group["nesterov"], group["maximize"])
        bufs = [s.get("momentum_buffer") for s in states] if momentum != 0 else [None] * len(params)
        new = sgd_replayed([p.node for p in params], [g.node for g in grads],
                           [None if b is None else b.node for b in bufs], form,
                           -group["lr"], group["weight_decay"], momentum, 1 - group["dampening"])
        n = len(params)
        assign_all(params, new[:n])
        for state, buf, value in zip(states, bufs, new[n:]):
            if buf is None:                   # the first step with dampening: torch's buffer is a clone of g
                state["momentum_buffer"] = Tensor(value)
            else:
                buf._rebind(value, "optimizer step")


def sgd_nodes(params: list[Node], grads: list[Node], bufs: list[Node | None], form: tuple[bool, bool, bool, bool],
              neg_lr: float, weight_decay: float, momentum: float, keep: float) -> tuple[Node, ...]:
    """One group's SGD step over nodes, torch's single-tensor formulas op for op: the new value of
    each parameter, then of each momentum buffer (a clone of the gradient where `bufs` holds None:
    torch's first buffer).  `form` = (weight decay, momentum, nesterov, maximize) decides which
    ops are built; the numbers (-lr, weight_decay, momentum, 1 - dampening) only become runtime
    scalars, so a replay (`sgd_replayed`) serves every value of them."""
    decay, heavy_ball, nesterov, maximize = form
    new_params, new_bufs = [], []
    for p, g, buf in zip(params, grads, bufs):
        if maximize:
            g = call("neg", g)
        if decay:
            g = call("add", g, p, alpha=weight_decay)
        if heavy_ball:
            buf = call("clone", g) if buf is None else call("add", call("mul", buf, momentum), g, alpha=keep)
            new_bufs.append(buf)
            g = call("add", g, buf, alpha=momentum) if nesterov else buf
        new_params.append(call("add", p, g, alpha=neg_lr))
    return (*new_params, *new_bufs)


# A group's update replayed from the recording of the last one with the same signature (shapes,
# dtypes, form): ResNet-18's ~60 parameters in one replay instead of ~60-250 builder calls a step.
sgd_replayed = recorded(sgd_nodes, runtime=("neg_lr", "weight_decay", "momentum", "keep"))

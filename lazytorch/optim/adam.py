"""Adam, AdamW (decoupled weight decay) with amsgrad and maximize, in torch's single-tensor order."""
from __future__ import annotations

import math
from typing import Any

from ..ir.build import call, recorded
from ..ir.dtypes import float32, float64
from ..ir.node import Node
from ..runtime import backend_name
from .optimizer import Optimizer, assign_all, distinct_counts


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
        lr, (beta1, beta2), eps, wd = group["lr"], group["betas"], group["eps"], group["weight_decay"]
        amsgrad = group["amsgrad"]
        counts = self.advance_steps(states)
        steps, step_of = distinct_counts(counts)
        decay = ("decoupled" if group["decoupled_weight_decay"] else "l2") if wd != 0 else None
        form = (group["maximize"], decay, amsgrad, backend_name() in FLOAT64_BACKENDS, beta1 > 0, beta2 > 0)
        m, v = [s["exp_avg"] for s in states], [s["exp_avg_sq"] for s in states]
        vmax = [s["max_exp_avg_sq"] for s in states] if amsgrad else []
        new = adam_replayed(
            [p.node for p in params], [g.node for g in grads], [t.node for t in m], [t.node for t in v],
            [t.node for t in vmax], steps, step_of, form,
            lr, -lr, 1 - lr * wd, wd, beta1, beta2, 1 - beta1, 1 - beta2,
            math.log(beta1) if beta1 > 0 else 0.0, math.log(beta2) if beta2 > 0 else 0.0, eps)
        assign_all([*params, *m, *v, *vmax], new)


def adam_nodes(params: list[Node], grads: list[Node], exp_avgs: list[Node], exp_avg_sqs: list[Node],
               max_exp_avg_sqs: list[Node], steps: list[Node], step_of: tuple[int, ...], form: tuple,
               lr: float, neg_lr: float, decay: float, weight_decay: float, beta1: float, beta2: float,
               one_minus_beta1: float, one_minus_beta2: float, log_beta1: float, log_beta2: float,
               eps: float) -> tuple[Node, ...]:
    """One group's Adam step over nodes, torch's single-tensor formulas in torch's order: the new
    parameters, exp_avgs, exp_avg_sqs and (amsgrad) max_exp_avg_sqs, in that order.  `steps` are
    the distinct step counts, already advanced, `step_of` each parameter's; `form` = (maximize,
    weight decay: None, "l2" or "decoupled", amsgrad, float64 bias corrections, beta1 > 0,
    beta2 > 0) decides which ops are built; the numbers (lr, -lr, 1 - lr * weight_decay, ...,
    log beta: everything computed from a hyperparameter is computed by the caller) only become
    runtime scalars, so a replay (`adam_replayed`) serves every value of them."""
    maximize, decay_form, amsgrad, wide, beta1_positive, beta2_positive = form
    corrections: dict[tuple, tuple[Node, Node]] = {}     # (step index, dtype) -> factors
    new_params, new_m, new_v, new_vmax = [], [], [], []
    for i, (p, g, m, v) in enumerate(zip(params, grads, exp_avgs, exp_avg_sqs)):
        if maximize:
            g = call("neg", g)
        if decay_form == "decoupled":
            p = call("mul", p, decay)
        elif decay_form == "l2":
            g = call("add", g, p, alpha=weight_decay)
        m = call("lerp", m, g, one_minus_beta1)
        v = call("addcmul", call("mul", v, beta2), g, g, value=one_minus_beta2)
        new_m.append(m)
        new_v.append(v)
        key = (step_of[i], p.dtype)
        if key not in corrections:
            step = steps[step_of[i]]
            corrections[key] = (
                _bias_corrections_wide(step, lr, beta1, beta2, p.dtype) if wide else
                _bias_corrections_narrow(step, neg_lr, log_beta1, log_beta2, beta1_positive, beta2_positive, p.dtype))
        neg_step_size, bias_correction2_sqrt = corrections[key]
        if amsgrad:
            v = call("maximum", max_exp_avg_sqs[i], v)
            new_vmax.append(v)
        denom = call("add", call("div", call("sqrt", v), bias_correction2_sqrt), eps)
        # p.addcdiv(m, denom, value=-step_size)
        new_params.append(call("add", p, call("mul", call("div", m, denom), neg_step_size)))
    return (*new_params, *new_m, *new_v, *new_vmax)


adam_replayed = recorded(adam_nodes, runtime=("lr", "neg_lr", "decay", "weight_decay", "beta1", "beta2",
                                              "one_minus_beta1", "one_minus_beta2", "log_beta1", "log_beta2", "eps"))


def _bias_corrections_wide(step: Node, lr: float, beta1: float, beta2: float, dtype) -> tuple[Node, Node]:
    """(-lr / (1 - beta1**step), sqrt(1 - beta2**step)) from the step count, with no Python number
    that changes between steps (so nothing recompiles and lt.compile replays the step), computed
    in float64 as torch computes them from `step.item()` in Python, then cast to the parameter's
    dtype (as torch casts a Python scalar operand): torch's numbers.  For backends whose kernels
    compute in float64 (FLOAT64_BACKENDS)."""
    t = call("to", step, float64)
    step_size = call("div", lr, call("sub", 1, call("pow", beta1, t)))
    bias_correction2_sqrt = call("pow", call("sub", 1, call("pow", beta2, t)), 0.5)
    return call("to", call("neg", step_size), dtype), call("to", bias_correction2_sqrt, dtype)


def _bias_corrections_narrow(step: Node, neg_lr: float, log_beta1: float, log_beta2: float, beta1_positive: bool,
                             beta2_positive: bool, dtype) -> tuple[Node, Node]:
    """The same factors for the GPU backends, which have no float64: 1 - beta**t is
    -expm1(t * log(beta)) in float32, which avoids the cancellation of 1 - 0.999**t (a relative
    error of about 1e-7, not 1e-5)."""
    t = call("to", step, float32)
    bias_correction1 = call("neg", call("expm1", call("mul", t, log_beta1))) if beta1_positive else \
        call("add", call("mul", t, 0), 1)
    bias_correction2 = call("neg", call("expm1", call("mul", t, log_beta2))) if beta2_positive else \
        call("add", call("mul", t, 0), 1)
    return call("to", call("div", neg_lr, bias_correction1), dtype), call("to", call("sqrt", bias_correction2), dtype)


# backends whose kernels compute in float64 (Metal and CUDA have no doubles on the GPU)
FLOAT64_BACKENDS = frozenset({"cpu", "reference"})


class AdamW(Adam):
    decoupled = True

    def __init__(self, params, lr: float = 1e-3, betas: tuple[float, float] = (0.9, 0.999), eps: float = 1e-8,
                 weight_decay: float = 1e-2, amsgrad: bool = False, **kwargs):
        super().__init__(params, lr, betas, eps, weight_decay, amsgrad, **kwargs)

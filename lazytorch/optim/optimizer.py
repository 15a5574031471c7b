"""The Optimizer base: param groups, state, zero_grad, state_dict, and a step that evaluates.

Subclasses write `state_keys(group)` (the state a parameter starts from as zeros like it, made
when it joins) and `update(group, params, grads, states)`: the update of every parameter of a group
(torch's single-tensor formulas, in torch's order, so the numbers match torch step by step).  Each
writes its formulas once, as a node-level function of the group's nodes and hyperparameters
(sgd.py `sgd_nodes`, adam.py `adam_nodes`, rmsprop.py `rmsprop_nodes`) wrapped by ir/build.py
`recorded`: from the second step on a group's update is replayed from one recording of the nodes
it made (in C where the extension is built) instead of ~5-12 builder calls per parameter, and
`update` only rebinds the tensors to the new nodes (`assign_all`: an effect, so outside the
recording).  The hyperparameters are runtime numbers of the recording (keyed by class, not
value), so a schedule that changes lr or momentum every step replays the same recording.  `step()` builds all groups' updates under no_grad, then materialises the
parameters, the optimizer state, the gradients and the loss of the last backward in ONE
`lazytorch.eval`: forward, backward and update compile and run as one program, the graph is cut
at every value the next step reads, and from the second step on the program comes from the
graph cache.  Hyperparameters enter the program as runtime scalars, so a learning-rate schedule
does not recompile anything.
"""
from __future__ import annotations

import copy
from collections import Counter
from typing import Any, Callable, Iterable

import numpy as np

from ..autograd import enable_grad, no_grad, recent_roots
from ..ir.creation import fill
from ..ir.dtypes import float32
from ..ir.node import Node
from ..interop import tensor as make_tensor
from ..tensor import Tensor

_REQUIRED = object()


class Optimizer:
    defaults: dict[str, Any]

    def __init__(self, params: Iterable, defaults: dict[str, Any]):
        self.defaults = dict(defaults)
        self.state: dict[Tensor, dict[str, Any]] = {}
        self.param_groups: list[dict[str, Any]] = []
        # State made when a parameter joins, moved into self.state at its first step (torch's
        # state is empty until then).  Made ahead so that a step compiled with lt.compile finds
        # it as captured tensors and only updates it in place, which a replay repeats.
        self._fresh: dict[Tensor, dict[str, Any]] = {}
        if isinstance(params, Tensor):
            raise TypeError("params argument given to the optimizer should be an iterable of Tensors or dicts, "
                            f"but got {type(params).__name__}")
        groups = list(params)
        if not groups:
            raise ValueError("optimizer got an empty parameter list")
        if not isinstance(groups[0], dict):
            groups = [{"params": groups}]
        for g in groups:
            self.add_param_group(g)

    def __repr__(self) -> str:
        lines = [f"{type(self).__name__} ("]
        for i, g in enumerate(self.param_groups):
            lines.append(f"Parameter Group {i}")
            lines += [f"    {k}: {v}" for k, v in sorted(g.items()) if k != "params"]
        return "\n".join(lines + [")"])

    def add_param_group(self, param_group: dict[str, Any]) -> None:
        group = dict(param_group)
        params = group["params"]
        group["params"] = [params] if isinstance(params, Tensor) else list(params)
        for p in group["params"]:
            if not isinstance(p, Tensor):
                raise TypeError(f"optimizer can only optimize Tensors, but one of the params is {type(p).__name__}")
            if not p.is_leaf:
                raise ValueError("can't optimize a non-leaf Tensor")
        for k, v in self.defaults.items():
            if v is _REQUIRED and k not in group:
                raise ValueError(f"parameter group didn't specify a value of required optimization parameter {k}")
            group.setdefault(k, v)
        seen = {id(p) for g in self.param_groups for p in g["params"]}
        if any(id(p) in seen for p in group["params"]):
            raise ValueError("some parameters appear in more than one parameter group")
        self.param_groups.append(group)
        with no_grad():
            count = make_tensor(0.0, dtype=float32) if self.counts_steps else None
            for p in group["params"]:
                if p.requires_grad:
                    fresh = {k: stored_zeros(p) for k in self.state_keys(group)}
                    if count is not None:
                        fresh["step"] = count
                    self._fresh[p] = fresh

    # a subclass that counts steps (Adam, RMSprop) keeps the count as state["step"]
    counts_steps = False

    def state_keys(self, group: dict[str, Any]) -> tuple[str, ...]:
        """The state a parameter starts from, zeros like it, as the subclass's update expects."""
        return ()

    def zero_grad(self, set_to_none: bool = True) -> None:
        for group in self.param_groups:
            for p in group["params"]:
                if p.grad is None:
                    continue
                if set_to_none:
                    p.grad = None
                else:
                    p.grad._rebind(fill(tuple(p.grad.shape), 0, p.grad.dtype), "zero_grad")

    def step(self, closure: Callable[[], Any] | None = None):
        loss = None
        if closure is not None:
            with enable_grad():
                loss = closure()
        self.lazy_step()
        self.materialize()
        return loss

    def lazy_step(self) -> None:
        """Build every group's update as lazy tensors without evaluating (step() = lazy_step() +
        materialize(); apart, they let `lt.kernel_plan(*opt.step_tensors())` show the step's plan)."""
        with no_grad():
            for group in self.param_groups:
                params = [p for p in group["params"] if p.grad is not None]
                if params:
                    grads = [p.grad for p in params]
                    states = [self._state_of(p, group) for p in params]
                    self.update(group, params, grads, states)

    def update(self, group: dict[str, Any], params: list[Tensor], grads: list[Tensor],
               states: list[dict[str, Any]]) -> None:
        raise NotImplementedError

    def _state_of(self, p: Tensor, group: dict[str, Any]) -> dict[str, Any]:
        state = self.state.get(p)
        if state is None:
            state = self.state[p] = self._fresh.pop(p, {})
        for k in self.state_keys(group):
            if k not in state:              # none made ahead (a loaded state; amsgrad set since)
                state[k] = stored_zeros(p)
        return state

    def advance_steps(self, states: list[dict[str, Any]]) -> list[Tensor]:
        """Add one to the step count of each state and return the counts, aligned with `states`.

        A count is a 0-d float32 tensor, as torch keeps it, so a compiled step (lt.compile)
        replays its increment; a Python number would be frozen into the trace.  Parameters that
        start together share one count tensor (their values are always equal), so a group's bias
        corrections are built once, not once per parameter; when only some of the holders of a
        shared count step (others had no gradient), those get a new tensor of their own."""
        fresh = [s for s in states if "step" not in s]
        if fresh:
            shared = make_tensor(0.0, dtype=float32)
            for s in fresh:
                s["step"] = shared
        holders = Counter(id(s["step"]) for table in (self.state, self._fresh) for s in table.values()
                          if "step" in s)
        stepping: dict[int, list[dict[str, Any]]] = {}
        for s in states:
            stepping.setdefault(id(s["step"]), []).append(s)
        for same in stepping.values():
            count = same[0]["step"]
            if holders[id(count)] == len(same):
                assign(count, count + 1)
            else:
                advanced = count + 1
                for s in same:
                    s["step"] = advanced
        return [s["step"] for s in states]

    def materialize(self) -> None:
        """Evaluate parameters, state, gradients and the last backward's roots together."""
        from .. import eval as lt_eval
        lt_eval(*self.step_tensors())

    def step_tensors(self) -> list[Tensor]:
        """What step() evaluates: every parameter, its grad and state, the last backward's roots."""
        tensors = []
        for group in self.param_groups:
            for p in group["params"]:
                tensors.append(p)
                if p.grad is not None:
                    tensors.append(p.grad)
                tensors += [v for v in self.state.get(p, {}).values() if isinstance(v, Tensor)]
        return tensors + recent_roots()

    # ---- serialisation (torch's format: params by position across groups) ----
    def state_dict(self) -> dict[str, Any]:
        index: dict[int, int] = {}
        groups = []
        for g in self.param_groups:
            for p in g["params"]:
                index.setdefault(id(p), len(index))
            packed = {k: v for k, v in g.items() if k != "params"}
            packed["params"] = [index[id(p)] for p in g["params"]]
            groups.append(packed)
        state = {index[id(p)]: dict(s) for p, s in self.state.items() if id(p) in index and s}
        return {"state": state, "param_groups": groups}

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        groups = state_dict["param_groups"]
        if len(groups) != len(self.param_groups):
            raise ValueError("loaded state dict has a different number of parameter groups")
        for mine, theirs in zip(self.param_groups, groups):
            if len(mine["params"]) != len(theirs["params"]):
                raise ValueError("loaded state dict contains a parameter group that doesn't match the size of "
                                 "optimizer's group")
        by_index = {}
        for mine, theirs in zip(self.param_groups, groups):
            by_index.update(zip(theirs["params"], mine["params"]))
            for k, v in theirs.items():
                if k != "params":
                    mine[k] = copy.deepcopy(v)
        self.state = {}
        for i, s in state_dict["state"].items():
            p = by_index[int(i)]
            self.state[p] = {k: _state_value(k, v, p) for k, v in s.items()}
        self._fresh = {p: s for p, s in self._fresh.items() if p not in self.state}


def _state_value(key: str, value, param: Tensor):
    """A loaded state entry as this optimizer keeps it: tensors cloned (in the param's dtype), the
    step count a 0-d float32 tensor (as torch stores it)."""
    if key == "step":                      # a 0-d float32 tensor of its own, as torch keeps it
        return make_tensor(float(value.item() if hasattr(value, "item") else value), dtype=float32)
    if isinstance(value, Tensor):
        return value.clone()
    if hasattr(value, "detach") and hasattr(value, "numpy"):       # a torch tensor
        return make_tensor(value.detach().numpy(), dtype=param.dtype)
    return copy.deepcopy(value)


def stored_zeros(p: Tensor) -> Tensor:
    """Zeros like p, already stored (a buffer, not a pending fill): state made ahead needs no eval
    of its own, not even in the first call of an lt.compile'd step."""
    return make_tensor(np.zeros(tuple(p.shape), dtype=p.dtype.storage), dtype=p.dtype)


def assign(target: Tensor, value: Tensor) -> None:
    """target = value, keeping the Tensor object (the optimizer's in-place update, functionalised)."""
    target._rebind(value.node, "optimizer step")


def assign_all(targets: list[Tensor], values: tuple[Node, ...]) -> None:
    """assign each target its value (a group's update, built or replayed as nodes, bound to the
    tensors it updates: rebinding is an effect, so it stays outside the recorded build)."""
    for target, value in zip(targets, values):
        target._rebind(value, "optimizer step")


def distinct_counts(counts: list[Tensor]) -> tuple[list[Node], tuple[int, ...]]:
    """The distinct step count tensors' nodes (parameters that start together share one count:
    `advance_steps`) and the index of each parameter's among them: a recorded build takes each
    node once (ir/replay.py: a signature refuses a node given twice), and builds the bias
    corrections once per count."""
    index: dict[int, int] = {}
    nodes = []
    for c in counts:
        if id(c) not in index:
            index[id(c)] = len(nodes)
            nodes.append(c.node)
    return nodes, tuple([index[id(c)] for c in counts])


def required() -> object:
    return _REQUIRED

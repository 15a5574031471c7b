"""Autograd with torch's semantics over the lazy graph.

    x = lt.randn(3, requires_grad=True)
    y = (x * x).sum()
    y.backward()          # builds the gradient as lazy IR; nothing runs yet
    x.grad.numpy()        # forward and backward evaluate as one program

state.py decides which nodes require grad and snapshots them, derivatives.py holds the rules,
engine.py runs reverse mode, grad_mode.py the no_grad family.  docs/autograd.md describes it.
"""
from __future__ import annotations

from .engine import recent_roots, remember_roots, run_backward
from .grad_mode import enable_grad, inference_mode, is_grad_enabled, no_grad, set_grad_enabled
from .state import MODE, classify

__all__ = ["backward", "grad", "no_grad", "enable_grad", "inference_mode", "set_grad_enabled",
           "is_grad_enabled"]


def _as_list(x) -> list:
    if x is None:
        return []
    return list(x) if isinstance(x, (list, tuple)) else [x]


def _root_grads(outputs: list, grad_outputs: list, what: str) -> list:
    from ..ir.creation import fill
    if grad_outputs and len(grad_outputs) != len(outputs):
        raise RuntimeError(f"{what}: got {len(grad_outputs)} gradients for {len(outputs)} outputs")
    grads = []
    for i, out in enumerate(outputs):
        g = grad_outputs[i] if grad_outputs else None
        if not (MODE.any_leaf and classify(out.node)):
            raise RuntimeError(f"element {i} of tensors does not require grad and does not have a grad_fn")
        if g is None:
            if out.numel() != 1:
                raise RuntimeError(f"grad can be implicitly created only for scalar outputs (output {i} has shape "
                                   f"{list(out.shape)}); pass gradient= of that shape")
            grads.append(fill(tuple(out.shape), 1.0, out.dtype))
            continue
        gn = g.node if hasattr(g, "node") else fill(tuple(out.shape), float(g), out.dtype)
        if tuple(gn.shape) != tuple(out.shape):
            raise RuntimeError(f"Mismatch in shape: grad_output[{i}] has a shape of {list(gn.shape)} and "
                               f"output[{i}] has a shape of {list(out.shape)}.")
        grads.append(gn)
    return grads


def backward(tensors, grad_tensors=None, retain_graph: bool | None = None, create_graph: bool = False,
             inputs=None) -> None:
    """Accumulate the gradient of `tensors` into the .grad of the leaves they depend on."""
    retain_graph = create_graph if retain_graph is None else retain_graph
    outputs = _as_list(tensors)
    roots = [t.node for t in outputs]
    grads = _root_grads(outputs, _as_list(grad_tensors), "backward")
    if inputs is not None:
        from .engine import accumulate_leaf
        wanted = _as_list(inputs)
        captured = run_backward(roots, grads, bool(retain_graph), accumulate=False, capture=[t.node for t in wanted],
                                create_graph=create_graph)
        with set_grad_enabled(create_graph):
            for t in wanted:
                if id(t.node) in captured:
                    accumulate_leaf(t, captured[id(t.node)])
    else:
        run_backward(roots, grads, bool(retain_graph), create_graph=create_graph)
    remember_roots(outputs)


def grad(outputs, inputs, grad_outputs=None, retain_graph: bool | None = None, create_graph: bool = False,
         allow_unused: bool | None = None, materialize_grads: bool = False) -> tuple:
    """The gradients of `outputs` with respect to `inputs` (lazy tensors), leaving every .grad alone."""
    retain_graph = create_graph if retain_graph is None else retain_graph
    outs, ins = _as_list(outputs), _as_list(inputs)
    for i, t in enumerate(ins):
        if not (MODE.any_leaf and classify(t.node)):
            raise RuntimeError(f"One of the differentiated Tensors (input {i}, shape {list(t.shape)}) does not "
                               "require grad")
    grads = _root_grads(outs, _as_list(grad_outputs), "autograd.grad")
    captured = run_backward([t.node for t in outs], grads, bool(retain_graph), accumulate=False,
                            capture=[t.node for t in ins], create_graph=create_graph)
    result = []
    with set_grad_enabled(create_graph):     # (create_graph: the gradients require grad in turn)
        _collect(ins, captured, allow_unused or materialize_grads, materialize_grads, result)
    return tuple(result)


def _collect(ins, captured, allow_unused, materialize, result) -> None:
    from ..ir.creation import fill
    for i, t in enumerate(ins):
        g = captured.get(id(t.node))
        if g is None:
            if not allow_unused:
                raise RuntimeError(f"One of the differentiated Tensors (input {i}, shape {list(t.shape)}) appears "
                                   "to not have been used in the graph. Set allow_unused=True if this is the "
                                   "desired behavior.")
            result.append(t._wrap(fill(tuple(t.shape), 0.0, t.dtype)) if materialize else None)
        else:
            result.append(t._wrap(g))

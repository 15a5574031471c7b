"""Compile time grows linearly with the program (issue 11, part 3), checked by counting work, never
by timing: the lines the passes and the lowering execute, and the nodes each pass builds, per node
of a long pending program.  A pass that rebuilds what lies downstream again and again, walks the
graph once per node, or loops over every kernel group for each node shows up as a count that grows
faster than the program.  (`python -m benchmarks.compile_time` measures the time itself.)
"""
from __future__ import annotations

import os
import sys

import numpy as np
import pytest
import torch

import lazytorch as lt
from lazytorch.ir.graph import program
from lazytorch.ir.node import Node, tracing
from lazytorch.passes import pipeline
from lazytorch.passes.fuse import build_plan
from lazytorch.passes.normalize import normalize
from lazytorch.realize import options_for, pending_roots

PASSES_DIR = os.path.dirname(pipeline.__file__) + os.sep
LOWER_FILE = os.path.join(os.path.dirname(os.path.dirname(pipeline.__file__)), "codegen", "lower.py")


# ---------------------------------------------------------------- programs

def chain(lib, steps: int, x):
    """The issue's lazy loop: `y = y * 0.999 + 0.001`, with a tensor read every step."""
    y = x
    for _ in range(steps):
        y = y * 0.999 + 0.001 * x
    return [y]


def mixed(lib, steps: int, x):
    """Three tensors, a relu, casts through float16, and a reduction at the end."""
    a, b, c = x, x.flip(0), x * 0.5
    y = a
    for _ in range(steps):
        y = (y * b + c).relu() * 0.5 - a
        y = y.to(lib.float16).to(lib.float32)
    return [y.sum()]


def wide(lib, steps: int, x):
    """16 independent chains, summed pairwise at the end (a wide DAG)."""
    ys = [x * float(k) for k in range(16)]
    for _ in range(steps // 16):
        ys = [y * 0.5 + 1.0 for y in ys]
    while len(ys) > 1:
        ys = [ys[k] + ys[k + 1] for k in range(0, len(ys), 2)]
    return ys


PROGRAMS = {"chain": chain, "mixed": mixed, "wide": wide}


# ---------------------------------------------------------------- counting

class LineCounter:
    """Counts the lines executed in the pass modules and the lowering (sys.settrace: line events
    only inside those files, so the rest of the program runs untraced)."""

    def __init__(self):
        self.lines = 0

    def _local(self, frame, event, arg):
        if event == "line":
            self.lines += 1
        return self._local

    def _global(self, frame, event, arg):
        f = frame.f_code.co_filename
        if f.startswith(PASSES_DIR) or f == LOWER_FILE:
            return self._local
        return None

    def __enter__(self):
        self._old = sys.gettrace()
        sys.settrace(self._global)
        return self

    def __exit__(self, *exc):
        sys.settrace(self._old)


def compile_counts(name: str, steps: int, backend: str, monkeypatch) -> tuple[int, int, dict[str, int]]:
    """(program nodes, lines executed, nodes built per stage) of compiling program `name`."""
    x = lt.from_numpy(np.linspace(-1, 1, 64, dtype=np.float32))
    roots = pending_roots(t.node for t in PROGRAMS[name](lt, steps, x))
    prog = program(roots)
    options = options_for(backend)
    built = {"n": 0}
    init = Node.__init__

    def counting_init(self, *args, **kwargs):
        built["n"] += 1
        init(self, *args, **kwargs)
    monkeypatch.setattr(Node, "__init__", counting_init)
    per_stage: dict[str, int] = {}
    with LineCounter() as counter, tracing(False):
        params, roots = normalize(prog.order, roots)
        for stage, fn in pipeline.PASSES:
            before = built["n"]
            roots = fn(roots, options)
            per_stage[stage] = built["n"] - before
        before = built["n"]
        plan = build_plan(params, roots, options.max_buffers, options.library_bias)
        per_stage["fuse"] = built["n"] - before
        if backend == "cpu":
            from lazytorch.codegen.lower import lower
            for launch in plan.launches:
                if launch.kind == "kernel":
                    lower(launch)
    monkeypatch.setattr(Node, "__init__", init)
    return len(prog.order), counter.lines, per_stage


# Lines the passes (and, on cpu, the lowering of every kernel) execute per program node, with
# room to spare: about 200-350 now (300-480 before the fusion fast path and the retyped scalar
# params; the third round cut calls and lookups per line more than lines).  A pass that does O(n)
# work per node exceeds it at once.
LINES_PER_NODE = 450
# Nodes a pass builds per program node (now at most 1.0, 1.12, 1.0 and 0): legalize retypes each
# Python float's param and rebuilds the node reading it (a cast node each as well, before: 1.49);
# no pass rebuilds a node more than once.
BUILT_PER_NODE = {"decompose": 1.0, "legalize": 1.2, "simplify": 1.0, "fuse": 0.01}


@pytest.mark.parametrize("backend", ["reference", "cpu"])
@pytest.mark.parametrize("name", sorted(PROGRAMS))
def test_compile_work_grows_linearly(name, backend, monkeypatch):
    small_nodes, small_lines, small_built = compile_counts(name, 64, backend, monkeypatch)
    big_nodes, big_lines, big_built = compile_counts(name, 512, backend, monkeypatch)
    assert big_nodes > 6 * small_nodes
    per_node_small, per_node_big = small_lines / small_nodes, big_lines / big_nodes
    assert per_node_big <= LINES_PER_NODE, (name, per_node_big)
    # linear: the work per node of an 8x longer program is the same, up to fixed costs
    assert per_node_big <= 1.15 * per_node_small, (name, per_node_small, per_node_big)
    for stage, limit in BUILT_PER_NODE.items():
        assert big_built[stage] <= limit * big_nodes + 8, (name, stage, big_built[stage], big_nodes)


def test_rewrite_visits_each_node_once():
    """Every pass built on passes/rewrite.py asks its rule about each node once (plus once for
    each node a rule builds), whatever the shape of the graph."""
    from lazytorch.passes.rewrite import rewrite
    x = lt.from_numpy(np.ones(8, np.float32))
    roots = pending_roots(t.node for t in wide(lt, 160, x))
    order = program(roots).order
    asked: dict[int, int] = {}

    def rule(n: Node):
        asked[id(n)] = asked.get(id(n), 0) + 1
        return None
    with tracing(False):
        out = rewrite(roots, rule)
    assert out == roots                         # nothing replaced: the same nodes come back
    assert len(asked) == len(order) and set(asked.values()) == {1}


def test_long_fused_chain_lowers_and_runs(backend):
    """A reduction over a fused chain of a few hundred nodes: lowering recursed past Python's
    default limit (RecursionError on .item())."""
    data = np.linspace(-1, 1, 1000, dtype=np.float32)
    got = mixed(lt, 150, lt.from_numpy(data))[0].item()
    want = mixed(torch, 150, torch.from_numpy(data))[0].item()
    assert np.isfinite(want)
    assert got == pytest.approx(want, rel=1e-3, abs=1e-3)


def test_long_chain_matches_torch(backend):
    """The issue's loop at 2,000 steps (8,000 pending nodes) gives torch's values."""
    data = np.linspace(-1, 1, 100, dtype=np.float32)
    got = chain(lt, 2000, lt.from_numpy(data))[0].numpy()
    want = chain(torch, 2000, torch.from_numpy(data))[0].numpy()
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)


def test_compile_time_benchmark_reports_every_stage(capsys):
    """`python -m benchmarks.compile_time` (the tool behind docs/reliability.md's figures) runs and
    reports each stage per op node."""
    from benchmarks import compile_time
    previous = lt.get_backend()
    try:
        compile_time.main(["--sizes", "200", "--backend", "reference", "--workload", "chain"])
    finally:
        lt.set_backend(previous)
    line = capsys.readouterr().out.splitlines()[-1]
    assert "201 op nodes (402 IR nodes)" in line      # 100 steps of 2 ops, and the ones() fill
    for stage in ("key", "normalize", "decompose", "legalize", "simplify", "fuse", "prepare"):
        assert f" {stage} " in line


def test_fusion_refusals_grow_linearly():
    """A node that starts a group tries a bounded number of sibling groups: every group of a chain
    that reads one tensor throughout used to be tried (and its refusal recorded), so the refusal
    list (LAZYTORCH_DUMP=fusion) grew with the square of the program (0.93 per op node at 1,024
    steps, 0.27 at 256; now 0.39 and 0.27; op nodes: the 3 mul/add of a step, the Python scalars'
    params being read as they are, without a cast node each)."""
    from lazytorch.realize import kernel_plan
    x = lt.from_numpy(np.linspace(-1, 1, 64, dtype=np.float32))
    plan = kernel_plan(chain(lt, 1024, x), "reference")       # (the cap of 31 buffers: many groups)
    ops = sum(1 for n in plan.nodes if not n.is_leaf)
    assert ops == 3 * 1024
    assert len(plan.refusals) <= 0.5 * ops, (len(plan.refusals), ops)


# ---------------------------------------------------------------- shortcuts that must not change plans

def _graphs():
    """Programs of several shapes: shared inputs, a value read twice by one node, several roots,
    views, casts, reductions, composites."""
    x = lt.from_numpy(np.linspace(-1, 1, 12, dtype=np.float32).reshape(3, 4))
    h = x.to(lt.float16)
    yield [(x * x + 1.5).sum(1)]
    yield [x.softmax(-1), x.t() * 2, (x > 0).to(lt.float32)]
    yield [h * 2.5 + h.exp(), x.add(x, alpha=2), lt.where(x > 0, x, x * 0.5)]
    yield chain(lt, 40, x) + wide(lt, 64, x)


def test_fusion_order_is_toposort_and_its_readers():
    """Fusion's one walk (order_and_users) gives toposort's order and consumers' reader lists."""
    from lazytorch.ir.graph import consumers, toposort
    from lazytorch.passes.fuse import order_and_users
    for tensors in _graphs():
        roots = pending_roots(t.node for t in tensors)
        roots = roots + [roots[0], roots[0].inputs[0]]          # (a root twice, an inner root)
        order, users, pos = order_and_users(roots)
        assert order == toposort(roots)
        assert {id(n): readers for n, readers in users.items()} == consumers(order)
        assert pos == {n: k for k, n in enumerate(order)}


def test_own_compute_dtype_agrees_with_promotion():
    """legalize's shortcut for a node whose tensor inputs all have its float32/float64 dtype gives
    the dtype the promotion rules give (ir.meta.compute_dtype), for every computing op, dtype and
    mix of tensors, 0-d tensors and Python numbers, wherever it answers."""
    import itertools
    from lazytorch.ir import dtypes as D
    from lazytorch.ir.meta import compute_dtype
    from lazytorch.ir.registry import ops
    from lazytorch.passes.legalize import _computing, own_compute_dtype

    def param(kind, dtype, shape):
        return Node("param", (), {"slot": 0, "kind": kind}, shape, dtype)
    answered = 0
    for dtype in D.ALL:
        kinds = [param("buffer", dtype, (3,)), param("buffer", dtype, ()), param("scalar", D.float64, ()),
                 param("scalar", D.int64, ()), param("scalar", D.bool_, ()), Node.scalar(2.0, D.float64),
                 param("buffer", D.float16, (3,)), param("buffer", D.int32, ())]
        for name in ops():
            opdef = _computing(name)
            if opdef is None:
                continue
            for k in (1, 2, 3):
                for inputs in itertools.product(kinds, repeat=k):
                    got = own_compute_dtype(opdef, dtype, inputs)
                    if got is not None:
                        answered += 1
                        assert got is compute_dtype(opdef, list(inputs)), (name, dtype, inputs)
    assert answered > 10000          # (float32 and float64 nodes over their own tensors answer)


def test_rewrite_does_not_ask_about_kept_leaves():
    """Leaves whose op a pass never rewrites are final without asking its rule; every other node
    is asked once."""
    from lazytorch.ir.node import LEAF_OPS
    from lazytorch.passes.rewrite import rewrite
    x = lt.from_numpy(np.ones(8, np.float32))
    roots = pending_roots(t.node for t in chain(lt, 50, x))
    order = program(roots).order
    asked: dict[int, int] = {}

    def rule(n: Node):
        asked[id(n)] = asked.get(id(n), 0) + 1
        return None
    with tracing(False):
        assert rewrite(roots, rule, leaves_kept=LEAF_OPS) == roots
    assert set(asked) == {id(n) for n in order if not n.is_leaf} and set(asked.values()) == {1}


@pytest.mark.parametrize("backend", ["reference", "cpu"])
def test_program_without_composites_plans_the_same_without_decompose(backend):
    """The driver skips decompose's walk for a program without a composite (has_composites); the
    plan, refusals and provenance are those of the full pipeline, and a program with one (softmax,
    add with alpha) is still decomposed."""
    from lazytorch.passes.decompose import has_composites
    from lazytorch.passes.pipeline import compile_plan, fusion_report
    from lazytorch.realize import plan_for
    found = []
    for tensors in _graphs():
        roots = pending_roots(t.node for t in tensors)
        prog = program(roots)
        found.append(has_composites(prog.order))
        fast = plan_for(prog.order, roots, backend)
        params, norm = normalize(prog.order, roots)
        full = compile_plan(params, norm, options_for(backend))        # (composites: walked)
        assert fusion_report(fast) == fusion_report(full)
        assert [n.origin for n in fast.nodes] == [n.origin for n in full.nodes]
    assert found == [False, True, True, False]


def test_cpu_launch_structures_are_worked_out_once_per_plan():
    """The plan-index key and the rendering of a plan's kernels share one walk of its launches."""
    from lazytorch.realize import kernel_plan
    from lazytorch.runtime.cpu import launch_structures
    x = lt.from_numpy(np.ones(8, np.float32))
    plan = kernel_plan(chain(lt, 20, x), "cpu")
    assert launch_structures(plan) is launch_structures(plan)
    assert launch_structures(kernel_plan(chain(lt, 20, x), "cpu")) == launch_structures(plan)

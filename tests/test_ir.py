"""IR dumps (text, DOT, networkx) and the structural key the graph cache uses."""
import re

import networkx as nx
import numpy as np

import lazytorch as lt
from lazytorch.ir.graph import structural_key, toposort


def key(*tensors):
    return structural_key(toposort([t.node for t in tensors]))


def test_dump_lines():
    x = lt.from_numpy(np.ones((2, 3), dtype=np.float32))
    w = lt.from_numpy(np.ones((3, 4), dtype=np.float32))
    y = (x.t()[1:] * 2.0).sum(0)
    lines = lt.dump(y, x + 1).splitlines()
    assert lines[0] == "%0 : f32[2, 3] = buffer()"
    assert lines[1] == "%1 : f32[2, 2] = view(%0, view=View([2, 2], strides=[1, 3], offset=1))"
    assert lines[2] == "%2 : f64[] = scalar(2.0)"
    assert lines[3] == "%3 : f32[2, 2] = mul(%1, %2)"
    assert re.fullmatch(r"%4 : f32\[2\] = sum\(%3, dim=\(0,\).*\)", lines[4]), lines[4]
    assert lines[-1].startswith("return (%4, ")
    assert len(lines) == 8                           # + scalar 1, add, return
    del w


def test_dump_names_each_node_once_and_shares():
    x = lt.zeros(3)
    y = x + x
    text = lt.dump(y)
    assert text.count("full(") == 1 and "add(%1, %1)" in text


def test_dump_after_eval_is_a_buffer():
    x = lt.randn(4, 4)
    y = (x @ x).relu() if hasattr(x, "__matmul__") else (x * x).relu()
    lt.eval(y)
    assert lt.dump(y).splitlines() == ["%0 : f32[4, 4] = buffer()", "return (%0)"]
    z = y + 1                                       # new work builds on the buffer, not on history
    assert len(lt.dump(z).splitlines()) == 4


def test_to_dot():
    x = lt.ones(2, 2)
    dot = lt.to_dot(x.t() + x)
    assert dot.startswith("digraph lazytorch {") and dot.rstrip().endswith("}")
    assert dot.count("->") == 4                      # scalar->full, full->view, view->add, full->add
    assert 'add\\nf32[2, 2]' in dot and "view" in dot


def test_to_networkx():
    x = lt.ones(2, 3)
    g = lt.to_networkx((x * 2).sum(1))
    assert isinstance(g, nx.MultiDiGraph) and nx.is_directed_acyclic_graph(g)
    ops = [g.nodes[n]["op"] for n in nx.topological_sort(g)]
    assert ops[-1] == "sum" and "mul" in ops and g.number_of_nodes() == 5
    last = max(g.nodes)
    assert g.nodes[last]["shape"] == (2,) and g.nodes[last]["dtype"] == "float32"


def _program(x, s=2.0):
    return (x.t() * s + 1).exp()


def test_structural_key_ignores_data_and_scalar_values():
    a = _program(lt.randn(3, 4))
    b = _program(lt.randn(3, 4))
    c = _program(lt.randn(3, 4), s=5.0)
    assert key(a) == key(b) == key(c)


def test_structural_key_sees_shapes_dtypes_layouts():
    base = key(_program(lt.randn(3, 4)))
    assert key(_program(lt.randn(4, 3))) != base
    assert key(_program(lt.randn(3, 4, dtype=lt.float64))) != base
    x = lt.randn(3, 8)[:, ::2]                      # same shape, different view layout
    assert key(_program(x)) != base
    assert key((lt.randn(4, 3).t() * 2.0 + 1).exp()) != base
    assert key(_program(lt.randn(3, 4), s=2)) != base   # an int scalar is another dtype


def test_structural_key_sees_aliasing():
    x, y = lt.randn(3), lt.randn(3)
    assert key(x + x) != key(x + y)
    assert key(x + y) == key(y + x)                  # same structure, leaves swapped

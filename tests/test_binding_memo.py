"""ir/build.py::bind remembers how each call shape bound (op, argument classes, keyword names) and
binds a repeated shape without Schema.bind's checks: the remembered binding must equal the full
one for every kind of call (varargs packed into a list, keywords, defaults, overloads, tensor
lists), and errors and value-dependent arguments (numpy arrays) must never be remembered."""
from __future__ import annotations

import numpy as np
import pytest

import lazytorch as lt
from lazytorch.ir import build
from lazytorch.ir.registry import get

X = lt.from_numpy(np.arange(24, dtype=np.float32).reshape(2, 3, 4))
W = lt.from_numpy(np.ones((5, 4), np.float32))
B = lt.from_numpy(np.ones(5, np.float32))

CALLS = [
    ("view", (X, 6, 4), {}),                       # trailing ints packed into the size list
    ("view", (X, (4, 6)), {}),
    ("view", (X, [2, 12]), {}),
    ("sum", (X,), {"dim": 1, "keepdim": True}),    # keywords, a default left out
    ("sum", (X, (0, 2)), {}),
    ("linear", (X, W, B), {}),
    ("linear", (X, W), {}),                        # bias=None from the default
    ("softmax", (X,), {"dim": -1}),
    ("transpose", (X, 0, 2), {}),
    ("add", (X, 2.0), {}),
    ("add", (X, X), {"alpha": 3}),
    ("cat", ([X, X],), {"dim": 1}),                # a tensor list
    ("einsum", ("abc,abc->ab", X, X), {}),         # trailing tensors packed into the list
    ("zeros", (2, 3), {}),
    ("full", ((2,), 1.5), {}),
    ("arange", (1, 7, 2), {}),                     # the overload with start, end, step
    ("arange", (5,), {}),
]


def bound_fully(op, args, kwargs):
    for schema in op.schemas:
        try:
            return schema, schema.bind(args, kwargs)
        except TypeError:
            continue
    raise AssertionError("no overload fits")


@pytest.mark.parametrize("name,args,kwargs", CALLS, ids=[f"{c[0]}-{i}" for i, c in enumerate(CALLS)])
def test_a_remembered_binding_equals_the_full_one(name, args, kwargs):
    op = get(name)
    want_schema, want = bound_fully(op, args, kwargs)
    for _ in range(3):                             # the first binds fully, the others remember
        schema, got = build.bind(op, args, dict(kwargs))
        assert schema is want_schema
        assert got.keys() == want.keys()
        for k, v in want.items():
            assert got[k] is v or got[k] == v, (k, got[k], v)
    assert build._call_shape(op.name, args, kwargs) in build._BINDINGS


def test_values_of_one_shape_bind_their_own_values():
    op = get("view")
    for size in ((4, 6), (2, 12), (3, 8), (24,), (1, 24)):
        _, got = build.bind(op, (X, *size), {})
        assert got == bound_fully(op, (X, *size), {})[1]             # (24,) binds size=24, unpacked
        assert tuple(lt.from_numpy(np.arange(24, dtype=np.float32)).view(*size).shape) == size


def test_errors_and_numpy_arguments_are_not_remembered():
    op = get("transpose")
    shape = build._call_shape(op.name, (X, 0.5, 1), {})
    for _ in range(2):
        with pytest.raises(TypeError, match="transpose"):
            build.bind(op, (X, 0.5, 1), {})
    assert shape not in build._BINDINGS
    # an ndarray counts as a number only when 0-d: its class alone does not decide, so no memo
    assert build._call_shape("add", (X, np.float32(2.0)), {}) is None
    assert build._call_shape("add", (X, np.ones(3)), {}) is None
    np.testing.assert_array_equal((X + np.float32(2.0)).numpy(), np.arange(24).reshape(2, 3, 4) + 2.0)

"""Tree keys (ir/graph.py): the Tensor API's fast path keys pointwise trees as it builds them, and
eval looks them up without walking the program.  Two programs share a tree id exactly when their
structure is equal; every program here is also checked against numpy in float64."""
from __future__ import annotations

import numpy as np
import pytest

import lazytorch as lt
from lazytorch.ir.node import EPOCH

pytestmark = pytest.mark.usefixtures("fresh_cache")

RNG = np.random.default_rng(7)
A = RNG.standard_normal(6).astype(np.float32)
B = RNG.standard_normal(6).astype(np.float32)


@pytest.fixture
def fresh_cache(backend):
    lt.cache_clear()
    yield
    lt.cache_clear()


def tree_id(t: lt.Tensor) -> int | None:
    """The tree id of a tensor's pending node (None: no valid summary, eval walks the program)."""
    tree = t.node.tree
    return tree[1] if tree is not None and tree[0] == EPOCH[0] else None


def built(fn, *arrays):
    """fn applied to fresh tensors, built twice so the fast path's memo is warm for every op."""
    fn(*[lt.from_numpy(a.copy()) for a in arrays])
    return fn(*[lt.from_numpy(a.copy()) for a in arrays])


def check(t: lt.Tensor, want: np.ndarray) -> None:
    np.testing.assert_allclose(t.numpy(), want, rtol=2e-6, atol=1e-6)


# pairs of programs whose structures differ: their tree ids must differ, and each computes its own
# value (a shared key would run one program's kernel on the other's leaves)
DIFFERENT = {
    "op": (lambda x: x * 2.0 + 1.0, lambda x: x * 2.0 - 1.0),
    "scalar position": (lambda x: x - 2.0, lambda x: 2.0 - x),
    "scalar type": (lambda x: x * 2, lambda x: x * 2.0),
    "bool scalar": (lambda x: x * True, lambda x: x * 1),
    "order of ops": (lambda x: (x + 1.0) * 3.0, lambda x: x * 3.0 + 1.0),
    "depth": (lambda x: x * 2.0, lambda x: x * 2.0 * 2.0),
}
UNARY = {"exp": (lt.exp, np.exp), "sin": (lt.sin, np.sin), "neg": (lt.neg, np.negative)}


def test_unary_ops_have_different_ids():
    made = {k: built(lambda x, f=f: f(x * 0.5) + 1.0, A) for k, (f, _) in UNARY.items()}
    assert len({tree_id(t) for t in made.values()}) == len(UNARY) and None not in {tree_id(t) for t in made.values()}
    for k, t in made.items():
        check(t, UNARY[k][1](A.astype(np.float64) * 0.5) + 1)


@pytest.mark.parametrize("name", list(DIFFERENT))
def test_different_structures_have_different_ids(name):
    f, g = DIFFERENT[name]
    fx, gx = built(f, A), built(g, A)
    assert tree_id(fx) is not None and tree_id(gx) is not None
    assert tree_id(fx) != tree_id(gx)
    want = {k: fn(A.astype(np.float64)) for k, fn in (("f", f), ("g", g))}
    check(fx, want["f"])
    check(gx, want["g"])


@pytest.mark.parametrize("shape, dtype", [((6,), np.int32), ((2, 3), np.float32), ((7,), np.float32)])
def test_shape_and_dtype_are_structure(shape, dtype):
    x = RNG.standard_normal(shape).astype(dtype)
    base, other = built(lambda t: t * 2.0 + 1.0, A), built(lambda t: t * 2.0 + 1.0, x)
    assert tree_id(base) != tree_id(other)
    check(other, x.astype(np.float64) * 2 + 1)
    check(base, A.astype(np.float64) * 2 + 1)


def test_same_structure_new_data_and_scalars_share_one_compile():
    f = lambda x, s: (x * s + 0.5) / (s + 1.0)                    # noqa: E731
    f(lt.from_numpy(A), 1.5)                                         # (warms the memo of each op)
    lt.cache_clear()
    ids = []
    for data, s in ((A, 1.5), (B, 1.5), (B, -3.25), (A * 7, 0.125)):
        y = f(lt.from_numpy(data.copy()), s)
        ids.append(tree_id(y))
        check(y, (data.astype(np.float64) * s + 0.5) / (s + 1.0))
    assert len(set(ids)) == 1 and ids[0] is not None
    info = lt.cache_info()
    assert (info.misses, info.hits) == (1, 3)


def test_two_leaves_in_either_order():
    f = lambda x, y: (x * 2.0) + (y * 3.0)                          # noqa: E731
    xy = built(f, A, B)
    yx = f(lt.from_numpy(B.copy()), lt.from_numpy(A.copy()))
    assert tree_id(xy) == tree_id(yx) is not None                  # same structure, leaves swapped
    check(xy, A.astype(np.float64) * 2 + B.astype(np.float64) * 3)
    check(yx, B.astype(np.float64) * 2 + A.astype(np.float64) * 3)


@pytest.mark.parametrize("name, fn", [
    ("x + x", lambda x: x + x),
    ("(x + 1) * x", lambda x: (x + 1.0) * x),
    ("x * (x * 2)", lambda x: x * (x * 2.0)),
])
def test_shared_leaves_are_not_trees(name, fn):
    """A leaf read twice is sharing, which a tree id cannot express: such programs keep the walk
    (and its key, which distinguishes shared from distinct leaves)."""
    y = built(fn, A)
    assert tree_id(y) is None
    check(y, fn(A.astype(np.float64)))


def test_shared_and_distinct_leaves_do_not_meet():
    shared = built(lambda x: (x * 2.0) + x, A)
    x, other = lt.from_numpy(A.copy()), lt.from_numpy(B.copy())
    distinct = (x * 2.0) + other
    assert tree_id(shared) is None and tree_id(distinct) is not None
    check(shared, A.astype(np.float64) * 3)
    check(distinct, A.astype(np.float64) * 2 + B)


def test_a_realized_input_makes_summaries_stale():
    (lt.from_numpy(A.copy()) * 2.0) + 1.0     # warms the fast path's memo (a test run alone has it cold)
    x = lt.from_numpy(A.copy())
    y = x * 2.0
    z = y + 1.0
    before = tree_id(z)
    assert before is not None
    lt.eval(y)                                 # cuts z's program at y: z now reads y's buffer
    assert tree_id(z) is None
    check(z, A.astype(np.float64) * 2 + 1)


def test_live_tensors_are_still_synced():
    x = lt.from_numpy(A.copy())
    a = x * 2.0
    b = a + 1.0
    check(b, A.astype(np.float64) * 2 + 1)
    assert not a.is_lazy                       # a lives: its pending value was stored with b's
    check(a, A.astype(np.float64) * 2)


def test_views_take_the_walk():
    x = lt.from_numpy(np.arange(12, dtype=np.float32))
    v = x[::2] * 2.0 + 1.0
    check(v, np.arange(12)[::2] * 2.0 + 1.0)
    w = x.reshape(3, 4).t() * 3.0
    check(w, np.arange(12).reshape(3, 4).T * 3.0)


def test_long_chains_stop_summarising_and_stay_right():
    x = lt.from_numpy(A.copy())
    y, want = x, A.astype(np.float64)
    for i in range(150):
        y = y * 1.001 + 0.001
        want = want * 1.001 + 0.001
    assert tree_id(y) is None                  # (601 nodes: over MAX_TREE_NODES)
    np.testing.assert_allclose(y.numpy(), want, rtol=3e-4, atol=1e-5)   # (float32 over 300 ops)


def test_integer_and_bool_scalars():
    x = lt.from_numpy(np.arange(6, dtype=np.int64))
    y = built(lambda t: (t * 3 + 7) // 2, np.arange(6, dtype=np.int64))
    check(y, (np.arange(6) * 3 + 7) // 2)
    m = built(lambda t: (t > 2) & True, np.arange(6, dtype=np.int64))
    np.testing.assert_array_equal(m.numpy(), np.arange(6) > 2)
    check(x * 2.5, np.arange(6) * 2.5)


def test_long_unary_chains_stop_summarising():
    x = lt.from_numpy(A.copy())
    y, want = x, A.astype(np.float64)
    for _ in range(300):                       # one leaf, 301 nodes
        y = lt.neg(y)
        want = -want
    assert tree_id(y) is None
    check(y, want)


def test_branches_of_one_chain_keep_their_own_leaves():
    """Summaries along a chain share one leaf list (each owns its first n entries); a second branch
    from the same prefix copies it, so every branch binds its own numbers, and the prefix too."""
    built(lambda x: ((x * 2.0) + 1.0) * 3.0 + (x - 5.0) / 4.0, A)     # (warms each op's memo)
    x = lt.from_numpy(A.copy())
    base = x * 2.0
    left = base + 1.0                          # extends the shared list
    right = base - 5.0                         # the list is past base's entries: copies them
    both = left * 3.0 + (right / 4.0)          # two trees joined (disjoint scalar leaves, one x)
    again = left * 7.0                         # left's entries were extended by `both`: copies
    a64 = A.astype(np.float64)
    for t in (base, left, right, again):
        assert tree_id(t) is not None
    assert tree_id(both) is None               # x is read by both sides: not a tree
    check(again, (a64 * 2 + 1) * 7)
    check(right, a64 * 2 - 5)
    check(both, (a64 * 2 + 1) * 3 + (a64 * 2 - 5) / 4)
    check(left, a64 * 2 + 1)
    check(base, a64 * 2)


def test_joined_trees_of_chains_with_shared_lists():
    built(lambda x, y: (x * 2.0 + 1.0) * (y - 3.0), A, B)
    x, y = lt.from_numpy(A.copy()), lt.from_numpy(B.copy())
    p = x * 2.0
    q = p + 1.0
    r = p + 5.0                                # (p's list now belongs to q's chain: r copies it)
    j = q * (y - 3.0)
    k = r * (lt.from_numpy(B.copy()) - 3.0)
    assert tree_id(j) is not None and tree_id(j) == tree_id(k)
    a64, b64 = A.astype(np.float64), B.astype(np.float64)
    check(k, (a64 * 2 + 5) * (b64 - 3))
    check(j, (a64 * 2 + 1) * (b64 - 3))


def test_joined_trees_get_their_own_list():
    """ir/build.py::joined copies: a pending node's list never holds another chain's buffers."""
    from lazytorch.ir.build import joined
    x, y = lt.from_numpy(A.copy()).node, lt.from_numpy(B.copy()).node
    s1, s2 = lt.tensor(1.0).node, lt.tensor(2.0).node
    left = [x, s1, s2]                         # (s2: appended by another chain, past left's 2)
    out, n = joined(left, 2, [y, s2, s1], 2)   # (only the first 2 of the right list are its leaves)
    assert out is not left and n == 4 and out == [x, s1, y, s2]
    assert left == [x, s1, s2]


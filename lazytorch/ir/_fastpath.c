/* The IR's hottest Python in C: what every call of a model's forward and backward runs.
 *
 * The parts, each the C version of a Python function that stays the definition (installed by
 * ir/native.py's users only where this module builds; LAZYTORCH_NATIVE=0 turns them off;
 * tests/test_fastpath.py compares each with its Python):
 * - FastOp: ir/build.py::fast_builder's `build`, the Tensor API's operators and pointwise
 *   functions of one or two operands.  Its first branch, `tensor <op> number` inside a tree (a
 *   non-view Tensor, pending or realized, a Python number, the operand's tree summary current and
 *   the result's record in the number class's chain table), is the one a chain of scalar ops takes
 *   at every op: in Python a frame and about 150 bytecodes an op.  Its general branch (non-view
 *   Tensors and numbers whose signature the memo knows: `x + y`, `x.sigmoid()`, `2.0 * x`) about
 *   300.  Step for step in the same order (see the Python for why each step is there); every
 *   other call, and these branches' rare misses, go to the Python `build` it wraps (or, with
 *   keywords, to the Tensor API function), so binding, meta rules and errors stay the general
 *   route's.  A reflected dunder's (`2.0 - x`) swaps its two operands first.
 * - ApiCall: lazytorch/call_memo.py's CallMemo.replay, a Tensor API call of a known signature
 *   (`F.linear`, `x.view`: the function's and the replay's frames, about 150 bytecodes a call).
 * - Signer: ir/replay.py::signature, the key of a recorded build (about 200 bytecodes a call).
 * - Replayer: ir/replay.py::Recording.replay, the nodes of a recorded build.
 * - SiteFinder: ir/node.py::user_site, the user's line a node names.
 * - LeafArgs: ir/graph.py::leaf_args, a program's run arguments from its leaves (an eval's every
 *   call: a listcomp of ~11 bytecodes a leaf, ~0.9 us for W7's 21).
 * - AloneTaker: realize.py's LiveTensors.alone where no other live tensor is pending (an eval of
 *   one tensor's tree: every lazy call of a chain).
 * - ProgramMaker: ir/graph.py::program, the order, key and leaves of a pending program (every
 *   eval that is not a tree: ~0.1-0.2 ms in Python for W9's 232 nodes, 6 to 8 times less here),
 *   and ::pending_positions and ::reaches, the live-tensor sync's lookups (realize.py
 *   LiveTensors.synced), in Positions tables keyed by node address (and ::reach_memo).
 * - Classifier: autograd/state.py::classify, which new nodes require grad and their snapshots
 *   (every op built while grad mode is on).
 *
 * Objects are made as `object.__new__(cls)` makes them (tp_alloc) and their __slots__ written
 * through the member descriptors' offsets, read once when a FastOp is made.  The GIL is held
 * from the first test to the return except where Python code runs (the calls named, and on 3.11
 * a collection inside an allocation): none lies between the shared leaf list's length test and
 * its append, which so needs none of the Python's re-check, and what is read before one is held
 * (hot_build).
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <structmember.h>

/* Node's and Tensor's slots this writes, in the order of the tables below. */
enum { N_OP, N_INPUTS, N_ATTRS, N_SHAPE, N_DTYPE, N_KEY, N_BUFFER, N_VALUE, N_ORIGIN, N_TREE,
       N_AUTOGRAD, N_SLOTS };
static const char *NODE_SLOTS[N_SLOTS] = {"op", "inputs", "attrs", "shape", "dtype", "_key", "buffer",
                                          "value", "_origin", "tree", "autograd"};
enum { T_NODE, T_BASE, T_SPEC, T_GRAD, T_BASE_VERSION, T_VERSION, T_SLOTS };
static const char *TENSOR_SLOTS[T_SLOTS] = {"_node", "_base", "_spec", "_grad", "_base_version", "_version"};
static const char *MODE_SLOTS[1] = {"any_leaf"};

/* What a C stand-in for a Tensor API function needs to make pending Tensors (tensor.py `pending`)
 * and name their nodes' origin (ir/node.py's provenance): shared by FastOp and ApiCall. */
typedef struct {
    PyTypeObject *node_type;
    PyTypeObject *wrap;        /* Tensor */
    PyObject *mode, *track, *live, *compact_at, *compact;   /* tensor.py PENDING_PARTS */
    PyObject *trace, *user_code, *inside, *user_site;       /* ir/node.py's */
    PyObject *shared;          /* host_data.py SHARED: id(buffer) -> arrays out to the user */
    Py_ssize_t any_leaf_at;    /* the autograd mode's slot `any_leaf` */
    Py_ssize_t node_at[N_SLOTS];
    Py_ssize_t tensor_at[T_SLOTS];
} Parts;

typedef struct {
    PyObject_HEAD
    vectorcallfunc vectorcall;
    PyObject *dict;            /* __name__, __qualname__, __doc__ (the Tensor API sets them) */
    Parts p;
    PyObject *fallback;        /* ir/build.py's `build`: every call of one or two operands this does not take */
    PyObject *outer;           /* every other call (keywords, other counts): `build` too, or the
                                * Tensor API function this stands for (api.py make_function) */
    PyObject *name;            /* the op's name, the result node's op */
    PyObject *hot;             /* number class -> (dtype, scalar leaf key, its tree id, chain table) */
    PyObject *chained;         /* (h, node, tree id, size) -> record or None: a chain table's miss */
    PyObject *epoch;           /* ir/node.py's EPOCH */
    PyObject *no_attrs;        /* scalar leaves' shared empty attrs */
    PyObject *leaf_trees;      /* ir/graph.py LEAF_TREES: (shape, dtype) of a buffer leaf -> its tree id */
    PyObject *memo;            /* operand signature -> (attrs, shape, dtype, key, op tree id) */
    PyObject *trees, *tree_id; /* ir/graph.py TREES and tree_id (its miss) */
    Py_ssize_t last;           /* MAX_TREE_NODES - 1 */
    int swapped;               /* a reflected dunder (`2.0 - x`): the two operands build swapped */
} FastOp;

/* Every object a FastOp holds (for traverse and clear): its own arguments first, in the order
 * fastop_new stores them, then its Parts'. */
#define PARTS_HELD(Type)                                                                           \
    offsetof(Type, p.node_type), offsetof(Type, p.wrap), offsetof(Type, p.mode), offsetof(Type, p.track),     \
    offsetof(Type, p.live), offsetof(Type, p.compact_at), offsetof(Type, p.compact), offsetof(Type, p.trace), \
    offsetof(Type, p.user_code), offsetof(Type, p.inside), offsetof(Type, p.user_site), offsetof(Type, p.shared)
static const Py_ssize_t HELD[] = {
    offsetof(FastOp, fallback), offsetof(FastOp, name), offsetof(FastOp, hot), offsetof(FastOp, chained),
    offsetof(FastOp, epoch), offsetof(FastOp, no_attrs), offsetof(FastOp, leaf_trees), offsetof(FastOp, memo),
    offsetof(FastOp, trees), offsetof(FastOp, tree_id), offsetof(FastOp, outer),
    PARTS_HELD(FastOp), offsetof(FastOp, dict),
};
#define FIELD(obj, at) (*(PyObject **)((char *)(obj) + (at)))

/* tp_traverse, tp_clear and tp_dealloc of a type whose held objects' offsets are listed in `held`,
 * and the type itself: a callable object (vectorcall), with a __dict__ for the names Python sets
 * on it, and `flags`/`get` for the method types. */
#define HELD_GC(prefix, Type, held)                                                              \
    static int prefix##_traverse(Type *self, visitproc visit, void *arg) {                       \
        for (size_t i = 0; i < sizeof held / sizeof *held; i++) Py_VISIT(FIELD(self, held[i]));  \
        return 0;                                                                                \
    }                                                                                            \
    static int prefix##_clear(Type *self) {                                                      \
        for (size_t i = 0; i < sizeof held / sizeof *held; i++) Py_CLEAR(FIELD(self, held[i])); \
        return 0;                                                                                \
    }                                                                                            \
    static void prefix##_dealloc(Type *self) {                                                   \
        PyObject_GC_UnTrack(self);                                                               \
        prefix##_clear(self);                                                                    \
        Py_TYPE(self)->tp_free((PyObject *)self);                                                \
    }
#define CALLABLE_TYPE(prefix, Type, name, doc, flags, get, methods, members)                     \
    static PyTypeObject prefix##_type = {                                                        \
        PyVarObject_HEAD_INIT(NULL, 0)                                                           \
        .tp_name = "lazytorch.ir._fastpath." name,                                               \
        .tp_doc = doc,                                                                           \
        .tp_basicsize = sizeof(Type),                                                            \
        .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC | Py_TPFLAGS_HAVE_VECTORCALL | (flags), \
        .tp_new = prefix##_new,                                                                  \
        .tp_dealloc = (destructor)prefix##_dealloc,                                              \
        .tp_traverse = (traverseproc)prefix##_traverse,                                          \
        .tp_clear = (inquiry)prefix##_clear,                                                     \
        .tp_call = PyVectorcall_Call,                                                            \
        .tp_vectorcall_offset = offsetof(Type, vectorcall),                                      \
        .tp_descr_get = get,                                                                     \
        .tp_dictoffset = offsetof(Type, dict),                                                   \
        .tp_methods = methods,                                                                   \
        .tp_members = members,                                                                   \
        .tp_getattro = PyObject_GenericGetAttr,                                                  \
        .tp_setattro = PyObject_GenericSetAttr,                                                  \
    };

/* The type of a C stand-in for a Python function (FastOp, ApiCall): a method descriptor, as a
 * function is (`x.view(2, 3)` calls it unbound), copied as a function is (`prefix`_methods'
 * __reduce__), its `__wrapped__` the function it stands for (its `outer`). */
#define STAND_IN_TYPE(prefix, Type, name, doc, wrapped_doc)                                       \
    static PyMemberDef prefix##_members[] = {                                                    \
        {"__wrapped__", T_OBJECT, offsetof(Type, outer), READONLY, wrapped_doc},                 \
        {NULL},                                                                                  \
    };                                                                                           \
    CALLABLE_TYPE(prefix, Type, name, doc, Py_TPFLAGS_METHOD_DESCRIPTOR, fastop_get, fastop_methods, prefix##_members)

static PyObject *SCALAR;      /* "scalar" */
static PyObject *BUFFER;      /* "buffer" */
static PyObject *VIEW, *PARAM, *NODE_ATTR, *KEY_ATTR;
static PyObject *ZERO, *ONE;
static char not_taken_marker;
#define NOT_TAKEN ((PyObject *)&not_taken_marker)

#define SLOT(obj, at) (*(PyObject **)((char *)(obj) + (at)))

/* Store a new reference into a fresh object's empty slot. */
static inline void put(PyObject *obj, Py_ssize_t at, PyObject *value) {
    Py_INCREF(value);
    SLOT(obj, at) = value;
}

static int slot_offsets(PyTypeObject *type, const char **names, int n, Py_ssize_t *at) {
    for (int i = 0; i < n; i++) {
        /* (a static builtin type has no tp_dict from Python 3.12: `object` given as the node type) */
        PyObject *d = type->tp_dict == NULL ? NULL : PyDict_GetItemString(type->tp_dict, names[i]);
        if (d == NULL || !Py_IS_TYPE(d, &PyMemberDescr_Type) ||
            (((PyMemberDescrObject *)d)->d_member->flags & READONLY)) {
            PyErr_Format(PyExc_TypeError, "lazytorch.ir._fastpath: %s.%s is not a writable slot", type->tp_name,
                         names[i]);
            return -1;
        }
        at[i] = ((PyMemberDescrObject *)d)->d_member->offset;
    }
    return 0;
}

/* New references to `values` (NULL: none) in a fresh object's fields at the offsets `held` lists. */
static void hold(PyObject *self, const Py_ssize_t *held, PyObject *const *values, size_t n) {
    for (size_t i = 0; i < n; i++) {
        Py_XINCREF(values[i]);
        FIELD(self, held[i]) = values[i];
    }
}

/* A Parts from its constructor arguments (`live`: tensor.py PENDING_PARTS), and the slots it reads
 * and writes: 0, or -1 with an exception (what it took is then the caller's to clear). */
static int parts_init(Parts *p, PyObject *node_type, PyObject *wrap, PyObject *live, PyObject *trace,
                      PyObject *user_code, PyObject *inside, PyObject *user_site, PyObject *shared) {
    PyObject *mode, *track, *list, *compact_at, *compact;
    if (!PyArg_ParseTuple(live, "OOO!O!O:live", &mode, &track, &PyList_Type, &list, &PyList_Type, &compact_at,
                          &compact))
        return -1;
    PyObject *values[] = {node_type, wrap, mode, track, list, compact_at, compact, trace, user_code, inside,
                          user_site, shared};
    PyObject **fields[] = {(PyObject **)&p->node_type, (PyObject **)&p->wrap, &p->mode, &p->track, &p->live,
                           &p->compact_at, &p->compact, &p->trace, &p->user_code, &p->inside, &p->user_site,
                           &p->shared};
    for (size_t i = 0; i < sizeof values / sizeof *values; i++) {
        Py_INCREF(values[i]);
        *fields[i] = values[i];
    }
    if (slot_offsets(p->node_type, NODE_SLOTS, N_SLOTS, p->node_at) < 0 ||
        slot_offsets(p->wrap, TENSOR_SLOTS, T_SLOTS, p->tensor_at) < 0 ||
        slot_offsets(Py_TYPE(p->mode), MODE_SLOTS, 1, &p->any_leaf_at) < 0)
        return -1;
    return 0;
}

/* The node's origin, as the Python's provenance lines: (code, f_lasti) of the calling frame when
 * it is the user's, else ir/node.py user_site(1) (which walks out of the package from there). */
static PyObject *origin(Parts *p) {
    PyObject *on = PyList_GetItem(p->trace, 0);
    if (on == NULL) return NULL;
    int traced = PyObject_IsTrue(on);
    if (traced <= 0) {
        if (traced < 0) return NULL;
        Py_RETURN_NONE;
    }
    PyFrameObject *frame = PyEval_GetFrame();
    if (frame == NULL) Py_RETURN_NONE;
    PyCodeObject *code = PyFrame_GetCode(frame);
    int users = PyList_GetItem(p->user_code, 0) == (PyObject *)code;
    if (!users) {
        PyObject *id = PyLong_FromVoidPtr(code);
        if (id == NULL) { Py_DECREF(code); return NULL; }
        PyObject *mine = PyDict_GetItemWithError(p->inside, id);
        Py_DECREF(id);
        if (mine == NULL && PyErr_Occurred()) { Py_DECREF(code); return NULL; }
        users = mine == Py_False;
    }
    if (!users) {
        Py_DECREF(code);
        return PyObject_CallOneArg(p->user_site, ONE);
    }
    Py_INCREF(code);
    if (PyList_SetItem(p->user_code, 0, (PyObject *)code) < 0) { Py_DECREF(code); return NULL; }
    PyObject *lasti = PyLong_FromLong(PyFrame_GetLasti(frame));
    if (lasti == NULL) { Py_DECREF(code); return NULL; }
    PyObject *site = PyTuple_Pack(2, (PyObject *)code, lasti);
    Py_DECREF(code);
    Py_DECREF(lasti);
    return site;
}

/* The scalar leaf of number `b` (h: its class's hot entry). */
static PyObject *scalar_leaf(FastOp *self, PyObject *h, PyObject *b) {
    PyObject *nb = self->p.node_type->tp_alloc(self->p.node_type, 0);
    if (nb == NULL) return NULL;
    const Py_ssize_t *at = self->p.node_at;
    PyObject *empty = PyTuple_New(0);
    put(nb, at[N_OP], SCALAR);
    SLOT(nb, at[N_INPUTS]) = empty;
    put(nb, at[N_ATTRS], self->no_attrs);
    put(nb, at[N_SHAPE], empty);
    put(nb, at[N_DTYPE], PyTuple_GET_ITEM(h, 0));
    put(nb, at[N_BUFFER], Py_None);
    put(nb, at[N_VALUE], b);
    put(nb, at[N_KEY], PyTuple_GET_ITEM(h, 1));
    put(nb, at[N_ORIGIN], Py_None);
    put(nb, at[N_TREE], Py_None);
    put(nb, at[N_AUTOGRAD], Py_None);
    return nb;
}

/* The result's tree summary: the operand's `t` with the scalar leaf appended (the leaf list is
 * shared along a chain; ir/graph.py tree keys), or None past MAX_TREE_NODES. */
static PyObject *summary(FastOp *self, PyObject *t, PyObject *record, PyObject *nb) {
    Py_ssize_t n = PyLong_AsSsize_t(PyTuple_GET_ITEM(t, 3));
    Py_ssize_t size = PyLong_AsSsize_t(PyTuple_GET_ITEM(t, 4));
    if ((n == -1 || size == -1) && PyErr_Occurred()) return NULL;
    if (size >= self->last) Py_RETURN_NONE;
    PyObject *leaves = PyTuple_GET_ITEM(t, 2);
    if (!PyList_CheckExact(leaves)) { PyErr_SetString(PyExc_TypeError, "FastOp: a tree's leaves are a list"); return NULL; }
    if (PyList_GET_SIZE(leaves) != n)
        leaves = PyList_GetSlice(leaves, 0, n);
    else
        Py_INCREF(leaves);
    if (leaves == NULL || PyList_Append(leaves, nb) < 0) { Py_XDECREF(leaves); return NULL; }
    PyObject *tree = PyTuple_New(5);
    PyObject *count = PyLong_FromSsize_t(n + 1), *nodes = PyLong_FromSsize_t(size + 2);
    if (tree == NULL || count == NULL || nodes == NULL) {
        Py_XDECREF(tree); Py_XDECREF(count); Py_XDECREF(nodes); Py_DECREF(leaves);
        return NULL;
    }
    Py_INCREF(PyTuple_GET_ITEM(t, 0));
    Py_INCREF(PyTuple_GET_ITEM(record, 4));
    PyTuple_SET_ITEM(tree, 0, PyTuple_GET_ITEM(t, 0));
    PyTuple_SET_ITEM(tree, 1, PyTuple_GET_ITEM(record, 4));
    PyTuple_SET_ITEM(tree, 2, leaves);
    PyTuple_SET_ITEM(tree, 3, count);
    PyTuple_SET_ITEM(tree, 4, nodes);
    return tree;
}

/* The pending Tensor of `node` (tensor.py `pending`). */
static PyObject *pending(Parts *p, PyObject *node) {
    PyObject *out = p->wrap->tp_alloc(p->wrap, 0);
    if (out == NULL) return NULL;
    const Py_ssize_t *at = p->tensor_at;
    put(out, at[T_NODE], node);
    put(out, at[T_BASE], Py_None);
    put(out, at[T_SPEC], Py_None);
    put(out, at[T_GRAD], Py_None);
    put(out, at[T_BASE_VERSION], ZERO);
    put(out, at[T_VERSION], ZERO);
    PyObject *any_leaf = SLOT(p->mode, p->any_leaf_at);
    int tracked = any_leaf == NULL ? 0 : PyObject_IsTrue(any_leaf);
    if (tracked < 0) goto fail;
    if (tracked) {
        PyObject *r = PyObject_CallOneArg(p->track, node);
        if (r == NULL) goto fail;
        Py_DECREF(r);
    }
    PyObject *ref = PyWeakref_NewRef(out, NULL);
    if (ref == NULL || PyList_Append(p->live, ref) < 0) { Py_XDECREF(ref); goto fail; }
    Py_DECREF(ref);
    PyObject *limit = PyList_GetItem(p->compact_at, 0);
    Py_ssize_t most = limit == NULL ? -1 : PyLong_AsSsize_t(limit);
    if (most == -1 && PyErr_Occurred()) goto fail;
    if (PyList_GET_SIZE(p->live) > most) {
        PyObject *r = PyObject_CallNoArgs(p->compact);
        if (r == NULL) goto fail;
        Py_DECREF(r);
    }
    return out;
fail:
    Py_DECREF(out);
    return NULL;
}

/* A new node of this op over `inputs` (a reference the node takes; NULL: an error is set) with the
 * attrs, shape, dtype and key of `record` (a memo record), no value yet; its tree summary and
 * origin are the caller's to set. */
static PyObject *op_node(FastOp *self, PyObject *inputs, PyObject *record) {
    if (inputs == NULL) return NULL;
    PyObject *node = self->p.node_type->tp_alloc(self->p.node_type, 0);
    if (node == NULL) {
        Py_DECREF(inputs);
        return NULL;
    }
    const Py_ssize_t *at = self->p.node_at;
    put(node, at[N_OP], self->name);
    SLOT(node, at[N_INPUTS]) = inputs;
    put(node, at[N_ATTRS], PyTuple_GET_ITEM(record, 0));
    put(node, at[N_SHAPE], PyTuple_GET_ITEM(record, 1));
    put(node, at[N_DTYPE], PyTuple_GET_ITEM(record, 2));
    put(node, at[N_KEY], PyTuple_GET_ITEM(record, 3));
    put(node, at[N_BUFFER], Py_None);
    put(node, at[N_VALUE], Py_None);
    put(node, at[N_AUTOGRAD], Py_None);
    return node;
}

/* hot_build past its tests, with its own references to `na` and its tree summary `t`. */
static PyObject *build_on(FastOp *self, PyObject *h, PyObject *b, PyObject *na, PyObject *t) {
    PyObject *ia = PyTuple_GET_ITEM(t, 1);
    PyObject *record = PyDict_GetItemWithError(PyTuple_GET_ITEM(h, 3), ia);
    if (record != NULL) {
        Py_INCREF(record);
    } else {
        if (PyErr_Occurred()) return NULL;
        record = PyObject_CallFunctionObjArgs(self->chained, h, na, ia, PyTuple_GET_ITEM(t, 4), NULL);
        if (record == NULL) return NULL;
    }
    if (!PyTuple_CheckExact(record) || PyTuple_GET_SIZE(record) != 5) {   /* (None: not remembered) */
        Py_DECREF(record);
        return NOT_TAKEN;
    }
    PyObject *nb = scalar_leaf(self, h, b);
    PyObject *node = nb == NULL ? NULL : op_node(self, PyTuple_Pack(2, na, nb), record);
    PyObject *out = NULL;
    if (node == NULL) goto done;
    const Py_ssize_t *at = self->p.node_at;
    if ((SLOT(node, at[N_TREE]) = summary(self, t, record, nb)) == NULL) goto done;
    if ((SLOT(node, at[N_ORIGIN]) = origin(&self->p)) == NULL) goto done;
    out = pending(&self->p, node);
done:
    Py_DECREF(record);
    Py_XDECREF(nb);
    Py_XDECREF(node);
    return out;
}

/* A realized operand's tree summary (the Python's, made when the op is "buffer", no array is out
 * over its buffer and its leaf's tree id is known): a new reference, NOT_TAKEN, or NULL with an
 * exception set. */
static PyObject *leaf_summary(FastOp *self, PyObject *na, PyObject *epoch) {
    PyObject *op = SLOT(na, self->p.node_at[N_OP]);
    if (op == NULL) return NOT_TAKEN;
    if (op != BUFFER) {
        int same = PyUnicode_Check(op) ? PyUnicode_Compare(op, BUFFER) : 1;
        if (same != 0) return same == -1 && PyErr_Occurred() ? NULL : NOT_TAKEN;
    }
    PyObject *shape = SLOT(na, self->p.node_at[N_SHAPE]), *dtype = SLOT(na, self->p.node_at[N_DTYPE]);
    PyObject *buffer = SLOT(na, self->p.node_at[N_BUFFER]);
    if (shape == NULL || dtype == NULL || buffer == NULL) return NOT_TAKEN;
    if (PyDict_GET_SIZE(self->p.shared)) {              /* (an array out: the general route's snapshot) */
        PyObject *id = PyLong_FromVoidPtr(buffer);
        int out = id == NULL ? -1 : PyDict_Contains(self->p.shared, id);
        Py_XDECREF(id);
        if (out != 0) return out < 0 ? NULL : NOT_TAKEN;
    }
    PyObject *sig = PyTuple_Pack(2, shape, dtype);
    if (sig == NULL) return NULL;
    PyObject *ia = PyDict_GetItemWithError(self->leaf_trees, sig);
    Py_DECREF(sig);
    if (ia == NULL) return PyErr_Occurred() ? NULL : NOT_TAKEN;
    PyObject *leaves = PyList_New(1);
    if (leaves == NULL) return NULL;
    Py_INCREF(na);
    PyList_SET_ITEM(leaves, 0, na);
    PyObject *t = PyTuple_Pack(5, epoch, ia, leaves, ONE, ONE);
    Py_DECREF(leaves);
    return t;
}

/* The hot branch of `build(a, b)`: the new pending Tensor, NOT_TAKEN where the Python must
 * decide, or NULL with an exception set. */
static PyObject *hot_build(FastOp *self, PyObject *a, PyObject *b) {
    PyObject *h = PyDict_GetItemWithError(self->hot, (PyObject *)Py_TYPE(b));
    if (h == NULL) return PyErr_Occurred() ? NULL : NOT_TAKEN;
    if (Py_TYPE(a) != self->p.wrap || SLOT(a, self->p.tensor_at[T_BASE]) != Py_None) return NOT_TAKEN;
    PyObject *na = SLOT(a, self->p.tensor_at[T_NODE]);
    if (na == NULL || Py_TYPE(na) != self->p.node_type) return NOT_TAKEN;
    PyObject *t = SLOT(na, self->p.node_at[N_TREE]);
    PyObject *epoch = PyList_GetItem(self->epoch, 0);
    if (t == NULL || epoch == NULL) return NULL;
    if (t == Py_None) {
        t = leaf_summary(self, na, epoch);        /* (a new reference) */
        if (t == NULL || t == NOT_TAKEN) return t;
    } else {
        if (!PyTuple_CheckExact(t) || PyTuple_GET_SIZE(t) != 5) return NOT_TAKEN;
        int current = PyObject_RichCompareBool(PyTuple_GET_ITEM(t, 0), epoch, Py_EQ);
        if (current <= 0) return current < 0 ? NULL : NOT_TAKEN;
        Py_INCREF(t);
    }
    /* From here on Python code may run (`chained`; on 3.11 a collection in any allocation, its gc
     * callbacks and finalizers) and with it another thread: an eval there realizes `na`, dropping
     * `t`, or rebinds `a._node`.  The Python's locals keep both; so do these references. */
    Py_INCREF(na);
    PyObject *out = build_on(self, h, b, na, t);
    Py_DECREF(t);
    Py_DECREF(na);
    return out;
}

/* ---- the general branch: ir/build.py fast_builder's `build` past its first branch, where the
 * operands are one or two non-view Tensors or Python numbers and the memo knows their signature
 * (`x + y`, `x * w` of a model: in Python a frame and ~300 bytecodes; every miss of this goes to
 * the Python, which learns the signature). */

/* Whether `op` (a node's op) is the interned `name`: 1, 0, or -1 with an exception set. */
static int op_is(PyObject *op, PyObject *name) {
    if (op == name) return 1;
    if (!PyUnicode_Check(op)) return 0;
    int r = PyUnicode_Compare(op, name);
    return r == -1 && PyErr_Occurred() ? -1 : r == 0;
}

/* One operand: its node, signature part (a Tensor's (shape, dtype), a number's dtype) and tree
 * summary (id NULL: no tree).  Every reference is the struct's own. */
typedef struct {
    PyObject *node, *sig, *id, *leaves;
    Py_ssize_t count, size;
    int number;
} Operand;

static void operand_clear(Operand *o) {
    Py_CLEAR(o->node);
    Py_CLEAR(o->sig);
    Py_CLEAR(o->id);
    Py_CLEAR(o->leaves);
}

/* operand()'s pending node with a tree summary `t`: read with its own reference, as the Python's
 * local keeps it (an allocation here may collect, and a collection may realize the node, which
 * drops the summary; the build goes on with what it read) */
static int tree_operand(Operand *o, PyObject *t, PyObject *epoch, PyObject *shape, PyObject *dtype) {
    if (!PyTuple_CheckExact(t) || PyTuple_GET_SIZE(t) != 5) return 0;
    Py_INCREF(t);
    int r = -1;
    int current = PyObject_RichCompareBool(PyTuple_GET_ITEM(t, 0), epoch, Py_EQ);
    if (current < 0 || (o->sig = PyTuple_Pack(2, shape, dtype)) == NULL) goto done;
    r = 1;
    if (!current) goto done;                                      /* (stale: not a tree) */
    PyObject *leaves = PyTuple_GET_ITEM(t, 2);
    o->count = PyLong_AsSsize_t(PyTuple_GET_ITEM(t, 3));
    o->size = PyLong_AsSsize_t(PyTuple_GET_ITEM(t, 4));
    if ((o->count == -1 || o->size == -1) && PyErr_Occurred()) {
        r = -1;
    } else if (!PyList_CheckExact(leaves) || PyList_GET_SIZE(leaves) < o->count) {
        r = 0;
    } else {
        o->id = PyTuple_GET_ITEM(t, 1);
        o->leaves = leaves;
        Py_INCREF(o->id);
        Py_INCREF(leaves);
    }
done:
    Py_DECREF(t);
    return r;
}

/* Operand `o` of `x`, as the Python's `da = ...` block: 1, 0 (NOT_TAKEN: the Python decides) or
 * -1 with an exception set. */
static int operand(FastOp *self, PyObject *x, PyObject *epoch, Operand *o) {
    PyObject *h = PyDict_GetItemWithError(self->hot, (PyObject *)Py_TYPE(x));
    if (h != NULL) {                                  /* a number: its scalar leaf, a tree of one */
        o->number = 1;
        if ((o->node = scalar_leaf(self, h, x)) == NULL || (o->leaves = PyList_New(1)) == NULL) return -1;
        Py_INCREF(o->node);
        PyList_SET_ITEM(o->leaves, 0, o->node);
        o->sig = PyTuple_GET_ITEM(h, 0);
        o->id = PyTuple_GET_ITEM(h, 2);
        Py_INCREF(o->sig);
        Py_INCREF(o->id);
        o->count = o->size = 1;
        return 1;
    }
    if (PyErr_Occurred()) return -1;
    /* (a view or a subclass: the `node` property's work, in the Python) */
    if (Py_TYPE(x) != self->p.wrap || SLOT(x, self->p.tensor_at[T_BASE]) != Py_None) return 0;
    PyObject *n = SLOT(x, self->p.tensor_at[T_NODE]);
    if (n == NULL || Py_TYPE(n) != self->p.node_type) return 0;
    const Py_ssize_t *at = self->p.node_at;
    PyObject *op = SLOT(n, at[N_OP]), *shape = SLOT(n, at[N_SHAPE]), *dtype = SLOT(n, at[N_DTYPE]);
    PyObject *buffer = SLOT(n, at[N_BUFFER]), *t = SLOT(n, at[N_TREE]);
    if (op == NULL || shape == NULL || dtype == NULL || buffer == NULL || t == NULL) return 0;
    int r;
    if ((r = op_is(op, PARAM)) != 0 || (r = op_is(op, SCALAR)) != 0) return r < 0 ? -1 : 0;
    if (buffer != Py_None && PyDict_GET_SIZE(self->p.shared)) {   /* (an array out: Tensor.node's snapshot) */
        PyObject *id = PyLong_FromVoidPtr(buffer);
        int out = id == NULL ? -1 : PyDict_Contains(self->p.shared, id);
        Py_XDECREF(id);
        if (out != 0) return out < 0 ? -1 : 0;
    }
    Py_INCREF(n);
    o->node = n;
    if (t != Py_None)
        return tree_operand(o, t, epoch, shape, dtype);
    if ((o->sig = PyTuple_Pack(2, shape, dtype)) == NULL) return -1;
    if ((r = op_is(op, BUFFER)) <= 0) return r < 0 ? -1 : 1;    /* (pending, not a tree) */
    PyObject *ia = PyDict_GetItemWithError(self->leaf_trees, o->sig);
    if (ia == NULL) return PyErr_Occurred() ? -1 : 0;            /* (leaf_tree makes it, in the Python) */
    Py_INCREF(ia);
    o->id = ia;
    if ((o->leaves = PyList_New(1)) == NULL) return -1;
    Py_INCREF(n);
    PyList_SET_ITEM(o->leaves, 0, n);
    o->count = o->size = 1;
    return 1;
}

/* `disjoint(la[:ca], lb[:cb])`: whether the two leaf lists share no buffer node (1, 0 or -1),
 * pairwise: called only where the joined tree fits MAX_TREE_NODES, and a tree of size z has at
 * most (z + 1) / 2 leaves, so ca + cb <= 128 and the pairs are at most 64 * 64. */
static int leaves_disjoint(FastOp *self, Operand *a, Operand *b) {
    for (Py_ssize_t i = 0; i < b->count; i++) {
        PyObject *n = PyList_GET_ITEM(b->leaves, i);
        for (Py_ssize_t j = 0; j < a->count; j++) {
            if (PyList_GET_ITEM(a->leaves, j) != n) continue;
            /* the same node in both: shared if it is a buffer (scalar leaves are one op's own) */
            PyObject *op = Py_TYPE(n) == self->p.node_type ? SLOT(n, self->p.node_at[N_OP]) : NULL;
            int r = op == NULL ? 1 : op_is(op, BUFFER);
            if (r != 0) return r < 0 ? -1 : 0;
        }
    }
    return 1;
}

/* TREES.get(item) or tree_id(item): a new reference, or NULL with an exception set. */
static PyObject *tree_of(FastOp *self, PyObject *item) {
    PyObject *id = PyDict_GetItemWithError(self->trees, item);
    if (id != NULL) {
        Py_INCREF(id);
        return id;
    }
    return PyErr_Occurred() ? NULL : PyObject_CallOneArg(self->tree_id, item);
}

/* The result's tree summary (the Python's `node.tree = ...`): a new reference, or NULL. */
static PyObject *general_tree(FastOp *self, PyObject *epoch, PyObject *op_id, Operand *a, Operand *b) {
    PyObject *item, *leaves;
    Py_ssize_t count, size;
    if (b == NULL) {                                             /* one operand: its list, shared */
        if (a->id == NULL || a->size > self->last) Py_RETURN_NONE;
        item = PyTuple_Pack(2, op_id, a->id);
        leaves = a->leaves;
        Py_INCREF(leaves);
        count = a->count;
        size = a->size + 1;
    } else {
        size = a->size + b->size + 1;
        if (a->id == NULL || b->id == NULL || size > self->last + 1) Py_RETURN_NONE;
        item = PyTuple_Pack(3, op_id, a->id, b->id);
        leaves = PyList_New(a->count + b->count);                /* (ir/build.py joined) */
        if (leaves != NULL) {
            for (Py_ssize_t i = 0; i < a->count; i++) {
                PyObject *n = PyList_GET_ITEM(a->leaves, i);
                Py_INCREF(n);
                PyList_SET_ITEM(leaves, i, n);
            }
            for (Py_ssize_t i = 0; i < b->count; i++) {
                PyObject *n = PyList_GET_ITEM(b->leaves, i);
                Py_INCREF(n);
                PyList_SET_ITEM(leaves, a->count + i, n);
            }
        }
        count = a->count + b->count;
    }
    PyObject *id = item == NULL || leaves == NULL ? NULL : tree_of(self, item);
    PyObject *ncount = PyLong_FromSsize_t(count), *nsize = PyLong_FromSsize_t(size);
    PyObject *tree = id == NULL || ncount == NULL || nsize == NULL ? NULL : PyTuple_Pack(5, epoch, id, leaves, ncount, nsize);
    Py_XDECREF(item);
    Py_XDECREF(leaves);
    Py_XDECREF(id);
    Py_XDECREF(ncount);
    Py_XDECREF(nsize);
    return tree;
}

/* The general branch for `a` (and `b`, NULL for one operand): the new pending Tensor,
 * NOT_TAKEN, or NULL with an exception set. */
static PyObject *general_build(FastOp *self, PyObject *a, PyObject *b) {
    PyObject *epoch = PyList_GetItem(self->epoch, 0);
    if (epoch == NULL) return NULL;
    Py_INCREF(epoch);
    Operand x = {0}, y = {0};
    PyObject *out = NOT_TAKEN, *sig = NULL, *known = NULL, *node = NULL;
    int r = operand(self, a, epoch, &x);
    if (r > 0 && b != NULL) r = operand(self, b, epoch, &y);
    if (r <= 0) {
        out = r < 0 ? NULL : NOT_TAKEN;
        goto done;
    }
    if (b == NULL) {
        sig = x.sig;
        Py_INCREF(sig);
    } else if (y.number) {
        sig = PyTuple_Pack(2, x.sig, y.sig);
    } else {
        sig = PyTuple_Pack(3, x.sig, PyTuple_GET_ITEM(y.sig, 0), PyTuple_GET_ITEM(y.sig, 1));
    }
    if (sig == NULL) { out = NULL; goto done; }
    if (b != NULL && x.id != NULL && y.id != NULL && !x.number      /* (x * x: not a tree) */
            && x.size + y.size + 1 <= self->last + 1) {             /* (else none anyway) */
        int d = leaves_disjoint(self, &x, &y);
        if (d < 0) { out = NULL; goto done; }
        if (!d) Py_CLEAR(y.id);
    }
    known = PyDict_GetItemWithError(self->memo, sig);
    if (known == NULL) {
        out = PyErr_Occurred() ? NULL : NOT_TAKEN;
        goto done;
    }
    Py_INCREF(known);                                  /* (tree_id below may run Python code) */
    if (!PyTuple_CheckExact(known) || PyTuple_GET_SIZE(known) != 5) goto done;
    out = NULL;
    node = op_node(self, b == NULL ? PyTuple_Pack(1, x.node) : PyTuple_Pack(2, x.node, y.node), known);
    if (node == NULL) goto done;
    const Py_ssize_t *at = self->p.node_at;
    if ((SLOT(node, at[N_TREE]) = general_tree(self, epoch, PyTuple_GET_ITEM(known, 4), &x,
                                               b == NULL ? NULL : &y)) == NULL) goto done;
    if ((SLOT(node, at[N_ORIGIN]) = origin(&self->p)) == NULL) goto done;
    out = pending(&self->p, node);
done:
    operand_clear(&x);
    operand_clear(&y);
    Py_DECREF(epoch);
    Py_XDECREF(sig);
    Py_XDECREF(known);
    Py_XDECREF(node);
    return out;
}

static PyObject *fastop_vectorcall(PyObject *op, PyObject *const *args, size_t nargsf, PyObject *kwnames) {
    FastOp *self = (FastOp *)op;
    Py_ssize_t n = PyVectorcall_NARGS(nargsf);
    if (kwnames == NULL && (n == 2 || (n == 1 && !self->swapped))) {
        PyObject *pair[2];
        if (self->swapped) {
            pair[0] = args[1];
            pair[1] = args[0];
            args = pair;
            nargsf = 2;                /* (no PY_VECTORCALL_ARGUMENTS_OFFSET: pair[-1] is not ours) */
        }
        PyObject *r = n == 2 ? hot_build(self, args[0], args[1]) : NOT_TAKEN;
        if (r == NOT_TAKEN) r = general_build(self, args[0], n == 2 ? args[1] : NULL);
        if (r != NOT_TAKEN) return r;
        return PyObject_Vectorcall(self->fallback, args, nargsf, NULL);
    }
    return PyObject_Vectorcall(self->outer, args, nargsf, kwnames);
}

/* A method of the class it is installed in: `x * 2.0` calls it unbound (METHOD_DESCRIPTOR). */
static PyObject *fastop_get(PyObject *op, PyObject *obj, PyObject *type) {
    (void)type;
    if (obj == NULL || obj == Py_None) { Py_INCREF(op); return op; }
    return PyMethod_New(op, obj);
}

static PyObject *fastop_new(PyTypeObject *type, PyObject *args, PyObject *kwargs) {
    PyObject *fallback, *name, *hot, *chained, *node_type, *wrap, *live_parts;
    PyObject *epoch, *trace, *user_code, *inside, *user_site, *no_attrs, *leaf_trees, *shared;
    PyObject *memo, *trees, *tree_id, *outer = NULL;
    Py_ssize_t last;
    int swapped = 0;
    static char *kw[] = {"fallback", "name", "hot", "chained", "node_type", "wrap", "live", "epoch", "trace",
                         "user_code", "inside", "user_site", "no_attrs", "last", "leaf_trees", "shared",
                         "memo", "trees", "tree_id", "outer", "swapped", NULL};
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "OUO!OO!O!O!O!O!O!O!OO!nO!O!O!O!O|Op:FastOp", kw, &fallback, &name,
                                     &PyDict_Type, &hot, &chained, &PyType_Type, &node_type, &PyType_Type, &wrap,
                                     &PyTuple_Type, &live_parts, &PyList_Type, &epoch, &PyList_Type, &trace,
                                     &PyList_Type, &user_code, &PyDict_Type, &inside, &user_site,
                                     &PyDict_Type, &no_attrs, &last, &PyDict_Type, &leaf_trees,
                                     &PyDict_Type, &shared, &PyDict_Type, &memo, &PyDict_Type, &trees,
                                     &tree_id, &outer, &swapped))
        return NULL;
    if (outer == NULL || outer == Py_None) outer = fallback;
    FastOp *self = (FastOp *)type->tp_alloc(type, 0);
    if (self == NULL) return NULL;
    self->vectorcall = fastop_vectorcall;
    self->last = last;
    self->swapped = swapped;
    PyObject *values[] = {fallback, name, hot, chained, epoch, no_attrs, leaf_trees, memo, trees, tree_id,
                          outer};                              /* (HELD's order) */
    hold((PyObject *)self, HELD, values, sizeof values / sizeof *values);
    if (parts_init(&self->p, node_type, wrap, live_parts, trace, user_code, inside, user_site, shared) < 0) {
        Py_DECREF(self);
        return NULL;
    }
    return (PyObject *)self;
}

HELD_GC(fastop, FastOp, HELD)

/* copy.copy and copy.deepcopy keep a FastOp as they keep a function (a reduction to a name is a
 * global's); pickle then looks that name up in __module__, and fails there as on the function. */
static PyObject *fastop_reduce(PyObject *op, PyObject *unused) {
    (void)unused;
    return PyObject_GetAttrString(op, "__qualname__");
}

static PyMethodDef fastop_methods[] = {
    {"__reduce__", fastop_reduce, METH_NOARGS, NULL},
    {NULL},
};

STAND_IN_TYPE(fastop, FastOp, "FastOp",
              "ir/build.py fast_builder's build (`tensor <op> number` in a tree, `x + y`, `x.sigmoid()`) in C.",
              "what this stands for: the Python build it takes the hot branches of, or the Tensor API function")

/* ---------------------------------------------------------------- call signatures
 *
 * ir/replay.py::signature in C: the key a recorded build is found by, from a call's arguments.
 * `Signer(kinds, classify, node_type, bases, tensor, node, plain, float, sequence, dtype)` holds
 * replay.py's class table (`_KINDS`) and its miss function (`_kind`), `_bases`, and the kind
 * names (compared by identity, as the Python does); a call `signer(args, kwargs)` returns what
 * the Python returns, step for step: (key, nodes, flat) or None.  Given `tensor_type` and
 * `shared` (replay.py tensor_signature: the Tensor API's), it reads a Tensor's node from its slots
 * where tensor.py's `node` property would return that slot as it is (a Python frame a tensor). */
typedef struct {
    PyObject_HEAD
    vectorcallfunc vectorcall;
    PyObject *dict;
    PyObject *kinds, *classify, *bases;
    PyTypeObject *node_type;
    PyObject *k_tensor, *k_node, *k_plain, *k_float, *k_seq, *k_dtype;
    PyTypeObject *tensor_type; /* (optional) the Tensor API's class, whose `node` this reads itself */
    PyObject *shared;          /* with it: host_data.py SHARED */
    PyObject *node_prop;       /* Tensor.node (a subclass that keeps it is read alike) */
    Py_ssize_t op_at, inputs_at, key_at;
    Py_ssize_t tensor_at[T_SLOTS];
} Signer;

static const Py_ssize_t SIGNER_HELD[] = {
    offsetof(Signer, dict), offsetof(Signer, kinds), offsetof(Signer, classify), offsetof(Signer, bases),
    offsetof(Signer, node_type), offsetof(Signer, k_tensor), offsetof(Signer, k_node), offsetof(Signer, k_plain),
    offsetof(Signer, k_float), offsetof(Signer, k_seq), offsetof(Signer, k_dtype), offsetof(Signer, tensor_type),
    offsetof(Signer, shared), offsetof(Signer, node_prop),
};

/* A tensor argument's node: tensor.py's `Tensor.node` read from the slots where that property
 * would return `_node` as it is (no array out to the user, and a view's base not updated since
 * the view was made), else the property itself.  A new reference, or NULL. */
static PyObject *tensor_node(Signer *self, PyObject *v) {
    PyTypeObject *t = Py_TYPE(v);
    if (self->tensor_type == NULL || PyDict_GET_SIZE(self->shared) != 0 ||
            (t != self->tensor_type && (!PyType_IsSubtype(t, self->tensor_type) ||
                                        _PyType_Lookup(t, NODE_ATTR) != self->node_prop)))
        return PyObject_GetAttr(v, NODE_ATTR);
    const Py_ssize_t *at = self->tensor_at;
    PyObject *n = SLOT(v, at[T_NODE]), *base = SLOT(v, at[T_BASE]);
    if (n == NULL || base == NULL) return PyObject_GetAttr(v, NODE_ATTR);
    if (base != Py_None) {                  /* (a view: current while its base's version is the one it saw) */
        PyObject *seen = SLOT(v, at[T_BASE_VERSION]);
        PyObject *now = PyObject_TypeCheck(base, self->tensor_type) ? SLOT(base, at[T_VERSION]) : NULL;
        int same = seen == NULL || now == NULL ? 0 : seen == now ? 1 : PyObject_RichCompareBool(seen, now, Py_EQ);
        if (same < 0) return NULL;
        if (!same) return PyObject_GetAttr(v, NODE_ATTR);
    }
    Py_INCREF(n);
    return n;
}

/* A node's key (Node.key: the cached `_key`, else the property computes and caches it). */
static PyObject *node_key(Signer *self, PyObject *n) {
    PyObject *key = SLOT(n, self->key_at);
    if (key != NULL && key != Py_None) { Py_INCREF(key); return key; }
    return PyObject_GetAttr(n, KEY_ATTR);
}

/* Appends `item` (a new reference, or NULL for an error) to `list`: 0, or -1 with an exception. */
static int append_new(PyObject *list, PyObject *item) {
    if (item == NULL) return -1;
    int r = PyList_Append(list, item);
    Py_DECREF(item);
    return r;
}

/* Whether the nodes are distinct objects (`len(set(map(id, nodes))) == len(nodes)`). */
static int distinct(PyObject *nodes) {
    Py_ssize_t n = PyList_GET_SIZE(nodes);
    for (Py_ssize_t i = 1; i < n; i++)
        for (Py_ssize_t j = 0; j < i; j++)
            if (PyList_GET_ITEM(nodes, i) == PyList_GET_ITEM(nodes, j)) return 0;
    return 1;
}

static PyObject *sign(Signer *self, PyObject *flat, PyObject *key);

/* One argument's entries of the key: 1, 0 (the call is not memoized: the signature is None) or
 * -1 with an exception. */
static int sign_one(Signer *self, PyObject *v, PyObject *key, PyObject *nodes, int *views) {
    PyObject *c = (PyObject *)Py_TYPE(v);
    PyObject *kind = PyDict_GetItemWithError(self->kinds, c);
    if (kind != NULL) {
        Py_INCREF(kind);
    } else {
        if (PyErr_Occurred()) return -1;
        if ((kind = PyObject_CallOneArg(self->classify, c)) == NULL) return -1;
    }
    int r = 1;
    if (kind == self->k_tensor || kind == self->k_node) {
        PyObject *n = kind == self->k_tensor ? tensor_node(self, v) : (Py_INCREF(v), v);
        if (n == NULL) { r = -1; goto out; }
        PyObject *op = Py_TYPE(n) == self->node_type ? SLOT(n, self->op_at) : NULL;
        if (op == NULL || !PyUnicode_Check(op)) {
            PyErr_SetString(PyExc_TypeError, "signature: a tensor argument's node is not a Node");
            r = -1;
        } else if (PyUnicode_Compare(op, VIEW) == 0) {
            PyObject *inputs = SLOT(n, self->inputs_at);
            PyObject *k = node_key(self, n), *b = NULL;
            if (k != NULL && inputs != NULL && PyTuple_Check(inputs) && PyTuple_GET_SIZE(inputs) > 0)
                b = node_key(self, PyTuple_GET_ITEM(inputs, 0));
            r = (k == NULL || b == NULL) ? -1 : append_new(key, PyTuple_Pack(2, k, b)) < 0 ? -1 : 1;
            Py_XDECREF(k);
            Py_XDECREF(b);
            *views = 1;
        } else if (PyUnicode_Compare(op, SCALAR) == 0) {
            /* a structural constant is an argument like a tensor's node: its key holds its value
             * (its attributes); a runtime scalar's does not, and refuses the call */
            PyObject *k = node_key(self, n);
            if (k == NULL) {
                r = -1;
            } else if (PyTuple_Check(k) && PyTuple_GET_SIZE(k) > 1 && PyTuple_Check(PyTuple_GET_ITEM(k, 1)) &&
                       PyTuple_GET_SIZE(PyTuple_GET_ITEM(k, 1)) > 0) {
                r = append_new(key, k) < 0 ? -1 : 1;
            } else {
                Py_DECREF(k);
                r = 0;
            }
        } else if (PyUnicode_Compare(op, PARAM) == 0) {
            r = 0;
        } else {
            r = append_new(key, node_key(self, n)) < 0 ? -1 : 1;
        }
        if (r == 1 && PyList_Append(nodes, n) < 0) r = -1;
        Py_DECREF(n);
    } else if (kind == self->k_plain) {
        r = append_new(key, PyTuple_Pack(2, c, v)) < 0 ? -1 : 1;
    } else if (kind == self->k_float) {
        int truth = PyObject_IsTrue(v);               /* (a zero keeps its sign: repr) */
        PyObject *shown = truth < 0 ? NULL : truth ? (Py_INCREF(v), v) : PyObject_Repr(v);
        r = shown == NULL ? -1 : append_new(key, PyTuple_Pack(2, c, shown)) < 0 ? -1 : 1;
        Py_XDECREF(shown);
    } else if (kind == self->k_seq) {
        Py_ssize_t size = PySequence_Size(v);
        PyObject *first = size > 0 ? PySequence_GetItem(v, 0) : NULL;
        if (size < 0 || (size > 0 && first == NULL)) { r = -1; goto out; }
        if (first != NULL && Py_TYPE(first) != &PyLong_Type) {   /* a tensor list: each one's node */
            Py_DECREF(first);
            PyObject *inner_key = PyList_New(0);
            PyObject *inner = inner_key == NULL ? NULL : sign(self, v, inner_key);
            Py_XDECREF(inner_key);
            if (inner == NULL) { r = -1; goto out; }
            if (inner == Py_None) { Py_DECREF(inner); r = 0; goto out; }
            r = append_new(key, PyTuple_Pack(2, c, PyTuple_GET_ITEM(inner, 0))) < 0 ? -1 : 1;
            if (r == 1) {
                PyObject *more = PyTuple_GET_ITEM(inner, 1);
                if (PyList_SetSlice(nodes, PyList_GET_SIZE(nodes), PyList_GET_SIZE(nodes), more) < 0) r = -1;
            }
            Py_DECREF(inner);
            *views = 1;                                  /* (may hold views: `_bases` looks) */
            goto out;
        }
        Py_XDECREF(first);
        PyObject *items = PySequence_Tuple(v);
        if (items == NULL) { r = -1; goto out; }
        for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(items); i++)
            if (Py_TYPE(PyTuple_GET_ITEM(items, i)) != &PyLong_Type) { r = 0; break; }
        if (r == 1) r = append_new(key, PyTuple_Pack(2, c, items)) < 0 ? -1 : 1;
        Py_DECREF(items);
    } else if (kind == self->k_dtype) {
        r = PyList_Append(key, v) < 0 ? -1 : 1;      /* (a singleton, hashed by identity) */
    } else {
        r = 0;
    }
out:
    Py_DECREF(kind);
    return r;
}

/* signature(flat, {}) with `key` holding what comes before the arguments' entries: the triple,
 * None, or NULL with an exception. */
static PyObject *sign(Signer *self, PyObject *flat, PyObject *key) {
    PyObject *items = PySequence_Fast(flat, "signature: arguments are a sequence");
    PyObject *nodes = items == NULL ? NULL : PyList_New(0);
    PyObject *out = NULL;
    if (nodes == NULL) goto done;
    int views = 0;
    for (Py_ssize_t i = 0; i < PySequence_Fast_GET_SIZE(items); i++) {
        int r = sign_one(self, PySequence_Fast_GET_ITEM(items, i), key, nodes, &views);
        if (r <= 0) {
            if (r == 0) out = (Py_INCREF(Py_None), Py_None);
            goto done;
        }
    }
    if (PyList_GET_SIZE(nodes) > 1) {
        if (!distinct(nodes)) { out = (Py_INCREF(Py_None), Py_None); goto done; }
        if (views && append_new(key, PyObject_CallOneArg(self->bases, nodes)) < 0) goto done;
    }
    PyObject *tuple = PyList_AsTuple(key);
    if (tuple != NULL) out = PyTuple_Pack(3, tuple, nodes, flat);
    Py_XDECREF(tuple);
done:
    Py_XDECREF(items);
    Py_XDECREF(nodes);
    return out;
}

static PyObject *signer_vectorcall(PyObject *op, PyObject *const *args, size_t nargsf, PyObject *kwnames) {
    Signer *self = (Signer *)op;
    if (PyVectorcall_NARGS(nargsf) != 2 || kwnames != NULL || !PyTuple_Check(args[0]) || !PyDict_Check(args[1])) {
        PyErr_SetString(PyExc_TypeError, "signature(args: tuple, kwargs: dict)");
        return NULL;
    }
    PyObject *key = PyList_New(0), *flat = NULL, *out = NULL;
    if (key == NULL) return NULL;
    if (PyDict_GET_SIZE(args[1]) == 0) {
        flat = (Py_INCREF(args[0]), args[0]);
    } else {                                         /* key: [tuple(kwargs)]; flat: (*args, *values) */
        PyObject *names = PySequence_Tuple(args[1]), *values = PyDict_Values(args[1]);
        PyObject *rest = values == NULL ? NULL : PyList_AsTuple(values);
        if (names != NULL && rest != NULL && PyList_Append(key, names) == 0)
            flat = PySequence_Concat(args[0], rest);
        Py_XDECREF(names);
        Py_XDECREF(values);
        Py_XDECREF(rest);
    }
    if (flat != NULL) out = sign(self, flat, key);
    Py_XDECREF(flat);
    Py_DECREF(key);
    return out;
}

static PyObject *signer_new(PyTypeObject *type, PyObject *args, PyObject *kwargs) {
    PyObject *kinds, *classify, *bases, *node_type, *names[6], *tensor_type = NULL, *shared = NULL;
    static char *kw[] = {"kinds", "classify", "node_type", "bases", "tensor", "node", "plain", "float", "sequence",
                         "dtype", "tensor_type", "shared", NULL};
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "O!OO!OOOOOOO|O!O!:Signer", kw, &PyDict_Type, &kinds, &classify,
                                     &PyType_Type, &node_type, &bases, &names[0], &names[1], &names[2], &names[3],
                                     &names[4], &names[5], &PyType_Type, &tensor_type, &PyDict_Type, &shared))
        return NULL;
    if ((tensor_type == NULL) != (shared == NULL)) {
        PyErr_SetString(PyExc_TypeError, "Signer: tensor_type and shared go together");
        return NULL;
    }
    Signer *self = (Signer *)type->tp_alloc(type, 0);
    if (self == NULL) return NULL;
    self->vectorcall = signer_vectorcall;
    PyObject *values[] = {kinds, classify, bases, node_type, names[0], names[1], names[2], names[3], names[4],
                          names[5], tensor_type, shared};    /* (SIGNER_HELD's order, past the dict) */
    hold((PyObject *)self, SIGNER_HELD + 1, values, sizeof values / sizeof *values);
    static const char *slots[3] = {"op", "inputs", "_key"};
    Py_ssize_t at[3];
    if (slot_offsets(self->node_type, slots, 3, at) < 0) { Py_DECREF(self); return NULL; }
    self->op_at = at[0], self->inputs_at = at[1], self->key_at = at[2];
    if (tensor_type != NULL) {
        if (slot_offsets(self->tensor_type, TENSOR_SLOTS, T_SLOTS, self->tensor_at) < 0 ||
            (self->node_prop = _PyType_Lookup(self->tensor_type, NODE_ATTR)) == NULL) {
            if (!PyErr_Occurred()) PyErr_SetString(PyExc_TypeError, "Signer: tensor_type has no `node`");
            Py_DECREF(self);
            return NULL;
        }
        Py_INCREF(self->node_prop);
    }
    return (PyObject *)self;
}

HELD_GC(signer, Signer, SIGNER_HELD)
CALLABLE_TYPE(signer, Signer, "Signer", "ir/replay.py's signature(args, kwargs) in C.", 0, NULL, NULL, NULL)

/* ---------------------------------------------------------------- replaying a recording
 *
 * ir/replay.py::Recording.replay in C, step for step: `Replayer(recording_type, node_type)` is
 * installed as Recording.replay (a method: called unbound, no Python frame) and builds the
 * recorded nodes over a call's argument nodes and values.  Steps are (kind, a, b, c, d, e, f):
 * NODE (op a, input refs b, attrs c, shape d, dtype e, key f), NUMBER (a scalar leaf of argument
 * a's value) or LEAF (a scalar leaf of value a); refs are (ARG, i), (BASE, i) or (MADE, j). */
enum { REF_ARG, REF_BASE, REF_MADE };
enum { STEP_NODE, STEP_NUMBER, STEP_LEAF };

typedef struct {
    PyObject_HEAD
    vectorcallfunc vectorcall;
    PyObject *dict;
    PyTypeObject *node_type;
    Py_ssize_t steps_at, result_at;      /* Recording's slots */
    Py_ssize_t node_at[N_SLOTS];
} Replayer;

/* The input a ref names. */
static PyObject *ref_node(Replayer *self, PyObject *ref, PyObject *nodes, PyObject *made) {
    if (!PyTuple_Check(ref) || PyTuple_GET_SIZE(ref) != 2) goto bad;
    long k = PyLong_AsLong(PyTuple_GET_ITEM(ref, 0));
    Py_ssize_t i = PyLong_AsSsize_t(PyTuple_GET_ITEM(ref, 1));
    if (PyErr_Occurred()) return NULL;
    PyObject *from = k == REF_MADE ? made : nodes;
    if (i < 0 || i >= PyList_GET_SIZE(from)) goto bad;
    PyObject *n = PyList_GET_ITEM(from, i);
    if (k != REF_BASE) return n;
    PyObject *inputs = Py_TYPE(n) == self->node_type ? SLOT(n, self->node_at[N_INPUTS]) : NULL;
    if (inputs == NULL || !PyTuple_Check(inputs) || PyTuple_GET_SIZE(inputs) < 1) goto bad;
    return PyTuple_GET_ITEM(inputs, 0);
bad:
    PyErr_SetString(PyExc_ValueError, "Recording.replay: a bad input ref");
    return NULL;
}

/* The node of one step (a new reference), or NULL with an exception. */
static PyObject *replay_step(Replayer *self, PyObject *step, PyObject *nodes, PyObject *flat, PyObject *site,
                             PyObject *made) {
    if (!PyTuple_Check(step) || PyTuple_GET_SIZE(step) != 7) {
        PyErr_SetString(PyExc_ValueError, "Recording.replay: a bad step");
        return NULL;
    }
    long kind = PyLong_AsLong(PyTuple_GET_ITEM(step, 0));
    if (kind == -1 && PyErr_Occurred()) return NULL;
    PyObject *a = PyTuple_GET_ITEM(step, 1), *b = PyTuple_GET_ITEM(step, 2);
    PyObject *inputs, *value;
    if (kind == STEP_NODE) {
        if (!PyTuple_Check(b)) { PyErr_SetString(PyExc_ValueError, "Recording.replay: bad refs"); return NULL; }
        if ((inputs = PyTuple_New(PyTuple_GET_SIZE(b))) == NULL) return NULL;
        for (Py_ssize_t j = 0; j < PyTuple_GET_SIZE(b); j++) {
            PyObject *n = ref_node(self, PyTuple_GET_ITEM(b, j), nodes, made);
            if (n == NULL) { Py_DECREF(inputs); return NULL; }
            Py_INCREF(n);
            PyTuple_SET_ITEM(inputs, j, n);
        }
        value = Py_None;
    } else {
        inputs = PyTuple_New(0);
        if (kind == STEP_NUMBER) {
            Py_ssize_t at = PyLong_AsSsize_t(a);
            if (at == -1 && PyErr_Occurred()) { Py_DECREF(inputs); return NULL; }
            if (at < 0 || at >= PySequence_Fast_GET_SIZE(flat)) {
                Py_DECREF(inputs);
                PyErr_SetString(PyExc_ValueError, "Recording.replay: a bad argument index");
                return NULL;
            }
            value = PySequence_Fast_GET_ITEM(flat, at);
        } else {
            value = a;
        }
    }
    PyObject *node = self->node_type->tp_alloc(self->node_type, 0);
    if (node == NULL) { Py_DECREF(inputs); return NULL; }
    const Py_ssize_t *at = self->node_at;
    put(node, at[N_OP], kind == STEP_NODE ? a : SCALAR);
    SLOT(node, at[N_INPUTS]) = inputs;
    put(node, at[N_ATTRS], PyTuple_GET_ITEM(step, 3));
    put(node, at[N_SHAPE], kind == STEP_NODE ? PyTuple_GET_ITEM(step, 4) : inputs);     /* (a leaf's: ()) */
    put(node, at[N_DTYPE], PyTuple_GET_ITEM(step, 5));
    put(node, at[N_KEY], PyTuple_GET_ITEM(step, 6));
    put(node, at[N_BUFFER], Py_None);
    put(node, at[N_VALUE], value);
    put(node, at[N_ORIGIN], kind == STEP_NODE ? site : Py_None);
    put(node, at[N_TREE], Py_None);
    put(node, at[N_AUTOGRAD], Py_None);
    return node;
}

static PyObject *replayer_vectorcall(PyObject *op, PyObject *const *args, size_t nargsf, PyObject *kwnames) {
    Replayer *self = (Replayer *)op;
    if (PyVectorcall_NARGS(nargsf) != 4 || kwnames != NULL || !PyList_Check(args[1])) {
        PyErr_SetString(PyExc_TypeError, "Recording.replay(nodes: list, flat, site)");
        return NULL;
    }
    PyObject *rec = args[0], *nodes = args[1], *site = args[3];
    PyObject *steps = SLOT(rec, self->steps_at), *result = SLOT(rec, self->result_at);
    if (steps == NULL || result == NULL || !PyList_Check(steps)) {
        PyErr_SetString(PyExc_TypeError, "Recording.replay: not a Recording");
        return NULL;
    }
    PyObject *flat = PySequence_Fast(args[2], "Recording.replay: flat is a sequence");
    PyObject *made = flat == NULL ? NULL : PyList_New(0), *out = NULL;
    if (made == NULL) goto done;
    for (Py_ssize_t i = 0; i < PyList_GET_SIZE(steps); i++)
        if (append_new(made, replay_step(self, PyList_GET_ITEM(steps, i), nodes, flat, site, made)) < 0) goto done;
    if (PyLong_Check(result)) {
        Py_ssize_t i = PyLong_AsSsize_t(result);
        if (i >= 0 && i < PyList_GET_SIZE(made)) out = (Py_INCREF(PyList_GET_ITEM(made, i)), PyList_GET_ITEM(made, i));
    } else if (PyTuple_Check(result) && (out = PyTuple_New(PyTuple_GET_SIZE(result))) != NULL) {
        for (Py_ssize_t j = 0; j < PyTuple_GET_SIZE(result); j++) {
            Py_ssize_t i = PyLong_AsSsize_t(PyTuple_GET_ITEM(result, j));
            if (i < 0 || i >= PyList_GET_SIZE(made)) { Py_CLEAR(out); break; }
            Py_INCREF(PyList_GET_ITEM(made, i));
            PyTuple_SET_ITEM(out, j, PyList_GET_ITEM(made, i));
        }
    }
    if (out == NULL && !PyErr_Occurred()) PyErr_SetString(PyExc_ValueError, "Recording.replay: a bad result");
done:
    Py_XDECREF(flat);
    Py_XDECREF(made);
    return out;
}

static PyObject *replayer_new(PyTypeObject *type, PyObject *args, PyObject *kwargs) {
    PyObject *recording_type, *node_type;
    static char *kw[] = {"recording_type", "node_type", NULL};
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "O!O!:Replayer", kw, &PyType_Type, &recording_type, &PyType_Type,
                                     &node_type))
        return NULL;
    Replayer *self = (Replayer *)type->tp_alloc(type, 0);
    if (self == NULL) return NULL;
    self->vectorcall = replayer_vectorcall;
    Py_INCREF(node_type);
    self->node_type = (PyTypeObject *)node_type;
    static const char *slots[2] = {"steps", "result"};
    Py_ssize_t at[2];
    if (slot_offsets((PyTypeObject *)recording_type, slots, 2, at) < 0 ||
        slot_offsets(self->node_type, NODE_SLOTS, N_SLOTS, self->node_at) < 0) {
        Py_DECREF(self);
        return NULL;
    }
    self->steps_at = at[0], self->result_at = at[1];
    return (PyObject *)self;
}

static const Py_ssize_t REPLAYER_HELD[] = {offsetof(Replayer, dict), offsetof(Replayer, node_type)};
HELD_GC(replayer, Replayer, REPLAYER_HELD)
CALLABLE_TYPE(replayer, Replayer, "Replayer", "ir/replay.py's Recording.replay in C.", Py_TPFLAGS_METHOD_DESCRIPTOR,
              fastop_get, NULL, NULL)

/* ---------------------------------------------------------------- the Tensor API's replayed calls
 *
 * ApiCall: api.py make_function's `fn` for an op without a pointwise build in C, where the call's
 * signature was seen before: lazytorch/call_memo.py CallMemo.replay, step for step (the signature,
 * the memo's table, the recording's replay, the result's Tensor) without fn's and replay's Python
 * frames; W9's forward makes ~110 such calls (`F.linear`, `x.view`, `x.transpose`, layer_norm).
 * Calls with `out=`, misses and what the replay leaves to the general route run `fn`, which is
 * this object's `__wrapped__`. */
typedef struct {
    PyObject_HEAD
    vectorcallfunc vectorcall;
    PyObject *dict;            /* __name__, __qualname__, __doc__ (the Tensor API sets them) */
    Parts p;
    PyObject *outer;           /* api.py's fn: every call this does not take */
    PyObject *signer;          /* call_memo.py's signature (a Signer) */
    PyObject *table;           /* the op's Memo.table (cleared in place, never replaced) */
    PyObject *self_mark;       /* call_memo.py SELF: a recording of a call that returned its argument */
    PyObject *op;              /* the OpDef */
    PyObject *wrap_result;     /* api.py _wrap(op, result): a result that is a tuple */
    PyObject *wrap_views;      /* tensor.py _wrap_views: the view results this does not wrap itself */
    PyObject *site;            /* ir/node.py SITE (thread-local): the user's line of a running general route */
    PyObject *replayer;        /* Recording.replay (a Replayer) */
    int view;                  /* the op is a view op: its results alias the argument's root */
} ApiCall;

static const Py_ssize_t APICALL_HELD[] = {
    offsetof(ApiCall, outer), offsetof(ApiCall, signer), offsetof(ApiCall, table), offsetof(ApiCall, self_mark),
    offsetof(ApiCall, op), offsetof(ApiCall, wrap_result), offsetof(ApiCall, wrap_views), offsetof(ApiCall, site),
    offsetof(ApiCall, replayer), PARTS_HELD(ApiCall), offsetof(ApiCall, dict),
};

static PyObject *SITE_ATTR, *OUT_NAME, *EMPTY_KWARGS;

/* The replayed nodes' origin: `(SITE.site or user_site(2)) if TRACE[0] else None`. */
static PyObject *api_site(ApiCall *self) {
    PyObject *on = PyList_GetItem(self->p.trace, 0);
    int traced = on == NULL ? -1 : PyObject_IsTrue(on);
    if (traced <= 0) {
        if (traced < 0) return NULL;
        Py_RETURN_NONE;
    }
    PyObject *site = PyObject_GetAttr(self->site, SITE_ATTR);
    int set = site == NULL ? -1 : PyObject_IsTrue(site);
    if (set != 0) return set < 0 ? (Py_XDECREF(site), NULL) : site;
    Py_DECREF(site);
    return origin(&self->p);
}

/* `_wrap_views(result, root, root_node)` where the result is a node that is a view of `root_node`
 * (a view Tensor of `root`) or neither it nor a view of it (a Tensor of its own); other results go
 * to the Python.  A new reference, or NULL. */
static PyObject *view_result(ApiCall *self, PyObject *result, PyObject *root, PyObject *root_node) {
    const Py_ssize_t *nat = self->p.node_at, *tat = self->p.tensor_at;
    if (Py_TYPE(result) != self->p.node_type || result == root_node)
        return PyObject_CallFunctionObjArgs(self->wrap_views, result, root, root_node, NULL);
    PyObject *op = SLOT(result, nat[N_OP]), *inputs = SLOT(result, nat[N_INPUTS]);
    int is_view = op == NULL ? 0 : op_is(op, VIEW);
    if (is_view < 0) return NULL;
    if (!is_view || inputs == NULL || !PyTuple_Check(inputs) || PyTuple_GET_SIZE(inputs) < 1 ||
            PyTuple_GET_ITEM(inputs, 0) != root_node)
        return pending(&self->p, result);                   /* (Tensor(node): not a buffer, so live) */
    PyObject *attrs = SLOT(result, nat[N_ATTRS]);
    PyObject *spec = attrs == NULL ? NULL : PyObject_GetItem(attrs, VIEW);
    PyObject *version = SLOT(root, tat[T_VERSION]);
    if (spec == NULL || version == NULL) {
        if (!PyErr_Occurred()) PyErr_SetString(PyExc_TypeError, "ApiCall: a view without its spec");
        Py_XDECREF(spec);
        return NULL;
    }
    PyObject *out = self->p.wrap->tp_alloc(self->p.wrap, 0);     /* Tensor(node, root, spec) */
    if (out == NULL) { Py_DECREF(spec); return NULL; }
    put(out, tat[T_NODE], result);
    put(out, tat[T_BASE], root);
    SLOT(out, tat[T_SPEC]) = spec;
    put(out, tat[T_GRAD], Py_None);
    put(out, tat[T_BASE_VERSION], version);
    put(out, tat[T_VERSION], ZERO);
    PyObject *any_leaf = SLOT(self->p.mode, self->p.any_leaf_at);
    int tracked = any_leaf == NULL ? 0 : PyObject_IsTrue(any_leaf);
    if (tracked > 0) {
        PyObject *r = PyObject_CallOneArg(self->p.track, result);
        tracked = r == NULL ? -1 : 0;
        Py_XDECREF(r);
    }
    if (tracked < 0) Py_CLEAR(out);
    return out;
}

/* A view op's argument and its root, where the replay can alias as `alias` does (its common case:
 * the argument reads the root's node directly): 1 with new references in *root and *root_node,
 * 0 (the general route), or -1. */
static int view_root(ApiCall *self, PyObject *this, PyObject *node, PyObject **root, PyObject **root_node) {
    const Py_ssize_t *nat = self->p.node_at, *tat = self->p.tensor_at;
    if (!PyObject_TypeCheck(this, self->p.wrap)) return 0;
    PyObject *base = SLOT(this, tat[T_BASE]);
    PyObject *r = base == NULL || base == Py_None ? this : base;
    PyObject *rn = SLOT(r, tat[T_NODE]);
    if (rn == NULL || Py_TYPE(rn) != self->p.node_type || Py_TYPE(node) != self->p.node_type ||
            SLOT(rn, nat[N_OP]) == NULL || SLOT(node, nat[N_OP]) == NULL || SLOT(node, nat[N_INPUTS]) == NULL)
        return 0;
    int root_view = op_is(SLOT(rn, nat[N_OP]), VIEW);
    if (root_view != 0) return root_view;
    if (node != rn) {
        int node_view = op_is(SLOT(node, nat[N_OP]), VIEW);
        if (node_view <= 0) return node_view;
        PyObject *inputs = SLOT(node, nat[N_INPUTS]);
        if (!PyTuple_Check(inputs) || PyTuple_GET_SIZE(inputs) < 1 || PyTuple_GET_ITEM(inputs, 0) != rn) return 0;
    }
    Py_INCREF(r);
    Py_INCREF(rn);
    *root = r, *root_node = rn;
    return 1;
}

/* The replayed call's result, NOT_TAKEN (fn decides), or NULL with an exception set. */
static PyObject *api_replay(ApiCall *self, PyObject *const *args, Py_ssize_t n, PyObject *kwnames) {
    Py_ssize_t nk = kwnames == NULL ? 0 : PyTuple_GET_SIZE(kwnames);
    for (Py_ssize_t i = 0; i < nk; i++) {                  /* (out= assigns: fn's) */
        int out = PyUnicode_Compare(PyTuple_GET_ITEM(kwnames, i), OUT_NAME);
        if (out == 0) return NOT_TAKEN;
        if (out == -1 && PyErr_Occurred()) return NULL;
    }
    PyObject *result = NOT_TAKEN, *kwargs = NULL, *sig = NULL, *rec = NULL, *site = NULL, *made = NULL;
    PyObject *root = NULL, *root_node = NULL;
    PyObject *argt = PyTuple_New(n);
    if (argt == NULL) return NULL;
    for (Py_ssize_t i = 0; i < n; i++) {
        Py_INCREF(args[i]);
        PyTuple_SET_ITEM(argt, i, args[i]);
    }
    if (nk == 0) {
        kwargs = EMPTY_KWARGS;
        Py_INCREF(kwargs);
    } else if ((kwargs = PyDict_New()) != NULL) {
        for (Py_ssize_t i = 0; i < nk; i++)
            if (PyDict_SetItem(kwargs, PyTuple_GET_ITEM(kwnames, i), args[n + i]) < 0) goto fail;
    } else {
        goto fail;
    }
    PyObject *sign_args[2] = {argt, kwargs};
    if ((sig = signer_vectorcall(self->signer, sign_args, 2, NULL)) == NULL) goto fail;
    if (sig == Py_None) goto done;
    PyObject *key = PyTuple_GET_ITEM(sig, 0), *nodes = PyTuple_GET_ITEM(sig, 1), *flat = PyTuple_GET_ITEM(sig, 2);
    if ((rec = PyDict_GetItemWithError(self->table, key)) == NULL) {
        if (PyErr_Occurred()) goto fail;
        goto done;
    }
    Py_INCREF(rec);                                        /* (the dict may change from here on) */
    if (rec == self->self_mark) {
        if (n > 0) result = (Py_INCREF(args[0]), args[0]);
        goto done;
    }
    if (self->view) {
        int r = n > 0 && PyList_GET_SIZE(nodes) > 0 ? view_root(self, args[0], PyList_GET_ITEM(nodes, 0), &root, &root_node) : 0;
        if (r <= 0) {
            if (r < 0) goto fail;
            goto done;
        }
    }
    if ((site = api_site(self)) == NULL) goto fail;
    PyObject *replay_args[4] = {rec, nodes, flat, site};
    if ((made = replayer_vectorcall(self->replayer, replay_args, 4, NULL)) == NULL) goto fail;
    if (self->view)
        result = view_result(self, made, root, root_node);
    else if (Py_TYPE(made) == self->p.node_type)
        result = pending(&self->p, made);
    else
        result = PyObject_CallFunctionObjArgs(self->wrap_result, self->op, made, NULL);
    goto done;
fail:
    result = NULL;
done:
    Py_DECREF(argt);
    Py_XDECREF(kwargs);
    Py_XDECREF(sig);
    Py_XDECREF(rec);
    Py_XDECREF(site);
    Py_XDECREF(made);
    Py_XDECREF(root);
    Py_XDECREF(root_node);
    return result;
}

static PyObject *apicall_vectorcall(PyObject *op, PyObject *const *args, size_t nargsf, PyObject *kwnames) {
    ApiCall *self = (ApiCall *)op;
    PyObject *r = api_replay(self, args, PyVectorcall_NARGS(nargsf), kwnames);
    if (r != NOT_TAKEN) return r;
    return PyObject_Vectorcall(self->outer, args, nargsf, kwnames);
}

static PyObject *apicall_new(PyTypeObject *type, PyObject *args, PyObject *kwargs) {
    PyObject *outer, *signer, *table, *self_mark, *op, *wrap_result, *wrap_views, *site, *replayer;
    PyObject *node_type, *wrap, *live, *trace, *user_code, *inside, *user_site, *shared;
    int view;
    static char *kw[] = {"outer", "signer", "table", "self_mark", "op", "wrap_result", "wrap_views", "site",
                         "replayer", "view", "node_type", "wrap", "live", "trace", "user_code", "inside",
                         "user_site", "shared", NULL};
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "OO!O!OOOOOO!pO!O!O!O!O!O!OO!:ApiCall", kw, &outer,
                                     &signer_type, &signer, &PyDict_Type, &table, &self_mark, &op, &wrap_result,
                                     &wrap_views, &site, &replayer_type, &replayer, &view, &PyType_Type, &node_type,
                                     &PyType_Type, &wrap, &PyTuple_Type, &live, &PyList_Type, &trace, &PyList_Type,
                                     &user_code, &PyDict_Type, &inside, &user_site, &PyDict_Type, &shared))
        return NULL;
    ApiCall *self = (ApiCall *)type->tp_alloc(type, 0);
    if (self == NULL) return NULL;
    self->vectorcall = apicall_vectorcall;
    self->view = view;
    PyObject *values[] = {outer, signer, table, self_mark, op, wrap_result, wrap_views, site, replayer};
    hold((PyObject *)self, APICALL_HELD, values, sizeof values / sizeof *values);
    if (parts_init(&self->p, node_type, wrap, live, trace, user_code, inside, user_site, shared) < 0) {
        Py_DECREF(self);
        return NULL;
    }
    return (PyObject *)self;
}

HELD_GC(apicall, ApiCall, APICALL_HELD)

STAND_IN_TYPE(apicall, ApiCall, "ApiCall", "call_memo.py's replay of a Tensor API call in C.",
              "the Tensor API function this stands for")

/* ---------------------------------------------------------------- the user's line
 *
 * ir/node.py::user_site in C: `SiteFinder(inside, classify)` holds node.py's table of code
 * objects (id -> whether lazytorch's own) and its miss function; a call `finder(depth=2)` returns
 * (code object, instruction offset) of the first frame outside the package from `depth` frames up,
 * counted as the Python counts them from its own frame (this has none: the caller's frame is 1),
 * or None. */
typedef struct {
    PyObject_HEAD
    vectorcallfunc vectorcall;
    PyObject *dict, *inside, *classify;
} SiteFinder;

static PyObject *site_vectorcall(PyObject *op, PyObject *const *args, size_t nargsf, PyObject *kwnames) {
    SiteFinder *self = (SiteFinder *)op;
    Py_ssize_t nargs = PyVectorcall_NARGS(nargsf), depth = 2;
    if (nargs > 1 || kwnames != NULL) {
        PyErr_SetString(PyExc_TypeError, "user_site(depth: int = 2)");
        return NULL;
    }
    if (nargs == 1 && (depth = PyLong_AsSsize_t(args[0])) == -1 && PyErr_Occurred()) return NULL;
    PyFrameObject *frame = PyEval_GetFrame();
    Py_XINCREF(frame);
    for (Py_ssize_t i = 1; i < depth && frame != NULL; i++) {
        PyFrameObject *back = PyFrame_GetBack(frame);
        Py_DECREF(frame);
        frame = back;
    }
    while (frame != NULL) {
        PyCodeObject *code = PyFrame_GetCode(frame);
        PyObject *id = PyLong_FromVoidPtr(code);
        PyObject *mine = id == NULL ? NULL : PyDict_GetItemWithError(self->inside, id);
        Py_XINCREF(mine);
        Py_XDECREF(id);
        if (mine == NULL && !PyErr_Occurred()) mine = PyObject_CallOneArg(self->classify, (PyObject *)code);
        int own = mine == NULL ? -1 : PyObject_IsTrue(mine);
        Py_XDECREF(mine);
        if (own < 0) { Py_DECREF(code); Py_DECREF(frame); return NULL; }
        if (!own) {
            PyObject *lasti = PyLong_FromLong(PyFrame_GetLasti(frame));
            PyObject *site = lasti == NULL ? NULL : PyTuple_Pack(2, (PyObject *)code, lasti);
            Py_XDECREF(lasti);
            Py_DECREF(code);
            Py_DECREF(frame);
            return site;
        }
        Py_DECREF(code);
        PyFrameObject *back = PyFrame_GetBack(frame);
        Py_DECREF(frame);
        frame = back;
    }
    Py_RETURN_NONE;
}

static PyObject *site_new(PyTypeObject *type, PyObject *args, PyObject *kwargs) {
    PyObject *inside, *classify;
    static char *kw[] = {"inside", "classify", NULL};
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "O!O:SiteFinder", kw, &PyDict_Type, &inside, &classify))
        return NULL;
    SiteFinder *self = (SiteFinder *)type->tp_alloc(type, 0);
    if (self == NULL) return NULL;
    self->vectorcall = site_vectorcall;
    Py_INCREF(inside);
    Py_INCREF(classify);
    self->inside = inside, self->classify = classify;
    return (PyObject *)self;
}

static const Py_ssize_t SITE_HELD[] = {offsetof(SiteFinder, dict), offsetof(SiteFinder, inside),
                                       offsetof(SiteFinder, classify)};
HELD_GC(site, SiteFinder, SITE_HELD)
CALLABLE_TYPE(site, SiteFinder, "SiteFinder", "ir/node.py's user_site(depth=2) in C.", 0, NULL, NULL, NULL)

/* ---------------------------------------------------------------- a program's arguments
 *
 * ir/graph.py::leaf_args in C: `LeafArgs(node_type)`; a call `leaf_args(leaves, n)` returns the
 * list of each of the first n leaves' buffer (op "buffer") or value (a scalar leaf). */
typedef struct {
    PyObject_HEAD
    vectorcallfunc vectorcall;
    PyObject *dict;
    PyTypeObject *node_type;
    Py_ssize_t at[N_SLOTS];
} LeafArgs;

/* One leaf's argument: its buffer or its value, by its op (as the Python reads them). */
static PyObject *leaf_arg(LeafArgs *self, PyObject *leaf) {
    if (Py_TYPE(leaf) != self->node_type) {          /* (not a Node: the attributes, as the Python) */
        PyObject *op = PyObject_GetAttrString(leaf, "op");
        if (op == NULL) return NULL;
        int buffer = PyObject_RichCompareBool(op, BUFFER, Py_EQ);
        Py_DECREF(op);
        return buffer < 0 ? NULL : PyObject_GetAttrString(leaf, buffer ? "buffer" : "value");
    }
    PyObject *op = SLOT(leaf, self->at[N_OP]);
    int buffer = op == BUFFER;
    if (!buffer && op != NULL && op != SCALAR) {
        buffer = PyObject_RichCompareBool(op, BUFFER, Py_EQ);
        if (buffer < 0) return NULL;
    }
    PyObject *v = op == NULL ? NULL : SLOT(leaf, self->at[buffer ? N_BUFFER : N_VALUE]);
    if (v == NULL) {
        PyErr_Format(PyExc_AttributeError, "leaf_args: a leaf has no %s", op == NULL ? "op" : buffer ? "buffer" : "value");
        return NULL;
    }
    Py_INCREF(v);
    return v;
}

static PyObject *leafargs_vectorcall(PyObject *op, PyObject *const *args, size_t nargsf, PyObject *kwnames) {
    LeafArgs *self = (LeafArgs *)op;
    if (PyVectorcall_NARGS(nargsf) != 2 || kwnames != NULL || !PyList_Check(args[0]))
        return PyErr_Format(PyExc_TypeError, "leaf_args(leaves: list, n: int) takes a list and a count");
    Py_ssize_t n = PyLong_AsSsize_t(args[1]);
    if (n == -1 && PyErr_Occurred()) return NULL;
    if (n < 0) return PyErr_Format(PyExc_ValueError, "leaf_args: a count of %zd leaves", n);
    PyObject *leaves = args[0];
    if (n > PyList_GET_SIZE(leaves)) n = PyList_GET_SIZE(leaves);   /* (as the Python's slice) */
    PyObject *out = PyList_New(n);
    if (out == NULL) return NULL;
    for (Py_ssize_t i = 0; i < n && i < PyList_GET_SIZE(leaves); i++) {
        PyObject *leaf = PyList_GET_ITEM(leaves, i);
        Py_INCREF(leaf);                              /* (held while a non-Node's getattr runs) */
        PyObject *v = leaf_arg(self, leaf);
        Py_DECREF(leaf);
        if (v == NULL) { Py_DECREF(out); return NULL; }
        PyList_SET_ITEM(out, i, v);
    }
    if (PyList_GET_SIZE(leaves) < n) {                /* (another thread shortened it: the Python's
                                                       * slice would have been shorter too) */
        Py_DECREF(out);
        return PyErr_Format(PyExc_RuntimeError, "leaf_args: the leaf list changed during the call");
    }
    return out;
}

static PyObject *leafargs_new(PyTypeObject *type, PyObject *args, PyObject *kwargs) {
    PyObject *node_type;
    static char *kw[] = {"node_type", NULL};
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "O!:LeafArgs", kw, &PyType_Type, &node_type))
        return NULL;
    LeafArgs *self = (LeafArgs *)type->tp_alloc(type, 0);
    if (self == NULL) return NULL;
    self->vectorcall = leafargs_vectorcall;
    Py_INCREF(node_type);
    self->node_type = (PyTypeObject *)node_type;
    if (slot_offsets(self->node_type, NODE_SLOTS, N_SLOTS, self->at) < 0) {
        Py_DECREF(self);
        return NULL;
    }
    return (PyObject *)self;
}

static const Py_ssize_t LEAF_ARGS_HELD[] = {offsetof(LeafArgs, dict), offsetof(LeafArgs, node_type)};
HELD_GC(leafargs, LeafArgs, LEAF_ARGS_HELD)
CALLABLE_TYPE(leafargs, LeafArgs, "LeafArgs", "ir/graph.py's leaf_args in C.", 0, NULL, NULL, NULL)

/* ---------------------------------------------------------------- the live tensors' common case
 *
 * realize.py LiveTensors.alone's common case in C: `AloneTaker(tensor_type, node_type)`; a call
 * `take(fresh, root)` over `fresh` (weak references to the tensors made since the last eval, most
 * of them dead: a chain's intermediates) either finds no live tensor holding a pending node other
 * than `root`, keeps in `fresh` one reference to each live tensor holding `root` (dropping the
 * rest, as LiveTensors._take does) and returns True, or returns None with `fresh` untouched: the
 * Python then takes its general route (another pending tensor, or an entry not as expected).
 * With `root` None it answers whether no live tensor is pending at all (LiveTensors.reads). 
 * ~20 dead references took ~3.5 us through _take's map and filter.  No Python code runs between
 * the scan and the rewrite (the GIL is held; the references dropped have no callbacks to run). */
typedef struct {
    PyObject_HEAD
    vectorcallfunc vectorcall;
    PyObject *dict;
    PyTypeObject *tensor_type, *node_type;
    Py_ssize_t t_node, n_op;
} AloneTaker;

/* The tensor a reference in `fresh` holds (borrowed), Py_None if it died, NULL if the entry is
 * not a weak reference to a tensor (the caller gives up). */
static PyObject *fresh_tensor(AloneTaker *self, PyObject *ref) {
    if (!PyWeakref_CheckRef(ref)) return NULL;
    PyObject *t = PyWeakref_GET_OBJECT(ref);
    return t == Py_None || PyObject_TypeCheck(t, self->tensor_type) ? t : NULL;
}

static PyObject *alone_vectorcall(PyObject *op, PyObject *const *args, size_t nargsf, PyObject *kwnames) {
    AloneTaker *self = (AloneTaker *)op;
    if (PyVectorcall_NARGS(nargsf) != 2 || kwnames != NULL || !PyList_CheckExact(args[0]))
        return PyErr_Format(PyExc_TypeError, "take(fresh: list, root: Node) takes a list and a node");
    PyObject *fresh = args[0], *root = args[1];
    Py_ssize_t n = PyList_GET_SIZE(fresh);
    for (Py_ssize_t i = 0; i < n; i++) {               /* (nothing changes until every entry passed) */
        PyObject *t = fresh_tensor(self, PyList_GET_ITEM(fresh, i));
        if (t == NULL) Py_RETURN_NONE;
        if (t == Py_None) continue;
        PyObject *node = SLOT(t, self->t_node);
        if (node == root) continue;
        if (node == NULL || Py_TYPE(node) != self->node_type) Py_RETURN_NONE;
        PyObject *nop = SLOT(node, self->n_op);
        if (nop != BUFFER && (nop == NULL || !PyUnicode_CheckExact(nop) || PyUnicode_Compare(nop, BUFFER) != 0))
            Py_RETURN_NONE;                            /* (a pending value: the Python decides) */
    }
    PyObject *keep = PyList_New(0);
    if (keep == NULL) return NULL;
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *ref = PyList_GET_ITEM(fresh, i), *t = PyWeakref_GET_OBJECT(ref);
        if (t == Py_None || SLOT(t, self->t_node) != root) continue;
        int seen = 0;                                  /* (one reference per tensor, as _take's `seen`) */
        for (Py_ssize_t j = 0; j < PyList_GET_SIZE(keep) && !seen; j++)
            seen = PyWeakref_GET_OBJECT(PyList_GET_ITEM(keep, j)) == t;
        if (!seen && PyList_Append(keep, ref) < 0) { Py_DECREF(keep); return NULL; }
    }
    int failed = PyList_SetSlice(fresh, 0, n, keep);
    Py_DECREF(keep);
    if (failed) return NULL;
    Py_RETURN_TRUE;
}

static PyObject *alone_new(PyTypeObject *type, PyObject *args, PyObject *kwargs) {
    PyObject *tensor_type, *node_type;
    static char *kw[] = {"tensor_type", "node_type", NULL};
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "O!O!:AloneTaker", kw, &PyType_Type, &tensor_type,
                                     &PyType_Type, &node_type))
        return NULL;
    AloneTaker *self = (AloneTaker *)type->tp_alloc(type, 0);
    if (self == NULL) return NULL;
    self->vectorcall = alone_vectorcall;
    Py_INCREF(tensor_type);
    Py_INCREF(node_type);
    self->tensor_type = (PyTypeObject *)tensor_type;
    self->node_type = (PyTypeObject *)node_type;
    static const char *t_names[1] = {"_node"}, *n_names[1] = {"op"};
    if (slot_offsets(self->tensor_type, t_names, 1, &self->t_node) < 0 ||
        slot_offsets(self->node_type, n_names, 1, &self->n_op) < 0) {
        Py_DECREF(self);
        return NULL;
    }
    return (PyObject *)self;
}

static const Py_ssize_t ALONE_HELD[] = {offsetof(AloneTaker, dict), offsetof(AloneTaker, tensor_type),
                                        offsetof(AloneTaker, node_type)};
HELD_GC(alone, AloneTaker, ALONE_HELD)
CALLABLE_TYPE(alone, AloneTaker, "AloneTaker", "realize.py's LiveTensors.alone, its common case, in C.", 0, NULL, NULL, NULL)

/* ---------------------------------------------------------------- a program's order, key and leaves
 *
 * ir/graph.py::program in C: `ProgramMaker(node_type, leaf_ops, constant_op, result)` holds
 * node.py's LEAF_OPS, the op of a structural constant ("scalar": a leaf of that op with attrs is
 * no input) and graph.py's Program; a call `program(roots[, prefix])` returns Program(order, key, leaves),
 * step for step the Python's walk (every eval that is not a tree runs it: W9's 232 nodes took
 * ~0.1-0.2 ms in Python).  Nodes are told apart by address, as Node's __hash__ (object's) and __eq__
 * (`is`) tell them, in a table of this call's own, so no hash or __eq__ runs; a node in the table
 * is held by `order`, or while on the stack by the inputs it was read from, so its address is not
 * reused meanwhile.  Python code runs only in the `key`
 * property of a node not keyed yet and in what an allocation's collection runs: the walk holds
 * each inputs tuple it goes through, as the Python's iterators do, and re-reads a node's slots
 * after, as the Python's attribute reads do. */
typedef struct {
    PyObject_HEAD
    vectorcallfunc vectorcall;
    PyObject *dict;
    PyTypeObject *node_type;
    PyObject *leaf_ops;        /* frozenset of the leaf ops */
    PyObject *constant_op;     /* "scalar" */
    PyTypeObject *result;      /* Program, a tuple subclass of three */
    Py_ssize_t at[N_SLOTS];
} ProgramMaker;

static const Py_ssize_t MAKER_HELD[] = {offsetof(ProgramMaker, dict), offsetof(ProgramMaker, node_type),
                                        offsetof(ProgramMaker, leaf_ops), offsetof(ProgramMaker, constant_op),
                                        offsetof(ProgramMaker, result)};
static PyObject *ROOTS;       /* "roots", the key's last entry's tag */

/* Node address -> position in `order` (ON_STACK while its inputs are placed): open addressing,
 * at most half full. */
#define ON_STACK (-2)
typedef struct {
    PyObject *node;
    Py_ssize_t pos;
} Entry;
typedef struct {
    Entry *entries;
    size_t mask;
    Py_ssize_t used;
} Index;

static inline size_t index_hash(PyObject *node) {
    size_t h = ((size_t)node >> 4) * (size_t)0x9E3779B97F4A7C15ULL;    /* (objects are 16-aligned) */
    return h ^ (h >> 29);
}

/* The entry of `node`, or the empty one where it would go. */
static Entry *index_slot(const Index *ix, PyObject *node) {
    size_t i = index_hash(node) & ix->mask;
    while (ix->entries[i].node != NULL && ix->entries[i].node != node) i = (i + 1) & ix->mask;
    return &ix->entries[i];
}

/* The position of `node`, ON_STACK, or -1 where it is not met yet. */
static inline Py_ssize_t index_find(const Index *ix, PyObject *node) {
    Entry *e = index_slot(ix, node);
    return e->node == NULL ? -1 : e->pos;
}

static int index_init(Index *ix, size_t size) {
    ix->entries = PyMem_Calloc(size, sizeof(Entry));
    if (ix->entries == NULL) { PyErr_NoMemory(); return -1; }
    ix->mask = size - 1;
    ix->used = 0;
    return 0;
}

/* Sets `node`'s position, adding it where it is new: 0, or -1 with an exception. */
static int index_put(Index *ix, PyObject *node, Py_ssize_t pos) {
    if ((size_t)(ix->used + 1) * 2 > ix->mask + 1) {
        Index bigger;
        if (index_init(&bigger, (ix->mask + 1) * 2) < 0) return -1;
        for (size_t i = 0; i <= ix->mask; i++)
            if (ix->entries[i].node != NULL) *index_slot(&bigger, ix->entries[i].node) = ix->entries[i];
        bigger.used = ix->used;
        PyMem_Free(ix->entries);
        *ix = bigger;
    }
    Entry *e = index_slot(ix, node);
    if (e->node == NULL) ix->used++;
    e->node = node;
    e->pos = pos;
    return 0;
}

/* A node whose inputs are being placed: the Python's (node, iter(node.inputs)). */
typedef struct {
    PyObject *node;            /* borrowed: held by the inputs it was read from (below it) or `roots` */
    PyObject *inputs;          /* a reference: its inputs as read when it was met */
    Py_ssize_t next;           /* the first input not looked at yet */
} Pending;

/* One call's state; everything in it is this call's own (a `key` property may call program). */
typedef struct {
    ProgramMaker *self;
    Index index;
    Pending *stack;
    Py_ssize_t depth, stack_room;
    PyObject **sig;            /* the key's entries so far, references */
    Py_ssize_t n_sig, sig_room;
    PyObject **numbers;        /* position -> its int (a reference), made when first read */
    Py_ssize_t numbers_room;
    PyObject *order, *leaves;
} Walk;

/* Room for `need` items of `size` bytes in *buf (growing by doubling): 0, or -1 with an exception.
 * New room is zeroed. */
static int room_for(void **buf, Py_ssize_t *room, Py_ssize_t need, size_t size) {
    if (need <= *room) return 0;
    Py_ssize_t more = *room ? *room : 64;
    while (more < need) more *= 2;
    void *grown = PyMem_Realloc(*buf, more * size);
    if (grown == NULL) { PyErr_NoMemory(); return -1; }
    memset((char *)grown + *room * size, 0, (more - *room) * size);
    *buf = grown;
    *room = more;
    return 0;
}

static int walk_init(Walk *w, ProgramMaker *self) {
    memset(w, 0, sizeof *w);
    w->self = self;
    w->order = PyList_New(0);
    w->leaves = PyList_New(0);
    if (w->order == NULL || w->leaves == NULL) return -1;
    return index_init(&w->index, 256);
}

static void walk_free(Walk *w) {
    for (Py_ssize_t i = 0; i < w->depth; i++) Py_DECREF(w->stack[i].inputs);
    for (Py_ssize_t i = 0; i < w->n_sig; i++) Py_DECREF(w->sig[i]);
    for (Py_ssize_t i = 0; i < w->numbers_room; i++) Py_XDECREF(w->numbers[i]);
    PyMem_Free(w->stack);
    PyMem_Free(w->sig);
    PyMem_Free(w->numbers);
    PyMem_Free(w->index.entries);
    Py_XDECREF(w->order);
    Py_XDECREF(w->leaves);
}

/* A node's slot, or NULL with the AttributeError the Python's read raises where it is unset. */
static PyObject *node_slot(Walk *w, PyObject *node, int slot) {
    PyObject *v = SLOT(node, w->self->at[slot]);
    if (v == NULL) PyErr_Format(PyExc_AttributeError, "program: a node's slot %s is not set", NODE_SLOTS[slot]);
    return v;
}

/* `node.inputs` (borrowed) of a Node, or NULL with an exception: `what` names the object. */
static PyObject *inputs_of(Walk *w, PyObject *node, const char *what) {
    if (Py_TYPE(node) != w->self->node_type)      /* (a subclass could hash and compare otherwise) */
        return PyErr_Format(PyExc_TypeError, "program: %s is a %.200s object, not a Node", what,
                            Py_TYPE(node)->tp_name);
    PyObject *inputs = node_slot(w, node, N_INPUTS);
    if (inputs != NULL && !PyTuple_Check(inputs))
        return PyErr_Format(PyExc_TypeError, "program: a node's inputs are a %.200s, not a tuple",
                            Py_TYPE(inputs)->tp_name);
    return inputs;
}

/* Appends a new reference (NULL: an error) to the key's entries: 0, or -1 with an exception. */
static int add_sig(Walk *w, PyObject *item) {
    if (item == NULL) return -1;
    if (room_for((void **)&w->sig, &w->sig_room, w->n_sig + 1, sizeof(PyObject *)) < 0) {
        Py_DECREF(item);
        return -1;
    }
    w->sig[w->n_sig++] = item;
    return 0;
}

/* `node._key or node.key`: the slot, the property only where the slot is falsy (a new reference). */
static PyObject *key_of(Walk *w, PyObject *node) {
    PyObject *key = node_slot(w, node, N_KEY);
    if (key == NULL) return NULL;
    Py_INCREF(key);                               /* (a __bool__ may run Python code) */
    int truth = PyTuple_CheckExact(key) ? PyTuple_GET_SIZE(key) != 0 : key == Py_None ? 0 : PyObject_IsTrue(key);
    if (truth > 0) return key;
    Py_DECREF(key);
    return truth < 0 ? NULL : PyObject_GetAttr(node, KEY_ATTR);
}

/* `op in LEAF_OPS and not (attrs and op == constant_op)` (Node.is_input): 1, 0, or -1. */
static int is_input(Walk *w, PyObject *node) {
    PyObject *op = node_slot(w, node, N_OP);
    if (op == NULL) return -1;
    Py_INCREF(op);                                /* (held across the calls below) */
    int r = PySet_Contains(w->self->leaf_ops, op);
    if (r > 0) {
        PyObject *attrs = node_slot(w, node, N_ATTRS);
        r = attrs == NULL ? -1 : PyDict_CheckExact(attrs) ? PyDict_GET_SIZE(attrs) != 0 : PyObject_IsTrue(attrs);
        if (r > 0) {                              /* (attrs: a structural constant if op is the constants') */
            r = PyObject_RichCompareBool(op, w->self->constant_op, Py_EQ);
            r = r < 0 ? -1 : !r;
        } else if (r == 0) {
            r = 1;
        }
    }
    Py_DECREF(op);
    return r;
}

/* The int of position `pos` (borrowed: the walk holds it), made once: consumers share it, as
 * the Python's index values are shared. */
static PyObject *number(Walk *w, Py_ssize_t pos) {
    if (room_for((void **)&w->numbers, &w->numbers_room, pos + 1, sizeof(PyObject *)) < 0) return NULL;
    if (w->numbers[pos] == NULL) w->numbers[pos] = PyLong_FromSsize_t(pos);
    return w->numbers[pos];
}

/* The positions of `nodes` (a tuple or list this holds), as `tuple(map(index.__getitem__, nodes))`. */
static PyObject *positions(Walk *w, PyObject *nodes) {
    Py_ssize_t n = PySequence_Fast_GET_SIZE(nodes);
    PyObject **items = PySequence_Fast_ITEMS(nodes);
    PyObject *out = PyTuple_New(n);
    for (Py_ssize_t i = 0; out != NULL && i < n; i++) {
        Py_ssize_t pos = index_find(&w->index, items[i]);
        PyObject *num = pos >= 0 ? number(w, pos) : NULL;
        if (num == NULL) {
            if (pos < 0) PyErr_SetObject(PyExc_KeyError, items[i]);    /* (the Python's index[...]) */
            Py_CLEAR(out);
            break;
        }
        Py_INCREF(num);
        PyTuple_SET_ITEM(out, i, num);
    }
    return out;
}

/* Places `node` at the end of `order` with its key entries: a node met without inputs (its key,
 * and it is a leaf if it is an input) or, `inner`, one whose inputs are all placed (its key and
 * their positions, its inputs read again as the Python reads them).  0, or -1 with an exception. */
static int place(Walk *w, PyObject *node, int inner) {
    if (index_put(&w->index, node, PyList_GET_SIZE(w->order)) < 0 || PyList_Append(w->order, node) < 0 ||
        add_sig(w, key_of(w, node)) < 0)
        return -1;
    if (!inner) {
        int leaf = is_input(w, node);
        return leaf <= 0 ? leaf : PyList_Append(w->leaves, node);
    }
    PyObject *inputs = inputs_of(w, node, "a node");
    if (inputs == NULL) return -1;
    Py_INCREF(inputs);
    int r = add_sig(w, positions(w, inputs));
    Py_DECREF(inputs);
    return r;
}

/* Puts `node` on the stack, its inputs to be placed first: 0, or -1 with an exception. */
static int push(Walk *w, PyObject *node, PyObject *inputs) {
    if (room_for((void **)&w->stack, &w->stack_room, w->depth + 1, sizeof(Pending)) < 0 ||
        index_put(&w->index, node, ON_STACK) < 0)
        return -1;
    Py_INCREF(inputs);
    w->stack[w->depth++] = (Pending){node, inputs, 0};
    return 0;
}

/* The next input of the top node to descend into (borrowed, its inputs in *inputs), placing the
 * ones without inputs on the way; NULL when none is left, or with an exception set. */
static PyObject *next_child(Walk *w, PyObject **inputs) {
    Pending *top = &w->stack[w->depth - 1];
    while (top->next < PyTuple_GET_SIZE(top->inputs)) {
        PyObject *child = PyTuple_GET_ITEM(top->inputs, top->next++);
        Py_ssize_t pos = index_find(&w->index, child);
        if (pos == ON_STACK) {                    /* (the Python would loop until memory runs out) */
            PyErr_SetString(PyExc_ValueError, "program: the graph has a cycle");
            return NULL;
        }
        if (pos >= 0) continue;
        if ((*inputs = inputs_of(w, child, "an input")) == NULL) return NULL;
        if (PyTuple_GET_SIZE(*inputs) != 0) return child;
        if (place(w, child, 0) < 0) return NULL;  /* (leaves are placed at once, in the same order) */
    }
    return NULL;
}

/* The Python's walk from one root: 0, or -1 with an exception. */
static int walk_from(Walk *w, PyObject *root) {
    PyObject *inputs = inputs_of(w, root, "a root");
    if (inputs == NULL) return -1;
    if (index_find(&w->index, root) >= 0) return 0;
    if (PyTuple_GET_SIZE(inputs) == 0) return place(w, root, 0);
    if (push(w, root, inputs) < 0) return -1;
    while (w->depth > 0) {
        PyObject *child = next_child(w, &inputs);
        if (child != NULL) {
            if (push(w, child, inputs) < 0) return -1;
            continue;
        }
        if (PyErr_Occurred()) return -1;
        Pending top = w->stack[--w->depth];
        int r = place(w, top.node, 1);
        Py_DECREF(top.inputs);
        if (r < 0) return -1;
    }
    return 0;
}

/* Program(order, key, leaves), the key's entries moved into it with ("roots", positions). */
static PyObject *finish(Walk *w, PyObject *roots) {
    PyObject *at = positions(w, roots);
    if (add_sig(w, at == NULL ? NULL : PyTuple_Pack(2, ROOTS, at)) < 0) { Py_XDECREF(at); return NULL; }
    Py_DECREF(at);
    PyObject *key = PyTuple_New(w->n_sig);
    PyObject *out = key == NULL ? NULL : w->self->result->tp_alloc(w->self->result, 3);
    if (out == NULL) { Py_XDECREF(key); return NULL; }
    memcpy(((PyTupleObject *)key)->ob_item, w->sig, w->n_sig * sizeof(PyObject *));
    w->n_sig = 0;                                 /* (the key holds them now) */
    PyTuple_SET_ITEM(out, 0, w->order);
    PyTuple_SET_ITEM(out, 1, key);
    PyTuple_SET_ITEM(out, 2, w->leaves);
    w->order = w->leaves = NULL;
    return out;
}

/* Starts the walk where `prefix` (a Program of the first roots: the same walk's start) ended:
 * its order, leaves and key entries but the last ("roots", ...), each node at its position. */
static int walk_resume(Walk *w, PyObject *prefix) {
    if (!PyObject_TypeCheck(prefix, w->self->result) || PyTuple_GET_SIZE(prefix) != 3) {
        PyErr_SetString(PyExc_TypeError, "program: prefix must be a Program");
        return -1;
    }
    PyObject *order = PyTuple_GET_ITEM(prefix, 0), *key = PyTuple_GET_ITEM(prefix, 1),
             *leaves = PyTuple_GET_ITEM(prefix, 2);
    if (!PyList_Check(order) || !PyTuple_Check(key) || PyTuple_GET_SIZE(key) < 1 || !PyList_Check(leaves)) {
        PyErr_SetString(PyExc_TypeError, "program: prefix must be a Program(order list, key tuple, leaves list)");
        return -1;
    }
    Py_ssize_t n = PyList_GET_SIZE(order), n_sig = PyTuple_GET_SIZE(key) - 1;
    if (PyList_SetSlice(w->order, 0, 0, order) < 0 || PyList_SetSlice(w->leaves, 0, 0, leaves) < 0 ||
        room_for((void **)&w->sig, &w->sig_room, n_sig, sizeof(PyObject *)) < 0)
        return -1;
    for (Py_ssize_t i = 0; i < n_sig; i++) {
        w->sig[i] = Py_NewRef(PyTuple_GET_ITEM(key, i));
        w->n_sig++;
    }
    /* (the index sized for the prefix's nodes at once: no table grown by doubling six times) */
    size_t size = w->index.mask + 1;
    while (size < (size_t)n * 2 + 2) size *= 2;
    if (size > w->index.mask + 1) {
        PyMem_Free(w->index.entries);
        if (index_init(&w->index, size) < 0) return -1;
    }
    for (Py_ssize_t i = 0; i < n; i++)
        if (index_put(&w->index, PyList_GET_ITEM(w->order, i), i) < 0) return -1;
    return 0;
}

static PyObject *maker_vectorcall(PyObject *op, PyObject *const *args, size_t nargsf, PyObject *kwnames) {
    Py_ssize_t nargs = PyVectorcall_NARGS(nargsf);
    if (nargs < 1 || nargs > 2 || kwnames != NULL)
        return PyErr_Format(PyExc_TypeError, "program(roots, prefix=None) takes one iterable of nodes "
                            "and optionally the Program of its first roots");
    PyObject *roots = PySequence_List(args[0]);   /* (this call's own: nothing else changes it) */
    if (roots == NULL) return NULL;
    Walk w;
    PyObject *out = NULL;
    if (walk_init(&w, (ProgramMaker *)op) == 0 && (nargs < 2 || args[1] == Py_None || walk_resume(&w, args[1]) == 0)) {
        Py_ssize_t i = 0;
        while (i < PyList_GET_SIZE(roots) && walk_from(&w, PyList_GET_ITEM(roots, i)) == 0) i++;
        if (i == PyList_GET_SIZE(roots)) out = finish(&w, roots);
    }
    walk_free(&w);
    Py_DECREF(roots);
    return out;
}

static PyObject *maker_new(PyTypeObject *type, PyObject *args, PyObject *kwargs) {
    PyObject *node_type, *leaf_ops, *constant_op, *result;
    static char *kw[] = {"node_type", "leaf_ops", "constant_op", "result", NULL};
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "O!O!UO!:ProgramMaker", kw, &PyType_Type, &node_type,
                                     &PyFrozenSet_Type, &leaf_ops, &constant_op, &PyType_Type, &result))
        return NULL;
    PyTypeObject *r = (PyTypeObject *)result;      /* (made as tuple.__new__ makes a subclass's) */
    if (!PyType_IsSubtype(r, &PyTuple_Type) || r->tp_basicsize != PyTuple_Type.tp_basicsize ||
        r->tp_itemsize != PyTuple_Type.tp_itemsize)
        return PyErr_Format(PyExc_TypeError, "ProgramMaker: result must be a tuple subclass without slots");
    ProgramMaker *self = (ProgramMaker *)type->tp_alloc(type, 0);
    if (self == NULL) return NULL;
    self->vectorcall = maker_vectorcall;
    PyObject *values[] = {NULL, node_type, leaf_ops, constant_op, result};   /* (MAKER_HELD's order) */
    for (size_t i = 1; i < sizeof values / sizeof *values; i++) {
        Py_INCREF(values[i]);
        FIELD(self, MAKER_HELD[i]) = values[i];
    }
    if (slot_offsets(self->node_type, NODE_SLOTS, N_SLOTS, self->at) < 0) {
        Py_DECREF(self);
        return NULL;
    }
    return (PyObject *)self;
}

/* ---- positions: what an eval's live tensors are looked up against
 * ir/graph.py's `pending_positions(order)` ({id(node): position} of a program's pending nodes) and
 * `reaches`' memo ({id(node): position or -1}) as one type: `Positions()` is an empty table (a
 * memo), ProgramMaker.pending_positions(order) a filled one.  An Index keyed by node address, so
 * that building ResNet-18's step's 3,744 positions makes no int object per node (a dict took
 * ~0.4 ms an eval) and a lookup makes none either.  It holds a reference to each node in it, so
 * no address in it can be reused by another object while it lives: a lookup by id() (`id(n) in
 * inside`, `.get(id(n))`, as the dicts are read) means the node it names.  No tp_clear: it holds
 * only Nodes, whose slots the collector clears to break a cycle through one. */
#define ABSENT (-3)
typedef struct {
    PyObject_HEAD
    Index index;               /* node (a reference this holds) -> position */
} Positions;

static PyTypeObject positions_type;

/* An empty Positions with room for `n` nodes before its table grows (index_put keeps it at most
 * half full). */
static Positions *positions_new_sized(Py_ssize_t n) {
    size_t size = 64;
    while (size < (size_t)n * 2 + 2) size *= 2;
    Positions *p = PyObject_GC_New(Positions, &positions_type);
    if (p == NULL) return NULL;
    p->index.entries = NULL;
    p->index.mask = 0;
    p->index.used = 0;
    if (index_init(&p->index, size) < 0) {
        Py_DECREF(p);
        return NULL;
    }
    PyObject_GC_Track(p);
    return p;
}

/* `node`'s position, or ABSENT. */
static inline Py_ssize_t positions_get(const Positions *p, PyObject *node) {
    const Entry *e = index_slot(&p->index, node);
    return e->node == NULL ? ABSENT : e->pos;
}

/* Sets `node`'s position, holding the node where it is new: 0, or -1 with an exception. */
static int positions_put(Positions *p, PyObject *node, Py_ssize_t pos) {
    Py_ssize_t before = p->index.used;
    if (index_put(&p->index, node, pos) < 0) return -1;
    if (p->index.used != before) Py_INCREF(node);
    return 0;
}

/* The node address an id() names (borrowed, never dereferenced), or NULL where `key` is no int
 * an id() can be (then no exception is left set: nothing has that key). */
static PyObject *positions_key(PyObject *key) {
    if (!PyLong_Check(key)) return NULL;
    void *at = PyLong_AsVoidPtr(key);
    if (at == NULL) PyErr_Clear();                 /* (negative or too large: no object's id) */
    return (PyObject *)at;
}

static PyObject *positions_tp_new(PyTypeObject *type, PyObject *args, PyObject *kwargs) {
    if (PyTuple_GET_SIZE(args) != 0 || (kwargs != NULL && PyDict_GET_SIZE(kwargs) != 0))
        return PyErr_Format(PyExc_TypeError, "Positions() takes no arguments (an empty memo for reaches)");
    return (PyObject *)positions_new_sized(0);
}

static int positions_traverse(Positions *self, visitproc visit, void *arg) {
    for (size_t i = 0; self->index.entries != NULL && i <= self->index.mask; i++)
        Py_VISIT(self->index.entries[i].node);
    return 0;
}

static void positions_dealloc(Positions *self) {
    PyObject_GC_UnTrack(self);
    Entry *entries = self->index.entries;
    size_t size = entries == NULL ? 0 : self->index.mask + 1;
    self->index.entries = NULL;
    for (size_t i = 0; i < size; i++) Py_XDECREF(entries[i].node);
    PyMem_Free(entries);
    PyObject_GC_Del(self);
}

static Py_ssize_t positions_len(Positions *self) { return self->index.used; }

static int positions_contains(Positions *self, PyObject *key) {
    PyObject *node = positions_key(key);
    return node != NULL && positions_get(self, node) != ABSENT;
}

static PyObject *positions_subscript(Positions *self, PyObject *key) {
    PyObject *node = positions_key(key);
    Py_ssize_t at = node == NULL ? ABSENT : positions_get(self, node);
    if (at == ABSENT) {
        PyErr_SetObject(PyExc_KeyError, key);
        return NULL;
    }
    return PyLong_FromSsize_t(at);
}

static PyObject *positions_get_method(Positions *self, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs < 1 || nargs > 2)
        return PyErr_Format(PyExc_TypeError, "get(id, default=None) takes one or two arguments");
    PyObject *node = positions_key(args[0]);
    Py_ssize_t at = node == NULL ? ABSENT : positions_get(self, node);
    if (at != ABSENT) return PyLong_FromSsize_t(at);
    return Py_NewRef(nargs == 2 ? args[1] : Py_None);
}

/* [(id, position)] in no particular order (`dict(p.items())` is the Python's dict). */
static PyObject *positions_items(Positions *self, PyObject *unused) {
    PyObject *out = PyList_New(0);
    for (size_t i = 0; out != NULL && i <= self->index.mask; i++) {
        const Entry *e = &self->index.entries[i];
        if (e->node == NULL) continue;
        PyObject *item = Py_BuildValue("(Nn)", PyLong_FromVoidPtr(e->node), e->pos);
        if (item == NULL || PyList_Append(out, item) < 0) Py_CLEAR(out);
        Py_XDECREF(item);
    }
    return out;
}

static PyObject *positions_contains_method(Positions *self, PyObject *key) {
    return PyBool_FromLong(positions_contains(self, key));
}

static PyMethodDef positions_methods[] = {
    /* (besides sq_contains: `filter(p.__contains__, ids)` calls this without a slot wrapper) */
    {"__contains__", (PyCFunction)positions_contains_method, METH_O | METH_COEXIST,
     "Whether the node of this id is held."},
    {"get", (PyCFunction)(void (*)(void))positions_get_method, METH_FASTCALL,
     "The position of the node of this id, or default."},
    {"items", (PyCFunction)positions_items, METH_NOARGS, "[(id, position)] of every node held, in no order."},
    {NULL, NULL, 0, NULL},
};
static PySequenceMethods positions_as_sequence = {.sq_length = (lenfunc)positions_len,
                                                  .sq_contains = (objobjproc)positions_contains};
static PyMappingMethods positions_as_mapping = {.mp_length = (lenfunc)positions_len,
                                                .mp_subscript = (binaryfunc)positions_subscript};
static PyTypeObject positions_type = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "lazytorch.ir._fastpath.Positions",
    .tp_doc = "id(node) -> position, keyed by node address: ir/graph.py's pending_positions and reaches' memo.",
    .tp_basicsize = sizeof(Positions),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC,
    .tp_new = positions_tp_new,
    .tp_dealloc = (destructor)positions_dealloc,
    .tp_traverse = (traverseproc)positions_traverse,
    .tp_as_sequence = &positions_as_sequence,
    .tp_as_mapping = &positions_as_mapping,
    .tp_methods = positions_methods,
};

/* ir/graph.py's pending_positions(order): the positions of the nodes of `order` whose op is no
 * leaf op, one loop over the list. */
static PyObject *maker_pending(PyObject *op, PyObject *order) {
    ProgramMaker *self = (ProgramMaker *)op;
    if (!PyList_Check(order)) return PyErr_Format(PyExc_TypeError, "pending_positions: order must be a list");
    /* (room for half the order: a program's pending nodes, about three in four, grow it once at
     * most; sized for the whole order, ResNet-18's step's table was twice as large, 256 KB) */
    Positions *out = positions_new_sized(PyList_GET_SIZE(order) / 2);
    for (Py_ssize_t i = 0; out != NULL && i < PyList_GET_SIZE(order); i++) {
        PyObject *node = PyList_GET_ITEM(order, i);
        PyObject *nop = Py_TYPE(node) == self->node_type ? SLOT(node, self->at[N_OP]) : NULL;
        if (nop == NULL) {
            PyErr_SetString(PyExc_TypeError, "pending_positions: order holds something other than a Node with an op");
            Py_CLEAR(out);
            break;
        }
        int leaf = PySet_Contains(self->leaf_ops, nop);   /* (no Python code: leaf_ops is a frozenset of str) */
        if (leaf < 0 || (leaf == 0 && positions_put(out, node, i) < 0)) Py_CLEAR(out);
    }
    return (PyObject *)out;
}

/* A node's inputs (borrowed), or NULL with a TypeError. */
static PyObject *reach_inputs(ProgramMaker *self, PyObject *node) {
    PyObject *inputs = SLOT(node, self->at[N_INPUTS]);
    if (inputs == NULL || !PyTuple_Check(inputs))
        PyErr_SetString(PyExc_TypeError, "reaches: a node's inputs must be a tuple");
    return inputs == NULL || !PyTuple_Check(inputs) ? NULL : inputs;
}

/* Whether `apart(node)` (None: no test) is true: 1, 0, or -1 with an exception. */
static int known_apart(PyObject *apart, PyObject *node) {
    if (apart == Py_None) return 0;
    PyObject *r = PyObject_CallOneArg(apart, node);
    if (r == NULL) return -1;
    int truth = r == Py_True ? 1 : r == Py_False ? 0 : PyObject_IsTrue(r);
    Py_DECREF(r);
    return truth;
}

/* ir/graph.py's reaches(root, inside, memo, apart=None): the position of the first node of
 * `inside` that root's pending graph reads, depth-first along inputs in order, or -1, with the
 * Python's memo (the position for each node on the path found, -1 for each node walked through
 * or known `apart`).  `inside` and `memo` are Positions (the dicts' int keys made ~3 us a call:
 * ResNet-18's step syncs ~60 live tensors).  The stack holds each inputs tuple it goes through
 * (so every node on the path is held); Python code runs only in `apart`. */
static PyObject *maker_reaches(PyObject *op, PyObject *const *args, Py_ssize_t nargs) {
    ProgramMaker *self = (ProgramMaker *)op;
    if (nargs < 3 || nargs > 4 || Py_TYPE(args[0]) != self->node_type ||
        !PyObject_TypeCheck(args[1], &positions_type) || !PyObject_TypeCheck(args[2], &positions_type) ||
        (nargs == 4 && args[3] != Py_None && !PyCallable_Check(args[3])))
        return PyErr_Format(PyExc_TypeError, "reaches(root, inside, memo, apart=None): a Node, two Positions "
                            "(pending_positions(order), reach_memo()) and a callable or None");
    PyObject *root = args[0], *apart = nargs == 4 ? args[3] : Py_None;
    Positions *inside = (Positions *)args[1], *memo = (Positions *)args[2];
    Py_ssize_t at = positions_get(inside, root);
    if (at == ABSENT) at = positions_get(memo, root);
    if (at != ABSENT) return PyLong_FromSsize_t(at);
    PyObject *tuple = reach_inputs(self, root);
    if (tuple == NULL || positions_put(memo, root, -1) < 0) return NULL;
    Py_ssize_t depth = 0, cap = 64, found = -1;
    PyObject **path = PyMem_Malloc(cap * sizeof(PyObject *)), **inputs = PyMem_Malloc(cap * sizeof(PyObject *));
    Py_ssize_t *next = PyMem_Malloc(cap * sizeof(Py_ssize_t));
    if (path == NULL || inputs == NULL || next == NULL) { PyErr_NoMemory(); goto done; }
    path[0] = root;
    inputs[0] = Py_NewRef(tuple);
    next[0] = 0;
    depth = 1;
    while (depth > 0) {
        PyObject *step = NULL;
        tuple = inputs[depth - 1];
        while (next[depth - 1] < PyTuple_GET_SIZE(tuple)) {
            PyObject *i = PyTuple_GET_ITEM(tuple, next[depth - 1]++), *iop;
            if (Py_TYPE(i) != self->node_type || (iop = SLOT(i, self->at[N_OP])) == NULL) {
                PyErr_SetString(PyExc_TypeError, "reaches: an input is no Node with an op");
                goto done;
            }
            at = positions_get(inside, i);
            Py_ssize_t memoised = at == ABSENT ? positions_get(memo, i) : ABSENT;
            if (at == ABSENT) at = memoised == ABSENT ? -1 : memoised;
            if (at >= 0) {
                for (Py_ssize_t k = 0; k < depth; k++)      /* (every node on the path reads it) */
                    if (positions_put(memo, path[k], at) < 0) goto done;
                found = at;
                goto done;
            }
            int leaf = PySet_Contains(self->leaf_ops, iop);
            if (leaf < 0) goto done;
            if (leaf || memoised != ABSENT) continue;
            int known = known_apart(apart, i);
            if (known < 0 || (known && positions_put(memo, i, -1) < 0)) goto done;
            if (!known) { step = i; break; }
        }
        if (step == NULL) {
            Py_DECREF(inputs[--depth]);
            continue;
        }
        if ((tuple = reach_inputs(self, step)) == NULL || positions_put(memo, step, -1) < 0) goto done;
        if (depth == cap) {
            cap *= 2;
            PyObject **p2 = PyMem_Realloc(path, cap * sizeof(PyObject *)), **i2 = NULL;
            Py_ssize_t *n2 = NULL;
            if (p2 != NULL) { path = p2; i2 = PyMem_Realloc(inputs, cap * sizeof(PyObject *)); }
            if (i2 != NULL) { inputs = i2; n2 = PyMem_Realloc(next, cap * sizeof(Py_ssize_t)); }
            if (n2 == NULL) { PyErr_NoMemory(); goto done; }
            next = n2;
        }
        path[depth] = step;
        inputs[depth] = Py_NewRef(tuple);
        next[depth] = 0;
        depth++;
    }
    PyObject *result;
done:
    result = PyErr_Occurred() ? NULL : PyLong_FromSsize_t(found);
    while (depth > 0) Py_DECREF(inputs[--depth]);
    PyMem_Free(path);
    PyMem_Free(inputs);
    PyMem_Free(next);
    return result;
}

static PyMethodDef maker_methods[] = {
    {"pending_positions", maker_pending, METH_O, "Positions of order's nodes that are no leaves."},
    {"reaches", (PyCFunction)(void (*)(void))maker_reaches, METH_FASTCALL,
     "reaches(root, inside, memo, apart=None): the position of the first node of `inside` that root's "
     "pending graph reads, or -1 (memoised)."},
    {NULL, NULL, 0, NULL},
};

HELD_GC(maker, ProgramMaker, MAKER_HELD)
CALLABLE_TYPE(maker, ProgramMaker, "ProgramMaker", "ir/graph.py's program(roots) in C.", 0, NULL, maker_methods, NULL)

/* ---------------------------------------------------------------- autograd/state.py classify
 * Classifier: which nodes of a new graph require grad (every op built while grad mode is on: the
 * Python walk was the forward build's top self time, ~0.65 of ResNet-18's ~2.2 ms a step under
 * cProfile).  Step for step the Python's depth-first walk over the unclassified inputs (the `seen`
 * set, inputs in order, each node settled when its inputs are): a node some input of which has a
 * Record gets Record(snapshot, needs) where its dtype is floating point and its op
 * differentiable, every other one False.  The snapshot is made as Node.with_key makes it (the
 * slots, then the origin from ir/node.py's TRACE, SITE and user_site, which the constructor
 * takes), without its Python frame; Record's constructor is called.  Autograd's Record type is an
 * argument (this module imports nothing from autograd).  Python runs inside the walk (the `key`
 * property where the slot is None, user_site's miss, a dtype's is_floating_point the first time,
 * Record's constructor, a collection inside an allocation): the stack holds each node it is
 * under and the inputs tuple it iterates, and a node's slots are read where the Python reads
 * them.  An error leaves what the Python's leaves: the nodes settled so far classified, the ones
 * on the stack not. */
typedef struct {
    PyObject_HEAD
    vectorcallfunc vectorcall;
    PyObject *dict;
    PyTypeObject *node_type;
    PyTypeObject *record_type;  /* autograd/state.py Record */
    PyObject *leaf_ops;         /* frozenset: ir/node.py LEAF_OPS */
    PyObject *non_differentiable; /* frozenset: state.py NON_DIFFERENTIABLE */
    PyObject *trace, *site, *user_site; /* ir/node.py TRACE, SITE, user_site: the snapshot's origin */
    PyObject *floating;         /* dtype -> its is_floating_point (a DType is frozen), read once */
    Py_ssize_t at[N_SLOTS];
} Classifier;

static const Py_ssize_t CLASSIFIER_HELD[] = {
    offsetof(Classifier, dict), offsetof(Classifier, node_type), offsetof(Classifier, record_type),
    offsetof(Classifier, leaf_ops), offsetof(Classifier, non_differentiable), offsetof(Classifier, trace),
    offsetof(Classifier, site), offsetof(Classifier, user_site), offsetof(Classifier, floating)};
static PyObject *FLOATING_ATTR;   /* "is_floating_point" */
#define CACHED_DTYPES 64          /* (dtypes are singletons: ten of them) */

/* A node the walk is under: the Python's (node, iter(node.inputs)), both held. */
typedef struct {
    PyObject *node;
    PyObject *inputs;
    Py_ssize_t next;
} Visit;

/* One call's walk: its stack and the `seen` set (node addresses, open addressing, at most half
 * full), each in room on the C stack first and on the heap past it.  Its own: a call made by
 * Python code inside the walk walks with its own. */
#define LOCAL_VISITS 32
#define LOCAL_SEEN 64
typedef struct {
    Classifier *self;
    Visit *stack;
    Py_ssize_t depth, room;
    PyObject **seen;
    size_t mask;
    Py_ssize_t used;
    Visit local_stack[LOCAL_VISITS];
    PyObject *local_seen[LOCAL_SEEN];
} Classify;

/* `slot`'s value (borrowed), or NULL with the AttributeError the Python's read raises where unset. */
static PyObject *classify_slot(Classifier *self, PyObject *node, int slot) {
    PyObject *v = SLOT(node, self->at[slot]);
    if (v == NULL) PyErr_Format(PyExc_AttributeError, "classify: a node's slot %s is not set", NODE_SLOTS[slot]);
    return v;
}

/* `node`'s type is Node: 0, or -1 with a TypeError (where the Python's attribute reads may not fail). */
static int classify_is_node(Classifier *self, PyObject *node, const char *what) {
    if (Py_TYPE(node) == self->node_type) return 0;
    PyErr_Format(PyExc_TypeError, "classify: %s is a %.200s object, not a Node", what, Py_TYPE(node)->tp_name);
    return -1;
}

/* `node.op in ops` (a frozenset): 1, 0, or -1 with an exception. */
static int classify_op_in(Classifier *self, PyObject *node, PyObject *ops) {
    PyObject *op = classify_slot(self, node, N_OP);
    if (op == NULL) return -1;
    Py_INCREF(op);                                /* (a str's hash and compare run no Python; another's may) */
    int r = PySet_Contains(ops, op);
    Py_DECREF(op);
    return r;
}

static inline size_t seen_hash(PyObject *node) {
    size_t h = ((size_t)node >> 4) * (size_t)0x9E3779B97F4A7C15ULL;
    return h ^ (h >> 29);
}

/* Whether `node` is in the seen set, or where it goes (*at). */
static int seen_has(const Classify *w, PyObject *node, size_t *at) {
    size_t i = seen_hash(node) & w->mask;
    while (w->seen[i] != NULL && w->seen[i] != node) i = (i + 1) & w->mask;
    *at = i;
    return w->seen[i] != NULL;
}

/* seen.add(id(node)): 0, or -1 with an exception. */
static int seen_add(Classify *w, PyObject *node) {
    size_t at;
    if ((size_t)(w->used + 1) * 2 > w->mask + 1) {
        size_t size = (w->mask + 1) * 2;
        PyObject **bigger = PyMem_Calloc(size, sizeof(PyObject *)), **old = w->seen;
        if (bigger == NULL) { PyErr_NoMemory(); return -1; }
        size_t old_mask = w->mask;
        w->seen = bigger;
        w->mask = size - 1;
        for (size_t i = 0; i <= old_mask; i++)
            if (old[i] != NULL && !seen_has(w, old[i], &at)) w->seen[at] = old[i];
        if (old != w->local_seen) PyMem_Free(old);
    }
    if (!seen_has(w, node, &at)) {
        w->seen[at] = node;
        w->used++;
    }
    return 0;
}

/* stack.append((node, iter(node.inputs))), node already seen: 0, or -1 with an exception. */
static int classify_push(Classify *w, PyObject *node) {
    PyObject *inputs = classify_slot(w->self, node, N_INPUTS);
    if (inputs == NULL) return -1;
    if (!PyTuple_Check(inputs)) {
        PyErr_Format(PyExc_TypeError, "classify: a node's inputs are a %.200s, not a tuple", Py_TYPE(inputs)->tp_name);
        return -1;
    }
    if (w->depth == w->room) {
        Py_ssize_t room = w->room * 2;
        Visit *grown = w->stack == w->local_stack ? PyMem_Malloc(room * sizeof(Visit))
                                                  : PyMem_Realloc(w->stack, room * sizeof(Visit));
        if (grown == NULL) { PyErr_NoMemory(); return -1; }
        if (w->stack == w->local_stack) memcpy(grown, w->local_stack, w->depth * sizeof(Visit));
        w->stack = grown;
        w->room = room;
    }
    Py_INCREF(node);
    Py_INCREF(inputs);
    w->stack[w->depth++] = (Visit){node, inputs, 0};
    return 0;
}

/* `dtype.is_floating_point`, truth tested: 1, 0, or -1 with an exception.  Read once per dtype of
 * an identity hash (a DType: a frozen dataclass compared by identity), for every other each time. */
static int is_floating(Classifier *self, PyObject *dtype) {
    int cache = Py_TYPE(dtype)->tp_hash == PyBaseObject_Type.tp_hash;
    if (cache) {
        PyObject *known = PyDict_GetItemWithError(self->floating, dtype);
        if (known != NULL) return known == Py_True;
        if (PyErr_Occurred()) return -1;
    }
    Py_INCREF(dtype);                             /* (the property is Python code) */
    PyObject *v = PyObject_GetAttr(dtype, FLOATING_ATTR);
    int r = v == NULL ? -1 : PyObject_IsTrue(v);
    Py_XDECREF(v);
    if (r >= 0 && cache && PyDict_GET_SIZE(self->floating) < CACHED_DTYPES &&
        PyDict_SetItem(self->floating, dtype, r ? Py_True : Py_False) < 0)
        r = -1;
    Py_DECREF(dtype);
    return r;
}

/* The snapshot's origin, as Node.with_key's: `(SITE.site or user_site()) if TRACE[0] else None`,
 * user_site from the innermost Python frame (with_key's caller: the one Python classify runs in,
 * which is lazytorch's own, or its caller here).  A new reference, or NULL with an exception. */
static PyObject *snapshot_origin(Classifier *self) {
    PyObject *on = PyList_GetItem(self->trace, 0);
    int traced = on == NULL ? -1 : PyObject_IsTrue(on);
    if (traced <= 0) return traced < 0 ? NULL : Py_NewRef(Py_None);
    PyObject *site = PyObject_GetAttr(self->site, SITE_ATTR);
    int set = site == NULL ? -1 : PyObject_IsTrue(site);
    if (set != 0) return set < 0 ? (Py_XDECREF(site), NULL) : site;
    Py_DECREF(site);
    return PyObject_CallOneArg(self->user_site, ONE);
}

/* Node.with_key(node.op, node.inputs, node.attrs, node.shape, node.dtype, node.key), made as it
 * makes it (object.__new__, the slots, then the origin): a new reference, or NULL with an exception. */
static PyObject *snapshot(Classifier *self, PyObject *node) {
    static const int slots[] = {N_OP, N_INPUTS, N_ATTRS, N_SHAPE, N_DTYPE, N_KEY};
    PyObject *args[6] = {NULL};
    PyObject *snap = NULL;
    for (int i = 0; i < 5; i++) {
        if ((args[i] = classify_slot(self, node, slots[i])) == NULL) goto done;
        Py_INCREF(args[i]);
    }
    PyObject *key = SLOT(node, self->at[N_KEY]);  /* (the property's answer where the slot is set) */
    if (key != NULL && key != Py_None)
        args[5] = Py_NewRef(key);
    else if ((args[5] = PyObject_GetAttr(node, KEY_ATTR)) == NULL)
        goto done;
    if ((snap = self->node_type->tp_alloc(self->node_type, 0)) == NULL) goto done;
    for (int i = 0; i < 6; i++) {                 /* (the snapshot takes the references) */
        SLOT(snap, self->at[slots[i]]) = args[i];
        args[i] = NULL;
    }
    put(snap, self->at[N_BUFFER], Py_None);
    put(snap, self->at[N_VALUE], Py_None);
    put(snap, self->at[N_TREE], Py_None);
    put(snap, self->at[N_AUTOGRAD], Py_None);
    if ((SLOT(snap, self->at[N_ORIGIN]) = snapshot_origin(self)) == NULL) Py_CLEAR(snap);
done:
    for (int i = 0; i < 6; i++) Py_XDECREF(args[i]);
    return snap;
}

/* The Python's settling of a node whose inputs are all classified (its caller holds it): its
 * Record or False in node.autograd.  0, or -1 with an exception (the node left as it was). */
static int settle(Classifier *self, PyObject *node) {
    PyObject *inputs = classify_slot(self, node, N_INPUTS);   /* (read again, as the Python does) */
    if (inputs == NULL) return -1;
    if (!PyTuple_Check(inputs)) {
        PyErr_Format(PyExc_TypeError, "classify: a node's inputs are a %.200s, not a tuple", Py_TYPE(inputs)->tp_name);
        return -1;
    }
    Py_ssize_t n = PyTuple_GET_SIZE(inputs);
    Py_INCREF(inputs);                            /* (a collection inside the allocation may run Python) */
    PyObject *needs = PyTuple_New(n);
    int any = 0;
    for (Py_ssize_t i = 0; needs != NULL && i < n; i++) {
        PyObject *input = PyTuple_GET_ITEM(inputs, i), *state;
        if (classify_is_node(self, input, "an input") < 0 || (state = classify_slot(self, input, N_AUTOGRAD)) == NULL) {
            Py_CLEAR(needs);
            break;
        }
        int need = Py_TYPE(state) == self->record_type;
        any |= need;
        PyTuple_SET_ITEM(needs, i, Py_NewRef(need ? Py_True : Py_False));
    }
    Py_DECREF(inputs);
    if (needs == NULL) return -1;
    PyObject *out = NULL;
    int grad = any;
    if (grad) {
        PyObject *dtype = classify_slot(self, node, N_DTYPE);
        grad = dtype == NULL ? -1 : is_floating(self, dtype);
    }
    if (grad > 0) {
        grad = classify_op_in(self, node, self->non_differentiable);
        grad = grad < 0 ? -1 : !grad;
    }
    if (grad > 0) {
        PyObject *snap = snapshot(self, node);
        if (snap != NULL) {
            PyObject *args[2] = {snap, needs};
            out = PyObject_Vectorcall((PyObject *)self->record_type, args, 2, NULL);
            Py_DECREF(snap);
        }
    } else if (grad == 0) {
        out = Py_NewRef(Py_False);
    }
    Py_DECREF(needs);
    if (out == NULL) return -1;
    Py_XSETREF(SLOT(node, self->at[N_AUTOGRAD]), out);
    return 0;
}

/* The walk from `root` (unclassified, no leaf op): 0, or -1 with an exception. */
static int classify_walk(Classify *w, PyObject *root) {
    Classifier *self = w->self;
    if (seen_add(w, root) < 0 || classify_push(w, root) < 0) return -1;
    while (w->depth > 0) {
        Visit *top = &w->stack[w->depth - 1];
        PyObject *child = NULL;
        while (top->next < PyTuple_GET_SIZE(top->inputs)) {
            PyObject *c = PyTuple_GET_ITEM(top->inputs, top->next++);
            size_t at;
            if (seen_has(w, c, &at)) continue;
            PyObject *state;
            if (classify_is_node(self, c, "an input") < 0 || (state = classify_slot(self, c, N_AUTOGRAD)) == NULL)
                return -1;
            if (state != Py_None) continue;       /* (_known: classified, or a leaf op) */
            int leaf = classify_op_in(self, c, self->leaf_ops);
            if (leaf < 0) return -1;
            if (leaf) continue;
            child = c;
            break;
        }
        if (child != NULL) {
            if (seen_add(w, child) < 0 || classify_push(w, child) < 0) return -1;
            continue;
        }
        Visit done = w->stack[--w->depth];
        int r = settle(self, done.node);
        Py_DECREF(done.node);
        Py_DECREF(done.inputs);
        if (r < 0) return -1;
    }
    return 0;
}

static PyObject *classifier_vectorcall(PyObject *op, PyObject *const *args, size_t nargsf, PyObject *kwnames) {
    Classifier *self = (Classifier *)op;
    if (PyVectorcall_NARGS(nargsf) != 1 || kwnames != NULL)
        return PyErr_Format(PyExc_TypeError, "classify(root) takes one Node");
    PyObject *root = args[0], *state;
    if (classify_is_node(self, root, "the root") < 0 || (state = classify_slot(self, root, N_AUTOGRAD)) == NULL)
        return NULL;
    if (state == Py_None) {
        int leaf = classify_op_in(self, root, self->leaf_ops);
        if (leaf < 0) return NULL;
        if (leaf) Py_RETURN_FALSE;
    } else {
        return Py_NewRef(Py_TYPE(state) == self->record_type ? Py_True : Py_False);
    }
    Classify w;
    w.self = self;
    w.stack = w.local_stack;
    w.depth = 0;
    w.room = LOCAL_VISITS;
    w.seen = w.local_seen;
    w.mask = LOCAL_SEEN - 1;
    w.used = 0;
    memset(w.local_seen, 0, sizeof w.local_seen);
    Py_INCREF(root);
    int r = classify_walk(&w, root);
    while (w.depth > 0) {                         /* (an error: what the walk was under) */
        w.depth--;
        Py_DECREF(w.stack[w.depth].node);
        Py_DECREF(w.stack[w.depth].inputs);
    }
    if (w.stack != w.local_stack) PyMem_Free(w.stack);
    if (w.seen != w.local_seen) PyMem_Free(w.seen);
    PyObject *out = NULL;
    if (r == 0 && (state = classify_slot(self, root, N_AUTOGRAD)) != NULL)
        out = Py_NewRef(Py_TYPE(state) == self->record_type ? Py_True : Py_False);
    Py_DECREF(root);
    return out;
}

static PyObject *classifier_new(PyTypeObject *type, PyObject *args, PyObject *kwargs) {
    PyObject *node_type, *record_type, *leaf_ops, *non_differentiable, *trace, *site, *user_site;
    static char *kw[] = {"node_type", "record_type", "leaf_ops", "non_differentiable", "trace", "site", "user_site",
                         NULL};
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "O!O!O!O!O!OO:Classifier", kw, &PyType_Type, &node_type,
                                     &PyType_Type, &record_type, &PyFrozenSet_Type, &leaf_ops, &PyFrozenSet_Type,
                                     &non_differentiable, &PyList_Type, &trace, &site, &user_site))
        return NULL;
    if (!PyCallable_Check(user_site)) return PyErr_Format(PyExc_TypeError, "Classifier: user_site must be callable");
    Classifier *self = (Classifier *)type->tp_alloc(type, 0);
    if (self == NULL) return NULL;
    self->vectorcall = classifier_vectorcall;
    PyObject *values[] = {NULL, node_type, record_type, leaf_ops, non_differentiable, trace, site, user_site};
    for (size_t i = 1; i < sizeof values / sizeof *values; i++) {   /* (CLASSIFIER_HELD's order) */
        Py_INCREF(values[i]);
        FIELD(self, CLASSIFIER_HELD[i]) = values[i];
    }
    if ((self->floating = PyDict_New()) == NULL || slot_offsets(self->node_type, NODE_SLOTS, N_SLOTS, self->at) < 0) {
        Py_DECREF(self);
        return NULL;
    }
    return (PyObject *)self;
}

HELD_GC(classifier, Classifier, CLASSIFIER_HELD)
CALLABLE_TYPE(classifier, Classifier, "Classifier", "autograd/state.py's classify(root) in C.", 0, NULL, NULL, NULL)

/* ---------------------------------------------------------------- a signature's view bases
 * ViewBases: ir/replay.py::_bases in C, where each view argument's base is found first, in a
 * call's argument nodes followed by the bases met so far.  The Signer calls it for every
 * signature with a view among its nodes (ResNet-18's backward: 109 rule applications a step, each
 * a Python call from C before), and autograd's BackwardWalker checks its memo's signatures with
 * it (below).  Step for step the Python's two forms: past four nodes a table by address (the
 * Python's dict of ids: a node given twice keeps its last position), else scans by identity. */
/* A view node's base (borrowed); NULL where `n` is no view (*err 0) or on an error (*err -1). */
static PyObject *vb_base(PyTypeObject *node_type, Py_ssize_t op_at, Py_ssize_t inputs_at, PyObject *n, int *err) {
    *err = -1;
    if (Py_TYPE(n) != node_type) {
        PyErr_Format(PyExc_TypeError, "_bases: a %.200s object, not a Node", Py_TYPE(n)->tp_name);
        return NULL;
    }
    PyObject *op = SLOT(n, op_at), *inputs = SLOT(n, inputs_at);
    if (op == NULL || inputs == NULL) {
        PyErr_SetString(PyExc_AttributeError, "_bases: a node's op or inputs are not set");
        return NULL;
    }
    if (op != VIEW && !(PyUnicode_Check(op) && PyUnicode_Compare(op, VIEW) == 0)) {
        *err = 0;
        return NULL;
    }
    if (!PyTuple_Check(inputs) || PyTuple_GET_SIZE(inputs) == 0) {
        PyErr_SetString(PyExc_TypeError, "_bases: a view's inputs are not a tuple of its base");
        return NULL;
    }
    return PyTuple_GET_ITEM(inputs, 0);
}

/* _bases(nodes) of the `n` nodes at `nodes`: a new tuple, or NULL with an exception.  Runs no
 * Python (its callers rely on that: their nodes are borrowed). */
static PyObject *view_bases(PyTypeObject *node_type, Py_ssize_t op_at, Py_ssize_t inputs_at, PyObject *const *nodes,
                            Py_ssize_t n) {
    Py_ssize_t count = 0, used = n, views = 0;
    PyObject *local_found[16], **found = local_found, *out = NULL;
    Py_ssize_t local_where[8], *where = local_where;
    Index seats = {NULL, 7, 0};                      /* (by address: the program walk's table) */
    if (n > 8 && ((found = PyMem_Malloc(2 * n * sizeof(PyObject *))) == NULL ||
                  (where = PyMem_Malloc(n * sizeof(Py_ssize_t))) == NULL)) {
        PyErr_NoMemory();
        goto done;
    }
    if (n > 4) {                                     /* first = {id(n): i for i, n in enumerate(nodes)} */
        size_t size = 8;
        while (size < (size_t)(4 * n)) size *= 2;
        if (index_init(&seats, size) < 0) goto done;
        for (Py_ssize_t i = 0; i < n; i++) {
            Entry *s = index_slot(&seats, nodes[i]);
            if (s->node == NULL) count++;
            *s = (Entry){nodes[i], i};
        }
    } else {
        for (Py_ssize_t i = 0; i < n; i++) found[i] = nodes[i];
    }
    for (Py_ssize_t i = 0; i < n; i++) {
        int err;
        PyObject *base = vb_base(node_type, op_at, inputs_at, nodes[i], &err);
        if (base == NULL) {
            if (err < 0) goto done;
            continue;
        }
        Py_ssize_t at;
        if (n > 4) {                                 /* first.setdefault(id(base), len(first)) */
            Entry *s = index_slot(&seats, base);
            if (s->node == NULL) *s = (Entry){base, count++};
            at = s->pos;
        } else {                                     /* the first of `found` that is base, else appended */
            for (at = 0; at < used && found[at] != base; at++) {}
            if (at == used) found[used++] = base;
        }
        where[views++] = at;
    }
    if ((out = PyTuple_New(views)) == NULL) goto done;
    for (Py_ssize_t j = 0; j < views; j++) {
        PyObject *at = PyLong_FromSsize_t(where[j]);
        if (at == NULL) { Py_CLEAR(out); goto done; }
        PyTuple_SET_ITEM(out, j, at);
    }
done:
    if (found != local_found) PyMem_Free(found);
    if (where != local_where) PyMem_Free(where);
    PyMem_Free(seats.entries);
    return out;
}

typedef struct {
    PyObject_HEAD
    vectorcallfunc vectorcall;
    PyObject *dict;
    PyTypeObject *node_type;
    Py_ssize_t op_at, inputs_at;
} ViewBases;

static const Py_ssize_t VIEW_BASES_HELD[] = {offsetof(ViewBases, dict), offsetof(ViewBases, node_type)};

static PyObject *view_bases_vectorcall(PyObject *op, PyObject *const *args, size_t nargsf, PyObject *kwnames) {
    ViewBases *self = (ViewBases *)op;
    if (PyVectorcall_NARGS(nargsf) != 1 || kwnames != NULL || !PyList_Check(args[0])) {
        PyErr_SetString(PyExc_TypeError, "_bases(nodes: list)");
        return NULL;
    }
    PyObject *list = args[0];
    return view_bases(self->node_type, self->op_at, self->inputs_at, ((PyListObject *)list)->ob_item,
                      PyList_GET_SIZE(list));
}

static PyObject *view_bases_new(PyTypeObject *type, PyObject *args, PyObject *kwargs) {
    PyObject *node_type;
    static char *kw[] = {"node_type", NULL};
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "O!:ViewBases", kw, &PyType_Type, &node_type)) return NULL;
    ViewBases *self = (ViewBases *)type->tp_alloc(type, 0);
    if (self == NULL) return NULL;
    self->vectorcall = view_bases_vectorcall;
    self->node_type = (PyTypeObject *)Py_NewRef(node_type);
    static const char *slots[2] = {"op", "inputs"};
    Py_ssize_t at[2];
    if (slot_offsets(self->node_type, slots, 2, at) < 0) {
        Py_DECREF(self);
        return NULL;
    }
    self->op_at = at[0], self->inputs_at = at[1];
    return (PyObject *)self;
}

HELD_GC(view_bases, ViewBases, VIEW_BASES_HELD)
CALLABLE_TYPE(view_bases, ViewBases, "ViewBases", "ir/replay.py's _bases(nodes) in C.", 0, NULL, NULL, NULL)

/* ---------------------------------------------------------------- autograd/engine.py's walk
 * BackwardWalker: autograd/engine.py::_walk_py in C, the backward proper, step for step: the order
 * of the records below the roots (engine.py _order and _grad_inputs: depth-first along the inputs
 * that need grad, in order, each node after them), then outputs first, each node's cotangents
 * (the one, or engine.py summed of several, in arrival order), the gradient it hands `captured`,
 * the retained tensor's (engine.py _retained) and the leaf's (accumulate_leaf), the FREED test,
 * its rule's results and the freed mark (or the stand-ins: bw_release).  A rule application (or
 * a sum) whose recorded one the memo holds is replayed here as input_grads (summed) and _replayed replay it: the table's entry
 * for the key (snapshot key, needs, signature of (inputs, node, g)), the Recording's replay and
 * its spec.  Every other one (no signature, not in the table, create_graph, the memo off or in
 * check mode: `memo_on()`, read once a walk) calls input_grads (summed).
 * The table's entry is found first in a cache (`ids`, bw_cached): a step's node keys are the very
 * objects of the step before (its nodes replay the same recordings), so a cached signature is
 * recognised by pointer tests (else by equal keys: a realized parameter's is made afresh each
 * step), without the Signer's tuples and the hash of the nested key (~0.7 us a lookup on cpu: its
 * views' specs hash in Python).
 * ResNet-18's backward build on cpu (~390 records a step, 335 rule applications, 48 sums): the
 * Python walk ~2.1-2.2 ms a step, this ~1.0-1.1 (half of what is left the replays' ~2,300 nodes).
 * The order's nodes are held by a list and found by address (the Python's dict and set of ids);
 * each position's cotangents are held until the node's turn.  Python runs inside the walk (those
 * calls, the signature's and the replay's Python, a `needs` entry's truth, key comparisons, a
 * collection inside an allocation): each node is held by the order, each record, snapshot,
 * inputs tuple and cache entry while it is used, read from the node where the Python reads it. */
enum { R_SNAPSHOT, R_NEEDS, R_LEAF, R_RETAIN, R_FREED, R_EDGE, R_SLOTS };
static const char *RECORD_SLOTS[R_SLOTS] = {"snapshot", "needs", "leaf", "retain", "freed", "edge"};
static PyObject *EDGE_NAME;       /* "edge" */
enum { SPEC_ARG, SPEC_MADE, SPEC_BASE };   /* engine.py _ARG, _MADE, _BASE */

typedef struct {
    PyObject_HEAD
    vectorcallfunc vectorcall;
    PyObject *dict;
    PyTypeObject *node_type;
    PyTypeObject *record_type;   /* autograd/state.py Record */
    PyObject *signature;         /* ir/replay.py signature */
    PyObject *rules;             /* engine.py _RULES: key -> (Recording or None, spec) */
    PyObject *ids;               /* engine.py _RULE_ID_MEMO's table: the cache in front of `rules` */
    PyObject *saves_nothing;     /* derivatives.py SAVES_NOTHING */
    PyObject *trace, *site;      /* ir/node.py TRACE and SITE: a replay's site */
    PyObject *input_grads, *summed, *accumulate_leaf, *retained, *memo_on;   /* engine.py's */
    PyObject *sum_key;           /* engine.py _SUM: a sum's key in `rules` is (sum_key, signature) */
    PyObject *freed;             /* engine.py FREED, the message */
    PyObject *no_kwargs;         /* an empty dict: the signature's kwargs (never handed out else) */
    Py_ssize_t node_at[N_SLOTS];
    Py_ssize_t record_at[R_SLOTS];
} BackwardWalker;

static const Py_ssize_t WALKER_HELD[] = {
    offsetof(BackwardWalker, dict), offsetof(BackwardWalker, node_type), offsetof(BackwardWalker, record_type),
    offsetof(BackwardWalker, signature), offsetof(BackwardWalker, rules), offsetof(BackwardWalker, ids),
    offsetof(BackwardWalker, saves_nothing),
    offsetof(BackwardWalker, trace), offsetof(BackwardWalker, site), offsetof(BackwardWalker, input_grads),
    offsetof(BackwardWalker, summed), offsetof(BackwardWalker, accumulate_leaf),
    offsetof(BackwardWalker, retained), offsetof(BackwardWalker, memo_on), offsetof(BackwardWalker, sum_key),
    offsetof(BackwardWalker, freed), offsetof(BackwardWalker, no_kwargs)};
static PyObject *REPLAY_NAME;     /* "replay" */

#define BW_ABSENT (-1)            /* a node the order has not met (index_find's) */
#define BW_UNPLACED ON_STACK      /* a node met, on the stack */

/* A node the order walk is under: the Python's (node, iter(_grad_inputs(node))), its snapshot's
 * inputs and its record's needs held (NULL for a leaf: no inputs). */
typedef struct {
    PyObject *node, *inputs, *needs;
    Py_ssize_t next;
} BwDescent;

/* One call's state, its own (a backward inside a Python call of the walk walks with another). */
typedef struct {
    BackwardWalker *self;
    Index index;                  /* node address -> position in the order (its nodes held by the stack or the order) */
    PyObject *order;              /* list: the order, each node held */
    BwDescent *stack;
    Py_ssize_t depth, room;
    PyObject **first;             /* per position: the first cotangent to arrive (held), or NULL */
    PyObject **more;              /* per position: NULL, or the list of all of them once a second arrives */
} BwWalk;

static inline Py_ssize_t bw_find(const BwWalk *w, PyObject *node) {
    return index_find(&w->index, node);
}

/* A slot's value (borrowed), or NULL with the AttributeError the Python's read raises where unset. */
static PyObject *bw_slot(PyObject *obj, Py_ssize_t at, const char *name) {
    PyObject *v = SLOT(obj, at);
    if (v == NULL)
        PyErr_Format(PyExc_AttributeError, "backward: a %.200s's slot %s is not set", Py_TYPE(obj)->tp_name, name);
    return v;
}

/* A Node's slot `at` (borrowed), or NULL with an exception: a TypeError (`what`) where `node` is
 * no Node, the Python's AttributeError where the slot is unset. */
static PyObject *bw_node_slot(BackwardWalker *self, PyObject *node, int at, const char *name, const char *what) {
    if (Py_TYPE(node) != self->node_type) {
        PyErr_Format(PyExc_TypeError, "backward: a %.200s object where %s", Py_TYPE(node)->tp_name, what);
        return NULL;
    }
    return bw_slot(node, self->node_at[at], name);
}

/* `RECORDS[node]` (state.py): node.autograd where it is a Record (borrowed), else NULL with the
 * KeyError the Python raises (a TypeError where `node` is no Node). */
static PyObject *bw_record(BackwardWalker *self, PyObject *node) {
    PyObject *state = bw_node_slot(self, node, N_AUTOGRAD, "autograd", "a Node was expected");
    if (state == NULL) return NULL;
    if (Py_TYPE(state) != self->record_type) {
        PyObject *args = PyTuple_Pack(1, node);
        if (args != NULL) PyErr_SetObject(PyExc_KeyError, args);
        Py_XDECREF(args);
        return NULL;
    }
    return state;
}

/* A record's field, type-checked: borrowed, or NULL with an exception. */
static PyObject *bw_field(BackwardWalker *self, PyObject *rec, int field, PyTypeObject *type) {
    PyObject *v = bw_slot(rec, self->record_at[field], RECORD_SLOTS[field]);
    if (v != NULL && type != NULL && !PyObject_TypeCheck(v, type)) {
        PyErr_Format(PyExc_TypeError, "backward: a Record's %s is a %.200s, not a %.200s", RECORD_SLOTS[field],
                     Py_TYPE(v)->tp_name, type->tp_name);
        return NULL;
    }
    return v;
}

/* A snapshot's inputs tuple (borrowed), or NULL with an exception. */
static PyObject *bw_inputs(BackwardWalker *self, PyObject *snap) {
    PyObject *inputs = bw_node_slot(self, snap, N_INPUTS, "inputs", "a Record's snapshot must be a Node");
    if (inputs != NULL && !PyTuple_Check(inputs)) {
        PyErr_Format(PyExc_TypeError, "backward: a snapshot's inputs are a %.200s, not a tuple",
                     Py_TYPE(inputs)->tp_name);
        return NULL;
    }
    return inputs;
}

/* stack.append((node, iter(_grad_inputs(node)))), node seated: 0, or -1 with an exception. */
static int bw_descend(BwWalk *w, PyObject *node) {
    BackwardWalker *self = w->self;
    PyObject *rec = bw_record(self, node), *snap, *inputs = NULL, *needs = NULL;
    if (rec == NULL || (snap = bw_field(self, rec, R_SNAPSHOT, NULL)) == NULL) return -1;
    if (snap != Py_None) {
        if ((inputs = bw_inputs(self, snap)) == NULL || (needs = bw_field(self, rec, R_NEEDS, &PyTuple_Type)) == NULL)
            return -1;
    }
    if (w->depth == w->room) {
        Py_ssize_t room = w->room * 2;
        BwDescent *grown = PyMem_Realloc(w->stack, room * sizeof(BwDescent));
        if (grown == NULL) { PyErr_NoMemory(); return -1; }
        w->stack = grown;
        w->room = room;
    }
    Py_INCREF(node);
    Py_XINCREF(inputs);
    Py_XINCREF(needs);
    w->stack[w->depth++] = (BwDescent){node, inputs, needs, 0};
    return 0;
}

/* engine.py _order: 0, or -1 with an exception. */
static int bw_order(BwWalk *w, PyObject *roots) {
    BackwardWalker *self = w->self;
    for (Py_ssize_t r = 0; r < PySequence_Fast_GET_SIZE(roots); r++) {
        PyObject *root = PySequence_Fast_GET_ITEM(roots, r);
        if (bw_find(w, root) != BW_ABSENT) continue;
        if (Py_TYPE(root) != self->node_type) {
            PyErr_Format(PyExc_TypeError, "backward: a root is a %.200s object, not a Node", Py_TYPE(root)->tp_name);
            return -1;
        }
        PyObject *state = bw_slot(root, self->node_at[N_AUTOGRAD], "autograd");
        if (state == NULL) return -1;
        if (Py_TYPE(state) != self->record_type) continue;
        if (index_put(&w->index, root, BW_UNPLACED) < 0 || bw_descend(w, root) < 0) return -1;
        while (w->depth > 0) {
            BwDescent *top = &w->stack[w->depth - 1];
            PyObject *child = NULL;
            Py_ssize_t n = top->inputs == NULL ? 0
                                               : Py_MIN(PyTuple_GET_SIZE(top->inputs), PyTuple_GET_SIZE(top->needs));
            while (top->next < n) {
                Py_ssize_t i = top->next++;
                PyObject *need = PyTuple_GET_ITEM(top->needs, i);
                int truth = need == Py_True ? 1 : need == Py_False ? 0 : PyObject_IsTrue(need);
                if (truth < 0) return -1;
                top = &w->stack[w->depth - 1];       /* (Python may have run: the frame is where it was) */
                PyObject *c = PyTuple_GET_ITEM(top->inputs, i);
                if (truth && bw_find(w, c) == BW_ABSENT) {
                    child = c;
                    break;
                }
            }
            if (child != NULL) {
                if (index_put(&w->index, child, BW_UNPLACED) < 0 || bw_descend(w, child) < 0) return -1;
                continue;
            }
            BwDescent done = w->stack[--w->depth];
            Py_ssize_t pos = PyList_GET_SIZE(w->order);
            int ok = PyList_Append(w->order, done.node);
            if (ok == 0) index_slot(&w->index, done.node)->pos = pos;
            Py_DECREF(done.node);
            Py_XDECREF(done.inputs);
            Py_XDECREF(done.needs);
            if (ok < 0) return -1;
        }
    }
    return 0;
}

/* grads.setdefault(id(node), []).append(g) for a node of the order (`pos`): 0, or -1 with an exception. */
static int bw_arrive(BwWalk *w, Py_ssize_t pos, PyObject *g) {
    if (w->first[pos] == NULL) {
        w->first[pos] = Py_NewRef(g);
        return 0;
    }
    if (w->more[pos] == NULL) {
        if ((w->more[pos] = PyList_New(0)) == NULL || PyList_Append(w->more[pos], w->first[pos]) < 0) return -1;
    }
    return PyList_Append(w->more[pos], g);
}

/* `entry == key`: the very object (`exact`), else compared.  1, 0, or -1 with an exception. */
static int bw_same_key(PyObject *entry, PyObject *key, int exact) {
    if (entry == key) return 1;
    if (exact) return 0;
    Py_INCREF(entry);                                /* (Python may run: a view's spec compares) */
    Py_INCREF(key);
    int same = PyObject_RichCompareBool(entry, key, Py_EQ);
    Py_DECREF(entry);
    Py_DECREF(key);
    return same;
}

/* A node's key as the Signer reads it (node_key: the cached slot, else the property, which
 * caches it): a new reference, or NULL with an exception. */
static PyObject *bw_key(BackwardWalker *self, PyObject *node) {
    PyObject *key = SLOT(node, self->node_at[N_KEY]);
    if (key != NULL && key != Py_None) return Py_NewRef(key);
    return PyObject_GetAttr(node, KEY_ATTR);
}

/* Whether signature(args) returns a key equal to `sig0`, a key it returned before (the cache's),
 * without making it: each node argument's key equal to the one sig0 holds (`exact`: the very
 * object), a view's with its base's in the pair the Signer makes, the nodes distinct and their
 * bases found alike.  The Signer's own steps decide it (a runtime scalar or a param is no key; a
 * structural constant's is), from the same slots.  1, 0 where that is not sure (then the Signer
 * is asked), or -1 with an exception. */
static int bw_same_signature(BackwardWalker *self, PyObject *args, PyObject *sig0, int exact) {
    Py_ssize_t n = PyTuple_GET_SIZE(args);
    int views = 0, same = 1;
    if (!PyTuple_CheckExact(sig0) || PyTuple_GET_SIZE(sig0) < n) return 0;
    for (Py_ssize_t i = 0; same > 0 && i < n; i++) {
        PyObject *a = PyTuple_GET_ITEM(args, i), *op, *entry = PyTuple_GET_ITEM(sig0, i);
        if (Py_TYPE(a) != self->node_type || (op = SLOT(a, self->node_at[N_OP])) == NULL || !PyUnicode_Check(op))
            return 0;
        for (Py_ssize_t j = 0; j < i; j++)           /* (the Signer's `distinct`) */
            if (PyTuple_GET_ITEM(args, j) == a) return 0;
        enum { PLAIN_KEY, VIEW_KEY, CONSTANT_KEY } kind = PLAIN_KEY;
        if (op == VIEW || PyUnicode_Compare(op, VIEW) == 0) {
            if (!PyTuple_CheckExact(entry) || PyTuple_GET_SIZE(entry) != 2) return 0;
            kind = VIEW_KEY;
        } else if (op == SCALAR || PyUnicode_Compare(op, SCALAR) == 0) {
            kind = CONSTANT_KEY;
        } else if (op == PARAM || PyUnicode_Compare(op, PARAM) == 0) {
            return 0;
        }
        PyObject *key = bw_key(self, a);             /* (Python may run from here: a, sig0 and args are held) */
        if (key == NULL) return -1;
        if (kind == CONSTANT_KEY) {
            /* (a structural constant: its key's attributes hold its value; a runtime scalar has none) */
            same = PyTuple_Check(key) && PyTuple_GET_SIZE(key) > 1 && PyTuple_Check(PyTuple_GET_ITEM(key, 1)) &&
                   PyTuple_GET_SIZE(PyTuple_GET_ITEM(key, 1)) > 0 ? bw_same_key(entry, key, exact) : 0;
        } else if (kind == VIEW_KEY) {
            PyObject *inputs = SLOT(a, self->node_at[N_INPUTS]), *base, *base_key;
            if (inputs == NULL || !PyTuple_Check(inputs) || PyTuple_GET_SIZE(inputs) < 1 ||
                Py_TYPE(base = PyTuple_GET_ITEM(inputs, 0)) != self->node_type) {
                Py_DECREF(key);
                return 0;
            }
            Py_INCREF(base);
            base_key = bw_key(self, base);
            Py_DECREF(base);
            same = base_key == NULL ? -1 : bw_same_key(PyTuple_GET_ITEM(entry, 0), key, exact);
            if (same > 0) same = bw_same_key(PyTuple_GET_ITEM(entry, 1), base_key, exact);
            Py_XDECREF(base_key);
            views = 1;
        } else {
            same = bw_same_key(entry, key, exact);
        }
        Py_DECREF(key);
    }
    if (same <= 0) return same;
    if (!(views && n > 1)) return PyTuple_GET_SIZE(sig0) == n;
    if (PyTuple_GET_SIZE(sig0) != n + 1) return 0;
    PyObject *bases = view_bases(self->node_type, self->node_at[N_OP], self->node_at[N_INPUTS],
                                 &PyTuple_GET_ITEM(args, 0), n);
    if (bases == NULL) return -1;
    same = PyObject_RichCompareBool(bases, PyTuple_GET_ITEM(sig0, n), Py_EQ);   /* (tuples of ints) */
    Py_DECREF(bases);
    return same;
}

/* The identity cache's bucket of a node key (op, attributes, shape, dtype name): a number made of
 * its op, shape and dtype, not of its attributes (a view's spec hashes in Python) nor its identity
 * (a node the general route built has a key object of its own each step, which must find the
 * entries of its equal predecessors, not pile up new ones).  A new reference; Py_None for a key of
 * another form (no cache), or NULL with an exception. */
static PyObject *bw_bucket(PyObject *key) {
    if (!PyTuple_CheckExact(key) || PyTuple_GET_SIZE(key) != 4 || !PyUnicode_CheckExact(PyTuple_GET_ITEM(key, 0)) ||
        !PyTuple_CheckExact(PyTuple_GET_ITEM(key, 2)) || !PyUnicode_CheckExact(PyTuple_GET_ITEM(key, 3)))
        return Py_NewRef(Py_None);
    Py_hash_t op = PyObject_Hash(PyTuple_GET_ITEM(key, 0)), shape = PyObject_Hash(PyTuple_GET_ITEM(key, 2));
    Py_hash_t dtype = PyObject_Hash(PyTuple_GET_ITEM(key, 3));    /* (str and int hashes: no Python runs) */
    if (op == -1 || shape == -1 || dtype == -1) return NULL;
    size_t h = ((size_t)op * 1000003u) ^ ((size_t)shape * (size_t)0x9E3779B97F4A7C15ULL) ^ (size_t)dtype;
    return PyLong_FromSsize_t((Py_ssize_t)h);
}

/* The identity cache's entry for (head, head2, args) in the bucket `bucket_id` (bw_bucket): the
 * table's entry (a new reference), or NULL (*err: 0, or -1 with an exception).  First by the very
 * key objects (a step's keys are its recordings' own: each mismatch a pointer test), then by equal
 * ones (a realized parameter's key, and a general build's, is made afresh each step; comparing two
 * recorded view keys runs their specs' dataclass __eq__, so it comes second). */
static PyObject *bw_cached(BackwardWalker *self, PyObject *bucket_id, PyObject *head, PyObject *head2,
                           PyObject *args, int *err) {
    *err = 0;
    PyObject *entries = PyDict_GetItemWithError(self->ids, bucket_id), *hit = NULL;
    if (entries == NULL) {
        *err = PyErr_Occurred() ? -1 : 0;
        return NULL;
    }
    if (!PyList_CheckExact(entries)) return NULL;
    Py_INCREF(entries);
    for (int exact = 1; hit == NULL && exact >= 0; exact--) {
        for (Py_ssize_t i = 0; hit == NULL && i < PyList_GET_SIZE(entries); i++) {
            PyObject *e = PyList_GET_ITEM(entries, i);   /* (head, head2 or None, sig0, table entry) */
            if (!PyTuple_CheckExact(e) || PyTuple_GET_SIZE(e) != 4 || (exact && PyTuple_GET_ITEM(e, 0) != head))
                continue;
            PyObject *h2 = PyTuple_GET_ITEM(e, 1);
            if (head2 == NULL ? h2 != Py_None : h2 == Py_None) continue;
            Py_INCREF(e);                                /* (Python may run: the bucket may change) */
            int same = bw_same_key(PyTuple_GET_ITEM(e, 0), head, exact);
            if (same > 0 && head2 != NULL) same = bw_same_key(h2, head2, 0);    /* (needs: tuples of bools) */
            if (same > 0) same = bw_same_signature(self, args, PyTuple_GET_ITEM(e, 2), exact);
            if (same > 0) hit = Py_NewRef(PyTuple_GET_ITEM(e, 3));
            Py_DECREF(e);
            if (same < 0) {
                *err = -1;
                exact = -1;
                break;
            }
        }
    }
    Py_DECREF(entries);
    return hit;
}

/* Remembers the table's entry `hit` for (head, head2, sig0) in the identity cache: 0, or -1 with
 * an exception.  At most BW_BUCKET entries a bucket (the oldest goes: ResNet-18's fullest holds
 * ~10) and BW_BUCKETS buckets (past that the cache starts over, as the table does). */
#define BW_BUCKET 32
#define BW_BUCKETS 4096
static int bw_cache(BackwardWalker *self, PyObject *bucket_id, PyObject *head, PyObject *head2, PyObject *sig0,
                    PyObject *hit) {
    PyObject *entries = PyDict_GetItemWithError(self->ids, bucket_id);
    if (entries == NULL && PyErr_Occurred()) return -1;
    if (entries == NULL || !PyList_CheckExact(entries)) {
        if (PyDict_GET_SIZE(self->ids) >= BW_BUCKETS) PyDict_Clear(self->ids);
        PyObject *fresh = PyList_New(0);
        if (fresh == NULL || PyDict_SetItem(self->ids, bucket_id, fresh) < 0) { Py_XDECREF(fresh); return -1; }
        entries = fresh;
        Py_DECREF(fresh);                            /* (the cache holds it) */
    }
    Py_INCREF(entries);
    int r = -1;
    PyObject *e = PyTuple_Pack(4, head, head2 == NULL ? Py_None : head2, sig0, hit);
    if (e != NULL && (PyList_GET_SIZE(entries) < BW_BUCKET || PySequence_DelItem(entries, 0) == 0))
        r = PyList_Append(entries, e);
    Py_XDECREF(e);
    Py_DECREF(entries);
    return r;
}

/* A memo hit, replayed as engine.py _replayed replays it: the table's entry for the key (`head`,
 * the signature's key), or (`head`, `head2`, the signature's key) where head2 is not NULL, of
 * `args` (a tuple), the Recording's replay over the signature's nodes and the spec.  The entry is
 * found in the identity cache where its signature is sure to be the one cached (bw_same_signature;
 * `bucket`: the node key its bucket is found by, bw_bucket, NULL for none), else by the Signer
 * and the table (and cached).  The list of results (a new reference), Py_None where there is no hit (no
 * signature, no entry), or NULL with an exception. */
static PyObject *bw_replayed(BackwardWalker *self, PyObject *args, PyObject *head, PyObject *head2,
                             PyObject *bucket) {
    PyObject *out = NULL, *bucket_id = NULL, *sig = NULL, *nodes = NULL, *flat, *hit = NULL, *key = NULL;
    PyObject *made = NULL, *site = NULL;
    int err = 0;
    if (bucket != NULL) {
        if ((bucket_id = bw_bucket(bucket)) == NULL) return NULL;
        if (bucket_id == Py_None) {
            Py_CLEAR(bucket_id);
        } else {
            hit = bw_cached(self, bucket_id, head, head2, args, &err);
            if (err < 0) goto done;
        }
    }
    if (hit != NULL) {                               /* signature(args)'s nodes and flat, as it makes them */
        if ((nodes = PySequence_List(args)) == NULL) goto done;
        flat = args;
    } else {
        PyObject *call[2] = {args, self->no_kwargs};
        if ((sig = PyObject_Vectorcall(self->signature, call, 2, NULL)) == NULL) goto done;
        if (sig == Py_None) {
            out = Py_NewRef(Py_None);
            goto done;
        }
        if (!PyTuple_Check(sig) || PyTuple_GET_SIZE(sig) != 3 || !PyList_Check(PyTuple_GET_ITEM(sig, 1))) {
            PyErr_SetString(PyExc_TypeError, "backward: a signature is not (key, nodes: list, flat)");
            goto done;
        }
        nodes = Py_NewRef(PyTuple_GET_ITEM(sig, 1));
        flat = PyTuple_GET_ITEM(sig, 2);
        key = head2 == NULL ? PyTuple_Pack(2, head, PyTuple_GET_ITEM(sig, 0))
                            : PyTuple_Pack(3, head, head2, PyTuple_GET_ITEM(sig, 0));
        if (key == NULL) goto done;
        if ((hit = PyDict_GetItemWithError(self->rules, key)) == NULL) {
            if (!PyErr_Occurred()) out = Py_NewRef(Py_None);
            goto done;
        }
        Py_INCREF(hit);                              /* (the table may be cleared while Python runs) */
        if (bucket_id != NULL && bw_cache(self, bucket_id, head, head2, PyTuple_GET_ITEM(sig, 0), hit) < 0) goto done;
    }
    if (!PyTuple_Check(hit) || PyTuple_GET_SIZE(hit) != 2 || !PyTuple_Check(PyTuple_GET_ITEM(hit, 1))) {
        PyErr_SetString(PyExc_TypeError, "backward: a rule memo entry is not (recording, spec: tuple)");
        goto done;
    }
    PyObject *recording = PyTuple_GET_ITEM(hit, 0), *spec = PyTuple_GET_ITEM(hit, 1);
    if (recording != Py_None) {          /* recording.replay(nodes, flat, SITE.site if TRACE[0] else None) */
        PyObject *on = PyList_GetItem(self->trace, 0);
        int traced = on == NULL ? -1 : PyObject_IsTrue(on);
        if (traced < 0) goto done;
        if ((site = traced ? PyObject_GetAttr(self->site, SITE_ATTR) : Py_NewRef(Py_None)) == NULL) goto done;
        PyObject *margs[5] = {NULL, recording, nodes, flat, site};
        PyObject *result = PyObject_VectorcallMethod(REPLAY_NAME, margs + 1, 4 | PY_VECTORCALL_ARGUMENTS_OFFSET, NULL);
        if (result == NULL) goto done;
        made = PySequence_Fast(result, "backward: a rule's replay is not a sequence");
        Py_DECREF(result);
        if (made == NULL) goto done;
    }
    Py_ssize_t n = PyTuple_GET_SIZE(spec);
    if ((out = PyList_New(n)) == NULL) goto done;
    for (Py_ssize_t j = 0; j < n; j++) {
        PyObject *s = PyTuple_GET_ITEM(spec, j), *v = NULL;
        if (s == Py_None) {
            v = Py_None;
        } else if (PyTuple_Check(s) && PyTuple_GET_SIZE(s) == 2) {
            long kind = PyLong_AsLong(PyTuple_GET_ITEM(s, 0));
            Py_ssize_t i = PyLong_AsSsize_t(PyTuple_GET_ITEM(s, 1));
            if (PyErr_Occurred()) { Py_CLEAR(out); goto done; }
            if (kind == SPEC_MADE) {
                if (made != NULL && i >= 0 && i < PySequence_Fast_GET_SIZE(made)) v = PySequence_Fast_GET_ITEM(made, i);
            } else if (i >= 0 && i < PyList_GET_SIZE(nodes)) {
                PyObject *a = PyList_GET_ITEM(nodes, i);
                if (kind == SPEC_ARG) {
                    v = a;
                } else if (kind == SPEC_BASE && Py_TYPE(a) == self->node_type) {   /* a view argument's base */
                    PyObject *ins = SLOT(a, self->node_at[N_INPUTS]);
                    if (ins != NULL && PyTuple_Check(ins) && PyTuple_GET_SIZE(ins) > 0) v = PyTuple_GET_ITEM(ins, 0);
                }
            }
        }
        if (v == NULL) {
            PyErr_SetString(PyExc_ValueError, "backward: a bad rule memo spec");
            Py_CLEAR(out);
            goto done;
        }
        PyList_SET_ITEM(out, j, Py_NewRef(v));
    }
done:
    Py_XDECREF(bucket_id);
    Py_XDECREF(sig);
    Py_XDECREF(nodes);
    Py_XDECREF(key);
    Py_XDECREF(hit);
    Py_XDECREF(site);
    Py_XDECREF(made);
    return out;
}

/* input_grads's memo hit: bw_replayed of (*snapshot.inputs, node, g) under (snapshot.key, rec.needs),
 * cached by the snapshot's key. */
static PyObject *bw_rule_replayed(BackwardWalker *self, PyObject *rec, PyObject *snap, PyObject *inputs,
                                  PyObject *node, PyObject *g) {
    PyObject *needs = bw_field(self, rec, R_NEEDS, NULL);
    if (needs == NULL) return NULL;
    Py_ssize_t k = PyTuple_GET_SIZE(inputs);
    PyObject *args = PyTuple_New(k + 2);
    if (args == NULL) return NULL;
    for (Py_ssize_t i = 0; i < k; i++) PyTuple_SET_ITEM(args, i, Py_NewRef(PyTuple_GET_ITEM(inputs, i)));
    PyTuple_SET_ITEM(args, k, Py_NewRef(node));
    PyTuple_SET_ITEM(args, k + 1, Py_NewRef(g));
    Py_INCREF(needs);
    PyObject *skey = SLOT(snap, self->node_at[N_KEY]);   /* (snapshot.key: the cached slot, else the property) */
    skey = skey != NULL && skey != Py_None ? Py_NewRef(skey) : PyObject_GetAttr(snap, KEY_ATTR);
    PyObject *out = skey == NULL ? NULL : bw_replayed(self, args, skey, needs, skey);
    Py_DECREF(args);
    Py_DECREF(needs);
    Py_XDECREF(skey);
    return out;
}

/* The sum of a node's cotangents (`parts`, a list of two or more): engine.py summed's memo hit
 * replayed (cached by the first part's key), else summed(parts, create_graph).  A new reference,
 * or NULL with an exception. */
static PyObject *bw_sum(BackwardWalker *self, PyObject *parts, int create_graph, int memo) {
    PyObject *out = Py_NewRef(Py_None);
    if (memo) {
        PyObject *args = PyList_AsTuple(parts), *first = PyList_GET_ITEM(parts, 0);
        PyObject *bucket = Py_TYPE(first) == self->node_type ? SLOT(first, self->node_at[N_KEY]) : NULL;
        Py_XINCREF(bucket);
        Py_SETREF(out, args == NULL ? NULL : bw_replayed(self, args, self->sum_key, NULL,
                                                         bucket == Py_None ? NULL : bucket));
        Py_XDECREF(bucket);
        Py_XDECREF(args);
        if (out == NULL) return NULL;
    }
    if (out == Py_None) {
        Py_DECREF(out);
        PyObject *args[2] = {parts, create_graph ? Py_True : Py_False};
        return PyObject_Vectorcall(self->summed, args, 2, NULL);
    }
    PyObject *total = PyList_GET_SIZE(out) == 1 ? Py_NewRef(PyList_GET_ITEM(out, 0)) : NULL;
    if (total == NULL) PyErr_SetString(PyExc_ValueError, "backward: a sum's memo entry is not of one result");
    Py_DECREF(out);
    return total;
}

/* state.py edge: `node`'s stand-in (shape, dtype and Record `rec`; no inputs or buffer), one per
 * Record while a snapshot holds it, found through the Record's weak `edge`.  A new reference. */
static PyObject *bw_edge(BackwardWalker *self, PyObject *node, PyObject *rec) {
    PyObject *ref = SLOT(rec, self->record_at[R_EDGE]);
    if (ref != NULL && PyWeakref_CheckRef(ref)) {
        PyObject *made = PyWeakref_GET_OBJECT(ref);
        if (made != Py_None) return Py_NewRef(made);
    }
    PyObject *shape = SLOT(node, self->node_at[N_SHAPE]), *dtype = SLOT(node, self->node_at[N_DTYPE]);
    if (shape == NULL || dtype == NULL)
        return PyErr_Format(PyExc_AttributeError, "backward: a node's shape or dtype is not set");
    PyObject *inputs = PyTuple_New(0), *attrs = PyDict_New();
    PyObject *made = inputs && attrs ? self->node_type->tp_alloc(self->node_type, 0) : NULL;
    if (made == NULL) {
        Py_XDECREF(inputs);
        Py_XDECREF(attrs);
        return NULL;
    }
    SLOT(made, self->node_at[N_INPUTS]) = inputs;
    SLOT(made, self->node_at[N_ATTRS]) = attrs;
    put(made, self->node_at[N_OP], EDGE_NAME);
    put(made, self->node_at[N_SHAPE], shape);
    put(made, self->node_at[N_DTYPE], dtype);
    put(made, self->node_at[N_KEY], Py_None);
    put(made, self->node_at[N_BUFFER], Py_None);
    put(made, self->node_at[N_VALUE], Py_None);
    put(made, self->node_at[N_ORIGIN], Py_None);
    put(made, self->node_at[N_TREE], Py_None);
    put(made, self->node_at[N_AUTOGRAD], rec);
    PyObject *weak = PyWeakref_NewRef(made, NULL);
    if (weak == NULL) {
        Py_DECREF(made);
        return NULL;
    }
    Py_XSETREF(SLOT(rec, self->record_at[R_EDGE]), weak);
    return made;
}

/* engine.py release (FREED_EDGES): the snapshot's inputs that took a gradient (`grads`, in input
 * order) replaced by their stand-ins.  0, or -1 with an exception (the snapshot left as it was). */
static int bw_release(BackwardWalker *self, PyObject *snap, PyObject *inputs, PyObject *grads) {
    Py_ssize_t n = PyTuple_GET_SIZE(inputs), given = PySequence_Fast_GET_SIZE(grads);
    PyObject *out = PyTuple_New(n);
    if (out == NULL) return -1;
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *input = PyTuple_GET_ITEM(inputs, i), *state = NULL, *made;
        if (i < given && PySequence_Fast_GET_ITEM(grads, i) != Py_None && Py_TYPE(input) == self->node_type)
            state = SLOT(input, self->node_at[N_AUTOGRAD]);
        made = state != NULL && Py_TYPE(state) == self->record_type ? bw_edge(self, input, state) : Py_NewRef(input);
        if (made == NULL) {
            Py_DECREF(out);
            return -1;
        }
        PyTuple_SET_ITEM(out, i, made);
    }
    Py_XSETREF(SLOT(snap, self->node_at[N_INPUTS]), out);
    return 0;
}

/* One turn of the Python's loop for a node whose cotangents have all arrived (g, summed): 0, or
 * -1 with an exception. */
static int bw_turn(BwWalk *w, PyObject *node, PyObject *g, int retain_graph, int accumulate, PyObject *wanted,
                   PyObject *captured, int create_graph, int memo) {
    BackwardWalker *self = w->self;
    PyObject *rec = bw_record(self, node), *snap = NULL, *inputs = NULL, *out = NULL, *grads = NULL, *v;
    if (rec == NULL) return -1;
    Py_INCREF(rec);
    int r = -1;
    if (PySet_GET_SIZE(wanted) > 0) {           /* if id(node) in wanted: captured[id(node)] = g */
        PyObject *id = PyLong_FromVoidPtr(node);
        int in = id == NULL ? -1 : PySet_Contains(wanted, id);
        if (in > 0) in = PyDict_SetItem(captured, id, g);
        Py_XDECREF(id);
        if (in < 0) goto done;
    }
    if ((v = bw_field(self, rec, R_RETAIN, NULL)) == NULL) goto done;
    if (v != Py_None && accumulate) {           /* kept = rec.retain(); if kept is not None: _retained(kept, g) */
        Py_INCREF(v);                           /* (a call: Python may run) */
        PyObject *kept = PyObject_CallNoArgs(v);
        Py_DECREF(v);
        if (kept == NULL) goto done;
        PyObject *call[2] = {kept, g};
        PyObject *done_ = kept == Py_None ? Py_NewRef(Py_None) : PyObject_Vectorcall(self->retained, call, 2, NULL);
        Py_DECREF(kept);
        if (done_ == NULL) goto done;
        Py_DECREF(done_);
    }
    if ((snap = bw_field(self, rec, R_SNAPSHOT, NULL)) == NULL) goto done;
    if (snap == Py_None) {                      /* a leaf: accumulate_leaf(rec.leaf(), g) */
        snap = NULL;
        if (accumulate) {
            if ((v = bw_field(self, rec, R_LEAF, NULL)) == NULL) goto done;
            Py_INCREF(v);
            PyObject *tensor = PyObject_CallNoArgs(v);
            Py_DECREF(v);
            if (tensor == NULL) goto done;
            PyObject *call[2] = {tensor, g};
            PyObject *done_ = PyObject_Vectorcall(self->accumulate_leaf, call, 2, NULL);
            Py_DECREF(tensor);
            if (done_ == NULL) goto done;
            Py_DECREF(done_);
        }
        r = 0;
        goto done;
    }
    Py_INCREF(snap);
    if ((v = bw_field(self, rec, R_FREED, NULL)) == NULL) goto done;
    Py_INCREF(v);
    int freed = v == Py_False ? 0 : v == Py_True ? 1 : PyObject_IsTrue(v);
    Py_DECREF(v);
    if (freed != 0) {
        if (freed > 0) PyErr_SetObject(PyExc_RuntimeError, self->freed);
        goto done;
    }
    if ((inputs = bw_inputs(self, snap)) == NULL) goto done;
    Py_INCREF(inputs);
    out = memo ? bw_rule_replayed(self, rec, snap, inputs, node, g) : Py_NewRef(Py_None);
    if (out == Py_None) {
        Py_DECREF(out);
        PyObject *args[4] = {rec, node, g, create_graph ? Py_True : Py_False};
        out = PyObject_Vectorcall(self->input_grads, args, 4, NULL);
    }
    if (out == NULL || (grads = PySequence_Fast(out, "backward: input_grads returned no sequence")) == NULL) goto done;
    Py_ssize_t n = Py_MIN(PyTuple_GET_SIZE(inputs), PySequence_Fast_GET_SIZE(grads));
    for (Py_ssize_t i = 0; i < n; i++) {        /* grads.setdefault(id(inp), []).append(gi) */
        PyObject *gi = PySequence_Fast_GET_ITEM(grads, i);
        if (gi == Py_None) continue;
        Py_ssize_t pos = bw_find(w, PyTuple_GET_ITEM(inputs, i));
        if (pos >= 0 && bw_arrive(w, pos, gi) < 0) goto done;    /* (elsewhere: never popped, as in the Python) */
    }
    if (!retain_graph) {                        /* if op not in SAVES_NOTHING: rec.freed = True */
        PyObject *op = bw_slot(snap, self->node_at[N_OP], "op");
        int saves = op == NULL ? -1 : PySet_Contains(self->saves_nothing, op);
        if (saves < 0) goto done;
        if (!saves) {                           /* rec.freed = True; rec.snapshot.inputs = () (FREED_INPUTS) */
            PyObject *none = PyTuple_New(0);
            if (none == NULL) goto done;
            Py_XSETREF(SLOT(rec, self->record_at[R_FREED]), Py_NewRef(Py_True));
            Py_XSETREF(SLOT(snap, self->node_at[N_INPUTS]), none);
        } else if (bw_release(self, snap, inputs, grads) < 0) {     /* release(rec, grads) (FREED_EDGES) */
            goto done;
        }
    }
    r = 0;
done:
    Py_DECREF(rec);
    Py_XDECREF(snap);
    Py_XDECREF(inputs);
    Py_XDECREF(out);
    Py_XDECREF(grads);
    return r;
}

/* The walk after the order: 0, or -1 with an exception. */
static int bw_backward(BwWalk *w, PyObject *roots, PyObject *root_grads, int retain_graph, int accumulate,
                       PyObject *wanted, PyObject *captured, int create_graph, int memo) {
    Py_ssize_t n = PyList_GET_SIZE(w->order);
    w->first = PyMem_Calloc(n + 1, sizeof(PyObject *));
    w->more = PyMem_Calloc(n + 1, sizeof(PyObject *));
    if (w->first == NULL || w->more == NULL) { PyErr_NoMemory(); return -1; }
    Py_ssize_t k = Py_MIN(PySequence_Fast_GET_SIZE(roots), PySequence_Fast_GET_SIZE(root_grads));
    for (Py_ssize_t i = 0; i < k; i++) {
        Py_ssize_t pos = bw_find(w, PySequence_Fast_GET_ITEM(roots, i));
        if (pos >= 0 && bw_arrive(w, pos, PySequence_Fast_GET_ITEM(root_grads, i)) < 0) return -1;
    }
    for (Py_ssize_t pos = n - 1; pos >= 0; pos--) {
        PyObject *g = w->first[pos], *parts = w->more[pos];
        if (g == NULL) continue;
        w->first[pos] = w->more[pos] = NULL;   /* (taken: grads.pop) */
        if (parts != NULL) {                    /* several: summed once all have arrived */
            Py_DECREF(g);
            g = bw_sum(w->self, parts, create_graph, memo);
            Py_DECREF(parts);
            if (g == NULL) return -1;
        }
        int r = bw_turn(w, PyList_GET_ITEM(w->order, pos), g, retain_graph, accumulate, wanted, captured, create_graph,
                        memo);
        Py_DECREF(g);
        if (r < 0) return -1;
    }
    return 0;
}

static PyObject *walker_vectorcall(PyObject *op, PyObject *const *args, size_t nargsf, PyObject *kwnames) {
    BackwardWalker *self = (BackwardWalker *)op;
    if (PyVectorcall_NARGS(nargsf) != 7 || kwnames != NULL || !PySet_Check(args[4]) || !PyDict_Check(args[5])) {
        PyErr_SetString(PyExc_TypeError, "_walk(roots, root_grads, retain_graph, accumulate, wanted: set, "
                                         "captured: dict, create_graph)");
        return NULL;
    }
    int retain_graph = PyObject_IsTrue(args[2]), accumulate = PyObject_IsTrue(args[3]);
    int create_graph = PyObject_IsTrue(args[6]);
    if (retain_graph < 0 || accumulate < 0 || create_graph < 0) return NULL;
    int memo = 0;
    if (!create_graph) {
        PyObject *on = PyObject_CallNoArgs(self->memo_on);
        memo = on == NULL ? -1 : PyObject_IsTrue(on);
        Py_XDECREF(on);
        if (memo < 0) return NULL;
    }
    PyObject *roots = PySequence_Fast(args[0], "backward: roots are a sequence");
    PyObject *root_grads = roots == NULL ? NULL : PySequence_Fast(args[1], "backward: root grads are a sequence");
    if (root_grads == NULL) {
        Py_XDECREF(roots);
        return NULL;
    }
    Py_INCREF(args[4]);                         /* (wanted and captured: held while Python runs) */
    Py_INCREF(args[5]);
    BwWalk w = {.self = self, .room = 32};
    int r = -1;
    if (index_init(&w.index, 64) == 0) {
        if ((w.stack = PyMem_Malloc(w.room * sizeof(BwDescent))) == NULL) PyErr_NoMemory();
        else if ((w.order = PyList_New(0)) != NULL && bw_order(&w, roots) == 0)
            r = bw_backward(&w, roots, root_grads, retain_graph, accumulate, args[4], args[5], create_graph, memo);
    }
    while (w.depth > 0) {                       /* (an error: what the order walk was under) */
        BwDescent d = w.stack[--w.depth];
        Py_DECREF(d.node);
        Py_XDECREF(d.inputs);
        Py_XDECREF(d.needs);
    }
    if (w.first != NULL || w.more != NULL) {    /* (cotangents never taken: an error, or nodes passed) */
        for (Py_ssize_t i = 0; w.order != NULL && i < PyList_GET_SIZE(w.order); i++) {
            if (w.first != NULL) Py_XDECREF(w.first[i]);
            if (w.more != NULL) Py_XDECREF(w.more[i]);
        }
    }
    PyMem_Free(w.first);
    PyMem_Free(w.more);
    PyMem_Free(w.index.entries);
    PyMem_Free(w.stack);
    Py_XDECREF(w.order);
    Py_DECREF(roots);
    Py_DECREF(root_grads);
    Py_DECREF(args[4]);
    PyObject *out = r == 0 ? Py_NewRef(args[5]) : NULL;
    Py_DECREF(args[5]);
    return out;
}

static PyObject *walker_new(PyTypeObject *type, PyObject *args, PyObject *kwargs) {
    PyObject *node_type, *record_type, *signature, *rules, *ids, *saves_nothing, *trace, *site, *input_grads;
    PyObject *summed, *accumulate_leaf, *retained, *memo_on, *sum_key, *freed;
    static char *kw[] = {"node_type", "record_type", "signature", "rules", "ids", "saves_nothing", "trace", "site",
                         "input_grads", "summed", "accumulate_leaf", "retained", "memo_on", "sum_key", "freed", NULL};
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "O!O!OO!O!O!O!OOOOOOOU:BackwardWalker", kw, &PyType_Type,
                                     &node_type, &PyType_Type, &record_type, &signature, &PyDict_Type, &rules,
                                     &PyDict_Type, &ids, &PyFrozenSet_Type, &saves_nothing, &PyList_Type, &trace, &site,
                                     &input_grads, &summed, &accumulate_leaf, &retained, &memo_on, &sum_key, &freed))
        return NULL;
    PyObject *calls[] = {signature, input_grads, summed, accumulate_leaf, retained, memo_on};
    const char *call_names[] = {"signature", "input_grads", "summed", "accumulate_leaf", "retained", "memo_on"};
    for (size_t i = 0; i < sizeof calls / sizeof *calls; i++)
        if (!PyCallable_Check(calls[i]))
            return PyErr_Format(PyExc_TypeError, "BackwardWalker: %s must be callable", call_names[i]);
    if (REPLAY_NAME == NULL && (REPLAY_NAME = PyUnicode_InternFromString("replay")) == NULL) return NULL;
    BackwardWalker *self = (BackwardWalker *)type->tp_alloc(type, 0);
    if (self == NULL) return NULL;
    self->vectorcall = walker_vectorcall;
    PyObject *values[] = {node_type, record_type, signature, rules, ids, saves_nothing, trace, site, input_grads,
                          summed, accumulate_leaf, retained, memo_on, sum_key, freed};   /* (WALKER_HELD's order) */
    hold((PyObject *)self, WALKER_HELD + 1, values, sizeof values / sizeof *values);
    if ((self->no_kwargs = PyDict_New()) == NULL ||
        slot_offsets(self->node_type, NODE_SLOTS, N_SLOTS, self->node_at) < 0 ||
        slot_offsets(self->record_type, RECORD_SLOTS, R_SLOTS, self->record_at) < 0) {
        Py_DECREF(self);
        return NULL;
    }
    return (PyObject *)self;
}

HELD_GC(walker, BackwardWalker, WALKER_HELD)
CALLABLE_TYPE(walker, BackwardWalker, "BackwardWalker", "autograd/engine.py's _walk_py in C.", 0, NULL, NULL, NULL)

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "_fastpath",
    "The IR's hottest Python in C: the Tensor API's pointwise builds, call signatures, replays, walks.", -1, NULL,
};

PyMODINIT_FUNC PyInit__fastpath(void) {
    SCALAR = PyUnicode_InternFromString("scalar");
    EDGE_NAME = PyUnicode_InternFromString("edge");
    BUFFER = PyUnicode_InternFromString("buffer");
    ZERO = PyLong_FromLong(0);
    ONE = PyLong_FromLong(1);
    VIEW = PyUnicode_InternFromString("view");
    PARAM = PyUnicode_InternFromString("param");
    NODE_ATTR = PyUnicode_InternFromString("node");
    KEY_ATTR = PyUnicode_InternFromString("key");
    ROOTS = PyUnicode_InternFromString("roots");
    SITE_ATTR = PyUnicode_InternFromString("site");
    OUT_NAME = PyUnicode_InternFromString("out");
    EMPTY_KWARGS = PyDict_New();
    FLOATING_ATTR = PyUnicode_InternFromString("is_floating_point");
    if (SCALAR == NULL || BUFFER == NULL || ZERO == NULL || ONE == NULL || VIEW == NULL || PARAM == NULL || NODE_ATTR == NULL ||
        KEY_ATTR == NULL || ROOTS == NULL || SITE_ATTR == NULL || OUT_NAME == NULL || EMPTY_KWARGS == NULL ||
        FLOATING_ATTR == NULL || PyType_Ready(&classifier_type) < 0 ||
        PyType_Ready(&fastop_type) < 0 || PyType_Ready(&apicall_type) < 0 || PyType_Ready(&signer_type) < 0 ||
        PyType_Ready(&replayer_type) < 0 || PyType_Ready(&site_type) < 0 || PyType_Ready(&leafargs_type) < 0 ||
        PyType_Ready(&alone_type) < 0 || PyType_Ready(&maker_type) < 0 || PyType_Ready(&positions_type) < 0 ||
        PyType_Ready(&walker_type) < 0 || PyType_Ready(&view_bases_type) < 0)
        return NULL;
    PyObject *m = PyModule_Create(&module);
    if (m == NULL) return NULL;
    PyTypeObject *types[] = {&fastop_type, &apicall_type, &signer_type, &replayer_type, &site_type, &leafargs_type,
                             &alone_type, &maker_type, &positions_type, &classifier_type, &walker_type,
                             &view_bases_type};
    for (size_t i = 0; i < sizeof types / sizeof *types; i++) {
        Py_INCREF(types[i]);
        if (PyModule_AddObject(m, types[i]->tp_name + strlen("lazytorch.ir._fastpath."), (PyObject *)types[i]) < 0) {
            Py_DECREF(types[i]);
            Py_DECREF(m);
            return NULL;
        }
    }
    return m;
}

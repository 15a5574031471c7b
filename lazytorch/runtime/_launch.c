/* The executors' per-run host work in C: the cpu executor's calls into native code (runtime/cpu.py
 * CpuExecutor._run), and the key of a CUDA graph's replay (runtime/cuda_graph.py).
 *
 * Through ctypes a kernel's call costs ~350 ns of argument conversion and libffi, and packing a
 * program's Python scalars with struct ~35 ns each (W7: twenty of them, 0.7 us a call, as much as
 * the kernel).  These take integers (addresses read once per plan or frame) and do the same in
 * ~50 ns.  Optional, as ctypes: where this module did not build, or LAZYTORCH_NATIVE=0, cpu.py
 * makes the ctypes calls, which are the definition (tests/test_cpu_native.py compares them).
 *
 * Each native call releases the GIL, as a ctypes call does: a kernel may run on OpenMP threads
 * for milliseconds, and other Python threads (their own evals) go on meanwhile.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdbool.h>
#include <stdint.h>

typedef void (*kernel_fn)(char **);
typedef int64_t (*runner_fn)(const void *, const void *, const void *, int64_t);

static int address(PyObject *o, void **out) {
    *out = PyLong_AsVoidPtr(o);
    return *out == NULL && PyErr_Occurred() ? -1 : 0;
}

/* call(fn, args): the kernel at address `fn` with its pointer array at address `args`. */
static PyObject *call(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    (void)self;
    void *fn, *arr;
    if (nargs != 2) return PyErr_Format(PyExc_TypeError, "call(fn, args) takes 2 arguments, got %zd", nargs);
    if (address(args[0], &fn) < 0 || address(args[1], &arr) < 0) return NULL;
    Py_BEGIN_ALLOW_THREADS
    ((kernel_fn)fn)((char **)arr);
    Py_END_ALLOW_THREADS
    Py_RETURN_NONE;
}

/* run_steps(runner, fns, args, errs, n): the program's runner (shaders/c_runner.c.j2) over a
 * segment of n native steps; its result (-1, or the failed step's index). */
static PyObject *run_steps(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    (void)self;
    void *at[4];
    if (nargs != 5) return PyErr_Format(PyExc_TypeError, "run_steps(runner, fns, args, errs, n) takes 5 arguments, got %zd", nargs);
    for (int i = 0; i < 4; i++)
        if (address(args[i], &at[i]) < 0) return NULL;
    int64_t n = PyLong_AsLongLong(args[4]);
    if (n == -1 && PyErr_Occurred()) return NULL;
    int64_t failed;
    Py_BEGIN_ALLOW_THREADS
    failed = ((runner_fn)at[0])(at[1], at[2], at[3], n);
    Py_END_ALLOW_THREADS
    return PyLong_FromLongLong(failed);
}

/* Each of `n` values as the C type of struct's `code` ("f", "d" or "?") into consecutive places
 * from `storage`.  A float beyond float32 becomes inf, as the kernel's own cast made it and as
 * ctypes' c_float does (struct refuses it).  -1 with an exception set on a value that is no number
 * or a code that is none of these. */
static int pack_values(void *storage, const char *code, PyObject *const *items, Py_ssize_t n) {
    for (Py_ssize_t i = 0; i < n; i++) {
        if (code[0] == '?' && code[1] == 0) {
            int v = PyObject_IsTrue(items[i]);
            if (v < 0) return -1;
            ((bool *)storage)[i] = v > 0;
            continue;
        }
        double v = PyFloat_AsDouble(items[i]);
        if (v == -1.0 && PyErr_Occurred()) return -1;
        if (code[0] == 'f' && code[1] == 0)
            ((float *)storage)[i] = (float)v;
        else if (code[0] == 'd' && code[1] == 0)
            ((double *)storage)[i] = v;
        else {
            PyErr_Format(PyExc_ValueError, "pack: code '%s' is not one of 'f', 'd', '?'", code);
            return -1;
        }
    }
    return 0;
}

/* pack(storage, code, values): pack_values into the storage at address `storage`. */
static PyObject *pack(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    (void)self;
    void *storage;
    if (nargs != 3) return PyErr_Format(PyExc_TypeError, "pack(storage, code, values) takes 3 arguments, got %zd", nargs);
    if (address(args[0], &storage) < 0) return NULL;
    const char *code = PyUnicode_AsUTF8(args[1]);
    if (code == NULL) return NULL;
    PyObject *seq = PySequence_Fast(args[2], "pack: values must be a sequence");
    if (seq == NULL) return NULL;
    int failed = pack_values(storage, code, PySequence_Fast_ITEMS(seq), PySequence_Fast_GET_SIZE(seq));
    Py_DECREF(seq);
    if (failed) return NULL;
    Py_RETURN_NONE;
}

/* The data pointer of `o` if it is an ndarray (exactly `ndarray`) whose memory is C-contiguous
 * (and `writable` if asked), else NULL with no exception set. */
static void *array_data(PyObject *o, PyObject *ndarray, int writable) {
    if ((PyObject *)Py_TYPE(o) != ndarray) return NULL;
    Py_buffer view;
    if (PyObject_GetBuffer(o, &view, PyBUF_C_CONTIGUOUS | (writable ? PyBUF_WRITABLE : 0)) < 0) {
        PyErr_Clear();
        return NULL;
    }
    void *data = view.buf;
    PyBuffer_Release(&view);      /* (the caller holds `o` for as long as it uses the pointer) */
    return data;
}

/* run_one(kernel, arr, err, args, ndarray, inputs, packs, outputs): a plan of one kernel step run
 * whole (runtime/cpu.py CpuExecutor._run's common case, there step by step):
 *   kernel, arr, err: addresses of the kernel, its pointer array and its error word;
 *   inputs:  ((arg index, position), ...): array arguments written into the pointer array as they
 *            are, each an ndarray with C-contiguous memory;
 *   packs:   ((storage address, code, first, end), ...): args[first:end] packed (`pack`);
 *   outputs: ((position, make, shape, dtype), ...): make(shape, dtype), a C-contiguous ndarray;
 * returns the list of outputs; None, with nothing launched, where an input is not such an array
 * (the Python converts it); False where the kernel set its error word (cleared here). */
static PyObject *run_one(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    (void)self;
    if (nargs != 8) return PyErr_Format(PyExc_TypeError, "run_one takes 8 arguments, got %zd", nargs);
    void *fn, *arr_at, *err_at;
    if (address(args[0], &fn) < 0 || address(args[1], &arr_at) < 0 || address(args[2], &err_at) < 0) return NULL;
    PyObject *values = args[3], *ndarray = args[4], *inputs = args[5], *packs = args[6], *outputs = args[7];
    if (!PyList_CheckExact(values) || !PyTuple_CheckExact(inputs) || !PyTuple_CheckExact(packs) ||
        !PyTuple_CheckExact(outputs))
        return PyErr_Format(PyExc_TypeError, "run_one: args must be a list; inputs, packs, outputs tuples");
    void **arr = (void **)arr_at;
    Py_ssize_t nvalues = PyList_GET_SIZE(values);
    for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(inputs); i++) {
        PyObject *spec = PyTuple_GET_ITEM(inputs, i);
        Py_ssize_t k = PyLong_AsSsize_t(PyTuple_GET_ITEM(spec, 0)), pos = PyLong_AsSsize_t(PyTuple_GET_ITEM(spec, 1));
        if (PyErr_Occurred()) return NULL;
        if (k < 0 || k >= nvalues) return PyErr_Format(PyExc_IndexError, "run_one: argument %zd of %zd", k, nvalues);
        void *data = array_data(PyList_GET_ITEM(values, k), ndarray, 0);
        if (data == NULL) Py_RETURN_NONE;
        arr[pos] = data;
    }
    for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(packs); i++) {
        PyObject *spec = PyTuple_GET_ITEM(packs, i);
        void *storage;
        if (address(PyTuple_GET_ITEM(spec, 0), &storage) < 0) return NULL;
        const char *code = PyUnicode_AsUTF8(PyTuple_GET_ITEM(spec, 1));
        Py_ssize_t lo = PyLong_AsSsize_t(PyTuple_GET_ITEM(spec, 2)), hi = PyLong_AsSsize_t(PyTuple_GET_ITEM(spec, 3));
        if (code == NULL || PyErr_Occurred()) return NULL;
        if (lo < 0 || hi < lo || hi > nvalues) return PyErr_Format(PyExc_IndexError, "run_one: arguments %zd:%zd of %zd", lo, hi, nvalues);
        if (pack_values(storage, code, ((PyListObject *)values)->ob_item + lo, hi - lo) < 0) return NULL;
    }
    Py_ssize_t nout = PyTuple_GET_SIZE(outputs);
    PyObject *outs = PyList_New(nout);
    if (outs == NULL) return NULL;
    for (Py_ssize_t i = 0; i < nout; i++) {
        PyObject *spec = PyTuple_GET_ITEM(outputs, i);
        Py_ssize_t pos = PyLong_AsSsize_t(PyTuple_GET_ITEM(spec, 0));
        if (pos == -1 && PyErr_Occurred()) { Py_DECREF(outs); return NULL; }
        PyObject *buf = PyObject_CallFunctionObjArgs(PyTuple_GET_ITEM(spec, 1), PyTuple_GET_ITEM(spec, 2),
                                                     PyTuple_GET_ITEM(spec, 3), NULL);
        if (buf == NULL) { Py_DECREF(outs); return NULL; }
        PyList_SET_ITEM(outs, i, buf);
        void *data = array_data(buf, ndarray, 1);
        if (data == NULL) {
            Py_DECREF(outs);
            return PyErr_Format(PyExc_TypeError, "run_one: an output is not a writable C-contiguous ndarray");
        }
        arr[pos] = data;
    }
    Py_BEGIN_ALLOW_THREADS
    ((kernel_fn)fn)((char **)arr);
    Py_END_ALLOW_THREADS
    if (*(int32_t *)err_at) {
        *(int32_t *)err_at = 0;
        Py_DECREF(outs);
        Py_RETURN_FALSE;
    }
    return outs;
}

/* graph_key(values_at, buffers_at, buffer_type, zero_key, args, outs): runtime/cuda_graph.py
 * GraphedPlan's key of a replay (`_addressed_key_py`, the definition) in one call, where every
 * buffer param is given as a device buffer (`buffer_type`): the tuple of the args at values_at
 * (each zero as zero_key(v): -0.0 apart from 0.0), then the address (`ptr`) of each arg at
 * buffers_at and of each of outs; None where an arg at buffers_at is of another type.  A
 * replay's host work is this key and the graph's launch: in Python it took ~2-3 us of W7's call
 * on the GPU host. */
static PyObject *PTR;

static PyObject *graph_key(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    (void)self;
    if (nargs != 6)
        return PyErr_Format(PyExc_TypeError, "graph_key(values_at, buffers_at, buffer_type, zero_key, args, outs) "
                            "takes 6 arguments, got %zd", nargs);
    PyObject *values_at = args[0], *buffers_at = args[1], *buffer_type = args[2], *zero_key = args[3];
    if (!PyTuple_Check(values_at) || !PyTuple_Check(buffers_at) || !PyType_Check(buffer_type))
        return PyErr_Format(PyExc_TypeError, "graph_key: values_at and buffers_at must be tuples, buffer_type a type");
    PyObject *run = PySequence_Fast(args[4], "graph_key: args must be a sequence");
    if (run == NULL) return NULL;
    PyObject *outs = PySequence_Fast(args[5], "graph_key: outs must be a sequence");
    if (outs == NULL) {
        Py_DECREF(run);
        return NULL;
    }
    Py_ssize_t n_run = PySequence_Fast_GET_SIZE(run), n_values = PyTuple_GET_SIZE(values_at);
    Py_ssize_t n_buffers = PyTuple_GET_SIZE(buffers_at), n_outs = PySequence_Fast_GET_SIZE(outs);
    PyObject *key = PyTuple_New(1 + n_buffers + n_outs), *values = PyTuple_New(n_values);
    if (key == NULL || values == NULL) goto fail;
    for (Py_ssize_t i = 0; i < n_values + n_buffers; i++) {
        PyObject *at_obj = i < n_values ? PyTuple_GET_ITEM(values_at, i) : PyTuple_GET_ITEM(buffers_at, i - n_values);
        Py_ssize_t at = PyLong_AsSsize_t(at_obj);
        if (at == -1 && PyErr_Occurred()) goto fail;
        if (at < 0 || at >= n_run) {
            PyErr_Format(PyExc_IndexError, "graph_key: position %zd is outside the %zd args", at, n_run);
            goto fail;
        }
        PyObject *v = PySequence_Fast_GET_ITEM(run, at), *item;
        if (i < n_values) {
            int truth = PyObject_IsTrue(v);
            if (truth < 0) goto fail;
            if (truth) {
                Py_INCREF(v);
                item = v;
            } else if ((item = PyObject_CallOneArg(zero_key, v)) == NULL) {
                goto fail;
            }
            PyTuple_SET_ITEM(values, i, item);
        } else {
            if (Py_TYPE(v) != (PyTypeObject *)buffer_type) {
                Py_DECREF(key);
                Py_DECREF(values);
                Py_DECREF(run);
                Py_DECREF(outs);
                Py_RETURN_NONE;
            }
            if ((item = PyObject_GetAttr(v, PTR)) == NULL) goto fail;
            PyTuple_SET_ITEM(key, 1 + i - n_values, item);
        }
    }
    for (Py_ssize_t k = 0; k < n_outs; k++) {
        PyObject *item = PyObject_GetAttr(PySequence_Fast_GET_ITEM(outs, k), PTR);
        if (item == NULL) goto fail;
        PyTuple_SET_ITEM(key, 1 + n_buffers + k, item);
    }
    PyTuple_SET_ITEM(key, 0, values);
    Py_DECREF(run);
    Py_DECREF(outs);
    return key;
fail:
    Py_XDECREF(key);
    Py_XDECREF(values);
    Py_DECREF(run);
    Py_DECREF(outs);
    return NULL;
}

static PyMethodDef methods[] = {
    {"call", (PyCFunction)(void (*)(void))call, METH_FASTCALL, "call(fn, args): a kernel, by address"},
    {"run_steps", (PyCFunction)(void (*)(void))run_steps, METH_FASTCALL, "run_steps(runner, fns, args, errs, n)"},
    {"pack", (PyCFunction)(void (*)(void))pack, METH_FASTCALL, "pack(storage, code, values): scalars as C values"},
    {"run_one", (PyCFunction)(void (*)(void))run_one, METH_FASTCALL,
     "run_one(kernel, arr, err, args, ndarray, inputs, packs, outputs): a plan of one kernel step"},
    {"graph_key", (PyCFunction)(void (*)(void))graph_key, METH_FASTCALL,
     "graph_key(values_at, buffers_at, buffer_type, zero_key, args, outs): a CUDA graph replay's key"},
    {NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "_launch", "The executors' per-run host work (runtime/cpu.py, runtime/cuda_graph.py), in C.", -1, methods,
};

PyMODINIT_FUNC PyInit__launch(void) {
    if ((PTR = PyUnicode_InternFromString("ptr")) == NULL) return NULL;
    return PyModule_Create(&module);
}

/* The cpu executor's per-run calls into native code (runtime/cpu.py CpuExecutor._run), in C.
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

/* pack(storage, code, values): each value as the C type of struct's `code` ("f", "d" or "?") into
 * consecutive places from address `storage`.  A float beyond float32 becomes inf, as the kernel's
 * own cast made it and as ctypes' c_float does (struct refuses it). */
static PyObject *pack(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    (void)self;
    void *storage;
    if (nargs != 3) return PyErr_Format(PyExc_TypeError, "pack(storage, code, values) takes 3 arguments, got %zd", nargs);
    if (address(args[0], &storage) < 0) return NULL;
    const char *code = PyUnicode_AsUTF8(args[1]);
    if (code == NULL) return NULL;
    PyObject *seq = PySequence_Fast(args[2], "pack: values must be a sequence");
    if (seq == NULL) return NULL;
    Py_ssize_t n = PySequence_Fast_GET_SIZE(seq);
    PyObject **items = PySequence_Fast_ITEMS(seq);
    int ok = 1;
    for (Py_ssize_t i = 0; ok && i < n; i++) {
        if (code[0] == '?' && code[1] == 0) {
            int v = PyObject_IsTrue(items[i]);
            ok = v >= 0;
            ((bool *)storage)[i] = v > 0;
            continue;
        }
        double v = PyFloat_AsDouble(items[i]);
        if (v == -1.0 && PyErr_Occurred()) { ok = 0; break; }
        if (code[0] == 'f' && code[1] == 0)
            ((float *)storage)[i] = (float)v;
        else if (code[0] == 'd' && code[1] == 0)
            ((double *)storage)[i] = v;
        else {
            PyErr_Format(PyExc_ValueError, "pack: code %R is not one of 'f', 'd', '?'", args[1]);
            ok = 0;
        }
    }
    Py_DECREF(seq);
    if (!ok) return NULL;
    Py_RETURN_NONE;
}

static PyMethodDef methods[] = {
    {"call", (PyCFunction)(void (*)(void))call, METH_FASTCALL, "call(fn, args): a kernel, by address"},
    {"run_steps", (PyCFunction)(void (*)(void))run_steps, METH_FASTCALL, "run_steps(runner, fns, args, errs, n)"},
    {"pack", (PyCFunction)(void (*)(void))pack, METH_FASTCALL, "pack(storage, code, values): scalars as C values"},
    {NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "_launch", "The cpu executor's calls into native code (runtime/cpu.py), in C.", -1, methods,
};

PyMODINIT_FUNC PyInit__launch(void) { return PyModule_Create(&module); }

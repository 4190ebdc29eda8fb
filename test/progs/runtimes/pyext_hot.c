/*
 * A Python extension module, built by e2e/runtimes.sh with cc -O2 -shared
 * and no frame-pointer flags, as extension modules usually are. It exports
 * hot(n), whose work is in hot_kernel, called from Python in a loop: the
 * CPU profile must find hot_kernel with the interpreter's frames below it,
 * down to main.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>

/* The hot function: a hash over n rounds. */
__attribute__((noinline)) static uint64_t hot_kernel(uint64_t n) {
  uint64_t h = 1469598103934665603ull;
  for (uint64_t i = 0; i < n; i++) h = (h ^ (i & 255)) * 1099511628211ull;
  return h >> 11;
}

static PyObject *hot(PyObject *self, PyObject *args) {
  (void)self;
  unsigned long long n;
  if (!PyArg_ParseTuple(args, "K", &n)) return NULL;
  return PyLong_FromUnsignedLongLong(hot_kernel(n));
}

static PyMethodDef methods[] = {
    {"hot", hot, METH_VARARGS, "a hash over n rounds"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "pyext_hot", NULL,
                                    -1, methods, NULL, NULL, NULL, NULL};

PyMODINIT_FUNC PyInit_pyext_hot(void) { return PyModule_Create(&module); }

/* A Python extension module linked against the stand-in libcudart.so.13, imported the normal
 * way (Python dlopens extension modules RTLD_LOCAL, so this runtime stays out of the global
 * scope): scope_ext.query() returns scope_query.h's JSON, asked from inside the module. */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#define RT_MAJOR 13
#include "scope_query.h"

static PyObject *query(PyObject *self, PyObject *unused) {
    char out[512];
    (void)self;
    (void)unused;
    scope_query(out, sizeof out);
    return PyUnicode_FromString(out);
}

static PyMethodDef methods[] = {{"query", query, METH_NOARGS, "what the module's runtime answers, as JSON"},
                                {NULL, NULL, 0, NULL}};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "scope_ext", NULL, -1, methods, NULL, NULL, NULL, NULL};

PyMODINIT_FUNC PyInit_scope_ext(void) { return PyModule_Create(&module); }

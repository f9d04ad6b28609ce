/* cuda_clients_ext: a Python extension module linked against libcudart, imported normally.
 *
 * Python imports every extension module with dlopen(..., RTLD_NOW | RTLD_LOCAL): the runtime
 * this module links (DT_NEEDED) is loaded into that local scope, not the global one. That is
 * the door of issue 27 item 1 (a plugin linked against the runtime); clients.py's "ext" client
 * imports this module and reports what it answers.
 *
 *   query(device) -> {"runtime_version": int, "layout": str, "props_rc": int,
 *                     "props": {"name", "major", "minor", "multiProcessorCount",
 *                               "sharedMemPerMultiprocessor", "sharedMemPerBlockOptin"},
 *                     "attrs": {key: (rc, value)}}
 *
 * Built by scripts/cuda-clients/table.py with gcc at run time against whatever libcudart is
 * there (the real one on a GPU machine, capshim's stand-in in CI):
 *   -DCLIENTS_CUDA_HEADERS  the CUDA toolkit's cuda_runtime_api.h is used (struct cudaDeviceProp,
 *                           members by name): what a plugin author writes;
 *   -DCLIENTS_NO_PYTHON     no Python.h on the machine: a plain shared library exporting
 *                           cuda_clients_query(device, buf, size) (the same answers as JSON), which
 *                           the client loads with ctypes.CDLL: dlopen RTLD_LOCAL as well;
 *   otherwise               no CUDA header: the runtime's struct is read at the member offsets of
 *                           CUDA 13's driver_types.h (CLIENTS_LAYOUT=13; measured on the H200:
 *                           evidence/h200-cuda-shim-checks/cudaDeviceProp-offsets-cuda13.txt) or
 *                           CUDA 12.6's (CLIENTS_LAYOUT=12, through cudaGetDeviceProperties_v2).
 */
#ifndef CLIENTS_NO_PYTHON
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#endif
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#ifdef CLIENTS_CUDA_HEADERS
#include <cuda_runtime_api.h>
#define LAYOUT_TEXT "the CUDA headers"
#else
typedef int cudaError_t;
extern cudaError_t cudaRuntimeGetVersion(int *version);
extern cudaError_t cudaDeviceGetAttribute(int *value, int attr, int device);
#if CLIENTS_LAYOUT == 13
extern cudaError_t cudaGetDeviceProperties(void *prop, int device);
#define GET_PROPS cudaGetDeviceProperties
enum { OFF_MAJOR = 360, OFF_MINOR = 364, OFF_SMS = 384, OFF_SMEM_SM = 624, OFF_SMEM_OPTIN = 672 };
#define LAYOUT_TEXT "the CUDA 13 offsets"
#elif CLIENTS_LAYOUT == 12
extern cudaError_t cudaGetDeviceProperties_v2(void *prop, int device);
#define GET_PROPS cudaGetDeviceProperties_v2
enum { OFF_MAJOR = 360, OFF_MINOR = 364, OFF_SMS = 388, OFF_SMEM_SM = 640, OFF_SMEM_OPTIN = 696 };
#define LAYOUT_TEXT "the CUDA 12 offsets"
#else
#error "CLIENTS_LAYOUT must be 13 or 12 without CLIENTS_CUDA_HEADERS"
#endif
#endif

/* cudaDeviceAttr numbers (stable since CUDA 9). */
#define N_ATTRS 5
static const struct {
    const char *key;
    int attr;
} ATTRS[N_ATTRS] = {{"major", 75}, {"minor", 76}, {"multiProcessorCount", 16},
                    {"sharedMemPerMultiprocessor", 81}, {"sharedMemPerBlockOptin", 97}};

/* What the runtime answered, whichever front end (Python module or JSON) reports it. */
struct answers {
    int runtime_version, props_rc;
    char name[257];
    int major, minor, sms;
    size_t smem_sm, smem_optin;
    int attr_rc[N_ATTRS], attr_value[N_ATTRS];
};

static void collect(int device, struct answers *a) {
    memset(a, 0, sizeof *a);
    if (cudaRuntimeGetVersion(&a->runtime_version) != 0) a->runtime_version = -1;
#ifdef CLIENTS_CUDA_HEADERS
    struct cudaDeviceProp p;
    memset(&p, 0, sizeof p);
    a->props_rc = (int)cudaGetDeviceProperties(&p, device);
    if (a->props_rc == 0) {
        size_t n = sizeof p.name < sizeof a->name - 1 ? sizeof p.name : sizeof a->name - 1;
        memcpy(a->name, p.name, n);
        a->major = p.major;
        a->minor = p.minor;
        a->sms = p.multiProcessorCount;
        a->smem_sm = p.sharedMemPerMultiprocessor;
        a->smem_optin = p.sharedMemPerBlockOptin;
    }
#else
    /* larger than any layout (CUDA 13: 1008 bytes, 12: 1032): a runtime never writes past it */
    static unsigned char buf[4096];
    memset(buf, 0, sizeof buf);
    a->props_rc = (int)GET_PROPS(buf, device);
    if (a->props_rc == 0) {
        memcpy(a->name, buf, 256); /* name: char[256] at offset 0 in every layout */
        memcpy(&a->major, buf + OFF_MAJOR, sizeof a->major);
        memcpy(&a->minor, buf + OFF_MINOR, sizeof a->minor);
        memcpy(&a->sms, buf + OFF_SMS, sizeof a->sms);
        memcpy(&a->smem_sm, buf + OFF_SMEM_SM, sizeof a->smem_sm);
        memcpy(&a->smem_optin, buf + OFF_SMEM_OPTIN, sizeof a->smem_optin);
    }
#endif
    a->name[sizeof a->name - 1] = '\0';
    for (int i = 0; i < N_ATTRS; i++) a->attr_rc[i] = (int)cudaDeviceGetAttribute(&a->attr_value[i], ATTRS[i].attr, device);
}

#ifdef CLIENTS_NO_PYTHON
/* The answers as one JSON object in buf (size bytes); 0, or -1 when buf is too small. A byte of
 * the name that JSON would need escaped is written as '?'. */
__attribute__((visibility("default"))) int cuda_clients_query(int device, char *buf, int size) {
    struct answers a;
    collect(device, &a);
    for (char *c = a.name; *c; c++)
        if (*c == '"' || *c == '\\' || (unsigned char)*c < 0x20 || (unsigned char)*c >= 0x7f) *c = '?';
    int n = snprintf(buf, (size_t)size,
                     "{\"runtime_version\": %d, \"layout\": \"%s\", \"props_rc\": %d, \"props\": {\"name\": \"%s\", "
                     "\"major\": %d, \"minor\": %d, \"multiProcessorCount\": %d, \"sharedMemPerMultiprocessor\": %zu, "
                     "\"sharedMemPerBlockOptin\": %zu}, \"attrs\": {",
                     a.runtime_version, LAYOUT_TEXT, a.props_rc, a.name, a.major, a.minor, a.sms, a.smem_sm,
                     a.smem_optin);
    for (int i = 0; i < N_ATTRS && n >= 0 && n < size; i++)
        n += snprintf(buf + n, (size_t)(size - n), "%s\"%s\": [%d, %d]", i ? ", " : "", ATTRS[i].key, a.attr_rc[i],
                      a.attr_value[i]);
    if (n >= 0 && n < size) n += snprintf(buf + n, (size_t)(size - n), "}}");
    return n >= 0 && n < size ? 0 : -1;
}
#else
/* Sets key to a new reference of value in dict; 0 on success, -1 with the exception set. */
static int put(PyObject *dict, const char *key, PyObject *value) {
    if (value == NULL) return -1;
    int rc = PyDict_SetItemString(dict, key, value);
    Py_DECREF(value);
    return rc;
}

static PyObject *query(PyObject *self, PyObject *args) {
    (void)self;
    int device = 0;
    if (!PyArg_ParseTuple(args, "i", &device)) return NULL;
    struct answers a;
    collect(device, &a);
    PyObject *out = PyDict_New(), *props = PyDict_New(), *attrs = PyDict_New();
    if (out == NULL || props == NULL || attrs == NULL) goto fail;
    if (put(props, "name", PyUnicode_DecodeUTF8(a.name, (Py_ssize_t)strlen(a.name), "replace")) ||
        put(props, "major", PyLong_FromLong(a.major)) || put(props, "minor", PyLong_FromLong(a.minor)) ||
        put(props, "multiProcessorCount", PyLong_FromLong(a.sms)) ||
        put(props, "sharedMemPerMultiprocessor", PyLong_FromSize_t(a.smem_sm)) ||
        put(props, "sharedMemPerBlockOptin", PyLong_FromSize_t(a.smem_optin)))
        goto fail;
    for (int i = 0; i < N_ATTRS; i++)
        if (put(attrs, ATTRS[i].key, Py_BuildValue("(ii)", a.attr_rc[i], a.attr_value[i])) != 0) goto fail;
    if (put(out, "runtime_version", PyLong_FromLong(a.runtime_version)) ||
        put(out, "layout", PyUnicode_FromString(LAYOUT_TEXT)) || put(out, "props_rc", PyLong_FromLong(a.props_rc)))
        goto fail;
    if (PyDict_SetItemString(out, "props", props) != 0 || PyDict_SetItemString(out, "attrs", attrs) != 0) goto fail;
    Py_DECREF(props);
    Py_DECREF(attrs);
    return out;
fail:
    Py_XDECREF(out);
    Py_XDECREF(props);
    Py_XDECREF(attrs);
    return NULL;
}

static PyMethodDef METHODS[] = {
    {"query", query, METH_VARARGS, "query(device) -> what the linked CUDA runtime answers (a dict)."},
    {NULL, NULL, 0, NULL}};

static struct PyModuleDef MODULE = {PyModuleDef_HEAD_INIT, "cuda_clients_ext",
                                    "A CUDA runtime client imported as an extension module (RTLD_LOCAL).", -1,
                                    METHODS, NULL, NULL, NULL, NULL};

PyMODINIT_FUNC PyInit_cuda_clients_ext(void) { return PyModule_Create(&MODULE); }
#endif

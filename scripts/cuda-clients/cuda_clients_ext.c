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
 *   otherwise               no CUDA header: the runtime's struct is read at the member offsets of
 *                           CUDA 13's driver_types.h (CLIENTS_LAYOUT=13; measured on the H200:
 *                           evidence/h200-cuda-shim-checks/cudaDeviceProp-offsets-cuda13.txt) or
 *                           CUDA 12.6's (CLIENTS_LAYOUT=12, through cudaGetDeviceProperties_v2).
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stddef.h>
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
static const struct {
    const char *key;
    int attr;
} ATTRS[] = {{"major", 75}, {"minor", 76}, {"multiProcessorCount", 16},
             {"sharedMemPerMultiprocessor", 81}, {"sharedMemPerBlockOptin", 97}};

/* Sets key to a new reference of value in dict; 0 on success, -1 with the exception set. */
static int put(PyObject *dict, const char *key, PyObject *value) {
    if (value == NULL) return -1;
    int rc = PyDict_SetItemString(dict, key, value);
    Py_DECREF(value);
    return rc;
}

static int fill_props(PyObject *props, int device, int *rc_out) {
#ifdef CLIENTS_CUDA_HEADERS
    struct cudaDeviceProp p;
    memset(&p, 0, sizeof p);
    *rc_out = (int)cudaGetDeviceProperties(&p, device);
    if (*rc_out != 0) return 0;
    char name[sizeof p.name + 1];
    memcpy(name, p.name, sizeof p.name);
    name[sizeof p.name] = '\0';
    return put(props, "name", PyUnicode_DecodeUTF8(name, (Py_ssize_t)strlen(name), "replace")) ||
           put(props, "major", PyLong_FromLong(p.major)) || put(props, "minor", PyLong_FromLong(p.minor)) ||
           put(props, "multiProcessorCount", PyLong_FromLong(p.multiProcessorCount)) ||
           put(props, "sharedMemPerMultiprocessor", PyLong_FromSize_t(p.sharedMemPerMultiprocessor)) ||
           put(props, "sharedMemPerBlockOptin", PyLong_FromSize_t(p.sharedMemPerBlockOptin));
#else
    /* larger than any layout (CUDA 13: 1008 bytes, 12: 1032): a runtime never writes past it */
    static unsigned char buf[4096];
    memset(buf, 0, sizeof buf);
    *rc_out = (int)GET_PROPS(buf, device);
    if (*rc_out != 0) return 0;
    char name[257];
    memcpy(name, buf, 256);
    name[256] = '\0';
    int major, minor, sms;
    size_t smem_sm, smem_optin;
    memcpy(&major, buf + OFF_MAJOR, sizeof major);
    memcpy(&minor, buf + OFF_MINOR, sizeof minor);
    memcpy(&sms, buf + OFF_SMS, sizeof sms);
    memcpy(&smem_sm, buf + OFF_SMEM_SM, sizeof smem_sm);
    memcpy(&smem_optin, buf + OFF_SMEM_OPTIN, sizeof smem_optin);
    return put(props, "name", PyUnicode_DecodeUTF8(name, (Py_ssize_t)strlen(name), "replace")) ||
           put(props, "major", PyLong_FromLong(major)) || put(props, "minor", PyLong_FromLong(minor)) ||
           put(props, "multiProcessorCount", PyLong_FromLong(sms)) ||
           put(props, "sharedMemPerMultiprocessor", PyLong_FromSize_t(smem_sm)) ||
           put(props, "sharedMemPerBlockOptin", PyLong_FromSize_t(smem_optin));
#endif
}

static PyObject *query(PyObject *self, PyObject *args) {
    (void)self;
    int device = 0;
    if (!PyArg_ParseTuple(args, "i", &device)) return NULL;
    int version = 0;
    if (cudaRuntimeGetVersion(&version) != 0) version = -1;
    PyObject *out = PyDict_New(), *props = PyDict_New(), *attrs = PyDict_New();
    int props_rc = 0;
    if (out == NULL || props == NULL || attrs == NULL || fill_props(props, device, &props_rc) != 0) goto fail;
    for (size_t i = 0; i < sizeof ATTRS / sizeof ATTRS[0]; i++) {
        int value = 0;
        int rc = (int)cudaDeviceGetAttribute(&value, ATTRS[i].attr, device);
        if (put(attrs, ATTRS[i].key, Py_BuildValue("(ii)", rc, value)) != 0) goto fail;
    }
    if (put(out, "runtime_version", PyLong_FromLong(version)) || put(out, "layout", PyUnicode_FromString(LAYOUT_TEXT)) ||
        put(out, "props_rc", PyLong_FromLong(props_rc)))
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

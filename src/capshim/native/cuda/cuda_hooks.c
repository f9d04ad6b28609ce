/* capshim CUDA shim: the exported entry points (the wrappers) and dlsym.
 *
 * Every wrapper finds its real function (remembered from a substitution, else
 * dlsym(RTLD_NEXT)), calls it with the caller's arguments unchanged, and
 * lowers the answer only when the call succeeded and the shim is active
 * (cuda_shim.c). A missing real function answers cudaErrorSymbolNotFound /
 * CUDA_ERROR_NOT_FOUND (500). Prototypes: CUDA 13.0 cuda_runtime_api.h and cuda.h,
 * declared here so the shim builds without CUDA installed.
 *
 * Substitution: dlsym, cuGetProcAddress(_v2) and cudaGetDriverEntryPoint(ByVersion)(_ptsz)
 * hand out a wrapper in place of a real function the shim wraps, after the real
 * call succeeded with the caller's version and flags; the real pointer is
 * remembered. dlsym is interposed because every NVIDIA library reaches libcuda
 * through dlopen + dlsym (measured on the H200, /work/notes/cuda-spec.md).
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <link.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "cuda_shim.h"

#define EXPORT __attribute__((visibility("default")))

typedef unsigned long long cuuint64_t;

/* ---- dlsym ------------------------------------------------------------------ */

typedef void *(*dlsym_fn)(void *, const char *);
static _Atomic(dlsym_fn) g_dlsym;

/* glibc's own dlsym: GLIBC_2.34 (dlsym moved into libc), else the base versions of
 * x86_64 (GLIBC_2.2.5) and aarch64 (GLIBC_2.17). */
CAPSHIM_NO_SANITIZE static dlsym_fn real_dlsym_fn(void) {
    dlsym_fn f = atomic_load(&g_dlsym);
    if (f != NULL) return f;
    static const char *const versions[] = {"GLIBC_2.34", "GLIBC_2.2.5", "GLIBC_2.17"};
    for (size_t i = 0; i < sizeof versions / sizeof versions[0] && f == NULL; i++)
        f = (dlsym_fn)(uintptr_t)dlvsym(RTLD_NEXT, "dlsym", versions[i]);
    if (f != NULL) atomic_store(&g_dlsym, f);
    return f;
}

CAPSHIM_NO_SANITIZE void *capshim_cuda_real_dlsym(void *handle, const char *name) {
    dlsym_fn f = real_dlsym_fn();
    return f != NULL ? f(handle, name) : NULL;
}

/* The link map of the object holding address p, or NULL. */
CAPSHIM_NO_SANITIZE static struct link_map *map_of(const void *p) {
    Dl_info info;
    void *map = NULL;
    if (p == NULL || dladdr1(p, &info, &map, RTLD_DL_LINKMAP) == 0) return NULL;
    return (struct link_map *)map;
}

/* dlsym(RTLD_NEXT, name) for the object that called it. glibc resolves RTLD_NEXT after the
 * object that called dlsym, which is this shim once it interposes dlsym: an interposer after the
 * shim in LD_PRELOAD (a tracer wrapping cudaDeviceGetAttribute, a library wrapping sysconf) would
 * get its own definition back and call itself until the stack ran out. found is the answer after
 * the shim; when it lies between the shim and the caller (the caller's own object included), the
 * objects after the caller are searched in link-map order (each through its own handle, kept only
 * when that object defines it). A caller before the shim (a sanitizer runtime, which looks up its
 * functions before it has started: no dlopen then) keeps found. Sets *corrected when the answer
 * is not the shim's own lookup. */
CAPSHIM_NO_SANITIZE static void *next_after(const void *caller, const char *name, void *found, int *corrected) {
    struct link_map *cm = map_of(caller), *fm = map_of(found), *self = map_of((const void *)(uintptr_t)&map_of);
    *corrected = 0;
    if (cm == NULL || fm == NULL || self == NULL || cm == self) return found;
    int between = 0; /* fm in (self, cm]: after the shim, yet not after the caller */
    struct link_map *m = cm;
    for (; m != NULL && m != self; m = m->l_prev) between |= m == fm;
    if (m == NULL || !between) return found; /* the caller is before the shim (a sanitizer), or fm after it */
    *corrected = 1;
    for (m = cm->l_next; m != NULL; m = m->l_next) {
        if (m->l_name == NULL || m->l_name[0] == '\0') continue;
        void *h = dlopen(m->l_name, RTLD_LAZY | RTLD_NOLOAD);
        if (h == NULL) continue;
        void *sym = capshim_cuda_real_dlsym(h, name);
        dlclose(h);
        if (sym != NULL && map_of(sym) == m) return sym;
    }
    return NULL;
}

EXPORT void *dlsym(void *handle, const char *name);
CAPSHIM_NO_SANITIZE void *dlsym(void *handle, const char *name) {
    void *r = capshim_cuda_real_dlsym(handle, name);
    if (r != NULL && handle == RTLD_NEXT) {
        int corrected = 0;
        r = next_after(__builtin_return_address(0), name, r, &corrected);
        if (corrected) return r; /* the caller sits after the shim: its calls came through the shim already */
    }
    if (r != NULL && capshim_nvml_entry_index(name) >= 0) return capshim_nvml_substitute(name, r);
    if (r == NULL || capshim_cuda_entry_index(name) < 0) return r;
    return capshim_cuda_substitute(name, r, 0, "dlsym");
}

#define REAL(type, entry) ((type)(uintptr_t)capshim_cuda_real(entry))

/* ---- runtime ---------------------------------------------------------------- */

typedef capshim_cuerr (*props_fn)(void *, int);
typedef capshim_cuerr (*rt_entry_fn)(const char *, void **, unsigned long long, int *);
typedef capshim_cuerr (*rt_entry_ver_fn)(const char *, void **, unsigned int, unsigned long long, int *);

static capshim_cuerr props(int entry, void *prop, int device) {
    props_fn real = REAL(props_fn, entry);
    if (real == NULL) return CAPSHIM_CU_NOT_FOUND;
    int lower = capshim_cuda_enter(entry);
    capshim_cuerr rc = real(prop, device);
    if (rc == CAPSHIM_CU_SUCCESS && lower && prop != NULL) {
        const char *query = capshim_cuda_entry_names[entry];
        int version = -1;
        int layout = capshim_cuda_layout(entry, (void *)(uintptr_t)real, &version);
        capshim_attr_fn attr = (capshim_attr_fn)(uintptr_t)capshim_cuda_sibling((void *)(uintptr_t)real,
                                                                                   "cudaDeviceGetAttribute");
        if (layout == LAYOUT_UNKNOWN)
            capshim_cuda_layout_mismatch(query, 0, version,
                                         version < 0 ? "the runtime's version is unknown; nothing written"
                                                     : "this runtime fills a cudaDeviceProp layout capshim's table "
                                                       "does not hold (before CUDA 11.0); nothing written");
        else
            capshim_cuda_lower_prop(query, prop, layout, device, attr);
    }
    capshim_cuda_leave();
    return rc;
}

EXPORT capshim_cuerr cudaGetDeviceProperties(void *prop, int device);
capshim_cuerr cudaGetDeviceProperties(void *prop, int device) { return props(E_cudaGetDeviceProperties, prop, device); }

EXPORT capshim_cuerr cudaGetDeviceProperties_v2(void *prop, int device);
capshim_cuerr cudaGetDeviceProperties_v2(void *prop, int device) {
    return props(E_cudaGetDeviceProperties_v2, prop, device);
}

EXPORT capshim_cuerr cudaDeviceGetAttribute(int *value, int attr, int device);
capshim_cuerr cudaDeviceGetAttribute(int *value, int attr, int device) {
    capshim_attr_fn real = REAL(capshim_attr_fn, E_cudaDeviceGetAttribute);
    if (real == NULL) return CAPSHIM_CU_NOT_FOUND;
    int lower = capshim_cuda_enter(E_cudaDeviceGetAttribute);
    capshim_cuerr rc = real(value, attr, device);
    if (rc == CAPSHIM_CU_SUCCESS && lower) capshim_cuda_lower_attribute("cudaDeviceGetAttribute", value, attr, device, real);
    capshim_cuda_leave();
    return rc;
}

/* The runtime version a plain getter answers for (CUDART_VERSION of the real runtime). */
static int runtime_version(void *fn) {
    typedef capshim_cuerr (*version_fn)(int *);
    version_fn rv = (version_fn)(uintptr_t)capshim_cuda_sibling(fn, "cudaRuntimeGetVersion");
    int v = 0;
    return rv != NULL && rv(&v) == CAPSHIM_CU_SUCCESS ? v : 0;
}

static capshim_cuerr entry_point(int entry, const char *symbol, void **fp, unsigned long long flags, int *status) {
    rt_entry_fn real = REAL(rt_entry_fn, entry);
    if (real == NULL) return CAPSHIM_CU_NOT_FOUND;
    (void)capshim_cuda_enter(entry);
    capshim_cuerr rc = real(symbol, fp, flags, status);
    if (rc == CAPSHIM_CU_SUCCESS && fp != NULL && *fp != NULL)
        *fp = capshim_cuda_substitute(symbol, *fp, runtime_version((void *)(uintptr_t)real),
                                      capshim_cuda_entry_names[entry]);
    capshim_cuda_leave();
    return rc;
}

static capshim_cuerr entry_point_ver(int entry, const char *symbol, void **fp, unsigned int version,
                                     unsigned long long flags, int *status) {
    rt_entry_ver_fn real = REAL(rt_entry_ver_fn, entry);
    if (real == NULL) return CAPSHIM_CU_NOT_FOUND;
    (void)capshim_cuda_enter(entry);
    capshim_cuerr rc = real(symbol, fp, version, flags, status);
    if (rc == CAPSHIM_CU_SUCCESS && fp != NULL && *fp != NULL)
        *fp = capshim_cuda_substitute(symbol, *fp, (int)version, capshim_cuda_entry_names[entry]);
    capshim_cuda_leave();
    return rc;
}

EXPORT capshim_cuerr cudaGetDriverEntryPoint(const char *symbol, void **fp, unsigned long long flags, int *status);
capshim_cuerr cudaGetDriverEntryPoint(const char *symbol, void **fp, unsigned long long flags, int *status) {
    return entry_point(E_cudaGetDriverEntryPoint, symbol, fp, flags, status);
}

EXPORT capshim_cuerr cudaGetDriverEntryPoint_ptsz(const char *symbol, void **fp, unsigned long long flags,
                                                  int *status);
capshim_cuerr cudaGetDriverEntryPoint_ptsz(const char *symbol, void **fp, unsigned long long flags, int *status) {
    return entry_point(E_cudaGetDriverEntryPoint_ptsz, symbol, fp, flags, status);
}

EXPORT capshim_cuerr cudaGetDriverEntryPointByVersion(const char *symbol, void **fp, unsigned int version,
                                                      unsigned long long flags, int *status);
capshim_cuerr cudaGetDriverEntryPointByVersion(const char *symbol, void **fp, unsigned int version,
                                               unsigned long long flags, int *status) {
    return entry_point_ver(E_cudaGetDriverEntryPointByVersion, symbol, fp, version, flags, status);
}

EXPORT capshim_cuerr cudaGetDriverEntryPointByVersion_ptsz(const char *symbol, void **fp, unsigned int version,
                                                           unsigned long long flags, int *status);
capshim_cuerr cudaGetDriverEntryPointByVersion_ptsz(const char *symbol, void **fp, unsigned int version,
                                                    unsigned long long flags, int *status) {
    return entry_point_ver(E_cudaGetDriverEntryPointByVersion_ptsz, symbol, fp, version, flags, status);
}

/* ---- driver ----------------------------------------------------------------- */

typedef capshim_cuerr (*name_fn)(char *, int, int);
typedef capshim_cuerr (*cc_fn)(int *, int *, int);
typedef capshim_cuerr (*devprop_fn)(void *, int);
typedef capshim_cuerr (*proc_fn)(const char *, void **, int, cuuint64_t);
typedef capshim_cuerr (*proc_v2_fn)(const char *, void **, int, cuuint64_t, int *);

EXPORT capshim_cuerr cuDeviceGetAttribute(int *value, int attr, int device);
capshim_cuerr cuDeviceGetAttribute(int *value, int attr, int device) {
    capshim_attr_fn real = REAL(capshim_attr_fn, E_cuDeviceGetAttribute);
    if (real == NULL) return CAPSHIM_CU_NOT_FOUND;
    int lower = capshim_cuda_enter(E_cuDeviceGetAttribute);
    capshim_cuerr rc = real(value, attr, device);
    if (rc == CAPSHIM_CU_SUCCESS && lower) capshim_cuda_lower_attribute("cuDeviceGetAttribute", value, attr, device, real);
    capshim_cuda_leave();
    return rc;
}

EXPORT capshim_cuerr cuDeviceGetName(char *name, int len, int device);
capshim_cuerr cuDeviceGetName(char *name, int len, int device) {
    name_fn real = REAL(name_fn, E_cuDeviceGetName);
    if (real == NULL) return CAPSHIM_CU_NOT_FOUND;
    int lower = capshim_cuda_enter(E_cuDeviceGetName);
    capshim_cuerr rc = real(name, len, device);
    if (rc == CAPSHIM_CU_SUCCESS && lower && len > 0) capshim_cuda_lower_name("cuDeviceGetName", name, (size_t)len);
    capshim_cuda_leave();
    return rc;
}

EXPORT capshim_cuerr cuDeviceComputeCapability(int *major, int *minor, int device);
capshim_cuerr cuDeviceComputeCapability(int *major, int *minor, int device) {
    cc_fn real = REAL(cc_fn, E_cuDeviceComputeCapability);
    if (real == NULL) return CAPSHIM_CU_NOT_FOUND;
    int lower = capshim_cuda_enter(E_cuDeviceComputeCapability);
    capshim_cuerr rc = real(major, minor, device);
    if (rc == CAPSHIM_CU_SUCCESS && lower) capshim_cuda_lower_pair("cuDeviceComputeCapability", major, minor);
    capshim_cuda_leave();
    return rc;
}

EXPORT capshim_cuerr cuDeviceGetProperties(void *prop, int device);
capshim_cuerr cuDeviceGetProperties(void *prop, int device) {
    devprop_fn real = REAL(devprop_fn, E_cuDeviceGetProperties);
    if (real == NULL) return CAPSHIM_CU_NOT_FOUND;
    int lower = capshim_cuda_enter(E_cuDeviceGetProperties);
    capshim_cuerr rc = real(prop, device);
    if (rc == CAPSHIM_CU_SUCCESS && lower) {
        capshim_attr_fn attr =
            (capshim_attr_fn)(uintptr_t)capshim_cuda_sibling((void *)(uintptr_t)real, "cuDeviceGetAttribute");
        capshim_cuda_lower_devprop("cuDeviceGetProperties", prop, device, attr);
    }
    capshim_cuda_leave();
    return rc;
}

EXPORT capshim_cuerr cuGetProcAddress(const char *symbol, void **pfn, int version, cuuint64_t flags);
capshim_cuerr cuGetProcAddress(const char *symbol, void **pfn, int version, cuuint64_t flags) {
    proc_fn real = REAL(proc_fn, E_cuGetProcAddress);
    if (real == NULL) return CAPSHIM_CU_NOT_FOUND;
    (void)capshim_cuda_enter(E_cuGetProcAddress);
    capshim_cuerr rc = real(symbol, pfn, version, flags);
    if (rc == CAPSHIM_CU_SUCCESS && pfn != NULL && *pfn != NULL)
        *pfn = capshim_cuda_substitute(symbol, *pfn, version, "cuGetProcAddress");
    capshim_cuda_leave();
    return rc;
}

EXPORT capshim_cuerr cuGetProcAddress_v2(const char *symbol, void **pfn, int version, cuuint64_t flags, int *status);
capshim_cuerr cuGetProcAddress_v2(const char *symbol, void **pfn, int version, cuuint64_t flags, int *status) {
    proc_v2_fn real = REAL(proc_v2_fn, E_cuGetProcAddress_v2);
    if (real == NULL) return CAPSHIM_CU_NOT_FOUND;
    (void)capshim_cuda_enter(E_cuGetProcAddress_v2);
    capshim_cuerr rc = real(symbol, pfn, version, flags, status);
    if (rc == CAPSHIM_CU_SUCCESS && pfn != NULL && *pfn != NULL)
        *pfn = capshim_cuda_substitute(symbol, *pfn, version, "cuGetProcAddress_v2");
    capshim_cuda_leave();
    return rc;
}

void *capshim_cuda_wrapper(int entry) {
    static void *const wrappers[E_COUNT] = {
        (void *)(uintptr_t)cudaGetDeviceProperties,
        (void *)(uintptr_t)cudaGetDeviceProperties_v2,
        (void *)(uintptr_t)cudaDeviceGetAttribute,
        (void *)(uintptr_t)cudaGetDriverEntryPoint,
        (void *)(uintptr_t)cudaGetDriverEntryPoint_ptsz,
        (void *)(uintptr_t)cudaGetDriverEntryPointByVersion,
        (void *)(uintptr_t)cudaGetDriverEntryPointByVersion_ptsz,
        (void *)(uintptr_t)cuDeviceGetAttribute,
        (void *)(uintptr_t)cuDeviceGetName,
        (void *)(uintptr_t)cuDeviceComputeCapability,
        (void *)(uintptr_t)cuDeviceGetProperties,
        (void *)(uintptr_t)cuGetProcAddress,
        (void *)(uintptr_t)cuGetProcAddress_v2,
    };
    return entry >= 0 && entry < E_COUNT ? wrappers[entry] : NULL;
}

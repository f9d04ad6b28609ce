/* A stand-in libcudart for the tests (no GPU here, none in CI), in two builds:
 * -DSTANDIN_CUDART_MAJOR=13 is libcudart.so.13 (cudaRuntimeGetVersion 13000, cudaDeviceProp
 * of 1008 bytes) and -DSTANDIN_CUDART_MAJOR=11 is libcudart.so.11.0 (11080, CUDA 11.8's
 * 728-byte cudaDeviceProp, no _v2 and no ByVersion getters: 11.8 had neither). Each exports
 * its names under its own version node (standin_cudart13.map, standin_cudart11.map), as the
 * real runtimes do, so two of them in one process bind as they would on a real machine.
 *
 * Like the real runtime it dlopens libcuda.so.1 and dlsyms the driver's functions
 * (so the shim's dlsym path is exercised), answers cudaDeviceGetAttribute from the
 * driver, and fills cudaDeviceProp in the CUDA 13 layout (cudaGetDeviceProperties)
 * or the CUDA 12 layout (cudaGetDeviceProperties_v2), offsets from the shim's own
 * generated table (cuda_table.h). cudaGetDriverEntryPoint* hand out the driver's
 * functions through the driver's cuGetProcAddress_v2, found with dlvsym so that this
 * path is tested apart from the dlsym one.
 *
 * Test knobs (environment):
 *   CAPSHIM_STANDIN_RUNTIME_VERSION  what the 13 build's cudaRuntimeGetVersion answers
 *                                    (default 13000; the 11 build always answers 11080)
 *   CAPSHIM_STANDIN_RESOLVE=dlvsym   every driver function found with dlvsym (bypasses
 *                                    the shim's dlsym)
 *   CAPSHIM_STANDIN_SKEW=1           major/minor/multiProcessorCount written 8 bytes
 *                                    late: a layout the shim must refuse to touch
 *   CAPSHIM_STANDIN_CACHE=1          the attributes read once, when the library loads, and
 *                                    cudaGetDeviceProperties filled from that cache: what the
 *                                    real libcudart.so.13 does on the H200, so the struct
 *                                    arrives already lowered through the shim's driver wrapper
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "cuda_table.h"

#if !defined(STANDIN_CUDART_MAJOR) || (STANDIN_CUDART_MAJOR != 13 && STANDIN_CUDART_MAJOR != 11)
#error "build with -DSTANDIN_CUDART_MAJOR=13 or 11 (capshim.backends.cuda does)"
#endif

#define EXPORT __attribute__((visibility("default")))
typedef int cudaError_t;
typedef int CUresult;
typedef unsigned long long cuuint64_t;

#define cudaSuccess 0
#define cudaErrorInvalidValue 1
#define cudaErrorInsufficientDriver 35
#define cudaErrorSymbolNotFound 500
#define DRIVER_VERSION_NODE "STANDIN_1.0" /* standin_cuda.map */

typedef CUresult (*attr_fn)(int *, int, int);
typedef CUresult (*name_fn)(char *, int, int);
typedef CUresult (*mem_fn)(size_t *, int);
typedef CUresult (*count_fn)(int *);
typedef CUresult (*proc_v2_fn)(const char *, void **, int, cuuint64_t, int *);

static struct {
    attr_fn attr;
    name_fn name;
    mem_fn total_mem;
    count_fn count, driver_version;
    proc_v2_fn proc;
} drv;
static pthread_once_t once = PTHREAD_ONCE_INIT;

static int env_is(const char *name, const char *value) {
    const char *v = getenv(name);
    return v != NULL && strcmp(v, value) == 0;
}

static void *find(void *h, const char *name, int raw) {
    return raw ? dlvsym(h, name, DRIVER_VERSION_NODE) : dlsym(h, name);
}

static void load_driver(void) {
    void *h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    if (h == NULL) return;
    int raw = env_is("CAPSHIM_STANDIN_RESOLVE", "dlvsym");
    drv.attr = (attr_fn)(uintptr_t)find(h, "cuDeviceGetAttribute", raw);
    drv.name = (name_fn)(uintptr_t)find(h, "cuDeviceGetName", raw);
    drv.total_mem = (mem_fn)(uintptr_t)find(h, "cuDeviceTotalMem_v2", raw);
    drv.count = (count_fn)(uintptr_t)find(h, "cuDeviceGetCount", raw);
    drv.driver_version = (count_fn)(uintptr_t)find(h, "cuDriverGetVersion", raw);
    drv.proc = (proc_v2_fn)(uintptr_t)find(h, "cuGetProcAddress_v2", 1);
}

static int ready(void) {
    (void)pthread_once(&once, load_driver);
    return drv.attr != NULL && drv.name != NULL && drv.total_mem != NULL && drv.count != NULL && drv.proc != NULL;
}

/* CAPSHIM_STANDIN_CACHE: the attributes as the driver answered them at load (index: attribute). */
#define CACHE_SLOTS 128
static int cache[CACHE_SLOTS];
static int cache_ok[CACHE_SLOTS];
static int cached;

/* Runs on a thread of its own, as the real runtime's initialisation does not run inside the
 * application's cudaGetDeviceProperties call: the shim's wrapper is not nested there. */
static void *fill_cache(void *unused) {
    (void)unused;
#define CACHE(key, index, attribute, width, off13, off12, off11) \
    if ((attribute) >= 0 && (attribute) < CACHE_SLOTS)           \
        cache_ok[(attribute)] = drv.attr(&cache[(attribute)], (attribute), 0) == 0;
    CAPSHIM_CUDA_FIELDS(CACHE)
#undef CACHE
    cached = 1;
    return NULL;
}

static void cache_once(void) {
    pthread_t t;
    if (pthread_create(&t, NULL, fill_cache, NULL) == 0) (void)pthread_join(t, NULL);
}

/* cuDeviceGetAttribute, or the load-time cache for device 0 when CAPSHIM_STANDIN_CACHE=1. */
static CUresult attr_of(int *v, int attribute, int device) {
    if (cached && device == 0 && attribute >= 0 && attribute < CACHE_SLOTS && cache_ok[attribute]) {
        *v = cache[attribute];
        return 0;
    }
    return drv.attr(v, attribute, device);
}

static int runtime_version(void) {
#if STANDIN_CUDART_MAJOR == 11
    return 11080;
#else
    const char *v = getenv("CAPSHIM_STANDIN_RUNTIME_VERSION");
    return v != NULL ? atoi(v) : 13000;
#endif
}

EXPORT cudaError_t cudaRuntimeGetVersion(int *v) {
    if (v == NULL) return cudaErrorInvalidValue;
    *v = runtime_version();
    return cudaSuccess;
}

EXPORT cudaError_t cudaDriverGetVersion(int *v) {
    if (v == NULL) return cudaErrorInvalidValue;
    if (!ready() || drv.driver_version == NULL) return cudaErrorInsufficientDriver;
    return drv.driver_version(v);
}

EXPORT cudaError_t cudaGetDeviceCount(int *n) {
    if (!ready()) return cudaErrorInsufficientDriver;
    return drv.count(n);
}

EXPORT cudaError_t cudaDeviceGetAttribute(int *value, int attr, int device) {
    if (!ready()) return cudaErrorInsufficientDriver;
    return drv.attr(value, attr, device);
}

/* Fills prop in the CUDA 13 (13), CUDA 12 (12) or pre-12 (11, CUDA 11.8) layout, that many bytes. */
static pthread_once_t cache_ran = PTHREAD_ONCE_INIT;

static cudaError_t fill(unsigned char *prop, int device, int layout) {
    if (prop == NULL) return cudaErrorInvalidValue;
    if (!ready()) return cudaErrorInsufficientDriver;
    if (env_is("CAPSHIM_STANDIN_CACHE", "1")) (void)pthread_once(&cache_ran, cache_once);
    int probe = 0;
    CUresult rc = drv.attr(&probe, 1, device);
    if (rc != 0) return rc;
    unsigned char tmp[CAPSHIM_CUDA_PROP12_SIZE];
    memset(tmp, 0, sizeof tmp);
    rc = drv.name((char *)tmp + CAPSHIM_CUDA_NAME_OFFSET, CAPSHIM_CUDA_NAME_SIZE, device);
    if (rc != 0) return rc;
    int skew = env_is("CAPSHIM_STANDIN_SKEW", "1") ? 8 : 0;
#define FILL(key, index, attribute, width, off13, off12, off11)                                           \
    {                                                                                              \
        size_t off = (size_t)(CAPSHIM_CUDA_OFF(layout, off13, off12, off11));                                   \
        if ((attribute) == 75 || (attribute) == 76 || (attribute) == 16) off += (size_t)skew;      \
        if ((attribute) < 0) {                                                                     \
            size_t bytes = 0;                                                                      \
            if (drv.total_mem(&bytes, device) != 0) return 999;                                    \
            memcpy(tmp + off, &bytes, sizeof bytes);                                               \
        } else {                                                                                   \
            int v = 0;                                                                             \
            if (attr_of(&v, (attribute), device) != 0) return 999;                                 \
            if ((width) == CAPSHIM_CUDA_SIZE) {                                                    \
                size_t s = (size_t)v;                                                              \
                memcpy(tmp + off, &s, sizeof s);                                                   \
            } else {                                                                               \
                memcpy(tmp + off, &v, sizeof v);                                                   \
            }                                                                                      \
        }                                                                                          \
    }
    CAPSHIM_CUDA_FIELDS(FILL)
#undef FILL
    memcpy(prop, tmp, layout == 13 ? CAPSHIM_CUDA_PROP13_SIZE
                      : layout == 12 ? CAPSHIM_CUDA_PROP12_SIZE : CAPSHIM_CUDA_PROP11_SIZE);
    return cudaSuccess;
}

/* CUDA 13's only cudaGetDeviceProperties fills the 13 layout; before 13 the plain name is
 * the pre-12 layout (728 bytes: a buffer of that size is all an application built with CUDA 11
 * headers passes). */
EXPORT cudaError_t cudaGetDeviceProperties(void *prop, int device) {
    return fill(prop, device, runtime_version() >= 13000 ? 13 : 11);
}

#if STANDIN_CUDART_MAJOR != 11
EXPORT cudaError_t cudaGetDeviceProperties_v2(void *prop, int device) { return fill(prop, device, 12); }
#endif

static cudaError_t entry(const char *symbol, void **fp, int version, unsigned long long flags, int *status) {
    if (fp == NULL || symbol == NULL) return cudaErrorInvalidValue;
    if (!ready()) return cudaErrorInsufficientDriver;
    int found = 1;
    CUresult rc = drv.proc(symbol, fp, version, flags, &found);
    if (status != NULL) *status = found;
    return rc == 0 ? cudaSuccess : cudaErrorSymbolNotFound;
}

EXPORT cudaError_t cudaGetDriverEntryPoint(const char *symbol, void **fp, unsigned long long flags, int *status) {
    return entry(symbol, fp, runtime_version(), flags, status);
}

EXPORT cudaError_t cudaGetDriverEntryPoint_ptsz(const char *symbol, void **fp, unsigned long long flags,
                                                int *status) {
    return entry(symbol, fp, runtime_version(), flags, status);
}

#if STANDIN_CUDART_MAJOR != 11
EXPORT cudaError_t cudaGetDriverEntryPointByVersion(const char *symbol, void **fp, unsigned int version,
                                                    unsigned long long flags, int *status) {
    return entry(symbol, fp, (int)version, flags, status);
}

EXPORT cudaError_t cudaGetDriverEntryPointByVersion_ptsz(const char *symbol, void **fp, unsigned int version,
                                                         unsigned long long flags, int *status) {
    return entry(symbol, fp, (int)version, flags, status);
}
#endif

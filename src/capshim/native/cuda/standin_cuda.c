/* A stand-in libcuda.so.1 for the tests (no GPU here, none in CI): answers fixed
 * H200-like values (compute capability 9.0, 132 SMs, 233472 bytes of shared memory
 * per SM, 232448 opt-in, 49152 per block, 65536 registers, 60 MB L2, "NVIDIA H200";
 * the H200's own answers: stock_probe in evidence/h200-cuda-clients/clients.json) through the names the
 * real driver exports. Any other attribute answers 1000 + its number, so a test can
 * see it pass through untouched. Only device 0 exists.
 *
 * cuGetProcAddress(_v2) hand out the driver's internal functions (not the exported
 * symbols, which the shim interposes), honour the version (below 2000: not found;
 * "cuGetProcAddress" from 12000 on is the 5-argument _v2) and refuse unknown flag bits
 * (above 7): a failure leaves *pfn NULL, as the real driver does.
 *
 * CAPSHIM_STANDIN_FAIL=1: every device query fails with CUDA_ERROR_UNKNOWN (999) and
 * writes nothing (the shim must then touch nothing either).
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define EXPORT __attribute__((visibility("default")))
typedef int CUresult;
typedef unsigned long long cuuint64_t;

#define CUDA_SUCCESS 0
#define CUDA_ERROR_INVALID_VALUE 1
#define CUDA_ERROR_INVALID_DEVICE 101
#define CUDA_ERROR_NOT_FOUND 500
#define CUDA_ERROR_UNKNOWN 999

static int failing(void) {
    const char *v = getenv("CAPSHIM_STANDIN_FAIL");
    return v != NULL && strcmp(v, "1") == 0;
}

static CUresult check(int device) {
    if (failing()) return CUDA_ERROR_UNKNOWN;
    return device == 0 ? CUDA_SUCCESS : CUDA_ERROR_INVALID_DEVICE;
}

static CUresult d_init(unsigned int flags) { return flags == 0 ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE; }

static CUresult d_driver_version(int *v) {
    if (v == NULL) return CUDA_ERROR_INVALID_VALUE;
    *v = 13000;
    return CUDA_SUCCESS;
}

static CUresult d_count(int *n) {
    if (n == NULL) return CUDA_ERROR_INVALID_VALUE;
    *n = 1;
    return CUDA_SUCCESS;
}

static CUresult d_get(int *dev, int ordinal) {
    if (dev == NULL) return CUDA_ERROR_INVALID_VALUE;
    if (ordinal != 0) return CUDA_ERROR_INVALID_DEVICE;
    *dev = 0;
    return CUDA_SUCCESS;
}

static int attribute(int attr) {
    switch (attr) {
    case 1: return 1024;      /* MAX_THREADS_PER_BLOCK */
    case 8: return 49152;     /* MAX_SHARED_MEMORY_PER_BLOCK */
    case 12: return 65536;    /* MAX_REGISTERS_PER_BLOCK */
    case 16: return 132;      /* MULTIPROCESSOR_COUNT */
    case 38: return 62914560; /* L2_CACHE_SIZE: 60 MB */
    case 39: return 2048;     /* MAX_THREADS_PER_MULTIPROCESSOR */
    case 75: return 9;        /* COMPUTE_CAPABILITY_MAJOR */
    case 76: return 0;        /* COMPUTE_CAPABILITY_MINOR */
    case 81: return 233472;   /* MAX_SHARED_MEMORY_PER_MULTIPROCESSOR */
    case 82: return 65536;    /* MAX_REGISTERS_PER_MULTIPROCESSOR */
    case 97: return 232448;   /* MAX_SHARED_MEMORY_PER_BLOCK_OPTIN */
    default: return 1000 + attr;
    }
}

static CUresult d_attr(int *value, int attr, int device) {
    CUresult rc = check(device);
    if (rc != CUDA_SUCCESS) return rc;
    if (value == NULL || attr <= 0) return CUDA_ERROR_INVALID_VALUE;
    *value = attribute(attr);
    return CUDA_SUCCESS;
}

static CUresult d_name(char *name, int len, int device) {
    CUresult rc = check(device);
    if (rc != CUDA_SUCCESS) return rc;
    if (name == NULL || len <= 0) return CUDA_ERROR_INVALID_VALUE;
    strncpy(name, "NVIDIA H200", (size_t)len - 1);
    name[len - 1] = '\0';
    return CUDA_SUCCESS;
}

static CUresult d_cc(int *major, int *minor, int device) {
    CUresult rc = check(device);
    if (rc != CUDA_SUCCESS) return rc;
    if (major == NULL || minor == NULL) return CUDA_ERROR_INVALID_VALUE;
    *major = 9;
    *minor = 0;
    return CUDA_SUCCESS;
}

/* CUdevprop (cuda.h): ten ints, maxThreadsDim[3] and maxGridSize[3] included. */
static CUresult d_props(int *p, int device) {
    CUresult rc = check(device);
    if (rc != CUDA_SUCCESS) return rc;
    if (p == NULL) return CUDA_ERROR_INVALID_VALUE;
    int v[14] = {1024, 1024, 1024, 64, 2147483647, 65535, 65535, 49152, 65536, 32, 2147483647, 65536, 1980000, 512};
    memcpy(p, v, sizeof v);
    return CUDA_SUCCESS;
}

static CUresult d_total_mem(size_t *bytes, int device) {
    CUresult rc = check(device);
    if (rc != CUDA_SUCCESS) return rc;
    if (bytes == NULL) return CUDA_ERROR_INVALID_VALUE;
    *bytes = (size_t)150108651520ull; /* 143155 MiB, the H200's total_memory */
    return CUDA_SUCCESS;
}

static CUresult d_proc(const char *symbol, void **pfn, int version, cuuint64_t flags);
static CUresult d_proc_v2(const char *symbol, void **pfn, int version, cuuint64_t flags, int *status);

static void *lookup(const char *symbol, int version) {
    static const struct {
        const char *name;
        void *fn;
    } table[] = {
        {"cuInit", (void *)(uintptr_t)d_init},
        {"cuDriverGetVersion", (void *)(uintptr_t)d_driver_version},
        {"cuDeviceGetCount", (void *)(uintptr_t)d_count},
        {"cuDeviceGet", (void *)(uintptr_t)d_get},
        {"cuDeviceGetAttribute", (void *)(uintptr_t)d_attr},
        {"cuDeviceGetName", (void *)(uintptr_t)d_name},
        {"cuDeviceComputeCapability", (void *)(uintptr_t)d_cc},
        {"cuDeviceGetProperties", (void *)(uintptr_t)d_props},
        {"cuDeviceTotalMem", (void *)(uintptr_t)d_total_mem},
    };
    if (symbol == NULL) return NULL;
    if (strcmp(symbol, "cuGetProcAddress") == 0)
        return version >= 12000 ? (void *)(uintptr_t)d_proc_v2 : (void *)(uintptr_t)d_proc;
    for (size_t i = 0; i < sizeof table / sizeof table[0]; i++)
        if (strcmp(symbol, table[i].name) == 0) return table[i].fn;
    return NULL;
}

/* 0: found; 1: no such symbol; 2: the version is too old (CUdriverProcAddressQueryResult). */
static int find(const char *symbol, void **pfn, int version, cuuint64_t flags) {
    if (pfn == NULL) return 1;
    *pfn = NULL;
    if (flags > 7) return 1;
    if (version < 2000) return 2;
    *pfn = lookup(symbol, version);
    return *pfn != NULL ? 0 : 1;
}

static CUresult d_proc(const char *symbol, void **pfn, int version, cuuint64_t flags) {
    if (pfn == NULL || symbol == NULL) return CUDA_ERROR_INVALID_VALUE;
    return find(symbol, pfn, version, flags) == 0 ? CUDA_SUCCESS : CUDA_ERROR_NOT_FOUND;
}

static CUresult d_proc_v2(const char *symbol, void **pfn, int version, cuuint64_t flags, int *status) {
    if (pfn == NULL || symbol == NULL) return CUDA_ERROR_INVALID_VALUE;
    int found = find(symbol, pfn, version, flags);
    if (status != NULL) *status = found;
    return found == 0 ? CUDA_SUCCESS : CUDA_ERROR_NOT_FOUND;
}

EXPORT CUresult cuInit(unsigned int flags) { return d_init(flags); }
EXPORT CUresult cuDriverGetVersion(int *v) { return d_driver_version(v); }
EXPORT CUresult cuDeviceGetCount(int *n) { return d_count(n); }
EXPORT CUresult cuDeviceGet(int *dev, int ordinal) { return d_get(dev, ordinal); }
EXPORT CUresult cuDeviceGetAttribute(int *value, int attr, int device) { return d_attr(value, attr, device); }
EXPORT CUresult cuDeviceGetName(char *name, int len, int device) { return d_name(name, len, device); }
EXPORT CUresult cuDeviceComputeCapability(int *major, int *minor, int device) { return d_cc(major, minor, device); }
EXPORT CUresult cuDeviceGetProperties(void *p, int device) { return d_props((int *)p, device); }
EXPORT CUresult cuDeviceTotalMem_v2(size_t *bytes, int device) { return d_total_mem(bytes, device); }
EXPORT CUresult cuGetProcAddress(const char *symbol, void **pfn, int version, cuuint64_t flags) {
    return d_proc(symbol, pfn, version, flags);
}
EXPORT CUresult cuGetProcAddress_v2(const char *symbol, void **pfn, int version, cuuint64_t flags, int *status) {
    return d_proc_v2(symbol, pfn, version, flags, status);
}

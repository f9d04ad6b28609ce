/* A stand-in libcuda.so.1 for the tests (no GPU here, none in CI): answers fixed
 * H200-like values (compute capability 9.0, 132 SMs, 233472 bytes of shared memory
 * per SM, 232448 opt-in, 49152 per block, 65536 registers, 60 MB L2, "NVIDIA H200";
 * the H200's own answers: stock_probe in evidence/h200-cuda-clients/clients.json) through the names the
 * real driver exports. Any other attribute answers 1000 + its number, so a test can
 * see it pass through untouched.
 *
 * Devices: CAPSHIM_STANDIN_DEVICES=N (1..8, default 1; anything else: 1) physical devices, all
 * with the same answers except the name (physical device p > 0: "NVIDIA H200 (stand-in p)") and
 * the UUID (cuDeviceGetUuid(_v2): ca950000-0000-4000-8000-0000000000PP, PP the physical index
 * in hex). CUDA_VISIBLE_DEVICES chooses and orders them as the real driver does (the CUDA C++
 * Programming Guide, "CUDA Environment Variables"): comma-separated physical indices or
 * GPU-UUID prefixes; the list stops at the first entry that names no device (or one already
 * listed); an empty value leaves no device.
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
#include <stdio.h>
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

#define MAX_DEVICES 8

static int physical_count(void) {
    const char *v = getenv("CAPSHIM_STANDIN_DEVICES");
    if (v == NULL || v[0] < '1' || v[0] > '8' || v[1] != '\0') return 1;
    return v[0] - '0';
}

static void uuid_of(int physical, unsigned char out[16]) {
    static const unsigned char base[16] = {0xca, 0x95, 0, 0, 0, 0, 0x40, 0, 0x80, 0, 0, 0, 0, 0, 0, 0};
    memcpy(out, base, 16);
    out[15] = (unsigned char)physical;
}

/* Whether text (up to a ',' or the end) is a prefix of physical device p's "GPU-" UUID text. */
static int uuid_prefix(const char *text, size_t n, int p) {
    unsigned char u[16];
    uuid_of(p, u);
    char full[64];
    int k = snprintf(full, sizeof full, "GPU-");
    for (int i = 0; i < 16; i++) {
        if (i == 4 || i == 6 || i == 8 || i == 10) full[k++] = '-';
        k += snprintf(full + k, sizeof full - (size_t)k, "%02x", u[i]);
    }
    return n > 4 && n <= (size_t)k && strncmp(text, full, n) == 0;
}

/* visible[ordinal] = physical index; returns the count (CUDA_VISIBLE_DEVICES, see the top). */
static int visible(int out[MAX_DEVICES]) {
    int total = physical_count();
    const char *v = getenv("CUDA_VISIBLE_DEVICES");
    if (v == NULL) {
        for (int i = 0; i < total; i++) out[i] = i;
        return total;
    }
    int n = 0;
    for (const char *p = v; *p != '\0' && n < MAX_DEVICES;) {
        size_t len = strcspn(p, ",");
        int found = -1;
        if (len > 0 && p[0] >= '0' && p[0] <= '9') {
            char *end = NULL;
            long idx = strtol(p, &end, 10);
            if (end == p + len && idx >= 0 && idx < total) found = (int)idx;
        } else {
            for (int q = 0; q < total && found < 0; q++)
                if (uuid_prefix(p, len, q)) found = q;
        }
        for (int i = 0; i < n && found >= 0; i++)
            if (out[i] == found) found = -1;
        if (found < 0) break;
        out[n++] = found;
        p += len;
        if (*p == ',') p++;
    }
    return n;
}

/* The physical device of ordinal device, or -1. */
static int physical(int device) {
    int map[MAX_DEVICES];
    int n = visible(map);
    return device >= 0 && device < n ? map[device] : -1;
}

static CUresult check(int device) {
    if (failing()) return CUDA_ERROR_UNKNOWN;
    return physical(device) >= 0 ? CUDA_SUCCESS : CUDA_ERROR_INVALID_DEVICE;
}

static CUresult d_init(unsigned int flags) { return flags == 0 ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE; }

static CUresult d_driver_version(int *v) {
    if (v == NULL) return CUDA_ERROR_INVALID_VALUE;
    *v = 13000;
    return CUDA_SUCCESS;
}

static CUresult d_count(int *n) {
    if (n == NULL) return CUDA_ERROR_INVALID_VALUE;
    int map[MAX_DEVICES];
    *n = visible(map);
    return CUDA_SUCCESS;
}

static CUresult d_get(int *dev, int ordinal) {
    if (dev == NULL) return CUDA_ERROR_INVALID_VALUE;
    if (physical(ordinal) < 0) return CUDA_ERROR_INVALID_DEVICE;
    *dev = ordinal;
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
    int p = physical(device);
    char text[64];
    if (p == 0)
        snprintf(text, sizeof text, "NVIDIA H200");
    else
        snprintf(text, sizeof text, "NVIDIA H200 (stand-in %d)", p);
    strncpy(name, text, (size_t)len - 1);
    name[len - 1] = '\0';
    return CUDA_SUCCESS;
}

/* CUuuid: 16 bytes (cuda.h). */
static CUresult d_uuid(unsigned char *uuid, int device) {
    CUresult rc = check(device);
    if (rc != CUDA_SUCCESS) return rc;
    if (uuid == NULL) return CUDA_ERROR_INVALID_VALUE;
    uuid_of(physical(device), uuid);
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
        {"cuDeviceGetUuid", (void *)(uintptr_t)d_uuid},
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
EXPORT CUresult cuDeviceGetUuid(void *uuid, int device) { return d_uuid((unsigned char *)uuid, device); }
EXPORT CUresult cuDeviceGetUuid_v2(void *uuid, int device) { return d_uuid((unsigned char *)uuid, device); }
EXPORT CUresult cuDeviceTotalMem_v2(size_t *bytes, int device) { return d_total_mem(bytes, device); }
EXPORT CUresult cuGetProcAddress(const char *symbol, void **pfn, int version, cuuint64_t flags) {
    return d_proc(symbol, pfn, version, flags);
}
EXPORT CUresult cuGetProcAddress_v2(const char *symbol, void **pfn, int version, cuuint64_t flags, int *status) {
    return d_proc_v2(symbol, pfn, version, flags, status);
}

/* capshim-cuda-probe: what one process sees of a CUDA device, as one JSON object.
 *
 *   capshim-cuda-probe [--device N]
 *   capshim-cuda-probe --list
 *
 * --list prints the devices the process sees (after CUDA_VISIBLE_DEVICES), in ordinal order:
 *   {"devices": [{"index", "name" (cuDeviceGetName), "uuid" ("GPU-" and the 16 bytes of
 *    cuDeviceGetUuid_v2 as 8-4-4-4-12 hex, as nvidia-smi -L prints them; null when the driver
 *    does not say)}], "runtime": PATH}
 * The device object of the single-device form carries the same "uuid".
 *
 * dlopens the runtime (CAPSHIM_CUDA_RUNTIME, else libcudart.so.13, else libcudart.so.12)
 * and libcuda.so.1, finds every function with dlsym (so an LD_PRELOADed shim's dlsym
 * path is what answers), and prints
 *   {"device": {"index", "name"}, "runtime": PATH, "runtime_version", "driver_version",
 *    "capabilities": {key: value via cudaGetDeviceProperties (13; 11.x: the pre-12 layout) or _v2 (12)},
 *    "attributes": {key: value via cudaDeviceGetAttribute},
 *    "driver": {key: value via cuDeviceGetAttribute, "cuDeviceComputeCapability",
 *               "cuDeviceGetName", "cuDeviceGetProperties": {key: value}}}
 *    "nvml": {"library", "match": "pci"|"index", "answers": {"computeCapability" (nvmlDeviceGetCudaComputeCapability),
 *             "deviceName" (nvmlDeviceGetName), "multiProcessorCount" and "memorySizeMB"
 *             (nvmlDeviceGetAttributes_v2), "architecture" (nvmlDeviceGetArchitecture)},
 *             "refused": {query: NVML error}} or {"error": ...}}
 * The NVML device is the CUDA device's by PCI bus id (cudaDeviceGetPCIBusId,
 * nvmlDeviceGetHandleByPciBusId_v2), else by index (a stand-in without either).
 * computeCapability is major * 10 + minor. Exit 1 with {"error": ...} when no runtime,
 * no driver or no such device. Offsets: cuda_table.h (generated from the capability table).
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cuda_table.h"
#include "status.h"

typedef int (*attr_fn)(int *, int, int);
typedef int (*props_fn)(void *, int);
typedef int (*int_fn)(int *);
typedef int (*name_fn)(char *, int, int);
typedef int (*cc_fn)(int *, int *, int);

static int fail(const char *what, const char *detail) {
    char esc[1024];
    capshim_status_escape(esc, sizeof esc, detail ? detail : "");
    printf("{\"error\": \"%s%s%s\"}\n", what, detail ? ": " : "", esc);
    return 1;
}

static void *sym(void *h, const char *name) { return h != NULL ? dlsym(h, name) : NULL; }

static unsigned long long member(const unsigned char *p, int width) {
    if (width == CAPSHIM_CUDA_SIZE) {
        unsigned long long v;
        memcpy(&v, p, sizeof v);
        return v;
    }
    int v;
    memcpy(&v, p, sizeof v);
    return (unsigned long long)(long long)v;
}

static void print_props(const unsigned char *prop, int layout) {
    int first = 1;
    int major = 0;
    printf("\"capabilities\": {");
#define PROP(key, index, attribute, width, off13, off12, off11)                                                    \
    {                                                                                                       \
        unsigned long long v = member(prop + (CAPSHIM_CUDA_OFF(layout, off13, off12, off11)), width);                    \
        if (strcmp(#key, "computeCapability") == 0 && (index) == 0) {                                       \
            major = (int)v;                                                                                 \
        } else {                                                                                            \
            if (strcmp(#key, "computeCapability") == 0) v = (unsigned long long)major * 10u + v;            \
            printf("%s\"%s\": %llu", first ? "" : ", ", #key, v);                                           \
            first = 0;                                                                                      \
        }                                                                                                   \
    }
    CAPSHIM_CUDA_FIELDS(PROP)
#undef PROP
    printf("}");
}

/* Prints "key": value, ... (no braces); returns how many. */
static int attrs_body(attr_fn f, int device) {
    int first = 1, major = -1, n = 0;
#define ATTR(key, index, attribute, width, off13, off12, off11)                                                     \
    if ((attribute) >= 0) {                                                                                  \
        int v = -1;                                                                                          \
        if (f != NULL && f(&v, (attribute), device) == 0) {                                                  \
            if ((attribute) == 75) {                                                                         \
                major = v;                                                                                   \
            } else {                                                                                         \
                long long shown = (attribute) == 76 ? (major < 0 ? -1 : major * 10 + v) : v;                 \
                printf("%s\"%s\": %lld", first ? "" : ", ", #key, shown);                                    \
                first = 0;                                                                                   \
                n++;                                                                                         \
            }                                                                                                \
        }                                                                                                    \
    }
    CAPSHIM_CUDA_FIELDS(ATTR)
#undef ATTR
    return n;
}

static void print_driver(void *drv, int device) {
    printf("\"driver\": {");
    const char *sep = attrs_body((attr_fn)(uintptr_t)sym(drv, "cuDeviceGetAttribute"), device) ? ", " : "";
    cc_fn cc = (cc_fn)(uintptr_t)sym(drv, "cuDeviceComputeCapability");
    name_fn nm = (name_fn)(uintptr_t)sym(drv, "cuDeviceGetName");
    props_fn dp = (props_fn)(uintptr_t)sym(drv, "cuDeviceGetProperties");
    int major = -1, minor = -1;
    if (cc != NULL && cc(&major, &minor, device) == 0) {
        printf("%s\"cuDeviceComputeCapability\": %d", sep, major * 10 + minor);
        sep = ", ";
    }
    char name[CAPSHIM_CUDA_NAME_SIZE] = "", esc[2 * CAPSHIM_CUDA_NAME_SIZE];
    if (nm != NULL && nm(name, (int)sizeof name, device) == 0) {
        name[sizeof name - 1] = '\0';
        capshim_status_escape(esc, sizeof esc, name);
        printf("%s\"cuDeviceGetName\": \"%s\"", sep, esc);
        sep = ", ";
    }
    unsigned char devprop[CAPSHIM_CUDA_DEVPROP_SIZE];
    if (dp != NULL && dp(devprop, device) == 0) {
        int first = 1;
        printf("%s\"cuDeviceGetProperties\": {", sep);
#define DEVPROP(key, off)                                                                                   \
    printf("%s\"%s\": %llu", first ? "" : ", ", #key, member(devprop + (off), CAPSHIM_CUDA_INT));           \
    first = 0;
        CAPSHIM_CUDA_DEVPROP(DEVPROP)
#undef DEVPROP
        printf("}");
    }
    printf("}");
}

/* nvmlDeviceAttributes_t (nvml.h; nvidia-ml-py's c_nvmlDeviceAttributes): 8 unsigned ints, then MiB. */
struct nvml_attributes {
    unsigned int multiprocessorCount, other[7];
    unsigned long long memorySizeMB;
};

typedef int (*nvml_init_fn)(void);
typedef int (*nvml_index_fn)(unsigned int, void **);
typedef int (*nvml_pci_fn)(const char *, void **);
typedef int (*nvml_cc_fn)(void *, int *, int *);
typedef int (*nvml_name_fn)(void *, char *, unsigned int);
typedef int (*nvml_attrs_fn)(void *, struct nvml_attributes *);
typedef int (*nvml_arch_fn)(void *, unsigned int *);
typedef int (*pci_fn)(char *, int, int);

/* Appends "query": rc to the JSON members in buf (n: its length so far; cut short, never overrun). */
static void refused_add(char *buf, size_t size, size_t *n, const char *query, int rc) {
    if (*n + 1 >= size) return;
    int w = snprintf(buf + *n, size - *n, "%s\"%s\": %d", *n ? ", " : "", query, rc);
    *n = w < 0 ? *n : *n + (size_t)w >= size ? size - 1 : *n + (size_t)w;
}

/* What NVML answers for the CUDA device (an NVML without a device or the library: "error"). */
static void print_nvml(void *rt, int device) {
    printf("\"nvml\": {");
    void *h = dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL);
    nvml_init_fn init = (nvml_init_fn)(uintptr_t)sym(h, "nvmlInit_v2");
    if (h == NULL || init == NULL || init() != 0) {
        printf("\"error\": \"%s\"}", h == NULL ? "no libnvidia-ml.so.1" : "nvmlInit_v2 failed");
        return;
    }
    void *dev = NULL;
    const char *match = "pci";
    char bus[64] = "";
    pci_fn busid = (pci_fn)(uintptr_t)sym(rt, "cudaDeviceGetPCIBusId");
    nvml_pci_fn by_pci = (nvml_pci_fn)(uintptr_t)sym(h, "nvmlDeviceGetHandleByPciBusId_v2");
    if (busid == NULL || by_pci == NULL || busid(bus, (int)sizeof bus, device) != 0 || by_pci(bus, &dev) != 0) {
        nvml_index_fn by_index = (nvml_index_fn)(uintptr_t)sym(h, "nvmlDeviceGetHandleByIndex_v2");
        match = "index";
        if (by_index == NULL || by_index((unsigned int)device, &dev) != 0) {
            printf("\"error\": \"no NVML device for CUDA device %d\"}", device);
            return;
        }
    }
    printf("\"library\": \"libnvidia-ml.so.1\", \"match\": \"%s\", \"answers\": {", match);
    char refused[512] = "";
    size_t nref = 0;
    const char *sep = "";
    nvml_cc_fn cc = (nvml_cc_fn)(uintptr_t)sym(h, "nvmlDeviceGetCudaComputeCapability");
    int major = -1, minor = -1, rc = cc != NULL ? cc(dev, &major, &minor) : -1;
    if (rc == 0) {
        printf("\"computeCapability\": %d", major * 10 + minor);
        sep = ", ";
    } else {
        refused_add(refused, sizeof refused, &nref, "nvmlDeviceGetCudaComputeCapability", rc);
    }
    nvml_name_fn nm = (nvml_name_fn)(uintptr_t)sym(h, "nvmlDeviceGetName");
    char name[96] = "", esc[2 * sizeof name];
    rc = nm != NULL ? nm(dev, name, (unsigned int)sizeof name) : -1;
    if (rc == 0) {
        name[sizeof name - 1] = '\0';
        capshim_status_escape(esc, sizeof esc, name);
        printf("%s\"deviceName\": \"%s\"", sep, esc);
        sep = ", ";
    } else {
        refused_add(refused, sizeof refused, &nref, "nvmlDeviceGetName", rc);
    }
    nvml_attrs_fn at = (nvml_attrs_fn)(uintptr_t)sym(h, "nvmlDeviceGetAttributes_v2");
    struct nvml_attributes a;
    memset(&a, 0, sizeof a);
    rc = at != NULL ? at(dev, &a) : -1;
    if (rc == 0) {
        printf("%s\"multiProcessorCount\": %u, \"memorySizeMB\": %llu", sep, a.multiprocessorCount, a.memorySizeMB);
        sep = ", ";
    } else {
        refused_add(refused, sizeof refused, &nref, "nvmlDeviceGetAttributes_v2", rc);
    }
    nvml_arch_fn ar = (nvml_arch_fn)(uintptr_t)sym(h, "nvmlDeviceGetArchitecture");
    unsigned int arch = 0;
    rc = ar != NULL ? ar(dev, &arch) : -1;
    if (rc == 0) {
        printf("%s\"architecture\": %u", sep, arch);
    } else {
        refused_add(refused, sizeof refused, &nref, "nvmlDeviceGetArchitecture", rc);
    }
    printf("}, \"refused\": {%s}}", refused);
}

/* "GPU-xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx" (quoted) of device, or null, into out. */
static void uuid_json(void *drv, int device, char *out, size_t outlen) {
    typedef int (*uuid_fn)(unsigned char *, int);
    uuid_fn fn = (uuid_fn)(uintptr_t)sym(drv, "cuDeviceGetUuid_v2");
    if (fn == NULL) fn = (uuid_fn)(uintptr_t)sym(drv, "cuDeviceGetUuid");
    unsigned char u[16];
    if (fn == NULL || fn(u, device) != 0 || outlen < 48) {
        snprintf(out, outlen, "null");
        return;
    }
    int k = snprintf(out, outlen, "\"GPU-");
    for (int i = 0; i < 16; i++) {
        if (i == 4 || i == 6 || i == 8 || i == 10) out[k++] = '-';
        k += snprintf(out + k, outlen - (size_t)k, "%02x", u[i]);
    }
    snprintf(out + k, outlen - (size_t)k, "\"");
}

static int list_devices(void *drv, int count, const char *rt_esc) {
    typedef int (*init_fn)(unsigned int);
    init_fn init = (init_fn)(uintptr_t)sym(drv, "cuInit");
    if (init != NULL) (void)init(0);
    name_fn nm = (name_fn)(uintptr_t)sym(drv, "cuDeviceGetName");
    printf("{\"devices\": [");
    for (int i = 0; i < count; i++) {
        char name[CAPSHIM_CUDA_NAME_SIZE] = "", esc[2 * CAPSHIM_CUDA_NAME_SIZE], uuid[64];
        if (nm == NULL || nm(name, (int)sizeof name, i) != 0) name[0] = '\0';
        name[sizeof name - 1] = '\0';
        capshim_status_escape(esc, sizeof esc, name);
        uuid_json(drv, i, uuid, sizeof uuid);
        printf("%s{\"index\": %d, \"name\": \"%s\", \"uuid\": %s}", i ? ", " : "", i, esc, uuid);
    }
    printf("], \"runtime\": \"%s\"}\n", rt_esc);
    return 0;
}

int main(int argc, char **argv) {
    int device = 0, list = 0;
    if (argc == 3 && strcmp(argv[1], "--device") == 0) {
        device = atoi(argv[2]);
    } else if (argc == 2 && strcmp(argv[1], "--list") == 0) {
        list = 1;
    } else if (argc != 1) {
        fprintf(stderr, "usage: capshim-cuda-probe [--device N | --list]\n");
        return 2;
    }
    const char *wanted = getenv("CAPSHIM_CUDA_RUNTIME");
    const char *names[] = {wanted, "libcudart.so.13", "libcudart.so.12"};
    void *rt = NULL;
    const char *rt_name = NULL;
    for (size_t i = 0; i < 3 && rt == NULL; i++) {
        if (names[i] == NULL || (i > 0 && wanted != NULL)) continue;
        rt = dlopen(names[i], RTLD_NOW | RTLD_LOCAL);
        rt_name = names[i];
    }
    if (rt == NULL) return fail("no CUDA runtime (libcudart.so.13 or .12; CAPSHIM_CUDA_RUNTIME names another)", dlerror());
    void *drv = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    if (drv == NULL) return fail("no CUDA driver (libcuda.so.1)", dlerror());
    int rt_version = -1, drv_version = -1, count = 0;
    int_fn rv = (int_fn)(uintptr_t)sym(rt, "cudaRuntimeGetVersion");
    int_fn dv = (int_fn)(uintptr_t)sym(rt, "cudaDriverGetVersion");
    int_fn dc = (int_fn)(uintptr_t)sym(rt, "cudaGetDeviceCount");
    if (rv == NULL) return fail("not a CUDA runtime (no cudaRuntimeGetVersion)", rt_name);
    if (rv(&rt_version) != 0) return fail("cudaRuntimeGetVersion failed", rt_name);
    if (dv != NULL && dv(&drv_version) != 0) drv_version = -1;
    if (dc == NULL || dc(&count) != 0 || count < 1) return fail("no CUDA device", NULL);
    char rt_esc[512];
    capshim_status_escape(rt_esc, sizeof rt_esc, rt_name);
    if (list) return list_devices(drv, count, rt_esc);
    if (device < 0 || device >= count) return fail("no CUDA device with that index", NULL);
    int layout = rt_version >= 13000 ? 13 : rt_version >= 12000 ? 12 : rt_version >= 11000 ? 11 : 0;
    if (layout == 0) return fail("runtime older than CUDA 11.0: its cudaDeviceProp layout is not in the table", NULL);
    props_fn gp = (props_fn)(uintptr_t)sym(rt, layout == 12 ? "cudaGetDeviceProperties_v2" : "cudaGetDeviceProperties");
    static unsigned char prop[4096];
    int rc = gp != NULL ? gp(prop, device) : -1;
    if (rc != 0) {
        char why[64];
        snprintf(why, sizeof why, "error %d", rc);
        return fail("cudaGetDeviceProperties failed", why);
    }
    char name[2 * CAPSHIM_CUDA_NAME_SIZE];
    prop[CAPSHIM_CUDA_NAME_OFFSET + CAPSHIM_CUDA_NAME_SIZE - 1] = '\0';
    capshim_status_escape(name, sizeof name, (const char *)prop + CAPSHIM_CUDA_NAME_OFFSET);
    char uuid[64];
    uuid_json(drv, device, uuid, sizeof uuid);
    printf("{\"device\": {\"index\": %d, \"name\": \"%s\", \"uuid\": %s}, \"runtime\": \"%s\", "
           "\"runtime_version\": %d, \"driver_version\": %d, \"layout\": %d, ",
           device, name, uuid, rt_esc, rt_version, drv_version, layout);
    print_props(prop, layout);
    printf(", ");
    printf("\"attributes\": {");
    (void)attrs_body((attr_fn)(uintptr_t)sym(rt, "cudaDeviceGetAttribute"), device);
    printf("}, ");
    print_driver(drv, device);
    printf(", ");
    print_nvml(rt, device);
    printf("}\n");
    return 0;
}

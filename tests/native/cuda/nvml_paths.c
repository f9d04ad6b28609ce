/* Asks NVML what the CUDA shim lowers, through one door, and prints one JSON line.
 *
 * Built twice by tests/native/test_nvml_shim.py: with -DNVML_LINKED it links libnvidia-ml.so.1
 * (the program's own references: the "linked" door); without, it dlopens libnvidia-ml.so.1 with
 * RTLD_LOCAL and dlsyms every function on that handle (the "dlopen" door, as nvidia-smi and
 * ctypes do). Types: nvml.h (CUDA 13.0) / nvidia-ml-py's pynvml.py.
 *
 * Line: {"door", "init": rc, "cc": [rc, major, minor], "name": [rc, name], "attrs": [rc, SMs, MiB,
 * copy engines], "attrs_v2": [...], "arch": [rc, arch], "unknown_handle": [rc, major, minor],
 * "small_name": rc, "fit_name": [rc, untouched 0|1, name]}. An unknown handle and a 4-byte name
 * buffer must pass through unchanged; fit_name asks with a buffer the stock name just fits.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

typedef int nvmlReturn_t;
typedef void *nvmlDevice_t;
typedef struct {
    unsigned int multiprocessorCount;
    unsigned int sharedCopyEngineCount, sharedDecoderCount, sharedEncoderCount, sharedJpegCount, sharedOfaCount;
    unsigned int gpuInstanceSliceCount, computeInstanceSliceCount;
    unsigned long long memorySizeMB;
} nvmlDeviceAttributes_t;

typedef nvmlReturn_t (*init_fn)(void);
typedef nvmlReturn_t (*handle_fn)(unsigned int, nvmlDevice_t *);
typedef nvmlReturn_t (*cc_fn)(nvmlDevice_t, int *, int *);
typedef nvmlReturn_t (*name_fn)(nvmlDevice_t, char *, unsigned int);
typedef nvmlReturn_t (*attrs_fn)(nvmlDevice_t, nvmlDeviceAttributes_t *);
typedef nvmlReturn_t (*arch_fn)(nvmlDevice_t, unsigned int *);

static struct {
    init_fn init;
    handle_fn handle;
    cc_fn cc;
    name_fn name;
    attrs_fn attrs, attrs_v2;
    arch_fn arch;
} f;

#ifdef NVML_LINKED
nvmlReturn_t nvmlInit_v2(void);
nvmlReturn_t nvmlDeviceGetHandleByIndex_v2(unsigned int, nvmlDevice_t *);
nvmlReturn_t nvmlDeviceGetCudaComputeCapability(nvmlDevice_t, int *, int *);
nvmlReturn_t nvmlDeviceGetName(nvmlDevice_t, char *, unsigned int);
nvmlReturn_t nvmlDeviceGetAttributes(nvmlDevice_t, nvmlDeviceAttributes_t *);
nvmlReturn_t nvmlDeviceGetAttributes_v2(nvmlDevice_t, nvmlDeviceAttributes_t *);
nvmlReturn_t nvmlDeviceGetArchitecture(nvmlDevice_t, unsigned int *);
#define DOOR "linked"
static int load(void) {
    f.init = nvmlInit_v2;
    f.handle = nvmlDeviceGetHandleByIndex_v2;
    f.cc = nvmlDeviceGetCudaComputeCapability;
    f.name = nvmlDeviceGetName;
    f.attrs = nvmlDeviceGetAttributes;
    f.attrs_v2 = nvmlDeviceGetAttributes_v2;
    f.arch = nvmlDeviceGetArchitecture;
    return 0;
}
#else
#define DOOR "dlopen"
static int load(void) {
    void *h = dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL);
    if (h == NULL) return -1;
    f.init = (init_fn)(uintptr_t)dlsym(h, "nvmlInit_v2");
    f.handle = (handle_fn)(uintptr_t)dlsym(h, "nvmlDeviceGetHandleByIndex_v2");
    f.cc = (cc_fn)(uintptr_t)dlsym(h, "nvmlDeviceGetCudaComputeCapability");
    f.name = (name_fn)(uintptr_t)dlsym(h, "nvmlDeviceGetName");
    f.attrs = (attrs_fn)(uintptr_t)dlsym(h, "nvmlDeviceGetAttributes");
    f.attrs_v2 = (attrs_fn)(uintptr_t)dlsym(h, "nvmlDeviceGetAttributes_v2");
    f.arch = (arch_fn)(uintptr_t)dlsym(h, "nvmlDeviceGetArchitecture");
    return f.init && f.handle && f.cc && f.name && f.attrs && f.attrs_v2 && f.arch ? 0 : -1;
}
#endif

static void attrs_json(const char *key, attrs_fn fn, nvmlDevice_t d) {
    nvmlDeviceAttributes_t a;
    memset(&a, 0, sizeof a);
    nvmlReturn_t rc = fn(d, &a);
    printf(", \"%s\": [%d, %u, %llu, %u]", key, rc, a.multiprocessorCount, a.memorySizeMB, a.sharedCopyEngineCount);
}

int main(void) {
    if (load() != 0) {
        printf("{\"door\": \"" DOOR "\", \"error\": \"cannot load libnvidia-ml.so.1\"}\n");
        return 1;
    }
    nvmlDevice_t d = NULL;
    nvmlReturn_t init = f.init();
    nvmlReturn_t hrc = f.handle(0, &d);
    printf("{\"door\": \"" DOOR "\", \"init\": %d, \"handle\": %d", init, hrc);
    int major = -1, minor = -1;
    nvmlReturn_t rc = f.cc(d, &major, &minor);
    printf(", \"cc\": [%d, %d, %d]", rc, major, minor);
    char name[96] = "";
    rc = f.name(d, name, sizeof name);
    printf(", \"name\": [%d, \"%s\"]", rc, name);
    attrs_json("attrs", f.attrs, d);
    attrs_json("attrs_v2", f.attrs_v2, d);
    unsigned int arch = 0;
    rc = f.arch(d, &arch);
    printf(", \"arch\": [%d, %u]", rc, arch);
    int unknown = 0; /* not a handle NVML gave out */
    major = minor = -1;
    rc = f.cc((nvmlDevice_t)&unknown, &major, &minor);
    printf(", \"unknown_handle\": [%d, %d, %d]", rc, major, minor);
    char small[4] = "";
    printf(", \"small_name\": %d", f.name(d, small, sizeof small));
    char fit[sizeof "NVIDIA H200"]; /* the stock name fits exactly; a longer profile name does not */
    memset(fit, 'Z', sizeof fit);
    rc = f.name(d, fit, sizeof fit);
    int untouched = 1;
    for (size_t i = 0; i < sizeof fit; i++) untouched &= fit[i] == 'Z';
    printf(", \"fit_name\": [%d, %d, \"%.*s\"]}\n", rc, untouched, untouched ? 0 : (int)strnlen(fit, sizeof fit),
           untouched ? "" : fit);
    return 0;
}

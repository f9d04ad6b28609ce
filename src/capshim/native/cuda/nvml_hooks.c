/* capshim CUDA shim: the NVML door (issue 27, item 2).
 *
 * NVML (libnvidia-ml.so.1) answers some of the facts the runtime answers: the compute
 * capability (nvmlDeviceGetCudaComputeCapability), the name (nvmlDeviceGetName), the
 * multiprocessor count and memory size (nvmlDeviceGetAttributes and _v2) and the
 * architecture (nvmlDeviceGetArchitecture, which follows from the capability). The shim
 * lowers them with the same configuration and the same rule as the runtime:
 * min(device, profile), after the real call succeeded; anything else passes through.
 *
 * Three doors, one wrapper each:
 *   linked     the program's own references bind to these exports (LD_PRELOAD comes first);
 *   dlopen     dlsym(handle, "nvml...") goes through the shim's dlsym (cuda_hooks.c), which
 *              hands out the wrapper in place of the real function (capshim_nvml_substitute);
 *   ctypes     pynvml's CDLL("libnvidia-ml.so.1") + getattr is the dlopen door (ctypes calls
 *              dlsym on the library's handle).
 * A wrapper finds its real function in the NVML library the process loaded, in whatever scope
 * (RTLD_LOCAL included): the library whose function dlsym found first (its path, re-opened with
 * RTLD_NOLOAD on every call, so an unloaded library is never called), else the loaded
 * libnvidia-ml.so.1 (RTLD_NOLOAD), else the global scope after the shim (RTLD_NEXT). When none
 * answers, the call returns NVML_ERROR_FUNCTION_NOT_FOUND (what pynvml says for a missing
 * function) and an nvml_lookup_failed event names the entry point. A second, different NVML
 * library in the same process is not substituted (its functions are handed out as they are,
 * answers stock) and an nvml_second_library event says so.
 *
 * Types, from nvml.h (CUDA 13.0 toolkit) and nvidia-ml-py 13.615's ctypes definitions
 * (pynvml.py: c_nvmlDeviceAttributes, NVML_DEVICE_ARCH_*): nvmlReturn_t is an int enum
 * (NVML_SUCCESS 0, NVML_ERROR_FUNCTION_NOT_FOUND 13); nvmlDevice_t an opaque pointer;
 * nvmlDeviceAttributes_t is eight unsigned ints then unsigned long long memorySizeMB
 * (40 bytes; _v2 fills the same struct); nvmlDeviceArchitecture_t an unsigned int.
 *
 * On stderr (unless CAPSHIM_QUIET=1), once: "capshim-cuda: active in NAME[PID] through NVML".
 * Status events (shim "cuda"): "hooks" {installed: the NVML names, first, door: "nvml"} at the
 * first NVML wrapper reached, "changed" per query as the runtime's, "called" {entry_points,
 * substituted} at exit, nvml_lookup_failed {query, reason}, nvml_second_library {library, first}.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <limits.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "config.h"
#include "cuda_shim.h"
#include "status.h"

#define EXPORT __attribute__((visibility("default")))

typedef int nvml_return;
typedef void *nvml_device;
#define NVML_SUCCESS 0
#define NVML_ERROR_FUNCTION_NOT_FOUND 13
/* nvml.h (CUDA 13.0), nvmlDeviceGetName: "NVML_ERROR_INSUFFICIENT_SIZE if length is too small";
 * NVML_DEVICE_NAME_V2_BUFFER_SIZE 96 (the buffer nvml.h says any name fits in). */
#define NVML_ERROR_INSUFFICIENT_SIZE 7
#define NVML_DEVICE_NAME_V2_BUFFER_SIZE 96
#define NVML_SONAME "libnvidia-ml.so.1"

struct nvml_attributes { /* nvmlDeviceAttributes_t */
    unsigned int multiprocessorCount;
    unsigned int sharedCopyEngineCount, sharedDecoderCount, sharedEncoderCount, sharedJpegCount, sharedOfaCount;
    unsigned int gpuInstanceSliceCount, computeInstanceSliceCount;
    unsigned long long memorySizeMB;
};
_Static_assert(sizeof(struct nvml_attributes) == 40 && offsetof(struct nvml_attributes, memorySizeMB) == 32,
               "nvmlDeviceAttributes_t: 8 unsigned ints, then memorySizeMB at byte 32");

/* nvmlDeviceArchitecture_t (nvml.h NVML_DEVICE_ARCH_*) of a compute capability major.minor. */
#define ARCH_KEPLER 2u
#define ARCH_MAXWELL 3u
#define ARCH_PASCAL 4u
#define ARCH_VOLTA 5u
#define ARCH_TURING 6u
#define ARCH_AMPERE 7u
#define ARCH_ADA 8u
#define ARCH_HOPPER 9u
#define ARCH_BLACKWELL 10u

const char *const capshim_nvml_entry_names[N_COUNT] = {
    "nvmlDeviceGetCudaComputeCapability", "nvmlDeviceGetName", "nvmlDeviceGetAttributes",
    "nvmlDeviceGetAttributes_v2", "nvmlDeviceGetArchitecture",
};

static pthread_mutex_t g_lock = PTHREAD_MUTEX_INITIALIZER;
static char g_library[PATH_MAX]; /* the NVML library substituted from; "" until the first */
static atomic_uint g_reached, g_substituted, g_failed;
static atomic_int g_hooks_done, g_second_seen;
static __thread int t_depth;

static void event_begin(struct capshim_json *j, const char *event) { capshim_json_begin(j, event, "cuda", NULL); }

/* On dlsym's path (a sanitizer runtime looks up its functions before it has started): no libc. */
CAPSHIM_NO_SANITIZE static int same_name(const char *a, const char *b) {
    while (*a != '\0' && *a == *b) {
        a++;
        b++;
    }
    return *a == *b;
}

CAPSHIM_NO_SANITIZE int capshim_nvml_entry_index(const char *name) {
    if (name == NULL || name[0] != 'n' || name[1] != 'v' || name[2] != 'm' || name[3] != 'l') return -1;
    for (int e = 0; e < N_COUNT; e++)
        if (same_name(name, capshim_nvml_entry_names[e])) return e;
    return -1;
}

static int is_wrapper(const void *fn) {
    for (int e = 0; e < N_COUNT; e++)
        if (fn != NULL && fn == capshim_nvml_wrapper(e)) return 1;
    return 0;
}

/* name in the library opened as path (RTLD_NOLOAD: only one already loaded), or NULL. */
static void *lookup_in(const char *path, const char *name) {
    void *h = dlopen(path, RTLD_LAZY | RTLD_NOLOAD);
    if (h == NULL) return NULL;
    void *fn = capshim_cuda_real_dlsym(h, name);
    dlclose(h);
    return is_wrapper(fn) ? NULL : fn;
}

/* The real function of entry e (see the top of this file), or NULL. */
static void *real_fn(int e) {
    const char *name = capshim_nvml_entry_names[e];
    char lib[PATH_MAX];
    pthread_mutex_lock(&g_lock);
    memcpy(lib, g_library, sizeof lib);
    pthread_mutex_unlock(&g_lock);
    void *fn = lib[0] != '\0' ? lookup_in(lib, name) : NULL;
    if (fn == NULL) fn = lookup_in(NVML_SONAME, name);
    if (fn == NULL) {
        fn = capshim_cuda_real_dlsym(RTLD_NEXT, name);
        if (is_wrapper(fn)) fn = NULL;
    }
    return fn;
}

static void lookup_failed(int e) {
    unsigned bit = 1u << e;
    if (atomic_fetch_or(&g_failed, bit) & bit) return;
    struct capshim_json j;
    event_begin(&j, "nvml_lookup_failed");
    capshim_json_str(&j, "query", capshim_nvml_entry_names[e]);
    capshim_json_str(&j, "reason", "no loaded NVML library defines it (neither the one dlsym found, nor "
                                   NVML_SONAME ", nor the global scope); answered NVML_ERROR_FUNCTION_NOT_FOUND");
    capshim_json_end_and_write(&j);
}

static int same_library(const char *a, const char *b) {
    if (strcmp(a, b) == 0) return 1;
    struct stat sa, sb;
    return stat(a, &sa) == 0 && stat(b, &sb) == 0 && sa.st_dev == sb.st_dev && sa.st_ino == sb.st_ino;
}

void *capshim_nvml_substitute(const char *name, void *fn) {
    int e = capshim_nvml_entry_index(name);
    if (e < 0 || fn == NULL) return fn;
    if (is_wrapper(fn)) {
        /* dlsym(RTLD_DEFAULT, ...) found the shim's own export: the wrapper when a real NVML is
         * loaded, else what the process would get without the shim (NULL, dlerror set). */
        return real_fn(e) != NULL ? fn : capshim_cuda_real_dlsym(RTLD_NEXT, name);
    }
    const char *off = getenv("CAPSHIM_CUDA_SUBSTITUTE");
    if (!capshim_cuda_active() || (off != NULL && strcmp(off, "0") == 0)) return fn;
    Dl_info info;
    if (dladdr(fn, &info) == 0 || info.dli_fname == NULL || info.dli_fname[0] == '\0' ||
        strlen(info.dli_fname) >= sizeof g_library)
        return fn; /* no path to find it again by: handed out as it is */
    pthread_mutex_lock(&g_lock);
    if (g_library[0] == '\0') snprintf(g_library, sizeof g_library, "%s", info.dli_fname);
    int same = same_library(g_library, info.dli_fname);
    char first[PATH_MAX];
    memcpy(first, g_library, sizeof first);
    pthread_mutex_unlock(&g_lock);
    if (!same) {
        if (atomic_exchange(&g_second_seen, 1) == 0) {
            struct capshim_json j;
            event_begin(&j, "nvml_second_library");
            capshim_json_str(&j, "library", info.dli_fname);
            capshim_json_str(&j, "first", first);
            capshim_json_str(&j, "reason", "a second NVML library in one process: its functions are handed out "
                                           "unwrapped (answers stock)");
            capshim_json_end_and_write(&j);
        }
        return fn;
    }
    atomic_fetch_or(&g_substituted, 1u << e);
    return capshim_nvml_wrapper(e);
}

static void hooks_event(int first) {
    if (atomic_exchange(&g_hooks_done, 1) != 0) return;
    struct capshim_json j;
    event_begin(&j, "hooks");
    capshim_json_str_array(&j, "installed", capshim_nvml_entry_names, N_COUNT);
    capshim_json_str(&j, "first", capshim_nvml_entry_names[first]);
    capshim_json_str(&j, "door", "nvml");
    capshim_json_end_and_write(&j);
    const char *quiet = getenv("CAPSHIM_QUIET");
    if (quiet != NULL && strcmp(quiet, "1") == 0) return;
    char line[256];
    int n = snprintf(line, sizeof line, "capshim-cuda: active in %s[%ld] through NVML (first: %s)\n",
                     capshim_process_name(), (long)getpid(), capshim_nvml_entry_names[first]);
    if (n > 0) {
        ssize_t w = write(STDERR_FILENO, line, (size_t)n < sizeof line ? (size_t)n : sizeof line - 1);
        (void)w;
    }
}

/* Chooses the configuration for device (capshim_cuda_select_uuid): when the configurations name
 * their devices, by the UUID the real nvmlDeviceGetUUID gives ("GPU-" then 32 hex digits and
 * dashes, nvml.h; the same bytes as cuDeviceGetUuid), NVML's own index not being the CUDA ordinal
 * (CUDA_VISIBLE_DEVICES); a device whose UUID is unknown answers stock. 1 when one answers. */
static int select_device(nvml_device device) {
    if (!capshim_cuda_targeted()) return capshim_cuda_select_uuid(NULL);
    typedef nvml_return (*uuid_fn)(nvml_device, char *, unsigned int);
    char lib[PATH_MAX];
    pthread_mutex_lock(&g_lock);
    memcpy(lib, g_library, sizeof lib);
    pthread_mutex_unlock(&g_lock);
    uuid_fn fn = (uuid_fn)(uintptr_t)(lib[0] != '\0' ? lookup_in(lib, "nvmlDeviceGetUUID") : NULL);
    if (fn == NULL) fn = (uuid_fn)(uintptr_t)lookup_in(NVML_SONAME, "nvmlDeviceGetUUID");
    char text[96];
    unsigned char uuid[CAPSHIM_UUID_BYTES];
    size_t got = 0;
    if (fn != NULL && fn(device, text, (unsigned int)sizeof text) == NVML_SUCCESS) {
        text[sizeof text - 1] = '\0';
        const char *p = strncmp(text, "GPU-", 4) == 0 ? text + 4 : text;
        for (; *p != '\0' && got < 2 * CAPSHIM_UUID_BYTES; p++) {
            int v = (*p >= '0' && *p <= '9') ? *p - '0' : (*p >= 'a' && *p <= 'f') ? *p - 'a' + 10
                  : (*p >= 'A' && *p <= 'F') ? *p - 'A' + 10 : (*p == '-' ? -2 : -1);
            if (v == -2) continue;
            if (v < 0) break;
            uuid[got / 2] = (unsigned char)(got % 2 ? (uuid[got / 2] | v) : v << 4);
            got++;
        }
    }
    return capshim_cuda_select_uuid(got == 2 * CAPSHIM_UUID_BYTES ? uuid : NULL) && got == 2 * CAPSHIM_UUID_BYTES;
}

/* Marks entry e reached; 1 when this call may lower (active, outermost NVML wrapper on this thread,
 * a configuration for device). */
static int enter(int e, nvml_device device) {
    int outer = t_depth == 0;
    t_depth++;
    if (!capshim_cuda_active()) return 0;
    if (outer) {
        atomic_fetch_or(&g_reached, 1u << e);
        hooks_event(e);
    }
    return outer && select_device(device);
}

static void leave(void) {
    if (t_depth > 0) t_depth--;
}

static void names_of(unsigned bits, const char **out, size_t *n) {
    *n = 0;
    for (int e = 0; e < N_COUNT; e++)
        if (bits & (1u << e)) out[(*n)++] = capshim_nvml_entry_names[e];
}

__attribute__((destructor)) static void nvml_unload(void) {
    unsigned reached = atomic_load(&g_reached), handed = atomic_load(&g_substituted);
    if ((reached == 0 && handed == 0) || !capshim_cuda_active()) return;
    const char *r[N_COUNT], *s[N_COUNT];
    size_t nr = 0, ns = 0;
    names_of(reached, r, &nr);
    names_of(handed, s, &ns);
    struct capshim_json j;
    event_begin(&j, "called");
    capshim_json_str_array(&j, "entry_points", r, nr);
    capshim_json_str_array(&j, "substituted", s, ns);
    capshim_json_end_and_write(&j);
}

/* ---- the wrappers -------------------------------------------------------------- */

typedef nvml_return (*cc_fn)(nvml_device, int *, int *);
typedef nvml_return (*name_fn)(nvml_device, char *, unsigned int);
typedef nvml_return (*attrs_fn)(nvml_device, struct nvml_attributes *);
typedef nvml_return (*arch_fn)(nvml_device, unsigned int *);

#define REAL(type, e) ((type)(uintptr_t)real_fn(e))

EXPORT nvml_return nvmlDeviceGetCudaComputeCapability(nvml_device device, int *major, int *minor);
nvml_return nvmlDeviceGetCudaComputeCapability(nvml_device device, int *major, int *minor) {
    cc_fn real = REAL(cc_fn, N_GetCudaComputeCapability);
    if (real == NULL) {
        lookup_failed(N_GetCudaComputeCapability);
        return NVML_ERROR_FUNCTION_NOT_FOUND;
    }
    int lower = enter(N_GetCudaComputeCapability, device);
    nvml_return rc = real(device, major, minor);
    if (rc == NVML_SUCCESS && lower)
        capshim_cuda_lower_pair(capshim_nvml_entry_names[N_GetCudaComputeCapability], major, minor);
    leave();
    return rc;
}

EXPORT nvml_return nvmlDeviceGetName(nvml_device device, char *name, unsigned int length);
nvml_return nvmlDeviceGetName(nvml_device device, char *name, unsigned int length) {
    name_fn real = REAL(name_fn, N_GetName);
    if (real == NULL) {
        lookup_failed(N_GetName);
        return NVML_ERROR_FUNCTION_NOT_FOUND;
    }
    int lower = enter(N_GetName, device);
    size_t want = lower ? capshim_cuda_device_name_size() : 0;
    if (want > length && name != NULL) {
        /* The profile's name does not fit where the stock one might: NVML's answer for a short
         * buffer, with nothing written; the real call (into a buffer of its own) still says
         * whether the library is initialised and the device valid. */
        char scratch[2 * NVML_DEVICE_NAME_V2_BUFFER_SIZE];
        nvml_return rc = real(device, scratch, (unsigned int)sizeof scratch);
        leave();
        return rc == NVML_SUCCESS ? NVML_ERROR_INSUFFICIENT_SIZE : rc;
    }
    nvml_return rc = real(device, name, length);
    if (rc == NVML_SUCCESS && lower && name != NULL && length > 0)
        capshim_cuda_lower_name(capshim_nvml_entry_names[N_GetName], name, length);
    leave();
    return rc;
}

static void lower_attributes(int e, struct nvml_attributes *a) {
    const char *query = capshim_nvml_entry_names[e];
    a->multiprocessorCount =
        (unsigned int)capshim_cuda_lower_value(query, "multiProcessorCount", a->multiprocessorCount);
    if (a->memorySizeMB <= UINT64_MAX >> 20) { /* MiB: the profile's bytes, rounded down */
        uint64_t bytes = (uint64_t)a->memorySizeMB << 20;
        uint64_t now = capshim_cuda_lower_value(query, "totalGlobalMem", bytes);
        if (now != bytes) a->memorySizeMB = now >> 20;
    }
}

static nvml_return attributes(int e, nvml_device device, struct nvml_attributes *a) {
    attrs_fn real = REAL(attrs_fn, e);
    if (real == NULL) {
        lookup_failed(e);
        return NVML_ERROR_FUNCTION_NOT_FOUND;
    }
    int lower = enter(e, device);
    nvml_return rc = real(device, a);
    if (rc == NVML_SUCCESS && lower && a != NULL) lower_attributes(e, a);
    leave();
    return rc;
}

EXPORT nvml_return nvmlDeviceGetAttributes(nvml_device device, struct nvml_attributes *attributes);
nvml_return nvmlDeviceGetAttributes(nvml_device device, struct nvml_attributes *a) {
    return attributes(N_GetAttributes, device, a);
}

EXPORT nvml_return nvmlDeviceGetAttributes_v2(nvml_device device, struct nvml_attributes *attributes);
nvml_return nvmlDeviceGetAttributes_v2(nvml_device device, struct nvml_attributes *a) {
    return attributes(N_GetAttributes_v2, device, a);
}

/* The architecture of compute capability major.minor (the CUDA C++ Programming Guide's table of
 * capabilities per architecture), 0 when capshim does not know it. */
static unsigned int arch_of(int major, int minor) {
    switch (major) {
    case 3: return ARCH_KEPLER;
    case 5: return ARCH_MAXWELL;
    case 6: return ARCH_PASCAL;
    case 7: return minor >= 5 ? ARCH_TURING : ARCH_VOLTA;
    case 8: return minor == 9 ? ARCH_ADA : ARCH_AMPERE;
    case 9: return ARCH_HOPPER;
    case 10:
    case 12: return ARCH_BLACKWELL;
    default: return 0;
    }
}

EXPORT nvml_return nvmlDeviceGetArchitecture(nvml_device device, unsigned int *arch);
nvml_return nvmlDeviceGetArchitecture(nvml_device device, unsigned int *arch) {
    arch_fn real = REAL(arch_fn, N_GetArchitecture);
    if (real == NULL) {
        lookup_failed(N_GetArchitecture);
        return NVML_ERROR_FUNCTION_NOT_FOUND;
    }
    int lower = enter(N_GetArchitecture, device);
    nvml_return rc = real(device, arch);
    cc_fn cc = lower && rc == NVML_SUCCESS && arch != NULL ? REAL(cc_fn, N_GetCudaComputeCapability) : NULL;
    int major = -1, minor = -1;
    if (cc != NULL && cc(device, &major, &minor) == NVML_SUCCESS && arch_of(major, minor) == *arch) {
        /* Only where the device's own capability maps to the architecture it names: then the
         * lowered capability's architecture is what a device of that capability would say. */
        capshim_cuda_lower_pair(capshim_nvml_entry_names[N_GetArchitecture], &major, &minor);
        unsigned int now = arch_of(major, minor);
        if (now != 0 && now < *arch) *arch = now;
    }
    leave();
    return rc;
}

void *capshim_nvml_wrapper(int e) {
    static void *const wrappers[N_COUNT] = {
        (void *)(uintptr_t)nvmlDeviceGetCudaComputeCapability, (void *)(uintptr_t)nvmlDeviceGetName,
        (void *)(uintptr_t)nvmlDeviceGetAttributes,            (void *)(uintptr_t)nvmlDeviceGetAttributes_v2,
        (void *)(uintptr_t)nvmlDeviceGetArchitecture,
    };
    return e >= 0 && e < N_COUNT ? wrappers[e] : NULL;
}

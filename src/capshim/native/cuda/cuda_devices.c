/* capshim CUDA shim: which configuration answers for the device a call is about (devices=,
 * config.h; docs/multi-gpu.md). cuda_shim.c holds the configurations; the hooks choose one per
 * call (capshim_cuda_select, by the ordinal the call names or the UUID the real driver gives it;
 * capshim_cuda_select_uuid for NVML), and the lowering of that call reads it
 * (capshim_cuda_current), its changed events naming the device (capshim_cuda_device_fields).
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "config.h"
#include "cuda_shim.h"
#include "status.h"

static pthread_mutex_t g_lock = PTHREAD_MUTEX_INITIALIZER;
/* The configuration of this thread's current call, the device's index (-1: known by UUID only)
 * and UUID text (8-4-4-4-12, "" unknown). */
static __thread const struct capshim_config *t_cfg;
static __thread int t_device = -1;
static __thread char t_uuid[40];

const struct capshim_config *capshim_cuda_current(void) { return t_cfg; }

static int needs_uuid(void) {
    size_t n = 0;
    const struct capshim_config *cfgs = capshim_cuda_configs(&n);
    for (size_t k = 0; k < n; k++)
        for (size_t d = 0; d < cfgs[k].ndevices; d++)
            if (cfgs[k].devices[d].is_uuid) return 1;
    return 0;
}

/* The UUID of CUDA device ordinal device from the real driver (cuDeviceGetUuid_v2, else
 * cuDeviceGetUuid, CUDA 13.0 cuda.h: CUresult (CUuuid *uuid, CUdevice dev), CUuuid 16 bytes; the
 * shim wraps neither). The CUdevice handle is taken to be the ordinal, as cuDeviceGet answers on
 * every driver capshim has run on. Cached per ordinal once known (a failure, before cuInit say, is
 * asked again next time); 0 when known. */
static int device_uuid(int device, unsigned char *out) {
    static unsigned char cache[CAPSHIM_DEVICE_INDEX_MAX + 1][CAPSHIM_UUID_BYTES];
    static signed char known[CAPSHIM_DEVICE_INDEX_MAX + 1]; /* 1 known */
    if (device < 0 || device > CAPSHIM_DEVICE_INDEX_MAX) return -1;
    pthread_mutex_lock(&g_lock);
    int k = known[device];
    if (k == 1) memcpy(out, cache[device], CAPSHIM_UUID_BYTES);
    pthread_mutex_unlock(&g_lock);
    if (k == 1) return 0;
    typedef capshim_cuerr (*uuid_fn)(unsigned char *, int);
    uuid_fn fn = NULL;
    void *h = dlopen("libcuda.so.1", RTLD_LAZY | RTLD_NOLOAD);
    if (h != NULL) {
        fn = (uuid_fn)(uintptr_t)capshim_cuda_real_dlsym(h, "cuDeviceGetUuid_v2");
        if (fn == NULL) fn = (uuid_fn)(uintptr_t)capshim_cuda_real_dlsym(h, "cuDeviceGetUuid");
    }
    unsigned char got[CAPSHIM_UUID_BYTES];
    int ok = fn != NULL && fn(got, device) == CAPSHIM_CU_SUCCESS;
    if (h != NULL) dlclose(h);
    pthread_mutex_lock(&g_lock);
    if (ok) {
        known[device] = 1;
        memcpy(cache[device], got, CAPSHIM_UUID_BYTES);
    }
    pthread_mutex_unlock(&g_lock);
    if (ok) memcpy(out, got, CAPSHIM_UUID_BYTES);
    return ok ? 0 : -1;
}

/* Whether configuration c names the device: by the ordinal or UUID given, or (a device known by
 * UUID only, NVML's) by an ordinal whose UUID the real driver says is that one. */
static int names(const struct capshim_config *c, int device, const unsigned char *uuid) {
    if (capshim_config_names_device(c, device < 0 ? UINT32_MAX : (uint32_t)device, uuid)) return 1;
    unsigned char got[CAPSHIM_UUID_BYTES];
    for (size_t d = 0; device < 0 && uuid != NULL && d < c->ndevices; d++)
        if (!c->devices[d].is_uuid && device_uuid((int)c->devices[d].index, got) == 0 &&
            memcmp(got, uuid, CAPSHIM_UUID_BYTES) == 0)
            return 1;
    return 0;
}

/* The one configuration naming the device; a device two configurations name (its index in one,
 * its UUID in another: the load-time check compares specs of one kind only) answers stock, and
 * the shim says so (capshim_cuda_clash): an invalid configuration for that device. */
static int select_cfg(int device, const unsigned char *uuid) {
    t_cfg = NULL;
    t_device = device;
    t_uuid[0] = '\0';
    if (uuid != NULL) capshim_uuid_dashed(uuid, t_uuid, sizeof t_uuid);
    size_t n = 0;
    const struct capshim_config *cfgs = capshim_cuda_configs(&n);
    size_t first = n;
    for (size_t k = 0; k < n; k++) {
        if (!names(&cfgs[k], device, uuid)) continue;
        if (first == n) {
            first = k;
            continue;
        }
        char text[64];
        if (device >= 0)
            snprintf(text, sizeof text, "%d%s%s%s", device, t_uuid[0] ? " (" : "", t_uuid, t_uuid[0] ? ")" : "");
        else
            snprintf(text, sizeof text, "%s", t_uuid);
        capshim_cuda_clash(first, k, text);
        return 0;
    }
    if (first == n) return 0;
    t_cfg = &cfgs[first];
    return 1;
}

int capshim_cuda_select(int device) {
    unsigned char uuid[CAPSHIM_UUID_BYTES];
    int known = needs_uuid() && device_uuid(device, uuid) == 0;
    return select_cfg(device, known ? uuid : NULL);
}

int capshim_cuda_select_uuid(const unsigned char *uuid) { return select_cfg(-1, uuid); }

int capshim_cuda_targeted(void) {
    size_t n = 0;
    const struct capshim_config *cfgs = capshim_cuda_configs(&n);
    return n > 0 && cfgs[0].ndevices > 0;
}

/* The device a changed event is about: "device" (the ordinal the application sees), "uuid"
 * (when the shim read it) and "profile" (the configuration's profile name). */
void capshim_cuda_device_fields(struct capshim_json *j) {
    if (t_cfg == NULL || t_cfg->ndevices == 0) return; /* every device: as before targets existed */
    if (t_device >= 0) capshim_json_u64(j, "device", (uint64_t)t_device);
    if (t_uuid[0] != '\0') capshim_json_str(j, "uuid", t_uuid);
    if (t_cfg != NULL && t_cfg->profile[0] != '\0') capshim_json_str(j, "profile", t_cfg->profile);
}

int capshim_cuda_targeted_device(void) { return t_cfg != NULL && t_cfg->ndevices > 0 ? t_device : -1; }

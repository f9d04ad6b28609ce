/* A stand-in libnvidia-ml.so.1 for the tests (no GPU here, none in CI).
 *
 * Answers like NVML on one H200: compute capability 9.0, "NVIDIA H200", 132 multiprocessors,
 * 143771 MiB, architecture Hopper. Just the entry points capshim's tests and pynvml's
 * initialisation use; each checks its arguments as NVML documents: an unknown device handle is
 * NVML_ERROR_INVALID_ARGUMENT, a call before nvmlInit NVML_ERROR_UNINITIALIZED, a name buffer
 * too small NVML_ERROR_INSUFFICIENT_SIZE. With CAPSHIM_STANDIN_NVML_MIG_ONLY=1 it refuses
 * nvmlDeviceGetAttributes(_v2) with NVML_ERROR_NOT_SUPPORTED, as NVML documents for a handle
 * that is not a MIG device (cuda-python's nvml.device_get_attributes_v2: "This API currently
 * only supports MIG device handles"). Types and numbers: nvml.h (CUDA 13.0 toolkit) and
 * nvidia-ml-py 13.615's pynvml.py (the same definitions in ctypes).
 */
#include <stdatomic.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#define EXPORT __attribute__((visibility("default")))

typedef int nvmlReturn_t;
#define NVML_SUCCESS 0
#define NVML_ERROR_UNINITIALIZED 1
#define NVML_ERROR_INVALID_ARGUMENT 2
#define NVML_ERROR_NOT_SUPPORTED 3
#define NVML_ERROR_INSUFFICIENT_SIZE 7
#define NVML_DEVICE_ARCH_HOPPER 9u

struct device {
    unsigned int magic;
};
typedef struct device *nvmlDevice_t;

typedef struct {
    unsigned int multiprocessorCount;
    unsigned int sharedCopyEngineCount, sharedDecoderCount, sharedEncoderCount, sharedJpegCount, sharedOfaCount;
    unsigned int gpuInstanceSliceCount, computeInstanceSliceCount;
    unsigned long long memorySizeMB;
} nvmlDeviceAttributes_t;

#define MAGIC 0x4e564d4cu /* "NVML" */
#define NAME "NVIDIA H200"
static struct device the_device = {MAGIC};
static atomic_int initialised;

static int bad(nvmlDevice_t d) { return d != &the_device || d->magic != MAGIC; }

EXPORT nvmlReturn_t nvmlInitWithFlags(unsigned int flags);
nvmlReturn_t nvmlInitWithFlags(unsigned int flags) {
    (void)flags;
    atomic_fetch_add(&initialised, 1);
    return NVML_SUCCESS;
}

EXPORT nvmlReturn_t nvmlInit_v2(void);
nvmlReturn_t nvmlInit_v2(void) { return nvmlInitWithFlags(0); }

EXPORT nvmlReturn_t nvmlInit(void);
nvmlReturn_t nvmlInit(void) { return nvmlInitWithFlags(0); }

EXPORT nvmlReturn_t nvmlShutdown(void);
nvmlReturn_t nvmlShutdown(void) {
    return atomic_fetch_sub(&initialised, 1) > 0 ? NVML_SUCCESS : NVML_ERROR_UNINITIALIZED;
}

EXPORT const char *nvmlErrorString(nvmlReturn_t result);
const char *nvmlErrorString(nvmlReturn_t result) {
    switch (result) {
    case NVML_SUCCESS: return "Success";
    case NVML_ERROR_UNINITIALIZED: return "Uninitialized";
    case NVML_ERROR_INVALID_ARGUMENT: return "Invalid Argument";
    case NVML_ERROR_INSUFFICIENT_SIZE: return "Insufficient Size";
    default: return "Unknown Error";
    }
}

EXPORT nvmlReturn_t nvmlDeviceGetCount_v2(unsigned int *count);
nvmlReturn_t nvmlDeviceGetCount_v2(unsigned int *count) {
    if (atomic_load(&initialised) <= 0) return NVML_ERROR_UNINITIALIZED;
    if (count == NULL) return NVML_ERROR_INVALID_ARGUMENT;
    *count = 1;
    return NVML_SUCCESS;
}

EXPORT nvmlReturn_t nvmlDeviceGetHandleByIndex_v2(unsigned int index, nvmlDevice_t *device);
nvmlReturn_t nvmlDeviceGetHandleByIndex_v2(unsigned int index, nvmlDevice_t *device) {
    if (atomic_load(&initialised) <= 0) return NVML_ERROR_UNINITIALIZED;
    if (index != 0 || device == NULL) return NVML_ERROR_INVALID_ARGUMENT;
    *device = &the_device;
    return NVML_SUCCESS;
}

EXPORT nvmlReturn_t nvmlDeviceGetCudaComputeCapability(nvmlDevice_t device, int *major, int *minor);
nvmlReturn_t nvmlDeviceGetCudaComputeCapability(nvmlDevice_t device, int *major, int *minor) {
    if (atomic_load(&initialised) <= 0) return NVML_ERROR_UNINITIALIZED;
    if (bad(device) || major == NULL || minor == NULL) return NVML_ERROR_INVALID_ARGUMENT;
    *major = 9;
    *minor = 0;
    return NVML_SUCCESS;
}

EXPORT nvmlReturn_t nvmlDeviceGetName(nvmlDevice_t device, char *name, unsigned int length);
nvmlReturn_t nvmlDeviceGetName(nvmlDevice_t device, char *name, unsigned int length) {
    if (atomic_load(&initialised) <= 0) return NVML_ERROR_UNINITIALIZED;
    if (bad(device) || name == NULL) return NVML_ERROR_INVALID_ARGUMENT;
    if (length < sizeof NAME) return NVML_ERROR_INSUFFICIENT_SIZE;
    memcpy(name, NAME, sizeof NAME);
    return NVML_SUCCESS;
}

static nvmlReturn_t attributes(nvmlDevice_t device, nvmlDeviceAttributes_t *a) {
    if (atomic_load(&initialised) <= 0) return NVML_ERROR_UNINITIALIZED;
    if (bad(device) || a == NULL) return NVML_ERROR_INVALID_ARGUMENT;
    const char *mig_only = getenv("CAPSHIM_STANDIN_NVML_MIG_ONLY");
    if (mig_only != NULL && strcmp(mig_only, "1") == 0) return NVML_ERROR_NOT_SUPPORTED;
    memset(a, 0, sizeof *a);
    a->multiprocessorCount = 132;
    a->sharedCopyEngineCount = 7;
    a->sharedDecoderCount = 7;
    a->sharedJpegCount = 7;
    a->sharedOfaCount = 1;
    a->gpuInstanceSliceCount = 7;
    a->computeInstanceSliceCount = 7;
    a->memorySizeMB = 143771; /* what nvidia-smi shows for an H200 (MiB): NVML counts all of it, cudaDeviceProp less */
    return NVML_SUCCESS;
}

EXPORT nvmlReturn_t nvmlDeviceGetAttributes(nvmlDevice_t device, nvmlDeviceAttributes_t *attributes);
nvmlReturn_t nvmlDeviceGetAttributes(nvmlDevice_t device, nvmlDeviceAttributes_t *a) { return attributes(device, a); }

EXPORT nvmlReturn_t nvmlDeviceGetAttributes_v2(nvmlDevice_t device, nvmlDeviceAttributes_t *attributes);
nvmlReturn_t nvmlDeviceGetAttributes_v2(nvmlDevice_t device, nvmlDeviceAttributes_t *a) { return attributes(device, a); }

EXPORT nvmlReturn_t nvmlDeviceGetArchitecture(nvmlDevice_t device, unsigned int *arch);
nvmlReturn_t nvmlDeviceGetArchitecture(nvmlDevice_t device, unsigned int *arch) {
    if (atomic_load(&initialised) <= 0) return NVML_ERROR_UNINITIALIZED;
    if (bad(device) || arch == NULL) return NVML_ERROR_INVALID_ARGUMENT;
    *arch = NVML_DEVICE_ARCH_HOPPER;
    return NVML_SUCCESS;
}

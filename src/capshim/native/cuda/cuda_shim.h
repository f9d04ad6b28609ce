/* capshim CUDA shim: what cuda_shim.c (state, configuration, events, lowering)
 * and cuda_hooks.c (the exported entry points and dlsym) share.
 *
 * cuda_devices.c chooses the configuration per device (devices=). No CUDA header is needed: the few types the shim touches are declared here
 * from CUDA 13.0 cuda_runtime_api.h / cuda.h (cudaError_t and CUresult are int
 * enums; 0 is success in both; cudaErrorSymbolNotFound and CUDA_ERROR_NOT_FOUND
 * are both 500).
 */
#ifndef CAPSHIM_CUDA_SHIM_H
#define CAPSHIM_CUDA_SHIM_H

#include <stddef.h>
#include <stdint.h>

typedef int capshim_cuerr; /* cudaError_t, CUresult */

/* Code on dlsym's path, which a sanitizer runtime takes before it is initialised. */
#define CAPSHIM_NO_SANITIZE __attribute__((no_sanitize_address, no_sanitize("undefined")))
#define CAPSHIM_CU_SUCCESS 0
#define CAPSHIM_CU_NOT_FOUND 500 /* cudaErrorSymbolNotFound = CUDA_ERROR_NOT_FOUND = 500 */

/* Attribute numbers the shim itself asks (CUDA 13.0 driver_types.h, cudaDeviceAttr). */
#define CAPSHIM_ATTR_MAX_THREADS_PER_BLOCK 1
#define CAPSHIM_ATTR_MULTIPROCESSOR_COUNT 16
#define CAPSHIM_ATTR_CC_MAJOR 75
#define CAPSHIM_ATTR_CC_MINOR 76

/* The wrapped entry points, in the order of capshim_cuda_entry_names. */
enum capshim_cuda_entry {
    E_cudaGetDeviceProperties,
    E_cudaGetDeviceProperties_v2,
    E_cudaDeviceGetAttribute,
    E_cudaGetDriverEntryPoint,
    E_cudaGetDriverEntryPoint_ptsz,
    E_cudaGetDriverEntryPointByVersion,
    E_cudaGetDriverEntryPointByVersion_ptsz,
    E_cuDeviceGetAttribute,
    E_cuDeviceGetName,
    E_cuDeviceComputeCapability,
    E_cuDeviceGetProperties,
    E_cuGetProcAddress,
    E_cuGetProcAddress_v2,
    E_COUNT
};

extern const char *const capshim_cuda_entry_names[E_COUNT];

/* Which struct a cudaGetDeviceProperties* call fills. */
enum capshim_cuda_layout { LAYOUT_UNKNOWN = 0, LAYOUT_11 = 11, LAYOUT_12 = 12, LAYOUT_13 = 13 };

typedef capshim_cuerr (*capshim_attr_fn)(int *value, int attr, int device);

/* Wrappers bound to one real function each, per entry point (cuda_resolve.c). */
#define CAPSHIM_CUDA_SLOTS 8

/* cuda_hooks.c */
/* The exported wrapper of entry; the bound wrapper number slot of entry. */
void *capshim_cuda_wrapper(int entry);
void *capshim_cuda_slot(int entry, int slot);
void *capshim_cuda_real_dlsym(void *handle, const char *name);

/* Runtime version nodes the shim's versioned aliases carry (cuda_shim.map): 1 libcudart.so.11.0,
 * 2 libcudart.so.12, 3 libcudart.so.13. */
#define CAPSHIM_CUDA_LINKED 3
/* The alias of runtime entry for version node variant (1..CAPSHIM_CUDA_LINKED), or NULL. */
void *capshim_cuda_linked_wrapper(int entry, int variant);

/* cuda_resolve.c */
/* The soname version node variant names (the node is named after the runtime's soname). */
const char *capshim_cuda_linked_soname(int variant);
/* capshim_cuda_resolve for an alias of version node variant: the one loaded object in the
 * caller's namespace whose soname is that node's, when the caller-derived answer is missing or
 * lies in another libcudart; else capshim_cuda_resolve's answer. */
void *capshim_cuda_resolve_linked(int entry, const void *ret, int variant);
struct link_map;
/* The object holding address p (dladdr1 RTLD_DL_LINKMAP), or NULL. */
struct link_map *capshim_cuda_map_of(const void *p);
/* The real function entry's exported wrapper calls for the code at return address ret:
 * cached per (entry, call site); NULL (and an "unresolved" event) when none is found. */
void *capshim_cuda_resolve(int entry, const void *ret);
/* What a lookup of entry's name from the code at caller finds, skipping the shim: the caller's
 * own dependency scope, then the global scope after the shim; NULL when neither defines it. */
void *capshim_cuda_scope_lookup(int entry, const void *caller);
/* A bound wrapper of entry for real (the same one for the same real function), or real itself
 * when every slot is taken (an "unbound" event names the entry point; via: the path). */
void *capshim_cuda_bind(int entry, void *real, const char *via);
/* The real function bound to slot of entry. */
void *capshim_cuda_slot_real(int entry, int slot);
/* The first definition of name in map's own dependencies (DT_NEEDED, breadth first), map
 * excluded: what glibc's dlsym(RTLD_NEXT) searches for an object loaded RTLD_LOCAL; or NULL. */
void *capshim_cuda_needed_lookup(struct link_map *map, const char *name);
/* The symbol `name` in the scope of the library that defines fn (its namespace, then its
 * dependencies), NULL when not found or when it is one of the shim's wrappers. */
void *capshim_cuda_sibling(void *fn, const char *name);

/* cuda_shim.c */
void capshim_cuda_init(void);
/* Whether this process lowers answers (target process, configuration accepted). */
int capshim_cuda_active(void);
/* Index of a wrapped entry point by name (base names, as dlsym and cuGetProcAddress take them), or -1. */
int capshim_cuda_entry_index(const char *name);
/* Whether fn is one of the shim's wrappers (exported or bound). */
int capshim_cuda_is_wrapper(const void *fn);
/* When fn (found for name, non-NULL) is a function the shim wraps and the shim is active:
 * a wrapper bound to fn (capshim_cuda_bind); else fn. via names the path. */
void *capshim_cuda_substitute(const char *name, void *fn, int cuda_version, const char *via);
/* Marks a wrapper reached; returns 1 when this call may lower (active and not nested inside
 * another wrapper on this thread). Pair every call with capshim_cuda_leave. */
int capshim_cuda_enter(int entry);
/* Chooses, for this thread's next lowering, the configuration that answers for CUDA device
 * ordinal device (its devices= key naming the ordinal, or the UUID the real driver gives it;
 * config.h), or for the device known by uuid only (16 bytes: NVML); 1 when one does, 0 when the
 * device answers stock. */
int capshim_cuda_select(int device);
int capshim_cuda_select_uuid(const unsigned char *uuid);
/* Whether the configurations name their devices (devices=), so NVML must find its device's UUID. */
int capshim_cuda_targeted(void);
/* cuda_shim.c: configurations a and b (a < b) both name one device (its index in one, its UUID in
 * the other): a rejected config event naming both files and the device (text), and one stderr line,
 * once per pair; cuda_devices.c leaves that device stock. */
void capshim_cuda_clash(size_t a, size_t b, const char *device);
/* cuda_shim.c: the accepted configurations (n of them; 0 when inactive). */
struct capshim_config;
const struct capshim_config *capshim_cuda_configs(size_t *n);
/* cuda_devices.c: the configuration chosen for this thread's current call, or NULL (stock). */
const struct capshim_config *capshim_cuda_current(void);
/* cuda_devices.c: the chosen device's index when its configuration names devices, else -1. */
int capshim_cuda_targeted_device(void);
struct capshim_json;
/* cuda_devices.c: "device", "uuid", "profile" of the chosen device into a changed event (only
 * when its configuration names devices). */
void capshim_cuda_device_fields(struct capshim_json *j);
void capshim_cuda_leave(void);

/* Lowering, after a successful real call. query names the entry point. */
void capshim_cuda_lower_attribute(const char *query, int *value, int attr, int device, capshim_attr_fn real_attr);
void capshim_cuda_lower_pair(const char *query, int *major, int *minor);
void capshim_cuda_lower_name(const char *query, char *name, size_t size);
/* The bytes the profile's deviceName takes with its terminating NUL; 0 when it sets none. */
size_t capshim_cuda_device_name_size(void);
void capshim_cuda_lower_prop(const char *query, unsigned char *prop, int layout, int device,
                             capshim_attr_fn real_attr);
void capshim_cuda_lower_devprop(const char *query, unsigned char *prop, int device, capshim_attr_fn real_attr);
/* The layout a runtime call fills: entry E_cudaGetDeviceProperties or _v2, from the real
 * runtime's cudaRuntimeGetVersion (next to fn): 13 from CUDA 13; on 12, _v2 the 12 layout and
 * the plain name the pre-12 one (11, as on 11.x runtimes); unknown before 11.0. Writes the
 * version (or -1) to *version. */
int capshim_cuda_layout(int entry, void *fn, int *version);
void capshim_cuda_layout_mismatch(const char *query, int layout, int version, const char *reason);
/* min(stock, profile) for one numeric key, a change reported under query (a static string). */
uint64_t capshim_cuda_lower_value(const char *query, const char *key, uint64_t stock);

/* nvml_hooks.c: the NVML door (nvmlDeviceGetCudaComputeCapability, ...), in this order. */
enum capshim_nvml_entry {
    N_GetCudaComputeCapability,
    N_GetName,
    N_GetAttributes,
    N_GetAttributes_v2,
    N_GetArchitecture,
    N_COUNT
};
extern const char *const capshim_nvml_entry_names[N_COUNT];
/* Index of a wrapped NVML entry point by name, or -1 (safe on dlsym's path: no libc call). */
int capshim_nvml_entry_index(const char *name);
void *capshim_nvml_wrapper(int entry);
/* dlsym's answer fn (non-NULL) for an NVML name: the wrapper in place of a real function the
 * shim wraps (while active), else fn. */
void *capshim_nvml_substitute(const char *name, void *fn);

#endif

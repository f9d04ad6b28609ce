/* capshim CUDA shim: the exported entry points (the wrappers) and dlsym.
 *
 * Every wrapper finds its real function (an exported one: for its caller,
 * cuda_resolve.c; a bound one: the function it was bound to), calls it with the
 * caller's arguments unchanged, and lowers the answer only when the call
 * succeeded and the shim is active (cuda_shim.c). A missing real function
 * answers cudaErrorSymbolNotFound / CUDA_ERROR_NOT_FOUND (500) and is reported
 * ("unresolved"). Prototypes: CUDA 13.0 cuda_runtime_api.h and cuda.h,
 * declared here so the shim builds without CUDA installed.
 *
 * Substitution: dlsym, cuGetProcAddress(_v2) and cudaGetDriverEntryPoint(ByVersion)(_ptsz)
 * hand out a wrapper bound to the real function the shim wraps, after the real
 * call succeeded with the caller's version and flags. dlsym is interposed because every NVIDIA library reaches libcuda
 * through dlopen + dlsym (measured on the H200: evidence/h200-cuda-shim-checks/README.md).
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

#define map_of capshim_cuda_map_of

/* dlsym(RTLD_NEXT, name) for the object that called it. glibc resolves RTLD_NEXT after the
 * object that called dlsym, which is this shim once it interposes dlsym: an interposer after the
 * shim in LD_PRELOAD (a tracer wrapping cudaDeviceGetAttribute, a library wrapping sysconf) would
 * get its own definition back and call itself until the stack ran out. found is the answer after
 * the shim; when it lies between the shim and the caller (the caller's own object included), the
 * objects after the caller are searched in link-map order (each through its own handle, kept only
 * when that object defines it). When found is NULL or lies between, the caller's own dependencies
 * come first (capshim_cuda_needed_lookup): glibc searches the caller's own search list, which for
 * an object loaded RTLD_LOCAL is outside the global scope the shim's lookup sees (issue 27,
 * review: dlsym(RTLD_NEXT) from a plugin found nothing under the shim). A caller before the shim
 * (a sanitizer runtime, which looks up its functions before it has started: no dlopen then) keeps
 * found. Sets *corrected when an answer found after the shim was replaced (the caller is an
 * interposer: its next function is handed out as it is). */
CAPSHIM_NO_SANITIZE static void *next_after(const void *caller, const char *name, void *found, int *corrected) {
    struct link_map *cm = map_of(caller), *fm = map_of(found), *self = map_of((const void *)(uintptr_t)&map_of);
    *corrected = 0;
    if (cm == NULL || self == NULL || cm == self || (found != NULL && fm == NULL)) return found;
    int between = 0; /* fm in (self, cm]: after the shim, yet not after the caller */
    struct link_map *m = cm;
    for (; m != NULL && m != self; m = m->l_prev) between |= fm != NULL && m == fm;
    if (m == NULL) return found; /* the caller is before the shim (a sanitizer) or in another namespace */
    if (found != NULL && !between) return found;
    /* Nothing after the shim, or nothing after the caller: glibc searches the caller's own search
     * list after it (for an object loaded RTLD_LOCAL, its dependencies, outside the global scope). */
    void *own = capshim_cuda_needed_lookup(cm, name);
    if (own != NULL) {
        (void)dlerror(); /* the miss (or the probes) left a message the answer makes untrue */
        *corrected = found != NULL; /* an interposer's next function stays the real one */
        return own;
    }
    if (found == NULL) {
        (void)capshim_cuda_real_dlsym(RTLD_NEXT, name); /* the miss's own message, for dlerror */
        return NULL;
    }
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
    if (handle == RTLD_NEXT) {
        int corrected = 0;
        r = next_after(__builtin_return_address(0), name, r, &corrected);
        if (corrected) return r; /* the caller sits after the shim: its calls came through the shim already */
    }
    if (r != NULL && capshim_nvml_entry_index(name) >= 0) return capshim_nvml_substitute(name, r);
    int e = r != NULL ? capshim_cuda_entry_index(name) : -1;
    if (e < 0) return r;
    /* The lookup found the shim's own export (RTLD_DEFAULT, the main program's handle): it resolves
     * per caller when called; when nothing behind the shim defines the name, the answer is the
     * stock one, not found. */
    if (r == capshim_cuda_wrapper(e)) return capshim_cuda_scope_lookup(e, __builtin_return_address(0)) ? r : NULL;
    return capshim_cuda_substitute(name, r, 0, "dlsym");
}

/* Every wrapper body takes its real function: an exported wrapper's from capshim_cuda_resolve
 * (for its caller), a bound wrapper's from its slot. enter/leave pair around everything, so a
 * wrapper reached without a real function still counts as reached (status: "unresolved"). */
#define CALLER() __builtin_return_address(0)
#define RESOLVE(type, entry) ((type)(uintptr_t)capshim_cuda_resolve(entry, CALLER()))
#define SLOT(type, entry, k) ((type)(uintptr_t)capshim_cuda_slot_real(entry, k))

/* ---- runtime ---------------------------------------------------------------- */

typedef capshim_cuerr (*props_fn)(void *, int);
typedef capshim_cuerr (*rt_entry_fn)(const char *, void **, unsigned long long, int *);
typedef capshim_cuerr (*rt_entry_ver_fn)(const char *, void **, unsigned int, unsigned long long, int *);

static capshim_cuerr do_props(int entry, props_fn real, void *prop, int device) {
    int lower = capshim_cuda_enter(entry);
    if (lower) lower = capshim_cuda_select(device);
    if (real == NULL) {
        capshim_cuda_leave();
        return CAPSHIM_CU_NOT_FOUND;
    }
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

/* cudaDeviceGetAttribute and cuDeviceGetAttribute. */
static capshim_cuerr do_attr(int entry, capshim_attr_fn real, int *value, int attr, int device) {
    int lower = capshim_cuda_enter(entry);
    if (lower) lower = capshim_cuda_select(device);
    if (real == NULL) {
        capshim_cuda_leave();
        return CAPSHIM_CU_NOT_FOUND;
    }
    capshim_cuerr rc = real(value, attr, device);
    if (rc == CAPSHIM_CU_SUCCESS && lower)
        capshim_cuda_lower_attribute(capshim_cuda_entry_names[entry], value, attr, device, real);
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

static capshim_cuerr do_entry(int entry, rt_entry_fn real, const char *symbol, void **fp, unsigned long long flags,
                              int *status) {
    (void)capshim_cuda_enter(entry);
    if (real == NULL) {
        capshim_cuda_leave();
        return CAPSHIM_CU_NOT_FOUND;
    }
    capshim_cuerr rc = real(symbol, fp, flags, status);
    if (rc == CAPSHIM_CU_SUCCESS && fp != NULL && *fp != NULL)
        *fp = capshim_cuda_substitute(symbol, *fp, runtime_version((void *)(uintptr_t)real),
                                      capshim_cuda_entry_names[entry]);
    capshim_cuda_leave();
    return rc;
}

static capshim_cuerr do_entry_ver(int entry, rt_entry_ver_fn real, const char *symbol, void **fp,
                                  unsigned int version, unsigned long long flags, int *status) {
    (void)capshim_cuda_enter(entry);
    if (real == NULL) {
        capshim_cuda_leave();
        return CAPSHIM_CU_NOT_FOUND;
    }
    capshim_cuerr rc = real(symbol, fp, version, flags, status);
    if (rc == CAPSHIM_CU_SUCCESS && fp != NULL && *fp != NULL)
        *fp = capshim_cuda_substitute(symbol, *fp, (int)version, capshim_cuda_entry_names[entry]);
    capshim_cuda_leave();
    return rc;
}

/* ---- driver ----------------------------------------------------------------- */

typedef capshim_cuerr (*name_fn)(char *, int, int);
typedef capshim_cuerr (*cc_fn)(int *, int *, int);
typedef capshim_cuerr (*devprop_fn)(void *, int);
typedef capshim_cuerr (*proc_fn)(const char *, void **, int, cuuint64_t);
typedef capshim_cuerr (*proc_v2_fn)(const char *, void **, int, cuuint64_t, int *);

static capshim_cuerr do_name(int entry, name_fn real, char *name, int len, int device) {
    int lower = capshim_cuda_enter(entry);
    if (lower) lower = capshim_cuda_select(device);
    if (real == NULL) {
        capshim_cuda_leave();
        return CAPSHIM_CU_NOT_FOUND;
    }
    capshim_cuerr rc = real(name, len, device);
    if (rc == CAPSHIM_CU_SUCCESS && lower && len > 0) capshim_cuda_lower_name("cuDeviceGetName", name, (size_t)len);
    capshim_cuda_leave();
    return rc;
}

static capshim_cuerr do_cc(int entry, cc_fn real, int *major, int *minor, int device) {
    int lower = capshim_cuda_enter(entry);
    if (lower) lower = capshim_cuda_select(device);
    if (real == NULL) {
        capshim_cuda_leave();
        return CAPSHIM_CU_NOT_FOUND;
    }
    capshim_cuerr rc = real(major, minor, device);
    if (rc == CAPSHIM_CU_SUCCESS && lower) capshim_cuda_lower_pair("cuDeviceComputeCapability", major, minor);
    capshim_cuda_leave();
    return rc;
}

static capshim_cuerr do_devprop(int entry, devprop_fn real, void *prop, int device) {
    int lower = capshim_cuda_enter(entry);
    if (lower) lower = capshim_cuda_select(device);
    if (real == NULL) {
        capshim_cuda_leave();
        return CAPSHIM_CU_NOT_FOUND;
    }
    capshim_cuerr rc = real(prop, device);
    if (rc == CAPSHIM_CU_SUCCESS && lower) {
        capshim_attr_fn attr =
            (capshim_attr_fn)(uintptr_t)capshim_cuda_sibling((void *)(uintptr_t)real, "cuDeviceGetAttribute");
        capshim_cuda_lower_devprop("cuDeviceGetProperties", prop, device, attr);
    }
    capshim_cuda_leave();
    return rc;
}

static capshim_cuerr do_proc(int entry, proc_fn real, const char *symbol, void **pfn, int version, cuuint64_t flags) {
    (void)capshim_cuda_enter(entry);
    if (real == NULL) {
        capshim_cuda_leave();
        return CAPSHIM_CU_NOT_FOUND;
    }
    capshim_cuerr rc = real(symbol, pfn, version, flags);
    if (rc == CAPSHIM_CU_SUCCESS && pfn != NULL && *pfn != NULL)
        *pfn = capshim_cuda_substitute(symbol, *pfn, version, "cuGetProcAddress");
    capshim_cuda_leave();
    return rc;
}

static capshim_cuerr do_proc_v2(int entry, proc_v2_fn real, const char *symbol, void **pfn, int version,
                                cuuint64_t flags, int *status) {
    (void)capshim_cuda_enter(entry);
    if (real == NULL) {
        capshim_cuda_leave();
        return CAPSHIM_CU_NOT_FOUND;
    }
    capshim_cuerr rc = real(symbol, pfn, version, flags, status);
    if (rc == CAPSHIM_CU_SUCCESS && pfn != NULL && *pfn != NULL)
        *pfn = capshim_cuda_substitute(symbol, *pfn, version, "cuGetProcAddress_v2");
    capshim_cuda_leave();
    return rc;
}

/* ---- the wrappers: each entry point's exported one and its bound ones ----------------- */

/* X(name, kind): kind names the body (do_KIND), its function type and its parameters. */
#define CAPSHIM_CUDA_RUNTIME(X)                              \
    X(cudaGetDeviceProperties, props)                        \
    X(cudaGetDeviceProperties_v2, props)                     \
    X(cudaDeviceGetAttribute, attr)                          \
    X(cudaGetDriverEntryPoint, entry)                        \
    X(cudaGetDriverEntryPoint_ptsz, entry)                   \
    X(cudaGetDriverEntryPointByVersion, entry_ver)           \
    X(cudaGetDriverEntryPointByVersion_ptsz, entry_ver)
#define CAPSHIM_CUDA_WRAPPED(X)                              \
    CAPSHIM_CUDA_RUNTIME(X)                                  \
    X(cuDeviceGetAttribute, attr)                            \
    X(cuDeviceGetName, name)                                 \
    X(cuDeviceComputeCapability, cc)                         \
    X(cuDeviceGetProperties, devprop)                        \
    X(cuGetProcAddress, proc)                                \
    X(cuGetProcAddress_v2, proc_v2)

#define PARAMS_props void *prop, int device
#define ARGS_props prop, device
#define TYPE_props props_fn
#define PARAMS_attr int *value, int attr, int device
#define ARGS_attr value, attr, device
#define TYPE_attr capshim_attr_fn
#define PARAMS_entry const char *symbol, void **fp, unsigned long long flags, int *status
#define ARGS_entry symbol, fp, flags, status
#define TYPE_entry rt_entry_fn
#define PARAMS_entry_ver const char *symbol, void **fp, unsigned int version, unsigned long long flags, int *status
#define ARGS_entry_ver symbol, fp, version, flags, status
#define TYPE_entry_ver rt_entry_ver_fn
#define PARAMS_name char *name, int len, int device
#define ARGS_name name, len, device
#define TYPE_name name_fn
#define PARAMS_cc int *major, int *minor, int device
#define ARGS_cc major, minor, device
#define TYPE_cc cc_fn
#define PARAMS_devprop void *prop, int device
#define ARGS_devprop prop, device
#define TYPE_devprop devprop_fn
#define PARAMS_proc const char *symbol, void **pfn, int version, cuuint64_t flags
#define ARGS_proc symbol, pfn, version, flags
#define TYPE_proc proc_fn
#define PARAMS_proc_v2 const char *symbol, void **pfn, int version, cuuint64_t flags, int *status
#define ARGS_proc_v2 symbol, pfn, version, flags, status
#define TYPE_proc_v2 proc_v2_fn

#define EXPORTED(N, K)                                                                  \
    EXPORT capshim_cuerr N(PARAMS_##K);                                                 \
    capshim_cuerr N(PARAMS_##K) { return do_##K(E_##N, RESOLVE(TYPE_##K, E_##N), ARGS_##K); }
CAPSHIM_CUDA_WRAPPED(EXPORTED)
#undef EXPORTED

/* The runtime entry points once more per runtime version node (cuda_shim.map): a client linked
 * against libcudart.so.13 references cudaGetDeviceProperties@libcudart.so.13, and glibc binds that
 * reference to the alias of the same version name, so the alias knows the runtime the calling
 * code was linked against even when the return address is not in that code (a tail call: the
 * plugin's `return cudaGetDeviceProperties(p, 0);` compiles to a jump, and the return address is
 * its caller's). The default version (CAPSHIM_CUDA, "@@") serves dlsym and unversioned
 * references. capshim_cuda_linked_soname lists the versions in this order. */
#define FOR_LINKED(M, N, K) M(1, N, K, libcudart.so.11.0) M(2, N, K, libcudart.so.12) M(3, N, K, libcudart.so.13)
_Static_assert(CAPSHIM_CUDA_LINKED == 3, "FOR_LINKED lists CAPSHIM_CUDA_LINKED version nodes");
#define LINKED(v, N, K, node)                                                                                \
    EXPORT capshim_cuerr capshim_rt##v##_##N(PARAMS_##K);                                                    \
    capshim_cuerr capshim_rt##v##_##N(PARAMS_##K) {                                                          \
        return do_##K(E_##N, (TYPE_##K)(uintptr_t)capshim_cuda_resolve_linked(E_##N, CALLER(), v), ARGS_##K); \
    }                                                                                                        \
    __asm__(".symver capshim_rt" #v "_" #N ", " #N "@" #node);
#define LINKED_ALL(N, K) FOR_LINKED(LINKED, N, K)
CAPSHIM_CUDA_RUNTIME(LINKED_ALL)
#undef LINKED_ALL
#undef LINKED

void *capshim_cuda_linked_wrapper(int entry, int variant) {
#define LINKED_ADDR(v, N, K, node) [v - 1] = (void *)(uintptr_t)capshim_rt##v##_##N,
#define LINKED_ROW(N, K) [E_##N] = {FOR_LINKED(LINKED_ADDR, N, K)},
    static void *const linked[E_COUNT][CAPSHIM_CUDA_LINKED] = {CAPSHIM_CUDA_RUNTIME(LINKED_ROW)};
#undef LINKED_ROW
#undef LINKED_ADDR
    return entry >= 0 && entry < E_COUNT && variant >= 1 && variant <= CAPSHIM_CUDA_LINKED ? linked[entry][variant - 1]
                                                                                          : NULL;
}

#define FOR_SLOTS(M, N, K) M(0, N, K) M(1, N, K) M(2, N, K) M(3, N, K) M(4, N, K) M(5, N, K) M(6, N, K) M(7, N, K)
_Static_assert(CAPSHIM_CUDA_SLOTS == 8, "FOR_SLOTS lists CAPSHIM_CUDA_SLOTS wrappers");
#define BOUND(k, N, K) \
    static capshim_cuerr N##_slot##k(PARAMS_##K) { return do_##K(E_##N, SLOT(TYPE_##K, E_##N, k), ARGS_##K); }
#define BOUND_ALL(N, K) FOR_SLOTS(BOUND, N, K)
CAPSHIM_CUDA_WRAPPED(BOUND_ALL)
#undef BOUND_ALL
#undef BOUND

void *capshim_cuda_wrapper(int entry) {
#define ADDR(N, K) [E_##N] = (void *)(uintptr_t)N,
    static void *const wrappers[E_COUNT] = {CAPSHIM_CUDA_WRAPPED(ADDR)};
#undef ADDR
    return entry >= 0 && entry < E_COUNT ? wrappers[entry] : NULL;
}

void *capshim_cuda_slot(int entry, int slot) {
#define SLOT_ADDR(k, N, K) (void *)(uintptr_t)N##_slot##k,
#define ROW(N, K) [E_##N] = {FOR_SLOTS(SLOT_ADDR, N, K)},
    static void *const slots[E_COUNT][CAPSHIM_CUDA_SLOTS] = {CAPSHIM_CUDA_WRAPPED(ROW)};
#undef ROW
#undef SLOT_ADDR
    return entry >= 0 && entry < E_COUNT && slot >= 0 && slot < CAPSHIM_CUDA_SLOTS ? slots[entry][slot] : NULL;
}

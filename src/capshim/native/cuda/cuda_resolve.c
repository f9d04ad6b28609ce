/* capshim CUDA shim: which real function a wrapper calls (issue 27, "never break a call").
 *
 * A process may hold several runtimes (an application's libcudart.so.11.0 and a plugin's
 * libcudart.so.13), some of them outside the global scope (a Python extension module is
 * dlopen'ed RTLD_LOCAL with its libcudart; ctypes.CDLL and dlmopen keep theirs local too).
 * One "real function" per name for the whole process sends some callers to the wrong
 * runtime (a 1008-byte struct written into a 728-byte buffer) or to none (500). So:
 *
 *  - An exported wrapper resolves for its caller (capshim_cuda_resolve): the object holding
 *    the return address (dladdr1 RTLD_DL_LINKMAP), then the first definition in that object's
 *    own dependency scope (dlopen/dlmopen of it with RTLD_NOLOAD in its namespace, dlsym on
 *    that handle: the object, then its DT_NEEDED closure, where the runtime it was linked
 *    against sits), then the global scope after the shim (dlsym RTLD_NEXT), then, last, the
 *    one loaded object that defines the name (none or several: unresolved). An object ahead
 *    of the shim that defines the name itself (a second copy of the shim, an interposer)
 *    continues after the shim, as RTLD_NEXT would. Answers are cached per (entry, call site)
 *    in a fixed table of seqlocked slots, valid while no object has been unloaded
 *    (dl_iterate_phdr's dlpi_subs), a miss while none has been loaded either (dlpi_adds);
 *    a full table caches nothing.
 *  - A pointer the shim hands out in place of a real one (dlsym, cuGetProcAddress,
 *    cudaGetDriverEntryPoint) is a slot wrapper bound to exactly that real function
 *    (capshim_cuda_bind): SLOTS per entry point, claimed by compare-and-swap, never freed;
 *    the same real function gets the same slot. A full pool hands out the real function.
 *
 * Nothing here allocates or blocks beyond what dladdr, dlopen and dl_iterate_phdr do inside
 * glibc (the loader's recursive locks); no dlopen runs inside a dl_iterate_phdr callback.
 * handles: in glibc a dlopen handle is the object's struct link_map (dlfcn/dlinfo.c reads
 * it as one), so dlinfo(map, RTLD_DI_LMID) names the namespace of a map from dladdr1.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <link.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "cuda_shim.h"
#include "status.h"

/* ---- objects and scopes ----------------------------------------------------------- */

CAPSHIM_NO_SANITIZE struct link_map *capshim_cuda_map_of(const void *p) {
    Dl_info info;
    void *map = NULL;
    if (p == NULL || dladdr1(p, &info, &map, RTLD_DL_LINKMAP) == 0) return NULL;
    return (struct link_map *)map;
}

static struct link_map *self_map(void) {
    static _Atomic(struct link_map *) self;
    struct link_map *m = atomic_load(&self);
    if (m == NULL) {
        m = capshim_cuda_map_of((const void *)(uintptr_t)&self_map);
        atomic_store(&self, m);
    }
    return m;
}

/* A handle on map in its own namespace (dlclose it), or NULL: the main program (its scope is
 * the global one, searched by RTLD_NEXT), an object without a name, or one that is no longer
 * there under that name. */
static void *open_map(struct link_map *map) {
    Lmid_t ns = LM_ID_BASE;
    if (map == NULL || map->l_name == NULL || map->l_name[0] == '\0') return NULL;
    if (dlinfo(map, RTLD_DI_LMID, &ns) != 0) return NULL;
    void *h = ns == LM_ID_BASE ? dlopen(map->l_name, RTLD_LAZY | RTLD_NOLOAD)
                               : dlmopen(ns, map->l_name, RTLD_LAZY | RTLD_NOLOAD);
    if (h != NULL && h != (void *)map) { /* another object answers to that name there */
        dlclose(h);
        h = NULL;
    }
    return h;
}

/* name in the scope of map's handle (map, then its dependencies), or NULL. */
static void *scope_sym(struct link_map *map, const char *name) {
    void *h = open_map(map);
    if (h == NULL) return NULL;
    void *sym = capshim_cuda_real_dlsym(h, name);
    dlclose(h);
    return sym;
}

void *capshim_cuda_sibling(void *fn, const char *name) {
    void *sym = scope_sym(capshim_cuda_map_of(fn), name);
    return capshim_cuda_is_wrapper(sym) ? NULL : sym;
}

/* Whether map comes before the shim in the base namespace's list (LD_PRELOAD order). */
static int before_self(struct link_map *map) {
    struct link_map *self = self_map();
    if (self == NULL || map == NULL) return 0;
    for (struct link_map *m = self->l_prev; m != NULL; m = m->l_prev)
        if (m == map) return 1;
    return 0;
}

void *capshim_cuda_scope_lookup(int entry, const void *caller) {
    if (entry < 0 || entry >= E_COUNT) return NULL;
    const char *name = capshim_cuda_entry_names[entry];
    struct link_map *cm = capshim_cuda_map_of(caller), *self = self_map();
    if (cm != NULL && cm != self) {
        void *sym = scope_sym(cm, name);
        int interposer = sym != NULL && capshim_cuda_map_of(sym) == cm && before_self(cm);
        if (sym != NULL && !capshim_cuda_is_wrapper(sym) && !interposer) return sym;
    }
    void *sym = capshim_cuda_real_dlsym(RTLD_NEXT, name);
    return capshim_cuda_is_wrapper(sym) ? NULL : sym;
}

/* ---- the last resort: the one loaded object that defines the name ---------------------- */

#define MAX_OBJECTS 256

struct walk {
    const void *inside[MAX_OBJECTS]; /* an address inside each named object */
    size_t n;
};

static int walk_cb(struct dl_phdr_info *info, size_t size, void *data) {
    struct walk *w = data;
    (void)size;
    if (info->dlpi_name == NULL || info->dlpi_name[0] == '\0' || w->n >= MAX_OBJECTS) return 0;
    for (int i = 0; i < info->dlpi_phnum; i++) {
        if (info->dlpi_phdr[i].p_type != PT_LOAD) continue;
        w->inside[w->n++] = (const void *)(uintptr_t)(info->dlpi_addr + info->dlpi_phdr[i].p_vaddr);
        break;
    }
    return 0;
}

static void *only_definition(int entry, int *several) {
    struct walk w; /* 2 KiB */
    *several = 0;
    w.n = 0;
    (void)dl_iterate_phdr(walk_cb, &w); /* addresses only: dlopen inside the callback could deadlock */
    void *found = NULL;
    for (size_t i = 0; i < w.n; i++) {
        struct link_map *m = capshim_cuda_map_of(w.inside[i]);
        if (m == NULL || m == self_map()) continue;
        void *sym = scope_sym(m, capshim_cuda_entry_names[entry]);
        if (sym == NULL || capshim_cuda_is_wrapper(sym) || capshim_cuda_map_of(sym) != m) continue;
        void *own_dlsym = scope_sym(m, "dlsym");
        if (own_dlsym != NULL && capshim_cuda_map_of(own_dlsym) == m) continue; /* another copy of the shim */
        if (found != NULL && found != sym) {
            *several = 1;
            found = NULL;
            break;
        }
        found = sym;
    }
    return found;
}

/* ---- the cache --------------------------------------------------------------------- */

#define CACHE_SLOTS 1024
#define PROBES 8

/* Keyed by (entry, call site): a hit takes no loader lock but dl_iterate_phdr's short one (held
 * by dlopen only while it links an object into the list, never while constructors run), where
 * dladdr waits for a dlopen in another thread to finish. seq: even when stable, odd while one
 * writer fills the slot (claimed by CAS). */
static struct cache_slot {
    atomic_uint seq;
    _Atomic(uintptr_t) site;
    atomic_int entry;
    atomic_ullong subs, adds;
    _Atomic(void *) fn;
} g_cache[CACHE_SLOTS];

/* A cached miss: nothing defined the name when nothing had been loaded since. */
static const char g_none;
#define NONE ((void *)(uintptr_t)&g_none)

/* How many objects were loaded and unloaded so far (dl_iterate_phdr's counters): an unload
 * ends every cached answer (an address may be reused), a load every cached miss. */
struct generation {
    unsigned long long adds, subs;
};

static int generation_cb(struct dl_phdr_info *info, size_t size, void *data) {
    struct generation *g = data;
    (void)size;
    g->adds = info->dlpi_adds;
    g->subs = info->dlpi_subs;
    return 1;
}

static struct generation generation(void) {
    struct generation g = {0, 0};
    (void)dl_iterate_phdr(generation_cb, &g);
    return g;
}

static size_t slot_of(uintptr_t site, int entry) {
    uint64_t h = ((uint64_t)site >> 2) * 0x9e3779b97f4a7c15ull + (uint64_t)entry * 0xbf58476d1ce4e5b9ull;
    return (size_t)(h >> 32) % CACHE_SLOTS;
}

static void *cache_get(int entry, uintptr_t site, struct generation g) {
    size_t s = slot_of(site, entry);
    for (int i = 0; i < PROBES; i++) {
        struct cache_slot *c = &g_cache[(s + (size_t)i) % CACHE_SLOTS];
        unsigned before = atomic_load_explicit(&c->seq, memory_order_acquire);
        if (before & 1u) continue;
        uintptr_t m = atomic_load_explicit(&c->site, memory_order_relaxed);
        int e = atomic_load_explicit(&c->entry, memory_order_relaxed);
        unsigned long long u = atomic_load_explicit(&c->subs, memory_order_relaxed);
        unsigned long long a = atomic_load_explicit(&c->adds, memory_order_relaxed);
        void *fn = atomic_load_explicit(&c->fn, memory_order_relaxed);
        atomic_thread_fence(memory_order_acquire);
        if (atomic_load_explicit(&c->seq, memory_order_relaxed) != before) continue;
        if (fn != NULL && m == site && e == entry && u == g.subs && (fn != NONE || a == g.adds)) return fn;
    }
    return NULL;
}

static void cache_put(int entry, uintptr_t site, struct generation g, void *fn) {
    size_t s = slot_of(site, entry);
    for (int i = 0; i < PROBES; i++) {
        struct cache_slot *c = &g_cache[(s + (size_t)i) % CACHE_SLOTS];
        unsigned seq = atomic_load(&c->seq);
        if (seq & 1u) continue;
        void *old = atomic_load_explicit(&c->fn, memory_order_relaxed);
        int stale = atomic_load_explicit(&c->subs, memory_order_relaxed) != g.subs ||
                    (old == NONE && atomic_load_explicit(&c->adds, memory_order_relaxed) != g.adds);
        int mine = atomic_load_explicit(&c->site, memory_order_relaxed) == site &&
                   atomic_load_explicit(&c->entry, memory_order_relaxed) == entry;
        if (old != NULL && !stale && !mine) continue; /* someone else's, still valid */
        if (!atomic_compare_exchange_strong(&c->seq, &seq, seq + 1u)) continue;
        atomic_store_explicit(&c->site, site, memory_order_relaxed);
        atomic_store_explicit(&c->entry, entry, memory_order_relaxed);
        atomic_store_explicit(&c->subs, g.subs, memory_order_relaxed);
        atomic_store_explicit(&c->adds, g.adds, memory_order_relaxed);
        atomic_store_explicit(&c->fn, fn, memory_order_relaxed);
        atomic_store_explicit(&c->seq, seq + 2u, memory_order_release);
        return;
    }
}

/* ---- resolution and what status says about it --------------------------------------- */

static void unresolved(int entry, const void *caller, const char *reason) {
    static atomic_uint said; /* one event per entry point */
    unsigned bit = 1u << entry;
    if (atomic_fetch_or(&said, bit) & bit) return;
    Dl_info info;
    const char *who = caller != NULL && dladdr(caller, &info) != 0 && info.dli_fname != NULL ? info.dli_fname : "?";
    struct capshim_json j;
    capshim_json_begin(&j, "unresolved", "cuda", NULL);
    capshim_json_str(&j, "entry_point", capshim_cuda_entry_names[entry]);
    capshim_json_str(&j, "caller", who[0] != '\0' ? who : "the main program");
    capshim_json_str(&j, "reason", reason);
    capshim_json_end_and_write(&j);
}

/* ---- the runtime a versioned reference was linked against -------------------------- */

const char *capshim_cuda_linked_soname(int variant) {
    static const char *const sonames[CAPSHIM_CUDA_LINKED] = {"libcudart.so.11.0", "libcudart.so.12",
                                                            "libcudart.so.13"};
    return variant >= 1 && variant <= CAPSHIM_CUDA_LINKED ? sonames[variant - 1] : NULL;
}

/* DT_SONAME of map, or NULL. glibc relocates the d_ptr entries of a writable dynamic section in
 * place (elf/get-dynamic-info.h, dl_relocate_ld); a read-only one keeps link-time addresses,
 * which lie below the load address. */
CAPSHIM_NO_SANITIZE static const char *soname_of(const struct link_map *map) {
    if (map == NULL || map->l_ld == NULL) return NULL;
    uintptr_t strtab = 0, soname = 0;
    int has_soname = 0;
    for (const ElfW(Dyn) *d = map->l_ld; d->d_tag != DT_NULL; d++) {
        if (d->d_tag == DT_STRTAB) strtab = (uintptr_t)d->d_un.d_ptr;
        if (d->d_tag == DT_SONAME) {
            soname = (uintptr_t)d->d_un.d_val;
            has_soname = 1;
        }
    }
    if (strtab == 0 || !has_soname) return NULL;
    if (strtab < (uintptr_t)map->l_addr) strtab += (uintptr_t)map->l_addr;
    return (const char *)(strtab + soname);
}

/* The definition of name in map's DT_NEEDED libraries, opened by name (RTLD_NOLOAD) in map's
 * namespace and asked through their own handles, in DT_NEEDED order: first a library that defines
 * it itself, then one whose dependencies do (breadth first, as the loader's search list of map
 * runs); NULL when none does. map itself is not searched. */
CAPSHIM_NO_SANITIZE void *capshim_cuda_needed_lookup(struct link_map *map, const char *name) {
    if (map == NULL || map->l_ld == NULL || name == NULL) return NULL;
    Lmid_t ns = LM_ID_BASE;
    if (dlinfo(map, RTLD_DI_LMID, &ns) != 0) return NULL;
    uintptr_t strtab = 0;
    for (const ElfW(Dyn) *d = map->l_ld; d->d_tag != DT_NULL; d++)
        if (d->d_tag == DT_STRTAB) strtab = (uintptr_t)d->d_un.d_ptr;
    if (strtab == 0) return NULL;
    if (strtab < (uintptr_t)map->l_addr) strtab += (uintptr_t)map->l_addr;
    void *deeper = NULL;
    for (const ElfW(Dyn) *d = map->l_ld; d->d_tag != DT_NULL; d++) {
        if (d->d_tag != DT_NEEDED) continue;
        const char *needed = (const char *)(strtab + d->d_un.d_val);
        void *h = ns == LM_ID_BASE ? dlopen(needed, RTLD_LAZY | RTLD_NOLOAD)
                                   : dlmopen(ns, needed, RTLD_LAZY | RTLD_NOLOAD);
        if (h == NULL) continue;
        void *sym = capshim_cuda_real_dlsym(h, name);
        int own = sym != NULL && capshim_cuda_map_of(sym) == (struct link_map *)h;
        dlclose(h);
        if (sym == NULL || capshim_cuda_map_of(sym) == map) continue;
        if (own) return sym;
        if (deeper == NULL) deeper = sym;
    }
    return deeper;
}

static int same_namespace(struct link_map *a, struct link_map *b) {
    Lmid_t na = LM_ID_BASE, nb = LM_ID_BASE;
    if (a != NULL && dlinfo(a, RTLD_DI_LMID, &na) != 0) return 0;
    if (b != NULL && dlinfo(b, RTLD_DI_LMID, &nb) != 0) return 0;
    return na == nb;
}

/* The definition of entry's name in the one object of caller's namespace whose soname is
 * soname; NULL when none or several are loaded, or it does not define the name itself. */
static void *soname_definition(int entry, const void *caller, const char *soname) {
    struct walk w;
    w.n = 0;
    (void)dl_iterate_phdr(walk_cb, &w);
    struct link_map *cm = capshim_cuda_map_of(caller), *found = NULL;
    for (size_t i = 0; i < w.n; i++) {
        struct link_map *m = capshim_cuda_map_of(w.inside[i]);
        const char *so = soname_of(m);
        if (m == NULL || m == found || m == self_map() || so == NULL || strcmp(so, soname) != 0) continue;
        if (!same_namespace(m, cm)) continue;
        if (found != NULL) return NULL; /* two runtimes of one soname: the caller decides */
        found = m;
    }
    if (found == NULL) return NULL;
    void *sym = scope_sym(found, capshim_cuda_entry_names[entry]);
    return sym != NULL && !capshim_cuda_is_wrapper(sym) && capshim_cuda_map_of(sym) == found ? sym : NULL;
}

/* Whether fn lies in a CUDA runtime (soname libcudart.so*), not an interposer. */
static int in_runtime(const void *fn) {
    const char *so = soname_of(capshim_cuda_map_of(fn));
    return so != NULL && strncmp(so, "libcudart.so", 12) == 0;
}

static void *resolve(int entry, const void *ret, int variant) {
    if (entry < 0 || entry >= E_COUNT) return NULL;
    /* ret - 1: inside the call instruction, so a call that ends its object still maps there */
    const void *caller = ret != NULL ? (const void *)((const char *)ret - 1) : NULL;
    const char *soname = capshim_cuda_linked_soname(variant);
    int key = soname != NULL ? entry + E_COUNT * variant : entry; /* the cache's "entry" */
    struct generation g = generation();
    void *fn = cache_get(key, (uintptr_t)ret, g);
    if (fn != NULL) return fn != NONE ? fn : NULL;
    fn = capshim_cuda_scope_lookup(entry, caller);
    /* A versioned reference names the runtime it was linked against: that one answers when the
     * caller-derived answer is none or another runtime (a tail call from a plugin returns into
     * its caller); an interposer found for the caller (a tracer after the shim) keeps it. */
    if (soname != NULL && (fn == NULL || in_runtime(fn))) {
        const char *have = fn != NULL ? soname_of(capshim_cuda_map_of(fn)) : NULL;
        if (have == NULL || strcmp(have, soname) != 0) {
            void *linked = soname_definition(entry, caller, soname);
            if (linked != NULL) fn = linked;
        }
    }
    int several = 0;
    if (fn == NULL) fn = only_definition(entry, &several);
    if (fn == NULL) {
        unresolved(entry, caller,
                   several ? "several loaded libraries define it, none in the caller's scope or the global "
                             "one; the call returned 500 (not found) instead of guessing"
                           : "no loaded library defines it (not in the caller's scope, the global scope or "
                             "any loaded object); the call returned 500 (not found)");
        cache_put(key, (uintptr_t)ret, g, NONE);
        return NULL;
    }
    cache_put(key, (uintptr_t)ret, g, fn);
    return fn;
}

void *capshim_cuda_resolve(int entry, const void *ret) { return resolve(entry, ret, 0); }

void *capshim_cuda_resolve_linked(int entry, const void *ret, int variant) {
    return resolve(entry, ret, variant >= 1 && variant <= CAPSHIM_CUDA_LINKED ? variant : 0);
}

/* ---- slots: wrappers bound to one real function ---------------------------------------- */

static _Atomic(void *) g_slot[E_COUNT][CAPSHIM_CUDA_SLOTS];

void *capshim_cuda_slot_real(int entry, int slot) { return atomic_load(&g_slot[entry][slot]); }

void *capshim_cuda_bind(int entry, void *real, const char *via) {
    if (entry < 0 || entry >= E_COUNT || real == NULL) return real;
    for (int k = 0; k < CAPSHIM_CUDA_SLOTS; k++) {
        void *cur = atomic_load(&g_slot[entry][k]);
        if (cur == NULL) {
            void *expected = NULL;
            if (atomic_compare_exchange_strong(&g_slot[entry][k], &expected, real)) return capshim_cuda_slot(entry, k);
            cur = expected;
        }
        if (cur == real) return capshim_cuda_slot(entry, k);
    }
    static atomic_uint said;
    unsigned bit = 1u << entry;
    if (!(atomic_fetch_or(&said, bit) & bit)) {
        char reason[160];
        snprintf(reason, sizeof reason,
                 "all %d bound wrappers for this entry point are taken (that many different real functions); "
                 "%s handed out the real one, whose answers stay stock", CAPSHIM_CUDA_SLOTS, via);
        struct capshim_json j;
        capshim_json_begin(&j, "unbound", "cuda", NULL);
        capshim_json_str(&j, "entry_point", capshim_cuda_entry_names[entry]);
        capshim_json_str(&j, "reason", reason);
        capshim_json_end_and_write(&j);
    }
    return real;
}

/*
 * capshim Metal shim: changes, inside one process, the capability answers of
 * Metal devices (docs/contracts.md). Plain C against the Objective-C
 * runtime API only (class lookup, class_getInstanceMethod,
 * method_setImplementation, class_addMethod); no Metal headers.
 *
 * macOS: built as a universal (arm64, arm64e) dylib and injected with
 * DYLD_INSERT_LIBRARIES. Linux: the same source built against the GNU
 * Objective-C runtime and injected with LD_PRELOAD, to test its logic with
 * stand-in device classes.
 *
 * Hook path 1: replace -[_MTLDevice initGPUFamilySupport] (private); on its
 * first call for a device, patch that device's concrete class once, then call
 * the original. Hook path 2, when that class or method is missing: patch the
 * class of the devices MTLCreateSystemDefaultDevice / MTLCopyAllDevices
 * return (interposed).
 *
 * Answers: supportsFamily: is true for Apple families 1001..ceiling and
 * families the configuration forces, otherwise the original answer;
 * maxThreadgroupMemoryLength and recommendedMaxWorkingSetSize return
 * max(original, configured) and are replaced only when configured. Nothing
 * is ever lowered. name (MTLDevice.name) answers the configured device name,
 * an NSString made once ([[NSString alloc] initWithUTF8String:], kept for the
 * life of the process), only when one is configured; without NSString the
 * device's own name stays. Anything missing or invalid leaves the stock answers and
 * is reported in the status file (CAPSHIM_STATUS_FILE, JSON lines).
 */
#if !defined(__APPLE__)
#define _GNU_SOURCE
#endif

#include "metal_config.h"
#include "status.h" /* the one status-event writer, shared with the other shims (native/common) */

#ifndef CAPSHIM_VERSION_STRING /* capshim's version: the build passes it (capshim.native.build.VERSION_DEFINE) */
#error "CAPSHIM_VERSION_STRING is not defined: build with capshim (capshim build), which passes it"
#endif

#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <objc/runtime.h>

#if defined(__APPLE__)
#define INJECT_VAR "DYLD_INSERT_LIBRARIES"
#define RUNTIME_NAME "apple"
#else
#define INJECT_VAR "LD_PRELOAD"
#define RUNTIME_NAME "gnu"
#endif

#define HIDDEN __attribute__((visibility("hidden")))
#define MAX_SLOTS 8          /* device classes one process may patch */
#define MAX_CHANGED 128      /* distinct "changed" events reported */

typedef unsigned long capshim_nsuint; /* NSUInteger on LP64 */
typedef long capshim_nsint;           /* NSInteger, MTLGPUFamily */

typedef BOOL (*supports_fn)(id, SEL, capshim_nsint);
typedef capshim_nsuint (*size_fn)(id, SEL);
typedef void (*init_fn)(id, SEL);
typedef id (*name_fn)(id, SEL);
typedef id (*init_utf8_fn)(id, SEL, const char *);
typedef const char *(*utf8_fn)(id, SEL);
typedef void (*generic_fn)(void);

/* Function pointers travel through void (*)(void), the generic type. */
#define AS_IMP(f) ((IMP)(generic_fn)(f))

static struct capshim_metal_config g_cfg;
static int g_has_status;         /* CAPSHIM_STATUS_FILE set: "changed" bookkeeping is worth it */
static int g_quiet;
static char g_process[128];
static init_fn g_orig_init;      /* original -[_MTLDevice initGPUFamilySupport] */
static int g_path1;              /* entry hook installed */
static pthread_mutex_t g_lock = PTHREAD_MUTEX_INITIALIZER;
static int g_banner_done;

struct slot {
    Class cls;
    supports_fn supports;        /* originals; NULL when not replaced */
    size_fn threadgroup;
    size_fn working_set;
    name_fn name;
    atomic_int ready;
};
static struct slot g_slots[MAX_SLOTS];
static atomic_size_t g_nslots;
#define MAX_SEEN 64          /* classes examined and left alone */
static Class g_failed[MAX_SEEN];
static size_t g_nfailed;

struct changed { int query; long long key; unsigned long long stock, reported; };
static struct changed g_changed[MAX_CHANGED];
static size_t g_nchanged;

enum { Q_SUPPORTS = 0, Q_THREADGROUP, Q_WORKING_SET, Q_NAME, Q_COUNT };
static const char *const g_query_names[Q_COUNT] = {
    "supportsFamily:", "maxThreadgroupMemoryLength", "recommendedMaxWorkingSetSize", "name",
};
static id g_name_object;         /* the configured name as an NSString, or nil */
static pthread_once_t g_name_once = PTHREAD_ONCE_INIT;
static atomic_int g_name_logged;

/* ---- status file and banner --------------------------------------------- */

/* Starts a status event: the shared writer's leading fields (status.h). */
static void event_begin(struct capshim_json *j, const char *event)
{
    capshim_json_begin(j, event, "metal", NULL);
}

static void stderr_line(const char *text)
{
    if (g_quiet)
        return;
    size_t n = strlen(text);
    ssize_t w;
    do {
        w = write(STDERR_FILENO, text, n);
    } while (w < 0 && errno == EINTR);
}

static void banner(void)
{
    char b[512];
    size_t len = 0;
    const char *sep = "";
    (void)capshim_buf_printf(b, sizeof b, &len, "capshim-metal: active in %s[%ld]: ",
                             g_process, (long)getpid());
    if (g_cfg.has_apple_family_max) {
        (void)capshim_buf_printf(b, sizeof b, &len, "apple family <= %llu",
                                 (unsigned long long)g_cfg.apple_family_max);
        sep = ", ";
    }
    if (g_cfg.has_threadgroup_memory) {
        (void)capshim_buf_printf(b, sizeof b, &len, "%sthreadgroup memory %llu bytes", sep,
                                 (unsigned long long)g_cfg.threadgroup_memory);
        sep = ", ";
    }
    if (g_cfg.has_working_set) {
        (void)capshim_buf_printf(b, sizeof b, &len, "%sworking set %llu bytes", sep,
                                 (unsigned long long)g_cfg.working_set);
        sep = ", ";
    }
    for (size_t i = 0; i < g_cfg.n_forced; i++) {
        (void)capshim_buf_printf(b, sizeof b, &len, "%s%llu", i ? "," : (*sep ? ", forced families " : "forced families "),
                                 (unsigned long long)g_cfg.forced[i]);
        sep = ", ";
    }
    if (g_cfg.has_device_name) /* decoded UTF-8 without control characters (devname.h) */
        (void)capshim_buf_printf(b, sizeof b, &len, "%sname \"%s\"", sep, g_cfg.device_name);
    if (len + 2 > sizeof b)
        len = sizeof b - 2;
    b[len++] = '\n';
    b[len] = '\0';
    stderr_line(b);
}

/* ---- answers ------------------------------------------------------------- */

static void report_changed(int query, long long key, unsigned long long stock,
                           unsigned long long reported)
{
    if (!g_has_status)
        return;
    int fresh = 0;
    pthread_mutex_lock(&g_lock);
    size_t i = 0;
    for (; i < g_nchanged; i++) {
        const struct changed *c = &g_changed[i];
        if (c->query == query && c->key == key && c->stock == stock && c->reported == reported)
            break;
    }
    if (i == g_nchanged && g_nchanged < MAX_CHANGED) {
        g_changed[g_nchanged++] = (struct changed){query, key, stock, reported};
        fresh = 1;
    }
    pthread_mutex_unlock(&g_lock);
    if (!fresh)
        return;
    char family[32] = "";
    if (query == Q_SUPPORTS)
        (void)snprintf(family, sizeof family, "%lld", key);
    struct capshim_json j;
    event_begin(&j, "changed");
    capshim_json_str(&j, "query", g_query_names[query]);
    capshim_json_str(&j, "key", family);
    capshim_json_u64(&j, "stock", stock);
    capshim_json_u64(&j, "reported", reported);
    capshim_json_end_and_write(&j);
}

static int forced(capshim_nsint family)
{
    for (size_t i = 0; i < g_cfg.n_forced; i++)
        if (family >= 0 && (uint64_t)family == g_cfg.forced[i])
            return 1;
    return 0;
}

static BOOL answer_supports(struct slot *s, id self, SEL sel, capshim_nsint family)
{
    if (!atomic_load_explicit(&s->ready, memory_order_acquire) || s->supports == NULL)
        return NO;
    BOOL stock = s->supports(self, sel, family);
    if (stock)
        return stock;
    int raise = (g_cfg.has_apple_family_max && family >= 1001 &&
                 (uint64_t)family <= g_cfg.apple_family_max) || forced(family);
    if (!raise)
        return stock;
    report_changed(Q_SUPPORTS, (long long)family, 0, 1);
    return YES;
}

static capshim_nsuint answer_size(struct slot *s, id self, SEL sel, int query)
{
    if (!atomic_load_explicit(&s->ready, memory_order_acquire))
        return 0;
    size_fn orig = query == Q_THREADGROUP ? s->threadgroup : s->working_set;
    if (orig == NULL)
        return 0;
    capshim_nsuint stock = orig(self, sel);
    uint64_t want = query == Q_THREADGROUP ? g_cfg.threadgroup_memory : g_cfg.working_set;
    if ((uint64_t)stock >= want)
        return stock;
    report_changed(query, 0, stock, want);
    return (capshim_nsuint)want;
}

/* The C string of an NSString (or of the stand-in's string), or NULL. */
static const char *utf8_of(id s)
{
    if (s == nil)
        return NULL;
    Class c = object_getClass(s);
    SEL sel = sel_registerName("UTF8String");
    if (c == Nil || !class_respondsToSelector(c, sel))
        return NULL;
    utf8_fn f = (utf8_fn)(generic_fn)class_getMethodImplementation(c, sel);
    return f ? f(s, sel) : NULL;
}

/* Makes g_name_object once: [[NSString alloc] initWithUTF8String:name], +1, never
 * released. Every step is checked; any missing one leaves it nil. */
static void make_name_object(void)
{
    Class cls = objc_lookUpClass("NSString");
    Class meta = cls ? object_getClass((id)cls) : Nil;
    SEL alloc_sel = sel_registerName("alloc"), init_sel = sel_registerName("initWithUTF8String:");
    if (meta == Nil || !class_respondsToSelector(meta, alloc_sel))
        return;
    name_fn alloc = (name_fn)(generic_fn)class_getMethodImplementation(meta, alloc_sel);
    id obj = alloc ? alloc((id)cls, alloc_sel) : nil;
    Class oc = obj ? object_getClass(obj) : Nil;
    if (oc == Nil || !class_respondsToSelector(oc, init_sel))
        return;
    init_utf8_fn init = (init_utf8_fn)(generic_fn)class_getMethodImplementation(oc, init_sel);
    id s = init ? init(obj, init_sel, g_cfg.device_name) : nil;
    const char *back = utf8_of(s);
    if (back != NULL && strcmp(back, g_cfg.device_name) == 0)
        g_name_object = s;
}

static id answer_name(struct slot *s, id self, SEL sel)
{
    if (!atomic_load_explicit(&s->ready, memory_order_acquire) || s->name == NULL)
        return nil;
    id stock = s->name(self, sel);
    const char *was = utf8_of(stock);
    if (g_name_object == nil || (was != NULL && strcmp(was, g_cfg.device_name) == 0))
        return stock;
    if (g_has_status && !atomic_exchange(&g_name_logged, 1)) {
        struct capshim_json j;
        event_begin(&j, "changed");
        capshim_json_str(&j, "query", g_query_names[Q_NAME]);
        capshim_json_str(&j, "key", "");
        capshim_json_str(&j, "stock", was ? was : "");
        capshim_json_str(&j, "reported", g_cfg.device_name);
        capshim_json_end_and_write(&j);
    }
    return g_name_object;
}

/* One set of replacement functions per slot, so that each knows its own
 * originals (no lookup by class at call time, and classes that inherit from
 * one another each reach their own original). */
#define DEFINE_SLOT(i)                                                                  \
    static BOOL hook_supports_##i(id self, SEL sel, capshim_nsint family)               \
    { return answer_supports(&g_slots[i], self, sel, family); }                          \
    static capshim_nsuint hook_threadgroup_##i(id self, SEL sel)                        \
    { return answer_size(&g_slots[i], self, sel, Q_THREADGROUP); }                       \
    static capshim_nsuint hook_working_set_##i(id self, SEL sel)                        \
    { return answer_size(&g_slots[i], self, sel, Q_WORKING_SET); }                       \
    static id hook_name_##i(id self, SEL sel)                                           \
    { return answer_name(&g_slots[i], self, sel); }
DEFINE_SLOT(0) DEFINE_SLOT(1) DEFINE_SLOT(2) DEFINE_SLOT(3)
DEFINE_SLOT(4) DEFINE_SLOT(5) DEFINE_SLOT(6) DEFINE_SLOT(7)
#define SLOT_HOOKS(i) {AS_IMP(hook_supports_##i), AS_IMP(hook_threadgroup_##i), AS_IMP(hook_working_set_##i), \
                       AS_IMP(hook_name_##i)}
static IMP g_hooks[MAX_SLOTS][Q_COUNT];

static void init_hook_table(void)
{
    IMP t[MAX_SLOTS][Q_COUNT] = {SLOT_HOOKS(0), SLOT_HOOKS(1), SLOT_HOOKS(2), SLOT_HOOKS(3),
                           SLOT_HOOKS(4), SLOT_HOOKS(5), SLOT_HOOKS(6), SLOT_HOOKS(7)};
    memcpy(g_hooks, t, sizeof t);
}

static int is_our_hook(IMP imp)
{
    for (size_t i = 0; i < MAX_SLOTS; i++)
        for (size_t q = 0; q < Q_COUNT; q++)
            if (g_hooks[i][q] == imp)
                return 1;
    return 0;
}

/* ---- patching ------------------------------------------------------------ */

static void hooks_event(const char *path, Class cls, const char *const *installed,
                        size_t n_installed, const char *const *missing, size_t n_missing,
                        const char *reason)
{
    const char *cname = cls ? class_getName(cls) : "";
    struct capshim_json j;
    event_begin(&j, "hooks");
    capshim_json_str(&j, "path", path);
    capshim_json_str(&j, "class", cname ? cname : "");
    capshim_json_str_array(&j, "installed", installed, n_installed);
    capshim_json_str_array(&j, "missing", missing, n_missing);
    if (reason != NULL)
        capshim_json_str(&j, "reason", reason);
    capshim_json_end_and_write(&j);
}

static int class_known(Class cls)
{
    size_t n = atomic_load_explicit(&g_nslots, memory_order_acquire);
    for (size_t i = 0; i < n; i++)
        if (g_slots[i].cls == cls)
            return 1;
    for (size_t i = 0; i < g_nfailed; i++)
        if (g_failed[i] == cls)
            return 1;
    return 0;
}

/* Replaces sel on cls with hook; an inherited method gets a new method on cls
 * (class_addMethod) so that the superclass and its other subclasses keep
 * their answers. Returns the original, or NULL on failure. */
static IMP install(Class cls, SEL sel, Method m, IMP hook)
{
    IMP orig = method_getImplementation(m);
    Class super = class_getSuperclass(cls);
    Method inherited = super ? class_getInstanceMethod(super, sel) : NULL;
    if (inherited == m) {
        const char *types = method_getTypeEncoding(m);
        if (types == NULL || !class_addMethod(cls, sel, hook, types))
            return NULL;
        return orig;
    }
    (void)method_setImplementation(m, hook);
    return orig;
}

static void restore(Class cls, SEL sel, IMP orig)
{
    Method m = class_getInstanceMethod(cls, sel);
    if (m != NULL && orig != NULL)
        (void)method_setImplementation(m, orig);
}

static void patch_class(Class cls, const char *path)
{
    if (cls == Nil || !g_cfg.accepted)
        return;
    if (g_cfg.has_device_name) /* outside g_lock: it runs Foundation's code */
        (void)pthread_once(&g_name_once, make_name_object);
    pthread_mutex_lock(&g_lock);
    if (class_known(cls)) {
        pthread_mutex_unlock(&g_lock);
        return;
    }
    const char *cname = class_getName(cls);
    if (cname == NULL)
        cname = "?";
    const char *const *selnames = g_query_names;
    /* A name that could not be made into an NSString is not hooked: the
     * device's own name stays, and the hooks event says why (below). */
    int wanted[Q_COUNT] = {g_cfg.has_apple_family_max || g_cfg.n_forced > 0,
                           g_cfg.has_threadgroup_memory, g_cfg.has_working_set,
                           g_cfg.has_device_name && g_name_object != nil};
    int todo[Q_COUNT] = {0, 0, 0, 0};
    char names[Q_COUNT][200];
    const char *installed[Q_COUNT + 1], *missing[Q_COUNT];
    size_t n_inst = 0, n_miss = 0, n_todo = 0;
    Method methods[Q_COUNT] = {NULL, NULL, NULL, NULL};
    SEL sels[Q_COUNT];
    for (int q = 0; q < Q_COUNT; q++) {
        sels[q] = sel_registerName(selnames[q]);
        if (!wanted[q])
            continue;
        methods[q] = class_getInstanceMethod(cls, sels[q]);
        if (methods[q] == NULL) {
            (void)snprintf(names[q], sizeof names[q], "-[%s %s]", cname, selnames[q]);
            missing[n_miss++] = names[q];
        } else if (!is_our_hook(method_getImplementation(methods[q]))) {
            todo[q] = 1; /* otherwise inherited from a class patched already */
            n_todo++;
        }
    }
    size_t idx = atomic_load_explicit(&g_nslots, memory_order_relaxed);
    const char *reason = NULL;
    if (n_miss > 0)
        reason = "required methods are missing; answers stay stock";
    else if (n_todo > 0 && idx >= MAX_SLOTS)
        reason = "too many device classes (8 at most)";
    else if (n_todo == 0 && g_cfg.has_device_name && g_name_object == nil)
        reason = "no NSString could be made of the device name; the name stays stock";
    if (reason != NULL || n_todo == 0) {
        /* Remembered so that it is examined (and reported) once. A class
         * with nothing to do inherits every hook from a patched class. */
        if (g_nfailed < MAX_SEEN)
            g_failed[g_nfailed++] = cls;
        pthread_mutex_unlock(&g_lock);
        if (reason != NULL)
            hooks_event(path, cls, installed, 0, missing, n_miss, reason);
        return;
    }
    /* The slot is filled and marked ready before any hook is reachable, so
     * a thread that calls a hook while the others are still being installed
     * already reaches the originals (never a NO or a 0 below stock). The
     * slot is taken for good, even when an installation fails below, so
     * that a call already inside a hook keeps its originals. */
    struct slot *s = &g_slots[idx];
    s->cls = cls;
    s->supports = todo[Q_SUPPORTS] ? (supports_fn)(generic_fn)method_getImplementation(methods[Q_SUPPORTS]) : NULL;
    s->threadgroup = todo[Q_THREADGROUP] ? (size_fn)(generic_fn)method_getImplementation(methods[Q_THREADGROUP]) : NULL;
    s->working_set = todo[Q_WORKING_SET] ? (size_fn)(generic_fn)method_getImplementation(methods[Q_WORKING_SET]) : NULL;
    s->name = todo[Q_NAME] ? (name_fn)(generic_fn)method_getImplementation(methods[Q_NAME]) : NULL;
    atomic_store_explicit(&s->ready, 1, memory_order_release);
    atomic_store_explicit(&g_nslots, idx + 1, memory_order_release);
    IMP origs[Q_COUNT] = {NULL, NULL, NULL, NULL};
    int done[Q_COUNT] = {0, 0, 0, 0};
    int ok = 1;
    for (int q = 0; q < Q_COUNT && ok; q++) {
        if (!todo[q])
            continue;
        origs[q] = install(cls, sels[q], methods[q], g_hooks[idx][q]);
        done[q] = origs[q] != NULL;
        ok = done[q];
    }
    if (!ok) {
        for (int q = 0; q < Q_COUNT; q++)
            if (done[q])
                restore(cls, sels[q], origs[q]);
        if (g_nfailed < MAX_SEEN)
            g_failed[g_nfailed++] = cls;
        pthread_mutex_unlock(&g_lock);
        hooks_event(path, cls, installed, 0, missing, 0,
                    "the runtime refused a method replacement; answers stay stock");
        return;
    }
    int first = !g_banner_done;
    g_banner_done = 1;
    pthread_mutex_unlock(&g_lock);

    if (g_path1)
        installed[n_inst++] = "-[_MTLDevice initGPUFamilySupport]";
    for (int q = 0; q < Q_COUNT; q++) {
        if (!todo[q])
            continue;
        (void)snprintf(names[q], sizeof names[q], "-[%s %s]", cname, selnames[q]);
        installed[n_inst++] = names[q];
    }
    hooks_event(path, cls, installed, n_inst, missing, 0,
                g_cfg.has_device_name && g_name_object == nil
                    ? "no NSString could be made of the device name; the name stays stock" : NULL);
    if (first)
        banner();
}

static void hook_init_gpu_family_support(id self, SEL sel)
{
    if (self != nil)
        patch_class(object_getClass(self), "initGPUFamilySupport");
    if (g_orig_init != NULL)
        g_orig_init(self, sel);
}

/* Path 2: called with each device MTLCreateSystemDefaultDevice or
 * MTLCopyAllDevices returned, when the entry hook could not be installed. */
static void after_create(id device)
{
    if (device != nil && !g_path1 && g_cfg.accepted)
        patch_class(object_getClass(device), "MTLCreateSystemDefaultDevice");
}

static void after_copy_all(id array)
{
    if (array == nil || g_path1 || !g_cfg.accepted)
        return;
    Class ac = object_getClass(array);
    SEL count_sel = sel_registerName("count");
    SEL at_sel = sel_registerName("objectAtIndex:");
    if (!class_respondsToSelector(ac, count_sel) || !class_respondsToSelector(ac, at_sel))
        return;
    typedef capshim_nsuint (*count_fn)(id, SEL);
    typedef id (*at_fn)(id, SEL, capshim_nsuint);
    count_fn count = (count_fn)(generic_fn)class_getMethodImplementation(ac, count_sel);
    at_fn at = (at_fn)(generic_fn)class_getMethodImplementation(ac, at_sel);
    if (count == NULL || at == NULL)
        return;
    capshim_nsuint n = count(array, count_sel);
    for (capshim_nsuint i = 0; i < n && i < 64; i++)
        after_create(at(array, at_sel, i));
}

#if defined(__APPLE__)
/* dyld interposing: calls from every other image reach these; calls from
 * this image reach Metal's own functions. Nothing is exported. */
extern id MTLCreateSystemDefaultDevice(void);
extern id MTLCopyAllDevices(void);

static id capshim_create_default(void)
{
    id d = MTLCreateSystemDefaultDevice();
    after_create(d);
    return d;
}

static id capshim_copy_all(void)
{
    id a = MTLCopyAllDevices();
    after_copy_all(a);
    return a;
}

struct interpose { const void *replacement; const void *replacee; };
__attribute__((used, section("__DATA,__interpose"))) static const struct interpose
    g_interpose[] = {
        {(const void *)(uintptr_t)&capshim_create_default, (const void *)(uintptr_t)&MTLCreateSystemDefaultDevice},
        {(const void *)(uintptr_t)&capshim_copy_all, (const void *)(uintptr_t)&MTLCopyAllDevices},
};
#else
/* LD_PRELOAD interposition (Linux tests): these two names are the only
 * symbols this library exports. */
typedef id (*create_fn)(void);

/* The next definition in lookup order (the framework's). Looked up again
 * until found: the framework may be loaded after this library. */
static create_fn real_fn(_Atomic(create_fn) *cache, const char *name)
{
    create_fn f = atomic_load_explicit(cache, memory_order_acquire);
    if (f == NULL) {
        f = (create_fn)(generic_fn)dlsym(RTLD_NEXT, name);
        if (f != NULL)
            atomic_store_explicit(cache, f, memory_order_release);
    }
    return f;
}

static _Atomic(create_fn) g_real_create, g_real_copy_all;

__attribute__((visibility("default"))) id MTLCreateSystemDefaultDevice(void);
__attribute__((visibility("default"))) id MTLCopyAllDevices(void);

id MTLCreateSystemDefaultDevice(void)
{
    create_fn real = real_fn(&g_real_create, "MTLCreateSystemDefaultDevice");
    if (real == NULL)
        return nil;
    id d = real();
    after_create(d);
    return d;
}

id MTLCopyAllDevices(void)
{
    create_fn real = real_fn(&g_real_copy_all, "MTLCopyAllDevices");
    if (real == NULL)
        return nil;
    id a = real();
    after_copy_all(a);
    return a;
}
#endif

/* ---- load ---------------------------------------------------------------- */

static const char *env_lookup(const char *name, void *ctx)
{
    (void)ctx;
    return getenv(name);
}

static int same_file(const char *a, const struct stat *b)
{
    struct stat sa;
    return a[0] != '\0' && stat(a, &sa) == 0 && sa.st_dev == b->st_dev && sa.st_ino == b->st_ino;
}

/* Removes this library's entries from INJECT_VAR. Returns 1 when changed. */
static int scrub_injection(void)
{
    const char *v = getenv(INJECT_VAR);
    Dl_info info;
    struct stat self_st;
    if (v == NULL || dladdr((const void *)(uintptr_t)&scrub_injection, &info) == 0 ||
        info.dli_fname == NULL || stat(info.dli_fname, &self_st) != 0)
        return 0;
    size_t n = strlen(v);
    if (n >= 8192)
        return 0;
    char copy[8192], out[8192], item[PATH_MAX];
    memcpy(copy, v, n + 1);
    size_t olen = 0;
    int changed = 0;
    const char *p = copy;
    while (*p != '\0') {
        size_t k = strcspn(p, INJECT_VAR[0] == 'L' ? ": " : ":");
        if (k > 0 && k < sizeof item) {
            memcpy(item, p, k);
            item[k] = '\0';
            if (same_file(item, &self_st) || strcmp(item, info.dli_fname) == 0) {
                changed = 1;
            } else {
                if (olen > 0)
                    out[olen++] = ':';
                memcpy(out + olen, item, k);
                olen += k;
            }
        } else if (k > 0) {
            if (olen > 0)
                out[olen++] = ':';
            memcpy(out + olen, p, k);
            olen += k;
        }
        p += k;
        if (*p != '\0')
            p++;
    }
    out[olen] = '\0';
    if (!changed)
        return 0;
    if (olen == 0)
        (void)unsetenv(INJECT_VAR);
    else
        (void)setenv(INJECT_VAR, out, 1);
    return 1;
}

static void scrub_environment(int inherit)
{
    const char *names[16];
    size_t n = 0;
    if (inherit) {
        if (getenv(INJECT_VAR) != NULL)
            names[n++] = INJECT_VAR;
    } else if (scrub_injection()) {
        names[n++] = INJECT_VAR;
    }
    for (size_t i = 0; capshim_metal_config_names[i] != NULL && n < 16; i++) {
        if (getenv(capshim_metal_config_names[i]) == NULL)
            continue;
        if (!inherit)
            (void)unsetenv(capshim_metal_config_names[i]);
        names[n++] = capshim_metal_config_names[i];
    }
    struct capshim_json j;
    event_begin(&j, inherit ? "env_inherited" : "env_scrubbed");
    capshim_json_str_array(&j, "variables", names, n);
    capshim_json_end_and_write(&j);
}

static void read_process_name(void)
{
#if defined(__APPLE__)
    const char *name = getprogname();
#else
    const char *name = program_invocation_short_name;
#endif
    size_t o = 0;
    for (size_t i = 0; name != NULL && name[i] != '\0' && o + 1 < sizeof g_process; i++) {
        unsigned char c = (unsigned char)name[i];
        g_process[o++] = (c >= 0x20 && c < 0x7f) ? (char)c : '?';
    }
    g_process[o] = '\0';
}

static int flag_set(const char *name)
{
    const char *v = getenv(name);
    return v != NULL && strcmp(v, "1") == 0;
}

__attribute__((constructor)) static void capshim_metal_load(void)
{
    init_hook_table();
    read_process_name();
    const char *status = getenv("CAPSHIM_STATUS_FILE");
    g_has_status = status != NULL && status[0] != '\0';
    g_quiet = flag_set("CAPSHIM_QUIET");
    int inherit = flag_set("CAPSHIM_INHERIT");

    struct capshim_json j;
    event_begin(&j, "loaded");
    capshim_json_str(&j, "process", g_process);
    capshim_json_str(&j, "runtime", RUNTIME_NAME);
    capshim_json_str(&j, "version", CAPSHIM_VERSION_STRING);
    capshim_json_end_and_write(&j);

    capshim_metal_config_parse(env_lookup, NULL, &g_cfg);
    event_begin(&j, "config");
    capshim_json_bool(&j, "accepted", g_cfg.accepted);
    if (g_cfg.accepted) {
        char values[2048]; /* 16 numbers and a name of 255 bytes, each escaped as \u00XX at worst */
        size_t vlen = 0;
        values[0] = '\0';
        if (capshim_metal_config_json(&g_cfg, values, sizeof values, &vlen) == 0)
            capshim_json_raw(&j, "values", values);
        else
            capshim_json_raw(&j, "values", "null"); /* cannot happen: 16 numbers fit */
    } else {
        capshim_json_str(&j, "reason", g_cfg.reason);
    }
    capshim_json_end_and_write(&j);
    if (!g_cfg.accepted) {
        char msg[CAPSHIM_REASON_LEN + sizeof g_process + 96];
        (void)snprintf(msg, sizeof msg,
                       "capshim-metal: inactive in %s[%ld]: %s; answers stay stock\n",
                       g_process, (long)getpid(), g_cfg.reason);
        stderr_line(msg);
    }

    scrub_environment(inherit);

    if (!g_cfg.accepted)
        return;
    Class base = objc_lookUpClass("_MTLDevice");
    Method m = base ? class_getInstanceMethod(base, sel_registerName("initGPUFamilySupport")) : NULL;
    if (m != NULL) {
        g_orig_init = (init_fn)(generic_fn)method_getImplementation(m);
        (void)method_setImplementation(m, AS_IMP(hook_init_gpu_family_support));
        g_path1 = 1;
    } else {
        const char *missing[1] = {base ? "-[_MTLDevice initGPUFamilySupport]" : "_MTLDevice"};
        hooks_event("initGPUFamilySupport", Nil, missing, 0, missing, 1,
                    "entry hook unavailable; patching devices from MTLCreateSystemDefaultDevice");
    }
}

/* capshim CUDA shim: a lower-only capability shim for one process (issue 22).
 *
 * LD_PRELOADed (capshim run --profile P, api "cuda"). It exports the runtime's
 * and the driver's query entry points (cuda_hooks.c) and dlsym, lets each real
 * call run first and lowers the answer only when it succeeded. Lower-only: an
 * answer is min(device, profile), never more than the device has (the device's
 * real kernels must still run).
 *
 * Configuration (one spelling per source):
 *   CAPSHIM_CUDA_CONFIG   path of a key=value file, parsed by the Vulkan layer's
 *                         strict parser (native/common/config.c) with the CUDA
 *                         keyspec (cuda_table.h): direction=lower (required;
 *                         raise is refused), profile=NAME, deviceName=PCT-ENCODED,
 *                         KEY=NUMBER; extension.* is refused.
 *   CAPSHIM_STATUS_FILE   JSON-lines status events (native/common/status.h), shim "cuda"
 *   CAPSHIM_QUIET=1       no stderr banner
 *   CAPSHIM_TARGET_PID    set by `capshim run`: a process with another pid stays stock
 *   CAPSHIM_CUDA_SUBSTITUTE=0  a diagnostic: the exported names alone; dlsym and the
 *                         entry-point getters hand out the real functions (to tell
 *                         which path a library's trouble comes from)
 *   CAPSHIM_TEMPLATE_FD   set when a process template starts (capshim.bench.workloads.
 *                         template): that process stays stock and decides nothing; each
 *                         child it forks decides at its first entry point, from its own
 *                         environment (its pid as CAPSHIM_TARGET_PID, its run's
 *                         configuration and status file), as a plain process does at load
 *   CAPSHIM_INHERIT=1     ... unless this is set. Without it the target removes the
 *                         shim from LD_PRELOAD and the configuration variable
 *                         (env_scrubbed) when it reaches its first CUDA entry point,
 *                         so its children start stock; a wrapper that execs the real
 *                         program in the same pid (a pyenv shim) reaches none and
 *                         hands the shim on.
 * Which real function each wrapper calls: cuda_resolve.c (per caller, or bound).
 * Anything unexpected (no configuration, a bad one, a struct whose layout does
 * not check out, a real function that is missing) leaves the answers stock and
 * is reported; the shim never aborts or blocks the host process.
 */
#define _GNU_SOURCE
#include "cuda_shim.h"

#include <dlfcn.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "config.h"
#include "cuda_table.h"
#include "status.h"

#ifndef CAPSHIM_VERSION_STRING /* capshim's version: the build passes it (capshim.native.build.VERSION_DEFINE) */
#error "CAPSHIM_VERSION_STRING is not defined: build with capshim (capshim build), which passes it"
#endif

_Static_assert(CAPSHIM_CUDA_NAME_SIZE == CAPSHIM_DEVICE_NAME_MAX, "cudaDeviceProp.name and config.h's buffer");

const char *const capshim_cuda_entry_names[E_COUNT] = {
    "cudaGetDeviceProperties", "cudaGetDeviceProperties_v2", "cudaDeviceGetAttribute", "cudaGetDriverEntryPoint",
    "cudaGetDriverEntryPoint_ptsz", "cudaGetDriverEntryPointByVersion", "cudaGetDriverEntryPointByVersion_ptsz",
    "cuDeviceGetAttribute", "cuDeviceGetName", "cuDeviceComputeCapability", "cuDeviceGetProperties",
    "cuGetProcAddress", "cuGetProcAddress_v2",
};

#define CONFIG_VAR "CAPSHIM_CUDA_CONFIG"
#define MAX_CHANGES 256

#define KEYSPEC(key, type) {#key, type},
static const struct capshim_keyspec keyspecs[] = {CAPSHIM_CUDA_KEYS(KEYSPEC)};
#define NKEYSPECS (sizeof keyspecs / sizeof keyspecs[0])

enum { STATE_OFF = 0, STATE_ACTIVE = 1, STATE_SKIPPED = 2 };

static pthread_once_t init_once = PTHREAD_ONCE_INIT;
static int g_state;                 /* written once, inside init_once */
static int g_scope;                 /* 1: the target or inherit: env_scrubbed / env_inherited due */
static int g_inherit;
static int g_no_substitute;         /* CAPSHIM_CUDA_SUBSTITUTE=0 */
static int g_pinned;                /* the target of CAPSHIM_TARGET_PID: a fork()ed child stays stock */
static pid_t g_pid;
static pid_t g_template_pid;        /* loaded into a process template (CAPSHIM_TEMPLATE_FD): its pid */
static struct capshim_config g_cfgs[CAPSHIM_MAX_CONFIGS]; /* idem */
static const char *g_paths[CAPSHIM_MAX_CONFIGS];           /* their files (read_config's list) */
static size_t g_ncfg;
static atomic_uint g_reached;      /* bit per entry point called */
static atomic_uint g_substituted;  /* bit per entry point handed out in place of the real one */
static atomic_int g_hooks_done;
static __thread int t_depth;        /* wrappers on this thread's stack */

static pthread_mutex_t g_lock = PTHREAD_MUTEX_INITIALIZER;
static struct change {
    const char *query;
    const char *key;
    uint64_t stock, reported;
    int device;
} g_changes[MAX_CHANGES];
static size_t g_nchanges;
static unsigned g_mismatch_seen; /* bit per (query, layout) already reported */

static void event_begin(struct capshim_json *j, const char *event) { capshim_json_begin(j, event, "cuda", NULL); }

static int flag_set(const char *name) {
    const char *v = getenv(name);
    return v != NULL && strcmp(v, "1") == 0;
}

static void stderr_line(const char *line) {
    if (flag_set("CAPSHIM_QUIET")) return;
    ssize_t w = write(STDERR_FILENO, line, strlen(line));
    (void)w;
}

/* ---- configuration -------------------------------------------------------- */

static void config_rejected(const char *source, const char *reason) {
    struct capshim_json j;
    event_begin(&j, "config");
    capshim_json_bool(&j, "accepted", 0);
    capshim_json_str(&j, "source", source);
    capshim_json_str(&j, "reason", reason);
    capshim_json_end_and_write(&j);
    char line[512];
    snprintf(line, sizeof line, "capshim-cuda: inactive in %s[%ld]: %s; answers stay stock\n",
             capshim_process_name(), (long)getpid(), reason);
    stderr_line(line);
}

/* Reads and checks one configuration file into cfg; 0 when accepted (else rejected, reported). */
static int read_one(const char *path, struct capshim_config *cfg) {
    static char buf[CAPSHIM_CONFIG_MAX_BYTES + 1];
    char err[256];
    int fd = capshim_open_regular(path, err, sizeof err);
    if (fd < 0) {
        config_rejected(path, err);
        return -1;
    }
    size_t n = 0;
    while (n < sizeof buf) {
        ssize_t got = read(fd, buf + n, sizeof buf - n);
        if (got <= 0) break;
        n += (size_t)got;
    }
    close(fd);
    if (capshim_config_parse(buf, n, keyspecs, NKEYSPECS, cfg, err, sizeof err) != 0) {
        config_rejected(path, err);
        return -1;
    }
    const char *why = NULL;
    const struct capshim_value *cc = capshim_config_value(cfg, "computeCapability");
    if (cfg->direction != CAPSHIM_LOWER)
        why = "direction 'raise': the CUDA shim is lower-only (the device's real kernels must still run)";
    else if (cfg->nexts != 0)
        why = "extension.* keys: CUDA has no extensions to hide or add";
    else if (cc != NULL && (cc->value < 10 || cc->value > 999))
        why = "key 'computeCapability': not major * 10 + minor in 10..999";
    static char zero[128];
    for (size_t i = 0; why == NULL && i < cfg->nvalues; i++) {
        if (cfg->values[i].value != 0) continue;
        snprintf(zero, sizeof zero, "key '%s': 0: no CUDA device answers 0 (at least 1)", cfg->values[i].key);
        why = zero;
    }
    if (why != NULL) {
        memset(cfg, 0, sizeof *cfg);
        config_rejected(path, why);
        return -1;
    }
    return 0;
}

/* Why configuration k (of g_ncfg) cannot sit beside the others, or NULL: with several, each names
 * its devices, and no device index is named by two. */
static const char *clash(size_t k) {
    if (g_ncfg > 1 && g_cfgs[k].ndevices == 0) return "several configurations: each needs a devices= key";
    for (size_t o = 0; o < k; o++)
        for (size_t a = 0; a < g_cfgs[k].ndevices; a++)
            for (size_t b = 0; b < g_cfgs[o].ndevices; b++) {
                const struct capshim_device_spec *x = &g_cfgs[k].devices[a], *y = &g_cfgs[o].devices[b];
                if (x->is_uuid == y->is_uuid &&
                    (x->is_uuid ? memcmp(x->uuid, y->uuid, CAPSHIM_UUID_BYTES) == 0 : x->index == y->index))
                    return "a device named by two configurations";
            }
    return NULL;
}

void capshim_cuda_clash(size_t a, size_t b, const char *device) {
    static atomic_ullong said; /* bit per pair of configurations already reported */
    unsigned long long bit = 1ull << (a * CAPSHIM_MAX_CONFIGS + b);
    if (a >= g_ncfg || b >= g_ncfg || (atomic_fetch_or(&said, bit) & bit) != 0) return;
    char reason[1024];
    snprintf(reason, sizeof reason,
             "a device named by two configurations: device %s by %s and by %s; it answers stock", device,
             g_paths[a], g_paths[b]);
    const char *both[2] = {g_paths[a], g_paths[b]};
    struct capshim_json j;
    event_begin(&j, "config");
    capshim_json_bool(&j, "accepted", 0);
    capshim_json_str(&j, "source", g_paths[b]);
    capshim_json_str(&j, "reason", reason);
    capshim_json_str_array(&j, "sources", both, 2);
    capshim_json_str(&j, "device", device);
    capshim_json_end_and_write(&j);
    char line[1200];
    snprintf(line, sizeof line, "capshim-cuda: %s[%ld]: %s\n", capshim_process_name(), (long)getpid(), reason);
    stderr_line(line);
}

static void config_accepted(const char *path, const struct capshim_config *cfg) {
    struct capshim_json j;
    event_begin(&j, "config");
    capshim_json_bool(&j, "accepted", 1);
    capshim_json_str(&j, "source", path);
    capshim_json_str(&j, "direction", "lower");
    if (cfg->profile[0] != '\0') capshim_json_str(&j, "profile", cfg->profile);
    capshim_json_u64(&j, "values", cfg->nvalues);
    capshim_json_bool(&j, "device_name", cfg->device_name[0] != '\0');
    char texts[CAPSHIM_MAX_DEVICE_SPECS][CAPSHIM_SPEC_TEXT_MAX];
    const char *specs[CAPSHIM_MAX_DEVICE_SPECS];
    size_t n = capshim_device_specs(cfg, texts, specs);
    if (n > 0) capshim_json_str_array(&j, "devices", specs, n);
    capshim_json_end_and_write(&j);
}

/* Reads and checks the configurations (CONFIG_VAR: up to CAPSHIM_MAX_CONFIGS paths separated by
 * ':'); returns 0 when every one is accepted (g_cfgs, g_ncfg filled), else -1, all inert. */
static int read_config(void) {
    const char *value = getenv(CONFIG_VAR);
    if (value == NULL || value[0] == '\0') {
        config_rejected(CONFIG_VAR, CONFIG_VAR " is not set");
        return -1;
    }
    static char list[8192];
    const char **paths = g_paths;
    char err[256];
    int n = capshim_config_paths(value, list, sizeof list, paths, err, sizeof err);
    if (n < 0) {
        config_rejected(CONFIG_VAR, err);
        return -1;
    }
    g_ncfg = (size_t)n;
    for (size_t k = 0; k < g_ncfg; k++) {
        const char *why = read_one(paths[k], &g_cfgs[k]) != 0 ? "" : clash(k);
        if (why != NULL) {
            if (why[0] != '\0') config_rejected(paths[k], why);
            memset(g_cfgs, 0, sizeof g_cfgs);
            g_ncfg = 0;
            return -1;
        }
    }
    for (size_t k = 0; k < g_ncfg; k++) config_accepted(paths[k], &g_cfgs[k]);
    return 0;
}

/* ---- process scope ---------------------------------------------------------- */

static int same_file(const char *path, const struct stat *b) {
    struct stat sa;
    return path[0] != '\0' && stat(path, &sa) == 0 && sa.st_dev == b->st_dev && sa.st_ino == b->st_ino;
}

/* Removes this library from LD_PRELOAD (entries separated by ':' or ' ', ld.so(8)).
 * Returns 1 when it was there. */
static int scrub_preload(void) {
    const char *v = getenv("LD_PRELOAD");
    Dl_info info;
    struct stat self;
    if (v == NULL || dladdr((const void *)(uintptr_t)&scrub_preload, &info) == 0 || info.dli_fname == NULL ||
        stat(info.dli_fname, &self) != 0)
        return 0;
    size_t n = strlen(v);
    if (n >= 8192) return 0;
    char out[8192], item[4096];
    size_t olen = 0;
    int changed = 0;
    for (const char *p = v; *p != '\0';) {
        size_t k = strcspn(p, ": ");
        int mine = 0;
        if (k > 0 && k < sizeof item) {
            memcpy(item, p, k);
            item[k] = '\0';
            mine = same_file(item, &self) || strcmp(item, info.dli_fname) == 0;
        }
        if (mine) {
            changed = 1;
        } else if (k > 0) {
            if (olen > 0) out[olen++] = ':';
            memcpy(out + olen, p, k);
            olen += k;
        }
        p += k;
        if (*p != '\0') p++;
    }
    out[olen] = '\0';
    if (!changed) return 0;
    if (olen == 0)
        (void)unsetenv("LD_PRELOAD");
    else
        (void)setenv("LD_PRELOAD", out, 1);
    return 1;
}

static void scope_event(int inherit) {
    const char *names[2];
    size_t n = 0;
    if (inherit) {
        if (getenv("LD_PRELOAD") != NULL) names[n++] = "LD_PRELOAD";
        if (getenv(CONFIG_VAR) != NULL) names[n++] = CONFIG_VAR;
    } else {
        if (scrub_preload()) names[n++] = "LD_PRELOAD";
        if (getenv(CONFIG_VAR) != NULL) {
            (void)unsetenv(CONFIG_VAR);
            names[n++] = CONFIG_VAR;
        }
    }
    struct capshim_json j;
    event_begin(&j, inherit ? "env_inherited" : "env_scrubbed");
    capshim_json_str_array(&j, "variables", names, n);
    capshim_json_end_and_write(&j);
}

static void init_once_fn(void) {
    struct capshim_json j;
    event_begin(&j, "loaded");
    capshim_json_str(&j, "process", capshim_process_name());
    capshim_json_str(&j, "version", CAPSHIM_VERSION_STRING);
    capshim_json_end_and_write(&j);
    const char *target = getenv("CAPSHIM_TARGET_PID");
    int inherit = flag_set("CAPSHIM_INHERIT");
    uint64_t pid = 0;
    int is_target = target != NULL && capshim_parse_u64(target, &pid) == 0 && pid == (uint64_t)getpid();
    if (target != NULL && !is_target && !inherit) {
        g_state = STATE_SKIPPED;
        event_begin(&j, "skipped");
        capshim_json_str(&j, "process", capshim_process_name());
        capshim_json_str(&j, "reason",
                         "child of the launched process (CAPSHIM_TARGET_PID); run with --inherit to shim children");
        capshim_json_end_and_write(&j);
        (void)scrub_preload();
        return;
    }
    if (read_config() == 0) g_state = STATE_ACTIVE;
    const char *sub = getenv("CAPSHIM_CUDA_SUBSTITUTE");
    g_no_substitute = sub != NULL && strcmp(sub, "0") == 0;
    /* The environment is scrubbed (or said inherited) at the first entry point reached, not
     * here: a program that execs another in the same pid (a wrapper script such as a pyenv
     * shim, `env`, `nice`) must hand the shim on. Without a target pid and without inherit
     * (LD_PRELOAD set by hand) the environment is left as it is. */
    g_scope = is_target || inherit;
    g_inherit = inherit;
    g_pinned = is_target && !inherit;
    g_pid = getpid();
}

void capshim_cuda_init(void) { (void)pthread_once(&init_once, init_once_fn); }

const struct capshim_config *capshim_cuda_configs(size_t *n) {
    *n = g_ncfg;
    return g_cfgs;
}

int capshim_cuda_active(void) {
    /* The template itself never decides (its children do, after the fork, from their own
     * environment): it makes no CUDA call, and the bench checks that it loaded no libcuda. */
    if (g_template_pid != 0 && getpid() == g_template_pid) return 0;
    capshim_cuda_init();
    return g_state == STATE_ACTIVE && !(g_pinned && getpid() != g_pid);
}

#define TEMPLATE_VAR "CAPSHIM_TEMPLATE_FD" /* capshim.bench.workloads.template.FD_VAR */

__attribute__((constructor)) static void capshim_cuda_load(void) {
    if (getenv(TEMPLATE_VAR) != NULL) {
        g_template_pid = getpid(); /* the decision waits for a forked child's first entry point */
        /* Said all the same: a report must never call a loaded shim "never loaded" (a stray
         * CAPSHIM_TEMPLATE_FD in a plain process keeps it stock: the event says why). */
        struct capshim_json j;
        event_begin(&j, "loaded");
        capshim_json_str(&j, "process", capshim_process_name());
        capshim_json_str(&j, "version", CAPSHIM_VERSION_STRING);
        capshim_json_bool(&j, "template", 1);
        capshim_json_end_and_write_now(&j); /* its forked children read their own status file */
        return;
    }
    capshim_cuda_init();
}

static void names_of(unsigned bits, const char **out, size_t *n) {
    *n = 0;
    for (int e = 0; e < E_COUNT; e++)
        if (bits & (1u << e)) out[(*n)++] = capshim_cuda_entry_names[e];
}

__attribute__((destructor)) static void capshim_cuda_unload(void) {
    if (!capshim_cuda_active() || getpid() != g_pid) return;
    if (atomic_load(&g_reached) == 0 && atomic_load(&g_substituted) == 0) return;
    const char *reached[E_COUNT], *handed[E_COUNT];
    size_t nr = 0, nh = 0;
    names_of(atomic_load(&g_reached), reached, &nr);
    names_of(atomic_load(&g_substituted), handed, &nh);
    struct capshim_json j;
    event_begin(&j, "called");
    capshim_json_str_array(&j, "entry_points", reached, nr);
    capshim_json_str_array(&j, "substituted", handed, nh);
    capshim_json_end_and_write(&j);
}

/* ---- entry points ----------------------------------------------------------- */

/* On dlsym's path, which a sanitizer runtime takes while it starts (it finds the functions it
 * intercepts with dlsym): no call into libc, no instrumentation. */
CAPSHIM_NO_SANITIZE static int same_name(const char *a, const char *b) {
    while (*a != '\0' && *a == *b) {
        a++;
        b++;
    }
    return *a == *b;
}

CAPSHIM_NO_SANITIZE int capshim_cuda_entry_index(const char *name) {
    if (name == NULL || name[0] != 'c' || name[1] != 'u') return -1;
    for (int e = 0; e < E_COUNT; e++)
        if (same_name(name, capshim_cuda_entry_names[e])) return e;
    return -1;
}

CAPSHIM_NO_SANITIZE int capshim_cuda_is_wrapper(const void *fn) {
    if (fn == NULL) return 0;
    for (int e = 0; e < E_COUNT; e++) {
        if (fn == capshim_cuda_wrapper(e)) return 1;
        for (int k = 0; k < CAPSHIM_CUDA_SLOTS; k++)
            if (fn == capshim_cuda_slot(e, k)) return 1;
        for (int v = 1; v <= CAPSHIM_CUDA_LINKED; v++)
            if (fn == capshim_cuda_linked_wrapper(e, v)) return 1;
    }
    return 0;
}

void *capshim_cuda_substitute(const char *name, void *fn, int cuda_version, const char *via) {
    int e = capshim_cuda_entry_index(name);
    if (e < 0 || fn == NULL || capshim_cuda_is_wrapper(fn) || !capshim_cuda_active() || g_no_substitute) return fn;
    if (e == E_cuGetProcAddress) {
        /* One name, two ABIs: the pointer handed out is the 5-argument _v2 from CUDA 12.0
         * (cudaTypedefs.h: PFN_cuGetProcAddress_v12000) unless it is the legacy export itself. */
        void *legacy = capshim_cuda_sibling(fn, "cuGetProcAddress");
        void *v2 = capshim_cuda_sibling(fn, "cuGetProcAddress_v2");
        if (fn == v2 || (fn != legacy && cuda_version >= 12000)) e = E_cuGetProcAddress_v2;
    }
    void *bound = capshim_cuda_bind(e, fn, via);
    if (bound != fn) atomic_fetch_or(&g_substituted, 1u << e);
    return bound;
}

static void hooks_event(int first) {
    if (atomic_exchange(&g_hooks_done, 1) != 0) return;
    if (g_scope) scope_event(g_inherit);
    const char *all[E_COUNT];
    for (int e = 0; e < E_COUNT; e++) all[e] = capshim_cuda_entry_names[e];
    struct capshim_json j;
    event_begin(&j, "hooks");
    capshim_json_str_array(&j, "installed", all, E_COUNT);
    capshim_json_str(&j, "first", capshim_cuda_entry_names[first]);
    capshim_json_end_and_write(&j);
    for (size_t k = 0; k < g_ncfg; k++) {
        const struct capshim_config *c = &g_cfgs[k];
        char line[512];
        int n = snprintf(line, sizeof line, "capshim-cuda: active in %s[%ld]: lower", capshim_process_name(),
                         (long)getpid());
        for (size_t d = 0; d < c->ndevices && n > 0 && (size_t)n < sizeof line - 96; d++) {
            char spec[40];
            if (c->devices[d].is_uuid)
                capshim_uuid_text(c->devices[d].uuid, spec, sizeof spec);
            else
                snprintf(spec, sizeof spec, "%u", c->devices[d].index);
            n += snprintf(line + n, sizeof line - (size_t)n, "%s%s", d == 0 ? " on device " : ",", spec);
        }
        if (c->ndevices > 0 && n > 0 && (size_t)n < sizeof line - 16) n += snprintf(line + n, sizeof line - (size_t)n, ":");
        for (size_t i = 0; i < c->nvalues && i < 4 && n > 0 && (size_t)n < sizeof line - 96; i++)
            n += snprintf(line + n, sizeof line - (size_t)n, " %s=%llu", c->values[i].key,
                          (unsigned long long)c->values[i].value);
        if (n > 0 && (size_t)n < sizeof line - 16)
            snprintf(line + n, sizeof line - (size_t)n, "%s\n", c->nvalues > 4 ? " ..." : "");
        stderr_line(line);
    }
}

int capshim_cuda_enter(int entry) {
    int outer = t_depth == 0;
    t_depth++;
    if (!capshim_cuda_active()) return 0;
    if (outer) {
        atomic_fetch_or(&g_reached, 1u << entry);
        hooks_event(entry);
    }
    return outer;
}

void capshim_cuda_leave(void) {
    if (t_depth > 0) t_depth--;
}

/* ---- lowering ------------------------------------------------------------------ */

static void changed(const char *query, const char *key, uint64_t stock, uint64_t reported) {
    int device = capshim_cuda_targeted_device();
    pthread_mutex_lock(&g_lock);
    for (size_t i = 0; i < g_nchanges; i++) {
        struct change *c = &g_changes[i];
        if (strcmp(c->query, query) == 0 && strcmp(c->key, key) == 0 && c->stock == stock && c->reported == reported &&
            c->device == device) {
            pthread_mutex_unlock(&g_lock);
            return;
        }
    }
    if (g_nchanges < MAX_CHANGES) g_changes[g_nchanges++] = (struct change){query, key, stock, reported, device};
    pthread_mutex_unlock(&g_lock);
    struct capshim_json j;
    event_begin(&j, "changed");
    capshim_json_str(&j, "query", query);
    capshim_json_str(&j, "key", key);
    capshim_json_u64(&j, "stock", stock);
    capshim_json_u64(&j, "reported", reported);
    capshim_cuda_device_fields(&j);
    capshim_json_end_and_write(&j);
}

/* The configured value of key, or 0 with *set = 0. */
static uint64_t cfg_value(const char *key, int *set) {
    const struct capshim_config *c = capshim_cuda_current(); /* cuda_devices.c: this call's device */
    const struct capshim_value *v = c != NULL ? capshim_config_value(c, key) : NULL;
    *set = v != NULL;
    return v != NULL ? v->value : 0;
}

/* min(stock, profile) for one numeric key; reports a change. */
static uint64_t lowered(const char *query, const char *key, uint64_t stock) {
    int set = 0;
    uint64_t cfg = cfg_value(key, &set);
    if (!set || cfg >= stock) return stock;
    changed(query, key, stock, cfg);
    return cfg;
}

uint64_t capshim_cuda_lower_value(const char *query, const char *key, uint64_t stock) {
    return lowered(query, key, stock);
}

void capshim_cuda_lower_pair(const char *query, int *major, int *minor) {
    if (major == NULL || minor == NULL || *major < 0 || *minor < 0 || *minor > 9) return;
    uint64_t stock = (uint64_t)*major * 10u + (uint64_t)*minor;
    uint64_t cc = lowered(query, "computeCapability", stock);
    *major = (int)(cc / 10u);
    *minor = (int)(cc % 10u);
}

size_t capshim_cuda_device_name_size(void) {
    const struct capshim_config *c = capshim_cuda_current();
    if (c == NULL) return 0;
    return c->device_name[0] != '\0' ? strnlen(c->device_name, sizeof c->device_name) + 1 : 0;
}

void capshim_cuda_lower_name(const char *query, char *name, size_t size) {
    const struct capshim_config *cfg = capshim_cuda_current();
    if (name == NULL || size == 0 || cfg == NULL || cfg->device_name[0] == '\0') return;
    if (strncmp(name, cfg->device_name, size) == 0) return;
    static atomic_uint seen; /* one event per query, from a buffer the stock name fit in */
    unsigned bit = 1u << ((unsigned)capshim_cuda_entry_index(query) & 31u);
    if (strnlen(name, size) + 1 >= size || (atomic_fetch_or(&seen, bit) & bit)) {
        snprintf(name, size, "%s", cfg->device_name);
        return;
    }
    struct capshim_json j;
    event_begin(&j, "changed");
    capshim_json_str(&j, "query", query);
    capshim_json_str(&j, "key", "deviceName");
    char stock[CAPSHIM_CUDA_NAME_SIZE];
    snprintf(stock, sizeof stock, "%.*s", (int)(size < sizeof stock ? size : sizeof stock) - 1, name);
    capshim_json_str(&j, "stock", stock);
    capshim_json_str(&j, "reported", cfg->device_name);
    capshim_cuda_device_fields(&j);
    capshim_json_end_and_write(&j);
    snprintf(name, size, "%s", cfg->device_name);
}

void capshim_cuda_lower_attribute(const char *query, int *value, int attr, int device, capshim_attr_fn real_attr) {
    if (value == NULL || *value < 0) return;
    if (attr == CAPSHIM_ATTR_CC_MAJOR || attr == CAPSHIM_ATTR_CC_MINOR) {
        int other = -1;
        int other_attr = attr == CAPSHIM_ATTR_CC_MAJOR ? CAPSHIM_ATTR_CC_MINOR : CAPSHIM_ATTR_CC_MAJOR;
        if (real_attr == NULL || real_attr(&other, other_attr, device) != CAPSHIM_CU_SUCCESS) return;
        int major = attr == CAPSHIM_ATTR_CC_MAJOR ? *value : other;
        int minor = attr == CAPSHIM_ATTR_CC_MAJOR ? other : *value;
        capshim_cuda_lower_pair(query, &major, &minor);
        *value = attr == CAPSHIM_ATTR_CC_MAJOR ? major : minor;
        return;
    }
#define ATTR_ROW(key, index, attribute, width, off13, off12, off11)                                                 \
    if ((attribute) >= 0 && attr == (attribute) && strcmp(#key, "computeCapability") != 0) {               \
        *value = (int)lowered(query, #key, (uint64_t)*value);                                              \
        return;                                                                                            \
    }
    CAPSHIM_CUDA_FIELDS(ATTR_ROW)
#undef ATTR_ROW
}

static uint64_t get_member(const unsigned char *p, int width) {
    if (width == CAPSHIM_CUDA_SIZE) {
        uint64_t v;
        memcpy(&v, p, sizeof v);
        return v;
    }
    int v;
    memcpy(&v, p, sizeof v);
    return v < 0 ? 0 : (uint64_t)v;
}

static void set_member(unsigned char *p, int width, uint64_t v) {
    if (width == CAPSHIM_CUDA_SIZE) {
        memcpy(p, &v, sizeof v);
    } else {
        int i = (int)v;
        memcpy(p, &i, sizeof i);
    }
}

void capshim_cuda_layout_mismatch(const char *query, int layout, int version, const char *reason) {
    unsigned q = (unsigned)capshim_cuda_entry_index(query) & 7u;
    unsigned bit = 1u << (q * 4u + (layout == 13 ? 3u : layout == 12 ? 2u : layout == 11 ? 1u : 0u));
    pthread_mutex_lock(&g_lock);
    int seen = (g_mismatch_seen & bit) != 0;
    g_mismatch_seen |= bit;
    pthread_mutex_unlock(&g_lock);
    if (seen) return;
    struct capshim_json j;
    event_begin(&j, "layout_mismatch");
    capshim_json_str(&j, "query", query);
    capshim_json_u64(&j, "layout", (unsigned long long)layout);
    if (version >= 0)
        capshim_json_u64(&j, "runtime_version", (unsigned long long)version);
    else
        capshim_json_raw(&j, "runtime_version", "null");
    capshim_json_str(&j, "reason", reason);
    capshim_json_end_and_write(&j);
}

/* min(stock, profile) for one numeric key, without reporting a change. */
static uint64_t quietly_lowered(const char *key, uint64_t stock) {
    int set = 0;
    uint64_t cfg = cfg_value(key, &set);
    return set && cfg < stock ? cfg : stock;
}

/* The members that tell the layouts apart, checked against the real attributes before any write:
 * major and minor (the same offsets in every layout), multiProcessorCount (384 in 13, 388 in 12
 * and 11; 11 and 12 place every member the shim touches alike). A member may hold the real answer
 * or already the lowered one: the runtime fills the struct through the driver's
 * cuDeviceGetAttribute, which it obtained through dlsym / cuGetProcAddress, that is, through this
 * shim's wrapper (seen on the H200: libcudart.so.13 wrote 7 at byte 360 under a 7.5 profile). */
static int layout_checks(const char *query, const unsigned char *prop, int layout, int device,
                         capshim_attr_fn real_attr) {
    static const int attrs[] = {CAPSHIM_ATTR_CC_MAJOR, CAPSHIM_ATTR_CC_MINOR, CAPSHIM_ATTR_MULTIPROCESSOR_COUNT};
    int want[3] = {-1, -1, -1};
    char reason[256];
    for (size_t i = 0; i < 3; i++) {
        if (real_attr == NULL || real_attr(&want[i], attrs[i], device) != CAPSHIM_CU_SUCCESS) {
            capshim_cuda_layout_mismatch(query, layout, -1, "the real cudaDeviceGetAttribute did not answer; nothing written");
            return -1;
        }
    }
    int alt[3] = {want[0], want[1], want[2]};
    if (want[0] >= 0 && want[1] >= 0 && want[1] <= 9) {
        uint64_t cc = quietly_lowered("computeCapability", (uint64_t)want[0] * 10u + (uint64_t)want[1]);
        alt[0] = (int)(cc / 10u);
        alt[1] = (int)(cc % 10u);
    }
    if (want[2] >= 0) alt[2] = (int)quietly_lowered("multiProcessorCount", (uint64_t)want[2]);
    for (size_t i = 0; i < 3; i++) {
        size_t off = 0;
#define OFF_ROW(key, index, attribute, width, off13, off12, off11) \
    if ((attribute) == attrs[i]) off = CAPSHIM_CUDA_OFF(layout, off13, off12, off11);
        CAPSHIM_CUDA_FIELDS(OFF_ROW)
#undef OFF_ROW
        int seen;
        memcpy(&seen, prop + off, sizeof seen);
        if (seen != want[i] && seen != alt[i]) {
            snprintf(reason, sizeof reason,
                     "attribute %d is %d but the CUDA %d layout holds %d at byte %zu; nothing written", attrs[i],
                     want[i], layout, seen, off);
            capshim_cuda_layout_mismatch(query, layout, -1, reason);
            return -1;
        }
    }
    return 0;
}

void capshim_cuda_lower_prop(const char *query, unsigned char *prop, int layout, int device,
                             capshim_attr_fn real_attr) {
    if (prop == NULL || (layout != 11 && layout != 12 && layout != 13)) return;
    if (layout_checks(query, prop, layout, device, real_attr) != 0) return;
    int major = -1, minor = -1;
#define PROP_ROW(key, index, attribute, width, off13, off12, off11)                                   \
    {                                                                                          \
        unsigned char *p = prop + (CAPSHIM_CUDA_OFF(layout, off13, off12, off11));                          \
        if (strcmp(#key, "computeCapability") == 0) {                                          \
            if ((index) == 0) memcpy(&major, p, sizeof major);                                 \
            else memcpy(&minor, p, sizeof minor);                                              \
        } else {                                                                               \
            uint64_t stock = get_member(p, width), now = lowered(query, #key, stock);          \
            if (now != stock) set_member(p, width, now);                                       \
        }                                                                                      \
    }
    CAPSHIM_CUDA_FIELDS(PROP_ROW)
#undef PROP_ROW
    capshim_cuda_lower_pair(query, &major, &minor);
#define CC_ROW(key, index, attribute, width, off13, off12, off11)                                     \
    if (strcmp(#key, "computeCapability") == 0)                                                \
        memcpy(prop + (CAPSHIM_CUDA_OFF(layout, off13, off12, off11)), (index) == 0 ? &major : &minor, sizeof(int));
    CAPSHIM_CUDA_FIELDS(CC_ROW)
#undef CC_ROW
    capshim_cuda_lower_name(query, (char *)prop + CAPSHIM_CUDA_NAME_OFFSET, CAPSHIM_CUDA_NAME_SIZE);
}

void capshim_cuda_lower_devprop(const char *query, unsigned char *prop, int device, capshim_attr_fn real_attr) {
    if (prop == NULL) return;
    int want = -1, seen = -1;
    memcpy(&seen, prop, sizeof seen); /* CUdevprop.maxThreadsPerBlock, byte 0 (cuda.h) */
    if (real_attr == NULL || real_attr(&want, CAPSHIM_ATTR_MAX_THREADS_PER_BLOCK, device) != CAPSHIM_CU_SUCCESS ||
        want != seen) {
        capshim_cuda_layout_mismatch(query, 0, -1,
                                     "CUdevprop.maxThreadsPerBlock differs from the real attribute; nothing written");
        return;
    }
#define DEVPROP_ROW(key, off)                                                   \
    {                                                                           \
        uint64_t stock = get_member(prop + (off), CAPSHIM_CUDA_INT);            \
        uint64_t now = lowered(query, #key, stock);                             \
        if (now != stock) set_member(prop + (off), CAPSHIM_CUDA_INT, now);      \
    }
    CAPSHIM_CUDA_DEVPROP(DEVPROP_ROW)
#undef DEVPROP_ROW
}

int capshim_cuda_layout(int entry, void *fn, int *version) {
    typedef capshim_cuerr (*version_fn)(int *);
    version_fn rv = (version_fn)(uintptr_t)capshim_cuda_sibling(fn, "cudaRuntimeGetVersion");
    int v = -1;
    if (rv == NULL || rv(&v) != CAPSHIM_CU_SUCCESS) v = -1;
    *version = v;
    if (v >= 13000) return LAYOUT_13;
    if (v >= 12000 && entry == E_cudaGetDeviceProperties_v2) return LAYOUT_12;
    if (v >= 11000 && entry == E_cudaGetDeviceProperties) return LAYOUT_11;
    return LAYOUT_UNKNOWN;
}

/* capshim Vulkan capability layer.
 *
 * One library, two layers: VK_LAYER_CAPSHIM_device (next to the driver,
 * simulates a weaker GPU) and VK_LAYER_CAPSHIM_app (next to the application,
 * the shim proper). The loader opens the library once; each manifest names
 * its own entry points through its "functions" field (Vulkan loader,
 * LoaderLayerInterface.md, "Layer Manifest File Format"), and each role keeps
 * its own configuration and its own next-in-chain pointers.
 *
 * It patches the answers of vkGetPhysicalDeviceProperties(2), ...Features(2)
 * (walking the pNext chains: structures it does not know pass untouched) and
 * vkEnumerateDeviceExtensionProperties (and, when a profile sets deviceName,
 * VkPhysicalDeviceProperties::deviceName); each active role reports itself as a
 * tool through vkGetPhysicalDeviceToolProperties(EXT) (VK_EXT_tooling_info,
 * "Tooling info" below); the device role also refuses, at
 * vkCreateDevice, a feature or extension it hides (unless the app role
 * restores it; see "vkCreateDevice enforcement" below and docs/status.md).
 * Everything else passes through. The intercepted entry points are listed
 * once, in CAPSHIM_HOOKS.
 *
 * Configuration (one spelling per source):
 *   CAPSHIM_VK_DEVICE_CONFIG / CAPSHIM_VK_APP_CONFIG  path of a key=value file
 *                                                    (config.h gives the format)
 *   CAPSHIM_STATUS_FILE   JSON-lines status events (status.h)
 *   CAPSHIM_QUIET=1       no stderr banner
 *   CAPSHIM_TARGET_PID    when set and not this process's pid, the layer stays
 *                         stock (a child of the launched command) ...
 *   CAPSHIM_INHERIT=1     ... unless this is set.
 * An invalid configuration leaves the process on its stock answers and is
 * reported; the layer never aborts the host process. A configuration path
 * that is not a regular file (a FIFO, a device) is refused without blocking:
 * opened O_NONBLOCK, checked with fstat.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <vulkan/vk_layer.h>
#include <vulkan/vulkan.h>

#ifndef CAPSHIM_VERSION_STRING /* capshim's version: the build passes it (capshim.native.build.VERSION_DEFINE) */
#error "CAPSHIM_VERSION_STRING is not defined: build with capshim (capshim build), which passes it"
#endif

#include "caps_table.h"
#include "config.h"
#include "status.h"

_Static_assert(CAPSHIM_DEVICE_NAME_MAX == VK_MAX_PHYSICAL_DEVICE_NAME_SIZE, "deviceName buffer (config.h)");

#define EXPORT __attribute__((visibility("default")))
#define MAX_LOGGED 512
/* The longest pNext chain the layer walks. Real applications chain a few
 * dozen structures; the bound exists only so that a chain that loops back on
 * itself cannot hang the host process. A longer chain fails closed: a
 * vkCreateDevice the device role checks is refused (it cannot see every
 * enabled feature), a query is reported as cut ("chain_cut" event, stderr). */
#define MAX_CHAIN 65536

enum { ROLE_DEVICE = 0, ROLE_APP = 1, NUM_ROLES = 2 };
enum { STATE_ACTIVE = 1, STATE_INVALID = 2, STATE_SKIPPED = 3 };

/* Instances and devices are kept in per-role lists keyed by dispatch key; a
 * struct link is the first member of each node (C11 6.7.2.1p15: a pointer to
 * a struct converts to a pointer to its first member and back). */
struct link {
    void *key;
    struct link *next;
};

/* The entry points this layer intercepts, listed once; everything below
 * (next-in-chain pointers, their lookup, the per-role wrappers, the
 * vkGet*ProcAddr answers, the "hooks" event) is generated from this list.
 *
 *   X(R, IDX, LEVEL, return type, return keyword, name, (params), (args))
 *
 * LEVEL  CHAIN   vkCreate{Instance,Device}: the next pointer comes from the
 *                loader's chain information at each call
 *        INST    always intercepted; next pointer kept per instance
 *        QUERY   intercepted only while the role's configuration is active;
 *                next pointer per instance; named in the "hooks" event
 *        DEV     device level, answered by vkGetDeviceProcAddr
 * The return keyword is `return` for a VkResult, empty for void. The role's
 * implementation of NAME is do_NAME(struct role *, args...). */
#define CAPSHIM_HOOKS(X, R, IDX)                                                                                      \
    X(R, IDX, CHAIN, VkResult, return, vkCreateInstance,                                                              \
      (const VkInstanceCreateInfo *ci, const VkAllocationCallbacks *a, VkInstance *out), (ci, a, out))                \
    X(R, IDX, INST, void, , vkDestroyInstance, (VkInstance in, const VkAllocationCallbacks *a), (in, a))              \
    X(R, IDX, CHAIN, VkResult, return, vkCreateDevice,                                                                \
      (VkPhysicalDevice pd, const VkDeviceCreateInfo *ci, const VkAllocationCallbacks *a, VkDevice *out),             \
      (pd, ci, a, out))                                                                                               \
    X(R, IDX, QUERY, void, , vkGetPhysicalDeviceProperties, (VkPhysicalDevice pd, VkPhysicalDeviceProperties *p),     \
      (pd, p))                                                                                                        \
    X(R, IDX, QUERY, void, , vkGetPhysicalDeviceProperties2,                                                          \
      (VkPhysicalDevice pd, VkPhysicalDeviceProperties2 *p), (pd, p))                                                 \
    X(R, IDX, QUERY, void, , vkGetPhysicalDeviceProperties2KHR,                                                       \
      (VkPhysicalDevice pd, VkPhysicalDeviceProperties2 *p), (pd, p))                                                 \
    X(R, IDX, QUERY, void, , vkGetPhysicalDeviceFeatures, (VkPhysicalDevice pd, VkPhysicalDeviceFeatures *f),         \
      (pd, f))                                                                                                        \
    X(R, IDX, QUERY, void, , vkGetPhysicalDeviceFeatures2, (VkPhysicalDevice pd, VkPhysicalDeviceFeatures2 *f),       \
      (pd, f))                                                                                                        \
    X(R, IDX, QUERY, void, , vkGetPhysicalDeviceFeatures2KHR,                                                         \
      (VkPhysicalDevice pd, VkPhysicalDeviceFeatures2 *f), (pd, f))                                                   \
    X(R, IDX, QUERY, VkResult, return, vkEnumerateDeviceExtensionProperties,                                          \
      (VkPhysicalDevice pd, const char *layer, uint32_t *count, VkExtensionProperties *props),                        \
      (pd, layer, count, props))                                                                                      \
    X(R, IDX, QUERY, VkResult, return, vkGetPhysicalDeviceToolProperties,                                             \
      (VkPhysicalDevice pd, uint32_t *count, VkPhysicalDeviceToolProperties *tools), (pd, count, tools))              \
    X(R, IDX, QUERY, VkResult, return, vkGetPhysicalDeviceToolPropertiesEXT,                                          \
      (VkPhysicalDevice pd, uint32_t *count, VkPhysicalDeviceToolProperties *tools), (pd, count, tools))              \
    X(R, IDX, DEV, void, , vkDestroyDevice, (VkDevice d, const VkAllocationCallbacks *a), (d, a))

/* Per-level pieces: LEVEL##_PIECE(R, name) for each use of the list. */
#define UNPAREN(...) __VA_ARGS__
#define NEXT_MEMBER(name) PFN_##name next_##name;
#define CHAIN_MEMBER(R, name)
#define INST_MEMBER(R, name) NEXT_MEMBER(name)
#define QUERY_MEMBER(R, name) NEXT_MEMBER(name)
#define DEV_MEMBER(R, name)
#define HOOK_MEMBER(R, IDX, LEVEL, ret, retkw, name, params, args) LEVEL##_MEMBER(R, name)

struct inst {
    struct link link;
    VkInstance instance;
    PFN_vkGetInstanceProcAddr gipa;
    CAPSHIM_HOOKS(HOOK_MEMBER, _, 0)
};

struct dev {
    struct link link;
    PFN_vkGetDeviceProcAddr gdpa;
    PFN_vkDestroyDevice destroy;
};

struct logged {
    const char *query;
    const char *key;
    uint32_t stock, reported;
};

struct role {
    const char *layer_name;
    const char *config_env;
    pthread_once_t once;
    int state;
    struct capshim_config cfg;
    pthread_mutex_t lock;
    struct link *instances;
    struct link *devices;
    struct logged logged[MAX_LOGGED];
    size_t nlogged;
    int log_full_reported;
    int banner_done;
};

static struct role roles[NUM_ROLES] = {
    {"VK_LAYER_CAPSHIM_device", "CAPSHIM_VK_DEVICE_CONFIG", PTHREAD_ONCE_INIT, 0, {0}, PTHREAD_MUTEX_INITIALIZER,
     NULL, NULL, {{0}}, 0, 0, 0},
    {"VK_LAYER_CAPSHIM_app", "CAPSHIM_VK_APP_CONFIG", PTHREAD_ONCE_INIT, 0, {0}, PTHREAD_MUTEX_INITIALIZER, NULL,
     NULL, {{0}}, 0, 0, 0},
};

/* ---------- configuration ---------- */

static struct capshim_keyspec keyspecs[CAPSHIM_NUM_FIELDS];
static size_t nkeyspecs;
static pthread_once_t keyspecs_once = PTHREAD_ONCE_INIT;

static void build_keyspecs(void) {
    for (size_t i = 0; i < CAPSHIM_NUM_FIELDS; i++) {
        int dup = 0;
        for (size_t k = 0; k < nkeyspecs; k++)
            if (strcmp(keyspecs[k].name, capshim_fields[i].key) == 0) dup = 1;
        if (!dup) {
            keyspecs[nkeyspecs].name = capshim_fields[i].key;
            keyspecs[nkeyspecs].kind = capshim_fields[i].kind;
            nkeyspecs++;
        }
    }
}

static void event_simple(struct role *r, const char *event) {
    struct capshim_json j;
    capshim_json_begin(&j, event, "vulkan", r->layer_name);
    capshim_json_str(&j, "process", capshim_process_name());
    if (strcmp(event, "loaded") == 0) capshim_json_str(&j, "version", CAPSHIM_VERSION_STRING);
    capshim_json_end_and_write(&j);
}

static void config_rejected(struct role *r, const char *source, const char *reason) {
    struct capshim_json j;
    r->state = STATE_INVALID;
    capshim_json_begin(&j, "config", "vulkan", r->layer_name);
    capshim_json_bool(&j, "accepted", 0);
    capshim_json_str(&j, "source", source);
    capshim_json_str(&j, "reason", reason);
    capshim_json_end_and_write(&j);
    if (getenv("CAPSHIM_QUIET") == NULL || strcmp(getenv("CAPSHIM_QUIET"), "1") != 0)
        fprintf(stderr, "capshim-vulkan: %s: invalid configuration (%s): %s; answers stay stock\n", r->layer_name,
                source, reason);
}

/* A FIFO or any other non-regular file is refused without blocking. */
static int read_file(const char *path, char *buf, size_t cap, size_t *len, char *err, size_t errlen) {
    int fd = capshim_open_regular(path, err, errlen);
    if (fd < 0) return -1;
    size_t n = 0;
    for (;;) {
        if (n == cap) {
            close(fd);
            snprintf(err, errlen, "larger than %zu bytes", cap - 1);
            return -1;
        }
        ssize_t got = read(fd, buf + n, cap - n);
        if (got < 0) {
            if (errno == EINTR) continue;
            snprintf(err, errlen, "cannot read: %s", strerror(errno));
            close(fd);
            return -1;
        }
        if (got == 0) break;
        n += (size_t)got;
    }
    close(fd);
    *len = n;
    return 0;
}

static void role_init(struct role *r) {
    (void)pthread_once(&keyspecs_once, build_keyspecs);
    event_simple(r, "loaded");
    const char *target = getenv("CAPSHIM_TARGET_PID");
    const char *inherit = getenv("CAPSHIM_INHERIT");
    if (target != NULL && !(inherit != NULL && strcmp(inherit, "1") == 0)) {
        uint64_t pid = 0;
        if (capshim_parse_u64(target, &pid) != 0 || pid != (uint64_t)getpid()) {
            struct capshim_json j;
            r->state = STATE_SKIPPED;
            capshim_json_begin(&j, "skipped", "vulkan", r->layer_name);
            capshim_json_str(&j, "process", capshim_process_name());
            capshim_json_str(&j, "reason", "child of the launched process (CAPSHIM_TARGET_PID); run with --inherit to shim children");
            capshim_json_end_and_write(&j);
            return;
        }
    }
    const char *path = getenv(r->config_env);
    if (path == NULL || path[0] == '\0') {
        char reason[96];
        snprintf(reason, sizeof reason, "%s is not set", r->config_env);
        config_rejected(r, r->config_env, reason);
        return;
    }
    static char buf[NUM_ROLES][CAPSHIM_CONFIG_MAX_BYTES + 1];
    char err[256];
    size_t len = 0;
    char *mine = buf[r == &roles[ROLE_APP] ? ROLE_APP : ROLE_DEVICE];
    if (read_file(path, mine, CAPSHIM_CONFIG_MAX_BYTES + 1, &len, err, sizeof err) != 0 ||
        capshim_config_parse(mine, len, keyspecs, nkeyspecs, &r->cfg, err, sizeof err) != 0) {
        config_rejected(r, path, err);
        return;
    }
    r->state = STATE_ACTIVE;
    struct capshim_json j;
    capshim_json_begin(&j, "config", "vulkan", r->layer_name);
    capshim_json_bool(&j, "accepted", 1);
    capshim_json_str(&j, "source", path);
    capshim_json_str(&j, "direction", r->cfg.direction == CAPSHIM_RAISE ? "raise" : "lower");
    capshim_json_u64(&j, "values", r->cfg.nvalues);
    capshim_json_u64(&j, "extensions", r->cfg.nexts);
    capshim_json_end_and_write(&j);
}

static void init_device_role(void) { role_init(&roles[ROLE_DEVICE]); }
static void init_app_role(void) { role_init(&roles[ROLE_APP]); }

static void ensure_init(struct role *r) {
    (void)pthread_once(&r->once, r == &roles[ROLE_APP] ? init_app_role : init_device_role);
}

static void banner(struct role *r) {
    int quiet = getenv("CAPSHIM_QUIET") != NULL && strcmp(getenv("CAPSHIM_QUIET"), "1") == 0;
    pthread_mutex_lock(&r->lock);
    int done = r->banner_done;
    r->banner_done = 1;
    pthread_mutex_unlock(&r->lock);
    if (done || quiet) return;
    char line[1024];
    int n = snprintf(line, sizeof line, "capshim-vulkan: %s active in %s[%ld]: %s", r->layer_name,
                     capshim_process_name(), (long)getpid(), r->cfg.direction == CAPSHIM_RAISE ? "raise" : "lower");
    size_t shown = 0;
    for (size_t i = 0; i < r->cfg.nvalues && n > 0 && (size_t)n < sizeof line - 64; i++, shown++) {
        if (shown == 6) break;
        const struct capshim_value *v = &r->cfg.values[i];
        uint32_t u = (uint32_t)v->value;
        if (v->kind == CAPSHIM_VERSION)
            n += snprintf(line + n, sizeof line - (size_t)n, " %s=%u.%u.%u", v->key, VK_API_VERSION_MAJOR(u),
                          VK_API_VERSION_MINOR(u), VK_API_VERSION_PATCH(u));
        else
            n += snprintf(line + n, sizeof line - (size_t)n, " %s=%llu", v->key, (unsigned long long)v->value);
    }
    if (n > 0 && (size_t)n < sizeof line - 64 && r->cfg.nvalues > shown)
        n += snprintf(line + n, sizeof line - (size_t)n, " (+%zu more)", r->cfg.nvalues - shown);
    if (n > 0 && (size_t)n < sizeof line - 64 && r->cfg.nexts > 0)
        snprintf(line + n, sizeof line - (size_t)n, "; %zu extension(s) %s", r->cfg.nexts,
                 r->cfg.direction == CAPSHIM_RAISE ? "added" : "hidden");
    fprintf(stderr, "%s\n", line);
}

/* ---------- bookkeeping ---------- */

static void *dispatch_key(const void *handle) {
    if (handle == NULL) return NULL;
    void *key;
    memcpy(&key, handle, sizeof key);
    return key;
}

static struct link *link_find(struct role *r, struct link *const *head, void *key) {
    pthread_mutex_lock(&r->lock);
    struct link *l = *head;
    while (l != NULL && l->key != key) l = l->next;
    pthread_mutex_unlock(&r->lock);
    return l;
}

static void link_push(struct role *r, struct link **head, struct link *node) {
    pthread_mutex_lock(&r->lock);
    node->next = *head;
    *head = node;
    pthread_mutex_unlock(&r->lock);
}

/* Unlink and return the node with this key, or NULL. */
static struct link *link_take(struct role *r, struct link **head, void *key) {
    pthread_mutex_lock(&r->lock);
    struct link **pp = head, *found = NULL;
    while (*pp != NULL) {
        if ((*pp)->key == key) {
            found = *pp;
            *pp = found->next;
            break;
        }
        pp = &(*pp)->next;
    }
    pthread_mutex_unlock(&r->lock);
    return found;
}

static struct inst *find_inst_by_key(struct role *r, void *key) {
    return (struct inst *)link_find(r, &r->instances, key);
}

static struct dev *find_dev(struct role *r, void *key) { return (struct dev *)link_find(r, &r->devices, key); }

static void log_change(struct role *r, const char *query, const char *key, uint32_t stock, uint32_t reported) {
    pthread_mutex_lock(&r->lock);
    for (size_t i = 0; i < r->nlogged; i++) {
        struct logged *l = &r->logged[i];
        if (l->stock == stock && l->reported == reported && strcmp(l->query, query) == 0 && strcmp(l->key, key) == 0) {
            pthread_mutex_unlock(&r->lock);
            return;
        }
    }
    int full = r->nlogged >= MAX_LOGGED;
    int report_full = full && !r->log_full_reported;
    if (!full) r->logged[r->nlogged++] = (struct logged){query, key, stock, reported};
    if (report_full) r->log_full_reported = 1;
    pthread_mutex_unlock(&r->lock);
    struct capshim_json j;
    if (report_full) {
        capshim_json_begin(&j, "changed_log_full", "vulkan", r->layer_name);
        capshim_json_end_and_write(&j);
    }
    if (full) return;
    capshim_json_begin(&j, "changed", "vulkan", r->layer_name);
    capshim_json_str(&j, "query", query);
    capshim_json_str(&j, "key", key);
    capshim_json_u64(&j, "stock", stock);
    capshim_json_u64(&j, "reported", reported);
    capshim_json_end_and_write(&j);
}

/* ---------- patching ---------- */

static void patch_struct(struct role *r, uint32_t stype, void *base, const char *query) {
    if (base == NULL) return;
    for (size_t i = 0; i < CAPSHIM_NUM_FIELDS; i++) {
        const struct capshim_field *f = &capshim_fields[i];
        if (f->stype != stype) continue;
        const struct capshim_value *v = capshim_config_value(&r->cfg, f->key);
        if (v == NULL) continue;
        unsigned char *p = (unsigned char *)base + f->offset;
        uint32_t stock;
        memcpy(&stock, p, sizeof stock);
        /* the per-kind answer (config.c): direction by kind, exact keys as set */
        uint32_t rep = capshim_answer(f->kind, f->sem, r->cfg.direction, stock, (uint32_t)v->value);
        if (rep != stock) {
            memcpy(p, &rep, sizeof rep);
            log_change(r, query, f->key, stock, rep);
        }
    }
}

static int quiet(void) {
    const char *q = getenv("CAPSHIM_QUIET");
    return q != NULL && strcmp(q, "1") == 0;
}

/* A pNext chain longer than MAX_CHAIN (or one that loops): one "chain_cut"
 * event and one stderr line per call. */
static void chain_cut(struct role *r, const char *query, const char *result) {
    struct capshim_json j;
    capshim_json_begin(&j, "chain_cut", "vulkan", r->layer_name);
    capshim_json_str(&j, "query", query);
    capshim_json_u64(&j, "limit", MAX_CHAIN);
    if (result != NULL) capshim_json_str(&j, "result", result);
    capshim_json_end_and_write(&j);
    if (!quiet())
        fprintf(stderr,
                "capshim-vulkan: %s: %s: pNext chain longer than %d structures (or a loop); %s\n",
                r->layer_name, query, MAX_CHAIN,
                result != NULL ? result : "structures after the limit keep their stock answers");
}

static void patch_chain(struct role *r, void *pnext, const char *query) {
    VkBaseOutStructure *s = (VkBaseOutStructure *)pnext;
    int n = 0;
    for (; s != NULL && n < MAX_CHAIN; n++, s = s->pNext) patch_struct(r, (uint32_t)s->sType, s, query);
    if (s != NULL) chain_cut(r, query, NULL);
}

/* deviceName, when the configuration sets one: a string, so outside the
 * numeric table; reported once per role as a "changed" event with strings. */
static void patch_device_name(struct role *r, VkPhysicalDeviceProperties *p, const char *query) {
    static int logged[NUM_ROLES];
    if (p == NULL || r->cfg.device_name[0] == '\0') return;
    if (strncmp(p->deviceName, r->cfg.device_name, sizeof p->deviceName) == 0) return;
    char stock[VK_MAX_PHYSICAL_DEVICE_NAME_SIZE];
    memcpy(stock, p->deviceName, sizeof stock);
    stock[sizeof stock - 1] = '\0';
    memcpy(p->deviceName, r->cfg.device_name, sizeof p->deviceName);
    int idx = r == &roles[ROLE_APP] ? ROLE_APP : ROLE_DEVICE;
    if (__atomic_exchange_n(&logged[idx], 1, __ATOMIC_SEQ_CST)) return;
    struct capshim_json j;
    capshim_json_begin(&j, "changed", "vulkan", r->layer_name);
    capshim_json_str(&j, "query", query);
    capshim_json_str(&j, "key", "deviceName");
    capshim_json_str(&j, "stock", stock);
    capshim_json_str(&j, "reported", r->cfg.device_name);
    capshim_json_end_and_write(&j);
}

static void do_vkGetPhysicalDeviceProperties(struct role *r, VkPhysicalDevice pd, VkPhysicalDeviceProperties *p) {
    struct inst *i = find_inst_by_key(r, dispatch_key(pd));
    if (i == NULL || i->next_vkGetPhysicalDeviceProperties == NULL) return;
    i->next_vkGetPhysicalDeviceProperties(pd, p);
    patch_struct(r, CAPSHIM_STYPE_BASE_PROPERTIES, p, "vkGetPhysicalDeviceProperties");
    patch_device_name(r, p, "vkGetPhysicalDeviceProperties");
}

static void do_props2(struct role *r, VkPhysicalDevice pd, VkPhysicalDeviceProperties2 *p, int khr) {
    struct inst *i = find_inst_by_key(r, dispatch_key(pd));
    if (i == NULL) return;
    PFN_vkGetPhysicalDeviceProperties2 core = i->next_vkGetPhysicalDeviceProperties2;
    PFN_vkGetPhysicalDeviceProperties2KHR ext = i->next_vkGetPhysicalDeviceProperties2KHR;
    PFN_vkGetPhysicalDeviceProperties2 fn = khr ? (ext ? ext : core) : (core ? core : ext);
    if (fn == NULL || p == NULL) return;
    fn(pd, p);
    patch_struct(r, CAPSHIM_STYPE_BASE_PROPERTIES, &p->properties, "vkGetPhysicalDeviceProperties2");
    patch_device_name(r, &p->properties, "vkGetPhysicalDeviceProperties2");
    patch_chain(r, p->pNext, "vkGetPhysicalDeviceProperties2");
}

static void do_vkGetPhysicalDeviceProperties2(struct role *r, VkPhysicalDevice pd, VkPhysicalDeviceProperties2 *p) {
    do_props2(r, pd, p, 0);
}

static void do_vkGetPhysicalDeviceProperties2KHR(struct role *r, VkPhysicalDevice pd,
                                                 VkPhysicalDeviceProperties2 *p) {
    do_props2(r, pd, p, 1);
}

static void do_vkGetPhysicalDeviceFeatures(struct role *r, VkPhysicalDevice pd, VkPhysicalDeviceFeatures *f) {
    struct inst *i = find_inst_by_key(r, dispatch_key(pd));
    if (i == NULL || i->next_vkGetPhysicalDeviceFeatures == NULL) return;
    i->next_vkGetPhysicalDeviceFeatures(pd, f);
    patch_struct(r, CAPSHIM_STYPE_BASE_FEATURES, f, "vkGetPhysicalDeviceFeatures");
}

static void do_feats2(struct role *r, VkPhysicalDevice pd, VkPhysicalDeviceFeatures2 *f, int khr) {
    struct inst *i = find_inst_by_key(r, dispatch_key(pd));
    if (i == NULL) return;
    PFN_vkGetPhysicalDeviceFeatures2 core = i->next_vkGetPhysicalDeviceFeatures2;
    PFN_vkGetPhysicalDeviceFeatures2KHR ext = i->next_vkGetPhysicalDeviceFeatures2KHR;
    PFN_vkGetPhysicalDeviceFeatures2 fn = khr ? (ext ? ext : core) : (core ? core : ext);
    if (fn == NULL || f == NULL) return;
    fn(pd, f);
    patch_struct(r, CAPSHIM_STYPE_BASE_FEATURES, &f->features, "vkGetPhysicalDeviceFeatures2");
    patch_chain(r, f->pNext, "vkGetPhysicalDeviceFeatures2");
}

static void do_vkGetPhysicalDeviceFeatures2(struct role *r, VkPhysicalDevice pd, VkPhysicalDeviceFeatures2 *f) {
    do_feats2(r, pd, f, 0);
}

static void do_vkGetPhysicalDeviceFeatures2KHR(struct role *r, VkPhysicalDevice pd, VkPhysicalDeviceFeatures2 *f) {
    do_feats2(r, pd, f, 1);
}

static VkResult do_vkEnumerateDeviceExtensionProperties(struct role *r, VkPhysicalDevice pd, const char *layer,
                                                        uint32_t *count, VkExtensionProperties *props) {
    if (layer != NULL && strcmp(layer, r->layer_name) == 0) {
        if (count == NULL) return VK_ERROR_INITIALIZATION_FAILED;
        *count = 0;
        return VK_SUCCESS;
    }
    struct inst *i = find_inst_by_key(r, dispatch_key(pd));
    PFN_vkEnumerateDeviceExtensionProperties next = i ? i->next_vkEnumerateDeviceExtensionProperties : NULL;
    if (next == NULL) return VK_ERROR_INITIALIZATION_FAILED;
    if (layer != NULL || count == NULL) return next(pd, layer, count, props);
    /* Fetch the list from below. */
    VkExtensionProperties *below = NULL;
    uint32_t n = 0;
    VkResult res = VK_INCOMPLETE;
    for (int tries = 0; tries < 8 && res == VK_INCOMPLETE; tries++) {
        res = next(pd, NULL, &n, NULL);
        free(below);
        below = NULL;
        if (res != VK_SUCCESS) return res;
        below = calloc((size_t)n + r->cfg.nexts + 1, sizeof *below);
        if (below == NULL) return next(pd, layer, count, props); /* fail safe: stock */
        res = next(pd, NULL, &n, below);
    }
    if (res != VK_SUCCESS) {
        free(below);
        return res;
    }
    /* Hide (lower) or add (raise). The buffer has room for every addition. */
    uint32_t m = 0;
    for (uint32_t k = 0; k < n; k++) {
        const struct capshim_ext *e = capshim_config_ext(&r->cfg, below[k].extensionName);
        if (e != NULL && r->cfg.direction == CAPSHIM_LOWER && e->spec_version == 0) {
            log_change(r, "vkEnumerateDeviceExtensionProperties", e->name, below[k].specVersion, 0);
            continue;
        }
        below[m++] = below[k];
    }
    if (r->cfg.direction == CAPSHIM_RAISE) {
        for (size_t x = 0; x < r->cfg.nexts; x++) {
            const struct capshim_ext *e = &r->cfg.exts[x];
            int present = 0;
            for (uint32_t k = 0; k < m; k++)
                if (strcmp(below[k].extensionName, e->name) == 0) present = 1;
            if (present || e->spec_version == 0) continue;
            memset(&below[m], 0, sizeof below[m]);
            memcpy(below[m].extensionName, e->name, strlen(e->name) + 1);
            below[m].specVersion = e->spec_version;
            m++;
            log_change(r, "vkEnumerateDeviceExtensionProperties", e->name, 0, e->spec_version);
        }
    }
    if (props == NULL) {
        *count = m;
        free(below);
        return VK_SUCCESS;
    }
    uint32_t copy = *count < m ? *count : m;
    memcpy(props, below, (size_t)copy * sizeof *props);
    *count = copy;
    free(below);
    return copy < m ? VK_INCOMPLETE : VK_SUCCESS;
}

/* ---------- Tooling info (VK_EXT_tooling_info, core in Vulkan 1.3) ----------
 *
 * An active role changes answers, so it reports itself as a tool with
 * VK_TOOL_PURPOSE_MODIFYING_FEATURES_BIT, first in the list, followed by what
 * the next layer or the driver reports (fetched whole, as the extension list
 * is). The two-call idiom as the spec gives it (vkGetPhysicalDeviceToolProperties):
 * a NULL array returns the count; otherwise at most *count structures are
 * written, *count becomes the number written, and VK_INCOMPLETE is returned
 * when that is fewer than the tools active. The application's sType and pNext
 * of each structure it passes are kept. The layer's manifest lists
 * VK_EXT_tooling_info among its device extensions (the loader answers
 * vkEnumerateDeviceExtensionProperties for a layer name from the manifest). */

static void fill_tool(const struct role *r, VkPhysicalDeviceToolProperties *t) {
    int app = r == &roles[ROLE_APP];
    const char *profile = r->cfg.profile[0] != '\0' ? r->cfg.profile : "(unnamed configuration)";
    const char *dir = r->cfg.direction == CAPSHIM_RAISE ? "raise" : "lower";
    snprintf(t->name, sizeof t->name, "capshim %s role", app ? "app" : "device");
    snprintf(t->version, sizeof t->version, "%s", CAPSHIM_VERSION_STRING);
    t->purposes = VK_TOOL_PURPOSE_MODIFYING_FEATURES_BIT;
    snprintf(t->description, sizeof t->description,
             app ? "capshim profile %s (%s): changes the features, properties and extensions the application sees"
                 : "capshim simulated device, profile %s (%s): answers and vkCreateDevice as that device",
             profile, dir);
    snprintf(t->layer, sizeof t->layer, "%s", r->layer_name);
}

static VkResult tool_properties(struct role *r, VkPhysicalDevice pd, uint32_t *count,
                                VkPhysicalDeviceToolProperties *tools, int ext) {
    struct inst *i = find_inst_by_key(r, dispatch_key(pd));
    PFN_vkGetPhysicalDeviceToolProperties core = i ? i->next_vkGetPhysicalDeviceToolProperties : NULL;
    PFN_vkGetPhysicalDeviceToolPropertiesEXT extf = i ? i->next_vkGetPhysicalDeviceToolPropertiesEXT : NULL;
    PFN_vkGetPhysicalDeviceToolProperties next = ext ? (extf ? extf : core) : (core ? core : extf);
    if (count == NULL) return next != NULL ? next(pd, count, tools) : VK_ERROR_OUT_OF_HOST_MEMORY; /* invalid use */
    VkPhysicalDeviceToolProperties *all = NULL;
    uint32_t n = 0;
    VkResult res = next != NULL ? VK_INCOMPLETE : VK_SUCCESS;
    for (int tries = 0; tries < 8 && res == VK_INCOMPLETE; tries++) {
        free(all);
        all = NULL;
        res = next(pd, &n, NULL);
        if (res != VK_SUCCESS) return res;
        if (n > 4096) return VK_ERROR_OUT_OF_HOST_MEMORY; /* not a real tool list */
        all = calloc((size_t)n + 1, sizeof *all);
        if (all == NULL) return VK_ERROR_OUT_OF_HOST_MEMORY;
        for (uint32_t k = 0; k <= n; k++) all[k].sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_TOOL_PROPERTIES;
        res = next(pd, &n, all + 1);
    }
    if (res == VK_INCOMPLETE) res = VK_SUCCESS; /* a list that keeps growing: the n written are whole */
    if (res != VK_SUCCESS) {
        free(all);
        return res;
    }
    if (all == NULL) all = calloc(1, sizeof *all);
    if (all == NULL) return VK_ERROR_OUT_OF_HOST_MEMORY;
    fill_tool(r, &all[0]);
    uint32_t total = n + 1;
    if (tools == NULL) {
        *count = total;
        free(all);
        return VK_SUCCESS;
    }
    uint32_t copy = *count < total ? *count : total;
    for (uint32_t k = 0; k < copy; k++) {
        VkStructureType stype = tools[k].sType;
        void *pnext = tools[k].pNext;
        tools[k] = all[k];
        tools[k].sType = stype;
        tools[k].pNext = pnext;
    }
    *count = copy;
    free(all);
    return copy < total ? VK_INCOMPLETE : VK_SUCCESS;
}

static VkResult do_vkGetPhysicalDeviceToolProperties(struct role *r, VkPhysicalDevice pd, uint32_t *count,
                                                     VkPhysicalDeviceToolProperties *tools) {
    return tool_properties(r, pd, count, tools, 0);
}

static VkResult do_vkGetPhysicalDeviceToolPropertiesEXT(struct role *r, VkPhysicalDevice pd, uint32_t *count,
                                                        VkPhysicalDeviceToolProperties *tools) {
    return tool_properties(r, pd, count, tools, 1);
}

/* ---------- instance and device creation ---------- */

#define NEXT_LOOKUP(name) i->next_##name = (PFN_##name)gipa(*out, #name);
#define CHAIN_LOOKUP(R, name)
#define INST_LOOKUP(R, name) NEXT_LOOKUP(name)
#define QUERY_LOOKUP(R, name) NEXT_LOOKUP(name)
#define DEV_LOOKUP(R, name)
#define HOOK_LOOKUP(R, IDX, LEVEL, ret, retkw, name, params, args) LEVEL##_LOOKUP(R, name)

#define CHAIN_INSTALLED(R, name)
#define INST_INSTALLED(R, name)
#define QUERY_INSTALLED(R, name) \
    if (i->next_##name != NULL && n < sizeof installed / sizeof installed[0]) installed[n++] = #name;
#define DEV_INSTALLED(R, name)
#define HOOK_INSTALLED(R, IDX, LEVEL, ret, retkw, name, params, args) LEVEL##_INSTALLED(R, name)

/* Order in which the roles' vkCreateInstance were entered: the layer nearer
 * the application is entered first. Reported so the launcher can check that
 * the app role sits above the device role. */
static unsigned long create_seq;

static VkResult do_vkCreateInstance(struct role *r, const VkInstanceCreateInfo *ci, const VkAllocationCallbacks *a,
                                    VkInstance *out) {
    ensure_init(r);
    unsigned long position = __atomic_add_fetch(&create_seq, 1, __ATOMIC_SEQ_CST);
    VkLayerInstanceCreateInfo *chain = (VkLayerInstanceCreateInfo *)ci->pNext;
    for (int n = 0; chain != NULL && !(chain->sType == VK_STRUCTURE_TYPE_LOADER_INSTANCE_CREATE_INFO &&
                                       chain->function == VK_LAYER_LINK_INFO);
         n++)
        chain = n < MAX_CHAIN ? (VkLayerInstanceCreateInfo *)chain->pNext : NULL;
    if (chain == NULL || chain->u.pLayerInfo == NULL) return VK_ERROR_INITIALIZATION_FAILED;
    PFN_vkGetInstanceProcAddr gipa = chain->u.pLayerInfo->pfnNextGetInstanceProcAddr;
    chain->u.pLayerInfo = chain->u.pLayerInfo->pNext;
    PFN_vkCreateInstance create = (PFN_vkCreateInstance)gipa(VK_NULL_HANDLE, "vkCreateInstance");
    if (create == NULL) return VK_ERROR_INITIALIZATION_FAILED;
    VkResult res = create(ci, a, out);
    if (res != VK_SUCCESS) return res;
    struct inst *i = calloc(1, sizeof *i);
    PFN_vkDestroyInstance destroy = (PFN_vkDestroyInstance)gipa(*out, "vkDestroyInstance");
    if (i == NULL) {
        if (destroy != NULL) destroy(*out, a);
        *out = VK_NULL_HANDLE;
        return VK_ERROR_OUT_OF_HOST_MEMORY;
    }
    i->link.key = dispatch_key(*out);
    i->instance = *out;
    i->gipa = gipa;
    CAPSHIM_HOOKS(HOOK_LOOKUP, _, 0)
    link_push(r, &r->instances, &i->link);
    if (r->state == STATE_ACTIVE) {
        struct capshim_json j;
        const char *installed[16];
        size_t n = 0;
        CAPSHIM_HOOKS(HOOK_INSTALLED, _, 0)
        capshim_json_begin(&j, "hooks", "vulkan", r->layer_name);
        capshim_json_str_array(&j, "installed", installed, n);
        capshim_json_u64(&j, "entered", position);
        capshim_json_end_and_write(&j);
        banner(r);
    }
    return VK_SUCCESS;
}

static void do_vkDestroyInstance(struct role *r, VkInstance instance, const VkAllocationCallbacks *a) {
    struct inst *found = (struct inst *)link_take(r, &r->instances, dispatch_key(instance));
    if (found == NULL) return;
    if (found->next_vkDestroyInstance != NULL) found->next_vkDestroyInstance(instance, a);
    free(found);
}

/* ---------- vkCreateDevice enforcement (device role) ----------
 *
 * The device role simulates a weaker GPU, so it refuses what that GPU would
 * refuse: a feature it answers false (a bool key set to 0 in a lower
 * configuration) enabled in VkDeviceCreateInfo::pEnabledFeatures, in a
 * VkPhysicalDeviceFeatures2 or in any chained structure caps_table.h knows,
 * gives VK_ERROR_FEATURE_NOT_PRESENT; an extension it hides gives
 * VK_ERROR_EXTENSION_NOT_PRESENT (vkCreateDevice, Vulkan spec 5.2.1).
 *
 * Restore: when the app role of this same library is active in the same
 * instance with a raise configuration that answers the key true (or adds the
 * extension), the application saw it offered, and the device below really
 * has it, so the device role lets it through ("restored" event). Both roles
 * live in one loaded library, so the device role reads the app role's
 * configuration directly; nothing travels down the pNext chain. */

#define FIELD_STRUCT_NAME(key, kind, ctype, stype, member) #ctype,
static const char *const field_struct[] = {CAPSHIM_FIELDS(FIELD_STRUCT_NAME)};
_Static_assert(sizeof field_struct / sizeof field_struct[0] == CAPSHIM_NUM_FIELDS, "one name per caps_table entry");

/* Whether the app role answers this key true, or adds this extension, in the
 * instance with this dispatch key. */
static int app_restores(void *inst_key, const char *name, int is_extension) {
    struct role *app = &roles[ROLE_APP];
    if (find_inst_by_key(app, inst_key) == NULL) return 0; /* also orders the reads below after its init */
    if (app->state != STATE_ACTIVE || app->cfg.direction != CAPSHIM_RAISE) return 0;
    if (is_extension) {
        const struct capshim_ext *e = capshim_config_ext(&app->cfg, name);
        return e != NULL && e->spec_version > 0;
    }
    const struct capshim_value *v = capshim_config_value(&app->cfg, name);
    return v != NULL && v->value != 0;
}

/* One enabled feature or extension that the device role hides: reported, and
 * counted unless the app role restores it. Returns 1 when refused. */
static int enforce_one(struct role *r, void *inst_key, int is_extension, const char *name, const char *where) {
    int restored = app_restores(inst_key, name, is_extension);
    const char *result = is_extension ? "VK_ERROR_EXTENSION_NOT_PRESENT" : "VK_ERROR_FEATURE_NOT_PRESENT";
    struct capshim_json j;
    capshim_json_begin(&j, restored ? "restored" : "refused", "vulkan", r->layer_name);
    capshim_json_str(&j, "query", "vkCreateDevice");
    capshim_json_str(&j, "kind", is_extension ? "extension" : "feature");
    capshim_json_str(&j, "key", name);
    capshim_json_str(&j, "struct", where);
    if (!restored) capshim_json_str(&j, "result", result);
    capshim_json_end_and_write(&j);
    if (restored) return 0;
    if (getenv("CAPSHIM_QUIET") == NULL || strcmp(getenv("CAPSHIM_QUIET"), "1") != 0) {
        char esc[CAPSHIM_EXT_NAME_MAX * 6];
        capshim_status_escape(esc, sizeof esc, name);
        fprintf(stderr, "capshim-vulkan: %s: vkCreateDevice: %s %s (%s) is not on the simulated device: %s\n",
                r->layer_name, is_extension ? "extension" : "feature", esc, where, result);
    }
    return 1;
}

/* Checks the bool keys of one features structure (stype as in caps_table.h). */
static int enforce_struct(struct role *r, void *inst_key, uint32_t stype, const void *base, const char *where) {
    int refused = 0;
    if (base == NULL) return 0;
    for (size_t k = 0; k < CAPSHIM_NUM_FIELDS; k++) {
        const struct capshim_field *f = &capshim_fields[k];
        if (f->stype != stype || f->kind != CAPSHIM_BOOL) continue;
        const struct capshim_value *v = capshim_config_value(&r->cfg, f->key);
        if (v == NULL || v->value != 0) continue;
        VkBool32 on;
        memcpy(&on, (const unsigned char *)base + f->offset, sizeof on);
        if (on) refused += enforce_one(r, inst_key, 0, f->key, where ? where : field_struct[k]);
    }
    return refused;
}

/* VK_SUCCESS, or the error the simulated device gives for this create info. */
static VkResult enforce_create_device(struct role *r, VkPhysicalDevice pd, const VkDeviceCreateInfo *ci) {
    if (r != &roles[ROLE_DEVICE] || r->state != STATE_ACTIVE || r->cfg.direction != CAPSHIM_LOWER) return VK_SUCCESS;
    void *inst_key = dispatch_key(pd);
    int exts = 0, feats = 0;
    for (uint32_t e = 0; ci->ppEnabledExtensionNames != NULL && e < ci->enabledExtensionCount; e++) {
        const char *name = ci->ppEnabledExtensionNames[e];
        const struct capshim_ext *x = name != NULL ? capshim_config_ext(&r->cfg, name) : NULL;
        if (x != NULL && x->spec_version == 0) exts += enforce_one(r, inst_key, 1, x->name, "ppEnabledExtensionNames");
    }
    feats += enforce_struct(r, inst_key, CAPSHIM_STYPE_BASE_FEATURES, ci->pEnabledFeatures, "pEnabledFeatures");
    const VkBaseInStructure *s = (const VkBaseInStructure *)ci->pNext;
    for (int n = 0; s != NULL && n < MAX_CHAIN; n++, s = s->pNext) {
        if (s->sType == VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FEATURES_2)
            feats += enforce_struct(r, inst_key, CAPSHIM_STYPE_BASE_FEATURES,
                                    &((const VkPhysicalDeviceFeatures2 *)(const void *)s)->features,
                                    "VkPhysicalDeviceFeatures2");
        else
            feats += enforce_struct(r, inst_key, (uint32_t)s->sType, s, NULL);
    }
    /* Fail closed: a feature enabled past the limit would go unchecked. */
    if (s != NULL) {
        chain_cut(r, "vkCreateDevice", "VK_ERROR_INITIALIZATION_FAILED");
        return VK_ERROR_INITIALIZATION_FAILED;
    }
    if (exts > 0) return VK_ERROR_EXTENSION_NOT_PRESENT;
    return feats > 0 ? VK_ERROR_FEATURE_NOT_PRESENT : VK_SUCCESS;
}

static VkResult do_vkCreateDevice(struct role *r, VkPhysicalDevice pd, const VkDeviceCreateInfo *ci,
                                  const VkAllocationCallbacks *a, VkDevice *out) {
    VkLayerDeviceCreateInfo *chain = (VkLayerDeviceCreateInfo *)ci->pNext;
    for (int n = 0; chain != NULL && !(chain->sType == VK_STRUCTURE_TYPE_LOADER_DEVICE_CREATE_INFO &&
                                       chain->function == VK_LAYER_LINK_INFO);
         n++)
        chain = n < MAX_CHAIN ? (VkLayerDeviceCreateInfo *)chain->pNext : NULL;
    if (chain == NULL || chain->u.pLayerInfo == NULL) return VK_ERROR_INITIALIZATION_FAILED;
    PFN_vkGetInstanceProcAddr gipa = chain->u.pLayerInfo->pfnNextGetInstanceProcAddr;
    PFN_vkGetDeviceProcAddr gdpa = chain->u.pLayerInfo->pfnNextGetDeviceProcAddr;
    struct inst *i = find_inst_by_key(r, dispatch_key(pd));
    if (i == NULL) return VK_ERROR_INITIALIZATION_FAILED;
    VkResult refused = enforce_create_device(r, pd, ci);
    if (refused != VK_SUCCESS) return refused;
    PFN_vkCreateDevice create = (PFN_vkCreateDevice)gipa(i->instance, "vkCreateDevice");
    if (create == NULL) return VK_ERROR_INITIALIZATION_FAILED;
    chain->u.pLayerInfo = chain->u.pLayerInfo->pNext;
    VkResult res = create(pd, ci, a, out);
    if (res != VK_SUCCESS) return res;
    struct dev *d = calloc(1, sizeof *d);
    PFN_vkDestroyDevice destroy = (PFN_vkDestroyDevice)gdpa(*out, "vkDestroyDevice");
    if (d == NULL) {
        if (destroy != NULL) destroy(*out, a);
        *out = VK_NULL_HANDLE;
        return VK_ERROR_OUT_OF_HOST_MEMORY;
    }
    d->link.key = dispatch_key(*out);
    d->gdpa = gdpa;
    d->destroy = destroy;
    link_push(r, &r->devices, &d->link);
    return VK_SUCCESS;
}

static void do_vkDestroyDevice(struct role *r, VkDevice device, const VkAllocationCallbacks *a) {
    struct dev *found = (struct dev *)link_take(r, &r->devices, dispatch_key(device));
    if (found == NULL) return;
    if (found->destroy != NULL) found->destroy(device, a);
    free(found);
}

/* ---------- per-role entry points ---------- */

#define HOOK_WRAPPER(R, IDX, LEVEL, ret, retkw, name, params, args) \
    static VKAPI_ATTR ret VKAPI_CALL R##_##name params { retkw do_##name(&roles[IDX], UNPAREN args); }

#define ANSWER(R, name) \
    if (strcmp(n, #name) == 0) return (PFN_vkVoidFunction)R##_##name;
#define CHAIN_GIPA(R, name) ANSWER(R, name)
#define INST_GIPA(R, name) ANSWER(R, name)
#define QUERY_GIPA(R, name) \
    if (r->state == STATE_ACTIVE) ANSWER(R, name)
#define DEV_GIPA(R, name)
#define HOOK_GIPA(R, IDX, LEVEL, ret, retkw, name, params, args) LEVEL##_GIPA(R, name)
#define CHAIN_GDPA(R, name)
#define INST_GDPA(R, name)
#define QUERY_GDPA(R, name)
#define DEV_GDPA(R, name) ANSWER(R, name)
#define HOOK_GDPA(R, IDX, LEVEL, ret, retkw, name, params, args) LEVEL##_GDPA(R, name)

/* One role's wrappers and its three exported entry points (the manifest's
 * "functions" field names them). */
#define ROLE_FUNCS(R, IDX)                                                                                       \
    CAPSHIM_HOOKS(HOOK_WRAPPER, R, IDX)                                                                          \
    EXPORT VKAPI_ATTR PFN_vkVoidFunction VKAPI_CALL capshim_##R##_GetDeviceProcAddr(VkDevice d, const char *n) { \
        if (n == NULL) return NULL;                                                                              \
        if (strcmp(n, "vkGetDeviceProcAddr") == 0) return (PFN_vkVoidFunction)capshim_##R##_GetDeviceProcAddr;   \
        CAPSHIM_HOOKS(HOOK_GDPA, R, IDX)                                                                         \
        struct dev *dv = find_dev(&roles[IDX], dispatch_key(d));                                                 \
        return (dv != NULL && dv->gdpa != NULL) ? dv->gdpa(d, n) : NULL;                                         \
    }                                                                                                            \
    EXPORT VKAPI_ATTR PFN_vkVoidFunction VKAPI_CALL capshim_##R##_GetInstanceProcAddr(VkInstance in,             \
                                                                                      const char *n) {           \
        struct role *r = &roles[IDX];                                                                            \
        if (n == NULL) return NULL;                                                                              \
        ensure_init(r);                                                                                          \
        if (strcmp(n, "vkGetInstanceProcAddr") == 0) return (PFN_vkVoidFunction)capshim_##R##_GetInstanceProcAddr; \
        if (strcmp(n, "vkGetDeviceProcAddr") == 0) return (PFN_vkVoidFunction)capshim_##R##_GetDeviceProcAddr;   \
        CAPSHIM_HOOKS(HOOK_GIPA, R, IDX)                                                                         \
        if (in == VK_NULL_HANDLE) return NULL;                                                                   \
        struct inst *i = find_inst_by_key(r, dispatch_key(in));                                                  \
        return (i != NULL && i->gipa != NULL) ? i->gipa(in, n) : NULL;                                           \
    }                                                                                                            \
    EXPORT VKAPI_ATTR VkResult VKAPI_CALL capshim_##R##_NegotiateLoaderLayerInterfaceVersion(                    \
        VkNegotiateLayerInterface *v) {                                                                          \
        if (v == NULL || v->sType != LAYER_NEGOTIATE_INTERFACE_STRUCT) return VK_ERROR_INITIALIZATION_FAILED;    \
        ensure_init(&roles[IDX]);                                                                                \
        if (v->loaderLayerInterfaceVersion > 2) v->loaderLayerInterfaceVersion = 2;                              \
        if (v->loaderLayerInterfaceVersion >= 2) {                                                               \
            v->pfnGetInstanceProcAddr = capshim_##R##_GetInstanceProcAddr;                                       \
            v->pfnGetDeviceProcAddr = capshim_##R##_GetDeviceProcAddr;                                           \
            v->pfnGetPhysicalDeviceProcAddr = NULL;                                                              \
        }                                                                                                        \
        return VK_SUCCESS;                                                                                       \
    }

ROLE_FUNCS(device, ROLE_DEVICE)
ROLE_FUNCS(app, ROLE_APP)

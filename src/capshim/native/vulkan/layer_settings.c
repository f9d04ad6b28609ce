/* capshim Vulkan layer: a role's configuration (layer.h lists the files). */
#include "layer.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <stdatomic.h>
#include <string.h>
#include <unistd.h>

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

/* With several configurations, each names its devices and no index or UUID is named twice:
 * 0, else -1 with the reason in err (configuration k of n, the earlier ones checked). */
static int config_clash(const struct capshim_config *cfgs, size_t k, size_t n, char *err, size_t errlen) {
    if (n > 1 && cfgs[k].ndevices == 0) {
        snprintf(err, errlen, "several configurations: each needs a devices= key");
        return -1;
    }
    for (size_t o = 0; o < k; o++)
        for (size_t a = 0; a < cfgs[k].ndevices; a++)
            for (size_t b = 0; b < cfgs[o].ndevices; b++) {
                const struct capshim_device_spec *x = &cfgs[k].devices[a], *y = &cfgs[o].devices[b];
                if (x->is_uuid == y->is_uuid &&
                    (x->is_uuid ? memcmp(x->uuid, y->uuid, CAPSHIM_UUID_BYTES) == 0 : x->index == y->index)) {
                    snprintf(err, errlen, "a device named by two configurations");
                    return -1;
                }
            }
    return 0;
}

void config_clash_device(struct role *r, size_t a, size_t b, const char *device) {
    static atomic_ullong said[NUM_ROLES]; /* bit per pair of configurations already reported */
    unsigned long long bit = 1ull << (a * CAPSHIM_MAX_CONFIGS + b);
    if (a >= r->ncfg || b >= r->ncfg || (atomic_fetch_or(&said[r == &roles[ROLE_APP]], bit) & bit) != 0) return;
    char reason[1024];
    snprintf(reason, sizeof reason, "a device named by two configurations: device %s by %s and by %s; it answers stock",
             device, r->paths[a], r->paths[b]);
    const char *both[2] = {r->paths[a], r->paths[b]};
    struct capshim_json j;
    capshim_json_begin(&j, "config", "vulkan", r->layer_name);
    capshim_json_bool(&j, "accepted", 0);
    capshim_json_str(&j, "source", r->paths[b]);
    capshim_json_str(&j, "reason", reason);
    capshim_json_str_array(&j, "sources", both, 2);
    capshim_json_str(&j, "device", device);
    capshim_json_end_and_write(&j);
    if (getenv("CAPSHIM_QUIET") == NULL || strcmp(getenv("CAPSHIM_QUIET"), "1") != 0)
        fprintf(stderr, "capshim-vulkan: %s: %s\n", r->layer_name, reason);
}

/* "devices": the specs of c's devices= key, when it has one. */
static void config_devices(struct capshim_json *j, const struct capshim_config *c) {
    char texts[CAPSHIM_MAX_DEVICE_SPECS][CAPSHIM_SPEC_TEXT_MAX];
    const char *specs[CAPSHIM_MAX_DEVICE_SPECS];
    size_t n = capshim_device_specs(c, texts, specs);
    if (n > 0) capshim_json_str_array(j, "devices", specs, n);
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
    const char *value = getenv(r->config_env);
    if (value == NULL || value[0] == '\0') {
        char reason[96];
        snprintf(reason, sizeof reason, "%s is not set", r->config_env);
        config_rejected(r, r->config_env, reason);
        return;
    }
    static char lists[NUM_ROLES][8192];
    static char buf[NUM_ROLES][CAPSHIM_CONFIG_MAX_BYTES + 1];
    int idx = r == &roles[ROLE_APP] ? ROLE_APP : ROLE_DEVICE;
    const char **paths = r->paths;
    char err[256];
    int npaths = capshim_config_paths(value, lists[idx], sizeof lists[idx], paths, err, sizeof err);
    if (npaths < 0) {
        config_rejected(r, r->config_env, err);
        return;
    }
    for (int k = 0; k < npaths; k++) {
        size_t len = 0;
        if (read_file(paths[k], buf[idx], CAPSHIM_CONFIG_MAX_BYTES + 1, &len, err, sizeof err) != 0 ||
            capshim_config_parse(buf[idx], len, keyspecs, nkeyspecs, &r->cfgs[k], err, sizeof err) != 0 ||
            config_clash(r->cfgs, (size_t)k, (size_t)npaths, err, sizeof err) != 0) {
            memset(r->cfgs, 0, sizeof r->cfgs);
            config_rejected(r, paths[k], err);
            return;
        }
    }
    r->ncfg = (size_t)npaths;
    r->state = STATE_ACTIVE;
    for (int k = 0; k < npaths; k++) {
        const struct capshim_config *c = &r->cfgs[k];
        struct capshim_json j;
        capshim_json_begin(&j, "config", "vulkan", r->layer_name);
        capshim_json_bool(&j, "accepted", 1);
        capshim_json_str(&j, "source", paths[k]);
        capshim_json_str(&j, "direction", c->direction == CAPSHIM_RAISE ? "raise" : "lower");
        capshim_json_u64(&j, "values", c->nvalues);
        capshim_json_u64(&j, "extensions", c->nexts);
        if (c->profile[0] != '\0') capshim_json_str(&j, "profile", c->profile);
        config_devices(&j, c);
        capshim_json_end_and_write(&j);
    }
}

static void init_device_role(void) { role_init(&roles[ROLE_DEVICE]); }
static void init_app_role(void) { role_init(&roles[ROLE_APP]); }

void ensure_init(struct role *r) {
    (void)pthread_once(&r->once, r == &roles[ROLE_APP] ? init_app_role : init_device_role);
}

void banner(struct role *r) {
    int quiet = getenv("CAPSHIM_QUIET") != NULL && strcmp(getenv("CAPSHIM_QUIET"), "1") == 0;
    pthread_mutex_lock(&r->lock);
    int done = r->banner_done;
    r->banner_done = 1;
    pthread_mutex_unlock(&r->lock);
    if (done || quiet) return;
    for (size_t k = 0; k < r->ncfg; k++) {
        const struct capshim_config *c = &r->cfgs[k];
        char line[1024];
        int n = snprintf(line, sizeof line, "capshim-vulkan: %s active in %s[%ld]: %s", r->layer_name,
                         capshim_process_name(), (long)getpid(), c->direction == CAPSHIM_RAISE ? "raise" : "lower");
        for (size_t d = 0; d < c->ndevices && n > 0 && (size_t)n < sizeof line - 64; d++) {
            char spec[40];
            if (c->devices[d].is_uuid)
                capshim_uuid_text(c->devices[d].uuid, spec, sizeof spec);
            else
                snprintf(spec, sizeof spec, "%u", c->devices[d].index);
            n += snprintf(line + n, sizeof line - (size_t)n, "%s%s%s", d == 0 ? " on device " : ",", spec,
                          d + 1 == c->ndevices ? ":" : "");
        }
        size_t shown = 0;
        for (size_t i = 0; i < c->nvalues && n > 0 && (size_t)n < sizeof line - 64; i++, shown++) {
            if (shown == 6) break;
            const struct capshim_value *v = &c->values[i];
            uint32_t u = (uint32_t)v->value;
            if (v->kind == CAPSHIM_VERSION)
                n += snprintf(line + n, sizeof line - (size_t)n, " %s=%u.%u.%u", v->key, VK_API_VERSION_MAJOR(u),
                              VK_API_VERSION_MINOR(u), VK_API_VERSION_PATCH(u));
            else
                n += snprintf(line + n, sizeof line - (size_t)n, " %s=%llu", v->key, (unsigned long long)v->value);
        }
        if (n > 0 && (size_t)n < sizeof line - 64 && c->nvalues > shown)
            n += snprintf(line + n, sizeof line - (size_t)n, " (+%zu more)", c->nvalues - shown);
        if (n > 0 && (size_t)n < sizeof line - 64 && c->nexts > 0)
            snprintf(line + n, sizeof line - (size_t)n, "; %zu extension(s) %s", c->nexts,
                     c->direction == CAPSHIM_RAISE ? "added" : "hidden");
        fprintf(stderr, "%s\n", line);
    }
}

/* capshim Vulkan layer: the patched answers (layer.h lists the files). */
#include "layer.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void log_change(struct role *r, const struct capshim_config *c, const char *query, const char *key,
                       uint32_t stock, uint32_t reported) {
    int device = c->ndevices > 0 ? current_device() : -1;
    pthread_mutex_lock(&r->lock);
    for (size_t i = 0; i < r->nlogged; i++) {
        struct logged *l = &r->logged[i];
        if (l->stock == stock && l->reported == reported && l->device == device && strcmp(l->query, query) == 0 &&
            strcmp(l->key, key) == 0) {
            pthread_mutex_unlock(&r->lock);
            return;
        }
    }
    int full = r->nlogged >= MAX_LOGGED;
    int report_full = full && !r->log_full_reported;
    if (!full) r->logged[r->nlogged++] = (struct logged){query, key, stock, reported, device};
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
    device_fields(&j, c);
    capshim_json_end_and_write(&j);
}

/* ---------- patching ---------- */

static void patch_struct(struct role *r, const struct capshim_config *c, uint32_t stype, void *base,
                         const char *query) {
    if (base == NULL || c == NULL) return;
    for (size_t i = 0; i < CAPSHIM_NUM_FIELDS; i++) {
        const struct capshim_field *f = &capshim_fields[i];
        if (f->stype != stype) continue;
        const struct capshim_value *v = capshim_config_value(c, f->key);
        if (v == NULL) continue;
        unsigned char *p = (unsigned char *)base + f->offset;
        uint32_t stock;
        memcpy(&stock, p, sizeof stock);
        /* the per-kind answer (config.c): direction by kind, exact keys as set */
        uint32_t rep = capshim_answer(f->kind, f->sem, c->direction, stock, (uint32_t)v->value);
        if (rep != stock) {
            memcpy(p, &rep, sizeof rep);
            log_change(r, c, query, f->key, stock, rep);
        }
    }
}

static int quiet(void) {
    const char *q = getenv("CAPSHIM_QUIET");
    return q != NULL && strcmp(q, "1") == 0;
}

/* A pNext chain longer than MAX_CHAIN (or one that loops): one "chain_cut"
 * event and one stderr line per call. */
void chain_cut(struct role *r, const char *query, const char *result) {
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

static void patch_chain(struct role *r, const struct capshim_config *c, void *pnext, const char *query) {
    if (c == NULL) return;
    VkBaseOutStructure *s = (VkBaseOutStructure *)pnext;
    int n = 0;
    for (; s != NULL && n < MAX_CHAIN; n++, s = s->pNext) patch_struct(r, c, (uint32_t)s->sType, s, query);
    if (s != NULL) chain_cut(r, query, NULL);
}

/* deviceName, when the configuration sets one: a string, so outside the
 * numeric table; reported once per role as a "changed" event with strings. */
static void patch_device_name(struct role *r, const struct capshim_config *c, VkPhysicalDeviceProperties *p,
                              const char *query) {
    static unsigned long long logged[NUM_ROLES]; /* bit per device index (bit 63: every device) */
    if (p == NULL || c == NULL || c->device_name[0] == '\0') return;
    if (strncmp(p->deviceName, c->device_name, sizeof p->deviceName) == 0) return;
    char stock[VK_MAX_PHYSICAL_DEVICE_NAME_SIZE];
    memcpy(stock, p->deviceName, sizeof stock);
    stock[sizeof stock - 1] = '\0';
    memcpy(p->deviceName, c->device_name, sizeof p->deviceName);
    int idx = r == &roles[ROLE_APP] ? ROLE_APP : ROLE_DEVICE;
    int dev = c->ndevices > 0 ? current_device() : -1;
    unsigned long long bit = 1ull << (dev >= 0 && dev < 63 ? dev : 63);
    if (__atomic_fetch_or(&logged[idx], bit, __ATOMIC_SEQ_CST) & bit) return;
    struct capshim_json j;
    capshim_json_begin(&j, "changed", "vulkan", r->layer_name);
    capshim_json_str(&j, "query", query);
    capshim_json_str(&j, "key", "deviceName");
    capshim_json_str(&j, "stock", stock);
    capshim_json_str(&j, "reported", c->device_name);
    device_fields(&j, c);
    capshim_json_end_and_write(&j);
}

void do_vkGetPhysicalDeviceProperties(struct role *r, VkPhysicalDevice pd, VkPhysicalDeviceProperties *p) {
    struct inst *i = find_inst_by_key(r, dispatch_key(pd));
    if (i == NULL || i->next_vkGetPhysicalDeviceProperties == NULL) return;
    i->next_vkGetPhysicalDeviceProperties(pd, p);
    const struct capshim_config *c = role_cfg(r, pd);
    patch_struct(r, c, CAPSHIM_STYPE_BASE_PROPERTIES, p, "vkGetPhysicalDeviceProperties");
    patch_device_name(r, c, p, "vkGetPhysicalDeviceProperties");
}

static void do_props2(struct role *r, VkPhysicalDevice pd, VkPhysicalDeviceProperties2 *p, int khr) {
    struct inst *i = find_inst_by_key(r, dispatch_key(pd));
    if (i == NULL) return;
    PFN_vkGetPhysicalDeviceProperties2 core = i->next_vkGetPhysicalDeviceProperties2;
    PFN_vkGetPhysicalDeviceProperties2KHR ext = i->next_vkGetPhysicalDeviceProperties2KHR;
    PFN_vkGetPhysicalDeviceProperties2 fn = khr ? (ext ? ext : core) : (core ? core : ext);
    if (fn == NULL || p == NULL) return;
    fn(pd, p);
    const struct capshim_config *c = role_cfg(r, pd);
    patch_struct(r, c, CAPSHIM_STYPE_BASE_PROPERTIES, &p->properties, "vkGetPhysicalDeviceProperties2");
    patch_device_name(r, c, &p->properties, "vkGetPhysicalDeviceProperties2");
    patch_chain(r, c, p->pNext, "vkGetPhysicalDeviceProperties2");
}

void do_vkGetPhysicalDeviceProperties2(struct role *r, VkPhysicalDevice pd, VkPhysicalDeviceProperties2 *p) {
    do_props2(r, pd, p, 0);
}

void do_vkGetPhysicalDeviceProperties2KHR(struct role *r, VkPhysicalDevice pd,
                                          VkPhysicalDeviceProperties2 *p) {
    do_props2(r, pd, p, 1);
}

void do_vkGetPhysicalDeviceFeatures(struct role *r, VkPhysicalDevice pd, VkPhysicalDeviceFeatures *f) {
    struct inst *i = find_inst_by_key(r, dispatch_key(pd));
    if (i == NULL || i->next_vkGetPhysicalDeviceFeatures == NULL) return;
    i->next_vkGetPhysicalDeviceFeatures(pd, f);
    patch_struct(r, role_cfg(r, pd), CAPSHIM_STYPE_BASE_FEATURES, f, "vkGetPhysicalDeviceFeatures");
}

static void do_feats2(struct role *r, VkPhysicalDevice pd, VkPhysicalDeviceFeatures2 *f, int khr) {
    struct inst *i = find_inst_by_key(r, dispatch_key(pd));
    if (i == NULL) return;
    PFN_vkGetPhysicalDeviceFeatures2 core = i->next_vkGetPhysicalDeviceFeatures2;
    PFN_vkGetPhysicalDeviceFeatures2KHR ext = i->next_vkGetPhysicalDeviceFeatures2KHR;
    PFN_vkGetPhysicalDeviceFeatures2 fn = khr ? (ext ? ext : core) : (core ? core : ext);
    if (fn == NULL || f == NULL) return;
    fn(pd, f);
    const struct capshim_config *c = role_cfg(r, pd);
    patch_struct(r, c, CAPSHIM_STYPE_BASE_FEATURES, &f->features, "vkGetPhysicalDeviceFeatures2");
    patch_chain(r, c, f->pNext, "vkGetPhysicalDeviceFeatures2");
}

void do_vkGetPhysicalDeviceFeatures2(struct role *r, VkPhysicalDevice pd, VkPhysicalDeviceFeatures2 *f) {
    do_feats2(r, pd, f, 0);
}

void do_vkGetPhysicalDeviceFeatures2KHR(struct role *r, VkPhysicalDevice pd, VkPhysicalDeviceFeatures2 *f) {
    do_feats2(r, pd, f, 1);
}

VkResult do_vkEnumerateDeviceExtensionProperties(struct role *r, VkPhysicalDevice pd, const char *layer,
                                                 uint32_t *count, VkExtensionProperties *props) {
    if (layer != NULL && strcmp(layer, r->layer_name) == 0) {
        if (count == NULL) return VK_ERROR_INITIALIZATION_FAILED;
        *count = 0;
        return VK_SUCCESS;
    }
    struct inst *i = find_inst_by_key(r, dispatch_key(pd));
    PFN_vkEnumerateDeviceExtensionProperties next = i ? i->next_vkEnumerateDeviceExtensionProperties : NULL;
    if (next == NULL) return VK_ERROR_INITIALIZATION_FAILED;
    const struct capshim_config *c = role_cfg(r, pd);
    if (layer != NULL || count == NULL || c == NULL) return next(pd, layer, count, props);
    /* Fetch the list from below. */
    VkExtensionProperties *below = NULL;
    uint32_t n = 0;
    VkResult res = VK_INCOMPLETE;
    for (int tries = 0; tries < 8 && res == VK_INCOMPLETE; tries++) {
        res = next(pd, NULL, &n, NULL);
        free(below);
        below = NULL;
        if (res != VK_SUCCESS) return res;
        below = calloc((size_t)n + c->nexts + 1, sizeof *below);
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
        const struct capshim_ext *e = capshim_config_ext(c, below[k].extensionName);
        if (e != NULL && c->direction == CAPSHIM_LOWER && e->spec_version == 0) {
            log_change(r, c, "vkEnumerateDeviceExtensionProperties", e->name, below[k].specVersion, 0);
            continue;
        }
        below[m++] = below[k];
    }
    if (c->direction == CAPSHIM_RAISE) {
        for (size_t x = 0; x < c->nexts; x++) {
            const struct capshim_ext *e = &c->exts[x];
            int present = 0;
            for (uint32_t k = 0; k < m; k++)
                if (strcmp(below[k].extensionName, e->name) == 0) present = 1;
            if (present || e->spec_version == 0) continue;
            memset(&below[m], 0, sizeof below[m]);
            memcpy(below[m].extensionName, e->name, strlen(e->name) + 1);
            below[m].specVersion = e->spec_version;
            m++;
            log_change(r, c, "vkEnumerateDeviceExtensionProperties", e->name, 0, e->spec_version);
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


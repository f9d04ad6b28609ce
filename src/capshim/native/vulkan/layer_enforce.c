/* capshim Vulkan layer: vkCreateDevice enforcement (layer.h lists the files). */
#include "layer.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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
static int app_restores(VkPhysicalDevice pd, const char *name, int is_extension) {
    struct role *app = &roles[ROLE_APP];
    if (find_inst_by_key(app, dispatch_key(pd)) == NULL) return 0; /* also orders the reads below after its init */
    const struct capshim_config *c = app->state == STATE_ACTIVE ? role_cfg(app, pd) : NULL;
    if (c == NULL || c->direction != CAPSHIM_RAISE) return 0;
    if (is_extension) {
        const struct capshim_ext *e = capshim_config_ext(c, name);
        return e != NULL && e->spec_version > 0;
    }
    const struct capshim_value *v = capshim_config_value(c, name);
    return v != NULL && v->value != 0;
}

/* One enabled feature or extension that the device role hides: reported, and
 * counted unless the app role restores it. Returns 1 when refused. */
static int enforce_one(struct role *r, VkPhysicalDevice pd, int is_extension, const char *name, const char *where) {
    int restored = app_restores(pd, name, is_extension);
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
static int enforce_struct(struct role *r, const struct capshim_config *c, VkPhysicalDevice pd, uint32_t stype,
                          const void *base, const char *where) {
    int refused = 0;
    if (base == NULL) return 0;
    for (size_t k = 0; k < CAPSHIM_NUM_FIELDS; k++) {
        const struct capshim_field *f = &capshim_fields[k];
        if (f->stype != stype || f->kind != CAPSHIM_BOOL) continue;
        const struct capshim_value *v = capshim_config_value(c, f->key);
        if (v == NULL || v->value != 0) continue;
        VkBool32 on;
        memcpy(&on, (const unsigned char *)base + f->offset, sizeof on);
        if (on) refused += enforce_one(r, pd, 0, f->key, where ? where : field_struct[k]);
    }
    return refused;
}

/* VK_SUCCESS, or the error the simulated device gives for this create info. */
VkResult enforce_create_device(struct role *r, VkPhysicalDevice pd, const VkDeviceCreateInfo *ci) {
    if (r != &roles[ROLE_DEVICE] || r->state != STATE_ACTIVE) return VK_SUCCESS;
    const struct capshim_config *c = role_cfg(r, pd);
    if (c == NULL || c->direction != CAPSHIM_LOWER) return VK_SUCCESS;
    int exts = 0, feats = 0;
    for (uint32_t e = 0; ci->ppEnabledExtensionNames != NULL && e < ci->enabledExtensionCount; e++) {
        const char *name = ci->ppEnabledExtensionNames[e];
        const struct capshim_ext *x = name != NULL ? capshim_config_ext(c, name) : NULL;
        if (x != NULL && x->spec_version == 0) exts += enforce_one(r, pd, 1, x->name, "ppEnabledExtensionNames");
    }
    feats += enforce_struct(r, c, pd, CAPSHIM_STYPE_BASE_FEATURES, ci->pEnabledFeatures, "pEnabledFeatures");
    const VkBaseInStructure *s = (const VkBaseInStructure *)ci->pNext;
    for (int n = 0; s != NULL && n < MAX_CHAIN; n++, s = s->pNext) {
        if (s->sType == VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FEATURES_2)
            feats += enforce_struct(r, c, pd, CAPSHIM_STYPE_BASE_FEATURES,
                                    &((const VkPhysicalDeviceFeatures2 *)(const void *)s)->features,
                                    "VkPhysicalDeviceFeatures2");
        else
            feats += enforce_struct(r, c, pd, (uint32_t)s->sType, s, NULL);
    }
    /* Fail closed: a feature enabled past the limit would go unchecked. */
    if (s != NULL) {
        chain_cut(r, "vkCreateDevice", "VK_ERROR_INITIALIZATION_FAILED");
        return VK_ERROR_INITIALIZATION_FAILED;
    }
    if (exts > 0) return VK_ERROR_EXTENSION_NOT_PRESENT;
    return feats > 0 ? VK_ERROR_FEATURE_NOT_PRESENT : VK_SUCCESS;
}


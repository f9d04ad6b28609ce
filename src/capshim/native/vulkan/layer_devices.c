/* capshim Vulkan layer: which configuration answers for a physical device (layer.h lists the files).
 *
 * A role holds up to CAPSHIM_MAX_CONFIGS configurations (its variable lists their paths separated
 * by ':'). One without a devices= key answers for every device (it is then the only one); else a
 * configuration answers for the physical devices its devices= specs name (config.h): by index in
 * the order the next layer (the driver, below capshim's layers) enumerates them, or by deviceUUID
 * (VkPhysicalDeviceIDProperties, Vulkan 1.1 / VK_KHR_get_physical_device_properties2, queried
 * from the next layer, which capshim never changes). A device no configuration names answers
 * stock. The instance's devices are listed once, on first need, and each one's UUID cached.
 */
#include "layer.h"

#include <stdio.h>
#include <string.h>

static __thread int t_index = -1;
static __thread char t_uuid[40];
/* Set while this thread lists the devices or reads a UUID: a layer below that calls back up
 * through the loader while it enumerates (Mesa's VK_LAYER_MESA_device_select asks each device's
 * extensions: measured with Mesa 22.3.6) must get stock answers, not a listing again. */
static __thread int t_busy;

/* The index and UUID of pd in the instance i (next layer's order); 0 when pd was found. */
static int identify(struct role *r, struct inst *i, VkPhysicalDevice pd, uint32_t *index, unsigned char *uuid,
                    int *have_uuid) {
    pthread_mutex_lock(&r->lock);
    int listed = i->listed;
    pthread_mutex_unlock(&r->lock);
    if (!listed) {
        PFN_vkEnumeratePhysicalDevices en =
            (PFN_vkEnumeratePhysicalDevices)i->gipa(i->instance, "vkEnumeratePhysicalDevices");
        VkPhysicalDevice found[CAPSHIM_DEVICE_INDEX_MAX + 1];
        uint32_t n = CAPSHIM_DEVICE_INDEX_MAX + 1;
        VkResult res = en != NULL ? en(i->instance, &n, found) : VK_ERROR_INITIALIZATION_FAILED;
        if (res != VK_SUCCESS && res != VK_INCOMPLETE) return -1;
        pthread_mutex_lock(&r->lock);
        memcpy(i->pds, found, (size_t)n * sizeof found[0]);
        i->npds = n;
        i->listed = 1;
        pthread_mutex_unlock(&r->lock);
    }
    uint32_t k = 0;
    pthread_mutex_lock(&r->lock);
    while (k < i->npds && i->pds[k] != pd) k++;
    int known = k < i->npds && i->uuid_known[k];
    if (known) memcpy(uuid, i->uuids[k], CAPSHIM_UUID_BYTES);
    uint32_t npds = i->npds;
    pthread_mutex_unlock(&r->lock);
    if (k >= npds) return -1;
    *index = k;
    *have_uuid = known;
    if (known) return 0;
    PFN_vkGetPhysicalDeviceProperties2 p2 = i->next_vkGetPhysicalDeviceProperties2
                                                ? i->next_vkGetPhysicalDeviceProperties2
                                                : i->next_vkGetPhysicalDeviceProperties2KHR;
    PFN_vkGetPhysicalDeviceProperties base = i->next_vkGetPhysicalDeviceProperties;
    VkPhysicalDeviceProperties bp;
    if (p2 == NULL || base == NULL) return 0;
    base(pd, &bp);
    if (bp.apiVersion < VK_API_VERSION_1_1 && i->next_vkGetPhysicalDeviceProperties2KHR == NULL) return 0;
    VkPhysicalDeviceIDProperties id = {VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_ID_PROPERTIES, NULL, {0}, {0}, {0}, 0, 0};
    VkPhysicalDeviceProperties2 props = {VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_PROPERTIES_2, &id, {0}};
    p2(pd, &props);
    memcpy(uuid, id.deviceUUID, CAPSHIM_UUID_BYTES);
    *have_uuid = 1;
    pthread_mutex_lock(&r->lock);
    memcpy(i->uuids[k], id.deviceUUID, CAPSHIM_UUID_BYTES);
    i->uuid_known[k] = 1;
    pthread_mutex_unlock(&r->lock);
    return 0;
}

const struct capshim_config *role_cfg(struct role *r, VkPhysicalDevice pd) {
    t_index = -1;
    t_uuid[0] = '\0';
    if (r->ncfg == 0) return NULL;
    if (r->ncfg == 1 && r->cfgs[0].ndevices == 0) return &r->cfgs[0];
    if (t_busy) return NULL;
    struct inst *i = find_inst_by_key(r, dispatch_key(pd));
    uint32_t index = 0;
    unsigned char uuid[CAPSHIM_UUID_BYTES];
    int have_uuid = 0;
    t_busy = 1;
    int found = i != NULL && identify(r, i, pd, &index, uuid, &have_uuid) == 0;
    t_busy = 0;
    if (!found) return NULL;
    t_index = (int)index;
    if (have_uuid) capshim_uuid_dashed(uuid, t_uuid, sizeof t_uuid);
    /* The one configuration naming the device; two (its index in one, its UUID in another: the
     * load-time check compares specs of one kind only) are an invalid configuration for it: stock. */
    size_t first = r->ncfg;
    for (size_t k = 0; k < r->ncfg; k++) {
        if (!capshim_config_names_device(&r->cfgs[k], index, have_uuid ? uuid : NULL)) continue;
        if (first == r->ncfg) {
            first = k;
            continue;
        }
        char text[64];
        snprintf(text, sizeof text, "%u%s%s%s", index, t_uuid[0] ? " (" : "", t_uuid, t_uuid[0] ? ")" : "");
        config_clash_device(r, first, k, text);
        return NULL;
    }
    return first < r->ncfg ? &r->cfgs[first] : NULL;
}

void device_fields(struct capshim_json *j, const struct capshim_config *c) {
    if (c == NULL || c->ndevices == 0) return;
    if (t_index >= 0) capshim_json_u64(j, "device", (uint64_t)t_index);
    if (t_uuid[0] != '\0') capshim_json_str(j, "uuid", t_uuid);
    if (c->profile[0] != '\0') capshim_json_str(j, "profile", c->profile);
}

int current_device(void) { return t_index; }

/* capshim Vulkan layer: tool info (layer.h lists the files). */
#include "layer.h"

#include <stdio.h>
#include <stdlib.h>

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

static void fill_tool(const struct role *r, const struct capshim_config *c, VkPhysicalDeviceToolProperties *t) {
    int app = r == &roles[ROLE_APP];
    const char *profile = c->profile[0] != '\0' ? c->profile : "(unnamed configuration)";
    const char *dir = c->direction == CAPSHIM_RAISE ? "raise" : "lower";
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
    const struct capshim_config *c = role_cfg(r, pd);
    if (c == NULL) /* a device this role answers stock for: not a tool there */
        return next != NULL ? next(pd, count, tools) : (*count = 0, VK_SUCCESS);
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
    fill_tool(r, c, &all[0]);
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

VkResult do_vkGetPhysicalDeviceToolProperties(struct role *r, VkPhysicalDevice pd, uint32_t *count,
                                              VkPhysicalDeviceToolProperties *tools) {
    return tool_properties(r, pd, count, tools, 0);
}

VkResult do_vkGetPhysicalDeviceToolPropertiesEXT(struct role *r, VkPhysicalDevice pd, uint32_t *count,
                                                 VkPhysicalDeviceToolProperties *tools) {
    return tool_properties(r, pd, count, tools, 1);
}


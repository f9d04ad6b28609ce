/* Test layer (tests/backends/test_vulkan_devices.py): below capshim's layers, it gives each physical
 * device a UUID of its own and, with CAPSHIM_TEST_REORDER=1, lists the devices in reverse order,
 * so two lavapipe devices (the same driver listed twice, one deviceUUID) become two devices that a
 * UUID tells apart whatever order the layers above see them in.
 *
 * deviceUUID of the device the driver lists at position p: 00112233-4455-6677-8899-aabbccddee0P
 * (VkPhysicalDeviceIDProperties in a vkGetPhysicalDeviceProperties2 chain). One instance at a
 * time (a test layer); everything else passes through (the next layer's vkGetInstanceProcAddr).
 */
#include <stdlib.h>
#include <string.h>
#include <vulkan/vk_layer.h>
#include <vulkan/vulkan.h>

#define EXPORT __attribute__((visibility("default")))
#define MAX_PDS 16

static PFN_vkGetInstanceProcAddr g_next_gipa;
static PFN_vkEnumeratePhysicalDevices g_next_enum;
static PFN_vkGetPhysicalDeviceProperties2 g_next_props2;
static PFN_vkGetPhysicalDeviceProperties2 g_next_props2_khr;
static VkPhysicalDevice g_driver_order[MAX_PDS];
static uint32_t g_npds;

static VKAPI_ATTR VkResult VKAPI_CALL t_create_instance(const VkInstanceCreateInfo *ci, const VkAllocationCallbacks *a,
                                                        VkInstance *out) {
    VkLayerInstanceCreateInfo *chain = (VkLayerInstanceCreateInfo *)ci->pNext;
    while (chain != NULL &&
           !(chain->sType == VK_STRUCTURE_TYPE_LOADER_INSTANCE_CREATE_INFO && chain->function == VK_LAYER_LINK_INFO))
        chain = (VkLayerInstanceCreateInfo *)chain->pNext;
    if (chain == NULL || chain->u.pLayerInfo == NULL) return VK_ERROR_INITIALIZATION_FAILED;
    g_next_gipa = chain->u.pLayerInfo->pfnNextGetInstanceProcAddr;
    chain->u.pLayerInfo = chain->u.pLayerInfo->pNext;
    PFN_vkCreateInstance create = (PFN_vkCreateInstance)g_next_gipa(VK_NULL_HANDLE, "vkCreateInstance");
    VkResult res = create(ci, a, out);
    if (res != VK_SUCCESS) return res;
    g_next_enum = (PFN_vkEnumeratePhysicalDevices)g_next_gipa(*out, "vkEnumeratePhysicalDevices");
    g_next_props2 = (PFN_vkGetPhysicalDeviceProperties2)g_next_gipa(*out, "vkGetPhysicalDeviceProperties2");
    g_next_props2_khr = (PFN_vkGetPhysicalDeviceProperties2)g_next_gipa(*out, "vkGetPhysicalDeviceProperties2KHR");
    g_npds = MAX_PDS;
    if (g_next_enum == NULL || g_next_enum(*out, &g_npds, g_driver_order) < 0) g_npds = 0;
    return VK_SUCCESS;
}

static int reversed(void) {
    const char *v = getenv("CAPSHIM_TEST_REORDER");
    return v != NULL && strcmp(v, "1") == 0;
}

static VKAPI_ATTR VkResult VKAPI_CALL t_enumerate(VkInstance inst, uint32_t *count, VkPhysicalDevice *pds) {
    (void)inst;
    if (pds == NULL) {
        *count = g_npds;
        return VK_SUCCESS;
    }
    uint32_t n = *count < g_npds ? *count : g_npds;
    for (uint32_t k = 0; k < n; k++) pds[k] = g_driver_order[reversed() ? g_npds - 1 - k : k];
    *count = n;
    return n < g_npds ? VK_INCOMPLETE : VK_SUCCESS;
}

static void patch(VkPhysicalDevice pd, VkPhysicalDeviceProperties2 *p) {
    static const unsigned char base[VK_UUID_SIZE] = {0x00, 0x11, 0x22, 0x33, 0x44, 0x55, 0x66, 0x77,
                                                     0x88, 0x99, 0xaa, 0xbb, 0xcc, 0xdd, 0xee, 0x00};
    for (VkBaseOutStructure *s = (VkBaseOutStructure *)p->pNext; s != NULL; s = s->pNext) {
        if (s->sType != VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_ID_PROPERTIES) continue;
        VkPhysicalDeviceIDProperties *id = (VkPhysicalDeviceIDProperties *)(void *)s;
        for (uint32_t k = 0; k < g_npds; k++) {
            if (g_driver_order[k] != pd) continue;
            memcpy(id->deviceUUID, base, VK_UUID_SIZE);
            id->deviceUUID[VK_UUID_SIZE - 1] = (unsigned char)k;
        }
    }
}

static VKAPI_ATTR void VKAPI_CALL t_props2(VkPhysicalDevice pd, VkPhysicalDeviceProperties2 *p) {
    g_next_props2(pd, p);
    patch(pd, p);
}

static VKAPI_ATTR void VKAPI_CALL t_props2_khr(VkPhysicalDevice pd, VkPhysicalDeviceProperties2 *p) {
    (g_next_props2_khr != NULL ? g_next_props2_khr : g_next_props2)(pd, p);
    patch(pd, p);
}

EXPORT VKAPI_ATTR PFN_vkVoidFunction VKAPI_CALL vkGetInstanceProcAddr(VkInstance inst, const char *name);
EXPORT VKAPI_ATTR PFN_vkVoidFunction VKAPI_CALL vkGetInstanceProcAddr(VkInstance inst, const char *name) {
    if (strcmp(name, "vkGetInstanceProcAddr") == 0) return (PFN_vkVoidFunction)vkGetInstanceProcAddr;
    if (strcmp(name, "vkCreateInstance") == 0) return (PFN_vkVoidFunction)t_create_instance;
    if (strcmp(name, "vkEnumeratePhysicalDevices") == 0) return (PFN_vkVoidFunction)t_enumerate;
    if (strcmp(name, "vkGetPhysicalDeviceProperties2") == 0) return (PFN_vkVoidFunction)t_props2;
    if (strcmp(name, "vkGetPhysicalDeviceProperties2KHR") == 0) return (PFN_vkVoidFunction)t_props2_khr;
    return g_next_gipa != NULL ? g_next_gipa(inst, name) : NULL;
}

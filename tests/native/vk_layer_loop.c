/* Test program: drives the capshim layer's device role directly, without the
 * Vulkan loader, with a pNext chain that loops back on itself. Under the real
 * loader such a chain never reaches the layer (the loader's own vkCreateDevice
 * walks it first and does not return), so this is the only way to show that
 * the layer's walk is bounded and fails closed.
 *
 *   vk_layer_loop LIBRARY
 * The layer reads its configuration and status file from the environment
 * (CAPSHIM_VK_DEVICE_CONFIG, CAPSHIM_STATUS_FILE). A fake "next layer" stands
 * below it. Prints {"create": VkResult, "reached_next": 0|1, "query": "done"}
 * and exits 0; 1 when the library or its entry points cannot be found.
 */
#include <dlfcn.h>
#include <stdio.h>
#include <string.h>
#include <vulkan/vk_layer.h>
#include <vulkan/vulkan.h>

static void *fake_table[4];
static struct {
    void *table;
} fake_instance = {fake_table}, fake_pd = {fake_table}, fake_device = {fake_table};
static int reached_next;

static VKAPI_ATTR VkResult VKAPI_CALL next_create_instance(const VkInstanceCreateInfo *ci,
                                                           const VkAllocationCallbacks *a, VkInstance *out) {
    (void)ci, (void)a;
    *out = (VkInstance)(void *)&fake_instance;
    return VK_SUCCESS;
}

static VKAPI_ATTR VkResult VKAPI_CALL next_create_device(VkPhysicalDevice pd, const VkDeviceCreateInfo *ci,
                                                         const VkAllocationCallbacks *a, VkDevice *out) {
    (void)pd, (void)ci, (void)a;
    reached_next = 1;
    *out = (VkDevice)(void *)&fake_device;
    return VK_SUCCESS;
}

/* Does not walk the chain: a real driver would not return. */
static VKAPI_ATTR void VKAPI_CALL next_features2(VkPhysicalDevice pd, VkPhysicalDeviceFeatures2 *f) {
    (void)pd, (void)f;
}

static VKAPI_ATTR void VKAPI_CALL next_destroy_instance(VkInstance in, const VkAllocationCallbacks *a) {
    (void)in, (void)a;
}

static VKAPI_ATTR PFN_vkVoidFunction VKAPI_CALL next_gipa(VkInstance in, const char *name) {
    (void)in;
    if (strcmp(name, "vkCreateInstance") == 0) return (PFN_vkVoidFunction)next_create_instance;
    if (strcmp(name, "vkCreateDevice") == 0) return (PFN_vkVoidFunction)next_create_device;
    if (strcmp(name, "vkGetPhysicalDeviceFeatures2") == 0) return (PFN_vkVoidFunction)next_features2;
    if (strcmp(name, "vkDestroyInstance") == 0) return (PFN_vkVoidFunction)next_destroy_instance;
    return NULL;
}

static VKAPI_ATTR PFN_vkVoidFunction VKAPI_CALL next_gdpa(VkDevice d, const char *name) {
    (void)d, (void)name;
    return NULL;
}

int main(int argc, char **argv) {
    if (argc != 2) {
        fprintf(stderr, "usage: vk_layer_loop LIBRARY\n");
        return 2;
    }
    void *lib = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
    if (lib == NULL) {
        fprintf(stderr, "vk_layer_loop: %s\n", dlerror());
        return 1;
    }
    PFN_vkGetInstanceProcAddr gipa = NULL;
    void *sym = dlsym(lib, "capshim_device_GetInstanceProcAddr");
    if (sym != NULL) memcpy(&gipa, &sym, sizeof gipa);
    PFN_vkCreateInstance create_instance = gipa ? (PFN_vkCreateInstance)gipa(NULL, "vkCreateInstance") : NULL;
    if (create_instance == NULL) {
        fprintf(stderr, "vk_layer_loop: no capshim_device_GetInstanceProcAddr or vkCreateInstance\n");
        return 1;
    }
    VkLayerInstanceLink ilink = {.pNext = NULL, .pfnNextGetInstanceProcAddr = next_gipa};
    VkLayerInstanceCreateInfo ichain = {.sType = VK_STRUCTURE_TYPE_LOADER_INSTANCE_CREATE_INFO,
                                        .function = VK_LAYER_LINK_INFO};
    ichain.u.pLayerInfo = &ilink;
    VkInstanceCreateInfo ici = {.sType = VK_STRUCTURE_TYPE_INSTANCE_CREATE_INFO, .pNext = &ichain};
    VkInstance inst = VK_NULL_HANDLE;
    if (create_instance(&ici, NULL, &inst) != VK_SUCCESS) {
        fprintf(stderr, "vk_layer_loop: the layer's vkCreateInstance failed\n");
        return 1;
    }
    PFN_vkCreateDevice create_device = (PFN_vkCreateDevice)gipa(inst, "vkCreateDevice");
    PFN_vkGetPhysicalDeviceFeatures2 features2 =
        (PFN_vkGetPhysicalDeviceFeatures2)gipa(inst, "vkGetPhysicalDeviceFeatures2");
    if (create_device == NULL || features2 == NULL) {
        fprintf(stderr, "vk_layer_loop: the layer answers no vkCreateDevice or vkGetPhysicalDeviceFeatures2\n");
        return 1;
    }
    VkBaseOutStructure loop[3];
    for (int k = 0; k < 3; k++) {
        loop[k].sType = (VkStructureType)0x7ffffff0;
        loop[k].pNext = &loop[(k + 1) % 3];
    }
    VkLayerDeviceLink dlink = {.pNext = NULL, .pfnNextGetInstanceProcAddr = next_gipa,
                               .pfnNextGetDeviceProcAddr = next_gdpa};
    VkLayerDeviceCreateInfo dchain = {.sType = VK_STRUCTURE_TYPE_LOADER_DEVICE_CREATE_INFO,
                                      .pNext = loop, .function = VK_LAYER_LINK_INFO};
    dchain.u.pLayerInfo = &dlink;
    float prio = 1.0f;
    VkDeviceQueueCreateInfo q = {.sType = VK_STRUCTURE_TYPE_DEVICE_QUEUE_CREATE_INFO, .queueCount = 1,
                                 .pQueuePriorities = &prio};
    VkDeviceCreateInfo dci = {.sType = VK_STRUCTURE_TYPE_DEVICE_CREATE_INFO, .pNext = &dchain,
                              .queueCreateInfoCount = 1, .pQueueCreateInfos = &q};
    VkPhysicalDevice pd = (VkPhysicalDevice)(void *)&fake_pd;
    VkDevice dev = VK_NULL_HANDLE;
    VkResult r = create_device(pd, &dci, NULL, &dev);
    VkPhysicalDeviceFeatures2 f2 = {.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FEATURES_2, .pNext = loop};
    features2(pd, &f2);
    printf("{\"create\": %d, \"reached_next\": %d, \"query\": \"done\"}\n", (int)r, reached_next);
    return 0;
}

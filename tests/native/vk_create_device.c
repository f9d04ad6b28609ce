/* Test program: creates a Vulkan 1.3 device on the first physical device with
 * the features and extensions named on the command line, and prints
 * {"result": VkResult} on stdout.
 *
 *   base.MEMBER       VkDeviceCreateInfo::pEnabledFeatures->MEMBER
 *   features2.MEMBER  VkPhysicalDeviceFeatures2::features.MEMBER (chained)
 *   vk11.MEMBER       VkPhysicalDeviceVulkan11Features (chained)
 *   vk12.MEMBER       VkPhysicalDeviceVulkan12Features (chained)
 *   vk13.MEMBER       VkPhysicalDeviceVulkan13Features (chained)
 *   f16i8.MEMBER      VkPhysicalDeviceShaderFloat16Int8Features (chained)
 *   ext:NAME          ppEnabledExtensionNames
 *   pad=N             N structures of an unknown sType chained in front of
 *                     the ones above (a hostile, long pNext chain)
 *   loop              the padding's last structure points back to its first
 *   query             instead of vkCreateDevice, call
 *                     vkGetPhysicalDeviceFeatures2 with the same chain and
 *                     print {"result": 0, "shaderFloat16": V} (from vk12.*)
 * Exit 0 when the call was made (whatever its result), 2 on bad usage, 1
 * when no instance or device could be found.
 */
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <vulkan/vulkan.h>

struct member {
    const char *name;
    size_t offset;
};

#define M(type, m) {#m, offsetof(type, m)}
static const struct member base_m[] = {M(VkPhysicalDeviceFeatures, shaderInt16),
                                       M(VkPhysicalDeviceFeatures, shaderInt64),
                                       M(VkPhysicalDeviceFeatures, shaderFloat64), {NULL, 0}};
static const struct member vk11_m[] = {M(VkPhysicalDeviceVulkan11Features, storageBuffer16BitAccess),
                                       M(VkPhysicalDeviceVulkan11Features, uniformAndStorageBuffer16BitAccess),
                                       {NULL, 0}};
static const struct member vk12_m[] = {M(VkPhysicalDeviceVulkan12Features, shaderFloat16),
                                       M(VkPhysicalDeviceVulkan12Features, shaderInt8),
                                       M(VkPhysicalDeviceVulkan12Features, storageBuffer8BitAccess), {NULL, 0}};
static const struct member vk13_m[] = {M(VkPhysicalDeviceVulkan13Features, shaderIntegerDotProduct),
                                       M(VkPhysicalDeviceVulkan13Features, subgroupSizeControl), {NULL, 0}};
static const struct member f16i8_m[] = {M(VkPhysicalDeviceShaderFloat16Int8Features, shaderFloat16),
                                        M(VkPhysicalDeviceShaderFloat16Int8Features, shaderInt8), {NULL, 0}};

static int set(void *base, const struct member *table, const char *name) {
    for (; table->name != NULL; table++) {
        if (strcmp(table->name, name) == 0) {
            VkBool32 on = VK_TRUE;
            memcpy((unsigned char *)base + table->offset, &on, sizeof on);
            return 0;
        }
    }
    return -1;
}

int main(int argc, char **argv) {
    VkPhysicalDeviceFeatures base = {0};
    VkPhysicalDeviceFeatures2 f2 = {.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FEATURES_2};
    VkPhysicalDeviceVulkan11Features v11 = {.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_1_FEATURES};
    VkPhysicalDeviceVulkan12Features v12 = {.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_2_FEATURES};
    VkPhysicalDeviceVulkan13Features v13 = {.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_3_FEATURES};
    VkPhysicalDeviceShaderFloat16Int8Features f16 = {
        .sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SHADER_FLOAT16_INT8_FEATURES};
    int use_base = 0, use_f2 = 0, use_11 = 0, use_12 = 0, use_13 = 0, use_f16 = 0;
    const char *exts[32];
    uint32_t nexts = 0;
    long npad = 0;
    int loop = 0, query = 0;
    for (int a = 1; a < argc; a++) {
        const char *arg = argv[a];
        const char *dot = strchr(arg, '.');
        int bad = 0;
        if (strncmp(arg, "ext:", 4) == 0 && nexts < 32) exts[nexts++] = arg + 4;
        else if (strncmp(arg, "pad=", 4) == 0) {
            char *end = NULL;
            npad = strtol(arg + 4, &end, 10);
            bad = end == arg + 4 || *end != '\0' || npad < 1 || npad > 1000000;
        } else if (strcmp(arg, "loop") == 0) loop = 1;
        else if (strcmp(arg, "query") == 0) query = 1;
        else if (dot == NULL) bad = 1;
        else if (strncmp(arg, "base.", 5) == 0) bad = set(&base, base_m, dot + 1), use_base = 1;
        else if (strncmp(arg, "features2.", 10) == 0) bad = set(&f2.features, base_m, dot + 1), use_f2 = 1;
        else if (strncmp(arg, "vk11.", 5) == 0) bad = set(&v11, vk11_m, dot + 1), use_11 = 1;
        else if (strncmp(arg, "vk12.", 5) == 0) bad = set(&v12, vk12_m, dot + 1), use_12 = 1;
        else if (strncmp(arg, "vk13.", 5) == 0) bad = set(&v13, vk13_m, dot + 1), use_13 = 1;
        else if (strncmp(arg, "f16i8.", 6) == 0) bad = set(&f16, f16i8_m, dot + 1), use_f16 = 1;
        else bad = 1;
        if (bad) {
            fprintf(stderr, "vk_create_device: unknown argument '%s'\n", arg);
            return 2;
        }
    }
    VkApplicationInfo app = {.sType = VK_STRUCTURE_TYPE_APPLICATION_INFO, .apiVersion = VK_API_VERSION_1_3};
    VkInstanceCreateInfo ici = {.sType = VK_STRUCTURE_TYPE_INSTANCE_CREATE_INFO, .pApplicationInfo = &app};
    VkInstance inst;
    if (vkCreateInstance(&ici, NULL, &inst) != VK_SUCCESS) {
        fprintf(stderr, "vk_create_device: vkCreateInstance failed\n");
        return 1;
    }
    uint32_t n = 1;
    VkPhysicalDevice pd = VK_NULL_HANDLE;
    VkResult er = vkEnumeratePhysicalDevices(inst, &n, &pd);
    if ((er != VK_SUCCESS && er != VK_INCOMPLETE) || n == 0) {
        fprintf(stderr, "vk_create_device: no physical device\n");
        vkDestroyInstance(inst, NULL);
        return 1;
    }
    void *chain = NULL;
#define LINK(use, s)          \
    if (use) {                \
        (s).pNext = chain;    \
        chain = &(s);         \
    }
    LINK(use_f2, f2)
    LINK(use_11, v11)
    LINK(use_12, v12)
    LINK(use_13, v13)
    LINK(use_f16, f16)
    VkBaseOutStructure *pad = NULL;
    if (npad > 0) {
        pad = calloc((size_t)npad, sizeof *pad);
        if (pad == NULL) {
            fprintf(stderr, "vk_create_device: out of memory\n");
            vkDestroyInstance(inst, NULL);
            return 1;
        }
        for (long k = 0; k < npad; k++) {
            pad[k].sType = (VkStructureType)0x7ffffff0; /* no structure has this type */
            pad[k].pNext = k + 1 < npad ? &pad[k + 1] : (VkBaseOutStructure *)chain;
        }
        if (loop) pad[npad - 1].pNext = &pad[0];
        chain = pad;
    }
    if (query) {
        VkPhysicalDeviceFeatures2 qf = {.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FEATURES_2, .pNext = chain};
        vkGetPhysicalDeviceFeatures2(pd, &qf);
        printf("{\"result\": 0, \"shaderFloat16\": %u}\n", (unsigned)v12.shaderFloat16);
        free(pad);
        vkDestroyInstance(inst, NULL);
        return 0;
    }
    float prio = 1.0f;
    VkDeviceQueueCreateInfo q = {.sType = VK_STRUCTURE_TYPE_DEVICE_QUEUE_CREATE_INFO,
                                 .queueFamilyIndex = 0,
                                 .queueCount = 1,
                                 .pQueuePriorities = &prio};
    VkDeviceCreateInfo dci = {.sType = VK_STRUCTURE_TYPE_DEVICE_CREATE_INFO,
                              .pNext = chain,
                              .queueCreateInfoCount = 1,
                              .pQueueCreateInfos = &q,
                              .enabledExtensionCount = nexts,
                              .ppEnabledExtensionNames = nexts ? exts : NULL,
                              .pEnabledFeatures = use_base ? &base : NULL};
    VkDevice dev;
    VkResult r = vkCreateDevice(pd, &dci, NULL, &dev);
    printf("{\"result\": %d}\n", (int)r);
    if (r == VK_SUCCESS) vkDestroyDevice(dev, NULL);
    free(pad);
    vkDestroyInstance(inst, NULL);
    return 0;
}

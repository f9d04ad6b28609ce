/* Test program: lists the tools of the first physical device through the
 * loader (VK_EXT_tooling_info) and checks the two-call idiom, printing JSON:
 *
 *   {"count": N, "short": {"asked": K, "result": R, "written": W},
 *    "tools": [{"name", "version", "purposes", "description", "layer"}...],
 *    "ext_count": N2, "device_name": "..."}
 *
 * "count" comes from vkGetPhysicalDeviceToolProperties (core 1.3) with a NULL
 * array, "tools" from a second call with room for N, "short" from a third
 * call with room for N-1 (K = N-1: VK_INCOMPLETE expected when N > 0), and
 * "ext_count" is the count vkGetPhysicalDeviceToolPropertiesEXT gives.
 * Strings are printed as JSON with bytes >= 0x80 kept (UTF-8) and controls
 * escaped. Exit 0 when the calls were made, 1 when no instance or device.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <vulkan/vulkan.h>

static void json_str(const char *s, size_t cap) {
    putchar('"');
    for (size_t i = 0; i < cap && s[i] != '\0'; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c == '"' || c == '\\')
            printf("\\%c", c);
        else if (c < 0x20 || c == 0x7f)
            printf("\\u%04x", c);
        else
            putchar(c);
    }
    putchar('"');
}

int main(void) {
    VkApplicationInfo app = {VK_STRUCTURE_TYPE_APPLICATION_INFO, NULL, "vk_tools", 1, NULL, 0, VK_API_VERSION_1_3};
    VkInstanceCreateInfo ci = {VK_STRUCTURE_TYPE_INSTANCE_CREATE_INFO, NULL, 0, &app, 0, NULL, 0, NULL};
    VkInstance inst;
    if (vkCreateInstance(&ci, NULL, &inst) != VK_SUCCESS) return 1;
    uint32_t npd = 1;
    VkPhysicalDevice pd;
    VkResult r = vkEnumeratePhysicalDevices(inst, &npd, &pd);
    if ((r != VK_SUCCESS && r != VK_INCOMPLETE) || npd == 0) return 1;
    PFN_vkGetPhysicalDeviceToolProperties core =
        (PFN_vkGetPhysicalDeviceToolProperties)vkGetInstanceProcAddr(inst, "vkGetPhysicalDeviceToolProperties");
    PFN_vkGetPhysicalDeviceToolPropertiesEXT ext =
        (PFN_vkGetPhysicalDeviceToolPropertiesEXT)vkGetInstanceProcAddr(inst, "vkGetPhysicalDeviceToolPropertiesEXT");
    if (core == NULL || ext == NULL) return 1;
    uint32_t n = 0, n_ext = 0;
    if (core(pd, &n, NULL) != VK_SUCCESS || ext(pd, &n_ext, NULL) != VK_SUCCESS) return 1;
    VkPhysicalDeviceToolProperties *t = calloc((size_t)n + 1, sizeof *t);
    if (t == NULL) return 1;
    for (uint32_t k = 0; k <= n; k++) t[k].sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_TOOL_PROPERTIES;
    uint32_t got = n;
    VkResult full = core(pd, &got, t);
    uint32_t asked = n > 0 ? n - 1 : 0, written = asked;
    VkPhysicalDeviceToolProperties *s = calloc((size_t)n + 1, sizeof *s);
    if (s == NULL) return 1;
    for (uint32_t k = 0; k <= n; k++) s[k].sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_TOOL_PROPERTIES;
    VkResult shortr = core(pd, &written, s);
    VkPhysicalDeviceProperties props;
    vkGetPhysicalDeviceProperties(pd, &props);
    printf("{\"count\": %u, \"full_result\": %d, \"short\": {\"asked\": %u, \"result\": %d, \"written\": %u",
           n, (int)full, asked, (int)shortr, written);
    printf(", \"first\": ");
    json_str(written > 0 ? s[0].name : "", VK_MAX_EXTENSION_NAME_SIZE);
    printf("}, \"ext_count\": %u, \"device_name\": ", n_ext);
    json_str(props.deviceName, VK_MAX_PHYSICAL_DEVICE_NAME_SIZE);
    printf(", \"tools\": [");
    for (uint32_t k = 0; k < got; k++) {
        printf("%s{\"name\": ", k ? ", " : "");
        json_str(t[k].name, VK_MAX_EXTENSION_NAME_SIZE);
        printf(", \"version\": ");
        json_str(t[k].version, VK_MAX_EXTENSION_NAME_SIZE);
        printf(", \"purposes\": %u, \"description\": ", (unsigned)t[k].purposes);
        json_str(t[k].description, VK_MAX_DESCRIPTION_SIZE);
        printf(", \"layer\": ");
        json_str(t[k].layer, VK_MAX_EXTENSION_NAME_SIZE);
        printf(", \"stype_kept\": %s}", t[k].sType == VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_TOOL_PROPERTIES ? "true" : "false");
    }
    printf("]}\n");
    free(t);
    free(s);
    vkDestroyInstance(inst, NULL);
    return 0;
}

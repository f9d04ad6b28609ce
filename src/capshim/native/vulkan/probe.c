/* capshim-vk-probe: prints, as one JSON object on stdout, the Vulkan
 * capability answers this process sees for one physical device, through
 * whatever layers the environment enables.
 *
 * Usage: capshim-vk-probe [--device N] [--create-device EXT[,EXT...]]
 *        capshim-vk-probe --list   the devices: {"devices": [{"index", "name", "uuid"}]}
 *                                  (deviceUUID, VkPhysicalDeviceIDProperties, 8-4-4-4-12 hex)
 *
 * It queries vkGetPhysicalDeviceProperties2 and vkGetPhysicalDeviceFeatures2
 * with the pNext structures the device's reported apiVersion and extensions
 * allow (Vulkan specification, "Valid Usage" of those queries; the structures
 * and their guards are CAPSHIM_CHAIN of caps_table.h, generated from the
 * capability table), and reads the keys of caps_table.h from them; a key whose structure was not queried is
 * null. --create-device creates a logical device with those extensions
 * enabled and reports the VkResult, to show that an extension a layer re-adds
 * really works. Exit 0 on success, 1 when Vulkan is unusable (the JSON then
 * has "error"), 2 on bad usage.
 */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <vulkan/vulkan.h>

#include "caps_table.h"
#include "config.h"
#include "status.h"

#define MAX_DEVICES 16

static void json_string(const char *s) {
    char esc[1024];
    capshim_status_escape(esc, sizeof esc, s);
    printf("\"%s\"", esc);
}

static const char *result_name(VkResult r) {
    switch (r) {
    case VK_ERROR_OUT_OF_HOST_MEMORY: return "VK_ERROR_OUT_OF_HOST_MEMORY";
    case VK_ERROR_OUT_OF_DEVICE_MEMORY: return "VK_ERROR_OUT_OF_DEVICE_MEMORY";
    case VK_ERROR_INITIALIZATION_FAILED: return "VK_ERROR_INITIALIZATION_FAILED";
    case VK_ERROR_LAYER_NOT_PRESENT: return "VK_ERROR_LAYER_NOT_PRESENT";
    case VK_ERROR_EXTENSION_NOT_PRESENT: return "VK_ERROR_EXTENSION_NOT_PRESENT";
    case VK_ERROR_INCOMPATIBLE_DRIVER: return "VK_ERROR_INCOMPATIBLE_DRIVER (no usable Vulkan driver)";
    default: return "VkResult";
    }
}

static int fail(const char *what, VkResult res) {
    printf("{\"error\":");
    char msg[256];
    snprintf(msg, sizeof msg, "%s failed: %s %d", what, result_name(res), (int)res);
    json_string(msg);
    printf("}\n");
    return 1;
}

static int has_ext(const VkExtensionProperties *e, uint32_t n, const char *name) {
    for (uint32_t i = 0; i < n; i++)
        if (strcmp(e[i].extensionName, name) == 0) return 1;
    return 0;
}

static const char *type_name(VkPhysicalDeviceType t) {
    switch (t) {
    case VK_PHYSICAL_DEVICE_TYPE_INTEGRATED_GPU: return "integrated-gpu";
    case VK_PHYSICAL_DEVICE_TYPE_DISCRETE_GPU: return "discrete-gpu";
    case VK_PHYSICAL_DEVICE_TYPE_VIRTUAL_GPU: return "virtual-gpu";
    case VK_PHYSICAL_DEVICE_TYPE_CPU: return "cpu";
    default: return "other";
    }
}

struct chained {
    uint32_t stype;
    void *ptr;
};

struct chain_spec {
    uint32_t stype;
    int features;
    uint32_t core, until;
    const char *extension;
    size_t size;
};

#define CHAIN_SPEC(ctype, stype, features, core, until, extension) \
    {(uint32_t)(stype), features, core, until, extension, sizeof(ctype)},

/* Put s (sType stype) at the front of head's pNext chain. Every chain write goes
 * through VkBaseOutStructure, so that no access of another type is assumed apart. */
static void push_front(VkBaseOutStructure *head, uint32_t stype, void *s) {
    VkBaseOutStructure *b = (VkBaseOutStructure *)s;
    b->sType = (VkStructureType)stype;
    b->pNext = head->pNext;
    head->pNext = b;
}

static void free_chain(struct chained *list, size_t n) {
    for (size_t i = 0; i < n; i++) free(list[i].ptr);
}

/* --list: {"devices": [{"index", "name", "uuid" (deviceUUID, 8-4-4-4-12 hex)}]} in the loader's order. */
static int list_devices(VkInstance inst, VkPhysicalDevice *devs, uint32_t ndev) {
    printf("{\"devices\":[");
    for (uint32_t k = 0; k < ndev; k++) {
        VkPhysicalDeviceIDProperties id = {VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_ID_PROPERTIES, NULL, {0}, {0}, {0}, 0, 0};
        VkPhysicalDeviceProperties2 p2 = {VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_PROPERTIES_2, &id, {0}};
        vkGetPhysicalDeviceProperties2(devs[k], &p2);
        printf("%s{\"index\":%u,\"name\":", k ? "," : "", k);
        json_string(p2.properties.deviceName);
        printf(",\"uuid\":\"");
        for (unsigned i = 0; i < VK_UUID_SIZE; i++) printf("%s%02x", (i == 4 || i == 6 || i == 8 || i == 10) ? "-" : "", id.deviceUUID[i]);
        printf("\"}");
    }
    printf("]}\n");
    vkDestroyInstance(inst, NULL);
    return 0;
}

int main(int argc, char **argv) {
    uint64_t want = 0;
    int list_only = 0;
    const char *create_exts = NULL;
    for (int a = 1; a < argc; a++) {
        if (strcmp(argv[a], "--list") == 0) {
            list_only = 1;
        } else if (strcmp(argv[a], "--device") == 0 && a + 1 < argc) {
            if (capshim_parse_u64(argv[++a], &want) != 0 || want >= MAX_DEVICES) {
                fprintf(stderr, "capshim-vk-probe: --device: '%s' is not a device index 0..%d\n", argv[a],
                        MAX_DEVICES - 1);
                return 2;
            }
        } else if (strcmp(argv[a], "--create-device") == 0 && a + 1 < argc) {
            create_exts = argv[++a];
        } else {
            fprintf(stderr, "usage: capshim-vk-probe [--list | --device N] [--create-device EXT[,EXT...]]\n");
            return 2;
        }
    }

    uint32_t loader_version = VK_API_VERSION_1_0;
    PFN_vkEnumerateInstanceVersion eiv =
        (PFN_vkEnumerateInstanceVersion)vkGetInstanceProcAddr(VK_NULL_HANDLE, "vkEnumerateInstanceVersion");
    if (eiv != NULL) (void)eiv(&loader_version);
    uint32_t inst_version = loader_version < VK_API_VERSION_1_3 ? loader_version : VK_API_VERSION_1_3;
    if (inst_version < VK_API_VERSION_1_1) return fail("Vulkan 1.1 loader check", VK_ERROR_INCOMPATIBLE_DRIVER);

    VkApplicationInfo app = {VK_STRUCTURE_TYPE_APPLICATION_INFO, NULL, "capshim-vk-probe", 1, "capshim", 1,
                             inst_version};
    VkInstanceCreateInfo ici = {VK_STRUCTURE_TYPE_INSTANCE_CREATE_INFO, NULL, 0, &app, 0, NULL, 0, NULL};
    VkInstance inst;
    VkResult res = vkCreateInstance(&ici, NULL, &inst);
    if (res != VK_SUCCESS) return fail("vkCreateInstance", res);

    uint32_t ndev = MAX_DEVICES;
    VkPhysicalDevice devs[MAX_DEVICES];
    res = vkEnumeratePhysicalDevices(inst, &ndev, devs);
    if (res != VK_SUCCESS && res != VK_INCOMPLETE) {
        vkDestroyInstance(inst, NULL);
        return fail("vkEnumeratePhysicalDevices", res);
    }
    if (list_only) return list_devices(inst, devs, ndev);
    if (ndev == 0 || want >= ndev) {
        vkDestroyInstance(inst, NULL);
        printf("{\"error\":\"no Vulkan device with index %llu (found %u)\"}\n", (unsigned long long)want, ndev);
        return 1;
    }
    VkPhysicalDevice pd = devs[want];

    VkPhysicalDeviceProperties base;
    vkGetPhysicalDeviceProperties(pd, &base);
    uint32_t dv = base.apiVersion;

    uint32_t next = 0;
    res = vkEnumerateDeviceExtensionProperties(pd, NULL, &next, NULL);
    VkExtensionProperties *exts = calloc(next ? next : 1, sizeof *exts);
    if (res != VK_SUCCESS || exts == NULL) {
        free(exts);
        vkDestroyInstance(inst, NULL);
        return fail("vkEnumerateDeviceExtensionProperties", res);
    }
    res = vkEnumerateDeviceExtensionProperties(pd, NULL, &next, exts);
    if (res != VK_SUCCESS) {
        free(exts);
        vkDestroyInstance(inst, NULL);
        return fail("vkEnumerateDeviceExtensionProperties", res);
    }

    /* The pNext chains: every structure of the capability table whose guard the
     * device meets (CAPSHIM_CHAIN), plus the driver's name for the output. */
    static const struct chain_spec specs[] = {CAPSHIM_CHAIN(CHAIN_SPEC)};
    struct chained list[sizeof specs / sizeof specs[0]];
    size_t nlist = 0;
    VkPhysicalDeviceProperties2 p2 = {VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_PROPERTIES_2, NULL, {0}};
    VkPhysicalDeviceFeatures2 f2 = {VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FEATURES_2, NULL, {0}};
    for (size_t c = 0; c < sizeof specs / sizeof specs[0]; c++) {
        const struct chain_spec *cs = &specs[c];
        if (dv < cs->core || (cs->until != 0 && dv >= cs->until)) continue;
        if (cs->extension != NULL && !has_ext(exts, next, cs->extension)) continue;
        void *s = calloc(1, cs->size);
        if (s == NULL) {
            free_chain(list, nlist);
            free(exts);
            vkDestroyInstance(inst, NULL);
            return fail("allocating the pNext chain", VK_ERROR_OUT_OF_HOST_MEMORY);
        }
        push_front(cs->features ? (VkBaseOutStructure *)&f2 : (VkBaseOutStructure *)&p2, cs->stype, s);
        list[nlist].stype = cs->stype;
        list[nlist++].ptr = s;
    }
    VkPhysicalDeviceDriverProperties drv = {0};
    int have_driver = dv >= VK_API_VERSION_1_2 || has_ext(exts, next, "VK_KHR_driver_properties");
    if (have_driver)
        push_front((VkBaseOutStructure *)&p2, CAPSHIM_ST(PHYSICAL_DEVICE_DRIVER_PROPERTIES), &drv);
    VkPhysicalDeviceIDProperties idp = {VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_ID_PROPERTIES, NULL, {0}, {0}, {0}, 0, 0};
    push_front((VkBaseOutStructure *)&p2, VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_ID_PROPERTIES, &idp);
    vkGetPhysicalDeviceProperties2(pd, &p2);
    vkGetPhysicalDeviceFeatures2(pd, &f2);

    /* Output. */
    printf("{\"device\":{\"index\":%llu,\"name\":", (unsigned long long)want);
    json_string(base.deviceName);
    printf(",\"uuid\":\"");
    for (unsigned u = 0; u < VK_UUID_SIZE; u++) printf("%s%02x", (u == 4 || u == 6 || u == 8 || u == 10) ? "-" : "", idp.deviceUUID[u]);
    printf("\",\"driver\":");
    if (have_driver) json_string(drv.driverName);
    else printf("null");
    printf(",\"driverInfo\":");
    if (have_driver) json_string(drv.driverInfo);
    else printf("null");
    printf(",\"type\":\"%s\",\"vendorID\":%u,\"deviceID\":%u,\"driverVersion\":%u,\"apiVersion\":\"%u.%u.%u\"}",
           type_name(p2.properties.deviceType), p2.properties.vendorID, p2.properties.deviceID,
           p2.properties.driverVersion, VK_API_VERSION_MAJOR(p2.properties.apiVersion),
           VK_API_VERSION_MINOR(p2.properties.apiVersion), VK_API_VERSION_PATCH(p2.properties.apiVersion));
    printf(",\"devices\":[");
    for (uint32_t d = 0; d < ndev; d++) {
        VkPhysicalDeviceProperties pp;
        vkGetPhysicalDeviceProperties(devs[d], &pp);
        if (d) printf(",");
        json_string(pp.deviceName);
    }
    printf("],\"capabilities\":{");
    int firstkey = 1;
    for (size_t i = 0; i < CAPSHIM_NUM_FIELDS; i++) {
        const struct capshim_field *f = &capshim_fields[i];
        int seen = 0;
        for (size_t k = 0; k < i; k++)
            if (strcmp(capshim_fields[k].key, f->key) == 0) seen = 1;
        if (seen) continue;
        /* The first structure (in table order) that was queried holds the answer. */
        const void *src = NULL;
        size_t off = 0;
        for (size_t k = i; k < CAPSHIM_NUM_FIELDS && src == NULL; k++) {
            const struct capshim_field *g = &capshim_fields[k];
            if (strcmp(g->key, f->key) != 0) continue;
            if (g->stype == CAPSHIM_STYPE_BASE_PROPERTIES) src = &p2.properties;
            else if (g->stype == CAPSHIM_STYPE_BASE_FEATURES) src = &f2.features;
            else
                for (size_t c = 0; c < nlist; c++)
                    if (list[c].stype == g->stype) src = list[c].ptr;
            off = g->offset;
        }
        printf("%s\"%s\":", firstkey ? "" : ",", f->key);
        firstkey = 0;
        if (src == NULL) {
            printf("null");
            continue;
        }
        uint32_t v;
        memcpy(&v, (const unsigned char *)src + off, sizeof v);
        if (f->kind == CAPSHIM_BOOL) printf(v ? "true" : "false");
        else if (f->kind == CAPSHIM_VERSION)
            printf("\"%u.%u.%u\"", VK_API_VERSION_MAJOR(v), VK_API_VERSION_MINOR(v), VK_API_VERSION_PATCH(v));
        else printf("%u", v);
    }
    printf("},\"extensions\":{");
    for (uint32_t e = 0; e < next; e++) {
        if (e) printf(",");
        json_string(exts[e].extensionName);
        printf(":%u", exts[e].specVersion);
    }
    printf("}");

    if (create_exts != NULL) {
        char buf[4096];
        const char *names[64];
        uint32_t nnames = 0;
        snprintf(buf, sizeof buf, "%s", create_exts);
        for (char *tok = strtok(buf, ","); tok != NULL && nnames < 64; tok = strtok(NULL, ",")) names[nnames++] = tok;
        float prio = 1.0f;
        VkDeviceQueueCreateInfo q = {VK_STRUCTURE_TYPE_DEVICE_QUEUE_CREATE_INFO, NULL, 0, 0, 1, &prio};
        VkDeviceCreateInfo dci = {VK_STRUCTURE_TYPE_DEVICE_CREATE_INFO, NULL, 0, 1, &q, 0, NULL, nnames, names, NULL};
        VkDevice device = VK_NULL_HANDLE;
        VkResult dres = vkCreateDevice(pd, &dci, NULL, &device);
        printf(",\"create_device\":{\"extensions\":[");
        for (uint32_t k = 0; k < nnames; k++) {
            if (k) printf(",");
            json_string(names[k]);
        }
        printf("],\"result\":%d}", (int)dres);
        if (dres == VK_SUCCESS) vkDestroyDevice(device, NULL);
    }
    printf("}\n");
    free_chain(list, nlist);
    free(exts);
    vkDestroyInstance(inst, NULL);
    return 0;
}

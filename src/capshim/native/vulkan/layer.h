/* capshim Vulkan capability layer: the shared declarations of its files.
 *
 * One library, two layers: VK_LAYER_CAPSHIM_device (next to the driver,
 * simulates a weaker GPU) and VK_LAYER_CAPSHIM_app (next to the application,
 * the shim proper). The loader opens the library once; each manifest names
 * its own entry points through its "functions" field (Vulkan loader,
 * LoaderLayerInterface.md, "Layer Manifest File Format"), and each role keeps
 * its own configuration and its own next-in-chain pointers.
 *
 * It patches the answers of vkGetPhysicalDeviceProperties(2), ...Features(2)
 * (walking the pNext chains: structures it does not know pass untouched) and
 * vkEnumerateDeviceExtensionProperties (and, when a profile sets deviceName,
 * VkPhysicalDeviceProperties::deviceName); each active role reports itself as a
 * tool through vkGetPhysicalDeviceToolProperties(EXT) (VK_EXT_tooling_info,
 * "Tooling info" below); the device role also refuses, at
 * vkCreateDevice, a feature or extension it hides (unless the app role
 * restores it; see "vkCreateDevice enforcement" below and docs/status.md).
 * Everything else passes through. The intercepted entry points are listed
 * once, in CAPSHIM_HOOKS.
 *
 * Configuration (one spelling per source):
 *   CAPSHIM_VK_DEVICE_CONFIG / CAPSHIM_VK_APP_CONFIG  path of a key=value file
 *                                                    (config.h gives the format), or
 *                                                    up to CAPSHIM_MAX_CONFIGS paths
 *                                                    separated by ':', each with a
 *                                                    devices= key (layer_devices.c)
 *   CAPSHIM_STATUS_FILE   JSON-lines status events (status.h)
 *   CAPSHIM_QUIET=1       no stderr banner
 *   CAPSHIM_TARGET_PID    when set and not this process's pid, the layer stays
 *                         stock (a child of the launched command) ...
 *   CAPSHIM_INHERIT=1     ... unless this is set.
 * An invalid configuration leaves the process on its stock answers and is
 * reported; the layer never aborts the host process. A configuration path
 * that is not a regular file (a FIFO, a device) is refused without blocking:
 * opened O_NONBLOCK, checked with fstat.
 *
 * The layer's files, one job each (as the Khronos Vulkan-Profiles layer keeps
 * settings, JSON, dispatch and utilities apart):
 *   layer.h           the shared types, the CAPSHIM_HOOKS list, the roles
 *   layer.c           dispatch: the roles, instance and device bookkeeping,
 *                     vkCreateInstance/vkCreateDevice chain patching, the
 *                     per-role entry points the manifests name
 *   layer_settings.c  a role's configuration: read, parse, events, banner
 *   layer_answers.c   the patched queries (properties, features, extensions)
 *   layer_enforce.c   vkCreateDevice enforcement (device role)
 *   layer_tool.c      tool info (VK_EXT_tooling_info)
 *   layer_devices.c   which configuration answers for a physical device (devices=)
 */
#ifndef CAPSHIM_LAYER_H
#define CAPSHIM_LAYER_H

#define _GNU_SOURCE
#include <pthread.h>
#include <stddef.h>
#include <stdint.h>
#include <vulkan/vk_layer.h>
#include <vulkan/vulkan.h>

#ifndef CAPSHIM_VERSION_STRING /* capshim's version: the build passes it (capshim.native.build.VERSION_DEFINE) */
#error "CAPSHIM_VERSION_STRING is not defined: build with capshim (capshim build), which passes it"
#endif

#include "caps_table.h"
#include "config.h"
#include "status.h"

_Static_assert(CAPSHIM_DEVICE_NAME_MAX == VK_MAX_PHYSICAL_DEVICE_NAME_SIZE, "deviceName buffer (config.h)");

#define EXPORT __attribute__((visibility("default")))
#define MAX_LOGGED 512
/* The longest pNext chain the layer walks. Real applications chain a few
 * dozen structures; the bound exists only so that a chain that loops back on
 * itself cannot hang the host process. A longer chain fails closed: a
 * vkCreateDevice the device role checks is refused (it cannot see every
 * enabled feature), a query is reported as cut ("chain_cut" event, stderr). */
#define MAX_CHAIN 65536

enum { ROLE_DEVICE = 0, ROLE_APP = 1, NUM_ROLES = 2 };
enum { STATE_ACTIVE = 1, STATE_INVALID = 2, STATE_SKIPPED = 3 };

/* Instances and devices are kept in per-role lists keyed by dispatch key; a
 * struct link is the first member of each node (C11 6.7.2.1p15: a pointer to
 * a struct converts to a pointer to its first member and back). */
struct link {
    void *key;
    struct link *next;
};

/* The entry points this layer intercepts, listed once; everything below
 * (next-in-chain pointers, their lookup, the per-role wrappers, the
 * vkGet*ProcAddr answers, the "hooks" event) is generated from this list.
 *
 *   X(R, IDX, LEVEL, return type, return keyword, name, (params), (args))
 *
 * LEVEL  CHAIN   vkCreate{Instance,Device}: the next pointer comes from the
 *                loader's chain information at each call
 *        INST    always intercepted; next pointer kept per instance
 *        QUERY   intercepted only while the role's configuration is active;
 *                next pointer per instance; named in the "hooks" event
 *        DEV     device level, answered by vkGetDeviceProcAddr
 * The return keyword is `return` for a VkResult, empty for void. The role's
 * implementation of NAME is do_NAME(struct role *, args...). */
#define CAPSHIM_HOOKS(X, R, IDX)                                                                                      \
    X(R, IDX, CHAIN, VkResult, return, vkCreateInstance,                                                              \
      (const VkInstanceCreateInfo *ci, const VkAllocationCallbacks *a, VkInstance *out), (ci, a, out))                \
    X(R, IDX, INST, void, , vkDestroyInstance, (VkInstance in, const VkAllocationCallbacks *a), (in, a))              \
    X(R, IDX, CHAIN, VkResult, return, vkCreateDevice,                                                                \
      (VkPhysicalDevice pd, const VkDeviceCreateInfo *ci, const VkAllocationCallbacks *a, VkDevice *out),             \
      (pd, ci, a, out))                                                                                               \
    X(R, IDX, QUERY, void, , vkGetPhysicalDeviceProperties, (VkPhysicalDevice pd, VkPhysicalDeviceProperties *p),     \
      (pd, p))                                                                                                        \
    X(R, IDX, QUERY, void, , vkGetPhysicalDeviceProperties2,                                                          \
      (VkPhysicalDevice pd, VkPhysicalDeviceProperties2 *p), (pd, p))                                                 \
    X(R, IDX, QUERY, void, , vkGetPhysicalDeviceProperties2KHR,                                                       \
      (VkPhysicalDevice pd, VkPhysicalDeviceProperties2 *p), (pd, p))                                                 \
    X(R, IDX, QUERY, void, , vkGetPhysicalDeviceFeatures, (VkPhysicalDevice pd, VkPhysicalDeviceFeatures *f),         \
      (pd, f))                                                                                                        \
    X(R, IDX, QUERY, void, , vkGetPhysicalDeviceFeatures2, (VkPhysicalDevice pd, VkPhysicalDeviceFeatures2 *f),       \
      (pd, f))                                                                                                        \
    X(R, IDX, QUERY, void, , vkGetPhysicalDeviceFeatures2KHR,                                                         \
      (VkPhysicalDevice pd, VkPhysicalDeviceFeatures2 *f), (pd, f))                                                   \
    X(R, IDX, QUERY, VkResult, return, vkEnumerateDeviceExtensionProperties,                                          \
      (VkPhysicalDevice pd, const char *layer, uint32_t *count, VkExtensionProperties *props),                        \
      (pd, layer, count, props))                                                                                      \
    X(R, IDX, QUERY, VkResult, return, vkGetPhysicalDeviceToolProperties,                                             \
      (VkPhysicalDevice pd, uint32_t *count, VkPhysicalDeviceToolProperties *tools), (pd, count, tools))              \
    X(R, IDX, QUERY, VkResult, return, vkGetPhysicalDeviceToolPropertiesEXT,                                          \
      (VkPhysicalDevice pd, uint32_t *count, VkPhysicalDeviceToolProperties *tools), (pd, count, tools))              \
    X(R, IDX, DEV, void, , vkDestroyDevice, (VkDevice d, const VkAllocationCallbacks *a), (d, a))

/* Per-level pieces: LEVEL##_PIECE(R, name) for each use of the list. */
#define UNPAREN(...) __VA_ARGS__
#define NEXT_MEMBER(name) PFN_##name next_##name;
#define CHAIN_MEMBER(R, name)
#define INST_MEMBER(R, name) NEXT_MEMBER(name)
#define QUERY_MEMBER(R, name) NEXT_MEMBER(name)
#define DEV_MEMBER(R, name)
#define HOOK_MEMBER(R, IDX, LEVEL, ret, retkw, name, params, args) LEVEL##_MEMBER(R, name)

struct inst {
    struct link link;
    VkInstance instance;
    PFN_vkGetInstanceProcAddr gipa;
    /* the next layer's physical devices, in its order, and their UUIDs (layer_devices.c) */
    int listed;
    uint32_t npds;
    VkPhysicalDevice pds[CAPSHIM_DEVICE_INDEX_MAX + 1];
    unsigned char uuids[CAPSHIM_DEVICE_INDEX_MAX + 1][CAPSHIM_UUID_BYTES];
    unsigned char uuid_known[CAPSHIM_DEVICE_INDEX_MAX + 1];
    CAPSHIM_HOOKS(HOOK_MEMBER, _, 0)
};

struct dev {
    struct link link;
    PFN_vkGetDeviceProcAddr gdpa;
    PFN_vkDestroyDevice destroy;
};

struct logged {
    const char *query;
    const char *key;
    uint32_t stock, reported;
    int device;
};

struct role {
    const char *layer_name;
    const char *config_env;
    pthread_once_t once;
    int state;
    struct capshim_config cfgs[CAPSHIM_MAX_CONFIGS];
    size_t ncfg;
    const char *paths[CAPSHIM_MAX_CONFIGS]; /* the configurations' files (role_init's list) */
    pthread_mutex_t lock;
    struct link *instances;
    struct link *devices;
    struct logged logged[MAX_LOGGED];
    size_t nlogged;
    int log_full_reported;
    int banner_done;
};

/* The two roles' state (layer.c). */
extern struct role roles[NUM_ROLES];

/* Each hook's implementation, do_NAME(struct role *, params...), in the file of its job. */
#define HOOK_PROTO(R, IDX, LEVEL, ret, retkw, name, params, args) ret do_##name(struct role *r, UNPAREN params);
CAPSHIM_HOOKS(HOOK_PROTO, _, 0)

/* layer_settings.c: reads and checks the role's configuration once (status events, stderr). */
void ensure_init(struct role *r);
/* layer_settings.c: the one stderr line of an active role (unless CAPSHIM_QUIET=1). */
void banner(struct role *r);

/* layer_devices.c: the configuration of role r that answers for pd, or NULL (pd answers stock);
 * it also notes pd's index and UUID for this thread's next events (device_fields). */
const struct capshim_config *role_cfg(struct role *r, VkPhysicalDevice pd);
/* layer_settings.c: configurations a and b (a < b) of r both name one device (its index in one, its
 * UUID in the other): a rejected config event naming both files and the device (text), and one
 * stderr line, once per pair; role_cfg leaves that device stock. */
void config_clash_device(struct role *r, size_t a, size_t b, const char *device);
/* layer_devices.c: "device", "uuid", "profile" of the device role_cfg last chose on this thread,
 * when c names its devices. */
void device_fields(struct capshim_json *j, const struct capshim_config *c);
/* layer_devices.c: that device's index, or -1. */
int current_device(void);

/* layer.c: the loader's dispatch key of a dispatchable handle; the instance of a key, or NULL. */
void *dispatch_key(const void *handle);
struct inst *find_inst_by_key(struct role *r, void *key);

/* layer_answers.c: one "chain_cut" event and one stderr line (a pNext chain longer than MAX_CHAIN). */
void chain_cut(struct role *r, const char *query, const char *result);

/* layer_enforce.c: VK_SUCCESS, or the error the simulated device gives for this create info. */
VkResult enforce_create_device(struct role *r, VkPhysicalDevice pd, const VkDeviceCreateInfo *ci);

#endif

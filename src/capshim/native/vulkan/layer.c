/* capshim Vulkan layer: dispatch (layer.h lists the files). */
#include "layer.h"

#include <stdlib.h>
#include <string.h>

struct role roles[NUM_ROLES] = {
    {"VK_LAYER_CAPSHIM_device", "CAPSHIM_VK_DEVICE_CONFIG", PTHREAD_ONCE_INIT, 0, {{0}}, 0, {NULL},
     PTHREAD_MUTEX_INITIALIZER, NULL, NULL, {{0}}, 0, 0, 0},
    {"VK_LAYER_CAPSHIM_app", "CAPSHIM_VK_APP_CONFIG", PTHREAD_ONCE_INIT, 0, {{0}}, 0, {NULL},
     PTHREAD_MUTEX_INITIALIZER, NULL, NULL, {{0}}, 0, 0, 0},
};

/* ---------- bookkeeping ---------- */

void *dispatch_key(const void *handle) {
    if (handle == NULL) return NULL;
    void *key;
    memcpy(&key, handle, sizeof key);
    return key;
}

static struct link *link_find(struct role *r, struct link *const *head, void *key) {
    pthread_mutex_lock(&r->lock);
    struct link *l = *head;
    while (l != NULL && l->key != key) l = l->next;
    pthread_mutex_unlock(&r->lock);
    return l;
}

static void link_push(struct role *r, struct link **head, struct link *node) {
    pthread_mutex_lock(&r->lock);
    node->next = *head;
    *head = node;
    pthread_mutex_unlock(&r->lock);
}

/* Unlink and return the node with this key, or NULL. */
static struct link *link_take(struct role *r, struct link **head, void *key) {
    pthread_mutex_lock(&r->lock);
    struct link **pp = head, *found = NULL;
    while (*pp != NULL) {
        if ((*pp)->key == key) {
            found = *pp;
            *pp = found->next;
            break;
        }
        pp = &(*pp)->next;
    }
    pthread_mutex_unlock(&r->lock);
    return found;
}

struct inst *find_inst_by_key(struct role *r, void *key) {
    return (struct inst *)link_find(r, &r->instances, key);
}

static struct dev *find_dev(struct role *r, void *key) { return (struct dev *)link_find(r, &r->devices, key); }

/* ---------- instance and device creation ---------- */

#define NEXT_LOOKUP(name) i->next_##name = (PFN_##name)gipa(*out, #name);
#define CHAIN_LOOKUP(R, name)
#define INST_LOOKUP(R, name) NEXT_LOOKUP(name)
#define QUERY_LOOKUP(R, name) NEXT_LOOKUP(name)
#define DEV_LOOKUP(R, name)
#define HOOK_LOOKUP(R, IDX, LEVEL, ret, retkw, name, params, args) LEVEL##_LOOKUP(R, name)

#define CHAIN_INSTALLED(R, name)
#define INST_INSTALLED(R, name)
#define QUERY_INSTALLED(R, name) \
    if (i->next_##name != NULL && n < sizeof installed / sizeof installed[0]) installed[n++] = #name;
#define DEV_INSTALLED(R, name)
#define HOOK_INSTALLED(R, IDX, LEVEL, ret, retkw, name, params, args) LEVEL##_INSTALLED(R, name)

/* Order in which the roles' vkCreateInstance were entered: the layer nearer
 * the application is entered first. Reported so the launcher can check that
 * the app role sits above the device role. */
static unsigned long create_seq;

VkResult do_vkCreateInstance(struct role *r, const VkInstanceCreateInfo *ci, const VkAllocationCallbacks *a,
                             VkInstance *out) {
    ensure_init(r);
    unsigned long position = __atomic_add_fetch(&create_seq, 1, __ATOMIC_SEQ_CST);
    VkLayerInstanceCreateInfo *chain = (VkLayerInstanceCreateInfo *)ci->pNext;
    for (int n = 0; chain != NULL && !(chain->sType == VK_STRUCTURE_TYPE_LOADER_INSTANCE_CREATE_INFO &&
                                       chain->function == VK_LAYER_LINK_INFO);
         n++)
        chain = n < MAX_CHAIN ? (VkLayerInstanceCreateInfo *)chain->pNext : NULL;
    if (chain == NULL || chain->u.pLayerInfo == NULL) return VK_ERROR_INITIALIZATION_FAILED;
    PFN_vkGetInstanceProcAddr gipa = chain->u.pLayerInfo->pfnNextGetInstanceProcAddr;
    chain->u.pLayerInfo = chain->u.pLayerInfo->pNext;
    PFN_vkCreateInstance create = (PFN_vkCreateInstance)gipa(VK_NULL_HANDLE, "vkCreateInstance");
    if (create == NULL) return VK_ERROR_INITIALIZATION_FAILED;
    VkResult res = create(ci, a, out);
    if (res != VK_SUCCESS) return res;
    struct inst *i = calloc(1, sizeof *i);
    PFN_vkDestroyInstance destroy = (PFN_vkDestroyInstance)gipa(*out, "vkDestroyInstance");
    if (i == NULL) {
        if (destroy != NULL) destroy(*out, a);
        *out = VK_NULL_HANDLE;
        return VK_ERROR_OUT_OF_HOST_MEMORY;
    }
    i->link.key = dispatch_key(*out);
    i->instance = *out;
    i->gipa = gipa;
    CAPSHIM_HOOKS(HOOK_LOOKUP, _, 0)
    link_push(r, &r->instances, &i->link);
    if (r->state == STATE_ACTIVE) {
        struct capshim_json j;
        const char *installed[16];
        size_t n = 0;
        CAPSHIM_HOOKS(HOOK_INSTALLED, _, 0)
        capshim_json_begin(&j, "hooks", "vulkan", r->layer_name);
        capshim_json_str_array(&j, "installed", installed, n);
        capshim_json_u64(&j, "entered", position);
        capshim_json_end_and_write(&j);
        banner(r);
    }
    return VK_SUCCESS;
}

void do_vkDestroyInstance(struct role *r, VkInstance instance, const VkAllocationCallbacks *a) {
    struct inst *found = (struct inst *)link_take(r, &r->instances, dispatch_key(instance));
    if (found == NULL) return;
    if (found->next_vkDestroyInstance != NULL) found->next_vkDestroyInstance(instance, a);
    free(found);
}

VkResult do_vkCreateDevice(struct role *r, VkPhysicalDevice pd, const VkDeviceCreateInfo *ci,
                           const VkAllocationCallbacks *a, VkDevice *out) {
    VkLayerDeviceCreateInfo *chain = (VkLayerDeviceCreateInfo *)ci->pNext;
    for (int n = 0; chain != NULL && !(chain->sType == VK_STRUCTURE_TYPE_LOADER_DEVICE_CREATE_INFO &&
                                       chain->function == VK_LAYER_LINK_INFO);
         n++)
        chain = n < MAX_CHAIN ? (VkLayerDeviceCreateInfo *)chain->pNext : NULL;
    if (chain == NULL || chain->u.pLayerInfo == NULL) return VK_ERROR_INITIALIZATION_FAILED;
    PFN_vkGetInstanceProcAddr gipa = chain->u.pLayerInfo->pfnNextGetInstanceProcAddr;
    PFN_vkGetDeviceProcAddr gdpa = chain->u.pLayerInfo->pfnNextGetDeviceProcAddr;
    struct inst *i = find_inst_by_key(r, dispatch_key(pd));
    if (i == NULL) return VK_ERROR_INITIALIZATION_FAILED;
    VkResult refused = enforce_create_device(r, pd, ci);
    if (refused != VK_SUCCESS) return refused;
    PFN_vkCreateDevice create = (PFN_vkCreateDevice)gipa(i->instance, "vkCreateDevice");
    if (create == NULL) return VK_ERROR_INITIALIZATION_FAILED;
    chain->u.pLayerInfo = chain->u.pLayerInfo->pNext;
    VkResult res = create(pd, ci, a, out);
    if (res != VK_SUCCESS) return res;
    struct dev *d = calloc(1, sizeof *d);
    PFN_vkDestroyDevice destroy = (PFN_vkDestroyDevice)gdpa(*out, "vkDestroyDevice");
    if (d == NULL) {
        if (destroy != NULL) destroy(*out, a);
        *out = VK_NULL_HANDLE;
        return VK_ERROR_OUT_OF_HOST_MEMORY;
    }
    d->link.key = dispatch_key(*out);
    d->gdpa = gdpa;
    d->destroy = destroy;
    link_push(r, &r->devices, &d->link);
    return VK_SUCCESS;
}

void do_vkDestroyDevice(struct role *r, VkDevice device, const VkAllocationCallbacks *a) {
    struct dev *found = (struct dev *)link_take(r, &r->devices, dispatch_key(device));
    if (found == NULL) return;
    if (found->destroy != NULL) found->destroy(device, a);
    free(found);
}

/* ---------- per-role entry points ---------- */

#define HOOK_WRAPPER(R, IDX, LEVEL, ret, retkw, name, params, args) \
    static VKAPI_ATTR ret VKAPI_CALL R##_##name params { retkw do_##name(&roles[IDX], UNPAREN args); }

#define ANSWER(R, name) \
    if (strcmp(n, #name) == 0) return (PFN_vkVoidFunction)R##_##name;
#define CHAIN_GIPA(R, name) ANSWER(R, name)
#define INST_GIPA(R, name) ANSWER(R, name)
#define QUERY_GIPA(R, name) \
    if (r->state == STATE_ACTIVE) ANSWER(R, name)
#define DEV_GIPA(R, name)
#define HOOK_GIPA(R, IDX, LEVEL, ret, retkw, name, params, args) LEVEL##_GIPA(R, name)
#define CHAIN_GDPA(R, name)
#define INST_GDPA(R, name)
#define QUERY_GDPA(R, name)
#define DEV_GDPA(R, name) ANSWER(R, name)
#define HOOK_GDPA(R, IDX, LEVEL, ret, retkw, name, params, args) LEVEL##_GDPA(R, name)

/* One role's wrappers and its three exported entry points (the manifest's
 * "functions" field names them). */
#define ROLE_FUNCS(R, IDX)                                                                                       \
    CAPSHIM_HOOKS(HOOK_WRAPPER, R, IDX)                                                                          \
    EXPORT VKAPI_ATTR PFN_vkVoidFunction VKAPI_CALL capshim_##R##_GetDeviceProcAddr(VkDevice d, const char *n) { \
        if (n == NULL) return NULL;                                                                              \
        if (strcmp(n, "vkGetDeviceProcAddr") == 0) return (PFN_vkVoidFunction)capshim_##R##_GetDeviceProcAddr;   \
        CAPSHIM_HOOKS(HOOK_GDPA, R, IDX)                                                                         \
        struct dev *dv = find_dev(&roles[IDX], dispatch_key(d));                                                 \
        return (dv != NULL && dv->gdpa != NULL) ? dv->gdpa(d, n) : NULL;                                         \
    }                                                                                                            \
    EXPORT VKAPI_ATTR PFN_vkVoidFunction VKAPI_CALL capshim_##R##_GetInstanceProcAddr(VkInstance in,             \
                                                                                      const char *n) {           \
        struct role *r = &roles[IDX];                                                                            \
        if (n == NULL) return NULL;                                                                              \
        ensure_init(r);                                                                                          \
        if (strcmp(n, "vkGetInstanceProcAddr") == 0) return (PFN_vkVoidFunction)capshim_##R##_GetInstanceProcAddr; \
        if (strcmp(n, "vkGetDeviceProcAddr") == 0) return (PFN_vkVoidFunction)capshim_##R##_GetDeviceProcAddr;   \
        CAPSHIM_HOOKS(HOOK_GIPA, R, IDX)                                                                         \
        if (in == VK_NULL_HANDLE) return NULL;                                                                   \
        struct inst *i = find_inst_by_key(r, dispatch_key(in));                                                  \
        return (i != NULL && i->gipa != NULL) ? i->gipa(in, n) : NULL;                                           \
    }                                                                                                            \
    EXPORT VKAPI_ATTR VkResult VKAPI_CALL capshim_##R##_NegotiateLoaderLayerInterfaceVersion(                    \
        VkNegotiateLayerInterface *v) {                                                                          \
        if (v == NULL || v->sType != LAYER_NEGOTIATE_INTERFACE_STRUCT) return VK_ERROR_INITIALIZATION_FAILED;    \
        ensure_init(&roles[IDX]);                                                                                \
        if (v->loaderLayerInterfaceVersion > 2) v->loaderLayerInterfaceVersion = 2;                              \
        if (v->loaderLayerInterfaceVersion >= 2) {                                                               \
            v->pfnGetInstanceProcAddr = capshim_##R##_GetInstanceProcAddr;                                       \
            v->pfnGetDeviceProcAddr = capshim_##R##_GetDeviceProcAddr;                                           \
            v->pfnGetPhysicalDeviceProcAddr = NULL;                                                              \
        }                                                                                                        \
        return VK_SUCCESS;                                                                                       \
    }

ROLE_FUNCS(device, ROLE_DEVICE)
ROLE_FUNCS(app, ROLE_APP)

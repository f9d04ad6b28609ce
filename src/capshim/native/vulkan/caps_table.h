/* capshim Vulkan layer: the capability keys it knows and where they live.
 *
 * Each CAPSHIM_FIELD(key, kind, ctype, stype, member) names one member of one
 * Vulkan structure. The same key may live in several structures (for example
 * shaderFloat16 in VkPhysicalDeviceShaderFloat16Int8Features and in
 * VkPhysicalDeviceVulkan12Features); the layer patches every copy it finds in
 * a pNext chain. Source: the Vulkan specification and vulkan_core.h. The
 * Python catalog (src/capshim/profiles/catalog.py) lists the same keys; a
 * test checks that they agree.
 *
 * The structures of VK_KHR_cooperative_matrix, VK_KHR_shader_bfloat16 and
 * VK_NV_cooperative_matrix2 are mirrored here (capshim_* types) because older
 * headers (Debian 12 ships 1.3.239) do not have them. Their sType values come
 * from the Vulkan registry (vk.xml): 1000506000, 1000141000, 1000593000.
 */
#ifndef CAPSHIM_CAPS_TABLE_H
#define CAPSHIM_CAPS_TABLE_H

#include <stddef.h>
#include <stdint.h>
#include <vulkan/vulkan.h>

enum capshim_kind { CAPSHIM_BOOL = 1, CAPSHIM_U32 = 2, CAPSHIM_FLAGS = 3, CAPSHIM_VERSION = 4 };

/* Pseudo sType values for the two base structures (no pNext of their own). */
#define CAPSHIM_STYPE_BASE_PROPERTIES 0x7FFF0001u
#define CAPSHIM_STYPE_BASE_FEATURES 0x7FFF0002u

#define CAPSHIM_STYPE_COOPMAT_FEATURES_KHR 1000506000u
#define CAPSHIM_STYPE_BFLOAT16_FEATURES_KHR 1000141000u
#define CAPSHIM_STYPE_COOPMAT2_FEATURES_NV 1000593000u

typedef struct capshim_coopmat_features {
    VkStructureType sType;
    void *pNext;
    VkBool32 cooperativeMatrix;
    VkBool32 cooperativeMatrixRobustBufferAccess;
} capshim_coopmat_features;

typedef struct capshim_bfloat16_features {
    VkStructureType sType;
    void *pNext;
    VkBool32 shaderBFloat16Type;
    VkBool32 shaderBFloat16DotProduct;
    VkBool32 shaderBFloat16CooperativeMatrix;
} capshim_bfloat16_features;

typedef struct capshim_coopmat2_features {
    VkStructureType sType;
    void *pNext;
    VkBool32 cooperativeMatrixWorkgroupScope;
    VkBool32 cooperativeMatrixFlexibleDimensions;
    VkBool32 cooperativeMatrixReductions;
    VkBool32 cooperativeMatrixConversions;
    VkBool32 cooperativeMatrixPerElementOperations;
    VkBool32 cooperativeMatrixTensorAddressing;
    VkBool32 cooperativeMatrixBlockLoads;
} capshim_coopmat2_features;

#define CAPSHIM_BP CAPSHIM_STYPE_BASE_PROPERTIES
#define CAPSHIM_BF CAPSHIM_STYPE_BASE_FEATURES
#define CAPSHIM_ST(x) ((uint32_t)VK_STRUCTURE_TYPE_##x)

#define CAPSHIM_INTDOT(X, m)                                                                  \
    X(m, CAPSHIM_BOOL, VkPhysicalDeviceShaderIntegerDotProductProperties,                     \
      CAPSHIM_ST(PHYSICAL_DEVICE_SHADER_INTEGER_DOT_PRODUCT_PROPERTIES), m)                   \
    X(m, CAPSHIM_BOOL, VkPhysicalDeviceVulkan13Properties, CAPSHIM_ST(PHYSICAL_DEVICE_VULKAN_1_3_PROPERTIES), m)

#define CAPSHIM_FIELDS(X)                                                                                           \
    X(apiVersion, CAPSHIM_VERSION, VkPhysicalDeviceProperties, CAPSHIM_BP, apiVersion)                              \
    X(maxComputeSharedMemorySize, CAPSHIM_U32, VkPhysicalDeviceProperties, CAPSHIM_BP,                              \
      limits.maxComputeSharedMemorySize)                                                                            \
    X(maxComputeWorkGroupInvocations, CAPSHIM_U32, VkPhysicalDeviceProperties, CAPSHIM_BP,                          \
      limits.maxComputeWorkGroupInvocations)                                                                        \
    X(subgroupSize, CAPSHIM_U32, VkPhysicalDeviceSubgroupProperties, CAPSHIM_ST(PHYSICAL_DEVICE_SUBGROUP_PROPERTIES), \
      subgroupSize)                                                                                                 \
    X(subgroupSize, CAPSHIM_U32, VkPhysicalDeviceVulkan11Properties, CAPSHIM_ST(PHYSICAL_DEVICE_VULKAN_1_1_PROPERTIES), \
      subgroupSize)                                                                                                 \
    X(subgroupSupportedStages, CAPSHIM_FLAGS, VkPhysicalDeviceSubgroupProperties,                                  \
      CAPSHIM_ST(PHYSICAL_DEVICE_SUBGROUP_PROPERTIES), supportedStages)                                             \
    X(subgroupSupportedStages, CAPSHIM_FLAGS, VkPhysicalDeviceVulkan11Properties,                                  \
      CAPSHIM_ST(PHYSICAL_DEVICE_VULKAN_1_1_PROPERTIES), subgroupSupportedStages)                                   \
    X(subgroupSupportedOperations, CAPSHIM_FLAGS, VkPhysicalDeviceSubgroupProperties,                              \
      CAPSHIM_ST(PHYSICAL_DEVICE_SUBGROUP_PROPERTIES), supportedOperations)                                         \
    X(subgroupSupportedOperations, CAPSHIM_FLAGS, VkPhysicalDeviceVulkan11Properties,                              \
      CAPSHIM_ST(PHYSICAL_DEVICE_VULKAN_1_1_PROPERTIES), subgroupSupportedOperations)                               \
    X(subgroupQuadOperationsInAllStages, CAPSHIM_BOOL, VkPhysicalDeviceSubgroupProperties,                         \
      CAPSHIM_ST(PHYSICAL_DEVICE_SUBGROUP_PROPERTIES), quadOperationsInAllStages)                                   \
    X(subgroupQuadOperationsInAllStages, CAPSHIM_BOOL, VkPhysicalDeviceVulkan11Properties,                         \
      CAPSHIM_ST(PHYSICAL_DEVICE_VULKAN_1_1_PROPERTIES), subgroupQuadOperationsInAllStages)                         \
    X(minSubgroupSize, CAPSHIM_U32, VkPhysicalDeviceSubgroupSizeControlProperties,                                 \
      CAPSHIM_ST(PHYSICAL_DEVICE_SUBGROUP_SIZE_CONTROL_PROPERTIES), minSubgroupSize)                                \
    X(minSubgroupSize, CAPSHIM_U32, VkPhysicalDeviceVulkan13Properties,                                            \
      CAPSHIM_ST(PHYSICAL_DEVICE_VULKAN_1_3_PROPERTIES), minSubgroupSize)                                           \
    X(maxSubgroupSize, CAPSHIM_U32, VkPhysicalDeviceSubgroupSizeControlProperties,                                 \
      CAPSHIM_ST(PHYSICAL_DEVICE_SUBGROUP_SIZE_CONTROL_PROPERTIES), maxSubgroupSize)                                \
    X(maxSubgroupSize, CAPSHIM_U32, VkPhysicalDeviceVulkan13Properties,                                            \
      CAPSHIM_ST(PHYSICAL_DEVICE_VULKAN_1_3_PROPERTIES), maxSubgroupSize)                                           \
    X(maxComputeWorkgroupSubgroups, CAPSHIM_U32, VkPhysicalDeviceSubgroupSizeControlProperties,                    \
      CAPSHIM_ST(PHYSICAL_DEVICE_SUBGROUP_SIZE_CONTROL_PROPERTIES), maxComputeWorkgroupSubgroups)                   \
    X(maxComputeWorkgroupSubgroups, CAPSHIM_U32, VkPhysicalDeviceVulkan13Properties,                               \
      CAPSHIM_ST(PHYSICAL_DEVICE_VULKAN_1_3_PROPERTIES), maxComputeWorkgroupSubgroups)                              \
    X(requiredSubgroupSizeStages, CAPSHIM_FLAGS, VkPhysicalDeviceSubgroupSizeControlProperties,                    \
      CAPSHIM_ST(PHYSICAL_DEVICE_SUBGROUP_SIZE_CONTROL_PROPERTIES), requiredSubgroupSizeStages)                     \
    X(requiredSubgroupSizeStages, CAPSHIM_FLAGS, VkPhysicalDeviceVulkan13Properties,                               \
      CAPSHIM_ST(PHYSICAL_DEVICE_VULKAN_1_3_PROPERTIES), requiredSubgroupSizeStages)                                \
    CAPSHIM_INTDOT(X, integerDotProduct8BitUnsignedAccelerated)                                                     \
    CAPSHIM_INTDOT(X, integerDotProduct8BitSignedAccelerated)                                                       \
    CAPSHIM_INTDOT(X, integerDotProduct8BitMixedSignednessAccelerated)                                              \
    CAPSHIM_INTDOT(X, integerDotProduct4x8BitPackedUnsignedAccelerated)                                             \
    CAPSHIM_INTDOT(X, integerDotProduct4x8BitPackedSignedAccelerated)                                               \
    CAPSHIM_INTDOT(X, integerDotProduct4x8BitPackedMixedSignednessAccelerated)                                      \
    CAPSHIM_INTDOT(X, integerDotProduct16BitUnsignedAccelerated)                                                    \
    CAPSHIM_INTDOT(X, integerDotProduct16BitSignedAccelerated)                                                      \
    CAPSHIM_INTDOT(X, integerDotProduct16BitMixedSignednessAccelerated)                                             \
    CAPSHIM_INTDOT(X, integerDotProduct32BitUnsignedAccelerated)                                                    \
    CAPSHIM_INTDOT(X, integerDotProduct32BitSignedAccelerated)                                                      \
    CAPSHIM_INTDOT(X, integerDotProduct32BitMixedSignednessAccelerated)                                             \
    CAPSHIM_INTDOT(X, integerDotProduct64BitUnsignedAccelerated)                                                    \
    CAPSHIM_INTDOT(X, integerDotProduct64BitSignedAccelerated)                                                      \
    CAPSHIM_INTDOT(X, integerDotProduct64BitMixedSignednessAccelerated)                                             \
    CAPSHIM_INTDOT(X, integerDotProductAccumulatingSaturating8BitUnsignedAccelerated)                               \
    CAPSHIM_INTDOT(X, integerDotProductAccumulatingSaturating8BitSignedAccelerated)                                 \
    CAPSHIM_INTDOT(X, integerDotProductAccumulatingSaturating8BitMixedSignednessAccelerated)                        \
    CAPSHIM_INTDOT(X, integerDotProductAccumulatingSaturating4x8BitPackedUnsignedAccelerated)                       \
    CAPSHIM_INTDOT(X, integerDotProductAccumulatingSaturating4x8BitPackedSignedAccelerated)                         \
    CAPSHIM_INTDOT(X, integerDotProductAccumulatingSaturating4x8BitPackedMixedSignednessAccelerated)                \
    CAPSHIM_INTDOT(X, integerDotProductAccumulatingSaturating16BitUnsignedAccelerated)                              \
    CAPSHIM_INTDOT(X, integerDotProductAccumulatingSaturating16BitSignedAccelerated)                                \
    CAPSHIM_INTDOT(X, integerDotProductAccumulatingSaturating16BitMixedSignednessAccelerated)                       \
    CAPSHIM_INTDOT(X, integerDotProductAccumulatingSaturating32BitUnsignedAccelerated)                              \
    CAPSHIM_INTDOT(X, integerDotProductAccumulatingSaturating32BitSignedAccelerated)                                \
    CAPSHIM_INTDOT(X, integerDotProductAccumulatingSaturating32BitMixedSignednessAccelerated)                       \
    CAPSHIM_INTDOT(X, integerDotProductAccumulatingSaturating64BitUnsignedAccelerated)                              \
    CAPSHIM_INTDOT(X, integerDotProductAccumulatingSaturating64BitSignedAccelerated)                                \
    CAPSHIM_INTDOT(X, integerDotProductAccumulatingSaturating64BitMixedSignednessAccelerated)                       \
    X(shaderFloat64, CAPSHIM_BOOL, VkPhysicalDeviceFeatures, CAPSHIM_BF, shaderFloat64)                             \
    X(shaderInt64, CAPSHIM_BOOL, VkPhysicalDeviceFeatures, CAPSHIM_BF, shaderInt64)                                 \
    X(shaderInt16, CAPSHIM_BOOL, VkPhysicalDeviceFeatures, CAPSHIM_BF, shaderInt16)                                 \
    X(storageBuffer16BitAccess, CAPSHIM_BOOL, VkPhysicalDevice16BitStorageFeatures,                                \
      CAPSHIM_ST(PHYSICAL_DEVICE_16BIT_STORAGE_FEATURES), storageBuffer16BitAccess)                                 \
    X(storageBuffer16BitAccess, CAPSHIM_BOOL, VkPhysicalDeviceVulkan11Features,                                    \
      CAPSHIM_ST(PHYSICAL_DEVICE_VULKAN_1_1_FEATURES), storageBuffer16BitAccess)                                    \
    X(uniformAndStorageBuffer16BitAccess, CAPSHIM_BOOL, VkPhysicalDevice16BitStorageFeatures,                      \
      CAPSHIM_ST(PHYSICAL_DEVICE_16BIT_STORAGE_FEATURES), uniformAndStorageBuffer16BitAccess)                       \
    X(uniformAndStorageBuffer16BitAccess, CAPSHIM_BOOL, VkPhysicalDeviceVulkan11Features,                          \
      CAPSHIM_ST(PHYSICAL_DEVICE_VULKAN_1_1_FEATURES), uniformAndStorageBuffer16BitAccess)                          \
    X(storagePushConstant16, CAPSHIM_BOOL, VkPhysicalDevice16BitStorageFeatures,                                   \
      CAPSHIM_ST(PHYSICAL_DEVICE_16BIT_STORAGE_FEATURES), storagePushConstant16)                                    \
    X(storagePushConstant16, CAPSHIM_BOOL, VkPhysicalDeviceVulkan11Features,                                       \
      CAPSHIM_ST(PHYSICAL_DEVICE_VULKAN_1_1_FEATURES), storagePushConstant16)                                       \
    X(storageInputOutput16, CAPSHIM_BOOL, VkPhysicalDevice16BitStorageFeatures,                                    \
      CAPSHIM_ST(PHYSICAL_DEVICE_16BIT_STORAGE_FEATURES), storageInputOutput16)                                     \
    X(storageInputOutput16, CAPSHIM_BOOL, VkPhysicalDeviceVulkan11Features,                                        \
      CAPSHIM_ST(PHYSICAL_DEVICE_VULKAN_1_1_FEATURES), storageInputOutput16)                                        \
    X(storageBuffer8BitAccess, CAPSHIM_BOOL, VkPhysicalDevice8BitStorageFeatures,                                  \
      CAPSHIM_ST(PHYSICAL_DEVICE_8BIT_STORAGE_FEATURES), storageBuffer8BitAccess)                                   \
    X(storageBuffer8BitAccess, CAPSHIM_BOOL, VkPhysicalDeviceVulkan12Features,                                     \
      CAPSHIM_ST(PHYSICAL_DEVICE_VULKAN_1_2_FEATURES), storageBuffer8BitAccess)                                     \
    X(uniformAndStorageBuffer8BitAccess, CAPSHIM_BOOL, VkPhysicalDevice8BitStorageFeatures,                        \
      CAPSHIM_ST(PHYSICAL_DEVICE_8BIT_STORAGE_FEATURES), uniformAndStorageBuffer8BitAccess)                         \
    X(uniformAndStorageBuffer8BitAccess, CAPSHIM_BOOL, VkPhysicalDeviceVulkan12Features,                           \
      CAPSHIM_ST(PHYSICAL_DEVICE_VULKAN_1_2_FEATURES), uniformAndStorageBuffer8BitAccess)                           \
    X(storagePushConstant8, CAPSHIM_BOOL, VkPhysicalDevice8BitStorageFeatures,                                     \
      CAPSHIM_ST(PHYSICAL_DEVICE_8BIT_STORAGE_FEATURES), storagePushConstant8)                                      \
    X(storagePushConstant8, CAPSHIM_BOOL, VkPhysicalDeviceVulkan12Features,                                        \
      CAPSHIM_ST(PHYSICAL_DEVICE_VULKAN_1_2_FEATURES), storagePushConstant8)                                        \
    X(shaderFloat16, CAPSHIM_BOOL, VkPhysicalDeviceShaderFloat16Int8Features,                                      \
      CAPSHIM_ST(PHYSICAL_DEVICE_SHADER_FLOAT16_INT8_FEATURES), shaderFloat16)                                      \
    X(shaderFloat16, CAPSHIM_BOOL, VkPhysicalDeviceVulkan12Features, CAPSHIM_ST(PHYSICAL_DEVICE_VULKAN_1_2_FEATURES), \
      shaderFloat16)                                                                                                \
    X(shaderInt8, CAPSHIM_BOOL, VkPhysicalDeviceShaderFloat16Int8Features,                                         \
      CAPSHIM_ST(PHYSICAL_DEVICE_SHADER_FLOAT16_INT8_FEATURES), shaderInt8)                                         \
    X(shaderInt8, CAPSHIM_BOOL, VkPhysicalDeviceVulkan12Features, CAPSHIM_ST(PHYSICAL_DEVICE_VULKAN_1_2_FEATURES),  \
      shaderInt8)                                                                                                   \
    X(subgroupSizeControl, CAPSHIM_BOOL, VkPhysicalDeviceSubgroupSizeControlFeatures,                              \
      CAPSHIM_ST(PHYSICAL_DEVICE_SUBGROUP_SIZE_CONTROL_FEATURES), subgroupSizeControl)                              \
    X(subgroupSizeControl, CAPSHIM_BOOL, VkPhysicalDeviceVulkan13Features,                                         \
      CAPSHIM_ST(PHYSICAL_DEVICE_VULKAN_1_3_FEATURES), subgroupSizeControl)                                         \
    X(computeFullSubgroups, CAPSHIM_BOOL, VkPhysicalDeviceSubgroupSizeControlFeatures,                             \
      CAPSHIM_ST(PHYSICAL_DEVICE_SUBGROUP_SIZE_CONTROL_FEATURES), computeFullSubgroups)                             \
    X(computeFullSubgroups, CAPSHIM_BOOL, VkPhysicalDeviceVulkan13Features,                                        \
      CAPSHIM_ST(PHYSICAL_DEVICE_VULKAN_1_3_FEATURES), computeFullSubgroups)                                        \
    X(shaderIntegerDotProduct, CAPSHIM_BOOL, VkPhysicalDeviceShaderIntegerDotProductFeatures,                      \
      CAPSHIM_ST(PHYSICAL_DEVICE_SHADER_INTEGER_DOT_PRODUCT_FEATURES), shaderIntegerDotProduct)                     \
    X(shaderIntegerDotProduct, CAPSHIM_BOOL, VkPhysicalDeviceVulkan13Features,                                     \
      CAPSHIM_ST(PHYSICAL_DEVICE_VULKAN_1_3_FEATURES), shaderIntegerDotProduct)                                     \
    X(cooperativeMatrix, CAPSHIM_BOOL, capshim_coopmat_features, CAPSHIM_STYPE_COOPMAT_FEATURES_KHR,               \
      cooperativeMatrix)                                                                                            \
    X(cooperativeMatrixRobustBufferAccess, CAPSHIM_BOOL, capshim_coopmat_features,                                 \
      CAPSHIM_STYPE_COOPMAT_FEATURES_KHR, cooperativeMatrixRobustBufferAccess)                                      \
    X(shaderBFloat16Type, CAPSHIM_BOOL, capshim_bfloat16_features, CAPSHIM_STYPE_BFLOAT16_FEATURES_KHR,            \
      shaderBFloat16Type)                                                                                           \
    X(shaderBFloat16DotProduct, CAPSHIM_BOOL, capshim_bfloat16_features, CAPSHIM_STYPE_BFLOAT16_FEATURES_KHR,      \
      shaderBFloat16DotProduct)                                                                                     \
    X(shaderBFloat16CooperativeMatrix, CAPSHIM_BOOL, capshim_bfloat16_features,                                    \
      CAPSHIM_STYPE_BFLOAT16_FEATURES_KHR, shaderBFloat16CooperativeMatrix)                                         \
    X(cooperativeMatrixWorkgroupScope, CAPSHIM_BOOL, capshim_coopmat2_features, CAPSHIM_STYPE_COOPMAT2_FEATURES_NV, \
      cooperativeMatrixWorkgroupScope)                                                                              \
    X(cooperativeMatrixFlexibleDimensions, CAPSHIM_BOOL, capshim_coopmat2_features,                                \
      CAPSHIM_STYPE_COOPMAT2_FEATURES_NV, cooperativeMatrixFlexibleDimensions)                                      \
    X(cooperativeMatrixReductions, CAPSHIM_BOOL, capshim_coopmat2_features, CAPSHIM_STYPE_COOPMAT2_FEATURES_NV,    \
      cooperativeMatrixReductions)                                                                                  \
    X(cooperativeMatrixConversions, CAPSHIM_BOOL, capshim_coopmat2_features, CAPSHIM_STYPE_COOPMAT2_FEATURES_NV,   \
      cooperativeMatrixConversions)                                                                                 \
    X(cooperativeMatrixPerElementOperations, CAPSHIM_BOOL, capshim_coopmat2_features,                              \
      CAPSHIM_STYPE_COOPMAT2_FEATURES_NV, cooperativeMatrixPerElementOperations)                                    \
    X(cooperativeMatrixTensorAddressing, CAPSHIM_BOOL, capshim_coopmat2_features,                                  \
      CAPSHIM_STYPE_COOPMAT2_FEATURES_NV, cooperativeMatrixTensorAddressing)                                        \
    X(cooperativeMatrixBlockLoads, CAPSHIM_BOOL, capshim_coopmat2_features, CAPSHIM_STYPE_COOPMAT2_FEATURES_NV,    \
      cooperativeMatrixBlockLoads)

struct capshim_field {
    const char *key;
    int kind;
    uint32_t stype;
    size_t offset;
};

#define CAPSHIM_FIELD_ENTRY(key, kind, ctype, stype, member) {#key, kind, (uint32_t)(stype), offsetof(ctype, member)},

static const struct capshim_field capshim_fields[] = {CAPSHIM_FIELDS(CAPSHIM_FIELD_ENTRY)};
#define CAPSHIM_NUM_FIELDS (sizeof(capshim_fields) / sizeof(capshim_fields[0]))

#endif

/* capshim Vulkan layer: the capability keys it knows and where they live.
 *
 * GENERATED from src/capshim/profiles/capabilities.toml and registry_facts.toml
 * (the Khronos registry, vk.xml 1.4.366) by
 * `python -m capshim.profiles.generate --write`: edit the table, not this file
 * (a test fails when they differ). Kinds, types and structures are explained
 * there and in docs/capabilities.md.
 */
#ifndef CAPSHIM_CAPS_KEYS_H
#define CAPSHIM_CAPS_KEYS_H

/* Value types, kinds and configuration limits (native/common, generated with this file). */
#include "config_limits.h"

/* X(key, type, kind): each key once, in the probe's order. */
#define CAPSHIM_KEYS(X) \
    X(apiVersion, CAPSHIM_VERSION, CAPSHIM_SEM_VERSION) \
    X(maxComputeSharedMemorySize, CAPSHIM_U32, CAPSHIM_SEM_UPPER) \
    X(maxComputeWorkGroupInvocations, CAPSHIM_U32, CAPSHIM_SEM_UPPER) \
    X(subgroupSize, CAPSHIM_U32, CAPSHIM_SEM_EXACT) \
    X(subgroupSupportedStages, CAPSHIM_FLAGS, CAPSHIM_SEM_UPPER) \
    X(subgroupSupportedOperations, CAPSHIM_FLAGS, CAPSHIM_SEM_UPPER) \
    X(subgroupQuadOperationsInAllStages, CAPSHIM_BOOL, CAPSHIM_SEM_FEATURE) \
    X(minSubgroupSize, CAPSHIM_U32, CAPSHIM_SEM_LOWER) \
    X(maxSubgroupSize, CAPSHIM_U32, CAPSHIM_SEM_UPPER) \
    X(maxComputeWorkgroupSubgroups, CAPSHIM_U32, CAPSHIM_SEM_UPPER) \
    X(requiredSubgroupSizeStages, CAPSHIM_FLAGS, CAPSHIM_SEM_UPPER) \
    X(integerDotProduct8BitUnsignedAccelerated, CAPSHIM_BOOL, CAPSHIM_SEM_FEATURE) \
    X(integerDotProduct8BitSignedAccelerated, CAPSHIM_BOOL, CAPSHIM_SEM_FEATURE) \
    X(integerDotProduct8BitMixedSignednessAccelerated, CAPSHIM_BOOL, CAPSHIM_SEM_FEATURE) \
    X(integerDotProduct4x8BitPackedUnsignedAccelerated, CAPSHIM_BOOL, CAPSHIM_SEM_FEATURE) \
    X(integerDotProduct4x8BitPackedSignedAccelerated, CAPSHIM_BOOL, CAPSHIM_SEM_FEATURE) \
    X(integerDotProduct4x8BitPackedMixedSignednessAccelerated, CAPSHIM_BOOL, CAPSHIM_SEM_FEATURE) \
    X(integerDotProduct16BitUnsignedAccelerated, CAPSHIM_BOOL, CAPSHIM_SEM_FEATURE) \
    X(integerDotProduct16BitSignedAccelerated, CAPSHIM_BOOL, CAPSHIM_SEM_FEATURE) \
    X(integerDotProduct16BitMixedSignednessAccelerated, CAPSHIM_BOOL, CAPSHIM_SEM_FEATURE) \
    X(integerDotProduct32BitUnsignedAccelerated, CAPSHIM_BOOL, CAPSHIM_SEM_FEATURE) \
    X(integerDotProduct32BitSignedAccelerated, CAPSHIM_BOOL, CAPSHIM_SEM_FEATURE) \
    X(integerDotProduct32BitMixedSignednessAccelerated, CAPSHIM_BOOL, CAPSHIM_SEM_FEATURE) \
    X(integerDotProduct64BitUnsignedAccelerated, CAPSHIM_BOOL, CAPSHIM_SEM_FEATURE) \
    X(integerDotProduct64BitSignedAccelerated, CAPSHIM_BOOL, CAPSHIM_SEM_FEATURE) \
    X(integerDotProduct64BitMixedSignednessAccelerated, CAPSHIM_BOOL, CAPSHIM_SEM_FEATURE) \
    X(integerDotProductAccumulatingSaturating8BitUnsignedAccelerated, CAPSHIM_BOOL, CAPSHIM_SEM_FEATURE) \
    X(integerDotProductAccumulatingSaturating8BitSignedAccelerated, CAPSHIM_BOOL, CAPSHIM_SEM_FEATURE) \
    X(integerDotProductAccumulatingSaturating8BitMixedSignednessAccelerated, CAPSHIM_BOOL, CAPSHIM_SEM_FEATURE) \
    X(integerDotProductAccumulatingSaturating4x8BitPackedUnsignedAccelerated, CAPSHIM_BOOL, CAPSHIM_SEM_FEATURE) \
    X(integerDotProductAccumulatingSaturating4x8BitPackedSignedAccelerated, CAPSHIM_BOOL, CAPSHIM_SEM_FEATURE) \
    X(integerDotProductAccumulatingSaturating4x8BitPackedMixedSignednessAccelerated, CAPSHIM_BOOL, CAPSHIM_SEM_FEATURE) \
    X(integerDotProductAccumulatingSaturating16BitUnsignedAccelerated, CAPSHIM_BOOL, CAPSHIM_SEM_FEATURE) \
    X(integerDotProductAccumulatingSaturating16BitSignedAccelerated, CAPSHIM_BOOL, CAPSHIM_SEM_FEATURE) \
    X(integerDotProductAccumulatingSaturating16BitMixedSignednessAccelerated, CAPSHIM_BOOL, CAPSHIM_SEM_FEATURE) \
    X(integerDotProductAccumulatingSaturating32BitUnsignedAccelerated, CAPSHIM_BOOL, CAPSHIM_SEM_FEATURE) \
    X(integerDotProductAccumulatingSaturating32BitSignedAccelerated, CAPSHIM_BOOL, CAPSHIM_SEM_FEATURE) \
    X(integerDotProductAccumulatingSaturating32BitMixedSignednessAccelerated, CAPSHIM_BOOL, CAPSHIM_SEM_FEATURE) \
    X(integerDotProductAccumulatingSaturating64BitUnsignedAccelerated, CAPSHIM_BOOL, CAPSHIM_SEM_FEATURE) \
    X(integerDotProductAccumulatingSaturating64BitSignedAccelerated, CAPSHIM_BOOL, CAPSHIM_SEM_FEATURE) \
    X(integerDotProductAccumulatingSaturating64BitMixedSignednessAccelerated, CAPSHIM_BOOL, CAPSHIM_SEM_FEATURE) \
    X(shaderFloat64, CAPSHIM_BOOL, CAPSHIM_SEM_FEATURE) \
    X(shaderInt64, CAPSHIM_BOOL, CAPSHIM_SEM_FEATURE) \
    X(shaderInt16, CAPSHIM_BOOL, CAPSHIM_SEM_FEATURE) \
    X(storageBuffer16BitAccess, CAPSHIM_BOOL, CAPSHIM_SEM_FEATURE) \
    X(uniformAndStorageBuffer16BitAccess, CAPSHIM_BOOL, CAPSHIM_SEM_FEATURE) \
    X(storagePushConstant16, CAPSHIM_BOOL, CAPSHIM_SEM_FEATURE) \
    X(storageInputOutput16, CAPSHIM_BOOL, CAPSHIM_SEM_FEATURE) \
    X(storageBuffer8BitAccess, CAPSHIM_BOOL, CAPSHIM_SEM_FEATURE) \
    X(uniformAndStorageBuffer8BitAccess, CAPSHIM_BOOL, CAPSHIM_SEM_FEATURE) \
    X(storagePushConstant8, CAPSHIM_BOOL, CAPSHIM_SEM_FEATURE) \
    X(shaderFloat16, CAPSHIM_BOOL, CAPSHIM_SEM_FEATURE) \
    X(shaderInt8, CAPSHIM_BOOL, CAPSHIM_SEM_FEATURE) \
    X(shaderSubgroupExtendedTypes, CAPSHIM_BOOL, CAPSHIM_SEM_FEATURE) \
    X(subgroupSizeControl, CAPSHIM_BOOL, CAPSHIM_SEM_FEATURE) \
    X(computeFullSubgroups, CAPSHIM_BOOL, CAPSHIM_SEM_FEATURE) \
    X(shaderIntegerDotProduct, CAPSHIM_BOOL, CAPSHIM_SEM_FEATURE) \
    X(cooperativeMatrix, CAPSHIM_BOOL, CAPSHIM_SEM_FEATURE) \
    X(cooperativeMatrixRobustBufferAccess, CAPSHIM_BOOL, CAPSHIM_SEM_FEATURE) \
    X(shaderBFloat16Type, CAPSHIM_BOOL, CAPSHIM_SEM_FEATURE) \
    X(shaderBFloat16DotProduct, CAPSHIM_BOOL, CAPSHIM_SEM_FEATURE) \
    X(shaderBFloat16CooperativeMatrix, CAPSHIM_BOOL, CAPSHIM_SEM_FEATURE) \
    X(cooperativeMatrixWorkgroupScope, CAPSHIM_BOOL, CAPSHIM_SEM_FEATURE) \
    X(cooperativeMatrixFlexibleDimensions, CAPSHIM_BOOL, CAPSHIM_SEM_FEATURE) \
    X(cooperativeMatrixReductions, CAPSHIM_BOOL, CAPSHIM_SEM_FEATURE) \
    X(cooperativeMatrixConversions, CAPSHIM_BOOL, CAPSHIM_SEM_FEATURE) \
    X(cooperativeMatrixPerElementOperations, CAPSHIM_BOOL, CAPSHIM_SEM_FEATURE) \
    X(cooperativeMatrixTensorAddressing, CAPSHIM_BOOL, CAPSHIM_SEM_FEATURE) \
    X(cooperativeMatrixBlockLoads, CAPSHIM_BOOL, CAPSHIM_SEM_FEATURE)

#endif

#if !defined(CAPSHIM_KEYS_ONLY) && !defined(CAPSHIM_CAPS_TABLE_H)
#define CAPSHIM_CAPS_TABLE_H

#include <stddef.h>
#include <stdint.h>
#include <vulkan/vulkan.h>

/* Pseudo sType values for the two base structures (no pNext of their own). */
#define CAPSHIM_STYPE_BASE_PROPERTIES 0x7FFF0001u
#define CAPSHIM_STYPE_BASE_FEATURES 0x7FFF0002u
#define CAPSHIM_BP CAPSHIM_STYPE_BASE_PROPERTIES
#define CAPSHIM_BF CAPSHIM_STYPE_BASE_FEATURES
#define CAPSHIM_ST(x) ((uint32_t)VK_STRUCTURE_TYPE_##x)

/* VkPhysicalDeviceCooperativeMatrixFeaturesKHR: mirrored because older headers (Debian 12: 1.3.239) lack it; Vulkan registry vk.xml: VkPhysicalDeviceCooperativeMatrixFeaturesKHR. */
#define CAPSHIM_STYPE_PHYSICAL_DEVICE_COOPERATIVE_MATRIX_FEATURES_KHR 1000506000u
typedef struct capshim_VkPhysicalDeviceCooperativeMatrixFeaturesKHR {
    VkStructureType sType;
    void *pNext;
    VkBool32 cooperativeMatrix;
    VkBool32 cooperativeMatrixRobustBufferAccess;
} capshim_VkPhysicalDeviceCooperativeMatrixFeaturesKHR;

/* VkPhysicalDeviceShaderBfloat16FeaturesKHR: mirrored because older headers (Debian 12: 1.3.239) lack it; Vulkan registry vk.xml: VkPhysicalDeviceShaderBfloat16FeaturesKHR. */
#define CAPSHIM_STYPE_PHYSICAL_DEVICE_SHADER_BFLOAT16_FEATURES_KHR 1000141000u
typedef struct capshim_VkPhysicalDeviceShaderBfloat16FeaturesKHR {
    VkStructureType sType;
    void *pNext;
    VkBool32 shaderBFloat16Type;
    VkBool32 shaderBFloat16DotProduct;
    VkBool32 shaderBFloat16CooperativeMatrix;
} capshim_VkPhysicalDeviceShaderBfloat16FeaturesKHR;

/* VkPhysicalDeviceCooperativeMatrix2FeaturesNV: mirrored because older headers (Debian 12: 1.3.239) lack it; Vulkan registry vk.xml: VkPhysicalDeviceCooperativeMatrix2FeaturesNV. */
#define CAPSHIM_STYPE_PHYSICAL_DEVICE_COOPERATIVE_MATRIX_2_FEATURES_NV 1000593000u
typedef struct capshim_VkPhysicalDeviceCooperativeMatrix2FeaturesNV {
    VkStructureType sType;
    void *pNext;
    VkBool32 cooperativeMatrixWorkgroupScope;
    VkBool32 cooperativeMatrixFlexibleDimensions;
    VkBool32 cooperativeMatrixReductions;
    VkBool32 cooperativeMatrixConversions;
    VkBool32 cooperativeMatrixPerElementOperations;
    VkBool32 cooperativeMatrixTensorAddressing;
    VkBool32 cooperativeMatrixBlockLoads;
} capshim_VkPhysicalDeviceCooperativeMatrix2FeaturesNV;

/* X(key, type, ctype, stype, member): every place a key lives, lookup order first. */
#define CAPSHIM_FIELDS(X) \
    X(apiVersion, CAPSHIM_VERSION, VkPhysicalDeviceProperties, CAPSHIM_BP, apiVersion) \
    X(maxComputeSharedMemorySize, CAPSHIM_U32, VkPhysicalDeviceProperties, CAPSHIM_BP, limits.maxComputeSharedMemorySize) \
    X(maxComputeWorkGroupInvocations, CAPSHIM_U32, VkPhysicalDeviceProperties, CAPSHIM_BP, limits.maxComputeWorkGroupInvocations) \
    X(subgroupSize, CAPSHIM_U32, VkPhysicalDeviceSubgroupProperties, CAPSHIM_ST(PHYSICAL_DEVICE_SUBGROUP_PROPERTIES), subgroupSize) \
    X(subgroupSize, CAPSHIM_U32, VkPhysicalDeviceVulkan11Properties, CAPSHIM_ST(PHYSICAL_DEVICE_VULKAN_1_1_PROPERTIES), subgroupSize) \
    X(subgroupSupportedStages, CAPSHIM_FLAGS, VkPhysicalDeviceSubgroupProperties, CAPSHIM_ST(PHYSICAL_DEVICE_SUBGROUP_PROPERTIES), supportedStages) \
    X(subgroupSupportedStages, CAPSHIM_FLAGS, VkPhysicalDeviceVulkan11Properties, CAPSHIM_ST(PHYSICAL_DEVICE_VULKAN_1_1_PROPERTIES), subgroupSupportedStages) \
    X(subgroupSupportedOperations, CAPSHIM_FLAGS, VkPhysicalDeviceSubgroupProperties, CAPSHIM_ST(PHYSICAL_DEVICE_SUBGROUP_PROPERTIES), supportedOperations) \
    X(subgroupSupportedOperations, CAPSHIM_FLAGS, VkPhysicalDeviceVulkan11Properties, CAPSHIM_ST(PHYSICAL_DEVICE_VULKAN_1_1_PROPERTIES), subgroupSupportedOperations) \
    X(subgroupQuadOperationsInAllStages, CAPSHIM_BOOL, VkPhysicalDeviceSubgroupProperties, CAPSHIM_ST(PHYSICAL_DEVICE_SUBGROUP_PROPERTIES), quadOperationsInAllStages) \
    X(subgroupQuadOperationsInAllStages, CAPSHIM_BOOL, VkPhysicalDeviceVulkan11Properties, CAPSHIM_ST(PHYSICAL_DEVICE_VULKAN_1_1_PROPERTIES), subgroupQuadOperationsInAllStages) \
    X(minSubgroupSize, CAPSHIM_U32, VkPhysicalDeviceSubgroupSizeControlProperties, CAPSHIM_ST(PHYSICAL_DEVICE_SUBGROUP_SIZE_CONTROL_PROPERTIES), minSubgroupSize) \
    X(minSubgroupSize, CAPSHIM_U32, VkPhysicalDeviceVulkan13Properties, CAPSHIM_ST(PHYSICAL_DEVICE_VULKAN_1_3_PROPERTIES), minSubgroupSize) \
    X(maxSubgroupSize, CAPSHIM_U32, VkPhysicalDeviceSubgroupSizeControlProperties, CAPSHIM_ST(PHYSICAL_DEVICE_SUBGROUP_SIZE_CONTROL_PROPERTIES), maxSubgroupSize) \
    X(maxSubgroupSize, CAPSHIM_U32, VkPhysicalDeviceVulkan13Properties, CAPSHIM_ST(PHYSICAL_DEVICE_VULKAN_1_3_PROPERTIES), maxSubgroupSize) \
    X(maxComputeWorkgroupSubgroups, CAPSHIM_U32, VkPhysicalDeviceSubgroupSizeControlProperties, CAPSHIM_ST(PHYSICAL_DEVICE_SUBGROUP_SIZE_CONTROL_PROPERTIES), maxComputeWorkgroupSubgroups) \
    X(maxComputeWorkgroupSubgroups, CAPSHIM_U32, VkPhysicalDeviceVulkan13Properties, CAPSHIM_ST(PHYSICAL_DEVICE_VULKAN_1_3_PROPERTIES), maxComputeWorkgroupSubgroups) \
    X(requiredSubgroupSizeStages, CAPSHIM_FLAGS, VkPhysicalDeviceSubgroupSizeControlProperties, CAPSHIM_ST(PHYSICAL_DEVICE_SUBGROUP_SIZE_CONTROL_PROPERTIES), requiredSubgroupSizeStages) \
    X(requiredSubgroupSizeStages, CAPSHIM_FLAGS, VkPhysicalDeviceVulkan13Properties, CAPSHIM_ST(PHYSICAL_DEVICE_VULKAN_1_3_PROPERTIES), requiredSubgroupSizeStages) \
    X(integerDotProduct8BitUnsignedAccelerated, CAPSHIM_BOOL, VkPhysicalDeviceShaderIntegerDotProductProperties, CAPSHIM_ST(PHYSICAL_DEVICE_SHADER_INTEGER_DOT_PRODUCT_PROPERTIES), integerDotProduct8BitUnsignedAccelerated) \
    X(integerDotProduct8BitUnsignedAccelerated, CAPSHIM_BOOL, VkPhysicalDeviceVulkan13Properties, CAPSHIM_ST(PHYSICAL_DEVICE_VULKAN_1_3_PROPERTIES), integerDotProduct8BitUnsignedAccelerated) \
    X(integerDotProduct8BitSignedAccelerated, CAPSHIM_BOOL, VkPhysicalDeviceShaderIntegerDotProductProperties, CAPSHIM_ST(PHYSICAL_DEVICE_SHADER_INTEGER_DOT_PRODUCT_PROPERTIES), integerDotProduct8BitSignedAccelerated) \
    X(integerDotProduct8BitSignedAccelerated, CAPSHIM_BOOL, VkPhysicalDeviceVulkan13Properties, CAPSHIM_ST(PHYSICAL_DEVICE_VULKAN_1_3_PROPERTIES), integerDotProduct8BitSignedAccelerated) \
    X(integerDotProduct8BitMixedSignednessAccelerated, CAPSHIM_BOOL, VkPhysicalDeviceShaderIntegerDotProductProperties, CAPSHIM_ST(PHYSICAL_DEVICE_SHADER_INTEGER_DOT_PRODUCT_PROPERTIES), integerDotProduct8BitMixedSignednessAccelerated) \
    X(integerDotProduct8BitMixedSignednessAccelerated, CAPSHIM_BOOL, VkPhysicalDeviceVulkan13Properties, CAPSHIM_ST(PHYSICAL_DEVICE_VULKAN_1_3_PROPERTIES), integerDotProduct8BitMixedSignednessAccelerated) \
    X(integerDotProduct4x8BitPackedUnsignedAccelerated, CAPSHIM_BOOL, VkPhysicalDeviceShaderIntegerDotProductProperties, CAPSHIM_ST(PHYSICAL_DEVICE_SHADER_INTEGER_DOT_PRODUCT_PROPERTIES), integerDotProduct4x8BitPackedUnsignedAccelerated) \
    X(integerDotProduct4x8BitPackedUnsignedAccelerated, CAPSHIM_BOOL, VkPhysicalDeviceVulkan13Properties, CAPSHIM_ST(PHYSICAL_DEVICE_VULKAN_1_3_PROPERTIES), integerDotProduct4x8BitPackedUnsignedAccelerated) \
    X(integerDotProduct4x8BitPackedSignedAccelerated, CAPSHIM_BOOL, VkPhysicalDeviceShaderIntegerDotProductProperties, CAPSHIM_ST(PHYSICAL_DEVICE_SHADER_INTEGER_DOT_PRODUCT_PROPERTIES), integerDotProduct4x8BitPackedSignedAccelerated) \
    X(integerDotProduct4x8BitPackedSignedAccelerated, CAPSHIM_BOOL, VkPhysicalDeviceVulkan13Properties, CAPSHIM_ST(PHYSICAL_DEVICE_VULKAN_1_3_PROPERTIES), integerDotProduct4x8BitPackedSignedAccelerated) \
    X(integerDotProduct4x8BitPackedMixedSignednessAccelerated, CAPSHIM_BOOL, VkPhysicalDeviceShaderIntegerDotProductProperties, CAPSHIM_ST(PHYSICAL_DEVICE_SHADER_INTEGER_DOT_PRODUCT_PROPERTIES), integerDotProduct4x8BitPackedMixedSignednessAccelerated) \
    X(integerDotProduct4x8BitPackedMixedSignednessAccelerated, CAPSHIM_BOOL, VkPhysicalDeviceVulkan13Properties, CAPSHIM_ST(PHYSICAL_DEVICE_VULKAN_1_3_PROPERTIES), integerDotProduct4x8BitPackedMixedSignednessAccelerated) \
    X(integerDotProduct16BitUnsignedAccelerated, CAPSHIM_BOOL, VkPhysicalDeviceShaderIntegerDotProductProperties, CAPSHIM_ST(PHYSICAL_DEVICE_SHADER_INTEGER_DOT_PRODUCT_PROPERTIES), integerDotProduct16BitUnsignedAccelerated) \
    X(integerDotProduct16BitUnsignedAccelerated, CAPSHIM_BOOL, VkPhysicalDeviceVulkan13Properties, CAPSHIM_ST(PHYSICAL_DEVICE_VULKAN_1_3_PROPERTIES), integerDotProduct16BitUnsignedAccelerated) \
    X(integerDotProduct16BitSignedAccelerated, CAPSHIM_BOOL, VkPhysicalDeviceShaderIntegerDotProductProperties, CAPSHIM_ST(PHYSICAL_DEVICE_SHADER_INTEGER_DOT_PRODUCT_PROPERTIES), integerDotProduct16BitSignedAccelerated) \
    X(integerDotProduct16BitSignedAccelerated, CAPSHIM_BOOL, VkPhysicalDeviceVulkan13Properties, CAPSHIM_ST(PHYSICAL_DEVICE_VULKAN_1_3_PROPERTIES), integerDotProduct16BitSignedAccelerated) \
    X(integerDotProduct16BitMixedSignednessAccelerated, CAPSHIM_BOOL, VkPhysicalDeviceShaderIntegerDotProductProperties, CAPSHIM_ST(PHYSICAL_DEVICE_SHADER_INTEGER_DOT_PRODUCT_PROPERTIES), integerDotProduct16BitMixedSignednessAccelerated) \
    X(integerDotProduct16BitMixedSignednessAccelerated, CAPSHIM_BOOL, VkPhysicalDeviceVulkan13Properties, CAPSHIM_ST(PHYSICAL_DEVICE_VULKAN_1_3_PROPERTIES), integerDotProduct16BitMixedSignednessAccelerated) \
    X(integerDotProduct32BitUnsignedAccelerated, CAPSHIM_BOOL, VkPhysicalDeviceShaderIntegerDotProductProperties, CAPSHIM_ST(PHYSICAL_DEVICE_SHADER_INTEGER_DOT_PRODUCT_PROPERTIES), integerDotProduct32BitUnsignedAccelerated) \
    X(integerDotProduct32BitUnsignedAccelerated, CAPSHIM_BOOL, VkPhysicalDeviceVulkan13Properties, CAPSHIM_ST(PHYSICAL_DEVICE_VULKAN_1_3_PROPERTIES), integerDotProduct32BitUnsignedAccelerated) \
    X(integerDotProduct32BitSignedAccelerated, CAPSHIM_BOOL, VkPhysicalDeviceShaderIntegerDotProductProperties, CAPSHIM_ST(PHYSICAL_DEVICE_SHADER_INTEGER_DOT_PRODUCT_PROPERTIES), integerDotProduct32BitSignedAccelerated) \
    X(integerDotProduct32BitSignedAccelerated, CAPSHIM_BOOL, VkPhysicalDeviceVulkan13Properties, CAPSHIM_ST(PHYSICAL_DEVICE_VULKAN_1_3_PROPERTIES), integerDotProduct32BitSignedAccelerated) \
    X(integerDotProduct32BitMixedSignednessAccelerated, CAPSHIM_BOOL, VkPhysicalDeviceShaderIntegerDotProductProperties, CAPSHIM_ST(PHYSICAL_DEVICE_SHADER_INTEGER_DOT_PRODUCT_PROPERTIES), integerDotProduct32BitMixedSignednessAccelerated) \
    X(integerDotProduct32BitMixedSignednessAccelerated, CAPSHIM_BOOL, VkPhysicalDeviceVulkan13Properties, CAPSHIM_ST(PHYSICAL_DEVICE_VULKAN_1_3_PROPERTIES), integerDotProduct32BitMixedSignednessAccelerated) \
    X(integerDotProduct64BitUnsignedAccelerated, CAPSHIM_BOOL, VkPhysicalDeviceShaderIntegerDotProductProperties, CAPSHIM_ST(PHYSICAL_DEVICE_SHADER_INTEGER_DOT_PRODUCT_PROPERTIES), integerDotProduct64BitUnsignedAccelerated) \
    X(integerDotProduct64BitUnsignedAccelerated, CAPSHIM_BOOL, VkPhysicalDeviceVulkan13Properties, CAPSHIM_ST(PHYSICAL_DEVICE_VULKAN_1_3_PROPERTIES), integerDotProduct64BitUnsignedAccelerated) \
    X(integerDotProduct64BitSignedAccelerated, CAPSHIM_BOOL, VkPhysicalDeviceShaderIntegerDotProductProperties, CAPSHIM_ST(PHYSICAL_DEVICE_SHADER_INTEGER_DOT_PRODUCT_PROPERTIES), integerDotProduct64BitSignedAccelerated) \
    X(integerDotProduct64BitSignedAccelerated, CAPSHIM_BOOL, VkPhysicalDeviceVulkan13Properties, CAPSHIM_ST(PHYSICAL_DEVICE_VULKAN_1_3_PROPERTIES), integerDotProduct64BitSignedAccelerated) \
    X(integerDotProduct64BitMixedSignednessAccelerated, CAPSHIM_BOOL, VkPhysicalDeviceShaderIntegerDotProductProperties, CAPSHIM_ST(PHYSICAL_DEVICE_SHADER_INTEGER_DOT_PRODUCT_PROPERTIES), integerDotProduct64BitMixedSignednessAccelerated) \
    X(integerDotProduct64BitMixedSignednessAccelerated, CAPSHIM_BOOL, VkPhysicalDeviceVulkan13Properties, CAPSHIM_ST(PHYSICAL_DEVICE_VULKAN_1_3_PROPERTIES), integerDotProduct64BitMixedSignednessAccelerated) \
    X(integerDotProductAccumulatingSaturating8BitUnsignedAccelerated, CAPSHIM_BOOL, VkPhysicalDeviceShaderIntegerDotProductProperties, CAPSHIM_ST(PHYSICAL_DEVICE_SHADER_INTEGER_DOT_PRODUCT_PROPERTIES), integerDotProductAccumulatingSaturating8BitUnsignedAccelerated) \
    X(integerDotProductAccumulatingSaturating8BitUnsignedAccelerated, CAPSHIM_BOOL, VkPhysicalDeviceVulkan13Properties, CAPSHIM_ST(PHYSICAL_DEVICE_VULKAN_1_3_PROPERTIES), integerDotProductAccumulatingSaturating8BitUnsignedAccelerated) \
    X(integerDotProductAccumulatingSaturating8BitSignedAccelerated, CAPSHIM_BOOL, VkPhysicalDeviceShaderIntegerDotProductProperties, CAPSHIM_ST(PHYSICAL_DEVICE_SHADER_INTEGER_DOT_PRODUCT_PROPERTIES), integerDotProductAccumulatingSaturating8BitSignedAccelerated) \
    X(integerDotProductAccumulatingSaturating8BitSignedAccelerated, CAPSHIM_BOOL, VkPhysicalDeviceVulkan13Properties, CAPSHIM_ST(PHYSICAL_DEVICE_VULKAN_1_3_PROPERTIES), integerDotProductAccumulatingSaturating8BitSignedAccelerated) \
    X(integerDotProductAccumulatingSaturating8BitMixedSignednessAccelerated, CAPSHIM_BOOL, VkPhysicalDeviceShaderIntegerDotProductProperties, CAPSHIM_ST(PHYSICAL_DEVICE_SHADER_INTEGER_DOT_PRODUCT_PROPERTIES), integerDotProductAccumulatingSaturating8BitMixedSignednessAccelerated) \
    X(integerDotProductAccumulatingSaturating8BitMixedSignednessAccelerated, CAPSHIM_BOOL, VkPhysicalDeviceVulkan13Properties, CAPSHIM_ST(PHYSICAL_DEVICE_VULKAN_1_3_PROPERTIES), integerDotProductAccumulatingSaturating8BitMixedSignednessAccelerated) \
    X(integerDotProductAccumulatingSaturating4x8BitPackedUnsignedAccelerated, CAPSHIM_BOOL, VkPhysicalDeviceShaderIntegerDotProductProperties, CAPSHIM_ST(PHYSICAL_DEVICE_SHADER_INTEGER_DOT_PRODUCT_PROPERTIES), integerDotProductAccumulatingSaturating4x8BitPackedUnsignedAccelerated) \
    X(integerDotProductAccumulatingSaturating4x8BitPackedUnsignedAccelerated, CAPSHIM_BOOL, VkPhysicalDeviceVulkan13Properties, CAPSHIM_ST(PHYSICAL_DEVICE_VULKAN_1_3_PROPERTIES), integerDotProductAccumulatingSaturating4x8BitPackedUnsignedAccelerated) \
    X(integerDotProductAccumulatingSaturating4x8BitPackedSignedAccelerated, CAPSHIM_BOOL, VkPhysicalDeviceShaderIntegerDotProductProperties, CAPSHIM_ST(PHYSICAL_DEVICE_SHADER_INTEGER_DOT_PRODUCT_PROPERTIES), integerDotProductAccumulatingSaturating4x8BitPackedSignedAccelerated) \
    X(integerDotProductAccumulatingSaturating4x8BitPackedSignedAccelerated, CAPSHIM_BOOL, VkPhysicalDeviceVulkan13Properties, CAPSHIM_ST(PHYSICAL_DEVICE_VULKAN_1_3_PROPERTIES), integerDotProductAccumulatingSaturating4x8BitPackedSignedAccelerated) \
    X(integerDotProductAccumulatingSaturating4x8BitPackedMixedSignednessAccelerated, CAPSHIM_BOOL, VkPhysicalDeviceShaderIntegerDotProductProperties, CAPSHIM_ST(PHYSICAL_DEVICE_SHADER_INTEGER_DOT_PRODUCT_PROPERTIES), integerDotProductAccumulatingSaturating4x8BitPackedMixedSignednessAccelerated) \
    X(integerDotProductAccumulatingSaturating4x8BitPackedMixedSignednessAccelerated, CAPSHIM_BOOL, VkPhysicalDeviceVulkan13Properties, CAPSHIM_ST(PHYSICAL_DEVICE_VULKAN_1_3_PROPERTIES), integerDotProductAccumulatingSaturating4x8BitPackedMixedSignednessAccelerated) \
    X(integerDotProductAccumulatingSaturating16BitUnsignedAccelerated, CAPSHIM_BOOL, VkPhysicalDeviceShaderIntegerDotProductProperties, CAPSHIM_ST(PHYSICAL_DEVICE_SHADER_INTEGER_DOT_PRODUCT_PROPERTIES), integerDotProductAccumulatingSaturating16BitUnsignedAccelerated) \
    X(integerDotProductAccumulatingSaturating16BitUnsignedAccelerated, CAPSHIM_BOOL, VkPhysicalDeviceVulkan13Properties, CAPSHIM_ST(PHYSICAL_DEVICE_VULKAN_1_3_PROPERTIES), integerDotProductAccumulatingSaturating16BitUnsignedAccelerated) \
    X(integerDotProductAccumulatingSaturating16BitSignedAccelerated, CAPSHIM_BOOL, VkPhysicalDeviceShaderIntegerDotProductProperties, CAPSHIM_ST(PHYSICAL_DEVICE_SHADER_INTEGER_DOT_PRODUCT_PROPERTIES), integerDotProductAccumulatingSaturating16BitSignedAccelerated) \
    X(integerDotProductAccumulatingSaturating16BitSignedAccelerated, CAPSHIM_BOOL, VkPhysicalDeviceVulkan13Properties, CAPSHIM_ST(PHYSICAL_DEVICE_VULKAN_1_3_PROPERTIES), integerDotProductAccumulatingSaturating16BitSignedAccelerated) \
    X(integerDotProductAccumulatingSaturating16BitMixedSignednessAccelerated, CAPSHIM_BOOL, VkPhysicalDeviceShaderIntegerDotProductProperties, CAPSHIM_ST(PHYSICAL_DEVICE_SHADER_INTEGER_DOT_PRODUCT_PROPERTIES), integerDotProductAccumulatingSaturating16BitMixedSignednessAccelerated) \
    X(integerDotProductAccumulatingSaturating16BitMixedSignednessAccelerated, CAPSHIM_BOOL, VkPhysicalDeviceVulkan13Properties, CAPSHIM_ST(PHYSICAL_DEVICE_VULKAN_1_3_PROPERTIES), integerDotProductAccumulatingSaturating16BitMixedSignednessAccelerated) \
    X(integerDotProductAccumulatingSaturating32BitUnsignedAccelerated, CAPSHIM_BOOL, VkPhysicalDeviceShaderIntegerDotProductProperties, CAPSHIM_ST(PHYSICAL_DEVICE_SHADER_INTEGER_DOT_PRODUCT_PROPERTIES), integerDotProductAccumulatingSaturating32BitUnsignedAccelerated) \
    X(integerDotProductAccumulatingSaturating32BitUnsignedAccelerated, CAPSHIM_BOOL, VkPhysicalDeviceVulkan13Properties, CAPSHIM_ST(PHYSICAL_DEVICE_VULKAN_1_3_PROPERTIES), integerDotProductAccumulatingSaturating32BitUnsignedAccelerated) \
    X(integerDotProductAccumulatingSaturating32BitSignedAccelerated, CAPSHIM_BOOL, VkPhysicalDeviceShaderIntegerDotProductProperties, CAPSHIM_ST(PHYSICAL_DEVICE_SHADER_INTEGER_DOT_PRODUCT_PROPERTIES), integerDotProductAccumulatingSaturating32BitSignedAccelerated) \
    X(integerDotProductAccumulatingSaturating32BitSignedAccelerated, CAPSHIM_BOOL, VkPhysicalDeviceVulkan13Properties, CAPSHIM_ST(PHYSICAL_DEVICE_VULKAN_1_3_PROPERTIES), integerDotProductAccumulatingSaturating32BitSignedAccelerated) \
    X(integerDotProductAccumulatingSaturating32BitMixedSignednessAccelerated, CAPSHIM_BOOL, VkPhysicalDeviceShaderIntegerDotProductProperties, CAPSHIM_ST(PHYSICAL_DEVICE_SHADER_INTEGER_DOT_PRODUCT_PROPERTIES), integerDotProductAccumulatingSaturating32BitMixedSignednessAccelerated) \
    X(integerDotProductAccumulatingSaturating32BitMixedSignednessAccelerated, CAPSHIM_BOOL, VkPhysicalDeviceVulkan13Properties, CAPSHIM_ST(PHYSICAL_DEVICE_VULKAN_1_3_PROPERTIES), integerDotProductAccumulatingSaturating32BitMixedSignednessAccelerated) \
    X(integerDotProductAccumulatingSaturating64BitUnsignedAccelerated, CAPSHIM_BOOL, VkPhysicalDeviceShaderIntegerDotProductProperties, CAPSHIM_ST(PHYSICAL_DEVICE_SHADER_INTEGER_DOT_PRODUCT_PROPERTIES), integerDotProductAccumulatingSaturating64BitUnsignedAccelerated) \
    X(integerDotProductAccumulatingSaturating64BitUnsignedAccelerated, CAPSHIM_BOOL, VkPhysicalDeviceVulkan13Properties, CAPSHIM_ST(PHYSICAL_DEVICE_VULKAN_1_3_PROPERTIES), integerDotProductAccumulatingSaturating64BitUnsignedAccelerated) \
    X(integerDotProductAccumulatingSaturating64BitSignedAccelerated, CAPSHIM_BOOL, VkPhysicalDeviceShaderIntegerDotProductProperties, CAPSHIM_ST(PHYSICAL_DEVICE_SHADER_INTEGER_DOT_PRODUCT_PROPERTIES), integerDotProductAccumulatingSaturating64BitSignedAccelerated) \
    X(integerDotProductAccumulatingSaturating64BitSignedAccelerated, CAPSHIM_BOOL, VkPhysicalDeviceVulkan13Properties, CAPSHIM_ST(PHYSICAL_DEVICE_VULKAN_1_3_PROPERTIES), integerDotProductAccumulatingSaturating64BitSignedAccelerated) \
    X(integerDotProductAccumulatingSaturating64BitMixedSignednessAccelerated, CAPSHIM_BOOL, VkPhysicalDeviceShaderIntegerDotProductProperties, CAPSHIM_ST(PHYSICAL_DEVICE_SHADER_INTEGER_DOT_PRODUCT_PROPERTIES), integerDotProductAccumulatingSaturating64BitMixedSignednessAccelerated) \
    X(integerDotProductAccumulatingSaturating64BitMixedSignednessAccelerated, CAPSHIM_BOOL, VkPhysicalDeviceVulkan13Properties, CAPSHIM_ST(PHYSICAL_DEVICE_VULKAN_1_3_PROPERTIES), integerDotProductAccumulatingSaturating64BitMixedSignednessAccelerated) \
    X(shaderFloat64, CAPSHIM_BOOL, VkPhysicalDeviceFeatures, CAPSHIM_BF, shaderFloat64) \
    X(shaderInt64, CAPSHIM_BOOL, VkPhysicalDeviceFeatures, CAPSHIM_BF, shaderInt64) \
    X(shaderInt16, CAPSHIM_BOOL, VkPhysicalDeviceFeatures, CAPSHIM_BF, shaderInt16) \
    X(storageBuffer16BitAccess, CAPSHIM_BOOL, VkPhysicalDevice16BitStorageFeatures, CAPSHIM_ST(PHYSICAL_DEVICE_16BIT_STORAGE_FEATURES), storageBuffer16BitAccess) \
    X(storageBuffer16BitAccess, CAPSHIM_BOOL, VkPhysicalDeviceVulkan11Features, CAPSHIM_ST(PHYSICAL_DEVICE_VULKAN_1_1_FEATURES), storageBuffer16BitAccess) \
    X(uniformAndStorageBuffer16BitAccess, CAPSHIM_BOOL, VkPhysicalDevice16BitStorageFeatures, CAPSHIM_ST(PHYSICAL_DEVICE_16BIT_STORAGE_FEATURES), uniformAndStorageBuffer16BitAccess) \
    X(uniformAndStorageBuffer16BitAccess, CAPSHIM_BOOL, VkPhysicalDeviceVulkan11Features, CAPSHIM_ST(PHYSICAL_DEVICE_VULKAN_1_1_FEATURES), uniformAndStorageBuffer16BitAccess) \
    X(storagePushConstant16, CAPSHIM_BOOL, VkPhysicalDevice16BitStorageFeatures, CAPSHIM_ST(PHYSICAL_DEVICE_16BIT_STORAGE_FEATURES), storagePushConstant16) \
    X(storagePushConstant16, CAPSHIM_BOOL, VkPhysicalDeviceVulkan11Features, CAPSHIM_ST(PHYSICAL_DEVICE_VULKAN_1_1_FEATURES), storagePushConstant16) \
    X(storageInputOutput16, CAPSHIM_BOOL, VkPhysicalDevice16BitStorageFeatures, CAPSHIM_ST(PHYSICAL_DEVICE_16BIT_STORAGE_FEATURES), storageInputOutput16) \
    X(storageInputOutput16, CAPSHIM_BOOL, VkPhysicalDeviceVulkan11Features, CAPSHIM_ST(PHYSICAL_DEVICE_VULKAN_1_1_FEATURES), storageInputOutput16) \
    X(storageBuffer8BitAccess, CAPSHIM_BOOL, VkPhysicalDevice8BitStorageFeatures, CAPSHIM_ST(PHYSICAL_DEVICE_8BIT_STORAGE_FEATURES), storageBuffer8BitAccess) \
    X(storageBuffer8BitAccess, CAPSHIM_BOOL, VkPhysicalDeviceVulkan12Features, CAPSHIM_ST(PHYSICAL_DEVICE_VULKAN_1_2_FEATURES), storageBuffer8BitAccess) \
    X(uniformAndStorageBuffer8BitAccess, CAPSHIM_BOOL, VkPhysicalDevice8BitStorageFeatures, CAPSHIM_ST(PHYSICAL_DEVICE_8BIT_STORAGE_FEATURES), uniformAndStorageBuffer8BitAccess) \
    X(uniformAndStorageBuffer8BitAccess, CAPSHIM_BOOL, VkPhysicalDeviceVulkan12Features, CAPSHIM_ST(PHYSICAL_DEVICE_VULKAN_1_2_FEATURES), uniformAndStorageBuffer8BitAccess) \
    X(storagePushConstant8, CAPSHIM_BOOL, VkPhysicalDevice8BitStorageFeatures, CAPSHIM_ST(PHYSICAL_DEVICE_8BIT_STORAGE_FEATURES), storagePushConstant8) \
    X(storagePushConstant8, CAPSHIM_BOOL, VkPhysicalDeviceVulkan12Features, CAPSHIM_ST(PHYSICAL_DEVICE_VULKAN_1_2_FEATURES), storagePushConstant8) \
    X(shaderFloat16, CAPSHIM_BOOL, VkPhysicalDeviceShaderFloat16Int8Features, CAPSHIM_ST(PHYSICAL_DEVICE_SHADER_FLOAT16_INT8_FEATURES), shaderFloat16) \
    X(shaderFloat16, CAPSHIM_BOOL, VkPhysicalDeviceVulkan12Features, CAPSHIM_ST(PHYSICAL_DEVICE_VULKAN_1_2_FEATURES), shaderFloat16) \
    X(shaderInt8, CAPSHIM_BOOL, VkPhysicalDeviceShaderFloat16Int8Features, CAPSHIM_ST(PHYSICAL_DEVICE_SHADER_FLOAT16_INT8_FEATURES), shaderInt8) \
    X(shaderInt8, CAPSHIM_BOOL, VkPhysicalDeviceVulkan12Features, CAPSHIM_ST(PHYSICAL_DEVICE_VULKAN_1_2_FEATURES), shaderInt8) \
    X(shaderSubgroupExtendedTypes, CAPSHIM_BOOL, VkPhysicalDeviceShaderSubgroupExtendedTypesFeatures, CAPSHIM_ST(PHYSICAL_DEVICE_SHADER_SUBGROUP_EXTENDED_TYPES_FEATURES), shaderSubgroupExtendedTypes) \
    X(shaderSubgroupExtendedTypes, CAPSHIM_BOOL, VkPhysicalDeviceVulkan12Features, CAPSHIM_ST(PHYSICAL_DEVICE_VULKAN_1_2_FEATURES), shaderSubgroupExtendedTypes) \
    X(subgroupSizeControl, CAPSHIM_BOOL, VkPhysicalDeviceSubgroupSizeControlFeatures, CAPSHIM_ST(PHYSICAL_DEVICE_SUBGROUP_SIZE_CONTROL_FEATURES), subgroupSizeControl) \
    X(subgroupSizeControl, CAPSHIM_BOOL, VkPhysicalDeviceVulkan13Features, CAPSHIM_ST(PHYSICAL_DEVICE_VULKAN_1_3_FEATURES), subgroupSizeControl) \
    X(computeFullSubgroups, CAPSHIM_BOOL, VkPhysicalDeviceSubgroupSizeControlFeatures, CAPSHIM_ST(PHYSICAL_DEVICE_SUBGROUP_SIZE_CONTROL_FEATURES), computeFullSubgroups) \
    X(computeFullSubgroups, CAPSHIM_BOOL, VkPhysicalDeviceVulkan13Features, CAPSHIM_ST(PHYSICAL_DEVICE_VULKAN_1_3_FEATURES), computeFullSubgroups) \
    X(shaderIntegerDotProduct, CAPSHIM_BOOL, VkPhysicalDeviceShaderIntegerDotProductFeatures, CAPSHIM_ST(PHYSICAL_DEVICE_SHADER_INTEGER_DOT_PRODUCT_FEATURES), shaderIntegerDotProduct) \
    X(shaderIntegerDotProduct, CAPSHIM_BOOL, VkPhysicalDeviceVulkan13Features, CAPSHIM_ST(PHYSICAL_DEVICE_VULKAN_1_3_FEATURES), shaderIntegerDotProduct) \
    X(cooperativeMatrix, CAPSHIM_BOOL, capshim_VkPhysicalDeviceCooperativeMatrixFeaturesKHR, CAPSHIM_STYPE_PHYSICAL_DEVICE_COOPERATIVE_MATRIX_FEATURES_KHR, cooperativeMatrix) \
    X(cooperativeMatrixRobustBufferAccess, CAPSHIM_BOOL, capshim_VkPhysicalDeviceCooperativeMatrixFeaturesKHR, CAPSHIM_STYPE_PHYSICAL_DEVICE_COOPERATIVE_MATRIX_FEATURES_KHR, cooperativeMatrixRobustBufferAccess) \
    X(shaderBFloat16Type, CAPSHIM_BOOL, capshim_VkPhysicalDeviceShaderBfloat16FeaturesKHR, CAPSHIM_STYPE_PHYSICAL_DEVICE_SHADER_BFLOAT16_FEATURES_KHR, shaderBFloat16Type) \
    X(shaderBFloat16DotProduct, CAPSHIM_BOOL, capshim_VkPhysicalDeviceShaderBfloat16FeaturesKHR, CAPSHIM_STYPE_PHYSICAL_DEVICE_SHADER_BFLOAT16_FEATURES_KHR, shaderBFloat16DotProduct) \
    X(shaderBFloat16CooperativeMatrix, CAPSHIM_BOOL, capshim_VkPhysicalDeviceShaderBfloat16FeaturesKHR, CAPSHIM_STYPE_PHYSICAL_DEVICE_SHADER_BFLOAT16_FEATURES_KHR, shaderBFloat16CooperativeMatrix) \
    X(cooperativeMatrixWorkgroupScope, CAPSHIM_BOOL, capshim_VkPhysicalDeviceCooperativeMatrix2FeaturesNV, CAPSHIM_STYPE_PHYSICAL_DEVICE_COOPERATIVE_MATRIX_2_FEATURES_NV, cooperativeMatrixWorkgroupScope) \
    X(cooperativeMatrixFlexibleDimensions, CAPSHIM_BOOL, capshim_VkPhysicalDeviceCooperativeMatrix2FeaturesNV, CAPSHIM_STYPE_PHYSICAL_DEVICE_COOPERATIVE_MATRIX_2_FEATURES_NV, cooperativeMatrixFlexibleDimensions) \
    X(cooperativeMatrixReductions, CAPSHIM_BOOL, capshim_VkPhysicalDeviceCooperativeMatrix2FeaturesNV, CAPSHIM_STYPE_PHYSICAL_DEVICE_COOPERATIVE_MATRIX_2_FEATURES_NV, cooperativeMatrixReductions) \
    X(cooperativeMatrixConversions, CAPSHIM_BOOL, capshim_VkPhysicalDeviceCooperativeMatrix2FeaturesNV, CAPSHIM_STYPE_PHYSICAL_DEVICE_COOPERATIVE_MATRIX_2_FEATURES_NV, cooperativeMatrixConversions) \
    X(cooperativeMatrixPerElementOperations, CAPSHIM_BOOL, capshim_VkPhysicalDeviceCooperativeMatrix2FeaturesNV, CAPSHIM_STYPE_PHYSICAL_DEVICE_COOPERATIVE_MATRIX_2_FEATURES_NV, cooperativeMatrixPerElementOperations) \
    X(cooperativeMatrixTensorAddressing, CAPSHIM_BOOL, capshim_VkPhysicalDeviceCooperativeMatrix2FeaturesNV, CAPSHIM_STYPE_PHYSICAL_DEVICE_COOPERATIVE_MATRIX_2_FEATURES_NV, cooperativeMatrixTensorAddressing) \
    X(cooperativeMatrixBlockLoads, CAPSHIM_BOOL, capshim_VkPhysicalDeviceCooperativeMatrix2FeaturesNV, CAPSHIM_STYPE_PHYSICAL_DEVICE_COOPERATIVE_MATRIX_2_FEATURES_NV, cooperativeMatrixBlockLoads)

/* CAPSHIM_FIELDS with the key's kind appended: X(key, type, ctype, stype, member, kind). */
#define CAPSHIM_FIELDS_SEM(X) \
    X(apiVersion, CAPSHIM_VERSION, VkPhysicalDeviceProperties, CAPSHIM_BP, apiVersion, CAPSHIM_SEM_VERSION) \
    X(maxComputeSharedMemorySize, CAPSHIM_U32, VkPhysicalDeviceProperties, CAPSHIM_BP, limits.maxComputeSharedMemorySize, CAPSHIM_SEM_UPPER) \
    X(maxComputeWorkGroupInvocations, CAPSHIM_U32, VkPhysicalDeviceProperties, CAPSHIM_BP, limits.maxComputeWorkGroupInvocations, CAPSHIM_SEM_UPPER) \
    X(subgroupSize, CAPSHIM_U32, VkPhysicalDeviceSubgroupProperties, CAPSHIM_ST(PHYSICAL_DEVICE_SUBGROUP_PROPERTIES), subgroupSize, CAPSHIM_SEM_EXACT) \
    X(subgroupSize, CAPSHIM_U32, VkPhysicalDeviceVulkan11Properties, CAPSHIM_ST(PHYSICAL_DEVICE_VULKAN_1_1_PROPERTIES), subgroupSize, CAPSHIM_SEM_EXACT) \
    X(subgroupSupportedStages, CAPSHIM_FLAGS, VkPhysicalDeviceSubgroupProperties, CAPSHIM_ST(PHYSICAL_DEVICE_SUBGROUP_PROPERTIES), supportedStages, CAPSHIM_SEM_UPPER) \
    X(subgroupSupportedStages, CAPSHIM_FLAGS, VkPhysicalDeviceVulkan11Properties, CAPSHIM_ST(PHYSICAL_DEVICE_VULKAN_1_1_PROPERTIES), subgroupSupportedStages, CAPSHIM_SEM_UPPER) \
    X(subgroupSupportedOperations, CAPSHIM_FLAGS, VkPhysicalDeviceSubgroupProperties, CAPSHIM_ST(PHYSICAL_DEVICE_SUBGROUP_PROPERTIES), supportedOperations, CAPSHIM_SEM_UPPER) \
    X(subgroupSupportedOperations, CAPSHIM_FLAGS, VkPhysicalDeviceVulkan11Properties, CAPSHIM_ST(PHYSICAL_DEVICE_VULKAN_1_1_PROPERTIES), subgroupSupportedOperations, CAPSHIM_SEM_UPPER) \
    X(subgroupQuadOperationsInAllStages, CAPSHIM_BOOL, VkPhysicalDeviceSubgroupProperties, CAPSHIM_ST(PHYSICAL_DEVICE_SUBGROUP_PROPERTIES), quadOperationsInAllStages, CAPSHIM_SEM_FEATURE) \
    X(subgroupQuadOperationsInAllStages, CAPSHIM_BOOL, VkPhysicalDeviceVulkan11Properties, CAPSHIM_ST(PHYSICAL_DEVICE_VULKAN_1_1_PROPERTIES), subgroupQuadOperationsInAllStages, CAPSHIM_SEM_FEATURE) \
    X(minSubgroupSize, CAPSHIM_U32, VkPhysicalDeviceSubgroupSizeControlProperties, CAPSHIM_ST(PHYSICAL_DEVICE_SUBGROUP_SIZE_CONTROL_PROPERTIES), minSubgroupSize, CAPSHIM_SEM_LOWER) \
    X(minSubgroupSize, CAPSHIM_U32, VkPhysicalDeviceVulkan13Properties, CAPSHIM_ST(PHYSICAL_DEVICE_VULKAN_1_3_PROPERTIES), minSubgroupSize, CAPSHIM_SEM_LOWER) \
    X(maxSubgroupSize, CAPSHIM_U32, VkPhysicalDeviceSubgroupSizeControlProperties, CAPSHIM_ST(PHYSICAL_DEVICE_SUBGROUP_SIZE_CONTROL_PROPERTIES), maxSubgroupSize, CAPSHIM_SEM_UPPER) \
    X(maxSubgroupSize, CAPSHIM_U32, VkPhysicalDeviceVulkan13Properties, CAPSHIM_ST(PHYSICAL_DEVICE_VULKAN_1_3_PROPERTIES), maxSubgroupSize, CAPSHIM_SEM_UPPER) \
    X(maxComputeWorkgroupSubgroups, CAPSHIM_U32, VkPhysicalDeviceSubgroupSizeControlProperties, CAPSHIM_ST(PHYSICAL_DEVICE_SUBGROUP_SIZE_CONTROL_PROPERTIES), maxComputeWorkgroupSubgroups, CAPSHIM_SEM_UPPER) \
    X(maxComputeWorkgroupSubgroups, CAPSHIM_U32, VkPhysicalDeviceVulkan13Properties, CAPSHIM_ST(PHYSICAL_DEVICE_VULKAN_1_3_PROPERTIES), maxComputeWorkgroupSubgroups, CAPSHIM_SEM_UPPER) \
    X(requiredSubgroupSizeStages, CAPSHIM_FLAGS, VkPhysicalDeviceSubgroupSizeControlProperties, CAPSHIM_ST(PHYSICAL_DEVICE_SUBGROUP_SIZE_CONTROL_PROPERTIES), requiredSubgroupSizeStages, CAPSHIM_SEM_UPPER) \
    X(requiredSubgroupSizeStages, CAPSHIM_FLAGS, VkPhysicalDeviceVulkan13Properties, CAPSHIM_ST(PHYSICAL_DEVICE_VULKAN_1_3_PROPERTIES), requiredSubgroupSizeStages, CAPSHIM_SEM_UPPER) \
    X(integerDotProduct8BitUnsignedAccelerated, CAPSHIM_BOOL, VkPhysicalDeviceShaderIntegerDotProductProperties, CAPSHIM_ST(PHYSICAL_DEVICE_SHADER_INTEGER_DOT_PRODUCT_PROPERTIES), integerDotProduct8BitUnsignedAccelerated, CAPSHIM_SEM_FEATURE) \
    X(integerDotProduct8BitUnsignedAccelerated, CAPSHIM_BOOL, VkPhysicalDeviceVulkan13Properties, CAPSHIM_ST(PHYSICAL_DEVICE_VULKAN_1_3_PROPERTIES), integerDotProduct8BitUnsignedAccelerated, CAPSHIM_SEM_FEATURE) \
    X(integerDotProduct8BitSignedAccelerated, CAPSHIM_BOOL, VkPhysicalDeviceShaderIntegerDotProductProperties, CAPSHIM_ST(PHYSICAL_DEVICE_SHADER_INTEGER_DOT_PRODUCT_PROPERTIES), integerDotProduct8BitSignedAccelerated, CAPSHIM_SEM_FEATURE) \
    X(integerDotProduct8BitSignedAccelerated, CAPSHIM_BOOL, VkPhysicalDeviceVulkan13Properties, CAPSHIM_ST(PHYSICAL_DEVICE_VULKAN_1_3_PROPERTIES), integerDotProduct8BitSignedAccelerated, CAPSHIM_SEM_FEATURE) \
    X(integerDotProduct8BitMixedSignednessAccelerated, CAPSHIM_BOOL, VkPhysicalDeviceShaderIntegerDotProductProperties, CAPSHIM_ST(PHYSICAL_DEVICE_SHADER_INTEGER_DOT_PRODUCT_PROPERTIES), integerDotProduct8BitMixedSignednessAccelerated, CAPSHIM_SEM_FEATURE) \
    X(integerDotProduct8BitMixedSignednessAccelerated, CAPSHIM_BOOL, VkPhysicalDeviceVulkan13Properties, CAPSHIM_ST(PHYSICAL_DEVICE_VULKAN_1_3_PROPERTIES), integerDotProduct8BitMixedSignednessAccelerated, CAPSHIM_SEM_FEATURE) \
    X(integerDotProduct4x8BitPackedUnsignedAccelerated, CAPSHIM_BOOL, VkPhysicalDeviceShaderIntegerDotProductProperties, CAPSHIM_ST(PHYSICAL_DEVICE_SHADER_INTEGER_DOT_PRODUCT_PROPERTIES), integerDotProduct4x8BitPackedUnsignedAccelerated, CAPSHIM_SEM_FEATURE) \
    X(integerDotProduct4x8BitPackedUnsignedAccelerated, CAPSHIM_BOOL, VkPhysicalDeviceVulkan13Properties, CAPSHIM_ST(PHYSICAL_DEVICE_VULKAN_1_3_PROPERTIES), integerDotProduct4x8BitPackedUnsignedAccelerated, CAPSHIM_SEM_FEATURE) \
    X(integerDotProduct4x8BitPackedSignedAccelerated, CAPSHIM_BOOL, VkPhysicalDeviceShaderIntegerDotProductProperties, CAPSHIM_ST(PHYSICAL_DEVICE_SHADER_INTEGER_DOT_PRODUCT_PROPERTIES), integerDotProduct4x8BitPackedSignedAccelerated, CAPSHIM_SEM_FEATURE) \
    X(integerDotProduct4x8BitPackedSignedAccelerated, CAPSHIM_BOOL, VkPhysicalDeviceVulkan13Properties, CAPSHIM_ST(PHYSICAL_DEVICE_VULKAN_1_3_PROPERTIES), integerDotProduct4x8BitPackedSignedAccelerated, CAPSHIM_SEM_FEATURE) \
    X(integerDotProduct4x8BitPackedMixedSignednessAccelerated, CAPSHIM_BOOL, VkPhysicalDeviceShaderIntegerDotProductProperties, CAPSHIM_ST(PHYSICAL_DEVICE_SHADER_INTEGER_DOT_PRODUCT_PROPERTIES), integerDotProduct4x8BitPackedMixedSignednessAccelerated, CAPSHIM_SEM_FEATURE) \
    X(integerDotProduct4x8BitPackedMixedSignednessAccelerated, CAPSHIM_BOOL, VkPhysicalDeviceVulkan13Properties, CAPSHIM_ST(PHYSICAL_DEVICE_VULKAN_1_3_PROPERTIES), integerDotProduct4x8BitPackedMixedSignednessAccelerated, CAPSHIM_SEM_FEATURE) \
    X(integerDotProduct16BitUnsignedAccelerated, CAPSHIM_BOOL, VkPhysicalDeviceShaderIntegerDotProductProperties, CAPSHIM_ST(PHYSICAL_DEVICE_SHADER_INTEGER_DOT_PRODUCT_PROPERTIES), integerDotProduct16BitUnsignedAccelerated, CAPSHIM_SEM_FEATURE) \
    X(integerDotProduct16BitUnsignedAccelerated, CAPSHIM_BOOL, VkPhysicalDeviceVulkan13Properties, CAPSHIM_ST(PHYSICAL_DEVICE_VULKAN_1_3_PROPERTIES), integerDotProduct16BitUnsignedAccelerated, CAPSHIM_SEM_FEATURE) \
    X(integerDotProduct16BitSignedAccelerated, CAPSHIM_BOOL, VkPhysicalDeviceShaderIntegerDotProductProperties, CAPSHIM_ST(PHYSICAL_DEVICE_SHADER_INTEGER_DOT_PRODUCT_PROPERTIES), integerDotProduct16BitSignedAccelerated, CAPSHIM_SEM_FEATURE) \
    X(integerDotProduct16BitSignedAccelerated, CAPSHIM_BOOL, VkPhysicalDeviceVulkan13Properties, CAPSHIM_ST(PHYSICAL_DEVICE_VULKAN_1_3_PROPERTIES), integerDotProduct16BitSignedAccelerated, CAPSHIM_SEM_FEATURE) \
    X(integerDotProduct16BitMixedSignednessAccelerated, CAPSHIM_BOOL, VkPhysicalDeviceShaderIntegerDotProductProperties, CAPSHIM_ST(PHYSICAL_DEVICE_SHADER_INTEGER_DOT_PRODUCT_PROPERTIES), integerDotProduct16BitMixedSignednessAccelerated, CAPSHIM_SEM_FEATURE) \
    X(integerDotProduct16BitMixedSignednessAccelerated, CAPSHIM_BOOL, VkPhysicalDeviceVulkan13Properties, CAPSHIM_ST(PHYSICAL_DEVICE_VULKAN_1_3_PROPERTIES), integerDotProduct16BitMixedSignednessAccelerated, CAPSHIM_SEM_FEATURE) \
    X(integerDotProduct32BitUnsignedAccelerated, CAPSHIM_BOOL, VkPhysicalDeviceShaderIntegerDotProductProperties, CAPSHIM_ST(PHYSICAL_DEVICE_SHADER_INTEGER_DOT_PRODUCT_PROPERTIES), integerDotProduct32BitUnsignedAccelerated, CAPSHIM_SEM_FEATURE) \
    X(integerDotProduct32BitUnsignedAccelerated, CAPSHIM_BOOL, VkPhysicalDeviceVulkan13Properties, CAPSHIM_ST(PHYSICAL_DEVICE_VULKAN_1_3_PROPERTIES), integerDotProduct32BitUnsignedAccelerated, CAPSHIM_SEM_FEATURE) \
    X(integerDotProduct32BitSignedAccelerated, CAPSHIM_BOOL, VkPhysicalDeviceShaderIntegerDotProductProperties, CAPSHIM_ST(PHYSICAL_DEVICE_SHADER_INTEGER_DOT_PRODUCT_PROPERTIES), integerDotProduct32BitSignedAccelerated, CAPSHIM_SEM_FEATURE) \
    X(integerDotProduct32BitSignedAccelerated, CAPSHIM_BOOL, VkPhysicalDeviceVulkan13Properties, CAPSHIM_ST(PHYSICAL_DEVICE_VULKAN_1_3_PROPERTIES), integerDotProduct32BitSignedAccelerated, CAPSHIM_SEM_FEATURE) \
    X(integerDotProduct32BitMixedSignednessAccelerated, CAPSHIM_BOOL, VkPhysicalDeviceShaderIntegerDotProductProperties, CAPSHIM_ST(PHYSICAL_DEVICE_SHADER_INTEGER_DOT_PRODUCT_PROPERTIES), integerDotProduct32BitMixedSignednessAccelerated, CAPSHIM_SEM_FEATURE) \
    X(integerDotProduct32BitMixedSignednessAccelerated, CAPSHIM_BOOL, VkPhysicalDeviceVulkan13Properties, CAPSHIM_ST(PHYSICAL_DEVICE_VULKAN_1_3_PROPERTIES), integerDotProduct32BitMixedSignednessAccelerated, CAPSHIM_SEM_FEATURE) \
    X(integerDotProduct64BitUnsignedAccelerated, CAPSHIM_BOOL, VkPhysicalDeviceShaderIntegerDotProductProperties, CAPSHIM_ST(PHYSICAL_DEVICE_SHADER_INTEGER_DOT_PRODUCT_PROPERTIES), integerDotProduct64BitUnsignedAccelerated, CAPSHIM_SEM_FEATURE) \
    X(integerDotProduct64BitUnsignedAccelerated, CAPSHIM_BOOL, VkPhysicalDeviceVulkan13Properties, CAPSHIM_ST(PHYSICAL_DEVICE_VULKAN_1_3_PROPERTIES), integerDotProduct64BitUnsignedAccelerated, CAPSHIM_SEM_FEATURE) \
    X(integerDotProduct64BitSignedAccelerated, CAPSHIM_BOOL, VkPhysicalDeviceShaderIntegerDotProductProperties, CAPSHIM_ST(PHYSICAL_DEVICE_SHADER_INTEGER_DOT_PRODUCT_PROPERTIES), integerDotProduct64BitSignedAccelerated, CAPSHIM_SEM_FEATURE) \
    X(integerDotProduct64BitSignedAccelerated, CAPSHIM_BOOL, VkPhysicalDeviceVulkan13Properties, CAPSHIM_ST(PHYSICAL_DEVICE_VULKAN_1_3_PROPERTIES), integerDotProduct64BitSignedAccelerated, CAPSHIM_SEM_FEATURE) \
    X(integerDotProduct64BitMixedSignednessAccelerated, CAPSHIM_BOOL, VkPhysicalDeviceShaderIntegerDotProductProperties, CAPSHIM_ST(PHYSICAL_DEVICE_SHADER_INTEGER_DOT_PRODUCT_PROPERTIES), integerDotProduct64BitMixedSignednessAccelerated, CAPSHIM_SEM_FEATURE) \
    X(integerDotProduct64BitMixedSignednessAccelerated, CAPSHIM_BOOL, VkPhysicalDeviceVulkan13Properties, CAPSHIM_ST(PHYSICAL_DEVICE_VULKAN_1_3_PROPERTIES), integerDotProduct64BitMixedSignednessAccelerated, CAPSHIM_SEM_FEATURE) \
    X(integerDotProductAccumulatingSaturating8BitUnsignedAccelerated, CAPSHIM_BOOL, VkPhysicalDeviceShaderIntegerDotProductProperties, CAPSHIM_ST(PHYSICAL_DEVICE_SHADER_INTEGER_DOT_PRODUCT_PROPERTIES), integerDotProductAccumulatingSaturating8BitUnsignedAccelerated, CAPSHIM_SEM_FEATURE) \
    X(integerDotProductAccumulatingSaturating8BitUnsignedAccelerated, CAPSHIM_BOOL, VkPhysicalDeviceVulkan13Properties, CAPSHIM_ST(PHYSICAL_DEVICE_VULKAN_1_3_PROPERTIES), integerDotProductAccumulatingSaturating8BitUnsignedAccelerated, CAPSHIM_SEM_FEATURE) \
    X(integerDotProductAccumulatingSaturating8BitSignedAccelerated, CAPSHIM_BOOL, VkPhysicalDeviceShaderIntegerDotProductProperties, CAPSHIM_ST(PHYSICAL_DEVICE_SHADER_INTEGER_DOT_PRODUCT_PROPERTIES), integerDotProductAccumulatingSaturating8BitSignedAccelerated, CAPSHIM_SEM_FEATURE) \
    X(integerDotProductAccumulatingSaturating8BitSignedAccelerated, CAPSHIM_BOOL, VkPhysicalDeviceVulkan13Properties, CAPSHIM_ST(PHYSICAL_DEVICE_VULKAN_1_3_PROPERTIES), integerDotProductAccumulatingSaturating8BitSignedAccelerated, CAPSHIM_SEM_FEATURE) \
    X(integerDotProductAccumulatingSaturating8BitMixedSignednessAccelerated, CAPSHIM_BOOL, VkPhysicalDeviceShaderIntegerDotProductProperties, CAPSHIM_ST(PHYSICAL_DEVICE_SHADER_INTEGER_DOT_PRODUCT_PROPERTIES), integerDotProductAccumulatingSaturating8BitMixedSignednessAccelerated, CAPSHIM_SEM_FEATURE) \
    X(integerDotProductAccumulatingSaturating8BitMixedSignednessAccelerated, CAPSHIM_BOOL, VkPhysicalDeviceVulkan13Properties, CAPSHIM_ST(PHYSICAL_DEVICE_VULKAN_1_3_PROPERTIES), integerDotProductAccumulatingSaturating8BitMixedSignednessAccelerated, CAPSHIM_SEM_FEATURE) \
    X(integerDotProductAccumulatingSaturating4x8BitPackedUnsignedAccelerated, CAPSHIM_BOOL, VkPhysicalDeviceShaderIntegerDotProductProperties, CAPSHIM_ST(PHYSICAL_DEVICE_SHADER_INTEGER_DOT_PRODUCT_PROPERTIES), integerDotProductAccumulatingSaturating4x8BitPackedUnsignedAccelerated, CAPSHIM_SEM_FEATURE) \
    X(integerDotProductAccumulatingSaturating4x8BitPackedUnsignedAccelerated, CAPSHIM_BOOL, VkPhysicalDeviceVulkan13Properties, CAPSHIM_ST(PHYSICAL_DEVICE_VULKAN_1_3_PROPERTIES), integerDotProductAccumulatingSaturating4x8BitPackedUnsignedAccelerated, CAPSHIM_SEM_FEATURE) \
    X(integerDotProductAccumulatingSaturating4x8BitPackedSignedAccelerated, CAPSHIM_BOOL, VkPhysicalDeviceShaderIntegerDotProductProperties, CAPSHIM_ST(PHYSICAL_DEVICE_SHADER_INTEGER_DOT_PRODUCT_PROPERTIES), integerDotProductAccumulatingSaturating4x8BitPackedSignedAccelerated, CAPSHIM_SEM_FEATURE) \
    X(integerDotProductAccumulatingSaturating4x8BitPackedSignedAccelerated, CAPSHIM_BOOL, VkPhysicalDeviceVulkan13Properties, CAPSHIM_ST(PHYSICAL_DEVICE_VULKAN_1_3_PROPERTIES), integerDotProductAccumulatingSaturating4x8BitPackedSignedAccelerated, CAPSHIM_SEM_FEATURE) \
    X(integerDotProductAccumulatingSaturating4x8BitPackedMixedSignednessAccelerated, CAPSHIM_BOOL, VkPhysicalDeviceShaderIntegerDotProductProperties, CAPSHIM_ST(PHYSICAL_DEVICE_SHADER_INTEGER_DOT_PRODUCT_PROPERTIES), integerDotProductAccumulatingSaturating4x8BitPackedMixedSignednessAccelerated, CAPSHIM_SEM_FEATURE) \
    X(integerDotProductAccumulatingSaturating4x8BitPackedMixedSignednessAccelerated, CAPSHIM_BOOL, VkPhysicalDeviceVulkan13Properties, CAPSHIM_ST(PHYSICAL_DEVICE_VULKAN_1_3_PROPERTIES), integerDotProductAccumulatingSaturating4x8BitPackedMixedSignednessAccelerated, CAPSHIM_SEM_FEATURE) \
    X(integerDotProductAccumulatingSaturating16BitUnsignedAccelerated, CAPSHIM_BOOL, VkPhysicalDeviceShaderIntegerDotProductProperties, CAPSHIM_ST(PHYSICAL_DEVICE_SHADER_INTEGER_DOT_PRODUCT_PROPERTIES), integerDotProductAccumulatingSaturating16BitUnsignedAccelerated, CAPSHIM_SEM_FEATURE) \
    X(integerDotProductAccumulatingSaturating16BitUnsignedAccelerated, CAPSHIM_BOOL, VkPhysicalDeviceVulkan13Properties, CAPSHIM_ST(PHYSICAL_DEVICE_VULKAN_1_3_PROPERTIES), integerDotProductAccumulatingSaturating16BitUnsignedAccelerated, CAPSHIM_SEM_FEATURE) \
    X(integerDotProductAccumulatingSaturating16BitSignedAccelerated, CAPSHIM_BOOL, VkPhysicalDeviceShaderIntegerDotProductProperties, CAPSHIM_ST(PHYSICAL_DEVICE_SHADER_INTEGER_DOT_PRODUCT_PROPERTIES), integerDotProductAccumulatingSaturating16BitSignedAccelerated, CAPSHIM_SEM_FEATURE) \
    X(integerDotProductAccumulatingSaturating16BitSignedAccelerated, CAPSHIM_BOOL, VkPhysicalDeviceVulkan13Properties, CAPSHIM_ST(PHYSICAL_DEVICE_VULKAN_1_3_PROPERTIES), integerDotProductAccumulatingSaturating16BitSignedAccelerated, CAPSHIM_SEM_FEATURE) \
    X(integerDotProductAccumulatingSaturating16BitMixedSignednessAccelerated, CAPSHIM_BOOL, VkPhysicalDeviceShaderIntegerDotProductProperties, CAPSHIM_ST(PHYSICAL_DEVICE_SHADER_INTEGER_DOT_PRODUCT_PROPERTIES), integerDotProductAccumulatingSaturating16BitMixedSignednessAccelerated, CAPSHIM_SEM_FEATURE) \
    X(integerDotProductAccumulatingSaturating16BitMixedSignednessAccelerated, CAPSHIM_BOOL, VkPhysicalDeviceVulkan13Properties, CAPSHIM_ST(PHYSICAL_DEVICE_VULKAN_1_3_PROPERTIES), integerDotProductAccumulatingSaturating16BitMixedSignednessAccelerated, CAPSHIM_SEM_FEATURE) \
    X(integerDotProductAccumulatingSaturating32BitUnsignedAccelerated, CAPSHIM_BOOL, VkPhysicalDeviceShaderIntegerDotProductProperties, CAPSHIM_ST(PHYSICAL_DEVICE_SHADER_INTEGER_DOT_PRODUCT_PROPERTIES), integerDotProductAccumulatingSaturating32BitUnsignedAccelerated, CAPSHIM_SEM_FEATURE) \
    X(integerDotProductAccumulatingSaturating32BitUnsignedAccelerated, CAPSHIM_BOOL, VkPhysicalDeviceVulkan13Properties, CAPSHIM_ST(PHYSICAL_DEVICE_VULKAN_1_3_PROPERTIES), integerDotProductAccumulatingSaturating32BitUnsignedAccelerated, CAPSHIM_SEM_FEATURE) \
    X(integerDotProductAccumulatingSaturating32BitSignedAccelerated, CAPSHIM_BOOL, VkPhysicalDeviceShaderIntegerDotProductProperties, CAPSHIM_ST(PHYSICAL_DEVICE_SHADER_INTEGER_DOT_PRODUCT_PROPERTIES), integerDotProductAccumulatingSaturating32BitSignedAccelerated, CAPSHIM_SEM_FEATURE) \
    X(integerDotProductAccumulatingSaturating32BitSignedAccelerated, CAPSHIM_BOOL, VkPhysicalDeviceVulkan13Properties, CAPSHIM_ST(PHYSICAL_DEVICE_VULKAN_1_3_PROPERTIES), integerDotProductAccumulatingSaturating32BitSignedAccelerated, CAPSHIM_SEM_FEATURE) \
    X(integerDotProductAccumulatingSaturating32BitMixedSignednessAccelerated, CAPSHIM_BOOL, VkPhysicalDeviceShaderIntegerDotProductProperties, CAPSHIM_ST(PHYSICAL_DEVICE_SHADER_INTEGER_DOT_PRODUCT_PROPERTIES), integerDotProductAccumulatingSaturating32BitMixedSignednessAccelerated, CAPSHIM_SEM_FEATURE) \
    X(integerDotProductAccumulatingSaturating32BitMixedSignednessAccelerated, CAPSHIM_BOOL, VkPhysicalDeviceVulkan13Properties, CAPSHIM_ST(PHYSICAL_DEVICE_VULKAN_1_3_PROPERTIES), integerDotProductAccumulatingSaturating32BitMixedSignednessAccelerated, CAPSHIM_SEM_FEATURE) \
    X(integerDotProductAccumulatingSaturating64BitUnsignedAccelerated, CAPSHIM_BOOL, VkPhysicalDeviceShaderIntegerDotProductProperties, CAPSHIM_ST(PHYSICAL_DEVICE_SHADER_INTEGER_DOT_PRODUCT_PROPERTIES), integerDotProductAccumulatingSaturating64BitUnsignedAccelerated, CAPSHIM_SEM_FEATURE) \
    X(integerDotProductAccumulatingSaturating64BitUnsignedAccelerated, CAPSHIM_BOOL, VkPhysicalDeviceVulkan13Properties, CAPSHIM_ST(PHYSICAL_DEVICE_VULKAN_1_3_PROPERTIES), integerDotProductAccumulatingSaturating64BitUnsignedAccelerated, CAPSHIM_SEM_FEATURE) \
    X(integerDotProductAccumulatingSaturating64BitSignedAccelerated, CAPSHIM_BOOL, VkPhysicalDeviceShaderIntegerDotProductProperties, CAPSHIM_ST(PHYSICAL_DEVICE_SHADER_INTEGER_DOT_PRODUCT_PROPERTIES), integerDotProductAccumulatingSaturating64BitSignedAccelerated, CAPSHIM_SEM_FEATURE) \
    X(integerDotProductAccumulatingSaturating64BitSignedAccelerated, CAPSHIM_BOOL, VkPhysicalDeviceVulkan13Properties, CAPSHIM_ST(PHYSICAL_DEVICE_VULKAN_1_3_PROPERTIES), integerDotProductAccumulatingSaturating64BitSignedAccelerated, CAPSHIM_SEM_FEATURE) \
    X(integerDotProductAccumulatingSaturating64BitMixedSignednessAccelerated, CAPSHIM_BOOL, VkPhysicalDeviceShaderIntegerDotProductProperties, CAPSHIM_ST(PHYSICAL_DEVICE_SHADER_INTEGER_DOT_PRODUCT_PROPERTIES), integerDotProductAccumulatingSaturating64BitMixedSignednessAccelerated, CAPSHIM_SEM_FEATURE) \
    X(integerDotProductAccumulatingSaturating64BitMixedSignednessAccelerated, CAPSHIM_BOOL, VkPhysicalDeviceVulkan13Properties, CAPSHIM_ST(PHYSICAL_DEVICE_VULKAN_1_3_PROPERTIES), integerDotProductAccumulatingSaturating64BitMixedSignednessAccelerated, CAPSHIM_SEM_FEATURE) \
    X(shaderFloat64, CAPSHIM_BOOL, VkPhysicalDeviceFeatures, CAPSHIM_BF, shaderFloat64, CAPSHIM_SEM_FEATURE) \
    X(shaderInt64, CAPSHIM_BOOL, VkPhysicalDeviceFeatures, CAPSHIM_BF, shaderInt64, CAPSHIM_SEM_FEATURE) \
    X(shaderInt16, CAPSHIM_BOOL, VkPhysicalDeviceFeatures, CAPSHIM_BF, shaderInt16, CAPSHIM_SEM_FEATURE) \
    X(storageBuffer16BitAccess, CAPSHIM_BOOL, VkPhysicalDevice16BitStorageFeatures, CAPSHIM_ST(PHYSICAL_DEVICE_16BIT_STORAGE_FEATURES), storageBuffer16BitAccess, CAPSHIM_SEM_FEATURE) \
    X(storageBuffer16BitAccess, CAPSHIM_BOOL, VkPhysicalDeviceVulkan11Features, CAPSHIM_ST(PHYSICAL_DEVICE_VULKAN_1_1_FEATURES), storageBuffer16BitAccess, CAPSHIM_SEM_FEATURE) \
    X(uniformAndStorageBuffer16BitAccess, CAPSHIM_BOOL, VkPhysicalDevice16BitStorageFeatures, CAPSHIM_ST(PHYSICAL_DEVICE_16BIT_STORAGE_FEATURES), uniformAndStorageBuffer16BitAccess, CAPSHIM_SEM_FEATURE) \
    X(uniformAndStorageBuffer16BitAccess, CAPSHIM_BOOL, VkPhysicalDeviceVulkan11Features, CAPSHIM_ST(PHYSICAL_DEVICE_VULKAN_1_1_FEATURES), uniformAndStorageBuffer16BitAccess, CAPSHIM_SEM_FEATURE) \
    X(storagePushConstant16, CAPSHIM_BOOL, VkPhysicalDevice16BitStorageFeatures, CAPSHIM_ST(PHYSICAL_DEVICE_16BIT_STORAGE_FEATURES), storagePushConstant16, CAPSHIM_SEM_FEATURE) \
    X(storagePushConstant16, CAPSHIM_BOOL, VkPhysicalDeviceVulkan11Features, CAPSHIM_ST(PHYSICAL_DEVICE_VULKAN_1_1_FEATURES), storagePushConstant16, CAPSHIM_SEM_FEATURE) \
    X(storageInputOutput16, CAPSHIM_BOOL, VkPhysicalDevice16BitStorageFeatures, CAPSHIM_ST(PHYSICAL_DEVICE_16BIT_STORAGE_FEATURES), storageInputOutput16, CAPSHIM_SEM_FEATURE) \
    X(storageInputOutput16, CAPSHIM_BOOL, VkPhysicalDeviceVulkan11Features, CAPSHIM_ST(PHYSICAL_DEVICE_VULKAN_1_1_FEATURES), storageInputOutput16, CAPSHIM_SEM_FEATURE) \
    X(storageBuffer8BitAccess, CAPSHIM_BOOL, VkPhysicalDevice8BitStorageFeatures, CAPSHIM_ST(PHYSICAL_DEVICE_8BIT_STORAGE_FEATURES), storageBuffer8BitAccess, CAPSHIM_SEM_FEATURE) \
    X(storageBuffer8BitAccess, CAPSHIM_BOOL, VkPhysicalDeviceVulkan12Features, CAPSHIM_ST(PHYSICAL_DEVICE_VULKAN_1_2_FEATURES), storageBuffer8BitAccess, CAPSHIM_SEM_FEATURE) \
    X(uniformAndStorageBuffer8BitAccess, CAPSHIM_BOOL, VkPhysicalDevice8BitStorageFeatures, CAPSHIM_ST(PHYSICAL_DEVICE_8BIT_STORAGE_FEATURES), uniformAndStorageBuffer8BitAccess, CAPSHIM_SEM_FEATURE) \
    X(uniformAndStorageBuffer8BitAccess, CAPSHIM_BOOL, VkPhysicalDeviceVulkan12Features, CAPSHIM_ST(PHYSICAL_DEVICE_VULKAN_1_2_FEATURES), uniformAndStorageBuffer8BitAccess, CAPSHIM_SEM_FEATURE) \
    X(storagePushConstant8, CAPSHIM_BOOL, VkPhysicalDevice8BitStorageFeatures, CAPSHIM_ST(PHYSICAL_DEVICE_8BIT_STORAGE_FEATURES), storagePushConstant8, CAPSHIM_SEM_FEATURE) \
    X(storagePushConstant8, CAPSHIM_BOOL, VkPhysicalDeviceVulkan12Features, CAPSHIM_ST(PHYSICAL_DEVICE_VULKAN_1_2_FEATURES), storagePushConstant8, CAPSHIM_SEM_FEATURE) \
    X(shaderFloat16, CAPSHIM_BOOL, VkPhysicalDeviceShaderFloat16Int8Features, CAPSHIM_ST(PHYSICAL_DEVICE_SHADER_FLOAT16_INT8_FEATURES), shaderFloat16, CAPSHIM_SEM_FEATURE) \
    X(shaderFloat16, CAPSHIM_BOOL, VkPhysicalDeviceVulkan12Features, CAPSHIM_ST(PHYSICAL_DEVICE_VULKAN_1_2_FEATURES), shaderFloat16, CAPSHIM_SEM_FEATURE) \
    X(shaderInt8, CAPSHIM_BOOL, VkPhysicalDeviceShaderFloat16Int8Features, CAPSHIM_ST(PHYSICAL_DEVICE_SHADER_FLOAT16_INT8_FEATURES), shaderInt8, CAPSHIM_SEM_FEATURE) \
    X(shaderInt8, CAPSHIM_BOOL, VkPhysicalDeviceVulkan12Features, CAPSHIM_ST(PHYSICAL_DEVICE_VULKAN_1_2_FEATURES), shaderInt8, CAPSHIM_SEM_FEATURE) \
    X(shaderSubgroupExtendedTypes, CAPSHIM_BOOL, VkPhysicalDeviceShaderSubgroupExtendedTypesFeatures, CAPSHIM_ST(PHYSICAL_DEVICE_SHADER_SUBGROUP_EXTENDED_TYPES_FEATURES), shaderSubgroupExtendedTypes, CAPSHIM_SEM_FEATURE) \
    X(shaderSubgroupExtendedTypes, CAPSHIM_BOOL, VkPhysicalDeviceVulkan12Features, CAPSHIM_ST(PHYSICAL_DEVICE_VULKAN_1_2_FEATURES), shaderSubgroupExtendedTypes, CAPSHIM_SEM_FEATURE) \
    X(subgroupSizeControl, CAPSHIM_BOOL, VkPhysicalDeviceSubgroupSizeControlFeatures, CAPSHIM_ST(PHYSICAL_DEVICE_SUBGROUP_SIZE_CONTROL_FEATURES), subgroupSizeControl, CAPSHIM_SEM_FEATURE) \
    X(subgroupSizeControl, CAPSHIM_BOOL, VkPhysicalDeviceVulkan13Features, CAPSHIM_ST(PHYSICAL_DEVICE_VULKAN_1_3_FEATURES), subgroupSizeControl, CAPSHIM_SEM_FEATURE) \
    X(computeFullSubgroups, CAPSHIM_BOOL, VkPhysicalDeviceSubgroupSizeControlFeatures, CAPSHIM_ST(PHYSICAL_DEVICE_SUBGROUP_SIZE_CONTROL_FEATURES), computeFullSubgroups, CAPSHIM_SEM_FEATURE) \
    X(computeFullSubgroups, CAPSHIM_BOOL, VkPhysicalDeviceVulkan13Features, CAPSHIM_ST(PHYSICAL_DEVICE_VULKAN_1_3_FEATURES), computeFullSubgroups, CAPSHIM_SEM_FEATURE) \
    X(shaderIntegerDotProduct, CAPSHIM_BOOL, VkPhysicalDeviceShaderIntegerDotProductFeatures, CAPSHIM_ST(PHYSICAL_DEVICE_SHADER_INTEGER_DOT_PRODUCT_FEATURES), shaderIntegerDotProduct, CAPSHIM_SEM_FEATURE) \
    X(shaderIntegerDotProduct, CAPSHIM_BOOL, VkPhysicalDeviceVulkan13Features, CAPSHIM_ST(PHYSICAL_DEVICE_VULKAN_1_3_FEATURES), shaderIntegerDotProduct, CAPSHIM_SEM_FEATURE) \
    X(cooperativeMatrix, CAPSHIM_BOOL, capshim_VkPhysicalDeviceCooperativeMatrixFeaturesKHR, CAPSHIM_STYPE_PHYSICAL_DEVICE_COOPERATIVE_MATRIX_FEATURES_KHR, cooperativeMatrix, CAPSHIM_SEM_FEATURE) \
    X(cooperativeMatrixRobustBufferAccess, CAPSHIM_BOOL, capshim_VkPhysicalDeviceCooperativeMatrixFeaturesKHR, CAPSHIM_STYPE_PHYSICAL_DEVICE_COOPERATIVE_MATRIX_FEATURES_KHR, cooperativeMatrixRobustBufferAccess, CAPSHIM_SEM_FEATURE) \
    X(shaderBFloat16Type, CAPSHIM_BOOL, capshim_VkPhysicalDeviceShaderBfloat16FeaturesKHR, CAPSHIM_STYPE_PHYSICAL_DEVICE_SHADER_BFLOAT16_FEATURES_KHR, shaderBFloat16Type, CAPSHIM_SEM_FEATURE) \
    X(shaderBFloat16DotProduct, CAPSHIM_BOOL, capshim_VkPhysicalDeviceShaderBfloat16FeaturesKHR, CAPSHIM_STYPE_PHYSICAL_DEVICE_SHADER_BFLOAT16_FEATURES_KHR, shaderBFloat16DotProduct, CAPSHIM_SEM_FEATURE) \
    X(shaderBFloat16CooperativeMatrix, CAPSHIM_BOOL, capshim_VkPhysicalDeviceShaderBfloat16FeaturesKHR, CAPSHIM_STYPE_PHYSICAL_DEVICE_SHADER_BFLOAT16_FEATURES_KHR, shaderBFloat16CooperativeMatrix, CAPSHIM_SEM_FEATURE) \
    X(cooperativeMatrixWorkgroupScope, CAPSHIM_BOOL, capshim_VkPhysicalDeviceCooperativeMatrix2FeaturesNV, CAPSHIM_STYPE_PHYSICAL_DEVICE_COOPERATIVE_MATRIX_2_FEATURES_NV, cooperativeMatrixWorkgroupScope, CAPSHIM_SEM_FEATURE) \
    X(cooperativeMatrixFlexibleDimensions, CAPSHIM_BOOL, capshim_VkPhysicalDeviceCooperativeMatrix2FeaturesNV, CAPSHIM_STYPE_PHYSICAL_DEVICE_COOPERATIVE_MATRIX_2_FEATURES_NV, cooperativeMatrixFlexibleDimensions, CAPSHIM_SEM_FEATURE) \
    X(cooperativeMatrixReductions, CAPSHIM_BOOL, capshim_VkPhysicalDeviceCooperativeMatrix2FeaturesNV, CAPSHIM_STYPE_PHYSICAL_DEVICE_COOPERATIVE_MATRIX_2_FEATURES_NV, cooperativeMatrixReductions, CAPSHIM_SEM_FEATURE) \
    X(cooperativeMatrixConversions, CAPSHIM_BOOL, capshim_VkPhysicalDeviceCooperativeMatrix2FeaturesNV, CAPSHIM_STYPE_PHYSICAL_DEVICE_COOPERATIVE_MATRIX_2_FEATURES_NV, cooperativeMatrixConversions, CAPSHIM_SEM_FEATURE) \
    X(cooperativeMatrixPerElementOperations, CAPSHIM_BOOL, capshim_VkPhysicalDeviceCooperativeMatrix2FeaturesNV, CAPSHIM_STYPE_PHYSICAL_DEVICE_COOPERATIVE_MATRIX_2_FEATURES_NV, cooperativeMatrixPerElementOperations, CAPSHIM_SEM_FEATURE) \
    X(cooperativeMatrixTensorAddressing, CAPSHIM_BOOL, capshim_VkPhysicalDeviceCooperativeMatrix2FeaturesNV, CAPSHIM_STYPE_PHYSICAL_DEVICE_COOPERATIVE_MATRIX_2_FEATURES_NV, cooperativeMatrixTensorAddressing, CAPSHIM_SEM_FEATURE) \
    X(cooperativeMatrixBlockLoads, CAPSHIM_BOOL, capshim_VkPhysicalDeviceCooperativeMatrix2FeaturesNV, CAPSHIM_STYPE_PHYSICAL_DEVICE_COOPERATIVE_MATRIX_2_FEATURES_NV, cooperativeMatrixBlockLoads, CAPSHIM_SEM_FEATURE)

struct capshim_field {
    const char *key;
    int kind; /* enum capshim_kind */
    uint32_t stype;
    size_t offset;
    int sem; /* enum capshim_sem */
};

#define CAPSHIM_FIELD_ENTRY(key, kind, ctype, stype, member, sem) \
    {#key, kind, (uint32_t)(stype), offsetof(ctype, member), sem},

static const struct capshim_field capshim_fields[] = {CAPSHIM_FIELDS_SEM(CAPSHIM_FIELD_ENTRY)};
#define CAPSHIM_NUM_FIELDS (sizeof(capshim_fields) / sizeof(capshim_fields[0]))

/* The probe's pNext chain: X(ctype, stype, features, core, until, extension). Linked when the
 * device's apiVersion >= core, < until (0: no bound) and it lists the extension (NULL: none). */
#define CAPSHIM_CHAIN(X) \
    X(VkPhysicalDeviceSubgroupProperties, CAPSHIM_ST(PHYSICAL_DEVICE_SUBGROUP_PROPERTIES), 0, VK_API_VERSION_1_1, 0, NULL) \
    X(VkPhysicalDeviceVulkan11Properties, CAPSHIM_ST(PHYSICAL_DEVICE_VULKAN_1_1_PROPERTIES), 0, VK_API_VERSION_1_2, 0, NULL) \
    X(VkPhysicalDeviceVulkan13Properties, CAPSHIM_ST(PHYSICAL_DEVICE_VULKAN_1_3_PROPERTIES), 0, VK_API_VERSION_1_3, 0, NULL) \
    X(VkPhysicalDeviceSubgroupSizeControlProperties, CAPSHIM_ST(PHYSICAL_DEVICE_SUBGROUP_SIZE_CONTROL_PROPERTIES), 0, 0, VK_API_VERSION_1_3, "VK_EXT_subgroup_size_control") \
    X(VkPhysicalDeviceShaderIntegerDotProductProperties, CAPSHIM_ST(PHYSICAL_DEVICE_SHADER_INTEGER_DOT_PRODUCT_PROPERTIES), 0, 0, VK_API_VERSION_1_3, "VK_KHR_shader_integer_dot_product") \
    X(VkPhysicalDeviceVulkan11Features, CAPSHIM_ST(PHYSICAL_DEVICE_VULKAN_1_1_FEATURES), 1, VK_API_VERSION_1_2, 0, NULL) \
    X(VkPhysicalDeviceVulkan12Features, CAPSHIM_ST(PHYSICAL_DEVICE_VULKAN_1_2_FEATURES), 1, VK_API_VERSION_1_2, 0, NULL) \
    X(VkPhysicalDeviceVulkan13Features, CAPSHIM_ST(PHYSICAL_DEVICE_VULKAN_1_3_FEATURES), 1, VK_API_VERSION_1_3, 0, NULL) \
    X(VkPhysicalDevice16BitStorageFeatures, CAPSHIM_ST(PHYSICAL_DEVICE_16BIT_STORAGE_FEATURES), 1, VK_API_VERSION_1_1, VK_API_VERSION_1_2, NULL) \
    X(VkPhysicalDevice8BitStorageFeatures, CAPSHIM_ST(PHYSICAL_DEVICE_8BIT_STORAGE_FEATURES), 1, 0, VK_API_VERSION_1_2, "VK_KHR_8bit_storage") \
    X(VkPhysicalDeviceShaderFloat16Int8Features, CAPSHIM_ST(PHYSICAL_DEVICE_SHADER_FLOAT16_INT8_FEATURES), 1, 0, VK_API_VERSION_1_2, "VK_KHR_shader_float16_int8") \
    X(VkPhysicalDeviceShaderSubgroupExtendedTypesFeatures, CAPSHIM_ST(PHYSICAL_DEVICE_SHADER_SUBGROUP_EXTENDED_TYPES_FEATURES), 1, 0, VK_API_VERSION_1_2, "VK_KHR_shader_subgroup_extended_types") \
    X(VkPhysicalDeviceSubgroupSizeControlFeatures, CAPSHIM_ST(PHYSICAL_DEVICE_SUBGROUP_SIZE_CONTROL_FEATURES), 1, 0, VK_API_VERSION_1_3, "VK_EXT_subgroup_size_control") \
    X(VkPhysicalDeviceShaderIntegerDotProductFeatures, CAPSHIM_ST(PHYSICAL_DEVICE_SHADER_INTEGER_DOT_PRODUCT_FEATURES), 1, 0, VK_API_VERSION_1_3, "VK_KHR_shader_integer_dot_product") \
    X(capshim_VkPhysicalDeviceCooperativeMatrixFeaturesKHR, CAPSHIM_STYPE_PHYSICAL_DEVICE_COOPERATIVE_MATRIX_FEATURES_KHR, 1, 0, 0, "VK_KHR_cooperative_matrix") \
    X(capshim_VkPhysicalDeviceShaderBfloat16FeaturesKHR, CAPSHIM_STYPE_PHYSICAL_DEVICE_SHADER_BFLOAT16_FEATURES_KHR, 1, 0, 0, "VK_KHR_shader_bfloat16") \
    X(capshim_VkPhysicalDeviceCooperativeMatrix2FeaturesNV, CAPSHIM_STYPE_PHYSICAL_DEVICE_COOPERATIVE_MATRIX_2_FEATURES_NV, 1, 0, 0, "VK_NV_cooperative_matrix2")

#endif

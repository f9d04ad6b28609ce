"""The capability keys a profile may set, per API, under the API's own names.

Vulkan keys are member names of the Vulkan structures the layer patches
(Vulkan specification, ``VkPhysicalDeviceProperties``/``Limits``,
``VkPhysicalDeviceFeatures`` and the pNext structures listed beside each key);
the native table in ``native/vulkan/caps_table.h`` must list the same keys,
and a test checks that it does. Metal keys follow the Metal API
(``-[MTLDevice supportsFamily:]``, ``maxThreadgroupMemoryLength``,
``recommendedMaxWorkingSetSize``) and the Cua/Lume shim's settings.

Kinds:
    bool     VkBool32 answer; ``true``/``false`` in a profile.
    u32      unsigned 32-bit count or size (bytes where the name says Size).
    flags    a 32-bit mask; an integer, or a list of flag names (see FLAG_NAMES).
    version  a Vulkan version (``VK_MAKE_API_VERSION``); "1.3.230" or an integer.
    u64      unsigned 64-bit size in bytes.
    family   a Metal GPU family number (MTLGPUFamily enum value, e.g. 1009).
    families a list of Metal GPU family numbers.
"""

from __future__ import annotations

# Vulkan: key -> (kind, where the layer finds it). Order is the probe's order.
_INT_DOT = [
    "integerDotProduct8BitUnsignedAccelerated",
    "integerDotProduct8BitSignedAccelerated",
    "integerDotProduct8BitMixedSignednessAccelerated",
    "integerDotProduct4x8BitPackedUnsignedAccelerated",
    "integerDotProduct4x8BitPackedSignedAccelerated",
    "integerDotProduct4x8BitPackedMixedSignednessAccelerated",
    "integerDotProduct16BitUnsignedAccelerated",
    "integerDotProduct16BitSignedAccelerated",
    "integerDotProduct16BitMixedSignednessAccelerated",
    "integerDotProduct32BitUnsignedAccelerated",
    "integerDotProduct32BitSignedAccelerated",
    "integerDotProduct32BitMixedSignednessAccelerated",
    "integerDotProduct64BitUnsignedAccelerated",
    "integerDotProduct64BitSignedAccelerated",
    "integerDotProduct64BitMixedSignednessAccelerated",
    "integerDotProductAccumulatingSaturating8BitUnsignedAccelerated",
    "integerDotProductAccumulatingSaturating8BitSignedAccelerated",
    "integerDotProductAccumulatingSaturating8BitMixedSignednessAccelerated",
    "integerDotProductAccumulatingSaturating4x8BitPackedUnsignedAccelerated",
    "integerDotProductAccumulatingSaturating4x8BitPackedSignedAccelerated",
    "integerDotProductAccumulatingSaturating4x8BitPackedMixedSignednessAccelerated",
    "integerDotProductAccumulatingSaturating16BitUnsignedAccelerated",
    "integerDotProductAccumulatingSaturating16BitSignedAccelerated",
    "integerDotProductAccumulatingSaturating16BitMixedSignednessAccelerated",
    "integerDotProductAccumulatingSaturating32BitUnsignedAccelerated",
    "integerDotProductAccumulatingSaturating32BitSignedAccelerated",
    "integerDotProductAccumulatingSaturating32BitMixedSignednessAccelerated",
    "integerDotProductAccumulatingSaturating64BitUnsignedAccelerated",
    "integerDotProductAccumulatingSaturating64BitSignedAccelerated",
    "integerDotProductAccumulatingSaturating64BitMixedSignednessAccelerated",
]

VULKAN_KEYS: dict[str, str] = {
    # VkPhysicalDeviceProperties
    "apiVersion": "version",
    # VkPhysicalDeviceLimits
    "maxComputeSharedMemorySize": "u32",
    "maxComputeWorkGroupInvocations": "u32",
    # VkPhysicalDeviceSubgroupProperties / VkPhysicalDeviceVulkan11Properties
    "subgroupSize": "u32",
    "subgroupSupportedStages": "flags",
    "subgroupSupportedOperations": "flags",
    "subgroupQuadOperationsInAllStages": "bool",
    # VkPhysicalDeviceSubgroupSizeControlProperties / Vulkan13Properties
    "minSubgroupSize": "u32",
    "maxSubgroupSize": "u32",
    "maxComputeWorkgroupSubgroups": "u32",
    "requiredSubgroupSizeStages": "flags",
    # VkPhysicalDeviceShaderIntegerDotProductProperties / Vulkan13Properties
    **{k: "bool" for k in _INT_DOT},
    # VkPhysicalDeviceFeatures
    "shaderFloat64": "bool",
    "shaderInt64": "bool",
    "shaderInt16": "bool",
    # VkPhysicalDevice16BitStorageFeatures / Vulkan11Features
    "storageBuffer16BitAccess": "bool",
    "uniformAndStorageBuffer16BitAccess": "bool",
    "storagePushConstant16": "bool",
    "storageInputOutput16": "bool",
    # VkPhysicalDevice8BitStorageFeatures / Vulkan12Features
    "storageBuffer8BitAccess": "bool",
    "uniformAndStorageBuffer8BitAccess": "bool",
    "storagePushConstant8": "bool",
    # VkPhysicalDeviceShaderFloat16Int8Features / Vulkan12Features
    "shaderFloat16": "bool",
    "shaderInt8": "bool",
    # VkPhysicalDeviceSubgroupSizeControlFeatures / Vulkan13Features
    "subgroupSizeControl": "bool",
    "computeFullSubgroups": "bool",
    # VkPhysicalDeviceShaderIntegerDotProductFeatures / Vulkan13Features
    "shaderIntegerDotProduct": "bool",
    # VkPhysicalDeviceCooperativeMatrixFeaturesKHR (VK_KHR_cooperative_matrix)
    "cooperativeMatrix": "bool",
    "cooperativeMatrixRobustBufferAccess": "bool",
    # VkPhysicalDeviceShaderBfloat16FeaturesKHR (VK_KHR_shader_bfloat16)
    "shaderBFloat16Type": "bool",
    "shaderBFloat16DotProduct": "bool",
    "shaderBFloat16CooperativeMatrix": "bool",
    # VkPhysicalDeviceCooperativeMatrix2FeaturesNV (VK_NV_cooperative_matrix2)
    "cooperativeMatrixWorkgroupScope": "bool",
    "cooperativeMatrixFlexibleDimensions": "bool",
    "cooperativeMatrixReductions": "bool",
    "cooperativeMatrixConversions": "bool",
    "cooperativeMatrixPerElementOperations": "bool",
    "cooperativeMatrixTensorAddressing": "bool",
    "cooperativeMatrixBlockLoads": "bool",
}

# VkSubgroupFeatureFlagBits (Vulkan specification, VK_VERSION_1_1).
SUBGROUP_OPERATION_BITS: dict[str, int] = {
    "basic": 0x1,
    "vote": 0x2,
    "arithmetic": 0x4,
    "ballot": 0x8,
    "shuffle": 0x10,
    "shuffle_relative": 0x20,
    "clustered": 0x40,
    "quad": 0x80,
    "partitioned_nv": 0x100,
    "rotate": 0x200,
    "rotate_clustered": 0x400,
}

# VkShaderStageFlagBits (Vulkan specification).
SHADER_STAGE_BITS: dict[str, int] = {
    "vertex": 0x1,
    "tessellation_control": 0x2,
    "tessellation_evaluation": 0x4,
    "geometry": 0x8,
    "fragment": 0x10,
    "compute": 0x20,
    "task": 0x40,
    "mesh": 0x80,
}

FLAG_NAMES: dict[str, dict[str, int]] = {
    "subgroupSupportedOperations": SUBGROUP_OPERATION_BITS,
    "subgroupSupportedStages": SHADER_STAGE_BITS,
    "requiredSubgroupSizeStages": SHADER_STAGE_BITS,
}

# Metal: key -> kind. appleFamilyMax is the Apple family ceiling (1001..1999,
# MTLGPUFamilyApple1 = 1001 ... Apple9 = 1009); forceFamilies names Common
# (3xxx), Mac (2xxx) or Metal (5xxx) families answered true regardless, which
# docs/contracts.md ("Published figures") warns against (MLX residency-set failure).
METAL_KEYS: dict[str, str] = {
    "appleFamilyMax": "family",
    "maxThreadgroupMemoryLength": "u64",
    "recommendedMaxWorkingSetSize": "u64",
    "forceFamilies": "families",
}

KEYS: dict[str, dict[str, str]] = {"vulkan": VULKAN_KEYS, "metal": METAL_KEYS}

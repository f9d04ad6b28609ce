/* capshim native shims: the configuration's value types, kinds and limits.
 *
 * GENERATED from src/capshim/profiles/capabilities.toml by
 * `python -m capshim.profiles.generate --write`: edit the table, not this file
 * (a test fails when they differ). Shared by the parser (config.h) and the
 * key tables of the shims (vulkan/caps_table.h, cuda/cuda_table.h).
 */
#ifndef CAPSHIM_CONFIG_LIMITS_H
#define CAPSHIM_CONFIG_LIMITS_H

/* Value types (how a configuration value is stored and clamped). */
enum capshim_kind { CAPSHIM_BOOL = 1, CAPSHIM_U32 = 2, CAPSHIM_FLAGS = 3, CAPSHIM_VERSION = 4, CAPSHIM_U64 = 5 };

/* Kinds (direction rules): FEATURE true is stronger; UPPER more is stronger; LOWER less is
 * stronger (minSubgroupSize); EXACT what the hardware does (subgroupSize); VERSION higher is
 * stronger. */
enum capshim_sem {
    CAPSHIM_SEM_FEATURE = 1, CAPSHIM_SEM_UPPER = 2, CAPSHIM_SEM_LOWER = 3, CAPSHIM_SEM_EXACT = 4, CAPSHIM_SEM_VERSION = 5
};

/* Configuration limits ([limits] in capabilities.toml); buffer sizes include the NUL. */
#define CAPSHIM_MAX_VALUES 128
#define CAPSHIM_MAX_EXTENSIONS 64
#define CAPSHIM_KEY_MAX 96
#define CAPSHIM_EXT_NAME_MAX 256
#define CAPSHIM_LINE_MAX 800
#define CAPSHIM_CONFIG_MAX_BYTES 65536

/* X(key, min): the smallest value the Vulkan spec lets a device report (Limits, "Required
 * Limits" table); a configuration below it is invalid (the parser checks it by name). */
#define CAPSHIM_SPEC_MINIMUMS(X) \
    X(maxComputeSharedMemorySize, 16384u) \
    X(maxComputeWorkGroupInvocations, 128u)

#endif

/*
 * The Metal shim's configuration variables: the one list of their names.
 * metal_config.c builds its tables from these macros, and
 * capshim/backends/metal/compile.py reads the X(...) lines below (one per line,
 * key then name) for the launcher's variables. Meanings: metal_config.h.
 *
 * X(profile key, variable name)
 */
#ifndef CAPSHIM_METAL_VARS_H
#define CAPSHIM_METAL_VARS_H

/* The capshim spelling: at least one must be set. */
#define CAPSHIM_METAL_VARIABLES(X)                                           \
    X(appleFamilyMax, "CAPSHIM_METAL_APPLE_FAMILY_MAX")                      \
    X(maxThreadgroupMemoryLength, "CAPSHIM_METAL_MAX_THREADGROUP_MEMORY")    \
    X(recommendedMaxWorkingSetSize, "CAPSHIM_METAL_RECOMMENDED_WORKING_SET_SIZE") \
    X(forceFamilies, "CAPSHIM_METAL_FORCE_FAMILIES")                       \
    X(deviceName, "CAPSHIM_METAL_DEVICE_NAME")

/* The Cua/Lume spelling (trycua/cua libs/lume/metal-capability-shim). */
#define CAPSHIM_METAL_LUME_VARIABLES(X)                                      \
    X(appleFamilyMax, "LUME_METAL_APPLE_FAMILY_MAX")                         \
    X(maxThreadgroupMemoryLength, "LUME_METAL_MAX_THREADGROUP_MEMORY")       \
    X(recommendedMaxWorkingSetSize, "LUME_METAL_RECOMMENDED_WORKING_SET_SIZE")

/* Indexes: CAPSHIM_VAR_appleFamilyMax ..., CAPSHIM_LUME_VAR_appleFamilyMax ... */
#define CAPSHIM_METAL_VAR_ENUM(key, name) CAPSHIM_VAR_##key,
#define CAPSHIM_METAL_LUME_VAR_ENUM(key, name) CAPSHIM_LUME_VAR_##key,
#define CAPSHIM_METAL_VAR_NAME(key, name) name,
enum capshim_metal_var { CAPSHIM_METAL_VARIABLES(CAPSHIM_METAL_VAR_ENUM) CAPSHIM_VAR_COUNT };
enum capshim_metal_lume_var {
    CAPSHIM_METAL_LUME_VARIABLES(CAPSHIM_METAL_LUME_VAR_ENUM) CAPSHIM_LUME_VAR_COUNT
};

#endif

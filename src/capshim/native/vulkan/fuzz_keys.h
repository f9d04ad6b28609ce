/* The Vulkan layer's keyspec for the configuration fuzz driver (native/common/fuzz_config.c):
 * CAPSHIM_KEYS of caps_table.h, with extensions. */
#ifndef CAPSHIM_FUZZ_KEYS_H
#define CAPSHIM_FUZZ_KEYS_H

#define CAPSHIM_KEYS_ONLY
#include "caps_table.h"
#undef CAPSHIM_KEYS_ONLY

#define KEYSPEC(key, type, kind) {#key, type},
static const struct capshim_keyspec keys[] = {CAPSHIM_KEYS(KEYSPEC)};
#define WITH_EXTENSIONS 1

#endif

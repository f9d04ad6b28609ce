/* The CUDA shim's keyspec for the configuration fuzz driver (native/common/fuzz_config.c):
 * CAPSHIM_CUDA_KEYS of cuda_table.h; the CUDA configuration has no extensions. */
#ifndef CAPSHIM_FUZZ_KEYS_H
#define CAPSHIM_FUZZ_KEYS_H

#include "cuda_table.h"

#define KEYSPEC(key, type) {#key, type},
static const struct capshim_keyspec keys[] = {CAPSHIM_CUDA_KEYS(KEYSPEC)};
#define WITH_EXTENSIONS 0

#endif

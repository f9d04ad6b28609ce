/* capshim CUDA shim: the keys it lowers and where it finds them.
 *
 * GENERATED from src/capshim/profiles/capabilities.toml by
 * `python -m capshim.profiles.generate --write`: edit the table, not this file
 * (a test fails when they differ). Sources of every number: the table's [[cuda]]
 * entries and docs/capabilities.md (CUDA 13.0 driver_types.h and cuda.h; CUDA 12.6
 * driver_types.h for the CUDA 12 layout).
 */
#ifndef CAPSHIM_CUDA_TABLE_H
#define CAPSHIM_CUDA_TABLE_H

/* sizeof(cudaDeviceProp) of each layout and sizeof(CUdevprop), in bytes. */
#define CAPSHIM_CUDA_PROP13_SIZE 1008
#define CAPSHIM_CUDA_PROP12_SIZE 1032
#define CAPSHIM_CUDA_PROP11_SIZE 728
#define CAPSHIM_CUDA_DEVPROP_SIZE 56
/* cudaDeviceProp.name: char[256] at the same offset in both layouts. */
#define CAPSHIM_CUDA_NAME_OFFSET 0
#define CAPSHIM_CUDA_NAME_SIZE 256

/* The offset of a member in layout 13, 12 or 11 (the pre-12 one). */
#define CAPSHIM_CUDA_OFF(layout, off13, off12, off11) \
    ((layout) == 13 ? (off13) : (layout) == 12 ? (off12) : (off11))

/* Widths of a cudaDeviceProp member. */
enum capshim_cuda_width { CAPSHIM_CUDA_INT = 4, CAPSHIM_CUDA_SIZE = 8 };

/* X(key, type): the configuration keys (config.h keyspec), table order. */
#define CAPSHIM_CUDA_KEYS(X) \
    X(computeCapability, CAPSHIM_U32) \
    X(multiProcessorCount, CAPSHIM_U32) \
    X(sharedMemPerBlock, CAPSHIM_U64) \
    X(sharedMemPerMultiprocessor, CAPSHIM_U64) \
    X(sharedMemPerBlockOptin, CAPSHIM_U64) \
    X(regsPerBlock, CAPSHIM_U32) \
    X(regsPerMultiprocessor, CAPSHIM_U32) \
    X(maxThreadsPerBlock, CAPSHIM_U32) \
    X(maxThreadsPerMultiProcessor, CAPSHIM_U32) \
    X(l2CacheSize, CAPSHIM_U32) \
    X(totalGlobalMem, CAPSHIM_U64)

/* X(key, index, attribute, width, offset13, offset12, offset11): each cudaDeviceProp member of a key. */
#define CAPSHIM_CUDA_FIELDS(X) \
    X(computeCapability, 0, 75, CAPSHIM_CUDA_INT, 360, 360, 360) /* major */ \
    X(computeCapability, 1, 76, CAPSHIM_CUDA_INT, 364, 364, 364) /* minor */ \
    X(multiProcessorCount, 0, 16, CAPSHIM_CUDA_INT, 384, 388, 388) /* multiProcessorCount */ \
    X(sharedMemPerBlock, 0, 8, CAPSHIM_CUDA_SIZE, 296, 296, 296) /* sharedMemPerBlock */ \
    X(sharedMemPerMultiprocessor, 0, 81, CAPSHIM_CUDA_SIZE, 624, 640, 640) /* sharedMemPerMultiprocessor */ \
    X(sharedMemPerBlockOptin, 0, 97, CAPSHIM_CUDA_SIZE, 672, 696, 696) /* sharedMemPerBlockOptin */ \
    X(regsPerBlock, 0, 12, CAPSHIM_CUDA_INT, 304, 304, 304) /* regsPerBlock */ \
    X(regsPerMultiprocessor, 0, 82, CAPSHIM_CUDA_INT, 632, 648, 648) /* regsPerMultiprocessor */ \
    X(maxThreadsPerBlock, 0, 1, CAPSHIM_CUDA_INT, 320, 320, 320) /* maxThreadsPerBlock */ \
    X(maxThreadsPerMultiProcessor, 0, 39, CAPSHIM_CUDA_INT, 604, 624, 624) /* maxThreadsPerMultiProcessor */ \
    X(l2CacheSize, 0, 38, CAPSHIM_CUDA_INT, 596, 616, 616) /* l2CacheSize */ \
    X(totalGlobalMem, 0, -1, CAPSHIM_CUDA_SIZE, 288, 288, 288) /* totalGlobalMem */

/* X(key, offset): the int members of the driver's CUdevprop. */
#define CAPSHIM_CUDA_DEVPROP(X) \
    X(sharedMemPerBlock, 28) \
    X(regsPerBlock, 44) \
    X(maxThreadsPerBlock, 0)

#endif

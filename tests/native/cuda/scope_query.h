/* What one runtime answers, asked from the object that includes this file (a plugin, or the
 * main program): compute capability through cudaDeviceGetAttribute, the runtime's version,
 * and cudaGetDeviceProperties into a heap buffer of exactly the size the runtime this object
 * was built for fills (RT_MAJOR 13: 1008 bytes; 11: CUDA 11.8's 728), so AddressSanitizer
 * reports any byte written past it. Writes one JSON object into out:
 *   {"rt": version, "rc": [attr75, attr76, version, props], "attr": [major, minor],
 *    "props": [major, minor, multiProcessorCount]}   (-7 in the attributes, -101058055 in the
 *    struct: not written)
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cuda_table.h"

#if RT_MAJOR == 13
#define SCOPE_PROP_SIZE CAPSHIM_CUDA_PROP13_SIZE
#define SCOPE_LAYOUT 13
#elif RT_MAJOR == 11
#define SCOPE_PROP_SIZE CAPSHIM_CUDA_PROP11_SIZE
#define SCOPE_LAYOUT 11
#else
#error "RT_MAJOR: 13 or 11"
#endif

int cudaDeviceGetAttribute(int *, int, int);
int cudaGetDeviceProperties(void *, int);
int cudaRuntimeGetVersion(int *);

static int scope_member(const unsigned char *p, size_t off) {
    int v;
    memcpy(&v, p + off, sizeof v);
    return v;
}

static void scope_query(char *out, size_t size) {
    int major = -7, minor = -7, version = -7;
    int rc0 = cudaDeviceGetAttribute(&major, 75, 0);
    int rc1 = cudaDeviceGetAttribute(&minor, 76, 0);
    int rc2 = cudaRuntimeGetVersion(&version);
    unsigned char *p = malloc(SCOPE_PROP_SIZE);
    if (p == NULL) {
        snprintf(out, size, "{\"error\": \"malloc\"}");
        return;
    }
    memset(p, 0xf9, SCOPE_PROP_SIZE);
    int rc3 = cudaGetDeviceProperties(p, 0);
    snprintf(out, size, "{\"rt\": %d, \"rc\": [%d, %d, %d, %d], \"attr\": [%d, %d], \"props\": [%d, %d, %d]}", version,
             rc0, rc1, rc2, rc3, major, minor, scope_member(p, 360), scope_member(p, 364),
             scope_member(p, CAPSHIM_CUDA_OFF(SCOPE_LAYOUT, 384, 388, 388)));
    free(p);
}

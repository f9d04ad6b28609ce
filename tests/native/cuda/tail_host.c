/* The host of tail_plugin.c (issue 27): asks the 11.8 plugin's tail call for device 0's
 * properties into a 1008-byte heap buffer filled with 0xf9 and says how many bytes past CUDA
 * 11.8's 728 changed (the 13 runtime's struct would write 280 more).
 *
 *   tail_host13 PLUGIN11 [LIB...]   linked against libcudart.so.13 (asks it once first); the
 *                                   return address of the plugin's call is in this program
 *   tail_host0 PLUGIN11 [LIB...]    no runtime linked (LIB: a second runtime's plugin, so that
 *                                   two runtimes are loaded and none is the caller's)
 * LIB... are dlopen'ed RTLD_LOCAL before PLUGIN11. One JSON line:
 *   {"who": "tail", "answer": {"rc": rc, "past": bytes changed past 728, "props": [major, minor, sm]}}
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cuda_table.h"

#ifdef LINKED13
int cudaGetDeviceProperties(void *, int);
#endif

static int member(const unsigned char *p, size_t off) {
    int v;
    memcpy(&v, p + off, sizeof v);
    return v;
}

int main(int argc, char **argv) {
    if (argc < 2) return 2;
#ifdef LINKED13
    unsigned char *own = malloc(CAPSHIM_CUDA_PROP13_SIZE);
    if (own == NULL || cudaGetDeviceProperties(own, 0) != 0) return 3;
    free(own);
#endif
    for (int i = 2; i < argc; i++)
        if (dlopen(argv[i], RTLD_NOW | RTLD_LOCAL) == NULL) {
            fprintf(stderr, "dlopen %s: %s\n", argv[i], dlerror());
            return 4;
        }
    void *h = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
    int (*tail)(void *) = h != NULL ? (int (*)(void *))dlsym(h, "tail_props") : NULL;
    unsigned char *buf = malloc(CAPSHIM_CUDA_PROP13_SIZE);
    if (tail == NULL || buf == NULL) {
        fprintf(stderr, "plugin %s: %s\n", argv[1], dlerror());
        return 5;
    }
    memset(buf, 0xf9, CAPSHIM_CUDA_PROP13_SIZE);
    int rc = tail(buf);
    int past = 0;
    for (size_t i = CAPSHIM_CUDA_PROP11_SIZE; i < CAPSHIM_CUDA_PROP13_SIZE; i++) past += buf[i] != 0xf9;
    printf("{\"who\": \"tail\", \"answer\": {\"rc\": %d, \"past\": %d, \"props\": [%d, %d, %d]}}\n", rc, past,
           member(buf, 360), member(buf, 364), member(buf, CAPSHIM_CUDA_OFF(11, 384, 388, 388)));
    free(buf);
    return 0;
}

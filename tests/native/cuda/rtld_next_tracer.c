/* A user's own LD_PRELOAD interposer, as tracers and profilers are written: it wraps
 * cudaDeviceGetAttribute and sysconf and finds the next definition with dlsym(RTLD_NEXT).
 * Placed after the CUDA shim in LD_PRELOAD (capshim run keeps the user's entries after it),
 * its dlsym call reaches the shim's dlsym. At exit it writes "tracer: N calls, sysconf M"
 * to stderr. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdio.h>
#include <unistd.h>

typedef int (*attr_fn)(int *, int, int);
typedef long (*sysconf_fn)(int);
static int calls, sysconf_calls;

int cudaDeviceGetAttribute(int *value, int attr, int device) {
    static attr_fn next;
    if (next == NULL) next = (attr_fn)dlsym(RTLD_NEXT, "cudaDeviceGetAttribute");
    calls++;
    if (next == cudaDeviceGetAttribute) return 9999; /* its own definition: what a broken RTLD_NEXT gives */
    return next != NULL ? next(value, attr, device) : 500;
}

long sysconf(int name) {
    static sysconf_fn next;
    if (next == NULL) next = (sysconf_fn)dlsym(RTLD_NEXT, "sysconf");
    sysconf_calls++;
    if (next == sysconf) return -42;
    return next != NULL ? next(name) : -1;
}

__attribute__((destructor)) static void report(void) {
    char line[64];
    int n = snprintf(line, sizeof line, "tracer: %d calls, sysconf %ld\n", calls, sysconf(_SC_PAGESIZE));
    if (n > 0) (void)!write(2, line, (size_t)n);
}

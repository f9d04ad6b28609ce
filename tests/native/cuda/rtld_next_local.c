/* dlsym(RTLD_NEXT) from a library loaded RTLD_LOCAL (issue 27, review: it found nothing under
 * the shim, where glibc searches the caller's own dependencies after it). Built three ways:
 *
 *   -DNX_DEP      libnx_dep.so: defines nx_dep_value (42)
 *   -DNX_PLUGIN   libnx_plugin.so, linked against libnx_dep.so and libcudart.so.11.0: nx_probe
 *                 looks up nx_dep_value and cudaRuntimeGetVersion with dlsym(RTLD_NEXT)
 *   (neither)     the host: dlopen(PLUGIN, RTLD_LOCAL), call nx_probe; with -DLINKED13 linked
 *                 against libcudart.so.13, whose cudaRuntimeGetVersion sits in the global scope
 *
 * One JSON line: {"who": "next", "answer": {"dep": value or -1, "rt": version or -1,
 * "dlerror": 1 when dlerror() had a message after both lookups succeeded}}.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdio.h>

#if defined(NX_DEP)
__attribute__((visibility("default"))) int nx_dep_value(void);
int nx_dep_value(void) { return 42; }

#elif defined(NX_PLUGIN)
int cudaRuntimeGetVersion(int *);
int nx_dep_value(void);
__attribute__((visibility("default"))) void nx_probe(int *dep, int *rt, int *err);
void nx_probe(int *dep, int *rt, int *err) {
    (void)dlerror();
    int (*d)(void) = (int (*)(void))dlsym(RTLD_NEXT, "nx_dep_value");
    int (*v)(int *) = (int (*)(int *))dlsym(RTLD_NEXT, "cudaRuntimeGetVersion");
    *err = dlerror() != NULL;
    *dep = d != NULL ? d() : -1;
    *rt = -1;
    if (v != NULL && v(rt) != 0) *rt = -2;
    /* the plugin's own references, so the linker keeps both libraries */
    int mine = 0;
    if (nx_dep_value() != 42 || cudaRuntimeGetVersion(&mine) != 0) *dep = -3;
}

#else
#ifdef LINKED13
int cudaRuntimeGetVersion(int *);
#endif
int main(int argc, char **argv) {
    if (argc != 2) return 2;
#ifdef LINKED13
    int own = 0;
    if (cudaRuntimeGetVersion(&own) != 0) return 3;
#endif
    void *h = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
    void (*probe)(int *, int *, int *) = h != NULL ? (void (*)(int *, int *, int *))dlsym(h, "nx_probe") : NULL;
    if (probe == NULL) {
        fprintf(stderr, "%s: %s\n", argv[1], dlerror());
        return 4;
    }
    int dep = -1, rt = -1, err = -1;
    probe(&dep, &rt, &err);
    printf("{\"who\": \"next\", \"answer\": {\"dep\": %d, \"rt\": %d, \"dlerror\": %d}}\n", dep, rt, err);
    return 0;
}
#endif

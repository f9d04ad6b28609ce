/* The CUDA shim's test driver: asks the (stand-in) runtime and driver through one path
 * and prints one JSON line of answers.
 *
 *   cuda_paths PATH [VERSION [FLAGS]]
 *
 * PATH: direct        the exported names, linked (-lcudart -lcuda): LD_PRELOAD interposition
 *       dlsym         dlopen + dlsym of libcudart.so.13 and libcuda.so.1
 *       procaddr      the driver's functions from cuGetProcAddress (legacy, 4 arguments)
 *       procaddr_v2   ... from cuGetProcAddress_v2
 *       procaddr_self cuGetProcAddress("cuGetProcAddress") (the _v2 ABI from 12000), then through it
 *       entry, entry_ptsz, entry_version, entry_version_ptsz
 *                     ... from cudaGetDriverEntryPoint(ByVersion)(_ptsz)
 *       spawn         direct, then runs "cuda_paths direct" as a child (its line follows)
 *       fork          direct, then fork(): the child prints a "fork-child" line (no exec)
 *       nulls         every entry point with NULL outputs, bad devices, bad versions and flags,
 *                     unknown names: {"path", "rc": [return codes], "v", "m", "fp"}
 *       shortname     cuDeviceGetName into buffers of 1, 4 and 256 bytes: {"path", "names": [[rc, text] x3]}
 *       threads       8 threads ask 200 times each through the runtime and the driver (both
 *                     compute-capability halves, the properties); prints {"path", "answers", "cc"}:
 *                     how many answers came back and the distinct major*10+minor values seen
 * VERSION and FLAGS (default 12000 and 0) go to the getters unchanged.
 *
 * The line: {"path", "getter": [rc, found] (getter paths), "attr<N>": [rc, value] for each
 * attribute asked (200 is one no table names), "name": [rc, text], "cc": [rc, major, minor],
 * "devprop": [rc, maxThreadsPerBlock, sharedMemPerBlock, regsPerBlock], and for direct/dlsym/spawn
 * "props": [rc, {key: value}] from cudaGetDeviceProperties (read in the CUDA 13 layout, or the pre-12
 * one when cudaRuntimeGetVersion answers below 13000) and "props_v2" from _v2 (CUDA 12 layout)}. Outputs start as
 * -7 (and "untouched"), so a value the call did not write shows.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <pthread.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cuda_table.h"

typedef int (*attr_fn)(int *, int, int);
typedef int (*name_fn)(char *, int, int);
typedef int (*cc_fn)(int *, int *, int);
typedef int (*props_fn)(void *, int);
typedef int (*proc_fn)(const char *, void **, int, unsigned long long);
typedef int (*proc_v2_fn)(const char *, void **, int, unsigned long long, int *);
typedef int (*entry_fn)(const char *, void **, unsigned long long, int *);
typedef int (*entry_ver_fn)(const char *, void **, unsigned int, unsigned long long, int *);

int cudaGetDeviceProperties(void *, int);
int cudaRuntimeGetVersion(int *);
int cudaGetDeviceProperties_v2(void *, int);
int cudaDeviceGetAttribute(int *, int, int);
int cudaGetDriverEntryPoint(const char *, void **, unsigned long long, int *);
int cudaGetDriverEntryPoint_ptsz(const char *, void **, unsigned long long, int *);
int cudaGetDriverEntryPointByVersion(const char *, void **, unsigned int, unsigned long long, int *);
int cudaGetDriverEntryPointByVersion_ptsz(const char *, void **, unsigned int, unsigned long long, int *);
int cuDeviceGetAttribute(int *, int, int);
int cuDeviceGetName(char *, int, int);
int cuDeviceComputeCapability(int *, int *, int);
int cuDeviceGetProperties(void *, int);
int cuGetProcAddress(const char *, void **, int, unsigned long long);
int cuGetProcAddress_v2(const char *, void **, int, unsigned long long, int *);

struct api {
    attr_fn attr;
    name_fn name;
    cc_fn cc;
    props_fn devprop;
    props_fn props13, props12; /* runtime */
};

static const int ATTRS[] = {1, 8, 12, 16, 38, 39, 75, 76, 81, 82, 97, 200};

static void print_props(const char *label, props_fn f, int layout) {
    static unsigned char buf[4096];
    if (f == NULL) return;
    memset(buf, 0x5a, sizeof buf);
    int rc = f(buf, 0);
    int first = 1;
    printf(", \"%s\": [%d, {", label, rc);
#define ROW(key, index, attribute, width, off13, off12, off11)                                                     \
    {                                                                                                       \
        size_t off = (size_t)(CAPSHIM_CUDA_OFF(layout, off13, off12, off11));                                            \
        long long v;                                                                                        \
        if ((width) == CAPSHIM_CUDA_SIZE) {                                                                 \
            unsigned long long u;                                                                           \
            memcpy(&u, buf + off, sizeof u);                                                                \
            v = (long long)u;                                                                               \
        } else {                                                                                            \
            int i;                                                                                          \
            memcpy(&i, buf + off, sizeof i);                                                                \
            v = i;                                                                                          \
        }                                                                                                   \
        printf("%s\"%s%s\": %lld", first ? "" : ", ", #key, (index) == 1 ? ".minor" : "", v);               \
        first = 0;                                                                                          \
    }
    CAPSHIM_CUDA_FIELDS(ROW)
#undef ROW
    buf[CAPSHIM_CUDA_NAME_OFFSET + 255] = '\0';
    printf(", \"name\": \"%.60s\"}]", rc == 0 ? (char *)buf + CAPSHIM_CUDA_NAME_OFFSET : "untouched");
}

static void report(const char *path, struct api *a, const char *getter) {
    printf("{\"path\": \"%s\"%s", path, getter);
    for (size_t i = 0; a->attr != NULL && i < sizeof ATTRS / sizeof ATTRS[0]; i++) {
        int v = -7;
        int rc = a->attr(&v, ATTRS[i], 0);
        printf(", \"attr%d\": [%d, %d]", ATTRS[i], rc, v);
    }
    if (a->name != NULL) {
        char n[256] = "untouched";
        int rc = a->name(n, (int)sizeof n, 0);
        printf(", \"name\": [%d, \"%.60s\"]", rc, n);
    }
    if (a->cc != NULL) {
        int major = -7, minor = -7;
        int rc = a->cc(&major, &minor, 0);
        printf(", \"cc\": [%d, %d, %d]", rc, major, minor);
    }
    if (a->devprop != NULL) {
        int p[14];
        for (int i = 0; i < 14; i++) p[i] = -7;
        int rc = a->devprop(p, 0);
        printf(", \"devprop\": [%d, %d, %d, %d]", rc, p[0], p[7], p[11]);
    }
    int rt = 0;
    if (a->props13 != NULL && cudaRuntimeGetVersion(&rt) != 0) rt = 0;
    print_props("props", a->props13, rt >= 13000 ? 13 : 11);
    print_props("props_v2", a->props12, 12);
    printf("}\n");
    fflush(stdout);
}

static const char *const DRIVER_NAMES[] = {"cuDeviceGetAttribute", "cuDeviceGetName", "cuDeviceComputeCapability",
                                           "cuDeviceGetProperties"};

/* Fills the driver half of a from getter(name) for each driver name; writes "getter": [rc, found]. */
static void from_getter(struct api *a, char *out, size_t outlen, int (*get)(const char *, void **, void *),
                        void *ctx) {
    void *fns[4] = {NULL, NULL, NULL, NULL};
    int last_rc = 0, found = 0;
    for (int i = 0; i < 4; i++) {
        int rc = get(DRIVER_NAMES[i], &fns[i], ctx);
        if (rc != 0) last_rc = rc;
        found += fns[i] != NULL;
    }
    a->attr = (attr_fn)(uintptr_t)fns[0];
    a->name = (name_fn)(uintptr_t)fns[1];
    a->cc = (cc_fn)(uintptr_t)fns[2];
    a->devprop = (props_fn)(uintptr_t)fns[3];
    snprintf(out, outlen, ", \"getter\": [%d, %d]", last_rc, found);
}

struct args {
    const char *path;
    int version;
    unsigned long long flags;
    proc_v2_fn self_v2;
};

static int get_any(const char *name, void **fn, void *ctx) {
    struct args *g = ctx;
    int status = -1;
    *fn = NULL;
    if (strcmp(g->path, "procaddr") == 0) return cuGetProcAddress(name, fn, g->version, g->flags);
    if (strcmp(g->path, "procaddr_v2") == 0) return cuGetProcAddress_v2(name, fn, g->version, g->flags, &status);
    if (strcmp(g->path, "procaddr_self") == 0) return g->self_v2(name, fn, g->version, g->flags, &status);
    if (strcmp(g->path, "entry") == 0) return cudaGetDriverEntryPoint(name, fn, g->flags, &status);
    if (strcmp(g->path, "entry_ptsz") == 0) return cudaGetDriverEntryPoint_ptsz(name, fn, g->flags, &status);
    if (strcmp(g->path, "entry_version") == 0)
        return cudaGetDriverEntryPointByVersion(name, fn, (unsigned)g->version, g->flags, &status);
    if (strcmp(g->path, "entry_version_ptsz") == 0)
        return cudaGetDriverEntryPointByVersion_ptsz(name, fn, (unsigned)g->version, g->flags, &status);
    return -1;
}

static int seen_cc[1000];
static pthread_mutex_t seen_lock = PTHREAD_MUTEX_INITIALIZER;

static void *ask_many(void *arg) {
    (void)arg;
    static unsigned char prop[4096];
    unsigned char mine[4096];
    (void)prop;
    for (int i = 0; i < 200; i++) {
        int rmaj = -1, rmin = -1, dmaj = -1, dmin = -1;
        if (cudaDeviceGetAttribute(&rmaj, 75, 0) != 0 || cudaDeviceGetAttribute(&rmin, 76, 0) != 0) continue;
        if (cuDeviceComputeCapability(&dmaj, &dmin, 0) != 0) continue;
        if (cudaGetDeviceProperties(mine, 0) != 0) continue;
        int pmaj, pmin;
        memcpy(&pmaj, mine + 360, sizeof pmaj); /* major, minor: the same offsets in every layout */
        memcpy(&pmin, mine + 364, sizeof pmin);
        pthread_mutex_lock(&seen_lock);
        for (int k = 0; k < 3; k++) {
            int cc = k == 0 ? rmaj * 10 + rmin : k == 1 ? dmaj * 10 + dmin : pmaj * 10 + pmin;
            if (cc >= 0 && cc < 1000) seen_cc[cc]++;
        }
        pthread_mutex_unlock(&seen_lock);
    }
    return NULL;
}

static int threads(void) {
    pthread_t t[8];
    for (int i = 0; i < 8; i++)
        if (pthread_create(&t[i], NULL, ask_many, NULL) != 0) return 1;
    for (int i = 0; i < 8; i++) pthread_join(t[i], NULL);
    int total = 0, first = 1;
    printf("{\"path\": \"threads\", \"cc\": [");
    for (int cc = 0; cc < 1000; cc++) {
        total += seen_cc[cc];
        if (seen_cc[cc] > 0) {
            printf("%s%d", first ? "" : ", ", cc);
            first = 0;
        }
    }
    printf("], \"answers\": %d}\n", total);
    return 0;
}

int main(int argc, char **argv) {
    if (argc < 2) {
        fprintf(stderr, "usage: cuda_paths PATH [VERSION [FLAGS]]\n");
        return 2;
    }
    struct args g = {argv[1], argc > 2 ? atoi(argv[2]) : 12000, argc > 3 ? strtoull(argv[3], NULL, 0) : 0, NULL};
    if (strcmp(g.path, "threads") == 0) return threads();
    if (strcmp(g.path, "nulls") == 0) { /* NULL outputs, bad devices and attributes, unknown getter names */
        static unsigned char buf[4096];
        int v = -7, m = -7;
        char n[8];
        void *fp = NULL;
        int st = -7;
        int rc[] = {cudaGetDeviceProperties(NULL, 0), cudaGetDeviceProperties(buf, -1), cudaGetDeviceProperties(buf, 99),
                    cudaDeviceGetAttribute(NULL, 75, 0), cudaDeviceGetAttribute(&v, 75, 5), cudaDeviceGetAttribute(&v, -1, 0),
                    cuDeviceGetAttribute(NULL, 76, 0), cuDeviceGetName(NULL, 8, 0), cuDeviceGetName(n, 0, 0),
                    cuDeviceGetName(n, -5, 0), cuDeviceComputeCapability(NULL, &m, 0), cuDeviceComputeCapability(&m, NULL, 0),
                    cuDeviceGetProperties(NULL, 0), cuGetProcAddress(NULL, &fp, 12000, 0),
                    cuGetProcAddress("cuDeviceGetAttribute", NULL, 12000, 0), cuGetProcAddress("cuNoSuchThing", &fp, 12000, 0),
                    cuGetProcAddress_v2("cuDeviceGetAttribute", &fp, -1, 0, &st),
                    cuGetProcAddress_v2("cuDeviceGetAttribute", &fp, 12000, ~0ull, &st),
                    cuGetProcAddress_v2("dlsym", &fp, 12000, 0, &st), cudaGetDriverEntryPoint(NULL, &fp, 0, &st),
                    cudaGetDriverEntryPointByVersion("cuDeviceGetAttribute", &fp, 0xffffffffu, 0, &st)};
        printf("{\"path\": \"nulls\", \"rc\": [");
        for (size_t i = 0; i < sizeof rc / sizeof rc[0]; i++) printf("%s%d", i ? ", " : "", rc[i]);
        printf("], \"v\": %d, \"m\": %d, \"fp\": %d}\n", v, m, fp != NULL);
        return 0;
    }
    if (strcmp(g.path, "shortname") == 0) { /* cuDeviceGetName into 1, 4 and 256 bytes, in that order */
        char n1[1] = {'x'}, n4[4] = "xxx", n256[256] = "untouched";
        int r1 = cuDeviceGetName(n1, 1, 0), r4 = cuDeviceGetName(n4, 4, 0), r256 = cuDeviceGetName(n256, 256, 0);
        printf("{\"path\": \"shortname\", \"names\": [[%d, \"%.1s\"], [%d, \"%.4s\"], [%d, \"%.60s\"]]}\n", r1, n1,
               r4, n4, r256, n256);
        return 0;
    }
    struct api a = {0};
    char getter[96] = "";
    if (strcmp(g.path, "direct") == 0 || strcmp(g.path, "spawn") == 0 || strcmp(g.path, "fork") == 0) {
        a = (struct api){cuDeviceGetAttribute, cuDeviceGetName, cuDeviceComputeCapability, cuDeviceGetProperties,
                         cudaGetDeviceProperties, cudaGetDeviceProperties_v2};
        report(g.path, &a, "");
        struct api rt = {cudaDeviceGetAttribute, NULL, NULL, NULL, NULL, NULL};
        report("direct-runtime", &rt, "");
        if (strcmp(g.path, "fork") == 0) {
            pid_t pid = fork();
            if (pid == 0) {
                report("fork-child", &a, "");
                _exit(0);
            }
            int st = 0;
            return pid > 0 && waitpid(pid, &st, 0) == pid && WIFEXITED(st) && WEXITSTATUS(st) == 0 ? 0 : 1;
        }
        if (strcmp(g.path, "spawn") == 0) {
            char cmd[4200];
            snprintf(cmd, sizeof cmd, "'%s' direct", argv[0]);
            return system(cmd) == 0 ? 0 : 1;
        }
        return 0;
    }
    if (strcmp(g.path, "dlsym") == 0) {
        void *rt = dlopen("libcudart.so.13", RTLD_NOW | RTLD_LOCAL), *drv = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
        if (rt == NULL || drv == NULL) return 3;
        a = (struct api){(attr_fn)(uintptr_t)dlsym(drv, "cuDeviceGetAttribute"),
                         (name_fn)(uintptr_t)dlsym(drv, "cuDeviceGetName"),
                         (cc_fn)(uintptr_t)dlsym(drv, "cuDeviceComputeCapability"),
                         (props_fn)(uintptr_t)dlsym(drv, "cuDeviceGetProperties"),
                         (props_fn)(uintptr_t)dlsym(rt, "cudaGetDeviceProperties"),
                         (props_fn)(uintptr_t)dlsym(rt, "cudaGetDeviceProperties_v2")};
        report(g.path, &a, "");
        struct api r2 = {(attr_fn)(uintptr_t)dlsym(rt, "cudaDeviceGetAttribute"), NULL, NULL, NULL, NULL, NULL};
        report("dlsym-runtime", &r2, "");
        return 0;
    }
    if (strcmp(g.path, "procaddr_self") == 0) {
        void *self = NULL;
        int rc = cuGetProcAddress("cuGetProcAddress", &self, g.version, g.flags);
        if (rc != 0 || self == NULL) {
            printf("{\"path\": \"procaddr_self\", \"getter\": [%d, 0]}\n", rc);
            return 0;
        }
        g.self_v2 = (proc_v2_fn)(uintptr_t)self;
    }
    from_getter(&a, getter, sizeof getter, get_any, &g);
    report(g.path, &a, getter);
    return 0;
}

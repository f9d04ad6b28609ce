/* The CUDA shim's scope tests (issue 27): runtimes reached from outside the global scope,
 * two runtimes in one process, a runtime loaded after the shim, fork. One JSON line per
 * answer on stdout: {"who": ..., ...scope_query.h's object} or {"who": ..., "found": 0|1}.
 *
 * Built twice: scope_host (no runtime linked) and, with -DRT_MAJOR=11 -DLINKED, scope_host11
 * (linked against libcudart.so.11.0: its own queries go through the global scope).
 *
 *   scope_host local PLUGIN             dlopen(PLUGIN, RTLD_LOCAL), query through it twice; dlclose
 *                                       it (its runtime goes too) and load and query it again
 *   scope_host11 two PLUGIN13           main (11.8 runtime), the 13 plugin (RTLD_LOCAL), main again
 *   scope_host handles RT11 RT13        dlopen both RTLD_LOCAL; dlsym on each handle (what ctypes
 *                                       does), 11's first; then ask 11, 13, 11 through those
 *                                       pointers, each into its own struct size
 *   scope_host dlmopen RT13 PLUGIN13    RT13 in a new namespace, asked through dlsym on its handle;
 *                                       then PLUGIN13 in another new namespace (its calls stay
 *                                       inside that namespace: the shim is not there)
 *   scope_host late RT13 PLUGIN13       dlsym(RTLD_DEFAULT) before any runtime is loaded (stock:
 *                                       not found), dlopen(RT13, RTLD_GLOBAL), dlsym again and ask,
 *                                       then a RTLD_LOCAL plugin loaded after that
 *   scope_host fork PLUGIN13            query, fork(), query in the child and in the parent
 *   scope_host many RT...               dlopen each runtime file RTLD_LOCAL, dlsym its
 *                                       cudaDeviceGetAttribute, ask compute capability through each:
 *                                       {"who": "many-N", "answer": {"rc", "attr": [major, minor]}}
 *   scope_host churn PLUGIN COPY        4 threads query through PLUGIN 100 times each while the
 *                                       main thread loads and unloads COPY (another file of the
 *                                       plugin) 40 times: {"who": "churn", "answer": {"calls",
 *                                       "lowered"}}: how many queries, how many saw 7.5 and 40 SMs
 *   scope_host weak [RT13]              calls cudaDeviceGetAttribute through a weak reference
 *                                       with no runtime loaded: {"who": "weak", "rc", "value"};
 *                                       with RT13, dlopen it RTLD_GLOBAL and call from the same
 *                                       call site again ("weak-after-load")
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cuda_table.h"

#ifdef LINKED
#include "scope_query.h"
#endif

typedef void (*query_fn)(char *, size_t);
typedef int (*attr_fn)(int *, int, int);
typedef int (*props_fn)(void *, int);
typedef int (*version_fn)(int *);

static void line(const char *who, const char *json) {
    printf("{\"who\": \"%s\", \"answer\": %s}\n", who, json);
    fflush(stdout);
}

static void fail(const char *what, const char *detail) {
    printf("{\"who\": \"error\", \"answer\": {\"what\": \"%s\", \"detail\": \"%.200s\"}}\n", what,
           detail != NULL ? detail : "?");
    fflush(stdout);
    exit(3);
}

static query_fn plugin(void *h) {
    if (h == NULL) fail("dlopen", dlerror());
    query_fn q = (query_fn)(uintptr_t)dlsym(h, "plugin_query");
    if (q == NULL) fail("dlsym plugin_query", dlerror());
    return q;
}

static void ask_plugin(const char *who, query_fn q) {
    char out[512];
    q(out, sizeof out);
    line(who, out);
}

/* One runtime's entry points, found once through dlsym on its handle. */
struct runtime {
    attr_fn attr;
    props_fn props;
    version_fn ver;
};

static struct runtime runtime_of(void *h) {
    struct runtime r = {(attr_fn)(uintptr_t)dlsym(h, "cudaDeviceGetAttribute"),
                        (props_fn)(uintptr_t)dlsym(h, "cudaGetDeviceProperties"),
                        (version_fn)(uintptr_t)dlsym(h, "cudaRuntimeGetVersion")};
    if (r.attr == NULL || r.props == NULL || r.ver == NULL) fail("dlsym on a runtime handle", dlerror());
    return r;
}

/* scope_query.h through one runtime's pointers; size: the struct that runtime fills. */
static void ask_runtime(const char *who, struct runtime rt, size_t size, size_t sm_offset) {
    int major = -7, minor = -7, version = -7, m[3];
    int rc0 = rt.attr(&major, 75, 0), rc1 = rt.attr(&minor, 76, 0), rc2 = rt.ver(&version);
    unsigned char *p = malloc(size);
    if (p == NULL) fail("malloc", "");
    memset(p, 0xf9, size);
    int rc3 = rt.props(p, 0);
    memcpy(&m[0], p + 360, sizeof m[0]);
    memcpy(&m[1], p + 364, sizeof m[1]);
    memcpy(&m[2], p + sm_offset, sizeof m[2]);
    free(p);
    char out[512];
    snprintf(out, sizeof out, "{\"rt\": %d, \"rc\": [%d, %d, %d, %d], \"attr\": [%d, %d], \"props\": [%d, %d, %d]}",
             version, rc0, rc1, rc2, rc3, major, minor, m[0], m[1], m[2]);
    line(who, out);
}

extern int cudaDeviceGetAttribute(int *, int, int) __attribute__((weak));

static query_fn g_churn_query;

static void *churn_thread(void *arg) {
    long lowered = 0;
    (void)arg;
    for (int i = 0; i < 100; i++) {
        char out[512];
        g_churn_query(out, sizeof out);
        lowered += strstr(out, "\"attr\": [7, 5], \"props\": [7, 5, 40]") != NULL;
    }
    return (void *)(intptr_t)lowered;
}

int main(int argc, char **argv) {
    const char *mode = argc > 1 ? argv[1] : "";
    if (strcmp(mode, "local") == 0 && argc == 3) {
        void *h = dlopen(argv[2], RTLD_NOW | RTLD_LOCAL);
        query_fn q = plugin(h);
        ask_plugin("plugin", q);
        ask_plugin("plugin-again", q);
        if (dlclose(h) != 0) fail("dlclose", dlerror());
        ask_plugin("plugin-reloaded", plugin(dlopen(argv[2], RTLD_NOW | RTLD_LOCAL)));
#ifdef LINKED
    } else if (strcmp(mode, "two") == 0 && argc == 3) {
        char out[512];
        scope_query(out, sizeof out);
        line("main", out);
        ask_plugin("plugin", plugin(dlopen(argv[2], RTLD_NOW | RTLD_LOCAL)));
        scope_query(out, sizeof out);
        line("main-again", out);
#endif
    } else if (strcmp(mode, "handles") == 0 && argc == 4) {
        void *h11 = dlopen(argv[2], RTLD_NOW | RTLD_LOCAL), *h13 = dlopen(argv[3], RTLD_NOW | RTLD_LOCAL);
        if (h11 == NULL || h13 == NULL) fail("dlopen", dlerror());
        struct runtime rt11 = runtime_of(h11), rt13 = runtime_of(h13); /* 13's lookup last */
        ask_runtime("rt11", rt11, CAPSHIM_CUDA_PROP11_SIZE, 388);
        ask_runtime("rt13", rt13, CAPSHIM_CUDA_PROP13_SIZE, 384);
        ask_runtime("rt11-again", rt11, CAPSHIM_CUDA_PROP11_SIZE, 388);
    } else if (strcmp(mode, "dlmopen") == 0 && argc == 4) {
        void *rt = dlmopen(LM_ID_NEWLM, argv[2], RTLD_NOW);
        if (rt == NULL) fail("dlmopen runtime", dlerror());
        struct runtime r = runtime_of(rt);
        ask_runtime("namespace-runtime", r, CAPSHIM_CUDA_PROP13_SIZE, 384);
        ask_plugin("namespace-plugin", plugin(dlmopen(LM_ID_NEWLM, argv[3], RTLD_NOW)));
        ask_runtime("namespace-runtime-again", r, CAPSHIM_CUDA_PROP13_SIZE, 384);
    } else if (strcmp(mode, "late") == 0 && argc == 4) {
        char out[64];
        snprintf(out, sizeof out, "{\"found\": %d}", dlsym(RTLD_DEFAULT, "cudaDeviceGetAttribute") != NULL);
        line("before", out);
        if (dlopen(argv[2], RTLD_NOW | RTLD_GLOBAL) == NULL) fail("dlopen", dlerror());
        attr_fn attr = (attr_fn)(uintptr_t)dlsym(RTLD_DEFAULT, "cudaDeviceGetAttribute");
        if (attr == NULL) fail("dlsym after dlopen", dlerror());
        int major = -7, minor = -7;
        int rc0 = attr(&major, 75, 0), rc1 = attr(&minor, 76, 0);
        snprintf(out, sizeof out, "{\"rc\": [%d, %d], \"attr\": [%d, %d]}", rc0, rc1, major, minor);
        line("after", out);
        ask_plugin("plugin", plugin(dlopen(argv[3], RTLD_NOW | RTLD_LOCAL)));
    } else if (strcmp(mode, "fork") == 0 && argc == 3) {
        query_fn q = plugin(dlopen(argv[2], RTLD_NOW | RTLD_LOCAL));
        ask_plugin("parent", q);
        pid_t pid = fork();
        if (pid < 0) fail("fork", "");
        if (pid == 0) {
            ask_plugin("child", q);
            _exit(0);
        }
        int status = 0;
        if (waitpid(pid, &status, 0) != pid || !WIFEXITED(status) || WEXITSTATUS(status) != 0) fail("child", "");
        ask_plugin("parent-again", q);
    } else if (strcmp(mode, "many") == 0 && argc > 2) {
        attr_fn fns[64];
        int n = argc - 2 < 64 ? argc - 2 : 64;
        for (int i = 0; i < n; i++) {
            void *h = dlopen(argv[2 + i], RTLD_NOW | RTLD_LOCAL);
            if (h == NULL) fail("dlopen", dlerror());
            fns[i] = (attr_fn)(uintptr_t)dlsym(h, "cudaDeviceGetAttribute");
            if (fns[i] == NULL) fail("dlsym", dlerror());
        }
        for (int i = 0; i < n; i++) {
            int major = -7, minor = -7;
            int rc0 = fns[i](&major, 75, 0), rc1 = fns[i](&minor, 76, 0);
            char who[32], out[128];
            snprintf(who, sizeof who, "many-%d", i);
            snprintf(out, sizeof out, "{\"rc\": [%d, %d], \"attr\": [%d, %d]}", rc0, rc1, major, minor);
            line(who, out);
        }
    } else if (strcmp(mode, "churn") == 0 && argc == 4) {
        g_churn_query = plugin(dlopen(argv[2], RTLD_NOW | RTLD_LOCAL));
        pthread_t t[4];
        for (int i = 0; i < 4; i++)
            if (pthread_create(&t[i], NULL, churn_thread, NULL) != 0) fail("pthread_create", "");
        for (int i = 0; i < 40; i++) {
            void *h = dlopen(argv[3], RTLD_NOW | RTLD_LOCAL);
            if (h == NULL) fail("dlopen copy", dlerror());
            char out[512];
            plugin(h)(out, sizeof out);
            if (dlclose(h) != 0) fail("dlclose", dlerror());
        }
        long lowered = 0;
        for (int i = 0; i < 4; i++) {
            void *r = NULL;
            if (pthread_join(t[i], &r) != 0) fail("pthread_join", "");
            lowered += (long)(intptr_t)r;
        }
        char out[128];
        snprintf(out, sizeof out, "{\"calls\": %d, \"lowered\": %ld}", 4 * 100, lowered);
        line("churn", out);
    } else if (strcmp(mode, "weak") == 0 && argc <= 3) {
        for (int round = 0; round < 2; round++) { /* one call site, asked before and after the load */
            int value = -7, rc = -1;
            if (cudaDeviceGetAttribute != NULL) rc = cudaDeviceGetAttribute(&value, 75, 0);
            char out[64];
            snprintf(out, sizeof out, "{\"rc\": %d, \"value\": %d}", rc, value);
            line(round == 0 ? "weak" : "weak-after-load", out);
            if (argc < 3) break;
            if (round == 0 && dlopen(argv[2], RTLD_NOW | RTLD_GLOBAL) == NULL) fail("dlopen", dlerror());
        }
    } else {
        fprintf(stderr, "usage: scope_host local|two|handles|dlmopen|late|fork|many|churn|weak ARGS (see the source)\n");
        return 2;
    }
    return 0;
}

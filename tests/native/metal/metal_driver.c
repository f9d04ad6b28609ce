/*
 * Test driver for the Metal shim on Linux (GNU Objective-C runtime). Linked
 * against the stand-in Metal library; the shim is injected with LD_PRELOAD.
 * Prints JSON lines on stdout, one per device or result.
 *
 *   new CLASS...       [[CLASS alloc] init] each (hook path 1 entry)
 *   create             MTLCreateSystemDefaultDevice()
 *   copyall            MTLCopyAllDevices()
 *   create-then-new C  MTLCreateSystemDefaultDevice(), then [[C alloc] init]
 *   threads N CLASS    N threads create CLASS devices at once and query them
 *   window CLASS       a second thread queries a CLASS device each time the
 *                      shim replaces or adds a method (inside its hook
 *                      installation), and the answers it saw are printed
 *   env                the injection and configuration variables as seen
 *                      after load, then a child (this driver, "new
 *                      CSParavirtDevice") that inherits the environment
 */
#define _GNU_SOURCE
#include "metal_query.h"
#include "metal_vars.h"

#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

extern id MTLCreateSystemDefaultDevice(void);
extern id MTLCopyAllDevices(void);
extern void standin_free(id object);
extern int standin_family_inits(void);

typedef id (*alloc_fn)(id, SEL);

static id make(const char *name)
{
    Class c = objc_lookUpClass(name);
    if (c == Nil)
        return nil;
    SEL sel;
    alloc_fn a = (alloc_fn)mq_imp((id)c, "alloc", &sel);
    if (a == NULL)
        return nil;
    id obj = a((id)c, sel);
    alloc_fn i = (alloc_fn)mq_imp(obj, "init", &sel);
    return i ? i(obj, sel) : obj;
}

static void print_device(id dev)
{
    mq_print_device(stdout, dev);
    fputc('\n', stdout);
}

struct job {
    const char *cls;
    pthread_barrier_t *barrier;
    int apple9;
    unsigned long tg;
};

static void *worker(void *arg)
{
    struct job *j = arg;
    pthread_barrier_wait(j->barrier);
    id dev = make(j->cls);
    j->apple9 = mq_supports(dev, 1009);
    if (!mq_ulong(dev, "maxThreadgroupMemoryLength", &j->tg))
        j->tg = 0;
    standin_free(dev);
    return NULL;
}

static int run_threads(int n, const char *cls)
{
    if (n < 1 || n > 256)
        return 2;
    pthread_t t[256];
    struct job jobs[256];
    pthread_barrier_t barrier;
    pthread_barrier_init(&barrier, NULL, (unsigned)n);
    for (int i = 0; i < n; i++) {
        jobs[i] = (struct job){cls, &barrier, -1, 0};
        if (pthread_create(&t[i], NULL, worker, &jobs[i]) != 0)
            return 1;
    }
    int apple9 = 0, same_tg = 1;
    for (int i = 0; i < n; i++) {
        pthread_join(t[i], NULL);
        apple9 += jobs[i].apple9 == 1;
        same_tg &= jobs[i].tg == jobs[0].tg;
    }
    pthread_barrier_destroy(&barrier);
    printf("{\"threads\":%d,\"apple9\":%d,\"tg\":%lu,\"same_tg\":%s,\"family_inits\":%d}\n", n,
           apple9, jobs[0].tg, same_tg ? "true" : "false", standin_family_inits());
    return 0;
}

/* ---- "window": queries while the shim installs its hooks ----------------
 * This executable is linked with -rdynamic, so its method_setImplementation
 * and class_addMethod come before libobjc's for the shim too. While armed,
 * each call forwards to the runtime, then a second thread queries a device
 * of the class being patched (created with alloc only, so that it does not
 * trigger the patch itself) and is joined: that query runs exactly in the
 * window between two installations. The queries take no shim lock (answers
 * at or above the configured values), so joining cannot deadlock. */
#define WINDOW_MAX 16
static id g_window_dev;
static int g_window_armed;
static int g_window_n;
static int g_window_apple5[WINDOW_MAX];
static unsigned long g_window_tg[WINDOW_MAX], g_window_ws[WINDOW_MAX];

static void *window_query(void *arg)
{
    (void)arg;
    int i = g_window_n;
    g_window_apple5[i] = mq_supports(g_window_dev, 1005);
    if (!mq_ulong(g_window_dev, "maxThreadgroupMemoryLength", &g_window_tg[i]))
        g_window_tg[i] = 0;
    if (!mq_ulong(g_window_dev, "recommendedMaxWorkingSetSize", &g_window_ws[i]))
        g_window_ws[i] = 0;
    return NULL;
}

static void window_check(void)
{
    if (!g_window_armed || g_window_n >= WINDOW_MAX)
        return;
    pthread_t t;
    if (pthread_create(&t, NULL, window_query, NULL) == 0) {
        pthread_join(t, NULL);
        g_window_n++;
    }
}

typedef IMP (*set_impl_fn)(Method, IMP);
typedef BOOL (*add_method_fn)(Class, SEL, IMP, const char *);

IMP method_setImplementation(Method m, IMP imp)
{
    set_impl_fn real = (set_impl_fn)(mq_generic_fn)dlsym(RTLD_NEXT, "method_setImplementation");
    IMP old = real ? real(m, imp) : NULL;
    window_check();
    return old;
}

BOOL class_addMethod(Class cls, SEL sel, IMP imp, const char *types)
{
    add_method_fn real = (add_method_fn)(mq_generic_fn)dlsym(RTLD_NEXT, "class_addMethod");
    BOOL ok = real ? real(cls, sel, imp, types) : NO;
    window_check();
    return ok;
}

static int run_window(const char *cls)
{
    Class c = objc_lookUpClass(cls);
    if (c == Nil)
        return 2;
    SEL sel;
    alloc_fn a = (alloc_fn)mq_imp((id)c, "alloc", &sel);
    g_window_dev = a ? a((id)c, sel) : nil;
    if (g_window_dev == nil)
        return 1;
    g_window_armed = 1;
    id dev = make(cls); /* its -init patches the class (hook path 1) */
    g_window_armed = 0;
    printf("{\"window\":%d,\"apple5\":[", g_window_n);
    for (int i = 0; i < g_window_n; i++)
        printf("%s%d", i ? "," : "", g_window_apple5[i]);
    fputs("],\"tg\":[", stdout);
    for (int i = 0; i < g_window_n; i++)
        printf("%s%lu", i ? "," : "", g_window_tg[i]);
    fputs("],\"ws\":[", stdout);
    for (int i = 0; i < g_window_n; i++)
        printf("%s%lu", i ? "," : "", g_window_ws[i]);
    fputs("]}\n", stdout);
    print_device(dev);
    standin_free(dev);
    standin_free(g_window_dev);
    return 0;
}

static int run_env(const char *self)
{
    static const char *const names[] = {
        "LD_PRELOAD", CAPSHIM_METAL_VARIABLES(CAPSHIM_METAL_VAR_NAME)
        CAPSHIM_METAL_LUME_VARIABLES(CAPSHIM_METAL_VAR_NAME) "CAPSHIM_STATUS_FILE", NULL};
    fputs("{\"env\":{", stdout);
    for (int i = 0; names[i] != NULL; i++) {
        fprintf(stdout, "%s\"%s\":", i ? "," : "", names[i]);
        mq_json_string(stdout, getenv(names[i]));
    }
    fputs("}}\n", stdout);
    fflush(stdout);
    pid_t pid = fork();
    if (pid < 0)
        return 1;
    if (pid == 0) {
        execl(self, self, "new", "CSParavirtDevice", (char *)NULL);
        _exit(127);
    }
    int status = 0;
    if (waitpid(pid, &status, 0) != pid || !WIFEXITED(status))
        return 1;
    return WEXITSTATUS(status);
}

int main(int argc, char **argv)
{
    if (argc < 2)
        return 2;
    if (strcmp(argv[1], "new") == 0) {
        for (int i = 2; i < argc; i++) {
            id dev = make(argv[i]);
            print_device(dev);
            standin_free(dev);
        }
        return 0;
    }
    if (strcmp(argv[1], "create") == 0) {
        id dev = MTLCreateSystemDefaultDevice();
        print_device(dev);
        standin_free(dev);
        return 0;
    }
    if (strcmp(argv[1], "create-then-new") == 0 && argc == 3) {
        id dev = MTLCreateSystemDefaultDevice();
        print_device(dev);
        id other = make(argv[2]);
        print_device(other);
        standin_free(dev);
        standin_free(other);
        return 0;
    }
    if (strcmp(argv[1], "copyall") == 0) {
        id all = MTLCopyAllDevices();
        SEL sel;
        mq_ulong_fn count = (mq_ulong_fn)mq_imp(all, "count", &sel);
        unsigned long n = count ? count(all, sel) : 0;
        typedef id (*at_fn)(id, SEL, unsigned long);
        at_fn at = (at_fn)mq_imp(all, "objectAtIndex:", &sel);
        for (unsigned long i = 0; at != NULL && i < n; i++)
            print_device(at(all, sel, i));
        standin_free(all);
        return 0;
    }
    if (strcmp(argv[1], "threads") == 0 && argc == 4)
        return run_threads(atoi(argv[2]), argv[3]);
    if (strcmp(argv[1], "window") == 0 && argc == 3)
        return run_window(argv[2]);
    if (strcmp(argv[1], "env") == 0)
        return run_env(argv[0]);
    return 2;
}

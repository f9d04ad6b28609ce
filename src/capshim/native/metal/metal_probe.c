/*
 * capshim-metal-probe: prints, as one JSON object on stdout, the Metal
 * capability answers this process sees (the default device's name, Apple
 * families 1001..1010, the highest Mac, Common and Metal families,
 * maxThreadgroupMemoryLength, recommendedMaxWorkingSetSize,
 * hasUnifiedMemory, and llama.cpp's decisions from them).
 *
 * MTLCreateSystemDefaultDevice is found at run time (dlsym), after loading
 * Metal.framework (and CoreGraphics, which Apple documents a command-line
 * tool must link for the default device to exist). With --framework PATH it
 * loads another library instead (the GNU-runtime stand-in in Linux tests).
 *
 * Exit status: 0 printed; 1 no Metal device or function; 2 bad usage.
 */
#include "metal_query.h"

#include <dlfcn.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#if defined(__APPLE__)
#define DEFAULT_FRAMEWORK "/System/Library/Frameworks/Metal.framework/Metal"
#define COREGRAPHICS "/System/Library/Frameworks/CoreGraphics.framework/CoreGraphics"
#else
#define DEFAULT_FRAMEWORK NULL
#define COREGRAPHICS NULL
#endif

typedef id (*create_fn)(void);

static int fail(const char *error, const char *detail)
{
    fputs("{\"api\":\"metal\",\"error\":", stdout);
    mq_json_string(stdout, error);
    fputs(",\"detail\":", stdout);
    mq_json_string(stdout, detail);
    fputs("}\n", stdout);
    return 1;
}

int main(int argc, char **argv)
{
    const char *framework = DEFAULT_FRAMEWORK;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--framework") == 0 && i + 1 < argc) {
            framework = argv[++i];
        } else {
            fprintf(stderr, "usage: %s [--framework PATH]\n", argv[0]);
            return 2;
        }
    }
    if (COREGRAPHICS != NULL)
        (void)dlopen(COREGRAPHICS, RTLD_NOW | RTLD_GLOBAL);
    void *h = NULL;
    if (framework != NULL && (h = dlopen(framework, RTLD_NOW | RTLD_GLOBAL)) == NULL)
        return fail("cannot load the Metal framework", dlerror());
    /* RTLD_DEFAULT first: an interposed definition (the shim's, on Linux)
     * comes before the framework's own in the global lookup order. */
    create_fn create = (create_fn)(mq_generic_fn)dlsym(RTLD_DEFAULT, "MTLCreateSystemDefaultDevice");
    if (create == NULL && h != NULL)
        create = (create_fn)(mq_generic_fn)dlsym(h, "MTLCreateSystemDefaultDevice");
    if (create == NULL)
        return fail("MTLCreateSystemDefaultDevice not found", framework);
    id dev = create();
    if (dev == nil)
        return fail("no Metal device", "MTLCreateSystemDefaultDevice returned nil");
    fputs("{\"api\":\"metal\",\"pid\":", stdout);
    fprintf(stdout, "%ld,", (long)getpid());
    fputs("\"answers\":", stdout);
    mq_print_device(stdout, dev);
    fputs("}\n", stdout);
    SEL rel;
    mq_generic_fn release = mq_imp(dev, "release", &rel);
    if (release != NULL)
        ((void (*)(id, SEL))release)(dev, rel); /* MTLCreateSystemDefaultDevice returns +1 */
    return fflush(stdout) == 0 ? 0 : 1;
}

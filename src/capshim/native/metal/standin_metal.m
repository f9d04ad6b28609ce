/*
 * Stand-in for Metal.framework on Linux (GNU Objective-C runtime), used only
 * to test the Metal shim's logic and the probe. Not built on macOS.
 *
 * Shapes follow what the shim relies on in the real framework:
 *   _MTLDevice                 private base class with -initGPUFamilySupport,
 *                              called from -init (absent when built with
 *                              -DSTANDIN_NO_PRIVATE: hook path 2).
 *   CSParavirtDevice           answers like Apple's paravirtual device in a
 *                              macOS guest (docs/contracts.md, "Published figures"): Apple1..5,
 *                              Mac2, Common1..3, no Metal3; 32768 bytes of
 *                              threadgroup memory; a working set. The built-in
 *                              profile metal-paravirt holds the same facts with
 *                              their sources; tests/backends/test_metal_paravirt.py
 *                              checks that the two agree.
 *   CSParavirtDevice2          a second concrete class (Apple1..4, 16384).
 *   CSLimitedDevice            lacks maxThreadgroupMemoryLength.
 *   CSBigDevice                answers above any profile (Apple1..9,
 *                              Metal3, 65536 * 2): nothing may go down.
 *                              Its name is "Apple M1 Ultra (capshim stand-in)".
 *   CSSubDevice                a subclass of CSParavirtDevice that inherits
 *                              every answer.
 *   NSString                   what Foundation gives the shim for a device
 *                              name it answers: +alloc, -initWithUTF8String:
 *                              (copies), -UTF8String. Absent when built with
 *                              -DSTANDIN_NO_NSSTRING.
 * MTLCreateSystemDefaultDevice() returns a CSParavirtDevice (or the class
 * named by STANDIN_DEVICE_CLASS); MTLCopyAllDevices() an array of one
 * CSParavirtDevice and one CSParavirtDevice2.
 */
#include <objc/runtime.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#define API __attribute__((visibility("default")))

__attribute__((objc_root_class))
@interface CSObject
{
    Class isa;
}
+ (id)alloc;
- (id)init;
- (void)free;
- (void)release;
@end

@implementation CSObject
+ (id)alloc { return class_createInstance(self, 0); }
- (id)init { return self; }
- (void)free { object_dispose(self); }
- (void)release { [self free]; }
@end

@interface CSString : CSObject
{
    const char *text;
}
- (id)initWithText:(const char *)t;
- (const char *)UTF8String;
@end

@implementation CSString
- (id)initWithText:(const char *)t { text = t; return self; }
- (const char *)UTF8String { return text; }
@end

#ifndef STANDIN_NO_NSSTRING
@interface NSString : CSObject
{
    char *bytes;
}
- (id)initWithUTF8String:(const char *)t;
- (const char *)UTF8String;
@end

@implementation NSString
- (id)initWithUTF8String:(const char *)t
{
    bytes = t ? strdup(t) : NULL;
    if (bytes == NULL) {
        [self free];
        return nil;
    }
    return self;
}
- (const char *)UTF8String { return bytes; }
- (void)free
{
    free(bytes);
    [super free];
}
@end
#endif

@interface CSArray : CSObject
{
    id items[4];
    unsigned long n;
}
- (void)add:(id)item;
- (unsigned long)count;
- (id)objectAtIndex:(unsigned long)i;
@end

@implementation CSArray
- (void)add:(id)item { if (n < 4) items[n++] = item; }
- (unsigned long)count { return n; }
- (id)objectAtIndex:(unsigned long)i { return i < n ? items[i] : nil; }
- (void)free
{
    for (unsigned long i = 0; i < n; i++)
        [items[i] free];
    [super free];
}
@end

static int g_family_inits;

API int standin_family_inits(void) { return __atomic_load_n(&g_family_inits, __ATOMIC_SEQ_CST); }

#ifndef STANDIN_NO_PRIVATE
@interface _MTLDevice : CSObject
- (void)initGPUFamilySupport;
@end

@implementation _MTLDevice
- (id)init
{
    self = [super init];
    [self initGPUFamilySupport];
    return self;
}
- (void)initGPUFamilySupport { __atomic_fetch_add(&g_family_inits, 1, __ATOMIC_SEQ_CST); }
@end
#define DEVICE_BASE _MTLDevice
#else
#define DEVICE_BASE CSObject
#endif

static CSString *g_name, *g_name2, *g_name_big;
static pthread_once_t g_names_once = PTHREAD_ONCE_INIT;

static void make_names(void)
{
    g_name = [[CSString alloc] initWithText:"Apple Paravirtual device (capshim stand-in)"];
    g_name2 = [[CSString alloc] initWithText:"Second stand-in device"];
    g_name_big = [[CSString alloc] initWithText:"Apple M1 Ultra (capshim stand-in)"];
}

@interface CSParavirtDevice : DEVICE_BASE
@end

@implementation CSParavirtDevice
- (BOOL)supportsFamily:(long)family
{
    return (family >= 1001 && family <= 1005) || family == 2002 ||
           (family >= 3001 && family <= 3003);
}
- (unsigned long)maxThreadgroupMemoryLength { return 32768; }
- (unsigned long)recommendedMaxWorkingSetSize { return 11453251584UL; }
- (BOOL)hasUnifiedMemory { return YES; }
- (id)name { pthread_once(&g_names_once, make_names); return g_name; }
@end

@interface CSParavirtDevice2 : DEVICE_BASE
@end

@implementation CSParavirtDevice2
- (BOOL)supportsFamily:(long)family
{
    return (family >= 1001 && family <= 1004) || (family >= 3001 && family <= 3002);
}
- (unsigned long)maxThreadgroupMemoryLength { return 16384; }
- (unsigned long)recommendedMaxWorkingSetSize { return 4294967296UL; }
- (BOOL)hasUnifiedMemory { return NO; }
- (id)name { pthread_once(&g_names_once, make_names); return g_name2; }
@end

@interface CSLimitedDevice : DEVICE_BASE
@end

@implementation CSLimitedDevice
- (BOOL)supportsFamily:(long)family { return family >= 1001 && family <= 1005; }
- (unsigned long)recommendedMaxWorkingSetSize { return 1073741824UL; }
@end

@interface CSBigDevice : DEVICE_BASE
@end

@implementation CSBigDevice
- (BOOL)supportsFamily:(long)family
{
    return (family >= 1001 && family <= 1009) || family == 5001 || family == 2002 ||
           (family >= 3001 && family <= 3003);
}
- (unsigned long)maxThreadgroupMemoryLength { return 131072; }
- (unsigned long)recommendedMaxWorkingSetSize { return 68719476736UL; }
- (id)name { pthread_once(&g_names_once, make_names); return g_name_big; }
@end

@interface CSSubDevice : CSParavirtDevice
@end

@implementation CSSubDevice
@end


static id make(const char *name)
{
    Class c = objc_lookUpClass(name);
    return c ? [[c alloc] init] : nil;
}

API id MTLCreateSystemDefaultDevice(void)
{
    const char *name = getenv("STANDIN_DEVICE_CLASS");
    return make(name && *name ? name : "CSParavirtDevice");
}

API id MTLCopyAllDevices(void)
{
    CSArray *a = [[CSArray alloc] init];
    [a add:make("CSParavirtDevice")];
    [a add:make("CSParavirtDevice2")];
    return a;
}

API void standin_free(id object)
{
    if (object != nil)
        [object free];
}

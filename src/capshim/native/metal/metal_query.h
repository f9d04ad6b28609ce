/*
 * capshim Metal: asks a device object its capability answers through the
 * Objective-C runtime API only (no Metal headers), and prints them as JSON.
 * Shared by the probe (metal_probe.c) and the Linux test driver.
 *
 * Every message is checked with class_respondsToSelector first: a device
 * that lacks a method gives null, never a crash.
 */
#ifndef CAPSHIM_METAL_QUERY_H
#define CAPSHIM_METAL_QUERY_H

#include <objc/runtime.h>
#include <stdio.h>

typedef void (*mq_generic_fn)(void);
typedef BOOL (*mq_bool_long_fn)(id, SEL, long);
typedef BOOL (*mq_bool_fn)(id, SEL);
typedef unsigned long (*mq_ulong_fn)(id, SEL);
typedef id (*mq_id_fn)(id, SEL);
typedef const char *(*mq_cstr_fn)(id, SEL);

/* The implementation obj would run for sel, or NULL when it has none. */
static inline mq_generic_fn mq_imp(id obj, const char *sel_name, SEL *sel)
{
    if (obj == nil)
        return NULL;
    Class c = object_getClass(obj);
    *sel = sel_registerName(sel_name);
    if (c == Nil || !class_respondsToSelector(c, *sel))
        return NULL;
    return (mq_generic_fn)class_getMethodImplementation(c, *sel);
}

/* -1: no answer (method missing); else 0/1. */
static inline int mq_supports(id dev, long family)
{
    SEL sel;
    mq_bool_long_fn f = (mq_bool_long_fn)mq_imp(dev, "supportsFamily:", &sel);
    return f ? (f(dev, sel, family) ? 1 : 0) : -1;
}

static inline int mq_bool(id dev, const char *name)
{
    SEL sel;
    mq_bool_fn f = (mq_bool_fn)mq_imp(dev, name, &sel);
    return f ? (f(dev, sel) ? 1 : 0) : -1;
}

/* 1 and *out set, or 0 when the method is missing. */
static inline int mq_ulong(id dev, const char *name, unsigned long *out)
{
    SEL sel;
    mq_ulong_fn f = (mq_ulong_fn)mq_imp(dev, name, &sel);
    if (f == NULL)
        return 0;
    *out = f(dev, sel);
    return 1;
}

/* The device's name as UTF-8 ([[dev name] UTF8String]), or NULL. */
static inline const char *mq_name(id dev)
{
    SEL sel;
    mq_id_fn f = (mq_id_fn)mq_imp(dev, "name", &sel);
    if (f == NULL)
        return NULL;
    id s = f(dev, sel);
    mq_cstr_fn u = (mq_cstr_fn)mq_imp(s, "UTF8String", &sel);
    return u ? u(s, sel) : NULL;
}

static inline void mq_json_string(FILE *out, const char *s)
{
    if (s == NULL) {
        fputs("null", out);
        return;
    }
    fputc('"', out);
    for (const unsigned char *p = (const unsigned char *)s; *p != '\0'; p++) {
        if (*p == '"' || *p == '\\')
            fprintf(out, "\\%c", *p);
        else if (*p < 0x20 || *p == 0x7f)
            fprintf(out, "\\u%04x", *p);
        else
            fputc(*p, out);
    }
    fputc('"', out);
}

static inline void mq_json_tri(FILE *out, int v)
{
    fputs(v < 0 ? "null" : (v ? "true" : "false"), out);
}

/* Highest family in base+1 .. base+20 the device supports, or 0. Twenty, as
 * llama.cpp scans (MTLGPUFamilyApple1 + 20 down, ggml-metal-device.m): a host
 * newer than Apple9 (1009) is captured at its own family (host ceilings,
 * capshim.profiles.metalhost), not cut at 1009. */
static inline long mq_highest(id dev, long base)
{
    long best = 0;
    for (long f = base + 1; f <= base + 20; f++)
        if (mq_supports(dev, f) == 1)
            best = f;
    return best;
}

static inline void mq_json_highest(FILE *out, long v)
{
    if (v > 0)
        fprintf(out, "%ld", v);
    else
        fputs("null", out);
}

/* Prints one JSON object (no newline) describing dev.
 * llama.cpp's decisions (ggml-metal-device.m, docs/contracts.md "Reference facts: Metal"):
 * simdgroup reduction = Apple7 or Metal3; simdgroup matrix multiply = Apple7;
 * bfloat = Apple6 or Metal3; tensor = Metal4. */
static inline void mq_print_device(FILE *out, id dev)
{
    const char *cls = dev ? class_getName(object_getClass(dev)) : NULL;
    fputs("{\"device\":", out);
    mq_json_string(out, mq_name(dev));
    fputs(",\"class\":", out);
    mq_json_string(out, cls);
    fputs(",\"families\":{", out);
    for (long f = 1001; f <= 1010; f++) {
        fprintf(out, "%s\"%ld\":", f == 1001 ? "" : ",", f);
        mq_json_tri(out, mq_supports(dev, f));
    }
    fputs("},\"highest\":{\"apple\":", out);
    mq_json_highest(out, mq_highest(dev, 1000));
    fputs(",\"mac\":", out);
    mq_json_highest(out, mq_highest(dev, 2000));
    fputs(",\"common\":", out);
    mq_json_highest(out, mq_highest(dev, 3000));
    fputs(",\"metal\":", out);
    mq_json_highest(out, mq_highest(dev, 5000));
    unsigned long v = 0;
    fputs("},\"maxThreadgroupMemoryLength\":", out);
    if (mq_ulong(dev, "maxThreadgroupMemoryLength", &v))
        fprintf(out, "%lu", v);
    else
        fputs("null", out);
    fputs(",\"recommendedMaxWorkingSetSize\":", out);
    if (mq_ulong(dev, "recommendedMaxWorkingSetSize", &v))
        fprintf(out, "%lu", v);
    else
        fputs("null", out);
    fputs(",\"hasUnifiedMemory\":", out);
    mq_json_tri(out, mq_bool(dev, "hasUnifiedMemory"));
    int a6 = mq_supports(dev, 1006) == 1, a7 = mq_supports(dev, 1007) == 1;
    int m3 = mq_supports(dev, 5001) == 1, m4 = mq_supports(dev, 5002) == 1;
    fprintf(out,
            ",\"llama_cpp\":{\"simdgroup_reduction\":%s,\"simdgroup_mm\":%s,"
            "\"bfloat\":%s,\"tensor\":%s}}",
            (a7 || m3) ? "true" : "false", a7 ? "true" : "false",
            (a6 || m3) ? "true" : "false", m4 ? "true" : "false");
}

#endif

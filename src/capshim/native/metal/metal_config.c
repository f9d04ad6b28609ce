/*
 * capshim Metal shim: strict configuration parsing (see metal_config.h).
 * No Objective-C, no allocation, no global state.
 */
#include "metal_config.h"

#include <errno.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define APPLE_FAMILY_MIN 1001u
#define APPLE_FAMILY_LIMIT 2000u          /* exclusive: Apple families are 1xxx */
#define LUME_DEFAULT_THREADGROUP 65536u   /* Cua/Lume shim's default, bytes */
#define REASON_VALUE_MAX 40               /* bytes of a bad value quoted in a reason */

/* The capshim names first (CAPSHIM_VAR_COUNT of them), then the Lume ones. */
const char *const capshim_metal_config_names[] = {
    CAPSHIM_METAL_VARIABLES(CAPSHIM_METAL_VAR_NAME)
    CAPSHIM_METAL_LUME_VARIABLES(CAPSHIM_METAL_VAR_NAME)
    NULL,
};
#define CAPSHIM_NAME(key) capshim_metal_config_names[CAPSHIM_VAR_##key]
#define LUME_NAME(key) capshim_metal_config_names[(size_t)CAPSHIM_VAR_COUNT + (size_t)CAPSHIM_LUME_VAR_##key]

enum capshim_parse_result capshim_parse_u64(const char *text, uint64_t *out)
{
    if (text == NULL || text[0] == '\0')
        return CAPSHIM_PARSE_EMPTY;
    /* strtoull skips white space and accepts a sign (and negates with '-'):
     * refuse both before it sees them. */
    if (text[0] == '-' || text[0] == '+' || text[0] == ' ' ||
        (text[0] >= '\t' && text[0] <= '\r'))
        return CAPSHIM_PARSE_SIGN_OR_SPACE;
    if (text[0] < '0' || text[0] > '9')
        return CAPSHIM_PARSE_NOT_WHOLE;
    errno = 0;
    char *end = NULL;
    unsigned long long v = strtoull(text, &end, 0);
    if (errno == ERANGE)
        return CAPSHIM_PARSE_OVERFLOW;
    if (errno != 0 || end == NULL || end == text || *end != '\0')
        return CAPSHIM_PARSE_NOT_WHOLE;
#if ULLONG_MAX > UINT64_MAX
    if (v > UINT64_MAX)
        return CAPSHIM_PARSE_OVERFLOW;
#endif
    *out = (uint64_t)v;
    return CAPSHIM_PARSE_OK;
}

const char *capshim_parse_message(enum capshim_parse_result r)
{
    switch (r) {
    case CAPSHIM_PARSE_OK: return "is valid";
    case CAPSHIM_PARSE_EMPTY: return "is empty";
    case CAPSHIM_PARSE_SIGN_OR_SPACE: return "starts with a sign or white space";
    case CAPSHIM_PARSE_NOT_WHOLE: return "is not a whole number";
    case CAPSHIM_PARSE_OVERFLOW: return "is out of range (overflow)";
    }
    return "is invalid";
}

int capshim_buf_printf(char *buf, size_t cap, size_t *len, const char *fmt, ...)
{
    if (buf == NULL || cap == 0 || *len >= cap)
        return -1;
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(buf + *len, cap - *len, fmt, ap);
    va_end(ap);
    if (n < 0) {
        buf[*len] = '\0';
        return -1;
    }
    if ((size_t)n >= cap - *len) {
        *len = cap - 1;
        return -1;
    }
    *len += (size_t)n;
    return 0;
}

int capshim_json_escape(char *buf, size_t cap, size_t *len, const char *text,
                        size_t max_in)
{
    static const char hex[] = "0123456789abcdef";
    if (buf == NULL || cap == 0 || *len >= cap)
        return -1;
    size_t i = 0;
    for (; text != NULL && text[i] != '\0' && i < max_in; i++) {
        unsigned char c = (unsigned char)text[i];
        char tmp[7];
        size_t n;
        if (c == '"' || c == '\\') {
            tmp[0] = '\\';
            tmp[1] = (char)c;
            n = 2;
        } else if (c < 0x20 || c == 0x7f || c >= 0x80) {
            /* Bytes >= 0x80 are escaped one by one: the output is always
             * valid JSON (and ASCII) whatever the input encoding was. */
            tmp[0] = '\\'; tmp[1] = 'u'; tmp[2] = '0'; tmp[3] = '0';
            tmp[4] = hex[c >> 4];
            tmp[5] = hex[c & 0xf];
            n = 6;
        } else {
            tmp[0] = (char)c;
            n = 1;
        }
        if (*len + n >= cap) {
            buf[*len] = '\0';
            return -1;
        }
        memcpy(buf + *len, tmp, n);
        *len += n;
    }
    buf[*len] = '\0';
    if (text != NULL && text[i] != '\0')
        return capshim_buf_printf(buf, cap, len, "...");
    return 0;
}

/* Copies a value into a reason, printable ASCII only, cut at REASON_VALUE_MAX. */
static void reason_value(char *out, size_t cap, const char *value)
{
    size_t o = 0, i = 0;
    if (value == NULL)
        value = "";
    for (; value[i] != '\0' && i < REASON_VALUE_MAX && o + 1 < cap; i++) {
        unsigned char c = (unsigned char)value[i];
        out[o++] = (c >= 0x20 && c < 0x7f) ? (char)c : '?';
    }
    out[o] = '\0';
    if (value[i] != '\0' && o + 4 < cap) {
        memcpy(out + o, "...", 4);
    }
}

static void set_reason(struct capshim_metal_config *cfg, const char *name,
                       const char *value, const char *what)
{
    char shown[REASON_VALUE_MAX + 8];
    reason_value(shown, sizeof shown, value);
    size_t len = 0;
    cfg->reason[0] = '\0';
    (void)capshim_buf_printf(cfg->reason, sizeof cfg->reason, &len, "%s: '%s' %s",
                             name, shown, what);
}

/* Parses variable name; returns 1 when set and valid, 0 when unset, -1 when
 * invalid (reason filled). */
static int get_u64(capshim_lookup_fn lookup, void *ctx, const char *name,
                   uint64_t *out, struct capshim_metal_config *cfg)
{
    const char *v = lookup(name, ctx);
    if (v == NULL)
        return 0;
    enum capshim_parse_result r = capshim_parse_u64(v, out);
    if (r != CAPSHIM_PARSE_OK) {
        set_reason(cfg, name, v, capshim_parse_message(r));
        return -1;
    }
    return 1;
}

static int apple_family_ok(struct capshim_metal_config *cfg, const char *name,
                           const char *raw, uint64_t v)
{
    if (v < APPLE_FAMILY_MIN || v >= APPLE_FAMILY_LIMIT) {
        set_reason(cfg, name, raw,
                   "is not an Apple GPU family (1001..1999, MTLGPUFamilyApple1 = 1001)");
        return 0;
    }
    return 1;
}

static int forced_family_ok(uint64_t v)
{
    return (v >= 2001 && v <= 2999) || (v >= 3001 && v <= 3999) ||
           (v >= 5001 && v <= 5999);
}

/* "5001,3003": strictly parsed items, no empty items, no spaces. */
static int parse_forced(const char *name, const char *raw,
                        struct capshim_metal_config *cfg)
{
    char item[32];
    const char *p = raw;
    if (*p == '\0') {
        set_reason(cfg, name, raw, capshim_parse_message(CAPSHIM_PARSE_EMPTY));
        return 0;
    }
    for (;;) {
        const char *comma = strchr(p, ',');
        size_t n = comma ? (size_t)(comma - p) : strlen(p);
        if (n == 0 || n >= sizeof item) {
            set_reason(cfg, name, raw, "is not a comma-separated list of family numbers");
            return 0;
        }
        memcpy(item, p, n);
        item[n] = '\0';
        uint64_t v = 0;
        enum capshim_parse_result r = capshim_parse_u64(item, &v);
        if (r != CAPSHIM_PARSE_OK) {
            set_reason(cfg, name, raw, "is not a comma-separated list of family numbers");
            return 0;
        }
        if (!forced_family_ok(v)) {
            set_reason(cfg, name, raw,
                       "names a family outside Mac (2xxx), Common (3xxx) and Metal (5xxx)");
            return 0;
        }
        if (cfg->n_forced >= CAPSHIM_MAX_FORCED) {
            set_reason(cfg, name, raw, "names more than 16 families");
            return 0;
        }
        cfg->forced[cfg->n_forced++] = v;
        if (comma == NULL)
            break;
        p = comma + 1;
    }
    return 1;
}

/* The device name: the shared rule (devname.h); reason filled when invalid. */
static int parse_device_name(const char *name, const char *raw, struct capshim_metal_config *cfg)
{
    char bad = 0, longer[48];
    size_t n = 0;
    const char *what = NULL;
    switch (capshim_devname_decode(raw, cfg->device_name, &bad)) {
    case CAPSHIM_DEVNAME_OK: return 1;
    case CAPSHIM_DEVNAME_BAD_ESCAPE: what = "has a '%' not followed by two hex digits"; break;
    case CAPSHIM_DEVNAME_RAW_BYTE: what = "is not percent-encoded (RFC 3986)"; break;
    case CAPSHIM_DEVNAME_TOO_LONG:
        (void)capshim_buf_printf(longer, sizeof longer, &n, "is longer than %d bytes decoded",
                                 CAPSHIM_DEVICE_NAME_MAX - 1);
        what = longer;
        break;
    case CAPSHIM_DEVNAME_EMPTY: what = capshim_parse_message(CAPSHIM_PARSE_EMPTY); break;
    case CAPSHIM_DEVNAME_NOT_CLEAN: what = "is not UTF-8 without control characters"; break;
    }
    (void)bad;
    set_reason(cfg, name, raw, what ? what : "is invalid");
    return 0;
}

static void parse_capshim_form(capshim_lookup_fn lookup, void *ctx,
                               struct capshim_metal_config *cfg)
{
    const char *const fam = CAPSHIM_NAME(appleFamilyMax);
    const char *const tg = CAPSHIM_NAME(maxThreadgroupMemoryLength);
    const char *const ws = CAPSHIM_NAME(recommendedMaxWorkingSetSize);
    const char *const ff = CAPSHIM_NAME(forceFamilies);
    const char *const dn = CAPSHIM_NAME(deviceName);
    int r = get_u64(lookup, ctx, fam, &cfg->apple_family_max, cfg);
    if (r < 0)
        return;
    if (r > 0 && !apple_family_ok(cfg, fam, lookup(fam, ctx), cfg->apple_family_max))
        return;
    cfg->has_apple_family_max = r > 0;
    r = get_u64(lookup, ctx, tg, &cfg->threadgroup_memory, cfg);
    if (r < 0)
        return;
    cfg->has_threadgroup_memory = r > 0;
    r = get_u64(lookup, ctx, ws, &cfg->working_set, cfg);
    if (r < 0)
        return;
    cfg->has_working_set = r > 0;
    const char *raw = lookup(ff, ctx);
    if (raw != NULL && !parse_forced(ff, raw, cfg))
        return;
    raw = lookup(dn, ctx);
    if (raw != NULL && !parse_device_name(dn, raw, cfg))
        return;
    cfg->has_device_name = raw != NULL;
    cfg->accepted = 1;
}

static void parse_lume_form(capshim_lookup_fn lookup, void *ctx,
                            struct capshim_metal_config *cfg)
{
    const char *const fam = LUME_NAME(appleFamilyMax);
    const char *const tg = LUME_NAME(maxThreadgroupMemoryLength);
    const char *const ws = LUME_NAME(recommendedMaxWorkingSetSize);
    int r = get_u64(lookup, ctx, fam, &cfg->apple_family_max, cfg);
    if (r < 0)
        return;
    if (r == 0) {
        size_t len = 0;
        (void)capshim_buf_printf(cfg->reason, sizeof cfg->reason, &len,
                                 "%s is required with the LUME_METAL_* spelling", fam);
        return;
    }
    if (!apple_family_ok(cfg, fam, lookup(fam, ctx), cfg->apple_family_max))
        return;
    cfg->has_apple_family_max = 1;
    r = get_u64(lookup, ctx, tg, &cfg->threadgroup_memory, cfg);
    if (r < 0)
        return;
    if (r == 0)
        cfg->threadgroup_memory = LUME_DEFAULT_THREADGROUP;
    cfg->has_threadgroup_memory = 1;
    r = get_u64(lookup, ctx, ws, &cfg->working_set, cfg);
    if (r < 0)
        return;
    cfg->has_working_set = r > 0;
    cfg->accepted = 1;
}

void capshim_metal_config_parse(capshim_lookup_fn lookup, void *ctx,
                                struct capshim_metal_config *cfg)
{
    memset(cfg, 0, sizeof *cfg);
    int any_capshim = 0, any_lume = 0;
    for (size_t i = 0; capshim_metal_config_names[i] != NULL; i++) {
        if (lookup(capshim_metal_config_names[i], ctx) == NULL)
            continue;
        if (i < CAPSHIM_VAR_COUNT)
            any_capshim = 1;
        else
            any_lume = 1;
    }
    if (any_capshim) {
        cfg->form = CAPSHIM_FORM_CAPSHIM;
        cfg->lume_ignored = any_lume;
        parse_capshim_form(lookup, ctx, cfg);
    } else if (any_lume) {
        cfg->form = CAPSHIM_FORM_LUME;
        parse_lume_form(lookup, ctx, cfg);
    } else {
        size_t len = 0;
        (void)capshim_buf_printf(cfg->reason, sizeof cfg->reason, &len,
                                 "no configuration: set %s or %s", CAPSHIM_NAME(appleFamilyMax),
                                 LUME_NAME(appleFamilyMax));
    }
    if (cfg->accepted)
        cfg->reason[0] = '\0';
}

int capshim_metal_config_json(const struct capshim_metal_config *cfg, char *buf,
                              size_t cap, size_t *len)
{
    int rc = capshim_buf_printf(buf, cap, len, "{\"form\":\"%s\"",
                                cfg->form == CAPSHIM_FORM_LUME ? "lume" : "capshim");
    if (cfg->has_apple_family_max)
        rc |= capshim_buf_printf(buf, cap, len, ",\"appleFamilyMax\":%llu",
                                 (unsigned long long)cfg->apple_family_max);
    if (cfg->has_threadgroup_memory)
        rc |= capshim_buf_printf(buf, cap, len, ",\"maxThreadgroupMemoryLength\":%llu",
                                 (unsigned long long)cfg->threadgroup_memory);
    if (cfg->has_working_set)
        rc |= capshim_buf_printf(buf, cap, len, ",\"recommendedMaxWorkingSetSize\":%llu",
                                 (unsigned long long)cfg->working_set);
    if (cfg->n_forced > 0) {
        rc |= capshim_buf_printf(buf, cap, len, ",\"forceFamilies\":[");
        for (size_t i = 0; i < cfg->n_forced; i++)
            rc |= capshim_buf_printf(buf, cap, len, "%s%llu", i ? "," : "",
                                     (unsigned long long)cfg->forced[i]);
        rc |= capshim_buf_printf(buf, cap, len, "]");
    }
    if (cfg->has_device_name) {
        rc |= capshim_buf_printf(buf, cap, len, ",\"deviceName\":\"");
        rc |= capshim_json_escape(buf, cap, len, cfg->device_name, CAPSHIM_DEVICE_NAME_MAX);
        rc |= capshim_buf_printf(buf, cap, len, "\"");
    }
    if (cfg->lume_ignored)
        rc |= capshim_buf_printf(buf, cap, len, ",\"ignored\":\"LUME_METAL_* (capshim form set)\"");
    rc |= capshim_buf_printf(buf, cap, len, "}");
    return rc;
}

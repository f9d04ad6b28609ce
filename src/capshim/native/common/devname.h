/* The device-name rule of the capshim native shims: how a configuration
 * carries the device name a profile answers (Vulkan deviceName, Metal
 * MTLDevice.name; docs/profiles.md, "Device identity"), written once and used
 * by the Vulkan layer's parser (config.c) and the Metal shim's (metal_config.c).
 *
 * The text is percent-encoded (RFC 3986: bytes other than A-Z a-z 0-9 - . _ ~
 * as %XX, hex digits in either case). Decoded, it is 1..255 bytes of
 * well-formed UTF-8 without C0, DEL or C1 controls; 255 is Vulkan's
 * VK_MAX_PHYSICAL_DEVICE_NAME_SIZE (256, vulkan_core.h) less the NUL, and the
 * one limit of both APIs (capshim.profiles.model.DEVICE_NAME_MAX_BYTES is the
 * same number on the Python side, which encodes).
 *
 * Header only (static functions), plain C11, no allocation: each parser
 * stays buildable and fuzzable on its own.
 */
#ifndef CAPSHIM_DEVNAME_H
#define CAPSHIM_DEVNAME_H

#include <stddef.h>

/* Buffer size of a decoded name, NUL included. */
#define CAPSHIM_DEVICE_NAME_MAX 256

enum capshim_devname_result {
    CAPSHIM_DEVNAME_OK = 0,
    CAPSHIM_DEVNAME_BAD_ESCAPE,  /* '%' not followed by two hex digits */
    CAPSHIM_DEVNAME_RAW_BYTE,    /* a byte that must be percent-encoded (*bad holds it) */
    CAPSHIM_DEVNAME_TOO_LONG,    /* more than CAPSHIM_DEVICE_NAME_MAX - 1 bytes decoded */
    CAPSHIM_DEVNAME_EMPTY,
    CAPSHIM_DEVNAME_NOT_CLEAN    /* not UTF-8, or a control character */
};

static inline int capshim_devname_hex(char c)
{
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    return -1;
}

/* Whether s (n bytes) is well-formed UTF-8 (Unicode 15, table 3-7: no overlongs,
 * no surrogates, nothing above U+10FFFF) without C0, DEL or C1 controls. */
static inline int capshim_devname_clean_utf8(const unsigned char *s, size_t n)
{
    for (size_t i = 0; i < n;) {
        unsigned char c = s[i];
        size_t len = c < 0x80 ? 1 : (c >= 0xC2 && c <= 0xDF) ? 2 : (c >= 0xE0 && c <= 0xEF) ? 3
                                   : (c >= 0xF0 && c <= 0xF4) ? 4 : 0;
        if (len == 0 || i + len > n) return 0;
        if (len == 1 && (c < 0x20 || c == 0x7f)) return 0;
        unsigned char lo = 0x80, hi = 0xBF;
        if (c == 0xE0) lo = 0xA0;
        if (c == 0xED) hi = 0x9F;
        if (c == 0xF0) lo = 0x90;
        if (c == 0xF4) hi = 0x8F;
        for (size_t k = 1; k < len; k++) {
            unsigned char t = s[i + k];
            if (t < (k == 1 ? lo : 0x80) || t > (k == 1 ? hi : 0xBF)) return 0;
        }
        if (c == 0xC2 && s[i + 1] < 0xA0) return 0; /* C1 controls U+0080..U+009F */
        i += len;
    }
    return 1;
}

/* Percent-decodes val into out (CAPSHIM_DEVICE_NAME_MAX bytes, always
 * NUL-terminated; "" unless the result is CAPSHIM_DEVNAME_OK). *bad gets the
 * offending raw byte for CAPSHIM_DEVNAME_RAW_BYTE. */
static inline enum capshim_devname_result capshim_devname_decode(const char *val, char *out, char *bad)
{
    size_t n = 0;
    out[0] = '\0';
    for (const char *p = val; *p; p++) {
        int c = (unsigned char)*p;
        if (*p == '%') {
            int h = capshim_devname_hex(p[1]), l = h < 0 ? -1 : capshim_devname_hex(p[2]);
            if (l < 0) {
                out[0] = '\0';
                return CAPSHIM_DEVNAME_BAD_ESCAPE;
            }
            c = h * 16 + l;
            p += 2;
        } else if (!((*p >= 'A' && *p <= 'Z') || (*p >= 'a' && *p <= 'z') || (*p >= '0' && *p <= '9') ||
                     *p == '-' || *p == '.' || *p == '_' || *p == '~')) {
            *bad = *p;
            out[0] = '\0';
            return CAPSHIM_DEVNAME_RAW_BYTE;
        }
        if (n + 1 >= CAPSHIM_DEVICE_NAME_MAX) {
            out[0] = '\0';
            return CAPSHIM_DEVNAME_TOO_LONG;
        }
        out[n++] = (char)c;
    }
    out[n] = '\0';
    if (n == 0)
        return CAPSHIM_DEVNAME_EMPTY;
    if (!capshim_devname_clean_utf8((const unsigned char *)out, n)) {
        out[0] = '\0';
        return CAPSHIM_DEVNAME_NOT_CLEAN;
    }
    return CAPSHIM_DEVNAME_OK;
}

#endif

/* Strict parser of the capshim Vulkan layer configuration (see config.h). */
#include "config.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void set_err(char *err, size_t errlen, size_t line, const char *fmt, ...) {
    if (err == NULL || errlen == 0) return;
    int n = 0;
    if (line > 0) n = snprintf(err, errlen, "line %zu: ", line);
    if (n < 0 || (size_t)n >= errlen) return;
    va_list ap;
    va_start(ap, fmt);
    (void)vsnprintf(err + n, errlen - (size_t)n, fmt, ap);
    va_end(ap);
}

int capshim_parse_u64(const char *s, uint64_t *out) {
    if (s == NULL || out == NULL) return -1;
    if (s[0] < '0' || s[0] > '9') return -1; /* no sign, space or empty */
    errno = 0;
    char *end = NULL;
    unsigned long long v = strtoull(s, &end, 0);
    if (errno != 0 || end == s || end == NULL || *end != '\0') return -1;
    *out = (uint64_t)v;
    return 0;
}

const struct capshim_value *capshim_config_value(const struct capshim_config *cfg, const char *key) {
    if (cfg == NULL || key == NULL) return NULL;
    for (size_t i = 0; i < cfg->nvalues; i++)
        if (strcmp(cfg->values[i].key, key) == 0) return &cfg->values[i];
    return NULL;
}

const struct capshim_ext *capshim_config_ext(const struct capshim_config *cfg, const char *name) {
    if (cfg == NULL || name == NULL) return NULL;
    for (size_t i = 0; i < cfg->nexts; i++)
        if (strcmp(cfg->exts[i].name, name) == 0) return &cfg->exts[i];
    return NULL;
}

uint32_t capshim_answer(int type, int sem, int direction, uint32_t stock, uint32_t cfg) {
    int stronger_up = direction == CAPSHIM_RAISE;
    if (type == CAPSHIM_BOOL) {
        if (stronger_up) return (stock || cfg) ? (stock ? stock : 1u) : 0u;
        return (stock && cfg) ? stock : 0u;
    }
    if (type == CAPSHIM_FLAGS) return stronger_up ? (stock | cfg) : (stock & cfg);
    if (sem == CAPSHIM_SEM_EXACT) return cfg;
    if (sem == CAPSHIM_SEM_LOWER) stronger_up = !stronger_up;
    if (stronger_up) return stock > cfg ? stock : cfg;
    return stock < cfg ? stock : cfg;
}

static int valid_ext_name(const char *s) {
    if (strncmp(s, "VK_", 3) != 0 || s[3] == '\0') return 0;
    for (const char *p = s; *p; p++) {
        char c = *p;
        if (!((c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_')) return 0;
    }
    return 1;
}

/* deviceName=TEXT: the shared rule (devname.h) into out (CAPSHIM_DEVICE_NAME_MAX bytes). */
static int parse_device_name(const char *val, char *out, size_t lineno, char *err, size_t errlen) {
    char bad = 0;
    switch (capshim_devname_decode(val, out, &bad)) {
    case CAPSHIM_DEVNAME_OK: return 0;
    case CAPSHIM_DEVNAME_BAD_ESCAPE:
        set_err(err, errlen, lineno, "key 'deviceName': '%%' not followed by two hex digits");
        break;
    case CAPSHIM_DEVNAME_RAW_BYTE:
        set_err(err, errlen, lineno, "key 'deviceName': byte '%c' must be percent-encoded", bad);
        break;
    case CAPSHIM_DEVNAME_TOO_LONG:
        set_err(err, errlen, lineno, "key 'deviceName': longer than %d bytes", CAPSHIM_DEVICE_NAME_MAX - 1);
        break;
    case CAPSHIM_DEVNAME_EMPTY: set_err(err, errlen, lineno, "key 'deviceName': empty"); break;
    case CAPSHIM_DEVNAME_NOT_CLEAN:
        set_err(err, errlen, lineno, "key 'deviceName': not UTF-8 without control characters");
        break;
    }
    return -1;
}

/* profile=NAME: 1..64 bytes of A-Z a-z 0-9 . _ - */
static int parse_profile_name(const char *val, char *out, size_t lineno, char *err, size_t errlen) {
    size_t n = strlen(val);
    int ok = n > 0 && n < CAPSHIM_PROFILE_NAME_MAX;
    for (size_t i = 0; ok && i < n; i++) {
        char c = val[i];
        ok = (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '.' || c == '_' ||
             c == '-';
    }
    if (!ok) {
        set_err(err, errlen, lineno, "key 'profile': '%.80s' is not 1..%d bytes of A-Z a-z 0-9 . _ -", val,
                CAPSHIM_PROFILE_NAME_MAX - 1);
        return -1;
    }
    memcpy(out, val, n + 1);
    return 0;
}

static int hexval(char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    return -1;
}

/* One devices= spec of n bytes at s: an index (no leading zero) or uuid:HEX32. */
static int parse_device_spec(const char *s, size_t n, struct capshim_device_spec *out) {
    memset(out, 0, sizeof(*out));
    if (n == 5 + 2 * CAPSHIM_UUID_BYTES && strncmp(s, "uuid:", 5) == 0) {
        for (size_t i = 0; i < CAPSHIM_UUID_BYTES; i++) {
            int hi = hexval(s[5 + 2 * i]), lo = hexval(s[6 + 2 * i]);
            if (hi < 0 || lo < 0) return -1;
            out->uuid[i] = (unsigned char)(hi * 16 + lo);
        }
        out->is_uuid = 1;
        return 0;
    }
    if (n == 0 || n > 2 || (n == 2 && s[0] == '0')) return -1;
    uint32_t v = 0;
    for (size_t i = 0; i < n; i++) {
        if (s[i] < '0' || s[i] > '9') return -1;
        v = v * 10u + (uint32_t)(s[i] - '0');
    }
    if (v > CAPSHIM_DEVICE_INDEX_MAX) return -1;
    out->index = v;
    return 0;
}

static int same_spec(const struct capshim_device_spec *a, const struct capshim_device_spec *b) {
    if (a->is_uuid != b->is_uuid) return 0;
    return a->is_uuid ? memcmp(a->uuid, b->uuid, CAPSHIM_UUID_BYTES) == 0 : a->index == b->index;
}

/* devices=SPEC[,SPEC]: see config.h. */
static int parse_devices(const char *val, struct capshim_config *out, size_t lineno, char *err, size_t errlen) {
    if (out->ndevices != 0) {
        set_err(err, errlen, lineno, "key 'devices' given twice");
        return -1;
    }
    size_t count = 0;
    for (const char *p = val;;) {
        size_t n = strcspn(p, ",");
        struct capshim_device_spec spec;
        if (parse_device_spec(p, n, &spec) != 0) {
            set_err(err, errlen, lineno,
                    "key 'devices': '%.*s' is not a device index 0..%d or uuid: and 32 lowercase hex digits",
                    (int)(n > 80 ? 80 : n), p, CAPSHIM_DEVICE_INDEX_MAX);
            goto bad;
        }
        for (size_t i = 0; i < count; i++) {
            if (same_spec(&out->devices[i], &spec)) {
                set_err(err, errlen, lineno, "key 'devices': '%.*s' given twice", (int)(n > 80 ? 80 : n), p);
                goto bad;
            }
        }
        if (count >= CAPSHIM_MAX_DEVICE_SPECS) {
            set_err(err, errlen, lineno, "key 'devices': more than %d devices", CAPSHIM_MAX_DEVICE_SPECS);
            goto bad;
        }
        out->devices[count++] = spec;
        if (p[n] == '\0') break;
        p += n + 1;
    }
    out->ndevices = count;
    return 0;
bad:
    memset(out->devices, 0, sizeof out->devices);
    return -1;
}

int capshim_config_names_device(const struct capshim_config *cfg, uint32_t index, const unsigned char *uuid) {
    if (cfg == NULL) return 0;
    if (cfg->ndevices == 0) return 1;
    for (size_t i = 0; i < cfg->ndevices && i < CAPSHIM_MAX_DEVICE_SPECS; i++) {
        const struct capshim_device_spec *d = &cfg->devices[i];
        if (d->is_uuid ? (uuid != NULL && memcmp(d->uuid, uuid, CAPSHIM_UUID_BYTES) == 0) : d->index == index)
            return 1;
    }
    return 0;
}

size_t capshim_device_specs(const struct capshim_config *cfg, char texts[][CAPSHIM_SPEC_TEXT_MAX],
                            const char **specs) {
    for (size_t i = 0; i < cfg->ndevices; i++) {
        if (cfg->devices[i].is_uuid)
            capshim_uuid_text(cfg->devices[i].uuid, texts[i], CAPSHIM_SPEC_TEXT_MAX);
        else
            snprintf(texts[i], CAPSHIM_SPEC_TEXT_MAX, "%u", cfg->devices[i].index);
        specs[i] = texts[i];
    }
    return cfg->ndevices;
}

void capshim_uuid_text(const unsigned char *uuid, char *out, size_t outlen) {
    static const char hex[] = "0123456789abcdef";
    if (out == NULL || outlen < 6 + 2 * CAPSHIM_UUID_BYTES) {
        if (out != NULL && outlen > 0) out[0] = '\0';
        return;
    }
    memcpy(out, "uuid:", 5);
    for (size_t i = 0; i < CAPSHIM_UUID_BYTES; i++) {
        out[5 + 2 * i] = hex[uuid[i] >> 4];
        out[6 + 2 * i] = hex[uuid[i] & 15];
    }
    out[5 + 2 * CAPSHIM_UUID_BYTES] = '\0';
}

void capshim_uuid_dashed(const unsigned char *uuid, char *out, size_t outlen) {
    static const char hex[] = "0123456789abcdef";
    if (out == NULL || outlen < 37) {
        if (out != NULL && outlen > 0) out[0] = '\0';
        return;
    }
    size_t k = 0;
    for (size_t i = 0; i < CAPSHIM_UUID_BYTES; i++) {
        if (i == 4 || i == 6 || i == 8 || i == 10) out[k++] = '-';
        out[k++] = hex[uuid[i] >> 4];
        out[k++] = hex[uuid[i] & 15];
    }
    out[k] = '\0';
}

int capshim_config_paths(const char *value, char *buf, size_t buflen, const char *paths[CAPSHIM_MAX_CONFIGS],
                         char *err, size_t errlen) {
    if (value == NULL || value[0] == '\0') {
        set_err(err, errlen, 0, "no configuration path");
        return -1;
    }
    size_t n = strlen(value);
    if (buf == NULL || n >= buflen) {
        set_err(err, errlen, 0, "configuration paths longer than %zu bytes", buflen > 0 ? buflen - 1 : 0);
        return -1;
    }
    memcpy(buf, value, n + 1);
    int count = 0;
    for (char *p = buf;;) {
        char *colon = strchr(p, ':');
        if (colon != NULL) *colon = '\0';
        if (p[0] == '\0') {
            set_err(err, errlen, 0, "an empty configuration path (two ':' in a row, or one at an end)");
            return -1;
        }
        if (count >= CAPSHIM_MAX_CONFIGS) {
            set_err(err, errlen, 0, "more than %d configuration paths", CAPSHIM_MAX_CONFIGS);
            return -1;
        }
        paths[count++] = p;
        if (colon == NULL) break;
        p = colon + 1;
    }
    return count;
}

/* Parse one NUL-terminated line (without its newline). */
static int parse_line(char *line, size_t lineno, const struct capshim_keyspec *keys, size_t nkeys,
                      struct capshim_config *out, char *err, size_t errlen) {
    if (line[0] == '\0' || line[0] == '#') return 0;
    char *eq = strchr(line, '=');
    if (eq == NULL) {
        set_err(err, errlen, lineno, "expected KEY=VALUE");
        return -1;
    }
    *eq = '\0';
    const char *key = line;
    const char *val = eq + 1;
    if (key[0] == '\0') {
        set_err(err, errlen, lineno, "empty key");
        return -1;
    }
    if (strcmp(key, "direction") == 0) {
        if (out->direction != 0) {
            set_err(err, errlen, lineno, "key 'direction' given twice");
            return -1;
        }
        if (strcmp(val, "raise") == 0) {
            out->direction = CAPSHIM_RAISE;
        } else if (strcmp(val, "lower") == 0) {
            out->direction = CAPSHIM_LOWER;
        } else {
            set_err(err, errlen, lineno, "key 'direction': '%.64s' is not 'raise' or 'lower'", val);
            return -1;
        }
        return 0;
    }
    if (strcmp(key, "profile") == 0 || strcmp(key, "deviceName") == 0) {
        int is_profile = key[0] == 'p';
        char *dst = is_profile ? out->profile : out->device_name;
        if (dst[0] != '\0') {
            set_err(err, errlen, lineno, "key '%s' given twice", key);
            return -1;
        }
        return is_profile ? parse_profile_name(val, dst, lineno, err, errlen)
                          : parse_device_name(val, dst, lineno, err, errlen);
    }
    if (strcmp(key, "devices") == 0) return parse_devices(val, out, lineno, err, errlen);
    uint64_t num = 0;
    if (strncmp(key, "extension.", 10) == 0) {
        const char *name = key + 10;
        if (strlen(name) >= CAPSHIM_EXT_NAME_MAX || !valid_ext_name(name)) {
            set_err(err, errlen, lineno, "'%.80s' is not an extension name", name);
            return -1;
        }
        if (capshim_config_ext(out, name) != NULL) {
            set_err(err, errlen, lineno, "extension '%.80s' given twice", name);
            return -1;
        }
        if (capshim_parse_u64(val, &num) != 0 || num > UINT32_MAX) {
            set_err(err, errlen, lineno, "key '%.80s': '%.64s' is not a whole number 0..4294967295", key, val);
            return -1;
        }
        if (out->nexts >= CAPSHIM_MAX_EXTENSIONS) {
            set_err(err, errlen, lineno, "more than %d extensions", CAPSHIM_MAX_EXTENSIONS);
            return -1;
        }
        struct capshim_ext *e = &out->exts[out->nexts++];
        memcpy(e->name, name, strlen(name) + 1);
        e->spec_version = (uint32_t)num;
        return 0;
    }
    const struct capshim_keyspec *spec = NULL;
    for (size_t i = 0; i < nkeys; i++) {
        if (keys[i].name != NULL && strcmp(keys[i].name, key) == 0) {
            spec = &keys[i];
            break;
        }
    }
    if (spec == NULL || strlen(key) >= CAPSHIM_KEY_MAX) {
        set_err(err, errlen, lineno, "unknown key '%.80s'", key);
        return -1;
    }
    if (capshim_config_value(out, key) != NULL) {
        set_err(err, errlen, lineno, "key '%.80s' given twice", key);
        return -1;
    }
    if (capshim_parse_u64(val, &num) != 0) {
        set_err(err, errlen, lineno, "key '%.80s': '%.64s' is not a whole number", key, val);
        return -1;
    }
    if (spec->kind == CAPSHIM_BOOL && num > 1) {
        set_err(err, errlen, lineno, "key '%.80s': '%.64s' is not 0 or 1", key, val);
        return -1;
    }
    if (num > UINT32_MAX && spec->kind != CAPSHIM_U64) {
        set_err(err, errlen, lineno, "key '%.80s': '%.64s' does not fit in 32 bits", key, val);
        return -1;
    }
    /* VK_MAKE_API_VERSION: variant in bits 29..31, which a profile never sets;
     * 0 is no version at all. */
    if (spec->kind == CAPSHIM_VERSION && (num == 0 || (num >> 29) != 0)) {
        set_err(err, errlen, lineno, "key '%.80s': '%.64s' is %s", key, val,
                num == 0 ? "version 0" : "a version with a variant other than 0");
        return -1;
    }
#define SPEC_MIN_CHECK(k, min)                                                                                 \
    if (strcmp(key, #k) == 0 && num < (min)) {                                                                 \
        set_err(err, errlen, lineno, "key '%.80s': %llu is below the Vulkan spec's required minimum %u", key, \
                (unsigned long long)num, (unsigned)(min));                                                     \
        return -1;                                                                                             \
    }
    CAPSHIM_SPEC_MINIMUMS(SPEC_MIN_CHECK)
#undef SPEC_MIN_CHECK
    if (out->nvalues >= CAPSHIM_MAX_VALUES) {
        set_err(err, errlen, lineno, "more than %d values", CAPSHIM_MAX_VALUES);
        return -1;
    }
    struct capshim_value *v = &out->values[out->nvalues++];
    memcpy(v->key, key, strlen(key) + 1);
    v->kind = spec->kind;
    v->value = num;
    return 0;
}

int capshim_config_parse(const char *text, size_t len, const struct capshim_keyspec *keys, size_t nkeys,
                         struct capshim_config *out, char *err, size_t errlen) {
    if (err != NULL && errlen > 0) err[0] = '\0';
    if (out == NULL) return -1;
    memset(out, 0, sizeof(*out));
    if (text == NULL) {
        set_err(err, errlen, 0, "no configuration text");
        return -1;
    }
    if (len > CAPSHIM_CONFIG_MAX_BYTES) {
        set_err(err, errlen, 0, "configuration larger than %d bytes", CAPSHIM_CONFIG_MAX_BYTES);
        return -1;
    }
    char line[CAPSHIM_LINE_MAX + 1];
    size_t pos = 0, lineno = 0;
    while (pos < len) {
        lineno++;
        size_t start = pos;
        while (pos < len && text[pos] != '\n') pos++;
        size_t n = pos - start;
        if (pos < len) pos++; /* skip '\n' */
        if (n > CAPSHIM_LINE_MAX) {
            set_err(err, errlen, lineno, "line longer than %d bytes", CAPSHIM_LINE_MAX);
            goto fail;
        }
        memcpy(line, text + start, n);
        line[n] = '\0';
        for (size_t i = 0; i < n; i++) {
            unsigned char c = (unsigned char)line[i];
            if (c < 0x21 || c > 0x7e) {
                if (line[0] == '#' && (c == ' ' || c >= 0x80)) continue; /* comments: spaces and UTF-8 too */
                set_err(err, errlen, lineno, "byte 0x%02x at column %zu: only printable ASCII without spaces (comments: also spaces and UTF-8)", c,
                        i + 1);
                goto fail;
            }
        }
        if (parse_line(line, lineno, keys, nkeys, out, err, errlen) != 0) goto fail;
    }
    if (out->direction == 0) {
        set_err(err, errlen, 0, "key 'direction' is missing");
        goto fail;
    }
    return 0;
fail:
    memset(out, 0, sizeof(*out));
    return -1;
}

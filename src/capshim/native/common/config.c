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

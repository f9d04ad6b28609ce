/*
 * capshim Metal shim: configuration parsing and JSON text helpers.
 *
 * Plain C11, no Objective-C and no allocation, so that it can be fuzzed on
 * its own (tests/native/metal/fuzz_config.c).
 *
 * Two spellings are accepted (docs/contracts.md, "Shim configuration"; the names are written
 * once, in metal_vars.h):
 *   capshim form  CAPSHIM_METAL_APPLE_FAMILY_MAX        1001..1999 (optional)
 *                 CAPSHIM_METAL_MAX_THREADGROUP_MEMORY  bytes (optional)
 *                 CAPSHIM_METAL_RECOMMENDED_WORKING_SET_SIZE bytes (optional)
 *                 CAPSHIM_METAL_FORCE_FAMILIES          "5001,3003" (optional)
 *                 CAPSHIM_METAL_DEVICE_NAME             the name MTLDevice.name answers,
 *                                                       percent-encoded (optional; the
 *                                                       rule: native/common/devname.h)
 *                 at least one of them must be set.
 *   Cua/Lume form LUME_METAL_APPLE_FAMILY_MAX           1001..1999 (required)
 *                 LUME_METAL_MAX_THREADGROUP_MEMORY     bytes, default 65536
 *                 LUME_METAL_RECOMMENDED_WORKING_SET_SIZE bytes (optional)
 * The capshim form wins when any CAPSHIM_METAL_* variable is set; the Lume
 * variables are then ignored (and reported as ignored).
 *
 * Numbers: strtoull base 0 (decimal, 0x hex, 0 octal), the whole string, no
 * overflow, no leading sign or white space, not empty.
 */
#ifndef CAPSHIM_METAL_CONFIG_H
#define CAPSHIM_METAL_CONFIG_H

#include "devname.h" /* the device-name rule, shared with the other shims (native/common) */
#include "metal_vars.h"

#include <stddef.h>
#include <stdint.h>

#define CAPSHIM_MAX_FORCED 16
#define CAPSHIM_REASON_LEN 256

enum capshim_parse_result {
    CAPSHIM_PARSE_OK = 0,
    CAPSHIM_PARSE_EMPTY,
    CAPSHIM_PARSE_SIGN_OR_SPACE,
    CAPSHIM_PARSE_NOT_WHOLE,
    CAPSHIM_PARSE_OVERFLOW
};

enum capshim_form { CAPSHIM_FORM_NONE = 0, CAPSHIM_FORM_CAPSHIM, CAPSHIM_FORM_LUME };

struct capshim_metal_config {
    int accepted;                  /* 1 when the configuration is valid */
    enum capshim_form form;
    int has_apple_family_max;
    uint64_t apple_family_max;     /* MTLGPUFamilyApple ceiling, 1001..1999 */
    int has_threadgroup_memory;
    uint64_t threadgroup_memory;   /* bytes */
    int has_working_set;
    uint64_t working_set;          /* bytes */
    size_t n_forced;
    uint64_t forced[CAPSHIM_MAX_FORCED]; /* Mac/Common/Metal family numbers */
    int has_device_name;
    char device_name[CAPSHIM_DEVICE_NAME_MAX]; /* decoded UTF-8, for MTLDevice.name */
    int lume_ignored;              /* Lume variables present but capshim form used */
    char reason[CAPSHIM_REASON_LEN]; /* why not accepted, plain text */
};

/* Looks a variable up; returns NULL when it is not set. */
typedef const char *(*capshim_lookup_fn)(const char *name, void *ctx);

/* Parses an unsigned 64-bit number strictly (see above). */
enum capshim_parse_result capshim_parse_u64(const char *text, uint64_t *out);

/* Plain-text description of a parse result ("is not a whole number"). */
const char *capshim_parse_message(enum capshim_parse_result r);

/* Fills cfg from the variables that lookup returns. Never fails hard:
 * cfg->accepted is 0 and cfg->reason says why when the configuration is
 * invalid or absent. */
void capshim_metal_config_parse(capshim_lookup_fn lookup, void *ctx,
                                struct capshim_metal_config *cfg);

/* The names of every configuration variable, NULL-terminated: the
 * CAPSHIM_VAR_COUNT capshim names, then the Lume names (metal_vars.h). */
extern const char *const capshim_metal_config_names[];

/* Appends text to buf[*len..cap) as a JSON string body (no quotes), escaping
 * quotes, backslashes and control bytes; at most max_in input bytes are
 * copied and "..." is appended when the input was longer. Never writes past
 * cap - 1 and always NUL-terminates. Returns 0, or -1 when it ran out of
 * room (the text is then cut short, still valid JSON). */
int capshim_json_escape(char *buf, size_t cap, size_t *len, const char *text,
                        size_t max_in);

/* Appends a printf-formatted fragment; returns -1 when truncated. */
int capshim_buf_printf(char *buf, size_t cap, size_t *len, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

/* Writes the "values" JSON object of an accepted configuration into buf. */
int capshim_metal_config_json(const struct capshim_metal_config *cfg, char *buf,
                              size_t cap, size_t *len);

#endif

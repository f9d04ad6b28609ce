/* capshim shim configuration: a strict key=value parser (the Vulkan layer's and the CUDA shim's).
 *
 * No Vulkan dependency, so it builds and fuzzes in isolation (fuzz_config.c).
 *
 * Format, one entry per line ('\n'), no spaces, no carriage returns:
 *   # comment             ignored, as are empty lines (spaces and UTF-8 allowed,
 *                         no control characters)
 *   direction=lower       required, exactly once: "raise" or "lower"
 *   KEY=NUMBER            a known capability key (the caller's keyspec: the layer's
 *                         vulkan/caps_table.h, the CUDA shim's cuda/cuda_table.h)
 *   extension.NAME=NUMBER an extension's spec version to report; 0 hides it
 *   profile=NAME          optional, once: the profile's name (1..64 bytes of
 *                         A-Z a-z 0-9 . _ -), named in the layer's
 *                         VK_EXT_tooling_info description
 *   deviceName=TEXT       optional, once: the device name to answer, percent-encoded
 *                         (RFC 3986: bytes other than A-Z a-z 0-9 - . _ ~ as %XX);
 *                         decoded 1..255 bytes of UTF-8 without control characters
 *                         (VkPhysicalDeviceProperties::deviceName holds 256 with the NUL)
 *   devices=SPEC[,SPEC]   optional, once: the devices this configuration answers for (docs/
 *                         multi-gpu.md); without it, every device. SPEC is a device index
 *                         (decimal 0..CAPSHIM_DEVICE_INDEX_MAX, no leading zero: the Vulkan
 *                         physical-device index in the loader's order without the shim, the
 *                         CUDA ordinal the application sees) or uuid: and 32 lowercase hex
 *                         digits (VkPhysicalDeviceIDProperties::deviceUUID, cuDeviceGetUuid);
 *                         at most CAPSHIM_MAX_DEVICE_SPECS, none twice. A device matches when
 *                         any SPEC names it.
 * Numbers parse whole with base 0 (decimal, 0x hex, 0 octal): no sign, no
 * spaces, no trailing bytes, no overflow. Booleans are 0 or 1; kinds other
 * than CAPSHIM_U64 (the CUDA shim's byte sizes) must fit in 32 bits. A key
 * may appear once. Anything else is an invalid configuration: the parser
 * fills err with the line number and the reason.
 */
#ifndef CAPSHIM_CONFIG_H
#define CAPSHIM_CONFIG_H

#include <stddef.h>
#include <stdint.h>

/* The limits (CAPSHIM_MAX_VALUES, CAPSHIM_MAX_EXTENSIONS, CAPSHIM_KEY_MAX,
 * CAPSHIM_EXT_NAME_MAX, CAPSHIM_LINE_MAX, CAPSHIM_CONFIG_MAX_BYTES) and the
 * value types come from the capability table, as the profile schema's do
 * (config_limits.h, generated beside this file). */
#include "config_limits.h"

enum { CAPSHIM_RAISE = 1, CAPSHIM_LOWER = -1 };

struct capshim_keyspec {
    const char *name;
    int kind; /* enum capshim_kind */
};

struct capshim_value {
    char key[CAPSHIM_KEY_MAX];
    int kind;
    uint64_t value;
};

struct capshim_ext {
    char name[CAPSHIM_EXT_NAME_MAX];
    uint32_t spec_version; /* 0: hide */
};

/* Buffer sizes, NUL included. CAPSHIM_DEVICE_NAME_MAX (devname.h, the device-name rule
 * shared with the Metal shim) is VK_MAX_PHYSICAL_DEVICE_NAME_SIZE (vulkan_core.h; vulkan/layer.h
 * checks that they agree). */
#include "devname.h"
#define CAPSHIM_PROFILE_NAME_MAX 65

/* devices=: specs per configuration, the largest index; configurations per variable (the
 * configuration variables hold up to CAPSHIM_MAX_CONFIGS paths separated by ':'). */
#define CAPSHIM_MAX_DEVICE_SPECS 8
#define CAPSHIM_DEVICE_INDEX_MAX 63
#define CAPSHIM_MAX_CONFIGS 8
#define CAPSHIM_UUID_BYTES 16

struct capshim_device_spec {
    int is_uuid;
    uint32_t index;                           /* when !is_uuid */
    unsigned char uuid[CAPSHIM_UUID_BYTES];   /* when is_uuid */
};

struct capshim_config {
    int direction;
    char profile[CAPSHIM_PROFILE_NAME_MAX];   /* "" when not given */
    char device_name[CAPSHIM_DEVICE_NAME_MAX]; /* "" when not given (the device's own name stays) */
    size_t ndevices;                           /* 0: every device (no devices= key) */
    struct capshim_device_spec devices[CAPSHIM_MAX_DEVICE_SPECS];
    size_t nvalues;
    struct capshim_value values[CAPSHIM_MAX_VALUES];
    size_t nexts;
    struct capshim_ext exts[CAPSHIM_MAX_EXTENSIONS];
};

/* Parse len bytes of text. Returns 0 and fills out on success; returns -1 and
 * writes a NUL-terminated reason into err (errlen bytes) on failure, leaving
 * out zeroed. Never reads past text + len. */
int capshim_config_parse(const char *text, size_t len, const struct capshim_keyspec *keys, size_t nkeys,
                         struct capshim_config *out, char *err, size_t errlen);

/* Strict whole-string unsigned parse, base 0. Returns 0 on success. */
int capshim_parse_u64(const char *s, uint64_t *out);

/* The answer the layer gives for one key: the device's stock value under the
 * configuration value cfg, by the key's type (enum capshim_kind), kind (enum
 * capshim_sem) and direction (CAPSHIM_RAISE / CAPSHIM_LOWER). A raise never
 * answers weaker than stock, a lower never stronger: bool and flags or/and;
 * UPPER and VERSION max/min; LOWER (less is stronger) min/max; EXACT answers
 * cfg (profiles reach it only with override_exact). The Python twin is
 * capshim.profiles.checks.answer; a test compares the two. */
uint32_t capshim_answer(int type, int sem, int direction, uint32_t stock, uint32_t cfg);

/* Lookups into a parsed configuration; NULL when absent. */
const struct capshim_value *capshim_config_value(const struct capshim_config *cfg, const char *key);
const struct capshim_ext *capshim_config_ext(const struct capshim_config *cfg, const char *name);

/* Whether cfg answers for the device at index with uuid (CAPSHIM_UUID_BYTES bytes, or NULL when
 * unknown): 1 without devices=, else when a spec names the index or the uuid. */
int capshim_config_names_device(const struct capshim_config *cfg, uint32_t index, const unsigned char *uuid);

/* "uuid:" and 32 lowercase hex digits of uuid into out (at least 38 bytes). */
void capshim_uuid_text(const unsigned char *uuid, char *out, size_t outlen);
/* A devices= spec as text: its index, or capshim_uuid_text's spelling (NUL included). */
#define CAPSHIM_SPEC_TEXT_MAX 40
/* The specs of cfg's devices= key as text (the status events' "devices"): texts[i] holds spec i,
 * specs[i] points at it; returns how many (0 without devices=). */
size_t capshim_device_specs(const struct capshim_config *cfg, char texts[][CAPSHIM_SPEC_TEXT_MAX],
                            const char **specs);
/* uuid as 8-4-4-4-12 lowercase hex (as CUDA and nvidia-smi print it, without "GPU-") into out
 * (at least 37 bytes): the status events' "uuid". */
void capshim_uuid_dashed(const unsigned char *uuid, char *out, size_t outlen);

/* Splits a configuration variable's value into up to CAPSHIM_MAX_CONFIGS paths separated by ':'
 * (pointers into buf, a copy of value of buflen bytes). Returns the count, or -1 with a reason in
 * err: empty, an empty path, too long, or more than CAPSHIM_MAX_CONFIGS paths. */
int capshim_config_paths(const char *value, char *buf, size_t buflen, const char *paths[CAPSHIM_MAX_CONFIGS],
                         char *err, size_t errlen);

#endif

/* Fuzz target and standalone driver for the configuration parser (config.c), with one shim's
 * keys: the build puts that shim's fuzz_keys.h beside this file (vulkan/fuzz_keys.h: the Vulkan
 * layer's keys and extensions; cuda/fuzz_keys.h: the CUDA shim's keys, no extensions).
 *
 * libFuzzer:  clang -fsanitize=fuzzer,address,undefined -DCAPSHIM_LIBFUZZER -I SHIM fuzz_config.c config.c
 * standalone: cc -fsanitize=address,undefined -I SHIM fuzz_config.c config.c; ./a.out [--values] FILE...
 *             parses each file and prints "FILE: ok (N values, M extensions)" (no extensions:
 *             "FILE: ok (N values)") or "FILE: invalid: REASON"; with --values an accepted file's
 *             values follow on the same line, " KEY=VALUE ... extension.NAME=SPEC ... [profile=NAME]
 *             [deviceName=DECODED] [devices=SPEC,...]" (no extensions: " KEY=VALUE ...
 *             [deviceName=DECODED] [devices=SPEC,...]"; a uuid spec as uuid:HEX32).
 * fuzz_keys.h defines `keys[]` (struct capshim_keyspec) and WITH_EXTENSIONS (0 or 1): the one
 * hook a shim supplies, so this driver includes no API's header.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config.h"
#include "fuzz_keys.h"
#define NKEYS (sizeof keys / sizeof keys[0])

int LLVMFuzzerTestOneInput(const unsigned char *data, size_t size);

int LLVMFuzzerTestOneInput(const unsigned char *data, size_t size) {
    static struct capshim_config cfg;
    char err[256];
    int rc = capshim_config_parse((const char *)data, size, keys, NKEYS, &cfg, err, sizeof err);
    if (rc == 0 && cfg.direction == 0) abort(); /* a parsed configuration always has a direction */
    if (rc != 0 && (err[0] == '\0' || cfg.nvalues != 0)) abort(); /* a rejection always says why */
    for (size_t i = 0; rc == 0 && i < cfg.nvalues; i++)
        if (cfg.values[i].kind != CAPSHIM_U64 && cfg.values[i].value > 0xFFFFFFFFu) abort(); /* 32-bit kinds fit */
    if (cfg.ndevices > CAPSHIM_MAX_DEVICE_SPECS) abort();
    for (size_t i = 0; rc == 0 && i < cfg.ndevices; i++)
        if (!cfg.devices[i].is_uuid && cfg.devices[i].index > CAPSHIM_DEVICE_INDEX_MAX) abort();
    /* the configuration variable's list: never more paths than the maximum, none empty */
    static char pathbuf[CAPSHIM_CONFIG_MAX_BYTES + 1];
    static char value[CAPSHIM_CONFIG_MAX_BYTES + 1];
    size_t vn = size < CAPSHIM_CONFIG_MAX_BYTES ? size : CAPSHIM_CONFIG_MAX_BYTES;
    memcpy(value, data, vn);
    value[vn] = '\0';
    const char *paths[CAPSHIM_MAX_CONFIGS];
    int np = capshim_config_paths(value, pathbuf, sizeof pathbuf, paths, err, sizeof err);
    if (np > CAPSHIM_MAX_CONFIGS || (np < 0 && err[0] == '\0')) abort();
    for (int i = 0; i < np; i++)
        if (paths[i][0] == '\0') abort();
    return 0;
}

#ifndef CAPSHIM_LIBFUZZER
int main(int argc, char **argv) {
    static unsigned char buf[CAPSHIM_CONFIG_MAX_BYTES * 2];
    int values = argc > 1 && strcmp(argv[1], "--values") == 0;
    for (int i = 1 + values; i < argc; i++) {
        FILE *f = fopen(argv[i], "rb");
        if (f == NULL) {
            printf("%s: cannot open\n", argv[i]);
            return 2;
        }
        size_t n = fread(buf, 1, sizeof buf, f);
        fclose(f);
        LLVMFuzzerTestOneInput(buf, n);
        static struct capshim_config cfg;
        char err[256];
        if (capshim_config_parse((const char *)buf, n, keys, NKEYS, &cfg, err, sizeof err) != 0) {
            printf("%s: invalid: %s\n", argv[i], err);
            continue;
        }
        if (WITH_EXTENSIONS)
            printf("%s: ok (%zu values, %zu extensions)", argv[i], cfg.nvalues, cfg.nexts);
        else
            printf("%s: ok (%zu values)", argv[i], cfg.nvalues);
        for (size_t k = 0; values && k < cfg.nvalues; k++)
            printf(" %s=%llu", cfg.values[k].key, (unsigned long long)cfg.values[k].value);
        for (size_t k = 0; WITH_EXTENSIONS && values && k < cfg.nexts; k++)
            printf(" extension.%s=%u", cfg.exts[k].name, cfg.exts[k].spec_version);
        if (WITH_EXTENSIONS && values && cfg.profile[0] != '\0') printf(" profile=%s", cfg.profile);
        if (values && cfg.device_name[0] != '\0') printf(" deviceName=%s", cfg.device_name);
        for (size_t k = 0; values && k < cfg.ndevices; k++) {
            char uuid[40];
            if (cfg.devices[k].is_uuid) capshim_uuid_text(cfg.devices[k].uuid, uuid, sizeof uuid);
            if (cfg.devices[k].is_uuid)
                printf("%s%s", k == 0 ? " devices=" : ",", uuid);
            else
                printf("%s%u", k == 0 ? " devices=" : ",", cfg.devices[k].index);
        }
        printf("\n");
    }
    return 0;
}
#endif

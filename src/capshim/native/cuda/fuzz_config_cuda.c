/* Fuzz target and standalone driver for the configuration parser with the CUDA keyspec.
 *
 * The parser is the Vulkan layer's (native/vulkan/config.c); the keys and their types are
 * the CUDA shim's (CAPSHIM_CUDA_KEYS of cuda_table.h).
 * libFuzzer:  clang -fsanitize=fuzzer,address,undefined -DCAPSHIM_LIBFUZZER fuzz_config_cuda.c config.c
 * standalone: cc -fsanitize=address,undefined fuzz_config_cuda.c config.c; ./a.out [--values] FILE...
 *             prints "FILE: ok (N values)" (with --values: " KEY=VALUE ... [deviceName=DECODED]")
 *             or "FILE: invalid: REASON".
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config.h"
#include "cuda_table.h"

#define KEYSPEC(key, type) {#key, type},
static const struct capshim_keyspec keys[] = {CAPSHIM_CUDA_KEYS(KEYSPEC)};
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
        printf("%s: ok (%zu values)", argv[i], cfg.nvalues);
        for (size_t k = 0; values && k < cfg.nvalues; k++)
            printf(" %s=%llu", cfg.values[k].key, (unsigned long long)cfg.values[k].value);
        if (values && cfg.device_name[0] != '\0') printf(" deviceName=%s", cfg.device_name);
        printf("\n");
    }
    return 0;
}
#endif

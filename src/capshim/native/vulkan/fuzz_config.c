/* Fuzz target and standalone driver for the configuration parser.
 *
 * libFuzzer:  clang -fsanitize=fuzzer,address,undefined -DCAPSHIM_LIBFUZZER fuzz_config.c config.c
 * standalone: cc -fsanitize=address,undefined fuzz_config.c config.c; ./a.out FILE...
 *             parses each file and prints "ok" or "invalid: REASON" per file.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config.h"

static const struct capshim_keyspec keys[] = {
    {"maxComputeSharedMemorySize", 2}, {"shaderFloat16", 1}, {"subgroupSupportedOperations", 3}, {"apiVersion", 4}};

int LLVMFuzzerTestOneInput(const unsigned char *data, size_t size);

int LLVMFuzzerTestOneInput(const unsigned char *data, size_t size) {
    static struct capshim_config cfg;
    char err[256];
    int rc = capshim_config_parse((const char *)data, size, keys, sizeof keys / sizeof keys[0], &cfg, err, sizeof err);
    if (rc == 0 && cfg.direction == 0) abort(); /* a parsed configuration always has a direction */
    if (rc != 0 && (err[0] == '\0' || cfg.nvalues != 0)) abort(); /* a rejection always says why */
    return 0;
}

#ifndef CAPSHIM_LIBFUZZER
int main(int argc, char **argv) {
    static unsigned char buf[CAPSHIM_CONFIG_MAX_BYTES * 2];
    for (int i = 1; i < argc; i++) {
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
        if (capshim_config_parse((const char *)buf, n, keys, sizeof keys / sizeof keys[0], &cfg, err, sizeof err) == 0)
            printf("%s: ok (%zu values, %zu extensions)\n", argv[i], cfg.nvalues, cfg.nexts);
        else
            printf("%s: invalid: %s\n", argv[i], err);
    }
    return 0;
}
#endif

/*
 * Fuzz harness for the Metal shim's configuration parser (metal_config.c),
 * which has no Objective-C dependency.
 *
 * libFuzzer:   clang -fsanitize=fuzzer,address,undefined -DCAPSHIM_LIBFUZZER \
 *                  -I src/capshim/native/metal fuzz_config.c metal_config.c
 * Standalone:  gcc -fsanitize=address,undefined ... fuzz_config.c metal_config.c
 *              ./fuzz_config FILE...   (one result block per file on stdout)
 *
 * An input is used three ways: whole, as one number (capshim_parse_u64);
 * whole, through the JSON escaper (small and large buffers); and as
 * NAME=VALUE lines for the configuration parser. Invariants that fail call
 * abort(), which both modes report.
 */
#include "metal_config.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_PAIRS 16

struct env { const char *names[MAX_PAIRS]; const char *values[MAX_PAIRS]; size_t n; };

static const char *lookup(const char *name, void *ctx)
{
    const struct env *e = ctx;
    for (size_t i = 0; i < e->n; i++)
        if (strcmp(e->names[i], name) == 0)
            return e->values[i];
    return NULL;
}

static void check(int ok, const char *what)
{
    if (!ok) {
        fprintf(stderr, "invariant violated: %s\n", what);
        abort();
    }
}

/* A JSON string body: no raw control bytes, quotes only escaped, ASCII. */
static void check_json_body(const char *s, size_t len, size_t cap)
{
    check(len < cap && s[len] == '\0' && strlen(s) == len, "escape length");
    for (size_t i = 0; i < len; i++) {
        unsigned char c = (unsigned char)s[i];
        check(c >= 0x20 && c < 0x7f, "escape left a raw byte");
        if (c == '\\') {
            check(i + 1 < len, "dangling backslash");
            char n = s[i + 1];
            check(n == '\\' || n == '"' || n == 'u', "bad escape");
            i += n == 'u' ? 5 : 1;
            check(i < len, "short \\u escape");
        } else {
            check(c != '"', "unescaped quote");
        }
    }
}

static void run(const uint8_t *data, size_t size, FILE *out)
{
    char *s = malloc(size + 1);
    if (s == NULL)
        return;
    memcpy(s, data, size);
    s[size] = '\0';

    uint64_t v = 0;
    enum capshim_parse_result r = capshim_parse_u64(s, &v);
    if (r == CAPSHIM_PARSE_OK) {
        check(s[0] >= '0' && s[0] <= '9', "accepted a non-digit start");
        /* A plain decimal (no leading zero) must print back the same. */
        if (s[0] != '0') {
            char back[32];
            snprintf(back, sizeof back, "%llu", (unsigned long long)v);
            check(strcmp(back, s) == 0, "decimal round trip");
        }
        if (out)
            fprintf(out, "u64: ok %llu\n", (unsigned long long)v);
    } else if (out) {
        fprintf(out, "u64: error %s\n", capshim_parse_message(r));
    }

    size_t caps[2] = {16, 4096};
    for (int k = 0; k < 2; k++) {
        char buf[4096];
        size_t len = 0;
        buf[0] = '\0';
        (void)capshim_json_escape(buf, caps[k], &len, s, 1000);
        check_json_body(buf, len, caps[k]);
    }

    /* NAME=VALUE lines (the bytes up to the first NUL). */
    struct env e = {.n = 0};
    char *line = s;
    while (line != NULL && *line != '\0' && e.n < MAX_PAIRS) {
        char *nl = strchr(line, '\n');
        if (nl != NULL)
            *nl = '\0';
        char *eq = strchr(line, '=');
        if (eq != NULL) {
            *eq = '\0';
            e.names[e.n] = line;
            e.values[e.n] = eq + 1;
            e.n++;
        }
        line = nl ? nl + 1 : NULL;
    }
    struct capshim_metal_config cfg;
    capshim_metal_config_parse(lookup, &e, &cfg);
    check(memchr(cfg.reason, '\0', sizeof cfg.reason) != NULL, "reason not terminated");
    if (cfg.accepted) {
        check(cfg.reason[0] == '\0', "accepted with a reason");
        check(!cfg.has_apple_family_max ||
              (cfg.apple_family_max >= 1001 && cfg.apple_family_max <= 1999), "family range");
        check(cfg.form == CAPSHIM_FORM_CAPSHIM || cfg.has_apple_family_max, "lume needs family");
        check(cfg.n_forced <= CAPSHIM_MAX_FORCED, "forced count");
        char json[1024];
        size_t len = 0;
        check(capshim_metal_config_json(&cfg, json, sizeof json, &len) == 0, "values json fits");
        check(json[0] == '{' && json[len - 1] == '}', "values json shape");
        if (out)
            fprintf(out, "config: accepted %s\n", json);
    } else {
        check(cfg.reason[0] != '\0', "rejected without a reason");
        char buf[CAPSHIM_REASON_LEN * 6 + 8];
        size_t len = 0;
        (void)capshim_json_escape(buf, sizeof buf, &len, cfg.reason, CAPSHIM_REASON_LEN);
        check_json_body(buf, len, sizeof buf);
        if (out)
            fprintf(out, "config: rejected %s\n", buf);
    }
    free(s);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    run(data, size, NULL);
    return 0;
}

#ifndef CAPSHIM_LIBFUZZER
int main(int argc, char **argv)
{
    for (int i = 1; i < argc; i++) {
        FILE *f = fopen(argv[i], "rb");
        if (f == NULL) {
            perror(argv[i]);
            return 2;
        }
        static uint8_t buf[1 << 20];
        size_t n = fread(buf, 1, sizeof buf, f);
        fclose(f);
        printf("== %s\n", argv[i]);
        run(buf, n, stdout);
    }
    return 0;
}
#endif

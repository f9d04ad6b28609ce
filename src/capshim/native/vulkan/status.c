/* JSON-lines status reporting (see status.h). */
#define _GNU_SOURCE
#include "status.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static void put(struct capshim_json *j, const char *s) {
    size_t n = strlen(s);
    if (j->overflow || j->len + n + 3 >= sizeof(j->buf)) {
        j->overflow = 1;
        return;
    }
    memcpy(j->buf + j->len, s, n);
    j->len += n;
    j->buf[j->len] = '\0';
}

void capshim_json_escape(char *out, size_t outlen, const char *s) {
    if (outlen == 0) return;
    size_t o = 0;
    for (const unsigned char *p = (const unsigned char *)(s ? s : ""); *p; p++) {
        char tmp[8];
        const char *rep = NULL;
        if (*p == '"') rep = "\\\"";
        else if (*p == '\\') rep = "\\\\";
        else if (*p == '\n') rep = "\\n";
        else if (*p < 0x20 || *p >= 0x7f) {
            snprintf(tmp, sizeof tmp, "\\u%04x", (unsigned)*p);
            rep = tmp;
        }
        if (rep != NULL) {
            size_t n = strlen(rep);
            if (o + n >= outlen) break;
            memcpy(out + o, rep, n);
            o += n;
        } else {
            if (o + 1 >= outlen) break;
            out[o++] = (char)*p;
        }
    }
    out[o] = '\0';
}

static void key(struct capshim_json *j, const char *k) {
    char esc[256];
    capshim_json_escape(esc, sizeof esc, k);
    put(j, j->first ? "\"" : ",\"");
    j->first = 0;
    put(j, esc);
    put(j, "\":");
}

void capshim_json_begin(struct capshim_json *j, const char *event, const char *shim, const char *layer) {
    memset(j, 0, sizeof(*j));
    j->first = 1;
    put(j, "{");
    capshim_json_str(j, "event", event);
    capshim_json_str(j, "shim", shim);
    if (layer != NULL) capshim_json_str(j, "layer", layer);
    capshim_json_u64(j, "pid", (unsigned long long)getpid());
}

void capshim_json_str(struct capshim_json *j, const char *k, const char *value) {
    char esc[1024];
    capshim_json_escape(esc, sizeof esc, value);
    key(j, k);
    put(j, "\"");
    put(j, esc);
    put(j, "\"");
}

void capshim_json_u64(struct capshim_json *j, const char *k, unsigned long long value) {
    char num[32];
    snprintf(num, sizeof num, "%llu", value);
    key(j, k);
    put(j, num);
}

void capshim_json_bool(struct capshim_json *j, const char *k, int value) {
    key(j, k);
    put(j, value ? "true" : "false");
}

void capshim_json_raw(struct capshim_json *j, const char *k, const char *raw_json) {
    key(j, k);
    put(j, raw_json);
}

void capshim_json_end_and_write(struct capshim_json *j) {
    const char *path = getenv("CAPSHIM_STATUS_FILE");
    if (path == NULL || path[0] == '\0') return;
    const char *line = j->buf;
    char fallback[160];
    if (j->overflow) {
        snprintf(fallback, sizeof fallback, "{\"event\":\"truncated\",\"pid\":%ld}\n", (long)getpid());
        line = fallback;
    } else {
        put(j, "}\n");
        if (j->overflow) {
            snprintf(fallback, sizeof fallback, "{\"event\":\"truncated\",\"pid\":%ld}\n", (long)getpid());
            line = fallback;
        }
    }
    int saved = errno;
    int fd = open(path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0644);
    if (fd >= 0) {
        ssize_t w = write(fd, line, strlen(line));
        (void)w;
        close(fd);
    }
    errno = saved;
}

static char name[64];
static pthread_once_t name_once = PTHREAD_ONCE_INIT;

static void read_name(void) {
    int fd = open("/proc/self/comm", O_RDONLY | O_CLOEXEC);
    if (fd >= 0) {
        ssize_t n = read(fd, name, sizeof name - 1);
        close(fd);
        if (n > 0) {
            name[n] = '\0';
            char *nl = strchr(name, '\n');
            if (nl) *nl = '\0';
        } else {
            name[0] = '\0';
        }
    }
    if (name[0] == '\0') snprintf(name, sizeof name, "pid%ld", (long)getpid());
}

const char *capshim_process_name(void) {
    (void)pthread_once(&name_once, read_name);
    return name;
}

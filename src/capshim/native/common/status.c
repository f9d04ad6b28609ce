/* The one status-event writer (see status.h). */
#if !defined(__APPLE__)
#define _GNU_SOURCE
#endif
#include "status.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#if !defined(PATH_MAX)
#define PATH_MAX 4096
#endif

static void put_n(struct capshim_json *j, const char *s, size_t n) {
    /* Room is kept for the closing "}\n" and the NUL. */
    if (j->overflow || j->len + n + 3 > sizeof(j->buf)) {
        j->overflow = 1;
        return;
    }
    memcpy(j->buf + j->len, s, n);
    j->len += n;
    j->buf[j->len] = '\0';
}

static void put(struct capshim_json *j, const char *s) { put_n(j, s, strlen(s)); }

/* Ends the line; put_n always leaves room for these three bytes. */
static void close_line(struct capshim_json *j) {
    if (j->overflow) return;
    j->buf[j->len++] = '}';
    j->buf[j->len++] = '\n';
    j->buf[j->len] = '\0';
}

/* The escape of one byte into tmp (at least 8 bytes); returns its length. */
static size_t escape_byte(unsigned char c, char *tmp) {
    if (c == '"' || c == '\\') {
        tmp[0] = '\\';
        tmp[1] = (char)c;
        return 2;
    }
    if (c == '\n') {
        memcpy(tmp, "\\n", 2);
        return 2;
    }
    if (c < 0x20 || c >= 0x7f) {
        int n = snprintf(tmp, 8, "\\u%04x", (unsigned)c);
        return n > 0 ? (size_t)n : 0;
    }
    tmp[0] = (char)c;
    return 1;
}

void capshim_status_escape(char *out, size_t outlen, const char *s) {
    if (outlen == 0) return;
    size_t o = 0;
    for (const unsigned char *p = (const unsigned char *)(s ? s : ""); *p; p++) {
        char tmp[8];
        size_t n = escape_byte(*p, tmp);
        if (o + n >= outlen) break;
        memcpy(out + o, tmp, n);
        o += n;
    }
    out[o] = '\0';
}

/* A JSON string, quotes included; overflows the event rather than cutting it. */
static void put_string(struct capshim_json *j, const char *s) {
    put(j, "\"");
    for (const unsigned char *p = (const unsigned char *)(s ? s : ""); *p && !j->overflow; p++) {
        char tmp[8];
        put_n(j, tmp, escape_byte(*p, tmp));
    }
    put(j, "\"");
}

static void key(struct capshim_json *j, const char *k) {
    put(j, j->first ? "" : ",");
    j->first = 0;
    put_string(j, k);
    put(j, ":");
}

static void head(struct capshim_json *j, const char *event) {
    char num[32];
    j->len = 0;
    j->buf[0] = '\0';
    j->overflow = 0;
    j->first = 1;
    put(j, "{");
    snprintf(num, sizeof num, "%d", CAPSHIM_STATUS_SCHEMA);
    key(j, "schema");
    put(j, num);
    capshim_json_str(j, "event", event);
    capshim_json_str(j, "shim", j->shim);
    if (j->layer[0] != '\0') capshim_json_str(j, "layer", j->layer);
    capshim_json_u64(j, "pid", (unsigned long long)getpid());
}

void capshim_json_begin(struct capshim_json *j, const char *event, const char *shim, const char *layer) {
    memset(j, 0, sizeof(*j));
    snprintf(j->event, sizeof j->event, "%s", event ? event : "");
    snprintf(j->shim, sizeof j->shim, "%s", shim ? shim : "");
    snprintf(j->layer, sizeof j->layer, "%s", layer ? layer : "");
    head(j, j->event);
}

void capshim_json_str(struct capshim_json *j, const char *k, const char *value) {
    key(j, k);
    put_string(j, value);
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

void capshim_json_str_array(struct capshim_json *j, const char *k, const char *const *items, size_t n) {
    key(j, k);
    put(j, "[");
    for (size_t i = 0; i < n; i++) {
        if (i > 0) put(j, ",");
        put_string(j, items[i]);
    }
    put(j, "]");
}

void capshim_json_raw(struct capshim_json *j, const char *k, const char *raw_json) {
    key(j, k);
    put(j, raw_json);
}

static int quiet(void) {
    const char *q = getenv("CAPSHIM_QUIET");
    return q != NULL && strcmp(q, "1") == 0;
}

/* Describes a non-regular file type in words. */
static const char *kind_of(mode_t m) {
    if (S_ISFIFO(m)) return "a FIFO";
    if (S_ISSOCK(m)) return "a socket";
    if (S_ISCHR(m)) return "a character device";
    if (S_ISBLK(m)) return "a block device";
    if (S_ISDIR(m)) return "a directory";
    return "not a regular file";
}

/* A descriptor; -1 when it cannot be opened, -2 when it is not a regular file. */
static int open_regular(const char *path, int flags, char *err, size_t errlen) {
    int fd = open(path, flags | O_NONBLOCK | O_CLOEXEC, 0644);
    if (fd < 0) {
        if (errno == ENXIO) { /* a FIFO or socket with no reader: open(2) */
            snprintf(err, errlen, "not a regular file (a FIFO or socket)");
            return -2;
        }
        snprintf(err, errlen, "cannot open: %s", strerror(errno));
        return -1;
    }
    struct stat st;
    if (fstat(fd, &st) != 0) {
        snprintf(err, errlen, "cannot stat: %s", strerror(errno));
        close(fd);
        return -1;
    }
    if (!S_ISREG(st.st_mode)) {
        snprintf(err, errlen, "not a regular file (%s)", kind_of(st.st_mode));
        close(fd);
        return -2;
    }
    return fd;
}

int capshim_open_regular(const char *path, char *err, size_t errlen) {
    int fd = open_regular(path, O_RDONLY, err, errlen);
    return fd < 0 ? -1 : fd;
}

/* The status path, read once (the Metal shim scrubs its environment). */
static char status_path[PATH_MAX];
static pthread_once_t status_once = PTHREAD_ONCE_INIT;
static atomic_int status_refused;

static void read_status_path(void) {
    const char *p = getenv("CAPSHIM_STATUS_FILE");
    if (p != NULL && strlen(p) < sizeof status_path) memcpy(status_path, p, strlen(p) + 1);
}

static void write_to(const char *path, const char *line, size_t len);

static void write_line(const char *line, size_t len) {
    (void)pthread_once(&status_once, read_status_path);
    write_to(status_path, line, len);
}

static void write_to(const char *path, const char *line, size_t len) {
    if (path[0] == '\0' || atomic_load(&status_refused)) return;
    int saved = errno;
    char err[160];
    int fd = open_regular(path, O_WRONLY | O_APPEND | O_CREAT, err, sizeof err);
    if (fd < 0) {
        /* A file that is not regular is refused for good, and said once. */
        if (fd == -2 && atomic_exchange(&status_refused, 1) == 0 && !quiet()) {
            char msg[PATH_MAX + 256];
            char esc[PATH_MAX];
            capshim_status_escape(esc, sizeof esc, path);
            int n = snprintf(msg, sizeof msg, "capshim: status file %s refused: %s; no status is written\n", esc,
                             err);
            if (n > 0) {
                ssize_t w = write(STDERR_FILENO, msg, (size_t)n < sizeof msg ? (size_t)n : sizeof msg - 1);
                (void)w;
            }
        }
        errno = saved;
        return;
    }
    ssize_t w;
    do {
        w = write(fd, line, len); /* one write per line: O_APPEND keeps lines whole */
    } while (w < 0 && errno == EINTR);
    close(fd);
    errno = saved;
}

/* Closes the line (a "truncated" event in place of one over the limit); 0 when it can be written. */
static int finish(struct capshim_json *j) {
    close_line(j);
    if (j->overflow) {
        char original[sizeof j->event];
        memcpy(original, j->event, sizeof original);
        head(j, "truncated");
        capshim_json_str(j, "original_event", original);
        capshim_json_u64(j, "line_max", CAPSHIM_STATUS_LINE_MAX);
        close_line(j);
        if (j->overflow) return -1; /* only with a CAPSHIM_STATUS_LINE_MAX below ~300 bytes */
    }
    return 0;
}

void capshim_json_end_and_write(struct capshim_json *j) {
    if (finish(j) == 0) write_line(j->buf, j->len);
}

void capshim_json_end_and_write_now(struct capshim_json *j) {
    const char *p = getenv("CAPSHIM_STATUS_FILE");
    if (finish(j) == 0 && p != NULL && strlen(p) < PATH_MAX) write_to(p, j->buf, j->len);
}

static char name[64];
static pthread_once_t name_once = PTHREAD_ONCE_INIT;

static void read_name(void) {
#if defined(__APPLE__)
    const char *p = getprogname();
    snprintf(name, sizeof name, "%s", p ? p : "");
#else
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
#endif
    if (name[0] == '\0') snprintf(name, sizeof name, "pid%ld", (long)getpid());
}

const char *capshim_process_name(void) {
    (void)pthread_once(&name_once, read_name);
    return name;
}

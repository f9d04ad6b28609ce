/* The one status-event writer of the capshim native shims (the Vulkan layer
 * and the Metal shim both use it; docs/status.md describes the schema).
 *
 * Each event is one JSON object on one line, appended with one write(2) to
 * the file named by CAPSHIM_STATUS_FILE (read once, at the first event; the
 * Metal shim removes the variable from its environment later). Nothing is
 * written when it is unset. Every event starts with the same fields, in this
 * order:
 *
 *   {"schema":1,"event":NAME,"shim":"vulkan"|"metal",["layer":L,]"pid":N, ...}
 *
 * followed by the event's own fields in the order the caller adds them. An
 * event that does not fit in CAPSHIM_STATUS_LINE_MAX bytes is replaced by a
 * "truncated" event with the same leading fields and "original_event":NAME;
 * a line is never cut.
 *
 * The status path must be a regular file. It is opened non-blocking and
 * checked with fstat(2): a FIFO, socket, device or directory is refused,
 * once, with one stderr line (unless CAPSHIM_QUIET=1), and the process runs
 * on without status. Write failures are ignored: reporting never harms the
 * host process.
 *
 * Plain C11 plus POSIX; builds with gcc/clang on Linux and macOS.
 */
#ifndef CAPSHIM_STATUS_H
#define CAPSHIM_STATUS_H

#include <stddef.h>

/* Version of the event schema; bump it when a field changes meaning. */
#define CAPSHIM_STATUS_SCHEMA 1

#ifndef CAPSHIM_STATUS_LINE_MAX
#define CAPSHIM_STATUS_LINE_MAX 4096 /* bytes of one event line, newline included */
#endif

/* One event under construction, over a fixed buffer. */
struct capshim_json {
    char buf[CAPSHIM_STATUS_LINE_MAX];
    size_t len;
    int overflow;
    int first;
    char event[64]; /* leading fields, kept for a truncation event */
    char shim[16];
    char layer[64];
};

/* Starts an event: the leading fields above. layer may be NULL (Metal). */
void capshim_json_begin(struct capshim_json *j, const char *event, const char *shim, const char *layer);
void capshim_json_str(struct capshim_json *j, const char *key, const char *value);
void capshim_json_u64(struct capshim_json *j, const char *key, unsigned long long value);
void capshim_json_bool(struct capshim_json *j, const char *key, int value);
/* An array of n strings (entries that are NULL are written as ""). */
void capshim_json_str_array(struct capshim_json *j, const char *key, const char *const *items, size_t n);
/* raw_json must be one complete JSON value. */
void capshim_json_raw(struct capshim_json *j, const char *key, const char *raw_json);
/* Closes the event and appends it (or its truncation event) to the file. */
void capshim_json_end_and_write(struct capshim_json *j);
/* As capshim_json_end_and_write, to the file CAPSHIM_STATUS_FILE names now, leaving the path the
 * other events read once unread: a process template's event (the children it forks read their own). */
void capshim_json_end_and_write_now(struct capshim_json *j);

/* Escape s as JSON string content into out (NUL-terminated; stops, never
 * cutting an escape, when out is full). */
void capshim_status_escape(char *out, size_t outlen, const char *s);

/* The process's short name (/proc/self/comm on Linux, getprogname on macOS),
 * never NULL. */
const char *capshim_process_name(void);

/* Opens path for reading only when it is a regular file, without ever
 * blocking (O_NONBLOCK, then fstat). Returns the descriptor, or -1 with a
 * reason in err ("not a regular file (a FIFO)", "cannot open: ..."). */
int capshim_open_regular(const char *path, char *err, size_t errlen);

#endif

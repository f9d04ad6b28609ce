/* JSON-lines status reporting shared by the capshim native shims.
 *
 * Each event is one line appended (O_APPEND, one write) to the file named by
 * CAPSHIM_STATUS_FILE; nothing is written when it is unset. Failures to write
 * are ignored: reporting never harms the host process.
 */
#ifndef CAPSHIM_STATUS_H
#define CAPSHIM_STATUS_H

#include <stddef.h>

/* A small JSON object builder over a fixed buffer; overflow truncates the
 * event to a valid {"event":"truncated"} line rather than writing bad JSON. */
struct capshim_json {
    char buf[2048];
    size_t len;
    int overflow;
    int first;
};

void capshim_json_begin(struct capshim_json *j, const char *event, const char *shim, const char *layer);
void capshim_json_str(struct capshim_json *j, const char *key, const char *value);
void capshim_json_u64(struct capshim_json *j, const char *key, unsigned long long value);
void capshim_json_bool(struct capshim_json *j, const char *key, int value);
void capshim_json_raw(struct capshim_json *j, const char *key, const char *raw_json);
void capshim_json_end_and_write(struct capshim_json *j);

/* Escape s as JSON string content into out (NUL-terminated, truncated). */
void capshim_json_escape(char *out, size_t outlen, const char *s);

/* The process's short name (from /proc/self/comm), never NULL. */
const char *capshim_process_name(void);

#endif

/* status.c - error records (see status.h). One record per thread, a fixed buffer, no malloc. */
#include "core/status.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

enum { TESS_ERROR_RECORD_BYTES = 8192 };

static _Thread_local char record[TESS_ERROR_RECORD_BYTES];
static _Thread_local size_t record_len;
static int error_rank;
static tess_abort_fn abort_hook;
static void *abort_ctx;

static const struct {
    const char *name;
    int exit_code;
} status_table[] = {
    [TESS_OK] = {"OK", 0},
    [TESS_ERR_ARG] = {"ARG", 64},
    [TESS_ERR_MEM] = {"MEM", 71},
    [TESS_ERR_MPI] = {"MPI", 1},
    [TESS_ERR_IO] = {"IO", 74},
    [TESS_ERR_NOINPUT] = {"NOINPUT", 66},
    [TESS_ERR_CONFIG] = {"CONFIG", 78},
    [TESS_ERR_DATA] = {"DATA", 65},
    [TESS_ERR_DIVERGED] = {"DIVERGED", 3},
    [TESS_ERR_INTERNAL] = {"INTERNAL", 1},
};
_Static_assert(sizeof status_table / sizeof status_table[0] == TESS_STATUS_COUNT,
               "status_table must name every tess_status");

int tess_status_exit_code(tess_status s) {
    return (s >= 0 && s < TESS_STATUS_COUNT) ? status_table[s].exit_code : 1;
}

const char *tess_status_name(tess_status s) {
    return (s >= 0 && s < TESS_STATUS_COUNT) ? status_table[s].name : "UNKNOWN";
}

void tess_error_set_rank(int rank) { error_rank = rank; }

tess_status tess_error_push(tess_status s, const char *file, int line, const char *func,
                            const char *fmt, ...) {
    char buf[TESS_ERROR_RECORD_BYTES]; /* a line may carry another rank's record (tess_par_agree) */
    int n = snprintf(buf, sizeof buf, "[rank %d] %s:%d %s(): ", error_rank, file, line, func);
    if (n < 0) return s;
    va_list ap;
    va_start(ap, fmt);
    if ((size_t)n < sizeof buf) vsnprintf(buf + n, sizeof buf - (size_t)n, fmt, ap);
    va_end(ap);
    size_t len = strnlen(buf, sizeof buf - 1);
    if (record_len + len + 2 <= sizeof record) {
        memcpy(record + record_len, buf, len);
        record_len += len;
        record[record_len++] = '\n';
        record[record_len] = '\0';
    }
    return s;
}

const char *tess_error_text(void) { return record; }

void tess_error_clear(void) {
    record_len = 0;
    record[0] = '\0';
}

void tess_error_write(void) {
    if (record_len == 0) return;
    size_t off = 0;
    while (off < record_len) {
        ssize_t w = write(STDERR_FILENO, record + off, record_len - off);
        if (w <= 0) break;
        off += (size_t)w;
    }
}

void tess_set_abort_hook(tess_abort_fn fn, void *ctx) {
    abort_hook = fn;
    abort_ctx = ctx;
}

void tess_assert_fail(const char *cond, const char *file, int line, const char *func) {
    char buf[512];
    int n = snprintf(buf, sizeof buf, "[rank %d] %s:%d %s(): assertion failed: %s\n", error_rank,
                     file, line, func, cond);
    if (n > 0) (void)!write(STDERR_FILENO, buf, (size_t)n < sizeof buf ? (size_t)n : sizeof buf - 1);
    if (abort_hook) abort_hook(1, abort_ctx);
    abort();
}

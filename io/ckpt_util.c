/* ckpt_util.c - hash schemes, problem lists, naming local failures, files (ckpt_impl.h); the
 * HDF5 helpers are io/h5.h. */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "io/ckpt_impl.h"

/* --- hash schemes ---------------------------------------------------------------------------- */

tess_ckpt_hash_scheme ckpt_scheme(int64_t v) {
    return v == 1 ? TESS_CKPT_HASH_V1 : TESS_CKPT_HASH_V2;
}

/* --- problem lists --------------------------------------------------------------------------- */

void ckpt_msgs_add(ckpt_msgs *m, const char *fmt, ...) {
    if (m->lines >= CKPT_MSGS_MAX_LINES) {
        m->dropped++;
        return;
    }
    size_t len = strlen(m->text);
    char line[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);
    if (len + strlen(line) + 2 > sizeof m->text) {
        m->dropped++;
        return;
    }
    snprintf(m->text + len, sizeof m->text - len, "%s\n", line);
    m->lines++;
}

tess_status ckpt_msgs_push(tess_status s, const ckpt_msgs *m, const char *file, int line,
                           const char *func) {
    const char *p = m->text;
    while (*p) {
        const char *nl = strchr(p, '\n');
        int len = nl ? (int)(nl - p) : (int)strlen(p);
        tess_error_push(s, file, line, func, "%.*s", len, p);
        p += len + (nl ? 1 : 0);
    }
    if (m->dropped) tess_error_push(s, file, line, func, "... and %d more problems", m->dropped);
    return s;
}

tess_status ckpt_failed(tess_status s, const char *what, const char *file, int line,
                        const char *func) {
    if (s != TESS_OK) tess_error_push(s, file, line, func, "%s", what);
    return s;
}

/* --- files ----------------------------------------------------------------------------------- */

int ckpt_fsync_path(const char *path, bool directory) {
    int fd = open(path, directory ? O_RDONLY | O_DIRECTORY : O_RDONLY);
    if (fd < 0) return -1;
    int rc = fsync(fd);
    int saved = errno;
    close(fd);
    errno = saved;
    return rc;
}

void ckpt_dirname(const char *path, char *buf, size_t n) {
    const char *slash = strrchr(path, '/');
    if (!slash) {
        snprintf(buf, n, ".");
    } else if (slash == path) {
        snprintf(buf, n, "/");
    } else {
        snprintf(buf, n, "%.*s", (int)(slash - path), path);
    }
}

void ckpt_test_kill(const char *point) {
    const char *at = getenv("TESS_CKPT_TEST_KILL_AT");
    if (at && strcmp(at, point) == 0) raise(SIGKILL);
}

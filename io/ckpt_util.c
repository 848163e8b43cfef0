/* ckpt_util.c - hash schemes, problem lists, agreement and files (ckpt_impl.h); the HDF5 helpers
 * are in ckpt_h5.c. */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/mpicheck.h" /* TESS_MPI_CHECK */
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

tess_status ckpt_bcast_verdict(MPI_Comm comm, int root, tess_status *s, ckpt_msgs *m,
                               tess_ckpt_info *info) {
    int v[3] = {(int)*s, m->lines, m->dropped};
    TESS_MPI_CHECK(MPI_Bcast(v, 3, MPI_INT, root, comm));
    *s = (tess_status)v[0];
    m->lines = v[1];
    m->dropped = v[2];
    TESS_MPI_CHECK(MPI_Bcast(m->text, (int)sizeof m->text, MPI_CHAR, root, comm));
    if (info) TESS_MPI_CHECK(MPI_Bcast(info, (int)sizeof *info, MPI_BYTE, root, comm));
    return TESS_OK;
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

tess_status ckpt_agree(MPI_Comm comm, tess_status local, const char *what) {
    int v[2] = {local != TESS_OK, (int)local}, r[2];
    TESS_MPI_CHECK(MPI_Allreduce(v, r, 2, MPI_INT, MPI_MAX, comm));
    if (!r[0]) return TESS_OK;
    if (local != TESS_OK)
        return tess_error_push((tess_status)r[1], __FILE__, __LINE__, __func__, "%s", what);
    return tess_error_push((tess_status)r[1], __FILE__, __LINE__, __func__,
                           "%s: failed on another rank", what);
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

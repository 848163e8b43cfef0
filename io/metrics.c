/* metrics.c - CSV metrics writer (see metrics.h). */
#include "io/metrics.h"

#include <errno.h>
#include <string.h>

tess_status tess_metrics_open(tess_metrics *m, const char *path, const char *const *names,
                              int ncols, bool append) {
    m->f = NULL;
    m->ncols = ncols;
    TESS_REQUIRE(ncols >= 1 && ncols <= TESS_METRICS_MAX_COLS, TESS_ERR_ARG,
                 "metrics '%s': %d columns, expected 1..%d", path, ncols, TESS_METRICS_MAX_COLS);
    m->f = fopen(path, append ? "a" : "w");
    TESS_REQUIRE(m->f, TESS_ERR_IO, "cannot open metrics file '%s': %s", path, strerror(errno));
    if (ftell(m->f) == 0) {
        for (int i = 0; i < ncols; i++) fprintf(m->f, "%s%s", names[i], i + 1 < ncols ? "," : "\n");
        TESS_REQUIRE(fflush(m->f) == 0, TESS_ERR_IO, "cannot write metrics file '%s': %s", path,
                     strerror(errno));
    }
    return TESS_OK;
}

tess_status tess_metrics_row(tess_metrics *m, const double *values) {
    for (int i = 0; i < m->ncols; i++) fprintf(m->f, "%.9g%s", values[i], i + 1 < m->ncols ? "," : "\n");
    TESS_REQUIRE(fflush(m->f) == 0 && !ferror(m->f), TESS_ERR_IO, "cannot write metrics row: %s",
                 strerror(errno));
    return TESS_OK;
}

void tess_metrics_close(tess_metrics *m) {
    if (m->f) fclose(m->f);
    m->f = NULL;
}

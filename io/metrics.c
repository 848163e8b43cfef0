/* metrics.c - CSV metrics writer (see metrics.h). */
#include "io/metrics.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
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

/* The header line "names[0],...,names[ncols-1]\n" into buf. */
static void format_header(char *buf, size_t cap, const char *const *names, int ncols) {
    size_t len = 0;
    buf[0] = '\0';
    for (int i = 0; i < ncols && len < cap; i++)
        len += (size_t)snprintf(buf + len, cap - len, "%s%s", names[i], i + 1 < ncols ? "," : "\n");
}

tess_status tess_metrics_open_resume(tess_metrics *m, const char *path, const char *const *names,
                                     int ncols, int64_t step, double *last) {
    for (int i = 0; last && i < ncols; i++) last[i] = NAN;
    FILE *in = fopen(path, "r");
    if (!in) return tess_metrics_open(m, path, names, ncols, false);
    char tmp[4200], header[4096], line[4096];
    snprintf(tmp, sizeof tmp, "%s.tmp", path);
    format_header(header, sizeof header, names, ncols);
    FILE *out = fopen(tmp, "w");
    if (!out) {
        fclose(in);
        TESS_REQUIRE(false, TESS_ERR_IO, "cannot write '%s': %s", tmp, strerror(errno));
    }
    bool header_ok = fgets(line, sizeof line, in) && strcmp(line, header) == 0;
    if (header_ok) {
        fputs(header, out);
        while (fgets(line, sizeof line, in)) {
            char *end;
            double row_step = strtod(line, &end);
            if (end == line || row_step > (double)step) continue;
            fputs(line, out);
            for (int i = 0; last && i < ncols; i++) { /* the row's values, in column order */
                char *p = line;
                for (int k = 0; k < i && p; k++) p = strchr(p, ',') ? strchr(p, ',') + 1 : NULL;
                last[i] = p ? strtod(p, NULL) : NAN;
            }
        }
    }
    fclose(in);
    int write_ok = fclose(out) == 0;
    if (!header_ok) {
        remove(tmp);
        TESS_REQUIRE(false, TESS_ERR_DATA, "metrics file '%s' has another header than %s", path, header);
    }
    TESS_REQUIRE(write_ok && rename(tmp, path) == 0, TESS_ERR_IO, "cannot replace '%s': %s", path,
                 strerror(errno));
    return tess_metrics_open(m, path, names, ncols, true);
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

/* metrics.c - CSV and JSON Lines metrics writer (see metrics.h). */
#include "io/metrics.h"

#include <errno.h>
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { METRICS_PATH_MAX = 4200, METRICS_LINE_MAX = 4096 };

tess_status tess_metrics_jsonl_path(char *buf, size_t n, const char *csv_path) {
    size_t len = strlen(csv_path);
    if (len >= 4 && strcmp(csv_path + len - 4, ".csv") == 0) len -= 4;
    const int w = snprintf(buf, n, "%.*s.jsonl", (int)len, csv_path);
    TESS_REQUIRE(w > 0 && (size_t)w < n, TESS_ERR_ARG, "metrics path '%s' is too long", csv_path);
    return TESS_OK;
}

/* One JSON object line for a row: {"name": value, ...}\n into f. */
static tess_status json_row(FILE *f, const char *const *names, int ncols, const double *values) {
    json_t *obj = json_object();
    TESS_REQUIRE(obj, TESS_ERR_MEM, "out of memory for a metrics row");
    int bad = 0;
    for (int i = 0; i < ncols; i++) {
        const double v = values[i];
        json_t *j = !isfinite(v)                                  ? json_null()
                    : v == trunc(v) && fabs(v) < 9007199254740992.0 ? json_integer((json_int_t)v)
                                                                    : json_real(v);
        bad |= json_object_set_new(obj, names[i], j);
    }
    char *text = bad ? NULL : json_dumps(obj, JSON_COMPACT | JSON_PRESERVE_ORDER |
                                                  JSON_REAL_PRECISION(9));
    json_decref(obj);
    TESS_REQUIRE(text, TESS_ERR_MEM, "cannot format a metrics row as JSON");
    const int rc = fprintf(f, "%s\n", text);
    free(text);
    TESS_REQUIRE(rc > 0, TESS_ERR_IO, "cannot write a metrics row: %s", strerror(errno));
    return TESS_OK;
}

tess_status tess_metrics_open(tess_metrics *m, const char *path, const char *const *names,
                              int ncols, bool append) {
    m->f = m->json = NULL;
    m->ncols = ncols;
    TESS_REQUIRE(ncols >= 1 && ncols <= TESS_METRICS_MAX_COLS, TESS_ERR_ARG,
                 "metrics '%s': %d columns, expected 1..%d", path, ncols, TESS_METRICS_MAX_COLS);
    for (int i = 0; i < ncols; i++) m->names[i] = names[i];
    char jpath[METRICS_PATH_MAX];
    TESS_CHECK(tess_metrics_jsonl_path(jpath, sizeof jpath, path));
    m->f = fopen(path, append ? "a" : "w");
    TESS_REQUIRE(m->f, TESS_ERR_IO, "cannot open metrics file '%s': %s", path, strerror(errno));
    m->json = fopen(jpath, append ? "a" : "w");
    if (!m->json) {
        const int err = errno;
        tess_metrics_close(m);
        TESS_REQUIRE(false, TESS_ERR_IO, "cannot open metrics file '%s': %s", jpath,
                     strerror(err));
    }
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

/* The ncols values of a CSV row (missing ones NaN). */
static void parse_row(const char *line, int ncols, double *v) {
    const char *p = line;
    for (int i = 0; i < ncols; i++) {
        v[i] = p ? strtod(p, NULL) : NAN;
        p = p && strchr(p, ',') ? strchr(p, ',') + 1 : NULL;
    }
}

tess_status tess_metrics_open_resume(tess_metrics *m, const char *path, const char *const *names,
                                     int ncols, int64_t step, double *last) {
    TESS_REQUIRE(ncols >= 1 && ncols <= TESS_METRICS_MAX_COLS, TESS_ERR_ARG,
                 "metrics '%s': %d columns, expected 1..%d", path, ncols, TESS_METRICS_MAX_COLS);
    for (int i = 0; last && i < ncols; i++) last[i] = NAN;
    FILE *in = fopen(path, "r");
    if (!in) return tess_metrics_open(m, path, names, ncols, false);
    char tmp[METRICS_PATH_MAX], jpath[METRICS_PATH_MAX], jtmp[METRICS_PATH_MAX + 8];
    char header[METRICS_LINE_MAX], line[METRICS_LINE_MAX];
    snprintf(tmp, sizeof tmp, "%s.tmp", path);
    tess_status s = tess_metrics_jsonl_path(jpath, sizeof jpath, path);
    if (s != TESS_OK) {
        fclose(in);
        return s;
    }
    snprintf(jtmp, sizeof jtmp, "%s.tmp", jpath);
    format_header(header, sizeof header, names, ncols);
    FILE *out = fopen(tmp, "w");
    FILE *jout = out ? fopen(jtmp, "w") : NULL;
    if (!jout) {
        const int err = errno;
        fclose(in);
        if (out) fclose(out);
        remove(tmp);
        TESS_REQUIRE(false, TESS_ERR_IO, "cannot write '%s': %s", out ? jtmp : tmp,
                     strerror(err));
    }
    bool header_ok = fgets(line, sizeof line, in) && strcmp(line, header) == 0;
    if (header_ok) {
        fputs(header, out);
        while (fgets(line, sizeof line, in) && s == TESS_OK) {
            char *end;
            double row_step = strtod(line, &end);
            if (end == line || row_step > (double)step) continue;
            fputs(line, out);
            double v[TESS_METRICS_MAX_COLS];
            parse_row(line, ncols, v);
            s = json_row(jout, names, ncols, v);
            for (int i = 0; last && i < ncols; i++) last[i] = v[i];
        }
    }
    fclose(in);
    const int out_rc = fclose(out), jout_rc = fclose(jout); /* close both, whatever fails */
    const bool write_ok = out_rc == 0 && jout_rc == 0;
    if (!header_ok || s != TESS_OK) {
        remove(tmp);
        remove(jtmp);
        TESS_CHECK(s);
        TESS_REQUIRE(false, TESS_ERR_DATA, "metrics file '%s' has another header than %s", path,
                     header);
    }
    TESS_REQUIRE(write_ok && rename(tmp, path) == 0 && rename(jtmp, jpath) == 0, TESS_ERR_IO,
                 "cannot replace '%s' and '%s': %s", path, jpath, strerror(errno));
    return tess_metrics_open(m, path, names, ncols, true);
}

tess_status tess_metrics_row(tess_metrics *m, const double *values) {
    for (int i = 0; i < m->ncols; i++) fprintf(m->f, "%.9g%s", values[i], i + 1 < m->ncols ? "," : "\n");
    TESS_REQUIRE(fflush(m->f) == 0 && !ferror(m->f), TESS_ERR_IO, "cannot write metrics row: %s",
                 strerror(errno));
    TESS_CHECK(json_row(m->json, m->names, m->ncols, values));
    TESS_REQUIRE(fflush(m->json) == 0 && !ferror(m->json), TESS_ERR_IO,
                 "cannot write metrics row: %s", strerror(errno));
    return TESS_OK;
}

void tess_metrics_close(tess_metrics *m) {
    if (m->f) fclose(m->f);
    if (m->json) fclose(m->json);
    m->f = m->json = NULL;
}

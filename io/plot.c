/* plot.c - gnuplot driver (see plot.h). The CSV is read once to find which columns have data;
 * the script goes to gnuplot's stdin through popen. */
#include "io/plot.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/log.h"     /* tess_log_debug */
#include "io/metrics.h"   /* TESS_METRICS_MAX_COLS */

enum { PLOT_LINE_MAX = 8192, PLOT_MAX_SERIES = 2 * TESS_METRICS_MAX_COLS };

/* The CSV's header: column names (pointers into header) and, per column, whether any row has a
 * finite value. */
typedef struct {
    char header[PLOT_LINE_MAX];
    const char *names[TESS_METRICS_MAX_COLS];
    bool has_value[TESS_METRICS_MAX_COLS];
    int ncols;
} plot_csv;

static tess_status scan_csv(const char *path, plot_csv *t) {
    FILE *f = fopen(path, "r");
    TESS_REQUIRE(f, TESS_ERR_IO, "cannot read '%s': %s", path, strerror(errno));
    memset(t, 0, sizeof *t);
    if (fgets(t->header, sizeof t->header, f)) {
        t->header[strcspn(t->header, "\r\n")] = '\0';
        for (char *p = t->header; p && t->ncols < TESS_METRICS_MAX_COLS;) {
            t->names[t->ncols++] = p;
            p = strchr(p, ',');
            if (p) *p++ = '\0';
        }
    }
    char line[PLOT_LINE_MAX];
    while (fgets(line, sizeof line, f)) {
        const char *p = line;
        for (int i = 0; i < t->ncols && p; i++) {
            char *end;
            const double v = strtod(p, &end);
            if (end != p && isfinite(v)) t->has_value[i] = true;
            p = strchr(p, ',');
            if (p) p++;
        }
    }
    fclose(f);
    TESS_REQUIRE(t->ncols > 0, TESS_ERR_DATA, "'%s' has no header line", path);
    return TESS_OK;
}

static int column(const plot_csv *t, const char *name) {
    for (int i = 0; i < t->ncols; i++)
        if (strcmp(t->names[i], name) == 0) return i;
    return -1;
}

/* s as a gnuplot single-quoted string ('' stands for '). */
static void put_str(FILE *gp, const char *s) {
    fputc('\'', gp);
    for (; *s; s++) {
        if (*s == '\'') fputc('\'', gp);
        fputc(*s, gp);
    }
    fputc('\'', gp);
}

/* The title: "title\nsubtitle" as a gnuplot double-quoted string (the only kind with \n). */
static void put_title(FILE *gp, const char *title, const char *subtitle) {
    fputc('"', gp);
    for (const char *parts[2] = {title, subtitle}, **p = parts; p < parts + 2; p++) {
        if (!*p) continue;
        if (p == parts + 1) fputs("\\n", gp);
        for (const char *s = *p; *s; s++) {
            if (*s == '"' || *s == '\\') fputc('\\', gp);
            fputc(*s, gp);
        }
    }
    fputc('"', gp);
}

/* The x column and the series to draw (column index, right axis or not): every named column
 * must exist; columns without a value are left out, and at least one must remain. */
static tess_status choose_series(const plot_csv *t, const char *csv, const char *png,
                                 const tess_plot_spec *spec, int *xc, int *col, bool *right,
                                 int *nser) {
    *xc = spec->xcol ? column(t, spec->xcol) : 0;
    TESS_REQUIRE(*xc >= 0, TESS_ERR_ARG, "plot '%s': '%s' has no column '%s'", png, csv,
                 spec->xcol);
    *nser = 0;
    for (int i = 0; i < spec->ny + spec->ny2; i++) {
        const bool r = i >= spec->ny;
        const char *name = r ? spec->y2cols[i - spec->ny] : spec->ycols[i];
        const int c = column(t, name);
        TESS_REQUIRE(c >= 0, TESS_ERR_ARG, "plot '%s': '%s' has no column '%s'", png, csv, name);
        if (!t->has_value[c]) {
            tess_log_debug("plot '%s': column '%s' of '%s' has no value: left out", png, name,
                           csv);
            continue;
        }
        col[*nser] = c;
        right[(*nser)++] = r;
    }
    TESS_REQUIRE(*nser > 0, TESS_ERR_DATA, "plot '%s': no column to plot has a value in '%s'",
                 png, csv);
    return TESS_OK;
}

tess_status tess_plot_csv(const char *csv, const char *png, const tess_plot_spec *spec) {
    TESS_REQUIRE(spec && spec->title && spec->ny >= 1 && spec->ny2 >= 0 &&
                     spec->ny + spec->ny2 <= PLOT_MAX_SERIES,
                 TESS_ERR_ARG, "plot '%s': no title or no columns to plot", png);
    TESS_REQUIRE(spec->xlabel && spec->ylabel && (spec->ny2 == 0 || spec->y2label), TESS_ERR_ARG,
                 "plot '%s': every axis needs a label with its unit", png);
    plot_csv *t = malloc(sizeof *t);
    TESS_REQUIRE(t, TESS_ERR_MEM, "out of memory reading '%s'", csv);
    int xc = 0, col[PLOT_MAX_SERIES], nser = 0;
    bool right[PLOT_MAX_SERIES];
    tess_status s = scan_csv(csv, t);
    if (s == TESS_OK) s = choose_series(t, csv, png, spec, &xc, col, right, &nser);
    if (s != TESS_OK) {
        free(t);
        return s;
    }
    bool any_right = false;
    for (int i = 0; i < nser; i++) any_right |= right[i];
    if (system("command -v gnuplot >/dev/null 2>&1") != 0) {
        free(t);
        TESS_REQUIRE(false, TESS_ERR_NOINPUT,
                     "gnuplot not found: cannot draw '%s' (install gnuplot-nox)", png);
    }
    FILE *gp = popen("gnuplot", "w");
    if (!gp) {
        free(t);
        TESS_REQUIRE(false, TESS_ERR_IO, "cannot start gnuplot for '%s'", png);
    }
    fputs("set terminal pngcairo size 900,560 noenhanced font ',11'\nset output ", gp);
    put_str(gp, png);
    fputs("\nset datafile separator ','\nset grid\nset title ", gp);
    put_title(gp, spec->title, spec->subtitle);
    fputs("\nset xlabel ", gp);
    put_str(gp, spec->xlabel);
    fputs("\nset ylabel ", gp);
    put_str(gp, spec->ylabel);
    fputs("\nset format x '%g'\nset format y '%g'\n", gp);
    if (spec->logy) fputs("set logscale y\n", gp);
    if (any_right) {
        fputs("set y2label ", gp);
        put_str(gp, spec->y2label);
        fputs("\nset ytics nomirror\nset y2tics\nset format y2 '%g'\n", gp);
        if (spec->logy2) fputs("set logscale y2\n", gp);
    }
    /* Inside the plot area, on an opaque box; with two axes at the middle right, where a falling
     * loss and a rising accuracy are apart. */
    fprintf(gp, "set key inside %s right opaque box samplen 2\nplot ", any_right ? "center" : "top");
    for (int i = 0; i < nser; i++) {
        if (i) fputs(", ", gp);
        put_str(gp, csv);
        fputs(" using ", gp);
        put_str(gp, t->names[xc]);
        fputc(':', gp);
        put_str(gp, t->names[col[i]]);
        fprintf(gp, " with lines lw 2%s title ", right[i] ? " dt 2 axes x1y2" : "");
        char label[256];
        snprintf(label, sizeof label, "%s%s", t->names[col[i]], right[i] ? " (right axis)" : "");
        put_str(gp, label);
    }
    fputc('\n', gp);
    free(t);
    const int rc = pclose(gp);
    TESS_REQUIRE(rc == 0, TESS_ERR_IO, "gnuplot failed (status %d) drawing '%s' from '%s'", rc, png,
                 csv);
    return TESS_OK;
}

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
                                 const char **title, int *nser) {
    *xc = spec->xcol ? column(t, spec->xcol) : 0;
    TESS_REQUIRE(*xc >= 0, TESS_ERR_ARG, "plot '%s': '%s' has no column '%s'", png, csv,
                 spec->xcol);
    *nser = 0;
    for (int i = 0; i < spec->ny + spec->ny2; i++) {
        const bool r = i >= spec->ny;
        const char *name = r ? spec->y2cols[i - spec->ny] : spec->ycols[i];
        const char *const *titles = r ? spec->y2titles : spec->ytitles;
        const char *legend = titles ? titles[r ? i - spec->ny : i] : name;
        const int c = column(t, name);
        TESS_REQUIRE(c >= 0, TESS_ERR_ARG, "plot '%s': '%s' has no column '%s'", png, csv, name);
        if (!t->has_value[c]) {
            tess_log_debug("plot '%s': column '%s' of '%s' has no value: left out", png, name,
                           csv);
            continue;
        }
        col[*nser] = c;
        title[*nser] = legend;
        right[(*nser)++] = r;
    }
    TESS_REQUIRE(*nser > 0, TESS_ERR_DATA, "plot '%s': no column to plot has a value in '%s'",
                 png, csv);
    return TESS_OK;
}

/* [*lo, *hi] widened as gnuplot's autoscale does: to whole decades on a log axis (values are
 * log10 already), else to multiples of a 1-2-5 tick step. */
static void autoscale(double *lo, double *hi, bool log) {
    if (!(*hi > *lo)) {
        *lo -= 1.0, *hi += 1.0;
        return;
    }
    double step = 1.0;
    if (!log) {
        const double range = *hi - *lo;
        step = pow(10.0, floor(log10(range)));
        step = range / step < 2.0 ? step / 5.0 : range / step < 5.0 ? step / 2.0 : step;
    }
    *lo = floor(*lo / step) * step;
    *hi = ceil(*hi / step) * step;
}

/* Where the legend goes: of six places inside the plot area, the one the fewest drawn points fall
 * in, each series scaled to its own axis as gnuplot will draw it (log10 on a log axis, ranges
 * widened to ticks), every segment between two rows sampled 16 times, and the legend box as wide
 * as its longest entry; so no line runs under the opaque box if any place is free. Ties go to the
 * earlier place. Reads the CSV again; "top right" if it cannot. */
static const char *key_place(const char *csv, const plot_csv *t, const tess_plot_spec *spec, int xc,
                             const int *col, const bool *right, const char *const *title,
                             int nser) {
    static const char *const places[6] = {"top right",    "top left",    "bottom right",
                                          "bottom left", "center right", "center left"};
    /* The box in plot-area fractions (about 720 x 430 pixels at 900 x 560, 11 pt font: a
     * character is ~7 pixels, a line ~17). */
    size_t longest = 0;
    for (int k = 0; k < nser; k++) {
        const size_t n = strlen(title[k]) + (right[k] ? strlen(" (right axis)") : 0);
        longest = n > longest ? n : longest;
    }
    const double w = fmin(0.95, (7.0 * (double)longest + 60.0) / 720.0);
    const double h = fmin(0.95, (17.0 * nser + 12.0) / 430.0);
    /* normalised x and y bounds of each place: x in [x0, x1], y in [y0, y1] */
    const double box[6][4] = {{1 - w, 1, 1 - h, 1},           {0, w, 1 - h, 1},
                              {1 - w, 1, 0, h},               {0, w, 0, h},
                              {1 - w, 1, 0.5 - h / 2, 0.5 + h / 2},
                              {0, w, 0.5 - h / 2, 0.5 + h / 2}};
    FILE *f = fopen(csv, "r");
    if (!f) return places[0];
    double *v = NULL; /* rows x (1 + nser): x, then each series (NAN: no point) */
    size_t rows = 0, cap = 0;
    char line[PLOT_LINE_MAX];
    bool ok = fgets(line, sizeof line, f) != NULL; /* the header */
    while (ok && fgets(line, sizeof line, f)) {
        if (rows == cap) {
            cap = cap ? 2 * cap : 256;
            double *p = realloc(v, cap * (size_t)(1 + nser) * sizeof *v);
            if (!p) {
                ok = false;
                break;
            }
            v = p;
        }
        double row[TESS_METRICS_MAX_COLS];
        const char *q = line;
        for (int i = 0; i < t->ncols; i++) {
            char *end = NULL;
            row[i] = q ? strtod(q, &end) : NAN;
            if (!q || end == q) row[i] = NAN;
            q = q ? strchr(q, ',') : NULL;
            if (q) q++;
        }
        double *r = v + rows * (size_t)(1 + nser);
        r[0] = row[xc];
        for (int k = 0; k < nser; k++) {
            const bool logy = right[k] ? spec->logy2 : spec->logy;
            const double y = row[col[k]];
            r[1 + k] = !isfinite(y) || (logy && y <= 0) ? NAN : logy ? log10(y) : y;
        }
        rows++;
    }
    fclose(f);
    /* ranges: x, left axis, right axis */
    double lo[3] = {INFINITY, INFINITY, INFINITY}, hi[3] = {-INFINITY, -INFINITY, -INFINITY};
    for (size_t i = 0; ok && i < rows; i++) {
        const double *r = v + i * (size_t)(1 + nser);
        for (int k = 0; k < nser && isfinite(r[0]); k++) {
            if (isnan(r[1 + k])) continue;
            const int a = right[k] ? 2 : 1;
            lo[0] = fmin(lo[0], r[0]), hi[0] = fmax(hi[0], r[0]);
            lo[a] = fmin(lo[a], r[1 + k]), hi[a] = fmax(hi[a], r[1 + k]);
        }
    }
    autoscale(&lo[0], &hi[0], false);
    autoscale(&lo[1], &hi[1], spec->logy);
    autoscale(&lo[2], &hi[2], spec->logy2);
    int count[6] = {0};
    for (int k = 0; ok && k < nser; k++) {
        const int a = right[k] ? 2 : 1;
        const double wx = hi[0] > lo[0] ? hi[0] - lo[0] : 1.0;
        const double wy = hi[a] > lo[a] ? hi[a] - lo[a] : 1.0;
        bool have_prev = false;
        double px = 0, py = 0;
        for (size_t i = 0; i < rows; i++) {
            const double *r = v + i * (size_t)(1 + nser);
            if (!isfinite(r[0]) || isnan(r[1 + k])) continue;
            const double x = (r[0] - lo[0]) / wx, y = (r[1 + k] - lo[a]) / wy;
            for (int j = have_prev ? 1 : 16; j <= 16; j++) { /* the segment from the last point */
                const double sx = px + (x - px) * j / 16.0, sy = py + (y - py) * j / 16.0;
                for (int b = 0; b < 6; b++)
                    count[b] += sx >= box[b][0] && sx <= box[b][1] && sy >= box[b][2] &&
                                sy <= box[b][3];
            }
            px = x, py = y, have_prev = true;
        }
    }
    free(v);
    if (!ok) return places[0];
    int best = 0;
    for (int b = 1; b < 6; b++)
        if (count[b] < count[best]) best = b;
    return places[best];
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
    const char *title[PLOT_MAX_SERIES];
    tess_status s = scan_csv(csv, t);
    if (s == TESS_OK) s = choose_series(t, csv, png, spec, &xc, col, right, title, &nser);
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
    /* Inside the plot area, on an opaque box, where no line runs. */
    fprintf(gp, "set key inside %s opaque box samplen 2\nplot ",
            key_place(csv, t, spec, xc, col, right, title, nser));
    for (int i = 0; i < nser; i++) {
        if (i) fputs(", ", gp);
        put_str(gp, csv);
        fputs(" using ", gp);
        put_str(gp, t->names[xc]);
        fputc(':', gp);
        put_str(gp, t->names[col[i]]);
        fprintf(gp, " with lines lw 2%s title ", right[i] ? " dt 2 axes x1y2" : "");
        char label[256];
        snprintf(label, sizeof label, "%s%s", title[i], right[i] ? " (right axis)" : "");
        put_str(gp, label);
    }
    fputc('\n', gp);
    free(t);
    const int rc = pclose(gp);
    TESS_REQUIRE(rc == 0, TESS_ERR_IO, "gnuplot failed (status %d) drawing '%s' from '%s'", rc, png,
                 csv);
    return TESS_OK;
}

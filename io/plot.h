/* plot.h - PNG line plots of metrics CSV columns through gnuplot (Debian gnuplot-nox), made to
 * be read by someone other than their author: both axes labelled with their units, a second y
 * axis for a quantity of another kind (an accuracy next to a loss), tick labels in %g (1e-08,
 * not 0.00000001), the legend inside the plot area on an opaque box in the corner or side the
 * fewest drawn points fall in (so it covers no line), no legend entry for a
 * column without a single finite value, and the run's parameters as a second title line.
 * Called by one rank (rank 0) after the CSV is complete. Not collective. */
#ifndef TESS_IO_PLOT_H
#define TESS_IO_PLOT_H

#include <stdbool.h>

#include "core/status.h" /* tess_status */

/* What to draw. Strings are not copied. */
typedef struct {
    const char *title;          /* first title line */
    const char *subtitle;       /* second title line: the run's parameters; NULL: none */
    const char *xcol;           /* x column (a header name); NULL: the first column */
    const char *xlabel;         /* required: x axis label with its unit, e.g. "step (updates)" */
    const char *const *ycols;   /* left axis columns, ny >= 1 */
    int ny;
    const char *ylabel;         /* required: left axis label with its unit */
    bool logy;                  /* log-scale left axis */
    const char *const *y2cols;  /* right axis columns (ny2 = 0: no right axis) */
    int ny2;
    const char *y2label;        /* required when ny2 > 0 */
    bool logy2;
    const char *const *ytitles;  /* legend entries of ycols (ny of them); NULL: the column names */
    const char *const *y2titles; /* legend entries of y2cols (ny2); NULL: the column names */
} tess_plot_spec;

/* Plot spec's columns of csv against its x column into png, 900x560. Columns without a finite
 * value are left out (a debug message names them). TESS_ERR_ARG for a spec without labels or a
 * column the CSV does not have (naming it and the file), TESS_ERR_IO if the CSV cannot be read
 * or gnuplot fails (its stderr is left visible), TESS_ERR_DATA if no column has a value,
 * TESS_ERR_NOINPUT if gnuplot is not installed. */
tess_status tess_plot_csv(const char *csv, const char *png, const tess_plot_spec *spec);

#endif

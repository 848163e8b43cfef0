/* plot.h - PNG line plots of metrics.csv columns through gnuplot (Debian gnuplot-nox).
 * Called by one rank (rank 0) after the CSV is complete. Not collective. */
#ifndef TESS_IO_PLOT_H
#define TESS_IO_PLOT_H

#include <stdbool.h>

#include "core/status.h" /* tess_status */

/* Plot columns ycols[0..ny-1] of csv against column xcol (names from the header line) into png,
 * 800x500, with title; log-scale y if logy. TESS_ERR_NOINPUT if gnuplot is not installed,
 * TESS_ERR_IO if gnuplot fails (its stderr is left visible). */
tess_status tess_plot_csv(const char *csv, const char *png, const char *title, const char *xcol,
                          const char *const *ycols, int ny, bool logy);

#endif

/* metrics.h - metrics.csv: one header line of column names, then one row of numbers per record,
 * flushed per row so a killed run keeps every row it wrote. Written by one rank (rank 0); values
 * must already be reduced over ranks. Not collective. */
#ifndef TESS_IO_METRICS_H
#define TESS_IO_METRICS_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "core/status.h" /* tess_status */

enum { TESS_METRICS_MAX_COLS = 32 };

typedef struct {
    FILE *f;
    int ncols;
} tess_metrics;

/* Open path: truncate and write the header "names[0],...,names[ncols-1]", or with append=true
 * keep existing rows (a resumed run; the header is written only if the file is empty).
 * TESS_ERR_IO naming the path; TESS_ERR_ARG if ncols is outside 1..TESS_METRICS_MAX_COLS. */
tess_status tess_metrics_open(tess_metrics *m, const char *path, const char *const *names,
                              int ncols, bool append);
/* Open path for a run resumed at `step`: keep the header and the rows whose first column (the
 * step) is <= step, drop the rows a killed run wrote after the checkpoint it resumes from, and
 * append from there. The file is rewritten through path.tmp + rename, so a crash leaves either
 * the old or the new file. A missing file starts fresh with the header. TESS_ERR_IO naming the
 * path; TESS_ERR_DATA if the existing header does not match names. last (ncols values; may be
 * NULL) gets the last kept row, or NaNs if none was kept. */
tess_status tess_metrics_open_resume(tess_metrics *m, const char *path, const char *const *names,
                                     int ncols, int64_t step, double *last);
/* Write one row of ncols values (%.9g) and flush. TESS_ERR_IO on a write error. */
tess_status tess_metrics_row(tess_metrics *m, const double *values);
/* Close the file (NULL-safe for a never-opened m). */
void tess_metrics_close(tess_metrics *m);

#endif

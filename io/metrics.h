/* metrics.h - metrics files: NAME.csv (one header line of column names, then one row of numbers
 * per record) and next to it NAME.jsonl (JSON Lines: one object {"name": value, ...} per row, in
 * column order, the format experiment trackers ingest; written with jansson; NaN and infinities
 * as null, integral values as integers, others with 9 significant digits like the CSV). Both are
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
    FILE *f;    /* the CSV */
    FILE *json; /* the JSON Lines file */
    int ncols;
    const char *names[TESS_METRICS_MAX_COLS]; /* the column names; the strings are not copied */
} tess_metrics;

/* The JSON Lines path of a CSV path: "dir/metrics.csv" -> "dir/metrics.jsonl" (a path without
 * ".csv" gets ".jsonl" appended). TESS_ERR_ARG if it does not fit in n bytes. */
tess_status tess_metrics_jsonl_path(char *buf, size_t n, const char *csv_path);

/* Open path (the CSV) and its JSON Lines file: truncate both and write the CSV header
 * "names[0],...,names[ncols-1]", or with append=true keep existing rows of both (the header is
 * written only if the CSV is empty). The names must outlive m. TESS_ERR_IO naming the path;
 * TESS_ERR_ARG if ncols is outside 1..TESS_METRICS_MAX_COLS. */
tess_status tess_metrics_open(tess_metrics *m, const char *path, const char *const *names,
                              int ncols, bool append);
/* Open path for a run resumed at `step`: keep the header and the rows whose first column (the
 * step) is <= step, drop the rows a killed run wrote after the checkpoint it resumes from, and
 * append from there. The JSON Lines file is rewritten from the kept CSV rows, so the two files
 * hold the same rows even if the JSON file was missing. Both are rewritten through <file>.tmp +
 * rename, so a crash leaves either the old or the new file. A missing CSV starts both fresh.
 * TESS_ERR_IO naming the path; TESS_ERR_DATA if the existing header does not match names.
 * last (ncols values; may be NULL) gets the last kept row, or NaNs if none was kept. */
tess_status tess_metrics_open_resume(tess_metrics *m, const char *path, const char *const *names,
                                     int ncols, int64_t step, double *last);
/* Write one row of ncols values to both files (CSV: %.9g) and flush. TESS_ERR_IO on a write
 * error. */
tess_status tess_metrics_row(tess_metrics *m, const double *values);
/* Close both files (NULL-safe for a never-opened m). */
void tess_metrics_close(tess_metrics *m);

#endif

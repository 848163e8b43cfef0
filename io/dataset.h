/* dataset.h - what the HDF5 training-data readers share (io/graphs.h, io/traces.h, io/tokens.h).
 *
 * Reading: a file is opened on a group (par/mesh.h) with the MPI-IO driver on its communicator;
 * every validation verdict is agreed over that group (tess_par_agree), so all ranks return the
 * same status and the failing rank's message and none is left inside a collective. Messages
 * name the file, the object, what was expected and what was found. Data are read as increasing, disjoint runs of rows, one
 * collective H5Dread per dataset (tess_ds_read_runs).
 * Writing: one process writes <path>.tmp with the default (POSIX) driver and renames it to
 * <path> on commit, so a converted file appears only when complete.
 * HDF5's own error printing is switched off inside these calls (tess_h5_quiet_*, io/h5.h); its
 * innermost message is quoted in ours instead (tess_h5_reason).
 * Collectiveness: with a file opened with coll_metadata, every function below that takes the
 * tess_ds_file reads metadata collectively, so all ranks must call the same ones in the same order
 * (they do, as the metadata are the same everywhere); tess_ds_read_runs is always collective.
 * Apps use the three readers; this header is their common plumbing. docs/datasets.md has the
 * file layouts.
 */
#ifndef TESS_IO_DATASET_H
#define TESS_IO_DATASET_H

#include <hdf5.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/status.h" /* tess_status */
#include "io/h5.h"       /* tess_h5_quiet (HDF5 error printing), the HDF5 helpers */
#include "par/mesh.h"    /* tess_group */

enum { TESS_DS_PATH_MAX = 1024, TESS_DS_MAX_DIMS = 2 };

/* A file opened for reading on a group. */
typedef struct {
    hid_t file;           /* H5I_INVALID_HID when not open */
    hid_t dxpl;           /* collective transfer property list */
    const tess_group *g;  /* borrowed: must outlive the open file */
    int rank, size;       /* in g */
    char path[TESS_DS_PATH_MAX];
} tess_ds_file;

/* Open path read-only on g and check that the root attribute "format" equals `format` and
 * "format_version" is in [1, max_version]. coll_metadata: metadata reads are collective (rank 0
 * reads, the others receive), so every rank must then make the same HDF5 calls in the same order;
 * pass false when ranks read independently. Missing or unreadable file: TESS_ERR_NOINPUT; not
 * HDF5, truncated, or another format: TESS_ERR_DATA. Collective on g; on failure f is closed. */
tess_status tess_ds_open(tess_ds_file *f, const tess_group *g, const char *path, const char *format,
                         int64_t max_version, bool coll_metadata);
/* Close (no-op if not open). Collective on f->g. */
tess_status tess_ds_close(tess_ds_file *f);

typedef enum { TESS_DS_INT = 0, TESS_DS_FLOAT } tess_ds_class;

/* Open dataset `name` (absolute, e.g. "/graphs/x") and check its type class and rank; want[d] >= 0
 * is an exact size for dimension d, -1 accepts any (want may be NULL). dims (ndim) receives the
 * shape. On success *dset is open (close it with H5Dclose). TESS_ERR_DATA names the file, dataset,
 * expected and found shape or type. Same calls on every rank when coll_metadata. */
tess_status tess_ds_dataset_open(const tess_ds_file *f, const char *name, tess_ds_class cls,
                                 int ndim, const int64_t *want, int64_t *dims, hid_t *dset);
/* Whether the link `name` exists (an absolute path whose parent groups exist). */
bool tess_ds_exists(const tess_ds_file *f, const char *name);

/* Read a scalar attribute `attr` of object `obj` ("/", "/graphs"); TESS_ERR_DATA if missing or
 * of another type class. Strings may be variable- or fixed-length; buf gets n bytes at most. */
tess_status tess_ds_attr_int(const tess_ds_file *f, const char *obj, const char *attr, int64_t *v);
tess_status tess_ds_attr_double(const tess_ds_file *f, const char *obj, const char *attr,
                                double *v);
tess_status tess_ds_attr_string(const tess_ds_file *f, const char *obj, const char *attr, char *buf,
                                size_t n);

/* Read rows [lo[i], lo[i] + cnt[i]) for i in [0, nruns) of dataset dset (rank 1 or 2; a row has
 * ncols elements, ncols = 1 for rank 1) into buf, packed in run order, converted to memtype.
 * Runs must be increasing and disjoint; empty runs are skipped; nruns may be 0 (this rank reads
 * nothing but still takes part). name is for messages. Collective on f->g (every rank calls
 * it for the same dataset). */
tess_status tess_ds_read_runs(const tess_ds_file *f, hid_t dset, const char *name, hid_t memtype,
                              int64_t ncols, const int64_t *lo, const int64_t *cnt, int64_t nruns,
                              void *buf);

/* A file being written by one process. */
typedef struct {
    hid_t file;
    char path[TESS_DS_PATH_MAX];
    char tmp[TESS_DS_PATH_MAX + 8];
    tess_h5_quiet quiet;
} tess_ds_writer;

/* Create <path>.tmp (truncating) and write the root attributes format and format_version.
 * TESS_ERR_IO naming the path on failure. Not collective: call on one process. */
tess_status tess_ds_writer_create(tess_ds_writer *w, const char *path, const char *format,
                                  int64_t version);
/* Create group `name` (absolute). */
tess_status tess_ds_write_group(tess_ds_writer *w, const char *name);
/* Create dataset `name` of file type ftype and shape dims (ndim <= 2; sizes may be 0), written
 * from buf (memory type mtype, row-major). */
tess_status tess_ds_write_array(tess_ds_writer *w, const char *name, hid_t ftype, hid_t mtype,
                                int ndim, const int64_t *dims, const void *buf);
/* Scalar attributes on object obj: int64, float64, variable-length UTF-8 string (h5py: str). */
tess_status tess_ds_write_attr_int(tess_ds_writer *w, const char *obj, const char *attr, int64_t v);
tess_status tess_ds_write_attr_double(tess_ds_writer *w, const char *obj, const char *attr,
                                      double v);
tess_status tess_ds_write_attr_string(tess_ds_writer *w, const char *obj, const char *attr,
                                      const char *v);
/* Close the file and rename <path>.tmp to <path>. */
tess_status tess_ds_writer_commit(tess_ds_writer *w);
/* After a failure: close the file and remove <path>.tmp. */
void tess_ds_writer_abandon(tess_ds_writer *w);

#endif

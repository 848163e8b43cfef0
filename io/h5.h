/* h5.h - the HDF5 helpers io shares: the checkpoint code (io/ckpt_*.c) and the dataset readers
 * and writers (io/dataset.h) use these and nothing of their own.
 *
 * Error printing: callers switch HDF5's own printing off around their calls (tess_h5_quiet_*)
 * and quote its innermost message in theirs (tess_h5_reason). Read the reason right after the
 * failing call: every HDF5 API call clears the error stack on entry.
 * Attributes are scalar: strings are written as variable-length UTF-8 (h5py: str) or, with
 * tess_h5_attr_write_str_fixed, fixed-length (no global heap), integers as
 * little-endian int64/uint64, floats as little-endian float64; readers accept any string type
 * (variable- or fixed-length), any integer type for the integer readers, any float type for
 * tess_h5_attr_read_double, and fail on anything else or on more than one value.
 * Collectiveness: tess_h5_fapl_mpio and tess_h5_open_collective are collective on their group,
 * the others do not communicate. On a file opened with collective metadata
 * (TESS_H5_COLL_METADATA) HDF5 reads metadata collectively, so every rank must then make the
 * same calls in the same order.
 */
#ifndef TESS_IO_H5_H
#define TESS_IO_H5_H

#include <hdf5.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/dtype.h" /* tess_dtype */
#include "par/mesh.h"   /* tess_group */

enum { TESS_H5_PATH_MAX = 1024 }; /* longest object path tess_h5_path_exists takes, with NUL */

/* --- error printing (not collective) -------------------------------------------------------- */

/* HDF5 error printing, saved and switched off by begin, restored by end. */
typedef struct {
    H5E_auto2_t func;
    void *data;
} tess_h5_quiet;
void tess_h5_quiet_begin(tess_h5_quiet *q);
void tess_h5_quiet_end(const tess_h5_quiet *q);

/* The innermost message on HDF5's default error stack ("file signature not found"), or
 * "no HDF5 detail" when the stack is empty. buf: n bytes. */
void tess_h5_reason(char *buf, size_t n);

/* --- names for messages --------------------------------------------------------------------- */

/* "float32", "int64", "uint8", "string", "compound", "enum", else "HDF5 type class <c>". */
void tess_h5_type_name(hid_t type, char *buf, size_t n);
/* "[3, 4]" (sep ", ") or "[3,4]" (sep ",") for dims (ndim of them); a negative size is printed
 * as "*" (any). buf: n bytes. */
void tess_h5_shape_text(char *buf, size_t n, int ndim, const int64_t *dims, const char *sep);

/* --- attributes of an open object loc (0 on success, -1 on failure) ------------------------- */

int tess_h5_attr_write_str(hid_t loc, const char *name, const char *value);
/* A fixed-length string (NULL-padded UTF-8 of strlen(value) bytes, at least 1): stored in the
 * attribute's object header, not in HDF5's global heap (h5py: bytes, .decode() gives str). */
int tess_h5_attr_write_str_fixed(hid_t loc, const char *name, const char *value);
int tess_h5_attr_write_i64(hid_t loc, const char *name, int64_t v);
int tess_h5_attr_write_u64(hid_t loc, const char *name, uint64_t v);
int tess_h5_attr_write_double(hid_t loc, const char *name, double v);
/* Strings cut to n-1 bytes; integers converted from any integer type, doubles from any float
 * type. -1 if the attribute is missing, of another type class or not a single value. */
int tess_h5_attr_read_str(hid_t loc, const char *name, char *buf, size_t n);
int tess_h5_attr_read_i64(hid_t loc, const char *name, int64_t *v);
int tess_h5_attr_read_u64(hid_t loc, const char *name, uint64_t *v);
int tess_h5_attr_read_double(hid_t loc, const char *name, double *v);
/* For messages about attribute name of loc: its type class, type name (tess_h5_type_name, n
 * bytes) and number of values. -1 if it cannot be opened. */
int tess_h5_attr_info(hid_t loc, const char *name, H5T_class_t *cls, char *type, size_t n,
                      int64_t *npoints);

/* --- existence (errors count as absent) ----------------------------------------------------- */

/* True if loc has attribute name. */
bool tess_h5_attr_exists(hid_t loc, const char *name);
/* True if path (e.g. "/graphs/x") names an object under loc, checking every component, as
 * H5Lexists fails on a missing intermediate group. False for "" and paths of TESS_H5_PATH_MAX
 * bytes or more. */
bool tess_h5_path_exists(hid_t loc, const char *path);

/* --- element types (core/dtype.h) ----------------------------------------------------------- */

hid_t tess_h5_dtype_file(tess_dtype t);       /* little-endian HDF5 type (not to be closed) */
hid_t tess_h5_dtype_mem(tess_dtype t);        /* native HDF5 type (not to be closed) */
const char *tess_h5_dtype_name(tess_dtype t); /* "float32", "float64", "int64" */

/* --- parallel file access ------------------------------------------------------------------- */

/* Options of tess_h5_fapl_mpio; or them together. */
enum {
    TESS_H5_COLL_METADATA = 1 << 0, /* metadata reads and writes collective on the group */
    TESS_H5_FORMAT_V18 = 1 << 1,    /* object formats bounded to v18..v18 (readable by 1.8) */
    TESS_H5_NO_LOCKING = 1 << 2,    /* no file locking (fails on NFS and some Lustre) */
};
/* A file-access list for parallel HDF5 (the MPI-IO driver on g's communicator) with the options
 * `flags`, or a negative id. Close it with H5Pclose. Collective on g (the driver duplicates
 * the communicator), as is the H5Fopen or H5Fcreate that uses it. */
hid_t tess_h5_fapl_mpio(const tess_group *g, unsigned flags);
/* path opened read-only with tess_h5_fapl_mpio(g, flags), or a negative id. Collective on g. */
hid_t tess_h5_open_collective(const tess_group *g, const char *path, unsigned flags);

#endif

/* dataset.c - shared HDF5 plumbing of the training-data readers and writers (see dataset.h). */
#include "io/dataset.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "par/coll.h" /* tess_par_agree, tess_par_bcast_bytes */

static tess_status close_ids(tess_ds_file *f) {
    bool ok = true;
    if (f->dxpl != H5I_INVALID_HID) ok = H5Pclose(f->dxpl) >= 0 && ok;
    if (f->file != H5I_INVALID_HID) ok = H5Fclose(f->file) >= 0 && ok;
    f->dxpl = H5I_INVALID_HID;
    f->file = H5I_INVALID_HID;
    TESS_REQUIRE(ok, TESS_ERR_IO, "closing '%s' failed", f->path);
    return TESS_OK;
}

static tess_status open_local(tess_ds_file *f, bool coll_metadata) {
    hid_t fapl = tess_h5_fapl_mpio(f->g, coll_metadata ? TESS_H5_COLL_METADATA : 0);
    bool ok = fapl >= 0;
    if (ok) f->file = H5Fopen(f->path, H5F_ACC_RDONLY, fapl);
    char why[256];
    tess_h5_reason(why, sizeof why);
    if (ok) H5Pclose(fapl);
    TESS_REQUIRE(ok, TESS_ERR_INTERNAL, "cannot set up the MPI-IO driver for '%s'", f->path);
    TESS_REQUIRE(f->file >= 0, TESS_ERR_DATA,
                 "'%s' is not a readable HDF5 file (truncated or another format?): %s", f->path,
                 why);
    f->dxpl = H5Pcreate(H5P_DATASET_XFER);
    TESS_REQUIRE(f->dxpl >= 0 && H5Pset_dxpl_mpio(f->dxpl, H5FD_MPIO_COLLECTIVE) >= 0,
                 TESS_ERR_INTERNAL, "cannot create a collective transfer list");
    return TESS_OK;
}

static tess_status check_format(const tess_ds_file *f, const char *format, int64_t max_version) {
    TESS_REQUIRE(H5Aexists_by_name(f->file, "/", "format", H5P_DEFAULT) > 0, TESS_ERR_DATA,
                 "'%s' has no root attribute 'format': not a Tessera dataset file "
                 "(expected format '%s'; see docs/datasets.md for the converters)",
                 f->path, format);
    char found[128];
    TESS_CHECK(tess_ds_attr_string(f, "/", "format", found, sizeof found));
    TESS_REQUIRE(strcmp(found, format) == 0, TESS_ERR_DATA, "'%s' has format '%s', expected '%s'",
                 f->path, found, format);
    int64_t version = 0;
    TESS_CHECK(tess_ds_attr_int(f, "/", "format_version", &version));
    TESS_REQUIRE(version >= 1 && version <= max_version, TESS_ERR_DATA,
                 "'%s': format_version %lld of '%s' is not supported (this build reads 1..%lld)",
                 f->path, (long long)version, format, (long long)max_version);
    return TESS_OK;
}

tess_status tess_ds_open(tess_ds_file *f, const tess_group *g, const char *path,
                         const char *format, int64_t max_version, bool coll_metadata) {
    TESS_REQUIRE(g != NULL, TESS_ERR_ARG, "group is NULL");
    *f = (tess_ds_file){.file = H5I_INVALID_HID, .dxpl = H5I_INVALID_HID, .g = g,
                        .rank = g->rank, .size = g->size};
    TESS_REQUIRE(path != NULL && strlen(path) < sizeof f->path, TESS_ERR_ARG,
                 "dataset path missing or longer than %d bytes", TESS_DS_PATH_MAX - 1);
    snprintf(f->path, sizeof f->path, "%s", path);

    /* Rank 0 looks at the file system once; everyone takes the same branch. */
    int err = 0;
    if (f->rank == 0) {
        struct stat st;
        if (stat(path, &st) != 0)
            err = errno;
        else if (S_ISDIR(st.st_mode))
            err = EISDIR;
        else if (access(path, R_OK) != 0)
            err = errno;
    }
    TESS_CHECK(tess_par_bcast_bytes(g, &err, sizeof err, 0));
    TESS_REQUIRE(err == 0, TESS_ERR_NOINPUT, "cannot open dataset file '%s': %s", path,
                 strerror(err));

    tess_h5_quiet q;
    tess_h5_quiet_begin(&q);
    tess_status s = open_local(f, coll_metadata);
    s = tess_par_agree(g, s);
    if (s == TESS_OK) s = tess_par_agree(g, check_format(f, format, max_version));
    if (s != TESS_OK) close_ids(f);
    tess_h5_quiet_end(&q);
    TESS_REQUIRE(s == TESS_OK, s, "opening '%s' as %s", path, format);
    return TESS_OK;
}

tess_status tess_ds_close(tess_ds_file *f) {
    tess_h5_quiet q;
    tess_h5_quiet_begin(&q);
    tess_status s = close_ids(f);
    tess_h5_quiet_end(&q);
    return s;
}

bool tess_ds_exists(const tess_ds_file *f, const char *name) {
    return tess_h5_path_exists(f->file, name);
}

static tess_status check_dataset(const tess_ds_file *f, hid_t d, const char *name,
                                 tess_ds_class cls, int ndim, const int64_t *want, int64_t *dims) {
    hid_t t = H5Dget_type(d);
    TESS_REQUIRE(t >= 0, TESS_ERR_DATA, "'%s': cannot read the type of %s", f->path, name);
    H5T_class_t c = H5Tget_class(t);
    char tname[32];
    tess_h5_type_name(t, tname, sizeof tname);
    H5Tclose(t);
    H5T_class_t want_c = cls == TESS_DS_INT ? H5T_INTEGER : H5T_FLOAT;
    TESS_REQUIRE(c == want_c, TESS_ERR_DATA, "'%s': dataset %s has type %s, expected %s", f->path,
                 name, tname, cls == TESS_DS_INT ? "an integer type" : "a float type");

    hid_t sp = H5Dget_space(d);
    TESS_REQUIRE(sp >= 0, TESS_ERR_DATA, "'%s': cannot read the shape of %s", f->path, name);
    int nd = H5Sget_simple_extent_ndims(sp);
    hsize_t h[H5S_MAX_RANK];
    int64_t found[H5S_MAX_RANK];
    if (nd > 0) H5Sget_simple_extent_dims(sp, h, NULL);
    H5Sclose(sp);
    for (int i = 0; i < nd; i++) found[i] = (int64_t)h[i];
    char want_txt[96], found_txt[96];
    int64_t any[TESS_DS_MAX_DIMS] = {-1, -1};
    tess_h5_shape_text(want_txt, sizeof want_txt, ndim, want ? want : any, ", ");
    tess_h5_shape_text(found_txt, sizeof found_txt, nd > 0 ? nd : 0, found, ", ");
    TESS_REQUIRE(nd == ndim, TESS_ERR_DATA,
                 "'%s': dataset %s has %d dimension(s) %s, expected %d %s", f->path, name, nd,
                 found_txt, ndim, want_txt);
    for (int i = 0; i < ndim; i++) {
        TESS_REQUIRE(want == NULL || want[i] < 0 || want[i] == found[i], TESS_ERR_DATA,
                     "'%s': dataset %s has shape %s, expected %s", f->path, name, found_txt,
                     want_txt);
        dims[i] = found[i];
    }
    return TESS_OK;
}

tess_status tess_ds_dataset_open(const tess_ds_file *f, const char *name, tess_ds_class cls,
                                 int ndim, const int64_t *want, int64_t *dims, hid_t *dset) {
    TESS_REQUIRE(ndim >= 1 && ndim <= TESS_DS_MAX_DIMS, TESS_ERR_ARG, "ndim %d", ndim);
    *dset = H5I_INVALID_HID;
    TESS_REQUIRE(tess_ds_exists(f, name), TESS_ERR_DATA, "'%s': dataset %s is missing", f->path,
                 name);
    hid_t d = H5Dopen2(f->file, name, H5P_DEFAULT);
    TESS_REQUIRE(d >= 0, TESS_ERR_DATA, "'%s': %s is not a dataset", f->path, name);
    tess_status s = check_dataset(f, d, name, cls, ndim, want, dims);
    if (s != TESS_OK) {
        H5Dclose(d);
        return s;
    }
    *dset = d;
    return TESS_OK;
}

/* Open object obj of f holding the attribute attr, after checking that the object and the
 * attribute exist and that the attribute is one value of class want (want_txt names it). On
 * success *o is open (close it with H5Oclose). */
static tess_status attr_object(const tess_ds_file *f, const char *obj, const char *attr,
                               H5T_class_t want, const char *want_txt, hid_t *o) {
    TESS_REQUIRE(strcmp(obj, "/") == 0 || tess_ds_exists(f, obj), TESS_ERR_DATA,
                 "'%s': object %s is missing", f->path, obj);
    TESS_REQUIRE(H5Aexists_by_name(f->file, obj, attr, H5P_DEFAULT) > 0, TESS_ERR_DATA,
                 "'%s': attribute '%s' of %s is missing (expected %s)", f->path, attr, obj,
                 want_txt);
    *o = H5Oopen(f->file, obj, H5P_DEFAULT);
    H5T_class_t c = H5T_NO_CLASS;
    char tname[32];
    int64_t npts = 0;
    if (*o < 0 || tess_h5_attr_info(*o, attr, &c, tname, sizeof tname, &npts) != 0) {
        if (*o >= 0) H5Oclose(*o);
        TESS_REQUIRE(false, TESS_ERR_DATA, "'%s': cannot open attribute '%s' of %s", f->path,
                     attr, obj);
    }
    if (c != want || npts != 1) {
        H5Oclose(*o);
        TESS_REQUIRE(false, TESS_ERR_DATA,
                     "'%s': attribute '%s' of %s is %s with %lld value(s), expected one %s",
                     f->path, attr, obj, tname, (long long)npts, want_txt);
    }
    return TESS_OK;
}

tess_status tess_ds_attr_int(const tess_ds_file *f, const char *obj, const char *attr, int64_t *v) {
    hid_t o = H5I_INVALID_HID;
    TESS_CHECK(attr_object(f, obj, attr, H5T_INTEGER, "integer", &o));
    int rc = tess_h5_attr_read_i64(o, attr, v);
    H5Oclose(o);
    TESS_REQUIRE(rc == 0, TESS_ERR_DATA, "'%s': cannot read attribute '%s' of %s", f->path, attr,
                 obj);
    return TESS_OK;
}

tess_status tess_ds_attr_double(const tess_ds_file *f, const char *obj, const char *attr,
                                double *v) {
    hid_t o = H5I_INVALID_HID;
    TESS_CHECK(attr_object(f, obj, attr, H5T_FLOAT, "float", &o));
    int rc = tess_h5_attr_read_double(o, attr, v);
    H5Oclose(o);
    TESS_REQUIRE(rc == 0, TESS_ERR_DATA, "'%s': cannot read attribute '%s' of %s", f->path, attr,
                 obj);
    return TESS_OK;
}

tess_status tess_ds_attr_string(const tess_ds_file *f, const char *obj, const char *attr, char *buf,
                                size_t n) {
    hid_t o = H5I_INVALID_HID;
    TESS_CHECK(attr_object(f, obj, attr, H5T_STRING, "string", &o));
    int rc = tess_h5_attr_read_str(o, attr, buf, n);
    H5Oclose(o);
    TESS_REQUIRE(rc == 0, TESS_ERR_DATA, "'%s': cannot read string attribute '%s' of %s", f->path,
                 attr, obj);
    return TESS_OK;
}

tess_status tess_ds_read_runs(const tess_ds_file *f, hid_t dset, const char *name, hid_t memtype,
                              int64_t ncols, const int64_t *lo, const int64_t *cnt, int64_t nruns,
                              void *buf) {
    hid_t fs = H5Dget_space(dset);
    TESS_REQUIRE(fs >= 0, TESS_ERR_DATA, "'%s': cannot read the shape of %s", f->path, name);
    int nd = H5Sget_simple_extent_ndims(fs);
    int64_t total = 0;
    herr_t e = H5Sselect_none(fs);
    for (int64_t i = 0; i < nruns && e >= 0; i++) {
        if (cnt[i] == 0) continue;
        hsize_t start[2] = {(hsize_t)lo[i], 0}, count[2] = {(hsize_t)cnt[i], (hsize_t)ncols};
        e = H5Sselect_hyperslab(fs, H5S_SELECT_OR, start, NULL, count, NULL);
        total += cnt[i] * ncols;
    }
    hsize_t mdim = (hsize_t)(total > 0 ? total : 1);
    hid_t ms = H5Screate_simple(1, &mdim, NULL);
    if (total == 0 && ms >= 0) e = e >= 0 ? H5Sselect_none(ms) : e;
    char dummy[8];
    if (e >= 0 && ms >= 0 && nd >= 1)
        e = H5Dread(dset, memtype, ms, fs, f->dxpl, total > 0 ? buf : (void *)dummy);
    char why[256];
    tess_h5_reason(why, sizeof why);
    if (ms >= 0) H5Sclose(ms);
    H5Sclose(fs);
    TESS_REQUIRE(e >= 0 && ms >= 0, TESS_ERR_DATA, "'%s': reading %s failed: %s", f->path, name,
                 why);
    return TESS_OK;
}

/* --- writer ------------------------------------------------------------------------------- */

tess_status tess_ds_writer_create(tess_ds_writer *w, const char *path, const char *format,
                                  int64_t version) {
    *w = (tess_ds_writer){.file = H5I_INVALID_HID};
    TESS_REQUIRE(path != NULL && strlen(path) < sizeof w->path, TESS_ERR_ARG,
                 "output path missing or longer than %d bytes", TESS_DS_PATH_MAX - 1);
    snprintf(w->path, sizeof w->path, "%s", path);
    snprintf(w->tmp, sizeof w->tmp, "%s.tmp", path);
    tess_h5_quiet_begin(&w->quiet);
    w->file = H5Fcreate(w->tmp, H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
    if (w->file < 0) {
        char why[256];
        tess_h5_reason(why, sizeof why);
        int err = errno;
        tess_h5_quiet_end(&w->quiet);
        TESS_REQUIRE(false, TESS_ERR_IO, "cannot create '%s': %s (%s)", w->tmp, why, strerror(err));
    }
    tess_status s = tess_ds_write_attr_string(w, "/", "format", format);
    if (s == TESS_OK) s = tess_ds_write_attr_int(w, "/", "format_version", version);
    if (s != TESS_OK) {
        tess_ds_writer_abandon(w);
        return tess_error_push(s, __FILE__, __LINE__, __func__, "writing '%s'", w->tmp);
    }
    return TESS_OK;
}

tess_status tess_ds_write_group(tess_ds_writer *w, const char *name) {
    hid_t g = H5Gcreate2(w->file, name, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
    TESS_REQUIRE(g >= 0, TESS_ERR_IO, "'%s': cannot create group %s", w->tmp, name);
    H5Gclose(g);
    return TESS_OK;
}

tess_status tess_ds_write_array(tess_ds_writer *w, const char *name, hid_t ftype, hid_t mtype,
                                int ndim, const int64_t *dims, const void *buf) {
    TESS_REQUIRE(ndim >= 1 && ndim <= TESS_DS_MAX_DIMS, TESS_ERR_ARG, "ndim %d", ndim);
    hsize_t h[TESS_DS_MAX_DIMS];
    int64_t n = 1;
    for (int i = 0; i < ndim; i++) {
        TESS_REQUIRE(dims[i] >= 0, TESS_ERR_ARG, "%s: dimension %d is %lld", name, i,
                     (long long)dims[i]);
        h[i] = (hsize_t)dims[i];
        n *= dims[i];
    }
    hid_t sp = H5Screate_simple(ndim, h, NULL);
    hid_t lcpl = H5Pcreate(H5P_LINK_CREATE);
    if (lcpl >= 0) H5Pset_create_intermediate_group(lcpl, 1);
    hid_t d = sp >= 0 && lcpl >= 0
                  ? H5Dcreate2(w->file, name, ftype, sp, lcpl, H5P_DEFAULT, H5P_DEFAULT)
                  : H5I_INVALID_HID;
    herr_t e = d >= 0 ? 0 : -1;
    if (d >= 0 && n > 0) e = H5Dwrite(d, mtype, H5S_ALL, H5S_ALL, H5P_DEFAULT, buf);
    char why[256];
    tess_h5_reason(why, sizeof why);
    if (d >= 0) H5Dclose(d);
    if (lcpl >= 0) H5Pclose(lcpl);
    if (sp >= 0) H5Sclose(sp);
    TESS_REQUIRE(e >= 0, TESS_ERR_IO, "'%s': cannot write dataset %s: %s", w->tmp, name, why);
    return TESS_OK;
}

/* Object obj of w, opened to add attribute attr (close it with attr_written). */
static tess_status attr_target(tess_ds_writer *w, const char *obj, const char *attr, hid_t *o) {
    *o = H5Oopen(w->file, obj, H5P_DEFAULT);
    TESS_REQUIRE(*o >= 0, TESS_ERR_IO, "'%s': cannot open %s to add attribute '%s'", w->tmp, obj,
                 attr);
    return TESS_OK;
}

/* Close o and turn rc, the result of an io/h5.h attribute writer, into a status. */
static tess_status attr_written(tess_ds_writer *w, const char *obj, const char *attr, hid_t o,
                                int rc) {
    H5Oclose(o);
    TESS_REQUIRE(rc == 0, TESS_ERR_IO, "'%s': cannot write attribute '%s' of %s", w->tmp, attr,
                 obj);
    return TESS_OK;
}

tess_status tess_ds_write_attr_int(tess_ds_writer *w, const char *obj, const char *attr,
                                   int64_t v) {
    hid_t o = H5I_INVALID_HID;
    TESS_CHECK(attr_target(w, obj, attr, &o));
    return attr_written(w, obj, attr, o, tess_h5_attr_write_i64(o, attr, v));
}

tess_status tess_ds_write_attr_double(tess_ds_writer *w, const char *obj, const char *attr,
                                      double v) {
    hid_t o = H5I_INVALID_HID;
    TESS_CHECK(attr_target(w, obj, attr, &o));
    return attr_written(w, obj, attr, o, tess_h5_attr_write_double(o, attr, v));
}

tess_status tess_ds_write_attr_string(tess_ds_writer *w, const char *obj, const char *attr,
                                      const char *v) {
    hid_t o = H5I_INVALID_HID;
    TESS_CHECK(attr_target(w, obj, attr, &o));
    return attr_written(w, obj, attr, o, tess_h5_attr_write_str(o, attr, v));
}

tess_status tess_ds_writer_commit(tess_ds_writer *w) {
    herr_t e = H5Fclose(w->file);
    w->file = H5I_INVALID_HID;
    tess_h5_quiet_end(&w->quiet);
    if (e < 0) {
        remove(w->tmp);
        TESS_REQUIRE(false, TESS_ERR_IO, "closing '%s' failed", w->tmp);
    }
    if (rename(w->tmp, w->path) != 0) {
        int err = errno;
        remove(w->tmp);
        TESS_REQUIRE(false, TESS_ERR_IO, "cannot rename '%s' to '%s': %s", w->tmp, w->path,
                     strerror(err));
    }
    return TESS_OK;
}

void tess_ds_writer_abandon(tess_ds_writer *w) {
    if (w->file != H5I_INVALID_HID) {
        H5Fclose(w->file);
        w->file = H5I_INVALID_HID;
        tess_h5_quiet_end(&w->quiet);
    }
    remove(w->tmp);
}

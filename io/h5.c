/* h5.c - the HDF5 helpers io shares (see h5.h). */
#include "io/h5.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* --- error printing -------------------------------------------------------------------------- */

void tess_h5_quiet_begin(tess_h5_quiet *q) {
    if (H5Eget_auto2(H5E_DEFAULT, &q->func, &q->data) < 0) {
        q->func = NULL;
        q->data = NULL;
    }
    H5Eset_auto2(H5E_DEFAULT, NULL, NULL);
}

void tess_h5_quiet_end(const tess_h5_quiet *q) { H5Eset_auto2(H5E_DEFAULT, q->func, q->data); }

typedef struct {
    char *buf;
    size_t n;
    bool found;
} reason_ctx;

/* Walking upward, the first record is the innermost: where HDF5 first saw the problem. */
static herr_t reason_walk(unsigned depth, const H5E_error2_t *e, void *data) {
    (void)depth;
    reason_ctx *c = data;
    if (c->found || e->desc == NULL || e->desc[0] == '\0') return 0;
    snprintf(c->buf, c->n, "%s", e->desc);
    c->found = true;
    return 0;
}

void tess_h5_reason(char *buf, size_t n) {
    reason_ctx c = {buf, n, false};
    if (n == 0) return;
    if (H5Ewalk2(H5E_DEFAULT, H5E_WALK_UPWARD, reason_walk, &c) < 0 || !c.found)
        snprintf(buf, n, "no HDF5 detail");
}

/* --- names for messages ---------------------------------------------------------------------- */

void tess_h5_type_name(hid_t type, char *buf, size_t n) {
    size_t bytes = H5Tget_size(type);
    switch (H5Tget_class(type)) {
    case H5T_FLOAT: snprintf(buf, n, "float%zu", 8 * bytes); break;
    case H5T_INTEGER:
        snprintf(buf, n, "%sint%zu", H5Tget_sign(type) == H5T_SGN_NONE ? "u" : "", 8 * bytes);
        break;
    case H5T_STRING: snprintf(buf, n, "string"); break;
    case H5T_COMPOUND: snprintf(buf, n, "compound"); break;
    case H5T_ENUM: snprintf(buf, n, "enum"); break;
    default: snprintf(buf, n, "HDF5 type class %d", (int)H5Tget_class(type)); break;
    }
}

void tess_h5_shape_text(char *buf, size_t n, int ndim, const int64_t *dims, const char *sep) {
    size_t off = (size_t)snprintf(buf, n, "[");
    for (int d = 0; d < ndim && off < n; d++) {
        if (dims[d] < 0)
            off += (size_t)snprintf(buf + off, n - off, "%s*", d ? sep : "");
        else
            off += (size_t)snprintf(buf + off, n - off, "%s%lld", d ? sep : "", (long long)dims[d]);
    }
    if (off < n) snprintf(buf + off, n - off, "]");
}

/* --- attributes ------------------------------------------------------------------------------ */

static int attr_write(hid_t loc, const char *name, hid_t ftype, hid_t mtype, const void *value) {
    hid_t space = H5Screate(H5S_SCALAR);
    if (space < 0) return -1;
    hid_t a = H5Acreate2(loc, name, ftype, space, H5P_DEFAULT, H5P_DEFAULT);
    int rc = a >= 0 && H5Awrite(a, mtype, value) >= 0 ? 0 : -1;
    if (a >= 0 && H5Aclose(a) < 0) rc = -1;
    H5Sclose(space);
    return rc;
}

int tess_h5_attr_write_str(hid_t loc, const char *name, const char *value) {
    hid_t t = H5Tcopy(H5T_C_S1);
    if (t < 0) return -1;
    int rc = -1;
    if (H5Tset_size(t, H5T_VARIABLE) >= 0 && H5Tset_cset(t, H5T_CSET_UTF8) >= 0)
        rc = attr_write(loc, name, t, t, &value);
    H5Tclose(t);
    return rc;
}

int tess_h5_attr_write_str_fixed(hid_t loc, const char *name, const char *value) {
    hid_t t = H5Tcopy(H5T_C_S1);
    if (t < 0) return -1;
    int rc = -1;
    const size_t len = strlen(value);
    if (H5Tset_size(t, len ? len : 1) >= 0 && H5Tset_strpad(t, H5T_STR_NULLPAD) >= 0 &&
        H5Tset_cset(t, H5T_CSET_UTF8) >= 0)
        rc = attr_write(loc, name, t, t, len ? value : "");
    H5Tclose(t);
    return rc;
}

int tess_h5_attr_write_i64(hid_t loc, const char *name, int64_t v) {
    return attr_write(loc, name, H5T_STD_I64LE, H5T_NATIVE_INT64, &v);
}

int tess_h5_attr_write_u64(hid_t loc, const char *name, uint64_t v) {
    return attr_write(loc, name, H5T_STD_U64LE, H5T_NATIVE_UINT64, &v);
}

int tess_h5_attr_write_double(hid_t loc, const char *name, double v) {
    return attr_write(loc, name, H5T_IEEE_F64LE, H5T_NATIVE_DOUBLE, &v);
}

int tess_h5_attr_read_str(hid_t loc, const char *name, char *buf, size_t n) {
    hid_t a = H5Aopen(loc, name, H5P_DEFAULT);
    if (a < 0) return -1;
    int rc = -1;
    hid_t ft = H5Aget_type(a), space = H5Aget_space(a);
    if (ft >= 0 && space >= 0 && H5Tget_class(ft) == H5T_STRING &&
        H5Sget_simple_extent_npoints(space) == 1) {
        hid_t mt = H5Tcopy(H5T_C_S1);
        if (mt >= 0) H5Tset_cset(mt, H5Tget_cset(ft)); /* HDF5 converts no ASCII <-> UTF-8 */
        if (H5Tis_variable_str(ft) > 0) {
            char *s = NULL;
            if (mt >= 0 && H5Tset_size(mt, H5T_VARIABLE) >= 0 && H5Aread(a, mt, &s) >= 0) {
                snprintf(buf, n, "%s", s ? s : "");
                H5free_memory(s);
                rc = 0;
            }
        } else {
            size_t len = H5Tget_size(ft);
            char *s = calloc(len + 1, 1);
            if (s && mt >= 0 && H5Tset_size(mt, len + 1) >= 0 && H5Aread(a, mt, s) >= 0) {
                snprintf(buf, n, "%s", s);
                rc = 0;
            }
            free(s);
        }
        if (mt >= 0) H5Tclose(mt);
    }
    if (space >= 0) H5Sclose(space);
    if (ft >= 0) H5Tclose(ft);
    H5Aclose(a);
    return rc;
}

/* A single value of class cls, read as mtype into v. */
static int attr_read_num(hid_t loc, const char *name, H5T_class_t cls, hid_t mtype, void *v) {
    hid_t a = H5Aopen(loc, name, H5P_DEFAULT);
    if (a < 0) return -1;
    hid_t ft = H5Aget_type(a), space = H5Aget_space(a);
    int rc = ft >= 0 && space >= 0 && H5Tget_class(ft) == cls &&
                     H5Sget_simple_extent_npoints(space) == 1 && H5Aread(a, mtype, v) >= 0
                 ? 0
                 : -1;
    if (space >= 0) H5Sclose(space);
    if (ft >= 0) H5Tclose(ft);
    H5Aclose(a);
    return rc;
}

int tess_h5_attr_read_i64(hid_t loc, const char *name, int64_t *v) {
    return attr_read_num(loc, name, H5T_INTEGER, H5T_NATIVE_INT64, v);
}

int tess_h5_attr_read_u64(hid_t loc, const char *name, uint64_t *v) {
    return attr_read_num(loc, name, H5T_INTEGER, H5T_NATIVE_UINT64, v);
}

int tess_h5_attr_read_double(hid_t loc, const char *name, double *v) {
    return attr_read_num(loc, name, H5T_FLOAT, H5T_NATIVE_DOUBLE, v);
}

int tess_h5_attr_info(hid_t loc, const char *name, H5T_class_t *cls, char *type, size_t n,
                      int64_t *npoints) {
    hid_t a = H5Aopen(loc, name, H5P_DEFAULT);
    if (a < 0) return -1;
    hid_t t = H5Aget_type(a), space = H5Aget_space(a);
    int rc = t >= 0 && space >= 0 ? 0 : -1;
    if (rc == 0) {
        *cls = H5Tget_class(t);
        tess_h5_type_name(t, type, n);
        *npoints = (int64_t)H5Sget_simple_extent_npoints(space);
    }
    if (space >= 0) H5Sclose(space);
    if (t >= 0) H5Tclose(t);
    H5Aclose(a);
    return rc;
}

/* --- existence ------------------------------------------------------------------------------- */

bool tess_h5_attr_exists(hid_t loc, const char *name) { return H5Aexists(loc, name) > 0; }

bool tess_h5_path_exists(hid_t loc, const char *path) {
    char prefix[TESS_H5_PATH_MAX];
    size_t n = strlen(path);
    if (n == 0 || n >= sizeof prefix) return false;
    for (size_t i = 1; i <= n; i++) {
        if (i < n && path[i] != '/') continue;
        memcpy(prefix, path, i);
        prefix[i] = '\0';
        if (H5Lexists(loc, prefix, H5P_DEFAULT) <= 0) return false;
    }
    return true;
}

/* --- element types --------------------------------------------------------------------------- */

hid_t tess_h5_dtype_file(tess_dtype t) {
    return t == TESS_F32 ? H5T_IEEE_F32LE : t == TESS_F64 ? H5T_IEEE_F64LE : H5T_STD_I64LE;
}

hid_t tess_h5_dtype_mem(tess_dtype t) {
    return t == TESS_F32 ? H5T_NATIVE_FLOAT : t == TESS_F64 ? H5T_NATIVE_DOUBLE : H5T_NATIVE_INT64;
}

const char *tess_h5_dtype_name(tess_dtype t) {
    return t == TESS_F32 ? "float32" : t == TESS_F64 ? "float64" : "int64";
}

/* --- parallel file access -------------------------------------------------------------------- */

hid_t tess_h5_fapl_mpio(const tess_group *g, unsigned flags) {
    hid_t fapl = H5Pcreate(H5P_FILE_ACCESS);
    if (fapl < 0) return fapl;
    bool coll = (flags & TESS_H5_COLL_METADATA) != 0;
    if (H5Pset_fapl_mpio(fapl, g->comm, MPI_INFO_NULL) < 0 ||
        (coll && (H5Pset_all_coll_metadata_ops(fapl, 1) < 0 ||
                  H5Pset_coll_metadata_write(fapl, 1) < 0)) ||
        ((flags & TESS_H5_FORMAT_V18) &&
         H5Pset_libver_bounds(fapl, H5F_LIBVER_V18, H5F_LIBVER_V18) < 0) ||
        ((flags & TESS_H5_NO_LOCKING) && H5Pset_file_locking(fapl, 0, 1) < 0)) {
        H5Pclose(fapl);
        return -1;
    }
    return fapl;
}

hid_t tess_h5_open_collective(const tess_group *g, const char *path, unsigned flags) {
    hid_t fapl = tess_h5_fapl_mpio(g, flags);
    hid_t f = fapl >= 0 ? H5Fopen(path, H5F_ACC_RDONLY, fapl) : -1;
    if (fapl >= 0) H5Pclose(fapl);
    return f;
}

/* ckpt_h5.c - the HDF5 helpers of the checkpoint module (ckpt_impl.h): attributes, paths, type
 * names, element types, parallel file access. Error printing and HDF5's messages come from the
 * helpers io shares (io/dataset.h: tess_ds_quiet_*, tess_ds_h5_reason). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "io/ckpt_impl.h"

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

int ckpt_attr_write_str(hid_t loc, const char *name, const char *value) {
    hid_t t = H5Tcopy(H5T_C_S1);
    if (t < 0) return -1;
    int rc = -1;
    if (H5Tset_size(t, H5T_VARIABLE) >= 0 && H5Tset_cset(t, H5T_CSET_UTF8) >= 0)
        rc = attr_write(loc, name, t, t, &value);
    H5Tclose(t);
    return rc;
}

int ckpt_attr_write_i64(hid_t loc, const char *name, int64_t v) {
    return attr_write(loc, name, H5T_STD_I64LE, H5T_NATIVE_INT64, &v);
}

int ckpt_attr_write_u64(hid_t loc, const char *name, uint64_t v) {
    return attr_write(loc, name, H5T_STD_U64LE, H5T_NATIVE_UINT64, &v);
}

int ckpt_attr_read_str(hid_t loc, const char *name, char *buf, size_t n) {
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

static int attr_read_int(hid_t loc, const char *name, hid_t mtype, void *v) {
    hid_t a = H5Aopen(loc, name, H5P_DEFAULT);
    if (a < 0) return -1;
    hid_t ft = H5Aget_type(a), space = H5Aget_space(a);
    int rc = ft >= 0 && space >= 0 && H5Tget_class(ft) == H5T_INTEGER &&
                     H5Sget_simple_extent_npoints(space) == 1 && H5Aread(a, mtype, v) >= 0
                 ? 0
                 : -1;
    if (space >= 0) H5Sclose(space);
    if (ft >= 0) H5Tclose(ft);
    H5Aclose(a);
    return rc;
}

int ckpt_attr_read_i64(hid_t loc, const char *name, int64_t *v) {
    return attr_read_int(loc, name, H5T_NATIVE_INT64, v);
}

int ckpt_attr_read_u64(hid_t loc, const char *name, uint64_t *v) {
    return attr_read_int(loc, name, H5T_NATIVE_UINT64, v);
}

bool ckpt_attr_exists(hid_t loc, const char *name) { return H5Aexists(loc, name) > 0; }

bool ckpt_path_exists(hid_t loc, const char *path) {
    char buf[CKPT_DSET_PATH_MAX + 8];
    if (strlen(path) >= sizeof buf) return false;
    strcpy(buf, path);
    for (char *p = buf + 1;; p++) {
        if (*p != '/' && *p != '\0') continue;
        char saved = *p;
        *p = '\0';
        if (H5Lexists(loc, buf, H5P_DEFAULT) <= 0) return false;
        *p = saved;
        if (saved == '\0') return true;
    }
}

void ckpt_type_name(hid_t type, char *buf, size_t n) {
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

/* --- element types ------------------------------------------------------------------------- */

hid_t ckpt_dtype_file(tess_dtype t) {
    return t == TESS_F32 ? H5T_IEEE_F32LE : t == TESS_F64 ? H5T_IEEE_F64LE : H5T_STD_I64LE;
}

hid_t ckpt_dtype_mem(tess_dtype t) {
    return t == TESS_F32 ? H5T_NATIVE_FLOAT : t == TESS_F64 ? H5T_NATIVE_DOUBLE : H5T_NATIVE_INT64;
}

const char *ckpt_dtype_name(tess_dtype t) {
    return t == TESS_F32 ? "float32" : t == TESS_F64 ? "float64" : "int64";
}

/* --- parallel file access ------------------------------------------------------------------- */

hid_t ckpt_fapl_mpio(MPI_Comm comm) {
    hid_t fapl = H5Pcreate(H5P_FILE_ACCESS);
    if (fapl < 0) return fapl;
    if (H5Pset_fapl_mpio(fapl, comm, MPI_INFO_NULL) < 0 ||
        H5Pset_all_coll_metadata_ops(fapl, 1) < 0 || H5Pset_coll_metadata_write(fapl, 1) < 0 ||
        H5Pset_libver_bounds(fapl, H5F_LIBVER_V18, H5F_LIBVER_V18) < 0 ||
        /* our own tmp + rename protocol protects the file; locks fail on NFS and some Lustre */
        H5Pset_file_locking(fapl, 0, 1) < 0) {
        H5Pclose(fapl);
        return -1;
    }
    return fapl;
}

hid_t ckpt_open_collective(MPI_Comm comm, const char *path) {
    hid_t fapl = ckpt_fapl_mpio(comm);
    hid_t f = fapl >= 0 ? H5Fopen(path, H5F_ACC_RDONLY, fapl) : -1;
    if (fapl >= 0) H5Pclose(fapl);
    return f;
}

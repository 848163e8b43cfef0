/* ckpt_tamper.h - damage a checkpoint file in the ways docs/checkpoints.md lists, with serial HDF5
 * and plain file I/O. Header-only, for tests; each returns 0 on success, -1 on failure. Run on
 * one rank while the others wait. */
#ifndef TESS_TEST_CKPT_TAMPER_H
#define TESS_TEST_CKPT_TAMPER_H

#include <hdf5.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

static inline int tamper_copy(const char *src, const char *dst) {
    FILE *in = fopen(src, "rb"), *out = in ? fopen(dst, "wb") : NULL;
    int rc = in && out ? 0 : -1;
    char buf[65536];
    size_t n;
    while (rc == 0 && (n = fread(buf, 1, sizeof buf, in)) > 0)
        if (fwrite(buf, 1, n, out) != n) rc = -1;
    if (in) fclose(in);
    if (out && fclose(out) != 0) rc = -1;
    return rc;
}

static inline hid_t tamper_open(const char *path, unsigned flags) {
    hid_t fapl = H5Pcreate(H5P_FILE_ACCESS);
    H5Pset_file_locking(fapl, 0, 1);
    hid_t f = H5Fopen(path, flags, fapl);
    H5Pclose(fapl);
    return f;
}

/* File offset of the first element of a contiguous dataset, or -1. */
static inline int64_t tamper_data_offset(const char *path, const char *dataset) {
    hid_t f = tamper_open(path, H5F_ACC_RDONLY);
    if (f < 0) return -1;
    hid_t d = H5Dopen2(f, dataset, H5P_DEFAULT);
    haddr_t a = d >= 0 ? H5Dget_offset(d) : HADDR_UNDEF;
    if (d >= 0) H5Dclose(d);
    H5Fclose(f);
    return a == HADDR_UNDEF ? -1 : (int64_t)a;
}

/* XOR one byte at offset `at` of the file with mask. */
static inline int tamper_flip(const char *path, int64_t at, unsigned char mask) {
    FILE *f = fopen(path, "r+b");
    if (!f) return -1;
    int c = -1;
    if (fseek(f, (long)at, SEEK_SET) == 0) c = fgetc(f);
    int rc = c >= 0 && fseek(f, (long)at, SEEK_SET) == 0 && fputc(c ^ mask, f) != EOF ? 0 : -1;
    if (fclose(f) != 0) rc = -1;
    return rc;
}

/* Flip a byte inside the data of one element of dataset. */
static inline int tamper_flip_dataset(const char *path, const char *dataset, int64_t byte) {
    int64_t off = tamper_data_offset(path, dataset);
    return off < 0 ? -1 : tamper_flip(path, off + byte, 0x10);
}

static inline int tamper_delete(const char *path, const char *object) {
    hid_t f = tamper_open(path, H5F_ACC_RDWR);
    if (f < 0) return -1;
    int rc = H5Ldelete(f, object, H5P_DEFAULT) >= 0 ? 0 : -1;
    return H5Fclose(f) >= 0 ? rc : -1;
}

/* Replace (or add) a dataset by one of type `type` and shape dims, zero-filled, with a hash
 * attribute so only the type or shape is wrong. */
static inline int tamper_replace(const char *path, const char *object, hid_t type, int ndim,
                          const hsize_t *dims) {
    hid_t f = tamper_open(path, H5F_ACC_RDWR);
    if (f < 0) return -1;
    if (H5Lexists(f, object, H5P_DEFAULT) > 0) H5Ldelete(f, object, H5P_DEFAULT);
    hid_t space = H5Screate_simple(ndim, dims, NULL);
    hid_t d = H5Dcreate2(f, object, type, space, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
    int rc = d >= 0 ? 0 : -1;
    if (d >= 0) {
        hid_t s1 = H5Screate(H5S_SCALAR);
        uint64_t h = 1;
        hid_t a = H5Acreate2(d, "hash", H5T_STD_U64LE, s1, H5P_DEFAULT, H5P_DEFAULT);
        if (a < 0 || H5Awrite(a, H5T_NATIVE_UINT64, &h) < 0) rc = -1;
        if (a >= 0) H5Aclose(a);
        H5Sclose(s1);
        H5Dclose(d);
    }
    H5Sclose(space);
    return H5Fclose(f) >= 0 ? rc : -1;
}

static inline int tamper_set_int_attr(const char *path, const char *object, const char *name,
                               int64_t v) {
    hid_t f = tamper_open(path, H5F_ACC_RDWR);
    if (f < 0) return -1;
    hid_t a = H5Aopen_by_name(f, object, name, H5P_DEFAULT, H5P_DEFAULT);
    int rc = a >= 0 && H5Awrite(a, H5T_NATIVE_INT64, &v) >= 0 ? 0 : -1;
    if (a >= 0) H5Aclose(a);
    return H5Fclose(f) >= 0 ? rc : -1;
}

static inline int tamper_delete_attr(const char *path, const char *object, const char *name) {
    hid_t f = tamper_open(path, H5F_ACC_RDWR);
    if (f < 0) return -1;
    int rc = H5Adelete_by_name(f, object, name, H5P_DEFAULT) >= 0 ? 0 : -1;
    return H5Fclose(f) >= 0 ? rc : -1;
}

static inline int tamper_truncate(const char *path, int64_t bytes) {
    return truncate(path, (off_t)bytes);
}

static inline int tamper_write_text(const char *path, const char *text) {
    FILE *f = fopen(path, "w");
    if (!f) return -1;
    int rc = fputs(text, f) >= 0 ? 0 : -1;
    return fclose(f) == 0 ? rc : -1;
}

#endif

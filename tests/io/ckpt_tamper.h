/* ckpt_tamper.h - damage a checkpoint file in the ways docs/checkpoints.md lists, with serial HDF5
 * and plain file I/O. Header-only, for tests; each returns 0 on success, -1 on failure. Run on
 * one rank while the others wait. */
#ifndef TESS_TEST_CKPT_TAMPER_H
#define TESS_TEST_CKPT_TAMPER_H

#include <hdf5.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "io/ckpt_impl.h" /* ckpt_seal_write, ckpt_extent (tamper_reseal) */

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

/* Format 4: the user block size from path's integrity record (where the superblock starts), or
 * -1. */
static inline int64_t tamper_userblock(const char *path) {
    unsigned char b[8];
    FILE *f = fopen(path, "rb");
    int ok = f && fseek(f, 24, SEEK_SET) == 0 && fread(b, 1, 8, f) == 8;
    if (f) fclose(f);
    int64_t v = 0;
    for (int i = 0; i < 8; i++) v |= (int64_t)b[i] << (8 * i);
    return ok ? v : -1;
}

/* Format 4: rewrite path's integrity record after an HDF5 edit, as a forger who knows the
 * format would, so that the checks behind it (ranges, structure, hashes) are what a test sees.
 * The record's fields come from the root attributes where they can be read, else from the old
 * record; the extents from every dataset with storage. */
typedef struct {
    ckpt_extent *ext;
    int64_t n, cap;
} tamper_extents;

static inline herr_t tamper_extent_of(hid_t root, const char *name, const H5O_info_t *oi,
                                      void *data) {
    tamper_extents *t = data;
    if (oi->type != H5O_TYPE_DATASET || strcmp(name, "config") == 0 ||
        strcmp(name, "manifest") == 0)
        return 0;
    hid_t d = H5Dopen2(root, name, H5P_DEFAULT);
    if (d < 0) return -1;
    const haddr_t off = H5Dget_offset(d);
    const hsize_t len = H5Dget_storage_size(d);
    H5Dclose(d);
    if (off == HADDR_UNDEF || len == 0) return 0;
    if (t->n == t->cap) {
        t->cap = t->cap ? 2 * t->cap : 64;
        ckpt_extent *grown = realloc(t->ext, (size_t)t->cap * sizeof *grown);
        if (!grown) return -1;
        t->ext = grown;
    }
    t->ext[t->n++] = (ckpt_extent){(int64_t)off, (int64_t)len};
    return 0;
}

static inline int tamper_reseal(const char *path) {
    unsigned char head[88];
    FILE *fp = fopen(path, "rb");
    if (!fp) return -1;
    const size_t got = fread(head, 1, sizeof head, fp);
    fclose(fp);
    if (got != sizeof head) return -1;
    int64_t v[9];
    for (int i = 0; i < 9; i++) {
        uint64_t x = 0;
        for (int b = 0; b < 8; b++) x |= (uint64_t)head[16 + 8 * i + b] << (8 * b);
        v[i] = (int64_t)x;
    }
    ckpt_seal_info in = {.format_version = v[0], .userblock = v[1], .step = v[3],
                         .data_cursor = v[4], .seed = (uint64_t)v[5], .world_size = v[6]};
    hid_t f = tamper_open(path, H5F_ACC_RDONLY);
    if (f < 0) return -1;
    H5E_auto2_t fn;
    void *fd;
    H5Eget_auto2(H5E_DEFAULT, &fn, &fd);
    H5Eset_auto2(H5E_DEFAULT, NULL, NULL);
    tess_h5_attr_read_i64(f, "format_version", &in.format_version);
    tess_h5_attr_read_i64(f, "step", &in.step);
    tess_h5_attr_read_i64(f, "data_cursor", &in.data_cursor);
    tess_h5_attr_read_u64(f, "seed", &in.seed);
    tess_h5_attr_read_i64(f, "world_size", &in.world_size);
    H5Eset_auto2(H5E_DEFAULT, fn, fd);
    tamper_extents t = {NULL, 0, 0};
    const int rc = H5Ovisit(f, H5_INDEX_NAME, H5_ITER_INC, tamper_extent_of, &t) >= 0 ? 0 : -1;
    H5Fclose(f);
    in.nextents = t.n;
    const int sealed = rc == 0 && ckpt_seal_write(path, &in, t.ext) == TESS_OK ? 0 : -1;
    free(t.ext);
    return sealed;
}

#endif

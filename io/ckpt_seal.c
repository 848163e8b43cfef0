/* ckpt_seal.c - the integrity record of format 4 (see ckpt_impl.h; the layout is documented for
 * users in docs/checkpoints.md, "What is protected, what is detected, what falls back").
 *
 * A format 4 checkpoint starts with an HDF5 user block (H5Pset_userblock: HDF5, h5py and h5dump
 * skip it) that holds this record, little-endian:
 *
 *   0   8 bytes  magic "TESSCKPT"             72  i64  number of data extents E
 *   8   u32      record version (1)           80  u64  digest
 *   12  u32      header bytes (128)           88  40 bytes of zeros
 *   16  i64      format_version               128 E x (i64 offset, i64 length): the raw data of
 *   24  i64      user block bytes (2^k)           every entry dataset, sorted by offset, in
 *   32  i64      file bytes                       the file's absolute byte offsets
 *   40  i64      step                         then zeros up to the user block's end
 *   48  i64      data_cursor
 *   56  u64      seed
 *   64  i64      world_size
 *
 * The digest is tess-poshash32x-v2 over the file's bytes taken one word per byte with the byte's
 * file offset as its index, over every byte except the digest field itself and the E extents:
 * the record, the superblock, object headers, heaps, B-trees, attributes, /config, /manifest and
 * the trailing metadata. The extents are covered by their datasets' own hashes. So every byte of
 * the file is covered by one check, and this one runs with plain reads before HDF5 parses
 * anything. Not collective: rank 0 seals after H5Fclose and checks before H5Fopen. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "io/ckpt_impl.h"

enum {
    SEAL_VERSION = 1,
    SEAL_HEAD = 128,        /* header bytes; the extents follow */
    SEAL_DIGEST_AT = 80,    /* the digest field, not hashed */
    SEAL_CHUNK = 1 << 20,   /* bytes per read while hashing */
};
static const char seal_magic[8] = {'T', 'E', 'S', 'S', 'C', 'K', 'P', 'T'};
/* The largest user block a reader accepts: 1 GiB holds 67 million extents. */
static const int64_t seal_max_userblock = (int64_t)1 << 30;

static void put64(unsigned char *p, uint64_t v) {
    for (int i = 0; i < 8; i++) p[i] = (unsigned char)(v >> (8 * i));
}
static uint64_t get64(const unsigned char *p) {
    uint64_t v = 0;
    for (int i = 0; i < 8; i++) v |= (uint64_t)p[i] << (8 * i);
    return v;
}
static void put32(unsigned char *p, uint32_t v) {
    for (int i = 0; i < 4; i++) p[i] = (unsigned char)(v >> (8 * i));
}
static uint32_t get32(const unsigned char *p) {
    uint32_t v = 0;
    for (int i = 0; i < 4; i++) v |= (uint32_t)p[i] << (8 * i);
    return v;
}

int64_t ckpt_seal_userblock(int64_t nextents) {
    int64_t ub = 512;
    while (ub < SEAL_HEAD + 16 * nextents) ub *= 2;
    return ub;
}

bool ckpt_seal_magic(const unsigned char *head, size_t n) {
    return n >= sizeof seal_magic && memcmp(head, seal_magic, sizeof seal_magic) == 0;
}

/* pread exactly n bytes at off; 0, or -1 with errno (EIO for a short file). */
static int read_at(int fd, void *buf, size_t n, int64_t off) {
    unsigned char *p = buf;
    while (n > 0) {
        ssize_t r = pread(fd, p, n, (off_t)off);
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0) {
            if (r == 0) errno = EIO;
            return -1;
        }
        p += r;
        n -= (size_t)r;
        off += r;
    }
    return 0;
}

/* Hash sum of bytes [lo, hi) of fd, indexed by file offset, leaving out the digest field. */
static int hash_range(int fd, int64_t lo, int64_t hi, unsigned char *buf, uint64_t *acc,
                      int64_t *count) {
    for (int64_t a = lo; a < hi;) {
        int64_t b = a + SEAL_CHUNK < hi ? a + SEAL_CHUNK : hi;
        if (read_at(fd, buf, (size_t)(b - a), a) != 0) return -1;
        for (int64_t x = a; x < b;) { /* split around the digest field */
            int64_t y = b;
            if (x < SEAL_DIGEST_AT && y > SEAL_DIGEST_AT) y = SEAL_DIGEST_AT;
            if (x >= SEAL_DIGEST_AT && x < SEAL_DIGEST_AT + 8) {
                x = SEAL_DIGEST_AT + 8 < b ? SEAL_DIGEST_AT + 8 : b;
                continue;
            }
            *acc = tess_ckpt_hash_add(TESS_CKPT_HASH_V2, *acc, buf + (x - a), 1, x, y - x);
            *count += y - x;
            x = y;
        }
        a = b;
    }
    return 0;
}

/* The digest of fd (file_bytes long) without the sorted extents ext. 0 or -1 with errno. */
static int digest_file(int fd, int64_t file_bytes, const ckpt_extent *ext, int64_t n,
                       uint64_t *digest) {
    unsigned char *buf = malloc(SEAL_CHUNK);
    if (!buf) {
        errno = ENOMEM;
        return -1;
    }
    uint64_t acc = 0;
    int64_t count = 0, at = 0;
    int rc = 0;
    for (int64_t i = 0; i <= n && rc == 0; i++) {
        int64_t end = i < n ? ext[i].off : file_bytes;
        rc = hash_range(fd, at, end, buf, &acc, &count);
        if (i < n) at = ext[i].off + ext[i].len;
    }
    free(buf);
    *digest = tess_ckpt_hash_final(acc, count);
    return rc;
}

static int cmp_extent(const void *a, const void *b) {
    const ckpt_extent *x = a, *y = b;
    return (x->off > y->off) - (x->off < y->off);
}

tess_status ckpt_seal_write(const char *path, const ckpt_seal_info *in, ckpt_extent *ext) {
    TESS_REQUIRE(SEAL_HEAD + 16 * in->nextents <= in->userblock, TESS_ERR_ARG,
                 "%lld data extents do not fit a user block of %lld bytes",
                 (long long)in->nextents, (long long)in->userblock);
    qsort(ext, (size_t)in->nextents, sizeof *ext, cmp_extent);
    int fd = open(path, O_RDWR);
    TESS_REQUIRE(fd >= 0, TESS_ERR_IO, "cannot open '%s' to seal it: %s", path, strerror(errno));
    struct stat sb;
    unsigned char *rec = calloc((size_t)in->userblock, 1);
    tess_status s = TESS_OK;
    if (!rec) {
        s = tess_error_push(TESS_ERR_MEM, __FILE__, __LINE__, __func__,
                            "cannot allocate the integrity record of '%s'", path);
    } else if (fstat(fd, &sb) != 0) {
        s = tess_error_push(TESS_ERR_IO, __FILE__, __LINE__, __func__, "cannot stat '%s': %s",
                            path, strerror(errno));
    } else {
        memcpy(rec, seal_magic, sizeof seal_magic);
        put32(rec + 8, SEAL_VERSION);
        put32(rec + 12, SEAL_HEAD);
        const int64_t v[] = {in->format_version, in->userblock, (int64_t)sb.st_size, in->step,
                             in->data_cursor, (int64_t)in->seed, in->world_size, in->nextents};
        for (int i = 0; i < 8; i++) put64(rec + 16 + 8 * i, (uint64_t)v[i]);
        for (int64_t i = 0; i < in->nextents; i++) {
            put64(rec + SEAL_HEAD + 16 * i, (uint64_t)ext[i].off);
            put64(rec + SEAL_HEAD + 16 * i + 8, (uint64_t)ext[i].len);
        }
        uint64_t digest = 0;
        if (pwrite(fd, rec, (size_t)in->userblock, 0) != (ssize_t)in->userblock ||
            digest_file(fd, (int64_t)sb.st_size, ext, in->nextents, &digest) != 0)
            s = tess_error_push(TESS_ERR_IO, __FILE__, __LINE__, __func__,
                                "cannot write the integrity record of '%s': %s", path,
                                strerror(errno));
        put64(rec + SEAL_DIGEST_AT, digest);
        if (s == TESS_OK && pwrite(fd, rec + SEAL_DIGEST_AT, 8, SEAL_DIGEST_AT) != 8)
            s = tess_error_push(TESS_ERR_IO, __FILE__, __LINE__, __func__,
                                "cannot write the digest of '%s': %s", path, strerror(errno));
    }
    free(rec);
    if (close(fd) != 0 && s == TESS_OK)
        s = tess_error_push(TESS_ERR_IO, __FILE__, __LINE__, __func__, "cannot close '%s': %s",
                            path, strerror(errno));
    return s;
}

/* The header's fields, each range-checked against the file; a problem goes to m. */
static bool parse_head(const unsigned char *h, int64_t size, const char *path,
                       ckpt_seal_info *in, ckpt_msgs *m) {
    in->format_version = (int64_t)get64(h + 16);
    in->userblock = (int64_t)get64(h + 24);
    in->file_bytes = (int64_t)get64(h + 32);
    in->step = (int64_t)get64(h + 40);
    in->data_cursor = (int64_t)get64(h + 48);
    in->seed = get64(h + 56);
    in->world_size = (int64_t)get64(h + 64);
    in->nextents = (int64_t)get64(h + 72);
    if (in->file_bytes != size) {
        ckpt_msgs_add(m, "corrupt checkpoint '%s': it has %lld bytes, its integrity record says "
                      "%lld (truncated or extended)",
                      path, (long long)size, (long long)in->file_bytes);
        return false;
    }
    const char *bad = NULL;
    if (get32(h + 8) != SEAL_VERSION || get32(h + 12) != SEAL_HEAD) bad = "unknown record version";
    else if (in->userblock < 512 || in->userblock > seal_max_userblock ||
             (in->userblock & (in->userblock - 1)) != 0 || in->userblock >= size)
        bad = "user block size out of range";
    else if (in->nextents < 0 || in->nextents > (in->userblock - SEAL_HEAD) / 16)
        bad = "extent count out of range";
    if (bad) {
        ckpt_msgs_add(m, "corrupt checkpoint '%s': integrity record damaged (%s)", path, bad);
        return false;
    }
    return true;
}

tess_status ckpt_seal_check(const char *path, ckpt_seal_info *in, ckpt_msgs *m) {
    memset(in, 0, sizeof *in);
    int fd = open(path, O_RDONLY);
    if (fd < 0) {
        ckpt_msgs_add(m, "cannot open checkpoint '%s': %s", path, strerror(errno));
        return TESS_ERR_NOINPUT;
    }
    struct stat sb;
    unsigned char head[SEAL_HEAD];
    tess_status s = TESS_ERR_DATA;
    ckpt_extent *ext = NULL;
    if (fstat(fd, &sb) != 0) {
        ckpt_msgs_add(m, "cannot stat checkpoint '%s': %s", path, strerror(errno));
        s = TESS_ERR_NOINPUT;
    } else if (sb.st_size < SEAL_HEAD || read_at(fd, head, SEAL_HEAD, 0) != 0 ||
               !ckpt_seal_magic(head, SEAL_HEAD)) {
        ckpt_msgs_add(m, "corrupt checkpoint '%s' (%lld bytes): no integrity record", path,
                      (long long)sb.st_size);
    } else if (parse_head(head, (int64_t)sb.st_size, path, in, m)) {
        ext = in->nextents ? malloc((size_t)in->nextents * sizeof *ext) : NULL;
        unsigned char *raw = in->nextents ? malloc((size_t)in->nextents * 16) : NULL;
        if (in->nextents && (!ext || !raw)) {
            ckpt_msgs_add(m, "out of memory checking '%s'", path);
            s = TESS_ERR_MEM;
        } else if (in->nextents && read_at(fd, raw, (size_t)in->nextents * 16, SEAL_HEAD) != 0) {
            ckpt_msgs_add(m, "cannot read checkpoint '%s': %s", path, strerror(errno));
            s = TESS_ERR_NOINPUT;
        } else {
            const char *bad = NULL;
            for (int64_t i = 0; i < in->nextents && !bad; i++) {
                ext[i].off = (int64_t)get64(raw + 16 * i);
                ext[i].len = (int64_t)get64(raw + 16 * i + 8);
                const int64_t prev_end = i ? ext[i - 1].off + ext[i - 1].len : in->userblock;
                if (ext[i].len <= 0 || ext[i].off < prev_end || ext[i].len > in->file_bytes ||
                    ext[i].off > in->file_bytes - ext[i].len)
                    bad = "data extents out of order or outside the file";
            }
            uint64_t digest = 0;
            if (bad) {
                ckpt_msgs_add(m, "corrupt checkpoint '%s': integrity record damaged (%s)", path,
                              bad);
            } else if (digest_file(fd, in->file_bytes, ext, in->nextents, &digest) != 0) {
                ckpt_msgs_add(m, "cannot read checkpoint '%s': %s", path, strerror(errno));
                s = TESS_ERR_NOINPUT;
            } else if (digest != get64(head + SEAL_DIGEST_AT)) {
                ckpt_msgs_add(m, "corrupt checkpoint '%s': its metadata changed since it was "
                              "written (digest stored %016llx, file %016llx)",
                              path, (unsigned long long)get64(head + SEAL_DIGEST_AT),
                              (unsigned long long)digest);
            } else if (in->format_version > TESS_CKPT_FORMAT_VERSION) {
                ckpt_msgs_add(m, "checkpoint '%s' has format_version %lld, newer than this build "
                              "reads (%d): use a newer Tessera",
                              path, (long long)in->format_version, TESS_CKPT_FORMAT_VERSION);
            } else if (in->format_version < 4) {
                ckpt_msgs_add(m, "corrupt checkpoint '%s': its integrity record names format "
                              "%lld (records exist from format 4)",
                              path, (long long)in->format_version);
            } else {
                s = TESS_OK;
            }
        }
        free(raw);
    }
    free(ext);
    close(fd);
    return s;
}

/* ckpt_write.c - collective checkpoint writing, atomic commit, latest pointer, retention
 * (see ckpt.h; the file layout is described in docs/checkpoints.md). */
#define _GNU_SOURCE /* fallocate(FALLOC_FL_KEEP_SIZE): reserving a file's blocks (Linux) */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <time.h>
#include <unistd.h>

#include "core/log.h"      /* tess_log_info, tess_log_warn */
#include "core/mpicheck.h" /* TESS_MPI_CHECK */
#include "core/timer.h"    /* tess_timer_now */
#include "par/gather.h"   /* tess_par_gather_global */
#include "io/ckpt_impl.h"
#include "io/rundir.h"     /* tess_rundir_mkdirs */

/* What every rank writes identically: rank 0's values, broadcast. */
typedef struct {
    char created_utc[32];
    char *config; /* malloc'ed copy of rank 0's config text */
    int64_t config_len;
    int64_t version; /* format_version to write: the hash scheme and the counters' form */
} shared_meta;

/* Collective on g. */
static tess_status share_meta(const tess_group *g, const tess_ckpt_state *st, shared_meta *m) {
    MPI_Comm comm = g->comm;
    memset(m, 0, sizeof *m);
    const char *text = st->config_text ? st->config_text : "";
    if (g->rank == 0) {
        time_t now = time(NULL);
        struct tm tm;
        gmtime_r(&now, &tm);
        strftime(m->created_utc, sizeof m->created_utc, "%Y-%m-%dT%H:%M:%SZ", &tm);
        m->config_len = (int64_t)strlen(text);
        const char *v = getenv("TESS_CKPT_TEST_FORMAT_VERSION"); /* test hook, see ckpt.h */
        m->version = v && v[0] >= '1' && v[0] <= '3' && v[1] == '\0' ? v[0] - '0'
                                                                     : TESS_CKPT_FORMAT_VERSION;
    }
    TESS_MPI_CHECK(MPI_Bcast(m->created_utc, (int)sizeof m->created_utc, MPI_CHAR, 0, comm));
    TESS_MPI_CHECK(MPI_Bcast(&m->config_len, 1, MPI_INT64_T, 0, comm));
    TESS_MPI_CHECK(MPI_Bcast(&m->version, 1, MPI_INT64_T, 0, comm));
    TESS_REQUIRE(m->config_len < INT32_MAX, TESS_ERR_ARG, "config text of %lld bytes is too long",
                 (long long)m->config_len);
    m->config = malloc((size_t)m->config_len + 1);
    TESS_CHECK(tess_par_agree(
        g, CKPT_FAILED(m->config ? TESS_OK : TESS_ERR_MEM, "allocating the config text")));
    if (g->rank == 0) memcpy(m->config, text, (size_t)m->config_len);
    m->config[m->config_len] = '\0';
    TESS_MPI_CHECK(MPI_Bcast(m->config, (int)m->config_len, MPI_CHAR, 0, comm));
    return TESS_OK;
}

/* step, data_cursor and seed must be the same on every rank. */
static tess_status agree_scalars(MPI_Comm comm, const tess_ckpt_state *st) {
    int64_t v[6] = {st->step, st->data_cursor, (int64_t)st->seed}, r[6];
    for (int i = 0; i < 3; i++) v[3 + i] = -v[i];
    TESS_MPI_CHECK(MPI_Allreduce(v, r, 6, MPI_INT64_T, MPI_MAX, comm));
    for (int i = 0; i < 3; i++)
        TESS_REQUIRE(r[i] == -r[3 + i], TESS_ERR_ARG, "%s differs between ranks (%lld .. %lld)",
                     i == 0 ? "step" : i == 1 ? "data_cursor" : "seed", (long long)-r[3 + i],
                     (long long)r[i]);
    return TESS_OK;
}

static void layout_text(const ckpt_item *it, char *buf, size_t n) {
    if (it->owner >= 0) {
        snprintf(buf, n, "private(rank=%d)", it->owner);
        return;
    }
    const tess_layout *l = &it->e->layout;
    switch (l->kind) {
    case TESS_LAYOUT_SHARDED:
        snprintf(buf, n, "sharded(dim=%d,parts=%d)", l->dim, l->nparts);
        break;
    case TESS_LAYOUT_BLOCK_CYCLIC:
        snprintf(buf, n, "block_cyclic(grid=%dx%d,block=%lldx%lld)", l->nprow, l->npcol,
                 (long long)l->mb, (long long)l->nb);
        break;
    default: snprintf(buf, n, "replicated"); break;
    }
}

/* Records the first HDF5 failure of this rank and keeps going, so every rank still makes every
 * collective call; the verdict is agreed after H5Fclose. Also carries what format 4 needs: its
 * strings are fixed-length, and the raw data extents of the entry datasets go to the integrity
 * record (ckpt_seal.c). */
typedef struct {
    tess_status status;
    char what[TESS_CKPT_PATH_MAX + 768];
    bool fixed_strings;  /* format >= 4: no variable-length string (no global heap) */
    ckpt_extent *ext;    /* room for every entry dataset (the record of format 4, close_tmp) */
    int64_t next;
    int64_t end;         /* the largest end of any dataset's raw data (close_tmp) */
} write_err;

static int write_str(hid_t loc, const char *name, const char *value, const write_err *w) {
    return w->fixed_strings ? tess_h5_attr_write_str_fixed(loc, name, value)
                            : tess_h5_attr_write_str(loc, name, value);
}

static void fail(write_err *w, tess_status s, const char *fmt, const char *arg) {
    if (w->status != TESS_OK) return;
    char h5[256];
    tess_h5_reason(h5, sizeof h5);
    w->status = s;
    snprintf(w->what, sizeof w->what, fmt, arg);
    size_t len = strlen(w->what);
    snprintf(w->what + len, sizeof w->what - len, ": %s", h5);
}

/* mkdir -p of the groups above dataset path under file (all ranks, same calls). */
static void ensure_parents(hid_t file, const char *path, write_err *w) {
    char buf[CKPT_DSET_PATH_MAX];
    snprintf(buf, sizeof buf, "%s", path);
    for (char *p = buf + 1; *p; p++) {
        if (*p != '/') continue;
        *p = '\0';
        if (H5Lexists(file, buf, H5P_DEFAULT) <= 0) {
            hid_t g = H5Gcreate2(file, buf, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
            if (g < 0) fail(w, TESS_ERR_IO, "cannot create group %s", buf);
            else H5Gclose(g);
        }
        *p = '/';
    }
}

/* The property lists of every dataset: created with its storage allocated and no fill value
 * written (so creating a dataset writes nothing), and written with independent MPI-IO (a write
 * that fails on one rank, e.g. a full disk, fails there alone: no collective transfer inside
 * H5Dwrite can leave the other ranks waiting; the ranks agree on the outcome afterwards). */
typedef struct {
    hid_t dcpl, dxpl;
} write_io;

/* A dataset of global dims of type ftype, with a hash attribute and (if layout) a layout
 * attribute; collectively written from buf (only the selections given). */
static void write_dataset(hid_t file, const char *path, hid_t ftype, hid_t mtype, int ndim,
                          const hsize_t *dims, hid_t filesel, hid_t memsel, const void *buf,
                          uint64_t hash, const char *layout, const write_io *io, write_err *w) {
    hid_t space = ndim > 0 ? H5Screate_simple(ndim, dims, NULL) : H5Screate(H5S_SCALAR);
    hid_t d = space >= 0 ? H5Dcreate2(file, path, ftype, space, H5P_DEFAULT, io->dcpl,
                                      H5P_DEFAULT)
                         : -1;
    if (d < 0) fail(w, TESS_ERR_IO, "cannot create dataset %s", path);
    if (d >= 0 && tess_h5_attr_write_u64(d, "hash", hash) < 0)
        fail(w, TESS_ERR_IO, "cannot write the hash of %s", path);
    if (d >= 0 && layout && write_str(d, "layout", layout, w) < 0)
        fail(w, TESS_ERR_IO, "cannot write the layout of %s", path);
    const haddr_t off = d >= 0 ? H5Dget_offset(d) : HADDR_UNDEF;
    const hsize_t len = d >= 0 ? H5Dget_storage_size(d) : 0;
    if (off != HADDR_UNDEF && (int64_t)(off + len) > w->end) w->end = (int64_t)(off + len);
    if (d >= 0 && layout && w->ext) { /* an entry dataset: its raw data is an extent */
        if (off != HADDR_UNDEF && len > 0)
            w->ext[w->next++] = (ckpt_extent){(int64_t)off, (int64_t)len};
        else if (H5Sget_simple_extent_npoints(space) > 0)
            fail(w, TESS_ERR_IO, "dataset %s has no contiguous storage", path);
    }
    if (d >= 0 && H5Dwrite(d, mtype, memsel, filesel, io->dxpl, buf) < 0)
        fail(w, TESS_ERR_IO, "cannot write dataset %s", path);
    if (d >= 0) H5Dclose(d);
    if (space >= 0) H5Sclose(space);
}

/* File and memory selections of this rank's region of item it (none if its count is 0). */
static void region_spaces(const ckpt_item *it, hid_t *fsel, hid_t *msel) {
    const ckpt_region *r = &it->r;
    hsize_t g[TESS_MAX_DIMS], l[TESS_MAX_DIMS], off[TESS_MAX_DIMS], cnt[TESS_MAX_DIMS],
        mo[TESS_MAX_DIMS], one = 1;
    for (int d = 0; d < it->ndim; d++) {
        g[d] = (hsize_t)it->shape[d];
        off[d] = (hsize_t)r->off[d];
        cnt[d] = (hsize_t)r->cnt[d];
        mo[d] = (hsize_t)r->moff[d];
    }
    *fsel = H5Screate_simple(it->ndim, g, NULL);
    if (r->count == 0) {
        H5Sselect_none(*fsel);
        *msel = H5Screate_simple(1, &one, NULL);
        H5Sselect_none(*msel);
        return;
    }
    for (int d = 0; d < it->ndim; d++)
        l[d] = (hsize_t)(r->block_cyclic ? it->shape[d] : it->e->local_shape[d]);
    *msel = H5Screate_simple(it->ndim, l, NULL);
    H5Sselect_hyperslab(*fsel, H5S_SELECT_SET, off, NULL, cnt, NULL);
    H5Sselect_hyperslab(*msel, H5S_SELECT_SET, mo, NULL, cnt, NULL);
}

/* A string dataset (fixed-length UTF-8, NULL-padded) of nrows x width bytes, written by rank 0,
 * hashed over its bytes. nrows 0: a scalar. */
static void write_text(hid_t file, const char *path, const char *bytes, int64_t nrows,
                       size_t width, tess_ckpt_hash_scheme h, int rank, const write_io *io,
                       write_err *w) {
    hid_t t = H5Tcopy(H5T_C_S1);
    if (t < 0 || H5Tset_size(t, width) < 0 || H5Tset_strpad(t, H5T_STR_NULLPAD) < 0 ||
        H5Tset_cset(t, H5T_CSET_UTF8) < 0)
        fail(w, TESS_ERR_IO, "cannot make the string type of %s", path);
    const int64_t total = (nrows ? nrows : 1) * (int64_t)width;
    uint64_t hash = tess_ckpt_hash_final(tess_ckpt_hash_add(h, 0, bytes, 1, 0, total), total);
    hsize_t dims = (hsize_t)nrows;
    hid_t fsel = nrows ? H5Screate_simple(1, &dims, NULL) : H5Screate(H5S_SCALAR);
    hid_t msel = nrows ? H5Screate_simple(1, &dims, NULL) : H5Screate(H5S_SCALAR);
    if (rank != 0) {
        H5Sselect_none(fsel);
        H5Sselect_none(msel);
    }
    write_dataset(file, path, t, t, nrows ? 1 : 0, &dims, fsel, msel, bytes, hash, NULL, io, w);
    H5Sclose(fsel);
    H5Sclose(msel);
    if (t >= 0) H5Tclose(t);
}

static void write_root_attrs(hid_t file, const tess_ckpt_state *st, const ckpt_plan *p,
                             const shared_meta *m, int size, write_err *w) {
    char digest[24];
    snprintf(digest, sizeof digest, "%016llx", (unsigned long long)ckpt_plan_digest(p));
    struct {
        const char *name, *value;
    } strs[] = {{"format", TESS_CKPT_FORMAT},
                {"tessera_version", TESS_VERSION},
                {"app", st->app ? st->app : ""},
                {"created_utc", m->created_utc},
                {"model_digest", digest},
                {"hash_algorithm", tess_ckpt_hash_name(ckpt_scheme(m->version))},
                {"rng", "philox4x32-10"}};
    struct {
        const char *name;
        int64_t value;
    } ints[] = {{"format_version", m->version},
                {"step", st->step},
                {"data_cursor", st->data_cursor},
                {"world_size", size}};
    for (size_t i = 0; i < sizeof strs / sizeof strs[0]; i++)
        if (write_str(file, strs[i].name, strs[i].value, w) < 0)
            fail(w, TESS_ERR_IO, "cannot write root attribute %s", strs[i].name);
    for (size_t i = 0; i < sizeof ints / sizeof ints[0]; i++)
        if (tess_h5_attr_write_i64(file, ints[i].name, ints[i].value) < 0)
            fail(w, TESS_ERR_IO, "cannot write root attribute %s", ints[i].name);
    if (tess_h5_attr_write_u64(file, "seed", st->seed) < 0)
        fail(w, TESS_ERR_IO, "cannot write root attribute %s", "seed");
}

/* Formats 1 and 2 (test hook): counter item it as attribute of its parent group, rank 0's value.
 * Collective. */
static tess_status write_counter_attr(MPI_Comm comm, hid_t file, const ckpt_item *it,
                                      write_err *w) {
    int64_t v = *(const int64_t *)it->e->data;
    TESS_MPI_CHECK(MPI_Bcast(&v, 1, MPI_INT64_T, 0, comm));
    char group[CKPT_DSET_PATH_MAX];
    const char *slash = strrchr(it->path, '/');
    snprintf(group, sizeof group, "%.*s", (int)(slash - it->path), it->path);
    ensure_parents(file, it->path, w);
    hid_t g = H5Gopen2(file, group, H5P_DEFAULT);
    if (g < 0 || tess_h5_attr_write_i64(g, slash + 1, v) < 0)
        fail(w, TESS_ERR_IO, "cannot write counter %s", it->path);
    if (g >= 0) H5Gclose(g);
    return TESS_OK;
}

/* The manifest: the path of every entry dataset, fixed width. */
static char *make_manifest(const ckpt_plan *p, int64_t *nrows, size_t *width) {
    *nrows = 0;
    *width = 1;
    for (int64_t i = 0; i < p->n; i++) {
        if (p->items[i].legacy_attr) continue;
        (*nrows)++;
        if (strlen(p->items[i].path) + 1 > *width) *width = strlen(p->items[i].path) + 1;
    }
    char *m = calloc((size_t)(*nrows ? *nrows : 1), *width);
    if (!m) return NULL;
    for (int64_t i = 0, row = 0; i < p->n; i++)
        if (!p->items[i].legacy_attr)
            memcpy(m + (size_t)(row++) * *width, p->items[i].path, strlen(p->items[i].path));
    return m;
}

/* Every entry dataset: hash (all-reduced), create, write this rank's region. Collective on g. */
static tess_status write_items(const tess_group *g, hid_t file, const ckpt_plan *p,
                               tess_ckpt_hash_scheme h, const write_io *io, write_err *w) {
    MPI_Comm comm = g->comm;
    for (int64_t i = 0; i < p->n; i++) {
        const ckpt_item *it = &p->items[i];
        if (it->legacy_attr) {
            TESS_CHECK(write_counter_attr(comm, file, it, w));
            continue;
        }
        const void *local = it->e ? it->e->data : NULL;
        float *global = NULL;
        if (it->r.block_cyclic) {
            if (g->rank == 0) global = malloc((size_t)it->count * sizeof *global);
            const tess_status ls = g->rank != 0 || global ? TESS_OK : TESS_ERR_MEM;
            TESS_CHECK(tess_par_agree(
                g, CKPT_FAILED(ls, "allocating a block-cyclic tensor on rank 0")));
            tess_status gs = tess_par_gather_global(g, &it->e->layout, it->ndim, it->shape,
                                                    (const float *)local, global);
            if (gs != TESS_OK) {
                free(global);
                return tess_error_push(gs, __FILE__, __LINE__, __func__, "gathering %s",
                                       it->path);
            }
            local = global;
        }
        uint64_t acc = it->r.count ? ckpt_hash_region(h, 0, it->e, &it->r, local) : 0, sum;
        int me = MPI_Allreduce(&acc, &sum, 1, MPI_UINT64_T, MPI_SUM, comm);
        if (me != MPI_SUCCESS) {
            free(global);
            TESS_MPI_CHECK(me);
        }
        char layout[96];
        layout_text(it, layout, sizeof layout);
        hsize_t dims[TESS_MAX_DIMS];
        for (int d = 0; d < it->ndim; d++) dims[d] = (hsize_t)it->shape[d];
        hid_t fsel, msel;
        region_spaces(it, &fsel, &msel);
        static const int64_t dummy = 0;
        ensure_parents(file, it->path, w);
        write_dataset(file, it->path, tess_h5_dtype_file(it->dtype), tess_h5_dtype_mem(it->dtype),
                      it->ndim, dims, fsel, msel, it->r.count ? local : (const void *)&dummy,
                      tess_ckpt_hash_final(sum, it->count), layout, io, w);
        H5Sclose(fsel);
        H5Sclose(msel);
        free(global);
    }
    return TESS_OK;
}

/* An upper bound of the file's size: the data, the texts, and HDF5's metadata (object headers,
 * attributes, group indices: well under 4 KiB per dataset; 64 KiB for the rest). */
static int64_t file_bytes_bound(const ckpt_plan *p, const shared_meta *meta, int64_t nrows,
                                size_t width) {
    int64_t bytes = 65536 + meta->config_len + nrows * (int64_t)width;
    for (int64_t i = 0; i < p->n; i++)
        bytes += p->items[i].count * (int64_t)tess_dtype_size(p->items[i].dtype) + 4096;
    return bytes;
}

/* Before any byte is written: the file fits under every rank's file size limit (ulimit -f; a
 * write beyond it would fail with EFBIG midway) and in the free space of its file system (rank 0
 * asks statvfs). A write that fails midway leaves HDF5's ranks in different states, so refusing
 * here is what keeps a full disk a clean error. Collective; the same verdict on every rank. */
static tess_status check_room(const tess_group *g, const char *tmp, int64_t bytes) {
    char what[TESS_CKPT_PATH_MAX + 256] = "";
    tess_status s = TESS_OK;
    struct rlimit rl;
    if (getrlimit(RLIMIT_FSIZE, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY &&
        (uint64_t)bytes > (uint64_t)rl.rlim_cur) {
        s = TESS_ERR_IO;
        snprintf(what, sizeof what,
                 "cannot write '%s': a checkpoint of up to %lld bytes exceeds the file size limit "
                 "of %llu bytes on rank %d (ulimit -f)",
                 tmp, (long long)bytes, (unsigned long long)rl.rlim_cur, g->rank);
    }
    char dir[TESS_CKPT_PATH_MAX];
    ckpt_dirname(tmp, dir, sizeof dir);
    struct statvfs vfs;
    if (s == TESS_OK && g->rank == 0 && statvfs(dir, &vfs) == 0 &&
        (uint64_t)bytes > (uint64_t)vfs.f_bavail * vfs.f_frsize) {
        s = TESS_ERR_IO;
        snprintf(what, sizeof what,
                 "cannot write '%s': a checkpoint of up to %lld bytes does not fit in the %llu "
                 "bytes free on its file system (the disk is full)",
                 tmp, (long long)bytes, (unsigned long long)vfs.f_bavail * vfs.f_frsize);
    }
    TESS_CHECK(tess_par_agree(g, CKPT_FAILED(s, what)));
    return TESS_OK;
}

/* --- room for the file: a full disk must not fail a write midway ----------------------------
 * HDF5 keeps the file's metadata in its cache until H5Fclose (write_fapl), creating a dataset
 * writes nothing and the data goes out with independent writes (write_io), so before the close
 * only the data writes can fail, each on its own rank, and the ranks agree on them. The metadata
 * is written by the collective H5Fclose, and a write that fails there on one rank leaves the
 * others waiting in HDF5's sync point (the hang of a full disk at 2 ranks). So the blocks of the
 * whole file are reserved when it is created, and those of the metadata again before the close. */

/* Reserve the blocks of [off, off + len) of fd without changing its size, so no write into that
 * range can fail for lack of space. 0, also where the file system cannot reserve blocks
 * (EOPNOTSUPP: the room check alone protects the write there); -1 with errno otherwise. */
static int reserve(int fd, int64_t off, int64_t len) {
    if (len <= 0 || fallocate(fd, FALLOC_FL_KEEP_SIZE, (off_t)off, (off_t)len) == 0) return 0;
    return errno == EOPNOTSUPP || errno == ENOSYS ? 0 : -1;
}

static int cmp_extent_off(const void *a, const void *b) {
    const ckpt_extent *x = a, *y = b;
    return (x->off > y->off) - (x->off < y->off);
}

/* Rank 0: reserve every byte of [0, end) of path outside the n extents (sorted here; n may be 0).
 * TESS_ERR_IO naming the file and `what`. Not collective. */
static tess_status reserve_file(const char *path, int64_t end, ckpt_extent *ext, int64_t n,
                                const char *what) {
    int fd = open(path, O_WRONLY);
    TESS_REQUIRE(fd >= 0, TESS_ERR_IO, "cannot open '%s': %s", path, strerror(errno));
    if (n > 0) qsort(ext, (size_t)n, sizeof *ext, cmp_extent_off);
    int rc = 0;
    int64_t at = 0;
    for (int64_t i = 0; i < n && rc == 0; i++) {
        rc = reserve(fd, at, ext[i].off - at);
        if (ext[i].off + ext[i].len > at) at = ext[i].off + ext[i].len;
    }
    if (rc == 0) rc = reserve(fd, at, end - at);
    const int err = errno;
    close(fd);
    TESS_REQUIRE(rc == 0, TESS_ERR_IO,
                 "cannot write '%s': no room for %s (up to %lld bytes) on its file system: %s",
                 path, what, (long long)end, strerror(err));
    return TESS_OK;
}

/* The access list of the tmp file: tess_h5_fapl_mpio(CKPT_FAPL) with a metadata cache that
 * neither evicts nor reaches a sync point before H5Fclose, up to the largest threshold HDF5 1.10
 * accepts (32 MiB of dirty metadata, some 8 000 datasets; beyond it the reservation of the whole
 * file at its creation keeps the sync points' writes from failing). A negative id on failure.
 * Not collective. */
static hid_t write_fapl(const tess_group *g) {
    enum { MDC_BYTES = 32 * 1024 * 1024 }; /* H5AC__MAX_DIRTY_BYTES_THRESHOLD */
    hid_t fapl = tess_h5_fapl_mpio(g, CKPT_FAPL);
    H5AC_cache_config_t c = {.version = H5AC__CURR_CACHE_CONFIG_VERSION};
    if (fapl >= 0 && H5Pget_mdc_config(fapl, &c) >= 0) {
        c.evictions_enabled = 0;
        c.incr_mode = H5C_incr__off;
        c.flash_incr_mode = H5C_flash_incr__off;
        c.decr_mode = H5C_decr__off;
        c.set_initial_size = 1;
        c.initial_size = c.max_size = MDC_BYTES;
        c.dirty_bytes_threshold = MDC_BYTES;
        if (H5Pset_mdc_config(fapl, &c) >= 0) return fapl;
    }
    if (fapl >= 0) H5Pclose(fapl);
    return -1;
}

enum { CLOSE_SLACK = 4096 }; /* two 2 KiB aggregator blocks (H5Pset_meta_block_size) */

/* The collective close of the tmp file, made safe. failed: the ranks agreed that a write failed
 * (the file is then removed by the caller). Rank 0 empties a failed file (freeing every block it
 * took), then reserves the bytes the close writes: everything outside the n data extents up to
 * the end of HDF5's address space. HDF5 1.10 does not tell that end for a parallel file
 * (H5Fget_filesize fails after a write, H5Fget_eoa wants a SWMR driver), so it is the last byte
 * of any dataset (data_end) or of the file, plus CLOSE_SLACK for the partly used blocks of HDF5's
 * metadata and small-data aggregators. If the reservation fails for a file whose writes
 * succeeded, rank 0 empties it and tries again, and the checkpoint fails. The ranks agree on the
 * outcome before H5Fclose, so no rank's metadata write can fail alone. If even the room of the
 * metadata of an emptied file is not there (a full disk), the handle is left open instead of
 * risking the close, with a warning. Returns TESS_OK or the agreed failure of the reservation
 * or of the close (the failure of the writes is the caller's). Collective on g. */
static tess_status close_tmp(const tess_group *g, hid_t file, const char *tmp, bool failed,
                             ckpt_extent *ext, int64_t n, int64_t data_end) {
    struct stat sb;
    const int64_t end = (g->rank == 0 && stat(tmp, &sb) == 0 && sb.st_size > data_end
                             ? (int64_t)sb.st_size
                             : data_end) +
                        CLOSE_SLACK;
    tess_status room = TESS_OK;
    int closable = 1;
    if (g->rank == 0) {
        if (failed && truncate(tmp, 0) != 0)
            tess_log_warn("cannot empty '%s' after a failed write: %s", tmp, strerror(errno));
        room = reserve_file(tmp, end, ext, n, "its metadata");
        if (room != TESS_OK && !failed) { /* the checkpoint fails: empty it and try again */
            if (truncate(tmp, 0) != 0) tess_log_warn("cannot empty '%s': %s", tmp, strerror(errno));
            closable = reserve_file(tmp, end, ext, n, "its metadata") == TESS_OK;
        } else {
            closable = room == TESS_OK;
        }
    }
    TESS_MPI_CHECK(MPI_Bcast(&closable, 1, MPI_INT, 0, g->comm));
    room = tess_par_agree(g, room);
    if (!closable) {
        if (g->rank == 0)
            tess_log_warn("leaving the HDF5 handle of '%s' open: its metadata has no room to be "
                          "written, and a failed collective close would hang",
                          tmp);
        return room;
    }
    write_err closed = {.status = TESS_OK};
    if (H5Fclose(file) < 0) fail(&closed, TESS_ERR_IO, "cannot close '%s'", tmp);
    const tess_status c = tess_par_agree(g, CKPT_FAILED(closed.status, closed.what));
    return room != TESS_OK ? room : c;
}

/* Everything but the commit. On return the file is closed (or was never created, or is left open
 * by close_tmp). */
static tess_status write_tmp(const tess_group *g, const char *tmp, const tess_ckpt_state *st,
                             const ckpt_plan *p, const shared_meta *meta) {
    int64_t nrows;
    size_t width;
    char *manifest = make_manifest(p, &nrows, &width);
    TESS_CHECK(tess_par_agree(
        g, CKPT_FAILED(manifest ? TESS_OK : TESS_ERR_MEM, "allocating the manifest")));

    /* test hook (see ckpt.h): skip the room check and the reservation, so a full disk fails
     * the write midway */
    const char *hook = getenv("TESS_CKPT_TEST_NO_ROOM_CHECK");
    const bool check = !(hook && strcmp(hook, "1") == 0);
    const bool sealed = meta->version >= 4;
    const int64_t userblock = ckpt_seal_userblock(p->n);
    const int64_t bound = userblock + file_bytes_bound(p, meta, nrows, width);
    tess_status room = check ? check_room(g, tmp, bound) : TESS_OK;
    if (room != TESS_OK) {
        free(manifest);
        return room;
    }
    write_err w = {TESS_OK, "", .fixed_strings = sealed};
    w.ext = malloc((size_t)(p->n ? p->n : 1) * sizeof *w.ext);
    if (!w.ext) fail(&w, TESS_ERR_MEM, "cannot allocate the extents of '%s'", tmp);
    hid_t fcpl = sealed ? H5Pcreate(H5P_FILE_CREATE) : H5P_DEFAULT;
    if (sealed && (fcpl < 0 || H5Pset_userblock(fcpl, (hsize_t)userblock) < 0))
        fail(&w, TESS_ERR_IO, "cannot set the user block of '%s'", tmp);
    hid_t fapl = write_fapl(g);
    hid_t file = fapl >= 0 && fcpl >= 0 ? H5Fcreate(tmp, H5F_ACC_TRUNC, fcpl, fapl) : -1;
    if (file < 0) fail(&w, TESS_ERR_IO, "cannot create '%s'", tmp);
    if (fapl >= 0) H5Pclose(fapl);
    if (sealed && fcpl >= 0) H5Pclose(fcpl);
    tess_status s = tess_par_agree(g, CKPT_FAILED(w.status, w.what));
    if (s != TESS_OK) { /* close only a file every rank opened: H5Fclose is collective */
        int opened = file >= 0, all = 0;
        if (MPI_Allreduce(&opened, &all, 1, MPI_INT, MPI_MIN, g->comm) == MPI_SUCCESS && all)
            close_tmp(g, file, tmp, true, w.ext, 0, 0);
        free(manifest);
        free(w.ext);
        return s;
    }
    /* the whole file's blocks, before any data is written */
    s = tess_par_agree(g, g->rank == 0 && check
                              ? reserve_file(tmp, bound, NULL, 0, "a checkpoint")
                              : TESS_OK);
    write_io io = {H5Pcreate(H5P_DATASET_CREATE), H5Pcreate(H5P_DATASET_XFER)};
    if (io.dcpl < 0 || H5Pset_alloc_time(io.dcpl, H5D_ALLOC_TIME_EARLY) < 0 ||
        H5Pset_fill_time(io.dcpl, H5D_FILL_TIME_NEVER) < 0 || io.dxpl < 0 ||
        H5Pset_dxpl_mpio(io.dxpl, H5FD_MPIO_INDEPENDENT) < 0)
        fail(&w, TESS_ERR_IO, "cannot make the property lists of '%s'", tmp);
    const tess_ckpt_hash_scheme h = ckpt_scheme(meta->version);
    if (s == TESS_OK) {
        write_root_attrs(file, st, p, meta, g->size, &w);
        s = write_items(g, file, p, h, &io, &w);
    }
    if (s == TESS_OK) { /* s is the same on every rank */
        write_text(file, "/config", meta->config, 0,
                   meta->config_len ? (size_t)meta->config_len : 1, h, g->rank, &io, &w);
        write_text(file, "/manifest", manifest, nrows, width, h, g->rank, &io, &w);
        if (g->rank == 0) ckpt_test_kill("after_write");
    }
    free(manifest);
    if (io.dcpl >= 0) H5Pclose(io.dcpl);
    if (io.dxpl >= 0) H5Pclose(io.dxpl);
    const tess_status written = s == TESS_OK ? tess_par_agree(g, CKPT_FAILED(w.status, w.what)) : s;
    s = close_tmp(g, file, tmp, written != TESS_OK, w.ext, w.next, w.end);
    if (written != TESS_OK) s = written; /* the record names the failed write */
    if (s == TESS_OK && sealed) { /* the file is complete: rank 0 writes its integrity record */
        const ckpt_seal_info in = {.format_version = meta->version, .userblock = userblock,
                                   .step = st->step, .data_cursor = st->data_cursor,
                                   .seed = st->seed, .world_size = g->size, .nextents = w.next};
        s = tess_par_agree(g, g->rank == 0 ? ckpt_seal_write(tmp, &in, w.ext) : TESS_OK);
    }
    free(w.ext);
    return s;
}

/* Rank 0: fsync src, rename to dst, fsync the directory. */
static tess_status commit_file(const char *src, const char *dst, bool test_hooks) {
    char dir[TESS_CKPT_PATH_MAX];
    ckpt_dirname(dst, dir, sizeof dir);
    TESS_REQUIRE(ckpt_fsync_path(src, false) == 0, TESS_ERR_IO, "cannot fsync '%s': %s", src,
                 strerror(errno));
    if (test_hooks) ckpt_test_kill("before_rename");
    TESS_REQUIRE(rename(src, dst) == 0, TESS_ERR_IO, "cannot rename '%s' to '%s': %s", src, dst,
                 strerror(errno));
    TESS_REQUIRE(ckpt_fsync_path(dir, true) == 0, TESS_ERR_IO, "cannot fsync directory '%s': %s",
                 dir, strerror(errno));
    if (test_hooks) ckpt_test_kill("after_rename");
    return TESS_OK;
}

static tess_status write_impl(const tess_group *g, const char *path, const tess_ckpt_state *st) {
    TESS_REQUIRE(path && strlen(path) + 5 < TESS_CKPT_PATH_MAX, TESS_ERR_ARG,
                 "checkpoint path must have 1..%d characters", TESS_CKPT_PATH_MAX - 6);
    TESS_CHECK(agree_scalars(g->comm, st));
    ckpt_plan p;
    TESS_CHECK(ckpt_plan_make(g, st->state, &p));
    shared_meta meta = {.config = NULL};
    tess_status s = share_meta(g, st, &meta);
    for (int64_t i = 0; i < p.n; i++)
        p.items[i].legacy_attr = meta.version < 3 && ckpt_is_counter(&p.items[i]);
    char tmp[TESS_CKPT_PATH_MAX];
    snprintf(tmp, sizeof tmp, "%s.tmp", path);
    if (s == TESS_OK) s = write_tmp(g, tmp, st, &p, &meta);
    ckpt_plan_free(&p);
    free(meta.config);
    if (s != TESS_OK) {
        if (g->rank == 0) remove(tmp);
        return s;
    }
    tess_status c = g->rank == 0 ? commit_file(tmp, path, true) : TESS_OK;
    if (c != TESS_OK) remove(tmp);
    TESS_CHECK(tess_par_agree(g, c));
    return TESS_OK;
}

tess_status tess_ckpt_write(const tess_group *g, const char *path, const tess_ckpt_state *st) {
    TESS_REQUIRE(g && st, TESS_ERR_ARG, "g and st must not be NULL");
    tess_h5_quiet q;
    tess_h5_quiet_begin(&q);
    tess_status s = write_impl(g, path, st);
    tess_h5_quiet_end(&q);
    TESS_REQUIRE(s == TESS_OK, s, "writing checkpoint '%s'", path ? path : "(null)");
    return TESS_OK;
}

/* --- save: name, latest pointer, retention -------------------------------------------------- */

/* Step of a committed checkpoint name "ckpt_<digits>.h5", or -1. */
static int64_t name_step(const char *name) {
    if (strncmp(name, "ckpt_", 5) != 0) return -1;
    const char *p = name + 5;
    int64_t step = 0;
    int digits = 0;
    for (; *p >= '0' && *p <= '9'; p++, digits++) {
        if (step > (INT64_MAX - 9) / 10) return -1;
        step = step * 10 + (*p - '0');
    }
    return digits > 0 && strcmp(p, ".h5") == 0 ? step : -1;
}

typedef struct {
    int64_t step;
    char name[256];
} listed;

static int cmp_listed_desc(const void *a, const void *b) {
    const listed *x = a, *y = b;
    return (x->step < y->step) - (x->step > y->step);
}

/* Committed checkpoints of dir, newest first (malloc'ed; *count may be 0). A missing dir is
 * empty. Not collective. */
static tess_status list_committed(const char *dir, listed **out, int64_t *count) {
    *out = NULL;
    *count = 0;
    DIR *d = opendir(dir);
    if (!d) {
        TESS_REQUIRE(errno == ENOENT, TESS_ERR_NOINPUT, "cannot list checkpoint directory '%s': %s",
                     dir, strerror(errno));
        return TESS_OK;
    }
    int64_t cap = 0;
    tess_status s = TESS_OK;
    for (struct dirent *de; (de = readdir(d));) {
        int64_t step = name_step(de->d_name);
        if (step < 0 || strlen(de->d_name) >= sizeof((listed *)0)->name) continue;
        if (*count == cap) {
            cap = cap ? 2 * cap : 16;
            listed *grown = realloc(*out, (size_t)cap * sizeof **out);
            if (!grown) {
                s = tess_error_push(TESS_ERR_MEM, __FILE__, __LINE__, __func__,
                                    "out of memory listing '%s'", dir);
                break;
            }
            *out = grown;
        }
        (*out)[*count].step = step;
        snprintf((*out)[*count].name, sizeof(*out)[*count].name, "%s", de->d_name);
        (*count)++;
    }
    closedir(d);
    if (s == TESS_OK && *count > 1) qsort(*out, (size_t)*count, sizeof **out, cmp_listed_desc);
    return s;
}

/* Rank 0: point dir/latest at name (tmp, fsync, rename, fsync dir). */
static tess_status write_latest(const char *dir, const char *name) {
    char tmp[TESS_CKPT_PATH_MAX], dst[TESS_CKPT_PATH_MAX];
    snprintf(tmp, sizeof tmp, "%s/latest.tmp", dir);
    snprintf(dst, sizeof dst, "%s/latest", dir);
    FILE *f = fopen(tmp, "w");
    TESS_REQUIRE(f, TESS_ERR_IO, "cannot write '%s': %s", tmp, strerror(errno));
    int ok = fprintf(f, "%s\n", name) > 0;
    ok = fclose(f) == 0 && ok;
    TESS_REQUIRE(ok, TESS_ERR_IO, "error writing '%s': %s", tmp, strerror(errno));
    TESS_CHECK(commit_file(tmp, dst, false));
    return TESS_OK;
}

/* Rank 0, after the commit of step `step`: delete checkpoints of later steps (an abandoned
 * timeline: the run went back to an earlier checkpoint) and all but the keep_last newest. */
static tess_status prune(const char *dir, int64_t step, int64_t keep_last) {
    listed *l;
    int64_t count;
    TESS_CHECK(list_committed(dir, &l, &count));
    int64_t kept = 0;
    for (int64_t i = 0; i < count; i++) {
        char path[TESS_CKPT_PATH_MAX];
        snprintf(path, sizeof path, "%s/%s", dir, l[i].name);
        bool later = l[i].step > step;
        if (!later && (keep_last == 0 || kept < keep_last)) {
            kept++;
            continue;
        }
        if (later)
            tess_log_warn("deleting checkpoint '%s': its step %lld is after the step just saved "
                          "(%lld), from an abandoned earlier run",
                          path, (long long)l[i].step, (long long)step);
        if (remove(path) != 0 && errno != ENOENT) {
            tess_status s = tess_error_push(TESS_ERR_IO, __FILE__, __LINE__, __func__,
                                            "cannot delete old checkpoint '%s': %s", path,
                                            strerror(errno));
            free(l);
            return s;
        }
    }
    free(l);
    return TESS_OK;
}

static tess_status save_on_root(const char *dir, const char *name, int64_t step,
                                int64_t keep_last) {
    TESS_CHECK(write_latest(dir, name));
    TESS_CHECK(prune(dir, step, keep_last));
    return TESS_OK;
}

tess_status tess_ckpt_save(const tess_group *g, const char *dir, const tess_ckpt_state *st,
                           int64_t keep_last, char *path_out, size_t n) {
    TESS_REQUIRE(g, TESS_ERR_ARG, "g must not be NULL");
    const int rank = g->rank;
    TESS_REQUIRE(dir && strlen(dir) > 0 && strlen(dir) + 32 < TESS_CKPT_PATH_MAX, TESS_ERR_ARG,
                 "checkpoint directory must have 1..%d characters", TESS_CKPT_PATH_MAX - 33);
    TESS_REQUIRE(keep_last >= 0, TESS_ERR_ARG, "keep_last = %lld must be >= 0",
                 (long long)keep_last);
    TESS_REQUIRE(st && st->step >= 0, TESS_ERR_ARG, "checkpoint step must be >= 0");
    const double t0 = tess_timer_now();
    TESS_CHECK(tess_par_agree(g, rank == 0 ? tess_rundir_mkdirs(dir) : TESS_OK));
    char name[64], path[TESS_CKPT_PATH_MAX];
    snprintf(name, sizeof name, "ckpt_%08lld.h5", (long long)st->step);
    snprintf(path, sizeof path, "%s/%s", dir, name);
    TESS_CHECK(tess_ckpt_write(g, path, st));
    TESS_CHECK(tess_par_agree(g, rank == 0 ? save_on_root(dir, name, st->step, keep_last)
                                           : TESS_OK));
    if (rank == 0) {
        struct stat sb;
        long long bytes = stat(path, &sb) == 0 ? (long long)sb.st_size : -1;
        tess_log_info("checkpoint step=%lld path=%s bytes=%lld seconds=%.3f", (long long)st->step,
                      path, bytes, tess_timer_now() - t0);
    }
    if (path_out && n) snprintf(path_out, n, "%s", path);
    return TESS_OK;
}

/* --- start-up cleaning ----------------------------------------------------------------------- */

static tess_status clean_on_root(const char *dir) {
    DIR *d = opendir(dir);
    if (!d) {
        TESS_REQUIRE(errno == ENOENT, TESS_ERR_NOINPUT, "cannot list checkpoint directory '%s': %s",
                     dir, strerror(errno));
        return TESS_OK;
    }
    tess_status s = TESS_OK;
    for (struct dirent *de; (de = readdir(d));) {
        size_t len = strlen(de->d_name);
        if (len < 5 || strcmp(de->d_name + len - 4, ".tmp") != 0) continue;
        char path[TESS_CKPT_PATH_MAX];
        snprintf(path, sizeof path, "%s/%s", dir, de->d_name);
        if (remove(path) != 0) {
            s = tess_error_push(TESS_ERR_IO, __FILE__, __LINE__, __func__,
                                "cannot delete stale '%s': %s", path, strerror(errno));
            break;
        }
        tess_log_warn("deleted '%s': an unfinished checkpoint or pointer from an earlier run",
                      path);
    }
    closedir(d);
    return s;
}

tess_status tess_ckpt_clean(const tess_group *g, const char *dir) {
    TESS_REQUIRE(g && dir && strlen(dir) > 0, TESS_ERR_ARG,
                 "g must not be NULL and the checkpoint directory not empty");
    TESS_CHECK(tess_par_agree(g, g->rank == 0 ? clean_on_root(dir) : TESS_OK));
    return TESS_OK;
}

tess_status ckpt_list_shared(const tess_group *g, const char *dir, char **names, int64_t *count) {
    MPI_Comm comm = g->comm;
    const int rank = g->rank;
    *names = NULL;
    *count = 0;
    int64_t len = 0;
    tess_status s = TESS_OK;
    char *text = NULL;
    if (rank == 0) {
        listed *l = NULL;
        s = list_committed(dir, &l, count);
        if (s == TESS_OK) {
            text = malloc((size_t)*count * sizeof l->name + 1);
            if (!text) s = tess_error_push(TESS_ERR_MEM, __FILE__, __LINE__, __func__,
                                           "out of memory listing '%s'", dir);
        }
        if (s == TESS_OK) {
            text[0] = '\0';
            for (int64_t i = 0; i < *count; i++) {
                size_t at = (size_t)len;
                len += snprintf(text + at, sizeof l->name + 1, "%s\n", l[i].name);
            }
        }
        free(l);
    }
    s = tess_par_agree(g, s);
    if (s != TESS_OK) {
        free(text);
        return s;
    }
    int64_t v[2] = {*count, len};
    TESS_MPI_CHECK(MPI_Bcast(v, 2, MPI_INT64_T, 0, comm));
    *count = v[0];
    len = v[1];
    if (rank != 0) text = malloc((size_t)len + 1);
    TESS_CHECK(tess_par_agree(
        g, CKPT_FAILED(text ? TESS_OK : TESS_ERR_MEM, "allocating the checkpoint list")));
    TESS_MPI_CHECK(MPI_Bcast(text, (int)len, MPI_CHAR, 0, comm));
    text[len] = '\0';
    *names = text;
    return TESS_OK;
}

/* bench_ckpt - checkpoint write and read throughput (io/ckpt.h) against a raw write()+fsync and
 * read() of the same bytes, and the extra memory a save and a load take.
 *
 *   mpiexec -n P bench_ckpt DIR [--mib 100] [--tensors 8] [--reps 1] [--order 0] [--raw 1]
 *                               [--profile 0] [--overlap 1] [--ranges 1]
 *
 * State: a registry of --tensors float32 tensors "layer.<i>.w" of shape (rows_i, 1024) totalling
 * --mib MiB (rows split as evenly as possible), each sharded along dim 0 over the P ranks, filled
 * with bench_value (bench_ckpt_torch.py fills the same values). DIR must exist; the program
 * writes DIR/raw.bin and DIR/tess/ and removes them after every repetition (untimed).
 *
 * One repetition, with A = raw and B = Tessera: write A, write B, read A, ranges read, read B
 * when rep + --order is even, the reverse otherwise (--raw 0: no raw; --ranges 0: no ranges).
 *   raw write   rank 0 creates DIR/raw.bin, every rank pwrite()s its local state (64 MiB calls)
 *               at its offset, fsyncs and closes the file. On one rank: a plain sequential
 *               write+fsync loop.
 *   raw read    every rank pread()s its bytes back into its params.
 *   tess write  tess_ckpt_save(DIR/tess, keep_last 0): the HDF5 file with its hashes, fsync,
 *               rename, directory fsync, the latest pointer.
 *   tess read   tess_ckpt_load of that file into the params, which are zeroed first (untimed) and
 *               checked element by element afterwards (untimed).
 *   ranges read every rank pread()s exactly the byte ranges of the checkpoint file that
 *               tess_ckpt_load reads (data offsets from H5Dget_offset, untimed), in its order
 *               and slab size, without HDF5, MPI-IO or the hash: the cost of the file layout
 *               itself. Zeroed before and checked after, like tess read.
 * Before each read the page cache is dropped: rank 0 writes "3" to /proc/sys/vm/drop_caches (root
 * only); where that is refused every rank calls posix_fadvise(POSIX_FADV_DONTNEED) on the files
 * instead, which drops their (clean, fsynced) pages only. The "cache_drop" line says which.
 * Times are wall seconds from a barrier before to a barrier after, on rank 0.
 * Memory: VmHWM growth across tess_ckpt_save and tess_ckpt_load (VmHWM reset to VmRSS just
 * before), max over ranks, against the largest local tensor. I/O volume: the growth of wchar and
 * rchar (/proc/self/io: bytes passed to write and read calls) across the save and the load,
 * summed over ranks, over the state bytes. --profile 1 also times the position-keyed hash
 * (tess_ckpt_hash_add) over the local state: the CPU pass that a save and a load add to the I/O
 * (hash_s: the scheme written, tess-poshash32x-v2; hash_v1_s: format 1's tess-poshash64-v1).
 * --overlap 1 (default) initialises MPI with MPI_THREAD_FUNNELED, so tess_ckpt_load hashes each
 * slab on its worker thread while it reads the next (io/ckpt_hasher.h); --overlap 0 initialises
 * it with MPI_THREAD_SINGLE, and the load hashes on the calling thread ("hash_worker" says which).
 * Prints "key value" lines on rank 0: medians over --reps ("<op>_s"), and every repetition's
 * seconds in order ("<op>_all").
 */
#include <errno.h>
#include <fcntl.h>
#include <hdf5.h> /* H5Dget_offset, for the ranges read */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "bench_common.h" /* tess_bench_* */
#include "core/log.h"     /* tess_log_init */
#include "io/ckpt.h"      /* tess_ckpt_* */
#include "nn/state.h"     /* tess_state_* */
#include "par/mesh.h"     /* tess_group_* */
#include "nn/registry.h"  /* tess_registry_* */

enum {
    COLS = 1024,           /* floats per row: 4 KiB rows */
    MAX_REPS = 15,
    RAW_CHUNK = 64 << 20,  /* bytes per pwrite / pread call */
    RANGE_SLAB = 2 << 20,  /* bytes per pread call of the ranges read: tess_ckpt_load's slab */
    DIR_BYTES = 1024,      /* bytes of DIR, including the NUL */
    PATH_BYTES = 4096,
};

/* The value of element g (global row-major index) of tensor i: 20-bit fractions, exact in float32
 * and cheap to recompute; bench_ckpt_torch.py computes the same. */
static float bench_value(int64_t i, int64_t g) {
    uint64_t h = ((uint64_t)g * 2654435761u + (uint64_t)i * 40503u) & 0xFFFFFu;
    return (float)h / 1048576.0f - 0.5f;
}

typedef struct {
    MPI_Comm comm;
    int rank, size;
    tess_group *g;      /* over comm, for the checkpoint calls */
    tess_registry *reg;
    tess_state *state;  /* the params, as "params/<name>" */
    float *params;         /* the registry's flat params: local_total floats */
    size_t local_bytes;    /* this rank's state bytes */
    size_t raw_offset;     /* this rank's byte offset in raw.bin */
    int64_t state_bytes;   /* global state bytes */
    int64_t largest_local; /* bytes of the largest local tensor, max over ranks */
    char dir[DIR_BYTES], raw[PATH_BYTES], tess_dir[PATH_BYTES], ckpt[PATH_BYTES];
    int64_t *data_offset;  /* file offset of each tensor's data in the checkpoint (ranges read) */
} bench;

/* The registry: ntensors tensors (rows_i, COLS), rows summing to mib * 256, sharded on dim 0. */
static tess_status bench_build(bench *b, int64_t mib, int64_t ntensors) {
    const int64_t total_rows = mib * ((1 << 20) / (COLS * 4));
    TESS_REQUIRE(ntensors <= total_rows, TESS_ERR_ARG, "%lld tensors do not fit in %lld MiB",
                 (long long)ntensors, (long long)mib);
    TESS_CHECK(tess_registry_create(&b->reg));
    int64_t largest = 0;
    for (int64_t i = 0; i < ntensors; i++) {
        const int64_t rows = total_rows / ntensors + (i < total_rows % ntensors ? 1 : 0);
        /* HDF5 1.10 over Open MPI 4.1 passes int counts: keep every dataset below 2 GiB */
        TESS_REQUIRE(rows * COLS * 4 < ((int64_t)1 << 31), TESS_ERR_ARG,
                     "tensor %lld would have %lld bytes: use more tensors (below 2 GiB each)",
                     (long long)i, (long long)(rows * COLS * 4));
        const int64_t shape[2] = {rows, COLS};
        const tess_layout l = tess_layout_sharded(0, b->size, b->rank);
        char name[32];
        snprintf(name, sizeof name, "layer.%lld.w", (long long)i);
        int64_t index;
        TESS_CHECK(tess_registry_add(b->reg, name, 2, shape, &l, &index));
        const int64_t local = tess_registry_get(b->reg, index)->local_count * 4;
        if (local > largest) largest = local;
    }
    TESS_CHECK(tess_registry_finalize(b->reg));
    TESS_CHECK(tess_state_create(&b->state));
    TESS_CHECK(tess_state_add_registry(b->state, "params", b->reg, false));
    TESS_CHECK(tess_group_create(b->comm, "bench", &b->g));
    b->params = tess_registry_params(b->reg);
    b->local_bytes = (size_t)tess_registry_local_total(b->reg) * sizeof(float);
    b->state_bytes = tess_registry_global_total(b->reg) * (int64_t)sizeof(float);
    int64_t mine = (int64_t)b->local_bytes, before = 0;
    MPI_Exscan(&mine, &before, 1, MPI_INT64_T, MPI_SUM, b->comm);
    b->raw_offset = b->rank == 0 ? 0 : (size_t)before;
    MPI_Allreduce(&largest, &b->largest_local, 1, MPI_INT64_T, MPI_MAX, b->comm);
    return TESS_OK;
}

static void bench_fill(const bench *b) {
    for (int64_t i = 0; i < tess_registry_count(b->reg); i++) {
        const tess_registry_entry *e = tess_registry_get(b->reg, i);
        float *x = tess_registry_param(b->reg, i);
        const int64_t first = e->global_offset[0] * COLS;
        for (int64_t k = 0; k < e->local_count; k++) x[k] = bench_value(i, first + k);
    }
}

/* Elements that differ from bench_value, summed over ranks. Collective. */
static int64_t bench_mismatches(const bench *b) {
    int64_t bad = 0, total = 0;
    for (int64_t i = 0; i < tess_registry_count(b->reg); i++) {
        const tess_registry_entry *e = tess_registry_get(b->reg, i);
        const float *x = tess_registry_param(b->reg, i);
        const int64_t first = e->global_offset[0] * COLS;
        for (int64_t k = 0; k < e->local_count; k++) bad += x[k] != bench_value(i, first + k);
    }
    MPI_Allreduce(&bad, &total, 1, MPI_INT64_T, MPI_SUM, b->comm);
    return total;
}

/* A "name: value" field of /proc/self/io (rchar, wchar), or -1. */
static int64_t proc_io(const char *field) {
    FILE *f = fopen("/proc/self/io", "r");
    if (!f) return -1;
    char line[128];
    const size_t len = strlen(field);
    int64_t v = -1;
    while (fgets(line, sizeof line, f))
        if (strncmp(line, field, len) == 0 && line[len] == ':') {
            v = strtoll(line + len + 1, NULL, 10);
            break;
        }
    fclose(f);
    return v;
}

/* What one timed operation cost: wall seconds (rank 0, barrier to barrier), VmHWM growth in KiB
 * (max over ranks), bytes passed to write or read calls (sum over ranks). */
typedef struct {
    double seconds;
    int64_t hwm_kib, io_bytes;
} cost;

typedef struct {
    int64_t rss, io;
} probe;

static probe probe_begin(const char *io_field) {
    probe p;
    tess_bench_reset_hwm();
    p.rss = tess_bench_proc_kib("VmRSS");
    p.io = proc_io(io_field);
    return p;
}

static void probe_end(const bench *b, const probe *p, const char *io_field, cost *c) {
    int64_t mine[2] = {tess_bench_proc_kib("VmHWM") - p->rss, proc_io(io_field) - p->io}, r[2];
    MPI_Allreduce(&mine[0], &r[0], 1, MPI_INT64_T, MPI_MAX, b->comm);
    MPI_Allreduce(&mine[1], &r[1], 1, MPI_INT64_T, MPI_SUM, b->comm);
    c->hwm_kib = r[0];
    c->io_bytes = r[1];
}

/* Drop the page cache before a read; returns the method used. Collective. */
static const char *drop_cache(const bench *b) {
    int ok = 0;
    if (b->rank == 0) {
        FILE *f = fopen("/proc/sys/vm/drop_caches", "w");
        if (f) {
            ok = fputs("3", f) >= 0;
            ok = fclose(f) == 0 && ok;
        }
    }
    MPI_Bcast(&ok, 1, MPI_INT, 0, b->comm);
    if (ok) return "drop_caches";
    const char *files[] = {b->raw, b->ckpt};
    for (int k = 0; k < 2; k++) {
        int fd = open(files[k], O_RDONLY);
        if (fd < 0) continue; /* not written in this repetition */
        posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
        close(fd);
    }
    MPI_Barrier(b->comm);
    return "fadvise";
}

/* Raw write of every rank's local bytes at its offset of raw.bin, fsync; *fsync_s: rank 0's
 * seconds in fsync. */
static tess_status raw_write(const bench *b, double *fsync_s) {
    int fd = b->rank == 0 ? open(b->raw, O_WRONLY | O_CREAT | O_TRUNC, 0644) : -1;
    MPI_Barrier(b->comm);
    if (b->rank != 0) fd = open(b->raw, O_WRONLY);
    TESS_REQUIRE(fd >= 0, TESS_ERR_IO, "cannot open '%s': %s", b->raw, strerror(errno));
    const char *p = (const char *)b->params;
    for (size_t done = 0; done < b->local_bytes;) {
        size_t n = b->local_bytes - done < RAW_CHUNK ? b->local_bytes - done : RAW_CHUNK;
        ssize_t w = pwrite(fd, p + done, n, (off_t)(b->raw_offset + done));
        if (w <= 0) close(fd);
        TESS_REQUIRE(w > 0, TESS_ERR_IO, "writing '%s': %s", b->raw, strerror(errno));
        done += (size_t)w;
    }
    const double t0 = MPI_Wtime();
    const int rs = fsync(fd), rc = close(fd);
    *fsync_s = MPI_Wtime() - t0;
    TESS_REQUIRE(rs == 0 && rc == 0, TESS_ERR_IO, "fsync/close '%s': %s", b->raw, strerror(errno));
    return TESS_OK;
}

/* Read bytes at offset `at` of the open file fd (named path, for messages) into buf, in calls of
 * at most chunk bytes. */
static tess_status pread_all(int fd, const char *path, void *buf, size_t bytes, off_t at,
                             size_t chunk) {
    char *p = buf;
    for (size_t done = 0; done < bytes;) {
        size_t want = bytes - done < chunk ? bytes - done : chunk;
        ssize_t r = pread(fd, p + done, want, at + (off_t)done);
        TESS_REQUIRE(r > 0, TESS_ERR_IO, "reading '%s': %s", path,
                     r == 0 ? "unexpected end of file" : strerror(errno));
        done += (size_t)r;
    }
    return TESS_OK;
}

static tess_status raw_read(const bench *b) {
    int fd = open(b->raw, O_RDONLY);
    TESS_REQUIRE(fd >= 0, TESS_ERR_IO, "cannot open '%s': %s", b->raw, strerror(errno));
    tess_status s = pread_all(fd, b->raw, b->params, b->local_bytes, (off_t)b->raw_offset,
                              RAW_CHUNK);
    close(fd);
    return s;
}

/* After a save: the file offset of every tensor's data in the checkpoint, read by rank 0 with
 * serial HDF5 and broadcast (untimed). Collective. */
static tess_status find_offsets(bench *b) {
    const int64_t n = tess_registry_count(b->reg);
    if (b->rank == 0) {
        hid_t f = H5Fopen(b->ckpt, H5F_ACC_RDONLY, H5P_DEFAULT);
        for (int64_t i = 0; i < n; i++) {
            char path[64];
            snprintf(path, sizeof path, "/params/layer.%lld.w", (long long)i);
            hid_t d = f >= 0 ? H5Dopen2(f, path, H5P_DEFAULT) : -1;
            haddr_t a = d >= 0 ? H5Dget_offset(d) : HADDR_UNDEF;
            b->data_offset[i] = a == HADDR_UNDEF ? -1 : (int64_t)a;
            if (d >= 0) H5Dclose(d);
        }
        if (f >= 0) H5Fclose(f);
    }
    MPI_Bcast(b->data_offset, (int)n, MPI_INT64_T, 0, b->comm);
    for (int64_t i = 0; i < n; i++)
        TESS_REQUIRE(b->data_offset[i] >= 0, TESS_ERR_DATA,
                     "no contiguous data for tensor %lld in '%s'", (long long)i, b->ckpt);
    return TESS_OK;
}

/* The ranges read: pread() of exactly the bytes tess_ckpt_load reads from the checkpoint, in
 * its order (rank q of P starts with tensor q * n / P) and its slab size, without HDF5, MPI-IO or
 * the hash: what this file layout costs on this file system. */
static tess_status range_read(const bench *b) {
    int fd = open(b->ckpt, O_RDONLY);
    TESS_REQUIRE(fd >= 0, TESS_ERR_IO, "cannot open '%s': %s", b->ckpt, strerror(errno));
    const int64_t n = tess_registry_count(b->reg), first = b->rank * n / b->size;
    for (int64_t j = 0; j < n; j++) {
        const int64_t i = (first + j) % n;
        const tess_registry_entry *e = tess_registry_get(b->reg, i);
        const off_t at = (off_t)(b->data_offset[i] + e->global_offset[0] * COLS * 4);
        tess_status s = pread_all(fd, b->ckpt, tess_registry_param(b->reg, i),
                                  (size_t)e->local_count * sizeof(float), at, RANGE_SLAB);
        if (s != TESS_OK) {
            close(fd);
            return s;
        }
    }
    close(fd);
    return TESS_OK;
}

typedef enum {
    OP_RAW_WRITE,
    OP_RAW_READ,
    OP_TESS_WRITE,
    OP_TESS_READ,
    OP_RANGE_READ,
    OP_COUNT
} op_kind;

/* Run one operation between barriers; fills c. */
static tess_status timed(bench *b, op_kind op, int64_t rep, cost *c, double *fsync_s) {
    tess_ckpt_state st = {.state = b->state, .step = rep, .app = "bench_ckpt"};
    const bool write = op == OP_RAW_WRITE || op == OP_TESS_WRITE;
    const char *io_field = write ? "wchar" : "rchar";
    tess_status s = TESS_OK;
    MPI_Barrier(b->comm);
    probe p = probe_begin(io_field);
    MPI_Barrier(b->comm);
    const double t0 = MPI_Wtime();
    switch (op) {
    case OP_RAW_WRITE: s = raw_write(b, fsync_s); break;
    case OP_RAW_READ: s = raw_read(b); break;
    case OP_RANGE_READ: s = range_read(b); break;
    case OP_TESS_WRITE:
        s = tess_ckpt_save(b->g, b->tess_dir, &st, 0, b->ckpt, sizeof b->ckpt);
        break;
    default: s = tess_ckpt_load(b->g, b->ckpt, &st); break;
    }
    TESS_CHECK(s);
    MPI_Barrier(b->comm);
    c->seconds = MPI_Wtime() - t0;
    probe_end(b, &p, io_field, c);
    return TESS_OK;
}

/* Remove raw.bin, the checkpoint and the latest pointer, fsync the directories (rank 0). */
static void remove_files(const bench *b) {
    if (b->rank == 0) {
        char latest[PATH_BYTES + 16];
        snprintf(latest, sizeof latest, "%s/latest", b->tess_dir);
        remove(b->raw);
        remove(latest);
        if (b->ckpt[0]) remove(b->ckpt);
        rmdir(b->tess_dir);
        int fd = open(b->dir, O_RDONLY);
        if (fd >= 0) {
            fsync(fd);
            close(fd);
        }
    }
    MPI_Barrier(b->comm);
}

/* Seconds to hash the local state with hash scheme h (rank 0, barrier to barrier). */
static double time_hash(const bench *b, tess_ckpt_hash_scheme h) {
    MPI_Barrier(b->comm);
    const double t0 = MPI_Wtime();
    uint64_t acc = 0;
    for (int64_t i = 0; i < tess_registry_count(b->reg); i++) {
        const tess_registry_entry *e = tess_registry_get(b->reg, i);
        acc = tess_ckpt_hash_add(h, acc, tess_registry_param(b->reg, i), sizeof(float),
                                 e->global_offset[0] * COLS, e->local_count);
    }
    uint64_t sum;
    MPI_Allreduce(&acc, &sum, 1, MPI_UINT64_T, MPI_SUM, b->comm); /* also keeps acc alive */
    return MPI_Wtime() - t0;
}

/* "<key>_all" with every repetition's seconds in order, then "<key>_s" with their median. */
static void print_times(const char *key, double *x, int n) {
    printf("%s_all", key);
    for (int r = 0; r < n; r++) printf(" %.4f", x[r]);
    printf("\n%s_s %.4f\n", key, tess_bench_median(x, n));
}

static tess_status run(MPI_Comm comm, int argc, char **argv) {
    bench b = {.comm = comm};
    MPI_Comm_rank(comm, &b.rank);
    MPI_Comm_size(comm, &b.size);
    tess_log_init(b.rank, TESS_LOG_WARN); /* no "checkpoint step=..." line per save */
    TESS_REQUIRE(argc >= 2 && argv[1][0] != '-', TESS_ERR_ARG,
                 "usage: bench_ckpt DIR [--mib N] [--tensors K] [--reps R] [--order 0|1] "
                 "[--raw 0|1] [--profile 0|1] [--overlap 0|1] [--ranges 0|1]");
    static const char *const keys[] = {"--mib",     "--tensors", "--reps",  "--order",
                                       "--raw",     "--profile", "--overlap", "--ranges"};
    int64_t opt[] = {100, 8, 1, 0, 1, 0, 1, 1};
    TESS_CHECK(tess_bench_parse_ints(argc - 1, argv + 1, keys, opt, 8, 0, 16384));
    const int64_t mib = opt[0], ntensors = opt[1], reps = opt[2], order = opt[3];
    const bool with_raw = opt[4] != 0, profile = opt[5] != 0, with_ranges = opt[7] != 0;
    TESS_REQUIRE(mib >= 1 && ntensors >= 1 && reps >= 1 && reps <= MAX_REPS && order <= 1 &&
                     opt[4] <= 1 && opt[5] <= 1 && opt[6] <= 1 && opt[7] <= 1,
                 TESS_ERR_ARG, "need --mib >= 1, --tensors >= 1, --reps in [1, %d], "
                 "--order, --raw, --profile, --overlap and --ranges 0 or 1", MAX_REPS);
    struct stat sb;
    TESS_REQUIRE(stat(argv[1], &sb) == 0 && S_ISDIR(sb.st_mode) && strlen(argv[1]) < DIR_BYTES,
                 TESS_ERR_NOINPUT, "'%s' is not a directory", argv[1]);
    snprintf(b.dir, sizeof b.dir, "%s", argv[1]);
    snprintf(b.raw, sizeof b.raw, "%s/raw.bin", b.dir);
    snprintf(b.tess_dir, sizeof b.tess_dir, "%s/tess", b.dir);

    TESS_CHECK(bench_build(&b, mib, ntensors));
    b.data_offset = calloc((size_t)ntensors, sizeof *b.data_offset);
    TESS_REQUIRE(b.data_offset, TESS_ERR_MEM, "allocating %lld offsets", (long long)ntensors);
    bench_fill(&b);
    const bool hwm_reset = tess_bench_reset_hwm(); /* else VmHWM growth includes the fill */
    double t[OP_COUNT][MAX_REPS] = {{0}}, fs[MAX_REPS] = {0}, hash_s = 0.0, hash_v1_s = 0.0;
    int64_t hwm[2][MAX_REPS] = {{0}}, io[OP_COUNT][MAX_REPS] = {{0}}, bad = 0, bad_ranges = 0,
            file_bytes = -1;
    const char *drop = "none";
    for (int64_t r = 0; r < reps; r++) {
        const bool raw_first = (r + order) % 2 == 0;
        const op_kind writes[2] = {raw_first ? OP_RAW_WRITE : OP_TESS_WRITE,
                                   raw_first ? OP_TESS_WRITE : OP_RAW_WRITE};
        cost c[OP_COUNT];
        b.ckpt[0] = '\0';
        for (int k = 0; k < 2; k++)
            if (with_raw || writes[k] == OP_TESS_WRITE)
                TESS_CHECK(timed(&b, writes[k], r, &c[writes[k]], &fs[r]));
        if (b.rank == 0 && stat(b.ckpt, &sb) == 0) file_bytes = (int64_t)sb.st_size;
        if (with_ranges) TESS_CHECK(find_offsets(&b));
        /* reads: raw, ranges, Tessera when raw goes first, else the reverse */
        static const op_kind read_order[3] = {OP_RAW_READ, OP_RANGE_READ, OP_TESS_READ};
        for (int k = 0; k < 3; k++) {
            const op_kind op = read_order[raw_first ? k : 2 - k];
            if ((op == OP_RAW_READ && !with_raw) || (op == OP_RANGE_READ && !with_ranges))
                continue;
            if (op != OP_RAW_READ) memset(b.params, 0, b.local_bytes);
            drop = drop_cache(&b);
            TESS_CHECK(timed(&b, op, r, &c[op], NULL));
            if (op == OP_TESS_READ) bad += bench_mismatches(&b);
            if (op == OP_RANGE_READ) bad_ranges += bench_mismatches(&b);
        }
        remove_files(&b);
        for (int k = 0; k < OP_COUNT; k++) {
            if ((!with_raw && (k == OP_RAW_WRITE || k == OP_RAW_READ)) ||
                (!with_ranges && k == OP_RANGE_READ))
                continue;
            t[k][r] = c[k].seconds;
            io[k][r] = c[k].io_bytes;
        }
        hwm[0][r] = c[OP_TESS_WRITE].hwm_kib;
        hwm[1][r] = c[OP_TESS_READ].hwm_kib;
    }
    if (profile) {
        hash_s = time_hash(&b, TESS_CKPT_HASH_V2);
        hash_v1_s = time_hash(&b, TESS_CKPT_HASH_V1);
    }

    if (b.rank == 0) {
        const int n = (int)reps;
        double h[2][MAX_REPS], v[OP_COUNT][MAX_REPS];
        for (int r = 0; r < n; r++)
            for (int k = 0; k < OP_COUNT; k++) {
                if (k < 2) h[k][r] = (double)hwm[k][r];
                v[k][r] = (double)io[k][r] / (double)b.state_bytes;
            }
        printf("ranks %d\nreps %lld\ntensors %lld\nstate_bytes %lld\nfile_bytes %lld\n", b.size,
               (long long)reps, (long long)ntensors, (long long)b.state_bytes,
               (long long)file_bytes);
        printf("largest_local_tensor_bytes %lld\ncache_drop %s\nhwm_reset %d\n",
               (long long)b.largest_local, drop, hwm_reset);
        if (with_raw) {
            print_times("raw_write", t[OP_RAW_WRITE], n);
            print_times("raw_fsync", fs, n);
            print_times("raw_read", t[OP_RAW_READ], n);
        }
        print_times("tess_write", t[OP_TESS_WRITE], n);
        print_times("tess_read", t[OP_TESS_READ], n);
        if (with_ranges) print_times("range_read", t[OP_RANGE_READ], n);
        printf("save_hwm_growth_kib %.0f\nload_hwm_growth_kib %.0f\n", tess_bench_median(h[0], n),
               tess_bench_median(h[1], n));
        printf("save_wchar_per_state_byte %.4f\nload_rchar_per_state_byte %.4f\n",
               tess_bench_median(v[OP_TESS_WRITE], n), tess_bench_median(v[OP_TESS_READ], n));
        if (profile) printf("hash_s %.4f\nhash_v1_s %.4f\n", hash_s, hash_v1_s);
        int level;
        MPI_Query_thread(&level);
        printf("load_mismatches %lld\nhash_worker %d\n", (long long)bad,
               level >= MPI_THREAD_FUNNELED);
        if (with_ranges) printf("range_mismatches %lld\n", (long long)bad_ranges);
    }
    tess_state_destroy(&b.state);
    tess_group_destroy(&b.g);
    tess_registry_destroy(&b.reg);
    free(b.data_offset);
    TESS_REQUIRE(bad == 0, TESS_ERR_DATA, "%lld elements differ after tess_ckpt_load",
                 (long long)bad);
    TESS_REQUIRE(bad_ranges == 0, TESS_ERR_DATA, "%lld elements differ after the ranges read",
                 (long long)bad_ranges);
    return TESS_OK;
}

int main(int argc, char **argv) {
    /* --overlap 0: MPI_THREAD_SINGLE, so tess_ckpt_load hashes on the calling thread */
    int want = MPI_THREAD_FUNNELED, level;
    for (int i = 1; i + 1 < argc; i++)
        if (strcmp(argv[i], "--overlap") == 0 && strcmp(argv[i + 1], "0") == 0)
            want = MPI_THREAD_SINGLE;
    MPI_Init_thread(&argc, &argv, want, &level);
    tess_status s = run(MPI_COMM_WORLD, argc, argv);
    if (s != TESS_OK) {
        tess_error_write();
        MPI_Abort(MPI_COMM_WORLD, tess_status_exit_code(s));
    }
    MPI_Finalize();
    return 0;
}

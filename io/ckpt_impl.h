/* ckpt_impl.h - internals shared by io/ckpt_*.c: problem lists, the write/read plan (the HDF5
 * helpers are io/h5.h).
 * Not a public interface (see ckpt.h). Functions taking a tess_group are collective on it and
 * agree on their verdicts with tess_par_agree (par/coll.h); the public functions pass their
 * group. */
#ifndef TESS_IO_CKPT_IMPL_H
#define TESS_IO_CKPT_IMPL_H

#include <hdf5.h>
#include <mpi.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/status.h" /* tess_status */
#include "io/ckpt.h"     /* tess_ckpt_state, tess_ckpt_hash_scheme */
#include "io/h5.h"       /* tess_h5_* (HDF5 helpers: error printing, attributes, file access) */
#include "par/coll.h"    /* tess_group, tess_par_agree */

enum {
    CKPT_DSET_PATH_MAX = TESS_STATE_NAME_MAX + 1, /* "/<entry name>", including the NUL */
    CKPT_MSGS_BYTES = 6144,  /* problem list; fits TESS_PAR_AGREE_TEXT with its record prefixes */
    CKPT_MSGS_MAX_LINES = 20,
};

/* The scheme of hashes in a file of format_version v (ckpt_util.c). */
tess_ckpt_hash_scheme ckpt_scheme(int64_t v);

/* --- problem lists: built on one rank, pushed to its record, shared by tess_par_agree ------- */
typedef struct {
    char text[CKPT_MSGS_BYTES]; /* lines separated by '\n' */
    int lines, dropped;
} ckpt_msgs;
void ckpt_msgs_add(ckpt_msgs *m, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Push every line of m (and "... N more problems") to the record with status s; returns s. */
tess_status ckpt_msgs_push(tess_status s, const ckpt_msgs *m, const char *file, int line,
                           const char *func);
#define CKPT_MSGS_PUSH(s, m) ckpt_msgs_push((s), (m), __FILE__, __LINE__, __func__)

/* A local failure named before it is agreed on: if s is not TESS_OK, push the line `what` to the
 * record; returns s. Not collective: the caller passes the result to tess_par_agree. */
tess_status ckpt_failed(tess_status s, const char *what, const char *file, int line,
                        const char *func);
#define CKPT_FAILED(s, what) ckpt_failed((s), (what), __FILE__, __LINE__, __func__)

/* Committed checkpoints of dir ("ckpt_<step>.h5"), newest first, as "name\n" lines on every rank
 * (malloc'ed, caller frees; *count may be 0; a missing dir is empty). Rank 0 lists. Collective
 * on g. */
tess_status ckpt_list_shared(const tess_group *g, const char *dir, char **names, int64_t *count);

/* --- the plan (ckpt_plan.c): every dataset of the file, the part this rank writes and reads -- */
typedef struct {
    bool block_cyclic;             /* gathered to / scattered from rank 0 (par/gather.h) */
    int64_t off[TESS_MAX_DIMS];    /* region start in global coordinates */
    int64_t cnt[TESS_MAX_DIMS];    /* region extent */
    int64_t moff[TESS_MAX_DIMS];   /* region start inside this rank's local block */
    int64_t count;                 /* elements in the region; 0: this rank writes none */
} ckpt_region;

/* One dataset of the checkpoint: an entry listed by every rank, or a private one of some rank. */
typedef struct {
    char path[CKPT_DSET_PATH_MAX]; /* "/<entry name>" */
    tess_dtype dtype;
    int ndim;
    int64_t shape[TESS_MAX_DIMS]; /* global shape */
    int64_t count;                /* product of shape */
    int owner;                    /* private: the rank that lists it; -1: every rank lists it */
    const tess_state_entry *e;    /* this rank's entry, NULL if another rank's private entry */
    ckpt_region r;                /* the part this rank writes and hashes (count 0: none) */
    bool legacy_attr; /* a counter stored as attribute of its parent group (formats 1 and 2) */
} ckpt_item;

typedef struct {
    ckpt_item *items; /* the state's non-private entries in its order, then every rank's private
                         entries sorted by name */
    int64_t n;
    bool has_bc; /* some entry is block-cyclic */
} ckpt_plan;

/* The plan of st on g: checks that the non-private entries agree on every rank (name, dtype,
 * global shape, layout kind, order; else TESS_ERR_ARG naming the entry and the ranks), that each
 * private entry is listed by one rank only and that no name is reserved or a group of another,
 * that the blocks cover each tensor (ranks holding the same block split its rows, so the regions
 * of all ranks cover every element once), and that a block-cyclic entry is float32 on a grid of
 * all of g. Every rank returns the same status. Free with ckpt_plan_free. Collective on g. */
tess_status ckpt_plan_make(const tess_group *g, const tess_state *st, ckpt_plan *p);
void ckpt_plan_free(ckpt_plan *p);
/* acc + the hash terms (scheme h) of region r of entry e, whose local block is `local`
 * (row-major; block-cyclic: the whole tensor, row-major). */
uint64_t ckpt_hash_region(tess_ckpt_hash_scheme h, uint64_t acc, const tess_state_entry *e,
                          const ckpt_region *r, const void *local);
/* The model_digest attribute: tess_ckpt_model_digest of the registry of the "params/" entries. */
uint64_t ckpt_plan_digest(const ckpt_plan *p);
/* Items that formats 1 and 2 stored as attributes: 1-element int64 entries listed by every rank
 * whose name has a group ("optim/step_count": attribute step_count of /optim). */
bool ckpt_is_counter(const ckpt_item *it);

/* --- reading (ckpt_read.c) ------------------------------------------------------------------- */
/* Rank 0 opens path alone and checks it (against the plan's datasets unless p is NULL) and
 * pushes its problem list to its record; the verdict is agreed (every other rank gets rank 0's
 * record), then on success rank 0's info is broadcast. Collective on g. */
tess_status ckpt_probe(const tess_group *g, const char *path, const ckpt_plan *p,
                       tess_ckpt_info *info);
/* The first local failure of a read sequence: a rank records it and goes on with the sequence,
 * so that no rank waits in a collective for one that gave up; the sequence ends with
 * tess_par_agree(g, CKPT_FAILED(r.status, r.what)). */
typedef struct {
    tess_status status;
    char what[TESS_CKPT_PATH_MAX + 768];
} ckpt_read_err;
/* Record status s and the message fmt (one %s: arg) plus HDF5's innermost message in r, unless r
 * already holds a failure. */
void ckpt_rfail(ckpt_read_err *r, tess_status s, const char *fmt, const char *arg);
/* tess_ckpt_load without the silencing of HDF5's error printing and without the final record
 * line (ckpt_load.c). Collective on g. */
tess_status ckpt_load_state(const tess_group *g, const char *path, tess_ckpt_state *st);

/* --- the integrity record of format 4 (ckpt_seal.c) ------------------------------------------
 * Format 4 files start with a user block holding a record: magic, format_version, the file's
 * length, step, data_cursor, seed, world_size, the (offset, length) of every entry dataset's raw
 * data, and a digest over every other byte of the file. Rank 0 writes it after H5Fclose and
 * checks it with plain reads before any H5Fopen, so a flipped byte or a truncation anywhere
 * outside the tensor data (which the per-dataset hashes cover) is found before HDF5 parses it. */
typedef struct {
    int64_t off, len; /* absolute file offset and bytes of one dataset's contiguous raw data */
} ckpt_extent;
typedef struct {
    int64_t format_version, userblock, file_bytes, step, data_cursor, world_size, nextents;
    uint64_t seed;
} ckpt_seal_info;
/* The user block size (a power of two >= 512) that holds the record with n extents. */
int64_t ckpt_seal_userblock(int64_t nextents);
/* True if head (n bytes, the file's start) begins with the record's magic. */
bool ckpt_seal_magic(const unsigned char *head, size_t n);
/* Fill the user block of the closed file path: every field of in but file_bytes (taken from the
 * file), the extents ext (in->nextents, sorted here) and the digest. TESS_ERR_IO naming the
 * file. Not collective (rank 0). */
tess_status ckpt_seal_write(const char *path, const ckpt_seal_info *in, ckpt_extent *ext);
/* Check path's record with plain reads: magic, field ranges, length == file size, extents sorted
 * and inside the file, digest. Fills *in. TESS_OK, or TESS_ERR_DATA / TESS_ERR_NOINPUT with the
 * problem (naming the file) added to m. Not collective. */
tess_status ckpt_seal_check(const char *path, ckpt_seal_info *in, ckpt_msgs *m);

/* --- files ----------------------------------------------------------------------------------- */
/* The options of every parallel checkpoint file access (tess_h5_fapl_mpio, io/h5.h): collective
 * metadata, format bounds v18..v18, no file locking (our own tmp + rename protocol protects the
 * file; locks fail on NFS and some Lustre). */
enum { CKPT_FAPL = TESS_H5_COLL_METADATA | TESS_H5_FORMAT_V18 | TESS_H5_NO_LOCKING };
/* fsync a file or a directory by path; 0 or -1 with errno. */
int ckpt_fsync_path(const char *path, bool directory);
/* The directory part of path ("." if none). */
void ckpt_dirname(const char *path, char *buf, size_t n);
/* Test hook: SIGKILL this process if TESS_CKPT_TEST_KILL_AT equals point. */
void ckpt_test_kill(const char *point);

#endif

/* ckpt_impl.h - internals shared by io/ckpt_*.c: HDF5 helpers, problem lists, the write/read plan.
 * Not a public interface (see ckpt.h). */
#ifndef TESS_IO_CKPT_IMPL_H
#define TESS_IO_CKPT_IMPL_H

#include <hdf5.h>
#include <mpi.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/status.h" /* tess_status */
#include "io/ckpt.h"     /* tess_ckpt_state, tess_ckpt_hash_scheme */

enum {
    CKPT_SET_NAME_MAX = 64,  /* bytes of a set or counter name, including the NUL */
    CKPT_DSET_PATH_MAX = CKPT_SET_NAME_MAX + TESS_REGISTRY_NAME_MAX + 2,
    CKPT_MSGS_BYTES = 6144,  /* problem list shared by all ranks */
    CKPT_MSGS_MAX_LINES = 20,
};

/* --- HDF5 error printing -------------------------------------------------------------------- */
typedef struct {
    H5E_auto2_t fn;
    void *data;
} ckpt_quiet;
/* Turn HDF5's automatic error printing off (begin) and restore it (end). */
void ckpt_quiet_begin(ckpt_quiet *q);
void ckpt_quiet_end(const ckpt_quiet *q);
/* The innermost message of HDF5's current error stack, or "no detail from HDF5". Call it right
 * after the failing call: every other HDF5 call clears the stack. */
void ckpt_h5_message(char *buf, size_t n);

/* --- attributes (0 on success, -1 on failure) ------------------------------------------------ */
int ckpt_attr_write_str(hid_t loc, const char *name, const char *value);
int ckpt_attr_write_i64(hid_t loc, const char *name, int64_t v);
int ckpt_attr_write_u64(hid_t loc, const char *name, uint64_t v);
/* Strings of any HDF5 string type, cut to n-1 bytes. Integers of any integer type. */
int ckpt_attr_read_str(hid_t loc, const char *name, char *buf, size_t n);
int ckpt_attr_read_i64(hid_t loc, const char *name, int64_t *v);
int ckpt_attr_read_u64(hid_t loc, const char *name, uint64_t *v);
/* True if loc has attribute name (errors count as absent). */
bool ckpt_attr_exists(hid_t loc, const char *name);
/* True if path names an object under loc, checking every component (errors count as absent). */
bool ckpt_path_exists(hid_t loc, const char *path);
/* "float32", "int64", "uint8", "string", "compound", ... for messages. */
void ckpt_type_name(hid_t type, char *buf, size_t n);

/* --- names ----------------------------------------------------------------------------------- */
/* 1..CKPT_SET_NAME_MAX-1 characters, components of [A-Za-z0-9_] separated by single '/'. */
bool ckpt_name_is_valid(const char *name);
/* "/<set>/<entry>" */
void ckpt_dataset_path(char *buf, size_t n, const char *set, const char *entry);
/* Set s of st: 0 is "params" (the registry's params), 1.. are st->buffers. */
int ckpt_nsets(const tess_ckpt_state *st);
const char *ckpt_set_name(const tess_ckpt_state *st, int s);
float *ckpt_set_data(const tess_ckpt_state *st, int s);
/* Check st on this rank: finalized registry, valid and distinct names, buffers present. */
tess_status ckpt_check_state(const tess_ckpt_state *st);

/* --- problem lists: built on one rank, broadcast, pushed to the error record everywhere ------- */
typedef struct {
    char text[CKPT_MSGS_BYTES]; /* lines separated by '\n' */
    int lines, dropped;
} ckpt_msgs;
void ckpt_msgs_add(ckpt_msgs *m, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Broadcast status, m and (if info != NULL) *info from root. Collective on comm. */
tess_status ckpt_bcast_verdict(MPI_Comm comm, int root, tess_status *s, ckpt_msgs *m,
                               tess_ckpt_info *info);
/* Push every line of m (and "... N more problems") to the record with status s; returns s. */
tess_status ckpt_msgs_push(tess_status s, const ckpt_msgs *m, const char *file, int line,
                           const char *func);
#define CKPT_MSGS_PUSH(s, m) ckpt_msgs_push((s), (m), __FILE__, __LINE__, __func__)

/* Every rank returns the same status: if any rank's local status is not TESS_OK, all return the
 * largest status code seen; ranks that were fine add a line saying another rank failed.
 * Collective on comm. */
tess_status ckpt_agree(MPI_Comm comm, tess_status local, const char *what);

/* Share rank 0's verdict: every rank returns s_root (given on rank 0; others pass anything);
 * ranks other than 0 get rank 0's first record line. Collective on comm. */
tess_status ckpt_root_verdict(MPI_Comm comm, tess_status s_root);

/* Committed checkpoints of dir ("ckpt_<step>.h5"), newest first, as "name\n" lines on every rank
 * (malloc'ed, caller frees; *count may be 0; a missing dir is empty). Collective on comm. */
tess_status ckpt_list_shared(MPI_Comm comm, const char *dir, char **names, int64_t *count);

/* --- the plan: which part of each entry this rank writes and hashes ------------------------- */
typedef struct {
    bool block_cyclic;             /* gathered to / scattered from rank 0 (par/gather.h) */
    int64_t off[TESS_MAX_DIMS];    /* region start in global coordinates */
    int64_t cnt[TESS_MAX_DIMS];    /* region extent */
    int64_t moff[TESS_MAX_DIMS];   /* region start inside this rank's local block */
    int64_t count;                 /* elements in the region; 0: this rank writes none */
} ckpt_region;

/* regions[i] for every registry entry i: ranks holding the same block of an entry split its rows,
 * so the regions of all ranks cover every element exactly once. Checks that the registry is the
 * same on every rank (names, shapes, layout kinds) and that the blocks cover each tensor; a
 * block-cyclic entry needs nprow * npcol == the communicator's size. *has_bc tells whether any
 * entry is block-cyclic. TESS_ERR_ARG on every rank on failure. Collective on comm. */
tess_status ckpt_plan(MPI_Comm comm, const tess_registry *reg, ckpt_region *regions,
                      bool *has_bc);
/* acc + the hash terms (scheme h) of region r of entry e, whose local block is `local`
 * (row-major). */
uint64_t ckpt_hash_region(tess_ckpt_hash_scheme h, uint64_t acc, const tess_registry_entry *e,
                          const ckpt_region *r,
                          const float *local);

/* --- flat arrays (ckpt_array.c) ------------------------------------------------------------ */
/* The part of an array this rank writes and hashes: global start, elements (0: none), start in
 * its local data. The spans of all ranks cover every element once. */
typedef struct {
    int64_t off, count, moff;
    int64_t parts; /* distinct ranges over all ranks (1: replicated) */
} ckpt_span;
/* Registry entries of st (0 without a registry). */
int64_t ckpt_reg_count(const tess_ckpt_state *st);
size_t ckpt_dtype_size(tess_ckpt_dtype t);
hid_t ckpt_dtype_file(tess_ckpt_dtype t); /* little-endian HDF5 type */
hid_t ckpt_dtype_mem(tess_ckpt_dtype t);  /* native HDF5 type */
const char *ckpt_dtype_name(tess_ckpt_dtype t);
/* spans[a] for every array of st: checks that dtype and n_global agree between ranks and that
 * the distinct ranges tile [0, n_global); ranks holding the same range split it. TESS_ERR_ARG on
 * every rank on failure. Collective on comm. */
tess_status ckpt_array_plan(MPI_Comm comm, const tess_ckpt_state *st, ckpt_span *spans);
/* acc + the hash terms (scheme h) of span sp of array a. */
uint64_t ckpt_array_hash(tess_ckpt_hash_scheme h, uint64_t acc, const tess_ckpt_array *a,
                         const ckpt_span *sp);
/* Rank 0, file open: array a is present as a 1-D dataset of its dtype and length with a hash;
 * problems go to m. */
void ckpt_array_check(hid_t f, const tess_ckpt_array *a, ckpt_msgs *m);

/* --- reading (ckpt_read.c) ------------------------------------------------------------------- */
/* Rank 0 opens path alone and checks it (against st unless NULL); the verdict, its problem list
 * and the info reach every rank. Collective on comm. */
tess_status ckpt_probe(MPI_Comm comm, const char *path, const tess_ckpt_state *st,
                       tess_ckpt_info *info, ckpt_msgs *m);
/* The first local failure of a read sequence: a rank records it and goes on with the sequence,
 * so that no rank waits in a collective for one that gave up; the sequence ends with
 * ckpt_agree(comm, r.status, r.what). */
typedef struct {
    tess_status status;
    char what[TESS_CKPT_PATH_MAX + 768];
} ckpt_read_err;
/* Record status s and the message fmt (one %s: arg) plus HDF5's innermost message in r, unless r
 * already holds a failure. */
void ckpt_rfail(ckpt_read_err *r, tess_status s, const char *fmt, const char *arg);
/* path opened read-only with ckpt_fapl_mpio, or a negative id. Collective on comm. */
hid_t ckpt_open_collective(MPI_Comm comm, const char *path);
/* tess_ckpt_load without the silencing of HDF5's error printing and without the final record
 * line (ckpt_load.c). Collective on comm. */
tess_status ckpt_load_state(MPI_Comm comm, const char *path, tess_ckpt_state *st);

/* --- files ----------------------------------------------------------------------------------- */
/* A file-access list for parallel HDF5 on comm (MPI-IO, collective metadata, format bounds
 * v18..v18, no file locking), or a negative id. */
hid_t ckpt_fapl_mpio(MPI_Comm comm);
/* fsync a file or a directory by path; 0 or -1 with errno. */
int ckpt_fsync_path(const char *path, bool directory);
/* The directory part of path ("." if none). */
void ckpt_dirname(const char *path, char *buf, size_t n);
/* Test hook: SIGKILL this process if TESS_CKPT_TEST_KILL_AT equals point. */
void ckpt_test_kill(const char *point);

#endif

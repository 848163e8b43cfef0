/* ckpt.h - parallel-HDF5 checkpoints: write, commit atomically, keep the last N, verify, load on
 * any rank count, resume. The file format and the commit protocol are documented for users in
 * docs/checkpoints.md; this header states the contracts.
 *
 * One HDF5 file per checkpoint. Every registry entry is a dataset of its GLOBAL shape, named by
 * its registry name under the group of its state set:
 *   /params/<name>          the parameters (tess_registry_params)
 *   /<set>/<name>           each extra state set, e.g. /optim/m/<name>, /optim/v/<name>
 *   /<array>                each flat array (tess_ckpt_array): float32, float64 or int64, 1-D of
 *                           its global length, e.g. /zo/x; replicated or split into row blocks
 * plus root attributes (format, format_version, step, data_cursor, seed, world_size, ...), counter
 * attributes (e.g. step_count on /optim), the resolved config text (/config) and the list of tensor
 * datasets (/manifest). Each tensor dataset carries a 64-bit hash of its global contents that does
 * not depend on how many ranks wrote it (tess_ckpt_hash_add), and its writer's layout. The
 * format_version selects the hash scheme: 1 tess-poshash64-v1, 2 tess-poshash32x-v2; the two
 * formats differ in nothing else, and every function here reads both.
 *
 * Writing: each rank writes hyperslabs of the entries it holds, collectively; ranks that hold the
 * same block (replicated entries, shards repeated over data-parallel replicas) split its rows so
 * every element is written exactly once. BLOCK_CYCLIC entries are gathered to rank 0
 * (par/gather.h) when their grid spans the whole communicator; a grid on a sub-group is refused.
 * Reading: each rank reads the hyperslab its own layout asks for, so a checkpoint written on P
 * ranks loads on Q ranks.
 *
 * Errors (status codes of core/status.h): a missing or unreadable file TESS_ERR_NOINPUT (exit 66);
 * a truncated or damaged file, a hash mismatch, a missing, extra or misshapen dataset, a foreign
 * or too-new format TESS_ERR_DATA (exit 65), each named by file and dataset with what was expected
 * and what was found; file-system failures while writing TESS_ERR_IO; a registry that differs
 * between ranks TESS_ERR_ARG. Every collective function returns the same status on every rank
 * (verdicts are agreed before any rank moves on), so no rank is ever left waiting.
 *
 * HDF5's own error stack is silenced inside these functions; failures are reported in the error
 * record with HDF5's innermost message. Every function leaves HDF5's error printing as it found it.
 */
#ifndef TESS_IO_CKPT_H
#define TESS_IO_CKPT_H

#include <hdf5.h>
#include <mpi.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/status.h" /* tess_status */
#include "nn/registry.h" /* tess_registry */

#define TESS_CKPT_FORMAT "tessera-checkpoint"
#define TESS_CKPT_HASH_ALGORITHM "tess-poshash32x-v2"   /* written: format_version 2 */
#define TESS_CKPT_HASH_ALGORITHM_V1 "tess-poshash64-v1" /* format_version 1, read only */

enum {
    TESS_CKPT_FORMAT_VERSION = 2, /* the format this build writes; it reads 1 and 2 */
    TESS_CKPT_PATH_MAX = 4096,    /* bytes of a checkpoint path, including the NUL */
    TESS_CKPT_MAX_SETS = 16,      /* extra state sets per checkpoint */
    TESS_CKPT_MAX_COUNTERS = 16,  /* counters per checkpoint */
    TESS_CKPT_MAX_ARRAYS = 32,    /* flat arrays per checkpoint */
};

/* An extra state set: local_total floats laid out like the registry's params (AdamW's m, v).
 * name: group path of 1..63 characters, components of [A-Za-z0-9_] separated by '/', not "params",
 * "config" or "manifest" (e.g. "optim/m"). */
typedef struct {
    const char *name;
    float *buf;
} tess_ckpt_buffer;

/* A named int64 counter (AdamW's step count), stored as an attribute: name "group/attr", e.g.
 * "optim/step_count" is attribute step_count of group /optim. Same character rules as sets. */
typedef struct {
    const char *name;
    int64_t *value;
} tess_ckpt_counter;

/* Element type of a flat array; stored little-endian (H5T_IEEE_F32LE, H5T_IEEE_F64LE,
 * H5T_STD_I64LE) whatever the machine. */
typedef enum { TESS_CKPT_F32 = 0, TESS_CKPT_F64, TESS_CKPT_I64 } tess_ckpt_dtype;

/* A flat array outside the registry (float64 iterates, int64 counters, scalars): a 1-D dataset
 * /<name> of n_global elements, of which this rank holds [first, first + n_local) at data.
 * Replicated: first 0, n_local = n_global on every rank. Sharded along dim 0: the ranks' ranges
 * (e.g. tess_par_block_range blocks) tile [0, n_global); ranks holding the same range (replicas)
 * split it when writing, so each element is written and hashed once, whatever the rank count.
 * Loading fills each rank's own range, so a checkpoint written on P ranks loads on Q.
 * name: like a set name ("zo/x"); not under "params", "config", "manifest" or a set's group, and
 * no array's name a group of another's. */
typedef struct {
    const char *name;
    tess_ckpt_dtype dtype;
    void *data;       /* n_local elements of dtype (float, double or int64_t) */
    int64_t n_global; /* >= 1, the same on every rank */
    int64_t first, n_local;
} tess_ckpt_array;

/* What a checkpoint holds. Writers fill it; load fills buffers, arrays, counters and the
 * scalars. */
typedef struct {
    tess_registry *reg;                /* finalized; params in tess_registry_params(reg); NULL:
                                          no params and no sets (then narrays >= 1) */
    const tess_ckpt_buffer *buffers;   /* nbuffers extra state sets (may be NULL if 0) */
    int nbuffers;
    const tess_ckpt_counter *counters; /* ncounters counters (may be NULL if 0) */
    int ncounters;
    const tess_ckpt_array *arrays;     /* narrays flat arrays (may be NULL if 0) */
    int narrays;
    int64_t step;        /* optimizer steps completed */
    int64_t data_cursor; /* position of the training data stream (e.g. samples consumed) */
    uint64_t seed;       /* seed of every Philox draw; counters derive from step (core/rng.h) */
    const char *config_text; /* write: resolved INI text (rank 0's is stored); NULL = "" */
    const char *app;         /* write: program name, e.g. "tinylm"; NULL = "" */
} tess_ckpt_state;

/* Run metadata from a checkpoint's root attributes. */
typedef struct {
    int64_t format_version, step, data_cursor, world_size;
    uint64_t seed;
    char app[64];
    char tessera_version[32];
    char created_utc[32];  /* "2024-05-01T12:00:00Z" */
    char model_digest[24]; /* 16 hex digits, see tess_ckpt_model_digest */
} tess_ckpt_info;

/* --- the position-keyed hashes ----------------------------------------------------------------
 * Both schemes: H = mix64(S ^ n), S = a sum (mod 2^64) of one term per element that depends only
 * on the element's global row-major index and its bit pattern, n the element count, mix64 the
 * SplitMix64 finaliser. A sum of per-element terms does not depend on who hashes which elements,
 * so ranks hash their own slabs and all-reduce the sums; each term is a bijection of the element's
 * bits for a fixed index, so any single changed element always changes H.
 *
 * v1, "tess-poshash64-v1" (format_version 1, read only): term(i, x) = mix64(mix64(i + G) ^ x),
 * x the element's bits zero-extended to 64, G = 0x9E3779B97F4A7C15.
 * v2, "tess-poshash32x-v2" (format_version 2, written): the data are 32-bit words w_k with word
 * index k: a 4-byte element i is word i; an 8-byte one is words 2i (low 32 bits) and 2i+1 (high);
 * a byte i is word i (zero-extended). term(k, w) = fmix32(w ^ lo32(k * 0x9E3779B1) ^
 * lo32((k >> 32) * 0x85EBCA77)) zero-extended to 64 bits, fmix32 murmur3's finaliser. It needs
 * only 32-bit multiplies, so it vectorises (about 5x v1's speed with AVX2). */
typedef enum {
    TESS_CKPT_HASH_V1 = 1, /* the scheme of format_version 1 */
    TESS_CKPT_HASH_V2 = 2, /* the scheme of format_version 2 */
} tess_ckpt_hash_scheme;

/* acc + the terms of scheme h of n elements of elem_size bytes (1, 4 or 8) at data, with global
 * element indices first, first+1, ..., first+n-1. Start from acc = 0. Pure. */
uint64_t tess_ckpt_hash_add(tess_ckpt_hash_scheme h, uint64_t acc, const void *data,
                            size_t elem_size, int64_t first, int64_t n);
/* The final hash of a sum over all `count` elements of a dataset (either scheme). Pure. */
uint64_t tess_ckpt_hash_final(uint64_t acc, int64_t count);
/* The hash_algorithm attribute text of scheme h. */
const char *tess_ckpt_hash_name(tess_ckpt_hash_scheme h);

/* Digest of the model's structure: entry names and global shapes in registration order (not the
 * layouts, so it does not change with the rank count). Stored as the model_digest attribute.
 * reg may be NULL (no model: the digest of nothing). */
uint64_t tess_ckpt_model_digest(const tess_registry *reg);

/* --- writing ---------------------------------------------------------------------------------- */

/* Write st to path atomically: every rank writes its hyperslabs into "<path>.tmp" (collective
 * parallel HDF5), the file is closed, then rank 0 fsyncs it, renames it to path and fsyncs the
 * directory. The directory must exist. On failure the tmp file is removed and path is untouched.
 * Collective on comm; st describes the same registry (names, shapes, layout kinds) on every rank.
 * Test hook: TESS_CKPT_TEST_KILL_AT=after_write|before_rename|after_rename makes rank 0 SIGKILL
 * itself at that point (after the data writes, before H5Fclose / before / after the rename).
 * Test hook: TESS_CKPT_TEST_FORMAT_VERSION=1 (the same on every rank) writes format_version 1
 * with tess-poshash64-v1 hashes, as builds before format 2 did, to test reading old files. */
tess_status tess_ckpt_write(MPI_Comm comm, const char *path, const tess_ckpt_state *st);

/* Save the checkpoint of step st->step in directory dir (created if missing) as
 * "ckpt_<step, 8 digits>.h5" with tess_ckpt_write, then point dir/latest at it (written, fsynced
 * and renamed the same way), then delete all but the keep_last newest committed checkpoints
 * (keep_last 0: keep all). Logs "checkpoint step=N path=... bytes=... seconds=..." on rank 0.
 * The committed path goes to path_out (n bytes; may be NULL). Collective on comm. */
tess_status tess_ckpt_save(MPI_Comm comm, const char *dir, const tess_ckpt_state *st,
                           int64_t keep_last, char *path_out, size_t n);

/* Delete stale "*.tmp" files (unfinished checkpoints, latest.tmp) in dir, warning once per file.
 * A missing dir is not an error. Rank 0 acts; collective on comm. */
tess_status tess_ckpt_clean(MPI_Comm comm, const char *dir);

/* --- reading ---------------------------------------------------------------------------------- */

/* Open path read-only with the serial driver and check it is a checkpoint this build reads:
 * exists (else TESS_ERR_NOINPUT), is a complete HDF5 file, has format TESS_CKPT_FORMAT and a
 * format_version in 1..TESS_CKPT_FORMAT_VERSION (else TESS_ERR_DATA). Fills *info (may be NULL)
 * and returns the open file in *file (close with H5Fclose). Not collective: for tools and for
 * rank 0. */
tess_status tess_ckpt_open(const char *path, hid_t *file, tess_ckpt_info *info);

/* Integrity check without a model: the file opens, its format is known, every dataset of the
 * manifest exists and carries a hash, no tensor dataset is missing from the manifest, and every
 * stored hash matches the data (/config and /manifest included). Each rank hashes a block of rows
 * of every dataset, in rounds of at most 4 Mi elements. Fills *info (may be NULL) on success.
 * Collective on comm; all ranks return the same status and record. */
tess_status tess_ckpt_verify(MPI_Comm comm, const char *path, tess_ckpt_info *info);

/* Load path into st: first rank 0 checks the file against st (every entry of the registry and of
 * each set present with float32 type and the registry's global shape, no extra dataset in those
 * groups, every counter present, every array present as a 1-D dataset of its dtype and n_global:
 * TESS_ERR_DATA naming the expected and the found type or shape), then every rank reads the
 * hyperslab of its own layout into the params, sets and arrays, and the hashes are compared.
 * Fills st->step, data_cursor, seed and the counters. A different world size is logged
 * ("resharding") and is not an error.
 * Threads: if MPI was initialised with MPI_THREAD_FUNNELED or higher and this is MPI's main
 * thread, a worker thread (no MPI or HDF5 calls) hashes each slab while the next is read; under
 * MPI_THREAD_SINGLE the load hashes on the calling thread. Apps call MPI_Init_thread(...,
 * MPI_THREAD_FUNNELED, ...).
 * On failure the destination buffers hold unspecified data: do not train on them. Collective on
 * comm; all ranks return the same status and record. */
tess_status tess_ckpt_load(MPI_Comm comm, const char *path, tess_ckpt_state *st);

/* Start-up: delete stale tmp files in dir (tess_ckpt_clean), then by spec
 *   ""     do not resume;
 *   "auto" load the newest committed checkpoint in dir that loads cleanly (by step in the file
 *          name); each one that fails is skipped with a warning naming the file and the reason.
 *          No checkpoint in dir: start fresh. Checkpoints present but none valid: TESS_ERR_DATA
 *          (starting over would soon prune them);
 *   PATH   load that file; any failure is returned.
 * *resumed tells whether st was loaded; the loaded path goes to path_out (n bytes; may be NULL).
 * Logs "resumed from step N (path)" on rank 0. Collective on comm. */
tess_status tess_ckpt_resume(MPI_Comm comm, const char *dir, const char *spec,
                             tess_ckpt_state *st, bool *resumed, char *path_out, size_t n);

#endif

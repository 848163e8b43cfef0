/* ckpt.h - parallel-HDF5 checkpoints of a tess_state (nn/state.h): write, commit atomically, keep
 * the last N, verify, load on any rank count, resume. The file format and the commit protocol are
 * documented for users in docs/checkpoints.md; this header states the contracts.
 *
 * One HDF5 file per checkpoint. Every state entry "a/b/c" is the dataset /a/b/c of the entry's
 * GLOBAL shape and its dtype (float32, float64, int64, stored little-endian whatever the machine),
 * e.g. /params/<name>, /optim/m/<name>, /optim/step_count, /zo/x, /clients/3/params/w; plus root
 * attributes (format, format_version, step, data_cursor, seed, world_size, ...), the resolved
 * config text (/config) and the list of entry datasets (/manifest). Each entry dataset carries a
 * 64-bit hash of its global contents that does not depend on how many ranks wrote it
 * (tess_ckpt_hash_add), and its writer's layout. The format_version selects the hash scheme:
 * 1 tess-poshash64-v1, 2 and 3 tess-poshash32x-v2. Format 3 stores counters (1-element int64
 * entries such as optim/step_count) as datasets; formats 1 and 2 stored them as attributes
 * (attribute step_count of group /optim): loading a format 1 or 2 file, a 1-element int64 entry
 * "g/name" with no dataset /g/name reads attribute name of group /g instead. Format 4 is format 3
 * with fixed-length strings only (no HDF5 global heap) and an integrity record in an HDF5 user
 * block: the file's length, step, data_cursor, seed, world_size, the byte extents of the entry
 * datasets' raw data and a digest over every other byte of the file, checked with plain reads
 * before HDF5 parses anything (io/ckpt_seal.c). Every function here reads all four formats and
 * goes through that check first; formats 1-3 have no record ("unprotected": a damaged header can
 * still reach HDF5's parser) and are read as before, with tess_ckpt_info.sealed false.
 *
 * Which ranks hold what: the non-private entries must agree on every rank of the group (name,
 * dtype, global shape, layout kind, in the same order), and each rank holds the block its layout
 * says; ranks that hold the same block (replicated entries, shards repeated over data-parallel
 * replicas) split its rows so every element is written exactly once. BLOCK_CYCLIC entries (float32)
 * are gathered to rank 0 when their grid spans the whole group; a grid on a sub-group is refused.
 * A PRIVATE entry (tess_state_add_private) is listed by exactly one rank, which writes it whole;
 * the file holds the union of every rank's entries. Reading: each rank reads the part of each
 * entry it lists, so a checkpoint written on P ranks loads on Q, and a private entry loads on
 * whichever rank lists it then (clients may move between ranks across a restart).
 *
 * Errors (status codes of core/status.h): a missing or unreadable file TESS_ERR_NOINPUT (exit 66);
 * a truncated or damaged file, a hash mismatch, a missing, extra, mistyped or misshapen dataset, a
 * foreign or too-new format TESS_ERR_DATA (exit 65), each named by file and dataset with what was
 * expected and what was found; file-system failures while writing TESS_ERR_IO; a state whose
 * non-private entries differ between ranks, or a private entry listed by two ranks, TESS_ERR_ARG
 * naming the entry and the ranks. Every collective function returns the same status on every rank
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
#include "nn/state.h"    /* tess_state */
#include "par/mesh.h"    /* tess_group */

#define TESS_CKPT_FORMAT "tessera-checkpoint"
#define TESS_CKPT_HASH_ALGORITHM "tess-poshash32x-v2"   /* written: format_version 2 and 3 */
#define TESS_CKPT_HASH_ALGORITHM_V1 "tess-poshash64-v1" /* format_version 1, read only */

enum {
    TESS_CKPT_FORMAT_VERSION = 4, /* the format this build writes; it reads 1 to 4 */
    TESS_CKPT_PATH_MAX = 4096,    /* bytes of a checkpoint path, including the NUL */
};

/* What a checkpoint holds: the state's entries plus the run's scalars. Writers fill it; load fills
 * every entry's data and step, data_cursor and seed. Entry names may not start with the
 * components "config" or "manifest" (the file's own datasets). */
typedef struct {
    tess_state *state;       /* the entries (borrowed; at least one over all ranks) */
    int64_t step;            /* optimizer steps completed */
    int64_t data_cursor;     /* position of the training data stream (e.g. samples consumed) */
    uint64_t seed;           /* seed of every Philox draw; counters derive from step (core/rng.h) */
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
    bool sealed; /* format 4: the integrity record was checked before HDF5 opened the file;
                    false: an unprotected older format (its metadata is covered by no check) */
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
 * v2, "tess-poshash32x-v2" (format_versions 2 and 3, written): the data are 32-bit words w_k with
 * word index k: a 4-byte element i is word i; an 8-byte one is words 2i (low 32 bits) and 2i+1
 * (high); a byte i is word i (zero-extended). term(k, w) = fmix32(w ^ lo32(k * 0x9E3779B1) ^
 * lo32((k >> 32) * 0x85EBCA77)) zero-extended to 64 bits, fmix32 murmur3's finaliser. It needs
 * only 32-bit multiplies, so it vectorises (about 5x v1's speed with AVX2). */
typedef enum {
    TESS_CKPT_HASH_V1 = 1, /* the scheme of format_version 1 */
    TESS_CKPT_HASH_V2 = 2, /* the scheme of format_versions 2 and 3 */
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
 * layouts, so it does not change with the rank count). The model_digest attribute is this digest
 * of the state's "params/<name>" entries (names without the prefix), so it equals the digest of
 * the registry they came from. reg may be NULL (no model: the digest of nothing). */
uint64_t tess_ckpt_model_digest(const tess_registry *reg);

/* --- writing ---------------------------------------------------------------------------------- */

/* Write st to path atomically: every rank writes its hyperslabs into "<path>.tmp" (collective
 * parallel HDF5), the file is closed, then rank 0 fsyncs it, renames it to path and fsyncs the
 * directory. The directory must exist. On failure the tmp file is removed and path is untouched.
 * Collective on g: the non-private entries agree on every rank, step, data_cursor and seed too.
 * Test hook: TESS_CKPT_TEST_KILL_AT=after_write|before_rename|after_rename makes rank 0 SIGKILL
 * itself at that point (after the data writes, before H5Fclose / before / after the rename).
 * Before any byte is written, the file must fit every rank's file size limit and rank 0's free
 * space (an upper bound of its size), and rank 0 reserves its blocks (fallocate, where the file
 * system supports it); a write that still fails midway ends as a clean, agreed TESS_ERR_IO
 * (docs/checkpoints.md, "Fault matrix"). Test hook: TESS_CKPT_TEST_NO_ROOM_CHECK=1 skips the
 * check and the reservation, so a full disk fails the write midway.
 * Test hook: TESS_CKPT_TEST_FORMAT_VERSION=1, 2 or 3 (the same on every rank) writes that
 * format_version as the builds before format 4 did: variable-length string attributes and no
 * integrity record; 1 and 2 also counters (1-element int64 entries that are not private) as
 * attributes, and 1 tess-poshash64-v1 hashes, to test reading old files. */
tess_status tess_ckpt_write(const tess_group *g, const char *path, const tess_ckpt_state *st);

/* Save the checkpoint of step st->step in directory dir (created if missing) as
 * "ckpt_<step, 8 digits>.h5" with tess_ckpt_write, then point dir/latest at it (written, fsynced
 * and renamed the same way), then delete all but the keep_last newest committed checkpoints
 * (keep_last 0: keep all). Logs "checkpoint step=N path=... bytes=... seconds=..." on rank 0.
 * The committed path goes to path_out (n bytes; may be NULL). Collective on g. */
tess_status tess_ckpt_save(const tess_group *g, const char *dir, const tess_ckpt_state *st,
                           int64_t keep_last, char *path_out, size_t n);

/* Delete stale "*.tmp" files (unfinished checkpoints, latest.tmp) in dir, warning once per file.
 * A missing dir is not an error. Rank 0 acts; collective on g. */
tess_status tess_ckpt_clean(const tess_group *g, const char *dir);

/* --- reading ---------------------------------------------------------------------------------- */

/* Open path read-only with the serial driver and check it is a checkpoint this build reads:
 * exists (else TESS_ERR_NOINPUT); for format 4, its integrity record matches every byte outside
 * the tensor data BEFORE HDF5 opens it; it is a complete HDF5 file with format TESS_CKPT_FORMAT,
 * a format_version in 1..TESS_CKPT_FORMAT_VERSION agreeing with the record, step >= 0,
 * data_cursor >= 0, world_size >= 1 (equal to the record's) and the structure tess_ckpt_verify
 * checks (manifest, every listed dataset with a hash, /config and /manifest matching their
 * hashes; else TESS_ERR_DATA naming the file and what failed). The tensor hashes are not
 * checked here. Fills *info (may be NULL) and returns the open file in *file (close with
 * H5Fclose). Not collective: for tools and for rank 0. */
tess_status tess_ckpt_open(const char *path, hid_t *file, tess_ckpt_info *info);

/* The resolved config text (dataset /config) of a checkpoint opened with tess_ckpt_open: *text
 * is malloc'ed and NUL-terminated (free it). TESS_ERR_DATA naming path if /config is missing
 * or not a fixed-length string, TESS_ERR_MEM. Not collective. */
tess_status tess_ckpt_read_config(hid_t file, const char *path, char **text);

/* Integrity check without a model: rank 0 runs the checks of tess_ckpt_open (the integrity
 * record before HDF5, root attributes, structure, /config and /manifest hashes), then every
 * stored hash of the manifest's datasets must match the data. A format 1-3 file passes without
 * a record (info->sealed false: "unprotected"). Each rank hashes a block of rows
 * of every dataset, in rounds of at most 4 Mi elements. Fills *info (may be NULL) on success.
 * Collective on g; all ranks return the same status and record. */
tess_status tess_ckpt_verify(const tess_group *g, const char *path, tess_ckpt_info *info);

/* Load path into st: first the entries are agreed as for a write (the union of every rank's
 * entries is the state), then rank 0 runs the checks of tess_ckpt_open (so a load refuses
 * whatever tess_ckpt_verify refuses) and checks the file against them (every entry present as a
 * dataset of its dtype and global shape with a hash, no other dataset: TESS_ERR_DATA naming the
 * dataset with the expected and the found type or shape), then every rank reads the part of each
 * entry it lists, and the hashes are compared. Fills every entry's data, st->step, data_cursor
 * and seed. A different world size is logged ("resharding") and is not an error; a format 1-3
 * file (no integrity record) loads with a warning that it is unprotected.
 * Threads: if MPI was initialised with MPI_THREAD_FUNNELED or higher and this is MPI's main
 * thread, a worker thread (no MPI or HDF5 calls) hashes each slab while the next is read; under
 * MPI_THREAD_SINGLE the load hashes on the calling thread. Apps call MPI_Init_thread(...,
 * MPI_THREAD_FUNNELED, ...).
 * On failure the entries hold unspecified data: do not train on them. Collective on g; all ranks
 * return the same status and record. */
tess_status tess_ckpt_load(const tess_group *g, const char *path, tess_ckpt_state *st);

/* Number of committed checkpoints ("ckpt_<step>.h5") in dir; 0 for a missing dir. Rank 0 lists
 * the directory; collective on g, every rank gets the same count or status. */
tess_status tess_ckpt_count(const tess_group *g, const char *dir, int64_t *count);

/* Start-up: delete stale tmp files in dir (tess_ckpt_clean), then by spec
 *   ""     do not resume;
 *   "auto" rank 0 checks every committed checkpoint of dir as tess_ckpt_open does (the
 *          integrity record first) and orders them by their STORED step; one that fails, or
 *          whose stored step differs from the step in its name, is skipped with a warning
 *          naming the file and the reason. Then the newest that loads cleanly wins (each
 *          failure skipped the same way). `latest` is not consulted. No checkpoint in dir:
 *          start fresh. Checkpoints present but none valid: TESS_ERR_DATA (starting over would
 *          soon prune them);
 *   PATH   load that file; any failure is returned.
 * *resumed tells whether st was loaded; the loaded path goes to path_out (n bytes; may be NULL).
 * Logs "resumed from step N (path)" on rank 0. Collective on g. */
tess_status tess_ckpt_resume(const tess_group *g, const char *dir, const char *spec,
                             tess_ckpt_state *st, bool *resumed, char *path_out, size_t n);

#endif

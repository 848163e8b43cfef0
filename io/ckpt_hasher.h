/* ckpt_hasher.h - a background thread that adds checkpoint hash terms while the caller reads the
 * next slab of a checkpoint (internal to io/ckpt_*.c).
 *
 * A load reads each rank's part of every tensor in slabs and queues "hash this slab" jobs here;
 * one worker thread runs them in order while the calling thread issues the next read, so the
 * hash costs no wall time when reads are slower than hashing (two or more cores per rank).
 *
 * The worker makes no MPI or HDF5 call: only the thread that called MPI_Init makes those, as
 * MPI_THREAD_FUNNELED permits. ckpt_hasher_start returns NULL (the caller then hashes inline)
 * when the MPI library was initialised with MPI_THREAD_SINGLE, when the caller is not MPI's main
 * thread, or when no thread can be created.
 *
 * Ownership: a job's data must stay valid and unmodified, and its *acc must not be read, until
 * ckpt_hasher_finish returns. Jobs with the same acc run one after another (one worker). */
#ifndef TESS_IO_CKPT_HASHER_H
#define TESS_IO_CKPT_HASHER_H

#include "io/ckpt_impl.h" /* ckpt_region, tess_ckpt_hash_scheme */

typedef struct ckpt_hasher ckpt_hasher;

/* The worker, or NULL (see above). Local. */
ckpt_hasher *ckpt_hasher_start(void);

/* *acc = ckpt_hash_region(h, *acc, e, r, local), on the worker if hq is not NULL (blocking while
 * its queue is full), else right away. e, r and local as ckpt_hash_region; e and local must
 * outlive the job, r is copied. Local. */
void ckpt_hasher_add(ckpt_hasher *hq, tess_ckpt_hash_scheme h, const tess_state_entry *e,
                     const ckpt_region *r, const void *local, uint64_t *acc);

/* Wait for every queued job, stop the worker and free hq (NULL: nothing to do). Local. */
void ckpt_hasher_finish(ckpt_hasher *hq);

#endif

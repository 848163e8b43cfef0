/* gradsync.h - data-parallel gradient synchronisation: each registry entry's gradient is
 * averaged over its own group (its replicas), in buckets of non-blocking all-reduces overlapped
 * with the backward pass that produces them.
 *
 * Groups. Entry e is reduced over e->group, or over the default group passed to create when
 * e->group is NULL (the data-parallel group of dense weights). The group of an entry is the set
 * of ranks that hold the same elements of it (replicas): e.g. on a dp x ep mesh, dense entries
 * over all ranks and expert entries (sharded over "ep") over the expert-data-parallel group,
 * the "dp" axis. Every rank of an entry's group must hold the same local count of it.
 *
 * Buckets. Backward produces gradients from the last parameters to the first, so the flat
 * gradient buffer (tess_registry_local_total floats, registry order) becomes final from its end
 * towards its start. Consecutive entries with the same group form a segment; each segment is cut
 * into buckets of at most `bucket` floats counted from the segment's end, so a bucket never
 * spans two groups (a registry with one group gives buckets
 * [max(0, n-(k+1)*bucket), n-k*bucket) as before). Buckets are numbered from the end of the
 * buffer; bucket k's all-reduce (SUM over its group) starts as soon as every gradient in it is
 * final and buckets 0..k-1 have started, so every group sees its buckets started in the same
 * order on all its ranks and communication of later layers runs while earlier layers are still
 * in backward. The model reports each finished range with tess_gradsync_ready(lo, hi); ranges
 * must arrive in that order and tile [0, n) once per step (hi of each = lo of the previous; the
 * first ends at n). ready() also drives progress of the reductions in flight (Open MPI advances
 * non-blocking collectives only inside MPI calls). tess_gradsync_finish() starts what is left,
 * waits for everything and multiplies each bucket by 1/(its group's size), giving every entry
 * the MEAN gradient over its group.
 *
 * Determinism: segments and buckets depend on the registry's entries (sizes, groups) and
 * `bucket` only, never on how the ranges arrive, so each reduction (and its floating-point
 * order) is the same every step for given groups. Nothing is allocated after create.
 * Collective on every group used, with the same sequence of ready/finish calls and ranges on
 * every rank (the same model on every rank guarantees it).
 */
#ifndef TESS_PAR_GRADSYNC_H
#define TESS_PAR_GRADSYNC_H

#include <stdint.h>

#include "core/status.h" /* tess_status */
#include "nn/registry.h" /* tess_registry */
#include "par/coll.h"    /* tess_group, tess_par_request */

typedef struct tess_gradsync tess_gradsync;

/* Sync for the gradients of reg (finalized; borrowed with its groups, must outlive gs): entry e
 * over e->group, or over dflt (borrowed; may be NULL only if every entry has a group), in
 * buckets of at most `bucket` floats (>= 1; at most TESS_PAR_REQUEST_CHUNKS * max_count of every
 * group used). Not collective. TESS_ERR_ARG for bad sizes, an unfinalized registry or an entry
 * without a group; TESS_ERR_MEM. */
tess_status tess_gradsync_create(tess_gradsync **gs, const tess_registry *reg,
                                 const tess_group *dflt, int64_t bucket);
/* Free gs (requests must be complete: call finish first); sets *gs = NULL. NULL-safe. */
void tess_gradsync_destroy(tess_gradsync **gs);

/* Number of buckets, and bucket k's range [*lo, *hi) of the flat buffer and its group
 * (0 <= k < count; bucket 0 ends at the end of the buffer). Not collective. */
int64_t tess_gradsync_bucket_count(const tess_gradsync *gs);
void tess_gradsync_bucket(const tess_gradsync *gs, int64_t k, int64_t *lo, int64_t *hi,
                          const tess_group **g);

/* Gradients [lo, hi) are final for this step: start every bucket that is now complete.
 * TESS_ERR_ARG if the range does not continue the step's sequence (hi must equal the previous
 * lo, lo < hi); TESS_ERR_MPI. Collective on the buckets' groups (see the header comment). */
tess_status tess_gradsync_ready(tess_gradsync *gs, int64_t lo, int64_t hi);

/* Mark everything not yet reported as final, start the remaining buckets, wait for all and scale
 * each by 1/(its group's size). Afterwards every entry holds the mean over its group and a new
 * step may begin. *exposed_seconds (may be NULL) gets the time spent waiting here:
 * communication that the backward pass did not hide. Collective on every group used. */
tess_status tess_gradsync_finish(tess_gradsync *gs, double *exposed_seconds);

/* Adapter for models that report finished ranges through a callback without a status
 * (tess_tfm_set_grad_hook): calls tess_gradsync_ready(ctx, lo, hi) and keeps the first failure,
 * which tess_gradsync_finish then returns. */
void tess_gradsync_hook(void *ctx, int64_t lo, int64_t hi);

#endif

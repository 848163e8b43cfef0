/* gradsync.h - data-parallel gradient synchronisation: bucketed, non-blocking all-reduce of a
 * flat gradient buffer, overlapped with the backward pass that produces it.
 *
 * Backward produces gradients from the last parameters to the first, so the buffer (n floats, in
 * registry order) becomes final from its end towards its start. The model reports each finished
 * range with tess_gradsync_ready(lo, hi); ranges must arrive in that order and tile [0, n) once
 * per step (hi of each = lo of the previous; the first ends at n). The buffer is cut into
 * buckets of `bucket` floats counted from the end: bucket k is [max(0, n-(k+1)*bucket), n-k*bucket).
 * A bucket's all-reduce starts as soon as every gradient in it is final, so communication of
 * later layers runs while earlier layers are still in backward. ready() also drives progress of
 * the reductions in flight (Open MPI advances non-blocking collectives only inside MPI calls).
 * tess_gradsync_finish() starts what is left, waits for everything and divides by the group
 * size, giving the MEAN gradient on every rank.
 *
 * Bucket boundaries depend on n and `bucket` only, never on how the ranges arrive, so the
 * reduction (and its floating-point order) is the same every step for a given group size.
 * Nothing is allocated after create. Collective on g: every rank makes the same sequence of
 * ready/finish calls with the same ranges (the same model on every rank guarantees it).
 */
#ifndef TESS_PAR_GRADSYNC_H
#define TESS_PAR_GRADSYNC_H

#include <stdint.h>

#include "core/status.h" /* tess_status */
#include "par/coll.h"   /* tess_group, tess_par_request */

typedef struct tess_gradsync tess_gradsync;

/* Sync for grads (n floats; borrowed, must outlive gs) over group g (borrowed) in buckets of
 * `bucket` floats (>= 1; at most TESS_PAR_REQUEST_CHUNKS * g->max_count). Not collective.
 * TESS_ERR_ARG for bad sizes, TESS_ERR_MEM. */
tess_status tess_gradsync_create(tess_gradsync **gs, const tess_group *g, float *grads, int64_t n,
                                 int64_t bucket);
/* Free gs (requests must be complete: call finish first); sets *gs = NULL. NULL-safe. */
void tess_gradsync_destroy(tess_gradsync **gs);

/* Gradients [lo, hi) are final for this step: start every bucket that is now complete.
 * TESS_ERR_ARG if the range does not continue the step's sequence (hi must equal the previous
 * lo, lo < hi); TESS_ERR_MPI. Collective on g (see the header comment). */
tess_status tess_gradsync_ready(tess_gradsync *gs, int64_t lo, int64_t hi);

/* Mark everything not yet reported as final, start the remaining buckets, wait for all and scale
 * by 1/g->size. Afterwards grads holds the mean over the group and a new step may begin.
 * *exposed_seconds (may be NULL) gets the time spent waiting here: communication that the
 * backward pass did not hide. Collective on g. */
tess_status tess_gradsync_finish(tess_gradsync *gs, double *exposed_seconds);

/* Adapter for models that report finished ranges through a callback without a status
 * (tess_tfm_set_grad_hook): calls tess_gradsync_ready(ctx, lo, hi) and keeps the first failure,
 * which tess_gradsync_finish then returns. */
void tess_gradsync_hook(void *ctx, int64_t lo, int64_t hi);

#endif

/* guard.h - the non-finite guard: skip updates whose loss or gradients hold NaN/Inf, and give up
 * after too many in a row.
 *
 * Each step, after the backward pass and gradient sync and before the optimizer:
 *   double norm;  TESS_CHECK(tess_clip_grad_norm(reg, max_norm, comm, &norm));  (0: no clip)
 *   bool skip;    TESS_CHECK(tess_guard_check(&guard, step, loss, norm, &skip));
 *   if (!skip) tess_adamw_step(opt, lr);
 * (this loop is compiled and run by tests/optim/test_converge.c).
 * The gradient norm is accumulated in double, where float gradients cannot overflow, so it is
 * finite exactly when every gradient is: the NaN scan comes free with the norm. Without a norm,
 * tess_guard_grads_finite is the plain scan.
 *
 * Policy: a step with a non-finite loss or norm is skipped (one warning line to the guard's FILE*)
 * and counted; a finite step resets the count. The max_consecutive-th non-finite step in a row
 * returns TESS_ERR_DIVERGED with a message naming the step and the count, for the app to stop on.
 * loss and grad_norm must be the same on every rank (globally reduced) so that all ranks take the
 * same decision. The guard is a plain value (tess_guard_init), not collective, and holds its
 * counters for metrics; it is not checkpointed (a resumed run starts with a clean count).
 */
#ifndef TESS_OPTIM_GUARD_H
#define TESS_OPTIM_GUARD_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "core/status.h" /* tess_status */
#include "nn/registry.h" /* tess_registry */
#include "par/mesh.h"    /* tess_group */

typedef struct {
    int max_consecutive; /* >= 1: this many non-finite steps in a row are fatal */
    int consecutive;     /* current run of non-finite steps */
    int64_t skipped;     /* steps skipped since init */
    FILE *warn;          /* skip warnings go here (rank 0: stderr); NULL = silent */
} tess_guard;

/* A guard with clean counters. TESS_ERR_ARG if max_consecutive < 1. */
tess_status tess_guard_init(tess_guard *g, int max_consecutive, FILE *warn);

/* Judge update number step from its (global) loss and gradient norm. *skip = true when the update
 * must not be applied. Returns TESS_ERR_DIVERGED (with *skip = true) on the max_consecutive-th
 * non-finite step in a row, TESS_OK otherwise. */
tess_status tess_guard_check(tess_guard *g, int64_t step, double loss, double grad_norm,
                             bool *skip);

/* *finite = no NaN/Inf in any trainable gradient of any rank of g. Collective on g unless g is
 * NULL (local scan). TESS_ERR_MPI. */
tess_status tess_guard_grads_finite(const tess_registry *reg, const tess_group *g, bool *finite);

#endif

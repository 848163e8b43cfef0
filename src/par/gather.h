/* gather.h - a whole tensor to rank 0 of a group, and back, for any tess_layout: what checkpoints
 * and tools use to see a distributed tensor as one global row-major array.
 *
 * The layout's parts are indexed over the group g: SHARDED needs nparts == g->size, BLOCK_CYCLIC
 * nprow * npcol == g->size, and every part or grid position is held by exactly one rank (any
 * rank order). The local buffer is the rank's part in its layout's storage order: row-major
 * (local shape of tess_layout_local_shape) for REPLICATED and SHARDED, column-major with
 * lld = local rows for BLOCK_CYCLIC. Layout, ndim and global shape are checked across ranks
 * first, so a mismatch is reported by every rank together (TESS_ERR_ARG).
 *
 * Cost: rank 0 receives (or sends) each other rank's part in turn, in messages of at most
 * g->max_count elements, through one staging buffer of the largest part, allocated per call.
 * Meant for checkpoints and tools, not the training step.
 */
#ifndef TESS_PAR_GATHER_H
#define TESS_PAR_GATHER_H

#include <stdint.h>

#include "core/status.h" /* tess_status */
#include "par/layout.h" /* tess_layout */
#include "par/mesh.h"   /* tess_group */

/* global (global_shape, row-major) on rank 0 of g <- every rank's local part under layout l
 * (REPLICATED: rank 0's copy). global may be NULL on other ranks. Collective on g; ndim,
 * global_shape and the layout (all but its part / grid position) the same on every rank. */
tess_status tess_par_gather_global(const tess_group *g, const tess_layout *l, int ndim,
                                    const int64_t *global_shape, const float *local,
                                    float *global_on_root);

/* Inverse: every rank's local part under layout l <- global (global_shape) on rank 0 of g
 * (REPLICATED: every rank gets the whole tensor). global may be NULL on other ranks. Collective
 * on g; same agreement as tess_par_gather_global. */
tess_status tess_par_scatter_global(const tess_group *g, const tess_layout *l, int ndim,
                                     const int64_t *global_shape, const float *global_on_root,
                                     float *local);

#endif

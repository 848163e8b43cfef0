/* clip.h - global-norm gradient clipping over the registry, as torch.nn.utils.clip_grad_norm_.
 *
 * The norm is sqrt of the sum of squares of every trainable gradient, accumulated in double.
 * If max_norm > 0 and c = max_norm / (norm + 1e-6) < 1 (torch's coefficient), every trainable
 * gradient is multiplied by c; otherwise nothing changes. A non-finite norm
 * (a NaN or Inf gradient anywhere in the group) scales nothing: the caller's tess_guard sees it.
 *
 * Distributed norm. comm is the group over which SHARDED / BLOCK_CYCLIC entries are partitioned
 * (their layouts' nparts, or nprow*npcol, must equal its size); it must NOT include data-parallel
 * replicas. The sum of squares of those entries is all-reduced over comm; REPLICATED entries are
 * assumed identical on every rank of comm (gradients already synchronised) and counted once, from
 * the local copy. So every rank of comm gets the norm of the full model. Data-parallel replicas
 * hold averaged, identical gradients and need no reduction. comm = MPI_COMM_NULL (or NULL with
 * Open MPI's pointer handles) means local: the norm of this rank's gradients only.
 */
#ifndef TESS_OPTIM_CLIP_H
#define TESS_OPTIM_CLIP_H

#include <mpi.h>

#include "core/status.h" /* tess_status */
#include "nn/registry.h" /* tess_registry */

/* Global gradient norm before clipping into *norm; clip if max_norm > 0 (see above).
 * Collective on comm unless comm is MPI_COMM_NULL/NULL. TESS_ERR_ARG if a partitioned entry's
 * layout does not match comm's size; TESS_ERR_MPI. */
tess_status tess_clip_grad_norm(tess_registry *reg, double max_norm, MPI_Comm comm, double *norm);

#endif

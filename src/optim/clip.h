/* clip.h - global-norm gradient clipping over the registry, as torch.nn.utils.clip_grad_norm_.
 *
 * The norm is sqrt of the sum of squares of every element of every trainable gradient, each
 * element counted once, accumulated in double. If max_norm > 0 and c = max_norm / (norm + 1e-6)
 * < 1 (torch's coefficient), every trainable gradient is multiplied by c; otherwise nothing
 * changes. A non-finite norm (a NaN or Inf gradient anywhere in the group) scales nothing: the
 * caller's tess_guard sees it.
 *
 * Distributed norm. g is the group of every rank that holds a part of the model (e.g. the whole
 * mesh, tess_mesh_all). Call it after the gradient sync, when the replicas of an entry (the
 * ranks of its reduction group) hold identical gradients. A REPLICATED entry is then the same on
 * every rank and is counted once, from the local copy. An entry partitioned into p parts
 * (SHARDED: nparts, BLOCK_CYCLIC: nprow*npcol) must have p dividing g->size, each part held by
 * g->size / p ranks of g (e.g. experts sharded over "ep" and replicated over "dp"); its local
 * sum of squares is weighted by p / g->size and summed over g, so the shards held by different
 * ranks add up and replicas are not double counted. One all-reduce over g; every rank of g gets
 * the norm of the full model. g = NULL means local: the norm of this rank's gradients only (right
 * when every entry is replicated and synchronised, as in plain data parallelism).
 */
#ifndef TESS_OPTIM_CLIP_H
#define TESS_OPTIM_CLIP_H

#include "core/status.h" /* tess_status */
#include "nn/registry.h" /* tess_registry */
#include "par/mesh.h"    /* tess_group */

/* Global gradient norm before clipping into *norm; clip if max_norm > 0 (see above).
 * Collective on g unless g is NULL. TESS_ERR_ARG (on every rank) if a partitioned entry's part
 * count does not divide g's size; TESS_ERR_MPI. */
tess_status tess_clip_grad_norm(tess_registry *reg, double max_norm, const tess_group *g,
                                double *norm);

#endif

/* layout.h - how a global tensor is split over the ranks of one group: pure arithmetic, no MPI.
 *
 * A registry entry carries a tess_layout; checkpoints, gathers and optimizers ask it which part
 * of the global tensor this rank holds. Kinds:
 *   REPLICATED    every rank holds the whole tensor.
 *   SHARDED       global dimension `dim` is split into `nparts` contiguous ceil-div blocks
 *                 (tess_par_block_range); trailing ranks may hold none.
 *   BLOCK_CYCLIC  a 2-D matrix (rows, cols) in ScaLAPACK's block-cyclic form on an nprow x npcol
 *                 grid with mb x nb blocks, source process (0,0); the local part is column-major
 *                 (lld = local rows), as ScaLAPACK stores it.
 */
#ifndef TESS_PAR_LAYOUT_H
#define TESS_PAR_LAYOUT_H

#include <stdint.h>

#include "core/status.h" /* tess_status */

enum { TESS_MAX_DIMS = 4 };

typedef enum {
    TESS_LAYOUT_REPLICATED = 0,
    TESS_LAYOUT_SHARDED,
    TESS_LAYOUT_BLOCK_CYCLIC,
} tess_layout_kind;

typedef struct {
    tess_layout_kind kind;
    int dim;          /* SHARDED: the split global dimension */
    int nparts, part; /* SHARDED: group size and this rank's index in the group */
    int nprow, npcol; /* BLOCK_CYCLIC: process grid */
    int prow, pcol;   /* BLOCK_CYCLIC: this rank's grid coordinates */
    int64_t mb, nb;   /* BLOCK_CYCLIC: block rows, block cols */
} tess_layout;

/* Convenience constructors. */
tess_layout tess_layout_replicated(void);
tess_layout tess_layout_sharded(int dim, int nparts, int part);
tess_layout tess_layout_block_cyclic(int nprow, int npcol, int prow, int pcol, int64_t mb,
                                     int64_t nb);

/* Rows [lo, hi) of n owned by rank r of p: blocks of ceil(n/p); trailing ranks may own none. */
void tess_par_block_range(int64_t n, int p, int r, int64_t *lo, int64_t *hi);

/* Number of rows/cols of a length-n block-cyclic dimension (block nb, nprocs p) owned by process
 * coordinate iproc, source process 0 (ScaLAPACK's NUMROC). */
int64_t tess_par_numroc(int64_t n, int64_t nb, int iproc, int nprocs);

/* Local shape of a tensor of `ndim` dims and global shape `global` under layout l.
 * REPLICATED/SHARDED also give the global offset of the local block (offset may be NULL);
 * BLOCK_CYCLIC (ndim must be 2) gives the local (rows, cols) and offset zeros (no single block). */
void tess_layout_local_shape(const tess_layout *l, int ndim, const int64_t *global, int64_t *local,
                             int64_t *offset);

/* Elements held locally: product of the local shape. */
int64_t tess_layout_local_count(const tess_layout *l, int ndim, const int64_t *global);

/* TESS_ERR_ARG, each message starting with `what` (e.g. "'layers.0.w'"), unless ndim is in
 * 1..TESS_MAX_DIMS, every dimension of shape is > 0 and l is a valid layout for that shape
 * (the split dimension and part in range; block-cyclic: 2 dims, a grid and blocks >= 1). */
tess_status tess_layout_check(const char *what, int ndim, const int64_t *shape,
                              const tess_layout *l);

/* Name of a layout kind: "replicated", "sharded" or "block_cyclic" ("unknown" otherwise). */
const char *tess_layout_kind_name(tess_layout_kind k);

#endif

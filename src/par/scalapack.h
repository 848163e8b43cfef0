/* scalapack.h - the ScaLAPACK bridge: a BLACS process grid on any group, block-cyclic
 * distributed matrices, and checked wrappers of p?gemm, p?posv, p?syevd and p?gesvd.
 *
 * Storage. A tess_scal_matrix is a global m x n matrix split into mb x nb blocks dealt round-robin
 * over an nprow x npcol grid (ScaLAPACK's 2-D block-cyclic layout, source process (0,0), i.e.
 * TESS_LAYOUT_BLOCK_CYCLIC of par/layout.h). Each grid rank holds its blocks column-major:
 * local element (li, lj) is data[li + lj*lld], lld >= max(1, mloc). Global matrices handed to
 * distribute/collect live on rank 0 of the grid's group, row-major or column-major as the
 * caller says (TESS_SCAL_ROW_MAJOR matches Tessera's tensors).
 *
 * Grid. tess_scal_grid_create makes a private group over a duplicate of the caller's group's
 * communicator (so ScaLAPACK and our own messages never meet the caller's) and places group
 * ranks 0 .. nprow*npcol-1 on the grid in row-major order: rank r is at (r / npcol, r % npcol).
 * Ranks beyond the grid sit out: they hold no data, but still call every function below and get
 * the same status as the grid ranks.
 *
 * Collectiveness. Every function except tess_scal_grid_shape and tess_scal_local_to_global is
 * collective on the group the grid was created on: all its ranks call it, in the same order,
 * with the same global arguments. Argument checks run before any ScaLAPACK call (whose own
 * error handler prints from every rank) and are agreed over the group (tess_par_agree), so a bad
 * argument on one rank makes all ranks return TESS_ERR_ARG, naming that rank's message: nobody
 * is left waiting.
 *
 * Element types: TESS_SCAL_F64 (pd*) and TESS_SCAL_F32 (ps*). Scalars (alpha, beta) and
 * eigen/singular values are passed as double for both; for F32 they are computed in float.
 * Limits: ScaLAPACK indexes with 32-bit int, so m, n, mb, nb, local sizes and workspaces must
 * fit in int (checked, TESS_ERR_ARG otherwise).
 */
#ifndef TESS_PAR_SCALAPACK_H
#define TESS_PAR_SCALAPACK_H

#include <stdbool.h>
#include <stdint.h>

#include "core/status.h" /* tess_status */
#include "par/mesh.h"    /* tess_group */

typedef enum {
    TESS_SCAL_F64 = 0, /* double, pd* routines */
    TESS_SCAL_F32,     /* float, ps* routines */
} tess_scal_dtype;

typedef enum {
    TESS_SCAL_ROW_MAJOR = 0, /* global element (i, j) at g[i*n + j] */
    TESS_SCAL_COL_MAJOR,     /* global element (i, j) at g[i + j*m] */
} tess_scal_order;

/* A BLACS grid on a group. Read-only for callers. */
typedef struct {
    tess_group *group; /* owned: private duplicate of the caller's group ("scal") */
    int rank, size;    /* this rank and the size of group */
    int nprow, npcol; /* grid shape, nprow*npcol <= size */
    int myrow, mycol; /* this rank's grid coordinates, -1 if it sits out */
    bool in_grid;     /* rank < nprow*npcol */
    int ctxt;         /* BLACS context, -1 if this rank sits out */
} tess_scal_grid;

/* A block-cyclic distributed matrix on a grid. Read-only for callers except the local values. */
typedef struct {
    const tess_scal_grid *grid; /* borrowed: destroy the matrix before its grid */
    tess_scal_dtype dtype;
    int64_t m, n;       /* global shape */
    int64_t mb, nb;     /* block shape */
    int64_t mloc, nloc; /* local rows and columns on this rank (0 outside the grid) */
    int64_t lld;        /* leading dimension of data, >= max(1, mloc) (1 outside the grid) */
    int desc[9];        /* ScaLAPACK descriptor; CTXT is -1 outside the grid */
    void *data;         /* (lld, nloc) column-major local blocks; NULL outside the grid */
    bool owns_data;     /* data was allocated by tess_scal_matrix_create */
} tess_scal_matrix;

/* The most square grid using all p ranks: the largest nprow <= sqrt(p) dividing p, and
 * npcol = p / nprow (p = 6 gives 2 x 3, p = 7 gives 1 x 7). Not collective, no MPI. */
void tess_scal_grid_shape(int p, int *nprow, int *npcol);

/* Create a BLACS grid on the ranks of group `on` (borrowed; only used during the call).
 * nprow = npcol = 0 picks tess_scal_grid_shape(size); one of them 0 takes size / (the other);
 * both > 0 are used as given and need nprow*npcol <= size (ranks beyond sit out). *out is owned
 * by the caller (tess_scal_grid_destroy). Collective on `on`. Errors: TESS_ERR_ARG (bad shape),
 * TESS_ERR_MPI, TESS_ERR_MEM. */
tess_status tess_scal_grid_create(const tess_group *on, int nprow, int npcol,
                                  tess_scal_grid **out);

/* Release the BLACS context and the grid's group; *g = NULL. NULL or *g == NULL is a no-op.
 * Collective on the grid's group. Destroy its matrices first. */
void tess_scal_grid_destroy(tess_scal_grid **g);

/* Create an m x n matrix of type t in mb x nb blocks on grid g, local storage allocated and
 * zeroed (lld = max(1, mloc)). m, n >= 0; mb, nb >= 1. *out is owned by the caller.
 * Collective on g's group. Errors: TESS_ERR_ARG naming the argument, TESS_ERR_MEM. */
tess_status tess_scal_matrix_create(const tess_scal_grid *g, tess_scal_dtype t, int64_t m,
                                    int64_t n, int64_t mb, int64_t nb, tess_scal_matrix **out);

/* As create, but over existing local storage (borrowed, not freed by destroy): local is
 * (lld, nloc) column-major with lld >= max(1, mloc) on this rank, e.g. a registry tensor with a
 * TESS_LAYOUT_BLOCK_CYCLIC layout. Outside the grid local may be NULL and lld is ignored.
 * Collective on g's group. Errors: TESS_ERR_ARG naming the argument, TESS_ERR_MEM. */
tess_status tess_scal_matrix_wrap(const tess_scal_grid *g, tess_scal_dtype t, int64_t m, int64_t n,
                                  int64_t mb, int64_t nb, void *local, int64_t lld,
                                  tess_scal_matrix **out);

/* Free the matrix (and its storage if it owns it); *A = NULL. NULL is a no-op. Not collective. */
void tess_scal_matrix_destroy(tess_scal_matrix **A);

/* Global row i and column j of local element (li, lj) on this rank, li < mloc, lj < nloc.
 * Not collective; only meaningful on grid ranks. */
void tess_scal_local_to_global(const tess_scal_matrix *A, int64_t li, int64_t lj, int64_t *i,
                               int64_t *j);

/* Copy the global m x n matrix g (elements of A's type, contiguous in `order`), read on rank 0
 * only (ignored, may be NULL, elsewhere), into A's block-cyclic local storage on every grid rank.
 * Collective on A's grid group. Errors: TESS_ERR_ARG, TESS_ERR_MEM, TESS_ERR_MPI. */
tess_status tess_scal_matrix_distribute(tess_scal_matrix *A, const void *g, tess_scal_order order);

/* The reverse: assemble A into the global m x n matrix g (A's type, `order`) on rank 0 only
 * (ignored, may be NULL, elsewhere). A is unchanged.
 * Collective on A's grid group. Errors: TESS_ERR_ARG, TESS_ERR_MEM, TESS_ERR_MPI. */
tess_status tess_scal_matrix_collect(const tess_scal_matrix *A, void *g, tess_scal_order order);

/* C = alpha * op(A) @ op(B) + beta * C (p?gemm). C (M,N); op(A) (M,K): A is (M,K), or (K,M) when
 * trans_a; op(B) (K,N): B is (K,N), or (N,K) when trans_b. All on one grid, one type; block
 * shapes may differ. Collective on the grid's group. Errors: TESS_ERR_ARG. */
tess_status tess_scal_gemm(tess_scal_matrix *C, const tess_scal_matrix *A,
                           const tess_scal_matrix *B, bool trans_a, bool trans_b, double alpha,
                           double beta);

/* Solve A X = B for symmetric positive definite A (p?posv, lower triangle of A used). A (N,N)
 * with mb == nb; B (N,NRHS) with B's mb equal to A's. On return B holds X and A its Cholesky
 * factor L. Collective on the grid's group. Errors: TESS_ERR_ARG; TESS_ERR_DATA "matrix
 * is not positive definite (leading minor k)" on every rank when the factorisation breaks down
 * (B then unchanged). */
tess_status tess_scal_posv(tess_scal_matrix *B, tess_scal_matrix *A);

/* Eigen-decomposition of symmetric A (p?syevd, divide and conquer, lower triangle used):
 * A = Z diag(w) Z^T. A (N,N) with mb == nb, destroyed; Z (N,N) with A's blocks receives the
 * orthonormal eigenvectors as columns; w (N), ascending, is written on every rank of the
 * grid's group. Collective on the grid's group.
 * Errors: TESS_ERR_ARG, TESS_ERR_MEM, TESS_ERR_DATA (no convergence). */
tess_status tess_scal_syevd(double *w, tess_scal_matrix *Z, tess_scal_matrix *A);

/* Thin SVD of A (p?gesvd): A = U diag(s) VT, K = min(M,N). A (M,N) with mb == nb, destroyed;
 * s (K), descending, written on every rank of the grid's group; U (M,K) and VT (K,N) with A's
 * blocks, or NULL to skip them. Collective on the grid's group.
 * Errors: TESS_ERR_ARG, TESS_ERR_MEM, TESS_ERR_DATA (no convergence). */
tess_status tess_scal_gesvd(double *s, tess_scal_matrix *U, tess_scal_matrix *VT,
                            tess_scal_matrix *A);

#endif

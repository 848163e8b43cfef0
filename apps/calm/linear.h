/* linear.h - linear analyses of the calm model's embeddings (docs/calm.md, "Linear analyses"):
 *
 *   identity decoding: which animal an embedding row belongs to, by one-vs-rest ridge
 *     classification (one-hot targets, intercept by centring, the class with the largest score
 *     predicted) under cross-validation over given folds. The penalty of each outer fold is
 *     chosen by an inner cross-validation over the other folds, never on the outer fold's rows;
 *     penalties are relative, lambda tr(Xc^T Xc) / d, from {1e-4, ..., 10}. Chance: the accuracy
 *     of a guess drawn with the class frequencies, sum_c p_c^2 (1 / classes when balanced).
 *   PCA: the explained-variance ratios of the centred rows of a matrix, from its singular values
 *     (p?gesvd through the ScaLAPACK bridge, par/scalapack.h).
 */
#ifndef CALM_LINEAR_H
#define CALM_LINEAR_H

#include <stdint.h>

#include "core/status.h" /* tess_status */
#include "par/mesh.h"    /* tess_group */

typedef struct {
    double accuracy;   /* correct predictions of the held-out folds / n */
    double chance;     /* sum_c p_c^2 over the n rows */
    double lambda_min, lambda_max; /* the relative penalties the inner loops chose */
} calm_lin_result;

/* X (n, d) row-major, label (n) in [0, classes), fold (n) in [0, folds): every row's label
 * predicted by a decoder fitted on the rows of the other folds. Not collective.
 * TESS_ERR_ARG for fewer than 2 classes or 3 folds (the inner loop needs 2), or a label / fold
 * out of range; TESS_ERR_MEM; TESS_ERR_INTERNAL if a solve fails. */
tess_status calm_lin_identity(const float *X, int64_t n, int64_t d, const int64_t *label,
                              int64_t classes, const int64_t *fold, int64_t folds,
                              calm_lin_result *r);

/* ratio (min(n, d)), descending: the explained-variance ratios s_k^2 / sum s^2 of the centred
 * rows of X (n, d) row-major, s its singular values from p?gesvd on a grid over g's ranks (X read
 * on rank 0 of g; ratio written on every rank). Collective on g. Errors of par/scalapack.h,
 * TESS_ERR_MEM, TESS_ERR_DATA for a matrix whose centred rows are all zero. */
tess_status calm_lin_pca(const tess_group *g, const float *X, int64_t n, int64_t d, double *ratio);

#endif

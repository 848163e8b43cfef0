/* var.h - the calm app's population ridge VAR baseline in NLinear form (docs/calm.md): from
 * the last `lags` frames of all N neurons of one session up to frame t, the next H frames of
 * all of them,
 *
 *   xhat[t + h, n] = x[t, n] + sum_{m, i} W[h, n; m, i] f[m, i]            (h = 1..H)
 *
 * with features f[m, i] = x[t - lags + 1 + i, m] - x[t, m] for i < lags - 1 (the last context
 * frame subtracted, as in ar.h) and f[m, lags - 1] = x[t, m] (the level, so that a VAR(1) is in
 * the class). W = 0 is copy-last, so ridge shrinkage falls back on copy-last. One W per session
 * (neurons are not matched across sessions), fitted on the session's training spans (split.h)
 * by ridge regression - F (n, N lags) the features of the n training samples, Y (n, H N) their
 * targets x[t + h, n] - x[t, n] - in the smaller of its two forms:
 *
 *   dual   (n < N lags):  alpha = (F F^T + lambda I)^-1 Y,  prediction (f F^T) alpha;
 *   primal (otherwise):   W^T = (F^T F + lambda I)^-1 F^T Y, prediction f W^T;
 *
 * through the ScaLAPACK bridge (par/scalapack.h: p?gemm for the Gram matrices, p?posv for the
 * solve); cost O(n N lags min(n, N lags)).
 * lambda is chosen from a grid on the validation slices (the last `val_fraction` of each
 * training span: fitted on the samples before them, scored on the targets inside them), then
 * refitted on every training sample. Inputs and targets of a sample lie in one training span:
 * test frames are never read. */
#ifndef CALM_VAR_H
#define CALM_VAR_H

#include <stdbool.h>
#include <stdint.h>

#include "core/status.h"   /* tess_status */
#include "par/mesh.h"      /* tess_group */
#include "par/scalapack.h" /* tess_scal_* */
#include "split.h"         /* calm_session */

typedef struct {
    int64_t lags, H, N, n; /* lags, frames ahead, neurons, training samples */
    bool dual;             /* n < N lags: the dual form */
    double lambda;         /* the chosen penalty */
    tess_scal_grid *grid;  /* owned: on all ranks of the fit's group */
    tess_scal_matrix *F;   /* dual: (n, N lags) the training features; primal: NULL */
    tess_scal_matrix *X;   /* dual: alpha (n, H N); primal: W^T (N lags, H N); distributed */
} calm_var;

typedef enum { CALM_VAR_AUTO = 0, CALM_VAR_PRIMAL, CALM_VAR_DUAL } calm_var_form;

/* Fit session s's VAR (lags >= 2, H >= 1, val_fraction in (0, 1); the spans checked by
 * calm_ar_check) in `form` (AUTO: the smaller). Collective on g: every rank passes the same
 * session. *v owned by the caller (calm_var_free). Errors: TESS_ERR_DATA naming the session
 * when it has no training sample, TESS_ERR_MEM, the bridge's errors. */
tess_status calm_var_fit(calm_var *v, const calm_session *s, int64_t lags, int64_t H,
                         double val_fraction, calm_var_form form, const tess_group *g);

/* The forecasts after frames tl[0..q) (each >= lags - 1, frames up to tl read): pred (q, H, N)
 * row-major, written on rank 0 of g only (may be NULL elsewhere). Collective on the fit's g. */
tess_status calm_var_predict(const calm_var *v, const calm_session *s, const int64_t *tl,
                             int64_t q, double *pred);

/* Release the distributed matrices and the grid; collective on the fit's g. */
void calm_var_free(calm_var *v);

#endif

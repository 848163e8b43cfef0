/* armlp.h - the calm app's small MLP forecasting baseline in NLinear form (docs/calm.md): one
 * MLP shared by every neuron of every session that is not held out (split.h), like the pooled
 * AR of ar.h but nonlinear,
 *
 *   xhat[t + h] = x[t] + (W2 gelu(W1 f + b1) + b2)_h        (h = 1..H),
 *   f_i = x[t - lags + 1 + i] - x[t]                         (i = 0..lags-1),
 *
 * W1 (hidden, lags) ~ N(0, 1/lags), W2 (H, hidden) and the biases zero, so it starts at
 * copy-last. Trained with AdamW (beta 0.9/0.999, no weight decay) on mean squared error over
 * the samples of the training spans before their validation slices (as ar.h); every
 * `eval_every` steps the MSE on the validation slices is measured and the parameters with the
 * lowest one are kept (early stopping). A step's global batch of `batch` samples is drawn by
 * Philox keyed by (seed, step, global sample index) and split over the ranks in blocks,
 * gradients summed over the ranks: the fit does not depend on the rank count beyond float
 * summation order. Test frames are never read. Built from nn/linear.h and nn/activation.h. */
#ifndef CALM_ARMLP_H
#define CALM_ARMLP_H

#include <stdint.h>

#include "core/status.h"  /* tess_status */
#include "nn/registry.h"  /* tess_registry */
#include "par/mesh.h"     /* tess_group */
#include "split.h"        /* calm_session */

typedef struct {
    int64_t lags, H, hidden;           /* input lags, frames ahead, hidden width */
    int64_t steps, batch, eval_every;  /* AdamW steps, global samples per step, validation period */
    double lr;
    uint64_t seed;
} calm_armlp_config;

typedef struct {
    calm_armlp_config c;
    int64_t best_step;   /* steps taken when the kept parameters were (0: the initial ones) */
    double val_mse;      /* their validation MSE per target frame */
    tess_registry *reg;  /* w1 (hidden, lags), b1 (hidden), w2 (H, hidden), b2 (H) */
    float *in, *pre, *act, *out; /* one row's buffers for calm_armlp_predict */
} calm_armlp;

/* Fit on the training spans of sess (nsess) (lags >= 2, H >= 1, hidden >= 1, steps >= 1,
 * batch >= 1, eval_every >= 1; spans checked by calm_ar_check). Collective on g (every rank
 * passes the same sessions and config). *m owned by the caller (calm_armlp_free).
 * Errors: TESS_ERR_DATA when there is no training sample, TESS_ERR_MEM, TESS_ERR_MPI. */
tess_status calm_armlp_fit(calm_armlp *m, const calm_session *sess, int64_t nsess,
                           const calm_armlp_config *c, double val_fraction, const tess_group *g);

/* The H-frame forecast after frame t of neuron n of session s (t >= lags - 1): out (H). Not
 * collective; uses m's row buffers. */
void calm_armlp_predict(calm_armlp *m, const calm_session *s, int64_t n, int64_t t, double *out);

void calm_armlp_free(calm_armlp *m);

#endif

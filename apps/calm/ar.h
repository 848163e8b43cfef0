/* ar.h - the calm app's autoregressive forecasting baselines in NLinear form (docs/calm.md):
 * from the last `lags` frames f up to frame t of one neuron, the next H frames
 *
 *   xhat[t + h] = x[t] + sum_i W[h, i] (f[i] - x[t])          (h = 1..H)
 *
 * (the last context frame subtracted from inputs and targets, so that ridge shrinkage falls back
 * on copy-last, not on the training mean), W by ridge regression on the training frames:
 *   per-neuron AR - one W per neuron (unit), on its session's training spans;
 *   pooled AR     - one W shared by every neuron of every session that is not held out
 *                   (split.h), on their training spans.
 * The ridge penalty of each is chosen on a validation slice - the last `val_fraction` of each
 * training span: W fitted on the frames before it for every lambda of a grid, scored on the
 * targets inside it; the best lambda is refitted on all training frames. Inputs and targets of
 * a sample lie in one training span: test frames are never read. Not collective (every rank
 * fits the same, deterministically). */
#ifndef CALM_AR_H
#define CALM_AR_H

#include <stdint.h>

#include "core/status.h" /* tess_status */
#include "split.h"       /* calm_session */

typedef struct {
    int64_t lags, H;
    double lambda_neuron, lambda_pooled; /* the chosen penalties */
    double *w_neuron;                    /* (units, H, lags) */
    double *w_pooled;                    /* (H, lags) */
} calm_ar;

/* TESS_ERR_DATA naming the first session with a training span too short for the fit (lags +
 * H frames before its validation slice, 2 H in it). Pure. */
tess_status calm_ar_check(const calm_session *sess, int64_t nsess, int64_t lags, int64_t H,
                          double val_fraction);

/* Fit both baselines on the training spans of sessions (nsess, their units numbered by unit0). lags >= 2, H >= 1, val_fraction in (0, 1); calm_ar_check first. */
tess_status calm_ar_fit(calm_ar *ar, const calm_session *sess, int64_t nsess, int64_t units,
                        int64_t lags, int64_t H, double val_fraction);
void calm_ar_free(calm_ar *ar);

/* The H-frame forecast after frame t of neuron n of session s (t >= lags - 1) with the weights
 * w (w_neuron + unit * H * lags, or w_pooled): out (H). */
void calm_ar_predict(const calm_ar *ar, const double *w, const calm_session *s, int64_t n,
                     int64_t t, double *out);

#endif

/* loss.h - scalar losses: softmax cross-entropy over a vocabulary (with ignored rows) and the
 * mean squared error.
 *
 * Layer convention (docs/nn.md): forward returns the loss and fills caches; backward takes the
 * upstream gradient dloss of that scalar and ADDS into the input gradient. Not collective; no
 * allocation: a data-parallel mean is the caller's job (see the counts below).
 * N = rows (B*T flattened), V = vocabulary size. */
#ifndef TESS_NN_LOSS_H
#define TESS_NN_LOSS_H

#include <stdint.h>

/* Mean over rows with targets[n] >= 0 of -log softmax(logits[n,:])[targets[n]]; rows with
 * target -1 are ignored (0 if every row is). probs (N,V) cache = softmax of every row (ignored
 * rows included); logits (N,V); targets (N) each -1 or in [0,V) (TESS_ASSERT).
 * The log-sum-exp is formed in double from the stable softmax, so the loss is accurate even
 * where probs[target] underflows. */
float tess_nn_crossentropy_forward(float *probs, const float *logits, const int32_t *targets,
                                   int64_t N, int64_t V);

/* dlogits (N,V) += dloss / count * (probs - onehot(target)) on rows with a target, where count
 * is the number of such rows; ignored rows get nothing. probs (N,V) from forward; targets (N). */
void tess_nn_crossentropy_backward(float *dlogits, const float *probs, const int32_t *targets,
                                   int64_t N, int64_t V, float dloss);

/* Mean of (pred - target)^2 over n elements (0 for n = 0), accumulated in double. pred, target (n). */
float tess_nn_mse_forward(const float *pred, const float *target, int64_t n);

/* dpred (n) += dloss * 2 (pred - target) / n. */
void tess_nn_mse_backward(float *dpred, const float *pred, const float *target, int64_t n,
                          float dloss);

#endif

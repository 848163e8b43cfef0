/* pool.h - attention pooling over a set: one learned query scores every member, a softmax over
 * the members (padded members masked out) weights their sum. The behaviour-decoding head of
 * docs/calm.md pools the neurons of each patch this way (POYO+-style readout).
 *
 *   s[g, n] = h[g, n] . q / sqrt(d)   (masked members: weight 0)
 *   a[g, :] = softmax over the real members of s[g, :]
 *   out[g]  = sum_n a[g, n] h[g, n]
 *
 * Layer convention (docs/nn.md): backward ADDS into every gradient. Not collective; no
 * allocation. G groups, N members per group, d channels. */
#ifndef TESS_NN_POOL_H
#define TESS_NN_POOL_H

#include <stdint.h>

/* out (G, d); a (G, N) the weights (cache; 0 at masked members); h (G, N, d); q (d);
 * mask (G, N), nonzero = real member, or NULL (all real). A group without a real member
 * pools to 0. */
void tess_nn_attnpool_forward(float *out, float *a, const float *h, const float *q,
                              const uint8_t *mask, int64_t G, int64_t N, int64_t d);
/* dh (G, N, d) += ..., dq (d) += ...; dout (G, d). dh or dq may be NULL. */
void tess_nn_attnpool_backward(float *dh, float *dq, const float *dout, const float *h,
                               const float *q, const float *a, int64_t G, int64_t N, int64_t d);
/* The same, accumulating in double (the oracle). */
void tess_nn_attnpool_forward_ref(float *out, float *a, const float *h, const float *q,
                                  const uint8_t *mask, int64_t G, int64_t N, int64_t d);
void tess_nn_attnpool_backward_ref(float *dh, float *dq, const float *dout, const float *h,
                                   const float *q, const float *a, int64_t G, int64_t N,
                                   int64_t d);

#endif

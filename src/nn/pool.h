/* pool.h - pooling over a set with a padding mask: attention pooling (one learned query scores
 * every member, a softmax over the members weights their sum) and mean pooling (the plain mean
 * over the real members). The behaviour-decoding head of docs/calm.md pools the neurons of each
 * patch with either (decode.readout).
 *
 * Attention pooling:
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

/* Mean pooling: out[g] = sum over the real members n of x[g, n] / (their count); a group without
 * a real member pools to 0. Mean pooling of per-member features computed before the pool (a
 * per-member MLP, "deep sets") can express signed sums over members that a convex combination
 * of the raw members cannot. out (G, C); x (G, N, C); mask (G, N) as above, or NULL. */
void tess_nn_meanpool_forward(float *out, const float *x, const uint8_t *mask, int64_t G,
                              int64_t N, int64_t C);
/* dx (G, N, C) += dout[g] / count at the real members (nothing at masked ones); dout (G, C). */
void tess_nn_meanpool_backward(float *dx, const float *dout, const uint8_t *mask, int64_t G,
                               int64_t N, int64_t C);
/* The same, accumulating in double (the oracle). */
void tess_nn_meanpool_forward_ref(float *out, const float *x, const uint8_t *mask, int64_t G,
                                  int64_t N, int64_t C);
void tess_nn_meanpool_backward_ref(float *dx, const float *dout, const uint8_t *mask, int64_t G,
                                   int64_t N, int64_t C);

#endif

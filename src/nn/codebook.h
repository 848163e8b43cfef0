/* codebook.h - a cosine codebook for vector quantisation (the calcium tokenizer of
 * docs/calm.md; TOTEM / VQ-VAE style), and the L2 normalisation it needs:
 *
 *   l2norm      y = x / max(||x||, eps) per row (encoder outputs, codebook rows)
 *   quantiser   logits = z E^T / tau_cos for unit rows z (N, D) and E (K, D);
 *               Gumbel mode: y = softmax((logits + G) / tau_g), ids = argmax(logits + G),
 *                 SOFT     q = y E                        (gradient: exact)
 *                 HARD_ST  q = E[ids]                     (gradient: the SOFT one, straight-through,
 *                                                          q = E[ids] + yE - stopgrad(yE))
 *               G (N, K) is the caller's Gumbel noise -log(-log U), or NULL (no noise).
 *   entropy     L_H = log K - H(pbar), pbar = mean over rows of softmax(logits): code usage
 *   orth        L_orth = ||E E^T - I_K||_F^2 / K^2 (its minimum is the Welch bound when K > D)
 *   vq          VQ mode: ids = argmax logits, q = E[ids], gradient dq passes to z unchanged
 *               (q = z + stopgrad(E[ids] - z)); commitment L_c = mean_n ||z_n - E[ids_n]||^2
 *               with E held fixed; the codebook follows an EMA of the assigned encoder outputs
 *               (tess_nn_codebook_ema_update), not gradients.
 *
 * Layer convention (docs/nn.md): backward ADDS into every gradient; naive _ref beside the fast
 * forward/backward where they differ (GEMMs). Not collective; no allocation.
 * N rows, K codes, D code dimension. */
#ifndef TESS_NN_CODEBOOK_H
#define TESS_NN_CODEBOOK_H

#include <stdint.h>

/* ---- L2 normalisation of rows ---- */

/* out (N, D) = in / max(||in_n||, eps); rnorm (N) = 1 / max(||in_n||, eps) (cache). */
void tess_nn_l2norm_forward(float *out, float *rnorm, const float *in, int64_t N, int64_t D,
                            float eps);
/* din (N, D) += (dout - out (out . dout)) rnorm (rows with ||in|| < eps: din += dout rnorm). */
void tess_nn_l2norm_backward(float *din, const float *dout, const float *out, const float *rnorm,
                             const float *in, int64_t N, int64_t D, float eps);

/* ---- the Gumbel-softmax quantiser ---- */

typedef enum { TESS_NN_CODEBOOK_SOFT = 0, TESS_NN_CODEBOOK_HARD_ST } tess_nn_codebook_mode;

typedef struct {
    int64_t N, K, D;
    float tau_cos; /* cosine temperature (0.1 in the tokenizer) */
    float tau_g;   /* Gumbel-softmax temperature */
    tess_nn_codebook_mode mode;
} tess_nn_codebook_dims;

/* q (N, D), logits (N, K) = z E^T / tau_cos, y (N, K) softmax weights, ids (N) argmax of
 * logits + G; z (N, D), E (K, D), G (N, K) or NULL. logits and y are the backward's cache. */
void tess_nn_codebook_forward(float *q, float *logits, float *y, int32_t *ids, const float *z,
                              const float *E, const float *G, const tess_nn_codebook_dims *d);
/* dz (N, D) += ..., dE (K, D) += ... from dq (N, D) through the soft path (both modes), plus
 * dlogits (N, K) or NULL, a gradient on the logits from another loss (the entropy term).
 * work (N, K) scratch. dz or dE may be NULL. */
void tess_nn_codebook_backward(float *dz, float *dE, float *work, const float *dq,
                               const float *dlogits, const float *z, const float *E,
                               const float *y, const tess_nn_codebook_dims *d);
void tess_nn_codebook_forward_ref(float *q, float *logits, float *y, int32_t *ids, const float *z,
                                  const float *E, const float *G, const tess_nn_codebook_dims *d);
void tess_nn_codebook_backward_ref(float *dz, float *dE, const float *dq, const float *dlogits,
                                   const float *z, const float *E, const float *y,
                                   const tess_nn_codebook_dims *d);

/* ---- regularisers ---- */

/* Returns L_H = log K - H(pbar); p (N, K) softmax of logits and pbar (K) are written (cache). */
double tess_nn_codebook_entropy_forward(float *p, float *pbar, const float *logits, int64_t N,
                                        int64_t K);
/* dlogits (N, K) += dloss * dL_H/dlogits; work (K) scratch (log pbar_k + 1, once per code). */
void tess_nn_codebook_entropy_backward(float *dlogits, float *work, float dloss, const float *p,
                                       const float *pbar, int64_t N, int64_t K);

/* Returns L_orth = ||E E^T - I||_F^2 / K^2; gram (K, K) = E E^T written (cache). */
double tess_nn_codebook_orth_forward(float *gram, const float *E, int64_t K, int64_t D);
/* dE (K, D) += dloss * 4 / K^2 (E E^T - I) E; work (K, K) scratch. */
void tess_nn_codebook_orth_backward(float *dE, float *work, float dloss, const float *gram,
                                    const float *E, int64_t K, int64_t D);
double tess_nn_codebook_orth_forward_ref(const float *E, int64_t K, int64_t D);
void tess_nn_codebook_orth_backward_ref(float *dE, float dloss, const float *E, int64_t K,
                                        int64_t D);

/* ---- VQ mode ---- */

/* ids (N) = argmax_k z_n . E_k, q (N, D) = E[ids]; returns L_c = mean_n ||z_n - q_n||^2. */
double tess_nn_codebook_vq_forward(float *q, int32_t *ids, const float *z, const float *E,
                                   int64_t N, int64_t K, int64_t D);
/* dz (N, D) += dq (straight-through) + dcommit * 2 (z - q) / N. */
void tess_nn_codebook_vq_backward(float *dz, const float *dq, float dcommit, const float *z,
                                  const float *q, int64_t N, int64_t D);

/* EMA codebook, in two halves so that a data-parallel caller can sum the batch statistics over
 * the ranks in between (they are sums, so the update is then the global batch's):
 *   stats  nk (K) = number of rows assigned to code k, sk (K, D) = sum of those rows z_n
 *          (overwritten); z (N, D), ids (N).
 *   apply  count (K) <- decay count + (1 - decay) nk, sum (K, D) <- decay sum + (1 - decay) sk,
 *          E_k = sum_k / count_k for codes with count_k > 1e-6 (others keep their row). */
void tess_nn_codebook_ema_stats(float *nk, float *sk, const float *z, const int32_t *ids,
                                int64_t N, int64_t K, int64_t D);
void tess_nn_codebook_ema_apply(float *E, float *count, float *sum, const float *nk,
                                const float *sk, int64_t K, int64_t D, float decay);

/* ---- dead codes ---- */

/* Dead-code tracking (the restart rule: a code unassigned for `window` steps is dead): idle (K)
 * counts the consecutive steps without an assignment, nk (K) this step's assignment counts (a
 * data-parallel caller passes the counts summed over the ranks, so every rank decides alike).
 * idle_k <- nk_k > 0 ? 0 : idle_k + 1; the codes with idle_k >= window (window >= 1) are written
 * to dead (K, ascending) with their idle reset to 0 (the caller restarts them); returns their
 * number. Deterministic: a pure function of (idle, nk, window). */
int64_t tess_nn_codebook_dead(int64_t *dead, int64_t *idle, const float *nk, int64_t K,
                              int64_t window);

#endif

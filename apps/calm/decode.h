/* decode.h - behaviour decoding for CalM-lite (docs/calm.md, "Behaviour decoding"): the decoding
 * head on the dual-axis transformer's final residual stream, the two baseline decoders and the
 * metrics.
 *
 * Head, per window b and patch m, on z[n] = LN(h^L[b, n, m]) (LN a LayerNorm over the d
 * channels) of the window's real neurons n (key-padding mask), by decode.readout:
 *   attn:  p = attention pooling of z[n] over n (one learned query; nn/pool.h)          (d)
 *          f = gelu(W1 p + b1)                                                          (H)
 *   mean:  f = mean over n of gelu(W1 z[n] + b1)  (a per-neuron MLP layer, then the mean) (H)
 *   unit:  f = mean over n of (1 + c[u(n)]) * gelu(W1 z[n] + b1) (elementwise), c (U, H) a
 *          learned gain per unit u(n) (the neuron's global unit id; 0 at the start and for a
 *          unit never trained): the readout can weight neurons of opposite tuning with
 *          opposite signs, which neither a convex combination of the z[n] (attn) nor a layer
 *          shared by all neurons (mean) can                                            (H)
 *   y[b, m] = W2 f + b2                                                                 (D)
 * D behaviour outputs per patch: regression targets in standardised units, binary ones as
 * logits. Loss summed over (b, m, k): (y - t)^2 for a regression target, BCE(y, t) for a binary
 * one, t the patch's mean of the (standardised) target over its P frames (for a binary target
 * the fraction of positive frames). Parameters "dec.query" (d; attn only), "dec.norm_w",
 * "dec.norm_b" (d), "dec.fc" (H, d), "dec.fc_b" (H), "dec.unit_gain" (U, H; unit only),
 * "dec.out" (D, H), "dec.out_b" (D) in the caller's registry.
 *
 * Baselines (per session, on the z-scored traces x (T, N)): the lagged population vector of
 * frame t is f(t) = x[e(t) - L + 1 .. e(t), :] (L N values), e(t) = the last frame of t's patch
 * on the patch grid (multiples of P) - the frames the head sees when it decodes t, nothing
 * later. Ridge: one linear map f(t) -> behaviour(t) with an intercept; the MLP: f(t) -> H GELU
 * units -> D outputs (the head's loss). Both choose their regularisation on a validation slice
 * of the training frames (the last val_fraction of them): ridge its penalty per target from a
 * grid, the MLP its number of full-batch AdamW steps (early stopping); then refit on all
 * training frames. Test frames are never read. Not collective.
 *
 * Metrics: R^2 = 1 - SS_res / SS_tot and Pearson r for regression targets; accuracy (score
 * >= threshold) and AUROC (Mann-Whitney, ties counted half) for binary ones. */
#ifndef CALM_DECODE_H
#define CALM_DECODE_H

#include <stdbool.h>
#include <stdint.h>

#include "core/config.h" /* tess_opt_enum */
#include "core/status.h" /* tess_status */
#include "nn/registry.h" /* tess_registry */

enum { CALM_DEC_MAX_TARGETS = 8 };

/* decode.readout (the table in enum order) */
typedef enum { CALM_DEC_UNIT = 0, CALM_DEC_MEAN, CALM_DEC_ATTN, CALM_DEC_READOUT_COUNT } calm_dec_readout;

static const tess_opt_enum calm_dec_readout_names[] = {
    {"unit", CALM_DEC_UNIT}, {"mean", CALM_DEC_MEAN}, {"attn", CALM_DEC_ATTN}};
TESS_OPT_ENUM_TABLE_CHECK(calm_dec_readout_names, CALM_DEC_READOUT_COUNT);

typedef struct calm_dec calm_dec;

/* The head with the given readout for up to max_B windows of max_N neurons x M patches, width d,
 * H hidden units, D outputs, unit ids in [0, U); parameters registered into reg (not finalized:
 * the caller finalizes and initialises it). TESS_ERR_CONFIG naming "decode.hidden" /
 * "decode.targets" for bad sizes. */
tess_status calm_dec_create(calm_dec **h, calm_dec_readout readout, int64_t d, int64_t H,
                            int64_t D, int64_t U, int64_t max_B, int64_t max_N, int64_t M,
                            tess_registry *reg);
void calm_dec_destroy(calm_dec **h);

/* Forward: hidden (B, max_N, M, d) (calm_dat_hidden), count (B) real neurons per window (the
 * rest masked), unit (B, max_N) their unit ids in [0, U) (read by the unit readout; padded
 * entries must be in range too). Returns y (B, M, D), owned by the head, valid until the next
 * forward. */
const float *calm_dec_forward(calm_dec *h, const float *hidden, const int32_t *count,
                              const int32_t *unit, int64_t B);
/* The summed loss of the last forward against target (B, M, D); binary (D) flags which targets
 * are binary. Sets *terms to B M D. Keeps what the backward needs. */
double calm_dec_loss(calm_dec *h, const float *target, const bool *binary, int64_t *terms);
/* Backward of loss * scale: parameter gradients ADDED into the registry; dhidden (B, max_N, M, d)
 * OVERWRITTEN with d loss / d hidden unless NULL (frozen backbone). */
void calm_dec_backward(calm_dec *h, float scale, float *dhidden);

/* Metrics over n pairs (prediction / score, truth). NaN when undefined (n < 2, constant truth,
 * a class absent). */
double calm_dec_r2(const double *pred, const double *truth, int64_t n);
double calm_dec_pearson(const double *pred, const double *truth, int64_t n);
double calm_dec_accuracy(const double *score, const double *label, int64_t n, double threshold);
double calm_dec_auroc(const double *score, const double *label, int64_t n);

/* A session for the baselines: x (T, N) z-scored traces, beh (T, D) behaviour (binary targets
 * 0/1), frames below train_T train. */
typedef struct {
    const float *x, *beh;
    int64_t T, N, D, train_T;
} calm_dec_session;

typedef struct {
    int64_t P, L;        /* patch, lags */
    double val_fraction; /* the validation slice: the last fraction of the training frames */
    const bool *binary;  /* (D) */
    int64_t hidden, max_steps; /* MLP: hidden units, most AdamW steps */
    double lr;           /* MLP learning rate */
    uint64_t seed;       /* MLP initialisation */
} calm_dec_base_config;

/* TESS_ERR_DATA unless the session has at least 2 L training frames before the validation slice
 * and L frames in it (the message names `name`). Pure. */
tess_status calm_dec_base_check(const calm_dec_session *s, const calm_dec_base_config *c,
                                const char *name);
/* Ridge: pred (T, D) for every frame t with e(t) >= L - 1 and e(t) < T (NaN elsewhere); the
 * chosen penalties into lambda (D). */
tess_status calm_dec_ridge(const calm_dec_session *s, const calm_dec_base_config *c, float *pred,
                           double *lambda);
/* MLP: pred (T, D) as for the ridge (binary outputs as probabilities, regression ones in the
 * behaviour's units); the chosen number of steps into *steps. */
tess_status calm_dec_mlp(const calm_dec_session *s, const calm_dec_base_config *c, float *pred,
                         int64_t *steps);

/* The same two decoders fitted on several sessions at once (leave-one-animal-out decoding): the
 * sessions i with train[i] train - each on its frames below train_T, its validation slice the
 * last val_fraction of them - and every session i with pred[i] != NULL gets predictions
 * pred[i] (T_i, D) as above. Sessions without train[i] are read only through the lagged
 * vectors of their predictions (never their behaviour). Every session must have the same N
 * (features per frame, e.g. calm_dec_summarize's) and D (TESS_ERR_ARG), and each training
 * session pass calm_dec_base_check. calm_dec_ridge / calm_dec_mlp are these with one session
 * that trains and is predicted. */
tess_status calm_dec_ridge_pooled(const calm_dec_session *s, int64_t ns, const bool *train,
                                  const calm_dec_base_config *c, float *const *pred,
                                  double *lambda);
tess_status calm_dec_mlp_pooled(const calm_dec_session *s, int64_t ns, const bool *train,
                                const calm_dec_base_config *c, float *const *pred,
                                int64_t *steps);

/* Identity-free features for decoding across animals (whose neurons do not correspond): per
 * frame, statistics over the N neurons of x (T, N) - mean, standard deviation, and the 10, 50
 * and 90 % quantiles (linear interpolation) - into out (T, CALM_DEC_SUMMARY); work (N) scratch. */
enum { CALM_DEC_SUMMARY = 5 };
void calm_dec_summarize(const float *x, int64_t T, int64_t N, float *out, float *work);

/* Standardisation of the decoding targets, mu and sd (ns, D): with train NULL each session's
 * own mean and standard deviation (+ 1e-6) over its frames below train_T; otherwise the same
 * values for every session, pooled over the frames below train_T of the sessions with
 * train[i] (the others' behaviour is never read). Binary targets (binary[k]) get 0 and 1. */
void calm_dec_target_stats(const calm_dec_session *s, int64_t ns, const bool *train,
                           const bool *binary, double *mu, double *sd);

#endif

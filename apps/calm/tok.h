/* tok.h - the single-neuron tokenizer of CalM-lite (docs/calm.md): one neuron's trace of
 * L = M * P frames becomes M token ids of one vocabulary shared by every neuron.
 *
 *   encoder  Conv1d(1->c, k=5, causal) + GELU -> Conv1d(c->c, k=P, stride=P) -> Linear c->dt
 *            -> nt causal transformer blocks over the M patches (RoPE) -> Linear dt->Dc
 *            -> L2-normalise: z (M, Dc)
 *   codebook E (K, Dc), rows L2-normalised; logits = z E^T / tau_cos; quantiser GUMBEL:
 *            Gumbel-softmax with temperature tau_g (soft), or hard straight-through
 *            (nn/codebook.h); ids = argmax. Quantiser VQ: ids = argmax logits, q = E[ids] with
 *            the straight-through gradient to z, commitment beta ||z - sg(E[ids])||^2, and the
 *            codebook an EMA of the assigned encoder outputs (calm_tok_codes_update), not
 *            trained by gradients
 *   decoder  Linear Dc->dt -> nt bidirectional blocks (RoPE) -> Linear dt->c
 *            -> ConvTranspose1d(c->c, k=P, stride=P) + GELU -> Conv1d(c->1, k=5, causal): x^ (L)
 *   loss     MSE(x^, x) + lambda_d MSE(diff x^, diff x) + lambda_orth ||E E^T - I||^2 / K^2
 *            + lambda_H (log K - H(pbar)) [+ beta L_commit in VQ mode; there the orthogonality
 *            term is reported but sends no gradient: the EMA sets the codebook]
 *   dead codes  a code no trace of the global batch was assigned to for `window` consecutive
 *            steps is restarted at a random encoder output of the step's global batch
 *            (calm_tok_codes_update).
 *
 * The encoder is causal: token m depends only on frames up to the end of patch m (the first
 * convolution is left-padded, the second cuts whole patches, the blocks are causal), so cached
 * ids can be the DAT's inputs without leaking the future. The Gumbel noise of sample s (a
 * global index, not a rank's) is a Philox draw keyed by (seed, step, s): the batch's noise does
 * not depend on the rank count.
 *
 * Parameters are registered under "tok."; activations live in the tokenizer's arena.
 * Not collective except calm_tok_codes_update. Bn traces per call (<= max_Bn). */
#ifndef CALM_TOK_H
#define CALM_TOK_H

#include <stdint.h>

#include "core/config.h"  /* tess_opt_enum */
#include "core/rng.h"     /* tess_rng_key */
#include "core/status.h"  /* tess_status */
#include "nn/codebook.h"  /* tess_nn_codebook_mode */
#include "nn/registry.h"  /* tess_registry */
#include "nn/state.h"     /* tess_state */
#include "par/mesh.h"     /* tess_group */

/* The quantiser (tok.quantizer). */
typedef enum { CALM_QUANT_GUMBEL = 0, CALM_QUANT_VQ, CALM_QUANT_COUNT } calm_quant;

static const tess_opt_enum calm_quant_names[] = {{"gumbel", CALM_QUANT_GUMBEL},
                                                 {"vq", CALM_QUANT_VQ}};
TESS_OPT_ENUM_TABLE_CHECK(calm_quant_names, CALM_QUANT_COUNT);

typedef struct {
    int64_t P, M;         /* frames per patch, patches: L = M P */
    int64_t c, dt, nt;    /* conv channels, transformer width, layers (encoder and decoder) */
    int64_t heads;        /* dt % heads == 0, even head size */
    int64_t Dc, K;        /* code dimension, codebook size */
    float tau_cos;        /* 0.1 */
    float lambda_d, lambda_orth, lambda_h; /* 0.5, 0.1, 0.01 */
    calm_quant quant;     /* GUMBEL (default) or VQ */
    float beta;           /* VQ commitment weight (0.25) */
    float ema_decay;      /* VQ codebook EMA decay in [0, 1) (0.99) */
} calm_tok_config;

typedef struct {
    double mse, dmse, orth, entropy, commit, total; /* the terms (commit: VQ) and the weighted sum */
} calm_tok_loss;

typedef struct calm_tok calm_tok;

/* TESS_ERR_CONFIG naming the "tok.<key>" that is wrong. Pure. */
tess_status calm_tok_check(const calm_tok_config *c, int64_t max_Bn);
tess_status calm_tok_create(calm_tok **t, const calm_tok_config *c, int64_t max_Bn,
                            tess_registry *reg);
void calm_tok_destroy(calm_tok **t);

/* Encode x (Bn, L) and quantise: ids (Bn, M) written. Gumbel quantiser: tau_g > 0 with noise:
 * Gumbel noise for samples first..first+Bn-1 of step `step` under key; tau_g <= 0: no noise
 * (inference); mode SOFT or HARD_ST (nn/codebook.h). VQ quantiser: key, step, first, tau_g and
 * mode are not read. Then decode and return the loss terms against x. */
calm_tok_loss calm_tok_forward(calm_tok *t, const float *x, int64_t Bn, int32_t *ids,
                               tess_rng_key key, int64_t step, int64_t first, float tau_g,
                               tess_nn_codebook_mode mode);
/* The code usage pbar (K) of the last forward: the mean over its traces of softmax(logits).
 * The usage entropy is not a sum over traces, so a data-parallel caller replaces it with the
 * mean over the ranks (equal shares) before calm_tok_backward, which reads it; then
 * calm_tok_usage_loss gives the entropy term of the whole batch. */
float *calm_tok_code_usage(calm_tok *t);
double calm_tok_usage_loss(const calm_tok *t);

/* Backward of the last forward's total loss times scale: gradients ADDED into the registry. */
void calm_tok_backward(calm_tok *t, float scale);

/* The codebook's upkeep after a training step's optimizer update. Collective on g; every rank
 * passes the same key, step, global_Bn and window; this rank's forward held the traces
 * first..first+Bn-1 of the global batch of global_Bn traces.
 *  1. code counts n_k of the global batch (this rank's ids summed over g; exact integers);
 *  2. VQ: the EMA update of the codebook from the global batch's counts and sums of z;
 *  3. window >= 1: codes unassigned for window consecutive steps (tess_nn_codebook_dead on the
 *     global counts) are restarted: dead code k takes the encoder output z of the global row
 *     j = Philox(key, step, k) mod (global_Bn M) (a copy from the rank that holds it, summed
 *     into zeros over g), and in VQ mode EMA count 1 and sum z.
 * Every decision reads only all-reduced sums, so the result does not depend on the rank count
 * (the VQ sums of z up to rounding). *restarted = the number of codes restarted now.
 * (The optimizer's moments of a restarted row are not reset.) */
tess_status calm_tok_codes_update(calm_tok *t, const tess_group *g, tess_rng_key key,
                                  int64_t step, int64_t first, int64_t global_Bn, int64_t window,
                                  int64_t *restarted);
/* The global code counts n_k (K) of the last calm_tok_codes_update; the total of restarts. */
const float *calm_tok_code_counts(const calm_tok *t);
int64_t calm_tok_restarts(const calm_tok *t);
/* Add the codebook's upkeep state to st under prefix: "<prefix>/ema_count" (K), "ema_sum"
 * (K, Dc), "idle" (K, int64, steps since each code's last assignment), "restarts" (int64), so a
 * resumed run continues them. Not collective. */
tess_status calm_tok_describe(calm_tok *t, tess_state *st, const char *prefix);

/* Token ids (Bn, M) of x (Bn, L): no noise, argmax codes (inference). Invalidates the last
 * forward for backward. */
void calm_tok_encode(calm_tok *t, const float *x, int64_t Bn, int32_t *ids);
/* Decode token ids (Bn, M) into traces (Bn, L), returned (owned by t, valid until the next
 * call). Invalidates the last forward for backward. */
const float *calm_tok_decode(calm_tok *t, const int32_t *ids, int64_t Bn);

/* The reconstruction (Bn, L) of the last forward. */
const float *calm_tok_recon(const calm_tok *t);

#endif

/* dat.h - the dual-axis transformer (DAT) of CalM-lite (docs/calm.md), composed of the core
 * pieces (nn/block.h, nn/head.h): for a window of N neurons x M patches of token ids,
 *
 *   h0[n, m] = E_tok[c[n, m]] + E_unit[u[n]] + E_sess[s]          (no position on the neuron axis)
 *   per layer (pre-norm, residual each):
 *     1. temporal attention per neuron over m = 0..M-1, causal, RoPE on m
 *     2. neural attention per patch over the N neurons, bidirectional, key-padding mask
 *     3. feed-forward d -> F -> d (GELU)
 *   logits[n, m] = Linear_{d->K}(LN(h[n, m]));  loss = mean over real neurons and m < M-1 of
 *   CE(logits[n, m], c[n, m+1]).
 *
 * Optionally (config patch_input) the patch's own z-scored frames enter too:
 *   h0[n, m] += W_in x[n, m]                       (x[n, m] the P frames of patch m, W_in (d, P))
 * and a continuous next-patch head (CAPT-style; head = PATCH, or BOTH with the token head)
 * predicts the next `ahead` patches (A; the spec's head is A = 1) in NLinear form, as a change
 * from the last observed frame:
 *   xhat[n, m+1+j, i] = x[n, m, P-1] + (Linear_{d->A P}(LN'(h[n, m])))_{j P + i},  j < A,
 *   loss per pair (n, m) = sum over the existing patches m+1+j < M and frames i of
 *   (xhat - x)^2 / (A P), added to the CE (weight 1).
 * With skip = S > 0, a linear map of the last S patches' frames in the same form is added to
 * the head's output: + W_skip (x[n, m-S+1 .. m, :] - x[n, m, P-1]) (W_skip (A P, S P), zeros at
 * the start, lags before patch 0 zero: one AR map over the last S P lags shared by all
 * neurons; causal, it reads patches <= m only). The head starts near zero (init std 0.02; the
 * skip at zero), so the model starts at copy-last.
 *
 * So h[n, m] depends only on tokens at patches <= m (of every neuron), and the neuron axis is
 * permutation-equivariant. Windows are padded to max_N neurons; padded neurons are masked keys
 * and carry no loss.
 *
 * Layout: a batch of B windows is [B][max_N][M] token ids (int32), the residual stream
 * [B][max_N][M][d]; the neural attention runs on the 0213 permutation [B][M][max_N][d]
 * (tess_tensor_permute_0213). Parameters are registered into the caller's registry under
 * "dat."; activations live in the model's own arena. Not collective (gradient sync is the
 * caller's, par/gradsync.h). */
#ifndef CALM_DAT_H
#define CALM_DAT_H

#include <stdbool.h>
#include <stdint.h>

#include "core/config.h"  /* tess_opt_enum */
#include "core/status.h"  /* tess_status */
#include "nn/registry.h"  /* tess_registry */

/* Which next-step loss the model trains (docs/calm.md). */
typedef enum {
    CALM_HEAD_TOKEN = 0, /* next-token cross-entropy (CalM) */
    CALM_HEAD_PATCH,     /* next-patch MSE in NLinear form (CAPT-style) */
    CALM_HEAD_BOTH,      /* their sum */
    CALM_HEAD_COUNT
} calm_head;

static const tess_opt_enum calm_head_names[] = {
    {"token", CALM_HEAD_TOKEN}, {"patch", CALM_HEAD_PATCH}, {"both", CALM_HEAD_BOTH}};
TESS_OPT_ENUM_TABLE_CHECK(calm_head_names, CALM_HEAD_COUNT);

typedef struct {
    int64_t K;        /* vocabulary (codebook size) */
    int64_t d;        /* channels */
    int64_t layers;
    int64_t heads;    /* d % heads == 0, head size even (RoPE) */
    int64_t ffn;      /* feed-forward hidden width */
    int64_t units;    /* rows of E_unit (global neuron ids) */
    int64_t sessions; /* rows of E_sess */
    int64_t max_N;    /* neurons per window (padded) */
    int64_t M;        /* patches per window */
    int64_t P;        /* frames per patch (patch input and patch head) */
    int64_t ahead;    /* patches the patch head predicts, in [1, M) */
    int64_t skip;     /* patches the head's linear skip reads (0: no skip), in [0, M] */
    bool patch_input; /* add W_in x[n, m] to h0 */
    calm_head head;
} calm_dat_config;

typedef struct calm_dat calm_dat;

/* TESS_ERR_CONFIG naming the "model.<key>" that is wrong. Pure. */
tess_status calm_dat_check(const calm_dat_config *c, int64_t max_B);

/* Build the model for up to max_B windows and register its parameters into reg (not
 * finalized: the caller finalizes it, then tess_registry_init_params). */
tess_status calm_dat_create(calm_dat **m, const calm_dat_config *c, int64_t max_B,
                            tess_registry *reg);
void calm_dat_destroy(calm_dat **m);

/* A batch of B windows: tokens (B, max_N, M) in [0, K); frames (B, max_N, M, P) the windows'
 * z-scored frames (read with patch_input or a patch head; may be NULL otherwise); unit (B, max_N)
 * in [0, units); session (B) in [0, sessions); count (B): neurons 0..count-1 of each window are
 * real, the rest padding (their tokens, frames and units are ignored but must be in range).
 * Runs the model; returns the summed loss of the next-step targets (CE and/or the patch MSE, per
 * the head) and sets *pairs to their number (count[b] * (M - 1) summed), so a data-parallel mean
 * divides by the global count. The two parts of the sum: calm_dat_loss_parts. */
double calm_dat_forward(calm_dat *m, const int32_t *tokens, const float *frames,
                        const int32_t *unit, const int32_t *session, const int32_t *count,
                        int64_t B, int64_t *pairs);
/* Backward of the last forward with loss = sum * scale (scale = 1 / global pairs for a mean):
 * gradients ADDED into the registry. Clobbers the logits and the patch predictions. */
void calm_dat_backward(calm_dat *m, float scale);

/* The final residual stream h^L (B, max_N, M, d) of the last forward, before the heads' norms:
 * row (b, n, m) depends on patches <= m of window b only (the decoding head reads it). */
const float *calm_dat_hidden(const calm_dat *m);
/* Backward of the last forward from a gradient dh (B, max_N, M, d) arriving at calm_dat_hidden
 * alone (the next-step losses left out): gradients ADDED into the registry. dh is read only. */
void calm_dat_backward_hidden(calm_dat *m, const float *dh);

/* Summed CE and summed patch MSE of the last forward (0 for a head not present). */
void calm_dat_loss_parts(const calm_dat *m, double *ce, double *mse);
/* Logits (B, max_N, M, K) of the last forward (token head only). */
const float *calm_dat_logits(const calm_dat *m);
/* Predicted next patches (B, max_N, M, ahead P) of the last forward, in frames (the last
 * observed frame added back): row (b, n, m) predicts patches m + 1 .. m + ahead (patch head
 * only). */
const float *calm_dat_patch_pred(const calm_dat *m);

#endif

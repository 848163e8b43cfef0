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

#include <stdint.h>

#include "core/status.h"  /* tess_status */
#include "nn/registry.h"  /* tess_registry */

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
} calm_dat_config;

typedef struct calm_dat calm_dat;

/* TESS_ERR_CONFIG naming the "model.<key>" that is wrong. Pure. */
tess_status calm_dat_check(const calm_dat_config *c, int64_t max_B);

/* Build the model for up to max_B windows and register its parameters into reg (not
 * finalized: the caller finalizes it, then tess_registry_init_params). */
tess_status calm_dat_create(calm_dat **m, const calm_dat_config *c, int64_t max_B,
                            tess_registry *reg);
void calm_dat_destroy(calm_dat **m);

/* A batch of B windows: tokens (B, max_N, M) in [0, K); unit (B, max_N) in [0, units);
 * session (B) in [0, sessions); count (B): neurons 0..count-1 of each window are real, the rest
 * padding (their tokens and units are ignored but must be in range). Runs the model; returns
 * the summed cross-entropy of the next-token targets and sets *pairs to their number
 * (count[b] * (M - 1) summed), so a data-parallel mean divides by the global count. */
double calm_dat_forward(calm_dat *m, const int32_t *tokens, const int32_t *unit,
                        const int32_t *session, const int32_t *count, int64_t B, int64_t *pairs);
/* Backward of the last forward with loss = sum of CE * scale (scale = 1 / global pairs for a
 * mean): gradients ADDED into the registry. */
void calm_dat_backward(calm_dat *m, float scale);

/* Logits (B, max_N, M, K) of the last forward. */
const float *calm_dat_logits(const calm_dat *m);

#endif

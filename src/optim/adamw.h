/* adamw.h - Adam with decoupled weight decay, matching torch.optim.AdamW (amsgrad and maximize
 * off).
 *
 * Per step t = 1, 2, ... and for every trainable registry entry, element-wise over its flat view:
 *   p  = p * (1 - lr * weight_decay)       (decoupled; only for entries flagged decay)
 *   m  = beta1 * m + (1 - beta1) * g
 *   v  = beta2 * v + (1 - beta2) * g * g
 *   p  = p - (lr / (1 - beta1^t)) * m / (sqrt(v) / sqrt(1 - beta2^t) + eps)
 * Bias corrections are computed in double, the element-wise update in float. Non-trainable entries
 * are left alone (their m, v stay 0). m and v are one flat array each, laid out like the params
 * (tess_registry_alloc_state) and allocated at create; the step allocates nothing.
 * Not collective: gradients must already be synchronised.
 */
#ifndef TESS_OPTIM_ADAMW_H
#define TESS_OPTIM_ADAMW_H

#include <stdint.h>

#include "core/status.h" /* tess_status */
#include "nn/registry.h" /* tess_registry */
#include "nn/state.h"    /* tess_state */

typedef struct {
    float beta1, beta2;  /* in [0, 1) */
    float eps;           /* > 0 */
    float weight_decay;  /* >= 0; decoupled, on entries flagged decay */
} tess_adamw_config;

/* torch.optim.AdamW's defaults: betas (0.9, 0.999), eps 1e-8, weight_decay 0.01. */
tess_adamw_config tess_adamw_config_default(void);

typedef struct tess_adamw tess_adamw;

/* Optimizer over the finalized registry reg (borrowed: must outlive the optimizer), step count 0.
 * TESS_ERR_ARG for a non-finalized registry or bad config; TESS_ERR_MEM. */
tess_status tess_adamw_create(tess_adamw **opt, tess_registry *reg, const tess_adamw_config *cfg);
/* Free the optimizer and its state; sets *opt = NULL. NULL-safe. */
void tess_adamw_destroy(tess_adamw **opt);

/* One update with learning rate lr from the registry's grads; increments the step count first. */
void tess_adamw_step(tess_adamw *opt, float lr);

/* Number of steps taken (t of the last update); the bias corrections depend on it. */
int64_t tess_adamw_step_count(const tess_adamw *opt);

/* Back to the state of a fresh optimizer: m = v = 0 and step count 0 (the next step is t = 1),
 * in place, so a tess_state description stays valid. What re-creating torch.optim.Adam does,
 * e.g. after a federated client downloads new shared parameters. Not collective. */
void tess_adamw_reset(tess_adamw *opt);

/* Add the optimizer's state to st (nn/state.h) under prefix: "<prefix>/m/<entry>" and
 * "<prefix>/v/<entry>" (float32, laid out like the registry entry's params) for every registry
 * entry, and "<prefix>/step_count" (int64, one element). The entries point at the optimizer's own
 * memory, so a checkpoint load restores the moments and the step count in place; opt must
 * outlive st's use. Errors of tess_state_add (a bad prefix, a duplicate name). Not collective. */
tess_status tess_adamw_describe(tess_adamw *opt, tess_state *st, const char *prefix);
/* The same with every entry private to this rank (nn/state.h): the optimizer of a federated
 * client, which lives on whichever rank runs the client ("clients/<k>/optim"). */
tess_status tess_adamw_describe_private(tess_adamw *opt, tess_state *st, const char *prefix);

#endif

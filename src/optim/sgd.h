/* sgd.h - stochastic gradient descent with momentum, matching torch.optim.SGD (dampening 0).
 *
 * For every trainable registry entry, element-wise over its flat view, with lr given per step:
 *   g   = grad + weight_decay * p          (coupled L2; only for entries flagged decay)
 *   buf = momentum * buf + g               (buf starts at 0, so step 1 gives buf = g as in torch)
 *   g   = nesterov ? g + momentum * buf : buf     (when momentum != 0)
 *   p   = p - lr * g
 * Non-trainable entries are left alone. The momentum buffer is one flat array laid out like the
 * params (tess_registry_alloc_state), allocated at create (not at all when momentum == 0); the step
 * allocates nothing. Not collective: gradients must already be synchronised.
 */
#ifndef TESS_OPTIM_SGD_H
#define TESS_OPTIM_SGD_H

#include <stdbool.h>
#include <stdint.h>

#include "core/status.h" /* tess_status */
#include "nn/registry.h" /* tess_registry */
#include "nn/state.h"    /* tess_state */

typedef struct {
    float momentum;     /* >= 0; 0 means plain SGD (no buffer) */
    float weight_decay; /* >= 0; coupled L2 on entries flagged decay */
    bool nesterov;      /* requires momentum > 0 */
} tess_sgd_config;

typedef struct tess_sgd tess_sgd;

/* Optimizer over the finalized registry reg (borrowed: must outlive the optimizer).
 * TESS_ERR_ARG for a non-finalized registry or bad config; TESS_ERR_MEM. */
tess_status tess_sgd_create(tess_sgd **opt, tess_registry *reg, const tess_sgd_config *cfg);
/* Free the optimizer and its state; sets *opt = NULL. NULL-safe. */
void tess_sgd_destroy(tess_sgd **opt);

/* One update of every trainable entry with learning rate lr, from the registry's grads. */
void tess_sgd_step(tess_sgd *opt, float lr);

/* Add the optimizer's state to st (nn/state.h) under prefix: "<prefix>/momentum/<entry>" (float32,
 * laid out like the registry entry's params) for every registry entry when momentum > 0; nothing
 * when momentum == 0 (plain SGD keeps no state, not even a step count). The entries point at the
 * optimizer's own buffer, so a checkpoint load restores it in place; opt must outlive st's use.
 * Errors of tess_state_add (a bad prefix, a duplicate name). Not collective. */
tess_status tess_sgd_describe(tess_sgd *opt, tess_state *st, const char *prefix);

#endif

/* head.h - the ends of a language model as pieces with their parameters: the token embedding in
 * front of the blocks and the output head (final norm and vocabulary projection) behind them.
 * The loss is the layer of nn/loss.h (tess_nn_crossentropy_*), applied by the caller to the
 * head's logits. Like the blocks (nn/block.h), each piece registers its parameters with their
 * declared init under a name, carves its activations from an arena, and runs forward and
 * backward without allocating; parameter gradients are ADDED into the registry.
 * Shapes: N rows (B*T flattened), C channels, V vocabulary. Not collective. */
#ifndef TESS_NN_HEAD_H
#define TESS_NN_HEAD_H

#include <stdint.h>

#include "core/arena.h"  /* tess_arena */
#include "core/status.h" /* tess_status */
#include "nn/block.h"    /* tess_nn_normp, tess_nn_norm_kind */
#include "nn/registry.h" /* tess_registry */

/* Token embedding: table "<name>" (V,C) ~ N(0, std). */
typedef struct {
    int64_t V, C;
    double std;
    tess_registry *reg; /* borrowed */
    int64_t table;      /* registry index */
    const int32_t *ids; /* of the last forward, borrowed until backward */
    int64_t N;
} tess_nn_embedp;

tess_status tess_nn_embedp_add_params(tess_nn_embedp *e, tess_registry *reg, const char *name);
/* out (N,C) = table[ids]; ids (N) in [0,V). */
void tess_nn_embedp_forward(tess_nn_embedp *e, float *out, const int32_t *ids, int64_t N);
/* d table += scatter of dout (N,C) by the ids of the last forward. */
void tess_nn_embedp_backward(tess_nn_embedp *e, const float *dout);

/* Output head: logits = norm(x) @ w^T with the norm "<norm_name>" and w "<proj_name>" (V,C)
 * ~ N(0, std). Activations: the norm's and the logits (max_N,V). */
typedef struct {
    int64_t V, C, max_N;
    double std;
    tess_nn_normp norm;
    tess_registry *reg; /* borrowed */
    int64_t w;          /* registry index */
    float *logits;      /* (max_N,V) */
    const float *in;    /* of the last forward, borrowed */
    int64_t N;
} tess_nn_lmhead;

tess_status tess_nn_lmhead_add_params(tess_nn_lmhead *h, tess_registry *reg,
                                      const char *norm_name, const char *proj_name);
tess_status tess_nn_lmhead_carve(tess_nn_lmhead *h, tess_arena *a);
/* h->logits (N,V) from in (N,C). */
void tess_nn_lmhead_forward(tess_nn_lmhead *h, const float *in, int64_t N);
/* dx (N,C) += d/d in; dlogits (N,V); dtmp (N,C) scratch, clobbered. dlogits may be h->logits
 * (the logits are dead once the loss has read them). */
void tess_nn_lmhead_backward(tess_nn_lmhead *h, float *dx, float *dtmp, const float *dlogits);

#endif

/* transformer.h - a decoder-only (or bidirectional) transformer language model composed of the
 * nn pieces, with hand-written backward: the dense baseline the MoE app builds on.
 *
 * Architecture (pre-norm, LLaMA-style by default), each line a piece:
 *   x_0 = tok_emb[ids]                                     embedding      (nn/head.h)
 *   for l in 0..L-1:  x = x + attn(norm1(x)) @ w_o^T       attention sub-block (nn/block.h)
 *                     x = x + ffn(norm2(x))                feed-forward sub-block, any tess_nn_ffn
 *   logits = norm_f(x) @ lm_head^T                         output head    (nn/head.h)
 *   loss = mean cross-entropy over targets >= 0            loss           (nn/loss.h)
 * attn is multi-head self-attention with RoPE on a fused qkv projection; norm is RMSNorm or
 * LayerNorm; the feed-forward is dense SwiGLU (no biases) or GELU (with biases), or whatever
 * cfg.make_ffn builds per layer (an expert layer).
 *
 * Dimension letters: B batch, T sequence length, V vocabulary, C channels, NH heads, F hidden
 * channels of the MLP, L layers; N = B*T rows.
 *
 * Setup: tess_tfm_create registers the parameters (replicated layout, declared init: matrices
 * N(0, 0.02), the residual output projections attn.w_o and the feed-forward's output
 * N(0, 0.02/sqrt(2L)), norm gains 1, biases 0) under hierarchical names ("tok_emb",
 * "layers.0.attn.w_qkv", ..., "lm_head") into a registry that is NOT finalized by it: other
 * modules may register before or after. The caller then calls tess_registry_finalize and
 * tess_registry_init_params(reg, seed) and uses the model. Activations live in an arena sized by a
 * dry run at create for (max_B, T): forward and backward allocate nothing.
 * Not collective unless a custom feed-forward is: a model is local to its rank; data-parallel
 * replicas sync grads elsewhere.
 */
#ifndef TESS_NN_TRANSFORMER_H
#define TESS_NN_TRANSFORMER_H

#include <stdbool.h>
#include <stdint.h>

#include "core/status.h" /* tess_status */
#include "nn/block.h"    /* tess_nn_norm_kind */
#include "nn/ffn.h"      /* tess_nn_ffn, tess_nn_ffn_kind */
#include "nn/registry.h" /* tess_registry */

typedef struct tess_tfm_config tess_tfm_config;

/* Builds layer l's feed-forward of width cfg->C into *ffn (ownership passes to the model).
 * Its parameters must use the init it declares. */
typedef tess_status (*tess_tfm_make_ffn)(void *ctx, int64_t layer, const tess_tfm_config *cfg,
                                         tess_nn_ffn **ffn);

struct tess_tfm_config {
    int64_t V, T, C, NH, F, L; /* vocabulary, max sequence length, channels, heads, MLP, layers */
    tess_nn_norm_kind norm;
    tess_nn_ffn_kind mlp;      /* the dense feed-forward, when make_ffn is NULL */
    bool causal;               /* decoder (true) or bidirectional encoder (false) */
    float norm_eps;            /* e.g. 1e-5 */
    float rope_base;           /* e.g. 10000 */
    tess_tfm_make_ffn make_ffn; /* NULL: dense cfg.mlp of width F */
    void *ffn_ctx;              /* passed to make_ffn */
};

typedef struct tess_tfm tess_tfm;

/* TESS_ERR_CONFIG naming the field and value if cfg or max_B is invalid. Pure: every rank
 * reaches the same verdict. */
tess_status tess_tfm_check_config(const tess_tfm_config *cfg, int64_t max_B);

/* Check cfg and build a model for batches of up to max_B sequences of cfg->T tokens: registers
 * its parameters, as one contiguous run of entries, in the not yet finalized registry reg, and
 * sizes the activation arena. reg is borrowed and must outlive the model; the model may be used
 * once the caller has finalized reg (and initialised it: tess_registry_init_params).
 * TESS_ERR_CONFIG for bad dimensions (names the field and value), TESS_ERR_ARG from the
 * registry (e.g. finalized already, or a name taken), TESS_ERR_MEM. */
tess_status tess_tfm_create(tess_tfm **model, const tess_tfm_config *cfg, int64_t max_B,
                            tess_registry *reg);
/* Free the model (not the registry); sets *model = NULL. NULL-safe. */
void tess_tfm_destroy(tess_tfm **model);

/* Forward pass on B <= max_B sequences of T tokens (the config's T): ids (B,T), each in [0,V);
 * targets (B,T) each -1 (ignored) or in [0,V), or NULL for inference. Returns the mean
 * cross-entropy over targets >= 0 (0 when targets is NULL). Keeps what backward needs. */
float tess_tfm_forward(tess_tfm *model, const int32_t *ids, const int32_t *targets, int64_t B);

/* Backward of the last forward (which must have had targets): ADDS d(loss_scale * loss)/d params
 * to the registry's grads. loss_scale lets data-parallel ranks weight their share. */
void tess_tfm_backward(tess_tfm *model, float loss_scale);

/* Called by tess_tfm_backward each time a contiguous range [lo, hi) of the registry's flat
 * gradient buffer is final: first the head and final norm (the end of the model's entries), then
 * layer L-1, ..., layer 0, then the embedding. The ranges tile the model's part of the buffer
 * (its entries are registered contiguously) from its end to its start, one call per range, so a
 * data-parallel sync (par/gradsync.h) can start reducing them while backward continues. When the
 * model is the registry's only module they tile [0, local_total). fn = NULL removes the hook. */
typedef void (*tess_tfm_grad_hook)(void *ctx, int64_t lo, int64_t hi);
void tess_tfm_set_grad_hook(tess_tfm *model, tess_tfm_grad_hook fn, void *ctx);

/* Logits (B,T,V) of the last forward; valid until the next forward or backward. */
const float *tess_tfm_logits(const tess_tfm *model);

/* Bytes of the activation arena, and FLOPs of one forward+backward on B sequences (matmuls only:
 * 6 * params-in-matmuls * tokens + attention), for throughput and MFU reports. */
int64_t tess_tfm_activation_bytes(const tess_tfm *model);
double tess_tfm_train_flops(const tess_tfm *model, int64_t B);

#endif

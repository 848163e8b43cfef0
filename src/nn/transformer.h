/* transformer.h - a decoder-only (or bidirectional) transformer language model built from the
 * nn layers, with hand-written backward: the dense baseline the MoE app builds on.
 *
 * Architecture (pre-norm, LLaMA-style by default):
 *   x_0 = tok_emb[ids]
 *   for l in 0..L-1:  x = x + attn(norm1(x)) @ w_o^T ;  x = x + mlp(norm2(x))
 *   logits = norm_f(x) @ lm_head^T ;  loss = mean cross-entropy over targets >= 0
 * attn is multi-head self-attention with RoPE on a fused qkv projection; norm is RMSNorm or
 * LayerNorm; mlp is SwiGLU (no biases) or GELU (with biases).
 *
 * Dimension letters: B batch, T sequence length, V vocabulary, C channels, NH heads, F hidden
 * channels of the MLP, L layers; N = B*T rows.
 *
 * Parameters live in a tess_registry (replicated layout), registered under hierarchical names
 * ("tok_emb", "layers.0.attn.w_qkv", ..., "lm_head"), so optimizers, gradient sync, clipping
 * and checkpoints iterate the registry. Activations live in an arena sized once by
 * tess_tfm_create for (max_B, T): forward and backward allocate nothing.
 * Not collective: a model is local to its rank; data-parallel replicas sync grads elsewhere.
 */
#ifndef TESS_NN_TRANSFORMER_H
#define TESS_NN_TRANSFORMER_H

#include <stdbool.h>
#include <stdint.h>

#include "core/config.h" /* tess_opt_enum */
#include "core/status.h" /* tess_status */
#include "nn/registry.h" /* tess_registry */

typedef enum { TESS_TFM_NORM_RMS = 0, TESS_TFM_NORM_LAYER, TESS_TFM_NORM_COUNT } tess_tfm_norm;
typedef enum { TESS_TFM_MLP_SWIGLU = 0, TESS_TFM_MLP_GELU, TESS_TFM_MLP_COUNT } tess_tfm_mlp;

/* Names for config options (TESS_OPT_ENUM, core/config.h). */
static const tess_opt_enum tess_tfm_norm_names[] = {{"rmsnorm", TESS_TFM_NORM_RMS},
                                                    {"layernorm", TESS_TFM_NORM_LAYER}};
TESS_OPT_ENUM_TABLE_CHECK(tess_tfm_norm_names, TESS_TFM_NORM_COUNT);
static const tess_opt_enum tess_tfm_mlp_names[] = {{"swiglu", TESS_TFM_MLP_SWIGLU},
                                                   {"gelu", TESS_TFM_MLP_GELU}};
TESS_OPT_ENUM_TABLE_CHECK(tess_tfm_mlp_names, TESS_TFM_MLP_COUNT);

typedef struct {
    int64_t V, T, C, NH, F, L; /* vocabulary, max sequence length, channels, heads, MLP, layers */
    tess_tfm_norm norm;
    tess_tfm_mlp mlp;
    bool causal;     /* decoder (true) or bidirectional encoder (false) */
    float norm_eps;  /* e.g. 1e-5 */
    float rope_base; /* e.g. 10000 */
} tess_tfm_config;

typedef struct tess_tfm tess_tfm;

/* TESS_ERR_CONFIG naming the field and value if cfg or max_B is invalid. Pure: every rank
 * reaches the same verdict. */
tess_status tess_tfm_check_config(const tess_tfm_config *cfg, int64_t max_B);

/* Check cfg and build a model for batches of up to max_B sequences of cfg->T tokens: registers
 * its parameters in the (not yet finalized) registry reg, finalizes it, and sizes the activation
 * arena. reg is borrowed and must outlive the model. TESS_ERR_CONFIG for bad dimensions (names
 * the field and value), TESS_ERR_MEM. */
tess_status tess_tfm_create(tess_tfm **model, const tess_tfm_config *cfg, int64_t max_B,
                            tess_registry *reg);
/* Free the model (not the registry); sets *model = NULL. NULL-safe. */
void tess_tfm_destroy(tess_tfm **model);

/* Initialise the parameters from Philox (seed, stream "init"), counters named by the registry
 * index and the element's global index: identical on every rank and for any rank count.
 * Matrices ~ N(0, 0.02), residual output projections ~ N(0, 0.02/sqrt(2L)), norm gains 1,
 * biases 0. */
void tess_tfm_init_params(tess_tfm *model, uint64_t seed);

/* Forward pass on B <= max_B sequences of T tokens (the config's T): ids (B,T), each in [0,V);
 * targets (B,T) each -1 (ignored) or in [0,V), or NULL for inference. Returns the mean
 * cross-entropy over targets >= 0 (0 when targets is NULL). Keeps what backward needs. */
float tess_tfm_forward(tess_tfm *model, const int32_t *ids, const int32_t *targets, int64_t B);

/* Backward of the last forward (which must have had targets): ADDS d(loss_scale * loss)/d params
 * to the registry's grads. loss_scale lets data-parallel ranks weight their share. */
void tess_tfm_backward(tess_tfm *model, float loss_scale);

/* Called by tess_tfm_backward each time a contiguous range [lo, hi) of the registry's flat
 * gradient buffer is final: first the head and final norm (the end of the buffer), then layer
 * L-1, ..., layer 0, then the embedding (lo = 0). Ranges tile the buffer from its end to its
 * start, one call per range, so a data-parallel sync (par/gradsync.h) can start reducing them
 * while backward continues. fn = NULL removes the hook. */
typedef void (*tess_tfm_grad_hook)(void *ctx, int64_t lo, int64_t hi);
void tess_tfm_set_grad_hook(tess_tfm *model, tess_tfm_grad_hook fn, void *ctx);

/* Logits (B,T,V) of the last forward; valid until the next forward. */
const float *tess_tfm_logits(const tess_tfm *model);

/* Bytes of the activation arena, and FLOPs of one forward+backward on B sequences (matmuls only:
 * 6 * params-in-matmuls * tokens + attention), for throughput and MFU reports. */
int64_t tess_tfm_activation_bytes(const tess_tfm *model);
double tess_tfm_train_flops(const tess_tfm *model, int64_t B);

#endif

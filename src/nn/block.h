/* block.h - the pieces a transformer is composed of, on continuous inputs: a norm with its
 * parameters, the attention sub-block, the feed-forward sub-block, and the pre-norm block made of
 * the two. Each piece registers its parameters into a registry under a name prefix (with their
 * declared init), carves its activations from an arena (the same code on a measuring arena first,
 * see core/arena.h), and runs forward and a hand-written backward without allocating.
 *
 *   attention sub-block:    y = x + attn(norm(x) @ w_qkv^T, kmask) @ w_o^T
 *   feed-forward sub-block: y = x + ffn(norm(x))          (ffn: any tess_nn_ffn, nn/ffn.h)
 *   block:                  y = ffn_sub(attn_sub(x))
 *
 * Shapes: x, y (B,T,C) floats, N = B*T rows, B <= max_B given at init; T is the length of the
 * attended axis. kmask (B,T) is the key-padding mask of nn/attention.h (NULL: none). To attend
 * along another axis of a [B][N][T][C] tensor, permute it (tess_tensor_permute_0213) and run a
 * block with B' = B*T sequences of length N (docs/nn.md).
 *
 * Backward runs in place on the residual stream: dx holds d loss / d y on entry and
 * d loss / d x on return; parameter gradients are ADDED into the registry. The forward input x
 * is borrowed until backward (the caller keeps the residual stream alive).
 * Shared scratch (tess_nn_block_scratch) serves every block of a model: it is dead between calls.
 * Not collective unless the feed-forward is (see its docs). */
#ifndef TESS_NN_BLOCK_H
#define TESS_NN_BLOCK_H

#include <stdbool.h>
#include <stdint.h>

#include "core/arena.h"     /* tess_arena */
#include "core/config.h"    /* tess_opt_enum */
#include "core/status.h"    /* tess_status */
#include "nn/attention.h"   /* tess_nn_attention_dims */
#include "nn/ffn.h"         /* tess_nn_ffn */
#include "nn/registry.h"    /* tess_registry */

typedef enum { TESS_NN_NORM_RMS = 0, TESS_NN_NORM_LAYER, TESS_NN_NORM_COUNT } tess_nn_norm_kind;

/* Names for config options (TESS_OPT_ENUM, core/config.h). */
static const tess_opt_enum tess_nn_norm_kind_names[] = {{"rmsnorm", TESS_NN_NORM_RMS},
                                                        {"layernorm", TESS_NN_NORM_LAYER}};
TESS_OPT_ENUM_TABLE_CHECK(tess_nn_norm_kind_names, TESS_NN_NORM_COUNT);

/* ---------- a norm with its parameters ---------- */

/* RMSNorm or LayerNorm over C channels: gain "<name>.w" (C) = 1, LayerNorm bias "<name>.b" (C)
 * = 0. Activations: out (max_N,C), rstd (max_N), mean (max_N, LayerNorm only, else NULL). */
typedef struct {
    tess_nn_norm_kind kind;
    int64_t C;
    float eps;
    tess_registry *reg;      /* borrowed */
    int64_t w, b;            /* registry indices; b = -1 for RMSNorm */
    float *out, *mean, *rstd;
} tess_nn_normp;

tess_status tess_nn_normp_add_params(tess_nn_normp *p, tess_registry *reg, const char *name);
tess_status tess_nn_normp_carve(tess_nn_normp *p, tess_arena *a, int64_t max_N);
/* p->out (N,C) = norm(in (N,C)). */
void tess_nn_normp_forward(tess_nn_normp *p, const float *in, int64_t N);
/* din (N,C) += d/d in; dout (N,C); in as in forward. */
void tess_nn_normp_backward(tess_nn_normp *p, float *din, const float *dout, const float *in,
                            int64_t N);

/* ---------- configuration and shared scratch ---------- */

typedef struct {
    int64_t T, C, NH;        /* length of the attended axis, channels, heads (C % NH == 0) */
    tess_nn_norm_kind norm;
    float norm_eps;          /* > 0 */
    bool causal;             /* query t attends to keys s <= t only */
    bool rope;               /* rotary positions along the attended axis (head size even) */
    float rope_base;         /* > 0 when rope */
    double std, out_std;     /* init: w_qkv ~ N(0, std), the residual output w_o ~ N(0, out_std) */
} tess_nn_block_config;

/* TESS_ERR_CONFIG naming the field for an invalid config or max_B < 1. Pure. */
tess_status tess_nn_block_config_check(const tess_nn_block_config *cfg, int64_t max_B);

/* Scratch shared by the blocks of a model: fit it to every block (tess_nn_block_scratch_fit),
 * then carve it once. */
typedef struct {
    int64_t nc, natt, nffn;       /* floats: max N*C, attention scratch, feed-forward scratch */
    float *tmp, *dtmp, *dtmp2;    /* (N,C) each */
    float *dqkv;                  /* (N,3C) */
    float *att, *ffn;             /* natt, nffn floats */
} tess_nn_block_scratch;

/* ---------- attention sub-block ---------- */

typedef struct {
    tess_nn_block_config cfg;
    int64_t max_B;
    tess_nn_attention_dims att; /* B = max_B; lowered per call */
    tess_nn_normp norm;
    tess_registry *reg;         /* borrowed */
    int64_t w_qkv, w_o;         /* (3C,C), (C,C) registry indices */
    float *qkv, *cache, *atty;  /* (N,3C), attention cache, (N,C) attention output before w_o */
    const float *in;            /* of the last forward, borrowed */
    int64_t B;
} tess_nn_attn_sub;

/* Check cfg (TESS_ERR_CONFIG) and set s up for up to max_B sequences. */
tess_status tess_nn_attn_sub_init(tess_nn_attn_sub *s, const tess_nn_block_config *cfg,
                                  int64_t max_B);
/* Registers "<norm_name>.w" [".b"], "<attn_prefix>.w_qkv", "<attn_prefix>.w_o". */
tess_status tess_nn_attn_sub_add_params(tess_nn_attn_sub *s, tess_registry *reg,
                                        const char *norm_name, const char *attn_prefix);
tess_status tess_nn_attn_sub_carve(tess_nn_attn_sub *s, tess_arena *a);
/* out (B,T,C) = in + attn(...); out must not alias in; kmask (B,T) or NULL. */
void tess_nn_attn_sub_forward(tess_nn_attn_sub *s, float *out, const float *in,
                              const uint8_t *kmask, int64_t B, const tess_nn_block_scratch *scr);
/* dx (B,T,C): d/d out in, d/d in out (in place). B of the last forward. */
void tess_nn_attn_sub_backward(tess_nn_attn_sub *s, float *dx, const tess_nn_block_scratch *scr);

/* ---------- feed-forward sub-block ---------- */

typedef struct {
    int64_t C, max_N;
    tess_nn_normp norm;
    tess_nn_ffn *ffn;  /* owned */
    const float *in;   /* of the last forward, borrowed */
    int64_t N;
} tess_nn_ffn_sub;

/* Set s up around ffn, which s owns from now on (also when this fails). */
tess_status tess_nn_ffn_sub_init(tess_nn_ffn_sub *s, const tess_nn_block_config *cfg,
                                 int64_t max_N, tess_nn_ffn *ffn);
/* Registers "<norm_name>.w" [".b"] and the feed-forward's parameters under ffn_prefix. */
tess_status tess_nn_ffn_sub_add_params(tess_nn_ffn_sub *s, tess_registry *reg,
                                       const char *norm_name, const char *ffn_prefix);
tess_status tess_nn_ffn_sub_carve(tess_nn_ffn_sub *s, tess_arena *a);
/* out (N,C) = in + ffn(norm(in)); out must not alias in. */
void tess_nn_ffn_sub_forward(tess_nn_ffn_sub *s, float *out, const float *in, int64_t N,
                             const tess_nn_block_scratch *scr);
/* dx (N,C) in place, as tess_nn_attn_sub_backward. */
void tess_nn_ffn_sub_backward(tess_nn_ffn_sub *s, float *dx, const tess_nn_block_scratch *scr);
void tess_nn_ffn_sub_destroy(tess_nn_ffn_sub *s);

/* ---------- the block ---------- */

typedef struct tess_nn_block tess_nn_block;

/* A block for up to max_B sequences around ffn (owned from now on, also on failure).
 * TESS_ERR_CONFIG for a bad cfg, TESS_ERR_MEM. */
tess_status tess_nn_block_create(tess_nn_block **b, const tess_nn_block_config *cfg,
                                 int64_t max_B, tess_nn_ffn *ffn);
/* NULL-safe; frees the feed-forward too; sets *b = NULL. */
void tess_nn_block_destroy(tess_nn_block **b);
/* Registers, in this order, "<prefix>.norm1.w" [".b"], "<prefix>.attn.w_qkv",
 * "<prefix>.attn.w_o", "<prefix>.norm2.w" [".b"], then the feed-forward under "<prefix>.mlp":
 * a contiguous range of registry entries starting at tess_nn_block_first_param. */
tess_status tess_nn_block_add_params(tess_nn_block *b, tess_registry *reg, const char *prefix);
int64_t tess_nn_block_first_param(const tess_nn_block *b);
/* Carve the block's activations (caches for backward) from a. */
tess_status tess_nn_block_carve(tess_nn_block *b, tess_arena *a);
/* Raise s's sizes to fit b. */
void tess_nn_block_scratch_fit(tess_nn_block_scratch *s, const tess_nn_block *b);
tess_status tess_nn_block_scratch_carve(tess_nn_block_scratch *s, tess_arena *a);
/* out (B,T,C) = block(in (B,T,C)); out must not alias in; in borrowed until backward. Needs the
 * registry finalized. */
void tess_nn_block_forward(tess_nn_block *b, float *out, const float *in, const uint8_t *kmask,
                           int64_t B, const tess_nn_block_scratch *scr);
/* dx (B,T,C) in place: d/d out on entry, d/d in on return; grads ADDED into the registry. */
void tess_nn_block_backward(tess_nn_block *b, float *dx, const tess_nn_block_scratch *scr);
/* Weights one token meets in matmuls (attention projections plus the feed-forward's). */
double tess_nn_block_matmul_params_per_token(const tess_nn_block *b);

#endif

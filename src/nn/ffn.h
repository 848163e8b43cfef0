/* ffn.h - the feed-forward interface of a transformer block, and the dense MLPs (SwiGLU, GELU)
 * that implement it. A block calls its feed-forward only through this interface, so an expert
 * layer (MoE) replaces the dense MLP by implementing the same five operations.
 *
 * Lifecycle of one feed-forward f, inside a model's setup:
 *   1. create it (tess_nn_ffn_dense_create, or an implementation's own create);
 *   2. tess_nn_ffn_add_params(f, reg, "layers.3.mlp"): it registers its parameters, with their
 *      declared init (tess_registry_set_init), into the not yet finalized registry reg, under the
 *      prefix (names "<prefix>.<leaf>"); reg is borrowed and must outlive f;
 *   3. tess_nn_ffn_carve(f, arena, max_N) on a measuring arena, then on the real one: it takes
 *      its forward caches for up to max_N rows (tess_nn_ffn_activation_bytes measures that);
 *   4. after the caller finalized reg: forward and backward any number of times, N <= max_N rows,
 *      with caller-provided scratch of tess_nn_ffn_scratch_floats(f, max_N) floats that may be
 *      shared by every feed-forward of a model (it is dead between calls);
 *   5. tess_nn_ffn_destroy.
 *
 * Shapes: N rows (B*T flattened), C channels. forward: out (N,C) = ffn(in (N,C)), overwritten;
 * it keeps what backward needs (in is borrowed until backward). backward: din (N,C) += d/d in,
 * and ADDS into the registry's gradients of f's parameters. Nothing is allocated after carve
 * (an implementation that must size buffers from data exchanged in forward says so: the
 * dropless expert-parallel MoE layer, nn/moe.h).
 * Not collective for the dense MLPs; an implementation that is (an expert layer exchanging tokens)
 * says on which group, and every rank of it must call forward/backward alike. */
#ifndef TESS_NN_FFN_H
#define TESS_NN_FFN_H

#include <stdint.h>

#include "core/arena.h"   /* tess_arena */
#include "core/config.h"  /* tess_opt_enum */
#include "core/status.h"  /* tess_status */
#include "nn/registry.h"  /* tess_registry */

typedef struct tess_nn_ffn tess_nn_ffn;

/* The operations an implementation provides; see the lifecycle above for the contracts. */
typedef struct {
    tess_status (*add_params)(tess_nn_ffn *f, tess_registry *reg, const char *prefix);
    tess_status (*carve)(tess_nn_ffn *f, tess_arena *a, int64_t max_N);
    int64_t (*scratch_floats)(const tess_nn_ffn *f, int64_t max_N);
    void (*forward)(tess_nn_ffn *f, float *out, const float *in, int64_t N);
    void (*backward)(tess_nn_ffn *f, float *din, float *scratch, const float *dout, int64_t N);
    /* Weights one token meets in matmuls (for 6 * params * tokens FLOP counts). */
    double (*matmul_params_per_token)(const tess_nn_ffn *f);
    void (*destroy)(tess_nn_ffn *f); /* frees f itself */
} tess_nn_ffn_ops;

/* The common head of every implementation: an implementation's struct starts with it. */
struct tess_nn_ffn {
    const tess_nn_ffn_ops *ops;
    int64_t C;         /* model channels (input and output width) */
    tess_registry *reg; /* set by add_params; borrowed */
};

/* Dispatchers of the operations (add_params sets f->reg). */
tess_status tess_nn_ffn_add_params(tess_nn_ffn *f, tess_registry *reg, const char *prefix);
tess_status tess_nn_ffn_carve(tess_nn_ffn *f, tess_arena *a, int64_t max_N);
/* Bytes carve takes for max_N rows: a dry run on a measuring arena, which leaves f's activation
 * pointers NULL, so call it before the real tess_nn_ffn_carve (or carve again after it). */
int64_t tess_nn_ffn_activation_bytes(tess_nn_ffn *f, int64_t max_N);
int64_t tess_nn_ffn_scratch_floats(const tess_nn_ffn *f, int64_t max_N);
void tess_nn_ffn_forward(tess_nn_ffn *f, float *out, const float *in, int64_t N);
void tess_nn_ffn_backward(tess_nn_ffn *f, float *din, float *scratch, const float *dout, int64_t N);
double tess_nn_ffn_matmul_params_per_token(const tess_nn_ffn *f);
/* NULL-safe; sets *f = NULL. */
void tess_nn_ffn_destroy(tess_nn_ffn **f);

/* The dense MLPs of nn/mlp.h. */
typedef enum { TESS_NN_FFN_SWIGLU = 0, TESS_NN_FFN_GELU, TESS_NN_FFN_COUNT } tess_nn_ffn_kind;

/* Names for config options (TESS_OPT_ENUM, core/config.h). */
static const tess_opt_enum tess_nn_ffn_kind_names[] = {{"swiglu", TESS_NN_FFN_SWIGLU},
                                                       {"gelu", TESS_NN_FFN_GELU}};
TESS_OPT_ENUM_TABLE_CHECK(tess_nn_ffn_kind_names, TESS_NN_FFN_COUNT);

/* A dense MLP of hidden width F. Parameters (names under the prefix, declared init):
 *   SwiGLU: w_gate (F,C), w_up (F,C) ~ N(0, std); w_down (C,F) ~ N(0, out_std).
 *   GELU:   w_fc (F,C) ~ N(0, std), b_fc (F) = 0; w_proj (C,F) ~ N(0, out_std), b_proj (C) = 0.
 * out_std is the residual-output std (GPT-2: std / sqrt(2 L)). TESS_ERR_ARG for C, F < 1, a
 * negative std or an unknown kind; TESS_ERR_MEM. */
tess_status tess_nn_ffn_dense_create(tess_nn_ffn **f, tess_nn_ffn_kind kind, int64_t C, int64_t F,
                                     double std, double out_std);

#endif

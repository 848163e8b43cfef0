/* mlp.h - the two transformer feed-forward blocks, forward and backward, fast and reference:
 *   GELU MLP (GPT-2):            out = gelu(in @ w_fc^T + b_fc) @ w_proj^T + b_proj
 *   SwiGLU MLP (LLaMA, no bias): out = (silu(in @ w_gate^T) * (in @ w_up^T)) @ w_down^T
 * GELU is the tanh approximation (nn/activation.h). Weights are stored (out, in) as in PyTorch.
 *
 * Dimension letters: N rows (B*T flattened), C model channels, F hidden channels.
 * Layer convention (docs/nn.md): outputs, caches, inputs, parameters, dimensions; forward
 * overwrites its outputs and caches; backward ADDS into every gradient, din included.
 * Both backwards need tess_nn_mlp_scratch_size(N, F) floats of caller-provided scratch; nothing
 * is recomputed that the cache holds, and nothing is allocated. Not collective. */
#ifndef TESS_NN_MLP_H
#define TESS_NN_MLP_H

#include <stdint.h>

/* Floats of scratch needed by either MLP backward (2*N*F). */
int64_t tess_nn_mlp_scratch_size(int64_t N, int64_t F);

/* out (N,C); caches pre (N,F) = in @ w_fc^T + b_fc and act (N,F) = gelu(pre); in (N,C);
 * w_fc (F,C); b_fc (F) or NULL; w_proj (C,F); b_proj (C) or NULL. */
void tess_nn_mlp_gelu_forward(float *out, float *pre, float *act, const float *in,
                              const float *w_fc, const float *b_fc, const float *w_proj,
                              const float *b_proj, int64_t N, int64_t C, int64_t F);
/* din (N,C) or NULL; dw_fc (F,C); db_fc (F) or NULL; dw_proj (C,F); db_proj (C) or NULL: all +=.
 * scratch (tess_nn_mlp_scratch_size), clobbered; dout (N,C); in, w_fc, w_proj, pre, act as in
 * forward. */
void tess_nn_mlp_gelu_backward(float *din, float *dw_fc, float *db_fc, float *dw_proj,
                               float *db_proj, float *scratch, const float *dout, const float *in,
                               const float *w_fc, const float *w_proj, const float *pre,
                               const float *act, int64_t N, int64_t C, int64_t F);

/* out (N,C); caches gate (N,F) = in @ w_gate^T, up (N,F) = in @ w_up^T and
 * h (N,F) = silu(gate) * up; in (N,C); w_gate (F,C); w_up (F,C); w_down (C,F). */
void tess_nn_mlp_swiglu_forward(float *out, float *gate, float *up, float *h, const float *in,
                                const float *w_gate, const float *w_up, const float *w_down,
                                int64_t N, int64_t C, int64_t F);
/* din (N,C) or NULL; dw_gate (F,C); dw_up (F,C); dw_down (C,F): all +=. scratch
 * (tess_nn_mlp_scratch_size), clobbered; dout (N,C); the rest as in forward. */
void tess_nn_mlp_swiglu_backward(float *din, float *dw_gate, float *dw_up, float *dw_down,
                                 float *scratch, const float *dout, const float *in,
                                 const float *w_gate, const float *w_up, const float *w_down,
                                 const float *gate, const float *up, const float *h, int64_t N,
                                 int64_t C, int64_t F);

/* References with the same contracts: linear layers by tess_nn_linear_*_ref (double
 * accumulation) and the activations and their derivatives evaluated in double. */
void tess_nn_mlp_gelu_forward_ref(float *out, float *pre, float *act, const float *in,
                                  const float *w_fc, const float *b_fc, const float *w_proj,
                                  const float *b_proj, int64_t N, int64_t C, int64_t F);
void tess_nn_mlp_gelu_backward_ref(float *din, float *dw_fc, float *db_fc, float *dw_proj,
                                   float *db_proj, float *scratch, const float *dout,
                                   const float *in, const float *w_fc, const float *w_proj,
                                   const float *pre, const float *act, int64_t N, int64_t C,
                                   int64_t F);
void tess_nn_mlp_swiglu_forward_ref(float *out, float *gate, float *up, float *h,
                                    const float *in, const float *w_gate, const float *w_up,
                                    const float *w_down, int64_t N, int64_t C, int64_t F);
void tess_nn_mlp_swiglu_backward_ref(float *din, float *dw_gate, float *dw_up, float *dw_down,
                                     float *scratch, const float *dout, const float *in,
                                     const float *w_gate, const float *w_up, const float *w_down,
                                     const float *gate, const float *up, const float *h,
                                     int64_t N, int64_t C, int64_t F);

#endif

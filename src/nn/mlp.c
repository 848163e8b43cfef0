/* mlp.c - GELU and SwiGLU feed-forward blocks over the linear layer and the activations
 * (see mlp.h). */
#include "nn/mlp.h"

#include <math.h>
#include <string.h>

#include "nn/activation.h" /* tess_nn_gelu_*, tess_nn_swiglu_gate_* */
#include "nn/linear.h"     /* tess_nn_linear_* */
#include "tensor/matmul.h" /* tess_matmul_tiles */

int64_t tess_nn_mlp_scratch_size(int64_t N, int64_t F) { return 2 * N * F; }

void tess_nn_mlp_gelu_forward(float *out, float *pre, float *act, const float *in,
                              const float *w_fc, const float *b_fc, const float *w_proj,
                              const float *b_proj, int64_t N, int64_t C, int64_t F) {
    /* out (N,C); pre, act (N,F); in (N,C); w_fc (F,C); b_fc (F); w_proj (C,F); b_proj (C) */
    tess_nn_linear_tiles_forward(pre, in, w_fc, b_fc, N, C, F);
    tess_nn_gelu_forward(act, pre, N * F);
    tess_nn_linear_tiles_forward(out, act, w_proj, b_proj, N, F, C);
}

void tess_nn_mlp_gelu_backward(float *din, float *dw_fc, float *db_fc, float *dw_proj,
                               float *db_proj, float *scratch, const float *dout, const float *in,
                               const float *w_fc, const float *w_proj, const float *pre,
                               const float *act, int64_t N, int64_t C, int64_t F) {
    /* din (N,C); dw_fc (F,C); db_fc (F); dw_proj (C,F); db_proj (C); scratch (2NF);
     * dout (N,C); in (N,C); w_fc (F,C); w_proj (C,F); pre, act (N,F) */
    float *g = scratch; /* (N,F): d/d act, then d/d pre in place; nothing to zero */
    /* g = dout (N,C) @ w_proj (C,F) */
    tess_matmul_tiles(g, F, dout, C, w_proj, F, N, F, C, false, false, 1.0f, 0.0f, NULL);
    tess_nn_linear_tiles_backward(NULL, dw_proj, db_proj, dout, act, w_proj, N, F, C);
    tess_nn_gelu_backward_inplace(g, pre, N * F);
    tess_nn_linear_tiles_backward(din, dw_fc, db_fc, g, in, w_fc, N, C, F);
}

void tess_nn_mlp_swiglu_forward(float *out, float *gate, float *up, float *h, const float *in,
                                const float *w_gate, const float *w_up, const float *w_down,
                                int64_t N, int64_t C, int64_t F) {
    /* out (N,C); gate, up, h (N,F); in (N,C); w_gate, w_up (F,C); w_down (C,F) */
    tess_nn_linear_tiles_forward(gate, in, w_gate, NULL, N, C, F);
    tess_nn_linear_tiles_forward(up, in, w_up, NULL, N, C, F);
    tess_nn_swiglu_gate_forward(h, gate, up, N * F);
    tess_nn_linear_tiles_forward(out, h, w_down, NULL, N, F, C);
}

void tess_nn_mlp_swiglu_backward(float *din, float *dw_gate, float *dw_up, float *dw_down,
                                 float *scratch, const float *dout, const float *in,
                                 const float *w_gate, const float *w_up, const float *w_down,
                                 const float *gate, const float *up, const float *h, int64_t N,
                                 int64_t C, int64_t F) {
    /* din (N,C); dw_gate, dw_up (F,C); dw_down (C,F); scratch (2NF); dout (N,C); in (N,C);
     * w_gate, w_up (F,C); w_down (C,F); gate, up, h (N,F) */
    const int64_t n = N * F;
    float *dh = scratch;      /* (N,F): d/dh, then d/dgate (overwritten in place) */
    float *dup = scratch + n; /* (N,F): d/dup */
    /* dh = dout (N,C) @ w_down (C,F) */
    tess_matmul_tiles(dh, F, dout, C, w_down, F, N, F, C, false, false, 1.0f, 0.0f, NULL);
    tess_nn_linear_tiles_backward(NULL, dw_down, NULL, dout, h, w_down, N, F, C);
    tess_nn_swiglu_gate_backward_overwrite(dh, dup, gate, up, n);
    tess_nn_linear_tiles_backward(din, dw_up, NULL, dup, in, w_up, N, C, F);
    tess_nn_linear_tiles_backward(din, dw_gate, NULL, dh, in, w_gate, N, C, F);
}

/* The activations and their derivatives in double, independent of nn/activation.c: the oracle. */
#define GELU_REF_K 0.79788456080286535588 /* sqrt(2/pi) */

static double gelu_ref(double x) {
    const double k = GELU_REF_K;
    return 0.5 * x * (1.0 + tanh(k * (x + 0.044715 * x * x * x)));
}

static double gelu_grad_ref(double x) {
    const double k = GELU_REF_K;
    double t = tanh(k * (x + 0.044715 * x * x * x));
    return 0.5 * (1.0 + t) + 0.5 * x * (1.0 - t * t) * k * (1.0 + 3.0 * 0.044715 * x * x);
}

static double sigmoid_ref(double x) { return 1.0 / (1.0 + exp(-x)); }

void tess_nn_mlp_gelu_forward_ref(float *out, float *pre, float *act, const float *in,
                                  const float *w_fc, const float *b_fc, const float *w_proj,
                                  const float *b_proj, int64_t N, int64_t C, int64_t F) {
    /* out (N,C); pre, act (N,F); in (N,C); w_fc (F,C); b_fc (F); w_proj (C,F); b_proj (C) */
    tess_nn_linear_forward_ref(pre, in, w_fc, b_fc, N, C, F);
    for (int64_t i = 0; i < N * F; i++) act[i] = (float)gelu_ref(pre[i]);
    tess_nn_linear_forward_ref(out, act, w_proj, b_proj, N, F, C);
}

void tess_nn_mlp_gelu_backward_ref(float *din, float *dw_fc, float *db_fc, float *dw_proj,
                                   float *db_proj, float *scratch, const float *dout,
                                   const float *in, const float *w_fc, const float *w_proj,
                                   const float *pre, const float *act, int64_t N, int64_t C,
                                   int64_t F) {
    /* as tess_nn_mlp_gelu_backward */
    float *dact = scratch, *dpre = scratch + N * F; /* (N,F) each */
    memset(dact, 0, (size_t)(N * F) * sizeof(float));
    tess_nn_linear_backward_ref(dact, dw_proj, db_proj, dout, act, w_proj, N, F, C);
    for (int64_t i = 0; i < N * F; i++) dpre[i] = (float)(dact[i] * gelu_grad_ref(pre[i]));
    tess_nn_linear_backward_ref(din, dw_fc, db_fc, dpre, in, w_fc, N, C, F);
}

void tess_nn_mlp_swiglu_forward_ref(float *out, float *gate, float *up, float *h,
                                    const float *in, const float *w_gate, const float *w_up,
                                    const float *w_down, int64_t N, int64_t C, int64_t F) {
    /* out (N,C); gate, up, h (N,F); in (N,C); w_gate, w_up (F,C); w_down (C,F) */
    tess_nn_linear_forward_ref(gate, in, w_gate, NULL, N, C, F);
    tess_nn_linear_forward_ref(up, in, w_up, NULL, N, C, F);
    for (int64_t i = 0; i < N * F; i++) {
        h[i] = (float)((double)gate[i] * sigmoid_ref(gate[i]) * (double)up[i]);
    }
    tess_nn_linear_forward_ref(out, h, w_down, NULL, N, F, C);
}

void tess_nn_mlp_swiglu_backward_ref(float *din, float *dw_gate, float *dw_up, float *dw_down,
                                     float *scratch, const float *dout, const float *in,
                                     const float *w_gate, const float *w_up, const float *w_down,
                                     const float *gate, const float *up, const float *h,
                                     int64_t N, int64_t C, int64_t F) {
    /* as tess_nn_mlp_swiglu_backward */
    float *dh = scratch, *dz = scratch + N * F; /* (N,F) each: dh, then dup and dgate in dz */
    memset(dh, 0, (size_t)(N * F) * sizeof(float));
    tess_nn_linear_backward_ref(dh, dw_down, NULL, dout, h, w_down, N, F, C);
    for (int64_t i = 0; i < N * F; i++) {
        dz[i] = (float)((double)dh[i] * gate[i] * sigmoid_ref(gate[i]));
    }
    tess_nn_linear_backward_ref(din, dw_up, NULL, dz, in, w_up, N, C, F);
    for (int64_t i = 0; i < N * F; i++) {
        double x = gate[i], s = sigmoid_ref(x);
        dz[i] = (float)((double)dh[i] * up[i] * s * (1.0 + x * (1.0 - s)));
    }
    tess_nn_linear_backward_ref(din, dw_gate, NULL, dz, in, w_gate, N, C, F);
}

/* activation.c - GELU (tanh) and SiLU, forward and backward (see activation.h).
 * Both are written through sigmoid(z) = 1 / (1 + q), q = e^-z, with 1 - sigmoid(z) = q sigmoid(z):
 * no cancellation in either tail, and every loop vectorises (tess_tensor_expf, no libm).
 * GELU uses 0.5 (1 + tanh(u)) = sigmoid(2u). */
#include "nn/activation.h"

#include "tensor/tensor.h" /* tess_tensor_expf */

#define GELU_K 0.7978845608028654f /* sqrt(2/pi) */
#define GELU_A 0.044715f

void tess_nn_gelu_forward(float *out, const float *in, int64_t n) {
    for (int64_t i = 0; i < n; i++) {
        float x = in[i];
        float u = GELU_K * (x + GELU_A * x * x * x);
        out[i] = x / (1.0f + tess_tensor_expf(-2.0f * u));
    }
}

/* gelu'(x): d/dx [x s] = s + x * 2 s (1 - s) * du/dx, s = sigmoid(2u), du/dx = K (1 + 3 A x^2) */
static inline float gelu_grad(float x) {
    float u = GELU_K * (x + GELU_A * x * x * x);
    float q = tess_tensor_expf(-2.0f * u);
    float s = 1.0f / (1.0f + q); /* sigmoid(2u) */
    float du = GELU_K * (1.0f + 3.0f * GELU_A * x * x);
    return s + 2.0f * x * du * s * (q * s);
}

void tess_nn_gelu_backward(float *restrict din, const float *restrict dout,
                           const float *restrict in, int64_t n) {
    for (int64_t i = 0; i < n; i++) din[i] += dout[i] * gelu_grad(in[i]);
}

void tess_nn_gelu_backward_inplace(float *restrict g, const float *restrict in, int64_t n) {
    for (int64_t i = 0; i < n; i++) g[i] *= gelu_grad(in[i]);
}

void tess_nn_silu_forward(float *out, const float *in, int64_t n) {
    for (int64_t i = 0; i < n; i++) {
        float x = in[i];
        out[i] = x / (1.0f + tess_tensor_expf(-x));
    }
}

void tess_nn_silu_backward(float *restrict din, const float *restrict dout,
                           const float *restrict in, int64_t n) {
    for (int64_t i = 0; i < n; i++) {
        float x = in[i];
        float q = tess_tensor_expf(-x);
        float s = 1.0f / (1.0f + q);
        /* d/dx [x s] = s (1 + x (1 - s)) */
        din[i] += dout[i] * s * (1.0f + x * (q * s));
    }
}

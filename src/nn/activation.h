/* activation.h - elementwise activations for the MLPs: GELU (tanh approximation, as GPT-2 and
 * PyTorch's gelu(approximate="tanh")) and SiLU (x * sigmoid(x), the gate of SwiGLU).
 *
 * Layer convention (docs/nn.md): forward overwrites out; backward ADDS into din. All buffers (n).
 * out may alias in (in-place activation); din must not alias dout or in. Not collective. */
#ifndef TESS_NN_ACTIVATION_H
#define TESS_NN_ACTIVATION_H

#include <stdint.h>

/* out = 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))) */
void tess_nn_gelu_forward(float *out, const float *in, int64_t n);
/* din += dout * gelu'(in) */
void tess_nn_gelu_backward(float *din, const float *dout, const float *in, int64_t n);
/* g = g * gelu'(in), OVERWRITING g (the gradient of the output becomes that of the input; bitwise
 * what tess_nn_gelu_backward adds into zeros), for callers that own the buffer; g must not alias
 * in. */
void tess_nn_gelu_backward_inplace(float *g, const float *in, int64_t n);

/* out = x / (1 + exp(-x)) */
void tess_nn_silu_forward(float *out, const float *in, int64_t n);
/* din += dout * s (1 + x (1 - s)), s = sigmoid(x) */
void tess_nn_silu_backward(float *din, const float *dout, const float *in, int64_t n);

#endif

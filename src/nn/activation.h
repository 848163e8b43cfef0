/* activation.h - elementwise activations for the MLPs: GELU (tanh approximation, as GPT-2 and
 * PyTorch's gelu(approximate="tanh")), SiLU (x * sigmoid(x)) and the SwiGLU gate
 * silu(gate) * up that the SwiGLU MLP (nn/mlp.h) and the MoE experts (nn/moe.h) share.
 *
 * Layer convention (docs/nn.md): forward overwrites out; backward ADDS into din. All buffers (n).
 * out may alias in (in-place activation); din must not alias dout or in. The SwiGLU gate's
 * backward is the exception, named so: it OVERWRITES (its callers own the buffers). Not
 * collective. */
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

/* h = silu(gate) * up = gate / (1 + exp(-gate)) * up. h, gate, up (n); h must not alias them.
 * Bit for bit the same with and without AVX-512 (one formula, tess_tensor_expf's arithmetic). */
void tess_nn_swiglu_gate_forward(float *h, const float *gate, const float *up, int64_t n);
/* From dh = dL/dh: dup = dh * silu(gate), and dh is OVERWRITTEN in place by
 * dgate = dh * up * s (1 + gate (1 - s)), s = sigmoid(gate). dh, dup, gate, up (n), distinct. */
void tess_nn_swiglu_gate_backward_overwrite(float *dh, float *dup, const float *gate,
                                            const float *up, int64_t n);

#endif

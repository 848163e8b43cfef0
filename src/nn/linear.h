/* linear.h - the fully connected layer out = in @ w^T + b, with w stored (OC, C) as in PyTorch,
 * forward and backward through tess_matmul (BLAS, transposes as flags, no copies), and naive
 * double-accumulation references beside them.
 *
 * Layer convention (docs/nn.md): outputs, caches, inputs, parameters, dimensions; inputs const;
 * backward ADDS into every gradient it is given. Not collective; no allocation.
 * N = rows (B*T flattened), C = input channels, OC = output channels. */
#ifndef TESS_NN_LINEAR_H
#define TESS_NN_LINEAR_H

#include <stdint.h>

/* out (N,OC) = in (N,C) @ w^T; w (OC,C); b (OC) or NULL for no bias. out is overwritten and must
 * not alias in or w. */
void tess_nn_linear_forward(float *out, const float *in, const float *w, const float *b,
                            int64_t N, int64_t C, int64_t OC);

/* din (N,C) += dout @ w; dw (OC,C) += dout^T @ in; db (OC) += column sums of dout.
 * dout (N,OC); in (N,C); w (OC,C). din or db may be NULL (that gradient is skipped); dw may not. */
void tess_nn_linear_backward(float *din, float *dw, float *db, const float *dout, const float *in,
                             const float *w, int64_t N, int64_t C, int64_t OC);

/* The same two contracts through tess_matmul_tiles (tensor/matmul.h: AVX-512 register tiles, no
 * packing of the (N, C) operand, the bias added in the product's epilogue) for layers of N in the
 * thousands and C, OC of 16-1024: the graph layers of apps/fedkalter, the transformer block's
 * projections, the dense MLPs and the lm head (nn/block.c, nn/mlp.c, nn/head.c). Rounding differs
 * from the BLAS path (tess_matmul_tiles' summation order); the references below are theirs too. */
void tess_nn_linear_tiles_forward(float *out, const float *in, const float *w, const float *b,
                                  int64_t N, int64_t C, int64_t OC);
void tess_nn_linear_tiles_backward(float *din, float *dw, float *db, const float *dout,
                                   const float *in, const float *w, int64_t N, int64_t C,
                                   int64_t OC);

/* Same contracts, triple loops accumulating in double: the oracle for tests. */
void tess_nn_linear_forward_ref(float *out, const float *in, const float *w, const float *b,
                                int64_t N, int64_t C, int64_t OC);
void tess_nn_linear_backward_ref(float *din, float *dw, float *db, const float *dout,
                                 const float *in, const float *w, int64_t N, int64_t C, int64_t OC);

#endif

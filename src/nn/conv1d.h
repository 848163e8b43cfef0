/* conv1d.h - 1-d convolution over time, left-padded (causal) and strided, and its transpose,
 * on channel-last sequences: a sequence is (L, C), row t holding the C channels at time t, so a
 * batch (B, L, C) is the (N, C) row layout of every other layer. Weights are stored as in
 * PyTorch: Conv1d (OC, C, K), ConvTranspose1d (C, OC, K).
 *
 * Conv1d:  out[b, t, o] = bias[o] + sum_{c,k} w[o, c, k] in[b, t*stride - pad + k, c]
 *          (positions outside [0, L) read 0); Lout = (L + pad - K) / stride + 1.
 *          pad = K - 1, stride 1 is the causal convolution (out[t] sees in[<= t]); pad 0,
 *          stride = K = P cuts a sequence into patches of P frames.
 * ConvT1d: out[b, l*stride + k, o] = bias[o] + sum_{c} w[c, o, k] in[b, l, c];
 *          Lout = (L - 1) * stride + K (no padding, no output padding).
 *
 * Both run as one GEMM (tess_matmul) on an unfolded matrix "col" that the caller provides:
 * conv1d col (B*Lout, C*K) is filled by forward and kept for backward (a cache); convt1d col
 * (B*L, OC*K) is forward scratch and backward scratch. Backward ADDS into every gradient.
 * Naive loops with double accumulation (_ref, no col) are the oracles. Not collective; no
 * allocation. */
#ifndef TESS_NN_CONV1D_H
#define TESS_NN_CONV1D_H

#include <stdint.h>

typedef struct {
    int64_t B, L;     /* sequences, input length */
    int64_t C, OC, K; /* input channels, output channels, kernel width */
    int64_t stride;   /* >= 1 */
    int64_t pad;      /* conv1d only: zeros on the left, 0 <= pad < K + stride */
} tess_nn_conv1d_dims;

/* Output length of the convolution (<= 0 if L + pad < K) and of the transposed convolution. */
int64_t tess_nn_conv1d_out_len(const tess_nn_conv1d_dims *d);
int64_t tess_nn_convt1d_out_len(const tess_nn_conv1d_dims *d);
/* Floats of col: conv1d B*Lout*C*K, convt1d B*L*OC*K. */
int64_t tess_nn_conv1d_col_size(const tess_nn_conv1d_dims *d);
int64_t tess_nn_convt1d_col_size(const tess_nn_conv1d_dims *d);

/* out (B, Lout, OC) = conv(in (B, L, C)) with w (OC, C, K), b (OC) or NULL; col (B*Lout, C*K)
 * written (the cache backward reads). out must not alias in. */
void tess_nn_conv1d_forward(float *out, float *col, const float *in, const float *w,
                            const float *b, const tess_nn_conv1d_dims *d);
/* din (B, L, C) += ..., dw (OC, C, K) += ..., db (OC) += column sums of dout; dcol (B*Lout, C*K)
 * scratch (overwritten; not read when din is NULL, and may be NULL then). din or db may be NULL
 * (skipped). dout (B, Lout, OC); col from forward. */
void tess_nn_conv1d_backward(float *din, float *dw, float *db, float *dcol, const float *dout,
                             const float *col, const float *w, const tess_nn_conv1d_dims *d);

/* out (B, Lout, OC) = convT(in (B, L, C)) with w (C, OC, K), b (OC) or NULL; col (B*L, OC*K)
 * scratch. out must not alias in. */
void tess_nn_convt1d_forward(float *out, float *col, const float *in, const float *w,
                             const float *b, const tess_nn_conv1d_dims *d);
/* din (B, L, C) += ..., dw (C, OC, K) += ..., db (OC) += ...; col (B*L, OC*K) scratch. din or db
 * may be NULL. dout (B, Lout, OC); in (B, L, C). */
void tess_nn_convt1d_backward(float *din, float *dw, float *db, float *col, const float *dout,
                              const float *in, const float *w, const tess_nn_conv1d_dims *d);

/* Direct convolution without col, for narrow outputs (OC of a few channels: the tokenizer's
 * last convolution, c -> 1), where the GEMM on col is a matrix-vector product that streams the
 * (B*Lout, C*K) col through memory (written, read, and its gradient zeroed, written and folded
 * back) for 2 OC flops per element. Channel-last, the input rows t*stride-pad .. +K-1 that
 * output t reads lie contiguous in `in`: each output element is one dot product (in double
 * lanes, tess_tensor_dot) of that window with the weight row w[o] rearranged as (K, C), and the
 * backward adds g * window into dw's row and g * w[o] into din's window (tess_tensor_axpy),
 * output row by output row, so the sums run in a different order than the GEMM path's.
 * Windows cut by the padding use their valid part. The same contracts as tess_nn_conv1d_forward
 * and _backward (the same _ref oracles) with `in` in place of col; work (2 OC C K floats,
 * tess_nn_conv1d_direct_work_size) scratch. */
int64_t tess_nn_conv1d_direct_work_size(const tess_nn_conv1d_dims *d);
void tess_nn_conv1d_direct_forward(float *out, float *work, const float *in, const float *w,
                                   const float *b, const tess_nn_conv1d_dims *d);
void tess_nn_conv1d_direct_backward(float *din, float *dw, float *db, float *work,
                                    const float *dout, const float *in, const float *w,
                                    const tess_nn_conv1d_dims *d);

/* Patch convolutions without col: the convolution with stride = K, pad 0 and L = Lout K (the
 * tokenizer's cut of a trace into patches) and the transposed convolution with stride = K (no
 * overlap: each output frame takes one tap). Channel-last, a sequence (L, C) viewed as
 * (Lout, K C) is the conv's unfolded matrix up to the order of its columns, (k, c) instead of
 * (c, k), and the transposed conv's output (B, L K, OC) viewed as (B L, K OC) is its product
 * in (B L, C) x w; so each runs as one GEMM over the whole batch on the input itself (conv) or
 * straight into the output (convt) with the weights rearranged into that column order in work,
 * and backward adds din with a GEMM in place and dw through its rearranged copy: no unfold, no
 * fold-back, no col. The same contracts as tess_nn_conv1d_forward / _backward and
 * tess_nn_convt1d_forward / _backward (the same _ref oracles) with `in` in place of col;
 * work (2 OC C K floats, tess_nn_conv1d_patch_work_size) scratch. */
int64_t tess_nn_conv1d_patch_work_size(const tess_nn_conv1d_dims *d);
void tess_nn_conv1d_patch_forward(float *out, float *work, const float *in, const float *w,
                                  const float *b, const tess_nn_conv1d_dims *d);
void tess_nn_conv1d_patch_backward(float *din, float *dw, float *db, float *work,
                                   const float *dout, const float *in, const float *w,
                                   const tess_nn_conv1d_dims *d);
void tess_nn_convt1d_patch_forward(float *out, float *work, const float *in, const float *w,
                                   const float *b, const tess_nn_conv1d_dims *d);
void tess_nn_convt1d_patch_backward(float *din, float *dw, float *db, float *work,
                                    const float *dout, const float *in, const float *w,
                                    const tess_nn_conv1d_dims *d);

/* The same contracts as direct loops, accumulating in double (no col). */
void tess_nn_conv1d_forward_ref(float *out, const float *in, const float *w, const float *b,
                                const tess_nn_conv1d_dims *d);
void tess_nn_conv1d_backward_ref(float *din, float *dw, float *db, const float *dout,
                                 const float *in, const float *w, const tess_nn_conv1d_dims *d);
void tess_nn_convt1d_forward_ref(float *out, const float *in, const float *w, const float *b,
                                 const tess_nn_conv1d_dims *d);
void tess_nn_convt1d_backward_ref(float *din, float *dw, float *db, const float *dout,
                                  const float *in, const float *w, const tess_nn_conv1d_dims *d);

#endif

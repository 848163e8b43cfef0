/* norm.h - per-row normalisations over the channel dimension: RMSNorm (Zhang & Sennrich 2019,
 * as in LLaMA: x * rsqrt(mean(x^2) + eps) * w) and LayerNorm (PyTorch's F.layer_norm with biased
 * variance), each with the naive double-accumulation _ref beside the fast version.
 *
 * Layer convention (docs/nn.md): outputs, caches, inputs, parameters, dimensions; inputs const;
 * backward ADDS into every gradient. Forward fills the caches (rstd, mean) that backward reads.
 * N = rows (B*T flattened), C = channels. Not collective; no allocation. out may not alias in. */
#ifndef TESS_NN_NORM_H
#define TESS_NN_NORM_H

#include <stdint.h>

/* out (N,C) = in * rstd * w; rstd (N) cache = 1/sqrt(mean_c in^2 + eps); in (N,C); w (C). */
void tess_nn_rmsnorm_forward(float *out, float *rstd, const float *in, const float *w, int64_t N,
                             int64_t C, float eps);
/* din (N,C) +=, dw (C) +=; dout (N,C); in (N,C); w (C); rstd (N) from forward. */
void tess_nn_rmsnorm_backward(float *din, float *dw, const float *dout, const float *in,
                              const float *w, const float *rstd, int64_t N, int64_t C);

/* out (N,C) = (in - mean) * rstd * w + b; mean (N), rstd (N) caches (rstd = 1/sqrt(var + eps),
 * biased variance); in (N,C); w (C); b (C) or NULL for no bias. */
void tess_nn_layernorm_forward(float *out, float *mean, float *rstd, const float *in,
                               const float *w, const float *b, int64_t N, int64_t C, float eps);
/* din (N,C) +=, dw (C) +=, db (C) += (NULL: skipped); dout (N,C); in (N,C); w (C);
 * mean, rstd (N) from forward. */
void tess_nn_layernorm_backward(float *din, float *dw, float *db, const float *dout,
                                const float *in, const float *w, const float *mean,
                                const float *rstd, int64_t N, int64_t C);

/* Same contracts, sequential double accumulation: the oracles for tests. */
void tess_nn_rmsnorm_forward_ref(float *out, float *rstd, const float *in, const float *w,
                                 int64_t N, int64_t C, float eps);
void tess_nn_rmsnorm_backward_ref(float *din, float *dw, const float *dout, const float *in,
                                  const float *w, const float *rstd, int64_t N, int64_t C);
void tess_nn_layernorm_forward_ref(float *out, float *mean, float *rstd, const float *in,
                                   const float *w, const float *b, int64_t N, int64_t C,
                                   float eps);
void tess_nn_layernorm_backward_ref(float *din, float *dw, float *db, const float *dout,
                                    const float *in, const float *w, const float *mean,
                                    const float *rstd, int64_t N, int64_t C);

#endif

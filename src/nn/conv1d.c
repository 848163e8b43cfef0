/* conv1d.c - 1-d convolution and transposed convolution as unfold + GEMM, and their naive
 * references (see conv1d.h). */
#include "nn/conv1d.h"

#include <string.h>

#include "core/status.h"   /* TESS_ASSERT */
#include "tensor/matmul.h" /* tess_matmul */

int64_t tess_nn_conv1d_out_len(const tess_nn_conv1d_dims *d) {
    if (d->L + d->pad < d->K) return 0;
    return (d->L + d->pad - d->K) / d->stride + 1;
}

int64_t tess_nn_convt1d_out_len(const tess_nn_conv1d_dims *d) {
    return d->L > 0 ? (d->L - 1) * d->stride + d->K : 0;
}

int64_t tess_nn_conv1d_col_size(const tess_nn_conv1d_dims *d) {
    return d->B * tess_nn_conv1d_out_len(d) * d->C * d->K;
}

int64_t tess_nn_convt1d_col_size(const tess_nn_conv1d_dims *d) {
    return d->B * d->L * d->OC * d->K;
}

static void check(const tess_nn_conv1d_dims *d) {
    TESS_ASSERT(d->B >= 0 && d->L >= 0 && d->C > 0 && d->OC > 0 && d->K > 0 && d->stride > 0 &&
                d->pad >= 0);
}

/* ---- conv1d -------------------------------------------------------------------------------- */

void tess_nn_conv1d_forward(float *out, float *col, const float *in, const float *w,
                            const float *b, const tess_nn_conv1d_dims *d) {
    /* out (B, Lout, OC), col (B*Lout, C*K), in (B, L, C), w (OC, C*K), b (OC) or NULL */
    check(d);
    const int64_t Lo = tess_nn_conv1d_out_len(d), C = d->C, K = d->K, CK = C * K;
    for (int64_t bb = 0; bb < d->B; bb++)
        for (int64_t t = 0; t < Lo; t++) {
            float *row = col + (bb * Lo + t) * CK;
            for (int64_t k = 0; k < K; k++) {
                int64_t s = t * d->stride - d->pad + k;
                if (s < 0 || s >= d->L) {
                    for (int64_t c = 0; c < C; c++) row[c * K + k] = 0.0f;
                    continue;
                }
                const float *src = in + (bb * d->L + s) * C;
                for (int64_t c = 0; c < C; c++) row[c * K + k] = src[c];
            }
        }
    float beta = 0.0f;
    if (b) {
        for (int64_t r = 0; r < d->B * Lo; r++) memcpy(out + r * d->OC, b, (size_t)d->OC * sizeof(float));
        beta = 1.0f;
    }
    tess_matmul(out, col, w, d->B * Lo, d->OC, CK, false, true, 1.0f, beta);
}

void tess_nn_conv1d_backward(float *din, float *dw, float *db, float *dcol, const float *dout,
                             const float *col, const float *w, const tess_nn_conv1d_dims *d) {
    /* din (B, L, C) or NULL, dw (OC, C*K), db (OC) or NULL, dcol (B*Lout, C*K) scratch,
     * dout (B, Lout, OC), col (B*Lout, C*K), w (OC, C*K) */
    check(d);
    const int64_t Lo = tess_nn_conv1d_out_len(d), C = d->C, K = d->K, CK = C * K, R = d->B * Lo;
    tess_matmul(dw, dout, col, d->OC, CK, R, true, false, 1.0f, 1.0f);
    if (db)
        for (int64_t r = 0; r < R; r++)
            for (int64_t o = 0; o < d->OC; o++) db[o] += dout[r * d->OC + o];
    if (!din) return;
    tess_matmul(dcol, dout, w, R, CK, d->OC, false, false, 1.0f, 0.0f);
    for (int64_t bb = 0; bb < d->B; bb++)
        for (int64_t t = 0; t < Lo; t++) {
            const float *row = dcol + (bb * Lo + t) * CK;
            for (int64_t k = 0; k < K; k++) {
                int64_t s = t * d->stride - d->pad + k;
                if (s < 0 || s >= d->L) continue;
                float *dst = din + (bb * d->L + s) * C;
                for (int64_t c = 0; c < C; c++) dst[c] += row[c * K + k];
            }
        }
}

void tess_nn_conv1d_forward_ref(float *out, const float *in, const float *w, const float *b,
                                const tess_nn_conv1d_dims *d) {
    check(d);
    const int64_t Lo = tess_nn_conv1d_out_len(d), C = d->C, K = d->K;
    for (int64_t bb = 0; bb < d->B; bb++)
        for (int64_t t = 0; t < Lo; t++)
            for (int64_t o = 0; o < d->OC; o++) {
                double acc = b ? b[o] : 0.0;
                for (int64_t c = 0; c < C; c++)
                    for (int64_t k = 0; k < K; k++) {
                        int64_t s = t * d->stride - d->pad + k;
                        if (s >= 0 && s < d->L)
                            acc += (double)w[(o * C + c) * K + k] * in[(bb * d->L + s) * C + c];
                    }
                out[(bb * Lo + t) * d->OC + o] = (float)acc;
            }
}

void tess_nn_conv1d_backward_ref(float *din, float *dw, float *db, const float *dout,
                                 const float *in, const float *w, const tess_nn_conv1d_dims *d) {
    check(d);
    const int64_t Lo = tess_nn_conv1d_out_len(d), C = d->C, K = d->K, OC = d->OC;
    for (int64_t o = 0; o < OC; o++) {
        for (int64_t c = 0; c < C; c++)
            for (int64_t k = 0; k < K; k++) {
                double acc = 0.0;
                for (int64_t bb = 0; bb < d->B; bb++)
                    for (int64_t t = 0; t < Lo; t++) {
                        int64_t s = t * d->stride - d->pad + k;
                        if (s >= 0 && s < d->L)
                            acc += (double)dout[(bb * Lo + t) * OC + o] * in[(bb * d->L + s) * C + c];
                    }
                dw[(o * C + c) * K + k] += (float)acc;
            }
        if (db) {
            double acc = 0.0;
            for (int64_t r = 0; r < d->B * Lo; r++) acc += dout[r * OC + o];
            db[o] += (float)acc;
        }
    }
    if (!din) return;
    for (int64_t bb = 0; bb < d->B; bb++)
        for (int64_t s = 0; s < d->L; s++)
            for (int64_t c = 0; c < C; c++) {
                double acc = 0.0;
                for (int64_t t = 0; t < Lo; t++) {
                    int64_t k = s - t * d->stride + d->pad;
                    if (k < 0 || k >= K) continue;
                    for (int64_t o = 0; o < OC; o++)
                        acc += (double)dout[(bb * Lo + t) * OC + o] * w[(o * C + c) * K + k];
                }
                din[(bb * d->L + s) * C + c] += (float)acc;
            }
}

/* ---- transposed conv1d --------------------------------------------------------------------- */

void tess_nn_convt1d_forward(float *out, float *col, const float *in, const float *w,
                             const float *b, const tess_nn_conv1d_dims *d) {
    /* out (B, Lout, OC), col (B*L, OC*K), in (B, L, C), w (C, OC*K), b (OC) or NULL */
    check(d);
    const int64_t Lo = tess_nn_convt1d_out_len(d), OC = d->OC, K = d->K;
    tess_matmul(col, in, w, d->B * d->L, OC * K, d->C, false, false, 1.0f, 0.0f);
    for (int64_t r = 0; r < d->B * Lo; r++) {
        if (b) memcpy(out + r * OC, b, (size_t)OC * sizeof(float));
        else memset(out + r * OC, 0, (size_t)OC * sizeof(float));
    }
    for (int64_t bb = 0; bb < d->B; bb++)
        for (int64_t l = 0; l < d->L; l++) {
            const float *row = col + (bb * d->L + l) * OC * K;
            for (int64_t k = 0; k < K; k++) {
                float *dst = out + (bb * Lo + l * d->stride + k) * OC;
                for (int64_t o = 0; o < OC; o++) dst[o] += row[o * K + k];
            }
        }
}

void tess_nn_convt1d_backward(float *din, float *dw, float *db, float *col, const float *dout,
                              const float *in, const float *w, const tess_nn_conv1d_dims *d) {
    /* din (B, L, C) or NULL, dw (C, OC*K), db (OC) or NULL, col (B*L, OC*K) scratch,
     * dout (B, Lout, OC), in (B, L, C), w (C, OC*K) */
    check(d);
    const int64_t Lo = tess_nn_convt1d_out_len(d), OC = d->OC, K = d->K, R = d->B * d->L;
    for (int64_t bb = 0; bb < d->B; bb++)
        for (int64_t l = 0; l < d->L; l++) {
            float *row = col + (bb * d->L + l) * OC * K;
            for (int64_t k = 0; k < K; k++) {
                const float *src = dout + (bb * Lo + l * d->stride + k) * OC;
                for (int64_t o = 0; o < OC; o++) row[o * K + k] = src[o];
            }
        }
    tess_matmul(dw, in, col, d->C, OC * K, R, true, false, 1.0f, 1.0f);
    if (din) tess_matmul(din, col, w, R, d->C, OC * K, false, true, 1.0f, 1.0f);
    if (db)
        for (int64_t r = 0; r < d->B * Lo; r++)
            for (int64_t o = 0; o < OC; o++) db[o] += dout[r * OC + o];
}

void tess_nn_convt1d_forward_ref(float *out, const float *in, const float *w, const float *b,
                                 const tess_nn_conv1d_dims *d) {
    check(d);
    const int64_t Lo = tess_nn_convt1d_out_len(d), OC = d->OC, K = d->K, C = d->C;
    for (int64_t bb = 0; bb < d->B; bb++)
        for (int64_t t = 0; t < Lo; t++)
            for (int64_t o = 0; o < OC; o++) {
                double acc = b ? b[o] : 0.0;
                for (int64_t l = 0; l < d->L; l++) {
                    int64_t k = t - l * d->stride;
                    if (k < 0 || k >= K) continue;
                    for (int64_t c = 0; c < C; c++)
                        acc += (double)in[(bb * d->L + l) * C + c] * w[(c * OC + o) * K + k];
                }
                out[(bb * Lo + t) * OC + o] = (float)acc;
            }
}

void tess_nn_convt1d_backward_ref(float *din, float *dw, float *db, const float *dout,
                                  const float *in, const float *w, const tess_nn_conv1d_dims *d) {
    check(d);
    const int64_t Lo = tess_nn_convt1d_out_len(d), OC = d->OC, K = d->K, C = d->C;
    for (int64_t c = 0; c < C; c++)
        for (int64_t o = 0; o < OC; o++)
            for (int64_t k = 0; k < K; k++) {
                double acc = 0.0;
                for (int64_t bb = 0; bb < d->B; bb++)
                    for (int64_t l = 0; l < d->L; l++)
                        acc += (double)in[(bb * d->L + l) * C + c] *
                               dout[(bb * Lo + l * d->stride + k) * OC + o];
                dw[(c * OC + o) * K + k] += (float)acc;
            }
    if (db)
        for (int64_t o = 0; o < OC; o++) {
            double acc = 0.0;
            for (int64_t r = 0; r < d->B * Lo; r++) acc += dout[r * OC + o];
            db[o] += (float)acc;
        }
    if (!din) return;
    for (int64_t bb = 0; bb < d->B; bb++)
        for (int64_t l = 0; l < d->L; l++)
            for (int64_t c = 0; c < C; c++) {
                double acc = 0.0;
                for (int64_t k = 0; k < K; k++)
                    for (int64_t o = 0; o < OC; o++)
                        acc += (double)dout[(bb * Lo + l * d->stride + k) * OC + o] *
                               w[(c * OC + o) * K + k];
                din[(bb * d->L + l) * C + c] += (float)acc;
            }
}

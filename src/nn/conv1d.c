/* conv1d.c - 1-d convolution and transposed convolution as unfold + GEMM, the direct
 * convolution for narrow outputs, the patch convolutions as one GEMM on the sequences
 * themselves, and their naive references (see conv1d.h). */
#include "nn/conv1d.h"

#include <string.h>

#include "core/status.h"   /* TESS_ASSERT */
#include "tensor/matmul.h" /* tess_matmul */
#include "tensor/tensor.h" /* tess_tensor_dot, tess_tensor_axpy */

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

/* ---- direct conv1d (narrow outputs) -------------------------------------------------------- */

int64_t tess_nn_conv1d_direct_work_size(const tess_nn_conv1d_dims *d) {
    return 2 * d->OC * d->C * d->K;
}

/* wt (OC, K*C) = w (OC, C, K) with (c, k) swapped: row o in the order of an input window */
static void direct_weights(float *wt, const float *w, const tess_nn_conv1d_dims *d) {
    const int64_t C = d->C, K = d->K;
    for (int64_t o = 0; o < d->OC; o++)
        for (int64_t c = 0; c < C; c++)
            for (int64_t k = 0; k < K; k++) wt[(o * K + k) * C + c] = w[(o * C + c) * K + k];
}

/* The valid taps [*k0, *k1) of output t (empty when *k1 <= *k0) and its window's first row. */
static int64_t direct_taps(int64_t t, const tess_nn_conv1d_dims *d, int64_t *k0, int64_t *k1) {
    const int64_t s0 = t * d->stride - d->pad;
    *k0 = s0 < 0 ? -s0 : 0;
    *k1 = d->L - s0 < d->K ? d->L - s0 : d->K;
    return s0;
}

void tess_nn_conv1d_direct_forward(float *out, float *work, const float *in, const float *w,
                                   const float *b, const tess_nn_conv1d_dims *d) {
    /* out (B, Lout, OC), work (2 OC K C) scratch: wt (OC, K*C) in its first half, in (B, L, C) */
    check(d);
    const int64_t Lo = tess_nn_conv1d_out_len(d), C = d->C, OC = d->OC, KC = d->K * C;
    direct_weights(work, w, d);
    for (int64_t bb = 0; bb < d->B; bb++)
        for (int64_t t = 0; t < Lo; t++) {
            int64_t k0, k1;
            const int64_t s0 = direct_taps(t, d, &k0, &k1), n = (k1 - k0) * C;
            const float *win = n > 0 ? in + (bb * d->L + s0 + k0) * C : in;
            float *o_row = out + (bb * Lo + t) * OC;
            for (int64_t o = 0; o < OC; o++) {
                const double acc = n > 0 ? tess_tensor_dot(work + o * KC + k0 * C, win, n) : 0.0;
                o_row[o] = (float)((b ? (double)b[o] : 0.0) + acc);
            }
        }
}

void tess_nn_conv1d_direct_backward(float *din, float *dw, float *db, float *work,
                                    const float *dout, const float *in, const float *w,
                                    const tess_nn_conv1d_dims *d) {
    /* din (B, L, C) or NULL, dw (OC, C, K), db (OC) or NULL, work (2 OC K C) scratch: wt and
     * dwt (OC, K*C), dout (B, Lout, OC), in (B, L, C), w (OC, C, K) */
    check(d);
    const int64_t Lo = tess_nn_conv1d_out_len(d), C = d->C, K = d->K, OC = d->OC, KC = K * C;
    float *wt = work, *dwt = work + OC * KC;
    direct_weights(wt, w, d);
    memset(dwt, 0, (size_t)(OC * KC) * sizeof(float));
    for (int64_t bb = 0; bb < d->B; bb++)
        for (int64_t t = 0; t < Lo; t++) {
            int64_t k0, k1;
            const int64_t s0 = direct_taps(t, d, &k0, &k1), n = (k1 - k0) * C;
            if (n <= 0) continue;
            const int64_t at = (bb * d->L + s0 + k0) * C;
            const float *g = dout + (bb * Lo + t) * OC;
            for (int64_t o = 0; o < OC; o++) {
                tess_tensor_axpy(dwt + o * KC + k0 * C, g[o], in + at, n);
                if (din) tess_tensor_axpy(din + at, g[o], wt + o * KC + k0 * C, n);
            }
        }
    for (int64_t o = 0; o < OC; o++)
        for (int64_t c = 0; c < C; c++)
            for (int64_t k = 0; k < K; k++) dw[(o * C + c) * K + k] += dwt[(o * K + k) * C + c];
    if (db)
        for (int64_t r = 0; r < d->B * Lo; r++)
            for (int64_t o = 0; o < OC; o++) db[o] += dout[r * OC + o];
}

/* ---- patch conv1d and convt1d (stride = K) --------------------------------------------------- */

int64_t tess_nn_conv1d_patch_work_size(const tess_nn_conv1d_dims *d) {
    return 2 * d->OC * d->C * d->K;
}

static void col_sums(float *db, const float *dout, int64_t rows, int64_t OC) {
    for (int64_t r = 0; r < rows; r++)
        for (int64_t o = 0; o < OC; o++) db[o] += dout[r * OC + o];
}

static void bias_rows(float *out, const float *b, int64_t rows, int64_t OC) {
    for (int64_t r = 0; r < rows; r++) memcpy(out + r * OC, b, (size_t)OC * sizeof(float));
}

void tess_nn_conv1d_patch_forward(float *out, float *work, const float *in, const float *w,
                                  const float *b, const tess_nn_conv1d_dims *d) {
    /* out (B*Lout, OC) = in viewed (B*Lout, K*C) x wt^T + b; wt (OC, K*C) in work */
    check(d);
    const int64_t Lo = tess_nn_conv1d_out_len(d), KC = d->K * d->C;
    TESS_ASSERT(d->stride == d->K && d->pad == 0 && d->L == Lo * d->K);
    direct_weights(work, w, d);
    if (b) bias_rows(out, b, d->B * Lo, d->OC);
    tess_matmul(out, in, work, d->B * Lo, d->OC, KC, false, true, 1.0f, b ? 1.0f : 0.0f);
}

void tess_nn_conv1d_patch_backward(float *din, float *dw, float *db, float *work,
                                   const float *dout, const float *in, const float *w,
                                   const tess_nn_conv1d_dims *d) {
    /* dwt (OC, K*C) = dout^T in_view, added into dw (OC, C, K); din_view += dout wt */
    check(d);
    const int64_t Lo = tess_nn_conv1d_out_len(d), C = d->C, K = d->K, OC = d->OC, KC = K * C,
                  R = d->B * Lo;
    TESS_ASSERT(d->stride == K && d->pad == 0 && d->L == Lo * K);
    float *wt = work, *dwt = work + OC * KC;
    tess_matmul(dwt, dout, in, OC, KC, R, true, false, 1.0f, 0.0f);
    for (int64_t o = 0; o < OC; o++)
        for (int64_t c = 0; c < C; c++)
            for (int64_t k = 0; k < K; k++) dw[(o * C + c) * K + k] += dwt[(o * K + k) * C + c];
    if (db) col_sums(db, dout, R, OC);
    if (!din) return;
    direct_weights(wt, w, d);
    tess_matmul(din, dout, wt, R, KC, OC, false, false, 1.0f, 1.0f);
}

/* wt (C, K*OC) = w (C, OC, K) with (o, k) swapped: row c in the order of an output patch */
static void convt_patch_weights(float *wt, const float *w, const tess_nn_conv1d_dims *d) {
    const int64_t OC = d->OC, K = d->K;
    for (int64_t c = 0; c < d->C; c++)
        for (int64_t o = 0; o < OC; o++)
            for (int64_t k = 0; k < K; k++) wt[(c * K + k) * OC + o] = w[(c * OC + o) * K + k];
}

void tess_nn_convt1d_patch_forward(float *out, float *work, const float *in, const float *w,
                                   const float *b, const tess_nn_conv1d_dims *d) {
    /* out viewed (B*L, K*OC) = in (B*L, C) x wt (C, K*OC), + b on every frame */
    check(d);
    TESS_ASSERT(d->stride == d->K);
    const int64_t R = d->B * d->L, KO = d->K * d->OC;
    convt_patch_weights(work, w, d);
    if (b) bias_rows(out, b, R * d->K, d->OC);
    tess_matmul(out, in, work, R, KO, d->C, false, false, 1.0f, b ? 1.0f : 0.0f);
}

void tess_nn_convt1d_patch_backward(float *din, float *dw, float *db, float *work,
                                    const float *dout, const float *in, const float *w,
                                    const tess_nn_conv1d_dims *d) {
    /* dwt (C, K*OC) = in^T dout_view, added into dw (C, OC, K); din += dout_view wt^T */
    check(d);
    TESS_ASSERT(d->stride == d->K);
    const int64_t R = d->B * d->L, C = d->C, OC = d->OC, K = d->K, KO = K * OC;
    float *wt = work, *dwt = work + C * KO;
    tess_matmul(dwt, in, dout, C, KO, R, true, false, 1.0f, 0.0f);
    for (int64_t c = 0; c < C; c++)
        for (int64_t o = 0; o < OC; o++)
            for (int64_t k = 0; k < K; k++) dw[(c * OC + o) * K + k] += dwt[(c * K + k) * OC + o];
    if (db) col_sums(db, dout, R * K, OC);
    if (!din) return;
    convt_patch_weights(wt, w, d);
    tess_matmul(din, dout, wt, R, C, KO, false, true, 1.0f, 1.0f);
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

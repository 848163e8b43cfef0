/* linear.c - fully connected layer over tess_matmul, and its references (see linear.h). */
#include "nn/linear.h"

#include <string.h>

#include "core/status.h"   /* TESS_ASSERT */
#include "tensor/matmul.h" /* tess_matmul, tess_matmul_tiles */

void tess_nn_linear_forward(float *out, const float *in, const float *w, const float *b,
                            int64_t N, int64_t C, int64_t OC) {
    /* out (N,OC), in (N,C), w (OC,C), b (OC) or NULL */
    TESS_ASSERT(N >= 0 && C >= 0 && OC >= 0);
    float beta = 0.0f;
    if (b) {
        /* seed every row with the bias, then let the GEMM accumulate onto it (beta = 1) */
        for (int64_t n = 0; n < N; n++) memcpy(out + n * OC, b, (size_t)OC * sizeof(float));
        beta = 1.0f;
    }
    tess_matmul(out, in, w, N, OC, C, false, true, 1.0f, beta);
}

void tess_nn_linear_backward(float *din, float *dw, float *db, const float *dout, const float *in,
                             const float *w, int64_t N, int64_t C, int64_t OC) {
    /* din (N,C) or NULL, dw (OC,C), db (OC) or NULL, dout (N,OC), in (N,C), w (OC,C) */
    TESS_ASSERT(dw != NULL);
    if (din) tess_matmul(din, dout, w, N, C, OC, false, false, 1.0f, 1.0f);
    tess_matmul(dw, dout, in, OC, C, N, true, false, 1.0f, 1.0f);
    if (db) {
        for (int64_t n = 0; n < N; n++) {
            const float *d = dout + n * OC;
            for (int64_t o = 0; o < OC; o++) db[o] += d[o];
        }
    }
}

void tess_nn_linear_tiles_forward(float *out, const float *in, const float *w, const float *b,
                                  int64_t N, int64_t C, int64_t OC) {
    /* out (N,OC), in (N,C), w (OC,C), b (OC) or NULL */
    TESS_ASSERT(N >= 0 && C >= 0 && OC >= 0);
    tess_matmul_tiles(out, OC, in, C, w, C, N, OC, C, false, true, 1.0f, 0.0f, b);
}

void tess_nn_linear_tiles_backward(float *din, float *dw, float *db, const float *dout,
                                   const float *in, const float *w, int64_t N, int64_t C,
                                   int64_t OC) {
    /* din (N,C) or NULL, dw (OC,C), db (OC) or NULL, dout (N,OC), in (N,C), w (OC,C) */
    TESS_ASSERT(dw != NULL);
    if (din) tess_matmul_tiles(din, C, dout, OC, w, C, N, C, OC, false, false, 1.0f, 1.0f, NULL);
    tess_matmul_tiles(dw, C, dout, OC, in, C, OC, C, N, true, false, 1.0f, 1.0f, NULL);
    if (db) {
        for (int64_t n = 0; n < N; n++) {
            const float *restrict d = dout + n * OC;
            for (int64_t o = 0; o < OC; o++) db[o] += d[o];
        }
    }
}

void tess_nn_linear_forward_ref(float *out, const float *in, const float *w, const float *b,
                                int64_t N, int64_t C, int64_t OC) {
    /* out (N,OC), in (N,C), w (OC,C), b (OC) or NULL */
    for (int64_t n = 0; n < N; n++) {
        for (int64_t o = 0; o < OC; o++) {
            double acc = b ? (double)b[o] : 0.0;
            for (int64_t c = 0; c < C; c++) acc += (double)in[n * C + c] * (double)w[o * C + c];
            out[n * OC + o] = (float)acc;
        }
    }
}

void tess_nn_linear_backward_ref(float *din, float *dw, float *db, const float *dout,
                                 const float *in, const float *w, int64_t N, int64_t C,
                                 int64_t OC) {
    /* din (N,C) or NULL, dw (OC,C), db (OC) or NULL, dout (N,OC), in (N,C), w (OC,C) */
    if (din) {
        for (int64_t n = 0; n < N; n++) {
            for (int64_t c = 0; c < C; c++) {
                double acc = 0.0;
                for (int64_t o = 0; o < OC; o++) acc += (double)dout[n * OC + o] * w[o * C + c];
                din[n * C + c] += (float)acc;
            }
        }
    }
    for (int64_t o = 0; o < OC; o++) {
        for (int64_t c = 0; c < C; c++) {
            double acc = 0.0;
            for (int64_t n = 0; n < N; n++) acc += (double)dout[n * OC + o] * in[n * C + c];
            dw[o * C + c] += (float)acc;
        }
        if (db) {
            double acc = 0.0;
            for (int64_t n = 0; n < N; n++) acc += dout[n * OC + o];
            db[o] += (float)acc;
        }
    }
}

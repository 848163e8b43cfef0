/* sparse.c - CSR SpMM and segment sums, and their references (see sparse.h). */
#include "tensor/sparse.h"

#include <string.h>

#include "core/status.h" /* TESS_ASSERT */

static inline float csr_value(const tess_csr *A, int64_t e) { return A->val ? A->val[e] : 1.0f; }

void tess_csr_spmm(float *Y, const tess_csr *A, const float *X, int64_t F, float alpha,
                   float beta) {
    tess_csr_spmm_ld(Y, F, A, X, F, F, alpha, beta);
}

void tess_csr_spmm_t(float *Y, const tess_csr *A, const float *X, int64_t F) {
    tess_csr_spmm_t_ld(Y, F, A, X, F, F);
}

void tess_csr_spmm_ld(float *Y, int64_t ldy, const tess_csr *A, const float *X, int64_t ldx,
                      int64_t F, float alpha, float beta) {
    /* Y (rows, F) in rows of ldy, X (cols, F) in rows of ldx */
    TESS_ASSERT(A->rows >= 0 && A->cols >= 0 && F >= 0 && ldy >= F && ldx >= F);
    for (int64_t i = 0; i < A->rows; i++) {
        float *y = Y + i * ldy;
        if (beta == 0.0f) {
            memset(y, 0, (size_t)F * sizeof(float));
        } else if (beta != 1.0f) {
            for (int64_t f = 0; f < F; f++) y[f] *= beta;
        }
        for (int64_t e = A->indptr[i]; e < A->indptr[i + 1]; e++) {
            const int32_t j = A->indices[e];
            TESS_ASSERT(j >= 0 && j < A->cols);
            const float w = alpha * csr_value(A, e);
            const float *x = X + (int64_t)j * ldx;
            for (int64_t f = 0; f < F; f++) y[f] += w * x[f];
        }
    }
}

void tess_csr_spmm_t_ld(float *Y, int64_t ldy, const tess_csr *A, const float *X, int64_t ldx,
                        int64_t F) {
    /* Y (cols, F) in rows of ldy, X (rows, F) in rows of ldx */
    TESS_ASSERT(F >= 0 && ldy >= F && ldx >= F);
    for (int64_t i = 0; i < A->rows; i++) {
        const float *x = X + i * ldx;
        for (int64_t e = A->indptr[i]; e < A->indptr[i + 1]; e++) {
            const int32_t j = A->indices[e];
            TESS_ASSERT(j >= 0 && j < A->cols);
            const float w = csr_value(A, e);
            float *y = Y + (int64_t)j * ldy;
            for (int64_t f = 0; f < F; f++) y[f] += w * x[f];
        }
    }
}

void tess_segment_sum(float *out, const float *in, const int64_t *seg, int64_t N, int64_t G,
                      int64_t F) {
    /* out (G,F), in (N,F), seg (N) */
    memset(out, 0, (size_t)(G * F) * sizeof(float));
    for (int64_t i = 0; i < N; i++) {
        TESS_ASSERT(seg[i] >= 0 && seg[i] < G);
        float *o = out + seg[i] * F;
        const float *x = in + i * F;
        for (int64_t f = 0; f < F; f++) o[f] += x[f];
    }
}

void tess_segment_sum_backward(float *din, const float *dout, const int64_t *seg, int64_t N,
                               int64_t F) {
    /* din (N,F), dout (G,F), seg (N) */
    for (int64_t i = 0; i < N; i++) {
        const float *d = dout + seg[i] * F;
        float *o = din + i * F;
        for (int64_t f = 0; f < F; f++) o[f] += d[f];
    }
}

/* Dense value of A at (i, j): the sum of the stored entries there (duplicates add up). */
static double csr_dense_at(const tess_csr *A, int64_t i, int64_t j) {
    double v = 0.0;
    for (int64_t e = A->indptr[i]; e < A->indptr[i + 1]; e++) {
        if (A->indices[e] == j) v += csr_value(A, e);
    }
    return v;
}

void tess_csr_spmm_ref(float *Y, const tess_csr *A, const float *X, int64_t F, float alpha,
                       float beta) {
    for (int64_t i = 0; i < A->rows; i++) {
        for (int64_t f = 0; f < F; f++) {
            double acc = 0.0;
            for (int64_t j = 0; j < A->cols; j++) acc += csr_dense_at(A, i, j) * X[j * F + f];
            double prev = beta == 0.0f ? 0.0 : (double)beta * Y[i * F + f];
            Y[i * F + f] = (float)(alpha * acc + prev);
        }
    }
}

void tess_csr_spmm_t_ref(float *Y, const tess_csr *A, const float *X, int64_t F) {
    for (int64_t j = 0; j < A->cols; j++) {
        for (int64_t f = 0; f < F; f++) {
            double acc = 0.0;
            for (int64_t i = 0; i < A->rows; i++) acc += csr_dense_at(A, i, j) * X[i * F + f];
            Y[j * F + f] += (float)acc;
        }
    }
}

void tess_segment_sum_ref(float *out, const float *in, const int64_t *seg, int64_t N, int64_t G,
                          int64_t F) {
    for (int64_t g = 0; g < G; g++) {
        for (int64_t f = 0; f < F; f++) {
            double acc = 0.0;
            for (int64_t i = 0; i < N; i++) {
                if (seg[i] == g) acc += in[i * F + f];
            }
            out[g * F + f] = (float)acc;
        }
    }
}

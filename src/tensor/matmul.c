/* matmul.c - tess_matmul over cblas_sgemm, and its reference (see matmul.h). */
#include "tensor/matmul.h"

#include <cblas.h>
#include <limits.h>

#include "core/status.h" /* TESS_ASSERT */

void tess_matmul(float *C, const float *A, const float *B, int64_t M, int64_t N, int64_t K,
                 bool trans_a, bool trans_b, float alpha, float beta) {
    TESS_ASSERT(M >= 0 && N >= 0 && K >= 0 && M <= INT_MAX && N <= INT_MAX && K <= INT_MAX);
    if (M == 0 || N == 0) return;
    int lda = trans_a ? (int)M : (int)K;
    int ldb = trans_b ? (int)K : (int)N;
    cblas_sgemm(CblasRowMajor, trans_a ? CblasTrans : CblasNoTrans,
                trans_b ? CblasTrans : CblasNoTrans, (int)M, (int)N, (int)K, alpha, A,
                lda > 0 ? lda : 1, B, ldb > 0 ? ldb : 1, beta, C, (int)N);
}

void tess_matmul_ref(float *C, const float *A, const float *B, int64_t M, int64_t N, int64_t K,
                     bool trans_a, bool trans_b, float alpha, float beta) {
    for (int64_t i = 0; i < M; i++) {
        for (int64_t j = 0; j < N; j++) {
            double acc = 0.0;
            for (int64_t k = 0; k < K; k++) {
                double a = trans_a ? A[k * M + i] : A[i * K + k];
                double b = trans_b ? B[j * K + k] : B[k * N + j];
                acc += a * b;
            }
            double prev = beta == 0.0f ? 0.0 : (double)beta * C[i * N + j];
            C[i * N + j] = (float)(alpha * acc + prev);
        }
    }
}

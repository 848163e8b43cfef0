/* matmul.c - tess_matmul over cblas_sgemm, and its reference (see matmul.h). */
#include "tensor/matmul.h"

#include <cblas.h>
#include <limits.h>
#include <stdlib.h>
#include <sys/resource.h>

#include "core/status.h" /* TESS_ASSERT */

tess_status tess_matmul_init(void) {
    struct rlimit rl;
    if (getrlimit(RLIMIT_AS, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY) {
        void *probe = malloc((size_t)TESS_MATMUL_BLAS_BUFFER_BYTES);
        TESS_REQUIRE(probe != NULL, TESS_ERR_MEM,
                     "cannot allocate the %lld MiB work buffer of OpenBLAS under the address-space "
                     "limit of %llu MiB (ulimit -v): raise the limit",
                     (long long)(TESS_MATMUL_BLAS_BUFFER_BYTES >> 20),
                     (unsigned long long)(rl.rlim_cur >> 20));
        free(probe);
    }
    float a = 1.0f, b = 1.0f, c = 0.0f;
    tess_matmul(&c, &a, &b, 1, 1, 1, false, false, 1.0f, 0.0f);
    return TESS_OK;
}

int tess_matmul_threads(void) { return openblas_get_num_threads(); }

void tess_matmul_set_threads(int n) {
    TESS_ASSERT(n >= 1);
    openblas_set_num_threads(n);
}

void tess_matmul(float *C, const float *A, const float *B, int64_t M, int64_t N, int64_t K,
                 bool trans_a, bool trans_b, float alpha, float beta) {
    tess_matmul_ld(C, N, A, trans_a ? M : K, B, trans_b ? K : N, M, N, K, trans_a, trans_b, alpha,
                   beta);
}

void tess_matmul_ld(float *C, int64_t ldc, const float *A, int64_t lda, const float *B,
                    int64_t ldb, int64_t M, int64_t N, int64_t K, bool trans_a, bool trans_b,
                    float alpha, float beta) {
    TESS_ASSERT(M >= 0 && N >= 0 && K >= 0 && M <= INT_MAX && N <= INT_MAX && K <= INT_MAX);
    TESS_ASSERT(lda >= (trans_a ? M : K) && ldb >= (trans_b ? K : N) && ldc >= N);
    TESS_ASSERT(lda <= INT_MAX && ldb <= INT_MAX && ldc <= INT_MAX);
    if (M == 0 || N == 0) return;
    /* BLAS wants leading dimensions >= 1 even when a matrix is empty (K = 0) */
    cblas_sgemm(CblasRowMajor, trans_a ? CblasTrans : CblasNoTrans,
                trans_b ? CblasTrans : CblasNoTrans, (int)M, (int)N, (int)K, alpha, A,
                lda > 0 ? (int)lda : 1, B, ldb > 0 ? (int)ldb : 1, beta, C, (int)ldc);
}

void tess_matmul_ref(float *C, const float *A, const float *B, int64_t M, int64_t N, int64_t K,
                     bool trans_a, bool trans_b, float alpha, float beta) {
    tess_matmul_ld_ref(C, N, A, trans_a ? M : K, B, trans_b ? K : N, M, N, K, trans_a, trans_b,
                       alpha, beta);
}

void tess_matmul_ld_ref(float *C, int64_t ldc, const float *A, int64_t lda, const float *B,
                        int64_t ldb, int64_t M, int64_t N, int64_t K, bool trans_a, bool trans_b,
                        float alpha, float beta) {
    for (int64_t i = 0; i < M; i++) {
        for (int64_t j = 0; j < N; j++) {
            double acc = 0.0;
            for (int64_t k = 0; k < K; k++) {
                double a = trans_a ? A[k * lda + i] : A[i * lda + k];
                double b = trans_b ? B[j * ldb + k] : B[k * ldb + j];
                acc += a * b;
            }
            double prev = beta == 0.0f ? 0.0 : (double)beta * C[i * ldc + j];
            C[i * ldc + j] = (float)(alpha * acc + prev);
        }
    }
}

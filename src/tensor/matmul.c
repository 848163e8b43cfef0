/* matmul.c - tess_matmul over cblas_sgemm, tess_matmul_small in plain C, and the references (see
 * matmul.h). */
#include "tensor/matmul.h"

#include <cblas.h>
#include <limits.h>
#include <stdlib.h>
#include <sys/resource.h>

#include "core/status.h" /* TESS_ASSERT */

#if (defined(__AVX2__) && defined(__FMA__)) || defined(__AVX512F__)
#include <immintrin.h> /* tess_matmul_small's and tess_matmul_tiles' tiles */
#endif

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

enum { SMALL_MR = 4, SMALL_NR = 2 * TESS_MATMUL_SMALL_NB };

/* The tile C[0:mr, 0:8*nv] of tess_matmul_small (mr <= SMALL_MR, nv = 1 or 2 vectors of 8
 * columns, constants where it is inlined), element (r, k) of A at A[r sa + k sk]. With AVX2
 * and FMA (-march=native on x86-64) in intrinsics, the accumulators in mr x nv registers: GCC
 * 12's vectoriser turned the plain loops below into 4-wide products along the rows (one column
 * element times four rows), with which the short attention ran 2-5x slower than on BLAS. Else
 * (other targets) the plain loops. */
#if defined(__AVX2__) && defined(__FMA__)
static inline void small_tile(float *restrict C, int64_t ldc, const float *restrict A,
                              int64_t sa, int64_t sk, const float *restrict B, int64_t ldb,
                              int64_t K, float alpha, float beta, const int mr, const int nv) {
    __m256 acc[SMALL_MR][2];
    for (int r = 0; r < mr; r++) acc[r][0] = acc[r][1] = _mm256_setzero_ps();
    for (int64_t k = 0; k < K; k++) {
        const float *b = B + k * ldb;
        const __m256 b0 = _mm256_loadu_ps(b), b1 = nv > 1 ? _mm256_loadu_ps(b + 8) : b0;
#pragma GCC unroll 4 /* accumulators in registers at -O2 as well (GCC 12 keeps a loop) */
        for (int r = 0; r < mr; r++) {
            const __m256 a = _mm256_broadcast_ss(A + r * sa + k * sk);
            acc[r][0] = _mm256_fmadd_ps(a, b0, acc[r][0]);
            if (nv > 1) acc[r][1] = _mm256_fmadd_ps(a, b1, acc[r][1]);
        }
    }
    const __m256 va = _mm256_set1_ps(alpha), vb = _mm256_set1_ps(beta);
    for (int r = 0; r < mr; r++) {
        for (int v = 0; v < nv; v++) {
            float *c = C + r * ldc + 8 * v;
            const __m256 x = _mm256_mul_ps(va, acc[r][v]);
            _mm256_storeu_ps(c, beta == 0.0f ? x : _mm256_fmadd_ps(vb, _mm256_loadu_ps(c), x));
        }
    }
}
#else
static inline void small_tile(float *restrict C, int64_t ldc, const float *restrict A,
                              int64_t sa, int64_t sk, const float *restrict B, int64_t ldb,
                              int64_t K, float alpha, float beta, const int mr, const int nv) {
    const int nr = 8 * nv;
    float acc[SMALL_MR][SMALL_NR] = {{0}};
    for (int64_t k = 0; k < K; k++) {
        const float *b = B + k * ldb;
        for (int r = 0; r < mr; r++) {
            const float a = A[r * sa + k * sk];
            for (int l = 0; l < nr; l++) acc[r][l] += a * b[l];
        }
    }
    for (int r = 0; r < mr; r++) {
        float *c = C + r * ldc;
        for (int l = 0; l < nr; l++)
            c[l] = beta == 0.0f ? alpha * acc[r][l] : alpha * acc[r][l] + beta * c[l];
    }
}
#endif

#if TESS_MATMUL_SMALL_WIDE
/* WIDE_MIN_M: products of fewer rows (the short attention's row blocks of 8) keep the 4 x 16
 * tiles they ran on before the wide ones existed: with the wide tiles there the tiny calm DAT
 * step, whose attention runs only those, measured 3-5% slower under load (not resolved). */
enum { WIDE_MR = 8, WIDE_NR = 32, WIDE_MIN_M = 64 };

/* The tile C[0:mr, 0:32] of tess_matmul_small (mr <= WIDE_MR, a constant where it is inlined) in
 * 2 mr zmm accumulators, A read as in small_tile, the same order of operations as
 * small_tile. The unroll pragmas keep the accumulators in registers: GCC 12 at -O2 kept the row
 * loop and spilled them to the stack each k (half the speed). */
static inline void wide_tile(float *restrict C, int64_t ldc, const float *restrict A, int64_t sa,
                             int64_t sk, const float *restrict B, int64_t ldb, int64_t K,
                             float alpha, float beta, const int mr) {
    __m512 acc[WIDE_MR][2];
#pragma GCC unroll 8
    for (int r = 0; r < mr; r++) acc[r][0] = acc[r][1] = _mm512_setzero_ps();
    for (int64_t k = 0; k < K; k++) {
        const float *b = B + k * ldb;
        const __m512 b0 = _mm512_loadu_ps(b), b1 = _mm512_loadu_ps(b + 16);
#pragma GCC unroll 8
        for (int r = 0; r < mr; r++) {
            const __m512 a = _mm512_set1_ps(A[r * sa + k * sk]);
            acc[r][0] = _mm512_fmadd_ps(a, b0, acc[r][0]);
            acc[r][1] = _mm512_fmadd_ps(a, b1, acc[r][1]);
        }
    }
    const __m512 va = _mm512_set1_ps(alpha), vb = _mm512_set1_ps(beta);
#pragma GCC unroll 8
    for (int r = 0; r < mr; r++) {
        for (int v = 0; v < 2; v++) {
            float *c = C + r * ldc + 16 * v;
            const __m512 x = _mm512_mul_ps(va, acc[r][v]);
            _mm512_storeu_ps(c, beta == 0.0f ? x : _mm512_fmadd_ps(vb, _mm512_loadu_ps(c), x));
        }
    }
}
#endif

/* C (M,N) = alpha A B + beta C with element (r, k) of A at A[r * sa + k * sk]: (sa, sk) = (lda, 1)
 * reads A (M,K), (1, lda) reads A stored as (K,M). */
static void small_gemm(float *C, int64_t ldc, const float *A, int64_t sa, int64_t sk,
                       const float *B, int64_t ldb, int64_t M, int64_t N, int64_t K, float alpha,
                       float beta) {
    int64_t j0 = 0; /* the columns before j0 are done by the wide tiles */
#if TESS_MATMUL_SMALL_WIDE
    const int64_t m8 = M - M % WIDE_MR;
    for (; M >= WIDE_MIN_M && N - j0 >= WIDE_NR; j0 += WIDE_NR) {
        for (int64_t i = 0; i < m8; i += WIDE_MR)
            wide_tile(C + i * ldc + j0, ldc, A + i * sa, sa, sk, B + j0, ldb, K, alpha, beta,
                      WIDE_MR);
        for (int64_t i = m8; i < M; i++)
            wide_tile(C + i * ldc + j0, ldc, A + i * sa, sa, sk, B + j0, ldb, K, alpha, beta, 1);
    }
#endif
    const int64_t m4 = M - M % SMALL_MR;
    for (int64_t j = j0; j < N; j += SMALL_NR) {
        const bool wide = N - j >= SMALL_NR; /* else the last 8 columns */
        for (int64_t i = 0; i < m4; i += SMALL_MR) {
            float *c = C + i * ldc + j;
            const float *a = A + i * sa, *b = B + j;
            if (wide) small_tile(c, ldc, a, sa, sk, b, ldb, K, alpha, beta, SMALL_MR, 2);
            else small_tile(c, ldc, a, sa, sk, b, ldb, K, alpha, beta, SMALL_MR, 1);
        }
        for (int64_t i = m4; i < M; i++) {
            float *c = C + i * ldc + j;
            const float *a = A + i * sa, *b = B + j;
            if (wide) small_tile(c, ldc, a, sa, sk, b, ldb, K, alpha, beta, 1, 2);
            else small_tile(c, ldc, a, sa, sk, b, ldb, K, alpha, beta, 1, 1);
        }
    }
}

void tess_matmul_small(float *C, int64_t ldc, const float *A, int64_t lda, const float *B,
                       int64_t ldb, int64_t M, int64_t N, int64_t K, float alpha, float beta) {
    TESS_ASSERT(M >= 0 && N >= 0 && K >= 0 && N % TESS_MATMUL_SMALL_NB == 0);
    TESS_ASSERT(lda >= K && ldb >= N && ldc >= N);
    small_gemm(C, ldc, A, lda, 1, B, ldb, M, N, K, alpha, beta);
}

void tess_matmul_small_tn(float *C, int64_t ldc, const float *A, int64_t lda, const float *B,
                          int64_t ldb, int64_t M, int64_t N, int64_t K, float alpha, float beta) {
    TESS_ASSERT(M >= 0 && N >= 0 && K >= 0 && N % TESS_MATMUL_SMALL_NB == 0);
    TESS_ASSERT(lda >= M && ldb >= N && ldc >= N);
    small_gemm(C, ldc, A, 1, lda, B, ldb, M, N, K, alpha, beta);
}

#if defined(__AVX512F__)
enum { TILES_MR = 6, TILES_NV = 4, TILES_NB = 16 * TILES_NV };

/* One tile of tess_matmul_tiles: C[0:mr, 0:16 nv] from op(A)'s rows 0..mr-1 and op(B)'s k
 * rows 0..K-1 (Bk, leading dimension ldb, already op(B)), the last of the nv vectors masked by
 * tail. op(A)(r, k) = A[r lda + k], or A[k lda + r] when ta. first: the first k block (alpha *
 * sum + beta * C + bias), else C += alpha * sum. mr, nv, ta are constants where it is inlined:
 * the mr x nv accumulators stay in registers. The unroll pragmas are needed: without them GCC 12
 * leaves the epilogue's loops rolled, keeps acc addressable and stores all 24 accumulators to
 * the stack in every k step (1.4x slower than OpenBLAS instead of faster). */
static inline __attribute__((always_inline)) void tiles_tile(
    float *restrict C, int64_t ldc, const float *restrict A, int64_t lda,
    const float *restrict Bk, int64_t ldb, int64_t K, float alpha, float beta,
    const float *restrict bias, bool first, __mmask16 tail, const int mr, const int nv,
    const bool ta) {
    __m512 acc[TILES_MR][TILES_NV];
    #pragma GCC unroll 6
    for (int r = 0; r < mr; r++) {
        #pragma GCC unroll 6
        for (int v = 0; v < nv; v++) acc[r][v] = _mm512_setzero_ps();
    }
    for (int64_t k = 0; k < K; k++) {
        const float *b = Bk + k * ldb;
        __m512 bv[TILES_NV];
        #pragma GCC unroll 6
        for (int v = 0; v < nv; v++) {
            bv[v] = v == nv - 1 ? _mm512_maskz_loadu_ps(tail, b + 16 * v)
                                : _mm512_loadu_ps(b + 16 * v);
        }
        #pragma GCC unroll 6
        for (int r = 0; r < mr; r++) {
            const __m512 a = _mm512_set1_ps(ta ? A[k * lda + r] : A[r * lda + k]);
            #pragma GCC unroll 6
            for (int v = 0; v < nv; v++) acc[r][v] = _mm512_fmadd_ps(a, bv[v], acc[r][v]);
        }
    }
    const __m512 va = _mm512_set1_ps(alpha), vb = _mm512_set1_ps(beta);
    #pragma GCC unroll 6
    for (int r = 0; r < mr; r++) {
        #pragma GCC unroll 6
        for (int v = 0; v < nv; v++) {
            float *c = C + r * ldc + 16 * v;
            const __mmask16 m = v == nv - 1 ? tail : (__mmask16)0xFFFF;
            __m512 x;
            if (!first) {
                x = _mm512_fmadd_ps(va, acc[r][v], _mm512_maskz_loadu_ps(m, c));
            } else {
                x = _mm512_mul_ps(va, acc[r][v]);
                if (beta != 0.0f) x = _mm512_fmadd_ps(vb, _mm512_maskz_loadu_ps(m, c), x);
                if (bias) x = _mm512_add_ps(x, _mm512_maskz_loadu_ps(m, bias + 16 * v));
            }
            _mm512_mask_storeu_ps(c, m, x);
        }
    }
}

/* The rows of one column block (nv vectors, the last masked by tail) and one k block: tiles of
 * 6 rows, then one tile of the last M % 6 rows (a weight gradient's 64 rows end in 4). */
static inline __attribute__((always_inline)) void tiles_block(
    float *C, int64_t ldc, const float *A, int64_t lda, const float *Bk, int64_t ldb, int64_t M,
    int64_t K, float alpha, float beta, const float *bias, bool first, __mmask16 tail,
    const int nv, const bool ta) {
    int64_t i = 0;
    for (; i + TILES_MR <= M; i += TILES_MR) {
        const float *a = ta ? A + i : A + i * lda;
        tiles_tile(C + i * ldc, ldc, a, lda, Bk, ldb, K, alpha, beta, bias, first, tail,
                   TILES_MR, nv, ta);
    }
    const float *a = ta ? A + i : A + i * lda;
    float *c = C + i * ldc;
#define TILES_REST(MR)                                                                          \
    case MR:                                                                                    \
        tiles_tile(c, ldc, a, lda, Bk, ldb, K, alpha, beta, bias, first, tail, MR, nv, ta);     \
        break;
    switch (M - i) {
        TILES_REST(1)
        TILES_REST(2)
        TILES_REST(3)
        TILES_REST(4)
        TILES_REST(5)
    default: break; /* 0 */
    }
#undef TILES_REST
}

/* tiles_block with nv and ta as constants (the accumulators of each case in registers). */
static void tiles_dispatch(float *C, int64_t ldc, const float *A, int64_t lda, const float *Bk,
                           int64_t ldb, int64_t M, int64_t K, float alpha, float beta,
                           const float *bias, bool first, __mmask16 tail, int nv, bool ta) {
#define TILES_CASE(NV)                                                                          \
    case NV:                                                                                    \
        if (ta) tiles_block(C, ldc, A, lda, Bk, ldb, M, K, alpha, beta, bias, first, tail, NV, \
                            true);                                                              \
        else tiles_block(C, ldc, A, lda, Bk, ldb, M, K, alpha, beta, bias, first, tail, NV,    \
                         false);                                                                \
        break;
    switch (nv) {
        TILES_CASE(1)
        TILES_CASE(2)
        TILES_CASE(3)
        TILES_CASE(4)
    default: TESS_ASSERT(0 && "tiles: 1..4 vectors per column block");
    }
#undef TILES_CASE
}
#endif

void tess_matmul_tiles(float *C, int64_t ldc, const float *A, int64_t lda, const float *B,
                       int64_t ldb, int64_t M, int64_t N, int64_t K, bool trans_a, bool trans_b,
                       float alpha, float beta, const float *bias) {
    TESS_ASSERT(M >= 0 && N >= 0 && K >= 0 && M <= INT_MAX && N <= INT_MAX && K <= INT_MAX);
    TESS_ASSERT(lda >= (trans_a ? M : K) && ldb >= (trans_b ? K : N) && ldc >= N);
#if defined(__AVX512F__)
    if (M == 0 || N == 0) return;
    float bt[TESS_MATMUL_TILES_KC * TILES_NB]; /* op(B)'s block when trans_b */
    for (int64_t j = 0; j < N; j += TILES_NB) {
        const int64_t nb = N - j < TILES_NB ? N - j : TILES_NB;
        const int nv = (int)((nb + 15) / 16);
        const __mmask16 tail = (__mmask16)(nb % 16 ? (1u << (nb % 16)) - 1u : 0xFFFFu);
        const float *bj = bias ? bias + j : NULL;
        if (K == 0) { /* C = beta * C + bias */
            tiles_dispatch(C + j, ldc, A, lda, B, ldb, M, 0, alpha, beta, bj, true, tail, nv,
                           trans_a);
            continue;
        }
        for (int64_t k0 = 0; k0 < K; k0 += TESS_MATMUL_TILES_KC) {
            const int64_t kc = K - k0 < TESS_MATMUL_TILES_KC ? K - k0 : TESS_MATMUL_TILES_KC;
            const float *Bk = B + k0 * ldb + j;
            int64_t ldbk = ldb;
            if (trans_b) { /* op(B)(k, n) = B[n ldb + k]: rows k0.., columns j.. into bt */
                for (int64_t k = 0; k < kc; k++) {
                    float *row = bt + k * TILES_NB;
                    for (int64_t n = 0; n < nb; n++) row[n] = B[(j + n) * ldb + k0 + k];
                }
                Bk = bt;
                ldbk = TILES_NB;
            }
            const float *Ak = trans_a ? A + k0 * lda : A + k0;
            tiles_dispatch(C + j, ldc, Ak, lda, Bk, ldbk, M, kc, alpha, beta, bj, k0 == 0, tail,
                           nv, trans_a);
        }
    }
#else
    tess_matmul_ld(C, ldc, A, lda, B, ldb, M, N, K, trans_a, trans_b, alpha, beta);
    if (bias) {
        for (int64_t i = 0; i < M; i++) {
            for (int64_t n = 0; n < N; n++) C[i * ldc + n] += bias[n];
        }
    }
#endif
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

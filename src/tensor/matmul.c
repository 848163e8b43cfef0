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

#if defined(__AVX512F__)
enum { TILE_MAX_MR = 8, TILE_MAX_NV = 4 };

/* The AVX-512 register tile of tess_matmul_small's wide tiles and of tess_matmul_tiles:
 * C[0:mr, 0:16 nv] from op(A)'s rows 0..mr-1 and B's rows 0..K-1 (leading dimension ldb), the
 * last of the nv vectors of each row masked by tail. op(A)(r, k) = A[r sa + k sk]: (lda, 1) reads
 * an (M,K) A in place, (1, lda) one stored (K,M), (1, mr') a packed panel (tess_matmul_tiles).
 * first: the first k block, alpha * sum + beta * C (+ bias (16 nv), NULL: none; beta = 0 does not
 * read C), else C += alpha * sum. Each element sums its products in increasing k with fused
 * multiply-adds. mr <= TILE_MAX_MR, nv <= TILE_MAX_NV with mr * nv <= 24 and the other
 * parameters that select code (mr, nv, strides that are constants) constants where it is
 * inlined: the accumulators stay in registers. The unroll pragmas are needed: without them GCC 12
 * leaves the loops over rows and vectors rolled, keeps acc addressable and stores the
 * accumulators to the stack in every k step (half the speed or worse).
 * Prefetches (they change no result): with prefetch_c (a constant), the tile's lines of C for
 * writing before the k loop, so that the stores at its end do not wait for them; next_a (or
 * NULL): the next tile's op(A) rows in place (sk = 1), one line of each row per 16 k. In the
 * MoE experts' 512-row products, whose operands come cold from L3 or memory, the two together
 * made the products 4-8% faster (docs/benchmarks.md, "MoE: prefetching the tiles' C and A"). */
static inline __attribute__((always_inline)) void reg_tile(
    float *restrict C, int64_t ldc, const float *restrict A, int64_t sa, int64_t sk,
    const float *restrict B, int64_t ldb, int64_t K, float alpha, float beta,
    const float *restrict bias, bool first, __mmask16 tail, const int mr, const int nv,
    const bool prefetch_c, const float *next_a) {
    __m512 acc[TILE_MAX_MR][TILE_MAX_NV];
    #pragma GCC unroll 8
    for (int r = 0; r < mr; r++) {
        #pragma GCC unroll 4
        for (int v = 0; v < nv; v++) {
            acc[r][v] = _mm512_setzero_ps();
            if (prefetch_c) _mm_prefetch((const char *)(C + r * ldc + 16 * v), _MM_HINT_ET0);
        }
    }
    for (int64_t k = 0; k < K; k++) {
        const float *b = B + k * ldb;
        if (next_a && k % 16 == 0) {
            #pragma GCC unroll 8
            for (int r = 0; r < mr; r++)
                _mm_prefetch((const char *)(next_a + r * sa + k), _MM_HINT_T0);
        }
        __m512 bv[TILE_MAX_NV];
        #pragma GCC unroll 4
        for (int v = 0; v < nv; v++) {
            bv[v] = v == nv - 1 ? _mm512_maskz_loadu_ps(tail, b + 16 * v)
                                : _mm512_loadu_ps(b + 16 * v);
        }
        #pragma GCC unroll 8
        for (int r = 0; r < mr; r++) {
            const __m512 a = _mm512_set1_ps(A[r * sa + k * sk]);
            #pragma GCC unroll 4
            for (int v = 0; v < nv; v++) acc[r][v] = _mm512_fmadd_ps(a, bv[v], acc[r][v]);
        }
    }
    const __m512 va = _mm512_set1_ps(alpha), vb = _mm512_set1_ps(beta);
    #pragma GCC unroll 8
    for (int r = 0; r < mr; r++) {
        #pragma GCC unroll 4
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
#endif

#if TESS_MATMUL_SMALL_WIDE
/* WIDE_MIN_M: products of fewer rows (the short attention's row blocks of 8) keep the 4 x 16
 * tiles they ran on before the wide ones existed: with the wide tiles there the tiny calm DAT
 * step, whose attention runs only those, measured 3-5% slower under load (not resolved). */
enum { WIDE_MR = 8, WIDE_NV = 2, WIDE_NR = 16 * WIDE_NV, WIDE_MIN_M = 64 };
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
            reg_tile(C + i * ldc + j0, ldc, A + i * sa, sa, sk, B + j0, ldb, K, alpha, beta, NULL,
                     true, 0xFFFF, WIDE_MR, WIDE_NV, false, NULL);
        for (int64_t i = m8; i < M; i++)
            reg_tile(C + i * ldc + j0, ldc, A + i * sa, sa, sk, B + j0, ldb, K, alpha, beta, NULL,
                     true, 0xFFFF, 1, WIDE_NV, false, NULL);
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
/* TILES_PANEL: rows of op(A) per packed panel when trans_a (8 tiles; 48 KiB at kc = 256).
 * TILES_PACK_LDA: trans_a packs op(A) from this leading dimension on (rows >= 1 KiB apart). */
enum { TILES_MR = 6, TILES_NV = 4, TILES_NB = 16 * TILES_NV, TILES_PANEL = 8 * TILES_MR };
enum { TILES_PACK_LDA = 256 };

/* Where tiles_block finds op(A)(r, k): in place in an (M,K) A (A + r lda + k), in place in a
 * (K,M) A (A + k lda + r), or in a packed panel (tile t's k-th 6 rows at A + (t K + k) 6). */
typedef enum { TILES_A_ROWS, TILES_A_COLS, TILES_A_PANEL } tiles_a;

/* The rows of one column block (nv vectors, the last masked by tail) and one k block: tiles of
 * 6 rows, then one tile of the last M % 6 rows (a weight gradient's 64 rows end in 4). */
static inline __attribute__((always_inline)) void tiles_block(
    float *C, int64_t ldc, const float *A, int64_t lda, const float *Bk, int64_t ldb, int64_t M,
    int64_t K, float alpha, float beta, const float *bias, bool first, __mmask16 tail,
    const int nv, const tiles_a at) {
    const int64_t sa = at == TILES_A_ROWS ? lda : 1;
    const int64_t sk = at == TILES_A_ROWS ? 1 : at == TILES_A_COLS ? lda : TILES_MR;
    const int64_t step = TILES_MR * (at == TILES_A_COLS ? 1 : at == TILES_A_ROWS ? lda : K);
    int64_t i = 0;
    const float *a = A;
    for (; i + TILES_MR <= M; i += TILES_MR, a += step) {
        reg_tile(C + i * ldc, ldc, a, sa, sk, Bk, ldb, K, alpha, beta, bias, first, tail,
                 TILES_MR, nv, true,
                 at == TILES_A_ROWS && i + 2 * TILES_MR <= M ? a + step : NULL);
    }
    float *c = C + i * ldc;
#define TILES_REST(MR)                                                                          \
    case MR:                                                                                    \
        reg_tile(c, ldc, a, sa, sk, Bk, ldb, K, alpha, beta, bias, first, tail, MR, nv, true,  \
                 NULL);                                                                         \
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

/* tiles_block with nv and at as constants (the accumulators of each case in registers). */
static void tiles_dispatch(float *C, int64_t ldc, const float *A, int64_t lda, const float *Bk,
                           int64_t ldb, int64_t M, int64_t K, float alpha, float beta,
                           const float *bias, bool first, __mmask16 tail, int nv, tiles_a at) {
#define TILES_AT(NV, AT)                                                                        \
    case AT:                                                                                    \
        tiles_block(C, ldc, A, lda, Bk, ldb, M, K, alpha, beta, bias, first, tail, NV, AT);    \
        break;
#define TILES_CASE(NV)                                                                          \
    case NV:                                                                                    \
        switch (at) {                                                                           \
            TILES_AT(NV, TILES_A_ROWS)                                                          \
            TILES_AT(NV, TILES_A_COLS)                                                          \
            TILES_AT(NV, TILES_A_PANEL)                                                         \
        }                                                                                       \
        break;
    switch (nv) {
        TILES_CASE(1)
        TILES_CASE(2)
        TILES_CASE(3)
        TILES_CASE(4)
    default: TESS_ASSERT(0 && "tiles: 1..4 vectors per column block");
    }
#undef TILES_CASE
#undef TILES_AT
}

/* Columns j.. of one column block of tess_matmul_tiles: its width, vectors and tail mask. */
typedef struct {
    int64_t nb;
    int nv;
    __mmask16 tail;
} tiles_cols;

static tiles_cols tiles_cols_at(int64_t N, int64_t j) {
    const int64_t nb = N - j < TILES_NB ? N - j : TILES_NB;
    return (tiles_cols){.nb = nb, .nv = (int)((nb + 15) / 16),
                        .tail = (__mmask16)(nb % 16 ? (1u << (nb % 16)) - 1u : 0xFFFFu)};
}

/* dst[k ldd + n] = src[n lds + k] for k, n < 16: one 16 x 16 block through registers. Each
 * source row is read as one 64-byte vector: read element by element down the columns, the 64
 * rows of a column block, 1-4 KiB apart, share a few L1 sets and evict each other (the copy of
 * op(B) then took 0.9-1.8 ns per element, up to 15% of an expert's 512 x 256 x 512 product). */
static inline void transpose16(float *dst, int64_t ldd, const float *src, int64_t lds) {
    __m512 r[16], t[16];
    for (int i = 0; i < 16; i++) r[i] = _mm512_loadu_ps(src + i * lds);
    for (int i = 0; i < 16; i += 2) { /* per 128-bit lane: (r_i[0] r_i+1[0] r_i[1] r_i+1[1]) ... */
        t[i] = _mm512_unpacklo_ps(r[i], r[i + 1]);
        t[i + 1] = _mm512_unpackhi_ps(r[i], r[i + 1]);
    }
    for (int i = 0; i < 16; i += 4) { /* r[i + m]: lane L holds column 4 L + m of rows i..i+3 */
        r[i] = _mm512_shuffle_ps(t[i], t[i + 2], 0x44);
        r[i + 1] = _mm512_shuffle_ps(t[i], t[i + 2], 0xEE);
        r[i + 2] = _mm512_shuffle_ps(t[i + 1], t[i + 3], 0x44);
        r[i + 3] = _mm512_shuffle_ps(t[i + 1], t[i + 3], 0xEE);
    }
    for (int m = 0; m < 4; m++) { /* column 4 L + m: lane L of r[m], r[4 + m], r[8 + m], r[12 + m] */
        const __m512 lo = _mm512_shuffle_f32x4(r[m], r[4 + m], 0x44);
        const __m512 hi = _mm512_shuffle_f32x4(r[m], r[4 + m], 0xEE);
        const __m512 lo2 = _mm512_shuffle_f32x4(r[8 + m], r[12 + m], 0x44);
        const __m512 hi2 = _mm512_shuffle_f32x4(r[8 + m], r[12 + m], 0xEE);
        _mm512_storeu_ps(dst + m * ldd, _mm512_shuffle_f32x4(lo, lo2, 0x88));
        _mm512_storeu_ps(dst + (4 + m) * ldd, _mm512_shuffle_f32x4(lo, lo2, 0xDD));
        _mm512_storeu_ps(dst + (8 + m) * ldd, _mm512_shuffle_f32x4(hi, hi2, 0x88));
        _mm512_storeu_ps(dst + (12 + m) * ldd, _mm512_shuffle_f32x4(hi, hi2, 0xDD));
    }
}

/* op(B)'s rows k0..k0+kc-1, columns j..j+nb-1, with leading dimension *ldbk: in place, or, when
 * trans_b (op(B)(k, n) = B[n ldb + k]), copied into bt (kc x TILES_NB): 16 x 16 blocks through
 * registers, element by element where kc or nb leave less than 16. */
static const float *tiles_b_block(float *bt, const float *B, int64_t ldb, bool trans_b,
                                  int64_t k0, int64_t kc, int64_t j, int64_t nb, int64_t *ldbk) {
    if (!trans_b) {
        *ldbk = ldb;
        return B + k0 * ldb + j;
    }
    const int64_t k16 = kc - kc % 16, n16 = nb - nb % 16;
    for (int64_t k = 0; k < k16; k += 16) {
        for (int64_t n = 0; n < n16; n += 16)
            transpose16(bt + k * TILES_NB + n, TILES_NB, B + (j + n) * ldb + k0 + k, ldb);
    }
    for (int64_t k = 0; k < kc; k++) {
        float *row = bt + k * TILES_NB;
        for (int64_t n = k < k16 ? n16 : 0; n < nb; n++) row[n] = B[(j + n) * ldb + k0 + k];
    }
    *ldbk = TILES_NB;
    return bt;
}
#endif

void tess_matmul_tiles(float *C, int64_t ldc, const float *A, int64_t lda, const float *B,
                       int64_t ldb, int64_t M, int64_t N, int64_t K, bool trans_a, bool trans_b,
                       float alpha, float beta, const float *bias) {
    TESS_ASSERT(M >= 0 && N >= 0 && K >= 0 && M <= INT_MAX && N <= INT_MAX && K <= INT_MAX);
    TESS_ASSERT(lda >= (trans_a ? M : K) && ldb >= (trans_b ? K : N) && ldc >= N);
#if defined(__AVX512F__)
    if (M == 0 || N == 0) return;
    enum { KC = TESS_MATMUL_TILES_KC };
    float bt[KC * TILES_NB]; /* op(B)'s block when trans_b */
    if (K == 0) { /* C = beta * C + bias */
        for (int64_t j = 0; j < N; j += TILES_NB) {
            const tiles_cols q = tiles_cols_at(N, j);
            tiles_dispatch(C + j, ldc, A, lda, B, ldb, M, 0, alpha, beta, bias ? bias + j : NULL,
                           true, q.tail, q.nv, TILES_A_ROWS);
        }
        return;
    }
    if (!trans_a || lda < TILES_PACK_LDA) { /* op(A) in place, column block by column block */
        const tiles_a at = trans_a ? TILES_A_COLS : TILES_A_ROWS;
        for (int64_t j = 0; j < N; j += TILES_NB) {
            const tiles_cols q = tiles_cols_at(N, j);
            for (int64_t k0 = 0; k0 < K; k0 += KC) {
                const int64_t kc = K - k0 < KC ? K - k0 : KC;
                int64_t ldbk;
                const float *Bk = tiles_b_block(bt, B, ldb, trans_b, k0, kc, j, q.nb, &ldbk);
                tiles_dispatch(C + j, ldc, trans_a ? A + k0 * lda : A + k0, lda, Bk, ldbk, M, kc,
                               alpha, beta, bias ? bias + j : NULL, k0 == 0, q.tail, q.nv, at);
            }
        }
        return;
    }
    /* trans_a, lda >= TILES_PACK_LDA: op(A)(r, k) = A[k lda + r]. In place, a tile's rows of
     * successive k lie lda apart, which at lda = 256, 768 or 1024 floats map to 1-4 sets of the
     * L1 cache and evict each other (the base calm DAT's weight gradients ran at 110-125 GFLOP/s,
     * packed at 140-165); so each k block's panels of TILES_PANEL rows are packed once (tile by
     * tile, k-major) and serve every column block. At lda = 64 (apps/fedkalter) packing measured
     * slower (dW 64 x 64 x 4096: 183 -> 126-143 GFLOP/s), hence the threshold. */
    float ap[TILES_PANEL * KC];
    for (int64_t k0 = 0; k0 < K; k0 += KC) {
        const int64_t kc = K - k0 < KC ? K - k0 : KC;
        for (int64_t i0 = 0; i0 < M; i0 += TILES_PANEL) {
            const int64_t rows = M - i0 < TILES_PANEL ? M - i0 : TILES_PANEL;
            for (int64_t k = 0; k < kc; k++) { /* row k of the panel, tile by tile */
                const float *src = A + (k0 + k) * lda + i0;
                for (int64_t i = 0; i < rows; i += TILES_MR) {
                    float *dst = ap + (i * kc + k * TILES_MR);
                    if (rows - i >= TILES_MR) {
                        for (int r = 0; r < TILES_MR; r++) dst[r] = src[i + r];
                    } else {
                        for (int64_t r = 0; r < rows - i; r++) dst[r] = src[i + r];
                    }
                }
            }
            for (int64_t j = 0; j < N; j += TILES_NB) {
                const tiles_cols q = tiles_cols_at(N, j);
                int64_t ldbk;
                const float *Bk = tiles_b_block(bt, B, ldb, trans_b, k0, kc, j, q.nb, &ldbk);
                tiles_dispatch(C + i0 * ldc + j, ldc, ap, TILES_MR, Bk, ldbk, rows, kc, alpha,
                               beta, bias ? bias + j : NULL, k0 == 0, q.tail, q.nv,
                               TILES_A_PANEL);
            }
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

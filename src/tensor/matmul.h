/* matmul.h - the one matrix-multiply path of Tessera: row-major fp32 GEMM through OpenBLAS, with
 * transposes expressed as flags (no transpose copies), and the naive reference beside it.
 * Not collective; local to the calling rank. Threads: whatever OPENBLAS_NUM_THREADS allows. */
#ifndef TESS_TENSOR_MATMUL_H
#define TESS_TENSOR_MATMUL_H

#include <stdbool.h>
#include <stdint.h>

#include "core/status.h" /* tess_status */

/* OpenBLAS takes a work buffer of this size (its BUFFER_SIZE, 128 MiB on x86-64, plus alignment)
 * at its first product on each thread. */
#define TESS_MATMUL_BLAS_BUFFER_BYTES ((int64_t)(128 << 20) + (64 << 10))

/* Call once at start-up, before the first product (the run driver does). OpenBLAS allocates its
 * work buffer at the first product and, when that allocation fails (an address-space limit,
 * `ulimit -v`, that leaves less than the buffer), retries forever instead of failing. So: under a
 * finite RLIMIT_AS, first try an allocation of TESS_MATMUL_BLAS_BUFFER_BYTES (TESS_ERR_MEM naming
 * the limit when it fails), then run one 1x1 product so that OpenBLAS takes its buffer while the
 * room is there; later products reuse it. With OPENBLAS_NUM_THREADS > 1 each thread takes its own
 * buffer at its first product, which this cannot reserve. Not collective. */
tess_status tess_matmul_init(void);

/* OpenBLAS's thread count for the products that follow (process-wide: OPENBLAS_NUM_THREADS at
 * start, or the last tess_matmul_set_threads), and setting it (n >= 1). A caller that runs
 * products on several threads of its own (core/team.h) sets 1 for that phase and restores the
 * count after it: OpenBLAS's own threads would otherwise compete with the caller's. */
int tess_matmul_threads(void);
void tess_matmul_set_threads(int n);

/* C = alpha * op(A) @ op(B) + beta * C, all row-major and contiguous.
 * C (M,N); op(A) (M,K): A is (M,K), or (K,M) when trans_a; op(B) (K,N): B is (K,N), or (N,K)
 * when trans_b. beta = 0 overwrites C (NaNs in C are not propagated); beta = 1 accumulates.
 * M, N, K must fit in int (BLAS); checked by TESS_ASSERT. */
void tess_matmul(float *C, const float *A, const float *B, int64_t M, int64_t N, int64_t K,
                 bool trans_a, bool trans_b, float alpha, float beta);

/* Same contract, triple loop with double accumulation: the oracle for tests. */
void tess_matmul_ref(float *C, const float *A, const float *B, int64_t M, int64_t N, int64_t K,
                     bool trans_a, bool trans_b, float alpha, float beta);

/* tess_matmul on sub-matrices of larger row-major arrays (BLAS leading dimensions): row r of the
 * stored A starts at A + r * lda, likewise B (ldb) and C (ldc). The stored A has M rows of K (K
 * rows of M when trans_a), so lda >= K (>= M when trans_a); ldb >= N (>= K when trans_b);
 * ldc >= N. E.g. one attention head's (T,hs) queries inside a (T,3C) qkv array: A = qkv + h * hs,
 * lda = 3C. C's columns past N are not touched. Sizes and strides within int (TESS_ASSERT). */
void tess_matmul_ld(float *C, int64_t ldc, const float *A, int64_t lda, const float *B,
                    int64_t ldb, int64_t M, int64_t N, int64_t K, bool trans_a, bool trans_b,
                    float alpha, float beta);

/* Same contract, triple loop with double accumulation: the oracle for tests. */
void tess_matmul_ld_ref(float *C, int64_t ldc, const float *A, int64_t lda, const float *B,
                        int64_t ldb, int64_t M, int64_t N, int64_t K, bool trans_a, bool trans_b,
                        float alpha, float beta);

/* Columns per vector block of tess_matmul_small: N must be a multiple of it. */
#define TESS_MATMUL_SMALL_NB 8

/* C (M,N) = alpha * A (M,K) @ B (K,N) + beta * C, row-major sub-matrices with leading dimensions
 * as in tess_matmul_ld (lda >= K, ldb >= N, ldc >= N; no transposes), computed in plain C for
 * products that sit in L1, where a BLAS call's fixed cost dominates (an attention head's
 * 8 x 32 x 32 row blocks) or in L2 (a head of 256 rows with TESS_MATMUL_SMALL_WIDE). Tiles of
 * 8 rows x 32 columns (AVX-512F, TESS_MATMUL_SMALL_WIDE, M >= 64), then 4 rows x 16 (or 8)
 * columns (AVX2 + FMA intrinsics when the target has them, else plain loops) held in registers,
 * vectorised over the columns.
 * N % TESS_MATMUL_SMALL_NB == 0 (TESS_ASSERT); M and K any (K = 0 gives beta * C). Summation
 * order: each element sums its K products in increasing k (fused multiply-adds with AVX2 + FMA),
 * then alpha, then beta * C — not BLAS's order. beta = 0 does not read C. Not collective; no
 * allocation. */
void tess_matmul_small(float *C, int64_t ldc, const float *A, int64_t lda, const float *B,
                       int64_t ldb, int64_t M, int64_t N, int64_t K, float alpha, float beta);
/* The same with A transposed: C (M,N) = alpha * A^T @ B (K,N) + beta * C, A stored (K,M) with
 * leading dimension lda >= M (the broadcasts read A's column elements where they lie; no copy).
 * Same tiles, summation order and conditions. */
void tess_matmul_small_tn(float *C, int64_t ldc, const float *A, int64_t lda, const float *B,
                          int64_t ldb, int64_t M, int64_t N, int64_t K, float alpha, float beta);

/* 1 when tess_matmul_small has its 16-lane tiles (AVX-512F on x86-64, -march=native on such a
 * CPU): in products of at least 64 rows, blocks of 32 columns run in tiles of 8 rows x 32
 * columns (16 accumulator registers),
 * which ran an attention head's 256 x 256 x 32 and 256 x 32 x 256 products alone, hot in cache,
 * at ~110 GFLOP/s against OpenBLAS 0.3.21's ~88 (1 thread; OpenBLAS packs both operands of every
 * call), and in place in the attention's backward a little faster than BLAS, in its forward
 * slower (nn/attention.c). Else 0: the 8-lane tiles only, which lose to BLAS at those sizes. */
#if defined(__AVX512F__)
#define TESS_MATMUL_SMALL_WIDE 1
#else
#define TESS_MATMUL_SMALL_WIDE 0
#endif

/* C = alpha * op(A) @ op(B) + beta * C (+ bias), the contract of tess_matmul_ld (leading
 * dimensions, transposes, beta = 0 does not read C, C's columns past N untouched) plus an
 * optional bias (N) added to every row (NULL: none). For the products of narrow layers: an
 * (M, K) activation with M in the thousands times a (K, N) weight with N, K of 16-256, and the
 * weight gradient op(A) = (rows, M)^T with K = M; and the transformer block's projections, MLPs
 * and heads (nn/block.c, nn/mlp.c, nn/head.c: 8192 x 256-1024 activations in the base calm DAT,
 * where these tiles ran at 140-190 GFLOP/s against OpenBLAS 0.3.21's 80-95 on this AVX-512 CPU,
 * whose kernels OpenBLAS picks as Haswell's, 8 lanes). OpenBLAS packs the large operand for every
 * call (sgemm_*copy, a third of its time on the narrow shapes: docs/benchmarks.md "fedkalter");
 * this path reads A where it lies and broadcasts its elements into register tiles of 6 rows x 64
 * columns (AVX-512), and copies only op(B) when trans_b, TESS_MATMUL_TILES_KC rows of it at a
 * time (the small operand, once per call; in 16 x 16 register transposes, each row of the stored
 * B read as whole vectors), and op(A) when trans_a with lda >= 256 (rows 1 KiB or
 * more apart, which map to few L1 sets): 48 rows x KC at a time, once per k block. Summation
 * order: each element sums its products in increasing k with fused multiply-adds in blocks of
 * TESS_MATMUL_TILES_KC; the first block gives alpha * sum + beta * C (+ bias), each later block
 * adds alpha * its sum to C — not BLAS's order; the same whether op(A) is packed or not. Without
 * AVX-512 at compile time it is tess_matmul_ld followed by the bias. Not collective; no
 * allocation (a KC x 64 block of op(B) and a 48 x KC panel of op(A) on the stack, 112 KiB);
 * sizes as tess_matmul_ld (TESS_ASSERT). */
#define TESS_MATMUL_TILES_KC 256
void tess_matmul_tiles(float *C, int64_t ldc, const float *A, int64_t lda, const float *B,
                       int64_t ldb, int64_t M, int64_t N, int64_t K, bool trans_a, bool trans_b,
                       float alpha, float beta, const float *bias);

#endif

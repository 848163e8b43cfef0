/* matmul.h - the one matrix-multiply path of Tessera: row-major fp32 GEMM through OpenBLAS, with
 * transposes expressed as flags (no transpose copies), and the naive reference beside it.
 * Not collective; local to the calling rank. Threads: whatever OPENBLAS_NUM_THREADS allows. */
#ifndef TESS_TENSOR_MATMUL_H
#define TESS_TENSOR_MATMUL_H

#include <stdbool.h>
#include <stdint.h>

/* C = alpha * op(A) @ op(B) + beta * C, all row-major and contiguous.
 * C (M,N); op(A) (M,K): A is (M,K), or (K,M) when trans_a; op(B) (K,N): B is (K,N), or (N,K)
 * when trans_b. beta = 0 overwrites C (NaNs in C are not propagated); beta = 1 accumulates.
 * M, N, K must fit in int (BLAS); checked by TESS_ASSERT. */
void tess_matmul(float *C, const float *A, const float *B, int64_t M, int64_t N, int64_t K,
                 bool trans_a, bool trans_b, float alpha, float beta);

/* Same contract, triple loop with double accumulation: the oracle for tests. */
void tess_matmul_ref(float *C, const float *A, const float *B, int64_t M, int64_t N, int64_t K,
                     bool trans_a, bool trans_b, float alpha, float beta);

#endif

/* sparse.h - the sparse kernels of the graph layers: products of a CSR matrix with a dense
 * row-major matrix (SpMM, and with the transpose), and the segment sum that pools node rows into
 * graph rows through a node->graph index; naive references beside them.
 *
 * Not collective; no allocation. Outputs must not alias inputs. Counts are int64_t; column
 * indices int32_t (a mini-batch of graphs has < 2^31 nodes). */
#ifndef TESS_TENSOR_SPARSE_H
#define TESS_TENSOR_SPARSE_H

#include <stdint.h>

/* A CSR matrix (rows x cols), not owning: row i holds entries indptr[i] .. indptr[i+1]-1, with
 * column indices[e] in [0, cols) and value val[e]; val == NULL means every stored value is 1
 * (an adjacency pattern). */
typedef struct {
    int64_t rows, cols;
    const int64_t *indptr; /* (rows + 1) */
    const int32_t *indices; /* (indptr[rows]) */
    const float *val;       /* (indptr[rows]) or NULL */
} tess_csr;

/* Y (rows, F) = alpha * A @ X + beta * Y; X (cols, F). beta = 0 overwrites Y. Row-parallel
 * gather: each output row is written once. */
void tess_csr_spmm(float *Y, const tess_csr *A, const float *X, int64_t F, float alpha, float beta);

/* Y (cols, F) += A^T @ X; X (rows, F). (Scatter order is fixed, so results are deterministic.) */
void tess_csr_spmm_t(float *Y, const tess_csr *A, const float *X, int64_t F);

/* The two products on column blocks of larger row-major arrays: row r of Y starts at
 * Y + r * ldy, row r of X at X + r * ldx (ldy, ldx >= F); the columns of Y past F are not
 * touched. E.g. the F columns from column k of an (N, W) array: pointer + k, ld W. Same
 * arithmetic in the same order as the contiguous forms (which call these with ld = F). */
void tess_csr_spmm_ld(float *Y, int64_t ldy, const tess_csr *A, const float *X, int64_t ldx,
                      int64_t F, float alpha, float beta);
void tess_csr_spmm_t_ld(float *Y, int64_t ldy, const tess_csr *A, const float *X, int64_t ldx,
                        int64_t F);

/* out (G, F) = segment sums of in (N, F): out[g] = sum of in[i] over i with seg[i] == g,
 * seg (N) in [0, G). Overwrites out (rows without a node are zero). */
void tess_segment_sum(float *out, const float *in, const int64_t *seg, int64_t N, int64_t G,
                      int64_t F);
/* din (N, F) += dout[seg[i]] for every row i: the backward of tess_segment_sum. */
void tess_segment_sum_backward(float *din, const float *dout, const int64_t *seg, int64_t N,
                               int64_t F);

/* Same contracts through a dense copy of A with double accumulation: the oracles for tests
 * (O(rows * cols * F); small matrices only). */
void tess_csr_spmm_ref(float *Y, const tess_csr *A, const float *X, int64_t F, float alpha,
                       float beta);
void tess_csr_spmm_t_ref(float *Y, const tess_csr *A, const float *X, int64_t F);
void tess_segment_sum_ref(float *out, const float *in, const int64_t *seg, int64_t N, int64_t G,
                          int64_t F);

#endif

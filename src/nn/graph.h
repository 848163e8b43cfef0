/* graph.h - graph mini-batches and the graph layers of the FedStar family (docs/nn.md):
 *   - a block-diagonal mini-batch of graphs in CSR: the adjacency A, the GCN-normalised
 *     A-hat = D~^-1/2 (A + I) D~^-1/2 (D~ = diag(deg + 1)) and A-hat2 = A-hat o A-hat on the
 *     pattern of A + I, the node -> graph index for pooling;
 *   - the structure encodings of one graph: RWSE (diagonal of (A D^-1)^k, k = 1..K) and DSE
 *     (one-hot of min(max(deg, 1), K) - 1);
 *   - GIN: out = MLP((1 + eps) x + A x), MLP = Linear(C->H), ReLU, Linear(H->OC), eps fixed;
 *     and the same over two inputs [x1 | x2] without the concatenation (tess_nn_gin2_*);
 *   - GCN with tanh (FedStar's structure channel): out = tanh((A-hat s) w^T + b);
 *   - ReLU with an optional dropout mask.
 * Layer convention (docs/nn.md): weights (out, in); forward overwrites its outputs and caches;
 * backward ADDS into every gradient it is given. Not collective; layers do not allocate (the
 * batch builder and the encodings do). Letters: N nodes of the batch, G graphs, C input
 * channels, H hidden, OC output channels. */
#ifndef TESS_NN_GRAPH_H
#define TESS_NN_GRAPH_H

#include <stdint.h>

#include "core/rng.h"      /* tess_rng_key */
#include "core/status.h"   /* tess_status */
#include "io/graphs.h"     /* tess_graphs */
#include "tensor/sparse.h" /* tess_csr */

/* A block-diagonal mini-batch of graphs (all arrays owned; tess_graph_batch_free). Graph b of
 * the batch is graph ids[b] of the source set; its nodes are rows node_ptr[b] .. node_ptr[b+1]-1
 * in source order; node ids in the CSR arrays are batch-global. */
typedef struct {
    int64_t num_graphs, num_nodes, nnz; /* G, N, nnz of A (both directions of every edge) */
    int64_t *node_ptr;                  /* (G + 1) */
    int64_t *graph_of;                  /* (N) batch graph of each node: the pooling index */
    int64_t *a_indptr;                  /* (N + 1) A: pattern without self loops */
    int32_t *a_indices;                 /* (nnz) */
    int64_t *h_indptr;                  /* (N + 1) pattern of A + I: the self loop first */
    int32_t *h_indices;                 /* (nnz + N) */
    float *ahat;                        /* (nnz + N) values of A-hat on that pattern */
    float *ahat2;                       /* (nnz + N) values of A-hat o A-hat */
    int64_t cap_graphs, cap_nodes, cap_nnz; /* what the arrays hold at most (G, N, nnz) */
} tess_graph_batch;

/* Build the batch of graphs ids[0..n) of gs (indices into gs's graphs, any order, repeats
 * allowed): tess_graph_batch_reserve of exactly its size, then tess_graph_batch_fill.
 * TESS_ERR_ARG for an id out of range, TESS_ERR_MEM. On failure b holds nothing.
 * Not collective. */
tess_status tess_graph_batch_build(tess_graph_batch *b, const tess_graphs *gs, const int64_t *ids,
                                   int64_t n);
/* Allocate b's arrays for batches of at most max_graphs graphs, max_nodes nodes and max_nnz
 * entries of A, holding no graph yet (G = N = nnz = 0). A training loop reserves once and fills
 * every mini-batch into the same arrays. TESS_ERR_ARG for a negative count or max_nodes +
 * max_nnz >= 2^31 (int32 indices), TESS_ERR_MEM. On failure b holds nothing. Not collective. */
tess_status tess_graph_batch_reserve(tess_graph_batch *b, int64_t max_graphs, int64_t max_nodes,
                                     int64_t max_nnz);
/* Make b the batch of graphs ids[0..n) of gs, as tess_graph_batch_build, in the arrays reserved
 * before: no allocation. TESS_ERR_ARG for an id out of range or a batch beyond the capacity
 * (naming the counts and the capacity); b is unchanged then. Not collective. */
tess_status tess_graph_batch_fill(tess_graph_batch *b, const tess_graphs *gs, const int64_t *ids,
                                  int64_t n);
/* Free the arrays and zero b. Safe on a zeroed struct. */
void tess_graph_batch_free(tess_graph_batch *b);
/* Views of the batch's matrices (valid while b lives). */
tess_csr tess_graph_batch_adj(const tess_graph_batch *b);
tess_csr tess_graph_batch_ahat(const tess_graph_batch *b);
tess_csr tess_graph_batch_ahat2(const tess_graph_batch *b);
/* out (N, F) = rows of src (gs's node rows, F wide) for the batch's nodes, in batch order. */
void tess_graph_batch_gather(float *out, const tess_graph_batch *b, const tess_graphs *gs,
                             const int64_t *ids, const float *src, int64_t F);

/* Structure encodings of one graph with n nodes and CSR (indptr, indices) (symmetric, no self
 * loops, no duplicates), written to out (n, 2K) as [RWSE | DSE]:
 *   RWSE_k(i) = ((A D^-1)^k)_ii, k = 1..K, with 1/deg := 0 (isolated nodes: all zeros),
 *   DSE: one-hot at min(max(deg_i, 1), K) - 1.
 * RWSE runs one sparse walk per node in double: O(n K nnz). Not collective; no allocation
 * beyond two work vectors (TESS_ERR_MEM). */
tess_status tess_graph_structure_enc(float *out, const int64_t *indptr, const int32_t *indices,
                                     int64_t n, int K);
/* Same through dense double matrix powers: the oracle for tests (small n). */
tess_status tess_graph_structure_enc_ref(float *out, const int64_t *indptr,
                                         const int32_t *indices, int64_t n, int K);

/* GIN. x (N,C); A (N,N) pattern or weighted; w1 (H,C), b1 (H), w2 (OC,H), b2 (OC); eps fixed.
 * Caches m (N,C) = (1+eps) x + A x, c (N,H) = m w1^T + b1, r (N,H) = relu(c); out (N,OC). */
void tess_nn_gin_forward(float *out, float *m, float *c, float *r, const float *x,
                         const tess_csr *A, float eps, const float *w1, const float *b1,
                         const float *w2, const float *b2, int64_t N, int64_t C, int64_t H,
                         int64_t OC);
/* dx (N,C) += (1+eps) dm + A^T dm (dx may be NULL); dw1 (H,C), db1 (H), dw2 (OC,H), db2 (OC) +=.
 * scratch (tess_nn_gin_scratch_size floats) is overwritten. */
void tess_nn_gin_backward(float *dx, float *dw1, float *db1, float *dw2, float *db2,
                          float *scratch, const float *dout, const tess_csr *A, float eps,
                          const float *w1, const float *w2, const float *m, const float *c,
                          const float *r, int64_t N, int64_t C, int64_t H, int64_t OC);
int64_t tess_nn_gin_scratch_size(int64_t N, int64_t C, int64_t H);
void tess_nn_gin_forward_ref(float *out, float *m, float *c, float *r, const float *x,
                             const tess_csr *A, float eps, const float *w1, const float *b1,
                             const float *w2, const float *b2, int64_t N, int64_t C, int64_t H,
                             int64_t OC);
void tess_nn_gin_backward_ref(float *dx, float *dw1, float *db1, float *dw2, float *db2,
                              const float *dout, const tess_csr *A, float eps, const float *w1,
                              const float *w2, const float *m, const float *c, const float *r,
                              int64_t N, int64_t C, int64_t H, int64_t OC);

/* GIN over two inputs X = [x1 | x2] without forming X: x1 (N,C1) with C1 >= 1, x2 (N,C2) (NULL
 * with C2 = 0: one input); w1 (H, C1+C2) (its column blocks act on x1 and x2), b1 (H), w2 (OC,H),
 * b2 (OC). Computed transform first: y = x1 w1[:, :C1]^T + x2 w1[:, C1:]^T, c = (1+eps) y +
 * A y + b1, r = relu(c), out = r w2^T + b2: GIN(X) of tess_nn_gin_forward in exact arithmetic
 * (A is linear), with the SpMM H wide instead of C1 + C2 and no copy of the inputs; the float
 * results differ in rounding. Writes y (N,H) (not read by backward) and the caches c, r (N,H). */
void tess_nn_gin2_forward(float *out, float *y, float *c, float *r, const float *x1,
                          const float *x2, const tess_csr *A, float eps, const float *w1,
                          const float *b1, const float *w2, const float *b2, int64_t N,
                          int64_t C1, int64_t C2, int64_t H, int64_t OC);
/* With dc = (dout w2) o 1[c > 0] and dy = (1+eps) dc + A^T dc: dx1 (N,C1) += dy w1[:, :C1],
 * dx2 (N,C2) += dy w1[:, C1:] (either may be NULL), dw1 (H, C1+C2) += dy^T [x1 | x2] by column
 * block, db1 += sums of dc, dw2, db2 += as a linear layer. x1, x2 as in the forward; scratch
 * (tess_nn_gin2_scratch_size floats) is overwritten. */
void tess_nn_gin2_backward(float *dx1, float *dx2, float *dw1, float *db1, float *dw2, float *db2,
                           float *scratch, const float *dout, const tess_csr *A, float eps,
                           const float *w1, const float *w2, const float *x1, const float *x2,
                           const float *c, const float *r, int64_t N, int64_t C1, int64_t C2,
                           int64_t H, int64_t OC);
int64_t tess_nn_gin2_scratch_size(int64_t N, int64_t H);
/* The references: tess_nn_gin_*_ref on the concatenation X (aggregate first, double sums); y in
 * double as X w1^T. They allocate their copies. */
void tess_nn_gin2_forward_ref(float *out, float *y, float *c, float *r, const float *x1,
                              const float *x2, const tess_csr *A, float eps, const float *w1,
                              const float *b1, const float *w2, const float *b2, int64_t N,
                              int64_t C1, int64_t C2, int64_t H, int64_t OC);
void tess_nn_gin2_backward_ref(float *dx1, float *dx2, float *dw1, float *db1, float *dw2,
                               float *db2, const float *dout, const tess_csr *A, float eps,
                               const float *w1, const float *w2, const float *x1,
                               const float *x2, const float *c, const float *r, int64_t N,
                               int64_t C1, int64_t C2, int64_t H, int64_t OC);

/* GCN with tanh. s (N,C); Ahat (N,N); w (OC,C), b (OC). Cache u (N,C) = Ahat s;
 * out (N,OC) = tanh(u w^T + b). */
void tess_nn_gcn_tanh_forward(float *out, float *u, const float *s, const tess_csr *Ahat,
                              const float *w, const float *b, int64_t N, int64_t C, int64_t OC);
/* ds (N,C) += Ahat^T (da w), da = dout (1 - out^2) (ds may be NULL); dw (OC,C), db (OC) +=.
 * scratch (tess_nn_gcn_scratch_size floats) is overwritten. */
void tess_nn_gcn_tanh_backward(float *ds, float *dw, float *db, float *scratch, const float *dout,
                               const float *out, const float *u, const tess_csr *Ahat,
                               const float *w, int64_t N, int64_t C, int64_t OC);
int64_t tess_nn_gcn_scratch_size(int64_t N, int64_t C, int64_t OC);
void tess_nn_gcn_tanh_forward_ref(float *out, float *u, const float *s, const tess_csr *Ahat,
                                  const float *w, const float *b, int64_t N, int64_t C,
                                  int64_t OC);
void tess_nn_gcn_tanh_backward_ref(float *ds, float *dw, float *db, const float *dout,
                                   const float *out, const float *u, const tess_csr *Ahat,
                                   const float *w, int64_t N, int64_t C, int64_t OC);

/* Dropout mask (n) for elements first .. first + n - 1 of counter ctr: element i takes the 16-bit
 * half-word (i % 8) of Philox block i / 8 (tess_rng_blocks; half-word 2 w + h is bits 16 h ..
 * 16 h + 15 of the block's word w) and is 0 (dropped) if that draw is below round(p 2^16), else
 * 1/(1-p). So the drop probability is p rounded to a multiple of 2^-16, and a mask is a pure
 * function of (key, ctr, element): any slice equals the same slice of a longer mask. p in [0, 1). */
void tess_nn_dropout_mask(float *mask, int64_t n, float p, tess_rng_key key, uint64_t ctr,
                          uint64_t first);

/* out (n) = mask * relu(in); mask (n) holds 0 or 1/(1-p) (dropout), or NULL for none.
 * out may alias in. din (n) += dout * mask * 1[in > 0] (din must not alias). */
void tess_nn_relu_dropout_forward(float *out, const float *in, const float *mask, int64_t n);
void tess_nn_relu_dropout_backward(float *din, const float *dout, const float *in,
                                   const float *mask, int64_t n);

#endif

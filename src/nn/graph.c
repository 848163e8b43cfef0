/* graph.c - graph mini-batches, structure encodings, GIN (one and two inputs), GCN-tanh,
 * ReLU-dropout (graph.h). */
#include "nn/graph.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "nn/linear.h"     /* tess_nn_linear_* */
#include "tensor/matmul.h" /* tess_matmul_ld */
#include "tensor/sparse.h" /* tess_csr_spmm* */
#include "tensor/tensor.h" /* tess_tensor_tanhf */

void tess_graph_batch_free(tess_graph_batch *b) {
    free(b->node_ptr);
    free(b->graph_of);
    free(b->a_indptr);
    free(b->a_indices);
    free(b->h_indptr);
    free(b->h_indices);
    free(b->ahat);
    free(b->ahat2);
    memset(b, 0, sizeof *b);
}

tess_status tess_graph_batch_reserve(tess_graph_batch *b, int64_t max_graphs, int64_t max_nodes,
                                     int64_t max_nnz) {
    memset(b, 0, sizeof *b);
    TESS_REQUIRE(max_graphs >= 0 && max_nodes >= 0 && max_nnz >= 0 &&
                     max_nodes + max_nnz < INT32_MAX,
                 TESS_ERR_ARG, "batch of %lld graphs, %lld nodes, %lld edges: negative or too "
                 "large (int32 indices)", (long long)max_graphs, (long long)max_nodes,
                 (long long)max_nnz);
    const int64_t N = max_nodes, nnz = max_nnz;
    b->node_ptr = malloc((size_t)(max_graphs + 1) * sizeof(int64_t));
    b->graph_of = malloc((size_t)(N > 0 ? N : 1) * sizeof(int64_t));
    b->a_indptr = malloc((size_t)(N + 1) * sizeof(int64_t));
    b->a_indices = malloc((size_t)(nnz > 0 ? nnz : 1) * sizeof(int32_t));
    b->h_indptr = malloc((size_t)(N + 1) * sizeof(int64_t));
    b->h_indices = malloc((size_t)(nnz + N + 1) * sizeof(int32_t));
    b->ahat = malloc((size_t)(nnz + N + 1) * sizeof(float));
    b->ahat2 = malloc((size_t)(nnz + N + 1) * sizeof(float));
    if (!b->node_ptr || !b->graph_of || !b->a_indptr || !b->a_indices || !b->h_indptr ||
        !b->h_indices || !b->ahat || !b->ahat2) {
        tess_graph_batch_free(b);
        TESS_REQUIRE(0, TESS_ERR_MEM, "batch of %lld nodes, %lld edges", (long long)N,
                     (long long)nnz);
    }
    b->cap_graphs = max_graphs, b->cap_nodes = N, b->cap_nnz = nnz;
    b->node_ptr[0] = b->a_indptr[0] = b->h_indptr[0] = 0;
    return TESS_OK;
}

/* The nodes and A entries of graphs ids[0..n) of gs; TESS_ERR_ARG for an id out of range. */
static tess_status batch_size(const tess_graphs *gs, const int64_t *ids, int64_t n, int64_t *N,
                              int64_t *nnz) {
    *N = *nnz = 0;
    for (int64_t k = 0; k < n; k++) {
        TESS_REQUIRE(ids[k] >= 0 && ids[k] < gs->num_graphs, TESS_ERR_ARG,
                     "graph %lld of the batch: id %lld outside [0, %lld) of '%s'", (long long)k,
                     (long long)ids[k], (long long)gs->num_graphs, gs->name);
        *N += gs->node_ptr[ids[k] + 1] - gs->node_ptr[ids[k]];
        *nnz += gs->edge_ptr[ids[k] + 1] - gs->edge_ptr[ids[k]];
    }
    return TESS_OK;
}

tess_status tess_graph_batch_build(tess_graph_batch *b, const tess_graphs *gs, const int64_t *ids,
                                   int64_t n) {
    memset(b, 0, sizeof *b);
    int64_t N, nnz;
    TESS_CHECK(batch_size(gs, ids, n, &N, &nnz));
    TESS_CHECK(tess_graph_batch_reserve(b, n, N, nnz));
    return tess_graph_batch_fill(b, gs, ids, n);
}

tess_status tess_graph_batch_fill(tess_graph_batch *b, const tess_graphs *gs, const int64_t *ids,
                                  int64_t n) {
    int64_t N, nnz;
    TESS_CHECK(batch_size(gs, ids, n, &N, &nnz));
    TESS_REQUIRE(n <= b->cap_graphs && N <= b->cap_nodes && nnz <= b->cap_nnz, TESS_ERR_ARG,
                 "batch of %lld graphs, %lld nodes, %lld edges of '%s' exceeds the reserved "
                 "%lld graphs, %lld nodes, %lld edges", (long long)n, (long long)N,
                 (long long)nnz, gs->name, (long long)b->cap_graphs, (long long)b->cap_nodes,
                 (long long)b->cap_nnz);
    b->num_graphs = n;
    b->num_nodes = N;
    b->nnz = nnz;
    /* A, block by block; node ids shifted by the graph's first batch row */
    int64_t row = 0, e = 0;
    b->node_ptr[0] = 0;
    b->a_indptr[0] = 0;
    for (int64_t k = 0; k < n; k++) {
        const int64_t g = ids[k], first = gs->node_ptr[g], ng = gs->node_ptr[g + 1] - first;
        for (int64_t i = 0; i < ng; i++, row++) {
            b->graph_of[row] = k;
            for (int64_t s = gs->indptr[first + i]; s < gs->indptr[first + i + 1]; s++) {
                b->a_indices[e++] = (int32_t)(b->node_ptr[k] + gs->indices[s]);
            }
            b->a_indptr[row + 1] = e;
        }
        b->node_ptr[k + 1] = row;
    }
    /* A + I with GCN weights 1 / sqrt((deg_i + 1)(deg_j + 1)); A-hat2 their squares */
    int64_t h = 0;
    b->h_indptr[0] = 0;
    for (int64_t i = 0; i < N; i++) {
        const double di = (double)(b->a_indptr[i + 1] - b->a_indptr[i]) + 1.0;
        b->h_indices[h] = (int32_t)i;
        b->ahat[h++] = (float)(1.0 / di);
        for (int64_t s = b->a_indptr[i]; s < b->a_indptr[i + 1]; s++) {
            const int32_t j = b->a_indices[s];
            const double dj = (double)(b->a_indptr[j + 1] - b->a_indptr[j]) + 1.0;
            b->h_indices[h] = j;
            b->ahat[h++] = (float)(1.0 / sqrt(di * dj));
        }
        b->h_indptr[i + 1] = h;
    }
    for (int64_t s = 0; s < h; s++) b->ahat2[s] = b->ahat[s] * b->ahat[s];
    return TESS_OK;
}

tess_csr tess_graph_batch_adj(const tess_graph_batch *b) {
    return (tess_csr){b->num_nodes, b->num_nodes, b->a_indptr, b->a_indices, NULL};
}

tess_csr tess_graph_batch_ahat(const tess_graph_batch *b) {
    return (tess_csr){b->num_nodes, b->num_nodes, b->h_indptr, b->h_indices, b->ahat};
}

tess_csr tess_graph_batch_ahat2(const tess_graph_batch *b) {
    return (tess_csr){b->num_nodes, b->num_nodes, b->h_indptr, b->h_indices, b->ahat2};
}

void tess_graph_batch_gather(float *out, const tess_graph_batch *b, const tess_graphs *gs,
                             const int64_t *ids, const float *src, int64_t F) {
    /* out (N,F), src (gs->num_nodes, F) */
    for (int64_t k = 0; k < b->num_graphs; k++) {
        const int64_t first = gs->node_ptr[ids[k]], ng = b->node_ptr[k + 1] - b->node_ptr[k];
        memcpy(out + b->node_ptr[k] * F, src + first * F, (size_t)(ng * F) * sizeof(float));
    }
}

/* DSE part of the encoding: out row i (2K wide) gets a 1 at K + min(max(deg, 1), K) - 1. */
static void structure_dse(float *out, const int64_t *indptr, int64_t n, int K) {
    for (int64_t i = 0; i < n; i++) {
        int64_t deg = indptr[i + 1] - indptr[i];
        int64_t slot = (deg < 1 ? 1 : deg > K ? K : deg) - 1;
        float *o = out + i * 2 * K + K;
        memset(o, 0, (size_t)K * sizeof(float));
        o[slot] = 1.0f;
    }
}

tess_status tess_graph_structure_enc(float *out, const int64_t *indptr, const int32_t *indices,
                                     int64_t n, int K) {
    TESS_REQUIRE(n >= 0 && K >= 1, TESS_ERR_ARG, "n = %lld, K = %d", (long long)n, K);
    double *v = malloc((size_t)(n > 0 ? n : 1) * sizeof(double));
    double *w = malloc((size_t)(n > 0 ? n : 1) * sizeof(double));
    if (!v || !w) {
        free(v);
        free(w);
        TESS_REQUIRE(0, TESS_ERR_MEM, "RWSE work vectors of %lld nodes", (long long)n);
    }
    /* walk from node i: v = M^k e_i with (M x)_a = sum_b A_ab x_b / deg_b; RWSE_k(i) = v_i */
    for (int64_t i = 0; i < n; i++) {
        memset(v, 0, (size_t)n * sizeof(double));
        v[i] = 1.0;
        for (int k = 0; k < K; k++) {
            for (int64_t a = 0; a < n; a++) {
                double acc = 0.0;
                for (int64_t e = indptr[a]; e < indptr[a + 1]; e++) {
                    const int32_t j = indices[e];
                    acc += v[j] / (double)(indptr[j + 1] - indptr[j]);
                }
                w[a] = acc;
            }
            memcpy(v, w, (size_t)n * sizeof(double));
            out[i * 2 * K + k] = (float)v[i];
        }
    }
    free(v);
    free(w);
    structure_dse(out, indptr, n, K);
    return TESS_OK;
}

tess_status tess_graph_structure_enc_ref(float *out, const int64_t *indptr,
                                         const int32_t *indices, int64_t n, int K) {
    TESS_REQUIRE(n >= 0 && K >= 1, TESS_ERR_ARG, "n = %lld, K = %d", (long long)n, K);
    const size_t nn = (size_t)(n > 0 ? n * n : 1);
    double *M = calloc(nn, sizeof(double)), *P = calloc(nn, sizeof(double)),
           *T = calloc(nn, sizeof(double));
    if (!M || !P || !T) {
        free(M);
        free(P);
        free(T);
        TESS_REQUIRE(0, TESS_ERR_MEM, "dense RWSE of %lld nodes", (long long)n);
    }
    /* M = A D^-1 dense; P = M^k by repeated products */
    for (int64_t a = 0; a < n; a++) {
        for (int64_t e = indptr[a]; e < indptr[a + 1]; e++) {
            const int32_t j = indices[e];
            M[a * n + j] = 1.0 / (double)(indptr[j + 1] - indptr[j]);
        }
        P[a * n + a] = 1.0;
    }
    for (int k = 0; k < K; k++) {
        for (int64_t a = 0; a < n; a++) {
            for (int64_t c = 0; c < n; c++) {
                double acc = 0.0;
                for (int64_t j = 0; j < n; j++) acc += P[a * n + j] * M[j * n + c];
                T[a * n + c] = acc;
            }
        }
        memcpy(P, T, nn * sizeof(double));
        for (int64_t i = 0; i < n; i++) out[i * 2 * K + k] = (float)P[i * n + i];
    }
    free(M);
    free(P);
    free(T);
    structure_dse(out, indptr, n, K);
    return TESS_OK;
}

/* ---- GIN ---- */

int64_t tess_nn_gin_scratch_size(int64_t N, int64_t C, int64_t H) { return N * H + N * C; }

void tess_nn_gin_forward(float *out, float *m, float *c, float *r, const float *x,
                         const tess_csr *A, float eps, const float *w1, const float *b1,
                         const float *w2, const float *b2, int64_t N, int64_t C, int64_t H,
                         int64_t OC) {
    /* m = (1+eps) x + A x: copy the scaled x, then accumulate the neighbour sums */
    for (int64_t i = 0; i < N * C; i++) m[i] = (1.0f + eps) * x[i];
    tess_csr_spmm(m, A, x, C, 1.0f, 1.0f);
    tess_nn_linear_forward(c, m, w1, b1, N, C, H);
    for (int64_t i = 0; i < N * H; i++) r[i] = c[i] > 0.0f ? c[i] : 0.0f;
    tess_nn_linear_forward(out, r, w2, b2, N, H, OC);
}

void tess_nn_gin_backward(float *dx, float *dw1, float *db1, float *dw2, float *db2,
                          float *scratch, const float *dout, const tess_csr *A, float eps,
                          const float *w1, const float *w2, const float *m, const float *c,
                          const float *r, int64_t N, int64_t C, int64_t H, int64_t OC) {
    float *dc = scratch;         /* (N,H): dr, then masked in place to dc */
    float *dm = scratch + N * H; /* (N,C) */
    memset(dc, 0, (size_t)(N * H) * sizeof(float));
    tess_nn_linear_backward(dc, dw2, db2, dout, r, w2, N, H, OC);
    for (int64_t i = 0; i < N * H; i++) {
        if (!(c[i] > 0.0f)) dc[i] = 0.0f;
    }
    memset(dm, 0, (size_t)(N * C) * sizeof(float));
    tess_nn_linear_backward(dm, dw1, db1, dc, m, w1, N, C, H);
    if (dx) {
        for (int64_t i = 0; i < N * C; i++) dx[i] += (1.0f + eps) * dm[i];
        tess_csr_spmm_t(dx, A, dm, C);
    }
}

void tess_nn_gin_forward_ref(float *out, float *m, float *c, float *r, const float *x,
                             const tess_csr *A, float eps, const float *w1, const float *b1,
                             const float *w2, const float *b2, int64_t N, int64_t C, int64_t H,
                             int64_t OC) {
    for (int64_t i = 0; i < N * C; i++) m[i] = (1.0f + eps) * x[i];
    tess_csr_spmm_ref(m, A, x, C, 1.0f, 1.0f);
    tess_nn_linear_forward_ref(c, m, w1, b1, N, C, H);
    for (int64_t i = 0; i < N * H; i++) r[i] = c[i] > 0.0f ? c[i] : 0.0f;
    tess_nn_linear_forward_ref(out, r, w2, b2, N, H, OC);
}

void tess_nn_gin_backward_ref(float *dx, float *dw1, float *db1, float *dw2, float *db2,
                              const float *dout, const tess_csr *A, float eps, const float *w1,
                              const float *w2, const float *m, const float *c, const float *r,
                              int64_t N, int64_t C, int64_t H, int64_t OC) {
    float *dc = calloc((size_t)(N * H + 1), sizeof(float));
    float *dm = calloc((size_t)(N * C + 1), sizeof(float));
    TESS_ASSERT(dc && dm);
    tess_nn_linear_backward_ref(dc, dw2, db2, dout, r, w2, N, H, OC);
    for (int64_t i = 0; i < N * H; i++) {
        if (!(c[i] > 0.0f)) dc[i] = 0.0f;
    }
    tess_nn_linear_backward_ref(dm, dw1, db1, dc, m, w1, N, C, H);
    if (dx) {
        for (int64_t i = 0; i < N * C; i++) dx[i] += (1.0f + eps) * dm[i];
        tess_csr_spmm_t_ref(dx, A, dm, C);
    }
    free(dc);
    free(dm);
}

/* ---- GIN over two inputs, transform first ---- */

int64_t tess_nn_gin2_scratch_size(int64_t N, int64_t H) { return 2 * N * H; }

void tess_nn_gin2_forward(float *out, float *y, float *c, float *r, const float *x1,
                          const float *x2, const tess_csr *A, float eps, const float *w1,
                          const float *b1, const float *w2, const float *b2, int64_t N,
                          int64_t C1, int64_t C2, int64_t H, int64_t OC) {
    TESS_ASSERT(C1 >= 1 && C2 >= 0 && (C2 == 0 || x2 != NULL));
    const int64_t C = C1 + C2;
    /* y (N,H) = x1 w1[:, :C1]^T + x2 w1[:, C1:]^T: the column blocks of w1 in place */
    tess_matmul_ld(y, H, x1, C1, w1, C, N, H, C1, false, true, 1.0f, 0.0f);
    if (C2 > 0) tess_matmul_ld(y, H, x2, C2, w1 + C1, C, N, H, C2, false, true, 1.0f, 1.0f);
    /* c = b1 + (1+eps) y + A y */
    for (int64_t n = 0; n < N; n++) {
        for (int64_t h = 0; h < H; h++) c[n * H + h] = b1[h] + (1.0f + eps) * y[n * H + h];
    }
    tess_csr_spmm(c, A, y, H, 1.0f, 1.0f);
    for (int64_t i = 0; i < N * H; i++) r[i] = c[i] > 0.0f ? c[i] : 0.0f;
    tess_nn_linear_forward(out, r, w2, b2, N, H, OC);
}

void tess_nn_gin2_backward(float *dx1, float *dx2, float *dw1, float *db1, float *dw2, float *db2,
                           float *scratch, const float *dout, const tess_csr *A, float eps,
                           const float *w1, const float *w2, const float *x1, const float *x2,
                           const float *c, const float *r, int64_t N, int64_t C1, int64_t C2,
                           int64_t H, int64_t OC) {
    const int64_t C = C1 + C2;
    float *dc = scratch;         /* (N,H): dr, then masked in place to dc */
    float *dy = scratch + N * H; /* (N,H) */
    memset(dc, 0, (size_t)(N * H) * sizeof(float));
    tess_nn_linear_backward(dc, dw2, db2, dout, r, w2, N, H, OC);
    for (int64_t i = 0; i < N * H; i++) {
        if (!(c[i] > 0.0f)) dc[i] = 0.0f;
    }
    for (int64_t n = 0; n < N; n++) {
        for (int64_t h = 0; h < H; h++) {
            db1[h] += dc[n * H + h];
            dy[n * H + h] = (1.0f + eps) * dc[n * H + h];
        }
    }
    tess_csr_spmm_t(dy, A, dc, H);
    tess_matmul_ld(dw1, C, dy, H, x1, C1, H, C1, N, true, false, 1.0f, 1.0f);
    if (C2 > 0) tess_matmul_ld(dw1 + C1, C, dy, H, x2, C2, H, C2, N, true, false, 1.0f, 1.0f);
    if (dx1) tess_matmul_ld(dx1, C1, dy, H, w1, C, N, C1, H, false, false, 1.0f, 1.0f);
    if (dx2 && C2 > 0) {
        tess_matmul_ld(dx2, C2, dy, H, w1 + C1, C, N, C2, H, false, false, 1.0f, 1.0f);
    }
}

/* X (N, C1+C2) = [x1 | x2] (x2 NULL: C2 = 0) */
static float *concat2(const float *x1, const float *x2, int64_t N, int64_t C1, int64_t C2) {
    float *X = calloc((size_t)(N * (C1 + C2) + 1), sizeof(float));
    TESS_ASSERT(X != NULL);
    for (int64_t n = 0; n < N; n++) {
        memcpy(X + n * (C1 + C2), x1 + n * C1, (size_t)C1 * sizeof(float));
        if (C2 > 0) memcpy(X + n * (C1 + C2) + C1, x2 + n * C2, (size_t)C2 * sizeof(float));
    }
    return X;
}

void tess_nn_gin2_forward_ref(float *out, float *y, float *c, float *r, const float *x1,
                              const float *x2, const tess_csr *A, float eps, const float *w1,
                              const float *b1, const float *w2, const float *b2, int64_t N,
                              int64_t C1, int64_t C2, int64_t H, int64_t OC) {
    const int64_t C = C1 + C2;
    float *X = concat2(x1, x2, N, C1, C2), *m = calloc((size_t)(N * C + 1), sizeof(float));
    TESS_ASSERT(m != NULL);
    tess_nn_gin_forward_ref(out, m, c, r, X, A, eps, w1, b1, w2, b2, N, C, H, OC);
    tess_nn_linear_forward_ref(y, X, w1, NULL, N, C, H);
    free(X);
    free(m);
}

void tess_nn_gin2_backward_ref(float *dx1, float *dx2, float *dw1, float *db1, float *dw2,
                               float *db2, const float *dout, const tess_csr *A, float eps,
                               const float *w1, const float *w2, const float *x1,
                               const float *x2, const float *c, const float *r, int64_t N,
                               int64_t C1, int64_t C2, int64_t H, int64_t OC) {
    const int64_t C = C1 + C2;
    float *X = concat2(x1, x2, N, C1, C2), *m = calloc((size_t)(N * C + 1), sizeof(float));
    float *dX = calloc((size_t)(N * C + 1), sizeof(float));
    TESS_ASSERT(m && dX);
    for (int64_t i = 0; i < N * C; i++) m[i] = (1.0f + eps) * X[i];
    tess_csr_spmm_ref(m, A, X, C, 1.0f, 1.0f);
    tess_nn_gin_backward_ref(dX, dw1, db1, dw2, db2, dout, A, eps, w1, w2, m, c, r, N, C, H, OC);
    for (int64_t n = 0; n < N; n++) {
        for (int64_t k = 0; k < C; k++) {
            if (k < C1 && dx1) dx1[n * C1 + k] += dX[n * C + k];
            if (k >= C1 && dx2) dx2[n * C2 + k - C1] += dX[n * C + k];
        }
    }
    free(X);
    free(m);
    free(dX);
}

/* ---- GCN with tanh ---- */

int64_t tess_nn_gcn_scratch_size(int64_t N, int64_t C, int64_t OC) { return N * OC + N * C; }

void tess_nn_gcn_tanh_forward(float *out, float *u, const float *s, const tess_csr *Ahat,
                              const float *w, const float *b, int64_t N, int64_t C, int64_t OC) {
    tess_csr_spmm(u, Ahat, s, C, 1.0f, 0.0f);
    tess_nn_linear_forward(out, u, w, b, N, C, OC);
    for (int64_t i = 0; i < N * OC; i++) out[i] = tess_tensor_tanhf(out[i]);
}

void tess_nn_gcn_tanh_backward(float *ds, float *dw, float *db, float *scratch, const float *dout,
                               const float *out, const float *u, const tess_csr *Ahat,
                               const float *w, int64_t N, int64_t C, int64_t OC) {
    float *da = scratch;          /* (N,OC) */
    float *du = scratch + N * OC; /* (N,C) */
    for (int64_t i = 0; i < N * OC; i++) da[i] = dout[i] * (1.0f - out[i] * out[i]);
    memset(du, 0, (size_t)(N * C) * sizeof(float));
    tess_nn_linear_backward(du, dw, db, da, u, w, N, C, OC);
    if (ds) tess_csr_spmm_t(ds, Ahat, du, C);
}

void tess_nn_gcn_tanh_forward_ref(float *out, float *u, const float *s, const tess_csr *Ahat,
                                  const float *w, const float *b, int64_t N, int64_t C,
                                  int64_t OC) {
    tess_csr_spmm_ref(u, Ahat, s, C, 1.0f, 0.0f);
    tess_nn_linear_forward_ref(out, u, w, b, N, C, OC);
    for (int64_t i = 0; i < N * OC; i++) out[i] = (float)tanh((double)out[i]);
}

void tess_nn_gcn_tanh_backward_ref(float *ds, float *dw, float *db, const float *dout,
                                   const float *out, const float *u, const tess_csr *Ahat,
                                   const float *w, int64_t N, int64_t C, int64_t OC) {
    float *da = calloc((size_t)(N * OC + 1), sizeof(float));
    float *du = calloc((size_t)(N * C + 1), sizeof(float));
    TESS_ASSERT(da && du);
    for (int64_t i = 0; i < N * OC; i++)
        da[i] = (float)((double)dout[i] * (1.0 - (double)out[i] * out[i]));
    tess_nn_linear_backward_ref(du, dw, db, da, u, w, N, C, OC);
    if (ds) tess_csr_spmm_t_ref(ds, Ahat, du, C);
    free(da);
    free(du);
}

/* ---- dropout mask, ReLU with dropout mask ---- */

enum { DROPOUT_BLOCKS = 64 }; /* Philox blocks drawn per tess_rng_blocks call (512 elements) */

void tess_nn_dropout_mask(float *mask, int64_t n, float p, tess_rng_key key, uint64_t ctr,
                          uint64_t first) {
    TESS_ASSERT(n >= 0 && p >= 0.0f && p < 1.0f);
    const uint32_t thr = (uint32_t)lrintf(p * 65536.0f);
    const float keep = 1.0f / (1.0f - p);
    uint32_t w[4 * DROPOUT_BLOCKS];
    uint64_t e = first;
    const uint64_t end = first + (uint64_t)n;
    while (e < end) {
        /* the blocks holding elements e .. min(end, e + 8 DROPOUT_BLOCKS - e % 8) - 1 */
        const uint64_t b0 = e / 8, b1 = (end - 1) / 8 + 1;
        const int64_t nb = b1 - b0 < DROPOUT_BLOCKS ? (int64_t)(b1 - b0) : DROPOUT_BLOCKS;
        tess_rng_blocks(key, ctr, b0, nb, w);
        const uint64_t stop = (b0 + (uint64_t)nb) * 8 < end ? (b0 + (uint64_t)nb) * 8 : end;
        for (; e < stop; e++) {
            const uint64_t r = e - b0 * 8; /* half-word within the drawn run */
            const uint32_t bits = (w[r / 2] >> (16 * (r % 2))) & 0xFFFFu;
            mask[e - first] = bits < thr ? 0.0f : keep;
        }
    }
}


void tess_nn_relu_dropout_forward(float *out, const float *in, const float *mask, int64_t n) {
    for (int64_t i = 0; i < n; i++) {
        const float v = in[i] > 0.0f ? in[i] : 0.0f;
        out[i] = mask ? mask[i] * v : v;
    }
}

void tess_nn_relu_dropout_backward(float *din, const float *dout, const float *in,
                                   const float *mask, int64_t n) {
    for (int64_t i = 0; i < n; i++) {
        if (in[i] > 0.0f) din[i] += mask ? mask[i] * dout[i] : dout[i];
    }
}

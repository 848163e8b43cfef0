/* test_graph.c - graph batches and structure encodings (nn/graph.h): RWSE and DSE on a 4-cycle,
 * a path and a star against hand values (isolated nodes all-zero RWSE, degree-0 nodes on the
 * degree-1 DSE code, degrees above 16 clamped), the sparse walk against dense matrix powers on a
 * larger graph, the GCN-normalised A-hat / A-hat2 values and the node->graph index of a batch, and
 * a bad graph id; the SpMMs on column blocks (_ld) against the contiguous ones and the references.
 * The layers' gradients are checked by the gradcheck table (tests/gradcheck). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/rng.h" /* tess_rng_uniform */
#include "nn/graph.h"      /* tess_graph_* */
#include "tensor/sparse.h" /* tess_csr_spmm*_ld */
#include "tess_test.h"

enum { K = 16, W = 2 * K };

/* An undirected graph from an edge list into CSR (both directions, rows sorted by insertion). */
typedef struct {
    int64_t n, indptr[64];
    int32_t indices[512];
} small_graph;

static void graph_from_edges(small_graph *g, int64_t n, const int (*e)[2], int ne) {
    int64_t deg[64] = {0};
    g->n = n;
    for (int k = 0; k < ne; k++) deg[e[k][0]]++, deg[e[k][1]]++;
    g->indptr[0] = 0;
    for (int64_t i = 0; i < n; i++) g->indptr[i + 1] = g->indptr[i] + deg[i];
    int64_t fill[64];
    memcpy(fill, g->indptr, sizeof fill);
    for (int k = 0; k < ne; k++) {
        g->indices[fill[e[k][0]]++] = e[k][1];
        g->indices[fill[e[k][1]]++] = e[k][0];
    }
}

/* RWSE row i of out must equal want[0..K) (hand values), DSE must be one-hot at slot. */
static void check_row(const float *out, int64_t i, const double *want, int slot, const char *what) {
    for (int k = 0; k < K; k++) {
        TESS_TEST_CHECK(fabs(out[i * W + k] - want[k]) < 1e-6, "%s node %lld RWSE_%d = %g, want %g",
                        what, (long long)i, k + 1, out[i * W + k], want[k]);
        const float dse = out[i * W + K + k];
        TESS_TEST_CHECK(dse == (k == slot ? 1.0f : 0.0f), "%s node %lld DSE[%d] = %g", what,
                        (long long)i, k, dse);
    }
}

static void test_hand_values(void) {
    /* 4-cycle: a walk is back after k steps with probability 0 (k odd) or 1/2 (k even) */
    const int cyc[][2] = {{0, 1}, {1, 2}, {2, 3}, {3, 0}};
    small_graph g;
    graph_from_edges(&g, 4, cyc, 4);
    float out[64 * W];
    TESS_TEST_CHECK(tess_graph_structure_enc(out, g.indptr, g.indices, g.n, K) == TESS_OK, "cycle");
    double even_half[K], path_mid[K], zero[K] = {0};
    for (int k = 0; k < K; k++) {
        even_half[k] = (k + 1) % 2 == 0 ? 0.5 : 0.0;
        path_mid[k] = (k + 1) % 2 == 0 ? 1.0 : 0.0;
    }
    for (int64_t i = 0; i < 4; i++) check_row(out, i, even_half, 1, "4-cycle");
    /* path 0-1-2 and isolated node 3: the ends return w.p. 1/2 at even k (0 -> 1 -> 0 is
     * 1 * 1/2), the middle w.p. 1; the isolated node has RWSE 0 and the degree-1 DSE code */
    const int path[][2] = {{0, 1}, {1, 2}};
    graph_from_edges(&g, 4, path, 2);
    TESS_TEST_CHECK(tess_graph_structure_enc(out, g.indptr, g.indices, g.n, K) == TESS_OK, "path");
    check_row(out, 0, even_half, 0, "path end");
    check_row(out, 1, path_mid, 1, "path middle");
    check_row(out, 2, even_half, 0, "path end");
    check_row(out, 3, zero, 0, "isolated");
    /* star with 18 leaves: the centre's DSE is clamped to slot 15; centre returns w.p. 1 at even k */
    int star[18][2];
    for (int k = 0; k < 18; k++) star[k][0] = 0, star[k][1] = k + 1;
    graph_from_edges(&g, 19, (const int(*)[2])star, 18);
    TESS_TEST_CHECK(tess_graph_structure_enc(out, g.indptr, g.indices, g.n, K) == TESS_OK, "star");
    check_row(out, 0, path_mid, 15, "star centre");
}

/* The sparse walks equal dense double matrix powers on a random graph with isolated nodes. */
static void test_against_dense(void) {
    int e[200][2], ne = 0;
    tess_rng_key key = {7, 1};
    for (int i = 0; i < 40 && ne < 200; i++) {
        for (int j = i + 1; j < 40 && ne < 200; j++) {
            if (i % 9 == 8 || j % 9 == 8) continue; /* nodes 8, 17, 26, 35 isolated */
            if (tess_rng_uniform(key, 0, (uint64_t)(i * 40 + j), 0, 1) < 0.12) {
                e[ne][0] = i, e[ne][1] = j, ne++;
            }
        }
    }
    small_graph g;
    graph_from_edges(&g, 40, (const int(*)[2])e, ne);
    float *fast = calloc(40 * W, sizeof(float)), *ref = calloc(40 * W, sizeof(float));
    TESS_TEST_CHECK(tess_graph_structure_enc(fast, g.indptr, g.indices, 40, K) == TESS_OK, "fast");
    TESS_TEST_CHECK(tess_graph_structure_enc_ref(ref, g.indptr, g.indices, 40, K) == TESS_OK, "ref");
    double worst = 0;
    for (int i = 0; i < 40 * W; i++) worst = fmax(worst, fabs(fast[i] - ref[i]));
    TESS_TEST_CHECK(worst < 1e-6, "sparse walk vs dense powers: max diff %g (%d edges)", worst, ne);
    for (int k = 0; k < K; k++) TESS_TEST_CHECK(fast[8 * W + k] == 0.0f, "isolated RWSE_%d", k + 1);
    free(fast);
    free(ref);
}

/* A batch of graph 1 (edge 0-1, isolated node 2) then graph 0 (triangle 0-1-2): A-hat entries are
 * 1/sqrt((deg_i+1)(deg_j+1)), the diagonal 1/(deg_i+1), A-hat2 their squares. */
static void test_batch(void) {
    int64_t node_ptr[] = {0, 3, 6}, edge_ptr[] = {0, 6, 8};
    int64_t indptr[] = {0, 2, 4, 6, 7, 8, 8};
    int32_t indices[] = {1, 2, 0, 2, 0, 1, 1, 0};
    tess_graphs gs = {.num_graphs = 2, .num_nodes = 6, .nnz = 8, .node_ptr = node_ptr,
                      .edge_ptr = edge_ptr, .indptr = indptr, .indices = indices};
    strcpy(gs.name, "hand");
    const int64_t ids[] = {1, 0};
    tess_graph_batch b;
    TESS_TEST_CHECK(tess_graph_batch_build(&b, &gs, ids, 2) == TESS_OK, "build");
    TESS_TEST_CHECK(b.num_nodes == 6 && b.num_graphs == 2 && b.nnz == 8, "counts %lld %lld %lld",
                    (long long)b.num_nodes, (long long)b.num_graphs, (long long)b.nnz);
    const int64_t want_graph[] = {0, 0, 0, 1, 1, 1};
    for (int i = 0; i < 6; i++) TESS_TEST_CHECK(b.graph_of[i] == want_graph[i], "graph_of[%d]", i);
    /* dense A-hat from the batch, against the formula */
    double ah[6][6] = {{0}}, ah2[6][6] = {{0}};
    const double deg[6] = {1, 1, 0, 2, 2, 2};
    for (int i = 0; i < 6; i++) {
        for (int64_t e = b.h_indptr[i]; e < b.h_indptr[i + 1]; e++) {
            ah[i][b.h_indices[e]] += b.ahat[e];
            ah2[i][b.h_indices[e]] += b.ahat2[e];
        }
    }
    const int adj[6][6] = {{0, 1, 0, 0, 0, 0}, {1, 0, 0, 0, 0, 0}, {0}, {0, 0, 0, 0, 1, 1},
                           {0, 0, 0, 1, 0, 1}, {0, 0, 0, 1, 1, 0}};
    for (int i = 0; i < 6; i++) {
        for (int j = 0; j < 6; j++) {
            double want = (i == j || adj[i][j]) ? 1.0 / sqrt((deg[i] + 1) * (deg[j] + 1)) : 0.0;
            TESS_TEST_CLOSE(ah[i][j], want, 1e-7, 1e-6, "A-hat");
            TESS_TEST_CLOSE(ah2[i][j], want * want, 1e-7, 1e-6, "A-hat2");
        }
    }
    TESS_TEST_CHECK(ah[2][2] == 1.0, "isolated node: A-hat diagonal 1, got %g", ah[2][2]);
    /* segment sum of ones = nodes per graph */
    float ones[6] = {1, 1, 1, 1, 1, 1}, pooled[2];
    tess_segment_sum(pooled, ones, b.graph_of, 6, 2, 1);
    TESS_TEST_CHECK(pooled[0] == 3.0f && pooled[1] == 3.0f, "pooled %g %g", pooled[0], pooled[1]);
    /* reserved once, filled again and again: the same arrays as the built batch, no growth */
    tess_graph_batch r;
    TESS_TEST_CHECK(tess_graph_batch_reserve(&r, 3, 6, 8) == TESS_OK, "reserve");
    const int64_t one[] = {0}, three[] = {0, 1, 0};
    TESS_TEST_CHECK(tess_graph_batch_fill(&r, &gs, one, 1) == TESS_OK, "fill one graph");
    TESS_TEST_CHECK(r.num_nodes == 3 && r.nnz == 6 && r.graph_of[2] == 0, "one graph: %lld %lld",
                    (long long)r.num_nodes, (long long)r.nnz);
    int32_t *const keep = r.h_indices;
    TESS_TEST_CHECK(tess_graph_batch_fill(&r, &gs, ids, 2) == TESS_OK, "refill");
    TESS_TEST_CHECK(r.h_indices == keep, "refill reuses the arrays");
    TESS_TEST_CHECK(r.num_graphs == 2 && r.num_nodes == 6 && r.nnz == 8, "refill counts");
    TESS_TEST_CHECK(memcmp(r.node_ptr, b.node_ptr, 3 * sizeof(int64_t)) == 0 &&
                    memcmp(r.graph_of, b.graph_of, 6 * sizeof(int64_t)) == 0 &&
                    memcmp(r.a_indptr, b.a_indptr, 7 * sizeof(int64_t)) == 0 &&
                    memcmp(r.a_indices, b.a_indices, 8 * sizeof(int32_t)) == 0 &&
                    memcmp(r.h_indptr, b.h_indptr, 7 * sizeof(int64_t)) == 0 &&
                    memcmp(r.h_indices, b.h_indices, 14 * sizeof(int32_t)) == 0 &&
                    memcmp(r.ahat, b.ahat, 14 * sizeof(float)) == 0 &&
                    memcmp(r.ahat2, b.ahat2, 14 * sizeof(float)) == 0,
                    "filled batch equals the built one");
    TESS_TEST_CHECK(tess_graph_batch_fill(&r, &gs, three, 3) == TESS_ERR_ARG, "over capacity");
    TESS_TEST_CHECK(strstr(tess_error_text(), "batch of 3 graphs, 9 nodes, 14 edges of 'hand' "
                                              "exceeds the reserved 3 graphs, 6 nodes, 8 edges"),
                    "message: %s", tess_error_text());
    tess_error_clear();
    TESS_TEST_CHECK(r.num_nodes == 6 && r.graph_of[5] == 1, "refused fill leaves the batch");
    tess_graph_batch_free(&r);
    tess_graph_batch_free(&b);
    const int64_t bad[] = {0, 2};
    TESS_TEST_CHECK(tess_graph_batch_build(&b, &gs, bad, 2) == TESS_ERR_ARG, "bad id refused");
    TESS_TEST_CHECK(strstr(tess_error_text(), "id 2 outside [0, 2) of 'hand'") != NULL,
                    "message: %s", tess_error_text());
    tess_error_clear();
}

/* The SpMMs on column blocks (tensor/sparse.h _ld): F = 3 columns from column 2 of a 7-wide X
 * into columns 1..3 of a 6-wide Y, on a 40-node random weighted graph. Bitwise equal to the
 * contiguous form on packed copies, within float rounding of the double references, and the
 * columns outside the block untouched. */
static void test_spmm_ld(void) {
    enum { N = 40, F = 3, LX = 7, LY = 6, OX = 2, OY = 1 };
    int e[200][2], ne = 0;
    tess_rng_key key = {11, 2};
    for (int i = 0; i < N && ne < 200; i++) {
        for (int j = i + 1; j < N && ne < 200; j++) {
            if (tess_rng_uniform(key, 0, (uint64_t)(i * N + j), 0, 1) < 0.1) {
                e[ne][0] = i, e[ne][1] = j, ne++;
            }
        }
    }
    small_graph g;
    graph_from_edges(&g, N, (const int(*)[2])e, ne);
    static float val[512], X[N * LX], Y[N * LY], xp[N * F], yp[N * F], yr[N * F];
    for (int64_t k = 0; k < g.indptr[N]; k++) {
        val[k] = (float)tess_rng_uniform(key, 1, (uint64_t)k, -1, 1);
    }
    for (int i = 0; i < N * LX; i++) X[i] = (float)tess_rng_uniform(key, 2, (uint64_t)i, -1, 1);
    const tess_csr A = {.rows = N, .cols = N, .indptr = g.indptr, .indices = g.indices, .val = val};
    for (int t = 0; t < 2; t++) { /* t = 0: Y = 0.5 A X + Y; t = 1: Y += A^T X */
        for (int i = 0; i < N * LY; i++) Y[i] = (float)tess_rng_uniform(key, 3, (uint64_t)i, -1, 1);
        for (int i = 0; i < N; i++) {
            for (int f = 0; f < F; f++) {
                xp[i * F + f] = X[i * LX + OX + f];
                yp[i * F + f] = yr[i * F + f] = Y[i * LY + OY + f];
            }
        }
        float before[N * LY];
        memcpy(before, Y, sizeof before);
        if (t == 0) {
            tess_csr_spmm_ld(Y + OY, LY, &A, X + OX, LX, F, 0.5f, 1.0f);
            tess_csr_spmm(yp, &A, xp, F, 0.5f, 1.0f);
            tess_csr_spmm_ref(yr, &A, xp, F, 0.5f, 1.0f);
        } else {
            tess_csr_spmm_t_ld(Y + OY, LY, &A, X + OX, LX, F);
            tess_csr_spmm_t(yp, &A, xp, F);
            tess_csr_spmm_t_ref(yr, &A, xp, F);
        }
        int same = 1, outside = 1;
        double worst = 0;
        for (int i = 0; i < N; i++) {
            for (int c = 0; c < LY; c++) {
                const float v = Y[i * LY + c];
                if (c < OY || c >= OY + F) {
                    outside &= memcmp(&v, &before[i * LY + c], sizeof v) == 0;
                    continue;
                }
                same &= memcmp(&v, &yp[i * F + c - OY], sizeof v) == 0;
                worst = fmax(worst, fabs(v - yr[i * F + c - OY]));
            }
        }
        const char *what = t == 0 ? "spmm_ld" : "spmm_t_ld";
        TESS_TEST_CHECK(same, "%s: the block differs from the contiguous form's", what);
        TESS_TEST_CHECK(outside, "%s: a column outside the block changed", what);
        TESS_TEST_CHECK(worst < 1e-5, "%s: max diff to the reference %g", what, worst);
    }
}

/* Dropout masks: values 0 or 1/(1-p), the drop fraction within 5 standard errors of p (p rounded
 * to 2^-16 is exact for these p), any slice equal to the slice of a longer mask (what makes the
 * app's results independent of how batches fall on ranks), other counters give other masks. */
static void test_dropout_mask(void) {
    enum { M = 100003 };
    static float whole[M], part[M];
    const tess_rng_key key = {3, 9};
    const uint64_t ctr = tess_rng_ctr(TESS_RNG_PURPOSE_DROPOUT, 4), first = (uint64_t)5 << 34;
    const float ps[] = {0.5f, 0.125f, 0.75f};
    for (int k = 0; k < 3; k++) {
        const float p = ps[k], keep = 1.0f / (1.0f - p);
        tess_nn_dropout_mask(whole, M, p, key, ctr, first);
        int64_t dropped = 0, bad = 0;
        for (int64_t i = 0; i < M; i++) {
            dropped += whole[i] == 0.0f;
            bad += whole[i] != 0.0f && whole[i] != keep;
        }
        const double frac = (double)dropped / M, se = sqrt(p * (1.0 - p) / M);
        TESS_TEST_CHECK(bad == 0, "p = %g: %lld values neither 0 nor 1/(1-p)", p, (long long)bad);
        TESS_TEST_CHECK(fabs(frac - p) < 5.0 * se, "p = %g: dropped fraction %g", p, frac);
    }
    tess_nn_dropout_mask(whole, M, 0.5f, key, ctr, first);
    const int64_t cuts[][2] = {{0, 1}, {3, 5}, {7, 513}, {8, 512}, {1001, 4099}, {M - 9, 9}};
    for (size_t c = 0; c < sizeof cuts / sizeof cuts[0]; c++) {
        const int64_t lo = cuts[c][0], n = cuts[c][1];
        tess_nn_dropout_mask(part, n, 0.5f, key, ctr, first + (uint64_t)lo);
        TESS_TEST_CHECK(memcmp(part, whole + lo, (size_t)n * sizeof(float)) == 0,
                        "mask slice [%lld, %lld) equals the whole mask's", (long long)lo,
                        (long long)(lo + n));
    }
    tess_nn_dropout_mask(part, M, 0.5f, key, ctr + 1, first);
    TESS_TEST_CHECK(memcmp(part, whole, (size_t)M * sizeof(float)) != 0,
                    "another counter gives another mask");
    tess_nn_dropout_mask(part, 16, 0.0f, key, ctr, first);
    int ones = 1;
    for (int i = 0; i < 16; i++) ones &= part[i] == 1.0f;
    TESS_TEST_CHECK(ones, "p = 0 keeps everything with scale 1");
}

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    test_hand_values();
    test_against_dense();
    test_batch();
    test_dropout_mask();
    test_spmm_ld();
    int rc = tess_test_finish("graph");
    MPI_Finalize();
    return rc;
}

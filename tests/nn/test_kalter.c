/* test_kalter.c - the Kalter-Conv layer (nn/kalter.h):
 *   1. float64 central differences (step 1e-6) of the reference backward: 7 nodes with an
 *      isolated one, d = 3, d_h = 2, d_m = 4, a random linear loss on (s+, P+, h+), every input
 *      and parameter, without and with a dropout mask; max relative error < 1e-6;
 *   2. invariants of the fast layer on random inputs: P+ > 0, P+ <= P-, 0 <= K eta < 1
 *      (K eta > 0 where eta != 0);
 *   3. R -> infinity (b_R = 1e9): s+ and h+ equal FedStar's structure channel tanh(A-hat s W_A^T
 *      + b_A) (tess_nn_gcn_tanh_forward) and feature channel relu(GIN([h | s])) to 1e-6;
 *   4. R -> 0 (b_R = -40, r_min = 0): K eta -> 1 and s+ -> z / eta.
 * Fast against reference in float and the float FD rows are in tests/gradcheck. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/rng.h"  /* tess_rng_uniform */
#include "nn/graph.h"  /* tess_graph_batch_*, tess_nn_gin_*, tess_nn_gcn_tanh_* */
#include "nn/kalter.h" /* tess_nn_kalter_* */
#include "nn/linear.h" /* tess_nn_linear_forward */
#include "tess_test.h"

/* graph 0: 0-1, 1-2, 2-3, 1-3, 3-4; graph 1: 0-1 and an isolated node (batch node 7) */
static void make_batch(tess_graph_batch *b) {
    static int64_t node_ptr[] = {0, 5, 8}, edge_ptr[] = {0, 10, 12};
    static int64_t indptr[] = {0, 1, 4, 6, 9, 10, 11, 12, 12};
    static int32_t indices[] = {1, 0, 2, 3, 1, 3, 1, 2, 4, 3, 1, 0};
    tess_graphs gs = {.num_graphs = 2, .num_nodes = 8, .nnz = 12, .node_ptr = node_ptr,
                      .edge_ptr = edge_ptr, .indptr = indptr, .indices = indices};
    const int64_t ids[] = {0, 1};
    TESS_TEST_CHECK(tess_graph_batch_build(b, &gs, ids, 2) == TESS_OK, "batch");
}

/* All inputs and parameters of one layer in one double vector, with named views. */
enum { NV = 13 };
static const char *const names[NV] = {"h",  "s",  "P",  "w_a", "b_a", "q",  "eta",
                                      "w1", "b1", "w2", "b2",  "w_r", "b_r"};
typedef struct {
    int64_t n[NV], off[NV], total;
} layout;

static layout make_layout(const tess_nn_kalter_dims *d) {
    const int64_t N = d->N, D = d->d, dx = d->dh + d->d;
    layout l = {.n = {N * d->dh, N * D, N * D, D * D, D, D, D, d->dm * dx, d->dm, D * d->dm, D,
                      D * d->dh, D}};
    for (int i = 0; i < NV; i++) l.off[i] = l.total, l.total += l.n[i];
    return l;
}

static tess_nn_kalter_params_f64 view64(double *v, const layout *l) {
    double *p[NV];
    for (int i = 0; i < NV; i++) p[i] = v + l->off[i];
    return (tess_nn_kalter_params_f64){p[3], p[4], p[5], p[6], p[7], p[8], p[9], p[10], p[11], p[12]};
}

static tess_nn_kalter_params view32(float *v, const layout *l) {
    float *p[NV];
    for (int i = 0; i < NV; i++) p[i] = v + l->off[i];
    return (tess_nn_kalter_params){p[3], p[4], p[5], p[6], p[7], p[8], p[9], p[10], p[11], p[12]};
}

/* Draw every entry: uniform in [-1, 1), except P in [0.2, 1.5) and eta in [0.5, 1.5) (or
 * [-1.5, 1.5) when signed_eta). */
static void draw(double *v, const layout *l, uint32_t seed, int signed_eta) {
    tess_rng_key key = {seed, 3};
    for (int i = 0; i < NV; i++) {
        double lo = -1, hi = 1;
        if (i == 2) lo = 0.2, hi = 1.5;
        if (i == 6 && !signed_eta) lo = 0.5, hi = 1.5;
        if (i == 6 && signed_eta) lo = -1.5, hi = 1.5;
        for (int64_t e = 0; e < l->n[i]; e++)
            v[l->off[i] + e] = tess_rng_uniform(key, (uint64_t)i, (uint64_t)e, lo, hi);
    }
}

/* L = <r_s, s+> + <r_p, P+> + <r_h, h+> through the reference */
static double loss64(const double *v, const layout *l, const double *r, const tess_csr *A,
                     const tess_csr *Ah, const tess_csr *Ah2, const double *mask,
                     const tess_nn_kalter_dims *d) {
    const int64_t n = d->N * d->d;
    double *o = calloc((size_t)(3 * n), sizeof(double));
    tess_nn_kalter_params_f64 p = view64((double *)v, l);
    tess_nn_kalter_forward_ref(o, o + n, o + 2 * n, v + l->off[0], v + l->off[1], v + l->off[2], A,
                               Ah, Ah2, mask, &p, d);
    double L = 0;
    for (int64_t i = 0; i < 3 * n; i++) L += r[i] * o[i];
    free(o);
    return L;
}

static void test_fd64(const tess_graph_batch *b, int with_mask, bool linear) {
    tess_nn_kalter_dims d = {.N = 8, .dh = 2, .d = 3, .dm = 4, .eps = 0.25f, .r_min = 1e-4f,
                             .linear = linear};
    layout l = make_layout(&d);
    tess_csr A = tess_graph_batch_adj(b), Ah = tess_graph_batch_ahat(b),
             Ah2 = tess_graph_batch_ahat2(b);
    const int64_t n = d.N * d.d;
    double *v = calloc((size_t)l.total, sizeof(double)), *g = calloc((size_t)l.total, sizeof(double));
    double *r = calloc((size_t)(3 * n), sizeof(double)), *mask = NULL;
    draw(v, &l, 11u + (uint32_t)with_mask, 0);
    tess_rng_key key = {99, 4};
    for (int64_t i = 0; i < 3 * n; i++) r[i] = tess_rng_uniform(key, 0, (uint64_t)i, -1, 1);
    if (with_mask) {
        mask = calloc(24, sizeof(double)); /* n = N d = 24 */
        for (int64_t i = 0; i < n; i++) mask[i] = i % 3 == 1 ? 0.0 : 2.0;
    }
    tess_nn_kalter_params_f64 p = view64(v, &l), gp = view64(g, &l);
    tess_nn_kalter_backward_ref(g + l.off[0], g + l.off[1], g + l.off[2], &gp, r, r + n, r + 2 * n,
                                v + l.off[0], v + l.off[1], v + l.off[2], &A, &Ah, &Ah2, mask, &p,
                                &d);
    const double h = 1e-6;
    for (int k = 0; k < NV; k++) {
        double dd = 0, na = 0, nf = 0;
        for (int64_t e = 0; e < l.n[k]; e++) {
            double *x = v + l.off[k] + e, x0 = *x;
            *x = x0 + h;
            double Lp = loss64(v, &l, r, &A, &Ah, &Ah2, mask, &d);
            *x = x0 - h;
            double Lm = loss64(v, &l, r, &A, &Ah, &Ah2, mask, &d);
            *x = x0;
            double fd = (Lp - Lm) / (2 * h), an = g[l.off[k] + e];
            dd += (an - fd) * (an - fd), na += an * an, nf += fd * fd;
        }
        double err = sqrt(dd) / fmax(fmax(sqrt(na), sqrt(nf)), 1e-300);
        printf("  kalter f64%s%s d%-4s n=%-3lld rel error %.2e\n", with_mask ? " mask" : "",
               linear ? " linear" : "", names[k], (long long)l.n[k], err);
        TESS_TEST_CHECK(err < 1e-6 && na > 0, "d%s: relative error %g (|g| %g)", names[k], err,
                        sqrt(na));
    }
    free(v), free(g), free(r), free(mask);
}

/* Fast forward of a random layer; returns its cache (caller frees) with outputs in out3. */
static float *run_fast(float *out3, const float *v, const layout *l, const tess_graph_batch *b,
                       const tess_nn_kalter_dims *d) {
    tess_csr A = tess_graph_batch_adj(b), Ah = tess_graph_batch_ahat(b),
             Ah2 = tess_graph_batch_ahat2(b);
    float *cache = calloc((size_t)tess_nn_kalter_cache_size(d), sizeof(float));
    const int64_t n = d->N * d->d;
    tess_nn_kalter_params p = view32((float *)v, l);
    tess_nn_kalter_forward(out3, out3 + n, out3 + 2 * n, cache, v + l->off[0], v + l->off[1],
                           v + l->off[2], &A, &Ah, &Ah2, NULL, &p, d);
    return cache;
}

static float *to32(const double *v, int64_t n) {
    float *f = calloc((size_t)n, sizeof(float));
    for (int64_t i = 0; i < n; i++) f[i] = (float)v[i];
    return f;
}

static void test_invariants(const tess_graph_batch *b) {
    tess_nn_kalter_dims d = {.N = 8, .dh = 5, .d = 6, .dm = 7, .eps = 0.0f, .r_min = 1e-4f};
    layout l = make_layout(&d);
    const int64_t n = d.N * d.d;
    double *v = calloc((size_t)l.total, sizeof(double));
    float *out = calloc((size_t)(3 * n), sizeof(float)), *keta = calloc((size_t)n, sizeof(float)),
          *ratio = calloc((size_t)n, sizeof(float));
    int bad = 0;
    for (uint32_t seed = 1; seed <= 50; seed++) {
        draw(v, &l, seed, 1);
        /* spread the noise over decades: b_R in [-12, 12) */
        for (int64_t j = 0; j < d.d; j++) v[l.off[12] + j] *= 12.0;
        float *f = to32(v, l.total);
        tess_nn_kalter_params p = view32(f, &l);
        float *cache = run_fast(out, f, &l, b, &d);
        tess_nn_kalter_diagnostics(keta, ratio, NULL, cache, &p, &d);
        for (int64_t i = 0; i < n; i++) {
            const float eta = p.eta[i % d.d];
            bad += !(out[n + i] > 0.0f);                      /* P+ > 0 */
            bad += !(ratio[i] > 0.0f && ratio[i] <= 1.0f);    /* P+ = (R/S) P- <= P- */
            bad += !(keta[i] >= 0.0f && keta[i] < 1.0f);      /* 0 <= K eta < 1 */
            bad += eta != 0.0f && !(keta[i] > 0.0f);          /* strict when eta != 0 */
        }
        free(cache);
        free(f);
    }
    TESS_TEST_CHECK(bad == 0, "%d invariant violations over 50 random layers", bad);
    free(v), free(out), free(keta), free(ratio);
}

/* R -> infinity: the layer is FedStar's two channels (with a linear transition: the GCN without
 * tanh); R -> 0: the state becomes z / eta. */
static void test_limits(const tess_graph_batch *b) {
    tess_nn_kalter_dims d = {.N = 8, .dh = 3, .d = 4, .dm = 5, .eps = 0.0f, .r_min = 1e-4f};
    layout l = make_layout(&d);
    const int64_t N = d.N, D = d.d, dx = d.dh + d.d, n = N * D;
    double *v = calloc((size_t)l.total, sizeof(double));
    draw(v, &l, 5, 0);
    for (int64_t j = 0; j < D; j++) v[l.off[12] + j] = 1e9;
    float *f = to32(v, l.total), *out = calloc((size_t)(3 * n), sizeof(float));
    float *cache = run_fast(out, f, &l, b, &d);
    tess_nn_kalter_params p = view32(f, &l);
    /* FedStar: s+ = tanh(A-hat s W_A^T + b_A), h+ = relu(GIN([h | s])) */
    tess_csr A = tess_graph_batch_adj(b), Ah = tess_graph_batch_ahat(b);
    float *s_ref = calloc((size_t)n, sizeof(float)), *u = calloc((size_t)n, sizeof(float));
    tess_nn_gcn_tanh_forward(s_ref, u, f + l.off[1], &Ah, p.w_a, p.b_a, N, D, D);
    float *X = calloc((size_t)(N * dx), sizeof(float)), *m = calloc((size_t)(N * dx), sizeof(float));
    float *c = calloc((size_t)(N * d.dm), sizeof(float)), *r = calloc((size_t)(N * d.dm), sizeof(float));
    float *z = calloc((size_t)n, sizeof(float));
    for (int64_t i = 0; i < N; i++) {
        memcpy(X + i * dx, f + l.off[0] + i * d.dh, (size_t)d.dh * sizeof(float));
        memcpy(X + i * dx + d.dh, f + l.off[1] + i * D, (size_t)D * sizeof(float));
    }
    tess_nn_gin_forward(z, m, c, r, X, &A, 0.0f, p.w1, p.b1, p.w2, p.b2, N, dx, d.dm, D);
    double ds = 0, dh = 0;
    for (int64_t i = 0; i < n; i++) {
        ds = fmax(ds, fabs(out[i] - s_ref[i]));
        dh = fmax(dh, fabs(out[2 * n + i] - (z[i] > 0.0f ? z[i] : 0.0f)));
    }
    TESS_TEST_CHECK(ds <= 1e-6, "R -> inf: |s+ - FedStar structure channel| = %g", ds);
    TESS_TEST_CHECK(dh <= 1e-6, "R -> inf: |h+ - FedStar feature channel| = %g", dh);
    free(cache);
    /* the linear-transition ablation at R -> infinity: s+ = A-hat s W_A^T + b_A (no tanh) */
    d.linear = true;
    cache = run_fast(out, f, &l, b, &d);
    float *a = calloc((size_t)n, sizeof(float));
    tess_nn_linear_forward(a, u, p.w_a, p.b_a, N, D, D);
    double dl = 0, dt = 0;
    for (int64_t i = 0; i < n; i++) {
        dl = fmax(dl, fabs(out[i] - a[i]));
        dt = fmax(dt, fabs(out[i] - s_ref[i]));
    }
    TESS_TEST_CHECK(dl <= 1e-6, "linear, R -> inf: |s+ - (A-hat s W_A^T + b_A)| = %g", dl);
    TESS_TEST_CHECK(dt > 1e-3, "linear, R -> inf: s+ equals the tanh layer's (%g)", dt);
    d.linear = false;
    free(cache), free(a);
    /* R -> 0: b_R = -40 (softplus ~ 4e-18), r_min = 0: K eta = 1 and s+ = z / eta */
    d.r_min = 0.0f;
    for (int64_t j = 0; j < D; j++) f[l.off[12] + j] = -40.0f;
    cache = run_fast(out, f, &l, b, &d);
    float *keta = calloc((size_t)n, sizeof(float));
    tess_nn_kalter_diagnostics(keta, NULL, NULL, cache, &p, &d);
    double dz = 0, dk = 0;
    for (int64_t i = 0; i < n; i++) {
        dz = fmax(dz, fabs(out[i] - z[i] / p.eta[i % D]));
        dk = fmax(dk, fabs(1.0 - keta[i]));
    }
    TESS_TEST_CHECK(dk <= 1e-6, "R -> 0: |1 - K eta| = %g", dk);
    TESS_TEST_CHECK(dz <= 1e-5, "R -> 0: |s+ - z / eta| = %g", dz);
    free(cache), free(keta);
    free(f), free(out), free(s_ref), free(u), free(X), free(m), free(c), free(r), free(z), free(v);
}

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    tess_graph_batch b;
    make_batch(&b);
    test_fd64(&b, 0, false);
    test_fd64(&b, 1, false);
    test_fd64(&b, 1, true);
    test_invariants(&b);
    test_limits(&b);
    tess_graph_batch_free(&b);
    int rc = tess_test_finish("kalter");
    MPI_Finalize();
    return rc;
}

/* model.c - one client's network: registration with tags, forward and backward of a batch
 * (model.h). */
#include "model.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nn/graph.h"      /* tess_nn_gin_*, tess_nn_gcn_tanh_*, tess_nn_*dropout* */
#include "nn/kalter.h"     /* tess_nn_kalter_* */
#include "nn/linear.h"     /* tess_nn_linear_* */
#include "nn/loss.h"       /* tess_nn_crossentropy_* */
#include "tensor/matmul.h" /* tess_matmul_tiles */
#include "tensor/sparse.h" /* tess_segment_sum* */

enum { FK_MAX_LAYERS = 8, FK_SE_DIM_MODEL = 32 /* RWSE 16 + DSE 16 */ };

static bool has_structure(fk_method m) { return m == FK_FEDSTAR || m == FK_FEDKALTER; }

/* Register one entry of shape (rows, cols) (cols 0: a vector), with its init and tags. */
static tess_status add(tess_registry *reg, const char *name, int64_t rows, int64_t cols,
                       tess_init init, uint32_t tags, int64_t *idx) {
    const tess_layout rep = tess_layout_replicated();
    const int64_t shape[2] = {rows, cols};
    TESS_CHECK(tess_registry_add(reg, name, cols > 0 ? 2 : 1, shape, &rep, idx));
    TESS_CHECK(tess_registry_set_init(reg, *idx, init));
    TESS_CHECK(tess_registry_set_tags(reg, *idx, tags));
    return TESS_OK;
}

/* A linear layer (out, in) with PyTorch's default init U(-1/sqrt(in), 1/sqrt(in)). */
static tess_status add_linear(tess_registry *reg, const char *prefix, int64_t out, int64_t in,
                              uint32_t tags, int64_t *w, int64_t *b) {
    char name[TESS_REGISTRY_NAME_MAX];
    const double a = 1.0 / sqrt((double)in);
    snprintf(name, sizeof name, "%s.w", prefix);
    TESS_CHECK(add(reg, name, out, in, tess_init_uniform(-a, a), tags, w));
    snprintf(name, sizeof name, "%s.b", prefix);
    TESS_CHECK(add(reg, name, out, 0, tess_init_uniform(-a, a), tags, b));
    return TESS_OK;
}

static tess_status model_register(fk_model *m) {
    const fk_model_cfg *c = &m->cfg;
    const int64_t d = c->d;
    const uint32_t S = TESS_TAG_SHARED, Lo = TESS_TAG_LOCAL;
    const bool st = has_structure(c->method);
    fk_entries *e = &m->e;
    memset(e, -1, sizeof *e);
    tess_registry *r = m->reg;
    char p[64];
    /* FedStar's entries first, Fed-Kalter's extra ones last: the entries the two share get the
     * same registry index, hence the same initial values (tess_registry_init_params) */
    TESS_CHECK(add_linear(r, "pre", d, c->F, Lo, &e->pre_w, &e->pre_b));
    if (st) TESS_CHECK(add_linear(r, "se", d, FK_SE_DIM_MODEL, S, &e->se_w, &e->se_b));
    for (int64_t l = 0; l < c->L; l++) {
        const int64_t din = st ? 2 * d : d;
        const uint32_t gin_tag =
            c->method == FK_FEDAVG || c->method == FK_FEDPROX || c->method == FK_GCFL ? S : Lo;
        snprintf(p, sizeof p, "layer%lld.gin1", (long long)l);
        TESS_CHECK(add_linear(r, p, d, din, gin_tag, &e->gin_w1[l], &e->gin_b1[l]));
        snprintf(p, sizeof p, "layer%lld.gin2", (long long)l);
        TESS_CHECK(add_linear(r, p, d, d, gin_tag, &e->gin_w2[l], &e->gin_b2[l]));
        if (st) {
            snprintf(p, sizeof p, "layer%lld.trans", (long long)l);
            TESS_CHECK(add_linear(r, p, d, d, S, &e->gcn_w[l], &e->gcn_b[l]));
        }
    }
    if (st) TESS_CHECK(add_linear(r, "hp", d, 2 * d, Lo, &e->hp_w, &e->hp_b));
    TESS_CHECK(add_linear(r, "post", d, d, Lo, &e->post_w, &e->post_b));
    TESS_CHECK(add_linear(r, "readout", c->C, d, Lo, &e->ro_w, &e->ro_b));
    if (c->method == FK_FEDKALTER) {
        TESS_CHECK(add(r, "p0", d, 0, tess_init_zeros(), S, &e->p0));
        for (int64_t l = 0; l < c->L; l++) {
            snprintf(p, sizeof p, "layer%lld.q", (long long)l);
            const uint32_t eq = c->kalter_share_eta_q ? S : Lo;
            TESS_CHECK(add(r, p, d, 0, tess_init_const(c->kalter_q0), eq, &e->q[l]));
            snprintf(p, sizeof p, "layer%lld.eta", (long long)l);
            TESS_CHECK(add(r, p, d, 0, tess_init_const(1.0), eq, &e->eta[l]));
            snprintf(p, sizeof p, "layer%lld.noise", (long long)l);
            TESS_CHECK(add_linear(r, p, d, d, Lo, &e->wr[l], &e->br[l]));
            TESS_CHECK(tess_registry_set_init(r, e->br[l], tess_init_const(c->kalter_bR0)));
        }
    }
    TESS_CHECK(tess_registry_finalize(r));
    return TESS_OK;
}

tess_status fk_model_create(fk_model *m, const fk_model_cfg *cfg, uint64_t server_seed,
                            uint64_t client_seed) {
    memset(m, 0, sizeof *m);
    TESS_REQUIRE(cfg->L >= 1 && cfg->L <= FK_MAX_LAYERS, TESS_ERR_CONFIG,
                 "model.layers = %lld: 1..%d supported", (long long)cfg->L, FK_MAX_LAYERS);
    m->cfg = *cfg;
    TESS_CHECK(tess_registry_create(&m->reg));
    TESS_CHECK(model_register(m));
    TESS_CHECK(tess_registry_init_params(m->reg, client_seed));
    /* the shared entries as the server initialises them: the same registry, server's seed */
    fk_model server = {.cfg = *cfg};
    TESS_CHECK(tess_registry_create(&server.reg));
    tess_status s = model_register(&server);
    if (s == TESS_OK) s = tess_registry_init_params(server.reg, server_seed);
    if (s == TESS_OK) {
        for (int64_t i = 0; i < tess_registry_count(m->reg); i++) {
            const tess_registry_entry *e = tess_registry_get(m->reg, i);
            if (e->tags & TESS_TAG_SHARED) {
                memcpy(tess_registry_param(m->reg, i), tess_registry_param(server.reg, i),
                       (size_t)e->local_count * sizeof(float));
            }
        }
    }
    tess_registry_destroy(&server.reg);
    TESS_CHECK(s);
    return TESS_OK;
}

void fk_model_destroy(fk_model *m) { tess_registry_destroy(&m->reg); }

/* ---- workspace ---- */

struct fk_work {
    int64_t max_nodes, max_graphs;
    float *x[FK_MAX_LAYERS + 1], *s[FK_MAX_LAYERS + 1], *P[FK_MAX_LAYERS + 1]; /* (N,d) */
    float *m[FK_MAX_LAYERS]; /* (N,d): GIN's m (one input) or y (two inputs, tess_nn_gin2) */
    float *c[FK_MAX_LAYERS], *r[FK_MAX_LAYERS], *z[FK_MAX_LAYERS];             /* (N,d) */
    float *mask[FK_MAX_LAYERS], *u[FK_MAX_LAYERS];                             /* (N,d) */
    float *kc[FK_MAX_LAYERS];                                                  /* Kalter cache */
    float *o;                                                                  /* (N,d) */
    float *pooled, *pp, *pq, *pmask;                                           /* (B,d) */
    float *logits, *probs, *glogits;                                           /* (B,C) */
    float *gx, *gx2, *gs, *gs2, *gP, *gP2, *gz;                                /* (N,d) */
    float *scratch;
    float *gpooled, *gpp, *gpq; /* (B,d) */
    float *mem;
};

/* Carve every array of w from w->mem (or, with w->mem NULL, only count): returns floats used. */
static int64_t work_carve(fk_work *w, const fk_model_cfg *c, int64_t N, int64_t B, int64_t C) {
    const int64_t d = c->d, L = c->L;
    const tess_nn_kalter_dims kd = {.N = N, .dh = d, .d = d, .dm = d};
    const int64_t kcache = c->method == FK_FEDKALTER ? tess_nn_kalter_cache_size(&kd) : 0;
    int64_t scr = has_structure(c->method) ? tess_nn_gin2_scratch_size(N, d)
                                           : tess_nn_gin_scratch_size(N, d, d);
    const int64_t gcn = tess_nn_gcn_scratch_size(N, d, d);
    const int64_t ks = tess_nn_kalter_scratch_size(&kd);
    if (gcn > scr) scr = gcn;
    if (c->method == FK_FEDKALTER && ks > scr) scr = ks;
    int64_t off = 0;
#define CARVE(ptr, n)                                        \
    do {                                                     \
        (ptr) = w->mem ? w->mem + off : NULL;                \
        off += ((n) + 15) / 16 * 16; /* 64-byte steps */     \
    } while (0)
    for (int64_t l = 0; l <= L; l++) {
        CARVE(w->x[l], N * d);
        CARVE(w->s[l], N * d);
        CARVE(w->P[l], N * d);
    }
    for (int64_t l = 0; l < L; l++) {
        CARVE(w->m[l], N * d);
        CARVE(w->c[l], N * d);
        CARVE(w->r[l], N * d);
        CARVE(w->z[l], N * d);
        CARVE(w->mask[l], N * d);
        CARVE(w->u[l], N * d);
        CARVE(w->kc[l], kcache);
    }
    CARVE(w->o, N * d);
    CARVE(w->pooled, B * d);
    CARVE(w->pp, B * d);
    CARVE(w->pq, B * d);
    CARVE(w->pmask, B * d);
    CARVE(w->logits, B * C);
    CARVE(w->probs, B * C);
    CARVE(w->glogits, B * C);
    CARVE(w->gx, N * d);
    CARVE(w->gx2, N * d);
    CARVE(w->gs, N * d);
    CARVE(w->gs2, N * d);
    CARVE(w->gP, N * d);
    CARVE(w->gP2, N * d);
    CARVE(w->gz, N * d);
    CARVE(w->scratch, scr);
    CARVE(w->gpooled, B * d);
    CARVE(w->gpp, B * d);
    CARVE(w->gpq, B * d);
#undef CARVE
    return off;
}

tess_status fk_work_create(fk_work **w, const fk_model_cfg *cfg, int64_t max_nodes,
                           int64_t max_graphs, int64_t max_C) {
    fk_work *k = calloc(1, sizeof *k);
    TESS_REQUIRE(k, TESS_ERR_MEM, "workspace");
    const int64_t n = work_carve(k, cfg, max_nodes, max_graphs, max_C);
    float *mem = calloc((size_t)n + 16, sizeof(float));
    if (!mem) free(k);
    TESS_REQUIRE(mem, TESS_ERR_MEM, "workspace of %lld floats (%lld nodes)", (long long)n,
                 (long long)max_nodes);
    k->mem = mem;
    work_carve(k, cfg, max_nodes, max_graphs, max_C);
    k->max_nodes = max_nodes;
    k->max_graphs = max_graphs;
    *w = k;
    return TESS_OK;
}

void fk_work_destroy(fk_work **w) {
    if (!w || !*w) return;
    free((*w)->mem);
    free(*w);
    *w = NULL;
}

/* ---- forward and backward ---- */

static inline float *P_(const fk_model *m, int64_t i) { return tess_registry_param(m->reg, i); }
static inline float *G_(const fk_model *m, int64_t i) { return tess_registry_grad(m->reg, i); }

static tess_nn_kalter_params kalter_p(const fk_model *m, int64_t l, bool grad) {
    float *(*f)(const fk_model *, int64_t) = grad ? G_ : P_;
    const fk_entries *e = &m->e;
    return (tess_nn_kalter_params){f(m, e->gcn_w[l]), f(m, e->gcn_b[l]), f(m, e->q[l]),
                                   f(m, e->eta[l]),   f(m, e->gin_w1[l]), f(m, e->gin_b1[l]),
                                   f(m, e->gin_w2[l]), f(m, e->gin_b2[l]), f(m, e->wr[l]),
                                   f(m, e->br[l])};
}

/* mask (n) = 0 or 1/(1-p) (tess_nn_dropout_mask, elements from first on); NULL if no dropout */
static float *dropout_mask(float *mask, int64_t n, float p, tess_rng_key key, uint64_t ctr,
                           uint64_t first) {
    if (p <= 0.0f) return NULL;
    tess_nn_dropout_mask(mask, n, p, key, ctr, first);
    return mask;
}

static inline double softplus(double x) { return x > 20.0 ? x : log1p(exp(x)); }

double fk_model_batch(fk_model *m, fk_work *w, const tess_graph_batch *b, const float *X,
                      const float *Xse, const int32_t *y, bool train, tess_rng_key key,
                      uint64_t ctr, uint64_t batch, int64_t *correct) {
    const fk_model_cfg *c = &m->cfg;
    const fk_entries *e = &m->e;
    const int64_t N = b->num_nodes, B = b->num_graphs, d = c->d, L = c->L, F = c->F, C = c->C;
    const bool st = has_structure(c->method), kal = c->method == FK_FEDKALTER;
    TESS_ASSERT(N <= w->max_nodes && B <= w->max_graphs);
    const tess_csr A = tess_graph_batch_adj(b), Ah = tess_graph_batch_ahat(b),
                   Ah2 = tess_graph_batch_ahat2(b);
    const tess_nn_kalter_dims kd = {.N = N, .dh = d, .d = d, .dm = d, .eps = 0.0f,
                                    .r_min = 1e-4f, .linear = c->kalter_linear};
    const float p = train ? c->dropout : 0.0f;
    /* dropout draws: element offset (batch, site) << 34 with site l for layer l, L for post */
    const uint64_t base = batch * (uint64_t)(L + 1);
    float *mask[FK_MAX_LAYERS];

    /* the node-level products (N rows) through tess_matmul_tiles, the graph-level ones on BLAS */
    tess_nn_linear_tiles_forward(w->x[0], X, P_(m, e->pre_w), P_(m, e->pre_b), N, F, d);
    if (st) {
        tess_nn_linear_tiles_forward(w->s[0], Xse, P_(m, e->se_w), P_(m, e->se_b), N,
                                     FK_SE_DIM_MODEL, d);
    }
    if (kal) {
        const float *p0 = P_(m, e->p0);
        for (int64_t j = 0; j < d; j++) w->P[0][j] = (float)softplus(p0[j]);
        for (int64_t n = 1; n < N; n++) memcpy(w->P[0] + n * d, w->P[0], (size_t)d * sizeof(float));
    }
    for (int64_t l = 0; l < L; l++) {
        mask[l] = dropout_mask(w->mask[l], N * d, p, key, ctr, (base + (uint64_t)l) << 34);
        if (kal) {
            const tess_nn_kalter_params kp = kalter_p(m, l, false);
            tess_nn_kalter_forward(w->s[l + 1], w->P[l + 1], w->x[l + 1], w->kc[l], w->x[l],
                                   w->s[l], w->P[l], &A, &Ah, &Ah2, mask[l], &kp, &kd);
            continue;
        }
        if (st) { /* the GIN over [x | s], without the concatenation */
            tess_nn_gin2_forward(w->z[l], w->m[l], w->c[l], w->r[l], w->x[l], w->s[l], &A, 0.0f,
                                 P_(m, e->gin_w1[l]), P_(m, e->gin_b1[l]), P_(m, e->gin_w2[l]),
                                 P_(m, e->gin_b2[l]), N, d, d, d, d);
        } else {
            tess_nn_gin_forward(w->z[l], w->m[l], w->c[l], w->r[l], w->x[l], &A, 0.0f,
                                P_(m, e->gin_w1[l]), P_(m, e->gin_b1[l]), P_(m, e->gin_w2[l]),
                                P_(m, e->gin_b2[l]), N, d, d, d);
        }
        tess_nn_relu_dropout_forward(w->x[l + 1], w->z[l], mask[l], N * d);
        if (st) {
            tess_nn_gcn_tanh_forward(w->s[l + 1], w->u[l], w->s[l], &Ah, P_(m, e->gcn_w[l]),
                                     P_(m, e->gcn_b[l]), N, d, d);
        }
    }
    const float *o = w->x[L];
    if (st) { /* o = [x | s] W_hp^T + b_hp through the two column blocks of W_hp (d, 2d) */
        const float *hw = P_(m, e->hp_w), *hb = P_(m, e->hp_b);
        tess_matmul_tiles(w->o, d, w->x[L], d, hw, 2 * d, N, d, d, false, true, 1.0f, 0.0f, hb);
        tess_matmul_tiles(w->o, d, w->s[L], d, hw + d, 2 * d, N, d, d, false, true, 1.0f, 1.0f,
                          NULL);
        o = w->o;
    }
    tess_segment_sum(w->pooled, o, b->graph_of, N, B, d);
    tess_nn_linear_forward(w->pp, w->pooled, P_(m, e->post_w), P_(m, e->post_b), B, d, d);
    float *pmask = dropout_mask(w->pmask, B * d, p, key, ctr, (base + (uint64_t)L) << 34);
    tess_nn_relu_dropout_forward(w->pq, w->pp, pmask, B * d);
    tess_nn_linear_forward(w->logits, w->pq, P_(m, e->ro_w), P_(m, e->ro_b), B, d, C);
    const double loss = tess_nn_crossentropy_forward(w->probs, w->logits, y, B, C);
    int64_t ok = 0;
    for (int64_t g = 0; g < B; g++) {
        int64_t best = 0;
        for (int64_t k = 1; k < C; k++) {
            if (w->logits[g * C + k] > w->logits[g * C + best]) best = k;
        }
        ok += best == y[g];
    }
    *correct = ok;
    if (!train) return loss;

    /* backward, into the registry's gradients */
    memset(w->glogits, 0, (size_t)(B * C) * sizeof(float));
    tess_nn_crossentropy_backward(w->glogits, w->probs, y, B, C, 1.0f);
    memset(w->gpq, 0, (size_t)(B * d) * sizeof(float));
    tess_nn_linear_backward(w->gpq, G_(m, e->ro_w), G_(m, e->ro_b), w->glogits, w->pq,
                            P_(m, e->ro_w), B, d, C);
    memset(w->gpp, 0, (size_t)(B * d) * sizeof(float));
    tess_nn_relu_dropout_backward(w->gpp, w->gpq, w->pp, pmask, B * d);
    memset(w->gpooled, 0, (size_t)(B * d) * sizeof(float));
    tess_nn_linear_backward(w->gpooled, G_(m, e->post_w), G_(m, e->post_b), w->gpp, w->pooled,
                            P_(m, e->post_w), B, d, d);
    float *gx = w->gx, *gs = w->gs, *gP = w->gP, *gx2 = w->gx2, *gs2 = w->gs2, *gP2 = w->gP2;
    const size_t nd = (size_t)(N * d) * sizeof(float);
    /* gradients of x, s, P at the current layer's output: gx, gs, gP (gP Fed-Kalter only, gs
     * structure methods only); the layer writes those of its input into gx2, gs2, gP2 */
    if (kal) memset(gP, 0, nd);
    if (st) {
        float *go = w->o; /* reused as the gradient of o */
        memset(go, 0, nd);
        tess_segment_sum_backward(go, w->gpooled, b->graph_of, N, d);
        const float *hw = P_(m, e->hp_w);
        float *ghw = G_(m, e->hp_w), *ghb = G_(m, e->hp_b);
        for (int64_t n = 0; n < N; n++) {
            for (int64_t j = 0; j < d; j++) ghb[j] += go[n * d + j];
        }
        tess_matmul_tiles(ghw, 2 * d, go, d, w->x[L], d, d, d, N, true, false, 1.0f, 1.0f, NULL);
        tess_matmul_tiles(ghw + d, 2 * d, go, d, w->s[L], d, d, d, N, true, false, 1.0f, 1.0f,
                          NULL);
        tess_matmul_tiles(gx, d, go, d, hw, 2 * d, N, d, d, false, false, 1.0f, 0.0f, NULL);
        tess_matmul_tiles(gs, d, go, d, hw + d, 2 * d, N, d, d, false, false, 1.0f, 0.0f, NULL);
    } else {
        memset(gx, 0, nd);
        tess_segment_sum_backward(gx, w->gpooled, b->graph_of, N, d);
    }
    for (int64_t l = L - 1; l >= 0; l--) {
        memset(gx2, 0, nd); /* the layers add into their input gradients */
        if (st) memset(gs2, 0, nd);
        if (kal) memset(gP2, 0, nd);
        if (kal) {
            const tess_nn_kalter_params kp = kalter_p(m, l, false), kg = kalter_p(m, l, true);
            tess_nn_kalter_backward(gx2, gs2, gP2, &kg, w->scratch, gs, gP, gx, w->x[l],
                                    w->kc[l], &A, &Ah, &Ah2, mask[l], &kp, &kd);
        } else {
            memset(w->gz, 0, nd);
            tess_nn_relu_dropout_backward(w->gz, gx, w->z[l], mask[l], N * d);
            if (st) {
                tess_nn_gin2_backward(gx2, gs2, G_(m, e->gin_w1[l]), G_(m, e->gin_b1[l]),
                                      G_(m, e->gin_w2[l]), G_(m, e->gin_b2[l]), w->scratch, w->gz,
                                      &A, 0.0f, P_(m, e->gin_w1[l]), P_(m, e->gin_w2[l]), w->x[l],
                                      w->s[l], w->c[l], w->r[l], N, d, d, d, d);
            } else {
                tess_nn_gin_backward(gx2, G_(m, e->gin_w1[l]), G_(m, e->gin_b1[l]),
                                     G_(m, e->gin_w2[l]), G_(m, e->gin_b2[l]), w->scratch, w->gz,
                                     &A, 0.0f, P_(m, e->gin_w1[l]), P_(m, e->gin_w2[l]), w->m[l],
                                     w->c[l], w->r[l], N, d, d, d);
            }
            if (st) { /* gs2 += the GCN's part */
                tess_nn_gcn_tanh_backward(gs2, G_(m, e->gcn_w[l]), G_(m, e->gcn_b[l]),
                                          w->scratch, gs, w->s[l + 1], w->u[l], &Ah,
                                          P_(m, e->gcn_w[l]), N, d, d);
            }
        }
        float *t;
        t = gx, gx = gx2, gx2 = t;
        t = gs, gs = gs2, gs2 = t;
        t = gP, gP = gP2, gP2 = t;
    }
    tess_nn_linear_tiles_backward(NULL, G_(m, e->pre_w), G_(m, e->pre_b), gx, X, P_(m, e->pre_w),
                                  N, F, d);
    if (st) {
        tess_nn_linear_tiles_backward(NULL, G_(m, e->se_w), G_(m, e->se_b), gs, Xse,
                                      P_(m, e->se_w), N, FK_SE_DIM_MODEL, d);
    }
    if (kal) {
        const float *p0 = P_(m, e->p0);
        float *g0 = G_(m, e->p0);
        for (int64_t j = 0; j < d; j++) {
            double acc = 0.0;
            for (int64_t n = 0; n < N; n++) acc += gP[n * d + j];
            g0[j] += (float)(acc / (1.0 + exp(-(double)p0[j])));
        }
    }
    return loss;
}

int64_t fk_model_kalter_stats(const fk_model *m, fk_work *w, int64_t N, double *stats,
                              double *hist) {
    const int64_t d = m->cfg.d;
    const tess_nn_kalter_dims kd = {.N = N, .dh = d, .d = d, .dm = d, .r_min = 1e-4f,
                                    .linear = m->cfg.kalter_linear};
    for (int64_t l = 0; l < m->cfg.L; l++) {
        const tess_nn_kalter_params kp = kalter_p(m, l, false);
        tess_nn_kalter_diagnostics(w->gx, w->gs, w->gP, w->kc[l], &kp, &kd);
        for (int64_t i = 0; i < N * d; i++) {
            const double lr = log((double)w->gP[i]);
            stats[3 * l] += lr;
            if (hist) {
                const double b = floor((lr - FK_LOGR_LO) / FK_LOGR_WIDTH);
                hist[b < 0 ? 0 : b >= FK_LOGR_BINS ? FK_LOGR_BINS - 1 : (int64_t)b] += 1.0;
            }
            stats[3 * l + 1] += w->gx[i];
            stats[3 * l + 2] += w->gs[i];
        }
    }
    return N * d;
}

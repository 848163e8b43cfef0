/* armlp.c - the small MLP baseline in NLinear form (armlp.h). */
#include "armlp.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/rng.h"       /* tess_rng_u64 */
#include "nn/activation.h"  /* tess_nn_gelu_* */
#include "nn/linear.h"      /* tess_nn_linear_* */
#include "optim/adamw.h"    /* tess_adamw_* */
#include "par/coll.h"       /* tess_par_allreduce* */
#include "par/layout.h"     /* tess_par_block_range, tess_layout_replicated */

enum { W1, B1, W2, B2 };

/* A run of samples: neurons 0..N-1 of session k, last context frames [t0, t1). */
typedef struct {
    int64_t k, t0, t1, first; /* first: index of its first sample */
} run_of;

/* The runs of the fit (part 0) or validation (part 1) samples of sessions not held out; returns
 * the sample count; runs (may be NULL to count) receive *nruns runs. */
static int64_t sample_runs(const calm_session *sess, int64_t nsess, int64_t lags, int64_t H,
                           double val_fraction, int part, run_of *runs, int64_t *nruns) {
    int64_t n = 0, r = 0;
    for (int64_t k = 0; k < nsess; k++) {
        for (int64_t i = 0; i < sess[k].nspans && !sess[k].held_out; i++) {
            const calm_span *sp = &sess[k].spans[i];
            if (!sp->train) continue;
            const int64_t v0 = sp->t0 + (int64_t)floor((1.0 - val_fraction) * (double)(sp->t1 - sp->t0));
            const int64_t t0 = part == 0 ? sp->t0 + lags - 1 : v0 - 1, t1 = part == 0 ? v0 - H : sp->t1 - H;
            if (t1 <= t0) continue;
            if (runs) runs[r] = (run_of){k, t0, t1, n};
            r++;
            n += sess[k].N * (t1 - t0);
        }
    }
    *nruns = r;
    return n;
}

/* Sample j of the runs: session, neuron, last context frame. */
static void sample_at(const run_of *runs, int64_t nruns, int64_t j, int64_t *k, int64_t *n,
                      int64_t *t) {
    int64_t lo = 0, hi = nruns - 1;
    while (lo < hi) { /* the last run starting at or before j */
        const int64_t mid = (lo + hi + 1) / 2;
        if (runs[mid].first <= j) lo = mid;
        else hi = mid - 1;
    }
    const run_of *r = &runs[lo];
    const int64_t len = r->t1 - r->t0, off = j - r->first;
    *k = r->k;
    *n = off / len;
    *t = r->t0 + off % len;
}

/* Row i of in (lags) and, when y, of y (H): the sample's inputs and targets minus x[t]. */
static void features(const calm_session *s, int64_t n, int64_t t, int64_t lags, int64_t H,
                     float *in, float *y) {
    const float last = s->x[t * s->N + n];
    for (int64_t i = 0; i < lags; i++) in[i] = s->x[(t - lags + 1 + i) * s->N + n] - last;
    for (int64_t h = 0; y && h < H; h++) y[h] = s->x[(t + 1 + h) * s->N + n] - last;
}

/* Forward of B rows: pre, act (B, hidden), out (B, H) from in (B, lags). */
static void forward(const calm_armlp *m, const float *in, float *pre, float *act, float *out,
                    int64_t B) {
    const tess_registry *r = m->reg;
    tess_nn_linear_forward(pre, in, tess_registry_param(r, W1), tess_registry_param(r, B1), B,
                           m->c.lags, m->c.hidden);
    tess_nn_gelu_forward(act, pre, B * m->c.hidden);
    tess_nn_linear_forward(out, act, tess_registry_param(r, W2), tess_registry_param(r, B2), B,
                           m->c.hidden, m->c.H);
}

/* Sum of squared errors of the samples [lo, hi) of the runs, in chunks of `chunk` rows. */
static double sse(const calm_armlp *m, const calm_session *sess, const run_of *runs, int64_t nruns,
                  int64_t lo, int64_t hi, int64_t chunk, float *in, float *y, float *pre, float *act,
                  float *out) {
    double e = 0.0;
    for (int64_t j0 = lo; j0 < hi; j0 += chunk) {
        const int64_t B = hi - j0 < chunk ? hi - j0 : chunk;
        for (int64_t i = 0; i < B; i++) {
            int64_t k, n, t;
            sample_at(runs, nruns, j0 + i, &k, &n, &t);
            features(&sess[k], n, t, m->c.lags, m->c.H, in + i * m->c.lags, y + i * m->c.H);
        }
        forward(m, in, pre, act, out, B);
        for (int64_t i = 0; i < B * m->c.H; i++) e += (double)(out[i] - y[i]) * (out[i] - y[i]);
    }
    return e;
}

static tess_status make(calm_armlp *m) {
    const calm_armlp_config *c = &m->c;
    const int64_t shapes[4][2] = {{c->hidden, c->lags}, {c->hidden, 0}, {c->H, c->hidden}, {c->H, 0}};
    static const char *const names[4] = {"armlp.w1", "armlp.b1", "armlp.w2", "armlp.b2"};
    const tess_layout rep = tess_layout_replicated();
    TESS_CHECK(tess_registry_create(&m->reg));
    for (int i = 0; i < 4; i++) {
        int64_t idx;
        TESS_CHECK(tess_registry_add(m->reg, names[i], shapes[i][1] ? 2 : 1, shapes[i], &rep, &idx));
        TESS_CHECK(tess_registry_set_init(m->reg, idx, i == W1 ? tess_init_normal(0.0, 1.0 / sqrt((double)c->lags))
                                                                : tess_init_zeros()));
    }
    TESS_CHECK(tess_registry_finalize(m->reg));
    TESS_CHECK(tess_registry_init_params(m->reg, c->seed));
    m->in = malloc(sizeof(float) * (size_t)c->lags);
    m->pre = malloc(sizeof(float) * (size_t)c->hidden);
    m->act = malloc(sizeof(float) * (size_t)c->hidden);
    m->out = malloc(sizeof(float) * (size_t)c->H);
    TESS_REQUIRE(m->in && m->pre && m->act && m->out, TESS_ERR_MEM, "out of memory for the MLP baseline");
    return TESS_OK;
}

tess_status calm_armlp_fit(calm_armlp *m, const calm_session *sess, int64_t nsess,
                           const calm_armlp_config *c, double val_fraction, const tess_group *g) {
    *m = (calm_armlp){.c = *c};
    const int64_t L = c->lags, H = c->H, F = c->hidden;
    int64_t nfr = 0, nvr = 0;
    const int64_t nfit = sample_runs(sess, nsess, L, H, val_fraction, 0, NULL, &nfr);
    const int64_t nval = sample_runs(sess, nsess, L, H, val_fraction, 1, NULL, &nvr);
    TESS_REQUIRE(nfit > 0 && nval > 0, TESS_ERR_DATA,
                 "no training or validation sample for the MLP baseline (%lld lags, %lld frames "
                 "ahead)", (long long)L, (long long)H);
    int64_t blo = 0, bhi = 0;
    tess_par_block_range(c->batch, g->size, g->rank, &blo, &bhi);
    const int64_t chunk = c->batch; /* rows of the buffers */
    run_of *fr = malloc(sizeof *fr * (size_t)nfr), *vr = malloc(sizeof *vr * (size_t)nvr);
    float *in = malloc(sizeof(float) * (size_t)(chunk * L)), *y = malloc(sizeof(float) * (size_t)(chunk * H));
    float *pre = malloc(sizeof(float) * (size_t)(chunk * F)), *act = malloc(sizeof(float) * (size_t)(chunk * F));
    float *out = malloc(sizeof(float) * (size_t)(chunk * H)), *dact = malloc(sizeof(float) * (size_t)(chunk * F));
    float *dpre = malloc(sizeof(float) * (size_t)(chunk * F)), *best = NULL;
    tess_adamw *opt = NULL;
    tess_status st = fr && vr && in && y && pre && act && out && dact && dpre ? make(m) : TESS_ERR_MEM;
    const int64_t P = st == TESS_OK ? tess_registry_local_total(m->reg) : 0;
    if (st == TESS_OK) st = (best = malloc(sizeof(float) * (size_t)P)) ? TESS_OK : TESS_ERR_MEM;
    if (st == TESS_OK) {
        sample_runs(sess, nsess, L, H, val_fraction, 0, fr, &nfr);
        sample_runs(sess, nsess, L, H, val_fraction, 1, vr, &nvr);
        tess_adamw_config ac = {.beta1 = 0.9f, .beta2 = 0.999f, .eps = 1e-8f, .weight_decay = 0.0f};
        st = tess_adamw_create(&opt, m->reg, &ac);
    }
    int64_t vlo = 0, vhi = 0;
    tess_par_block_range(nval, g->size, g->rank, &vlo, &vhi);
    m->val_mse = INFINITY;
    for (int64_t step = 0; st == TESS_OK && step <= c->steps; step++) {
        if (step % c->eval_every == 0 || step == c->steps) { /* validation; keep the best */
            double e = sse(m, sess, vr, nvr, vlo, vhi, chunk, in, y, pre, act, out);
            st = tess_par_allreduce_f64(g, &e, 1, TESS_PAR_SUM);
            e /= (double)(nval * H);
            if (st == TESS_OK && e < m->val_mse) {
                m->val_mse = e, m->best_step = step;
                memcpy(best, tess_registry_params(m->reg), sizeof(float) * (size_t)P);
            }
        }
        if (st != TESS_OK || step == c->steps) break;
        const int64_t B = bhi - blo;
        for (int64_t i = 0; i < B; i++) {
            const tess_rng_key key = {(uint32_t)c->seed, 11};
            const uint64_t j = tess_rng_u64(key, tess_rng_ctr(TESS_RNG_PURPOSE_DATA, (uint64_t)step),
                                            (uint64_t)(blo + i)) % (uint64_t)nfit;
            int64_t k, n, t;
            sample_at(fr, nfr, (int64_t)j, &k, &n, &t);
            features(&sess[k], n, t, L, H, in + i * L, y + i * H);
        }
        tess_registry_zero_grads(m->reg);
        forward(m, in, pre, act, out, B);
        const float scale = 2.0f / (float)(c->batch * H); /* d mean / d out over the global batch */
        for (int64_t i = 0; i < B * H; i++) out[i] = scale * (out[i] - y[i]);
        memset(dact, 0, sizeof(float) * (size_t)(B * F));
        memset(dpre, 0, sizeof(float) * (size_t)(B * F));
        tess_nn_linear_backward(dact, tess_registry_grad(m->reg, W2), tess_registry_grad(m->reg, B2),
                                out, act, tess_registry_param(m->reg, W2), B, F, H);
        tess_nn_gelu_backward(dpre, dact, pre, B * F);
        tess_nn_linear_backward(NULL, tess_registry_grad(m->reg, W1), tess_registry_grad(m->reg, B1),
                                dpre, in, tess_registry_param(m->reg, W1), B, L, F);
        st = tess_par_allreduce(g, tess_registry_grads(m->reg), P, TESS_PAR_SUM);
        if (st == TESS_OK) tess_adamw_step(opt, (float)c->lr);
    }
    if (st == TESS_OK) memcpy(tess_registry_params(m->reg), best, sizeof(float) * (size_t)P);
    tess_adamw_destroy(&opt);
    free(fr), free(vr), free(in), free(y), free(pre), free(act), free(out), free(dact), free(dpre);
    free(best);
    if (st != TESS_OK) calm_armlp_free(m);
    TESS_REQUIRE(st == TESS_OK, st, "fitting the MLP baseline");
    return TESS_OK;
}

void calm_armlp_predict(calm_armlp *m, const calm_session *s, int64_t n, int64_t t, double *out) {
    features(s, n, t, m->c.lags, m->c.H, m->in, NULL);
    forward(m, m->in, m->pre, m->act, m->out, 1);
    for (int64_t h = 0; h < m->c.H; h++) out[h] = s->x[t * s->N + n] + m->out[h];
}

void calm_armlp_free(calm_armlp *m) {
    tess_registry_destroy(&m->reg);
    free(m->in), free(m->pre), free(m->act), free(m->out);
    *m = (calm_armlp){0};
}

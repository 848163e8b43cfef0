/* decode.c - the behaviour-decoding head, the ridge and MLP baseline decoders and the metrics
 * (decode.h). */
#include "decode.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nn/activation.h" /* tess_nn_gelu_* */
#include "nn/linear.h"     /* tess_nn_linear_* */
#include "nn/norm.h"       /* tess_nn_layernorm_* */
#include "nn/pool.h"       /* tess_nn_attnpool_*, tess_nn_meanpool_* */
#include "optim/adamw.h"   /* tess_adamw_* */
#include "tensor/tensor.h" /* tess_tensor_permute_0213* */

/* BLAS / LAPACK (column-major). */
void dgemm_(const char *ta, const char *tb, const int *m, const int *n, const int *k,
            const double *alpha, const double *a, const int *lda, const double *b, const int *ldb,
            const double *beta, double *c, const int *ldc);
void dposv_(const char *uplo, const int *n, const int *nrhs, double *a, const int *lda, double *b,
            const int *ldb, int *info);

/* ---- the loss shared by the head and the MLP baseline ---------------------------------------- */

/* Summed loss of y (G, D) against t (G, D): (y - t)^2, or for a binary target BCE with logits;
 * dy (G, D) = its gradient. */
static double loss_grad(const float *y, const float *t, const bool *binary, int64_t G, int64_t D,
                        float *dy) {
    double sum = 0.0;
    for (int64_t i = 0; i < G * D; i++) {
        const double v = y[i], tt = t[i];
        if (binary[i % D]) {
            sum += (v > 0.0 ? v : 0.0) - tt * v + log1p(exp(-fabs(v)));
            dy[i] = (float)(1.0 / (1.0 + exp(-v)) - tt);
        } else {
            sum += (v - tt) * (v - tt);
            dy[i] = (float)(2.0 * (v - tt));
        }
    }
    return sum;
}

/* ---- the head ------------------------------------------------------------------------------- */

struct calm_dec {
    calm_dec_readout readout;
    int64_t d, H, D, U, max_B, max_N, M, B;
    tess_registry *reg; /* borrowed */
    int64_t iq, inw, inb, ifc, ifcb, iunit, iout, ioutb; /* iq: attn only; iunit: unit only */
    float *hp;   /* (G, max_N, d) the hidden state, groups (b, m) first */
    float *hn, *dhn; /* (G, max_N, d) its LayerNorm, the gradient there */
    float *mean, *rstd; /* (G, max_N) */
    float *att;  /* (G, max_N) pooling weights (attn) */
    float *pool; /* (G, d) the pooled LayerNorm (attn) */
    float *pre, *act, *dact; /* (G, H) (attn) or (G, max_N, H) per neuron (mean, unit) */
    float *gated;            /* (G, max_N, H) act times its unit's gain (unit) */
    float *feat, *dfeat;     /* (G, H) the pooled GELU features (mean, unit) */
    float *y, *dy; /* (G, D) */
    float *dpool;  /* (G, d) (attn) */
    float *dhp;    /* (G, max_N, d) */
    uint8_t *mask; /* (G, max_N) */
    int32_t *uid;  /* (G, max_N) unit ids (unit) */
};

static tess_status add(tess_registry *reg, const char *name, int ndim, int64_t a, int64_t b,
                       tess_init init, int64_t *idx) {
    const int64_t shape[2] = {a, b};
    const tess_layout rep = tess_layout_replicated();
    TESS_CHECK(tess_registry_add(reg, name, ndim, shape, &rep, idx));
    TESS_CHECK(tess_registry_set_init(reg, *idx, init));
    return TESS_OK;
}

tess_status calm_dec_create(calm_dec **out, calm_dec_readout readout, int64_t d, int64_t H,
                            int64_t D, int64_t U, int64_t max_B, int64_t max_N, int64_t M,
                            tess_registry *reg) {
    *out = NULL;
    TESS_REQUIRE(H >= 1, TESS_ERR_CONFIG, "decode.hidden = %lld must be >= 1", (long long)H);
    TESS_REQUIRE(D >= 1 && D <= CALM_DEC_MAX_TARGETS, TESS_ERR_CONFIG,
                 "decode.targets: %lld targets, expected 1 to %d", (long long)D,
                 CALM_DEC_MAX_TARGETS);
    TESS_REQUIRE(d >= 1 && U >= 1 && max_B >= 1 && max_N >= 1 && M >= 1 &&
                     (unsigned)readout < CALM_DEC_READOUT_COUNT,
                 TESS_ERR_ARG, "decoding head: bad sizes d %lld, U %lld, B %lld, N %lld, M %lld",
                 (long long)d, (long long)U, (long long)max_B, (long long)max_N, (long long)M);
    calm_dec *h = calloc(1, sizeof *h);
    TESS_REQUIRE(h, TESS_ERR_MEM, "out of memory for the decoding head");
    *h = (calm_dec){.readout = readout, .d = d, .H = H, .D = D, .U = U, .max_B = max_B,
                    .max_N = max_N, .M = M, .reg = reg, .iq = -1, .iunit = -1};
    const bool attn = readout == CALM_DEC_ATTN;
    const int64_t G = max_B * M, GN = G * max_N, GH = (attn ? G : GN) * H;
    h->hp = malloc((size_t)(GN * d) * sizeof(float));
    h->dhp = malloc((size_t)(GN * d) * sizeof(float));
    h->hn = malloc((size_t)(GN * d) * sizeof(float));
    h->dhn = malloc((size_t)(GN * d) * sizeof(float));
    h->mean = malloc((size_t)GN * sizeof(float));
    h->rstd = malloc((size_t)GN * sizeof(float));
    h->att = malloc((size_t)(attn ? GN : 1) * sizeof(float));
    h->pool = malloc((size_t)(attn ? G * d : 1) * sizeof(float));
    h->dpool = malloc((size_t)(attn ? G * d : 1) * sizeof(float));
    h->pre = malloc((size_t)GH * sizeof(float));
    h->act = malloc((size_t)GH * sizeof(float));
    h->dact = malloc((size_t)GH * sizeof(float));
    h->gated = malloc((size_t)(readout == CALM_DEC_UNIT ? GH : 1) * sizeof(float));
    h->feat = malloc((size_t)(G * H) * sizeof(float));
    h->dfeat = malloc((size_t)(G * H) * sizeof(float));
    h->y = malloc((size_t)(G * D) * sizeof(float));
    h->dy = malloc((size_t)(G * D) * sizeof(float));
    h->mask = malloc((size_t)GN);
    h->uid = malloc((size_t)GN * sizeof(int32_t));
    *out = h;
    TESS_REQUIRE(h->hp && h->dhp && h->hn && h->dhn && h->mean && h->rstd && h->att && h->pool &&
                     h->dpool && h->pre && h->act && h->dact && h->gated && h->feat && h->dfeat && h->y &&
                     h->dy && h->mask && h->uid,
                 TESS_ERR_MEM, "out of memory for the decoding head (%lld groups)", (long long)G);
    /* query N(0, 0.02): the pooling starts near the mean over the neurons */
    if (attn) TESS_CHECK(add(reg, "dec.query", 1, d, 0, tess_init_normal(0.0, 0.02), &h->iq));
    TESS_CHECK(add(reg, "dec.norm_w", 1, d, 0, tess_init_const(1.0), &h->inw));
    TESS_CHECK(add(reg, "dec.norm_b", 1, d, 0, tess_init_zeros(), &h->inb));
    TESS_CHECK(add(reg, "dec.fc", 2, H, d, tess_init_normal(0.0, 1.0 / sqrt((double)d)), &h->ifc));
    TESS_CHECK(add(reg, "dec.fc_b", 1, H, 0, tess_init_zeros(), &h->ifcb));
    /* per-unit gains 1 + c, c = 0: the unit readout starts as the mean readout */
    if (readout == CALM_DEC_UNIT)
        TESS_CHECK(add(reg, "dec.unit_gain", 2, U, H, tess_init_zeros(), &h->iunit));
    TESS_CHECK(add(reg, "dec.out", 2, D, H, tess_init_normal(0.0, 1.0 / sqrt((double)H)), &h->iout));
    TESS_CHECK(add(reg, "dec.out_b", 1, D, 0, tess_init_zeros(), &h->ioutb));
    return TESS_OK;
}

void calm_dec_destroy(calm_dec **ph) {
    if (!ph || !*ph) return;
    calm_dec *h = *ph;
    free(h->hp), free(h->dhp), free(h->hn), free(h->dhn), free(h->mean), free(h->rstd);
    free(h->att), free(h->pool), free(h->dpool), free(h->pre), free(h->act), free(h->dact);
    free(h->gated);
    free(h->feat), free(h->dfeat), free(h->y), free(h->dy), free(h->mask), free(h->uid);
    free(h);
    *ph = NULL;
}

const float *calm_dec_forward(calm_dec *h, const float *hidden, const int32_t *count,
                              const int32_t *unit, int64_t B) {
    TESS_ASSERT(B >= 1 && B <= h->max_B);
    const int64_t N = h->max_N, M = h->M, d = h->d, H = h->H, G = B * M;
    h->B = B;
    tess_tensor_permute_0213(h->hp, hidden, B, N, M, d); /* (B, N, M, d) -> (B, M, N, d) */
    for (int64_t b = 0; b < B; b++)
        for (int64_t m = 0; m < M; m++)
            for (int64_t n = 0; n < N; n++) {
                h->mask[(b * M + m) * N + n] = n < count[b];
                h->uid[(b * M + m) * N + n] = unit[b * N + n];
            }
    const tess_registry *r = h->reg;
    tess_nn_layernorm_forward(h->hn, h->mean, h->rstd, h->hp, tess_registry_param(r, h->inw),
                              tess_registry_param(r, h->inb), G * N, d, 1e-5f);
    if (h->readout == CALM_DEC_ATTN) { /* pool the neurons, then the MLP */
        tess_nn_attnpool_forward(h->pool, h->att, h->hn, tess_registry_param(r, h->iq), h->mask,
                                 G, N, d);
        tess_nn_linear_forward(h->pre, h->pool, tess_registry_param(r, h->ifc),
                               tess_registry_param(r, h->ifcb), G, d, H);
        tess_nn_gelu_forward(h->feat, h->pre, G * H);
    } else { /* the first layer per neuron (times its unit's gain), then the mean over them */
        tess_nn_linear_forward(h->pre, h->hn, tess_registry_param(r, h->ifc),
                               tess_registry_param(r, h->ifcb), G * N, d, H);
        tess_nn_gelu_forward(h->act, h->pre, G * N * H);
        const float *pooled = h->act;
        if (h->readout == CALM_DEC_UNIT) {
            const float *c = tess_registry_param(r, h->iunit);
            for (int64_t i = 0; i < G * N; i++) {
                TESS_ASSERT(h->uid[i] >= 0 && h->uid[i] < h->U);
                for (int64_t j = 0; j < H; j++)
                    h->gated[i * H + j] = h->act[i * H + j] * (1.0f + c[h->uid[i] * H + j]);
            }
            pooled = h->gated;
        }
        tess_nn_meanpool_forward(h->feat, pooled, h->mask, G, N, H);
    }
    tess_nn_linear_forward(h->y, h->feat, tess_registry_param(r, h->iout),
                           tess_registry_param(r, h->ioutb), G, H, h->D);
    return h->y;
}

double calm_dec_loss(calm_dec *h, const float *target, const bool *binary, int64_t *terms) {
    const int64_t G = h->B * h->M;
    *terms = G * h->D;
    return loss_grad(h->y, target, binary, G, h->D, h->dy);
}

void calm_dec_backward(calm_dec *h, float scale, float *dhidden) {
    const int64_t B = h->B, N = h->max_N, M = h->M, d = h->d, H = h->H, G = B * M;
    const tess_registry *r = h->reg;
    for (int64_t i = 0; i < G * h->D; i++) h->dy[i] *= scale;
    memset(h->dfeat, 0, (size_t)(G * H) * sizeof(float));
    tess_nn_linear_backward(h->dfeat, tess_registry_grad(r, h->iout),
                            tess_registry_grad(r, h->ioutb), h->dy, h->feat,
                            tess_registry_param(r, h->iout), G, H, h->D);
    memset(h->dhn, 0, (size_t)(G * N * d) * sizeof(float));
    if (h->readout == CALM_DEC_ATTN) {
        memset(h->dact, 0, (size_t)(G * H) * sizeof(float)); /* d loss / d pre */
        tess_nn_gelu_backward(h->dact, h->dfeat, h->pre, G * H);
        memset(h->dpool, 0, (size_t)(G * d) * sizeof(float));
        tess_nn_linear_backward(h->dpool, tess_registry_grad(r, h->ifc),
                                tess_registry_grad(r, h->ifcb), h->dact, h->pool,
                                tess_registry_param(r, h->ifc), G, d, H);
        tess_nn_attnpool_backward(h->dhn, tess_registry_grad(r, h->iq), h->dpool, h->hn,
                                  tess_registry_param(r, h->iq), h->att, G, N, d);
    } else {
        memset(h->dact, 0, (size_t)(G * N * H) * sizeof(float)); /* d loss / d pooled */
        tess_nn_meanpool_backward(h->dact, h->dfeat, h->mask, G, N, H);
        if (h->readout == CALM_DEC_UNIT) { /* masked neurons have a zero gradient: add nothing */
            const float *c = tess_registry_param(r, h->iunit);
            float *dc = tess_registry_grad(r, h->iunit);
            for (int64_t i = 0; i < G * N; i++)
                for (int64_t j = 0; j < H; j++) {
                    const float g = h->dact[i * H + j];
                    dc[h->uid[i] * H + j] += g * h->act[i * H + j];
                    h->dact[i * H + j] = g * (1.0f + c[h->uid[i] * H + j]); /* d loss / d act */
                }
        }
        tess_nn_gelu_backward_inplace(h->dact, h->pre, G * N * H); /* now d loss / d pre */
        tess_nn_linear_backward(h->dhn, tess_registry_grad(r, h->ifc),
                                tess_registry_grad(r, h->ifcb), h->dact, h->hn,
                                tess_registry_param(r, h->ifc), G * N, d, H);
    }
    memset(h->dhp, 0, (size_t)(G * N * d) * sizeof(float));
    tess_nn_layernorm_backward(h->dhp, tess_registry_grad(r, h->inw), tess_registry_grad(r, h->inb),
                               h->dhn, h->hp, tess_registry_param(r, h->inw), h->mean, h->rstd,
                               G * N, d);
    if (!dhidden) return;
    memset(dhidden, 0, (size_t)(G * N * d) * sizeof(float));
    tess_tensor_permute_0213_backward(dhidden, h->dhp, B, N, M, d);
}

/* ---- metrics -------------------------------------------------------------------------------- */

double calm_dec_r2(const double *pred, const double *truth, int64_t n) {
    if (n < 2) return NAN;
    double mean = 0.0, res = 0.0, tot = 0.0;
    for (int64_t i = 0; i < n; i++) mean += truth[i];
    mean /= (double)n;
    for (int64_t i = 0; i < n; i++) {
        res += (pred[i] - truth[i]) * (pred[i] - truth[i]);
        tot += (truth[i] - mean) * (truth[i] - mean);
    }
    return tot > 0.0 ? 1.0 - res / tot : NAN;
}

double calm_dec_pearson(const double *pred, const double *truth, int64_t n) {
    if (n < 2) return NAN;
    double mp = 0.0, mt = 0.0, sxy = 0.0, sxx = 0.0, syy = 0.0;
    for (int64_t i = 0; i < n; i++) mp += pred[i], mt += truth[i];
    mp /= (double)n, mt /= (double)n;
    for (int64_t i = 0; i < n; i++) {
        sxy += (pred[i] - mp) * (truth[i] - mt);
        sxx += (pred[i] - mp) * (pred[i] - mp);
        syy += (truth[i] - mt) * (truth[i] - mt);
    }
    return sxx > 0.0 && syy > 0.0 ? sxy / sqrt(sxx * syy) : NAN;
}

double calm_dec_accuracy(const double *score, const double *label, int64_t n, double threshold) {
    if (n < 1) return NAN;
    int64_t right = 0;
    for (int64_t i = 0; i < n; i++) right += (score[i] >= threshold) == (label[i] > 0.5);
    return (double)right / (double)n;
}

typedef struct {
    double s;
    int pos;
} scored;

static int scored_cmp(const void *a, const void *b) {
    const double x = ((const scored *)a)->s, y = ((const scored *)b)->s;
    return (x > y) - (x < y);
}

double calm_dec_auroc(const double *score, const double *label, int64_t n) {
    scored *v = malloc((size_t)(n > 0 ? n : 1) * sizeof *v);
    if (!v) return NAN;
    int64_t npos = 0;
    for (int64_t i = 0; i < n; i++) v[i] = (scored){score[i], label[i] > 0.5}, npos += v[i].pos;
    const int64_t nneg = n - npos;
    if (npos == 0 || nneg == 0) return free(v), NAN;
    qsort(v, (size_t)n, sizeof *v, scored_cmp);
    /* Mann-Whitney: the sum of the positives' ranks, ties given their average rank */
    double rank_sum = 0.0;
    for (int64_t i = 0; i < n;) {
        int64_t j = i;
        while (j < n && v[j].s == v[i].s) j++;
        const double avg = 0.5 * (double)(i + 1 + j); /* ranks i+1 .. j */
        for (int64_t k = i; k < j; k++) rank_sum += v[k].pos ? avg : 0.0;
        i = j;
    }
    free(v);
    return (rank_sum - 0.5 * (double)npos * (double)(npos + 1)) / ((double)npos * (double)nneg);
}

/* ---- baselines ------------------------------------------------------------------------------ */

/* The last frame of t's patch. */
static int64_t patch_end(int64_t t, int64_t P) { return (t / P) * P + P - 1; }

/* Frame t has a complete lagged vector and it ends below `limit`. */
static bool usable(int64_t t, int64_t limit, const calm_dec_base_config *c) {
    const int64_t e = patch_end(t, c->P);
    return e - c->L + 1 >= 0 && e < limit;
}

/* f (L N) = x[e(t) - L + 1 .. e(t), :] */
static void lagged(const calm_dec_session *s, const calm_dec_base_config *c, int64_t t, double *f) {
    const int64_t e = patch_end(t, c->P);
    for (int64_t l = 0; l < c->L; l++)
        for (int64_t n = 0; n < s->N; n++) f[l * s->N + n] = s->x[(e - c->L + 1 + l) * s->N + n];
}

static int64_t val_start(const calm_dec_session *s, const calm_dec_base_config *c) {
    return s->train_T - (int64_t)floor(c->val_fraction * (double)s->train_T);
}

tess_status calm_dec_base_check(const calm_dec_session *s, const calm_dec_base_config *c,
                                const char *name) {
    const int64_t v0 = val_start(s, c);
    TESS_REQUIRE(v0 >= 2 * c->L + c->P && s->train_T - v0 >= c->L, TESS_ERR_DATA,
                 "'%s': %lld training frames, too few for the baseline decoders (%lld lags, "
                 "validation slice of %lld frames)",
                 name, (long long)s->train_T, (long long)c->L, (long long)(s->train_T - v0));
    return TESS_OK;
}

/* Mean and variance of target k over the frames below train_T of the sessions i with use[i]. */
static void moments(const calm_dec_session *s, int64_t ns, const bool *use, int64_t k, double *m,
                    double *v) {
    const int64_t D = s[0].D;
    double n = 0.0;
    *m = *v = 0.0;
    for (int64_t i = 0; i < ns; i++)
        for (int64_t t = 0; use[i] && t < s[i].train_T; t++) *m += s[i].beh[t * D + k], n += 1.0;
    *m /= n;
    for (int64_t i = 0; i < ns; i++)
        for (int64_t t = 0; use[i] && t < s[i].train_T; t++) *v += pow(s[i].beh[t * D + k] - *m, 2);
    *v /= n;
}

void calm_dec_target_stats(const calm_dec_session *s, int64_t ns, const bool *train,
                           const bool *binary, double *mu, double *sd) {
    const int64_t D = s[0].D;
    for (int64_t k = 0; k < D; k++) {
        double pm = 0.0, pv = 0.0;
        if (train) moments(s, ns, train, k, &pm, &pv);
        for (int64_t i = 0; i < ns; i++) {
            double m = pm, v = pv;
            if (!train) { /* the session's own training frames */
                const bool yes = true;
                moments(&s[i], 1, &yes, k, &m, &v);
            }
            mu[i * D + k] = binary[k] ? 0.0 : m;
            sd[i * D + k] = binary[k] ? 1.0 : sqrt(v) + 1e-6;
        }
    }
}

void calm_dec_summarize(const float *x, int64_t T, int64_t N, float *out, float *work) {
    static const double q[3] = {0.1, 0.5, 0.9};
    for (int64_t t = 0; t < T; t++) {
        double m = 0.0, v = 0.0;
        for (int64_t n = 0; n < N; n++) m += x[t * N + n];
        m /= (double)N;
        for (int64_t n = 0; n < N; n++) v += pow(x[t * N + n] - m, 2);
        memcpy(work, x + t * N, (size_t)N * sizeof(float));
        /* insertion sort: N is a few hundred at most */
        for (int64_t i = 1; i < N; i++) {
            const float a = work[i];
            int64_t j = i;
            for (; j > 0 && work[j - 1] > a; j--) work[j] = work[j - 1];
            work[j] = a;
        }
        float *o = out + t * CALM_DEC_SUMMARY;
        o[0] = (float)m, o[1] = (float)sqrt(v / (double)N);
        for (int j = 0; j < 3; j++) {
            const double pos = q[j] * (double)(N - 1), fl = floor(pos);
            const int64_t i0 = (int64_t)fl, i1 = i0 + 1 < N ? i0 + 1 : i0;
            o[2 + j] = (float)(work[i0] + (pos - fl) * (work[i1] - work[i0]));
        }
    }
}

/* Frame t of session s. */
typedef struct {
    int64_t s, t;
} dec_row;

/* The rows of a fit over sessions: fit (each training session's frames before its validation
 * slice), val (inside the slice), all (every training frame), pred (every frame with a lagged
 * vector of the sessions with a prediction buffer). */
typedef struct {
    dec_row *fit, *val, *all, *pred;
    int64_t nfit, nval, nall, npred;
} dec_rows;

static void rows_free(dec_rows *r) { free(r->fit), free(r->val), free(r->all), free(r->pred); }

/* Appends the frames t in [lo, hi) of session s with a lagged vector ending below limit. */
static void rows_in(const calm_dec_base_config *c, int64_t s, int64_t lo, int64_t hi,
                    int64_t limit, dec_row *rows, int64_t *n) {
    for (int64_t t = lo; t < hi; t++)
        if (usable(t, limit, c)) rows[(*n)++] = (dec_row){s, t};
}

static tess_status rows_make(dec_rows *r, const calm_dec_session *s, int64_t ns, const bool *train,
                             float *const *pred, const calm_dec_base_config *c) {
    int64_t tot = 0;
    for (int64_t i = 0; i < ns; i++) tot += s[i].T;
    *r = (dec_rows){0};
    r->fit = malloc((size_t)tot * sizeof(dec_row)), r->val = malloc((size_t)tot * sizeof(dec_row));
    r->all = malloc((size_t)tot * sizeof(dec_row)), r->pred = malloc((size_t)tot * sizeof(dec_row));
    TESS_REQUIRE(r->fit && r->val && r->all && r->pred, TESS_ERR_MEM,
                 "out of memory for the decoders' frame lists (%lld frames)", (long long)tot);
    for (int64_t i = 0; i < ns; i++) {
        if (train[i]) {
            const int64_t v0 = val_start(&s[i], c);
            rows_in(c, i, 0, v0, v0, r->fit, &r->nfit);
            rows_in(c, i, v0, s[i].train_T, s[i].train_T, r->val, &r->nval);
            rows_in(c, i, 0, s[i].train_T, s[i].train_T, r->all, &r->nall);
        }
        if (pred[i]) rows_in(c, i, 0, s[i].T, s[i].T, r->pred, &r->npred);
    }
    return TESS_OK;
}

/* Every session has the same features (N neurons or summary statistics) and behaviours. */
static tess_status same_shapes(const calm_dec_session *s, int64_t ns) {
    for (int64_t i = 1; i < ns; i++)
        TESS_REQUIRE(s[i].N == s[0].N && s[i].D == s[0].D, TESS_ERR_ARG,
                     "pooled decoder: session %lld has %lld features and %lld targets, session 0 "
                     "%lld and %lld",
                     (long long)i, (long long)s[i].N, (long long)s[i].D, (long long)s[0].N,
                     (long long)s[0].D);
    return TESS_OK;
}

static const double RIDGE_LAMBDAS[] = {1.0, 10.0, 100.0, 1e3, 1e4, 1e5};
enum { NRIDGE = sizeof RIDGE_LAMBDAS / sizeof RIDGE_LAMBDAS[0] };

/* A ridge fit on n rows: centred features X (column-major (F, n)), targets Y
 * (column-major (n, D)), their means mx (F), my (D). */
typedef struct {
    int64_t n, F, D;
    double *X, *Y, *mx, *my, *A, *W; /* A: (F, F) or (n, n) work; W (F, D) */
} ridge_fit;

static void ridge_free(ridge_fit *r) {
    free(r->X), free(r->Y), free(r->mx), free(r->my), free(r->A), free(r->W);
}

static tess_status ridge_prepare(ridge_fit *r, const calm_dec_session *s,
                                 const calm_dec_base_config *c, const dec_row *rows, int64_t n) {
    const int64_t F = c->L * s[0].N, D = s[0].D, k = F < n ? F : n;
    *r = (ridge_fit){.n = n, .F = F, .D = D};
    r->X = malloc((size_t)(F * n) * sizeof(double));
    r->Y = malloc((size_t)(n * D) * sizeof(double));
    r->mx = calloc((size_t)F, sizeof(double));
    r->my = calloc((size_t)D, sizeof(double));
    r->A = malloc((size_t)(k * k) * sizeof(double));
    r->W = malloc((size_t)(F * D) * sizeof(double));
    TESS_REQUIRE(r->X && r->Y && r->mx && r->my && r->A && r->W, TESS_ERR_MEM,
                 "out of memory for a ridge decoder (%lld frames x %lld features)", (long long)n,
                 (long long)F);
    for (int64_t i = 0; i < n; i++) {
        const calm_dec_session *si = &s[rows[i].s];
        lagged(si, c, rows[i].t, r->X + i * F);
        for (int64_t j = 0; j < F; j++) r->mx[j] += r->X[i * F + j] / (double)n;
        for (int64_t k2 = 0; k2 < D; k2++) {
            r->Y[k2 * n + i] = si->beh[rows[i].t * D + k2];
            r->my[k2] += r->Y[k2 * n + i] / (double)n;
        }
    }
    for (int64_t i = 0; i < n; i++) {
        for (int64_t j = 0; j < F; j++) r->X[i * F + j] -= r->mx[j];
        for (int64_t k2 = 0; k2 < D; k2++) r->Y[k2 * n + i] -= r->my[k2];
    }
    return TESS_OK;
}

/* W = (X^T X + lambda I)^-1 X^T Y, in the primal (F <= n) or the dual form. */
static tess_status ridge_solve(ridge_fit *r, double lambda) {
    const int F = (int)r->F, n = (int)r->n, D = (int)r->D;
    const double one = 1.0, zero = 0.0;
    int info = 0;
    if (F <= n) {
        dgemm_("N", "T", &F, &F, &n, &one, r->X, &F, r->X, &F, &zero, r->A, &F);
        dgemm_("N", "N", &F, &D, &n, &one, r->X, &F, r->Y, &n, &zero, r->W, &F);
        for (int i = 0; i < F; i++) r->A[(int64_t)i * F + i] += lambda;
        dposv_("L", &F, &D, r->A, &F, r->W, &F, &info);
    } else {
        double *alpha = malloc((size_t)n * (size_t)D * sizeof(double));
        TESS_REQUIRE(alpha, TESS_ERR_MEM, "out of memory for a ridge decoder");
        memcpy(alpha, r->Y, (size_t)n * (size_t)D * sizeof(double));
        dgemm_("T", "N", &n, &n, &F, &one, r->X, &F, r->X, &F, &zero, r->A, &n);
        for (int i = 0; i < n; i++) r->A[(int64_t)i * n + i] += lambda;
        dposv_("L", &n, &D, r->A, &n, alpha, &n, &info);
        if (info == 0) dgemm_("N", "N", &F, &D, &n, &one, r->X, &F, alpha, &n, &zero, r->W, &F);
        free(alpha);
    }
    TESS_REQUIRE(info == 0, TESS_ERR_INTERNAL, "ridge decoder: dposv failed (info %d, lambda %g)",
                 info, lambda);
    return TESS_OK;
}

/* Target k at frame t from the fit r: my + (f - mx) . W[:, k]; f (F) scratch. */
static double ridge_predict(const ridge_fit *r, const calm_dec_session *s,
                            const calm_dec_base_config *c, int64_t t, int64_t k, double *f) {
    lagged(s, c, t, f);
    double y = r->my[k];
    for (int64_t j = 0; j < r->F; j++) y += (f[j] - r->mx[j]) * r->W[k * r->F + j];
    return y;
}

tess_status calm_dec_ridge_pooled(const calm_dec_session *s, int64_t ns, const bool *train,
                                  const calm_dec_base_config *c, float *const *pred,
                                  double *lambda) {
    TESS_CHECK(same_shapes(s, ns));
    const int64_t D = s[0].D, F = c->L * s[0].N;
    dec_rows rw = {0};
    double *f = malloc((size_t)F * sizeof(double));
    double *err = calloc((size_t)(NRIDGE * D), sizeof(double));
    ridge_fit r = {0};
    tess_status st = f && err ? rows_make(&rw, s, ns, train, pred, c) : TESS_ERR_MEM;
    /* fitted before the validation slices, scored inside them */
    if (st == TESS_OK) st = ridge_prepare(&r, s, c, rw.fit, rw.nfit);
    for (int64_t li = 0; st == TESS_OK && li < NRIDGE; li++) {
        st = ridge_solve(&r, RIDGE_LAMBDAS[li]);
        for (int64_t i = 0; st == TESS_OK && i < rw.nval; i++) {
            const calm_dec_session *si = &s[rw.val[i].s];
            for (int64_t k = 0; k < D; k++)
                err[li * D + k] += pow(ridge_predict(&r, si, c, rw.val[i].t, k, f) -
                                           si->beh[rw.val[i].t * D + k], 2);
        }
    }
    ridge_free(&r);
    for (int64_t k = 0; k < D; k++) {
        int64_t best = 0;
        for (int64_t li = 1; li < NRIDGE; li++) best = err[li * D + k] < err[best * D + k] ? li : best;
        lambda[k] = RIDGE_LAMBDAS[best];
    }
    /* refitted on every training frame, one solve per target's penalty */
    if (st == TESS_OK) st = ridge_prepare(&r, s, c, rw.all, rw.nall);
    for (int64_t i = 0; i < ns; i++)
        for (int64_t j = 0; pred[i] && j < s[i].T * D; j++) pred[i][j] = NAN;
    for (int64_t k = 0; st == TESS_OK && k < D; k++) {
        st = ridge_solve(&r, lambda[k]);
        for (int64_t i = 0; st == TESS_OK && i < rw.npred; i++)
            pred[rw.pred[i].s][rw.pred[i].t * D + k] =
                (float)ridge_predict(&r, &s[rw.pred[i].s], c, rw.pred[i].t, k, f);
    }
    ridge_free(&r);
    rows_free(&rw);
    free(f), free(err);
    TESS_REQUIRE(st == TESS_OK, st, "ridge decoder");
    return TESS_OK;
}

tess_status calm_dec_ridge(const calm_dec_session *s, const calm_dec_base_config *c, float *pred,
                           double *lambda) {
    const bool train = true;
    return calm_dec_ridge_pooled(s, 1, &train, c, &pred, lambda);
}

/* The MLP baseline on n frames: registry, optimizer, activations. */
typedef struct {
    tess_registry *reg;
    tess_adamw *opt;
    int64_t ifc, ifcb, iout, ioutb, F, H, D;
    float *pre, *act, *dact, *y, *dy;
} mlp_net;

static void mlp_free(mlp_net *m) {
    tess_adamw_destroy(&m->opt);
    tess_registry_destroy(&m->reg);
    free(m->pre), free(m->act), free(m->dact), free(m->y), free(m->dy);
}

static tess_status mlp_make(mlp_net *m, const calm_dec_base_config *c, int64_t F, int64_t D,
                            int64_t rows) {
    const int64_t H = c->hidden;
    *m = (mlp_net){.F = F, .H = H, .D = D};
    TESS_CHECK(tess_registry_create(&m->reg));
    TESS_CHECK(add(m->reg, "mlp.fc", 2, H, F, tess_init_normal(0.0, 1.0 / sqrt((double)F)), &m->ifc));
    TESS_CHECK(add(m->reg, "mlp.fc_b", 1, H, 0, tess_init_zeros(), &m->ifcb));
    TESS_CHECK(add(m->reg, "mlp.out", 2, D, H, tess_init_normal(0.0, 1.0 / sqrt((double)H)), &m->iout));
    TESS_CHECK(add(m->reg, "mlp.out_b", 1, D, 0, tess_init_zeros(), &m->ioutb));
    TESS_CHECK(tess_registry_finalize(m->reg));
    TESS_CHECK(tess_registry_init_params(m->reg, c->seed));
    const tess_adamw_config ac = {.beta1 = 0.9f, .beta2 = 0.999f, .eps = 1e-8f, .weight_decay = 0.01f};
    TESS_CHECK(tess_adamw_create(&m->opt, m->reg, &ac));
    m->pre = malloc((size_t)(rows * H) * sizeof(float));
    m->act = malloc((size_t)(rows * H) * sizeof(float));
    m->dact = malloc((size_t)(rows * H) * sizeof(float));
    m->y = malloc((size_t)(rows * D) * sizeof(float));
    m->dy = malloc((size_t)(rows * D) * sizeof(float));
    TESS_REQUIRE(m->pre && m->act && m->dact && m->y && m->dy, TESS_ERR_MEM,
                 "out of memory for the MLP decoder");
    return TESS_OK;
}

static void mlp_forward(mlp_net *m, const float *X, int64_t n) {
    tess_nn_linear_forward(m->pre, X, tess_registry_param(m->reg, m->ifc),
                           tess_registry_param(m->reg, m->ifcb), n, m->F, m->H);
    tess_nn_gelu_forward(m->act, m->pre, n * m->H);
    tess_nn_linear_forward(m->y, m->act, tess_registry_param(m->reg, m->iout),
                           tess_registry_param(m->reg, m->ioutb), n, m->H, m->D);
}

/* One full-batch AdamW step on the mean loss over n rows. */
static void mlp_step(mlp_net *m, const float *X, const float *Y, const bool *binary, int64_t n,
                     float lr) {
    tess_registry_zero_grads(m->reg);
    mlp_forward(m, X, n);
    loss_grad(m->y, Y, binary, n, m->D, m->dy);
    for (int64_t i = 0; i < n * m->D; i++) m->dy[i] /= (float)n;
    memset(m->dact, 0, (size_t)(n * m->H) * sizeof(float));
    tess_nn_linear_backward(m->dact, tess_registry_grad(m->reg, m->iout),
                            tess_registry_grad(m->reg, m->ioutb), m->dy, m->act,
                            tess_registry_param(m->reg, m->iout), n, m->H, m->D);
    memset(m->act, 0, (size_t)(n * m->H) * sizeof(float)); /* reused as d pre */
    tess_nn_gelu_backward(m->act, m->dact, m->pre, n * m->H);
    tess_nn_linear_backward(NULL, tess_registry_grad(m->reg, m->ifc),
                            tess_registry_grad(m->reg, m->ifcb), m->act, X,
                            tess_registry_param(m->reg, m->ifc), n, m->F, m->H);
    tess_adamw_step(m->opt, lr);
}

/* Rows (n) as float features X (n, F) and targets Y (n, D), regression targets standardised
 * with mu, sd. */
static void mlp_rows(const calm_dec_session *s, const calm_dec_base_config *c, const dec_row *rows,
                     int64_t n, const double *mu, const double *sd, float *X, float *Y,
                     double *f) {
    const int64_t F = c->L * s[0].N, D = s[0].D;
    for (int64_t i = 0; i < n; i++) {
        const calm_dec_session *si = &s[rows[i].s];
        lagged(si, c, rows[i].t, f);
        for (int64_t j = 0; j < F; j++) X[i * F + j] = (float)f[j];
        for (int64_t k = 0; k < D; k++) {
            const double v = si->beh[rows[i].t * D + k];
            Y[i * D + k] = (float)(c->binary[k] ? v : (v - mu[k]) / sd[k]);
        }
    }
}

tess_status calm_dec_mlp_pooled(const calm_dec_session *s, int64_t ns, const bool *train,
                                const calm_dec_base_config *c, float *const *pred,
                                int64_t *steps) {
    TESS_CHECK(same_shapes(s, ns));
    const int64_t D = s[0].D, F = c->L * s[0].N;
    enum { EVERY = 10 };
    int64_t rows = 0;
    for (int64_t i = 0; i < ns; i++) rows += s[i].T;
    dec_rows rw = {0};
    float *X = malloc((size_t)(rows * F) * sizeof(float)), *Y = malloc((size_t)(rows * D) * sizeof(float));
    float *XV = malloc((size_t)(rows * F) * sizeof(float)), *YV = malloc((size_t)(rows * D) * sizeof(float));
    double *f = malloc((size_t)F * sizeof(double));
    tess_status st = X && Y && XV && YV && f ? rows_make(&rw, s, ns, train, pred, c) : TESS_ERR_MEM;
    if (st != TESS_OK) {
        rows_free(&rw);
        free(X), free(Y), free(XV), free(YV), free(f);
        return tess_error_push(st, __FILE__, __LINE__, __func__,
                               "out of memory for the MLP decoder (%lld frames x %lld features)",
                               (long long)rows, (long long)F);
    }
    /* regression targets standardised with the training frames */
    double mu[CALM_DEC_MAX_TARGETS] = {0}, sd[CALM_DEC_MAX_TARGETS] = {0}, cnt = 0.0;
    for (int64_t i = 0; i < ns; i++) cnt += train[i] ? (double)s[i].train_T : 0.0;
    for (int64_t k = 0; k < D; k++) {
        for (int64_t i = 0; i < ns; i++)
            for (int64_t t = 0; train[i] && t < s[i].train_T; t++) mu[k] += s[i].beh[t * D + k];
        mu[k] /= cnt;
        for (int64_t i = 0; i < ns; i++)
            for (int64_t t = 0; train[i] && t < s[i].train_T; t++)
                sd[k] += pow(s[i].beh[t * D + k] - mu[k], 2);
        sd[k] = sqrt(sd[k] / cnt) + 1e-12;
    }
    mlp_rows(s, c, rw.fit, rw.nfit, mu, sd, X, Y, f);
    mlp_rows(s, c, rw.val, rw.nval, mu, sd, XV, YV, f);
    mlp_net m = {0};
    st = mlp_make(&m, c, F, D, rw.nfit > rw.nval ? rw.nfit : rw.nval);
    /* early stopping: the step count with the lowest validation loss */
    double best = INFINITY;
    *steps = EVERY;
    for (int64_t k = 1; st == TESS_OK && k <= c->max_steps; k++) {
        mlp_step(&m, X, Y, c->binary, rw.nfit, (float)c->lr);
        if (k % EVERY) continue;
        mlp_forward(&m, XV, rw.nval);
        const double l = loss_grad(m.y, YV, c->binary, rw.nval, D, m.dy);
        if (l < best) best = l, *steps = k;
    }
    mlp_free(&m);
    /* refitted on every training frame for that many steps */
    if (st == TESS_OK) st = mlp_make(&m, c, F, D, rows);
    if (st == TESS_OK) {
        mlp_rows(s, c, rw.all, rw.nall, mu, sd, X, Y, f);
        for (int64_t k = 0; k < *steps; k++) mlp_step(&m, X, Y, c->binary, rw.nall, (float)c->lr);
        /* the predicted sessions' rows: targets unused (their behaviour is not read) */
        for (int64_t i = 0; i < rw.npred; i++) {
            lagged(&s[rw.pred[i].s], c, rw.pred[i].t, f);
            for (int64_t j = 0; j < F; j++) X[i * F + j] = (float)f[j];
        }
        mlp_forward(&m, X, rw.npred);
        for (int64_t i = 0; i < ns; i++)
            for (int64_t j = 0; pred[i] && j < s[i].T * D; j++) pred[i][j] = NAN;
        for (int64_t i = 0; i < rw.npred; i++)
            for (int64_t k = 0; k < D; k++) {
                const double v = m.y[i * D + k];
                pred[rw.pred[i].s][rw.pred[i].t * D + k] =
                    (float)(c->binary[k] ? 1.0 / (1.0 + exp(-v)) : mu[k] + sd[k] * v);
            }
    }
    mlp_free(&m);
    rows_free(&rw);
    free(X), free(Y), free(XV), free(YV), free(f);
    TESS_REQUIRE(st == TESS_OK, st, "MLP decoder");
    return TESS_OK;
}

tess_status calm_dec_mlp(const calm_dec_session *s, const calm_dec_base_config *c, float *pred,
                         int64_t *steps) {
    const bool train = true;
    return calm_dec_mlp_pooled(s, 1, &train, c, &pred, steps);
}

/* ar.c - the NLinear ridge AR baselines (ar.h). */
#include "ar.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* LAPACK: solve A X = B for symmetric positive definite A (column-major). */
void dposv_(const char *uplo, const int *n, const int *nrhs, double *a, const int *lda, double *b,
            const int *ldb, int *info);

static const double LAMBDAS[] = {1e-2, 1e-1, 1.0, 10.0, 100.0, 1e3, 1e4};
enum { NLAMBDA = sizeof LAMBDAS / sizeof LAMBDAS[0] };

/* Normal equations of one neuron: A (lags, lags) += f f^T, B (lags, H) += f y^T (column-major)
 * over the last context frames t in [t0, t1) (inputs f from frames t - lags + 1 .. t, targets y
 * the H frames after t, both minus x[t]). */
static void accumulate(const calm_session *s, int64_t n, int64_t lags, int64_t H, int64_t t0,
                       int64_t t1, double *A, double *B, double *f) {
    for (int64_t t = t0; t < t1; t++) {
        const double last = s->x[t * s->N + n];
        for (int64_t i = 0; i < lags; i++) f[i] = s->x[(t - lags + 1 + i) * s->N + n] - last;
        for (int64_t j = 0; j < lags; j++)
            for (int64_t i = 0; i < lags; i++) A[j * lags + i] += f[i] * f[j];
        for (int64_t h = 0; h < H; h++) {
            const double y = s->x[(t + 1 + h) * s->N + n] - last;
            for (int64_t i = 0; i < lags; i++) B[h * lags + i] += f[i] * y;
        }
    }
}

/* W (lags, H) column-major = (A + lambda I)^-1 B; A, B unchanged (work: lags^2). */
static tess_status solve(const double *A, const double *B, int64_t lags, int64_t H, double lambda,
                         double *work, double *W) {
    memcpy(work, A, sizeof(double) * (size_t)(lags * lags));
    memcpy(W, B, sizeof(double) * (size_t)(lags * H));
    for (int64_t i = 0; i < lags; i++) work[i * lags + i] += lambda;
    const int n = (int)lags, nrhs = (int)H;
    int info = 0;
    dposv_("L", &n, &nrhs, work, &n, W, &n, &info);
    TESS_REQUIRE(info == 0, TESS_ERR_INTERNAL, "ridge AR: dposv failed (info %d, lambda %g)", info,
                 lambda);
    return TESS_OK;
}

/* Validation loss of W up to a constant: sum ||y - W^T f||^2 - sum ||y||^2 =
 * tr(W^T Av W) - 2 tr(W^T Bv). */
static double val_loss(const double *W, const double *Av, const double *Bv, int64_t lags,
                       int64_t H) {
    double e = 0.0;
    for (int64_t h = 0; h < H; h++) {
        const double *w = W + h * lags;
        for (int64_t i = 0; i < lags; i++) {
            double aw = 0.0;
            for (int64_t j = 0; j < lags; j++) aw += Av[j * lags + i] * w[j];
            e += w[i] * aw - 2.0 * w[i] * Bv[h * lags + i];
        }
    }
    return e;
}

/* Start of the validation slice of training span sp. */
static int64_t val_start(const calm_span *sp, double val_fraction) {
    return sp->t0 + (int64_t)floor((1.0 - val_fraction) * (double)(sp->t1 - sp->t0));
}

tess_status calm_ar_check(const calm_session *sess, int64_t nsess, int64_t lags, int64_t H,
                          double val_fraction) {
    for (int64_t k = 0; k < nsess; k++) {
        for (int64_t i = 0; i < sess[k].nspans; i++) {
            const calm_span *sp = &sess[k].spans[i];
            const int64_t v0 = val_start(sp, val_fraction);
            TESS_REQUIRE(!sp->train || (v0 - sp->t0 >= lags + H && sp->t1 - v0 >= 2 * H),
                         TESS_ERR_DATA,
                         "'%s': %lld training frames (%lld-%lld) are too few for the ridge AR "
                         "baselines (%lld lags and %lld frames ahead before the validation slice, "
                         "the last %g %% of them, and %lld in it)",
                         sess[k].name, (long long)(sp->t1 - sp->t0), (long long)sp->t0,
                         (long long)sp->t1, (long long)lags, (long long)H, 100.0 * val_fraction,
                         (long long)(2 * H));
        }
    }
    return TESS_OK;
}

tess_status calm_ar_fit(calm_ar *ar, const calm_session *sess, int64_t nsess, int64_t units,
                        int64_t lags, int64_t H, double val_fraction) {
    *ar = (calm_ar){.lags = lags, .H = H};
    const int64_t LL = lags * lags, LH = lags * H;
    TESS_CHECK(calm_ar_check(sess, nsess, lags, H, val_fraction));
    /* per unit: fit-part, validation-part and all-training normal equations */
    double *nA = calloc((size_t)(units * 3 * LL), sizeof(double));
    double *nB = calloc((size_t)(units * 3 * LH), sizeof(double));
    double *pA = calloc((size_t)(3 * LL), sizeof(double)), *pB = calloc((size_t)(3 * LH), sizeof(double));
    double *f = malloc(sizeof(double) * (size_t)lags), *work = malloc(sizeof(double) * (size_t)LL);
    double *W = malloc(sizeof(double) * (size_t)LH);
    double *loss = calloc(2 * NLAMBDA, sizeof(double));
    ar->w_neuron = malloc(sizeof(double) * (size_t)(units * LH));
    ar->w_pooled = malloc(sizeof(double) * (size_t)LH);
    tess_status st = nA && nB && pA && pB && f && work && W && loss && ar->w_neuron && ar->w_pooled
                         ? TESS_OK
                         : tess_error_push(TESS_ERR_MEM, __FILE__, __LINE__, __func__,
                                           "out of memory for the ridge AR baselines");
    for (int64_t k = 0; st == TESS_OK && k < nsess; k++) {
        const calm_session *s = &sess[k];
        for (int64_t n = 0; n < s->N; n++) {
            double *A = nA + (s->unit0 + n) * 3 * LL, *B = nB + (s->unit0 + n) * 3 * LH;
            for (int64_t i = 0; i < s->nspans; i++) {
                const calm_span *sp = &s->spans[i];
                const int64_t v0 = val_start(sp, val_fraction);
                if (!sp->train) continue;
                /* fit: targets before v0; validation: last context frame from v0 - 1, targets
                 * in [v0, t1); all: every target in the span */
                accumulate(s, n, lags, H, sp->t0 + lags - 1, v0 - H, A, B, f);
                accumulate(s, n, lags, H, v0 - 1, sp->t1 - H, A + LL, B + LH, f);
                accumulate(s, n, lags, H, sp->t0 + lags - 1, sp->t1 - H, A + 2 * LL, B + 2 * LH, f);
            }
            if (s->held_out) continue; /* the pooled map never sees a held-out animal */
            for (int64_t i = 0; i < 3 * LL; i++) pA[i] += A[i];
            for (int64_t i = 0; i < 3 * LH; i++) pB[i] += B[i];
        }
    }
    for (int64_t l = 0; st == TESS_OK && l < NLAMBDA; l++) {
        for (int64_t u = 0; st == TESS_OK && u < units; u++) {
            const double *A = nA + u * 3 * LL, *B = nB + u * 3 * LH;
            st = solve(A, B, lags, H, LAMBDAS[l], work, W);
            if (st == TESS_OK) loss[l] += val_loss(W, A + LL, B + LH, lags, H);
        }
        if (st == TESS_OK) st = solve(pA, pB, lags, H, LAMBDAS[l], work, W);
        if (st == TESS_OK) loss[NLAMBDA + l] = val_loss(W, pA + LL, pB + LH, lags, H);
    }
    int64_t bn = 0, bp = 0;
    for (int64_t l = 1; l < NLAMBDA; l++) {
        bn = loss[l] < loss[bn] ? l : bn;
        bp = loss[NLAMBDA + l] < loss[NLAMBDA + bp] ? l : bp;
    }
    ar->lambda_neuron = LAMBDAS[bn];
    ar->lambda_pooled = LAMBDAS[bp];
    for (int64_t u = 0; st == TESS_OK && u < units; u++) {
        st = solve(nA + u * 3 * LL + 2 * LL, nB + u * 3 * LH + 2 * LH, lags, H, ar->lambda_neuron,
                   work, W);
        for (int64_t h = 0; st == TESS_OK && h < H; h++) /* (lags, H) col-major -> (H, lags) */
            memcpy(ar->w_neuron + u * LH + h * lags, W + h * lags, sizeof(double) * (size_t)lags);
    }
    if (st == TESS_OK) st = solve(pA + 2 * LL, pB + 2 * LH, lags, H, ar->lambda_pooled, work, ar->w_pooled);
    free(nA), free(nB), free(pA), free(pB), free(f), free(work), free(W), free(loss);
    if (st != TESS_OK) calm_ar_free(ar);
    TESS_REQUIRE(st == TESS_OK, st, "fitting the ridge AR baselines");
    return TESS_OK;
}

void calm_ar_free(calm_ar *ar) {
    free(ar->w_neuron);
    free(ar->w_pooled);
    *ar = (calm_ar){0};
}

void calm_ar_predict(const calm_ar *ar, const double *w, const calm_session *s, int64_t n,
                     int64_t t, double *out) {
    const double last = s->x[t * s->N + n];
    for (int64_t h = 0; h < ar->H; h++) {
        double y = last;
        for (int64_t i = 0; i < ar->lags; i++)
            y += w[h * ar->lags + i] * (s->x[(t - ar->lags + 1 + i) * s->N + n] - last);
        out[h] = y;
    }
}

/* linear.c - linear analyses of the embeddings (linear.h). */
#include "linear.h"

#include <math.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "par/coll.h"      /* tess_par_agree */
#include "par/scalapack.h" /* tess_scal_* */

/* LAPACK: solve A X = B for symmetric positive definite A (column-major). */
void dposv_(const char *uplo, const int *n, const int *nrhs, double *a, const int *lda, double *b,
            const int *ldb, int *info);

static const double LAMBDAS[] = {10.0, 1.0, 1e-1, 1e-2, 1e-3, 1e-4}; /* ties: the larger */
enum { NLAMBDA = sizeof LAMBDAS / sizeof LAMBDAS[0] };

typedef struct {
    const float *X;
    int64_t n, d, C;
    const int64_t *label, *fold;
    double *mx, *my, *G, *W; /* (d), (C), (d, d), (d, C) column-major */
} fit_ctx;

/* Fit on the rows whose fold is neither a nor b (-1: none) with relative penalty lambda:
 * means mx, my and W = (Xc^T Xc + lambda tr / d I)^-1 Xc^T Yc. */
static tess_status fit(fit_ctx *c, int64_t a, int64_t b, double lambda) {
    const int64_t d = c->d, C = c->C;
    int64_t m = 0;
    memset(c->mx, 0, sizeof(double) * (size_t)d), memset(c->my, 0, sizeof(double) * (size_t)C);
    for (int64_t i = 0; i < c->n; i++) {
        if (c->fold[i] == a || c->fold[i] == b) continue;
        for (int64_t j = 0; j < d; j++) c->mx[j] += c->X[i * d + j];
        c->my[c->label[i]] += 1.0, m++;
    }
    TESS_REQUIRE(m > 0, TESS_ERR_ARG, "identity decoding: no training row outside folds %lld, %lld",
                 (long long)a, (long long)b);
    for (int64_t j = 0; j < d; j++) c->mx[j] /= (double)m;
    for (int64_t k = 0; k < C; k++) c->my[k] /= (double)m;
    memset(c->G, 0, sizeof(double) * (size_t)(d * d)), memset(c->W, 0, sizeof(double) * (size_t)(d * C));
    for (int64_t i = 0; i < c->n; i++) {
        if (c->fold[i] == a || c->fold[i] == b) continue;
        for (int64_t j = 0; j < d; j++) {
            const double xj = c->X[i * d + j] - c->mx[j];
            for (int64_t l = 0; l <= j; l++) c->G[l * d + j] += xj * (c->X[i * d + l] - c->mx[l]);
            for (int64_t k = 0; k < C; k++) c->W[k * d + j] += xj * ((c->label[i] == k) - c->my[k]);
        }
    }
    double tr = 0.0;
    for (int64_t j = 0; j < d; j++) tr += c->G[j * d + j];
    const double pen = lambda * (tr > 0.0 ? tr / (double)d : 1.0);
    for (int64_t j = 0; j < d; j++) c->G[j * d + j] += pen;
    const int nn = (int)d, nrhs = (int)C;
    int info = 0;
    dposv_("L", &nn, &nrhs, c->G, &nn, c->W, &nn, &info);
    TESS_REQUIRE(info == 0, TESS_ERR_INTERNAL, "identity decoding: dposv failed (info %d, lambda %g)",
                 info, lambda);
    return TESS_OK;
}

/* Correct predictions of the fitted decoder on the rows of fold f. */
static int64_t correct(const fit_ctx *c, int64_t f) {
    int64_t ok = 0;
    for (int64_t i = 0; i < c->n; i++) {
        if (c->fold[i] != f) continue;
        int64_t best = 0;
        double top = -INFINITY;
        for (int64_t k = 0; k < c->C; k++) {
            double s = c->my[k];
            for (int64_t j = 0; j < c->d; j++) s += (c->X[i * c->d + j] - c->mx[j]) * c->W[k * c->d + j];
            if (s > top) top = s, best = k;
        }
        ok += best == c->label[i];
    }
    return ok;
}

tess_status calm_lin_identity(const float *X, int64_t n, int64_t d, const int64_t *label,
                              int64_t classes, const int64_t *fold, int64_t folds,
                              calm_lin_result *r) {
    TESS_REQUIRE(classes >= 2 && folds >= 3 && n > 0 && d > 0, TESS_ERR_ARG,
                 "identity decoding needs 2 or more classes and 3 or more folds (got %lld, %lld)",
                 (long long)classes, (long long)folds);
    for (int64_t i = 0; i < n; i++)
        TESS_REQUIRE(label[i] >= 0 && label[i] < classes && fold[i] >= 0 && fold[i] < folds,
                     TESS_ERR_ARG, "identity decoding: row %lld has label %lld, fold %lld",
                     (long long)i, (long long)label[i], (long long)fold[i]);
    fit_ctx c = {.X = X, .n = n, .d = d, .C = classes, .label = label, .fold = fold};
    c.mx = malloc(sizeof(double) * (size_t)(d + classes + d * d + d * classes));
    TESS_REQUIRE(c.mx, TESS_ERR_MEM, "out of memory for identity decoding");
    c.my = c.mx + d, c.G = c.my + classes, c.W = c.G + d * d;
    *r = (calm_lin_result){.lambda_min = INFINITY, .lambda_max = 0.0};
    tess_status st = TESS_OK;
    int64_t ok = 0;
    for (int64_t f = 0; st == TESS_OK && f < folds; f++) {
        int64_t best = -1, best_ok = -1;
        for (int64_t l = 0; st == TESS_OK && l < NLAMBDA; l++) {
            int64_t inner = 0;
            for (int64_t h = 0; st == TESS_OK && h < folds; h++) {
                if (h == f) continue;
                st = fit(&c, f, h, LAMBDAS[l]);
                if (st == TESS_OK) inner += correct(&c, h);
            }
            if (inner > best_ok) best_ok = inner, best = l;
        }
        if (st == TESS_OK) st = fit(&c, f, -1, LAMBDAS[best]);
        if (st == TESS_OK) ok += correct(&c, f);
        if (st == TESS_OK)
            r->lambda_min = fmin(r->lambda_min, LAMBDAS[best]), r->lambda_max = fmax(r->lambda_max, LAMBDAS[best]);
    }
    double chance = 0.0;
    for (int64_t k = 0; k < classes; k++) {
        int64_t m = 0;
        for (int64_t i = 0; i < n; i++) m += label[i] == k;
        chance += pow((double)m / (double)n, 2);
    }
    r->accuracy = (double)ok / (double)n, r->chance = chance;
    free(c.mx);
    TESS_CHECK(st);
    return TESS_OK;
}

tess_status calm_lin_pca(const tess_group *g, const float *X, int64_t n, int64_t d, double *ratio) {
    const int64_t k = n < d ? n : d;
    double *c = NULL, *s = malloc(sizeof(double) * (size_t)k);
    tess_status st = s ? TESS_OK : TESS_ERR_MEM;
    if (st == TESS_OK && g->rank == 0) { /* the centred rows, read on rank 0 only */
        c = malloc(sizeof(double) * (size_t)(n * d));
        st = c ? TESS_OK : TESS_ERR_MEM;
        for (int64_t j = 0; st == TESS_OK && j < d; j++) {
            double m = 0.0;
            for (int64_t i = 0; i < n; i++) m += X[i * d + j];
            m /= (double)n;
            for (int64_t i = 0; i < n; i++) c[i * d + j] = X[i * d + j] - m;
        }
    }
    st = tess_par_agree(g, st);
    tess_scal_grid *grid = NULL;
    tess_scal_matrix *A = NULL;
    enum { BLOCK = 16 };
    if (st == TESS_OK) st = tess_scal_grid_create(g, 0, 0, &grid);
    if (st == TESS_OK) st = tess_scal_matrix_create(grid, TESS_SCAL_F64, n, d, BLOCK, BLOCK, &A);
    if (st == TESS_OK) st = tess_scal_matrix_distribute(A, c, TESS_SCAL_ROW_MAJOR);
    if (st == TESS_OK) st = tess_scal_gesvd(s, NULL, NULL, A);
    tess_scal_matrix_destroy(&A);
    tess_scal_grid_destroy(&grid);
    double total = 0.0;
    for (int64_t i = 0; st == TESS_OK && i < k; i++) total += s[i] * s[i];
    for (int64_t i = 0; st == TESS_OK && i < k; i++) ratio[i] = total > 0.0 ? s[i] * s[i] / total : NAN;
    free(c), free(s);
    TESS_CHECK(st);
    TESS_REQUIRE(total > 0.0, TESS_ERR_DATA, "PCA of a %lld x %lld matrix whose centred rows are all zero",
                 (long long)n, (long long)d);
    return TESS_OK;
}

/* var.c - the population ridge VAR baseline (var.h). */
#include "var.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "par/coll.h" /* tess_par_bcast_bytes */

static const double LAMBDAS[] = {1e-2, 1e-1, 1.0, 10.0, 100.0, 1e3, 1e4, 1e5, 1e6};
enum { NLAMBDA = sizeof LAMBDAS / sizeof LAMBDAS[0], BLOCK = 64 };

/* Start of the validation slice of training span sp (as ar.c). */
static int64_t val_start(const calm_span *sp, double val_fraction) {
    return sp->t0 + (int64_t)floor((1.0 - val_fraction) * (double)(sp->t1 - sp->t0));
}

/* Last context frames of the samples of s's training spans: part 0 the fit samples (targets
 * before the validation slice), 1 the validation samples (targets inside it), 2 all; t (may be
 * NULL to count) receives them, the count is returned. */
static int64_t samples(const calm_session *s, int64_t lags, int64_t H, double val_fraction,
                       int part, int64_t *t) {
    int64_t n = 0;
    for (int64_t i = 0; i < s->nspans; i++) {
        const calm_span *sp = &s->spans[i];
        if (!sp->train) continue;
        const int64_t v0 = val_start(sp, val_fraction);
        const int64_t lo = part == 1 ? v0 - 1 : sp->t0 + lags - 1, hi = part == 0 ? v0 - H : sp->t1 - H;
        for (int64_t u = lo; u < hi; u++) {
            if (t) t[n] = u;
            n++;
        }
    }
    return n;
}

/* Features (targets when `targets`) of the samples t[0..q) of s as a distributed (q, N lags)
 * (or (q, H N)) matrix; the global rows are built on rank 0 of the grid only. Collective. */
static tess_status rows(const calm_var *v, const calm_session *s, const int64_t *t, int64_t q,
                        bool targets, tess_scal_matrix **out) {
    const int64_t N = s->N, cols = targets ? v->H * N : N * v->lags;
    TESS_CHECK(tess_scal_matrix_create(v->grid, TESS_SCAL_F64, q, cols, BLOCK, BLOCK, out));
    double *g = NULL;
    if (v->grid->rank == 0) {
        g = malloc(sizeof(double) * (size_t)(q * cols > 0 ? q * cols : 1));
        for (int64_t r = 0; g && r < q; r++) {
            const float *x = s->x;
            double *row = g + r * cols;
            for (int64_t m = 0; m < N; m++) {
                const double last = x[t[r] * N + m];
                if (targets) {
                    for (int64_t h = 0; h < v->H; h++) row[h * N + m] = x[(t[r] + 1 + h) * N + m] - last;
                    continue;
                }
                for (int64_t i = 0; i + 1 < v->lags; i++)
                    row[m * v->lags + i] = x[(t[r] - v->lags + 1 + i) * N + m] - last;
                row[m * v->lags + v->lags - 1] = last;
            }
        }
    }
    tess_status st = tess_par_agree(v->grid->group, v->grid->rank == 0 && !g ? TESS_ERR_MEM : TESS_OK);
    if (st == TESS_OK) st = tess_scal_matrix_distribute(*out, g, TESS_SCAL_ROW_MAJOR);
    free(g);
    if (st != TESS_OK) tess_scal_matrix_destroy(out);
    TESS_REQUIRE(st == TESS_OK, st, "building the VAR's %s matrix", targets ? "target" : "feature");
    return TESS_OK;
}

/* C = op(A) op(B) (op = transpose when t*), created. Collective. */
static tess_status mul(const calm_var *v, const tess_scal_matrix *A, bool ta,
                       const tess_scal_matrix *B, bool tb, tess_scal_matrix **C) {
    TESS_CHECK(tess_scal_matrix_create(v->grid, TESS_SCAL_F64, ta ? A->n : A->m, tb ? B->m : B->n,
                                       BLOCK, BLOCK, C));
    tess_status st = tess_scal_gemm(*C, A, B, ta, tb, 1.0, 0.0);
    if (st != TESS_OK) tess_scal_matrix_destroy(C);
    TESS_CHECK(st);
    return TESS_OK;
}

/* The ridge system of features F and targets Y: dual G = F F^T, R = Y (n < features), primal
 * G = F^T F, R = F^T Y; X = (G + lambda I)^-1 R is then alpha or W. Created. Collective. */
static tess_status normal_system(const calm_var *v, const tess_scal_matrix *F, const tess_scal_matrix *Y,
                          tess_scal_matrix **G, tess_scal_matrix **R) {
    TESS_CHECK(mul(v, F, !v->dual, F, v->dual, G));
    tess_status st = v->dual ? tess_scal_matrix_create(v->grid, TESS_SCAL_F64, Y->m, Y->n, BLOCK,
                                                       BLOCK, R)
                             : mul(v, F, true, Y, false, R);
    if (st == TESS_OK && v->dual && v->grid->in_grid)
        memcpy((*R)->data, Y->data, sizeof(double) * (size_t)(Y->lld * Y->nloc));
    if (st != TESS_OK) tess_scal_matrix_destroy(G);
    TESS_CHECK(st);
    return TESS_OK;
}

/* X = (G + lambda I)^-1 Y with G (k, k), Y (k, c) unchanged; X created. Collective. */
static tess_status ridge_solve(const calm_var *v, const tess_scal_matrix *G,
                               const tess_scal_matrix *Y, double lambda, tess_scal_matrix **X) {
    tess_scal_matrix *A = NULL;
    tess_status st = tess_scal_matrix_create(v->grid, TESS_SCAL_F64, G->m, G->n, BLOCK, BLOCK, &A);
    if (st == TESS_OK) st = tess_scal_matrix_create(v->grid, TESS_SCAL_F64, Y->m, Y->n, BLOCK, BLOCK, X);
    if (st == TESS_OK && v->grid->in_grid) {
        memcpy(A->data, G->data, sizeof(double) * (size_t)(G->lld * G->nloc));
        memcpy((*X)->data, Y->data, sizeof(double) * (size_t)(Y->lld * Y->nloc));
        for (int64_t lj = 0; lj < A->nloc; lj++)
            for (int64_t li = 0; li < A->mloc; li++) {
                int64_t i, j;
                tess_scal_local_to_global(A, li, lj, &i, &j);
                if (i == j) ((double *)A->data)[li + lj * A->lld] += lambda;
            }
    }
    if (st == TESS_OK) st = tess_scal_posv(*X, A);
    tess_scal_matrix_destroy(&A);
    if (st != TESS_OK) tess_scal_matrix_destroy(X);
    TESS_REQUIRE(st == TESS_OK, st, "VAR ridge solve (lambda %g)", lambda);
    return TESS_OK;
}

/* P = K X, created and collected into p (rows of K, cols of X) row-major on rank 0. */
static tess_status apply(const calm_var *v, const tess_scal_matrix *K, const tess_scal_matrix *X,
                         double *p) {
    tess_scal_matrix *P = NULL;
    tess_status st = tess_scal_matrix_create(v->grid, TESS_SCAL_F64, K->m, X->n, BLOCK, BLOCK, &P);
    if (st == TESS_OK) st = tess_scal_gemm(P, K, X, false, false, 1.0, 0.0);
    if (st == TESS_OK) st = tess_scal_matrix_collect(P, p, TESS_SCAL_ROW_MAJOR);
    tess_scal_matrix_destroy(&P);
    TESS_CHECK(st);
    return TESS_OK;
}

/* P = Kq X on rank 0 (row-major), Kq = Fq F^T (dual) or Fq (primal). Collective. */
static tess_status predict(const calm_var *v, const tess_scal_matrix *Fq, const tess_scal_matrix *F,
                           const tess_scal_matrix *X, double *p) {
    tess_scal_matrix *K = NULL;
    if (v->dual) TESS_CHECK(mul(v, Fq, false, F, true, &K));
    tess_status st = apply(v, v->dual ? K : Fq, X, p);
    tess_scal_matrix_destroy(&K);
    TESS_CHECK(st);
    return TESS_OK;
}

tess_status calm_var_fit(calm_var *v, const calm_session *s, int64_t lags, int64_t H,
                         double val_fraction, calm_var_form form, const tess_group *g) {
    *v = (calm_var){.lags = lags, .H = H, .N = s->N};
    const int64_t nf = samples(s, lags, H, val_fraction, 0, NULL);
    const int64_t nv = samples(s, lags, H, val_fraction, 1, NULL);
    v->n = samples(s, lags, H, val_fraction, 2, NULL);
    v->dual = form == CALM_VAR_AUTO ? v->n < s->N * lags : form == CALM_VAR_DUAL;
    TESS_REQUIRE(nf > 0 && nv > 0, TESS_ERR_DATA,
                 "'%s': no training sample for the population VAR (%lld lags, %lld frames ahead)",
                 s->name, (long long)lags, (long long)H);
    int64_t *t = malloc(sizeof(int64_t) * (size_t)(nf + nv + v->n));
    double *pv = malloc(sizeof(double) * (size_t)(nv * H * s->N)), loss[NLAMBDA] = {0};
    double *yv = malloc(sizeof(double) * (size_t)(nv * H * s->N));
    tess_status st = tess_par_agree(g, t && pv && yv ? TESS_OK : TESS_ERR_MEM);
    if (st != TESS_OK) free(t), free(pv), free(yv);
    TESS_REQUIRE(st == TESS_OK, st, "out of memory for the population VAR of '%s'", s->name);
    samples(s, lags, H, val_fraction, 0, t);
    samples(s, lags, H, val_fraction, 1, t + nf);
    samples(s, lags, H, val_fraction, 2, t + nf + nv);
    tess_scal_matrix *Ff = NULL, *Yf = NULL, *Fv = NULL, *G = NULL, *R = NULL, *X = NULL, *Y = NULL;
    st = tess_scal_grid_create(g, 0, 0, &v->grid);
    if (st == TESS_OK) st = rows(v, s, t, nf, false, &Ff);
    if (st == TESS_OK) st = rows(v, s, t, nf, true, &Yf);
    if (st == TESS_OK) st = rows(v, s, t + nf, nv, false, &Fv);
    if (st == TESS_OK) st = normal_system(v, Ff, Yf, &G, &R);
    /* the validation targets, row-major on rank 0 */
    for (int64_t r = 0; st == TESS_OK && v->grid->rank == 0 && r < nv; r++)
        for (int64_t h = 0; h < H; h++)
            for (int64_t m = 0; m < s->N; m++)
                yv[(r * H + h) * s->N + m] = s->x[(t[nf + r] + 1 + h) * s->N + m] - s->x[t[nf + r] * s->N + m];
    for (int64_t l = 0; st == TESS_OK && l < NLAMBDA; l++) {
        st = ridge_solve(v, G, R, LAMBDAS[l], &X);
        if (st == TESS_OK) st = predict(v, Fv, Ff, X, pv);
        tess_scal_matrix_destroy(&X);
        for (int64_t i = 0; st == TESS_OK && v->grid->rank == 0 && i < nv * H * s->N; i++)
            loss[l] += (pv[i] - yv[i]) * (pv[i] - yv[i]);
    }
    if (st == TESS_OK) st = tess_par_bcast_bytes(g, loss, sizeof loss, 0);
    int64_t best = 0;
    for (int64_t l = 1; l < NLAMBDA; l++) best = loss[l] < loss[best] ? l : best;
    v->lambda = LAMBDAS[best];
    tess_scal_matrix_destroy(&Ff), tess_scal_matrix_destroy(&Yf), tess_scal_matrix_destroy(&Fv);
    tess_scal_matrix_destroy(&G), tess_scal_matrix_destroy(&R);
    /* refit on every training sample; the features are kept for the dual form's predictions */
    if (st == TESS_OK) st = rows(v, s, t + nf + nv, v->n, false, &v->F);
    if (st == TESS_OK) st = rows(v, s, t + nf + nv, v->n, true, &Y);
    if (st == TESS_OK) st = normal_system(v, v->F, Y, &G, &R);
    if (st == TESS_OK) st = ridge_solve(v, G, R, v->lambda, &v->X);
    tess_scal_matrix_destroy(&G), tess_scal_matrix_destroy(&R), tess_scal_matrix_destroy(&Y);
    if (st == TESS_OK && !v->dual) tess_scal_matrix_destroy(&v->F);
    free(t), free(pv), free(yv);
    if (st != TESS_OK) calm_var_free(v);
    TESS_REQUIRE(st == TESS_OK, st, "fitting the population VAR of '%s'", s->name);
    return TESS_OK;
}

tess_status calm_var_predict(const calm_var *v, const calm_session *s, const int64_t *tl,
                             int64_t q, double *pred) {
    tess_scal_matrix *Fq = NULL;
    tess_status st = rows(v, s, tl, q, false, &Fq);
    if (st == TESS_OK) st = predict(v, Fq, v->F, v->X, pred);
    tess_scal_matrix_destroy(&Fq);
    for (int64_t r = 0; st == TESS_OK && v->grid->rank == 0 && r < q; r++) /* back from changes */
        for (int64_t h = 0; h < v->H; h++)
            for (int64_t m = 0; m < v->N; m++) pred[(r * v->H + h) * v->N + m] += s->x[tl[r] * v->N + m];
    TESS_REQUIRE(st == TESS_OK, st, "population VAR forecast of '%s'", s->name);
    return TESS_OK;
}

void calm_var_free(calm_var *v) {
    tess_scal_matrix_destroy(&v->F);
    tess_scal_matrix_destroy(&v->X);
    tess_scal_grid_destroy(&v->grid);
    *v = (calm_var){0};
}

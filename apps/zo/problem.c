/* problem.c - test problems and their exact minimisers (see problem.h). */
#include "problem.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "par/coll.h"      /* tess_par_bcast_bytes */
#include "par/mesh.h"      /* tess_group_* */
#include "par/scalapack.h" /* tess_scal_* */

enum { BLOCK = 32 }; /* ScaLAPACK block size of the dense solves */

/* Counters of the problem's draws (purpose DATA, n below): one per independent quantity. */
enum { CTR_XSTAR = 1, CTR_SIGNS = 2, CTR_A = 3, CTR_Y = 4, CTR_G = 5, CTR_C = 6 };

static uint64_t ctr(int n) { return tess_rng_ctr(TESS_RNG_PURPOSE_DATA, (uint64_t)n); }

static double dot(const double *a, const double *b, int64_t n) {
    double s = 0.0;
    for (int64_t j = 0; j < n; j++) s += a[j] * b[j];
    return s;
}

static double quad_lambda(const zoapp_problem_config *c, int64_t j) {
    if (c->d == 1) return c->mu;
    return c->mu * pow(c->L / c->mu, (double)j / (double)(c->d - 1));
}

/* ---- x* of the dense problems through the ScaLAPACK bridge --------------------------------- */

/* Fill the local blocks of M (m x n global) from the replicated row-major g (m, n), with row i
 * scaled by rs[i] (NULL: 1). */
static void fill_local(tess_scal_matrix *M, const double *g, const double *rs) {
    double *data = M->data;
    for (int64_t lj = 0; lj < M->nloc; lj++)
        for (int64_t li = 0; li < M->mloc; li++) {
            int64_t i, j;
            tess_scal_local_to_global(M, li, lj, &i, &j);
            data[li + lj * M->lld] = g[i * M->n + j] * (rs ? rs[i] : 1.0);
        }
}

/* Add lambda to the diagonal of the square distributed M. */
static void add_diag(tess_scal_matrix *M, double lambda) {
    double *data = M->data;
    for (int64_t lj = 0; lj < M->nloc; lj++)
        for (int64_t li = 0; li < M->mloc; li++) {
            int64_t i, j;
            tess_scal_local_to_global(M, li, lj, &i, &j);
            if (i == j) data[li + lj * M->lld] += lambda;
        }
}

/* Solve (A^T diag(rs^2) A / n + lambda I) s = r on the grid g; A (nrows, d) replicated, r (d) and
 * the solution s (d) replicated on every rank of all (collected on rank 0, broadcast). */
static tess_status dense_solve(tess_scal_grid *g, const tess_group *all, const double *A,
                               const double *rs, int64_t nrows, int64_t d, double lambda,
                               const double *r, double *s) {
    tess_scal_matrix *dA = NULL, *dH = NULL, *dR = NULL;
    tess_status st = tess_scal_matrix_create(g, TESS_SCAL_F64, nrows, d, BLOCK, BLOCK, &dA);
    if (st == TESS_OK) st = tess_scal_matrix_create(g, TESS_SCAL_F64, d, d, BLOCK, BLOCK, &dH);
    if (st == TESS_OK) st = tess_scal_matrix_create(g, TESS_SCAL_F64, d, 1, BLOCK, BLOCK, &dR);
    if (st == TESS_OK) {
        if (g->in_grid) {
            fill_local(dA, A, rs);
            fill_local(dR, r, NULL);
        }
        st = tess_scal_gemm(dH, dA, dA, true, false, 1.0 / (double)nrows, 0.0);
    }
    if (st == TESS_OK) {
        if (g->in_grid) add_diag(dH, lambda);
        st = tess_scal_posv(dR, dH);
    }
    if (st == TESS_OK) st = tess_scal_matrix_collect(dR, s, TESS_SCAL_ROW_MAJOR);
    if (st == TESS_OK) st = tess_par_bcast_bytes(all, s, (size_t)d * sizeof *s, 0);
    tess_scal_matrix_destroy(&dA);
    tess_scal_matrix_destroy(&dH);
    tess_scal_matrix_destroy(&dR);
    TESS_REQUIRE(st == TESS_OK, st, "dense solve of order %lld (A^T W A/%lld + %g I)",
                 (long long)d, (long long)nrows, lambda);
    return TESS_OK;
}

static void data_rows(zoapp_problem *p, double *xtrue) {
    const zoapp_problem_config *c = &p->cfg;
    const double sd = 1.0 / sqrt((double)c->d);
    for (int64_t i = 0; i < c->nstates * c->d; i++)
        p->A[i] = tess_rng_normal(c->key, ctr(CTR_A), (uint64_t)i, 0.0, sd);
    const double xs = c->kind == ZOAPP_PROB_LOGISTIC ? 1.0 : sd;
    for (int64_t j = 0; j < c->d; j++)
        xtrue[j] = tess_rng_normal(c->key, ctr(CTR_XSTAR), (uint64_t)j, 0.0, xs);
    for (int64_t z = 0; z < c->nstates; z++) {
        double m = dot(p->A + z * c->d, xtrue, c->d) +
                   tess_rng_normal(c->key, ctr(CTR_Y), (uint64_t)z, 0.0, c->sigma);
        p->y[z] = c->kind == ZOAPP_PROB_LOGISTIC ? (m >= 0.0 ? 1.0 : -1.0) : m;
    }
    double amax = 0.0;
    for (int64_t z = 0; z < c->nstates; z++) {
        double a2 = dot(p->A + z * c->d, p->A + z * c->d, c->d);
        amax = a2 > amax ? a2 : amax;
    }
    p->smooth_L = (c->kind == ZOAPP_PROB_LOGISTIC ? amax / 4.0 : amax) + c->lambda;
    p->strong_mu = c->lambda;
}

static tess_status ridge_xstar(zoapp_problem *p, tess_scal_grid *g, const tess_group *all) {
    const zoapp_problem_config *c = &p->cfg;
    const int64_t d = c->d, n = c->nstates;
    double *r = p->work; /* (d) = A^T y / n */
    for (int64_t j = 0; j < d; j++) r[j] = 0.0;
    for (int64_t z = 0; z < n; z++)
        for (int64_t j = 0; j < d; j++) r[j] += p->A[z * d + j] * p->y[z] / (double)n;
    TESS_CHECK(dense_solve(g, all, p->A, NULL, n, d, c->lambda, r, p->xstar));
    /* residual ||H x* - r|| / ||r||, H x* = A^T (A x*)/n + lambda x* */
    double num = 0.0, den = dot(r, r, d);
    double *hx = calloc((size_t)(d > 0 ? d : 1), sizeof *hx);
    TESS_REQUIRE(hx, TESS_ERR_MEM, "ridge residual: out of memory");
    for (int64_t z = 0; z < n; z++) {
        double m = dot(p->A + z * d, p->xstar, d);
        for (int64_t j = 0; j < d; j++) hx[j] += p->A[z * d + j] * m / (double)n;
    }
    for (int64_t j = 0; j < d; j++) {
        double e = hx[j] + c->lambda * p->xstar[j] - r[j];
        num += e * e;
    }
    free(hx);
    p->check = sqrt(num / (den > 0.0 ? den : 1.0));
    return TESS_OK;
}

static double sigmoid(double m) { return m >= 0.0 ? 1.0 / (1.0 + exp(-m)) : exp(m) / (1.0 + exp(m)); }
static double log1pexp(double m) { return m > 0.0 ? m + log1p(exp(-m)) : log1p(exp(m)); }

/* Logistic f and its gradient (d) at x. */
static double logistic_fg(const zoapp_problem *p, const double *x, double *grad) {
    const zoapp_problem_config *c = &p->cfg;
    const int64_t d = c->d, n = c->nstates;
    double f = 0.5 * c->lambda * dot(x, x, d);
    if (grad)
        for (int64_t j = 0; j < d; j++) grad[j] = c->lambda * x[j];
    for (int64_t z = 0; z < n; z++) {
        const double *a = p->A + z * d;
        double m = p->y[z] * dot(a, x, d);
        f += log1pexp(-m) / (double)n;
        if (grad) {
            double s = -p->y[z] * sigmoid(-m) / (double)n;
            for (int64_t j = 0; j < d; j++) grad[j] += s * a[j];
        }
    }
    return f;
}

static tess_status logistic_xstar(zoapp_problem *p, tess_scal_grid *g, const tess_group *all) {
    const zoapp_problem_config *c = &p->cfg;
    const int64_t d = c->d, n = c->nstates;
    double *x = p->xstar;
    double *buf = calloc((size_t)(3 * d + n), sizeof *buf);
    TESS_REQUIRE(buf, TESS_ERR_MEM, "logistic Newton: out of memory");
    double *grad = buf, *step = buf + d, *trial = buf + 2 * d, *rs = buf + 3 * d;
    for (int64_t j = 0; j < d; j++) x[j] = 0.0;
    double f = logistic_fg(p, x, grad), gnorm = sqrt(dot(grad, grad, d));
    tess_status st = TESS_OK;
    int it = 0;
    for (; it < 50 && gnorm > 1e-12; it++) {
        for (int64_t z = 0; z < n; z++) {
            double s = sigmoid(dot(p->A + z * d, x, d));
            rs[z] = sqrt(s * (1.0 - s));
        }
        for (int64_t j = 0; j < d; j++) trial[j] = -grad[j];
        st = dense_solve(g, all, p->A, rs, n, d, c->lambda, trial, step);
        if (st != TESS_OK) break;
        double slope = dot(grad, step, d), t = 1.0, ft = f;
        for (int ls = 0; ls < 60; ls++, t *= 0.5) {
            for (int64_t j = 0; j < d; j++) trial[j] = x[j] + t * step[j];
            ft = logistic_fg(p, trial, NULL);
            if (ft <= f + 1e-4 * t * slope) break;
        }
        if (ft > f) break; /* no decrease left at machine precision */
        memcpy(x, trial, (size_t)d * sizeof *x);
        f = logistic_fg(p, x, grad);
        double gprev = gnorm;
        gnorm = sqrt(dot(grad, grad, d));
        if (gnorm <= 1e-10 && gnorm > 0.5 * gprev) { /* rounding floor reached: stop */
            it++;
            break;
        }
    }
    free(buf);
    TESS_REQUIRE(st == TESS_OK, st, "logistic regression: Newton step %d", it);
    p->newton_steps = it;
    p->check = gnorm;
    return TESS_OK;
}

void zoapp_problem_l1_slopes(const zoapp_problem *p, int64_t i, double y, double *hm, double *hp) {
    const zoapp_problem_config *c = &p->cfg;
    int64_t less = 0, equal = 0, n = c->nstates;
    for (int64_t z = 0; z < n; z++) {
        double v = p->c[z * c->d + i];
        less += v < y;
        equal += v == y;
    }
    int64_t greater = n - less - equal;
    *hm = c->mu * y + (double)(less - (equal + greater)) / (double)n;
    *hp = c->mu * y + (double)((less + equal) - greater) / (double)n;
}

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static tess_status l1_xstar(zoapp_problem *p, tess_scal_grid *g, const tess_group *all) {
    const zoapp_problem_config *c = &p->cfg;
    const int64_t d = c->d, n = c->nstates;
    const double sd = 1.0 / sqrt((double)d);
    for (int64_t i = 0; i < d; i++) {
        double m = tess_rng_normal(c->key, ctr(CTR_XSTAR), (uint64_t)i, 0.0, sd);
        for (int64_t z = 0; z < n; z++)
            p->c[z * d + i] = m + tess_rng_normal(c->key, ctr(CTR_C), (uint64_t)(z * d + i), 0.0,
                                                  c->sigma * sd);
    }
    /* U: left singular vectors of a Gaussian matrix, generated straight into the grid blocks */
    tess_scal_matrix *dG = NULL, *dU = NULL;
    double *s = malloc((size_t)d * sizeof *s);
    TESS_REQUIRE(s, TESS_ERR_MEM, "l1 rotation: out of memory");
    tess_status st = tess_scal_matrix_create(g, TESS_SCAL_F64, d, d, BLOCK, BLOCK, &dG);
    if (st == TESS_OK) st = tess_scal_matrix_create(g, TESS_SCAL_F64, d, d, BLOCK, BLOCK, &dU);
    if (st == TESS_OK && g->in_grid) {
        double *data = dG->data;
        for (int64_t lj = 0; lj < dG->nloc; lj++)
            for (int64_t li = 0; li < dG->mloc; li++) {
                int64_t i, j;
                tess_scal_local_to_global(dG, li, lj, &i, &j);
                data[li + lj * dG->lld] =
                    tess_rng_normal(c->key, ctr(CTR_G), (uint64_t)(i * d + j), 0.0, 1.0);
            }
    }
    if (st == TESS_OK) st = tess_scal_gesvd(s, dU, NULL, dG);
    if (st == TESS_OK) st = tess_scal_matrix_collect(dU, p->U, TESS_SCAL_ROW_MAJOR);
    if (st == TESS_OK) st = tess_par_bcast_bytes(all, p->U, (size_t)(d * d) * sizeof *p->U, 0);
    tess_scal_matrix_destroy(&dG);
    tess_scal_matrix_destroy(&dU);
    free(s);
    TESS_REQUIRE(st == TESS_OK, st, "l1 rotation: SVD of a %lld x %lld Gaussian matrix",
                 (long long)d, (long long)d);
    for (int64_t j = 0; j < d; j++) { /* fix the sign ambiguity: column sums >= 0 */
        double sum = 0.0;
        for (int64_t i = 0; i < d; i++) sum += p->U[i * d + j];
        if (sum < 0.0)
            for (int64_t i = 0; i < d; i++) p->U[i * d + j] = -p->U[i * d + j];
    }
    /* y*_i: the zero of the monotone h(y) = mu y + (#{c < y} - #{c > y})/n, at a kink or between */
    double *col = malloc((size_t)n * sizeof *col), *ys = malloc((size_t)d * sizeof *ys);
    TESS_REQUIRE(col && ys, TESS_ERR_MEM, "l1 x*: out of memory");
    for (int64_t i = 0; i < d; i++) {
        for (int64_t z = 0; z < n; z++) col[z] = p->c[z * d + i];
        qsort(col, (size_t)n, sizeof *col, cmp_double);
        double best = 0.0;
        for (int64_t k = 0; k <= n; k++) { /* open interval with k values below */
            double yk = (double)(n - 2 * k) / ((double)n * c->mu);
            if ((k == 0 || col[k - 1] < yk) && (k == n || yk < col[k])) best = yk;
        }
        for (int64_t k = 0; k < n; k++) { /* kinks */
            double hm, hp;
            zoapp_problem_l1_slopes(p, i, col[k], &hm, &hp);
            if (hm <= 0.0 && hp >= 0.0) best = col[k];
        }
        ys[i] = best;
    }
    for (int64_t r = 0; r < d; r++) p->xstar[r] = dot(p->U + r * d, ys, d);
    free(col);
    free(ys);
    p->smooth_L = 0.0;
    p->strong_mu = c->mu;
    return TESS_OK;
}

/* ---- create / free ------------------------------------------------------------------------- */

static tess_status check_config(const zoapp_problem_config *c, int64_t first, int64_t n) {
    TESS_REQUIRE(c->d >= 1, TESS_ERR_CONFIG, "problem.dim = %lld must be >= 1", (long long)c->d);
    TESS_REQUIRE(c->nstates >= 1, TESS_ERR_CONFIG, "problem.states = %lld must be >= 1",
                 (long long)c->nstates);
    TESS_REQUIRE(c->kind != ZOAPP_PROB_QUADRATIC || c->nstates % 2 == 0, TESS_ERR_CONFIG,
                 "problem.states = %lld must be even for the quadratic (antithetic noise pairs)",
                 (long long)c->nstates);
    TESS_REQUIRE(c->mu > 0.0 && c->L >= c->mu, TESS_ERR_CONFIG,
                 "problem.mu = %g, problem.L = %g: need 0 < mu <= L", c->mu, c->L);
    TESS_REQUIRE(c->sigma >= 0.0, TESS_ERR_CONFIG, "problem.sigma = %g must be >= 0", c->sigma);
    TESS_REQUIRE((c->kind != ZOAPP_PROB_RIDGE && c->kind != ZOAPP_PROB_LOGISTIC) || c->lambda > 0.0,
                 TESS_ERR_CONFIG, "problem.lambda = %g must be > 0 (strong convexity)", c->lambda);
    TESS_REQUIRE(c->kind == ZOAPP_PROB_QUADRATIC || (first == 0 && n == c->d), TESS_ERR_CONFIG,
                 "only the quadratic problem can shard x over coordinates (dist.shard > 1)");
    return TESS_OK;
}

static tess_status build(zoapp_problem *p, const tess_group *all) {
    const zoapp_problem_config *c = &p->cfg;
    const int64_t d = c->d, ns = c->nstates, n = p->n;
    p->xstar = calloc((size_t)(n > 0 ? n : 1), sizeof *p->xstar);
    p->work = calloc((size_t)(d > ns ? d : ns), sizeof *p->work);
    TESS_REQUIRE(p->xstar && p->work, TESS_ERR_MEM, "problem: out of memory");
    if (c->kind == ZOAPP_PROB_QUADRATIC) {
        p->lam = malloc((size_t)(n > 0 ? n : 1) * sizeof *p->lam);
        p->bbar = malloc((size_t)(n > 0 ? n : 1) * sizeof *p->bbar);
        TESS_REQUIRE(p->lam && p->bbar, TESS_ERR_MEM, "quadratic: out of memory for d = %lld",
                     (long long)d);
        const double sd = 1.0 / sqrt((double)d);
        double fstar = 0.0, x2 = 0.0;
        for (int64_t j = 0; j < d; j++) { /* every rank sums all d terms: f* needs no reduction */
            double xs = tess_rng_normal(c->key, ctr(CTR_XSTAR), (uint64_t)j, 0.0, sd);
            double lam = quad_lambda(c, j);
            fstar -= 0.5 * lam * xs * xs;
            x2 += xs * xs;
            if (j >= p->first && j < p->first + n) {
                p->lam[j - p->first] = lam;
                p->bbar[j - p->first] = lam * xs;
                p->xstar[j - p->first] = xs;
            }
        }
        p->fstar = fstar;
        p->xstar_norm2 = x2;
        p->smooth_L = c->L;
        p->strong_mu = c->mu;
        return TESS_OK;
    }
    tess_scal_grid *g = NULL;
    tess_status st = tess_scal_grid_create(all, 0, 0, &g);
    if (st == TESS_OK) {
        if (c->kind == ZOAPP_PROB_L1) {
            p->U = malloc((size_t)(d * d) * sizeof *p->U);
            p->c = malloc((size_t)(ns * d) * sizeof *p->c);
            st = p->U && p->c ? l1_xstar(p, g, all) : TESS_ERR_MEM;
        } else {
            p->A = malloc((size_t)(ns * d) * sizeof *p->A);
            p->y = malloc((size_t)ns * sizeof *p->y);
            double *xtrue = malloc((size_t)d * sizeof *xtrue);
            if (p->A && p->y && xtrue) {
                data_rows(p, xtrue);
                st = c->kind == ZOAPP_PROB_RIDGE ? ridge_xstar(p, g, all) : logistic_xstar(p, g, all);
            } else {
                st = TESS_ERR_MEM;
            }
            free(xtrue);
        }
    }
    tess_scal_grid_destroy(&g);
    TESS_REQUIRE(st == TESS_OK, st, "problem %d (d = %lld): computing x*", (int)c->kind,
                 (long long)d);
    p->xstar_norm2 = dot(p->xstar, p->xstar, d);
    p->fstar = zoapp_problem_f(p, p->xstar);
    return TESS_OK;
}

tess_status zoapp_problem_create(zoapp_problem *p, const zoapp_problem_config *cfg, int64_t first,
                                 int64_t n, const tess_group *g) {
    TESS_REQUIRE(p && cfg, TESS_ERR_ARG, "NULL argument");
    *p = (zoapp_problem){.cfg = *cfg, .first = first, .n = n};
    TESS_CHECK(check_config(cfg, first, n));
    tess_status st = build(p, g);
    if (st != TESS_OK) {
        zoapp_problem_free(p);
        return tess_error_push(st, __FILE__, __LINE__, __func__, "building the problem");
    }
    return TESS_OK;
}

void zoapp_problem_free(zoapp_problem *p) {
    if (!p) return;
    free(p->lam);
    free(p->bbar);
    free(p->A);
    free(p->y);
    free(p->U);
    free(p->c);
    free(p->work);
    free(p->xstar);
    *p = (zoapp_problem){0};
}

/* ---- F, grad, f ---------------------------------------------------------------------------- */

/* Noise pattern of state z: sign s and pattern index zp (antithetic pairs). */
static void noise_of(const zoapp_problem_config *c, int64_t z, double *s, uint64_t *zp) {
    int64_t half = c->nstates / 2;
    *s = z < half ? 1.0 : -1.0;
    *zp = (uint64_t)(z < half ? z : z - half);
}

/* sum over local j of x_j (lambda_j x_j / 2 - bbar_j - amp r_j), r_j = +-1 the Philox sign bits
 * of pattern zp at global index first + j (bit (idx mod 128) of block idx / 128). */
static double quad_value(const zoapp_problem *p, const double *x, double amp, uint64_t zp) {
    const uint64_t base = (zp << 40) + (uint64_t)p->first, c = ctr(CTR_SIGNS);
    double f = 0.0;
    uint32_t w[4];
    for (int64_t j = 0; j < p->n; j++) {
        uint64_t idx = base + (uint64_t)j;
        if (j == 0 || (idx & 127) == 0) tess_rng_block(p->cfg.key, c, idx >> 7, w);
        double r = ((w[(idx & 127) >> 5] >> (idx & 31)) & 1u) ? amp : -amp;
        f += x[j] * (0.5 * p->lam[j] * x[j] - p->bbar[j] - r);
    }
    return f;
}

static double l1_value(zoapp_problem *p, const double *x, int64_t z) {
    const int64_t d = p->cfg.d;
    double *y = p->work;
    for (int64_t i = 0; i < d; i++) y[i] = 0.0;
    for (int64_t r = 0; r < d; r++) { /* y = U^T x, row by row */
        const double *u = p->U + r * d;
        double xr = x[r];
        for (int64_t i = 0; i < d; i++) y[i] += u[i] * xr;
    }
    const double *cz = p->c + z * d;
    double f = 0.0;
    for (int64_t i = 0; i < d; i++) f += fabs(y[i] - cz[i]);
    return f + 0.5 * p->cfg.mu * dot(x, x, d);
}

double zoapp_problem_value(zoapp_problem *p, const double *x, int64_t z) {
    const zoapp_problem_config *c = &p->cfg;
    const int64_t d = c->d;
    switch (c->kind) {
    case ZOAPP_PROB_QUADRATIC: {
        double s;
        uint64_t zp;
        noise_of(c, z, &s, &zp);
        return quad_value(p, x, s * c->sigma / sqrt((double)d), zp);
    }
    case ZOAPP_PROB_RIDGE: {
        double r = dot(p->A + z * d, x, d) - p->y[z];
        return 0.5 * r * r + 0.5 * c->lambda * dot(x, x, d);
    }
    case ZOAPP_PROB_LOGISTIC:
        return log1pexp(-p->y[z] * dot(p->A + z * d, x, d)) + 0.5 * c->lambda * dot(x, x, d);
    case ZOAPP_PROB_L1: return l1_value(p, x, z);
    }
    return NAN;
}

void zoapp_problem_grad(zoapp_problem *p, const double *x, int64_t z, double *grad) {
    const zoapp_problem_config *c = &p->cfg;
    const int64_t d = c->d;
    switch (c->kind) {
    case ZOAPP_PROB_QUADRATIC: {
        double s;
        uint64_t zp;
        noise_of(c, z, &s, &zp);
        const double amp = s * c->sigma / sqrt((double)d);
        const uint64_t base = (zp << 40) + (uint64_t)p->first, cn = ctr(CTR_SIGNS);
        uint32_t w[4];
        for (int64_t j = 0; j < p->n; j++) {
            uint64_t idx = base + (uint64_t)j;
            if (j == 0 || (idx & 127) == 0) tess_rng_block(c->key, cn, idx >> 7, w);
            double r = ((w[(idx & 127) >> 5] >> (idx & 31)) & 1u) ? amp : -amp;
            grad[j] = p->lam[j] * x[j] - p->bbar[j] - r;
        }
        return;
    }
    case ZOAPP_PROB_RIDGE:
    case ZOAPP_PROB_LOGISTIC: {
        const double *a = p->A + z * d;
        double m = dot(a, x, d), s;
        if (c->kind == ZOAPP_PROB_RIDGE)
            s = m - p->y[z];
        else
            s = -p->y[z] * sigmoid(-p->y[z] * m);
        for (int64_t j = 0; j < d; j++) grad[j] = s * a[j] + c->lambda * x[j];
        return;
    }
    case ZOAPP_PROB_L1: {
        double *y = p->work;
        for (int64_t i = 0; i < d; i++) y[i] = 0.0;
        for (int64_t r = 0; r < d; r++)
            for (int64_t i = 0; i < d; i++) y[i] += p->U[r * d + i] * x[r];
        const double *cz = p->c + z * d;
        for (int64_t i = 0; i < d; i++) y[i] = (y[i] > cz[i]) - (y[i] < cz[i]);
        for (int64_t r = 0; r < d; r++) grad[r] = dot(p->U + r * d, y, d) + c->mu * x[r];
        return;
    }
    }
}

double zoapp_problem_f(zoapp_problem *p, const double *x) {
    const zoapp_problem_config *c = &p->cfg;
    const int64_t d = c->d, ns = c->nstates;
    switch (c->kind) {
    case ZOAPP_PROB_QUADRATIC: { /* the antithetic noise averages to exactly zero */
        double f = 0.0;
        for (int64_t j = 0; j < p->n; j++) f += x[j] * (0.5 * p->lam[j] * x[j] - p->bbar[j]);
        return f;
    }
    case ZOAPP_PROB_RIDGE:
    case ZOAPP_PROB_LOGISTIC: {
        double f = 0.0;
        for (int64_t z = 0; z < ns; z++) f += zoapp_problem_value(p, x, z);
        return f / (double)ns;
    }
    case ZOAPP_PROB_L1: {
        double *y = p->work;
        for (int64_t i = 0; i < d; i++) y[i] = 0.0;
        for (int64_t r = 0; r < d; r++)
            for (int64_t i = 0; i < d; i++) y[i] += p->U[r * d + i] * x[r];
        double f = 0.0;
        for (int64_t z = 0; z < ns; z++)
            for (int64_t i = 0; i < d; i++) f += fabs(y[i] - p->c[z * d + i]);
        return f / (double)ns + 0.5 * c->mu * dot(x, x, d);
    }
    }
    return NAN;
}

/* problem.h - the zo app's strongly convex test problems with exact minimisers (docs/zo.md 4).
 *
 * F(x, z) for a chain state z in {0..n-1} (uniform invariant law), f(x) = mean_z F(x, z):
 *   QUADRATIC  F = sum_j (lambda_j/2) x_j^2 - (bbar_j + sigma xi_{z,j}) x_j, lambda log-spaced in
 *              [mu, L]; xi_z = s_z r_{z mod n/2} / sqrt(d) with Philox signs r in {+-1}^d and
 *              s_z = +1 for z < n/2, -1 otherwise (antithetic: sum_z xi_z = 0, ||xi_z|| = 1), so
 *              sigma^2 is the gradient-noise variance. x* = bbar / lambda, x*_j ~ N(0, 1/d).
 *              Separable: x may be sharded (partial sums over local coordinates); O(d) memory.
 *   RIDGE      F = (a_z^T x - y_z)^2 / 2 + (lambda/2) ||x||^2, a_z ~ N(0, I/d), y_z = a_z^T x_true
 *              + sigma N(0,1); x* = (A^T A/n + lambda I)^-1 A^T y/n by p?gemm + p?posv.
 *   LOGISTIC   F = log(1 + exp(-y_z a_z^T x)) + (lambda/2) ||x||^2, y_z = sign(a_z^T x_true +
 *              sigma N(0,1)), x_true ~ N(0, I); x* by Newton steps, each Hessian solved with
 *              p?posv (H = A^T W A/n + lambda I), backtracking, to ||grad f|| <= 1e-12.
 *   L1         F = sum_i |(U^T x)_i - c_{z,i}| + (mu/2) ||x||^2 (non-smooth), U orthogonal: the
 *              left singular vectors of a Gaussian d x d matrix (p?gesvd, columns signed so their
 *              sums are >= 0); c_{z,i} = m_i + sigma e_{z,i}/sqrt(d), m_i, e ~ N(0, 1/d) resp.
 *              N(0,1). x* = U y*, y*_i = argmin_y mean_z |y - c_{z,i}| + mu y^2 / 2 by the sorted
 *              kinks (exact).
 * All data are Philox draws keyed by (seed, global indices), so every rank and every grid shape
 * builds the same problem. Dense problems keep A (n x d) or U, c replicated on every rank.
 */
#ifndef ZOAPP_PROBLEM_H
#define ZOAPP_PROBLEM_H

#include <stdint.h>

#include "core/rng.h"    /* tess_rng_key */
#include "core/status.h" /* tess_status */
#include "par/mesh.h"    /* tess_group */

typedef enum {
    ZOAPP_PROB_QUADRATIC = 0,
    ZOAPP_PROB_RIDGE,
    ZOAPP_PROB_LOGISTIC,
    ZOAPP_PROB_L1,
} zoapp_problem_kind;

typedef struct {
    zoapp_problem_kind kind;
    int64_t d, nstates;
    double mu, L;   /* QUADRATIC spectrum; L1 uses mu */
    double sigma;   /* noise level */
    double lambda;  /* RIDGE, LOGISTIC regularisation */
    tess_rng_key key;
} zoapp_problem_config;

typedef struct {
    zoapp_problem_config cfg;
    int64_t first, n;    /* local coordinates [first, first + n) (only QUADRATIC may shard) */
    double *lam, *bbar;  /* QUADRATIC (n) */
    double *A, *y;       /* RIDGE, LOGISTIC: (nstates, d) row-major, (nstates) */
    double *U, *c;       /* L1: (d, d) row-major, (nstates, d) */
    double *work;        /* (max(d, nstates)) scratch of F and grad */
    double *xstar;       /* (n) local part of x* */
    double fstar;        /* f(x*) */
    double xstar_norm2;  /* ||x*||^2 over all d */
    double check;        /* RIDGE: ||H x* - b||/||b||; LOGISTIC: ||grad f(x*)||; else 0 */
    int newton_steps;    /* LOGISTIC */
    double smooth_L;     /* smoothness constant (QUADRATIC L; data bound otherwise; L1: 0) */
    double strong_mu;    /* strong convexity constant (lower bound) */
} zoapp_problem;

/* Build the problem and its exact x*. first/n: this rank's coordinates (the whole range unless
 * QUADRATIC is sharded). Collective on g (the ScaLAPACK grid of the dense solves uses all of
 * g; QUADRATIC needs no communication but is still called everywhere). TESS_ERR_CONFIG for
 * bad constants (naming the option), TESS_ERR_DATA if a solve fails, TESS_ERR_MEM. */
tess_status zoapp_problem_create(zoapp_problem *p, const zoapp_problem_config *cfg, int64_t first,
                                 int64_t n, const tess_group *g);
void zoapp_problem_free(zoapp_problem *p);

/* F(x, z): the partial sum over this rank's coordinates for QUADRATIC, the whole value
 * otherwise. x (n). */
double zoapp_problem_value(zoapp_problem *p, const double *x, int64_t z);
/* grad (n) = grad_x F(x, z) (a subgradient for L1). Replicated x only for dense problems. */
void zoapp_problem_grad(zoapp_problem *p, const double *x, int64_t z, double *grad);
/* f(x) = mean_z F(x, z), partial over local coordinates for QUADRATIC. O(n d) (+ O(d^2) L1). */
double zoapp_problem_f(zoapp_problem *p, const double *x);

/* L1: for coordinate i of y = U^T x, the one-sided derivatives of the separable objective
 * mean_z |y - c_{z,i}| + mu y^2/2 at y (h(y-) <= h(y+)); 0 in [h-, h+] means optimal. */
void zoapp_problem_l1_slopes(const zoapp_problem *p, int64_t i, double y, double *hm, double *hp);

#endif

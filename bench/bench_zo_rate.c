/* bench_zo_rate - the zero-order optimizer's function evaluations per second on one core against a
 * plain C loop running the same algorithm, and its memory per rank at large d.
 *
 *   bench_zo_rate [--dim 4096] [--batch 1] [--iters 3000] [--mem-dim 10000000]
 *
 * Objective (both sides): F(x, t) = sum_j x_j (lambda_j x_j / 2 - b_j - sin(t) r_j), 3 arrays of
 * d doubles, O(d) per evaluation. Algorithm (both sides): two-point estimator, sphere directions
 * from Philox4x32-10 + Box-Muller (counter = step, index = (sample << 40) + j), fixed batch B,
 * g = sum_i (d / 2 gamma)(F(x + gamma e_i) - F(x - gamma e_i)) e_i / B, x -= eta g.
 *   tessera  tess_zo_step with the objective as a callback (optim/zo.h)
 *   plain    the same loop written inline, no callbacks, no library
 *   F only   the objective alone at a fixed point (what a step costs without its directions)
 * Rates are evaluations per CPU second of this process (tess_bench_cpu_now), so the shared,
 * loaded machine disturbs them less; the wall-clock rates are printed too.
 *
 * Memory: VmHWM growth while creating the optimizer at d = --mem-dim and taking one step, against
 * the O(d) floor (x, e, the evaluation point, g: 4 x 8 d bytes; the objective's 3 x 8 d bytes),
 * for B = 1 and B = 16 at d = mem-dim / 10 (growth must not depend on B) and B = 2 at mem-dim.
 * Prints "key value" lines.
 */
#include <Random123/philox.h>
#include <math.h>
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench_common.h" /* tess_bench_* */
#include "core/timer.h"   /* tess_timer_now */
#include "optim/zo.h"     /* tess_zo_* */

typedef struct {
    int64_t d;
    double *lam, *b, *r;
} objective;

static tess_status objective_init(objective *o, int64_t d) {
    o->d = d;
    o->lam = malloc((size_t)d * sizeof(double));
    o->b = malloc((size_t)d * sizeof(double));
    o->r = malloc((size_t)d * sizeof(double));
    TESS_REQUIRE(o->lam && o->b && o->r, TESS_ERR_MEM, "objective of d = %lld", (long long)d);
    for (int64_t j = 0; j < d; j++) {
        o->lam[j] = 1.0 + 9.0 * (double)j / (double)d;
        o->b[j] = sin(0.1 * (double)j);
        o->r[j] = (j % 2 ? 1.0 : -1.0) / sqrt((double)d);
    }
    return TESS_OK;
}

static void objective_free(objective *o) {
    free(o->lam);
    free(o->b);
    free(o->r);
}

static double f_eval(const objective *o, const double *x, int64_t first, int64_t n, int64_t t) {
    const double s = sin((double)t);
    double f = 0.0;
    for (int64_t j = 0; j < n; j++)
        f += x[j] * (0.5 * o->lam[first + j] * x[j] - o->b[first + j] - s * o->r[first + j]);
    return f;
}

static void partial(void *ctx, const double *x, int64_t first, int64_t n, int64_t t, double *out) {
    out[0] = f_eval(ctx, x, first, n, t);
}

/* ---- the plain loop ------------------------------------------------------------------------ */

static void gauss_fill(uint32_t seed, uint32_t stream, uint64_t ctr, uint64_t base, int64_t n,
                       double *u) {
    philox4x32_key_t k = {{seed, stream}};
    for (int64_t j = 0; j < n; j += 2) {
        uint64_t blk = (base + (uint64_t)j) >> 1;
        philox4x32_ctr_t c = {{(uint32_t)blk, (uint32_t)(blk >> 32), (uint32_t)ctr,
                               (uint32_t)(ctr >> 32)}};
        philox4x32_ctr_t w = philox4x32(c, k);
        uint64_t h0 = (uint64_t)w.v[0] | ((uint64_t)w.v[1] << 32);
        uint64_t h1 = (uint64_t)w.v[2] | ((uint64_t)w.v[3] << 32);
        double u1 = (double)((h0 >> 11) + 1) * (1.0 / 9007199254740992.0);
        double u2 = (double)(h1 >> 11) * (1.0 / 9007199254740992.0);
        double rad = sqrt(-2.0 * log(u1));
        u[j] = rad * cos(6.283185307179586 * u2);
        if (j + 1 < n) u[j + 1] = rad * sin(6.283185307179586 * u2);
    }
}

static void plain_run(const objective *o, double *x, double *e, double *p, double *g,
                      int64_t batch, int64_t iters, double gamma, double eta) {
    const int64_t d = o->d;
    int64_t t = 0;
    for (int64_t k = 0; k < iters; k++) {
        memset(g, 0, (size_t)d * sizeof *g);
        uint64_t ctr = ((uint64_t)TESS_RNG_PURPOSE_ZO << 48) | (uint64_t)k;
        for (int64_t i = 0; i < batch; i++, t++) {
            gauss_fill(7, 1, ctr, (uint64_t)i << 40, d, e);
            double n2 = 0.0;
            for (int64_t j = 0; j < d; j++) n2 += e[j] * e[j];
            double inv = 1.0 / sqrt(n2);
            for (int64_t j = 0; j < d; j++) e[j] *= inv;
            for (int64_t j = 0; j < d; j++) p[j] = x[j] + gamma * e[j];
            double fp = f_eval(o, p, 0, d, t);
            for (int64_t j = 0; j < d; j++) p[j] = x[j] - gamma * e[j];
            double fm = f_eval(o, p, 0, d, t);
            double c = (double)d / (2.0 * gamma) * (fp - fm) / (double)batch;
            for (int64_t j = 0; j < d; j++) g[j] += c * e[j];
        }
        for (int64_t j = 0; j < d; j++) x[j] -= eta * g[j];
    }
}

static tess_status rate(int64_t d, int64_t batch, int64_t iters) {
    objective o;
    TESS_CHECK(objective_init(&o, d));
    const double gamma = 1e-3, eta = 0.01 / (10.0 * (double)d);
    const tess_zo_config cfg = {.estimator = TESS_ZO_EST_TWO_POINT, .dir = TESS_ZO_DIR_SPHERE,
                                .batching = TESS_ZO_BATCH_FIXED, .gamma = gamma, .batch = batch,
                                .cap = 1, .rule = TESS_ZO_RULE_CONSTANT, .eta = eta, .mu = 1.0,
                                .key = {.seed = 7, .stream = 1}};
    const tess_zo_objective obj = {.ctx = &o, .npartials = 1, .partial = partial};
    tess_zo *zo = NULL;
    TESS_CHECK(tess_zo_create(&zo, &cfg, d, NULL, NULL));
    double *buf = calloc((size_t)(4 * d), sizeof *buf);
    TESS_REQUIRE(buf, TESS_ERR_MEM, "plain loop buffers");
    const double evals = (double)(2 * batch * iters);
    double best_t[3] = {1e30, 1e30, 1e30}, best_w[3] = {1e30, 1e30, 1e30};
    for (int rep = 0; rep < 3; rep++) { /* alternate, keep the best of 3 of each */
        double c0 = tess_bench_cpu_now(), w0 = tess_timer_now();
        for (int64_t k = 0; k < iters; k++) TESS_CHECK(tess_zo_step(zo, &obj, NULL));
        double c1 = tess_bench_cpu_now(), w1 = tess_timer_now();
        plain_run(&o, buf, buf + d, buf + 2 * d, buf + 3 * d, batch, iters, gamma, eta);
        double c2 = tess_bench_cpu_now(), w2 = tess_timer_now();
        volatile double sink = 0.0;
        for (int64_t k = 0; k < 2 * batch * iters; k++) sink += f_eval(&o, buf, 0, d, k);
        double c3 = tess_bench_cpu_now(), w3 = tess_timer_now();
        (void)sink;
        best_t[0] = fmin(best_t[0], c1 - c0), best_w[0] = fmin(best_w[0], w1 - w0);
        best_t[1] = fmin(best_t[1], c2 - c1), best_w[1] = fmin(best_w[1], w2 - w1);
        best_t[2] = fmin(best_t[2], c3 - c2), best_w[2] = fmin(best_w[2], w3 - w2);
    }
    printf("rate_dim %lld\nrate_batch %lld\nrate_iters %lld\n", (long long)d, (long long)batch,
           (long long)iters);
    printf("evals_per_cpu_s_tessera %.4g\nevals_per_cpu_s_plain %.4g\nratio_tessera_plain %.3f\n",
           evals / best_t[0], evals / best_t[1], best_t[1] / best_t[0]);
    printf("evals_per_wall_s_tessera %.4g\nevals_per_wall_s_plain %.4g\n", evals / best_w[0],
           evals / best_w[1]);
    printf("f_only_per_cpu_s %.4g\n", evals / best_t[2]);
    /* the two implementations take the same steps: 50 fresh steps of each, iterates compared */
    tess_zo_destroy(&zo);
    TESS_CHECK(tess_zo_create(&zo, &cfg, d, NULL, NULL));
    memset(buf, 0, (size_t)(4 * d) * sizeof *buf);
    for (int64_t k = 0; k < 50; k++) TESS_CHECK(tess_zo_step(zo, &obj, NULL));
    plain_run(&o, buf, buf + d, buf + 2 * d, buf + 3 * d, batch, 50, gamma, eta);
    double diff = 0.0, scale = 0.0;
    for (int64_t j = 0; j < d; j++) {
        diff = fmax(diff, fabs(tess_zo_x(zo)[j] - buf[j]));
        scale = fmax(scale, fabs(buf[j]));
    }
    printf("iterate_max_rel_diff_50_steps %.3g\n", diff / scale);
    free(buf);
    tess_zo_destroy(&zo);
    objective_free(&o);
    return TESS_OK;
}

/* VmHWM growth (KiB) of creating the optimizer and objective at d and taking one step. */
static tess_status memory(int64_t d, int64_t batch) {
    const int64_t rss0 = tess_bench_proc_kib("VmRSS");
    const bool reset = tess_bench_reset_hwm();
    objective o;
    TESS_CHECK(objective_init(&o, d));
    const tess_zo_config cfg = {.estimator = TESS_ZO_EST_TWO_POINT, .dir = TESS_ZO_DIR_SPHERE,
                                .batching = TESS_ZO_BATCH_FIXED, .gamma = 1e-3, .batch = batch,
                                .cap = 1, .rule = TESS_ZO_RULE_CONSTANT, .eta = 1e-9, .mu = 1.0,
                                .key = {.seed = 7, .stream = 1}};
    const tess_zo_objective obj = {.ctx = &o, .npartials = 1, .partial = partial};
    tess_zo *zo = NULL;
    TESS_CHECK(tess_zo_create(&zo, &cfg, d, NULL, NULL));
    const double t0 = tess_timer_now();
    TESS_CHECK(tess_zo_step(zo, &obj, NULL));
    const double t1 = tess_timer_now();
    const int64_t hwm = tess_bench_proc_kib("VmHWM");
    printf("mem_d %lld batch %lld: hwm_growth_kib %lld zo_floor_kib %lld objective_kib %lld "
           "d_x_batch_kib %lld step_s %.2f hwm_reset %d\n",
           (long long)d, (long long)batch, (long long)(hwm - rss0), (long long)(4 * 8 * d / 1024),
           (long long)(3 * 8 * d / 1024), (long long)(8 * d * batch / 1024), t1 - t0, reset ? 1 : 0);
    tess_zo_destroy(&zo);
    objective_free(&o);
    return TESS_OK;
}

static tess_status run(int argc, char **argv) {
    static const char *const keys[] = {"--dim", "--batch", "--iters", "--mem-dim"};
    int64_t v[] = {4096, 1, 3000, 10000000};
    TESS_CHECK(tess_bench_parse_ints(argc, argv, keys, v, 4, 1, (int64_t)1 << 34));
    TESS_CHECK(rate(v[0], v[1], v[2]));
    TESS_CHECK(rate(v[0], 8 * v[1], v[2] / 8 > 0 ? v[2] / 8 : 1));
    TESS_CHECK(memory(v[3] / 10, 1));
    TESS_CHECK(memory(v[3] / 10, 16));
    TESS_CHECK(memory(v[3], 2));
    return TESS_OK;
}

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    tess_status s = run(argc, argv);
    if (s != TESS_OK) tess_error_write();
    MPI_Finalize();
    return s == TESS_OK ? 0 : 1;
}

/* test_zo_unit - the zero-order optimizer's pure parts and single-rank behaviour (optim/zo.h):
 *   - directions: Gaussian draws equal tess_rng_normal element by element (even and odd starts,
 *     any split of the coordinate range); Rademacher draws are +-1 and balanced;
 *   - MLMC plan (docs/zo.md 5.2): sum_J P(J) g(J) = g_m to 1e-12 for a stored sequence, the
 *     per-sample weights give g_0 + 2^J (g_J - g_{J-1}), sum w_i = 1; J from trailing zeros;
 *   - step rules: switch is continuous at k_switch, decay is min(eta, 2/(mu(k+1)));
 *   - unbiasedness: the mean of N = 200000 two-point estimates (sphere and Gaussian directions)
 *     and N = 400000 one-point residual-feedback estimates on a fixed quadratic lies within 4
 *     standard errors (per coordinate, from the sample variance) of grad f(x) = grad f_gamma(x)
 *     (ball/Gaussian smoothing of a quadratic only adds a constant); fixed seed;
 *   - registry mode: one step equals the hand-computed update on the float parameters, a
 *     non-trainable entry is untouched, and 3000 steps shrink the loss 100-fold;
 *   - config errors (gamma <= 0, batch < 1, cap < 1) are TESS_ERR_CONFIG; the state views.
 */
#include <math.h>
#include <mpi.h>
#include <stdlib.h>
#include <string.h>

#include "core/rng.h"    /* tess_rng_* */
#include "optim/zo.h"    /* tess_zo_* */
#include "tess_test.h"   /* TESS_TEST_* */

enum { D = 6 };
static const double qa[D] = {1.0, 2.0, 3.0, 0.5, 4.0, 1.5};
static const double qb[D] = {0.3, -1.0, 0.7, 0.2, -0.4, 1.1};

/* F(x) = sum_j qa_j x_j^2 / 2 - qb_j x_j, no noise; grad = qa x - qb */
static void quad_partial(void *ctx, const double *x, int64_t first, int64_t n, int64_t t,
                         double *out) {
    double f = 0.0;
    for (int64_t j = 0; j < n; j++) f += 0.5 * qa[first + j] * x[j] * x[j] - qb[first + j] * x[j];
    out[0] = f;
}

static tess_zo_config base_config(void) {
    return (tess_zo_config){.estimator = TESS_ZO_EST_TWO_POINT, .dir = TESS_ZO_DIR_SPHERE,
                            .batching = TESS_ZO_BATCH_FIXED, .baseline = TESS_ZO_BASELINE_NONE,
                            .gamma = 0.25, .batch = 1, .cap = 1, .rule = TESS_ZO_RULE_CONSTANT,
                            .eta = 1.0, .mu = 1.0, .radius = 0.0, .average = false,
                            .key = {.seed = 42, .stream = 5}};
}

static void test_directions(void) {
    tess_rng_key key = {.seed = 9, .stream = 2};
    double u[37], v[37];
    tess_zo_direction(key, TESS_ZO_DIR_GAUSS, 17, 3, 5, 37, u);
    int ok = 1;
    for (int j = 0; j < 37; j++) {
        uint64_t idx = ((uint64_t)3 << TESS_ZO_SAMPLE_SHIFT) + 5 + (uint64_t)j;
        ok &= u[j] == tess_rng_normal(key, tess_rng_ctr(TESS_RNG_PURPOSE_ZO, 17), idx, 0.0, 1.0);
    }
    TESS_TEST_CHECK(ok, "Gaussian direction differs from tess_rng_normal");
    /* split ranges (as shards draw them) give the same numbers */
    tess_zo_direction(key, TESS_ZO_DIR_GAUSS, 17, 3, 5, 10, v);
    tess_zo_direction(key, TESS_ZO_DIR_GAUSS, 17, 3, 15, 27, v + 10);
    TESS_TEST_CHECK(memcmp(u, v, sizeof u) == 0, "split Gaussian ranges differ");
    double r[4096], s[4096];
    tess_zo_direction(key, TESS_ZO_DIR_RADEMACHER, 2, 1, 0, 4096, r);
    tess_zo_direction(key, TESS_ZO_DIR_RADEMACHER, 2, 1, 0, 100, s);
    tess_zo_direction(key, TESS_ZO_DIR_RADEMACHER, 2, 1, 100, 3996, s + 100);
    double sum = 0.0;
    ok = 1;
    for (int j = 0; j < 4096; j++) {
        ok &= r[j] == 1.0 || r[j] == -1.0;
        sum += r[j];
    }
    TESS_TEST_CHECK(ok, "Rademacher entries are not +-1");
    TESS_TEST_CHECK(fabs(sum) < 4.0 * 64.0, "Rademacher sum %g of 4096 signs (4 sd = 256)", sum);
    TESS_TEST_CHECK(memcmp(r, s, sizeof r) == 0, "split Rademacher ranges differ");
    tess_zo_direction(key, TESS_ZO_DIR_GAUSS, 17, 4, 5, 37, v);
    TESS_TEST_CHECK(memcmp(u, v, sizeof u) != 0, "samples 3 and 4 draw the same direction");
}

static void test_mlmc(void) {
    const int64_t B = 3, M = 16; /* m = 4 */
    const int64_t m = 4, maxk = B << m;
    double gs[48];
    for (int64_t i = 0; i < maxk; i++) gs[i] = sin(1.0 + 0.37 * (double)i) + 0.01 * (double)i;
    double gm = 0.0; /* g_m: the mean of all 2^m B */
    for (int64_t i = 0; i < maxk; i++) gm += gs[i] / (double)maxk;
    double expect = 0.0, psum = 0.0;
    for (int64_t J = 1; J <= m + 1; J++) { /* J = m + 1 stands for every J > m: P = 2^-m */
        uint64_t bits = (uint64_t)1 << (J - 1);
        tess_zo_plan p = tess_zo_plan_make(TESS_ZO_BATCH_MLMC, bits, B, M);
        double P = J <= m ? ldexp(1.0, -(int)J) : ldexp(1.0, -(int)m);
        psum += P;
        TESS_TEST_CHECK(p.J == J, "J = %lld from %d trailing zeros, expected %lld", (long long)p.J,
                        (int)(J - 1), (long long)J);
        double g = 0.0, wsum = 0.0;
        for (int64_t i = 0; i < p.K; i++) {
            double w = tess_zo_plan_weight(&p, i);
            g += w * gs[i];
            wsum += w;
        }
        TESS_TEST_CLOSE(wsum, 1.0, 1e-14, 0.0, "sum of MLMC weights");
        double means[6] = {0.0}; /* g_j = mean of the first 2^j B */
        for (int j = 0; j <= m; j++)
            for (int64_t i = 0; i < (B << j); i++) means[j] += gs[i] / (double)(B << j);
        double form = J <= m ? means[0] + ldexp(means[J] - means[J - 1], (int)J) : means[0];
        TESS_TEST_CLOSE(g, form, 1e-12, 0.0, "weights against g_0 + 2^J (g_J - g_{J-1})");
        TESS_TEST_CHECK(p.K == (J <= m ? (B << J) : B), "K = %lld for J = %lld", (long long)p.K,
                        (long long)J);
        expect += P * g;
    }
    TESS_TEST_CLOSE(psum, 1.0, 1e-15, 0.0, "level probabilities");
    TESS_TEST_CLOSE(expect, gm, 1e-12, 0.0, "MLMC telescoping: E g = g_m");
    tess_zo_plan z = tess_zo_plan_make(TESS_ZO_BATCH_MLMC, 0, B, M);
    TESS_TEST_CHECK(z.J == 65 && z.K == B, "all-zero level word: J %lld K %lld", (long long)z.J,
                    (long long)z.K);
    tess_zo_plan f = tess_zo_plan_make(TESS_ZO_BATCH_FIXED, 12345, 7, 1);
    TESS_TEST_CHECK(f.K == 7 && tess_zo_plan_weight(&f, 6) == 1.0 / 7.0, "fixed plan");
    /* the level frequencies over 20000 iterations follow 2^-J */
    int64_t count1 = 0, count2 = 0;
    tess_rng_key key = {.seed = 3, .stream = 1};
    for (int64_t k = 0; k < 20000; k++) {
        tess_zo_plan p = tess_zo_plan_make(TESS_ZO_BATCH_MLMC, tess_zo_level_bits(key, k), 1, 1024);
        count1 += p.J == 1;
        count2 += p.J == 2;
    }
    TESS_TEST_CLOSE((double)count1, 10000.0, 4.0 * 71.0, 0.0, "P(J = 1) count");
    TESS_TEST_CLOSE((double)count2, 5000.0, 4.0 * 61.0, 0.0, "P(J = 2) count");
}

static void test_rules(void) {
    tess_zo_config c = base_config();
    c.eta = 0.01;
    c.mu = 2.0;
    c.rule = TESS_ZO_RULE_SWITCH;
    c.k_switch = 100;
    TESS_TEST_CHECK(tess_zo_step_size(&c, 99) == 0.01, "switch: constant phase");
    TESS_TEST_CLOSE(tess_zo_step_size(&c, 100), 0.01, 0.0, 1e-12, "switch: continuous at k_switch");
    TESS_TEST_CLOSE(tess_zo_step_size(&c, 1100), 2.0 / (2.0 * (1000.0 + 100.0)), 0.0, 1e-12,
                    "switch: 2/(mu(k - ks + k0))");
    c.rule = TESS_ZO_RULE_DECAY;
    TESS_TEST_CHECK(tess_zo_step_size(&c, 0) == 0.01, "decay capped at eta");
    TESS_TEST_CLOSE(tess_zo_step_size(&c, 999), 1.0 / 1000.0, 0.0, 1e-14, "decay 2/(mu(k+1))");
}

/* Mean of n single-sample estimates g = x0 - x1 (eta = 1, x reset each step) against grad f. */
static void check_unbiased(tess_zo_config c, int64_t n, const char *what) {
    tess_zo *zo = NULL;
    TESS_TEST_CHECK(tess_zo_create(&zo, &c, D, NULL, NULL) == TESS_OK, "create %s", what);
    if (!zo) return;
    const double x0[D] = {0.5, -0.2, 0.1, 1.0, 0.3, -0.7};
    double mean[D] = {0}, m2[D] = {0};
    const tess_zo_objective obj = {.npartials = 1, .partial = quad_partial};
    for (int64_t s = 0; s < n; s++) {
        double *x = tess_zo_x(zo);
        memcpy(x, x0, sizeof x0);
        tess_zo_step(zo, &obj, NULL);
        for (int j = 0; j < D; j++) {
            double g = x0[j] - x[j], dlt = g - mean[j];
            mean[j] += dlt / (double)(s + 1);
            m2[j] += dlt * (g - mean[j]);
        }
    }
    int ok = 1;
    double worst = 0.0;
    for (int j = 0; j < D; j++) {
        double se = sqrt(m2[j] / (double)(n - 1) / (double)n);
        double z = fabs(mean[j] - (qa[j] * x0[j] - qb[j])) / se;
        worst = z > worst ? z : worst;
        ok &= z <= 4.0;
    }
    TESS_TEST_CHECK(ok, "%s: mean estimate %.2f standard errors from grad f (limit 4)", what, worst);
    tess_zo_destroy(&zo);
}

static void test_unbiased(void) {
    tess_zo_config c = base_config();
    check_unbiased(c, 200000, "two-point, sphere");
    c.dir = TESS_ZO_DIR_GAUSS;
    check_unbiased(c, 200000, "two-point, Gaussian");
    c.dir = TESS_ZO_DIR_SPHERE;
    c.estimator = TESS_ZO_EST_ONE_POINT;
    c.baseline = TESS_ZO_BASELINE_RESIDUAL;
    c.gamma = 1.0;
    check_unbiased(c, 400000, "one-point, residual baseline");
}

/* Registry: w (3) and b (2) trainable, s (2) frozen; loss = sum (w - 1)^2 + sum (b + 2)^2 */
static double reg_loss(void *ctx, int64_t t) {
    tess_registry *reg = ctx;
    const float *w = tess_registry_param(reg, 0), *b = tess_registry_param(reg, 1);
    double l = 0.0;
    for (int j = 0; j < 3; j++) l += ((double)w[j] - 1.0) * ((double)w[j] - 1.0);
    for (int j = 0; j < 2; j++) l += ((double)b[j] + 2.0) * ((double)b[j] + 2.0);
    return l;
}

static void test_registry(void) {
    tess_registry *reg = NULL;
    const tess_layout rep = tess_layout_replicated();
    const int64_t s3[1] = {3}, s2[1] = {2};
    int ok = tess_registry_create(&reg) == TESS_OK &&
             tess_registry_add(reg, "w", 1, s3, &rep, NULL) == TESS_OK &&
             tess_registry_add(reg, "b", 1, s2, &rep, NULL) == TESS_OK &&
             tess_registry_add(reg, "s", 1, s2, &rep, NULL) == TESS_OK &&
             tess_registry_set_trainable(reg, 2, false) == TESS_OK &&
             tess_registry_finalize(reg) == TESS_OK;
    TESS_TEST_CHECK(ok, "registry setup");
    if (!ok) return;
    float *p = tess_registry_params(reg);
    const float init[7] = {0.1f, 0.2f, 0.3f, 0.4f, 0.5f, 7.0f, 8.0f};
    memcpy(p, init, sizeof init);
    tess_zo_config c = base_config();
    c.eta = 0.01;
    c.batching = TESS_ZO_BATCH_MLMC;
    c.cap = 8;
    tess_zo *zo = NULL;
    TESS_TEST_CHECK(tess_zo_create_registry(&zo, &c, reg, NULL, NULL) == TESS_OK, "create");
    if (!zo) {
        tess_registry_destroy(&reg);
        return;
    }
    TESS_TEST_CHECK(tess_zo_dim(zo) == 5, "registry dimension %lld, expected 5",
                    (long long)tess_zo_dim(zo));
    /* expected first step by hand: plan of step 0, directions over global indices 0..4 */
    tess_zo_plan pl = tess_zo_plan_make(c.batching, tess_zo_level_bits(c.key, 0), c.batch, c.cap);
    double x[5], g[5] = {0};
    for (int j = 0; j < 5; j++) x[j] = (double)init[j];
    for (int64_t i = pl.first_active; i < pl.K; i++) {
        double e[5], n2 = 0.0, v[2];
        tess_zo_direction(c.key, c.dir, 0, i, 0, 5, e);
        for (int j = 0; j < 5; j++) n2 += e[j] * e[j];
        for (int j = 0; j < 5; j++) e[j] *= 1.0 / sqrt(n2);
        for (int s = 0; s < 2; s++) {
            for (int j = 0; j < 5; j++) p[j] = (float)(x[j] + (s ? -c.gamma : c.gamma) * e[j]);
            v[s] = reg_loss(reg, 0);
        }
        double coef = 5.0 / (2.0 * c.gamma) * (v[0] - v[1]);
        for (int j = 0; j < 5; j++) g[j] += tess_zo_plan_weight(&pl, i) * coef * e[j];
    }
    memcpy(p, init, sizeof init);
    tess_zo_step_info info;
    TESS_TEST_CHECK(tess_zo_step_registry(zo, reg_loss, reg, &info) == TESS_OK, "registry step");
    ok = 1;
    for (int j = 0; j < 5; j++) ok &= p[j] == (float)(x[j] - c.eta * g[j]);
    TESS_TEST_CHECK(ok, "registry step differs from the hand computation");
    TESS_TEST_CHECK(p[5] == 7.0f && p[6] == 8.0f, "frozen entry changed: %g %g", (double)p[5],
                    (double)p[6]);
    TESS_TEST_CHECK(info.samples == pl.K && info.evals == 2 * (pl.K - pl.first_active),
                    "info: %lld samples, %lld evals", (long long)info.samples,
                    (long long)info.evals);
    double l0 = reg_loss(reg, 0);
    for (int k = 0; k < 3000; k++) tess_zo_step_registry(zo, reg_loss, reg, NULL);
    double l1 = reg_loss(reg, 0);
    TESS_TEST_CHECK(l1 < l0 / 100.0, "registry mode: loss %g -> %g, expected a 100-fold drop", l0,
                    l1);
    tess_zo_objective obj = {.npartials = 1, .partial = quad_partial};
    TESS_TEST_CHECK(tess_zo_step(zo, &obj, NULL) == TESS_ERR_ARG, "tess_zo_step in registry mode");
    tess_error_clear();
    tess_zo_destroy(&zo);
    tess_registry_destroy(&reg);
}

static void test_config_and_describe(void) {
    tess_zo_config c = base_config();
    tess_zo *zo = NULL;
    c.gamma = 0.0;
    TESS_TEST_CHECK(tess_zo_create(&zo, &c, 4, NULL, NULL) == TESS_ERR_CONFIG && !zo, "gamma 0");
    c = base_config();
    c.batch = 0;
    TESS_TEST_CHECK(tess_zo_config_check(&c) == TESS_ERR_CONFIG, "batch 0");
    c = base_config();
    c.cap = 0;
    TESS_TEST_CHECK(tess_zo_config_check(&c) == TESS_ERR_CONFIG, "cap 0");
    c = base_config();
    c.rule = TESS_ZO_RULE_DECAY;
    c.mu = 0.0;
    TESS_TEST_CHECK(tess_zo_config_check(&c) == TESS_ERR_CONFIG, "decay without mu");
    c = base_config();
    TESS_TEST_CHECK(tess_zo_create(&zo, &c, 0, NULL, NULL) == TESS_ERR_ARG, "d = 0");
    tess_error_clear();
    c.average = true;
    TESS_TEST_CHECK(tess_zo_create(&zo, &c, 4, NULL, NULL) == TESS_OK, "create");
    if (!zo) return;
    tess_state *st = NULL;
    TESS_TEST_CHECK(tess_state_create(&st) == TESS_OK &&
                        tess_zo_describe(zo, st, "opt/zo") == TESS_OK,
                    "describe: %s", tess_error_text());
    const char *names[4] = {"opt/zo/x", "opt/zo/xbar", "opt/zo/counters", "opt/zo/scalars"};
    const tess_dtype dtypes[4] = {TESS_F64, TESS_F64, TESS_I64, TESS_F64};
    const int64_t lengths[4] = {4, 4, TESS_ZO_NCNT, TESS_ZO_NSCA};
    TESS_TEST_CHECK(tess_state_count(st) == 4, "%lld entries", (long long)tess_state_count(st));
    for (int k = 0; k < 4 && k < tess_state_count(st); k++) {
        const tess_state_entry *e = tess_state_get(st, k);
        TESS_TEST_CHECK(strcmp(e->name, names[k]) == 0 && e->dtype == dtypes[k] && e->ndim == 1 &&
                            e->shape[0] == lengths[k] && e->local_count == lengths[k] &&
                            e->layout.kind == TESS_LAYOUT_REPLICATED,
                        "entry %d: %s %s [%lld]", k, e->name, tess_dtype_name(e->dtype),
                        (long long)e->shape[0]);
    }
    TESS_TEST_CHECK(tess_state_get(st, 0)->data == tess_zo_x(zo) &&
                        tess_state_get(st, 2)->data == tess_zo_counters(zo) &&
                        tess_state_get(st, 3)->data == tess_zo_scalars(zo),
                    "the entries point at the optimizer's own state");
    tess_state_destroy(&st);
    tess_zo_destroy(&zo);
    c.average = false; /* no xbar entry */
    TESS_TEST_CHECK(tess_zo_create(&zo, &c, 4, NULL, NULL) == TESS_OK &&
                        tess_state_create(&st) == TESS_OK &&
                        tess_zo_describe(zo, st, "zo") == TESS_OK && tess_state_count(st) == 3 &&
                        tess_state_find(st, "zo/xbar") < 0 && tess_state_find(st, "zo/x") == 0,
                    "describe without averaging: %s", tess_error_text());
    tess_state_destroy(&st);
    tess_zo_destroy(&zo);
}

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    test_directions();
    test_mlmc();
    test_rules();
    test_unbiased();
    test_registry();
    test_config_and_describe();
    int rc = tess_test_finish("zo_unit");
    MPI_Finalize();
    return rc;
}

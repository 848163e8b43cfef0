/* zo - the zero-order optimizer for Markovian noise (src/optim/zo.h) on problems with exact
 * minimisers, against first-order SGD on the same Markov samples, zero-order SGD without the
 * randomised batching, and an NLopt derivative-free solver (docs/zo.md). A composition on the run
 * driver (run/run.h), which owns the run's options, resume, checkpoints, stops and metrics files.
 *
 *   run.mode = compare  (default, seconds; compare.c) one problem and chain; every method with
 *                       the same budget of chain samples, one iteration per step; metrics.csv
 *                       holds the error trajectories.
 *   run.mode = sweep    (minutes; sweep.c) the tau x d grid of docs/zo.md for ZO and FO, with and
 *                       without MLMC, several seeds, one lap of runs per step; metrics.csv holds
 *                       the medians, runs.csv every run.
 *
 * Ranks: a run is a mesh eval x shard (dist.shard ranks split the coordinates of x, the others
 * split the function evaluations of each iteration; zo.h). In the sweep, runs are dealt back and
 * forth (0 1 1 0 ...) to groups of sweep.group ranks (configuration parallelism), each group a
 * mesh of its own. Outputs under run.dir: config.ini, metrics.csv, results.md, runs.csv (sweep),
 * plots/ (PNG files), checkpoints/.
 *
 * Checkpoints (docs/zo.md 7): every ckpt.every steps, after the last one, and when SIGUSR1,
 * SIGTERM or SIGINT reaches any rank (all ranks stop after the same step, save it and exit 75);
 * --resume auto continues bitwise.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "zoapp.h" /* zoapp, zoapp_compare_*, zoapp_sweep_*, option helpers */

/* The names of every choice option: values come from these tables, never from list positions. */
static const tess_opt_enum mode_names[] = {{"compare", ZOAPP_MODE_COMPARE},
                                           {"sweep", ZOAPP_MODE_SWEEP}};
TESS_OPT_ENUM_TABLE_CHECK(mode_names, ZOAPP_MODE_COUNT);
static const tess_opt_enum problem_names[] = {
    {"quadratic", ZOAPP_PROB_QUADRATIC}, {"ridge", ZOAPP_PROB_RIDGE},
    {"logistic", ZOAPP_PROB_LOGISTIC}, {"l1", ZOAPP_PROB_L1}};
TESS_OPT_ENUM_TABLE_CHECK(problem_names, ZOAPP_PROB_L1 + 1);
static const tess_opt_enum chain_names[] = {{"sticky", ZOAPP_CHAIN_STICKY}, {"ar1", ZOAPP_CHAIN_AR1}};
TESS_OPT_ENUM_TABLE_CHECK(chain_names, ZOAPP_CHAIN_AR1 + 1);
static const tess_opt_enum estimator_names[] = {
    {"two_point", TESS_ZO_EST_TWO_POINT}, {"one_point_sym", TESS_ZO_EST_ONE_POINT_SYM},
    {"one_point", TESS_ZO_EST_ONE_POINT}, {"first_order", TESS_ZO_EST_FIRST_ORDER}};
TESS_OPT_ENUM_TABLE_CHECK(estimator_names, TESS_ZO_EST_FIRST_ORDER + 1);
static const tess_opt_enum dir_names[] = {
    {"sphere", TESS_ZO_DIR_SPHERE}, {"gauss", TESS_ZO_DIR_GAUSS},
    {"rademacher", TESS_ZO_DIR_RADEMACHER}};
TESS_OPT_ENUM_TABLE_CHECK(dir_names, TESS_ZO_DIR_RADEMACHER + 1);
static const tess_opt_enum batching_names[] = {{"mlmc", TESS_ZO_BATCH_MLMC},
                                               {"fixed", TESS_ZO_BATCH_FIXED}};
TESS_OPT_ENUM_TABLE_CHECK(batching_names, TESS_ZO_BATCH_FIXED + 1);
static const tess_opt_enum baseline_names[] = {{"none", TESS_ZO_BASELINE_NONE},
                                               {"residual", TESS_ZO_BASELINE_RESIDUAL}};
TESS_OPT_ENUM_TABLE_CHECK(baseline_names, TESS_ZO_BASELINE_RESIDUAL + 1);
static const tess_opt_enum rule_names[] = {{"constant", TESS_ZO_RULE_CONSTANT},
                                           {"switch", TESS_ZO_RULE_SWITCH},
                                           {"decay", TESS_ZO_RULE_DECAY}};
TESS_OPT_ENUM_TABLE_CHECK(rule_names, TESS_ZO_RULE_DECAY + 1);
static const tess_opt_enum nlopt_names[] = {{"bobyqa", ZOAPP_NLOPT_BOBYQA},
                                            {"neldermead", ZOAPP_NLOPT_NELDERMEAD},
                                            {"none", ZOAPP_NLOPT_NONE}};
TESS_OPT_ENUM_TABLE_CHECK(nlopt_names, ZOAPP_NLOPT_COUNT);

static const tess_opt run_opts[] = {
    TESS_OPT_ENUM("mode", "compare", mode_names,
                    "compare: one problem, all methods (seconds); sweep: tau x d grid (minutes)"),
};
static const tess_opt problem_opts[] = {
    TESS_OPT_ENUM("kind", "quadratic", problem_names, "test problem (docs/zo.md 4)"),
    TESS_OPT_INT("dim", 64, 1, (int64_t)1 << 40, "dimension d"),
    TESS_OPT_INT("states", 64, 1, 1 << 30, "states n of the chain (data rows; even for quadratic)"),
    TESS_OPT_REAL("mu", 1.0, 1e-12, 1e12, "strong convexity (quadratic, l1)"),
    TESS_OPT_REAL("L", 10.0, 1e-12, 1e12, "largest curvature (quadratic; >= mu)"),
    TESS_OPT_REAL("sigma", 1.0, 0.0, 1e6, "noise level"),
    TESS_OPT_REAL("lambda", 0.1, 0.0, 1e6, "l2 regularisation (ridge, logistic)"),
};
static const tess_opt chain_opts[] = {
    TESS_OPT_ENUM("kind", "sticky", chain_names, "Markov noise source (docs/zo.md 4)"),
    TESS_OPT_REAL("tau", 16.0, 1.0, 1e12, "mixing time tau (>= 1)"),
};
static const tess_opt optim_opts[] = {
    TESS_OPT_ENUM("estimator", "two_point", estimator_names, "gradient estimator"),
    TESS_OPT_ENUM("dir", "sphere", dir_names, "random directions"),
    TESS_OPT_ENUM("batching", "mlmc", batching_names, "randomised multilevel or fixed"),
    TESS_OPT_ENUM("baseline", "residual", baseline_names, "one-point baseline"),
    TESS_OPT_REAL("gamma", 1e-3, 1e-12, 1e6, "smoothing radius gamma (> 0)"),
    TESS_OPT_INT("batch", 1, 1, (int64_t)1 << 21, "base batch B (>= 1)"),
    TESS_OPT_INT("cap", 256, 1, (int64_t)1 << 21, "MLMC batch cap M (>= 1)"),
    TESS_OPT_ENUM("rule", "constant", rule_names, "step-size rule"),
    TESS_OPT_REAL("eta", 0.0, 0.0, 1e6,
                  "step size (cap of the rules); 0: eta_scale/(L d), l1: eta_scale/d"),
    TESS_OPT_REAL("eta_scale", 0.125, 1e-12, 1e6, "c of the automatic step size"),
    TESS_OPT_INT("k_switch", 0, 0, INT64_MAX / 4,
                 "switch rule: iterations at constant eta; 0: half the budget"),
    TESS_OPT_REAL("radius", 0.0, 0.0, 1e12, "projection ball radius; 0: none (l1: 2||x*|| + 1)"),
    TESS_OPT_BOOL("average", false, "report x-bar = sum k x^k / sum k (non-smooth variant)"),
};
static const tess_opt budget_opts[] = {
    TESS_OPT_INT("samples", 200000, 1, INT64_MAX / 4, "chain samples (oracle calls) per method"),
    TESS_OPT_RESUMABLE(REAL, "eps", 0.02, 1e-12, 1e6,
                       "target of ||x - x*||^2/||x*||^2 for calls-to-eps"),
    TESS_OPT_INT("points", 40, 2, ZOAPP_MAX_POINTS, "trajectory points (log-spaced samples)"),
};
static const tess_opt baselines_opts[] = {
    TESS_OPT_BOOL("first_order", true, "first-order SGD, same batching, same samples"),
    TESS_OPT_BOOL("plain", true,
                  "zero-order SGD without MLMC (K = B samples; off when optim.batching = fixed)"),
    TESS_OPT_REAL("fo_eta", 0.0, 0.0, 1e6, "first-order step size; 0: the zero-order one"),
    TESS_OPT_ENUM("nlopt", "bobyqa", nlopt_names, "NLopt derivative-free solver"),
    TESS_OPT_INT("nlopt_max_evals", 20000, 1, INT32_MAX, "NLopt call limit (also the budget)"),
    TESS_OPT_REAL("nlopt_step", 0.1, 1e-12, 1e6, "NLopt initial step"),
};
static const tess_opt dist_opts[] = {
    TESS_OPT_INT("shard", 1, 1, 1 << 20,
                 "ranks splitting x by coordinates (quadratic only); the rest split evaluations"),
};
static const tess_opt sweep_opts[] = {
    TESS_OPT_STRING("dims", "16,64,256", "comma-separated dimensions d"),
    TESS_OPT_STRING("taus", "1,4,16,64,256,1024,4096", "comma-separated mixing times tau"),
    TESS_OPT_STRING("methods", "zo,zo_plain,fo,fo_plain", "methods (zo, zo_plain, fo, fo_plain)"),
    TESS_OPT_INT("seeds", 3, 1, 1000, "seeds per (d, tau, method); medians are reported"),
    TESS_OPT_INT("group", 1, 1, 1 << 20, "ranks per run (runs are dealt to groups)"),
    TESS_OPT_REAL("relax", 6.0, 0.01, 1e6,
                  "budget in relaxation times: relax * E[K] / (eta mu) samples"),
    TESS_OPT_INT("max_samples", 4000000, 1, INT64_MAX / 4, "budget cap per run"),
    TESS_OPT_RESUMABLE(REAL, "eps", 3e-3, 1e-12, 1e6,
                       "target of the relative error for calls-to-eps"),
};
static const tess_config_section sections[] = {
    TESS_CONFIG_SECTION("problem", problem_opts),     TESS_CONFIG_SECTION("chain", chain_opts),
    TESS_CONFIG_SECTION("optim", optim_opts),         TESS_CONFIG_SECTION("budget", budget_opts),
    TESS_CONFIG_SECTION("baselines", baselines_opts), TESS_CONFIG_SECTION("dist", dist_opts),
    TESS_CONFIG_SECTION("sweep", sweep_opts),
};

const char *const zoapp_method_names[M_COUNT] = {"zo", "zo_plain", "fo", "fo_plain", "nlopt"};
static const char *const method_titles[M_COUNT] = {
    "zero-order, MLMC", "zero-order, fixed batch", "first-order, MLMC", "first-order, fixed batch",
    "NLopt"};

const char *zoapp_num(char *buf, size_t n, const char *fmt, double v) {
    if (isnan(v)) snprintf(buf, n, "-");
    else snprintf(buf, n, fmt, v);
    return buf;
}

const char *zoapp_method_title(const tess_config *c, zoapp_method_id m) {
    const bool fixed = tess_config_enum(c, "optim.batching") == TESS_ZO_BATCH_FIXED;
    if (m == M_ZO && fixed) return method_titles[M_ZO_PLAIN];
    if (m == M_FO && fixed) return method_titles[M_FO_PLAIN];
    return method_titles[m];
}

tess_status zoapp_parse_list(const tess_config *c, const char *key, const char *stands_for,
                             double *v, int *n) {
    const char *list = tess_config_string(c, key), *s = list;
    char what[160], item[64];
    snprintf(what, sizeof what, "%s = '%.100s'", key, list);
    *n = 0;
    while (*s) {
        const size_t len = strcspn(s, ",");
        TESS_REQUIRE(len > 0 && len < sizeof item, TESS_ERR_CONFIG,
                     "%s: expected comma-separated values of %s", what, stands_for);
        memcpy(item, s, len);
        item[len] = '\0';
        TESS_CHECK(tess_config_check_value(c, stands_for, item, what));
        TESS_REQUIRE(*n < ZOAPP_MAX_LIST, TESS_ERR_CONFIG, "%s: more than %d values", key,
                     ZOAPP_MAX_LIST);
        v[(*n)++] = strtod(item, NULL); /* checked: an integer or a finite real in range */
        s += len + (s[len] == ',');
    }
    TESS_REQUIRE(*n > 0, TESS_ERR_CONFIG, "%s is empty", key);
    return TESS_OK;
}

tess_status zoapp_parse_methods(const tess_config *c, bool use[M_COUNT]) {
    const char *s = tess_config_string(c, "sweep.methods");
    memset(use, 0, M_COUNT * sizeof *use);
    int n = 0;
    while (*s) {
        size_t len = strcspn(s, ",");
        int m = 0;
        while (m < M_NLOPT && !(strlen(zoapp_method_names[m]) == len && strncmp(s, zoapp_method_names[m], len) == 0))
            m++;
        TESS_REQUIRE(m < M_NLOPT, TESS_ERR_CONFIG,
                     "sweep.methods = '%s': unknown method '%.*s' (zo, zo_plain, fo, fo_plain)",
                     tess_config_string(c, "sweep.methods"), (int)len, s);
        use[m] = true;
        n++;
        s += len + (s[len] == ',');
    }
    TESS_REQUIRE(n > 0, TESS_ERR_CONFIG, "sweep.methods is empty");
    return TESS_OK;
}

/* Checks every rank makes alike on the same config (exit 78). */
static tess_status validate(const tess_config *c, int size) {
    const bool quadratic = tess_config_enum(c, "problem.kind") == ZOAPP_PROB_QUADRATIC;
    TESS_REQUIRE(!quadratic || tess_config_int(c, "problem.states") % 2 == 0, TESS_ERR_CONFIG,
                 "problem.states = %lld must be even for problem.kind = quadratic (antithetic "
                 "noise pairs)", (long long)tess_config_int(c, "problem.states"));
    TESS_REQUIRE(tess_config_real(c, "problem.mu") <= tess_config_real(c, "problem.L"),
                 TESS_ERR_CONFIG, "problem.mu = %g must not exceed problem.L = %g",
                 tess_config_real(c, "problem.mu"), tess_config_real(c, "problem.L"));
    const int kind = tess_config_enum(c, "problem.kind");
    TESS_REQUIRE((kind != ZOAPP_PROB_RIDGE && kind != ZOAPP_PROB_LOGISTIC) ||
                     tess_config_real(c, "problem.lambda") > 0.0,
                 TESS_ERR_CONFIG, "problem.lambda = 0 must be > 0 for problem.kind = %s (strong "
                 "convexity)", tess_config_string(c, "problem.kind"));
    const int64_t shard = tess_config_int(c, "dist.shard");
    const bool sweep = tess_config_enum(c, "run.mode") == ZOAPP_MODE_SWEEP;
    const int64_t group = sweep ? tess_config_int(c, "sweep.group") : size;
    TESS_REQUIRE(size % group == 0, TESS_ERR_CONFIG,
                 "sweep.group = %lld must divide the number of ranks (%d)", (long long)group, size);
    TESS_REQUIRE(group % shard == 0, TESS_ERR_CONFIG,
                 "dist.shard = %lld must divide the ranks of a run (%lld)", (long long)shard,
                 (long long)group);
    TESS_REQUIRE(shard == 1 || quadratic,
                 TESS_ERR_CONFIG, "dist.shard = %lld: only the quadratic problem shards x",
                 (long long)shard);
    TESS_REQUIRE(shard <= tess_config_int(c, "problem.dim"), TESS_ERR_CONFIG,
                 "dist.shard = %lld exceeds problem.dim = %lld", (long long)shard,
                 (long long)tess_config_int(c, "problem.dim"));
    double v[ZOAPP_MAX_LIST];
    int n;
    bool use[M_COUNT];
    TESS_CHECK(zoapp_parse_list(c, "sweep.dims", "problem.dim", v, &n));
    TESS_CHECK(zoapp_parse_list(c, "sweep.taus", "chain.tau", v, &n));
    TESS_CHECK(zoapp_parse_methods(c, use));
    TESS_REQUIRE(!sweep || shard == 1 || (!use[M_FO] && !use[M_FO_PLAIN]), TESS_ERR_CONFIG,
                 "sweep.methods = '%s' with dist.shard = %lld: the first-order methods need a "
                 "replicated x (dist.shard = 1)", tess_config_string(c, "sweep.methods"),
                 (long long)shard);
    return TESS_OK;
}

zoapp_problem_config zoapp_problem_options(const tess_config *c, int64_t d) {
    uint32_t seed = (uint32_t)tess_config_int(c, "run.seed");
    return (zoapp_problem_config){.kind = (zoapp_problem_kind)tess_config_enum(c, "problem.kind"),
                                  .d = d, .nstates = tess_config_int(c, "problem.states"),
                                  .mu = tess_config_real(c, "problem.mu"),
                                  .L = tess_config_real(c, "problem.L"),
                                  .sigma = tess_config_real(c, "problem.sigma"),
                                  .lambda = tess_config_real(c, "problem.lambda"),
                                  .key = {.seed = seed, .stream = 3}};
}

/* The automatic zero-order step: eta_scale / (L d) for smooth problems, eta_scale / d for l1. */
static double auto_eta(const tess_config *c, const zoapp_problem *p) {
    double eta = tess_config_real(c, "optim.eta");
    if (eta > 0.0) return eta;
    double s = tess_config_real(c, "optim.eta_scale");
    if (p->cfg.kind == ZOAPP_PROB_L1) return s / (double)p->cfg.d;
    return s / (p->smooth_L * (double)p->cfg.d);
}

/* B (m + 2^-m) with MLMC (m = floor(log2 M)), else B. */
double zoapp_expected_k(const tess_zo_config *z) {
    if (z->batching != TESS_ZO_BATCH_MLMC) return (double)z->batch;
    int m = 0;
    while (((int64_t)2 << m) <= z->cap) m++;
    return (double)z->batch * ((double)m + pow(2.0, -m));
}

tess_zo_config zoapp_method_options(const tess_config *c, const zoapp_problem *p,
                                    zoapp_method_id m, uint32_t seed, int64_t budget) {
    tess_zo_config z = {
        .estimator = (tess_zo_estimator)tess_config_enum(c, "optim.estimator"),
        .dir = (tess_zo_dir)tess_config_enum(c, "optim.dir"),
        .batching = (tess_zo_batching)tess_config_enum(c, "optim.batching"),
        .baseline = (tess_zo_baseline)tess_config_enum(c, "optim.baseline"),
        .gamma = tess_config_real(c, "optim.gamma"),
        .batch = tess_config_int(c, "optim.batch"),
        .cap = tess_config_int(c, "optim.cap"),
        .rule = (tess_zo_rule)tess_config_enum(c, "optim.rule"),
        .eta = auto_eta(c, p),
        .mu = p->strong_mu,
        .k_switch = tess_config_int(c, "optim.k_switch"),
        .radius = tess_config_real(c, "optim.radius"),
        .average = tess_config_bool(c, "optim.average"),
        .key = {.seed = seed, .stream = 11}};
    if (z.radius == 0.0 && p->cfg.kind == ZOAPP_PROB_L1) z.radius = 2.0 * sqrt(p->xstar_norm2) + 1.0;
    if (m == M_ZO_PLAIN || m == M_FO_PLAIN) z.batching = TESS_ZO_BATCH_FIXED;
    if (m == M_FO || m == M_FO_PLAIN) {
        z.estimator = TESS_ZO_EST_FIRST_ORDER;
        if (tess_config_real(c, "baselines.fo_eta") > 0.0) z.eta = tess_config_real(c, "baselines.fo_eta");
    }
    if (z.rule == TESS_ZO_RULE_SWITCH && z.k_switch == 0)
        z.k_switch = (int64_t)((double)budget / (2.0 * zoapp_expected_k(&z)));
    return z;
}

int64_t zoapp_chain_cap(const tess_config *c) {
    int64_t b = tess_config_int(c, "optim.batch"), m = tess_config_int(c, "optim.cap"), k = b;
    while (k * 2 <= b * m) k *= 2;
    return 2 * k;
}

tess_status zoapp_gnuplot(const char *script) {
    TESS_REQUIRE(system("command -v gnuplot >/dev/null 2>&1") == 0, TESS_ERR_NOINPUT,
                 "gnuplot not found (install gnuplot-nox)");
    FILE *gp = popen("gnuplot", "w");
    TESS_REQUIRE(gp, TESS_ERR_IO, "cannot start gnuplot");
    fputs(script, gp);
    int rc = pclose(gp);
    TESS_REQUIRE(rc == 0, TESS_ERR_IO, "gnuplot failed (status %d)", rc);
    return TESS_OK;
}


static tess_status zo_setup(tess_run *run, void *ctx) {
    zoapp *a = ctx;
    const tess_config *c = tess_run_config(run);
    TESS_CHECK(validate(c, tess_run_group(run)->size));
    /* configuration errors were found alike on every rank; from here a failure may be local */
    tess_run_local_from_here(run);
    a->sweep = tess_config_enum(c, "run.mode") == ZOAPP_MODE_SWEEP;
    if (a->sweep) TESS_CHECK(zoapp_sweep_setup(run, a));
    else TESS_CHECK(zoapp_compare_setup(run, a));
    return TESS_OK;
}

static tess_status zo_restored(tess_run *run, void *ctx) {
    zoapp *a = ctx;
    if (!a->sweep) TESS_CHECK(zoapp_compare_restored(run, a));
    return TESS_OK;
}

static tess_status zo_step(tess_run *run, void *ctx, int64_t step, tess_run_step_out *out) {
    zoapp *a = ctx;
    if (a->sweep) TESS_CHECK(zoapp_sweep_step(run, a, step, out));
    else TESS_CHECK(zoapp_compare_step(run, a, out));
    return TESS_OK;
}

static tess_status zo_finish(tess_run *run, void *ctx) {
    zoapp *a = ctx;
    if (a->sweep) TESS_CHECK(zoapp_sweep_finish(run, a));
    else TESS_CHECK(zoapp_compare_finish(run, a));
    return TESS_OK;
}

static void zo_destroy(void *ctx) {
    zoapp *a = ctx;
    zoapp_compare_free(&a->cmp);
    zoapp_sweep_free(&a->swp);
    zoapp_chain_free(&a->chain);
    zoapp_problem_free(&a->prob);
    tess_mesh_destroy(&a->mesh);
    tess_group_destroy(&a->group);
}

static const tess_run_app zo_app = {
    .name = "zo", .unit = "iteration", .rate_unit = "samples", .default_dir = "runs/zo",
    .sections = sections, .nsections = sizeof sections / sizeof sections[0],
    .run_opts = run_opts, .nrun_opts = sizeof run_opts / sizeof run_opts[0],
    .setup = zo_setup, .restored = zo_restored, .step = zo_step, .finish = zo_finish,
    .destroy = zo_destroy};

int main(int argc, char **argv) {
    zoapp app = {0};
    return tess_run_main(&zo_app, &app, argc, argv);
}

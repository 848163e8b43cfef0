/* zo - the zero-order optimizer for Markovian noise (src/optim/zo.h) on problems with exact
 * minimisers, against first-order SGD on the same Markov samples, zero-order SGD without the
 * randomised batching, and an NLopt derivative-free solver (docs/zo.md).
 *
 *   run.mode = compare  (default, seconds) one problem and chain; every method with the same
 *                       budget of chain samples; metrics.csv holds the error trajectories.
 *   run.mode = sweep    (minutes) the tau x d grid of docs/zo.md for ZO and FO, with and without
 *                       MLMC, several seeds; metrics.csv holds the medians, runs.csv every run.
 *
 * Ranks: the run communicator is a mesh eval x shard (dist.shard ranks split the coordinates of
 * x, the others split the function evaluations of each iteration; zo.h). In the sweep, runs are
 * dealt back and forth (0 1 1 0 ...) to groups of sweep.group ranks (configuration
 * parallelism), each group a mesh of its own. Outputs under run.dir: config.ini, metrics.csv, results.md, runs.csv (sweep),
 * plots/ (PNG files).
 *
 * Checkpoints (compare mode; docs/zo.md 7): every ckpt.every iterations, after the last one, and
 * when SIGUSR1, SIGTERM or SIGINT reaches any rank (all ranks stop after the same iteration,
 * save it and exit 75); --resume auto continues bitwise. The sweep does not checkpoint.
 */
#include <math.h>
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "chain.h"         /* zoapp_chain_* */
#include "core/config.h"   /* tess_config_* */
#include "core/log.h"      /* tess_log_* */
#include "core/mpicheck.h" /* TESS_MPI_CHECK */
#include "core/runtime.h"  /* tess_runtime_* */
#include "core/signals.h"  /* tess_signals_install, tess_signals_stop_requested */
#include "core/timer.h"    /* tess_timer_now */
#include "par/coll.h"     /* tess_par_allreduce_f64 */
#include "par/layout.h"   /* tess_par_block_range */
#include "par/mesh.h"     /* tess_mesh_*, tess_group_* */
#include "io/ckpt.h"       /* tess_ckpt_* */
#include "io/metrics.h"    /* tess_metrics_* */
#include "io/rundir.h"     /* tess_rundir_prepare */
#include "nn/state.h"      /* tess_state_* */
#include "optim/zo.h"      /* tess_zo_* */
#include "problem.h"       /* zoapp_problem_* */
#include "runner.h"        /* zoapp_run_* */

static const tess_opt run_opts[] = {
    TESS_OPT_CHOICE("mode", "compare", "compare|sweep",
                    "compare: one problem, all methods (seconds); sweep: tau x d grid (minutes)"),
    TESS_OPT_STRING("dir", "runs/zo", "output directory (config.ini, metrics.csv, plots/)"),
    TESS_OPT_INT("seed", 1234, 0, UINT32_MAX, "seed of the problem, the chain and the directions"),
    TESS_OPT_BOOL("plots", true, "draw PNG plots with gnuplot at the end"),
    TESS_OPT_INT("stop_at", 0, 0, INT64_MAX / 4,
                 "test hook: stop as on a signal after this many iterations (0: never)"),
};
static const tess_opt ckpt_opts[] = {
    TESS_OPT_STRING("dir", "", "checkpoint directory (empty: <run.dir>/checkpoints)"),
    TESS_OPT_INT("every", 0, 0, INT64_MAX / 4,
                 "iterations (over all methods) between checkpoints (0: only at_end)"),
    TESS_OPT_INT("keep", 3, 0, 1000000, "newest checkpoints kept (0: all)"),
    TESS_OPT_BOOL("at_end", true, "checkpoint after the last iteration"),
    TESS_OPT_STRING("resume", "", "'' (start fresh), auto (newest valid in ckpt.dir) or a file; "
                    "also --resume"),
};
static const tess_opt problem_opts[] = {
    TESS_OPT_CHOICE("kind", "quadratic", ZOAPP_PROB_CHOICES, "test problem (docs/zo.md 3.2)"),
    TESS_OPT_INT("dim", 64, 1, (int64_t)1 << 40, "dimension d"),
    TESS_OPT_INT("states", 64, 1, INT32_MAX, "states n of the chain (data rows)"),
    TESS_OPT_REAL("mu", 1.0, 1e-12, 1e12, "strong convexity (quadratic, l1)"),
    TESS_OPT_REAL("L", 10.0, 1e-12, 1e12, "largest curvature (quadratic)"),
    TESS_OPT_REAL("sigma", 1.0, 0.0, 1e6, "noise level"),
    TESS_OPT_REAL("lambda", 0.1, 0.0, 1e6, "l2 regularisation (ridge, logistic)"),
};
static const tess_opt chain_opts[] = {
    TESS_OPT_CHOICE("kind", "sticky", ZOAPP_CHAIN_CHOICES, "Markov noise source (docs/zo.md 3.1)"),
    TESS_OPT_REAL("tau", 16.0, 1.0, 1e12, "mixing time tau (>= 1)"),
};
static const tess_opt optim_opts[] = {
    TESS_OPT_CHOICE("estimator", "two_point", TESS_ZO_EST_CHOICES, "gradient estimator"),
    TESS_OPT_CHOICE("dir", "sphere", TESS_ZO_DIR_CHOICES, "random directions"),
    TESS_OPT_CHOICE("batching", "mlmc", TESS_ZO_BATCH_CHOICES, "randomised multilevel or fixed"),
    TESS_OPT_CHOICE("baseline", "residual", TESS_ZO_BASELINE_CHOICES, "one-point baseline"),
    TESS_OPT_REAL("gamma", 1e-3, 0.0, 1e6, "smoothing radius gamma (> 0)"),
    TESS_OPT_INT("batch", 1, 1, (int64_t)1 << 21, "base batch B (>= 1)"),
    TESS_OPT_INT("cap", 256, 1, (int64_t)1 << 21, "MLMC batch cap M (>= 1)"),
    TESS_OPT_CHOICE("rule", "constant", TESS_ZO_RULE_CHOICES, "step-size rule"),
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
    TESS_OPT_REAL("eps", 0.02, 0.0, 1e6, "target of ||x - x*||^2/||x*||^2 for calls-to-eps"),
    TESS_OPT_INT("points", 40, 2, ZOAPP_MAX_POINTS, "trajectory points (log-spaced samples)"),
};
static const tess_opt baselines_opts[] = {
    TESS_OPT_BOOL("first_order", true, "first-order SGD, same batching, same samples"),
    TESS_OPT_BOOL("plain", true,
                  "zero-order SGD without MLMC (K = B samples; off when optim.batching = fixed)"),
    TESS_OPT_REAL("fo_eta", 0.0, 0.0, 1e6, "first-order step size; 0: the zero-order one"),
    TESS_OPT_CHOICE("nlopt", "bobyqa", "bobyqa|neldermead|none", "NLopt derivative-free solver"),
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
    TESS_OPT_REAL("eps", 3e-3, 0.0, 1e6, "target of the relative error for calls-to-eps"),
};
static const tess_config_section sections[] = {
    TESS_CONFIG_SECTION("run", run_opts),         TESS_CONFIG_SECTION("problem", problem_opts),
    TESS_CONFIG_SECTION("chain", chain_opts),     TESS_CONFIG_SECTION("optim", optim_opts),
    TESS_CONFIG_SECTION("budget", budget_opts),   TESS_CONFIG_SECTION("baselines", baselines_opts),
    TESS_CONFIG_SECTION("dist", dist_opts),       TESS_CONFIG_SECTION("sweep", sweep_opts),
    TESS_CONFIG_SECTION("ckpt", ckpt_opts),
};

typedef enum { M_ZO = 0, M_ZO_PLAIN, M_FO, M_FO_PLAIN, M_NLOPT, M_COUNT } method;
static const char *const method_names[M_COUNT] = {"zo", "zo_plain", "fo", "fo_plain", "nlopt"};
static const char *const method_titles[M_COUNT] = {
    "zero-order, MLMC", "zero-order, fixed batch", "first-order, MLMC", "first-order, fixed batch",
    "NLopt"};

/* Title of method m under the options: zo and fo follow optim.batching. */
static const char *method_title(const tess_config *c, method m) {
    const bool fixed = tess_config_choice(c, "optim.batching") == TESS_ZO_BATCH_FIXED;
    if (m == M_ZO && fixed) return method_titles[M_ZO_PLAIN];
    if (m == M_FO && fixed) return method_titles[M_FO_PLAIN];
    return method_titles[m];
}

enum { MAX_LIST = 32 };

typedef struct zock zock; /* a checkpoint of the compare mode (below) */
static void zock_free(zock *k);

typedef struct {
    tess_config *cfg;
    tess_mesh *mesh;
    tess_group *world; /* sweep: all ranks, for the results */
    tess_group *group; /* sweep: this rank's run group */
    zoapp_problem prob;
    zoapp_chain chain;
    tess_metrics csv;
    bool stopped; /* a stop signal ended the run early (after a checkpoint, if it had begun) */
    zock *ck;     /* compare mode: the checkpoint staging */
} app;

static void app_free(app *a) {
    if (a->ck) zock_free(a->ck);
    free(a->ck);
    tess_metrics_close(&a->csv);
    zoapp_chain_free(&a->chain);
    zoapp_problem_free(&a->prob);
    tess_mesh_destroy(&a->mesh);
    tess_group_destroy(&a->group);
    tess_group_destroy(&a->world);
    tess_config_destroy(&a->cfg);
}

/* Parse a comma-separated list of numbers >= 1 from option key. TESS_ERR_CONFIG naming it. */
static tess_status parse_list(const tess_config *c, const char *key, double *v, int *n) {
    const char *s = tess_config_string(c, key);
    *n = 0;
    while (*s) {
        char *end;
        double x = strtod(s, &end);
        TESS_REQUIRE(end != s && (*end == ',' || *end == '\0') && isfinite(x) && x >= 1.0,
                     TESS_ERR_CONFIG, "%s = '%s': expected comma-separated numbers >= 1", key,
                     tess_config_string(c, key));
        TESS_REQUIRE(*n < MAX_LIST, TESS_ERR_CONFIG, "%s: more than %d values", key, MAX_LIST);
        v[(*n)++] = x;
        s = *end == ',' ? end + 1 : end;
    }
    TESS_REQUIRE(*n > 0, TESS_ERR_CONFIG, "%s is empty", key);
    return TESS_OK;
}

static tess_status parse_methods(const tess_config *c, bool use[M_COUNT]) {
    const char *s = tess_config_string(c, "sweep.methods");
    memset(use, 0, M_COUNT * sizeof *use);
    int n = 0;
    while (*s) {
        size_t len = strcspn(s, ",");
        int m = 0;
        while (m < M_NLOPT && !(strlen(method_names[m]) == len && strncmp(s, method_names[m], len) == 0))
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
    TESS_REQUIRE(tess_config_real(c, "optim.gamma") > 0.0, TESS_ERR_CONFIG,
                 "optim.gamma = %g: the smoothing radius must be > 0",
                 tess_config_real(c, "optim.gamma"));
    TESS_REQUIRE(tess_config_real(c, "budget.eps") > 0.0 && tess_config_real(c, "sweep.eps") > 0.0,
                 TESS_ERR_CONFIG, "budget.eps and sweep.eps must be > 0");
    const int64_t shard = tess_config_int(c, "dist.shard");
    const bool sweep = tess_config_choice(c, "run.mode") == 1;
    const int64_t group = sweep ? tess_config_int(c, "sweep.group") : size;
    TESS_REQUIRE(size % group == 0, TESS_ERR_CONFIG,
                 "sweep.group = %lld must divide the number of ranks (%d)", (long long)group, size);
    TESS_REQUIRE(group % shard == 0, TESS_ERR_CONFIG,
                 "dist.shard = %lld must divide the ranks of a run (%lld)", (long long)shard,
                 (long long)group);
    TESS_REQUIRE(shard == 1 || tess_config_choice(c, "problem.kind") == ZOAPP_PROB_QUADRATIC,
                 TESS_ERR_CONFIG, "dist.shard = %lld: only the quadratic problem shards x",
                 (long long)shard);
    TESS_REQUIRE(shard <= tess_config_int(c, "problem.dim"), TESS_ERR_CONFIG,
                 "dist.shard = %lld exceeds problem.dim = %lld", (long long)shard,
                 (long long)tess_config_int(c, "problem.dim"));
    double v[MAX_LIST];
    int n;
    bool use[M_COUNT];
    TESS_CHECK(parse_list(c, "sweep.dims", v, &n));
    TESS_CHECK(parse_list(c, "sweep.taus", v, &n));
    TESS_CHECK(parse_methods(c, use));
    TESS_REQUIRE(!sweep || shard == 1 || (!use[M_FO] && !use[M_FO_PLAIN]), TESS_ERR_CONFIG,
                 "sweep.methods = '%s' with dist.shard = %lld: the first-order methods need a "
                 "replicated x (dist.shard = 1)", tess_config_string(c, "sweep.methods"),
                 (long long)shard);
    return TESS_OK;
}

static zoapp_problem_config problem_config(const tess_config *c, int64_t d) {
    uint32_t seed = (uint32_t)tess_config_int(c, "run.seed");
    return (zoapp_problem_config){.kind = (zoapp_problem_kind)tess_config_choice(c, "problem.kind"),
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

/* Expected samples of an iteration: B (m + 2^-m) with MLMC (m = floor(log2 M)), else B. */
static double expected_k(const tess_zo_config *z) {
    if (z->batching != TESS_ZO_BATCH_MLMC) return (double)z->batch;
    int m = 0;
    while (((int64_t)2 << m) <= z->cap) m++;
    return (double)z->batch * ((double)m + pow(2.0, -m));
}

/* The optimizer config of method m (not NLopt) from the options. */
static tess_zo_config method_config(const tess_config *c, const zoapp_problem *p, method m,
                                    uint32_t seed, int64_t budget) {
    tess_zo_config z = {
        .estimator = (tess_zo_estimator)tess_config_choice(c, "optim.estimator"),
        .dir = (tess_zo_dir)tess_config_choice(c, "optim.dir"),
        .batching = (tess_zo_batching)tess_config_choice(c, "optim.batching"),
        .baseline = (tess_zo_baseline)tess_config_choice(c, "optim.baseline"),
        .gamma = tess_config_real(c, "optim.gamma"),
        .batch = tess_config_int(c, "optim.batch"),
        .cap = tess_config_int(c, "optim.cap"),
        .rule = (tess_zo_rule)tess_config_choice(c, "optim.rule"),
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
        z.k_switch = (int64_t)((double)budget / (2.0 * expected_k(&z)));
    return z;
}

/* Max chain steps of one iteration over every method the run may use. */
static int64_t chain_cap(const tess_config *c) {
    int64_t b = tess_config_int(c, "optim.batch"), m = tess_config_int(c, "optim.cap"), k = b;
    while (k * 2 <= b * m) k *= 2;
    return 2 * k;
}

/* Run gnuplot on a script. Rank 0; failures are reported as warnings by the caller. */
static tess_status gnuplot(const char *script) {
    TESS_REQUIRE(system("command -v gnuplot >/dev/null 2>&1") == 0, TESS_ERR_NOINPUT,
                 "gnuplot not found (install gnuplot-nox)");
    FILE *gp = popen("gnuplot", "w");
    TESS_REQUIRE(gp, TESS_ERR_IO, "cannot start gnuplot");
    fputs(script, gp);
    int rc = pclose(gp);
    TESS_REQUIRE(rc == 0, TESS_ERR_IO, "gnuplot failed (status %d)", rc);
    return TESS_OK;
}

/* ---- checkpoints (compare mode) ------------------------------------------------------------ */

enum { RES_FIELDS = 9, TRAJ_FIELDS = 4 * ZOAPP_MAX_POINTS };
enum { PG_METHOD = 0, PG_ITERS, PG_SAMPLES, PG_J, PG_N }; /* run/progress */
enum { A_X = 0, A_XBAR, A_CNT, A_SCA, A_CHAIN_I, A_CHAIN_Y, A_PG, A_SUMS, A_TRAJ_N, A_TRAJ, A_RES,
       A_COUNT };

/* What a zo checkpoint holds, staged in buffers of its own: the optimizer of the method running
 * (zo/x, zo/xbar when averaging, zo/counters, zo/scalars), the chain (chain/state = t, z;
 * chain/y), where the run is (run/progress = method, iterations, samples, trajectory points;
 * run/sums = the floor sums and bytes sent) and every method's trajectory and results (wall
 * time aside). step = iterations over all methods. */
struct zock {
    tess_state *state; /* the staging buffers below, by name */
    tess_ckpt_state st;
    double *x, *xbar, sca[TESS_ZO_NSCA], chain_y, sums[3], *traj, res[M_COUNT * RES_FIELDS];
    int64_t cnt[TESS_ZO_NCNT], chain_i[2], pg[PG_N], traj_n[M_COUNT];
    char dir[4200];
    const tess_config *cfg;
    const tess_group *g; /* all ranks (the mesh's) */
    MPI_Comm comm;
    int64_t iters_before; /* iterations of the methods finished before the running one */
    int64_t budget, stop_at, every, keep;
    bool restore;         /* the next start hook restores the staged state */
    bool stopped;
};

static void zock_free(zock *k) {
    tess_state_destroy(&k->state);
    free(k->x);
    free(k->xbar);
    free(k->traj);
}

/* x (and xbar) of dimension d, this rank's block under layout xl (n elements). */
static tess_status zock_init(zock *k, tess_config *c, const tess_group *g, int64_t d,
                             const tess_layout *xl, int64_t n, bool average, uint64_t seed,
                             int64_t budget) {
    memset(k, 0, sizeof *k);
    k->cfg = c;
    k->g = g;
    k->comm = g->comm;
    k->budget = budget;
    k->stop_at = tess_config_int(c, "run.stop_at");
    k->every = tess_config_int(c, "ckpt.every");
    k->keep = tess_config_int(c, "ckpt.keep");
    k->x = calloc((size_t)(n > 0 ? n : 1), sizeof *k->x);
    k->xbar = calloc((size_t)(n > 0 ? n : 1), sizeof *k->xbar);
    k->traj = calloc((size_t)(M_COUNT * TRAJ_FIELDS), sizeof *k->traj);
    TESS_REQUIRE(k->x && k->xbar && k->traj, TESS_ERR_MEM, "zo: out of memory for checkpoints");
    const tess_layout rep = tess_layout_replicated();
    const struct {
        const char *name;
        tess_dtype dtype;
        int64_t n;
        const tess_layout *l;
        void *data;
    } e[A_COUNT] = {{"zo/x", TESS_F64, d, xl, k->x},
                    {"zo/xbar", TESS_F64, d, xl, k->xbar},
                    {"zo/counters", TESS_I64, TESS_ZO_NCNT, &rep, k->cnt},
                    {"zo/scalars", TESS_F64, TESS_ZO_NSCA, &rep, k->sca},
                    {"chain/state", TESS_I64, 2, &rep, k->chain_i},
                    {"chain/y", TESS_F64, 1, &rep, &k->chain_y},
                    {"run/progress", TESS_I64, PG_N, &rep, k->pg},
                    {"run/sums", TESS_F64, 3, &rep, k->sums},
                    {"run/traj_n", TESS_I64, M_COUNT, &rep, k->traj_n},
                    {"run/traj", TESS_F64, M_COUNT * TRAJ_FIELDS, &rep, k->traj},
                    {"run/results", TESS_F64, M_COUNT * RES_FIELDS, &rep, k->res}};
    TESS_CHECK(tess_state_create(&k->state));
    for (int i = 0; i < A_COUNT; i++)
        if (i != A_XBAR || average)
            TESS_CHECK(tess_state_add(k->state, e[i].name, e[i].dtype, 1, &e[i].n, e[i].l,
                                      e[i].data));
    k->st = (tess_ckpt_state){.state = k->state, .seed = seed,
                              .config_text = tess_config_resolved_text(c), .app = "zo"};
    const char *dir = tess_config_string(c, "ckpt.dir");
    if (dir[0])
        snprintf(k->dir, sizeof k->dir, "%s", dir);
    else
        snprintf(k->dir, sizeof k->dir, "%s/checkpoints", tess_config_string(c, "run.dir"));
    return TESS_OK;
}

/* Trajectory and results of method m into / out of the staging buffers. */
static void stage_method(zock *k, int m, const zoapp_traj *t, const zoapp_result *r) {
    double *q = k->traj + (int64_t)m * TRAJ_FIELDS;
    memcpy(q, t->samples, sizeof t->samples);
    memcpy(q + ZOAPP_MAX_POINTS, t->evals, sizeof t->evals);
    memcpy(q + 2 * ZOAPP_MAX_POINTS, t->err, sizeof t->err);
    memcpy(q + 3 * ZOAPP_MAX_POINTS, t->gap, sizeof t->gap);
    k->traj_n[m] = t->n;
    const double v[RES_FIELDS] = {r->floor, r->n_eps, r->evals_eps, r->final_err, r->final_gap,
                                  r->comm_bytes_per_iter, (double)r->iters, (double)r->samples,
                                  (double)r->evals};
    memcpy(k->res + m * RES_FIELDS, v, sizeof v);
}

static void unstage_method(const zock *k, int m, zoapp_traj *t, zoapp_result *r) {
    const double *q = k->traj + (int64_t)m * TRAJ_FIELDS, *v = k->res + m * RES_FIELDS;
    memcpy(t->samples, q, sizeof t->samples);
    memcpy(t->evals, q + ZOAPP_MAX_POINTS, sizeof t->evals);
    memcpy(t->err, q + 2 * ZOAPP_MAX_POINTS, sizeof t->err);
    memcpy(t->gap, q + 3 * ZOAPP_MAX_POINTS, sizeof t->gap);
    t->n = k->traj_n[m];
    *r = (zoapp_result){.floor = v[0], .n_eps = v[1], .evals_eps = v[2], .final_err = v[3],
                        .final_gap = v[4], .comm_bytes_per_iter = v[5], .iters = (int64_t)v[6],
                        .samples = (int64_t)v[7], .evals = (int64_t)v[8]};
}

/* The optimizer's state (tess_zo_describe) and the chain into the staging buffers (to == true)
 * or back. */
static tess_status stage_optimizer(zock *k, tess_zo *zo, zoapp_chain *ch, bool to) {
    tess_state *v = NULL;
    tess_status s = tess_state_create(&v);
    if (s == TESS_OK) s = tess_zo_describe(zo, v, "zo");
    for (int64_t i = 0; s == TESS_OK && i < tess_state_count(v); i++) {
        const tess_state_entry *e = tess_state_get(v, i);
        void *buf = strcmp(e->name, "zo/x") == 0      ? (void *)k->x
                    : strcmp(e->name, "zo/xbar") == 0 ? (void *)k->xbar
                    : strcmp(e->name, "zo/counters") == 0 ? (void *)k->cnt
                                                          : (void *)k->sca;
        const size_t bytes = (size_t)e->local_count * 8;
        if (to)
            memcpy(buf, e->data, bytes);
        else
            memcpy(e->data, buf, bytes);
    }
    tess_state_destroy(&v);
    TESS_CHECK(s);
    if (to) {
        k->chain_i[0] = ch->t;
        k->chain_i[1] = ch->z;
        k->chain_y = ch->y;
    } else {
        ch->t = k->chain_i[0];
        ch->z = k->chain_i[1];
        ch->y = k->chain_y;
    }
    return TESS_OK;
}

static tess_status zock_save(zock *k, int64_t step) {
    k->st.step = step;
    TESS_CHECK(tess_ckpt_save(k->g, k->dir, &k->st, k->keep, NULL, 0));
    return TESS_OK;
}

static tess_status zock_start(void *ctx, tess_zo *zo, zoapp_chain *ch, zoapp_progress *pg,
                              zoapp_traj *traj, zoapp_result *res) {
    zock *k = ctx;
    if (!k->restore) return TESS_OK;
    k->restore = false;
    TESS_CHECK(stage_optimizer(k, zo, ch, false));
    const int m = (int)k->pg[PG_METHOD];
    unstage_method(k, m, traj, res);
    *pg = (zoapp_progress){.iters = k->pg[PG_ITERS], .samples = k->pg[PG_SAMPLES],
                           .j = k->pg[PG_J], .fsum = k->sums[0], .fw = k->sums[1],
                           .comm = k->sums[2]};
    return TESS_OK;
}

/* After every iteration: the stop vote (MAX over all ranks: a signal on any rank, or run.stop_at),
 * periodic checkpoints, and the checkpoint of a stop. The method's last iteration stages the
 * optimizer for the final checkpoint. */
static tess_status zock_boundary(void *ctx, tess_zo *zo, const zoapp_chain *ch,
                                 const zoapp_progress *pg, const zoapp_traj *traj,
                                 const zoapp_result *res, bool *stop) {
    zock *k = ctx;
    const int64_t step = k->iters_before + pg->iters;
    int vote = tess_signals_stop_requested() || step == k->stop_at, any;
    TESS_MPI_CHECK(MPI_Allreduce(&vote, &any, 1, MPI_INT, MPI_MAX, k->comm));
    const bool last = pg->samples >= k->budget;
    const bool periodic = k->every > 0 && step % k->every == 0;
    *stop = any != 0;
    if (!periodic && !*stop && !last) return TESS_OK;
    TESS_CHECK(stage_optimizer(k, zo, (zoapp_chain *)ch, true));
    stage_method(k, (int)k->pg[PG_METHOD], traj, res);
    k->pg[PG_ITERS] = pg->iters;
    k->pg[PG_SAMPLES] = pg->samples;
    k->pg[PG_J] = pg->j;
    k->sums[0] = pg->fsum;
    k->sums[1] = pg->fw;
    k->sums[2] = pg->comm;
    if (periodic || *stop) TESS_CHECK(zock_save(k, step));
    if (*stop) {
        tess_log_info("zo: stop requested: checkpoint after iteration %lld, exiting %d (resume "
                      "with --resume auto)", (long long)step, TESS_EXIT_STOPPED);
        k->stopped = true;
    }
    return TESS_OK;
}

/* ---- compare mode -------------------------------------------------------------------------- */

static tess_status compare_plots(const tess_config *c, const char *dir, const bool *ran, bool l1) {
    char s[8192];
    int n = snprintf(s, sizeof s,
                     "set terminal pngcairo size 900,560 noenhanced\nset datafile separator ','\n"
                     "set logscale xy\nset grid\nset key outside right\nset format x '%%.0e'\n"
                     "set output '%s/plots/error.png'\nset title 'relative error ||x-x*||^2/||x*||^2'\n"
                     "set xlabel 'chain samples (oracle calls)'\nplot ",
                     dir);
    const char *sep = "";
    for (int m = 0; m < M_COUNT; m++)
        if (ran[m]) {
            n += snprintf(s + n, sizeof s - (size_t)n,
                          "%s'%s/metrics.csv' using 1:'%s_err' with lines lw 2 title '%s'", sep, dir,
                          method_names[m], method_title(c, (method)m));
            sep = ", ";
        }
    n += snprintf(s + n, sizeof s - (size_t)n,
                  "\nset output '%s/plots/error_cost.png'\nset title 'relative error against cost "
                  "(ZO: evaluations; FO: gradient calls x d)'\nset xlabel 'cost in function "
                  "evaluations'\nplot ",
                  dir);
    sep = "";
    for (int m = 0; m < M_COUNT; m++)
        if (ran[m]) {
            n += snprintf(s + n, sizeof s - (size_t)n,
                          "%s'%s/metrics.csv' using '%s_cost':'%s_err' with lines lw 2 title '%s'",
                          sep, dir, method_names[m], method_names[m], method_title(c, (method)m));
            sep = ", ";
        }
    if (l1) {
        n += snprintf(s + n, sizeof s - (size_t)n,
                      "\nset output '%s/plots/gap.png'\nset title 'f(x) - f*'\nset xlabel 'chain "
                      "samples'\nplot ",
                      dir);
        sep = "";
        for (int m = 0; m < M_COUNT; m++)
            if (ran[m]) {
                n += snprintf(s + n, sizeof s - (size_t)n,
                              "%s'%s/metrics.csv' using 1:'%s_gap' with lines lw 2 title '%s'", sep,
                              dir, method_names[m], method_title(c, (method)m));
                sep = ", ";
            }
    }
    snprintf(s + n, sizeof s - (size_t)n, "\n");
    return gnuplot(s);
}

static tess_status compare(app *a, const tess_runtime *rt, bool *collective) {
    const tess_config *c = a->cfg;
    const char *dir = tess_config_string(c, "run.dir");
    const uint32_t seed = (uint32_t)tess_config_int(c, "run.seed");
    const int64_t d = tess_config_int(c, "problem.dim"), shard = tess_config_int(c, "dist.shard");
    const tess_mesh_axis axes[2] = {{"eval", TESS_MESH_REST}, {"shard", (int)shard}};
    TESS_CHECK(tess_mesh_create(rt->comm, 2, axes, &a->mesh));
    const tess_group *eval = tess_mesh_axis_group(a->mesh, 0), *sh = tess_mesh_axis_group(a->mesh, 1);
    int64_t lo, hi;
    tess_par_block_range(d, sh->size, sh->rank, &lo, &hi);
    const zoapp_problem_config pc = problem_config(c, d);
    TESS_CHECK(zoapp_problem_create(&a->prob, &pc, lo, hi - lo, rt->comm));
    TESS_CHECK(zoapp_chain_init(&a->chain, (zoapp_chain_kind)tess_config_choice(c, "chain.kind"),
                                pc.nstates, tess_config_real(c, "chain.tau"),
                                (tess_rng_key){.seed = seed, .stream = 7}, chain_cap(c)));
    const bool l1 = pc.kind == ZOAPP_PROB_L1;
    const zoapp_run_opts ro = {.budget = tess_config_int(c, "budget.samples"),
                               .eps = tess_config_real(c, "budget.eps"),
                               .npoints = tess_config_int(c, "budget.points"), .fgap = l1};
    TESS_CHECK(tess_rundir_prepare(rt->comm, dir, tess_config_resolved_text(a->cfg)));
    tess_log_info("zo: %s d=%lld n=%lld, chain %s tau=%g; %d ranks = %d eval x %d shard; "
                  "||x*||^2 = %.4g, f* = %.6g%s",
                  tess_config_string(c, "problem.kind"), (long long)d, (long long)pc.nstates,
                  tess_config_string(c, "chain.kind"), tess_config_real(c, "chain.tau"), rt->size,
                  eval->size, sh->size, a->prob.xstar_norm2, a->prob.fstar,
                  pc.kind == ZOAPP_PROB_QUADRATIC ? " (diagonal, exact)" : " (ScaLAPACK)");
    if (pc.kind == ZOAPP_PROB_RIDGE) tess_log_info("zo: ridge x* residual %.2e", a->prob.check);
    if (pc.kind == ZOAPP_PROB_LOGISTIC)
        tess_log_info("zo: logistic x* after %d Newton steps, ||grad f|| = %.2e",
                      a->prob.newton_steps, a->prob.check);

    static zoapp_traj traj[M_COUNT];
    zoapp_result res[M_COUNT];
    bool ran[M_COUNT] = {false};
    const bool fixed = tess_config_choice(c, "optim.batching") == TESS_ZO_BATCH_FIXED;
    const bool want[M_COUNT] = {true, tess_config_bool(c, "baselines.plain") && !fixed,
                                tess_config_bool(c, "baselines.first_order") && sh->size == 1,
                                false, tess_config_choice(c, "baselines.nlopt") != 2 && sh->size == 1};
    if (sh->size > 1) tess_log_info("zo: sharded x: the first-order and NLopt baselines are skipped");
    /* Resume (ckpt.resume): the finished methods' results, the running method's optimizer, chain
     * and progress come back exactly; the verdict is the same on every rank. */
    a->ck = calloc(1, sizeof *a->ck);
    TESS_REQUIRE(a->ck, TESS_ERR_MEM, "zo: out of memory for checkpoints");
    zock *ck = a->ck;
    const tess_layout xl = tess_layout_sharded(0, sh->size, sh->rank);
    TESS_CHECK(zock_init(ck, a->cfg, tess_mesh_all(a->mesh), d, &xl, hi - lo,
                         tess_config_bool(c, "optim.average"), seed, ro.budget));
    bool resumed = false;
    tess_status rs = tess_ckpt_resume(ck->g, ck->dir, tess_config_string(c, "ckpt.resume"),
                                      &ck->st, &resumed, NULL, 0);
    if (rs == TESS_OK && resumed && ck->st.seed != seed)
        rs = tess_error_push(TESS_ERR_CONFIG, __FILE__, __LINE__, __func__,
                             "the checkpoint was written with run.seed = %llu, this run has %u",
                             (unsigned long long)ck->st.seed, seed);
    if (rs == TESS_OK && resumed &&
        (ck->pg[PG_METHOD] < 0 || ck->pg[PG_METHOD] > M_NLOPT ||
         (ck->pg[PG_METHOD] < M_NLOPT && !want[ck->pg[PG_METHOD]])))
        rs = tess_error_push(TESS_ERR_CONFIG, __FILE__, __LINE__, __func__,
                             "the checkpoint is inside method %lld, which this run does not run "
                             "(different baselines.* or optim.batching?)",
                             (long long)ck->pg[PG_METHOD]);
    if (rs != TESS_OK) {
        *collective = true;
        return tess_error_push(rs, __FILE__, __LINE__, __func__, "resuming from '%s'",
                               tess_config_string(c, "ckpt.resume"));
    }
    const int first = resumed ? (int)ck->pg[PG_METHOD] : 0;
    ck->iters_before = resumed ? ck->st.step - ck->pg[PG_ITERS] : 0;
    ck->restore = resumed && first < M_NLOPT;
    /* A stop during start-up ends the run before the first iteration, with nothing to save (the
     * MAX over ranks, so every rank takes the same branch). */
    int vote = tess_signals_stop_requested(), any;
    TESS_MPI_CHECK(MPI_Allreduce(&vote, &any, 1, MPI_INT, MPI_MAX, rt->comm));
    if (any) {
        tess_log_info("zo: stop requested before the first iteration: exiting %d without a "
                      "checkpoint", TESS_EXIT_STOPPED);
        a->stopped = true;
        return TESS_OK;
    }
    const zoapp_hooks hooks = {.start = zock_start, .boundary = zock_boundary, .ctx = ck};
    bool ran_now = false;
    for (int m = 0; m < M_NLOPT; m++) {
        if (!want[m]) continue;
        if (m < first) { /* finished before the checkpoint */
            unstage_method(ck, m, &traj[m], &res[m]);
            ran[m] = true;
            continue;
        }
        tess_zo_config zc = method_config(c, &a->prob, (method)m, seed, ro.budget);
        ck->pg[PG_METHOD] = m;
        bool stopped;
        TESS_CHECK(zoapp_run_method(&zc, &a->prob, &a->chain, eval, sh, &ro, &hooks, &traj[m],
                                    &res[m], &stopped));
        if (stopped) {
            a->stopped = true;
            return TESS_OK;
        }
        ran_now = true;
        ck->iters_before += res[m].iters;
        stage_method(ck, m, &traj[m], &res[m]);
        ran[m] = true;
        tess_log_info("zo: %-24s eta %.3g: %lld samples, %lld evals, %lld iterations in %.2f s; "
                      "floor %.3e, final %.3e, samples to eps %.4g, %.0f B/iteration sent",
                      method_title(c, (method)m), zc.eta, (long long)res[m].samples, (long long)res[m].evals,
                      (long long)res[m].iters, res[m].seconds, res[m].floor, res[m].final_err,
                      res[m].n_eps, res[m].comm_bytes_per_iter);
    }
    if (ran_now && tess_config_bool(c, "ckpt.at_end")) {
        ck->pg[PG_METHOD] = M_NLOPT;
        ck->pg[PG_ITERS] = ck->pg[PG_SAMPLES] = ck->pg[PG_J] = 0;
        ck->sums[0] = ck->sums[1] = ck->sums[2] = 0.0;
        TESS_CHECK(zock_save(ck, ck->iters_before));
    }
    int code = 0;
    if (want[M_NLOPT]) {
        /* NLopt is serial: rank 0 runs it; no collective happens until it is done */
        if (rt->rank == 0)
            TESS_CHECK(zoapp_run_nlopt(tess_config_string(c, "baselines.nlopt"),
                                       tess_config_real(c, "baselines.nlopt_step"),
                                       tess_config_int(c, "baselines.nlopt_max_evals"), &a->prob,
                                       &a->chain, &ro, &traj[M_NLOPT], &res[M_NLOPT], &code));
        ran[M_NLOPT] = true;
        tess_log_info("zo: NLopt %-18s %lld calls in %.2f s (code %d); final %.3e",
                      tess_config_string(c, "baselines.nlopt"), (long long)res[M_NLOPT].samples,
                      res[M_NLOPT].seconds, code, res[M_NLOPT].final_err);
    }
    if (rt->rank != 0) return TESS_OK;

    const char *cols[TESS_METRICS_MAX_COLS];
    char names[TESS_METRICS_MAX_COLS][32];
    int nc = 0;
    cols[nc++] = "samples";
    for (int m = 0; m < M_COUNT; m++) {
        if (!ran[m]) continue;
        const char *suf[3] = {"err", "cost", "gap"};
        for (int k = 0; k < (l1 ? 3 : 2); k++) {
            snprintf(names[nc], sizeof names[nc], "%s_%s", method_names[m], suf[k]);
            cols[nc] = names[nc];
            nc++;
        }
    }
    char path[4200];
    snprintf(path, sizeof path, "%s/metrics.csv", dir);
    TESS_CHECK(tess_metrics_open(&a->csv, path, cols, nc, false));
    for (int64_t j = 0; j < ro.npoints; j++) {
        double row[TESS_METRICS_MAX_COLS];
        int k = 0;
        row[k++] = (double)zoapp_traj_point(ro.budget, ro.npoints, j);
        for (int m = 0; m < M_COUNT; m++) {
            if (!ran[m]) continue;
            bool have = j < traj[m].n;
            double cost = m == M_FO || m == M_FO_PLAIN ? (double)d : 1.0;
            row[k++] = have ? traj[m].err[j] : NAN;
            row[k++] = have ? traj[m].evals[j] * cost : NAN;
            if (l1) row[k++] = have ? traj[m].gap[j] : NAN;
        }
        TESS_CHECK(tess_metrics_row(&a->csv, row));
    }
    tess_metrics_close(&a->csv);

    snprintf(path, sizeof path, "%s/results.md", dir);
    FILE *f = fopen(path, "w");
    TESS_REQUIRE(f, TESS_ERR_IO, "cannot write %s", path);
    fprintf(f, "%s, d = %lld, n = %lld, %s chain tau = %g, budget %lld samples, eps = %g\n\n",
            tess_config_string(c, "problem.kind"), (long long)d, (long long)pc.nstates,
            tess_config_string(c, "chain.kind"), tess_config_real(c, "chain.tau"),
            (long long)ro.budget, ro.eps);
    fprintf(f, "| method | floor (mean R, 2nd half) | final R%s | samples to eps | cost to eps | "
               "evaluations | seconds |\n|---|---|---|---|---|---|---|\n",
            l1 ? " (f - f*)" : "");
    for (int m = 0; m < M_COUNT; m++) {
        if (!ran[m]) continue;
        double cost = m == M_FO || m == M_FO_PLAIN ? (double)d : 1.0;
        char fin[64];
        if (l1)
            snprintf(fin, sizeof fin, "%.3e (%.3e)", res[m].final_err, res[m].final_gap);
        else
            snprintf(fin, sizeof fin, "%.3e", res[m].final_err);
        fprintf(f, "| %s | %.3e | %s | %.4g | %.4g | %lld | %.2f |\n", method_title(c, (method)m),
                res[m].floor, fin, res[m].n_eps, res[m].evals_eps * cost,
                (long long)res[m].evals, res[m].seconds);
    }
    fclose(f);
    if (tess_config_bool(c, "run.plots")) {
        if (compare_plots(c, dir, ran, l1) == TESS_OK) {
            tess_log_info("zo: wrote %s/metrics.csv, %s/results.md, %s/plots/error.png, "
                          "error_cost.png", dir, dir, dir);
        } else {
            tess_log_warn("zo: plots skipped:\n%s", tess_error_text());
            tess_error_clear();
        }
    }
    return TESS_OK;
}

/* ---- sweep mode ---------------------------------------------------------------------------- */

enum { RUN_FIELDS = 9 }; /* d, tau, method, seed, floor, n_eps, cost_eps, final, seconds */

static double median(double *v, int n) {
    for (int i = 1; i < n; i++) /* insertion sort; NAN (never reached) sorts last */
        for (int j = i; j > 0 && (isnan(v[j - 1]) || (!isnan(v[j]) && v[j] < v[j - 1])); j--) {
            double t = v[j];
            v[j] = v[j - 1];
            v[j - 1] = t;
        }
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

static tess_status sweep_plots(const char *dir, const bool *use, const double *dims, int nd) {
    char s[16384];
    int n = snprintf(s, sizeof s,
                     "set terminal pngcairo size 1000,620 noenhanced\nset datafile separator ','\n"
                     "set logscale xy\nset grid\nset key outside right\nset xlabel 'tau / d'\n");
    const char *what[3][2] = {{"floor", "constant-step error floor (mean R over [N/4, N/2])"},
                              {"neps", "chain samples (oracle calls) to R <= eps"},
                              {"costeps", "cost to R <= eps (ZO: evaluations; FO: gradients x d)"}};
    for (int w = 0; w < 3; w++) {
        n += snprintf(s + n, sizeof s - (size_t)n, "set output '%s/plots/%s.png'\nset title '%s'\nplot ",
                      dir, what[w][0], what[w][1]);
        const char *sep = "";
        for (int k = 0; k < nd; k++)
            for (int m = 0; m < M_NLOPT; m++) {
                if (!use[m]) continue;
                n += snprintf(s + n, sizeof s - (size_t)n,
                              "%s'%s/metrics.csv' using (column('d')==%g ? column('tau_over_d') : "
                              "1/0):'%s_%s' with linespoints lw 2 lc %d dt %d pt %d title '%s d=%g'",
                              sep, dir, dims[k], method_names[m], what[w][0], 1 + m, 1 + k,
                              4 + k, method_names[m], dims[k]);
                sep = ", ";
            }
        n += snprintf(s + n, sizeof s - (size_t)n, "\n");
    }
    return gnuplot(s);
}

static tess_status sweep(app *a, const tess_runtime *rt) {
    const tess_config *c = a->cfg;
    const char *dir = tess_config_string(c, "run.dir");
    const uint32_t seed = (uint32_t)tess_config_int(c, "run.seed");
    double dims[MAX_LIST], taus[MAX_LIST];
    int nd, nt;
    bool use[M_COUNT];
    TESS_CHECK(parse_list(c, "sweep.dims", dims, &nd));
    TESS_CHECK(parse_list(c, "sweep.taus", taus, &nt));
    TESS_CHECK(parse_methods(c, use));
    const int64_t seeds = tess_config_int(c, "sweep.seeds"), gsize = tess_config_int(c, "sweep.group");
    const int64_t shard = tess_config_int(c, "dist.shard");
    const int ngroups = rt->size / (int)gsize, mygroup = rt->rank / (int)gsize;
    TESS_CHECK(tess_group_create(rt->comm, "world", &a->world));
    TESS_CHECK(tess_group_split(a->world, mygroup, rt->rank, "run", &a->group));
    const tess_mesh_axis axes[2] = {{"eval", TESS_MESH_REST}, {"shard", (int)shard}};
    TESS_CHECK(tess_mesh_create(a->group->comm, 2, axes, &a->mesh));
    const tess_group *eval = tess_mesh_axis_group(a->mesh, 0), *sh = tess_mesh_axis_group(a->mesh, 1);
    TESS_CHECK(tess_rundir_prepare(rt->comm, dir, tess_config_resolved_text(a->cfg)));

    int nm = 0;
    for (int m = 0; m < M_NLOPT; m++) nm += use[m];
    const int64_t nruns = (int64_t)nd * nt * nm * seeds;
    double *rows = calloc((size_t)(nruns * RUN_FIELDS), sizeof *rows);
    TESS_REQUIRE(rows, TESS_ERR_MEM, "sweep: out of memory for %lld runs", (long long)nruns);
    tess_log_info("zo sweep: %d d x %d tau x %d methods x %lld seeds = %lld runs on %d groups of "
                  "%lld ranks (%lld shard)", nd, nt, nm, (long long)seeds, (long long)nruns,
                  ngroups, (long long)gsize, (long long)shard);
    const double t0 = tess_timer_now();
    int64_t r = 0;
    tess_status st = TESS_OK;
    for (int id = 0; id < nd && st == TESS_OK; id++) {
        const int64_t d = (int64_t)dims[id];
        int64_t lo, hi;
        tess_par_block_range(d, sh->size, sh->rank, &lo, &hi);
        const zoapp_problem_config pc = problem_config(c, d);
        zoapp_problem_free(&a->prob);
        st = zoapp_problem_create(&a->prob, &pc, lo, hi - lo, a->group->comm);
        for (int it = 0; it < nt && st == TESS_OK; it++)
            for (int m = 0; m < M_NLOPT && st == TESS_OK; m++) {
                if (!use[m]) continue;
                for (int64_t s = 0; s < seeds && st == TESS_OK; s++, r++) {
                    /* deal runs back and forth (0 1 1 0 0 1 ...) so the costly methods, which
                     * alternate with the cheap ones, spread over the groups */
                    const int64_t lap = r / ngroups, pos = r % ngroups;
                    if ((lap % 2 == 0 ? pos : ngroups - 1 - pos) != mygroup) continue;
                    tess_zo_config zc = method_config(c, &a->prob, (method)m, seed + (uint32_t)s, 0);
                    zc.rule = TESS_ZO_RULE_SWITCH;
                    double budget = tess_config_real(c, "sweep.relax") * expected_k(&zc) / (zc.eta * zc.mu);
                    const double cap = (double)tess_config_int(c, "sweep.max_samples");
                    const zoapp_run_opts ro = {.budget = (int64_t)(budget < cap ? budget : cap),
                                               .eps = tess_config_real(c, "sweep.eps"),
                                               .npoints = 2, .fgap = false};
                    zc.k_switch = (int64_t)((double)ro.budget / (2.0 * expected_k(&zc)));
                    zoapp_chain_free(&a->chain);
                    st = zoapp_chain_init(&a->chain, (zoapp_chain_kind)tess_config_choice(c, "chain.kind"),
                                          pc.nstates, taus[it],
                                          (tess_rng_key){.seed = seed + (uint32_t)s, .stream = 7},
                                          chain_cap(c));
                    zoapp_traj traj;
                    zoapp_result res;
                    if (st == TESS_OK)
                        st = zoapp_run_method(&zc, &a->prob, &a->chain, eval, sh, &ro, NULL, &traj,
                                             &res, NULL);
                    if (st != TESS_OK) break;
                    const double cost = zc.estimator == TESS_ZO_EST_FIRST_ORDER ? (double)d : 1.0;
                    double *row = rows + r * RUN_FIELDS;
                    if (a->group->rank == 0) {
                        const double v[RUN_FIELDS] = {(double)d, taus[it], (double)m, (double)s,
                                                      res.floor, res.n_eps, res.evals_eps * cost,
                                                      res.final_err, res.seconds};
                        memcpy(row, v, sizeof v);
                    }
                    tess_log_info("zo sweep: run %lld/%lld d=%lld tau=%g %s seed %lld: %lld samples, "
                                  "floor %.3e, samples to eps %.4g (%.1f s, %.0f s total)",
                                  (long long)(r + 1), (long long)nruns, (long long)d, taus[it],
                                  method_names[m], (long long)s, (long long)res.samples, res.floor,
                                  res.n_eps, res.seconds, tess_timer_now() - t0);
                }
            }
    }
    /* a failure inside one group ends the whole run (main aborts: the other groups may be
     * waiting in a collective) */
    if (st == TESS_OK) /* each row was filled by one rank; NAN (eps never reached) survives + 0 */
        st = tess_par_allreduce_f64(a->world, rows, nruns * RUN_FIELDS, TESS_PAR_SUM);
    if (st != TESS_OK || rt->rank != 0) {
        free(rows);
        return st;
    }
    char path[4200];
    snprintf(path, sizeof path, "%s/runs.csv", dir);
    static const char *const run_cols[RUN_FIELDS] = {"d", "tau", "method", "seed", "floor",
                                                     "n_eps", "cost_eps", "final_err", "seconds"};
    tess_metrics runs;
    TESS_CHECK(tess_metrics_open(&runs, path, run_cols, RUN_FIELDS, false));
    for (int64_t i = 0; i < nruns && st == TESS_OK; i++) st = tess_metrics_row(&runs, rows + i * RUN_FIELDS);
    tess_metrics_close(&runs);
    TESS_CHECK(st);

    const char *cols[TESS_METRICS_MAX_COLS];
    char names[TESS_METRICS_MAX_COLS][32];
    int nc = 0;
    cols[nc++] = "d";
    cols[nc++] = "tau";
    cols[nc++] = "tau_over_d";
    for (int m = 0; m < M_NLOPT; m++) {
        if (!use[m]) continue;
        const char *suf[3] = {"floor", "neps", "costeps"};
        for (int k = 0; k < 3; k++) {
            snprintf(names[nc], sizeof names[nc], "%s_%s", method_names[m], suf[k]);
            cols[nc] = names[nc];
            nc++;
        }
    }
    snprintf(path, sizeof path, "%s/metrics.csv", dir);
    TESS_CHECK(tess_metrics_open(&a->csv, path, cols, nc, false));
    snprintf(path, sizeof path, "%s/results.md", dir);
    FILE *f = fopen(path, "w");
    TESS_REQUIRE(f, TESS_ERR_IO, "cannot write %s", path);
    tess_zo_config z0 = method_config(c, &a->prob, M_ZO, seed, 0);
    fprintf(f, "%s, n = %lld, %s chain; B = %lld, M = %lld (MLMC) / K = B (fixed); step eta = %g/(L d) "
               "for ZO and FO alike, switch rule (constant for N/2, then 2/(mu(k-k_s+k0))); budget N = "
               "%g E[K]/(eta mu) samples (cap %lld); medians over %lld seeds; eps = %g\n\n",
            tess_config_string(c, "problem.kind"), (long long)tess_config_int(c, "problem.states"),
            tess_config_string(c, "chain.kind"), (long long)z0.batch, (long long)z0.cap,
            tess_config_real(c, "optim.eta_scale"), tess_config_real(c, "sweep.relax"),
            (long long)tess_config_int(c, "sweep.max_samples"), (long long)seeds,
            tess_config_real(c, "sweep.eps"));
    fprintf(f, "| d | tau | tau/d |");
    for (int m = 0; m < M_NLOPT; m++)
        if (use[m]) fprintf(f, " %s floor | %s N_eps | %s cost_eps |", method_names[m], method_names[m], method_names[m]);
    fprintf(f, "\n|---|---|---|");
    for (int m = 0; m < M_NLOPT; m++)
        if (use[m]) fprintf(f, "---|---|---|");
    fprintf(f, "\n");
    for (int id = 0; id < nd; id++)
        for (int it = 0; it < nt; it++) {
            double row[TESS_METRICS_MAX_COLS];
            int k = 0;
            row[k++] = dims[id];
            row[k++] = taus[it];
            row[k++] = taus[it] / dims[id];
            fprintf(f, "| %g | %g | %.3g |", dims[id], taus[it], taus[it] / dims[id]);
            for (int m = 0; m < M_NLOPT; m++) {
                if (!use[m]) continue;
                double v[3][1000];
                int nv = 0;
                for (int64_t i = 0; i < nruns; i++) {
                    const double *q = rows + i * RUN_FIELDS;
                    if (q[0] == dims[id] && q[1] == taus[it] && q[2] == (double)m && nv < 1000) {
                        v[0][nv] = q[4];
                        v[1][nv] = q[5];
                        v[2][nv] = q[6];
                        nv++;
                    }
                }
                for (int w = 0; w < 3; w++) row[k++] = nv ? median(v[w], nv) : NAN;
                fprintf(f, " %.3e | %.3g | %.3g |", row[k - 3], row[k - 2], row[k - 1]);
            }
            fprintf(f, "\n");
            st = tess_metrics_row(&a->csv, row);
            if (st != TESS_OK) break;
        }
    fclose(f);
    free(rows);
    tess_metrics_close(&a->csv);
    TESS_CHECK(st);
    tess_log_info("zo sweep: done in %.1f s; wrote %s/metrics.csv (medians), runs.csv, results.md",
                  tess_timer_now() - t0, dir);
    if (tess_config_bool(c, "run.plots")) {
        if (sweep_plots(dir, use, dims, nd) != TESS_OK) {
            tess_log_warn("zo: plots skipped:\n%s", tess_error_text());
            tess_error_clear();
        }
    }
    return TESS_OK;
}

static tess_status run(const tess_runtime *rt, int argc, char **argv, bool *collective, app *a) {
    tess_config_action action;
    TESS_CHECK(tess_config_create(&a->cfg, sections, sizeof sections / sizeof sections[0]));
    TESS_CHECK(tess_config_alias(a->cfg, "--resume", "ckpt.resume"));
    TESS_CHECK(tess_config_parse_args(a->cfg, rt->comm, argc, argv, &action));
    if (action != TESS_CONFIG_ACTION_RUN) return TESS_OK;
    TESS_CHECK(validate(a->cfg, rt->size));
    /* configuration errors were found alike on every rank; from here a failure may be local */
    *collective = false;
    if (tess_config_choice(a->cfg, "run.mode") == 0) {
        TESS_CHECK(compare(a, rt, collective));
    } else {
        if (tess_config_string(a->cfg, "ckpt.resume")[0] || tess_config_int(a->cfg, "ckpt.every"))
            tess_log_warn("zo: the sweep does not checkpoint: ckpt.every and ckpt.resume are "
                          "ignored");
        TESS_CHECK(sweep(a, rt));
    }
    return TESS_OK;
}

int main(int argc, char **argv) {
    tess_signals_install();
    int thread_level; /* FUNNELED: tess_ckpt_load hashes on a worker thread (io/ckpt.h) */
    MPI_Init_thread(&argc, &argv, MPI_THREAD_FUNNELED, &thread_level);
    tess_runtime rt;
    tess_status s = tess_runtime_start(&rt, MPI_COMM_WORLD);
    bool collective = true;
    app a = {0};
    if (s == TESS_OK) s = run(&rt, argc, argv, &collective, &a);
    app_free(&a);
    const int code = tess_runtime_finish(&rt, s, collective);
    return code == 0 && a.stopped ? TESS_EXIT_STOPPED : code;
}

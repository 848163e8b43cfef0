/* runner.c - one method on one problem and chain, measured (see runner.h). */
#include "runner.h"

#include <math.h>
#include <nlopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/timer.h" /* tess_timer_now */
#include "par/coll.h"  /* tess_par_allreduce_f64 */

int64_t zoapp_traj_point(int64_t budget, int64_t n, int64_t j) {
    double v = pow((double)budget, (double)(j + 1) / (double)n);
    int64_t r = (int64_t)llround(v);
    return r < 1 ? 1 : (r > budget ? budget : r);
}

typedef struct {
    zoapp_problem *p;
    zoapp_chain *ch;
} oracle;

static void oracle_prepare(void *ctx, int64_t t0, int64_t nsteps) {
    oracle *o = ctx;
    TESS_ASSERT(o->ch->t == t0);
    (void)t0;
    zoapp_chain_advance(o->ch, nsteps);
}

static void oracle_partial(void *ctx, const double *x, int64_t first, int64_t n, int64_t t,
                           double *out) {
    oracle *o = ctx;
    out[0] = zoapp_problem_value(o->p, x, zoapp_chain_at(o->ch, t));
}

static void oracle_grad(void *ctx, const double *x, int64_t n, int64_t t, double *grad) {
    oracle *o = ctx;
    zoapp_problem_grad(o->p, x, zoapp_chain_at(o->ch, t), grad);
}

static double local_err(const zoapp_problem *p, const double *x) {
    double s = 0.0;
    for (int64_t j = 0; j < p->n; j++) {
        double e = x[j] - p->xstar[j];
        s += e * e;
    }
    return s;
}

static tess_status measure(zoapp_problem *p, const tess_group *shard, const double *x, bool fgap,
                           double *err, double *gap) {
    double v[2] = {local_err(p, x), fgap ? zoapp_problem_f(p, x) : 0.0};
    if (shard && shard->size > 1) TESS_CHECK(tess_par_allreduce_f64(shard, v, 2, TESS_PAR_SUM));
    *err = v[0] / p->xstar_norm2;
    *gap = fgap ? v[1] - p->fstar : NAN;
    return TESS_OK;
}

tess_status zoapp_method_create(zoapp_method *m, const tess_zo_config *cfg, zoapp_problem *p,
                                zoapp_chain *ch, const tess_group *eval, const tess_group *shard,
                                const zoapp_run_opts *o) {
    memset(m, 0, sizeof *m);
    TESS_REQUIRE(o->npoints >= 2 && o->npoints <= ZOAPP_MAX_POINTS, TESS_ERR_ARG,
                 "trajectory points %lld outside 2..%d", (long long)o->npoints, ZOAPP_MAX_POINTS);
    int64_t maxk = cfg->batch;
    while (cfg->batching == TESS_ZO_BATCH_MLMC && maxk * 2 <= cfg->batch * cfg->cap) maxk *= 2;
    const int64_t spp = cfg->estimator == TESS_ZO_EST_ONE_POINT_SYM ? 2 : 1;
    TESS_REQUIRE(ch->cap >= maxk * spp, TESS_ERR_ARG,
                 "chain segment capacity %lld < %lld samples of an iteration", (long long)ch->cap,
                 (long long)(maxk * spp));
    m->cfg = *cfg;
    m->p = p;
    m->ch = ch;
    m->shard = shard;
    m->o = *o;
    m->res = (zoapp_result){.n_eps = NAN, .evals_eps = NAN};
    m->t_start = NAN;
    TESS_CHECK(tess_zo_create(&m->zo, &m->cfg, p->cfg.d, eval, shard));
    return TESS_OK;
}

void zoapp_method_free(zoapp_method *m) { tess_zo_destroy(&m->zo); }

/* "<prefix>/<what>" into buf (TESS_STATE_NAME_MAX bytes). */
static const char *state_name(char *buf, const char *prefix, const char *what) {
    snprintf(buf, TESS_STATE_NAME_MAX, "%s/%s", prefix, what);
    return buf;
}

tess_status zoapp_method_describe(zoapp_method *m, tess_state *st, const char *prefix) {
    char n[TESS_STATE_NAME_MAX];
    TESS_CHECK(tess_zo_describe(m->zo, st, prefix));
    TESS_CHECK(tess_state_add_i64(st, state_name(n, prefix, "finished"), &m->finished));
    int64_t *const ints[] = {&m->pg.iters, &m->pg.samples, &m->pg.j, &m->traj.n, &m->res.iters,
                             &m->res.samples, &m->res.evals};
    const char *const int_names[] = {"progress/iters", "progress/samples", "progress/points",
                                     "traj/n", "result/iters", "result/samples", "result/evals"};
    for (int i = 0; i < 7; i++)
        TESS_CHECK(tess_state_add_i64(st, state_name(n, prefix, int_names[i]), ints[i]));
    double *const reals[] = {&m->pg.fsum, &m->pg.fw, &m->pg.comm, &m->res.floor, &m->res.n_eps,
                             &m->res.evals_eps, &m->res.final_err, &m->res.final_gap,
                             &m->res.comm_bytes_per_iter};
    const char *const real_names[] = {"progress/floor_sum", "progress/floor_weight",
                                      "progress/bytes_sent", "result/floor", "result/n_eps",
                                      "result/evals_eps", "result/final_err", "result/final_gap",
                                      "result/bytes_per_iter"};
    for (int i = 0; i < 9; i++)
        TESS_CHECK(tess_state_add_f64(st, state_name(n, prefix, real_names[i]), reals[i]));
    const int64_t points[1] = {ZOAPP_MAX_POINTS};
    const tess_layout rep = tess_layout_replicated();
    double *const arrays[] = {m->traj.samples, m->traj.evals, m->traj.err, m->traj.gap};
    const char *const array_names[] = {"traj/samples", "traj/evals", "traj/err", "traj/gap"};
    for (int i = 0; i < 4; i++)
        TESS_CHECK(tess_state_add(st, state_name(n, prefix, array_names[i]), TESS_F64, 1, points,
                                  &rep, arrays[i]));
    return TESS_OK;
}

/* The results once the budget is spent. Collective on shard. */
static tess_status complete(zoapp_method *m) {
    double err, gap;
    const double *x = m->cfg.average ? tess_zo_xbar(m->zo) : tess_zo_x(m->zo);
    TESS_CHECK(measure(m->p, m->shard, x, m->o.fgap, &err, &gap));
    m->traj.n = m->pg.j;
    m->res.floor = m->pg.fw > 0.0 ? m->pg.fsum / m->pg.fw : err;
    m->res.final_err = err;
    m->res.final_gap = gap;
    m->res.iters = m->pg.iters;
    m->res.samples = m->pg.samples;
    m->res.evals = tess_zo_counters(m->zo)[TESS_ZO_CNT_EVALS];
    m->res.comm_bytes_per_iter = m->pg.iters ? m->pg.comm / (double)m->pg.iters : 0.0;
    m->finished = 1;
    return TESS_OK;
}

tess_status zoapp_method_iterate(zoapp_method *m) {
    TESS_REQUIRE(!m->finished, TESS_ERR_ARG, "the method's budget is spent");
    if (m->pg.iters == 0) zoapp_chain_reset(m->ch);
    if (isnan(m->t_start)) m->t_start = tess_timer_now();
    oracle orc = {.p = m->p, .ch = m->ch};
    const tess_zo_objective obj = {.ctx = &orc, .npartials = 1, .partial = oracle_partial,
                                   .finish = NULL, .grad = oracle_grad, .prepare = oracle_prepare};
    const int64_t *cnt = tess_zo_counters(m->zo);
    const zoapp_run_opts *o = &m->o;
    zoapp_progress *pg = &m->pg;
    tess_zo_step_info info;
    TESS_CHECK(tess_zo_step(m->zo, &obj, &info));
    pg->samples += info.samples;
    pg->comm += info.comm_bytes;
    pg->iters++;
    const double *x = m->cfg.average ? tess_zo_xbar(m->zo) : tess_zo_x(m->zo);
    const bool want_gap = o->fgap && pg->j < o->npoints &&
                          pg->samples >= zoapp_traj_point(o->budget, o->npoints, pg->j);
    double err, gap;
    TESS_CHECK(measure(m->p, m->shard, x, want_gap, &err, &gap));
    TESS_REQUIRE(isfinite(err), TESS_ERR_DIVERGED,
                 "the iterate diverged after %lld samples (step size eta = %g too large?)",
                 (long long)pg->samples, info.eta);
    if (2 * pg->samples > o->budget) {
        pg->fsum += err * (double)info.samples;
        pg->fw += (double)info.samples;
    }
    if (err > o->eps) { /* n_eps: from when on R stays <= eps */
        m->res.n_eps = m->res.evals_eps = NAN;
    } else if (isnan(m->res.n_eps)) {
        m->res.n_eps = (double)pg->samples;
        m->res.evals_eps = (double)cnt[TESS_ZO_CNT_EVALS];
    }
    for (; pg->j < o->npoints && pg->samples >= zoapp_traj_point(o->budget, o->npoints, pg->j);
         pg->j++) {
        m->traj.samples[pg->j] = (double)pg->samples;
        m->traj.evals[pg->j] = (double)cnt[TESS_ZO_CNT_EVALS];
        m->traj.err[pg->j] = err;
        m->traj.gap[pg->j] = gap;
    }
    m->traj.n = pg->j;
    m->res.seconds = tess_timer_now() - m->t_start;
    if (pg->samples >= o->budget) TESS_CHECK(complete(m));
    return TESS_OK;
}

tess_status zoapp_run_method(const tess_zo_config *cfg, zoapp_problem *p, zoapp_chain *ch,
                             const tess_group *eval, const tess_group *shard,
                             const zoapp_run_opts *o, zoapp_traj *traj, zoapp_result *res) {
    zoapp_method m;
    tess_status st = zoapp_method_create(&m, cfg, p, ch, eval, shard, o);
    while (st == TESS_OK && !m.finished) st = zoapp_method_iterate(&m);
    *traj = m.traj;
    *res = m.res;
    zoapp_method_free(&m);
    TESS_REQUIRE(st == TESS_OK, st, "running %s (%s batching, B = %lld, M = %lld)",
                 cfg->estimator == TESS_ZO_EST_FIRST_ORDER ? "first-order SGD" : "zero-order SGD",
                 cfg->batching == TESS_ZO_BATCH_MLMC ? "MLMC" : "fixed", (long long)cfg->batch,
                 (long long)cfg->cap);
    return TESS_OK;
}

/* ---- NLopt --------------------------------------------------------------------------------- */

typedef struct {
    zoapp_problem *p;
    zoapp_chain *ch;
    const zoapp_run_opts *o;
    zoapp_traj *traj;
    zoapp_result *res;
    int64_t calls, limit, j;
    double fsum, fw;
} nl_ctx;

static double nl_objective(unsigned n, const double *x, double *grad, void *data) {
    nl_ctx *c = data;
    (void)n;
    (void)grad;
    if (c->calls >= c->limit) return HUGE_VAL; /* NLopt may overshoot maxeval by a call */
    c->calls++;
    double v = zoapp_problem_value(c->p, x, zoapp_chain_next(c->ch));
    double err = local_err(c->p, x) / c->p->xstar_norm2;
    if (2 * c->calls > c->limit) {
        c->fsum += err;
        c->fw += 1.0;
    }
    if (err > c->o->eps) {
        c->res->n_eps = c->res->evals_eps = NAN;
    } else if (isnan(c->res->n_eps)) {
        c->res->n_eps = (double)c->calls;
        c->res->evals_eps = (double)c->calls;
    }
    for (; c->j < c->o->npoints && c->calls >= zoapp_traj_point(c->o->budget, c->o->npoints, c->j);
         c->j++) {
        c->traj->samples[c->j] = (double)c->calls;
        c->traj->evals[c->j] = (double)c->calls;
        c->traj->err[c->j] = err;
        c->traj->gap[c->j] = c->o->fgap ? zoapp_problem_f(c->p, x) - c->p->fstar : NAN;
    }
    return v;
}

tess_status zoapp_run_nlopt(const char *alg, double init_step, int64_t max_evals,
                            zoapp_problem *p, zoapp_chain *ch, const zoapp_run_opts *o,
                            zoapp_traj *traj, zoapp_result *res, int *nlopt_code) {
    const int64_t d = p->cfg.d;
    *res = (zoapp_result){.n_eps = NAN, .evals_eps = NAN};
    memset(traj, 0, sizeof *traj);
    double *x = calloc((size_t)d, sizeof *x);
    TESS_REQUIRE(x, TESS_ERR_MEM, "nlopt: out of memory");
    nlopt_opt opt = nlopt_create(strcmp(alg, "neldermead") == 0 ? NLOPT_LN_NELDERMEAD : NLOPT_LN_BOBYQA,
                                 (unsigned)d);
    if (!opt) {
        free(x);
        TESS_REQUIRE(false, TESS_ERR_MEM, "nlopt_create(%s, %lld) failed", alg, (long long)d);
    }
    nl_ctx c = {.p = p, .ch = ch, .o = o, .traj = traj, .res = res,
                .limit = max_evals < o->budget ? max_evals : o->budget};
    zoapp_chain_reset(ch);
    nlopt_set_min_objective(opt, nl_objective, &c);
    nlopt_set_maxeval(opt, (int)(c.limit < INT32_MAX ? c.limit : INT32_MAX));
    nlopt_set_initial_step1(opt, init_step);
    double fmin = 0.0;
    const double t0 = tess_timer_now();
    *nlopt_code = (int)nlopt_optimize(opt, x, &fmin);
    res->seconds = tess_timer_now() - t0;
    nlopt_destroy(opt);
    traj->n = c.j;
    res->final_err = local_err(p, x) / p->xstar_norm2;
    res->final_gap = o->fgap ? zoapp_problem_f(p, x) - p->fstar : NAN;
    res->floor = c.fw > 0.0 ? c.fsum / c.fw : res->final_err;
    res->samples = res->evals = c.calls;
    res->iters = c.calls;
    free(x);
    return TESS_OK;
}

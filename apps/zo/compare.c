/* compare.c - the zo app's compare mode: one problem and one Markov chain, every method with the
 * same budget of chain samples, one iteration per step of the run driver; NLopt at the end.
 *
 * State (checkpoints): each method's optimizer, progress, trajectory and results under
 * methods/<name>/, the chain under chain/, and run/method (the method running). The methods run
 * one after the other on the same sample path (the chain is reset at each method's first
 * iteration), so a stop inside any of them continues bitwise. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/log.h"   /* tess_log_* */
#include "par/layout.h" /* tess_par_block_range */
#include "zoapp.h"      /* zoapp, zoapp_compare */

void zoapp_compare_free(zoapp_compare *c) {
    for (int m = 0; m < M_NLOPT; m++)
        if (c->made[m]) zoapp_method_free(&c->methods[m]);
    memset(c->made, 0, sizeof c->made);
}

/* The first wanted ZO/FO method at or after m, or M_NLOPT. */
static int64_t next_method(const zoapp_compare *c, int64_t m) {
    while (m < M_NLOPT && !c->want[m]) m++;
    return m;
}

/* Metrics columns: samples, then per method that runs err, cost (and gap for l1). */
static int metric_columns(zoapp_compare *c) {
    int nc = 0;
    c->cols[nc++] = "samples";
    for (int m = 0; m < M_COUNT; m++) {
        if (!c->want[m]) continue;
        const char *suf[3] = {"err", "cost", "gap"};
        for (int k = 0; k < (c->l1 ? 3 : 2); k++) {
            snprintf(c->names[nc], sizeof c->names[nc], "%s_%s", zoapp_method_names[m], suf[k]);
            c->cols[nc] = c->names[nc];
            nc++;
        }
    }
    return nc;
}

tess_status zoapp_compare_setup(tess_run *run, zoapp *a) {
    const tess_config *c = tess_run_config(run);
    const tess_group *all = tess_run_group(run);
    zoapp_compare *cmp = &a->cmp;
    const uint32_t seed = (uint32_t)tess_run_seed(run);
    const int64_t d = tess_config_int(c, "problem.dim"), shard = tess_config_int(c, "dist.shard");
    const tess_mesh_axis axes[2] = {{"eval", TESS_MESH_REST}, {"shard", (int)shard}};
    TESS_CHECK(tess_mesh_create(all, 2, axes, &a->mesh));
    const tess_group *eval = tess_mesh_axis_group(a->mesh, 0), *sh = tess_mesh_axis_group(a->mesh, 1);
    int64_t lo, hi;
    tess_par_block_range(d, sh->size, sh->rank, &lo, &hi);
    const zoapp_problem_config pc = zoapp_problem_options(c, d);
    TESS_CHECK(zoapp_problem_create(&a->prob, &pc, lo, hi - lo, all));
    TESS_CHECK(zoapp_chain_init(&a->chain, (zoapp_chain_kind)tess_config_enum(c, "chain.kind"),
                                pc.nstates, tess_config_real(c, "chain.tau"),
                                (tess_rng_key){.seed = seed, .stream = 7}, zoapp_chain_cap(c)));
    cmp->d = d;
    cmp->l1 = pc.kind == ZOAPP_PROB_L1;
    cmp->ro = (zoapp_run_opts){.budget = tess_config_int(c, "budget.samples"),
                               .eps = tess_config_real(c, "budget.eps"),
                               .npoints = tess_config_int(c, "budget.points"), .fgap = cmp->l1};
    tess_log_info("zo: %s d=%lld n=%lld, chain %s tau=%g; %d ranks = %d eval x %d shard; "
                  "||x*||^2 = %.4g, f* = %.6g%s",
                  tess_config_string(c, "problem.kind"), (long long)d, (long long)pc.nstates,
                  tess_config_string(c, "chain.kind"), tess_config_real(c, "chain.tau"), all->size,
                  eval->size, sh->size, a->prob.xstar_norm2, a->prob.fstar,
                  pc.kind == ZOAPP_PROB_QUADRATIC ? " (diagonal, exact)" : " (ScaLAPACK)");
    if (pc.kind == ZOAPP_PROB_RIDGE) tess_log_info("zo: ridge x* residual %.2e", a->prob.check);
    if (pc.kind == ZOAPP_PROB_LOGISTIC)
        tess_log_info("zo: logistic x* after %d Newton steps, ||grad f|| = %.2e",
                      a->prob.newton_steps, a->prob.check);

    const bool fixed = tess_config_enum(c, "optim.batching") == TESS_ZO_BATCH_FIXED;
    const bool want[M_COUNT] = {true, tess_config_bool(c, "baselines.plain") && !fixed,
                                tess_config_bool(c, "baselines.first_order") && sh->size == 1,
                                false,
                                tess_config_enum(c, "baselines.nlopt") != ZOAPP_NLOPT_NONE && sh->size == 1};
    memcpy(cmp->want, want, sizeof want);
    if (sh->size > 1) tess_log_info("zo: sharded x: the first-order and NLopt baselines are skipped");

    /* Every method's optimizer exists from the start, so the state lists the same entries at
     * every step: a checkpoint holds the finished methods' results and the running one's state. */
    tess_state *st = tess_run_state(run);
    int nmethods = 0;
    for (int m = 0; m < M_NLOPT; m++) {
        if (!cmp->want[m]) continue;
        const tess_zo_config zc = zoapp_method_options(c, &a->prob, (zoapp_method_id)m, seed,
                                                       cmp->ro.budget);
        TESS_CHECK(zoapp_method_create(&cmp->methods[m], &zc, &a->prob, &a->chain, eval, sh,
                                       &cmp->ro));
        cmp->made[m] = true;
        char prefix[64];
        snprintf(prefix, sizeof prefix, "methods/%s", zoapp_method_names[m]);
        TESS_CHECK(zoapp_method_describe(&cmp->methods[m], st, prefix));
        nmethods++;
    }
    TESS_CHECK(zoapp_chain_describe(&a->chain, st, "chain"));
    TESS_CHECK(tess_state_add_i64(st, "run/method", &cmp->current));
    cmp->current = next_method(cmp, 0);
    tess_run_set_total(run, (double)(cmp->ro.budget * nmethods), 0);
    tess_run_set_position_unit(run, "samples");
    TESS_CHECK(tess_run_metrics(run, "metrics", cmp->cols, metric_columns(cmp), false, &cmp->csv));
    return TESS_OK;
}

tess_status zoapp_compare_restored(tess_run *run, zoapp *a) {
    const zoapp_compare *cmp = &a->cmp;
    (void)run;
    TESS_REQUIRE(cmp->current >= 0 && cmp->current <= M_NLOPT &&
                     (cmp->current == M_NLOPT || cmp->want[cmp->current]),
                 TESS_ERR_CONFIG,
                 "the checkpoint is inside method %lld, which this run does not run (different "
                 "baselines.* or optim.batching?)",
                 (long long)cmp->current);
    return TESS_OK;
}

/* Chain samples consumed by all methods so far, each counted up to the budget (an MLMC batch may
 * overshoot it by a few): the progress line's position, which ends at the total. */
static double samples_done(const zoapp_compare *cmp) {
    double s = 0.0;
    for (int m = 0; m < M_NLOPT; m++) {
        if (!cmp->made[m]) continue;
        const int64_t n = cmp->methods[m].pg.samples;
        s += (double)(n < cmp->ro.budget ? n : cmp->ro.budget);
    }
    return s;
}

tess_status zoapp_compare_step(tess_run *run, zoapp *a, tess_run_step_out *out) {
    zoapp_compare *cmp = &a->cmp;
    const double before = samples_done(cmp);
    zoapp_method *m = &cmp->methods[cmp->current];
    TESS_CHECK(zoapp_method_iterate(m));
    if (m->finished) {
        char neps[32];
        const zoapp_result *r = &m->res;
        tess_log_info("zo: %-24s eta %.3g: %lld samples, %lld evals, %lld iterations in %.2f s; "
                      "floor %.3e, final %.3e, samples to eps %s, %.0f B/iteration sent",
                      zoapp_method_title(tess_run_config(run), (zoapp_method_id)cmp->current),
                      m->cfg.eta, (long long)r->samples, (long long)r->evals, (long long)r->iters,
                      r->seconds, r->floor, r->final_err,
                      zoapp_num(neps, sizeof neps, "%.4g", r->n_eps), r->comm_bytes_per_iter);
        cmp->current = next_method(cmp, cmp->current + 1);
    }
    const double after = samples_done(cmp);
    out->done = cmp->current == M_NLOPT;
    out->position = after;
    out->items = after - before;
    return TESS_OK;
}

static tess_status compare_plots(const tess_config *c, const char *dir, const bool *ran, bool l1) {
    char s[8192];
    /* The run's parameters as the second title line of every plot. */
    char sub[256];
    snprintf(sub, sizeof sub, "%s problem, d=%lld, %s chain tau=%g, %lld samples per method",
             tess_config_string(c, "problem.kind"), (long long)tess_config_int(c, "problem.dim"),
             tess_config_string(c, "chain.kind"), tess_config_real(c, "chain.tau"),
             (long long)tess_config_int(c, "budget.samples"));
    int n = snprintf(s, sizeof s,
                     "set terminal pngcairo size 900,560 noenhanced font ',11'\n"
                     "set datafile separator ','\nset logscale xy\nset grid\n"
                     "set key inside bottom left opaque box samplen 2\n"
                     "set format x '%%g'\nset format y '%%g'\n"
                     "set ylabel 'relative error ||x-x*||^2/||x*||^2 (dimensionless)'\n"
                     "set output '%s/plots/error.png'\n"
                     "set title \"relative error of the iterate\\n%s\"\n"
                     "set xlabel 'chain samples (oracle calls)'\nplot ",
                     dir, sub);
    const char *sep = "";
    for (int m = 0; m < M_COUNT; m++)
        if (ran[m]) {
            n += snprintf(s + n, sizeof s - (size_t)n,
                          "%s'%s/metrics.csv' using 1:'%s_err' with lines lw 2 title '%s'", sep, dir,
                          zoapp_method_names[m], zoapp_method_title(c, (zoapp_method_id)m));
            sep = ", ";
        }
    n += snprintf(s + n, sizeof s - (size_t)n,
                  "\nset output '%s/plots/error_cost.png'\nset title \"relative error against cost "
                  "(ZO: evaluations; FO: gradient calls x d)\\n%s\"\nset xlabel 'cost (function "
                  "evaluations)'\nplot ",
                  dir, sub);
    sep = "";
    for (int m = 0; m < M_COUNT; m++)
        if (ran[m]) {
            n += snprintf(s + n, sizeof s - (size_t)n,
                          "%s'%s/metrics.csv' using '%s_cost':'%s_err' with lines lw 2 title '%s'",
                          sep, dir, zoapp_method_names[m], zoapp_method_names[m], zoapp_method_title(c, (zoapp_method_id)m));
            sep = ", ";
        }
    if (l1) {
        n += snprintf(s + n, sizeof s - (size_t)n,
                      "\nset output '%s/plots/gap.png'\nset title \"optimality gap\\n%s\"\n"
                      "set ylabel 'f(x) - f* (objective units)'\nset xlabel 'chain "
                      "samples (oracle calls)'\nplot ",
                      dir, sub);
        sep = "";
        for (int m = 0; m < M_COUNT; m++)
            if (ran[m]) {
                n += snprintf(s + n, sizeof s - (size_t)n,
                              "%s'%s/metrics.csv' using 1:'%s_gap' with lines lw 2 title '%s'", sep,
                              dir, zoapp_method_names[m], zoapp_method_title(c, (zoapp_method_id)m));
                sep = ", ";
            }
    }
    snprintf(s + n, sizeof s - (size_t)n, "\n");
    return zoapp_gnuplot(s);
}

/* NLopt (rank 0), metrics.csv (the trajectories), results.md and the plots. */
tess_status zoapp_compare_finish(tess_run *run, zoapp *a) {
    const tess_config *c = tess_run_config(run);
    zoapp_compare *cmp = &a->cmp;
    const char *dir = tess_run_dir(run);
    const int rank = tess_run_group(run)->rank;
    zoapp_traj *traj[M_COUNT];
    const zoapp_result *res[M_COUNT];
    for (int m = 0; m < M_NLOPT; m++) {
        traj[m] = &cmp->methods[m].traj;
        res[m] = &cmp->methods[m].res;
    }
    traj[M_NLOPT] = &cmp->nl_traj;
    res[M_NLOPT] = &cmp->nl_res;
    if (cmp->want[M_NLOPT]) {
        /* NLopt is serial: rank 0 runs it; no collective happens until it is done */
        int code = 0;
        if (rank == 0)
            TESS_CHECK(zoapp_run_nlopt(tess_config_string(c, "baselines.nlopt"),
                                       tess_config_real(c, "baselines.nlopt_step"),
                                       tess_config_int(c, "baselines.nlopt_max_evals"), &a->prob,
                                       &a->chain, &cmp->ro, &cmp->nl_traj, &cmp->nl_res, &code));
        tess_log_info("zo: NLopt %-18s %lld calls in %.2f s (code %d); final %.3e",
                      tess_config_string(c, "baselines.nlopt"), (long long)cmp->nl_res.samples,
                      cmp->nl_res.seconds, code, cmp->nl_res.final_err);
    }
    if (rank != 0) return TESS_OK;

    const zoapp_run_opts *ro = &cmp->ro;
    for (int64_t j = 0; j < ro->npoints; j++) {
        /* small budgets round neighbouring log-spaced points to one sample count: one row each */
        if (j > 0 && zoapp_traj_point(ro->budget, ro->npoints, j) ==
                         zoapp_traj_point(ro->budget, ro->npoints, j - 1))
            continue;
        double row[32];
        int k = 0;
        row[k++] = (double)zoapp_traj_point(ro->budget, ro->npoints, j);
        for (int m = 0; m < M_COUNT; m++) {
            if (!cmp->want[m]) continue;
            const bool have = j < traj[m]->n;
            const double cost = m == M_FO || m == M_FO_PLAIN ? (double)cmp->d : 1.0;
            row[k++] = have ? traj[m]->err[j] : NAN;
            row[k++] = have ? traj[m]->evals[j] * cost : NAN;
            if (cmp->l1) row[k++] = have ? traj[m]->gap[j] : NAN;
        }
        TESS_CHECK(tess_run_metrics_row(run, cmp->csv, row));
    }

    char path[4200];
    snprintf(path, sizeof path, "%s/results.md", dir);
    FILE *f = fopen(path, "w");
    TESS_REQUIRE(f, TESS_ERR_IO, "cannot write %s", path);
    fprintf(f, "%s, d = %lld, n = %lld, %s chain tau = %g, budget %lld samples, eps = %g\n\n",
            tess_config_string(c, "problem.kind"), (long long)cmp->d,
            (long long)tess_config_int(c, "problem.states"), tess_config_string(c, "chain.kind"),
            tess_config_real(c, "chain.tau"), (long long)ro->budget, ro->eps);
    fprintf(f, "| method | floor (mean R, 2nd half) | final R%s | samples to eps | cost to eps | "
               "evaluations | seconds |\n|---|---|---|---|---|---|---|\n",
            cmp->l1 ? " (f - f*)" : "");
    for (int m = 0; m < M_COUNT; m++) {
        if (!cmp->want[m]) continue;
        const double cost = m == M_FO || m == M_FO_PLAIN ? (double)cmp->d : 1.0;
        char fin[64];
        if (cmp->l1)
            snprintf(fin, sizeof fin, "%.3e (%.3e)", res[m]->final_err, res[m]->final_gap);
        else
            snprintf(fin, sizeof fin, "%.3e", res[m]->final_err);
        char neps[32], ceps[32];
        fprintf(f, "| %s | %.3e | %s | %s | %s | %lld | %.2f |\n",
                zoapp_method_title(c, (zoapp_method_id)m), res[m]->floor, fin,
                zoapp_num(neps, sizeof neps, "%.4g", res[m]->n_eps),
                zoapp_num(ceps, sizeof ceps, "%.4g", res[m]->evals_eps * cost),
                (long long)res[m]->evals, res[m]->seconds);
    }
    TESS_REQUIRE(fclose(f) == 0, TESS_ERR_IO, "cannot write %s", path);
    if (tess_config_bool(c, "run.plots")) {
        if (compare_plots(c, dir, cmp->want, cmp->l1) == TESS_OK) {
            tess_log_info("zo: wrote %s/metrics.csv, %s/results.md, %s/plots/error.png, "
                          "error_cost.png%s", dir, dir, dir, cmp->l1 ? ", gap.png" : "");
        } else {
            tess_log_warn("zo: plots skipped:\n%s", tess_error_text());
            tess_error_clear();
        }
    }
    return TESS_OK;
}

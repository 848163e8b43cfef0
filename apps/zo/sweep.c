/* sweep.c - the zo app's sweep mode: the tau x d grid for the chosen methods and seeds. Runs are
 * dealt back and forth (0 1 1 0 0 1 ...) to groups of sweep.group ranks, so the costly methods,
 * which alternate with the cheap ones, spread over the groups. One step of the run driver is one
 * lap: every group does its next run, then the lap's rows are summed over all ranks, so the
 * results table (state sweep/rows) is the same on every rank, rank 0 reports every run, and a
 * stopped sweep resumes at the next lap. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/log.h"   /* tess_log_* */
#include "core/timer.h" /* tess_timer_now */
#include "par/coll.h"   /* tess_par_allreduce_f64 */
#include "par/layout.h" /* tess_par_block_range */
#include "zoapp.h"      /* zoapp, zoapp_sweep */

void zoapp_sweep_free(zoapp_sweep *s) {
    free(s->grid);
    free(s->rows);
    s->grid = NULL;
    s->rows = NULL;
}

/* Columns of metrics.csv: d, tau, tau/d, then per method its floor, N_eps and cost_eps medians. */
static int metric_columns(zoapp_sweep *s) {
    int nc = 0;
    s->cols[nc++] = "d";
    s->cols[nc++] = "tau";
    s->cols[nc++] = "tau_over_d";
    for (int m = 0; m < M_NLOPT; m++) {
        if (!s->use[m]) continue;
        const char *suf[3] = {"floor", "neps", "costeps"};
        for (int k = 0; k < 3; k++) {
            snprintf(s->names[nc], sizeof s->names[nc], "%s_%s", zoapp_method_names[m], suf[k]);
            s->cols[nc] = s->names[nc];
            nc++;
        }
    }
    return nc;
}

tess_status zoapp_sweep_setup(tess_run *run, zoapp *a) {
    const tess_config *c = tess_run_config(run);
    const tess_group *all = tess_run_group(run);
    zoapp_sweep *s = &a->swp;
    TESS_CHECK(zoapp_parse_list(c, "sweep.dims", "problem.dim", s->dims, &s->nd));
    TESS_CHECK(zoapp_parse_list(c, "sweep.taus", "chain.tau", s->taus, &s->nt));
    TESS_CHECK(zoapp_parse_methods(c, s->use));
    s->seeds = tess_config_int(c, "sweep.seeds");
    const int64_t gsize = tess_config_int(c, "sweep.group"), shard = tess_config_int(c, "dist.shard");
    s->ngroups = all->size / (int)gsize;
    s->mygroup = all->rank / (int)gsize;
    TESS_CHECK(tess_group_split(all, s->mygroup, all->rank, "sweep_run", &a->group));
    const tess_mesh_axis axes[2] = {{"eval", TESS_MESH_REST}, {"shard", (int)shard}};
    TESS_CHECK(tess_mesh_create(a->group, 2, axes, &a->mesh));

    int nm = 0;
    for (int m = 0; m < M_NLOPT; m++) nm += s->use[m];
    s->nruns = (int64_t)s->nd * s->nt * nm * s->seeds;
    s->nlaps = (s->nruns + s->ngroups - 1) / s->ngroups;
    s->grid = malloc((size_t)s->nruns * sizeof *s->grid);
    s->rows = calloc((size_t)(s->nruns * ZOAPP_RUN_FIELDS), sizeof *s->rows);
    TESS_REQUIRE(s->grid && s->rows, TESS_ERR_MEM, "sweep: out of memory for %lld runs",
                 (long long)s->nruns);
    int64_t r = 0;
    for (int id = 0; id < s->nd; id++)
        for (int it = 0; it < s->nt; it++)
            for (int m = 0; m < M_NLOPT; m++)
                for (int64_t k = 0; k < s->seeds && s->use[m]; k++, r++) {
                    s->grid[r][0] = id;
                    s->grid[r][1] = it;
                    s->grid[r][2] = m;
                    s->grid[r][3] = (int32_t)k;
                }
    const int64_t shape[2] = {s->nruns, ZOAPP_RUN_FIELDS};
    const tess_layout rep = tess_layout_replicated();
    TESS_CHECK(tess_state_add(tess_run_state(run), "sweep/rows", TESS_F64, 2, shape, &rep, s->rows));
    /* the progress line counts runs (their budgets depend on each run's step size) at the rate
     * of chain samples */
    tess_run_set_total(run, (double)s->nruns, s->nlaps);
    tess_run_set_position_unit(run, "runs");
    tess_run_set_data_cursor_max(run, s->nruns); /* the cursor counts finished runs */
    static const char *const run_cols[ZOAPP_RUN_FIELDS] = {
        "d", "tau", "method", "seed", "floor", "n_eps", "cost_eps", "final_err", "seconds"};
    TESS_CHECK(tess_run_metrics(run, "runs", run_cols, ZOAPP_RUN_FIELDS, false, &s->runs_csv));
    TESS_CHECK(tess_run_metrics(run, "metrics", s->cols, metric_columns(s), false, &s->csv));
    tess_log_info("zo sweep: %d d x %d tau x %d methods x %lld seeds = %lld runs on %d groups of "
                  "%lld ranks (%lld shard)", s->nd, s->nt, nm, (long long)s->seeds,
                  (long long)s->nruns, s->ngroups, (long long)gsize, (long long)shard);
    s->t0 = tess_timer_now();
    return TESS_OK;
}

/* Run r of the grid on this rank's group; the group's rank 0 writes its row into row and the
 * chain samples it used into *samples. */
static tess_status sweep_run(tess_run *run, zoapp *a, int64_t r, double *row, double *samples) {
    const tess_config *c = tess_run_config(run);
    zoapp_sweep *s = &a->swp;
    const uint32_t seed = (uint32_t)tess_run_seed(run);
    const tess_group *eval = tess_mesh_axis_group(a->mesh, 0), *sh = tess_mesh_axis_group(a->mesh, 1);
    const int id = s->grid[r][0], it = s->grid[r][1], m = s->grid[r][2], k = s->grid[r][3];
    const int64_t d = (int64_t)s->dims[id];
    const zoapp_problem_config pc = zoapp_problem_options(c, d);
    if (s->prob_d != d) { /* this group's runs visit the dimensions in order */
        int64_t lo, hi;
        tess_par_block_range(d, sh->size, sh->rank, &lo, &hi);
        zoapp_problem_free(&a->prob);
        s->prob_d = 0;
        TESS_CHECK(zoapp_problem_create(&a->prob, &pc, lo, hi - lo, a->group));
        s->prob_d = d;
    }
    tess_zo_config zc = zoapp_method_options(c, &a->prob, (zoapp_method_id)m, seed + (uint32_t)k, 0);
    zc.rule = TESS_ZO_RULE_SWITCH;
    const double budget = tess_config_real(c, "sweep.relax") * zoapp_expected_k(&zc) / (zc.eta * zc.mu);
    const double cap = (double)tess_config_int(c, "sweep.max_samples");
    const zoapp_run_opts ro = {.budget = (int64_t)(budget < cap ? budget : cap),
                               .eps = tess_config_real(c, "sweep.eps"), .npoints = 2,
                               .fgap = false};
    zc.k_switch = (int64_t)((double)ro.budget / (2.0 * zoapp_expected_k(&zc)));
    zoapp_chain_free(&a->chain);
    TESS_CHECK(zoapp_chain_init(&a->chain, (zoapp_chain_kind)tess_config_enum(c, "chain.kind"),
                                pc.nstates, s->taus[it],
                                (tess_rng_key){.seed = seed + (uint32_t)k, .stream = 7},
                                zoapp_chain_cap(c)));
    zoapp_traj traj;
    zoapp_result res;
    TESS_CHECK(zoapp_run_method(&zc, &a->prob, &a->chain, eval, sh, &ro, &traj, &res));
    const double cost = zc.estimator == TESS_ZO_EST_FIRST_ORDER ? (double)d : 1.0;
    if (a->group->rank == 0) {
        const double v[ZOAPP_RUN_FIELDS] = {(double)d, s->taus[it], (double)m, (double)k,
                                            res.floor, res.n_eps, res.evals_eps * cost,
                                            res.final_err, res.seconds};
        memcpy(row, v, sizeof v);
        *samples = (double)res.samples;
    }
    return TESS_OK;
}

tess_status zoapp_sweep_step(tess_run *run, zoapp *a, int64_t lap, tess_run_step_out *out) {
    zoapp_sweep *s = &a->swp;
    const int ng = s->ngroups;
    /* back and forth: even laps deal groups 0..ng-1, odd laps ng-1..0 */
    const int64_t pos = lap % 2 == 0 ? s->mygroup : ng - 1 - s->mygroup;
    const int64_t first = lap * ng, r = first + pos;
    const int64_t n = first + ng <= s->nruns ? ng : s->nruns - first; /* runs in this lap */
    double *lap_rows = s->rows + first * ZOAPP_RUN_FIELDS;
    memset(lap_rows, 0, (size_t)(n * ZOAPP_RUN_FIELDS) * sizeof *lap_rows);
    double samples = 0.0; /* of this lap's runs, for the progress rate */
    if (r < s->nruns)
        TESS_CHECK(sweep_run(run, a, r, s->rows + r * ZOAPP_RUN_FIELDS, &samples));
    /* each row was filled by one rank (a group's rank 0); NAN (eps never reached) survives + 0 */
    TESS_CHECK(tess_par_allreduce_f64(tess_run_group(run), lap_rows, n * ZOAPP_RUN_FIELDS,
                                      TESS_PAR_SUM));
    TESS_CHECK(tess_par_allreduce_f64(tess_run_group(run), &samples, 1, TESS_PAR_SUM));
    for (int64_t i = first; i < first + n; i++) {
        const double *q = s->rows + i * ZOAPP_RUN_FIELDS;
        char neps[32];
        tess_log_info("zo sweep: run %lld/%lld d=%g tau=%g %s seed %g: floor %.3e, samples to eps "
                      "%s (%.1f s, %.0f s total)",
                      (long long)(i + 1), (long long)s->nruns, q[0], q[1],
                      zoapp_method_names[(int)q[2]], q[3], q[4],
                      zoapp_num(neps, sizeof neps, "%.4g", q[5]), q[8],
                      tess_timer_now() - s->t0);
    }
    *out = (tess_run_step_out){.done = lap + 1 == s->nlaps, .loss = NAN, .items = samples,
                               .position = (double)(first + n), .data_cursor = first + n};
    return TESS_OK;
}

static double median(double *v, int n) {
    for (int i = 1; i < n; i++) /* insertion sort; NAN (never reached) sorts last */
        for (int j = i; j > 0 && (isnan(v[j - 1]) || (!isnan(v[j]) && v[j] < v[j - 1])); j--) {
            double t = v[j];
            v[j] = v[j - 1];
            v[j - 1] = t;
        }
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

/* The three sweep plots; has[w][d][m]: whether series (what w, dimension d, method m) has a
 * value (series without one stay out of the legend). */
static tess_status sweep_plots(const tess_config *c, const char *dir, const bool *use,
                               const double *dims, int nd,
                               bool has[3][ZOAPP_MAX_LIST][M_NLOPT]) {
    char s[16384];
    /* The run's parameters as the second title line of every plot. */
    char sub[256];
    snprintf(sub, sizeof sub, "%s problem, %s chain, taus %s, dims %s, %lld seed(s), eps %g",
             tess_config_string(c, "problem.kind"), tess_config_string(c, "chain.kind"),
             tess_config_string(c, "sweep.taus"), tess_config_string(c, "sweep.dims"),
             (long long)tess_config_int(c, "sweep.seeds"), tess_config_real(c, "sweep.eps"));
    int n = snprintf(s, sizeof s,
                     "set terminal pngcairo size 1000,620 noenhanced font ',11'\n"
                     "set datafile separator ','\nset logscale xy\nset grid\n"
                     "set key inside bottom right opaque box samplen 2\n"
                     "set format x '%%g'\nset format y '%%g'\n"
                     "set xlabel 'mixing time / dimension, tau / d (dimensionless)'\n");
    const char *what[3][3] = {
        {"floor", "constant-step error floor (mean R over [N/4, N/2])",
         "error floor R = ||x-x*||^2/||x*||^2 (dimensionless)"},
        {"neps", "chain samples to R <= eps", "chain samples (oracle calls)"},
        {"costeps", "cost to R <= eps (ZO: evaluations; FO: gradients x d)",
         "cost (function evaluations)"}};
    for (int w = 0; w < 3; w++) {
        bool any = false;
        for (int k = 0; k < nd; k++)
            for (int m = 0; m < M_NLOPT; m++) any |= use[m] && has[w][k][m];
        if (!any) {
            tess_log_info("zo: plots/%s.png not drawn: no run has a value for it", what[w][0]);
            continue;
        }
        n += snprintf(s + n, sizeof s - (size_t)n,
                      "set output '%s/plots/%s.png'\nset title \"%s\\n%s\"\nset ylabel '%s'\nplot ",
                      dir, what[w][0], what[w][1], sub, what[w][2]);
        const char *sep = "";
        for (int k = 0; k < nd; k++)
            for (int m = 0; m < M_NLOPT; m++) {
                if (!use[m] || !has[w][k][m]) continue;
                n += snprintf(s + n, sizeof s - (size_t)n,
                              "%s'%s/metrics.csv' using (column('d')==%g ? column('tau_over_d') : "
                              "1/0):'%s_%s' with linespoints lw 2 lc %d dt %d pt %d title '%s d=%g'",
                              sep, dir, dims[k], zoapp_method_names[m], what[w][0], 1 + m, 1 + k,
                              4 + k, zoapp_method_names[m], dims[k]);
                sep = ", ";
            }
        n += snprintf(s + n, sizeof s - (size_t)n, "\n");
    }
    return zoapp_gnuplot(s);
}

tess_status zoapp_sweep_finish(tess_run *run, zoapp *a) {
    const tess_config *c = tess_run_config(run);
    zoapp_sweep *s = &a->swp;
    const char *dir = tess_run_dir(run);
    if (tess_run_group(run)->rank != 0) return TESS_OK;
    for (int64_t i = 0; i < s->nruns; i++)
        TESS_CHECK(tess_run_metrics_row(run, s->runs_csv, s->rows + i * ZOAPP_RUN_FIELDS));
    char path[4200];
    snprintf(path, sizeof path, "%s/results.md", dir);
    FILE *f = fopen(path, "w");
    TESS_REQUIRE(f, TESS_ERR_IO, "cannot write %s", path);
    const tess_zo_config z0 = zoapp_method_options(c, &a->prob, M_ZO, (uint32_t)tess_run_seed(run), 0);
    fprintf(f, "%s, n = %lld, %s chain; B = %lld, M = %lld (MLMC) / K = B (fixed); step eta = %g/(L d) "
               "for ZO and FO alike, switch rule (constant for N/2, then 2/(mu(k-k_s+k0))); budget N = "
               "%g E[K]/(eta mu) samples (cap %lld); medians over %lld seeds; eps = %g\n\n",
            tess_config_string(c, "problem.kind"), (long long)tess_config_int(c, "problem.states"),
            tess_config_string(c, "chain.kind"), (long long)z0.batch, (long long)z0.cap,
            tess_config_real(c, "optim.eta_scale"), tess_config_real(c, "sweep.relax"),
            (long long)tess_config_int(c, "sweep.max_samples"), (long long)s->seeds,
            tess_config_real(c, "sweep.eps"));
    fprintf(f, "| d | tau | tau/d |");
    for (int m = 0; m < M_NLOPT; m++)
        if (s->use[m])
            fprintf(f, " %s floor | %s N_eps | %s cost_eps |", zoapp_method_names[m],
                    zoapp_method_names[m], zoapp_method_names[m]);
    fprintf(f, "\n|---|---|---|");
    for (int m = 0; m < M_NLOPT; m++)
        if (s->use[m]) fprintf(f, "---|---|---|");
    fprintf(f, "\n");
    tess_status st = TESS_OK;
    bool has[3][ZOAPP_MAX_LIST][M_NLOPT] = {{{false}}};
    for (int id = 0; id < s->nd && st == TESS_OK; id++)
        for (int it = 0; it < s->nt && st == TESS_OK; it++) {
            double row[32];
            int k = 0;
            row[k++] = s->dims[id];
            row[k++] = s->taus[it];
            row[k++] = s->taus[it] / s->dims[id];
            fprintf(f, "| %g | %g | %.3g |", s->dims[id], s->taus[it], s->taus[it] / s->dims[id]);
            for (int m = 0; m < M_NLOPT; m++) {
                if (!s->use[m]) continue;
                double v[3][1000];
                int nv = 0;
                for (int64_t i = 0; i < s->nruns; i++) {
                    const double *q = s->rows + i * ZOAPP_RUN_FIELDS;
                    if (q[0] == s->dims[id] && q[1] == s->taus[it] && q[2] == (double)m && nv < 1000) {
                        v[0][nv] = q[4];
                        v[1][nv] = q[5];
                        v[2][nv] = q[6];
                        nv++;
                    }
                }
                for (int w = 0; w < 3; w++) {
                    row[k++] = nv ? median(v[w], nv) : NAN;
                    has[w][id][m] |= isfinite(row[k - 1]) != 0;
                }
                char neps[32], ceps[32];
                fprintf(f, " %.3e | %s | %s |", row[k - 3],
                        zoapp_num(neps, sizeof neps, "%.3g", row[k - 2]),
                        zoapp_num(ceps, sizeof ceps, "%.3g", row[k - 1]));
            }
            fprintf(f, "\n");
            st = tess_run_metrics_row(run, s->csv, row);
        }
    const bool closed = fclose(f) == 0;
    TESS_CHECK(st);
    TESS_REQUIRE(closed, TESS_ERR_IO, "cannot write %s", path);
    tess_log_info("zo sweep: done in %.1f s; wrote %s/metrics.csv (medians), runs.csv, results.md",
                  tess_timer_now() - s->t0, dir);
    if (tess_config_bool(c, "run.plots") && sweep_plots(c, dir, s->use, s->dims, s->nd, has) != TESS_OK) {
        tess_log_warn("zo: plots skipped:\n%s", tess_error_text());
        tess_error_clear();
    }
    return TESS_OK;
}

/* runner.h - run one method of the zo app on one problem and one Markov chain, and measure it.
 *
 * A run starts at x^0 = 0 with the chain at t = 0, so every method of a comparison sees the same
 * sample path Z_0, Z_1, ... (methods consume it at different speeds). The x-axis is always chain
 * samples consumed ("oracle calls"), never iterations. After every iteration the relative error
 * R = ||x - x*||^2 / ||x^0 - x*||^2 (of x-bar when averaging) is computed; from it:
 *   floor   mean of R over the iterations that end in the second half of the budget (weighted
 *           by the samples each consumed): the constant-step noise floor;
 *   n_eps   samples consumed from which on R stays <= eps until the end of the run (NAN if
 *           the run ends above eps): robust to single downward fluctuations;
 *   a trajectory at npoints log-spaced sample counts (samples, evaluations, R, f - f*).
 * Collective on the optimizer's eval and shard groups (NLopt: local, see zoapp_run_nlopt).
 */
#ifndef ZOAPP_RUNNER_H
#define ZOAPP_RUNNER_H

#include <stdbool.h>
#include <stdint.h>

#include "chain.h"       /* zoapp_chain */
#include "par/mesh.h"   /* tess_group */
#include "optim/zo.h"    /* tess_zo_config */
#include "nn/state.h"    /* tess_state */
#include "problem.h"     /* zoapp_problem */

enum { ZOAPP_MAX_POINTS = 256 };

typedef struct {
    int64_t budget;  /* chain samples */
    double eps;      /* target of R */
    int64_t npoints; /* trajectory points, 2..ZOAPP_MAX_POINTS */
    bool fgap;       /* also f(x) - f* at the trajectory points (O(n d) each) */
} zoapp_run_opts;

typedef struct {
    int64_t n; /* points filled */
    double samples[ZOAPP_MAX_POINTS], evals[ZOAPP_MAX_POINTS], err[ZOAPP_MAX_POINTS],
        gap[ZOAPP_MAX_POINTS];
} zoapp_traj;

typedef struct {
    double floor, n_eps, evals_eps, final_err, final_gap, seconds, comm_bytes_per_iter;
    int64_t iters, samples, evals;
} zoapp_result;

/* Where a run is between two iterations, besides the optimizer, the chain, traj and res: what a
 * checkpoint saves to continue it bitwise (res.seconds aside: wall time is not state). */
typedef struct {
    int64_t iters, samples, j; /* iterations, chain samples, trajectory points filled */
    double fsum, fw, comm;     /* floor sums (weighted R, weight) and bytes sent */
} zoapp_progress;

/* Sample count of trajectory point j of n for a budget: budget^((j+1)/n), rounded, >= 1. */
int64_t zoapp_traj_point(int64_t budget, int64_t n, int64_t j);

/* One method's run on a problem and a chain, iteration by iteration (a step of the run driver).
 * Everything that continues a run bitwise is in the optimizer, the chain, pg, traj and res, and
 * zoapp_method_describe lists it for checkpoints. Collective on the optimizer's eval and shard
 * groups. */
typedef struct {
    tess_zo *zo; /* owned */
    tess_zo_config cfg;
    zoapp_problem *p; /* borrowed */
    zoapp_chain *ch;  /* borrowed; shared by the methods of a comparison */
    const tess_group *shard;
    zoapp_run_opts o;
    zoapp_progress pg;
    zoapp_traj traj;
    zoapp_result res;
    int64_t finished; /* 1 once the budget is spent and res is complete */
    double t_start;   /* wall clock of this process's first iteration */
} zoapp_method;

/* A method at its start (x^0 = 0; the chain is reset at its first iteration). cfg, p, ch, the
 * groups and o are borrowed and must outlive m. TESS_ERR_ARG for bad options or a chain whose
 * segments are too short for an iteration, TESS_ERR_MEM. Collective on eval and shard. */
tess_status zoapp_method_create(zoapp_method *m, const tess_zo_config *cfg, zoapp_problem *p,
                                zoapp_chain *ch, const tess_group *eval, const tess_group *shard,
                                const zoapp_run_opts *o);
void zoapp_method_free(zoapp_method *m);
/* The method's state under prefix: the optimizer (<prefix>/x, ...; tess_zo_describe), progress
 * (<prefix>/progress/...), trajectory (<prefix>/traj/...) and results (<prefix>/result/...). */
tess_status zoapp_method_describe(zoapp_method *m, tess_state *st, const char *prefix);
/* One iteration (the first resets the chain). When it spends the budget the results are
 * completed and m->finished becomes 1. TESS_ERR_DIVERGED if R becomes non-finite. Collective on
 * eval and shard. */
tess_status zoapp_method_iterate(zoapp_method *m);

/* A whole run of cfg until the budget is spent (the sweep and the tests): create, iterate,
 * copy out traj and res, free. Collective on eval and shard. */
tess_status zoapp_run_method(const tess_zo_config *cfg, zoapp_problem *p, zoapp_chain *ch,
                             const tess_group *eval, const tess_group *shard,
                             const zoapp_run_opts *o, zoapp_traj *traj, zoapp_result *res);

/* NLopt on the same noisy objective: every function call consumes one chain state; at most
 * min(budget, max_evals) calls; alg "bobyqa" or "neldermead"; the trajectory follows the points
 * NLopt evaluates, the final error its returned x. Local (one rank, replicated x). Errors
 * reported by NLopt end the run early (res->samples tells how far it got), they are not
 * failures; TESS_ERR_MEM only. */
tess_status zoapp_run_nlopt(const char *alg, double init_step, int64_t max_evals,
                            zoapp_problem *p, zoapp_chain *ch, const zoapp_run_opts *o,
                            zoapp_traj *traj, zoapp_result *res, int *nlopt_code);

#endif

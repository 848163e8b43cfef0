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
 * checkpoint saves to continue it bitwise (res->seconds aside: wall time is not state). */
typedef struct {
    int64_t iters, samples, j; /* iterations, chain samples, trajectory points filled */
    double fsum, fw, comm;     /* floor sums (weighted R, weight) and bytes sent */
} zoapp_progress;

/* Hooks of a checkpointed run (apps/zo/main.c); each may be NULL. start: after the optimizer is
 * made and the chain reset, before the first iteration (restore a saved state into zo, ch, pg,
 * traj and res). boundary: after every iteration, with the state complete; *stop = true ends the
 * run there (the caller saved it). Both are called collectively on eval and shard. */
typedef struct {
    tess_status (*start)(void *ctx, tess_zo *zo, zoapp_chain *ch, zoapp_progress *pg,
                         zoapp_traj *traj, zoapp_result *res);
    tess_status (*boundary)(void *ctx, tess_zo *zo, const zoapp_chain *ch,
                            const zoapp_progress *pg, const zoapp_traj *traj,
                            const zoapp_result *res, bool *stop);
    void *ctx;
} zoapp_hooks;

/* Sample count of trajectory point j of n for a budget: budget^((j+1)/n), rounded, >= 1. */
int64_t zoapp_traj_point(int64_t budget, int64_t n, int64_t j);

/* Run the optimizer configured by cfg until the budget is spent. Collective on eval and shard;
 * the chain is reset first. hooks may be NULL; *stopped (may be NULL) tells whether a boundary
 * hook ended the run early (then traj and res are incomplete). TESS_ERR_ARG/MEM from the
 * optimizer, TESS_ERR_DIVERGED if R becomes non-finite, a hook's status. */
tess_status zoapp_run_method(const tess_zo_config *cfg, zoapp_problem *p, zoapp_chain *ch,
                             const tess_group *eval, const tess_group *shard,
                             const zoapp_run_opts *o, const zoapp_hooks *hooks,
                             zoapp_traj *traj, zoapp_result *res, bool *stopped);

/* NLopt on the same noisy objective: every function call consumes one chain state; at most
 * min(budget, max_evals) calls; alg "bobyqa" or "neldermead"; the trajectory follows the points
 * NLopt evaluates, the final error its returned x. Local (one rank, replicated x). Errors
 * reported by NLopt end the run early (res->samples tells how far it got), they are not
 * failures; TESS_ERR_MEM only. */
tess_status zoapp_run_nlopt(const char *alg, double init_step, int64_t max_evals,
                            zoapp_problem *p, zoapp_chain *ch, const zoapp_run_opts *o,
                            zoapp_traj *traj, zoapp_result *res, int *nlopt_code);

#endif

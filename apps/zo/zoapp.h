/* zoapp.h - what the zo app's two modes (compare.c, sweep.c) share with its main: the methods,
 * the app's context, and the option helpers. */
#ifndef ZOAPP_ZOAPP_H
#define ZOAPP_ZOAPP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "chain.h"     /* zoapp_chain */
#include "core/config.h" /* tess_config */
#include "optim/zo.h"  /* tess_zo_config */
#include "par/mesh.h"  /* tess_mesh, tess_group */
#include "problem.h"   /* zoapp_problem */
#include "run/run.h"   /* tess_run */
#include "runner.h"    /* zoapp_method, zoapp_traj, zoapp_result */

typedef enum { M_ZO = 0, M_ZO_PLAIN, M_FO, M_FO_PLAIN, M_NLOPT, M_COUNT } zoapp_method_id;
typedef enum { ZOAPP_MODE_COMPARE = 0, ZOAPP_MODE_SWEEP, ZOAPP_MODE_COUNT } zoapp_mode;
typedef enum { ZOAPP_NLOPT_BOBYQA = 0, ZOAPP_NLOPT_NELDERMEAD, ZOAPP_NLOPT_NONE,
               ZOAPP_NLOPT_COUNT } zoapp_nlopt_kind;
extern const char *const zoapp_method_names[M_COUNT]; /* "zo", "zo_plain", "fo", ... */

enum { ZOAPP_MAX_LIST = 32, ZOAPP_NAME_MAX = 32 };
enum { ZOAPP_RUN_FIELDS = 9 }; /* sweep runs.csv: d, tau, method, seed, floor, n_eps, cost_eps,
                                  final, seconds */

/* compare mode: one problem, every method on the same chain, one after the other */
typedef struct {
    bool want[M_COUNT];
    zoapp_method methods[M_NLOPT];
    bool made[M_NLOPT];
    int64_t current; /* state: the method running or next; M_NLOPT once the ZO/FO methods are done */
    zoapp_run_opts ro;
    zoapp_traj nl_traj;
    zoapp_result nl_res;
    int64_t d;
    bool l1;
    int csv;
    const char *cols[32];
    char names[32][ZOAPP_NAME_MAX];
} zoapp_compare;

/* sweep mode: the tau x d grid, runs dealt to groups of ranks, one lap of runs per step */
typedef struct {
    double dims[ZOAPP_MAX_LIST], taus[ZOAPP_MAX_LIST];
    int nd, nt;
    bool use[M_COUNT];
    int64_t seeds, nruns, nlaps;
    int ngroups, mygroup;
    int32_t (*grid)[4]; /* (nruns) the run's (dim index, tau index, method, seed) in run order */
    double *rows;       /* (nruns, ZOAPP_RUN_FIELDS), the same on every rank: state "sweep/rows" */
    int64_t prob_d;     /* dimension of the problem built (0: none yet) */
    double t0;
    int runs_csv, csv;
    const char *cols[32];
    char names[32][ZOAPP_NAME_MAX];
} zoapp_sweep;

typedef struct {
    bool sweep;
    tess_group *group; /* sweep: this rank's run group (compare: NULL, the run's group is used) */
    tess_mesh *mesh;   /* eval x shard over the run (compare) or over the run group (sweep) */
    zoapp_problem prob;
    zoapp_chain chain;
    zoapp_compare cmp;
    zoapp_sweep swp;
} zoapp;

/* v formatted with fmt into buf (n bytes), or "-" when v is NaN (never reached, not measured). */
const char *zoapp_num(char *buf, size_t n, const char *fmt, double v);
/* Title of method m under the options: zo and fo follow optim.batching. */
const char *zoapp_method_title(const tess_config *c, zoapp_method_id m);
/* The problem's configuration at dimension d. */
zoapp_problem_config zoapp_problem_options(const tess_config *c, int64_t d);
/* The optimizer config of method m (not NLopt); budget sets the switch rule's k_switch. */
tess_zo_config zoapp_method_options(const tess_config *c, const zoapp_problem *p,
                                    zoapp_method_id m, uint32_t seed, int64_t budget);
/* Expected chain samples of one iteration. */
double zoapp_expected_k(const tess_zo_config *z);
/* Max chain steps of one iteration over every method the run may use. */
int64_t zoapp_chain_cap(const tess_config *c);
/* Comma-separated values of option key (at most ZOAPP_MAX_LIST), each checked against the type
 * and range of the option it stands for (e.g. sweep.dims: problem.dim); TESS_ERR_CONFIG. */
tess_status zoapp_parse_list(const tess_config *c, const char *key, const char *stands_for,
                             double *v, int *n);
/* sweep.methods into use[]; TESS_ERR_CONFIG naming an unknown method. */
tess_status zoapp_parse_methods(const tess_config *c, bool use[M_COUNT]);
/* Run gnuplot on a script (rank 0). TESS_ERR_NOINPUT without gnuplot, TESS_ERR_IO. */
tess_status zoapp_gnuplot(const char *script);

/* The modes' callbacks for the run driver (main.c dispatches on run.mode). */
tess_status zoapp_compare_setup(tess_run *run, zoapp *a);
tess_status zoapp_compare_restored(tess_run *run, zoapp *a);
tess_status zoapp_compare_step(tess_run *run, zoapp *a, tess_run_step_out *out);
tess_status zoapp_compare_finish(tess_run *run, zoapp *a);
void zoapp_compare_free(zoapp_compare *c);
tess_status zoapp_sweep_setup(tess_run *run, zoapp *a);
tess_status zoapp_sweep_step(tess_run *run, zoapp *a, int64_t lap, tess_run_step_out *out);
tess_status zoapp_sweep_finish(tess_run *run, zoapp *a);
void zoapp_sweep_free(zoapp_sweep *s);

#endif

/* run.h - the run driver: everything a training or simulation run has, around an app's callbacks.
 *
 * An app is a model, its data and a main that wires library parts:
 *
 *   static const tess_run_app my_app = {.name = "myapp", .sections = ..., .setup = setup,
 *                                       .step = step, .finish = finish, .destroy = destroy};
 *   int main(int argc, char **argv) { my_ctx c = {0}; return tess_run_main(&my_app, &c, argc, argv); }
 *
 * The driver owns (anchors: PETSc's TS with user callbacks, monitors and prefixed options;
 * Megatron-LM's pretrain(dataset_provider, model_provider, forward_step); llm.c's one loop):
 *   - MPI start-up (MPI_THREAD_FUNNELED: the checkpoint load hashes on a worker thread), the
 *     stop signals, the run's group, the exit code (core/runtime.h);
 *   - the options every run has, in sections run.* (dir, seed, plots, stop_at), ckpt.* (dir,
 *     every, keep, at_end, resume; also --resume) and log.* (level, also -v/-q; progress,
 *     progress_every, per_rank), next to the app's own sections; --help, --print-config,
 *     --print-params;
 *   - the run directory (config.ini, run.log, metrics files .csv and .jsonl, plots/,
 *     checkpoints/); run.log's header names the BLAS build and kernels, with a hint when
 *     OpenBLAS runs older kernels than the CPU allows (tensor/blasinfo.h);
 *   - resume: after setup, `ckpt.resume` = auto|FILE loads the checkpoint into the state the app
 *     described (tess_run_state) after checking that it was written by the same app with the same
 *     run.seed and the same values of every option not declared TESS_OPT_RESUMABLE (core/config.h),
 *     and that its step does not exceed the run's length;
 *   - the loop: step callbacks until the app says done; after every step a stop vote over all
 *     ranks (SIGUSR1/SIGTERM/SIGINT on any rank, or run.stop_at), periodic checkpoints
 *     (ckpt.every), the checkpoint of a stop and exit 75 (TESS_EXIT_STOPPED), the final
 *     checkpoint (ckpt.at_end);
 *   - metrics files that reopen correctly on resume (per-step files keep the rows up to the
 *     resumed step; their `seconds` column continues from the last kept row), the progress line,
 *     named timers reported at the end, and PNG plots of metrics columns.
 *
 * Collectiveness: tess_run_main is collective on MPI_COMM_WORLD. Every callback is called on
 * every rank in the same order and may call collectives on the run's group (tess_run_group).
 * Errors: a callback returns a status; while the run is "collective" (during setup, until the
 * app calls tess_run_local_from_here) every rank must return the same status (configuration and
 * validation errors), which rank 0 prints once; afterwards a failure on any rank aborts the run
 * (MPI_Abort), so no rank waits forever.
 */
#ifndef TESS_RUN_RUN_H
#define TESS_RUN_RUN_H

#include <stdbool.h>
#include <stdint.h>

#include "core/config.h" /* tess_config, tess_opt, tess_config_section */
#include "core/status.h" /* tess_status */
#include "core/timer.h"  /* tess_timers */
#include "io/plot.h"     /* tess_plot_spec */
#include "nn/state.h"    /* tess_state */
#include "par/mesh.h"    /* tess_group */

enum {
    TESS_RUN_MAX_METRICS = 8,
    TESS_RUN_MAX_PLOTS = 16,
    TESS_RUN_MAX_RUN_OPTS = 8,
    TESS_RUN_MAX_COUNTERS = 8
};

typedef struct tess_run tess_run;

/* What one step reports to the driver. */
typedef struct {
    bool done;        /* the run is complete after this step (the driver then finishes) */
    double loss;      /* for the progress line (NaN: none) */
    double items;     /* work done in this step for the progress rate (tokens, samples) */
    double position;  /* where the run is, in units of tess_run_app.total (e.g. samples used);
                         NaN: the step count */
    int64_t data_cursor; /* position of the training data stream after this step (stored in
                            checkpoints; tess_run_data_cursor gives it back on resume) */
} tess_run_step_out;

/* An app: its name, options and callbacks. ctx is the app's own object, passed to each callback. */
typedef struct {
    const char *name;        /* program name, e.g. "tinylm": messages, checkpoints, run.dir default */
    const char *unit;        /* what one step is, e.g. "step", "iteration", "round" */
    const char *rate_unit;   /* unit of the progress rate, e.g. "tok", "samples" */
    const tess_config_section *sections; /* the app's own option sections */
    int64_t nsections;
    const tess_opt *run_opts; /* extra keys of the run section (e.g. run.mode); may be NULL */
    int64_t nrun_opts;        /* at most TESS_RUN_MAX_RUN_OPTS */
    const char *default_dir;  /* default of run.dir, e.g. "runs/tinylm" */

    /* Required. Read the options (tess_run_config), check them, build the model and data,
     * describe every piece of state into tess_run_state, declare metrics and plots, and set the
     * run's length (tess_run_set_total). Collective until tess_run_local_from_here. */
    tess_status (*setup)(tess_run *run, void *ctx);
    /* Optional. After a checkpoint was loaded into the state (at start-up, before the first step
     * of the resumed run): rebuild whatever derives from the loaded state. Per-step metrics rows
     * it writes are stamped with the checkpoint's step. */
    tess_status (*restored)(tess_run *run, void *ctx);
    /* Required. Run step `step` (0-based: the number of steps done before it). */
    tess_status (*step)(tess_run *run, void *ctx, int64_t step, tess_run_step_out *out);
    /* Optional. After the last step, when the run was not stopped: results, summaries. */
    tess_status (*finish)(tess_run *run, void *ctx);
    /* Optional. Free ctx's contents whatever happened (also after a failed setup). Not collective. */
    void (*destroy)(void *ctx);
} tess_run_app;

/* The whole program: MPI_Init_thread, options, run directory, setup, resume, the loop, checkpoints,
 * metrics, plots, timers, MPI_Finalize. Returns the process exit code (core/runtime.h): 0 done,
 * 75 stopped after a checkpoint, others for errors. */
int tess_run_main(const tess_run_app *app, void *ctx, int argc, char **argv);

/* --- for the callbacks (not collective unless said) ------------------------------------------ */

/* The parsed options (the app's sections and run.*, ckpt.*, log.*). */
const tess_config *tess_run_config(const tess_run *run);
/* The run's group: every rank of the run (a duplicate of MPI_COMM_WORLD with MPI_ERRORS_RETURN). */
const tess_group *tess_run_group(const tess_run *run);
/* run.seed, run.dir. */
uint64_t tess_run_seed(const tess_run *run);
const char *tess_run_dir(const tess_run *run);
/* The state the checkpoints hold: the app adds its entries during setup (the driver writes and
 * loads whatever is listed). */
tess_state *tess_run_state(tess_run *run);
/* The driver's named timers ("step", "checkpoint" are its own); the app may add its own with
 * tess_timer_get. Reported (min/mean/max over ranks) at the end of a finished run. */
tess_timers *tess_run_timers(tess_run *run);

/* The run's length in units of `position` (setup sets it; 0: unknown, the progress line then
 * shows no ETA) and, when known, its number of steps (checked on resume: a checkpoint beyond it is
 * refused; 0: unknown). */
void tess_run_set_total(tess_run *run, double total, int64_t steps);
/* What `position` counts, named on the progress line ("samples 2400/6000 ..."); the string must
 * outlive the run. Default: "step". */
void tess_run_set_position_unit(tess_run *run, const char *what);

/* What a resumed checkpoint may hold, declared in setup and checked right after the load (before
 * the restored callback), so that a forged or re-sealed checkpoint cannot start a run from an
 * impossible position; a value out of range is TESS_ERR_DATA naming the file, the value and its
 * range, on every rank.
 *   tess_run_set_data_cursor_max: the stored data cursor is at most max (the dataset's size, or
 *     the steps times the samples one step consumes); 0 (the default): no limit.
 *   tess_run_bound_counter: the one-element int64 state entry `name` (already added) lies in
 *     [0, per_step x the checkpoint's step], e.g. an optimizer's "optim/step_count" with per_step
 *     1. At most TESS_RUN_MAX_COUNTERS; TESS_ERR_ARG for an entry that is not an int64 [1] entry
 *     of the state, per_step < 0 or too many counters. */
void tess_run_set_data_cursor_max(tess_run *run, int64_t max);
tess_status tess_run_bound_counter(tess_run *run, const char *name, int64_t per_step);

/* From here on a failure may happen on one rank alone (allocation, I/O): it aborts the run.
 * Call in setup once every option has been validated identically on every rank. */
void tess_run_local_from_here(tess_run *run);

/* After resume: whether a checkpoint was loaded, the step it holds (0 if none) and the data
 * cursor stored with it (0 if none). Valid from the restored callback on. */
bool tess_run_resumed(const tess_run *run);
int64_t tess_run_start_step(const tess_run *run);
int64_t tess_run_data_cursor(const tess_run *run);

/* A metrics file <run.dir>/<file>.csv with the app's columns, and next to it <file>.jsonl with the
 * same rows as JSON objects (io/metrics.h). Declare in setup.
 * per_step: the driver writes the step as the first column ("step") and the cumulative wall
 *   seconds of the run as the last ("seconds"); the app gives the columns between. On resume the
 *   rows up to the resumed step are kept and `seconds` continues from the last of them.
 * otherwise: a results file the app writes whole (e.g. at finish): created fresh, no extra
 *   columns.
 * The file is opened at its first row, so a run that stops before writing one leaves none.
 * Written by rank 0 only; values must be the same on every rank (already reduced). */
tess_status tess_run_metrics(tess_run *run, const char *file, const char *const *cols, int ncols,
                             bool per_step, int *id);
/* Append a row of ncols values (the app's columns) to metrics file id. A per-step row is stamped
 * with the step the driver is running (steps done, counting the current one). Rank 0 writes;
 * other ranks return TESS_OK. */
tess_status tess_run_metrics_row(tess_run *run, int id, const double *values);

/* A PNG plot <run.dir>/plots/<png> of metrics file id (io/plot.h: both axes labelled with units,
 * an optional right axis, columns without values left out), drawn with gnuplot by rank 0 at the
 * end of a finished run when run.plots is on. spec->subtitle NULL gets the run's subtitle
 * (tess_run_plot_subtitle); spec->xcol NULL is the file's first column. A missing gnuplot or a
 * plot that cannot be drawn is a warning, not a failure. Declare in setup; the spec is copied,
 * its strings must outlive the run. TESS_ERR_ARG for a spec without labels. */
tess_status tess_run_plot(tess_run *run, int id, const char *png, const tess_plot_spec *spec);
/* The second title line of the run's plots: its parameters, e.g. "L=2 C=64 heads=4, 83648
 * parameters, 2 ranks". Copied (up to 255 bytes). Default: "<app>, <P> rank(s), run.seed <s>". */
void tess_run_plot_subtitle(tess_run *run, const char *text);

#endif

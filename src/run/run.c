/* run.c - the run driver (see run.h). */
#include "run/run.h"

#include <errno.h>
#include <math.h>
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/log.h"     /* tess_log_*, tess_progress_* */
#include "core/runtime.h" /* tess_runtime_*, TESS_EXIT_STOPPED */
#include "core/signals.h" /* tess_signals_* */
#include "io/ckpt.h"      /* tess_ckpt_* */
#include "io/metrics.h"   /* tess_metrics_* */
#include "io/plot.h"      /* tess_plot_csv */
#include "io/rundir.h"    /* tess_rundir_prepare */
#include "par/coll.h"     /* tess_par_allreduce_f64, tess_par_agree */
#include "tensor/blasinfo.h" /* tess_blasinfo_* */
#include "tensor/matmul.h"   /* tess_matmul_init */

enum { RUN_PATH_MAX = 4200, RUN_SECTIONS_MAX = 32 };

typedef struct {
    char path[RUN_PATH_MAX];
    const char *names[TESS_METRICS_MAX_COLS]; /* with "step" and "seconds" when per_step */
    int ncols;                                /* the app's columns */
    bool per_step, opened;
    tess_metrics file;
} run_metrics;

typedef struct {
    int id;
    const char *png;
    tess_plot_spec spec;
} run_plot;

struct tess_run {
    const tess_run_app *app;
    void *ctx;
    const tess_runtime *rt;
    const tess_group *group; /* the runtime's world group */
    tess_config *cfg;
    tess_opt run_opts[4 + TESS_RUN_MAX_RUN_OPTS];
    tess_config_section sections[RUN_SECTIONS_MAX];
    tess_state *state;
    tess_timers timers;
    tess_timer_id t_step, t_ckpt;
    char ckpt_dir[RUN_PATH_MAX];
    double total;         /* run length in position units; 0 unknown */
    const char *position_unit; /* what position counts ("samples"); NULL: steps */
    int64_t total_steps;  /* 0 unknown */
    int64_t step;         /* steps done, counting the one running */
    int64_t start_step, data_cursor;
    int64_t finished;     /* state "run/finished": 1 once the last step is done */
    bool collective, resumed, stopped;
    double t0, seconds_before; /* wall clock at the loop's start; seconds of earlier attempts */
    run_metrics metrics[TESS_RUN_MAX_METRICS];
    int nmetrics;
    run_plot plots[TESS_RUN_MAX_PLOTS];
    int nplots;
    char subtitle[256]; /* of every plot; "" until set: the default */
    int64_t cursor_max;  /* largest data cursor a resume may hold; 0: no limit */
    struct {
        int64_t entry, per_step; /* state entry index; its bound per step */
    } counters[TESS_RUN_MAX_COUNTERS];
    int ncounters;
};

static const tess_opt ckpt_opts[] = {
    TESS_OPT_RESUMABLE(STRING, "dir", "", "checkpoint directory (empty: <run.dir>/checkpoints)"),
    TESS_OPT_RESUMABLE(INT, "every", 0, 0, INT64_MAX / 4,
                       "steps between checkpoints (0: only at_end)"),
    TESS_OPT_RESUMABLE(INT, "keep", 3, 0, 1000000, "newest checkpoints kept (0: all)"),
    TESS_OPT_RESUMABLE(BOOL, "at_end", true, "checkpoint after the last step"),
    TESS_OPT_RESUMABLE(BOOL, "overwrite", false,
                       "start fresh (no ckpt.resume) even if ckpt.dir holds an earlier run's "
                       "checkpoints"),
    TESS_OPT_RESUMABLE(STRING, "resume", "",
                       "'' (start fresh), auto (newest valid in ckpt.dir) or a file; also "
                       "--resume"),
};
static const tess_opt_enum log_level_names[] = {{"error", TESS_LOG_ERROR}, {"warn", TESS_LOG_WARN},
                                               {"info", TESS_LOG_INFO}, {"debug", TESS_LOG_DEBUG}};
TESS_OPT_ENUM_TABLE_CHECK(log_level_names, TESS_LOG_DEBUG + 1);
static const tess_opt_enum progress_names[] = {{"auto", TESS_PROGRESS_AUTO},
                                              {"tty", TESS_PROGRESS_TTY},
                                              {"lines", TESS_PROGRESS_LINES},
                                              {"off", TESS_PROGRESS_OFF}};
TESS_OPT_ENUM_TABLE_CHECK(progress_names, TESS_PROGRESS_OFF + 1);
static const tess_opt log_opts[] = {
    TESS_OPT_RESUMABLE(ENUM, "level", "info", log_level_names,
                       "messages shown: error, warn, info or debug (per-rank detail); -v is debug, "
                       "-q is warn"),
    TESS_OPT_RESUMABLE(ENUM, "progress", "auto", progress_names,
                       "progress line: tty (rewritten in place), lines (one line every "
                       "log.progress_every seconds), off, or auto (tty on a terminal outside "
                       "mpiexec and srun, else lines)"),
    TESS_OPT_RESUMABLE(REAL, "progress_every", 10.0, 0.1, 86400.0,
                       "seconds between progress lines under lines, and in the log file"),
    TESS_OPT_RESUMABLE(BOOL, "per_rank", false,
                       "every rank r > 0 also writes <run.dir>/run.rank<r>.log (rank 0: run.log)"),
};

/* ---- accessors ------------------------------------------------------------------------------ */

const tess_config *tess_run_config(const tess_run *run) { return run->cfg; }
const tess_group *tess_run_group(const tess_run *run) { return run->group; }
uint64_t tess_run_seed(const tess_run *run) { return (uint64_t)tess_config_int(run->cfg, "run.seed"); }
const char *tess_run_dir(const tess_run *run) { return tess_config_string(run->cfg, "run.dir"); }
tess_state *tess_run_state(tess_run *run) { return run->state; }
tess_timers *tess_run_timers(tess_run *run) { return &run->timers; }
bool tess_run_resumed(const tess_run *run) { return run->resumed; }
int64_t tess_run_start_step(const tess_run *run) { return run->start_step; }
int64_t tess_run_data_cursor(const tess_run *run) { return run->data_cursor; }
void tess_run_local_from_here(tess_run *run) { run->collective = false; }

void tess_run_set_total(tess_run *run, double total, int64_t steps) {
    run->total = total;
    run->total_steps = steps;
}

void tess_run_set_position_unit(tess_run *run, const char *what) { run->position_unit = what; }

void tess_run_set_data_cursor_max(tess_run *run, int64_t max) { run->cursor_max = max; }

tess_status tess_run_bound_counter(tess_run *run, const char *name, int64_t per_step) {
    const int64_t i = name ? tess_state_find(run->state, name) : -1;
    const tess_state_entry *e = i >= 0 ? tess_state_get(run->state, i) : NULL;
    TESS_REQUIRE(e && e->dtype == TESS_I64 && e->global_count == 1 && e->local_count == 1,
                 TESS_ERR_ARG,
                 "tess_run_bound_counter: '%s' is not a one-element int64 entry of the state",
                 name ? name : "(null)");
    TESS_REQUIRE(per_step >= 0, TESS_ERR_ARG, "tess_run_bound_counter: per_step %lld of '%s' < 0",
                 (long long)per_step, name);
    TESS_REQUIRE(run->ncounters < TESS_RUN_MAX_COUNTERS, TESS_ERR_ARG,
                 "tess_run_bound_counter: more than %d counters", TESS_RUN_MAX_COUNTERS);
    run->counters[run->ncounters].entry = i;
    run->counters[run->ncounters++].per_step = per_step;
    return TESS_OK;
}

/* The declared ranges of what a resume loaded from path at step `step` with data cursor
 * `cursor` (tess_run_set_data_cursor_max, tess_run_bound_counter). Collective: the verdict is
 * agreed. */
static tess_status check_resumed_ranges(const tess_run *run, const char *path, int64_t step,
                                        int64_t cursor) {
    tess_status s = TESS_OK;
    if (run->cursor_max > 0 && cursor > run->cursor_max)
        s = tess_error_push(TESS_ERR_DATA, __FILE__, __LINE__, __func__,
                            "'%s' holds data_cursor %lld, beyond the %lld this run's data can "
                            "reach",
                            path, (long long)cursor, (long long)run->cursor_max);
    for (int c = 0; c < run->ncounters && s == TESS_OK; c++) {
        const tess_state_entry *e = tess_state_get(run->state, run->counters[c].entry);
        const int64_t v = *(const int64_t *)e->data, per = run->counters[c].per_step;
        int64_t hi;
        if (__builtin_mul_overflow(per, step, &hi)) hi = INT64_MAX;
        if (v < 0 || v > hi)
            s = tess_error_push(TESS_ERR_DATA, __FILE__, __LINE__, __func__,
                                "'%s' holds %s = %lld, outside [0, %lld] (at most %lld per %s, "
                                "%lld %ss)",
                                path, e->name, (long long)v, (long long)hi, (long long)per,
                                run->app->unit, (long long)step, run->app->unit);
    }
    TESS_CHECK(tess_par_agree(run->group, s));
    return TESS_OK;
}

/* ---- metrics and plots ---------------------------------------------------------------------- */

tess_status tess_run_metrics(tess_run *run, const char *file, const char *const *cols, int ncols,
                             bool per_step, int *id) {
    TESS_REQUIRE(run->nmetrics < TESS_RUN_MAX_METRICS, TESS_ERR_ARG,
                 "more than %d metrics files", TESS_RUN_MAX_METRICS);
    const int extra = per_step ? 2 : 0;
    TESS_REQUIRE(ncols >= 1 && ncols + extra <= TESS_METRICS_MAX_COLS, TESS_ERR_ARG,
                 "metrics '%s': %d columns, expected 1..%d", file, ncols,
                 TESS_METRICS_MAX_COLS - extra);
    run_metrics *m = &run->metrics[run->nmetrics];
    memset(m, 0, sizeof *m);
    const int n = snprintf(m->path, sizeof m->path, "%s/%s.csv", tess_run_dir(run), file);
    TESS_REQUIRE(n > 0 && n < (int)sizeof m->path, TESS_ERR_CONFIG, "run.dir is too long");
    int k = 0;
    if (per_step) m->names[k++] = "step";
    for (int i = 0; i < ncols; i++) m->names[k++] = cols[i];
    if (per_step) m->names[k++] = "seconds";
    m->ncols = ncols;
    m->per_step = per_step;
    *id = run->nmetrics++;
    return TESS_OK;
}

/* Open metrics file m at its first row (rank 0): per-step files of a resumed run keep the rows
 * up to the resumed step, and `seconds` continues from the last kept row. */
static tess_status metrics_open(tess_run *run, run_metrics *m) {
    const int n = m->ncols + (m->per_step ? 2 : 0);
    if (m->per_step && run->resumed) {
        double last[TESS_METRICS_MAX_COLS];
        TESS_CHECK(tess_metrics_open_resume(&m->file, m->path, m->names, n, run->start_step, last));
        if (!isnan(last[n - 1]) && last[n - 1] > run->seconds_before)
            run->seconds_before = last[n - 1];
    } else {
        TESS_CHECK(tess_metrics_open(&m->file, m->path, m->names, n, false));
    }
    m->opened = true;
    return TESS_OK;
}

tess_status tess_run_metrics_row(tess_run *run, int id, const double *values) {
    TESS_REQUIRE(id >= 0 && id < run->nmetrics, TESS_ERR_ARG, "no metrics file %d", id);
    if (run->rt->rank != 0) return TESS_OK;
    run_metrics *m = &run->metrics[id];
    if (!m->opened) TESS_CHECK(metrics_open(run, m));
    double row[TESS_METRICS_MAX_COLS];
    int k = 0;
    if (m->per_step) row[k++] = (double)run->step;
    for (int i = 0; i < m->ncols; i++) row[k++] = values[i];
    if (m->per_step) row[k++] = run->seconds_before + (tess_timer_now() - run->t0);
    TESS_CHECK(tess_metrics_row(&m->file, row));
    return TESS_OK;
}

tess_status tess_run_plot(tess_run *run, int id, const char *png, const tess_plot_spec *spec) {
    TESS_REQUIRE(run->nplots < TESS_RUN_MAX_PLOTS, TESS_ERR_ARG, "more than %d plots",
                 TESS_RUN_MAX_PLOTS);
    TESS_REQUIRE(id >= 0 && id < run->nmetrics, TESS_ERR_ARG, "plot '%s': no metrics file %d",
                 png, id);
    TESS_REQUIRE(spec->title && spec->ny >= 1 && spec->xlabel && spec->ylabel &&
                     (spec->ny2 == 0 || spec->y2label),
                 TESS_ERR_ARG, "plot '%s': a title, columns and a label with units on every axis "
                 "are required", png);
    run->plots[run->nplots++] = (run_plot){id, png, *spec};
    return TESS_OK;
}

void tess_run_plot_subtitle(tess_run *run, const char *text) {
    snprintf(run->subtitle, sizeof run->subtitle, "%s", text);
}

/* Rank 0, after a finished run: every declared plot; failures are warnings. */
static void draw_plots(tess_run *run) {
    if (run->rt->rank != 0 || !tess_config_bool(run->cfg, "run.plots")) return;
    char subtitle[sizeof run->subtitle];
    if (run->subtitle[0])
        snprintf(subtitle, sizeof subtitle, "%s", run->subtitle);
    else
        snprintf(subtitle, sizeof subtitle, "%s, %d rank%s, run.seed %llu", run->app->name,
                 run->group->size, run->group->size == 1 ? "" : "s",
                 (unsigned long long)tess_run_seed(run));
    for (int i = 0; i < run->nplots; i++) {
        const run_plot *p = &run->plots[i];
        char png[RUN_PATH_MAX];
        snprintf(png, sizeof png, "%s/plots/%s", tess_run_dir(run), p->png);
        tess_plot_spec spec = p->spec;
        if (!spec.subtitle) spec.subtitle = subtitle;
        if (tess_plot_csv(run->metrics[p->id].path, png, &spec) == TESS_OK) {
            tess_log_info("%s: wrote %s", run->app->name, png);
        } else {
            tess_log_warn("%s: plot %s skipped:\n%s", run->app->name, png, tess_error_text());
            tess_error_clear();
        }
    }
}

/* ---- checkpoints ---------------------------------------------------------------------------- */

/* Checkpoint after run->step steps. Collective: every rank returns the same status. */
static tess_status save(tess_run *run) {
    tess_timer_start(&run->timers, run->t_ckpt);
    tess_ckpt_state st = {.state = run->state, .step = run->step, .data_cursor = run->data_cursor,
                          .seed = tess_run_seed(run),
                          .config_text = tess_config_resolved_text(run->cfg),
                          .app = run->app->name};
    TESS_CHECK(tess_ckpt_save(run->group, run->ckpt_dir, &st,
                              tess_config_int(run->cfg, "ckpt.keep"), NULL, 0));
    tess_timer_stop(&run->timers, run->t_ckpt);
    return TESS_OK;
}

/* The app name and the resolved config text stored in checkpoint path: rank 0 reads them, every
 * rank gets them (app "" and config NULL if they cannot be read; the load that follows has
 * already vouched for the file). *config is malloc'ed (the caller frees it). Collective. */
static tess_status checkpoint_meta(const tess_run *run, const char *path, char app[64],
                                   char **config) {
    memset(app, 0, 64);
    *config = NULL;
    int64_t len = -1; /* bytes of the config text; -1 unreadable */
    char *text = NULL;
    if (run->group->rank == 0) {
        hid_t file;
        tess_ckpt_info info;
        if (tess_ckpt_open(path, &file, &info) == TESS_OK) {
            snprintf(app, 64, "%s", info.app);
            if (tess_ckpt_read_config(file, path, &text) == TESS_OK)
                len = (int64_t)strlen(text);
            H5Fclose(file);
        }
        tess_error_clear();
    }
    tess_status s = tess_par_bcast_bytes(run->group, app, 64, 0);
    if (s == TESS_OK) s = tess_par_bcast_bytes(run->group, &len, sizeof len, 0);
    if (s == TESS_OK && len >= 0 && run->group->rank != 0) {
        text = malloc((size_t)len + 1);
        s = text ? TESS_OK
                 : tess_error_push(TESS_ERR_MEM, __FILE__, __LINE__, __func__,
                                   "cannot allocate %lld bytes for the config of '%s'",
                                   (long long)len + 1, path);
    }
    if (s == TESS_OK && len >= 0) s = tess_par_agree(run->group, s);
    if (s == TESS_OK && len >= 0) s = tess_par_bcast_bytes(run->group, text, (size_t)len, 0);
    if (s != TESS_OK || len < 0) {
        free(text);
        return s;
    }
    text[len] = '\0';
    *config = text;
    return TESS_OK;
}

/* ckpt.resume: load into the described state and check it belongs to this run. Collective; the
 * verdict is the same on every rank. */
static tess_status resume(tess_run *run) {
    const char *spec = tess_config_string(run->cfg, "ckpt.resume");
    char path[RUN_PATH_MAX] = "";
    tess_ckpt_state st = {.state = run->state};
    TESS_CHECK(tess_ckpt_resume(run->group, run->ckpt_dir, spec, &st, &run->resumed, path,
                                sizeof path));
    if (!run->resumed) return TESS_OK;
    const uint64_t seed = tess_run_seed(run);
    char app[64], *config = NULL;
    TESS_CHECK(checkpoint_meta(run, path, app, &config));
    tess_status s = TESS_OK;
    if (strcmp(app, run->app->name) != 0)
        s = tess_error_push(TESS_ERR_CONFIG, __FILE__, __LINE__, __func__,
                            "'%s' was written by %s, not %s", path, app[0] ? app : "(no app)",
                            run->app->name);
    else if (st.seed != seed)
        s = tess_error_push(TESS_ERR_CONFIG, __FILE__, __LINE__, __func__,
                            "'%s' was written with run.seed = %llu, this run has %llu", path,
                            (unsigned long long)st.seed, (unsigned long long)seed);
    else if (!config)
        s = tess_error_push(TESS_ERR_DATA, __FILE__, __LINE__, __func__,
                            "cannot read the configuration (/config) of '%s'", path);
    else
        s = tess_config_check_resume(run->cfg, config, path);
    free(config);
    if (s != TESS_OK) return s; /* the record names the file and what differs */
    TESS_REQUIRE(run->total_steps == 0 || st.step <= run->total_steps, TESS_ERR_CONFIG,
                 "'%s' is at %s %lld, beyond the run's %lld", path, run->app->unit,
                 (long long)st.step, (long long)run->total_steps);
    TESS_CHECK(check_resumed_ranges(run, path, st.step, st.data_cursor));
    run->start_step = st.step;
    run->step = st.step; /* rows the restored callback writes are stamped with this step */
    run->data_cursor = st.data_cursor;
    return TESS_OK;
}

/* A fresh start (no ckpt.resume) in a directory that holds checkpoints would prune them as it
 * saves its own: refused unless ckpt.overwrite says so. Collective; the same verdict everywhere. */
static tess_status check_fresh_start(tess_run *run) {
    if (tess_config_string(run->cfg, "ckpt.resume")[0]) return TESS_OK;
    int64_t n;
    TESS_CHECK(tess_ckpt_count(run->group, run->ckpt_dir, &n));
    if (n == 0) return TESS_OK;
    if (tess_config_bool(run->cfg, "ckpt.overwrite")) {
        tess_log_warn("%s: starting fresh over %lld checkpoints in '%s' (ckpt.overwrite)",
                      run->app->name, (long long)n, run->ckpt_dir);
        return TESS_OK;
    }
    return tess_error_push(TESS_ERR_CONFIG, __FILE__, __LINE__, __func__,
                           "'%s' holds %lld checkpoint%s of an earlier run: continue it with "
                           "--resume auto, or start over with --set ckpt.overwrite=true",
                           run->ckpt_dir, (long long)n, n == 1 ? "" : "s");
}

/* The checkpoint directory exists and takes a file, checked before any work is done, so a run
 * never computes for hours to fail at its first checkpoint. Rank 0 probes; collective. */
static tess_status check_ckpt_dir(tess_run *run) {
    tess_status s = TESS_OK;
    if (run->group->rank == 0) {
        char probe[RUN_PATH_MAX + 32];
        snprintf(probe, sizeof probe, "%s/.tess_write_probe", run->ckpt_dir);
        s = tess_rundir_mkdirs(run->ckpt_dir);
        if (s != TESS_OK)
            s = tess_error_push(s, __FILE__, __LINE__, __func__,
                                "cannot create the checkpoint directory '%s' (ckpt.dir)",
                                run->ckpt_dir);
        FILE *f = s == TESS_OK ? fopen(probe, "w") : NULL;
        if (s == TESS_OK && (!f || fclose(f) != 0))
            s = tess_error_push(TESS_ERR_IO, __FILE__, __LINE__, __func__,
                                "cannot write checkpoints to '%s': %s", run->ckpt_dir,
                                strerror(errno));
        remove(probe);
    }
    TESS_CHECK(tess_par_agree(run->group, s));
    return TESS_OK;
}

/* ---- the loop ------------------------------------------------------------------------------- */

/* MAX over ranks of the local stop request (signal, or run.stop_at reached). Collective. */
static tess_status stop_vote(tess_run *run, bool *stop) {
    const int64_t stop_at = tess_config_int(run->cfg, "run.stop_at");
    double vote = tess_signals_stop_requested() || (stop_at > 0 && run->step == stop_at) ? 1.0 : 0.0;
    TESS_CHECK(tess_par_allreduce_f64(run->group, &vote, 1, TESS_PAR_MAX));
    *stop = vote > 0.0;
    return TESS_OK;
}

static tess_status loop(tess_run *run) {
    const tess_run_app *app = run->app;
    const char *name = app->name, *unit = app->unit;
    const int64_t every = tess_config_int(run->cfg, "ckpt.every");
    run->step = run->start_step;
    /* A run of known length is complete when its steps are done (a finished run resumed with more
     * steps goes on); one of unknown length when its checkpoint says so. */
    if (run->total_steps > 0) run->finished = run->start_step >= run->total_steps;
    if (run->finished) {
        tess_log_info("%s: the checkpoint is of a finished run (%s %lld): nothing to do", name, unit,
                      (long long)run->step);
        return TESS_OK;
    }
    /* A stop that came during start-up ends the run before the first step, with nothing new to
     * save. */
    bool stop = false;
    TESS_CHECK(stop_vote(run, &stop));
    if (stop) {
        tess_log_info("%s: stop requested before %s %lld: exiting %d without a checkpoint", name,
                      unit, (long long)run->step + 1, TESS_EXIT_STOPPED);
        run->stopped = true;
        return TESS_OK;
    }
    tess_progress progress;
    tess_progress_init(&progress, run->total > 0 ? (int64_t)run->total : 0, run->position_unit,
                       app->rate_unit,
                       (tess_progress_style)tess_config_enum(run->cfg, "log.progress"),
                       tess_config_real(run->cfg, "log.progress_every"));
    run->t0 = tess_timer_now();
    for (int64_t step = run->start_step;; step++) {
        run->step = step + 1;
        tess_run_step_out out = {.loss = NAN, .items = 0.0, .position = NAN,
                                 .data_cursor = run->data_cursor};
        tess_timer_start(&run->timers, run->t_step);
        TESS_CHECK(app->step(run, run->ctx, step, &out));
        tess_timer_stop(&run->timers, run->t_step);
        run->data_cursor = out.data_cursor;
        TESS_CHECK(stop_vote(run, &stop));
        const bool last = out.done || (run->total_steps > 0 && run->step >= run->total_steps);
        tess_progress_update(&progress, isnan(out.position) ? run->step : (int64_t)out.position,
                             out.loss, out.items);
        if (last) {
            run->finished = 1;
            break;
        }
        const bool periodic = every > 0 && run->step % every == 0;
        if (periodic || stop) TESS_CHECK(save(run));
        if (stop) {
            tess_progress_end();
            tess_log_info("%s: stop requested: checkpoint after %s %lld, exiting %d (resume with "
                          "--resume auto)", name, unit, (long long)run->step, TESS_EXIT_STOPPED);
            run->stopped = true;
            return TESS_OK;
        }
    }
    /* A failed final checkpoint must not cost the results: finish and plot, then report it. */
    const tess_status saved = tess_config_bool(run->cfg, "ckpt.at_end") ? save(run) : TESS_OK;
    if (app->finish) TESS_CHECK(app->finish(run, run->ctx));
    for (int i = 0; i < run->nmetrics; i++) tess_metrics_close(&run->metrics[i].file);
    draw_plots(run);
    TESS_CHECK(saved);
    TESS_CHECK(tess_timer_report(&run->timers, run->group));
    return TESS_OK;
}

/* ---- set-up --------------------------------------------------------------------------------- */

/* The option sections: run (the driver's keys and the app's extra ones), the app's, ckpt, log. */
static tess_status build_sections(tess_run *run, int64_t *n) {
    const tess_run_app *app = run->app;
    TESS_REQUIRE(app->nrun_opts >= 0 && app->nrun_opts <= TESS_RUN_MAX_RUN_OPTS, TESS_ERR_ARG,
                 "%s: %lld extra run options, at most %d", app->name, (long long)app->nrun_opts,
                 TESS_RUN_MAX_RUN_OPTS);
    TESS_REQUIRE(app->nsections + 3 <= RUN_SECTIONS_MAX, TESS_ERR_ARG, "%s: too many sections",
                 app->name);
    int k = 0;
    run->run_opts[k++] = (tess_opt)TESS_OPT_RESUMABLE(
        STRING, "dir", app->default_dir,
        "output directory (config.ini, metrics, plots/, checkpoints/)");
    run->run_opts[k++] = (tess_opt)TESS_OPT_INT("seed", 1234, 0, UINT32_MAX,
                                                "seed of every random draw");
    run->run_opts[k++] = (tess_opt)TESS_OPT_RESUMABLE(BOOL, "plots", true,
                                                      "draw PNG plots with gnuplot at the end");
    run->run_opts[k++] = (tess_opt)TESS_OPT_RESUMABLE(
        INT, "stop_at", 0, 0, INT64_MAX / 4,
        "test hook: stop as on a signal after this many steps (0: never)");
    for (int64_t i = 0; i < app->nrun_opts; i++) run->run_opts[k++] = app->run_opts[i];
    int64_t s = 0;
    run->sections[s++] = (tess_config_section){"run", run->run_opts, k};
    for (int64_t i = 0; i < app->nsections; i++) run->sections[s++] = app->sections[i];
    run->sections[s++] = (tess_config_section)TESS_CONFIG_SECTION("ckpt", ckpt_opts);
    run->sections[s++] = (tess_config_section)TESS_CONFIG_SECTION("log", log_opts);
    *n = s;
    return TESS_OK;
}

/* Remove flag (e.g. "--print-params", which the config parser does not know) from argv; true if
 * present. */
static bool take_flag(int *argc, char **argv, const char *flag) {
    bool found = false;
    int k = 1;
    for (int i = 1; i < *argc; i++) {
        if (strcmp(argv[i], flag) == 0)
            found = true;
        else
            argv[k++] = argv[i];
    }
    *argc = k;
    return found;
}

/* The state's table on rank 0: name, dtype, global shape, layout kind, rank-private. */
static void print_state(const tess_run *run) {
    if (run->rt->rank != 0) return;
    const int64_t n = tess_state_count(run->state);
    int64_t total = 0;
    printf("%-48s  %-4s  %-24s  %s\n", "name", "type", "shape", "layout");
    for (int64_t i = 0; i < n; i++) {
        const tess_state_entry *e = tess_state_get(run->state, i);
        char shape[96];
        int len = 0;
        for (int d = 0; d < e->ndim; d++)
            len += snprintf(shape + len, sizeof shape - (size_t)len, "%s%lld", d ? ", " : "[",
                            (long long)e->shape[d]);
        snprintf(shape + len, sizeof shape - (size_t)len, "]");
        printf("%-48s  %-4s  %-24s  %s\n", e->name, tess_dtype_name(e->dtype), shape,
               e->private_to_rank ? "private (this rank)" : tess_layout_kind_name(e->layout.kind));
        total += e->global_count;
    }
    printf("%lld entries, %lld elements\n", (long long)n, (long long)total);
}

/* The run's log file in the run directory: rank 0 run.log, other ranks run.rank<r>.log when
 * log.per_rank is on (opened after the directory exists; earlier lines are kept by core/log). */
static tess_status open_log_file(const tess_run *run) {
    const int rank = run->rt->rank;
    if (rank != 0 && !tess_config_bool(run->cfg, "log.per_rank")) return TESS_OK;
    char path[RUN_PATH_MAX];
    const int n = rank == 0 ? snprintf(path, sizeof path, "%s/run.log", tess_run_dir(run))
                            : snprintf(path, sizeof path, "%s/run.rank%d.log", tess_run_dir(run),
                                       rank);
    TESS_REQUIRE(n > 0 && n < (int)sizeof path, TESS_ERR_CONFIG, "run.dir is too long");
    TESS_CHECK(tess_log_open_file(path));
    return TESS_OK;
}

/* The BLAS build and kernels in the log's header and, when OpenBLAS runs older kernels than the
 * CPU could, the variable that selects its AVX-512 ones (tensor/blasinfo.h). Rank 0 logs. */
static void log_blas(void) {
    const char *config = tess_blasinfo_config(), *core = tess_blasinfo_core();
    const char *coretype = getenv("OPENBLAS_CORETYPE");
    tess_log_info("BLAS: %s (kernels %s%s%s)", config, core,
                  coretype ? ", OPENBLAS_CORETYPE=" : "", coretype ? coretype : "");
    const char *hint =
        tess_blasinfo_coretype_hint(tess_blasinfo_cpu_avx512(), config, core, coretype);
    if (hint)
        tess_log_info("hint: this CPU has AVX-512 but OpenBLAS runs its %s kernels: try "
                      "OPENBLAS_CORETYPE=%s (its AVX-512 kernels, often much faster), the same "
                      "for a run and every resumed attempt (results differ in the last bits "
                      "between kernels)", core, hint);
}

static tess_status run_all(tess_run *run, int argc, char **argv) {
    const tess_run_app *app = run->app;
    /* The driver's own flags too must be the same everywhere (--print-params on one rank would
     * leave the others waiting). */
    TESS_CHECK(tess_config_check_argv(run->group, argc, argv));
    const bool print_params = take_flag(&argc, argv, "--print-params");
    const bool check = take_flag(&argc, argv, "--check");
    /* -v and -q set log.level to debug or warn over what the file and --set say. */
    const bool verbose = take_flag(&argc, argv, "-v"), quiet = take_flag(&argc, argv, "-q");
    TESS_REQUIRE(!(verbose && quiet), TESS_ERR_CONFIG, "-v and -q contradict each other");
    if (verbose) tess_log_init(run->rt->rank, TESS_LOG_DEBUG); /* tracebacks of option errors */
    int64_t nsections = 0;
    TESS_CHECK(build_sections(run, &nsections));
    TESS_CHECK(tess_config_create(&run->cfg, run->sections, nsections));
    TESS_CHECK(tess_config_alias(run->cfg, "--resume", "ckpt.resume"));
    TESS_CHECK(tess_config_flag(run->cfg, "--check",
                                "check options and set-up (data, model, --resume's "
                                "checkpoint), exit 0 if the run would start"));
    TESS_CHECK(tess_config_flag(run->cfg, "--print-params",
                                "print the state the checkpoints hold after the set-up and exit"));
    TESS_CHECK(tess_config_flag(run->cfg, "-v", "log.level = debug (per-rank detail, tracebacks)"));
    TESS_CHECK(tess_config_flag(run->cfg, "-q", "log.level = warn"));
    tess_config_action action;
    TESS_CHECK(tess_config_parse_args(run->cfg, run->group, argc, argv, &action));
    if (action != TESS_CONFIG_ACTION_RUN) return TESS_OK;
    TESS_REQUIRE(tess_run_dir(run)[0] != '\0', TESS_ERR_CONFIG,
                 "run.dir is empty: the run needs a directory (config.ini, run.log, checkpoints)");
    if (verbose || quiet)
        TESS_CHECK(tess_config_set(run->cfg, "log.level", verbose ? "debug" : "warn"));
    tess_log_init(run->rt->rank, (tess_log_level)tess_config_enum(run->cfg, "log.level"));
    TESS_CHECK(tess_state_create(&run->state));
    TESS_CHECK(tess_state_add_i64(run->state, "run/finished", &run->finished));
    tess_timer_init(&run->timers);
    run->t_step = tess_timer_get(&run->timers, "step");
    run->t_ckpt = tess_timer_get(&run->timers, "checkpoint");
    const char *ckdir = tess_config_string(run->cfg, "ckpt.dir");
    const int n = ckdir[0] ? snprintf(run->ckpt_dir, sizeof run->ckpt_dir, "%s", ckdir)
                           : snprintf(run->ckpt_dir, sizeof run->ckpt_dir, "%s/checkpoints",
                                      tess_run_dir(run));
    TESS_REQUIRE(n > 0 && n < (int)sizeof run->ckpt_dir, TESS_ERR_CONFIG,
                 "ckpt.dir or run.dir is too long (%d bytes)", n);

    TESS_CHECK(app->setup(run, run->ctx));
    if (print_params) {
        print_state(run);
        return TESS_OK;
    }
    if (check) { /* what the run does before its first step, without the run directory */
        TESS_CHECK(check_fresh_start(run));
        TESS_CHECK(resume(run));
        tess_log_info("%s: --check: options valid, set-up done on %d rank%s%s; no step run, no "
                      "run directory written", app->name, run->group->size,
                      run->group->size == 1 ? "" : "s", run->resumed ? ", checkpoint loaded" : "");
        return TESS_OK;
    }
    run->collective = false;
    TESS_CHECK(tess_rundir_prepare(run->group, tess_run_dir(run),
                                   tess_config_resolved_text(run->cfg)));
    TESS_CHECK(open_log_file(run));
    tess_log_info("%s: %d rank%s, run directory %s (log in run.log)", app->name, run->group->size,
                  run->group->size == 1 ? "" : "s", tess_run_dir(run));
    log_blas();
    /* The checkpoint directory and resume verdicts are agreed by every rank: a refusal ends the
     * run collectively. */
    run->collective = true;
    TESS_CHECK(check_ckpt_dir(run));
    TESS_CHECK(check_fresh_start(run));
    TESS_CHECK(resume(run));
    if (run->resumed && app->restored) TESS_CHECK(app->restored(run, run->ctx));
    run->collective = false;
    TESS_CHECK(loop(run));
    return TESS_OK;
}

int tess_run_main(const tess_run_app *app, void *ctx, int argc, char **argv) {
    tess_signals_install();
    int thread_level; /* FUNNELED: the checkpoint load hashes on a worker thread (io/ckpt.h) */
    MPI_Init_thread(&argc, &argv, MPI_THREAD_FUNNELED, &thread_level);
    tess_runtime rt;
    tess_status s = tess_runtime_start(&rt, MPI_COMM_WORLD);
    tess_run run = {.app = app, .ctx = ctx, .rt = &rt, .group = rt.world, .collective = true};
    /* OpenBLAS's work buffer, before any product (a low ulimit -v: exit 71, not a spin) */
    if (s == TESS_OK) s = tess_par_agree(rt.world, tess_matmul_init());
    if (s == TESS_OK) s = run_all(&run, argc, argv);
    for (int i = 0; i < run.nmetrics; i++) tess_metrics_close(&run.metrics[i].file);
    if (app->destroy) app->destroy(ctx);
    tess_state_destroy(&run.state);
    tess_config_destroy(&run.cfg);
    const int code = tess_runtime_finish(&rt, s, run.collective);
    tess_log_close_file();
    return code == 0 && run.stopped ? TESS_EXIT_STOPPED : code;
}

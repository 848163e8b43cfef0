/* tinylm - train the dense transformer (nn/transformer.h) on a synthetic sequence task (copy,
 * reverse, sort) with AdamW, data-parallel over the ranks of the run. The end-to-end proof of
 * the core and the dense baseline the MoE app builds on.
 *
 * Data parallelism: train.batch is the GLOBAL batch; each of P ranks draws its b = batch/P
 * samples of the step (task.h), and the gradients are averaged over the data-parallel group in
 * buckets that start reducing while backward still runs (par/gradsync.h), so P ranks take the
 * same steps as 1 rank with the whole batch (up to the order of floating-point sums). Outputs under run.dir: config.ini, metrics.csv (training),
 * eval.csv (held-out loss and accuracy), plots/loss.png, plots/eval.png.
 *
 * Preemption: SIGUSR1, SIGTERM or SIGINT on any rank stops every rank after the same step, which
 * is checkpointed; the run then exits 75 and --resume auto continues it exactly (docs/jobs.md).
 */
#include <math.h>
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/config.h"   /* tess_config_* */
#include "core/log.h"      /* tess_log_*, tess_progress_* */
#include "core/runtime.h"  /* tess_runtime_* */
#include "core/signals.h"  /* tess_signals_install, tess_signals_stop_requested */
#include "core/timer.h"    /* tess_timer_now */
#include "par/gradsync.h" /* tess_gradsync_* */
#include "par/mesh.h"     /* tess_group_* */
#include "io/ckpt.h"       /* tess_ckpt_* */
#include "io/metrics.h"    /* tess_metrics_* */
#include "io/plot.h"       /* tess_plot_csv */
#include "io/rundir.h"     /* tess_rundir_prepare */
#include "nn/registry.h"   /* tess_registry_* */
#include "nn/state.h"      /* tess_state_* */
#include "nn/transformer.h" /* tess_tfm_* */
#include "optim/adamw.h"   /* tess_adamw_* */
#include "optim/clip.h"    /* tess_clip_grad_norm */
#include "optim/guard.h"   /* tess_guard_* */
#include "optim/sched.h"   /* tess_sched_* */
#include "tensor/tensor.h" /* tess_tensor_sqnorm */
#include "task.h"          /* tinylm_task_* */

static const tess_opt run_opts[] = {
    TESS_OPT_STRING("dir", "runs/tinylm", "output directory (config.ini, metrics.csv, plots/)"),
    TESS_OPT_INT("seed", 1234, 0, UINT32_MAX, "seed of every random draw (init and data)"),
    TESS_OPT_INT("log_every", 10, 1, INT32_MAX, "steps between metrics.csv rows"),
    TESS_OPT_BOOL("plots", true, "draw PNG plots with gnuplot at the end"),
};
static const tess_opt model_opts[] = {
    TESS_OPT_INT("layers", 2, 1, 1024, "transformer blocks"),
    TESS_OPT_INT("channels", 64, 2, 65536, "model width C"),
    TESS_OPT_INT("heads", 4, 1, 1024, "attention heads (channels/heads must be even)"),
    TESS_OPT_INT("mlp_hidden", 128, 1, 1 << 20, "hidden width F of the MLP"),
    TESS_OPT_CHOICE("mlp", "swiglu", "swiglu|gelu", "feed-forward block"),
    TESS_OPT_CHOICE("norm", "rmsnorm", "rmsnorm|layernorm", "normalisation layer"),
    TESS_OPT_REAL("norm_eps", 1e-5, 1e-12, 1.0, "epsilon of the norms"),
    TESS_OPT_REAL("rope_base", 10000.0, 1.0, 1e9, "RoPE base"),
};
static const tess_opt task_opts[] = {
    TESS_OPT_CHOICE("kind", "reverse", "reverse|copy|sort", "what the model must output"),
    TESS_OPT_INT("length", 8, 1, 64, "symbols per sample n (sequence length 2n)"),
    TESS_OPT_INT("symbols", 10, 2, 100000, "alphabet size (vocabulary = symbols + 1)"),
};
static const tess_opt train_opts[] = {
    TESS_OPT_INT("steps", 400, 1, INT64_MAX / 2, "optimizer steps"),
    TESS_OPT_INT("batch", 32, 1, 1 << 24, "GLOBAL batch in sequences; a multiple of the ranks"),
    TESS_OPT_INT("eval_every", 50, 1, INT64_MAX / 2, "steps between held-out evaluations"),
    TESS_OPT_INT("eval_batch", 256, 1, 1 << 24, "held-out sequences per evaluation"),
    TESS_OPT_REAL("grad_clip", 1.0, 0.0, 1e9, "global-norm clipping threshold (0: off)"),
    TESS_OPT_INT("max_bad_steps", 5, 1, 1000000, "non-finite steps in a row before aborting"),
};
static const tess_opt optim_opts[] = {
    TESS_OPT_REAL("lr", 3e-3, 0.0, 10.0, "peak AdamW learning rate"),
    TESS_OPT_REAL("min_lr", 1e-4, 0.0, 10.0, "final learning rate of the decay"),
    TESS_OPT_INT("warmup_steps", 40, 0, INT64_MAX / 2, "linear warm-up steps"),
    TESS_OPT_CHOICE("schedule", "cosine", "cosine|linear|constant", "decay after warm-up"),
    TESS_OPT_REAL("beta1", 0.9, 0.0, 0.999999, "AdamW beta1"),
    TESS_OPT_REAL("beta2", 0.98, 0.0, 0.999999, "AdamW beta2"),
    TESS_OPT_REAL("eps", 1e-8, 1e-30, 1.0, "AdamW epsilon"),
    TESS_OPT_REAL("weight_decay", 0.01, 0.0, 10.0, "decoupled weight decay (matrices only)"),
};
static const tess_opt dist_opts[] = {
    TESS_OPT_INT("bucket_kib", 1024, 1, 1 << 22, "gradient all-reduce bucket size (KiB)"),
};
static const tess_opt ckpt_opts[] = {
    TESS_OPT_STRING("dir", "", "checkpoint directory (empty: <run.dir>/checkpoints)"),
    TESS_OPT_INT("every", 0, 0, INT64_MAX / 2, "steps between checkpoints (0: only at_end)"),
    TESS_OPT_INT("keep", 3, 0, 1000000, "newest checkpoints kept (0: all)"),
    TESS_OPT_BOOL("at_end", true, "checkpoint after the last step"),
    TESS_OPT_STRING("resume", "", "'' (start fresh), auto (newest valid in ckpt.dir) or a file; "
                    "also --resume"),
};
static const tess_config_section sections[] = {
    TESS_CONFIG_SECTION("run", run_opts),     TESS_CONFIG_SECTION("model", model_opts),
    TESS_CONFIG_SECTION("task", task_opts),   TESS_CONFIG_SECTION("train", train_opts),
    TESS_CONFIG_SECTION("optim", optim_opts), TESS_CONFIG_SECTION("dist", dist_opts),
    TESS_CONFIG_SECTION("ckpt", ckpt_opts),
};

/* Everything a run owns; freed by app_free whatever the outcome. */
typedef struct {
    tess_config *cfg;
    tess_registry *reg;
    tess_tfm *model;
    tess_adamw *opt;
    tess_group *dp;        /* data-parallel group: all ranks of the run */
    tess_gradsync *sync;
    tess_state *state;      /* what a checkpoint holds (tinylm_ckpt) */
    int32_t *ids, *targets; /* (b, T) */
    tess_metrics train_csv, eval_csv;
    bool stopped; /* a stop signal ended training early (after a checkpoint, if any step ran) */
} app;

static void app_free(app *a) {
    tess_metrics_close(&a->train_csv);
    tess_metrics_close(&a->eval_csv);
    free(a->ids);
    free(a->targets);
    tess_state_destroy(&a->state);
    tess_adamw_destroy(&a->opt);
    tess_gradsync_destroy(&a->sync);
    tess_group_destroy(&a->dp);
    tess_tfm_destroy(&a->model);
    tess_registry_destroy(&a->reg);
    tess_config_destroy(&a->cfg);
}

/* Held-out loss and token accuracy over eval_batch samples split across the ranks (block
 * ranges, uneven allowed), in chunks of at most max_B. Collective on comm. */
static tess_status evaluate(app *a, const tinylm_task *task, const tess_runtime *rt,
                            int64_t eval_batch, int64_t max_B, double *loss, double *acc) {
    const int64_t T = 2 * task->n, V = task->nsym + 1;
    int64_t lo = (eval_batch + rt->size - 1) / rt->size * rt->rank, hi = lo + (eval_batch + rt->size - 1) / rt->size;
    if (lo > eval_batch) lo = eval_batch;
    if (hi > eval_batch) hi = eval_batch;
    double sums[3] = {0.0, 0.0, 0.0}; /* loss * targets, correct, targets */
    for (int64_t first = lo; first < hi; first += max_B) {
        int64_t B = hi - first < max_B ? hi - first : max_B;
        tinylm_task_batch(task, TINYLM_SPLIT_EVAL, first, B, a->ids, a->targets);
        float l = tess_tfm_forward(a->model, a->ids, a->targets, B);
        const float *logits = tess_tfm_logits(a->model);
        int64_t count = 0, correct = 0;
        for (int64_t r = 0; r < B * T; r++) {
            if (a->targets[r] < 0) continue;
            const float *row = logits + r * V;
            int64_t best = 0;
            for (int64_t v = 1; v < V; v++)
                if (row[v] > row[best]) best = v;
            correct += best == a->targets[r];
            count++;
        }
        sums[0] += (double)l * (double)count;
        sums[1] += (double)correct;
        sums[2] += (double)count;
    }
    TESS_CHECK(tess_par_allreduce_f64(a->dp, sums, 3, TESS_PAR_SUM));
    *loss = sums[0] / sums[2];
    *acc = sums[1] / sums[2];
    return TESS_OK;
}

static tess_status draw_plots(const char *dir) {
    char csv[4200], png[4200];
    static const char *const loss_cols[] = {"loss"};
    static const char *const eval_cols[] = {"eval_loss", "eval_acc"};
    snprintf(csv, sizeof csv, "%s/metrics.csv", dir);
    snprintf(png, sizeof png, "%s/plots/loss.png", dir);
    TESS_CHECK(tess_plot_csv(csv, png, "tinylm training loss", "step", loss_cols, 1, true));
    snprintf(csv, sizeof csv, "%s/eval.csv", dir);
    snprintf(png, sizeof png, "%s/plots/eval.png", dir);
    TESS_CHECK(tess_plot_csv(csv, png, "tinylm held-out loss and token accuracy", "step", eval_cols,
                             2, true));
    return TESS_OK;
}

/* What a tinylm checkpoint holds (a->state): the registry's params, AdamW's m, v and step count,
 * and the step, data cursor and seed of the run. */
typedef struct {
    tess_ckpt_state st;
    char dir[4200];
} tinylm_ckpt;

static tess_status ckpt_prepare(tinylm_ckpt *k, app *a, const char *run_dir, uint64_t seed) {
    TESS_CHECK(tess_state_create(&a->state));
    TESS_CHECK(tess_state_add_registry(a->state, "params", a->reg, false));
    TESS_CHECK(tess_adamw_describe(a->opt, a->state, "optim"));
    k->st = (tess_ckpt_state){.state = a->state, .seed = seed,
                              .config_text = tess_config_resolved_text(a->cfg), .app = "tinylm"};
    const char *dir = tess_config_string(a->cfg, "ckpt.dir");
    if (dir[0])
        snprintf(k->dir, sizeof k->dir, "%s", dir);
    else
        snprintf(k->dir, sizeof k->dir, "%s/checkpoints", run_dir);
    return TESS_OK;
}

/* Checkpoint after `done` steps. Collective: every rank returns the same status. */
static tess_status ckpt_save(tinylm_ckpt *k, app *a, int64_t done, int64_t data_cursor) {
    k->st.step = done;
    k->st.data_cursor = data_cursor;
    TESS_CHECK(tess_ckpt_save(a->dp, k->dir, &k->st, tess_config_int(a->cfg, "ckpt.keep"),
                              NULL, 0));
    return TESS_OK;
}

static tess_status train(app *a, const tess_runtime *rt, bool *collective) {
    const tess_config *c = a->cfg;
    const int64_t global_B = tess_config_int(c, "train.batch");
    TESS_REQUIRE(global_B % rt->size == 0, TESS_ERR_CONFIG,
                 "train.batch = %lld must be a multiple of the number of ranks (%d)",
                 (long long)global_B, rt->size);
    const int64_t b = global_B / rt->size, steps = tess_config_int(c, "train.steps");
    const char *dir = tess_config_string(c, "run.dir");
    const uint64_t seed = (uint64_t)tess_config_int(c, "run.seed");

    tinylm_task task = {.kind = (tinylm_task_kind)tess_config_choice(c, "task.kind"),
                        .n = tess_config_int(c, "task.length"),
                        .nsym = tess_config_int(c, "task.symbols"),
                        .key = {.seed = (uint32_t)seed, .stream = 1}};
    tess_tfm_config mc = {.V = task.nsym + 1, .T = 2 * task.n,
                          .C = tess_config_int(c, "model.channels"),
                          .NH = tess_config_int(c, "model.heads"),
                          .F = tess_config_int(c, "model.mlp_hidden"),
                          .L = tess_config_int(c, "model.layers"),
                          .norm = (tess_tfm_norm)tess_config_choice(c, "model.norm"),
                          .mlp = (tess_tfm_mlp)tess_config_choice(c, "model.mlp"),
                          .causal = true,
                          .norm_eps = (float)tess_config_real(c, "model.norm_eps"),
                          .rope_base = (float)tess_config_real(c, "model.rope_base")};
    tess_sched sched = {.lr = tess_config_real(c, "optim.lr"),
                        .min_lr = tess_config_real(c, "optim.min_lr"),
                        .warmup_steps = tess_config_int(c, "optim.warmup_steps"),
                        .total_steps = steps};
    /* choice indices follow the option's list order: cosine|linear|constant */
    static const tess_sched_kind sched_kinds[] = {TESS_SCHED_COSINE, TESS_SCHED_LINEAR,
                                                  TESS_SCHED_CONSTANT};
    sched.kind = sched_kinds[tess_config_choice(c, "optim.schedule")];
    TESS_REQUIRE(sched.kind == TESS_SCHED_CONSTANT || sched.warmup_steps < steps, TESS_ERR_CONFIG,
                 "optim.warmup_steps = %lld must be below train.steps = %lld for a decaying schedule",
                 (long long)sched.warmup_steps, (long long)steps);
    TESS_CHECK(tess_sched_check(&sched));
    TESS_CHECK(tess_tfm_check_config(&mc, b));

    /* Everything above failed, if at all, identically on every rank; what follows may fail on
     * one rank alone (memory, I/O), so a failure from here on aborts the run. */
    *collective = false;
    TESS_CHECK(tess_registry_create(&a->reg));
    TESS_CHECK(tess_tfm_create(&a->model, &mc, b, a->reg));
    tess_tfm_init_params(a->model, seed);
    tess_adamw_config ac = {.beta1 = (float)tess_config_real(c, "optim.beta1"),
                            .beta2 = (float)tess_config_real(c, "optim.beta2"),
                            .eps = (float)tess_config_real(c, "optim.eps"),
                            .weight_decay = (float)tess_config_real(c, "optim.weight_decay")};
    TESS_CHECK(tess_adamw_create(&a->opt, a->reg, &ac));
    TESS_CHECK(tess_group_create(rt->comm, "dp", &a->dp));
    TESS_CHECK(tess_gradsync_create(&a->sync, a->dp, tess_registry_grads(a->reg),
                                    tess_registry_local_total(a->reg),
                                    tess_config_int(c, "dist.bucket_kib") * 1024 / (int64_t)sizeof(float)));
    tess_tfm_set_grad_hook(a->model, tess_gradsync_hook, a->sync);
    a->ids = malloc((size_t)(b * mc.T) * sizeof *a->ids);
    a->targets = malloc((size_t)(b * mc.T) * sizeof *a->targets);
    TESS_REQUIRE(a->ids && a->targets, TESS_ERR_MEM, "cannot allocate a batch of %lld tokens",
                 (long long)(b * mc.T));
    tess_guard guard;
    TESS_CHECK(tess_guard_init(&guard, (int)tess_config_int(c, "train.max_bad_steps"),
                               rt->rank == 0 ? stderr : NULL));

    TESS_CHECK(tess_rundir_prepare(rt->comm, dir, tess_config_resolved_text(a->cfg)));
    /* Resume (ckpt.resume): the step, the data cursor and AdamW's state come back exactly; the
     * verdict is the same on every rank, so a refused checkpoint ends the run collectively. */
    tinylm_ckpt ckpt;
    TESS_CHECK(ckpt_prepare(&ckpt, a, dir, seed));
    bool resumed = false;
    tess_status rs = tess_ckpt_resume(a->dp, ckpt.dir, tess_config_string(c, "ckpt.resume"),
                                      &ckpt.st, &resumed, NULL, 0);
    if (rs == TESS_OK && resumed && ckpt.st.seed != seed)
        rs = tess_error_push(TESS_ERR_CONFIG, __FILE__, __LINE__, __func__,
                             "the checkpoint was written with run.seed = %llu, this run has %llu",
                             (unsigned long long)ckpt.st.seed, (unsigned long long)seed);
    if (rs == TESS_OK && resumed && ckpt.st.step > steps)
        rs = tess_error_push(TESS_ERR_CONFIG, __FILE__, __LINE__, __func__,
                             "the checkpoint is at step %lld, beyond train.steps = %lld",
                             (long long)ckpt.st.step, (long long)steps);
    if (rs != TESS_OK) {
        *collective = true;
        return tess_error_push(rs, __FILE__, __LINE__, __func__, "resuming from '%s'",
                               tess_config_string(c, "ckpt.resume"));
    }
    const int64_t start = resumed ? ckpt.st.step : 0, cursor0 = resumed ? ckpt.st.data_cursor : 0;
    if (rt->rank == 0) {
        static const char *const train_cols[] = {"step", "loss", "lr", "grad_norm", "param_norm",
                                                   "tok_per_s", "seconds"};
        static const char *const eval_cols[] = {"step", "eval_loss", "eval_acc"};
        char path[4200];
        snprintf(path, sizeof path, "%s/metrics.csv", dir);
        TESS_CHECK(resumed ? tess_metrics_open_resume(&a->train_csv, path, train_cols, 7, start)
                           : tess_metrics_open(&a->train_csv, path, train_cols, 7, false));
        snprintf(path, sizeof path, "%s/eval.csv", dir);
        TESS_CHECK(resumed ? tess_metrics_open_resume(&a->eval_csv, path, eval_cols, 3, start)
                           : tess_metrics_open(&a->eval_csv, path, eval_cols, 3, false));
    }
    tess_log_info("tinylm: task %s n=%lld, model L=%lld C=%lld heads=%lld F=%lld %s/%s, "
                  "%lld parameters, %.1f MiB activations/rank",
                  tess_config_string(c, "task.kind"), (long long)task.n, (long long)mc.L,
                  (long long)mc.C, (long long)mc.NH, (long long)mc.F,
                  tess_config_string(c, "model.mlp"), tess_config_string(c, "model.norm"),
                  (long long)tess_registry_global_total(a->reg),
                  (double)tess_tfm_activation_bytes(a->model) / 1048576.0);
    tess_log_info("tinylm: %lld steps, global batch %lld = %d ranks x %lld, %lld tokens/step",
                  (long long)steps, (long long)global_B, rt->size, (long long)b,
                  (long long)(global_B * mc.T));

    const int64_t log_every = tess_config_int(c, "run.log_every");
    const int64_t eval_every = tess_config_int(c, "train.eval_every");
    const int64_t eval_batch = tess_config_int(c, "train.eval_batch");
    const double clip = tess_config_real(c, "train.grad_clip");
    tess_progress progress;
    tess_progress_init(&progress, steps, "tok");
    const double t0 = tess_timer_now();
    double t_log = t0, first_loss = NAN, loss = NAN, eval_loss = NAN, eval_acc = NAN;
    double sync_exposed = 0.0;
    const int64_t ckpt_every = tess_config_int(c, "ckpt.every");
    /* A stop that came during start-up ends the run before the first step, with nothing new to
     * save (the MAX over ranks, so every rank takes the same branch). */
    double stop_vote = tess_signals_stop_requested() ? 1.0 : 0.0;
    TESS_CHECK(tess_par_allreduce_f64(a->dp, &stop_vote, 1, TESS_PAR_MAX));
    if (stop_vote > 0.0 && start < steps) {
        tess_log_info("tinylm: stop requested before step %lld: exiting %d without a checkpoint",
                      (long long)start + 1, TESS_EXIT_STOPPED);
        a->stopped = true;
        return TESS_OK;
    }
    for (int64_t step = start; step < steps; step++) {
        /* samples [cursor, cursor + global_B) of the stream; this rank takes its b of them */
        const int64_t cursor = cursor0 + (step - start) * global_B;
        tinylm_task_batch(&task, TINYLM_SPLIT_TRAIN, cursor + rt->rank * b, b, a->ids,
                          a->targets);
        tess_registry_zero_grads(a->reg);
        loss = tess_tfm_forward(a->model, a->ids, a->targets, b);
        tess_tfm_backward(a->model, 1.0f);
        double exposed;
        TESS_CHECK(tess_gradsync_finish(a->sync, &exposed));
        sync_exposed += exposed;
        /* The loss and the stop vote travel together: a signal on any rank stops every rank
         * after this same step (OPERATIONS.md 2.1). */
        double reduced[2] = {loss, tess_signals_stop_requested() ? 1.0 : 0.0};
        TESS_CHECK(tess_par_allreduce_f64(a->dp, reduced, 2, TESS_PAR_MEAN));
        loss = reduced[0];
        const bool stop = reduced[1] > 0.0;
        if (step == start) first_loss = loss;
        double norm, lr = tess_sched_lr(&sched, step);
        bool skip;
        TESS_CHECK(tess_clip_grad_norm(a->reg, clip, MPI_COMM_NULL, &norm));
        TESS_CHECK(tess_guard_check(&guard, step, loss, norm, &skip));
        if (!skip) tess_adamw_step(a->opt, (float)lr);

        const int64_t done = step + 1;
        tess_progress_update(&progress, done, loss, (double)(global_B * mc.T));
        if (done % log_every == 0 || done == steps) {
            double now = tess_timer_now();
            double tok_s = (double)(global_B * mc.T) * (double)(done % log_every ? done % log_every : log_every) / (now - t_log);
            t_log = now;
            double pnorm = sqrt(tess_tensor_sqnorm(tess_registry_params(a->reg),
                                                   tess_registry_local_total(a->reg)));
            double row[7] = {(double)done, loss, lr, norm, pnorm, tok_s, now - t0};
            if (rt->rank == 0) TESS_CHECK(tess_metrics_row(&a->train_csv, row));
        }
        if (done % eval_every == 0 || done == steps) {
            TESS_CHECK(evaluate(a, &task, rt, eval_batch, b, &eval_loss, &eval_acc));
            double row[3] = {(double)done, eval_loss, eval_acc};
            if (rt->rank == 0) TESS_CHECK(tess_metrics_row(&a->eval_csv, row));
        }
        const bool saved = ckpt_every > 0 && done % ckpt_every == 0 && done < steps;
        if (saved) TESS_CHECK(ckpt_save(&ckpt, a, done, cursor + global_B));
        if (stop && done < steps) {
            if (!saved) TESS_CHECK(ckpt_save(&ckpt, a, done, cursor + global_B));
            tess_log_info("tinylm: stop requested: checkpoint at step %lld of %lld, exiting %d "
                          "(resume with --resume auto)", (long long)done, (long long)steps,
                          TESS_EXIT_STOPPED);
            a->stopped = true;
            return TESS_OK;
        }
    }
    if (tess_config_bool(c, "ckpt.at_end") && start < steps)
        TESS_CHECK(ckpt_save(&ckpt, a, steps, cursor0 + (steps - start) * global_B));
    const double seconds = tess_timer_now() - t0;
    tess_log_info("tinylm: loss %.4f -> %.4f; held-out loss %.4f, token accuracy %.2f%%; "
                  "%lld steps in %.1f s (%.0f tok/s on %d ranks, %.2f s waiting for gradient "
                  "sync, %lld skipped)",
                  first_loss, loss, eval_loss, 100.0 * eval_acc, (long long)(steps - start),
                  seconds, (double)((steps - start) * global_B * mc.T) / seconds, rt->size,
                  sync_exposed,
                  (long long)guard.skipped);
    tess_metrics_close(&a->train_csv);
    tess_metrics_close(&a->eval_csv);
    if (rt->rank == 0 && tess_config_bool(c, "run.plots")) {
        if (draw_plots(dir) == TESS_OK) {
            tess_log_info("tinylm: wrote %s/metrics.csv, %s/eval.csv, %s/plots/{loss,eval}.png", dir, dir, dir);
        } else {
            tess_log_warn("tinylm: plots skipped:\n%s", tess_error_text());
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
    TESS_CHECK(train(a, rt, collective));
    return TESS_OK;
}

int main(int argc, char **argv) {
    tess_signals_install();
    int thread_level; /* FUNNELED: tess_ckpt_load hashes on a worker thread (io/ckpt.h) */
    MPI_Init_thread(&argc, &argv, MPI_THREAD_FUNNELED, &thread_level);
    tess_runtime rt;
    tess_status s = tess_runtime_start(&rt, MPI_COMM_WORLD);
    bool collective = true; /* config errors and model setup fail on every rank alike */
    app a = {0};
    if (s == TESS_OK) s = run(&rt, argc, argv, &collective, &a);
    app_free(&a);
    const int code = tess_runtime_finish(&rt, s, collective);
    return code == 0 && a.stopped ? TESS_EXIT_STOPPED : code;
}

/* tinylm - train the dense transformer (nn/transformer.h) on a synthetic sequence task (copy,
 * reverse, sort) with AdamW, data-parallel over the ranks of the run. The end-to-end proof of
 * the core and the dense baseline the MoE app builds on. A composition on the run driver
 * (run/run.h), which owns options of the run, resume, checkpoints, stops, metrics and plots.
 *
 * Data parallelism: train.batch is the GLOBAL batch; each of P ranks draws its b = batch/P
 * samples of the step (task.h), and the gradients are averaged over the run's group in buckets
 * that start reducing while backward still runs (par/gradsync.h), so P ranks take the same steps
 * as 1 rank with the whole batch (up to the order of floating-point sums).
 * Outputs under run.dir: config.ini, metrics.csv (training), eval.csv (held-out loss and
 * accuracy), plots/loss.png, plots/eval.png, checkpoints/.
 */
#include <math.h>
#include <stdlib.h>

#include "core/log.h"       /* tess_log_* */
#include "core/timer.h"     /* tess_timer_now */
#include "nn/transformer.h" /* tess_tfm_* */
#include "optim/adamw.h"    /* tess_adamw_* */
#include "optim/adamw_opts.h" /* TESS_ADAMW_SCHED_OPTS, tess_adamw_sched_read */
#include "optim/clip.h"     /* tess_clip_grad_norm */
#include "optim/guard.h"    /* tess_guard_* */
#include "optim/sched.h"    /* tess_sched_* */
#include "par/coll.h"       /* tess_par_allreduce_f64 */
#include "par/gradsync.h"   /* tess_gradsync_* */
#include "io/safetensors.h" /* tess_safetensors_write */
#include "run/run.h"        /* tess_run_* */
#include "task.h"           /* tinylm_task_* */
#include "tensor/tensor.h"  /* tess_tensor_sqnorm */

static const tess_opt run_opts[] = {
    TESS_OPT_RESUMABLE(INT, "log_every", 10, 1, INT32_MAX, "steps between metrics.csv rows"),
};
static const tess_opt model_opts[] = {
    TESS_OPT_INT("layers", 2, 1, 1024, "transformer blocks"),
    TESS_OPT_INT("channels", 64, 2, 16384, "model width C (a multiple of model.heads)"),
    TESS_OPT_INT("heads", 4, 1, 1024, "attention heads (channels/heads must be even)"),
    TESS_OPT_INT("mlp_hidden", 128, 1, 1 << 17, "hidden width F of the MLP"),
    TESS_OPT_ENUM("mlp", "swiglu", tess_nn_ffn_kind_names, "feed-forward block"),
    TESS_OPT_ENUM("norm", "rmsnorm", tess_nn_norm_kind_names, "normalisation layer"),
    TESS_OPT_REAL("norm_eps", 1e-5, 1e-12, 1.0, "epsilon of the norms"),
    TESS_OPT_REAL("rope_base", 10000.0, 1.0, 1e9, "RoPE base"),
};
static const tess_opt task_opts[] = {
    TESS_OPT_ENUM("kind", "reverse", tinylm_task_kind_names, "what the model must output"),
    TESS_OPT_INT("length", 8, 1, 64, "symbols per sample n (sequence length 2n)"),
    TESS_OPT_INT("symbols", 10, 2, 100000, "alphabet size (vocabulary = symbols + 1)"),
};
static const tess_opt train_opts[] = {
    TESS_OPT_RESUMABLE(INT, "steps", 400, 1, INT64_MAX / 2, "optimizer steps"),
    TESS_OPT_INT("batch", 32, 1, 1 << 24, "GLOBAL batch in sequences; a multiple of the ranks"),
    TESS_OPT_RESUMABLE(INT, "eval_every", 50, 1, INT64_MAX / 2,
                       "steps between held-out evaluations"),
    TESS_OPT_RESUMABLE(INT, "eval_batch", 256, 1, 1 << 24, "held-out sequences per evaluation"),
    TESS_OPT_REAL("grad_clip", 1.0, 0.0, 1e9, "global-norm clipping threshold (0: off)"),
    TESS_OPT_RESUMABLE(INT, "max_bad_steps", 5, 1, 1000000,
                       "non-finite steps in a row before aborting"),
    TESS_OPT_RESUMABLE(STRING, "logits_out", "",
                       "after the last step, write the first held-out batch (ids, logits) to this "
                       "safetensors file (to check an exported model against; '' none)"),
};
static const tess_opt optim_opts[] = {TESS_ADAMW_SCHED_OPTS(40)};
static const tess_opt dist_opts[] = {
    TESS_OPT_RESUMABLE(INT, "bucket_kib", 1024, 1, 1 << 22,
                       "gradient all-reduce bucket size (KiB)"),
};
static const tess_config_section sections[] = {
    TESS_CONFIG_SECTION("model", model_opts), TESS_CONFIG_SECTION("task", task_opts),
    TESS_CONFIG_SECTION("train", train_opts), TESS_CONFIG_SECTION("optim", optim_opts),
    TESS_CONFIG_SECTION("dist", dist_opts),
};

/* The app: model, optimizer, data and what the metrics need. */
typedef struct {
    tinylm_task task;
    tess_tfm_config mc;
    tess_sched sched;
    tess_adamw_config adamw;
    int64_t global_B, b, log_every, eval_every, eval_batch;
    double clip;
    tess_registry *reg;
    tess_tfm *model;
    tess_adamw *opt;
    tess_gradsync *sync;
    tess_guard guard;
    int32_t *ids, *targets; /* (b, T) */
    int train_csv, eval_csv;
    double first_loss, loss, eval_loss, eval_acc, sync_exposed, t_log;
    int64_t steps_run;
} tinylm;

static void tinylm_destroy(void *ctx) {
    tinylm *a = ctx;
    free(a->ids);
    free(a->targets);
    tess_adamw_destroy(&a->opt);
    tess_gradsync_destroy(&a->sync);
    tess_tfm_destroy(&a->model);
    tess_registry_destroy(&a->reg);
}

/* The options into a, checked identically on every rank. */
static tess_status read_options(tinylm *a, const tess_config *c, int nranks, uint64_t seed) {
    a->global_B = tess_config_int(c, "train.batch");
    TESS_REQUIRE(a->global_B % nranks == 0, TESS_ERR_CONFIG,
                 "train.batch = %lld must be a multiple of the number of ranks (%d)",
                 (long long)a->global_B, nranks);
    a->b = a->global_B / nranks;
    const int64_t steps = tess_config_int(c, "train.steps");
    a->task = (tinylm_task){.kind = (tinylm_task_kind)tess_config_enum(c, "task.kind"),
                            .n = tess_config_int(c, "task.length"),
                            .nsym = tess_config_int(c, "task.symbols"),
                            .key = {.seed = (uint32_t)seed, .stream = 1}};
    a->mc = (tess_tfm_config){.V = a->task.nsym + 1, .T = 2 * a->task.n,
                              .C = tess_config_int(c, "model.channels"),
                              .NH = tess_config_int(c, "model.heads"),
                              .F = tess_config_int(c, "model.mlp_hidden"),
                              .L = tess_config_int(c, "model.layers"),
                              .norm = (tess_nn_norm_kind)tess_config_enum(c, "model.norm"),
                              .mlp = (tess_nn_ffn_kind)tess_config_enum(c, "model.mlp"),
                              .causal = true,
                              .norm_eps = (float)tess_config_real(c, "model.norm_eps"),
                              .rope_base = (float)tess_config_real(c, "model.rope_base")};
    TESS_CHECK(tess_adamw_sched_read(c, "optim", steps, "train.steps", &a->adamw, &a->sched));
    TESS_CHECK(tess_tfm_check_config(&a->mc, a->b));
    a->log_every = tess_config_int(c, "run.log_every");
    a->eval_every = tess_config_int(c, "train.eval_every");
    a->eval_batch = tess_config_int(c, "train.eval_batch");
    a->clip = tess_config_real(c, "train.grad_clip");
    return TESS_OK;
}

static tess_status tinylm_setup(tess_run *run, void *ctx) {
    tinylm *a = ctx;
    const tess_config *c = tess_run_config(run);
    const tess_group *dp = tess_run_group(run);
    const uint64_t seed = tess_run_seed(run);
    TESS_CHECK(read_options(a, c, dp->size, seed));
    const int64_t steps = tess_config_int(c, "train.steps");
    tess_run_set_total(run, (double)steps, steps);

    /* Everything above failed, if at all, identically on every rank. */
    tess_run_local_from_here(run);
    TESS_CHECK(tess_registry_create(&a->reg));
    TESS_CHECK(tess_tfm_create(&a->model, &a->mc, a->b, a->reg));
    TESS_CHECK(tess_registry_finalize(a->reg));
    TESS_CHECK(tess_registry_init_params(a->reg, seed));
    TESS_CHECK(tess_adamw_create(&a->opt, a->reg, &a->adamw));
    TESS_CHECK(tess_gradsync_create(&a->sync, a->reg, dp,
                                    tess_config_int(c, "dist.bucket_kib") * 1024 /
                                        (int64_t)sizeof(float)));
    tess_tfm_set_grad_hook(a->model, tess_gradsync_hook, a->sync);
    a->ids = malloc((size_t)(a->b * a->mc.T) * sizeof *a->ids);
    a->targets = malloc((size_t)(a->b * a->mc.T) * sizeof *a->targets);
    TESS_REQUIRE(a->ids && a->targets, TESS_ERR_MEM, "cannot allocate a batch of %lld tokens",
                 (long long)(a->b * a->mc.T));
    TESS_CHECK(tess_guard_init(&a->guard, (int)tess_config_int(c, "train.max_bad_steps"),
                               dp->rank == 0 ? stderr : NULL));

    /* What a checkpoint holds: the parameters and AdamW's moments and step count. */
    tess_state *st = tess_run_state(run);
    TESS_CHECK(tess_state_add_registry(st, "params", a->reg, false));
    TESS_CHECK(tess_adamw_describe(a->opt, st, "optim"));
    /* a resume holds at most one update and global_B samples per step */
    TESS_CHECK(tess_run_bound_counter(run, "optim/step_count", 1));
    int64_t cursor_max;
    if (__builtin_mul_overflow(steps, a->global_B, &cursor_max)) cursor_max = INT64_MAX;
    tess_run_set_data_cursor_max(run, cursor_max);

    static const char *const train_cols[] = {"loss", "lr", "grad_norm", "param_norm", "tok_per_s"};
    static const char *const eval_cols[] = {"eval_loss", "eval_acc"};
    static const char *const loss_cols[] = {"loss"}, *const acc_cols[] = {"eval_acc"};
    TESS_CHECK(tess_run_metrics(run, "metrics", train_cols, 5, true, &a->train_csv));
    TESS_CHECK(tess_run_metrics(run, "eval", eval_cols, 2, true, &a->eval_csv));
    static const char *const loss_title[] = {"training loss"},
                             *const eval_title[] = {"held-out loss"},
                             *const acc_title[] = {"held-out token accuracy"};
    const tess_plot_spec loss_plot = {.title = "tinylm: training loss", .ycols = loss_cols,
                                      .ny = 1, .xlabel = "step (optimizer updates)",
                                      .ylabel = "cross-entropy (nats/token)", .logy = true,
                                      .ytitles = loss_title};
    const tess_plot_spec eval_plot = {
        .title = "tinylm: held-out loss and token accuracy", .ycols = eval_cols, .ny = 1,
        .xlabel = "step (optimizer updates)", .ylabel = "held-out cross-entropy (nats/token)",
        .logy = true, .y2cols = acc_cols, .ny2 = 1, .y2label = "token accuracy (fraction, 0-1)",
        .ytitles = eval_title, .y2titles = acc_title};
    TESS_CHECK(tess_run_plot(run, a->train_csv, "loss.png", &loss_plot));
    TESS_CHECK(tess_run_plot(run, a->eval_csv, "eval.png", &eval_plot));

    tess_log_info("tinylm: task %s n=%lld, model L=%lld C=%lld heads=%lld F=%lld %s/%s, "
                  "%lld parameters, %.1f MiB activations/rank",
                  tess_config_string(c, "task.kind"), (long long)a->task.n, (long long)a->mc.L,
                  (long long)a->mc.C, (long long)a->mc.NH, (long long)a->mc.F,
                  tess_config_string(c, "model.mlp"), tess_config_string(c, "model.norm"),
                  (long long)tess_registry_global_total(a->reg),
                  (double)tess_tfm_activation_bytes(a->model) / 1048576.0);
    tess_log_info("tinylm: %lld steps, global batch %lld = %d ranks x %lld, %lld tokens/step",
                  (long long)steps, (long long)a->global_B, dp->size, (long long)a->b,
                  (long long)(a->global_B * a->mc.T));
    char subtitle[256];
    snprintf(subtitle, sizeof subtitle,
             "task %s n=%lld, L=%lld C=%lld heads=%lld, %lld parameters, batch %lld, lr %g, %d rank%s",
             tess_config_string(c, "task.kind"), (long long)a->task.n, (long long)a->mc.L,
             (long long)a->mc.C, (long long)a->mc.NH, (long long)tess_registry_global_total(a->reg),
             (long long)a->global_B, tess_config_real(c, "optim.lr"), dp->size,
             dp->size == 1 ? "" : "s");
    tess_run_plot_subtitle(run, subtitle);
    a->first_loss = a->loss = a->eval_loss = a->eval_acc = NAN;
    a->t_log = tess_timer_now();
    return TESS_OK;
}

/* Held-out loss and token accuracy over eval_batch samples split across the ranks (block
 * ranges, uneven allowed), in chunks of at most b. Collective on the run's group. */
static tess_status evaluate(tinylm *a, const tess_group *g) {
    const int64_t T = a->mc.T, V = a->mc.V, per = (a->eval_batch + g->size - 1) / g->size;
    const int64_t lo = per * g->rank < a->eval_batch ? per * g->rank : a->eval_batch;
    const int64_t hi = lo + per < a->eval_batch ? lo + per : a->eval_batch;
    double sums[3] = {0.0, 0.0, 0.0}; /* loss * targets, correct, targets */
    for (int64_t first = lo; first < hi; first += a->b) {
        const int64_t B = hi - first < a->b ? hi - first : a->b;
        tinylm_task_batch(&a->task, TINYLM_SPLIT_EVAL, first, B, a->ids, a->targets);
        const float l = tess_tfm_forward(a->model, a->ids, a->targets, B);
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
    TESS_CHECK(tess_par_allreduce_f64(g, sums, 3, TESS_PAR_SUM));
    a->eval_loss = sums[0] / sums[2];
    a->eval_acc = sums[1] / sums[2];
    return TESS_OK;
}

/* One optimizer step on samples [cursor, cursor + global_B) of the training stream, this rank
 * taking its b of them. */
static tess_status tinylm_step(tess_run *run, void *ctx, int64_t step, tess_run_step_out *out) {
    tinylm *a = ctx;
    const tess_group *dp = tess_run_group(run);
    const int64_t cursor = out->data_cursor, done = step + 1, steps = a->sched.total_steps;
    tinylm_task_batch(&a->task, TINYLM_SPLIT_TRAIN, cursor + dp->rank * a->b, a->b, a->ids,
                      a->targets);
    tess_registry_zero_grads(a->reg);
    double loss = tess_tfm_forward(a->model, a->ids, a->targets, a->b);
    tess_tfm_backward(a->model, 1.0f);
    double exposed;
    TESS_CHECK(tess_gradsync_finish(a->sync, &exposed));
    a->sync_exposed += exposed;
    TESS_CHECK(tess_par_allreduce_f64(dp, &loss, 1, TESS_PAR_MEAN));
    if (isnan(a->first_loss)) a->first_loss = loss;
    a->loss = loss;
    double norm;
    const double lr = tess_sched_lr(&a->sched, step);
    bool skip;
    TESS_CHECK(tess_clip_grad_norm(a->reg, a->clip, NULL, &norm));
    TESS_CHECK(tess_guard_check(&a->guard, step, loss, norm, &skip));
    if (!skip) tess_adamw_step(a->opt, (float)lr);
    a->steps_run++;

    const double tokens = (double)(a->global_B * a->mc.T);
    if (done % a->log_every == 0 || done == steps) {
        const double now = tess_timer_now();
        const int64_t since = done % a->log_every ? done % a->log_every : a->log_every;
        const double pnorm = sqrt(tess_tensor_sqnorm(tess_registry_params(a->reg),
                                                     tess_registry_local_total(a->reg)));
        const double row[5] = {loss, lr, norm, pnorm, tokens * (double)since / (now - a->t_log)};
        a->t_log = now;
        TESS_CHECK(tess_run_metrics_row(run, a->train_csv, row));
    }
    if (done % a->eval_every == 0 || done == steps) {
        TESS_CHECK(evaluate(a, dp));
        const double row[2] = {a->eval_loss, a->eval_acc};
        TESS_CHECK(tess_run_metrics_row(run, a->eval_csv, row));
    }
    *out = (tess_run_step_out){.done = done == steps, .loss = loss, .items = tokens,
                               .position = NAN, .data_cursor = cursor + a->global_B};
    return TESS_OK;
}

/* train.logits_out: the model's logits on the first b held-out sequences, with their ids, as
 * safetensors "ids" i64 (B, T) and "logits" f32 (B, T, V). Rank 0 (every rank holds the model). */
static tess_status write_logits(const tinylm *a, const char *path) {
    const int64_t B = a->b, T = a->mc.T, V = a->mc.V;
    tinylm_task_batch(&a->task, TINYLM_SPLIT_EVAL, 0, B, a->ids, a->targets);
    tess_tfm_forward(a->model, a->ids, a->targets, B);
    int64_t *ids = malloc((size_t)(B * T) * sizeof *ids);
    TESS_REQUIRE(ids, TESS_ERR_MEM, "no memory for %lld ids", (long long)(B * T));
    for (int64_t i = 0; i < B * T; i++) ids[i] = a->ids[i];
    const tess_safetensors_entry e[2] = {
        {.name = "ids", .dtype = TESS_I64, .ndim = 2, .shape = {B, T}, .data = ids},
        {.name = "logits", .dtype = TESS_F32, .ndim = 3, .shape = {B, T, V},
         .data = tess_tfm_logits(a->model)}};
    static const char *const meta[] = {"source", "tinylm train.logits_out"};
    const tess_status s = tess_safetensors_write(path, e, 2, meta, 1, NULL, NULL);
    free(ids);
    TESS_CHECK(s);
    tess_log_info("tinylm: wrote the logits of %lld held-out sequences to %s", (long long)B, path);
    return TESS_OK;
}

static tess_status tinylm_finish(tess_run *run, void *ctx) {
    tinylm *a = ctx;
    const char *logits_out = tess_config_string(tess_run_config(run), "train.logits_out");
    if (logits_out[0] && tess_run_group(run)->rank == 0) TESS_CHECK(write_logits(a, logits_out));
    const double seconds = tess_timer_elapsed(tess_run_timers(run),
                                              tess_timer_get(tess_run_timers(run), "step"));
    tess_log_info("tinylm: loss %.4g -> %.4g; held-out loss %.4g, token accuracy %.2f%%; "
                  "%lld steps in %.1f s (%.0f tok/s on %d ranks, %.2f s waiting for gradient "
                  "sync, %lld skipped)",
                  a->first_loss, a->loss, a->eval_loss, 100.0 * a->eval_acc,
                  (long long)a->steps_run, seconds,
                  (double)(a->steps_run * a->global_B * a->mc.T) / seconds,
                  tess_run_group(run)->size, a->sync_exposed, (long long)a->guard.skipped);
    return TESS_OK;
}

static const tess_run_app tinylm_app = {
    .name = "tinylm", .unit = "step", .rate_unit = "tok", .default_dir = "runs/tinylm",
    .sections = sections, .nsections = sizeof sections / sizeof sections[0],
    .run_opts = run_opts, .nrun_opts = sizeof run_opts / sizeof run_opts[0],
    .setup = tinylm_setup, .step = tinylm_step, .finish = tinylm_finish,
    .destroy = tinylm_destroy};

int main(int argc, char **argv) {
    tinylm app = {0};
    return tess_run_main(&tinylm_app, &app, argc, argv);
}

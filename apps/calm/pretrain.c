/* pretrain.c - the calm app's pretrain mode (docs/calm.md): simulated sessions (sim.h) in
 * memory, z-scored with training-frame statistics, windows of M patches of P frames on the
 * patch grid; stage 1 trains the tokenizer (tok.h) on single-neuron windows, stage 2 the
 * dual-axis transformer (dat.h) on the frozen tokenizer's ids; at the end, forecasting on the
 * held-out tail by argmax rollout, decoded through the tokenizer, against copy-last.
 *
 * Data parallel: every rank holds every session (they are small and generated identically);
 * global sample j of a step is drawn by Philox keyed by (run.seed, step, j), and rank r runs the
 * samples [r b, (r + 1) b) of the global batch (b = batch / ranks), so the global batch, its
 * neuron subsets and the Gumbel noise do not depend on the rank count. Gradients are averaged
 * over the ranks by par/gradsync.h. */
#include <dirent.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "calm.h"
#include "core/log.h"     /* tess_log_info */
#include "core/rng.h"     /* tess_rng_* */
#include "io/traces.h"    /* tess_traces_import_flavell */
#include "nn/state.h"     /* tess_state_add_registry */
#include "optim/adamw.h"  /* tess_adamw_* */
#include "optim/clip.h"   /* tess_clip_grad_norm */
#include "optim/sched.h"  /* tess_sched */
#include "par/coll.h"     /* tess_par_allreduce_f64 */
#include "par/gradsync.h" /* tess_gradsync_* */
#include "par/layout.h"   /* tess_par_block_range */

const tess_opt calm_tok_opts[] = {
    TESS_OPT_INT("patch", 4, 1, 64, "frames per patch P"),
    TESS_OPT_INT("patches", 16, 2, 256, "patches per window M (window = M P frames)"),
    TESS_OPT_INT("channels", 32, 1, 1024, "convolution channels c"),
    TESS_OPT_INT("width", 64, 2, 4096, "transformer width d_t"),
    TESS_OPT_INT("layers", 1, 1, 16, "encoder and decoder layers n_t"),
    TESS_OPT_INT("heads", 4, 1, 64, "attention heads"),
    TESS_OPT_INT("code_dim", 16, 2, 1024, "code dimension D_c"),
    TESS_OPT_INT("codes", 64, 2, 65535, "codebook size K (the DAT's vocabulary)"),
    TESS_OPT_INT("steps", 200, 0, 10000000, "stage 1 steps"),
    TESS_OPT_INT("batch", 64, 1, 1 << 20, "GLOBAL traces per step; a multiple of the ranks"),
    TESS_OPT_REAL("lr", 2e-3, 1e-7, 1.0, "AdamW learning rate"),
};
const int64_t calm_tok_nopts = sizeof calm_tok_opts / sizeof calm_tok_opts[0];

const tess_opt calm_model_opts[] = {
    TESS_OPT_INT("channels", 64, 2, 8192, "DAT width d"),
    TESS_OPT_INT("layers", 2, 1, 64, "DAT layers"),
    TESS_OPT_INT("heads", 4, 1, 64, "attention heads"),
    TESS_OPT_INT("ffn", 256, 1, 65536, "feed-forward hidden width"),
    TESS_OPT_INT("max_neurons", 64, 1, 1 << 16, "neurons per window N_max (more are subsampled)"),
};
const int64_t calm_model_nopts = sizeof calm_model_opts / sizeof calm_model_opts[0];

const tess_opt calm_data_opts[] = {
    TESS_OPT_STRING("files", "",
                    "recordings in the Flavell-lab layout (comma-separated files or directories "
                    "of *.h5); empty: simulated sessions ([sim])"),
    TESS_OPT_STRING("trace", "trace_array", "dataset /gcamp/<trace> holding (T, N) traces"),
};
const int64_t calm_data_nopts = sizeof calm_data_opts / sizeof calm_data_opts[0];

const tess_opt calm_train_opts[] = {
    TESS_OPT_RESUMABLE(INT, "steps", 200, 1, 10000000, "stage 2 (DAT) steps"),
    TESS_OPT_INT("batch", 8, 1, 1 << 20, "GLOBAL windows per step; a multiple of the ranks"),
    TESS_OPT_REAL("lr", 1e-3, 1e-7, 1.0, "AdamW peak learning rate (cosine after warm-up)"),
    TESS_OPT_INT("warmup", 20, 0, 1000000, "warm-up steps"),
    TESS_OPT_REAL("clip", 1.0, 0.0, 1e6, "gradient-norm clip (0: none)"),
    TESS_OPT_REAL("weight_decay", 0.05, 0.0, 1.0, "AdamW decoupled weight decay"),
    TESS_OPT_REAL("train_fraction", 0.7, 0.1, 0.95, "tail split: first fraction of each session trains"),
    TESS_OPT_INT("horizon", 4, 1, 255, "forecast horizon in patches (context = patches - horizon)"),
};
const int64_t calm_train_nopts = sizeof calm_train_opts / sizeof calm_train_opts[0];

/* ---- data ---------------------------------------------------------------------------------- */

static int name_cmp(const void *a, const void *b) {
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* The recordings named by data.files: each item a file, or a directory whose *.h5 files are
 * taken in name order. paths (max) receives malloc'ed strings; *n their count. */
static tess_status list_files(const char *files, char **paths, int64_t max, int64_t *n) {
    char list[4096];
    TESS_REQUIRE(strlen(files) < sizeof list, TESS_ERR_CONFIG, "data.files is too long");
    snprintf(list, sizeof list, "%s", files);
    *n = 0;
    char *save = NULL;
    for (char *item = strtok_r(list, ",", &save); item; item = strtok_r(NULL, ",", &save)) {
        struct stat sb;
        TESS_REQUIRE(stat(item, &sb) == 0, TESS_ERR_NOINPUT, "data.files: cannot open '%s': %s",
                     item, strerror(errno));
        if (!S_ISDIR(sb.st_mode)) {
            TESS_REQUIRE(*n < max, TESS_ERR_CONFIG, "data.files: more than %lld recordings",
                         (long long)max);
            paths[(*n)++] = strdup(item);
            continue;
        }
        DIR *d = opendir(item);
        TESS_REQUIRE(d, TESS_ERR_NOINPUT, "data.files: cannot read directory '%s'", item);
        int64_t first = *n;
        for (struct dirent *e = readdir(d); e; e = readdir(d)) {
            size_t len = strlen(e->d_name);
            if (len < 4 || strcmp(e->d_name + len - 3, ".h5") != 0) continue;
            if (*n >= max) break;
            char *path = malloc(strlen(item) + len + 2);
            if (path) sprintf(path, "%s/%s", item, e->d_name);
            paths[(*n)++] = path;
        }
        closedir(d);
        qsort(paths + first, (size_t)(*n - first), sizeof *paths, name_cmp);
    }
    TESS_REQUIRE(*n > 0, TESS_ERR_CONFIG, "data.files = '%s' names no recording", files);
    return TESS_OK;
}

/* Sessions from recordings (data.files) or from the simulator: p->sess[k].x (T, N) raw. */
static tess_status read_sessions(calm_pretrain *p, const char *files, const char *trace_name) {
    if (!files[0]) {
        const calm_sim_config *c = &p->simcfg;
        p->nsess = c->animals * c->sessions;
        p->sess = calloc((size_t)p->nsess, sizeof *p->sess);
        TESS_REQUIRE(p->sess, TESS_ERR_MEM, "out of memory for %lld sessions", (long long)p->nsess);
        for (int64_t k = 0; k < p->nsess; k++) {
            calm_sim_session s;
            TESS_CHECK(calm_sim_generate(&s, c, k / c->sessions, k % c->sessions));
            p->sess[k] = (calm_session){.T = s.frames, .N = s.neurons, .x = s.dff};
            snprintf(p->sess[k].name, sizeof p->sess[k].name, "sim-a%03lld-s%02lld",
                     (long long)(k / c->sessions), (long long)(k % c->sessions));
            s.dff = NULL; /* keep the observed dF/F; free the rest */
            calm_sim_session_free(&s);
        }
        return TESS_OK;
    }
    enum { MAX_FILES = 4096 };
    char **paths = calloc(MAX_FILES, sizeof *paths);
    TESS_REQUIRE(paths, TESS_ERR_MEM, "out of memory");
    int64_t n = 0;
    tess_status st = list_files(files, paths, MAX_FILES, &n);
    if (st == TESS_OK) {
        p->nsess = n;
        p->sess = calloc((size_t)n, sizeof *p->sess);
        if (!p->sess) st = tess_error_push(TESS_ERR_MEM, __FILE__, __LINE__, __func__, "out of memory");
    }
    for (int64_t k = 0; st == TESS_OK && k < n; k++) {
        tess_traces_session s;
        st = tess_traces_import_flavell(&s, paths[k], trace_name, "");
        if (st != TESS_OK) break;
        p->sess[k] = (calm_session){.T = s.frames, .N = s.neurons, .x = s.traces};
        snprintf(p->sess[k].name, sizeof p->sess[k].name, "%s", paths[k]);
        free(s.behavior);
    }
    for (int64_t k = 0; k < n; k++) free(paths[k]);
    free(paths);
    TESS_REQUIRE(st == TESS_OK, st, "reading data.files");
    return TESS_OK;
}

static tess_status load_sessions(calm_pretrain *p, const char *files, const char *trace_name) {
    TESS_CHECK(read_sessions(p, files, trace_name));
    const int64_t Lwin = p->tokc.M * p->tokc.P;
    int64_t unit = 0;
    for (int64_t k = 0; k < p->nsess; k++) {
        calm_session *d = &p->sess[k];
        d->unit0 = unit;
        unit += d->N;
        d->train_T = (int64_t)floor(p->train_fraction * (double)d->T);
        TESS_REQUIRE(d->train_T >= Lwin && d->T - d->train_T >= Lwin, TESS_ERR_DATA,
                     "'%s': %lld frames, fewer than one window of %lld frames (tok.patches x "
                     "tok.patch) in its training part (%lld frames) or its test part",
                     d->name, (long long)d->T, (long long)Lwin, (long long)d->train_T);
        /* z-score each neuron with its training frames, clip to [-5, 15] */
        for (int64_t n = 0; n < d->N; n++) {
            double m = 0.0, v = 0.0;
            for (int64_t t = 0; t < d->train_T; t++) m += d->x[t * d->N + n];
            m /= (double)d->train_T;
            for (int64_t t = 0; t < d->train_T; t++) v += pow(d->x[t * d->N + n] - m, 2);
            double sd = sqrt(v / (double)d->train_T) + 1e-6;
            for (int64_t t = 0; t < d->T; t++) {
                double z = (d->x[t * d->N + n] - m) / sd;
                d->x[t * d->N + n] = (float)(z < -5.0 ? -5.0 : z > 15.0 ? 15.0 : z);
            }
        }
    }
    p->units = unit;
    /* windows on the patch grid: training ones end inside the training frames, test ones start
     * at or after the split */
    const int64_t Lw = p->tokc.M * p->tokc.P, P = p->tokc.P;
    for (int pass = 0; pass < 2; pass++) {
        p->ntrain = p->ntest = 0;
        for (int64_t k = 0; k < p->nsess; k++) {
            const calm_session *d = &p->sess[k];
            for (int64_t t0 = 0; t0 + Lw <= d->T; t0 += P) {
                bool train = t0 + Lw <= d->train_T, test = t0 >= d->train_T;
                if (pass == 1 && train) p->train_win[p->ntrain] = (calm_window){k, t0};
                if (pass == 1 && test) p->test_win[p->ntest] = (calm_window){k, t0};
                p->ntrain += train, p->ntest += test;
            }
        }
        if (pass == 0) {
            TESS_REQUIRE(p->ntrain > 0 && p->ntest > 0, TESS_ERR_CONFIG,
                         "no complete window of %lld frames in the training (%lld) or test "
                         "part of the sessions (sim.frames = %lld, train.train_fraction = %g)",
                         (long long)Lw, (long long)p->sess[0].train_T, (long long)p->sess[0].T,
                         p->train_fraction);
            p->train_win = malloc((size_t)p->ntrain * sizeof *p->train_win);
            p->test_win = malloc((size_t)p->ntest * sizeof *p->test_win);
            TESS_REQUIRE(p->train_win && p->test_win, TESS_ERR_MEM, "out of memory for windows");
        }
    }
    return TESS_OK;
}

/* Copy neuron n's frames [t0, t0 + L) of session s into out (L). */
static void trace(const calm_session *s, int64_t n, int64_t t0, int64_t L, float *out) {
    for (int64_t t = 0; t < L; t++) out[t] = s->x[(t0 + t) * s->N + n];
}

/* ---- setup --------------------------------------------------------------------------------- */

static tess_status make_models(calm_pretrain *p, const tess_group *g, uint64_t seed) {
    TESS_CHECK(tess_registry_create(&p->tok_reg));
    TESS_CHECK(calm_tok_create(&p->tok, &p->tokc, p->tok_b > p->max_traces ? p->tok_b : p->max_traces,
                               p->tok_reg));
    TESS_CHECK(tess_registry_finalize(p->tok_reg));
    TESS_CHECK(tess_registry_init_params(p->tok_reg, seed));
    TESS_CHECK(tess_registry_create(&p->dat_reg));
    TESS_CHECK(calm_dat_create(&p->dat, &p->datc, p->dat_b > p->eval_b ? p->dat_b : p->eval_b,
                               p->dat_reg));
    /* no weight decay on embeddings, norms and biases (1-d entries and the embedding tables) */
    for (int64_t i = 0; i < tess_registry_count(p->dat_reg); i++) {
        const tess_registry_entry *e = tess_registry_get(p->dat_reg, i);
        if (e->ndim == 1 || strstr(e->name, "_emb")) TESS_CHECK(tess_registry_set_decay(p->dat_reg, i, false));
    }
    TESS_CHECK(tess_registry_finalize(p->dat_reg));
    TESS_CHECK(tess_registry_init_params(p->dat_reg, seed + 1));
    tess_adamw_config ac = {.beta1 = 0.9f, .beta2 = 0.95f, .eps = 1e-8f, .weight_decay = 0.0f};
    TESS_CHECK(tess_adamw_create(&p->tok_opt, p->tok_reg, &ac));
    ac.weight_decay = (float)p->weight_decay;
    TESS_CHECK(tess_adamw_create(&p->dat_opt, p->dat_reg, &ac));
    TESS_CHECK(tess_gradsync_create(&p->tok_sync, p->tok_reg, g, 1 << 16));
    TESS_CHECK(tess_gradsync_create(&p->dat_sync, p->dat_reg, g, 1 << 16));
    return TESS_OK;
}

tess_status calm_pretrain_setup(tess_run *run, calm_pretrain *p) {
    const tess_config *cfg = tess_run_config(run);
    const tess_group *g = tess_run_group(run);
    TESS_CHECK(calm_sim_config_read(&p->simcfg, cfg, tess_run_seed(run)));
    p->tokc = (calm_tok_config){.P = tess_config_int(cfg, "tok.patch"),
                                .M = tess_config_int(cfg, "tok.patches"),
                                .c = tess_config_int(cfg, "tok.channels"),
                                .dt = tess_config_int(cfg, "tok.width"),
                                .nt = tess_config_int(cfg, "tok.layers"),
                                .heads = tess_config_int(cfg, "tok.heads"),
                                .Dc = tess_config_int(cfg, "tok.code_dim"),
                                .K = tess_config_int(cfg, "tok.codes"),
                                .tau_cos = 0.1f, .lambda_d = 0.5f, .lambda_orth = 0.1f,
                                .lambda_h = 0.01f};
    p->tok_steps = tess_config_int(cfg, "tok.steps");
    p->tok_batch = tess_config_int(cfg, "tok.batch");
    p->tok_lr = tess_config_real(cfg, "tok.lr");
    p->dat_steps = tess_config_int(cfg, "train.steps");
    p->dat_batch = tess_config_int(cfg, "train.batch");
    p->clip = tess_config_real(cfg, "train.clip");
    p->weight_decay = tess_config_real(cfg, "train.weight_decay");
    p->train_fraction = tess_config_real(cfg, "train.train_fraction");
    p->horizon = tess_config_int(cfg, "train.horizon");
    p->sched = (tess_sched){.kind = TESS_SCHED_COSINE, .lr = tess_config_real(cfg, "train.lr"),
                            .min_lr = 0.1 * tess_config_real(cfg, "train.lr"),
                            .warmup_steps = tess_config_int(cfg, "train.warmup"),
                            .total_steps = p->dat_steps};
    TESS_REQUIRE(p->tok_batch % g->size == 0 && p->dat_batch % g->size == 0, TESS_ERR_CONFIG,
                 "tok.batch = %lld and train.batch = %lld must be multiples of the number of "
                 "ranks (%d)",
                 (long long)p->tok_batch, (long long)p->dat_batch, g->size);
    TESS_REQUIRE(p->horizon < p->tokc.M, TESS_ERR_CONFIG,
                 "train.horizon = %lld must be below tok.patches = %lld", (long long)p->horizon,
                 (long long)p->tokc.M);
    TESS_REQUIRE(p->sched.warmup_steps < p->dat_steps, TESS_ERR_CONFIG,
                 "train.warmup = %lld must be below train.steps = %lld",
                 (long long)p->sched.warmup_steps, (long long)p->dat_steps);
    TESS_CHECK(calm_tok_check(&p->tokc, 1));
    p->tok_b = p->tok_batch / g->size;
    p->dat_b = p->dat_batch / g->size;
    p->eval_b = 4;
    TESS_CHECK(load_sessions(p, tess_config_string(cfg, "data.files"),
                             tess_config_string(cfg, "data.trace")));
    p->datc = (calm_dat_config){.K = p->tokc.K, .d = tess_config_int(cfg, "model.channels"),
                                .layers = tess_config_int(cfg, "model.layers"),
                                .heads = tess_config_int(cfg, "model.heads"),
                                .ffn = tess_config_int(cfg, "model.ffn"), .units = p->units,
                                .sessions = p->nsess,
                                .max_N = tess_config_int(cfg, "model.max_neurons"),
                                .M = p->tokc.M};
    TESS_CHECK(calm_dat_check(&p->datc, p->dat_b));
    tess_run_set_total(run, (double)(p->tok_steps + p->dat_steps), p->tok_steps + p->dat_steps);
    tess_run_local_from_here(run);

    const int64_t N = p->datc.max_N, M = p->tokc.M, Lw = M * p->tokc.P;
    p->max_traces = N; /* the tokenizer encodes / decodes one window's neurons at a time */
    TESS_CHECK(make_models(p, g, tess_run_seed(run)));
    const int64_t Bmax = p->dat_b > p->eval_b ? p->dat_b : p->eval_b;
    const int64_t traces = p->tok_b > p->max_traces ? p->tok_b : p->max_traces;
    p->x = malloc((size_t)(traces * Lw) * sizeof(float));
    p->ids = malloc((size_t)(traces * M) * sizeof(int32_t));
    p->tokens = malloc((size_t)(Bmax * N * M) * sizeof(int32_t));
    p->unit = malloc((size_t)(Bmax * N) * sizeof(int32_t));
    p->sid = malloc((size_t)Bmax * sizeof(int32_t));
    p->count = malloc((size_t)Bmax * sizeof(int32_t));
    p->perm = malloc((size_t)(p->units + 1) * sizeof(int64_t));
    TESS_REQUIRE(p->x && p->ids && p->tokens && p->unit && p->sid && p->count && p->perm,
                 TESS_ERR_MEM, "out of memory for the batch buffers");

    tess_state *st = tess_run_state(run);
    TESS_CHECK(tess_state_add_registry(st, "tok/params", p->tok_reg, false));
    TESS_CHECK(tess_adamw_describe(p->tok_opt, st, "tok/optim"));
    TESS_CHECK(tess_state_add_registry(st, "dat/params", p->dat_reg, false));
    TESS_CHECK(tess_adamw_describe(p->dat_opt, st, "dat/optim"));
    static const char *const tcols[] = {"tok_loss", "tok_mse", "perplexity"};
    TESS_CHECK(tess_run_metrics(run, "tokenizer", tcols, 3, true, &p->tok_csv));
    static const char *const dcols[] = {"ce", "bits_per_token", "grad_norm", "lr"};
    TESS_CHECK(tess_run_metrics(run, "metrics", dcols, 4, true, &p->dat_csv));
    static const char *const fcols[] = {"horizon_frame", "mse_model",    "mse_anchored",
                                        "mse_ridge_ar",  "mse_copy_last", "score",
                                        "score_anchored", "score_ridge_ar"};
    TESS_CHECK(tess_run_metrics(run, "forecast", fcols, 8, false, &p->fc_csv));
    static const char *const fplot[] = {"mse_model", "mse_anchored", "mse_ridge_ar",
                                        "mse_copy_last"};
    const tess_plot_spec tok_plot = {.title = "calm: tokenizer loss", .xlabel = "step (updates)",
                                     .ycols = tcols, .ny = 2,
                                     .ylabel = "loss, reconstruction MSE (z-scored units^2)",
                                     .logy = true};
    const tess_plot_spec dat_plot = {.title = "calm: dual-axis transformer next-token loss",
                                     .xlabel = "step (updates)", .ycols = dcols, .ny = 1,
                                     .ylabel = "cross-entropy (nats/token)"};
    const tess_plot_spec fc_plot = {.title = "calm: test MSE per forecast horizon",
                                    .xlabel = "horizon (frames ahead)", .ycols = fplot, .ny = 4,
                                    .ylabel = "MSE (z-scored units^2)"};
    TESS_CHECK(tess_run_plot(run, p->tok_csv, "tokenizer.png", &tok_plot));
    TESS_CHECK(tess_run_plot(run, p->dat_csv, "dat_ce.png", &dat_plot));
    TESS_CHECK(tess_run_plot(run, p->fc_csv, "forecast.png", &fc_plot));
    tess_log_info("pretrain: %lld sessions, %lld units, %lld training / %lld test windows of "
                  "%lld frames",
                  (long long)p->nsess, (long long)p->units, (long long)p->ntrain,
                  (long long)p->ntest, (long long)Lw);
    return TESS_OK;
}

/* ---- steps --------------------------------------------------------------------------------- */

static uint64_t draw(const tess_run *run, int64_t step, uint64_t what, int64_t j) {
    const tess_rng_key key = {(uint32_t)tess_run_seed(run), 7};
    return tess_rng_u64(key, tess_rng_ctr(TESS_RNG_PURPOSE_DATA, (uint64_t)step),
                        (what << 40) | (uint64_t)j);
}

static tess_status tok_step(tess_run *run, calm_pretrain *p, int64_t step,
                            tess_run_step_out *out) {
    const tess_group *g = tess_run_group(run);
    const int64_t Lw = p->tokc.M * p->tokc.P, first = g->rank * p->tok_b;
    for (int64_t i = 0; i < p->tok_b; i++) {
        int64_t j = first + i;
        const calm_window *w = &p->train_win[draw(run, step, 1, j) % (uint64_t)p->ntrain];
        const calm_session *s = &p->sess[w->session];
        trace(s, (int64_t)(draw(run, step, 2, j) % (uint64_t)s->N), w->t0, Lw, p->x + i * Lw);
    }
    const double frac = p->tok_steps > 0 ? (double)step / (double)p->tok_steps : 1.0;
    const float tau = (float)(frac < 0.5 ? pow(0.1, frac / 0.5) : 0.1);
    const tess_nn_codebook_mode mode = frac >= 0.9 ? TESS_NN_CODEBOOK_HARD_ST : TESS_NN_CODEBOOK_SOFT;
    tess_registry_zero_grads(p->tok_reg);
    calm_tok_loss l = calm_tok_forward(p->tok, p->x, p->tok_b, p->ids,
                                       (tess_rng_key){(uint32_t)tess_run_seed(run), 8}, step, first,
                                       tau, mode);
    /* the usage entropy of the global batch: code usage averaged over the ranks */
    TESS_CHECK(tess_par_allreduce(g, calm_tok_code_usage(p->tok), p->tokc.K, TESS_PAR_MEAN));
    l.entropy = calm_tok_usage_loss(p->tok);
    calm_tok_backward(p->tok, 1.0f);
    TESS_CHECK(tess_gradsync_finish(p->tok_sync, NULL));
    double gnorm = 0.0;
    TESS_CHECK(tess_clip_grad_norm(p->tok_reg, p->clip, g, &gnorm));
    tess_adamw_step(p->tok_opt, (float)p->tok_lr);
    double row[3] = {l.total, l.mse, exp(log((double)p->tokc.K) - l.entropy)};
    TESS_CHECK(tess_par_allreduce_f64(g, row, 3, TESS_PAR_MEAN));
    if ((step + 1) % 10 == 0 || step + 1 == p->tok_steps)
        TESS_CHECK(tess_run_metrics_row(run, p->tok_csv, row));
    *out = (tess_run_step_out){.loss = row[0], .items = (double)p->tok_batch, .position = NAN,
                               .data_cursor = out->data_cursor};
    return TESS_OK;
}

/* Window w's neurons (all, or N_max of them by a Philox permutation keyed by key_j), tokenized:
 * fills slot b of tokens / unit / sid / count. x and ids are scratch for count traces. */
static void window_tokens(calm_pretrain *p, const calm_window *w, int64_t b, bool subsample,
                          uint64_t key_j, int64_t step) {
    const calm_session *s = &p->sess[w->session];
    const int64_t N = p->datc.max_N, M = p->tokc.M, Lw = M * p->tokc.P;
    const int64_t count = s->N < N ? s->N : N;
    for (int64_t n = 0; n < s->N; n++) p->perm[n] = n;
    if (subsample && s->N > N)
        tess_rng_permutation((tess_rng_key){(uint32_t)key_j, 9},
                             tess_rng_ctr(TESS_RNG_PURPOSE_DATA, (uint64_t)step), p->perm, s->N);
    for (int64_t n = 0; n < count; n++) trace(s, p->perm[n], w->t0, Lw, p->x + n * Lw);
    calm_tok_encode(p->tok, p->x, count, p->ids);
    for (int64_t n = 0; n < N; n++) {
        int64_t src = n < count ? n : 0; /* padding repeats neuron 0 (masked, no loss) */
        p->unit[b * N + n] = (int32_t)(s->unit0 + p->perm[src]);
        memcpy(p->tokens + (b * N + n) * M, p->ids + src * M, (size_t)M * sizeof(int32_t));
    }
    p->sid[b] = (int32_t)w->session;
    p->count[b] = (int32_t)count;
}

static tess_status dat_step(tess_run *run, calm_pretrain *p, int64_t step, tess_run_step_out *out) {
    const tess_group *g = tess_run_group(run);
    const int64_t k = step - p->tok_steps, first = g->rank * p->dat_b;
    for (int64_t i = 0; i < p->dat_b; i++) {
        int64_t j = first + i;
        uint64_t r = draw(run, step, 3, j);
        window_tokens(p, &p->train_win[r % (uint64_t)p->ntrain], i, true, r >> 32, step);
    }
    int64_t pairs = 0;
    tess_registry_zero_grads(p->dat_reg);
    double ce = calm_dat_forward(p->dat, p->tokens, p->unit, p->sid, p->count, p->dat_b, &pairs);
    double tot[2] = {ce, (double)pairs};
    TESS_CHECK(tess_par_allreduce_f64(g, tot, 2, TESS_PAR_SUM));
    /* gradsync averages over the ranks: scale by ranks / global pairs for the global mean */
    calm_dat_backward(p->dat, (float)((double)g->size / tot[1]));
    TESS_CHECK(tess_gradsync_finish(p->dat_sync, NULL));
    double gnorm = 0.0;
    TESS_CHECK(tess_clip_grad_norm(p->dat_reg, p->clip, g, &gnorm));
    const double lr = tess_sched_lr(&p->sched, k);
    tess_adamw_step(p->dat_opt, (float)lr);
    const double mean = tot[0] / tot[1];
    double row[4] = {mean, mean / log(2.0), gnorm, lr};
    if ((k + 1) % 10 == 0 || k + 1 == p->dat_steps) TESS_CHECK(tess_run_metrics_row(run, p->dat_csv, row));
    *out = (tess_run_step_out){.done = k + 1 == p->dat_steps, .loss = mean,
                               .items = (double)p->dat_batch, .position = NAN,
                               .data_cursor = out->data_cursor};
    return TESS_OK;
}

tess_status calm_pretrain_step(tess_run *run, calm_pretrain *p, int64_t step,
                               tess_run_step_out *out) {
    if (step < p->tok_steps) TESS_CHECK(tok_step(run, p, step, out));
    else TESS_CHECK(dat_step(run, p, step, out));
    return TESS_OK;
}

/* ---- baseline: per-neuron ridge AR in NLinear form ---------------------------------------- */

/* LAPACK: solve A X = B for symmetric positive definite A (column-major). */
void dposv_(const char *uplo, const int *n, const int *nrhs, double *a, const int *lda, double *b,
            const int *ldb, int *info);

enum { RIDGE_LAGS = 16 };
static const double RIDGE_LAMBDA = 10.0;

/* For every neuron of every session: W (RIDGE_LAGS, H) minimising over the training frames
 * sum ||(y - x_t) - W^T (f - x_t)||^2 + lambda ||W||^2, f = the last RIDGE_LAGS frames up to t,
 * y = the H frames after t (the last context frame subtracted from inputs and targets, so the
 * shrinkage falls back on copy-last). w: (units, RIDGE_LAGS, H). */
static tess_status ridge_fit(const calm_pretrain *p, int64_t H, double *w) {
    const int lags = RIDGE_LAGS, nrhs = (int)H;
    double *A = malloc(sizeof(double) * lags * lags), *f = malloc(sizeof(double) * lags);
    TESS_REQUIRE(A && f, TESS_ERR_MEM, "out of memory for the ridge baseline");
    tess_status st = TESS_OK;
    for (int64_t k = 0; k < p->nsess && st == TESS_OK; k++) {
        const calm_session *s = &p->sess[k];
        for (int64_t n = 0; n < s->N && st == TESS_OK; n++) {
            double *B = w + (s->unit0 + n) * lags * H; /* column-major (lags, H) */
            memset(A, 0, sizeof(double) * lags * lags);
            memset(B, 0, sizeof(double) * lags * H);
            for (int64_t t = lags - 1; t + H < s->train_T; t++) {
                const double last = s->x[t * s->N + n];
                for (int i = 0; i < lags; i++) f[i] = s->x[(t - lags + 1 + i) * s->N + n] - last;
                for (int i = 0; i < lags; i++)
                    for (int j = 0; j < lags; j++) A[j * lags + i] += f[i] * f[j];
                for (int64_t h = 0; h < H; h++) {
                    const double y = s->x[(t + 1 + h) * s->N + n] - last;
                    for (int i = 0; i < lags; i++) B[h * lags + i] += f[i] * y;
                }
            }
            for (int i = 0; i < lags; i++) A[i * lags + i] += RIDGE_LAMBDA;
            int info = 0;
            dposv_("L", &lags, &nrhs, A, &lags, B, &lags, &info);
            if (info != 0)
                st = tess_error_push(TESS_ERR_INTERNAL, __FILE__, __LINE__, __func__,
                                     "ridge baseline: dposv failed (info %d) for '%s' neuron %lld",
                                     info, s->name, (long long)n);
        }
    }
    free(A);
    free(f);
    return st;
}

/* ---- forecasting on the held-out tail ------------------------------------------------------ */

tess_status calm_pretrain_finish(tess_run *run, calm_pretrain *p) {
    const tess_group *g = tess_run_group(run);
    const int64_t N = p->datc.max_N, M = p->tokc.M, P = p->tokc.P, Lw = M * P, K = p->tokc.K;
    const int64_t Mc = M - p->horizon, H = p->horizon * P;
    /* per horizon frame: model, anchored model, ridge AR, copy-last squared errors; the count */
    double *acc = calloc((size_t)(4 * H + 1), sizeof(double));
    double *wr = malloc(sizeof(double) * (size_t)(p->units * RIDGE_LAGS * H));
    if (!acc || !wr) free(acc), free(wr);
    TESS_REQUIRE(acc && wr, TESS_ERR_MEM, "out of memory");
    tess_status fit = ridge_fit(p, H, wr);
    if (fit != TESS_OK) free(acc), free(wr);
    TESS_CHECK(fit);
    int64_t lo = 0, hi = 0;
    tess_par_block_range(p->ntest, g->size, g->rank, &lo, &hi); /* test windows split by rank */
    for (int64_t w0 = lo; w0 < hi; w0 += p->eval_b) {
        const int64_t B = hi - w0 < p->eval_b ? hi - w0 : p->eval_b;
        for (int64_t b = 0; b < B; b++) window_tokens(p, &p->test_win[w0 + b], b, false, 0, 0);
        /* argmax rollout: patches Mc..M-1 from the logits one patch earlier (causal: the
         * horizon's true tokens never reach the logits read) */
        for (int64_t m = Mc; m < M; m++) {
            int64_t pairs;
            calm_dat_forward(p->dat, p->tokens, p->unit, p->sid, p->count, B, &pairs);
            const float *lg = calm_dat_logits(p->dat);
            for (int64_t b = 0; b < B; b++)
                for (int64_t n = 0; n < p->count[b]; n++) {
                    const float *row = lg + (((b * N + n) * M) + m - 1) * K;
                    int32_t best = 0;
                    for (int64_t v = 1; v < K; v++) best = row[v] > row[best] ? (int32_t)v : best;
                    p->tokens[(b * N + n) * M + m] = best;
                }
        }
        for (int64_t b = 0; b < B; b++) {
            const calm_window *w = &p->test_win[w0 + b];
            const calm_session *s = &p->sess[w->session];
            const int64_t count = p->count[b];
            for (int64_t n = 0; n < count; n++)
                memcpy(p->ids + n * M, p->tokens + (b * N + n) * M, (size_t)M * sizeof(int32_t));
            const float *pred = calm_tok_decode(p->tok, p->ids, count);
            for (int64_t n = 0; n < count; n++) {
                const float last = s->x[(w->t0 + Mc * P - 1) * s->N + n];
                /* anchored: the decoded change since the last context frame, added to it */
                const float base = pred[n * Lw + Mc * P - 1];
                const int64_t u = s->unit0 + n, tl = w->t0 + Mc * P - 1; /* last context frame */
                for (int64_t h = 0; h < H; h++) {
                    const float truth = s->x[(tl + 1 + h) * s->N + n];
                    double ridge = last;
                    for (int i = 0; i < RIDGE_LAGS; i++)
                        ridge += wr[(u * H + h) * RIDGE_LAGS + i] *
                                 (s->x[(tl - RIDGE_LAGS + 1 + i) * s->N + n] - last);
                    acc[h] += pow(pred[n * Lw + Mc * P + h] - truth, 2);
                    acc[H + h] += pow(last + (pred[n * Lw + Mc * P + h] - base) - truth, 2);
                    acc[2 * H + h] += pow(ridge - truth, 2);
                    acc[3 * H + h] += pow(last - truth, 2);
                }
                acc[4 * H] += 1.0;
            }
        }
    }
    tess_status st = tess_par_allreduce_f64(g, acc, 4 * H + 1, TESS_PAR_SUM);
    double sm = 0.0, sa = 0.0, sr = 0.0, sc = 0.0;
    for (int64_t h = 0; st == TESS_OK && h < H; h++) {
        double n = acc[4 * H], mm = acc[h] / n, ma = acc[H + h] / n, mr = acc[2 * H + h] / n,
               mc = acc[3 * H + h] / n;
        sm += mm / (double)H, sa += ma / (double)H, sr += mr / (double)H, sc += mc / (double)H;
        double row[8] = {(double)(h + 1), mm, ma, mr, mc, 1.0 - mm / mc, 1.0 - ma / mc,
                         1.0 - mr / mc};
        st = tess_run_metrics_row(run, p->fc_csv, row);
    }
    free(acc);
    free(wr);
    TESS_CHECK(st);
    tess_log_info("forecast (held-out tail, %lld windows, %lld frames ahead): MSE model %.4f, "
                  "anchored %.4f, ridge AR %.4f, copy-last %.4f; prediction score %.4f, "
                  "anchored %.4f, ridge AR %.4f",
                  (long long)p->ntest, (long long)H, sm, sa, sr, sc, 1.0 - sm / sc, 1.0 - sa / sc,
                  1.0 - sr / sc);
    return TESS_OK;
}

void calm_pretrain_free(calm_pretrain *p) {
    tess_gradsync_destroy(&p->tok_sync);
    tess_gradsync_destroy(&p->dat_sync);
    tess_adamw_destroy(&p->tok_opt);
    tess_adamw_destroy(&p->dat_opt);
    calm_tok_destroy(&p->tok);
    calm_dat_destroy(&p->dat);
    tess_registry_destroy(&p->tok_reg);
    tess_registry_destroy(&p->dat_reg);
    for (int64_t k = 0; p->sess && k < p->nsess; k++) free(p->sess[k].x);
    free(p->sess), free(p->train_win), free(p->test_win), free(p->x), free(p->ids);
    free(p->tokens), free(p->unit), free(p->sid), free(p->count), free(p->perm);
    *p = (calm_pretrain){0};
}

/* pretrain.c - the calm app's pretrain mode (docs/calm.md): recordings or simulated sessions
 * (sim.h) in memory, split into training and test spans (split.h: tail, block, animal),
 * z-scored with training-frame statistics, windows of M patches of P frames on the patch grid;
 * stage 1 trains the tokenizer (tok.h) on single-neuron windows, stage 2 the dual-axis
 * transformer (dat.h) on the frozen tokenizer's ids (optionally keeping the best-validated
 * parameters, train.val_every); at the end, forecasting of the test windows against copy-last,
 * the context mean and the fitted baselines (ar.h, var.h, armlp.h).
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

#include "ar.h"            /* calm_ar_* */
#include "armlp.h"         /* calm_armlp_* */
#include "var.h"           /* calm_var_* */
#include "calm.h"
#include "core/log.h"     /* tess_log_info */
#include "core/rng.h"     /* tess_rng_* */
#include "io/h5.h"        /* tess_h5_* */
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
    TESS_OPT_ENUM("quantizer", "gumbel", calm_quant_names,
                  "gumbel (Gumbel-softmax, hard straight-through at the end) or vq (nearest code, "
                  "commitment 0.25, EMA codebook)"),
    TESS_OPT_REAL("ema_decay", 0.99, 0.0, 0.999999, "vq: decay of the codebook's EMA"),
    TESS_OPT_INT("restart", 1000, 0, 10000000,
                 "restart a code unassigned for this many steps at an encoder output (0: never)"),
};
const int64_t calm_tok_nopts = sizeof calm_tok_opts / sizeof calm_tok_opts[0];

/* model.preset: custom (the size options as given) or the spec's tiny / base sizes. */
typedef enum { CALM_PRESET_CUSTOM = 0, CALM_PRESET_TINY, CALM_PRESET_BASE, CALM_PRESET_COUNT } calm_preset;
static const tess_opt_enum calm_preset_names[] = {
    {"custom", CALM_PRESET_CUSTOM}, {"tiny", CALM_PRESET_TINY}, {"base", CALM_PRESET_BASE}};
TESS_OPT_ENUM_TABLE_CHECK(calm_preset_names, CALM_PRESET_COUNT);

/* The sizes a preset sets (the spec's table: tokenizer c 64, d_t 128, n_t 2, 4 heads, D_c 32;
 * tiny K 256, M 16, DAT d 64, 2 layers, 4 heads, FFN 256, N_max 64; base K 512, M 32, d 256,
 * 6 layers, 8 heads, FFN 1024, N_max 256). */
static const struct {
    const char *key;
    int64_t tiny, base;
} preset_sizes[] = {
    {"tok.patches", 16, 32},     {"tok.channels", 64, 64},  {"tok.width", 128, 128},
    {"tok.layers", 2, 2},        {"tok.heads", 4, 4},       {"tok.code_dim", 32, 32},
    {"tok.codes", 256, 512},     {"model.channels", 64, 256}, {"model.layers", 2, 6},
    {"model.heads", 4, 8},       {"model.ffn", 256, 1024},  {"model.max_neurons", 64, 256},
};

const tess_opt calm_model_opts[] = {
    TESS_OPT_ENUM("preset", "custom", calm_preset_names,
                  "custom: the size options as given; tiny / base: the spec's sizes (tok.patches, "
                  "channels, width, layers, heads, code_dim, codes; model.channels, layers, heads, "
                  "ffn, max_neurons), a size option may then only be left at its default"),
    TESS_OPT_INT("channels", 64, 2, 8192, "DAT width d"),
    TESS_OPT_INT("layers", 2, 1, 64, "DAT layers"),
    TESS_OPT_INT("heads", 4, 1, 64, "attention heads"),
    TESS_OPT_INT("ffn", 256, 1, 65536, "feed-forward hidden width"),
    TESS_OPT_INT("max_neurons", 64, 1, 1 << 16, "neurons per window N_max (more are subsampled)"),
    TESS_OPT_ENUM("head", "both", calm_head_names,
                  "next-step loss: token (CE), patch (next-patch MSE, NLinear form) or both"),
    TESS_OPT_BOOL("patch_input", true, "add a linear map of each patch's frames to its embedding"),
    TESS_OPT_INT("ahead", 4, 1, 255, "patches the patch head predicts from each position"),
    TESS_OPT_INT("skip", 4, 0, 256, "patches the patch head's linear skip reads (0: none)"),
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
    TESS_OPT_RESUMABLE(INT, "steps", 300, 1, 10000000, "stage 2 (DAT) steps"),
    TESS_OPT_INT("batch", 8, 1, 1 << 20, "GLOBAL windows per step; a multiple of the ranks"),
    TESS_OPT_REAL("lr", 1e-3, 1e-7, 1.0, "AdamW peak learning rate (cosine after warm-up)"),
    TESS_OPT_INT("warmup", 20, 0, 1000000, "warm-up steps"),
    TESS_OPT_REAL("clip", 1.0, 0.0, 1e6, "gradient-norm clip (0: none)"),
    TESS_OPT_REAL("weight_decay", 0.05, 0.0, 1.0, "AdamW decoupled weight decay"),
    TESS_OPT_REAL("train_fraction", 0.7, 0.1, 0.95, "tail split: first fraction of each session trains"),
    TESS_OPT_INT("horizon", 4, 1, 255, "forecast horizon in patches (context = patches - horizon)"),
    TESS_OPT_ENUM("split", "tail", calm_split_names,
                  "tail: first train_fraction of each session trains; block: of each block; "
                  "animal: leave train.test_animal out"),
    TESS_OPT_INT("block", 500, 2, 1 << 30, "block split: frames per block"),
    TESS_OPT_INT("test_animal", -1, -1, 1 << 30,
                 "animal split: the held-out animal (-1: the last; a recording file is an animal)"),
    TESS_OPT_INT("mlp_steps", 2000, 1, 10000000, "AdamW steps of the MLP forecasting baseline"),
    TESS_OPT_INT("val_every", 0, 0, 10000000,
                 "DAT validation period (0: none): the last 20 % of each training span is held "
                 "out of DAT training, the loss on its windows measured every val_every steps, "
                 "and the best-validated parameters forecast"),
};
const int64_t calm_train_nopts = sizeof calm_train_opts / sizeof calm_train_opts[0];

enum { AR_LAGS = 16 };              /* lags of the AR baselines (4 patches at P = 4) */
static const double VAL_FRACTION = 0.2; /* validation slice: the end of the training part */
enum { MLP_HIDDEN = 64, MLP_BATCH = 256 }; /* the MLP baseline (armlp.h) */
/* The size option `key` ("tok.codes"): its value, or under a preset the preset's size.
 * TESS_ERR_CONFIG naming the option when a preset is chosen and the option is set to neither its
 * default nor the preset's size. */
static tess_status sized(const tess_config *cfg, const char *key, int64_t *v) {
    *v = tess_config_int(cfg, key);
    const calm_preset preset = (calm_preset)tess_config_enum(cfg, "model.preset");
    if (preset == CALM_PRESET_CUSTOM) return TESS_OK;
    const tess_opt *opts = strncmp(key, "tok.", 4) == 0 ? calm_tok_opts : calm_model_opts;
    const int64_t nopts = opts == calm_tok_opts ? calm_tok_nopts : calm_model_nopts;
    const char *name = strchr(key, '.') + 1;
    int64_t def = 0, size = 0;
    for (int64_t i = 0; i < nopts; i++)
        if (strcmp(opts[i].key, name) == 0) def = opts[i].int_def;
    for (size_t i = 0; i < sizeof preset_sizes / sizeof preset_sizes[0]; i++)
        if (strcmp(preset_sizes[i].key, key) == 0)
            size = preset == CALM_PRESET_TINY ? preset_sizes[i].tiny : preset_sizes[i].base;
    TESS_ASSERT(size > 0);
    TESS_REQUIRE(*v == def || *v == size, TESS_ERR_CONFIG,
                 "%s = %lld conflicts with model.preset = %s (which sets %lld); leave it at its "
                 "default or use model.preset = custom",
                 key, (long long)*v, calm_preset_names[preset].name, (long long)size);
    *v = size;
    return TESS_OK;
}

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

/* The decode mode's behaviour of a simulated session: d->beh (T, D) from the simulator's
 * velocity (cm/s) and run state (running: the frame is mostly in the run state, 0/1). */
static tess_status sim_behavior(const calm_pretrain *p, calm_session *d, const calm_sim_session *s) {
    const int64_t D = p->dec.D;
    d->beh = malloc((size_t)(d->T * D) * sizeof(float));
    TESS_REQUIRE(d->beh, TESS_ERR_MEM, "out of memory for the behaviour of %s", d->name);
    for (int64_t k = 0; k < D; k++) {
        const bool vel = strcmp(p->dec.names[k], "velocity") == 0;
        TESS_REQUIRE(vel || strcmp(p->dec.names[k], "running") == 0, TESS_ERR_CONFIG,
                     "decode.targets: '%s' is not a behaviour of the simulator (velocity, running)",
                     p->dec.names[k]);
        for (int64_t t = 0; t < d->T; t++)
            d->beh[t * D + k] = vel ? s->velocity[t] : (float)(s->running[t] > 0.5f);
    }
    return TESS_OK;
}

/* Sessions from recordings (data.files) or from the simulator: p->sess[k].x (T, N) raw, and in
 * the decode mode p->sess[k].beh (T, decode targets). */
static tess_status read_sessions(calm_pretrain *p, const char *files, const char *trace_name) {
    if (!files[0]) {
        const calm_sim_config *c = &p->simcfg;
        p->nsess = c->animals * c->sessions;
        p->sess = calloc((size_t)p->nsess, sizeof *p->sess);
        TESS_REQUIRE(p->sess, TESS_ERR_MEM, "out of memory for %lld sessions", (long long)p->nsess);
        for (int64_t k = 0; k < p->nsess; k++) {
            calm_sim_session s;
            TESS_CHECK(calm_sim_generate(&s, c, k / c->sessions, k % c->sessions));
            p->sess[k] = (calm_session){.T = s.frames, .N = s.neurons, .x = s.dff,
                                        .animal = k / c->sessions};
            snprintf(p->sess[k].name, sizeof p->sess[k].name, "sim-a%03lld-s%02lld",
                     (long long)(k / c->sessions), (long long)(k % c->sessions));
            s.dff = NULL; /* keep the observed dF/F; free the rest */
            tess_status st = p->dec.on ? sim_behavior(p, &p->sess[k], &s) : TESS_OK;
            calm_sim_session_free(&s);
            TESS_CHECK(st);
        }
        return TESS_OK;
    }
    char behavior[CALM_DEC_MAX_TARGETS * 48] = ""; /* the decode mode's behaviour datasets */
    for (int64_t k = 0; k < p->dec.D; k++)
        snprintf(behavior + strlen(behavior), sizeof behavior - strlen(behavior), "%s%s",
                 k ? "," : "", p->dec.names[k]);
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
        st = tess_traces_import_flavell(&s, paths[k], trace_name, p->dec.on ? behavior : "");
        if (st != TESS_OK) break;
        p->sess[k] = (calm_session){.T = s.frames, .N = s.neurons, .x = s.traces, .beh = s.behavior,
                                    .animal = k};
        snprintf(p->sess[k].name, sizeof p->sess[k].name, "%s", paths[k]);
    }
    for (int64_t k = 0; k < n; k++) free(paths[k]);
    free(paths);
    TESS_REQUIRE(st == TESS_OK, st, "reading data.files");
    return TESS_OK;
}

/* The split (train.split, train.block, train.test_animal) of the sessions, z-scoring with
 * their training frames, the windows. */
static tess_status load_sessions(calm_pretrain *p, const tess_config *cfg) {
    TESS_CHECK(read_sessions(p, tess_config_string(cfg, "data.files"),
                             tess_config_string(cfg, "data.trace")));
    const calm_split split = (calm_split)tess_config_enum(cfg, "train.split");
    p->split_name = calm_split_names[split].name;
    const int64_t block = tess_config_int(cfg, "train.block");
    const int64_t animals = p->sess[p->nsess - 1].animal + 1;
    int64_t test_animal = tess_config_int(cfg, "train.test_animal");
    test_animal = test_animal < 0 ? animals - 1 : test_animal;
    TESS_REQUIRE(split != CALM_SPLIT_ANIMAL || (test_animal < animals && animals >= 2),
                 TESS_ERR_CONFIG,
                 "train.test_animal = %lld must name one of the %lld animals (0..%lld), and the "
                 "animal split needs at least 2",
                 (long long)test_animal, (long long)animals, (long long)(animals - 1));
    const int64_t Lwin = p->tokc.M * p->tokc.P;
    int64_t unit = 0;
    for (int64_t k = 0; k < p->nsess; k++) {
        calm_session *d = &p->sess[k];
        d->unit0 = unit;
        unit += d->N;
        TESS_CHECK(calm_split_session(d, split, p->train_fraction, block, test_animal));
        for (int64_t i = 0; i < d->nspans; i++) {
            const calm_span *sp = &d->spans[i];
            TESS_REQUIRE(sp->t1 - sp->t0 >= Lwin || (sp->train && d->held_out), TESS_ERR_DATA,
                         "'%s': %lld frames, fewer than one window of %lld frames (tok.patches x "
                         "tok.patch) in its %s part (frames %lld-%lld; train.split = %s)",
                         d->name, (long long)d->T, (long long)Lwin, sp->train ? "training" : "test",
                         (long long)sp->t0, (long long)sp->t1, calm_split_names[split].name);
        }
        /* z-score each neuron with its training frames, clip to [-5, 15] */
        const double nt = (double)calm_split_train_frames(d);
        for (int64_t n = 0; n < d->N; n++) {
            double m = 0.0, v = 0.0;
            for (int64_t i = 0; i < d->nspans; i++)
                for (int64_t t = d->spans[i].t0; d->spans[i].train && t < d->spans[i].t1; t++)
                    m += d->x[t * d->N + n];
            m /= nt;
            for (int64_t i = 0; i < d->nspans; i++)
                for (int64_t t = d->spans[i].t0; d->spans[i].train && t < d->spans[i].t1; t++)
                    v += pow(d->x[t * d->N + n] - m, 2);
            double sd = sqrt(v / nt) + 1e-6;
            for (int64_t t = 0; t < d->T; t++) {
                double z = (d->x[t * d->N + n] - m) / sd;
                d->x[t * d->N + n] = (float)(z < -5.0 ? -5.0 : z > 15.0 ? 15.0 : z);
            }
        }
    }
    p->units = unit;
    /* windows on the patch grid inside the training / test spans */
    const int64_t P = p->tokc.P;
    /* validation windows for train.val_every or decode.val_every */
    const bool val = p->val_every > 0 || (p->dec.on && p->dec.val_every > 0);
    const double vf = val ? VAL_FRACTION : 0.0;
    calm_split_windows(p->sess, p->nsess, Lwin, P, vf, NULL, &p->ntrain, NULL, &p->nval, NULL,
                       &p->ntest);
    TESS_REQUIRE(p->ntrain > 0 && p->ntest > 0 && (!val || p->nval > 0), TESS_ERR_CONFIG,
                 "no complete window of %lld frames in the training%s or test spans of the "
                 "sessions (train.split = %s)",
                 (long long)Lwin, val ? ", validation" : "", calm_split_names[split].name);
    p->train_win = malloc((size_t)p->ntrain * sizeof *p->train_win);
    p->test_win = malloc((size_t)p->ntest * sizeof *p->test_win);
    p->val_win = malloc((size_t)(p->nval + 1) * sizeof *p->val_win);
    TESS_REQUIRE(p->train_win && p->test_win && p->val_win, TESS_ERR_MEM, "out of memory for windows");
    calm_split_windows(p->sess, p->nsess, Lwin, P, vf, p->train_win, &p->ntrain, p->val_win,
                       &p->nval, p->test_win, &p->ntest);
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
    enum { NSIZES = sizeof preset_sizes / sizeof preset_sizes[0] };
    int64_t sz[NSIZES]; /* the sizes of preset_sizes, in its order */
    for (int i = 0; i < NSIZES; i++) TESS_CHECK(sized(cfg, preset_sizes[i].key, &sz[i]));
    p->tokc = (calm_tok_config){.P = tess_config_int(cfg, "tok.patch"), .M = sz[0], .c = sz[1],
                                .dt = sz[2], .nt = sz[3], .heads = sz[4], .Dc = sz[5], .K = sz[6],
                                .tau_cos = 0.1f, .lambda_d = 0.5f, .lambda_orth = 0.1f,
                                .lambda_h = 0.01f,
                                .quant = (calm_quant)tess_config_enum(cfg, "tok.quantizer"),
                                .beta = 0.25f,
                                .ema_decay = (float)tess_config_real(cfg, "tok.ema_decay")};
    p->tok_restart = tess_config_int(cfg, "tok.restart");
    p->tok_steps = tess_config_int(cfg, "tok.steps");
    p->tok_batch = tess_config_int(cfg, "tok.batch");
    p->tok_lr = tess_config_real(cfg, "tok.lr");
    p->dat_steps = tess_config_int(cfg, "train.steps");
    p->dat_batch = tess_config_int(cfg, "train.batch");
    p->clip = tess_config_real(cfg, "train.clip");
    p->weight_decay = tess_config_real(cfg, "train.weight_decay");
    p->train_fraction = tess_config_real(cfg, "train.train_fraction");
    p->horizon = tess_config_int(cfg, "train.horizon");
    p->mlp_steps = tess_config_int(cfg, "train.mlp_steps");
    p->val_every = tess_config_int(cfg, "train.val_every");
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
    p->eval_b = p->dat_b < 4 ? p->dat_b : 4; /* forecast windows per forward (memory: base) */
    if (p->dec.on) {
        TESS_CHECK(calm_decode_config(run, p));
        p->eval_b = p->dec.b > p->eval_b ? p->dec.b : p->eval_b; /* the head's batch slots */
    }
    TESS_CHECK(calm_adapt_config(run, p));
    p->eval_b = p->adapt.b > p->eval_b ? p->adapt.b : p->eval_b; /* the stage's batch slots */
    TESS_CHECK(load_sessions(p, cfg));
    if (p->adapt.steps > 0) TESS_CHECK(calm_adapt_windows(p));
    p->datc = (calm_dat_config){.K = p->tokc.K, .d = sz[7], .layers = sz[8], .heads = sz[9],
                                .ffn = sz[10], .units = p->units, .sessions = p->nsess,
                                .max_N = sz[11],
                                .M = p->tokc.M, .P = p->tokc.P,
                                .patch_input = tess_config_bool(cfg, "model.patch_input"),
                                .ahead = tess_config_int(cfg, "model.ahead"),
                                .skip = tess_config_int(cfg, "model.skip"),
                                .head = (calm_head)tess_config_enum(cfg, "model.head")};
    TESS_CHECK(calm_dat_check(&p->datc, p->dat_b));
    TESS_CHECK(calm_ar_check(p->sess, p->nsess, AR_LAGS, p->horizon * p->tokc.P, VAL_FRACTION));
    if (p->dec.on && p->dec.regime == CALM_REGIME_SCRATCH) p->dat_steps = 0; /* no pretraining */
    const int64_t total = p->tok_steps + p->dat_steps + (p->dec.on ? p->dec.steps : 0) + p->adapt.steps;
    tess_run_set_total(run, (double)total, total);
    tess_run_local_from_here(run);

    const int64_t N = p->datc.max_N, M = p->tokc.M, Lw = M * p->tokc.P;
    p->max_traces = N; /* the tokenizer encodes / decodes one window's neurons at a time */
    TESS_CHECK(make_models(p, g, tess_run_seed(run)));
    const int64_t Bmax = p->dat_b > p->eval_b ? p->dat_b : p->eval_b;
    const int64_t traces = p->tok_b > p->max_traces ? p->tok_b : p->max_traces;
    p->x = malloc((size_t)(traces * Lw) * sizeof(float));
    p->ids = malloc((size_t)(traces * M) * sizeof(int32_t));
    p->tokens = malloc((size_t)(Bmax * N * M) * sizeof(int32_t));
    p->frames = malloc((size_t)(Bmax * N * Lw) * sizeof(float));
    p->unit = malloc((size_t)(Bmax * N) * sizeof(int32_t));
    p->sid = malloc((size_t)Bmax * sizeof(int32_t));
    p->count = malloc((size_t)Bmax * sizeof(int32_t));
    p->perm = malloc((size_t)(p->units + 1) * sizeof(int64_t));
    TESS_REQUIRE(p->x && p->ids && p->tokens && p->frames && p->unit && p->sid && p->count && p->perm,
                 TESS_ERR_MEM, "out of memory for the batch buffers");

    tess_state *st = tess_run_state(run);
    TESS_CHECK(tess_state_add_registry(st, "tok/params", p->tok_reg, false));
    TESS_CHECK(tess_adamw_describe(p->tok_opt, st, "tok/optim"));
    TESS_CHECK(calm_tok_describe(p->tok, st, "tok/codes"));
    TESS_CHECK(tess_state_add_registry(st, "dat/params", p->dat_reg, false));
    TESS_CHECK(tess_adamw_describe(p->dat_opt, st, "dat/optim"));
    /* each stage's optimizer takes at most one update per driver step */
    TESS_CHECK(tess_run_bound_counter(run, "tok/optim/step_count", 1));
    TESS_CHECK(tess_run_bound_counter(run, "dat/optim/step_count", 1));
    p->best_loss = INFINITY;
    if (p->val_every > 0) { /* the best-validated DAT parameters */
        TESS_CHECK(tess_registry_alloc_state(p->dat_reg, &p->best));
        TESS_CHECK(tess_state_add_like(st, "dat/best", p->dat_reg, p->best, false));
        TESS_CHECK(tess_state_add_f64(st, "dat/best_loss", &p->best_loss));
        TESS_CHECK(tess_state_add_i64(st, "dat/best_step", &p->best_step));
    }
    if (p->adapt.steps > 0) TESS_CHECK(calm_adapt_setup(run, p));
    static const char *const tcols[] = {"tok_loss",       "tok_mse",    "perplexity",
                                        "code_perplexity", "codes_used", "restarts"};
    TESS_CHECK(tess_run_metrics(run, "tokenizer", tcols, 6, true, &p->tok_csv));
    static const char *const dcols[] = {"ce", "bits_per_token", "patch_mse", "grad_norm", "lr"};
    TESS_CHECK(tess_run_metrics(run, "metrics", dcols, 5, true, &p->dat_csv));
    static const char *const vcols[] = {"val_ce", "val_patch_mse", "val_loss", "best_val_loss"};
    if (p->val_every > 0) TESS_CHECK(tess_run_metrics(run, "validation", vcols, 4, true, &p->val_csv));
    static const char *const fcols[] = {
        "horizon_frame", "mse_model",  "mse_copy_last", "mse_context_mean", "mse_ridge_ar",
        "mse_pooled_ar", "score",      "score_context_mean", "score_ridge_ar", "score_pooled_ar",
        "mse_pop_var",   "score_pop_var", "mse_mlp", "score_mlp", "mse_zero_shot", "score_zero_shot"};
    /* with the adaptation stage the model's columns are the adapted DAT's, the zero-shot's last */
    const bool adapt = p->adapt.steps > 0;
    TESS_CHECK(tess_run_metrics(run, "forecast", fcols, adapt ? 16 : 14, false, &p->fc_csv));
    static const char *const fplot[] = {"mse_model",     "mse_copy_last", "mse_context_mean",
                                        "mse_ridge_ar",  "mse_pooled_ar", "mse_pop_var",
                                        "mse_mlp",       "mse_zero_shot"};
    const tess_plot_spec tok_plot = {.title = "calm: tokenizer loss", .xlabel = "step (updates)",
                                     .ycols = tcols, .ny = 2,
                                     .ylabel = "loss, reconstruction MSE (z-scored units^2)",
                                     .logy = true};
    static const char *const dplot[] = {"ce"}, *const dplot2[] = {"patch_mse"};
    static const char *const dtitles[] = {"next-token cross-entropy"},
                             *const dtitles2[] = {"next-patch MSE"};
    const tess_plot_spec dat_plot = {.title = "calm: dual-axis transformer training loss",
                                     .xlabel = "step (updates)", .ycols = dplot, .ny = 1,
                                     .ytitles = dtitles, .ylabel = "cross-entropy (nats/token)",
                                     .y2cols = dplot2, .ny2 = 1, .y2titles = dtitles2,
                                     .y2label = "next-patch MSE (z-scored units^2)"};
    static const char *const ftitles[] = {"CalM-lite", "copy-last", "context mean",
                                          "per-neuron ridge AR", "pooled ridge AR",
                                          "population ridge VAR", "MLP (NLinear)",
                                          "CalM-lite zero-shot"},
                             *const atitles[] = {"CalM-lite adapted", "copy-last", "context mean",
                                          "per-neuron ridge AR", "pooled ridge AR",
                                          "population ridge VAR", "MLP (NLinear)",
                                          "CalM-lite zero-shot"};
    const tess_plot_spec fc_plot = {.title = "calm: test MSE per forecast horizon",
                                    .xlabel = "horizon (frames ahead)", .ycols = fplot,
                                    .ny = adapt ? 8 : 7, .ytitles = adapt ? atitles : ftitles,
                                    .ylabel = "MSE (z-scored units^2)"};
    char subtitle[256];
    snprintf(subtitle, sizeof subtitle,
             "%lld sessions, %lld units, windows of %lld frames, %s split; K=%lld codes, DAT "
             "d=%lld L=%lld head %s; %d rank%s",
             (long long)p->nsess, (long long)p->units, (long long)Lw, p->split_name,
             (long long)p->tokc.K, (long long)p->datc.d, (long long)p->datc.layers,
             tess_config_string(cfg, "model.head"),
             g->size, g->size == 1 ? "" : "s");
    tess_run_plot_subtitle(run, subtitle);
    TESS_CHECK(tess_run_plot(run, p->tok_csv, "tokenizer.png", &tok_plot));
    TESS_CHECK(tess_run_plot(run, p->dat_csv, "dat_ce.png", &dat_plot));
    if (!p->dec.on) TESS_CHECK(tess_run_plot(run, p->fc_csv, "forecast.png", &fc_plot));
    if (!p->dec.on) TESS_CHECK(calm_analyses_setup(run, p));
    if (p->dec.on) TESS_CHECK(calm_decode_setup(run, p));
    tess_log_info("pretrain: %lld sessions, %lld units, %lld training / %lld test windows of "
                  "%lld frames",
                  (long long)p->nsess, (long long)p->units, (long long)p->ntrain,
                  (long long)p->ntest, (long long)Lw);
    int64_t emb = 0; /* the unit embeddings grow with the data, the rest is the model's size */
    for (int64_t i = 0; i < tess_registry_count(p->dat_reg); i++)
        if (strcmp(tess_registry_get(p->dat_reg, i)->name, "dat.unit_emb") == 0)
            emb = tess_registry_get(p->dat_reg, i)->global_count;
    tess_log_info("model (preset %s): tokenizer c %lld, d_t %lld x %lld layers, D_c %lld, K %lld, "
                  "%lld parameters; DAT d %lld x %lld layers, %lld heads, FFN %lld, N_max %lld x "
                  "M %lld, %lld parameters excluding the %lld of the unit embeddings",
                  tess_config_string(cfg, "model.preset"), (long long)p->tokc.c,
                  (long long)p->tokc.dt, (long long)p->tokc.nt, (long long)p->tokc.Dc,
                  (long long)p->tokc.K, (long long)tess_registry_global_total(p->tok_reg),
                  (long long)p->datc.d, (long long)p->datc.layers, (long long)p->datc.heads,
                  (long long)p->datc.ffn, (long long)p->datc.max_N, (long long)p->datc.M,
                  (long long)(tess_registry_global_total(p->dat_reg) - emb), (long long)emb);
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
    int64_t restarted = 0;
    TESS_CHECK(calm_tok_codes_update(p->tok, g, (tess_rng_key){(uint32_t)tess_run_seed(run), 10},
                                     step, first, p->tok_batch, p->tok_restart, &restarted));
    /* usage of the hard assignments of the global batch: perplexity exp(H(n / sum n)), share */
    const float *nk = calm_tok_code_counts(p->tok);
    double h = 0.0, used = 0.0, total = (double)(p->tok_batch * p->tokc.M);
    for (int64_t k = 0; k < p->tokc.K; k++)
        if (nk[k] > 0.0f) h -= nk[k] / total * log(nk[k] / total), used += 1.0;
    double row[6] = {l.total, l.mse, exp(log((double)p->tokc.K) - l.entropy), exp(h),
                     used / (double)p->tokc.K, (double)calm_tok_restarts(p->tok)};
    TESS_CHECK(tess_par_allreduce_f64(g, row, 2, TESS_PAR_MEAN));
    if ((step + 1) % 10 == 0 || step + 1 == p->tok_steps)
        TESS_CHECK(tess_run_metrics_row(run, p->tok_csv, row));
    *out = (tess_run_step_out){.loss = row[0], .items = (double)p->tok_batch, .position = NAN,
                               .data_cursor = out->data_cursor};
    return TESS_OK;
}

/* ---- token ids, cached once ---------------------------------------------------------------- */

/* FNV-1a of the tokenizer's parameters: names the tokenizer a cache file belongs to. */
static uint64_t tok_fingerprint(const calm_pretrain *p) {
    const unsigned char *b = (const unsigned char *)tess_registry_params(p->tok_reg);
    const size_t n = (size_t)tess_registry_local_total(p->tok_reg) * sizeof(float);
    uint64_t h = 1469598103934665603ull;
    for (size_t i = 0; i < n; i++) h = (h ^ b[i]) * 1099511628211ull;
    return h;
}

/* Window k of all windows: the training ones, the test ones, the validation ones, then the
 * adaptation stage's training and validation ones (adapt.c). */
static const calm_window *window_at(const calm_pretrain *p, int64_t k) {
    const int64_t a = p->ntrain + p->ntest + p->nval; /* the first adaptation window */
    return k < p->ntrain                ? &p->train_win[k]
           : k < p->ntrain + p->ntest  ? &p->test_win[k - p->ntrain]
           : k < a                     ? &p->val_win[k - p->ntrain - p->ntest]
           : k < a + p->adapt.ntrain   ? &p->adapt.win[k - a]
                                       : &p->adapt.val[k - a - p->adapt.ntrain];
}

/* The number of windows in the token cache. */
static int64_t windows(const calm_pretrain *p) {
    return p->ntrain + p->ntest + p->nval + p->adapt.ntrain + p->adapt.nval;
}

/* The cache file run.dir/tokens.h5 if it holds ids of this tokenizer for these windows (count
 * ids, attributes fingerprint and codes matching); false otherwise. Not collective. */
static bool cache_read(const calm_pretrain *p, const char *path, int64_t count, uint64_t fp) {
    tess_h5_quiet q;
    tess_h5_quiet_begin(&q);
    bool ok = false;
    hid_t f = H5Fopen(path, H5F_ACC_RDONLY, H5P_DEFAULT);
    if (f >= 0) {
        uint64_t ffp = 0;
        int64_t codes = 0;
        hid_t d = H5Dopen2(f, "ids", H5P_DEFAULT);
        hid_t sp = d >= 0 ? H5Dget_space(d) : -1;
        hsize_t n = 0;
        ok = sp >= 0 && H5Sget_simple_extent_ndims(sp) == 1 &&
             H5Sget_simple_extent_dims(sp, &n, NULL) == 1 && (int64_t)n == count &&
             tess_h5_attr_read_u64(f, "tokenizer_fingerprint", &ffp) == 0 && ffp == fp &&
             tess_h5_attr_read_i64(f, "codes", &codes) == 0 && codes == p->tokc.K &&
             H5Dread(d, H5T_NATIVE_UINT16, H5S_ALL, H5S_ALL, H5P_DEFAULT, p->cache) >= 0;
        if (sp >= 0) H5Sclose(sp);
        if (d >= 0) H5Dclose(d);
        H5Fclose(f);
    }
    tess_h5_quiet_end(&q);
    return ok;
}

/* Write the cache (count ids) to path: /ids (count) uint16, /window_offset (windows) int64 -
 * window k's ids are (neurons of its session, M) from window_offset[k], training windows first -
 * and the attributes codes, patches, tokenizer_fingerprint. Not collective. */
static tess_status cache_write(const calm_pretrain *p, const char *path, int64_t count, uint64_t fp) {
    tess_h5_quiet q;
    tess_h5_quiet_begin(&q);
    hid_t f = H5Fcreate(path, H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
    herr_t e = f >= 0 ? 0 : -1;
    const hsize_t n[2] = {(hsize_t)count, (hsize_t)windows(p)};
    const void *data[2] = {p->cache, p->win_off};
    const char *names[2] = {"ids", "window_offset"};
    const hid_t types[2] = {H5T_STD_U16LE, H5T_STD_I64LE}, mem[2] = {H5T_NATIVE_UINT16,
                                                                      H5T_NATIVE_INT64};
    for (int i = 0; i < 2 && e >= 0; i++) {
        hid_t sp = H5Screate_simple(1, &n[i], NULL);
        hid_t d = H5Dcreate2(f, names[i], types[i], sp, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
        e = d >= 0 ? H5Dwrite(d, mem[i], H5S_ALL, H5S_ALL, H5P_DEFAULT, data[i]) : -1;
        if (d >= 0) H5Dclose(d);
        H5Sclose(sp);
    }
    if (e >= 0) e = tess_h5_attr_write_u64(f, "tokenizer_fingerprint", fp);
    if (e >= 0) e = tess_h5_attr_write_i64(f, "codes", p->tokc.K);
    if (e >= 0) e = tess_h5_attr_write_i64(f, "patches", p->tokc.M);
    char reason[256] = "";
    if (e < 0) tess_h5_reason(reason, sizeof reason);
    if (f >= 0 && H5Fclose(f) < 0 && e >= 0) e = -1, tess_h5_reason(reason, sizeof reason);
    tess_h5_quiet_end(&q);
    TESS_REQUIRE(e >= 0, TESS_ERR_IO, "cannot write the token cache '%s': %s", path, reason);
    return TESS_OK;
}

/* The frozen tokenizer's ids of every window's every neuron, once (collective): read from
 * run.dir/tokens.h5 when it holds this tokenizer's ids, else encoded - windows split over the
 * ranks in blocks, each window's neurons in chunks of model.max_neurons (so the ids do not depend
 * on the rank count), gathered - and written by rank 0. Stage 2 and the evaluation read ids
 * from here instead of re-running the tokenizer. */
static tess_status cache_build(tess_run *run, calm_pretrain *p) {
    const tess_group *g = tess_run_group(run);
    const int64_t M = p->tokc.M, Lw = M * p->tokc.P, nwin = windows(p);
    p->win_off = malloc((size_t)(nwin + 1) * sizeof(int64_t));
    TESS_REQUIRE(p->win_off, TESS_ERR_MEM, "out of memory for the token cache");
    p->win_off[0] = 0;
    for (int64_t k = 0; k < nwin; k++)
        p->win_off[k + 1] = p->win_off[k] + p->sess[window_at(p, k)->session].N * M;
    const int64_t count = p->win_off[nwin];
    p->cache = malloc((size_t)count * sizeof(uint16_t));
    TESS_REQUIRE(p->cache, TESS_ERR_MEM, "out of memory for %lld cached token ids", (long long)count);
    char path[4200];
    snprintf(path, sizeof path, "%s/tokens.h5", tess_run_dir(run));
    const uint64_t fp = tok_fingerprint(p);
    int64_t all = cache_read(p, path, count, fp); /* every rank must hold it */
    TESS_CHECK(tess_par_allreduce_i64(g, &all, 1, TESS_PAR_MIN));
    if (all) {
        tess_log_info("token ids: %lld read from %s", (long long)count, path);
        return TESS_OK;
    }
    int64_t lo = 0, hi = 0;
    tess_par_block_range(nwin, g->size, g->rank, &lo, &hi);
    float *mine = malloc((size_t)(p->win_off[hi] - p->win_off[lo] + 1) * sizeof(float));
    float *every = malloc((size_t)count * sizeof(float));
    int64_t *rows = malloc((size_t)g->size * sizeof(int64_t));
    tess_status st = mine && every && rows ? TESS_OK : TESS_ERR_MEM;
    for (int64_t k = lo; st == TESS_OK && k < hi; k++) {
        const calm_window *w = window_at(p, k);
        const calm_session *s = &p->sess[w->session];
        for (int64_t n0 = 0; n0 < s->N; n0 += p->max_traces) {
            const int64_t c = s->N - n0 < p->max_traces ? s->N - n0 : p->max_traces;
            for (int64_t n = 0; n < c; n++) trace(s, n0 + n, w->t0, Lw, p->x + n * Lw);
            calm_tok_encode(p->tok, p->x, c, p->ids);
            for (int64_t i = 0; i < c * M; i++)
                mine[p->win_off[k] - p->win_off[lo] + n0 * M + i] = (float)p->ids[i];
        }
    }
    if (st == TESS_OK)
        st = tess_par_allgatherv(g, mine, p->win_off[hi] - p->win_off[lo], 1, every, count, rows);
    for (int64_t i = 0; st == TESS_OK && i < count; i++) p->cache[i] = (uint16_t)every[i];
    free(mine), free(every), free(rows);
    TESS_REQUIRE(st == TESS_OK, st, "encoding the token cache");
    if (g->rank == 0) st = cache_write(p, path, count, fp);
    TESS_CHECK(tess_par_agree(g, st));
    tess_log_info("token ids: %lld encoded once (%lld windows), written to %s", (long long)count,
                  (long long)nwin, path);
    return TESS_OK;
}

/* Window k's neurons (all, or N_max of them by a Philox permutation keyed by key_j) with their
 * cached token ids: fills slot b of tokens / frames / unit / sid / count. */
static void window_tokens(calm_pretrain *p, int64_t k, int64_t b, bool subsample, uint64_t key_j,
                          int64_t step) {
    const calm_window *w = window_at(p, k);
    const calm_session *s = &p->sess[w->session];
    const int64_t N = p->datc.max_N, M = p->tokc.M, Lw = M * p->tokc.P;
    const int64_t count = s->N < N ? s->N : N;
    for (int64_t n = 0; n < s->N; n++) p->perm[n] = n;
    if (subsample && s->N > N)
        tess_rng_permutation((tess_rng_key){(uint32_t)key_j, 9},
                             tess_rng_ctr(TESS_RNG_PURPOSE_DATA, (uint64_t)step), p->perm, s->N);
    for (int64_t n = 0; n < N; n++) {
        const int64_t src = p->perm[n < count ? n : 0]; /* padding repeats neuron 0 (masked) */
        p->unit[b * N + n] = (int32_t)(s->unit0 + src);
        for (int64_t m = 0; m < M; m++)
            p->tokens[(b * N + n) * M + m] = p->cache[p->win_off[k] + src * M + m];
        trace(s, src, w->t0, Lw, p->frames + (b * N + n) * Lw);
    }
    p->sid[b] = (int32_t)w->session;
    p->count[b] = (int32_t)count;
}

/* The DAT's mean CE and next-patch MSE per pair (v[0], v[1]) on every validation window, all
 * its neurons up to N_max, and the stopping criterion v[2]: the next-patch MSE when a patch head
 * forecasts (model.head patch or both), else the CE. Windows split over the ranks in blocks.
 * Collective. */
static tess_status validate(calm_pretrain *p, const tess_group *g, double *v) {
    return calm_pretrain_validate_span(p, g, p->ntrain + p->ntest, p->nval, v);
}

static tess_status dat_step(tess_run *run, calm_pretrain *p, int64_t step, tess_run_step_out *out) {
    const tess_group *g = tess_run_group(run);
    const int64_t k = step - p->tok_steps, first = g->rank * p->dat_b;
    if (!p->cache) TESS_CHECK(cache_build(run, p));
    for (int64_t i = 0; i < p->dat_b; i++) {
        int64_t j = first + i;
        uint64_t r = draw(run, step, 3, j);
        window_tokens(p, (int64_t)(r % (uint64_t)p->ntrain), i, true, r >> 32, step);
    }
    double tot[3], gnorm = 0.0;
    TESS_CHECK(calm_pretrain_dat_gradients(run, p, p->dat_b, tot, &gnorm));
    const double lr = tess_sched_lr(&p->sched, k);
    tess_adamw_step(p->dat_opt, (float)lr);
    const double ce = tot[0] / tot[2], mse = tot[1] / tot[2], mean = ce + mse;
    double row[5] = {ce, ce / log(2.0), mse, gnorm, lr};
    if ((k + 1) % 10 == 0 || k + 1 == p->dat_steps) TESS_CHECK(tess_run_metrics_row(run, p->dat_csv, row));
    if (p->val_every > 0 && ((k + 1) % p->val_every == 0 || k + 1 == p->dat_steps)) {
        double v[4] = {0.0};
        TESS_CHECK(validate(p, g, v));
        if (v[2] < p->best_loss) {
            p->best_loss = v[2], p->best_step = k + 1;
            memcpy(p->best, tess_registry_params(p->dat_reg),
                   sizeof(float) * (size_t)tess_registry_local_total(p->dat_reg));
        }
        v[3] = p->best_loss;
        TESS_CHECK(tess_run_metrics_row(run, p->val_csv, v));
    }
    *out = (tess_run_step_out){.done = k + 1 == p->dat_steps && !p->dec.on && p->adapt.steps == 0,
                               .loss = mean,

                               .items = (double)p->dat_batch, .position = NAN,
                               .data_cursor = out->data_cursor};
    return TESS_OK;
}

tess_status calm_pretrain_step(tess_run *run, calm_pretrain *p, int64_t step,
                               tess_run_step_out *out) {
    if (step < p->tok_steps) TESS_CHECK(tok_step(run, p, step, out));
    else if (step < p->tok_steps + p->dat_steps) TESS_CHECK(dat_step(run, p, step, out));
    else if (p->dec.on) TESS_CHECK(calm_decode_step(run, p, step, out));
    else TESS_CHECK(calm_adapt_step(run, p, step, out));
    return TESS_OK;
}

/* ---- forecasting on the held-out tail ------------------------------------------------------ */

/* Forecast the last `horizon` patches of the B windows in slots 0..B-1 (tokens, frames filled by
 * window_tokens) from their first Mc patches (A = model.ahead patches per DAT forward): afterwards frames (b, n, Mc P ..) of the real
 * neurons hold the forecast. Causality makes the true horizon frames and tokens invisible to
 * every output read (row m - 1 depends on patches <= m - 1 only).
 * Patch head: the predicted next patch is written into the frames, re-tokenized (the
 * tokenizer is causal, earlier ids do not change) and fed back. Token head only: argmax
 * rollout, decoded through the tokenizer, in NLinear form (the decoded change since the last
 * context frame added to the true last frame, which removes the tokenizer's offset). */
static void forecast(calm_pretrain *p, int64_t B, int64_t Mc) {
    const int64_t N = p->datc.max_N, M = p->tokc.M, P = p->tokc.P, Lw = M * P, K = p->tokc.K;
    const bool patch = p->datc.head != CALM_HEAD_TOKEN;
    const int64_t A = p->datc.ahead;
    int64_t pairs;
    for (int64_t m = Mc; m < M;) {
        /* patch head: the next min(A, M - m) patches from row m - 1; token head: one patch */
        const int64_t step = patch ? (M - m < A ? M - m : A) : 1;
        calm_dat_forward(p->dat, p->tokens, p->frames, p->unit, p->sid, p->count, B, &pairs);
        for (int64_t b = 0; b < B; b++) {
            for (int64_t n = 0; n < p->count[b]; n++) {
                const int64_t r = (b * N + n) * M + m - 1;
                if (patch) {
                    memcpy(p->frames + (b * N + n) * Lw + m * P,
                           calm_dat_patch_pred(p->dat) + r * A * P,
                           (size_t)(step * P) * sizeof(float));
                    continue;
                }
                const float *row = calm_dat_logits(p->dat) + r * K;
                int32_t best = 0;
                for (int64_t v = 1; v < K; v++) best = row[v] > row[best] ? (int32_t)v : best;
                p->tokens[r + 1] = best;
            }
            if (!patch) continue;
            calm_tok_encode(p->tok, p->frames + b * N * Lw, p->count[b], p->ids);
            for (int64_t n = 0; n < p->count[b]; n++)
                for (int64_t j = m; j < m + step; j++)
                    p->tokens[(b * N + n) * M + j] = p->ids[n * M + j];
        }
        m += step;
    }
    if (patch) return;
    for (int64_t b = 0; b < B; b++) {
        for (int64_t n = 0; n < p->count[b]; n++)
            memcpy(p->ids + n * M, p->tokens + (b * N + n) * M, (size_t)M * sizeof(int32_t));
        const float *dec = calm_tok_decode(p->tok, p->ids, p->count[b]);
        for (int64_t n = 0; n < p->count[b]; n++) {
            float *f = p->frames + (b * N + n) * Lw;
            const float last = f[Mc * P - 1], base = dec[n * Lw + Mc * P - 1];
            for (int64_t t = Mc * P; t < Lw; t++) f[t] = last + (dec[n * Lw + t] - base);
        }
    }
}

/* The population VAR's squared errors per horizon frame, added to err (H): per session with
 * test windows its VAR (var.h) fitted on the training spans and forecasting after the last
 * context frame of each of its test windows, scored on the first model.max_neurons neurons as
 * the model. Sessions are dealt round-robin over the ranks, each fitted by one rank (a 1 x 1
 * ScaLAPACK grid on the group `self`): a session's systems (a few hundred unknowns) are far
 * too small to gain from a distributed solve, whose latency dominated on 2 shared cores.
 * lambda (2): the smallest and largest penalty chosen (over all ranks). Collective on g. */
static tess_status var_errors(const calm_pretrain *p, const tess_group *g, int64_t Mc, int64_t H,
                              double *err, double *lambda) {
    int64_t *tl = malloc(sizeof(int64_t) * (size_t)p->ntest);
    tess_group *self = NULL;
    tess_status st = tl ? tess_group_create(MPI_COMM_SELF, "calm_var", &self) : TESS_ERR_MEM;
    for (int64_t k = 0, w = 0; st == TESS_OK && k < p->nsess; k++) {
        const calm_session *s = &p->sess[k];
        int64_t q = 0;
        for (; w < p->ntest && p->test_win[w].session == k; w++)
            tl[q++] = p->test_win[w].t0 + Mc * p->tokc.P - 1;
        if (q == 0 || k % g->size != g->rank) continue;
        double *pred = malloc(sizeof(double) * (size_t)(q * H * s->N));
        calm_var v;
        st = pred ? calm_var_fit(&v, s, AR_LAGS, H, VAL_FRACTION, CALM_VAR_AUTO, self) : TESS_ERR_MEM;
        if (st == TESS_OK) {
            st = calm_var_predict(&v, s, tl, q, pred);
            lambda[0] = fmin(lambda[0], v.lambda), lambda[1] = fmax(lambda[1], v.lambda);
            calm_var_free(&v);
        }
        const int64_t count = s->N < p->datc.max_N ? s->N : p->datc.max_N;
        for (int64_t r = 0; st == TESS_OK && r < q; r++)
            for (int64_t h = 0; h < H; h++)
                for (int64_t n = 0; n < count; n++)
                    err[h] += pow(pred[(r * H + h) * s->N + n] - s->x[(tl[r] + 1 + h) * s->N + n], 2);
        free(pred);
    }
    free(tl);
    tess_group_destroy(&self);
    st = tess_par_agree(g, st);
    double l[2] = {-lambda[0], lambda[1]};
    if (st == TESS_OK) st = tess_par_allreduce_f64(g, l, 2, TESS_PAR_MAX);
    lambda[0] = -l[0], lambda[1] = l[1];
    TESS_REQUIRE(st == TESS_OK, st, "the population VAR baseline");
    return TESS_OK;
}

tess_status calm_pretrain_finish(tess_run *run, calm_pretrain *p) {
    const tess_group *g = tess_run_group(run);
    const int64_t N = p->datc.max_N, M = p->tokc.M, P = p->tokc.P, Lw = M * P;
    const int64_t Mc = M - p->horizon, H = p->horizon * P;
    /* model, copy-last, context mean, ridge AR, pooled AR, population VAR, MLP; with the
     * adaptation stage the model is the adapted DAT and the eighth the zero-shot one */
    enum { NF = 8 };
    const bool adapt = p->adapt.steps > 0;
    const int NW = adapt ? NF : NF - 1; /* forecasters written */
    calm_ar ar;
    TESS_CHECK(calm_ar_fit(&ar, p->sess, p->nsess, p->units, AR_LAGS, H, VAL_FRACTION));
    calm_armlp mlp;
    const calm_armlp_config mc = {.lags = AR_LAGS, .H = H, .hidden = MLP_HIDDEN,
                                  .steps = p->mlp_steps, .batch = MLP_BATCH, .eval_every = 100,
                                  .lr = 1e-3, .seed = tess_run_seed(run)};
    tess_status fst = calm_armlp_fit(&mlp, p->sess, p->nsess, &mc, VAL_FRACTION, g);
    if (fst != TESS_OK) calm_ar_free(&ar);
    TESS_CHECK(fst);
    /* per forecaster and horizon frame the squared errors; the count */
    double *acc = calloc((size_t)(NF * H + 1), sizeof(double)), *pred = malloc(sizeof(double) * (size_t)H);
    if (!acc || !pred) free(acc), free(pred), calm_ar_free(&ar), calm_armlp_free(&mlp);
    TESS_REQUIRE(acc && pred, TESS_ERR_MEM, "out of memory");
    tess_status st = p->cache ? TESS_OK : cache_build(run, p);
    float *params = tess_registry_params(p->dat_reg), *final = NULL, *fc_params = NULL;
    const size_t bytes = sizeof(float) * (size_t)tess_registry_local_total(p->dat_reg);
    if (adapt && st == TESS_OK) { /* the adapted DAT forecasts: the stage's final parameters,
                                   * or its best-validated; the final ones restored at the end */
        final = malloc(bytes);
        st = final ? TESS_OK : TESS_ERR_MEM;
        if (final) memcpy(final, params, bytes);
        fc_params = p->adapt.val_every > 0 ? p->adapt.best : final;
        if (final && p->adapt.val_every > 0) {
            memcpy(params, fc_params, bytes);
            tess_log_info("adaptation: the embeddings of adaptation step %lld (validation loss "
                          "%.4f on %lld windows; step 0 = zero-shot) forecast",
                          (long long)p->adapt.best_step, p->adapt.best_loss,
                          (long long)p->adapt.nval);
        }
    } else if (p->val_every > 0 && p->best_step > 0) { /* forecast with the best-validated DAT */
        memcpy(tess_registry_params(p->dat_reg), p->best,
               sizeof(float) * (size_t)tess_registry_local_total(p->dat_reg));
        tess_log_info("validation: the DAT of step %lld (loss %.4f on %lld windows) forecasts",
                      (long long)p->best_step, p->best_loss, (long long)p->nval);
    }
    int64_t lo = 0, hi = 0;
    tess_par_block_range(p->ntest, g->size, g->rank, &lo, &hi); /* test windows split by rank */
    for (int64_t w0 = lo; st == TESS_OK && w0 < hi; w0 += p->eval_b) {
        const int64_t B = hi - w0 < p->eval_b ? hi - w0 : p->eval_b;
        if (adapt) { /* the zero-shot DAT first: the adaptation stage's starting parameters */
            memcpy(params, p->adapt.start, bytes);
            for (int64_t b = 0; b < B; b++) window_tokens(p, p->ntrain + w0 + b, b, false, 0, 0);
            forecast(p, B, Mc);
            for (int64_t b = 0; b < B; b++) {
                const calm_window *w = &p->test_win[w0 + b];
                const calm_session *s = &p->sess[w->session];
                const int64_t tl = w->t0 + Mc * P - 1;
                for (int64_t n = 0; n < p->count[b]; n++)
                    for (int64_t h = 0; h < H; h++)
                        acc[7 * H + h] += pow(p->frames[(b * N + n) * Lw + Mc * P + h] -
                                                  s->x[(tl + 1 + h) * s->N + n], 2);
            }
            memcpy(params, fc_params, bytes);
        }
        for (int64_t b = 0; b < B; b++) window_tokens(p, p->ntrain + w0 + b, b, false, 0, 0);
        forecast(p, B, Mc);
        for (int64_t b = 0; b < B; b++) {
            const calm_window *w = &p->test_win[w0 + b];
            const calm_session *s = &p->sess[w->session];
            const int64_t tl = w->t0 + Mc * P - 1; /* last context frame */
            for (int64_t n = 0; n < p->count[b]; n++) { /* neuron n of the session (no subset) */
                const float last = s->x[tl * s->N + n], *fc = p->frames + (b * N + n) * Lw;
                double mean = 0.0;
                for (int64_t t = w->t0; t <= tl; t++) mean += s->x[t * s->N + n];
                mean /= (double)(Mc * P);
                for (int64_t h = 0; h < H; h++) {
                    const double truth = s->x[(tl + 1 + h) * s->N + n];
                    acc[h] += pow(fc[Mc * P + h] - truth, 2);
                    acc[H + h] += pow(last - truth, 2);
                    acc[2 * H + h] += pow(mean - truth, 2);
                }
                calm_ar_predict(&ar, ar.w_neuron + (s->unit0 + n) * H * AR_LAGS, s, n, tl, pred);
                for (int64_t h = 0; h < H; h++)
                    acc[3 * H + h] += pow(pred[h] - s->x[(tl + 1 + h) * s->N + n], 2);
                calm_ar_predict(&ar, ar.w_pooled, s, n, tl, pred);
                for (int64_t h = 0; h < H; h++)
                    acc[4 * H + h] += pow(pred[h] - s->x[(tl + 1 + h) * s->N + n], 2);
                calm_armlp_predict(&mlp, s, n, tl, pred);
                for (int64_t h = 0; h < H; h++)
                    acc[6 * H + h] += pow(pred[h] - s->x[(tl + 1 + h) * s->N + n], 2);
                acc[NF * H] += 1.0;
            }
        }
    }
    double var_lambda[2] = {INFINITY, 0.0}; /* smallest and largest chosen */
    if (st == TESS_OK) st = var_errors(p, g, Mc, H, acc + 5 * H, var_lambda);
    if (st == TESS_OK) st = tess_par_allreduce_f64(g, acc, NF * H + 1, TESS_PAR_SUM);
    double mean[NF] = {0};
    for (int64_t h = 0; st == TESS_OK && h < H; h++) {
        /* horizon, MSE of the first five, scores of the model and three baselines, then
         * MSE and score of each later baseline */
        double row[2 * NF] = {(double)(h + 1)}, mse[NF];
        for (int k = 0; k < NF; k++) mse[k] = acc[k * H + h] / acc[NF * H], mean[k] += mse[k] / (double)H;
        for (int k = 0; k < 5; k++) row[1 + k] = mse[k];
        row[6] = 1.0 - mse[0] / mse[1];
        for (int k = 2; k < 5; k++) row[5 + k] = 1.0 - mse[k] / mse[1];
        for (int k = 5; k < NW; k++) row[10 + 2 * (k - 5)] = mse[k], row[11 + 2 * (k - 5)] = 1.0 - mse[k] / mse[1];
        st = tess_run_metrics_row(run, p->fc_csv, row);
    }
    if (final) memcpy(params, final, bytes);
    free(final);
    free(acc);
    free(pred);
    const double ln = ar.lambda_neuron, lp = ar.lambda_pooled;
    const int64_t mlp_best = mlp.best_step;
    calm_ar_free(&ar);
    calm_armlp_free(&mlp);
    TESS_CHECK(st);
    tess_log_info("forecast (%s split, %lld test windows, %lld frames ahead, head %s): MSE model "
                  "%.4f, copy-last %.4f, context mean %.4f, ridge AR %.4f (lambda %g), pooled AR "
                  "%.4f (lambda %g), population VAR %.4f (lambda %g-%g), MLP %.4f (best "
                  "validation at step %lld); prediction score model %.4f, context mean %.4f, "
                  "ridge AR %.4f, pooled AR %.4f, population VAR %.4f, MLP %.4f",
                  p->split_name, (long long)p->ntest, (long long)H,
                  calm_head_names[p->datc.head].name, mean[0],
                  mean[1], mean[2], mean[3], ln, mean[4], lp, mean[5], var_lambda[0],
                  var_lambda[1], mean[6], (long long)mlp_best, 1.0 - mean[0] / mean[1],
                  1.0 - mean[2] / mean[1], 1.0 - mean[3] / mean[1], 1.0 - mean[4] / mean[1],
                  1.0 - mean[5] / mean[1], 1.0 - mean[6] / mean[1]);
    if (adapt)
        tess_log_info("forecast of the held-out animal: zero-shot (before adaptation) MSE %.4f, "
                      "score %.4f; adapted (%lld steps) MSE %.4f, score %.4f",
                      mean[7], 1.0 - mean[7] / mean[1], (long long)p->adapt.steps, mean[0],
                      1.0 - mean[0] / mean[1]);
    TESS_CHECK(calm_analyses_finish(run, p));
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
    calm_decode_free(&p->dec);
    calm_adapt_free(&p->adapt);
    for (int64_t k = 0; p->sess && k < p->nsess; k++)
        free(p->sess[k].x), free(p->sess[k].beh), free(p->sess[k].spans);
    free(p->sess), free(p->train_win), free(p->test_win), free(p->val_win), free(p->best);
    free(p->x), free(p->ids);
    free(p->tokens), free(p->frames), free(p->cache), free(p->win_off), free(p->unit), free(p->sid), free(p->count), free(p->perm);
    *p = (calm_pretrain){0};
}

/* ---- for the decode stage (calm.h) --------------------------------------------------------- */

tess_status calm_pretrain_cache(tess_run *run, calm_pretrain *p) {
    if (!p->cache) TESS_CHECK(cache_build(run, p));
    return TESS_OK;
}

void calm_pretrain_window(calm_pretrain *p, int64_t k, int64_t b, bool subsample, uint64_t key,
                          int64_t step) {
    window_tokens(p, k, b, subsample, key, step);
}

uint64_t calm_pretrain_draw(const tess_run *run, int64_t step, uint64_t what, int64_t j) {
    return draw(run, step, what, j);
}

tess_status calm_pretrain_validate_span(calm_pretrain *p, const tess_group *g, int64_t first,
                                        int64_t n, double v[3]) {
    int64_t lo = 0, hi = 0, pairs = 0;
    double tot[3] = {0.0, 0.0, 0.0};
    tess_par_block_range(n, g->size, g->rank, &lo, &hi);
    for (int64_t w0 = lo; w0 < hi; w0 += p->eval_b) {
        const int64_t B = hi - w0 < p->eval_b ? hi - w0 : p->eval_b;
        for (int64_t b = 0; b < B; b++) window_tokens(p, first + w0 + b, b, false, 0, 0);
        calm_dat_forward(p->dat, p->tokens, p->frames, p->unit, p->sid, p->count, B, &pairs);
        double ce = 0.0, mse = 0.0;
        calm_dat_loss_parts(p->dat, &ce, &mse);
        tot[0] += ce, tot[1] += mse, tot[2] += (double)pairs;
    }
    TESS_CHECK(tess_par_allreduce_f64(g, tot, 3, TESS_PAR_SUM));
    v[0] = tot[0] / tot[2], v[1] = tot[1] / tot[2];
    v[2] = p->datc.head == CALM_HEAD_TOKEN ? v[0] : v[1];
    return TESS_OK;
}

tess_status calm_pretrain_dat_gradients(tess_run *run, calm_pretrain *p, int64_t b, double tot[3],
                                        double *gnorm) {
    const tess_group *g = tess_run_group(run);
    int64_t pairs = 0;
    tess_registry_zero_grads(p->dat_reg);
    calm_dat_forward(p->dat, p->tokens, p->frames, p->unit, p->sid, p->count, b, &pairs);
    tot[0] = tot[1] = 0.0;
    tot[2] = (double)pairs;
    calm_dat_loss_parts(p->dat, &tot[0], &tot[1]);
    TESS_CHECK(tess_par_allreduce_f64(g, tot, 3, TESS_PAR_SUM));
    /* gradsync averages over the ranks: scale by ranks / global pairs for the global mean */
    calm_dat_backward(p->dat, (float)((double)g->size / tot[2]));
    TESS_CHECK(tess_gradsync_finish(p->dat_sync, NULL));
    return tess_clip_grad_norm(p->dat_reg, p->clip, g, gnorm);
}

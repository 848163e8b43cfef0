/* decode_stage.c - the calm app's decode mode (docs/calm.md, "Behaviour decoding"): after the
 * pretrain mode's stages (tokenizer, dual-axis transformer; the latter skipped in the scratch
 * regime), decode.steps steps train the decoding head (decode.h) on the DAT's final residual
 * stream; at the end the head and the two baseline decoders (ridge and MLP on lagged population
 * vectors) are scored on the same held-out test frames.
 *
 * Splits: `tail` - every session's head trains, its tail is scored; `animal` (leave one animal
 * out) - the head trains on the other animals' windows and is scored on the held-out animal's
 * test span, its targets standardised with the training animals' pooled statistics; the
 * baselines, whose lagged population vectors cannot carry over to another animal's neurons,
 * decode from identity-free summary statistics of the population (calm_dec_summarize) and are
 * fitted on the training animals' sessions pooled. With decode.val_every > 0 the head's loss on
 * the validation windows is measured every val_every head steps and the parameters of the best
 * one (the head's, and the DAT's when it trains) are scored.
 *
 * Data parallel as the pretrain mode: global sample j of a step is a Philox draw keyed by
 * (run.seed, step, j), rank r runs samples [r b, (r + 1) b); gradients averaged by par/gradsync.
 * The evaluation splits the test windows (model) and the sessions (baselines) over the ranks;
 * every prediction lands in one frame slot, summed over the ranks, so the results do not depend
 * on the rank count beyond float summation order. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "calm.h"
#include "core/log.h"     /* tess_log_info */
#include "nn/state.h"     /* tess_state_add_registry */
#include "optim/adamw.h"  /* tess_adamw_* */
#include "optim/clip.h"   /* tess_clip_grad_norm */
#include "optim/sched.h"  /* tess_sched_* */
#include "par/coll.h"     /* tess_par_allreduce_f64 */
#include "par/gradsync.h" /* tess_gradsync_* */
#include "par/layout.h"   /* tess_par_block_range */

const tess_opt calm_decode_opts[] = {
    TESS_OPT_ENUM("regime", "frozen", calm_regime_names,
                  "frozen: probe on the pretrained DAT; finetune: the DAT trains with the head; "
                  "scratch: no DAT pretraining, random init, trained with the head"),
    TESS_OPT_ENUM("readout", "unit", calm_dec_readout_names,
                  "how the head reads the neurons: unit: a per-neuron GELU layer times a learned "
                  "gain per unit and channel, then the mean over the neurons; mean: the same "
                  "without the unit gains; attn: attention pooling (one query), then the MLP"),
    TESS_OPT_ENUM("schedule", "cosine", tess_sched_kind_names,
                  "learning-rate decay of the decode stage (head and trained DAT) over "
                  "decode.steps, to 10 % of the peak (cosine, linear) or none (constant)"),
    TESS_OPT_INT("steps", 300, 1, 10000000, "decoding-head steps (after tok.steps + train.steps)"),
    TESS_OPT_INT("batch", 8, 1, 1 << 20, "GLOBAL windows per step; a multiple of the ranks"),
    TESS_OPT_REAL("lr", 1e-2, 1e-7, 1.0, "AdamW peak learning rate of the head"),
    TESS_OPT_REAL("backbone_lr", 0.0, 0.0, 1.0,
                  "AdamW peak learning rate of the DAT when it trains (finetune, scratch); 0: by "
                  "regime, 1e-4 in finetune (small steps from the pretrained state), 3e-3 in "
                  "scratch (random init)"),
    TESS_OPT_REAL("weight_decay", 0.05, 0.0, 100.0,
                  "AdamW decoupled weight decay of the head's matrices and unit gains (the DAT "
                  "keeps train.weight_decay); decode.lr times it must be below 1"),
    TESS_OPT_INT("hidden", 64, 1, 65536, "hidden units of the head's MLP and of the MLP decoder"),
    TESS_OPT_STRING("targets", "",
                    "behaviour datasets /behavior/<name> to decode, comma-separated; empty: "
                    "velocity,running (simulated) or velocity,head_angle,reversal_vec (files)"),
    TESS_OPT_STRING("binary", "running,reversal_vec",
                    "targets that are binary (0/1: BCE loss, accuracy and AUROC)"),
    TESS_OPT_INT("lags", 8, 1, 256, "frames in the baseline decoders' lagged population vectors"),
    TESS_OPT_INT("mlp_steps", 300, 10, 1000000,
                 "most full-batch steps of the MLP decoder (the validation slice picks fewer)"),
    TESS_OPT_INT("val_every", 0, 0, 10000000,
                 "0: off; else the validation windows are taken out of training, the head's loss "
                 "on them measured every val_every head steps, and the best-validated head (and "
                 "DAT, when it trains) scored"),
    TESS_OPT_INT("patience", 0, 0, 1000000,
                 "0: off; else the decode stage stops after this many validations (every "
                 "decode.val_every head steps) without a lower validation loss"),
    TESS_OPT_BOOL("probe", false,
                  "tail split: after scoring, ridge probes on the validation slices of the raw "
                  "traces and of the DAT's final hidden state over the last 1, 2 and 4 patches, "
                  "next to the head (decode_probe.csv)"),
};
const int64_t calm_decode_nopts = sizeof calm_decode_opts / sizeof calm_decode_opts[0];

enum { NDEC = 3 }; /* decoders: 0 the head, 1 ridge, 2 MLP */
static const char *const dec_names[2][NDEC] = {
    {"CalM-lite head", "ridge", "MLP"},
    {"CalM-lite head (trained on the other animals)", "ridge on population summaries (other animals)",
     "MLP on population summaries (other animals)"}};
static const double VAL_FRACTION = 0.2; /* the baselines' validation slice */
static const double MIN_LR_FRACTION = 0.1; /* the decayed learning rate's end, of the peak */
/* decode.backbone_lr = 0: the DAT's peak rate by regime (docs/calm.md, "Learning rates") */
static const double FINETUNE_DAT_LR = 1e-4, SCRATCH_DAT_LR = 3e-3;

/* Whether name is an item of the comma-separated list. */
static bool in_list(const char *list, const char *name) {
    const size_t n = strlen(name);
    for (const char *s = list; *s;) {
        const char *e = strchr(s, ',');
        const size_t len = e ? (size_t)(e - s) : strlen(s);
        if (len == n && strncmp(s, name, n) == 0) return true;
        if (!e) break;
        s = e + 1;
    }
    return false;
}

tess_status calm_decode_config(tess_run *run, calm_pretrain *p) {
    const tess_config *cfg = tess_run_config(run);
    calm_decode *d = &p->dec;
    d->regime = (calm_regime)tess_config_enum(cfg, "decode.regime");
    d->steps = tess_config_int(cfg, "decode.steps");
    d->batch = tess_config_int(cfg, "decode.batch");
    d->lr = tess_config_real(cfg, "decode.lr");
    d->backbone_lr = tess_config_real(cfg, "decode.backbone_lr");
    if (d->backbone_lr == 0.0)
        d->backbone_lr = d->regime == CALM_REGIME_SCRATCH ? SCRATCH_DAT_LR : FINETUNE_DAT_LR;
    d->weight_decay = tess_config_real(cfg, "decode.weight_decay");
    TESS_REQUIRE(d->lr * d->weight_decay < 1.0, TESS_ERR_CONFIG,
                 "decode.weight_decay = %g times decode.lr = %g is %g, expected below 1 (AdamW "
                 "shrinks the head's weights by 1 - lr weight_decay per step)",
                 d->weight_decay, d->lr, d->lr * d->weight_decay);
    d->hidden = tess_config_int(cfg, "decode.hidden");
    d->lags = tess_config_int(cfg, "decode.lags");
    d->mlp_steps = tess_config_int(cfg, "decode.mlp_steps");
    const int size = tess_run_group(run)->size;
    TESS_REQUIRE(d->batch % size == 0, TESS_ERR_CONFIG,
                 "decode.batch = %lld must be a multiple of the number of ranks (%d)",
                 (long long)d->batch, size);
    d->b = d->batch / size;
    d->val_every = tess_config_int(cfg, "decode.val_every");
    d->patience = tess_config_int(cfg, "decode.patience");
    TESS_REQUIRE(d->patience == 0 || d->val_every > 0, TESS_ERR_CONFIG,
                 "decode.patience = %lld needs decode.val_every > 0 (the validations it counts)",
                 (long long)d->patience);
    d->readout = (calm_dec_readout)tess_config_enum(cfg, "decode.readout");
    d->probe = tess_config_bool(cfg, "decode.probe");
    d->sched = (tess_sched){.kind = (tess_sched_kind)tess_config_enum(cfg, "decode.schedule"),
                           .lr = d->lr, .min_lr = MIN_LR_FRACTION * d->lr, .warmup_steps = 0,
                           .total_steps = d->steps};
    TESS_CHECK(tess_sched_check(&d->sched));
    /* the decoders score one test span per session, after its training frames (tail), or the
     * held-out animal's (animal) */
    d->split = (calm_split)tess_config_enum(cfg, "train.split");
    TESS_REQUIRE(d->split != CALM_SPLIT_BLOCK, TESS_ERR_CONFIG,
                 "train.split = block does not work with run.mode = decode: the decoders score "
                 "one test span per session after its training frames (use train.split = tail "
                 "or animal)");
    TESS_REQUIRE(!d->probe || d->split == CALM_SPLIT_TAIL, TESS_ERR_CONFIG,
                 "decode.probe needs train.split = tail (it fits per-session probes on each "
                 "session's training frames), not %s", calm_split_names[d->split].name);
    TESS_REQUIRE(!d->probe || d->val_every > 0, TESS_ERR_CONFIG,
                 "decode.probe needs decode.val_every > 0 (the validation windows it scores on)");
    const char *targets = tess_config_string(cfg, "decode.targets");
    if (!targets[0])
        targets = tess_config_string(cfg, "data.files")[0] ? "velocity,head_angle,reversal_vec"
                                                           : "velocity,running";
    const char *binary = tess_config_string(cfg, "decode.binary");
    d->D = 0;
    for (const char *s = targets; *s;) {
        const char *e = strchr(s, ',');
        const size_t len = e ? (size_t)(e - s) : strlen(s);
        TESS_REQUIRE(len > 0 && len < sizeof d->names[0] && d->D < CALM_DEC_MAX_TARGETS,
                     TESS_ERR_CONFIG,
                     "decode.targets = '%s': expected 1 to %d comma-separated behaviour names of "
                     "1 to %zu characters",
                     targets, CALM_DEC_MAX_TARGETS, sizeof d->names[0] - 1);
        memcpy(d->names[d->D], s, len);
        d->names[d->D][len] = '\0';
        d->binary[d->D] = in_list(binary, d->names[d->D]);
        d->D++;
        if (!e) break;
        s = e + 1;
    }
    TESS_REQUIRE(d->D > 0, TESS_ERR_CONFIG, "decode.targets names no behaviour");
    return TESS_OK;
}

static calm_dec_session base_session(const calm_pretrain *p, int64_t s);

/* Session s trains the decoders: in the animal split the sessions of the other animals, on all
 * their frames; in the tail split every session, on its head. */
static bool trains(const calm_pretrain *p, int64_t s) {
    return p->dec.split != CALM_SPLIT_ANIMAL || !p->sess[s].held_out;
}

/* Standardisation of the regression targets (calm_dec_target_stats: per session in the tail
 * split, pooled over the training animals in the animal split); binary targets checked to be
 * 0/1. */
static tess_status target_stats(calm_pretrain *p) {
    calm_decode *d = &p->dec;
    const int64_t D = d->D, S = p->nsess;
    d->mu = calloc((size_t)(S * D), sizeof(double));
    d->sd = calloc((size_t)(S * D), sizeof(double));
    calm_dec_session *bs = malloc((size_t)S * sizeof *bs);
    bool *train = malloc((size_t)S * sizeof(bool));
    if (!d->mu || !d->sd || !bs || !train) free(bs), free(train);
    TESS_REQUIRE(d->mu && d->sd && bs && train, TESS_ERR_MEM, "out of memory");
    tess_status st = TESS_OK;
    for (int64_t s = 0; s < S; s++) {
        const calm_session *x = &p->sess[s];
        bs[s] = base_session(p, s), train[s] = trains(p, s);
        for (int64_t k = 0; k < D && st == TESS_OK; k++)
            for (int64_t t = 0; t < x->T && st == TESS_OK; t++) {
                const float b = x->beh[t * D + k];
                if (d->binary[k] && b != 0.0f && b != 1.0f)
                    st = tess_error_push(TESS_ERR_DATA, __FILE__, __LINE__, __func__,
                                         "'%s': /behavior/%s[%lld] = %g, expected 0 or 1 (a binary "
                                         "target of decode.binary)",
                                         x->name, d->names[k], (long long)t, (double)b);
            }
    }
    if (st == TESS_OK)
        calm_dec_target_stats(bs, S, d->split == CALM_SPLIT_ANIMAL ? train : NULL, d->binary,
                              d->mu, d->sd);
    free(bs), free(train);
    return st;
}

static calm_dec_base_config base_config(const calm_pretrain *p, uint64_t seed) {
    return (calm_dec_base_config){.P = p->tokc.P, .L = p->dec.lags, .val_fraction = VAL_FRACTION,
                                  .binary = p->dec.binary, .hidden = p->dec.hidden,
                                  .max_steps = p->dec.mlp_steps, .lr = 1e-3, .seed = seed};
}

/* Session s is scored: every session in the tail split, the held-out animal's in the animal
 * split. */
static bool scored_session(const calm_pretrain *p, int64_t s) {
    return p->dec.split != CALM_SPLIT_ANIMAL || p->sess[s].held_out;
}

/* The session of decode_trace.csv: the first that is scored (tail: 0; animal: the first
 * session of the held-out animal). */
static int64_t trace_session(const calm_pretrain *p) {
    int64_t s = 0;
    while (s + 1 < p->nsess && !scored_session(p, s)) s++;
    return s;
}

/* Session s for the decoders: its training frames are those below train_T - in the animal
 * split every frame of a training animal's session. */
static calm_dec_session base_session(const calm_pretrain *p, int64_t s) {
    const calm_session *x = &p->sess[s];
    const bool all = p->dec.split == CALM_SPLIT_ANIMAL && !x->held_out;
    return (calm_dec_session){.x = x->x, .beh = x->beh, .T = x->T, .N = x->N, .D = p->dec.D,
                              .train_T = all ? x->T : x->train_T};
}

tess_status calm_decode_setup(tess_run *run, calm_pretrain *p) {
    calm_decode *d = &p->dec;
    const tess_group *g = tess_run_group(run);
    const int64_t D = d->D, M = p->tokc.M, N = p->datc.max_N, dm = p->datc.d;
    TESS_CHECK(target_stats(p));
    const calm_dec_base_config bc = base_config(p, 0);
    for (int64_t s = 0; s < p->nsess; s++) {
        const calm_dec_session bs = base_session(p, s);
        if (trains(p, s)) TESS_CHECK(calm_dec_base_check(&bs, &bc, p->sess[s].name));
    }
    TESS_CHECK(tess_registry_create(&d->reg));
    TESS_CHECK(calm_dec_create(&d->head, d->readout, dm, d->hidden, D, p->units, p->eval_b, N, M,
                               d->reg));
    TESS_CHECK(tess_registry_finalize(d->reg));
    TESS_CHECK(tess_registry_init_params(d->reg, tess_run_seed(run) + 3));
    const tess_adamw_config ac = {.beta1 = 0.9f, .beta2 = 0.95f, .eps = 1e-8f,
                                  .weight_decay = (float)d->weight_decay};
    TESS_CHECK(tess_adamw_create(&d->opt, d->reg, &ac));
    TESS_CHECK(tess_gradsync_create(&d->sync, d->reg, g, 1 << 16));
    d->target = malloc((size_t)(p->eval_b * M * D) * sizeof(float));
    d->dh = malloc((size_t)(p->eval_b * N * M * dm) * sizeof(float));
    TESS_REQUIRE(d->target && d->dh, TESS_ERR_MEM, "out of memory for the decoding batch");
    tess_state *st = tess_run_state(run);
    TESS_CHECK(tess_state_add_registry(st, "dec/params", d->reg, false));
    TESS_CHECK(tess_adamw_describe(d->opt, st, "dec/optim"));
    TESS_CHECK(tess_run_bound_counter(run, "dec/optim/step_count", 1));
    d->best_loss = INFINITY;
    if (d->val_every > 0) { /* the best-validated head (and DAT, when it trains) */
        TESS_CHECK(tess_registry_alloc_state(d->reg, &d->best));
        TESS_CHECK(tess_state_add_like(st, "dec/best", d->reg, d->best, false));
        if (d->regime != CALM_REGIME_FROZEN) {
            TESS_CHECK(tess_registry_alloc_state(p->dat_reg, &d->best_dat));
            TESS_CHECK(tess_state_add_like(st, "dec/best_dat", p->dat_reg, d->best_dat, false));
        }
        TESS_CHECK(tess_state_add_f64(st, "dec/best_loss", &d->best_loss));
        TESS_CHECK(tess_state_add_i64(st, "dec/best_step", &d->best_step));
        static const char *const vcols[] = {"val_loss", "best_val_loss"};
        TESS_CHECK(tess_run_metrics(run, "decode_validation", vcols, 2, true, &d->val_csv));
    }

    static const char *const lcols[] = {"loss", "grad_norm"};
    TESS_CHECK(tess_run_metrics(run, "decode_loss", lcols, 2, true, &d->loss_csv));
    snprintf(d->cols[0], sizeof d->cols[0], "session");
    snprintf(d->cols[1], sizeof d->cols[1], "decoder");
    snprintf(d->tcols[0], sizeof d->tcols[0], "frame");
    static const char *const tkind[4] = {"true", "head", "ridge", "mlp"};
    for (int64_t k = 0; k < D; k++) {
        snprintf(d->cols[2 + 2 * k], sizeof d->cols[0], "%s_%s", d->names[k],
                 d->binary[k] ? "accuracy" : "r2");
        snprintf(d->cols[3 + 2 * k], sizeof d->cols[0], "%s_%s", d->names[k],
                 d->binary[k] ? "auroc" : "r");
        for (int j = 0; j < 4; j++)
            snprintf(d->tcols[1 + 4 * k + j], sizeof d->tcols[0], "%s_%s", d->names[k], tkind[j]);
    }
    for (int64_t i = 0; i < 2 + 2 * D; i++) d->colp[i] = d->cols[i];
    for (int64_t i = 0; i < 1 + 4 * D; i++) d->tcolp[i] = d->tcols[i];
    TESS_CHECK(tess_run_metrics(run, "decode", d->colp, (int)(2 + 2 * D), false, &d->res_csv));
    if (d->probe) { /* session, features (0 raw, 1 h^L, 2 the head), patches, decode.csv's */
        const char *pcols[3 + 2 * CALM_DEC_MAX_TARGETS] = {"session", "features", "patches"};
        for (int64_t i = 0; i < 2 * D; i++) pcols[3 + i] = d->colp[2 + i];
        TESS_CHECK(tess_run_metrics(run, "decode_probe", pcols, (int)(3 + 2 * D), false,
                                    &d->probe_csv));
    }
    TESS_CHECK(tess_run_metrics(run, "decode_trace", d->tcolp, (int)(1 + 4 * D), false,
                                &d->trace_csv));
    static const char *const ltitles[] = {"decoding loss (training batch)"};
    const tess_plot_spec lplot = {.title = "calm: decoding-head training loss",
                                  .xlabel = "step (updates)", .ycols = lcols, .ny = 1,
                                  .ytitles = ltitles,
                                  .ylabel = "loss per output (squared error in sd units, BCE)"};
    TESS_CHECK(tess_run_plot(run, d->loss_csv, "decode_loss.png", &lplot));
    static const char *const ttitles[2][4] = {
        {"true", "CalM-lite head", "ridge (lagged)", "MLP (lagged)"},
        {"true", "CalM-lite head (other animals)", "ridge (summary, other animals)",
         "MLP (summary, other animals)"}};
    const bool sim = !tess_config_string(tess_run_config(run), "data.files")[0];
    const char *name = p->sess[trace_session(p)].name;
    const char *base = strrchr(name, '/'); /* the file name without its folder */
    snprintf(d->title, sizeof d->title, "calm: decoded behaviour on the test frames of %.200s%s",
             base ? base + 1 : name,
             d->split == CALM_SPLIT_ANIMAL ? " (held-out animal)" : "");
    for (int64_t k = 0; k < D; k++) {
        if (d->binary[k])
            snprintf(d->ylabels[k], sizeof d->ylabels[k],
                     "%s (true 0/1; predicted probability, ridge score)", d->names[k]);
        else if (sim && strcmp(d->names[k], "velocity") == 0)
            snprintf(d->ylabels[k], sizeof d->ylabels[k], "running speed (cm/s)");
        else
            snprintf(d->ylabels[k], sizeof d->ylabels[k], "%s (units of /behavior/%s)", d->names[k],
                     d->names[k]);
        snprintf(d->pngs[k], sizeof d->pngs[k], "decode_%s.png", d->names[k]);
        const tess_plot_spec tplot = {.title = d->title, .xlabel = "frame (index in the session)",
                                      .ycols = d->tcolp + 1 + 4 * k, .ny = 4,
                                      .ytitles = ttitles[d->split == CALM_SPLIT_ANIMAL],
                                      .ylabel = d->ylabels[k]};
        TESS_CHECK(tess_run_plot(run, d->trace_csv, d->pngs[k], &tplot));
    }
    char subtitle[256];
    snprintf(subtitle, sizeof subtitle,
             "%lld sessions, %lld units; DAT d=%lld L=%lld, N_max=%lld; decode regime %s, "
             "readout %s, %lld head steps; %d rank%s",
             (long long)p->nsess, (long long)p->units, (long long)dm, (long long)p->datc.layers,
             (long long)N, calm_regime_names[d->regime].name,
             calm_dec_readout_names[d->readout].name, (long long)d->steps, g->size,
             g->size == 1 ? "" : "s");
    tess_run_plot_subtitle(run, subtitle);
    char list[CALM_DEC_MAX_TARGETS * 50] = "";
    for (int64_t k = 0; k < D; k++)
        snprintf(list + strlen(list), sizeof list - strlen(list), "%s%s%s", k ? ", " : "",
                 d->names[k], d->binary[k] ? " (binary)" : "");
    char dat_lr[64] = "";
    if (d->regime != CALM_REGIME_FROZEN)
        snprintf(dat_lr, sizeof dat_lr, ", the DAT's %g", d->backbone_lr);
    tess_log_info("decode: regime %s, readout %s, %lld targets (%s), %lld head steps, %s "
                  "learning rate: the head's peak %g (weight decay %g)%s",
                  calm_regime_names[d->regime].name, calm_dec_readout_names[d->readout].name,
                  (long long)D, list, (long long)d->steps, tess_sched_kind_name(d->sched.kind),
                  d->lr, d->weight_decay, dat_lr);
    return TESS_OK;
}

/* Targets of batch slot b (window w): per patch m and target k the mean over the patch's frames
 * of the standardised behaviour (binary: the fraction of positive frames). */
static void window_targets(calm_pretrain *p, const calm_window *w, int64_t b) {
    const calm_decode *d = &p->dec;
    const calm_session *s = &p->sess[w->session];
    const int64_t D = d->D, M = p->tokc.M, P = p->tokc.P;
    for (int64_t m = 0; m < M; m++)
        for (int64_t k = 0; k < D; k++) {
            double acc = 0.0;
            for (int64_t i = 0; i < P; i++) acc += s->beh[(w->t0 + m * P + i) * D + k];
            d->target[(b * M + m) * D + k] =
                (float)((acc / (double)P - d->mu[w->session * D + k]) / d->sd[w->session * D + k]);
        }
}

/* The head's mean loss per output on every validation window (all its neurons up to N_max),
 * windows split over the ranks in blocks. Collective. */
static tess_status head_validate(calm_pretrain *p, const tess_group *g, double *loss) {
    calm_decode *d = &p->dec;
    int64_t lo = 0, hi = 0, pairs = 0;
    double tot[2] = {0.0, 0.0};
    tess_par_block_range(p->nval, g->size, g->rank, &lo, &hi);
    for (int64_t w0 = lo; w0 < hi; w0 += p->eval_b) {
        const int64_t B = hi - w0 < p->eval_b ? hi - w0 : p->eval_b;
        for (int64_t b = 0; b < B; b++) {
            calm_pretrain_window(p, p->ntrain + p->ntest + w0 + b, b, false, 0, 0);
            window_targets(p, &p->val_win[w0 + b], b);
        }
        calm_dat_forward(p->dat, p->tokens, p->frames, p->unit, p->sid, p->count, B, &pairs);
        calm_dec_forward(d->head, calm_dat_hidden(p->dat), p->count, p->unit, B);
        int64_t terms = 0;
        tot[0] += calm_dec_loss(d->head, d->target, d->binary, &terms);
        tot[1] += (double)terms;
    }
    TESS_CHECK(tess_par_allreduce_f64(g, tot, 2, TESS_PAR_SUM));
    *loss = tot[0] / tot[1];
    return TESS_OK;
}

tess_status calm_decode_step(tess_run *run, calm_pretrain *p, int64_t step, tess_run_step_out *out) {
    const tess_group *g = tess_run_group(run);
    calm_decode *d = &p->dec;
    const int64_t k = step - p->tok_steps - p->dat_steps, first = g->rank * d->b;
    TESS_CHECK(calm_pretrain_cache(run, p));
    if (k == 0 && p->val_every > 0 && p->best_step > 0) { /* the best-validated pretrained DAT */
        memcpy(tess_registry_params(p->dat_reg), p->best,
               sizeof(float) * (size_t)tess_registry_local_total(p->dat_reg));
        tess_log_info("decode: the head reads the DAT of step %lld (validation loss %.4f)",
                      (long long)p->best_step, p->best_loss);
    }
    for (int64_t i = 0; i < d->b; i++) {
        const uint64_t r = calm_pretrain_draw(run, step, 5, first + i);
        const int64_t w = (int64_t)(r % (uint64_t)p->ntrain);
        calm_pretrain_window(p, w, i, true, r >> 32, step);
        window_targets(p, &p->train_win[w], i);
    }
    const bool train_dat = d->regime != CALM_REGIME_FROZEN;
    const double decay = tess_sched_lr(&d->sched, k) / d->lr; /* the schedule's factor */
    tess_registry_zero_grads(d->reg);
    if (train_dat) tess_registry_zero_grads(p->dat_reg);
    int64_t pairs = 0, terms = 0;
    calm_dat_forward(p->dat, p->tokens, p->frames, p->unit, p->sid, p->count, d->b, &pairs);
    calm_dec_forward(d->head, calm_dat_hidden(p->dat), p->count, p->unit, d->b);
    double tot[2] = {calm_dec_loss(d->head, d->target, d->binary, &terms), 0.0};
    tot[1] = (double)terms;
    TESS_CHECK(tess_par_allreduce_f64(g, tot, 2, TESS_PAR_SUM));
    /* gradsync averages over the ranks: scale by ranks / global terms for the global mean */
    calm_dec_backward(d->head, (float)((double)g->size / tot[1]), train_dat ? d->dh : NULL);
    double gnorm = 0.0, dnorm = 0.0;
    if (train_dat) {
        calm_dat_backward_hidden(p->dat, d->dh);
        TESS_CHECK(tess_gradsync_finish(p->dat_sync, NULL));
        TESS_CHECK(tess_clip_grad_norm(p->dat_reg, p->clip, g, &dnorm));
        tess_adamw_step(p->dat_opt, (float)(d->backbone_lr * decay));
    }
    TESS_CHECK(tess_gradsync_finish(d->sync, NULL));
    TESS_CHECK(tess_clip_grad_norm(d->reg, p->clip, g, &gnorm));
    tess_adamw_step(d->opt, (float)(d->lr * decay));
    const double row[2] = {tot[0] / tot[1], gnorm};
    bool stop = false;
    if ((k + 1) % 10 == 0 || k + 1 == d->steps) TESS_CHECK(tess_run_metrics_row(run, d->loss_csv, row));
    if (d->val_every > 0 && ((k + 1) % d->val_every == 0 || k + 1 == d->steps)) {
        double v[2] = {0.0, 0.0};
        TESS_CHECK(head_validate(p, g, &v[0]));
        if (v[0] < d->best_loss) {
            d->best_loss = v[0], d->best_step = k + 1;
            memcpy(d->best, tess_registry_params(d->reg),
                   sizeof(float) * (size_t)tess_registry_local_total(d->reg));
            if (d->best_dat)
                memcpy(d->best_dat, tess_registry_params(p->dat_reg),
                       sizeof(float) * (size_t)tess_registry_local_total(p->dat_reg));
        }
        v[1] = d->best_loss;
        TESS_CHECK(tess_run_metrics_row(run, d->val_csv, v));
        /* early stop: best_step is in the state, so a resumed run stops at the same step */
        stop = d->patience > 0 && k + 1 < d->steps &&
               k + 1 - d->best_step >= d->patience * d->val_every;
        if (stop)
            tess_log_info("decode: early stop at head step %lld of %lld: %lld validations "
                          "without a lower loss than %.4f (step %lld)",
                          (long long)(k + 1), (long long)d->steps, (long long)d->patience,
                          d->best_loss, (long long)d->best_step);
    }
    *out = (tess_run_step_out){.done = stop || k + 1 == d->steps, .loss = row[0],
                               .items = (double)d->batch, .position = NAN,
                               .data_cursor = out->data_cursor};
    return TESS_OK;
}

/* ---- evaluation ----------------------------------------------------------------------------- */

/* The first test window's start of session s (the patch grid at or after the split). */
static int64_t first_test_t0(const calm_pretrain *p, const calm_session *s) {
    const int64_t P = p->tokc.P;
    return (s->train_T + P - 1) / P * P;
}

/* The head's predictions of this rank's test windows into pred (per session offset off[s],
 * (T, D), behaviour units; binary: probabilities) and covered (offset toff[s], (T)): every test
 * frame once - the first window of a session gives all its patches, each later window (one
 * patch further) its last patch, so each frame is decoded with the longest context the windows
 * give it. */
static void head_predict(calm_pretrain *p, const tess_group *g, const int64_t *off,
                         const int64_t *toff, double *pred, double *covered) {
    calm_decode *d = &p->dec;
    const int64_t D = d->D, M = p->tokc.M, P = p->tokc.P;
    int64_t lo = 0, hi = 0, pairs = 0;
    tess_par_block_range(p->ntest, g->size, g->rank, &lo, &hi);
    for (int64_t w0 = lo; w0 < hi; w0 += p->eval_b) {
        const int64_t B = hi - w0 < p->eval_b ? hi - w0 : p->eval_b;
        for (int64_t b = 0; b < B; b++) calm_pretrain_window(p, p->ntrain + w0 + b, b, false, 0, 0);
        calm_dat_forward(p->dat, p->tokens, p->frames, p->unit, p->sid, p->count, B, &pairs);
        const float *y = calm_dec_forward(d->head, calm_dat_hidden(p->dat), p->count, p->unit, B);
        for (int64_t b = 0; b < B; b++) {
            const calm_window *w = &p->test_win[w0 + b];
            const calm_session *s = &p->sess[w->session];
            const bool first = w->t0 == first_test_t0(p, s);
            for (int64_t m = first ? 0 : M - 1; m < M; m++)
                for (int64_t t = w->t0 + m * P; t < w->t0 + (m + 1) * P; t++) {
                    covered[toff[w->session] + t] = 1.0;
                    for (int64_t k = 0; k < D; k++) {
                        const double v = y[(b * M + m) * D + k];
                        pred[off[w->session] + t * D + k] =
                            d->binary[k] ? 1.0 / (1.0 + exp(-v))
                                         : d->mu[w->session * D + k] + d->sd[w->session * D + k] * v;
                    }
                }
        }
    }
}

/* Session s's metrics of one decoder's predictions (T, D) over its covered frames: 2 per target
 * into out (R^2 and r, or accuracy and AUROC). */
static void session_metrics(const calm_pretrain *p, int64_t s, const double *pred,
                            const double *covered, double *out, double *a, double *b) {
    const calm_decode *d = &p->dec;
    const calm_session *x = &p->sess[s];
    const int64_t D = d->D;
    for (int64_t k = 0; k < D; k++) {
        int64_t n = 0;
        for (int64_t t = 0; t < x->T; t++)
            if (covered[t] > 0.5) a[n] = pred[t * D + k], b[n] = x->beh[t * D + k], n++;
        out[2 * k] = d->binary[k] ? calm_dec_accuracy(a, b, n, 0.5) : calm_dec_r2(a, b, n);
        out[2 * k + 1] = d->binary[k] ? calm_dec_auroc(a, b, n) : calm_dec_pearson(a, b, n);
    }
}

/* The animal split's baselines (rank 0 alone): ridge and MLP on the population summaries
 * (calm_dec_summarize) of the sessions, fitted on the training animals' sessions pooled; their
 * predictions of the held-out animal's sessions into buf (decoders 1 and 2: buf + j npred +
 * off[s], (T, D)), the chosen penalties and step count into those sessions' rows of chosen. */
static tess_status pooled_baselines(const calm_pretrain *p, uint64_t seed, const int64_t *off,
                                    double *buf, int64_t npred, double *chosen) {
    const int64_t S = p->nsess, D = p->dec.D, F = CALM_DEC_SUMMARY;
    int64_t tot = 0, maxN = 1;
    for (int64_t s = 0; s < S; s++) {
        tot += p->sess[s].T;
        maxN = p->sess[s].N > maxN ? p->sess[s].N : maxN;
    }
    float *sum = malloc((size_t)(tot * F) * sizeof(float)), *work = malloc((size_t)maxN * sizeof(float));
    float *pr = malloc((size_t)(tot * D) * sizeof(float));
    float **pred = malloc((size_t)S * sizeof(float *));
    calm_dec_session *bs = malloc((size_t)S * sizeof *bs);
    bool *train = malloc((size_t)S * sizeof(bool));
    tess_status st = sum && work && pr && pred && bs && train ? TESS_OK : TESS_ERR_MEM;
    for (int64_t s = 0, o = 0; st == TESS_OK && s < S; o += p->sess[s].T, s++) {
        calm_dec_summarize(p->sess[s].x, p->sess[s].T, p->sess[s].N, sum + o * F, work);
        bs[s] = base_session(p, s);
        bs[s].x = sum + o * F, bs[s].N = F;
        train[s] = trains(p, s);
        pred[s] = train[s] ? NULL : pr + o * D;
    }
    const calm_dec_base_config bc = base_config(p, seed);
    double lambda[CALM_DEC_MAX_TARGETS] = {0};
    int64_t steps = 0;
    for (int j = 1; st == TESS_OK && j < NDEC; j++) {
        st = j == 1 ? calm_dec_ridge_pooled(bs, S, train, &bc, pred, lambda)
                    : calm_dec_mlp_pooled(bs, S, train, &bc, pred, &steps);
        for (int64_t s = 0; st == TESS_OK && s < S; s++)
            for (int64_t i = 0; pred[s] && i < p->sess[s].T * D; i++)
                buf[j * npred + off[s] + i] = isfinite(pred[s][i]) ? pred[s][i] : 0.0;
    }
    for (int64_t s = 0; st == TESS_OK && s < S; s++) {
        for (int64_t k = 0; pred[s] && k < D; k++) chosen[s * (D + 1) + k] = lambda[k];
        if (pred[s]) chosen[s * (D + 1) + D] = (double)steps;
    }
    free(sum), free(work), free(pr), free(pred), free(bs), free(train);
    TESS_REQUIRE(st == TESS_OK, st, "the animal split's baseline decoders");
    return TESS_OK;
}

/* ---- the validation-slice probes (decode.probe) --------------------------------------------- */

/* The probes' feature sets: raw z-scored traces of the last 1 or 2 patches (2 = the ridge
 * decoder's 8 frames at P = 4), the DAT's h^L of the last 1, 2 or 4 patches, and the head. */
enum { NPROBE = 6 };
static const int probe_kind[NPROBE] = {0, 0, 1, 1, 1, 2}, probe_lags[NPROBE] = {1, 2, 1, 2, 4, 1};

/* Window i of list w (n windows) gives all its patches when it is the first of its run of
 * consecutive windows of a session, else its last one (as the test scoring does). */
static bool run_start(const calm_window *w, int64_t i, int64_t P) {
    return i == 0 || w[i - 1].session != w[i].session || w[i - 1].t0 != w[i].t0 - P;
}

/* Session s's patches in order (training then validation patches, each covered once) into idx;
 * returns their number, *ntr the training ones. */
static int64_t probe_patches(const float *cov, int64_t np, int64_t *idx, int64_t *ntr) {
    int64_t n = 0;
    for (int64_t m = 0; m < np; m++)
        if (cov[m] > 0.5f && cov[m] < 1.5f) idx[n++] = m;
    *ntr = n;
    for (int64_t m = 0; m < np; m++)
        if (cov[m] > 1.5f) idx[n++] = m;
    return n;
}

/* The probes of session s (patch-rate ridge fits on its training patches, scored on its
 * validation patches): metrics (NPROBE, 2 D) into out. hid (np, count d), headp (np, D),
 * cov (np): 1 a training patch, 2 a validation patch, 0 not covered. */
static tess_status probe_session(const calm_pretrain *p, int64_t s, const float *hid,
                                 const float *headp, const float *cov, double *out) {
    const calm_decode *d = &p->dec;
    const calm_session *x = &p->sess[s];
    const int64_t P = p->tokc.P, D = d->D, np = x->T / P, dm = p->datc.d;
    const int64_t count = x->N < p->datc.max_N ? x->N : p->datc.max_N, Fh = count * dm;
    const int64_t Fmax = Fh > P * count ? Fh : P * count;
    int64_t *idx = malloc((size_t)np * sizeof(int64_t)), ntr = 0;
    float *xs = malloc((size_t)(np * Fmax) * sizeof(float));
    float *beh = malloc((size_t)(np * D) * sizeof(float));
    float *pred = malloc((size_t)(np * D) * sizeof(float));
    double *a = malloc((size_t)np * sizeof(double)), *b = malloc((size_t)np * sizeof(double));
    tess_status st = idx && xs && beh && pred && a && b ? TESS_OK : TESS_ERR_MEM;
    const int64_t n = st == TESS_OK ? probe_patches(cov, np, idx, &ntr) : 0;
    for (int64_t i = 0; i < n; i++) /* targets: the patch means (binary: positive fraction) */
        for (int64_t k = 0; k < D; k++) {
            double acc = 0.0;
            for (int64_t t = idx[i] * P; t < (idx[i] + 1) * P; t++) acc += x->beh[t * D + k];
            beh[i * D + k] = (float)(acc / (double)P);
        }
    calm_dec_base_config bc = base_config(p, 0);
    bc.P = 1;
    for (int j = 0; st == TESS_OK && j < NPROBE; j++) {
        const int64_t F = probe_kind[j] == 0 ? P * count : Fh;
        if (probe_kind[j] == 2) { /* the head's own predictions */
            for (int64_t i = 0; i < n * D; i++) pred[i] = headp[idx[i / D] * D + i % D];
        } else {
            for (int64_t i = 0; i < n; i++)
                for (int64_t f = 0; f < F; f++)
                    xs[i * F + f] = probe_kind[j] == 0
                                        ? x->x[(idx[i] * P + f / count) * x->N + f % count]
                                        : hid[idx[i] * Fh + f];
            if (probe_kind[j] == 1) /* h^L z-scored per feature (training patches' moments) */
                for (int64_t f = 0; f < F; f++) {
                    double m = 0.0, v = 0.0;
                    for (int64_t i = 0; i < ntr; i++) m += xs[i * F + f];
                    m /= (double)ntr;
                    for (int64_t i = 0; i < ntr; i++) v += pow(xs[i * F + f] - m, 2);
                    const double sd = sqrt(v / (double)ntr) + 1e-6;
                    for (int64_t i = 0; i < n; i++)
                        xs[i * F + f] = (float)((xs[i * F + f] - m) / sd);
                }
            bc.L = probe_lags[j];
            const calm_dec_session ps = {.x = xs, .beh = beh, .T = n, .N = F, .D = D,
                                         .train_T = ntr};
            double lambda[CALM_DEC_MAX_TARGETS];
            st = calm_dec_base_check(&ps, &bc, x->name);
            if (st == TESS_OK) st = calm_dec_ridge(&ps, &bc, pred, lambda);
        }
        for (int64_t k = 0; st == TESS_OK && k < D; k++) { /* scored on the validation patches */
            for (int64_t i = ntr; i < n; i++)
                a[i - ntr] = pred[i * D + k], b[i - ntr] = beh[i * D + k];
            const int64_t nv = n - ntr;
            double *o = out + j * 2 * D + 2 * k;
            o[0] = d->binary[k] ? calm_dec_accuracy(a, b, nv, 0.5) : calm_dec_r2(a, b, nv);
            o[1] = d->binary[k] ? calm_dec_auroc(a, b, nv) : calm_dec_pearson(a, b, nv);
        }
    }
    free(idx), free(xs), free(beh), free(pred), free(a), free(b);
    TESS_REQUIRE(st == TESS_OK, st, "decode.probe: the probes of '%s'", x->name);
    return TESS_OK;
}

/* decode.probe (tail split): with the DAT and head being scored, every training and validation
 * window's h^L over its neurons and the head's predictions, per patch of its session (windows
 * split over the ranks, summed); then per session (sessions split over the ranks) ridge probes
 * fitted on the training patches and scored on the validation patches - never a test frame -
 * into decode_probe.csv and the log (means over the sessions). Collective. */
static tess_status probe(tess_run *run, calm_pretrain *p) {
    const tess_group *g = tess_run_group(run);
    calm_decode *d = &p->dec;
    const int64_t S = p->nsess, P = p->tokc.P, M = p->tokc.M, N = p->datc.max_N, dm = p->datc.d;
    const int64_t D = d->D, W = p->ntrain + p->nval;
    int64_t *off = malloc((size_t)(S + 1) * sizeof(int64_t)), pairs = 0;
    TESS_REQUIRE(off, TESS_ERR_MEM, "out of memory");
    off[0] = 0; /* per session: hidden (np, count d), head (np, D), covered (np) */
    for (int64_t s = 0; s < S; s++) {
        const int64_t count = p->sess[s].N < N ? p->sess[s].N : N;
        off[s + 1] = off[s] + p->sess[s].T / P * (count * dm + D + 1);
    }
    float *buf = calloc((size_t)off[S], sizeof(float));
    double *res = calloc((size_t)(S * NPROBE * 2 * D), sizeof(double));
    tess_status st = buf && res ? TESS_OK : TESS_ERR_MEM;
    int64_t lo = 0, hi = 0;
    tess_par_block_range(W, g->size, g->rank, &lo, &hi);
    for (int64_t w0 = lo; st == TESS_OK && w0 < hi; w0 += p->eval_b) {
        const int64_t B = hi - w0 < p->eval_b ? hi - w0 : p->eval_b;
        for (int64_t i = 0; i < B; i++) /* training windows, then validation windows */
            calm_pretrain_window(p, w0 + i < p->ntrain ? w0 + i : p->ntest + w0 + i, i, false, 0,
                                 0);
        calm_dat_forward(p->dat, p->tokens, p->frames, p->unit, p->sid, p->count, B, &pairs);
        const float *h = calm_dat_hidden(p->dat);
        const float *y = calm_dec_forward(d->head, h, p->count, p->unit, B);
        for (int64_t i = 0; i < B; i++) {
            const bool val = w0 + i >= p->ntrain;
            const calm_window *list = val ? p->val_win : p->train_win;
            const int64_t wi = val ? w0 + i - p->ntrain : w0 + i, s = list[wi].session;
            const int64_t count = p->count[i], np = p->sess[s].T / P;
            float *hid = buf + off[s], *head = hid + np * count * dm, *cov = head + np * D;
            for (int64_t m = run_start(list, wi, P) ? 0 : M - 1; m < M; m++) {
                const int64_t pm = list[wi].t0 / P + m;
                cov[pm] = val ? 2.0f : 1.0f;
                for (int64_t n = 0; n < count; n++)
                    memcpy(hid + (pm * count + n) * dm, h + ((i * N + n) * M + m) * dm,
                           (size_t)dm * sizeof(float));
                for (int64_t k = 0; k < D; k++) {
                    const double v = y[(i * M + m) * D + k];
                    head[pm * D + k] =
                        (float)(d->binary[k] ? 1.0 / (1.0 + exp(-v))
                                             : d->mu[s * D + k] + d->sd[s * D + k] * v);
                }
            }
        }
    }
    if (st == TESS_OK) st = tess_par_allreduce(g, buf, off[S], TESS_PAR_SUM);
    tess_par_block_range(S, g->size, g->rank, &lo, &hi);
    for (int64_t s = lo; st == TESS_OK && s < hi; s++) {
        const int64_t count = p->sess[s].N < N ? p->sess[s].N : N, np = p->sess[s].T / P;
        const float *hid = buf + off[s], *head = hid + np * count * dm;
        st = probe_session(p, s, hid, head, head + np * D, res + s * NPROBE * 2 * D);
    }
    st = tess_par_agree(g, st);
    if (st == TESS_OK) st = tess_par_allreduce_f64(g, res, S * NPROBE * 2 * D, TESS_PAR_SUM);
    static const char *const fname[3] = {"raw traces", "h^L", "the head"};
    for (int j = 0; st == TESS_OK && j < NPROBE; j++) {
        double row[3 + 2 * CALM_DEC_MAX_TARGETS] = {0.0, probe_kind[j], probe_lags[j]};
        double mean[2 * CALM_DEC_MAX_TARGETS] = {0};
        for (int64_t s = 0; st == TESS_OK && s < S; s++) {
            row[0] = (double)s;
            for (int64_t i = 0; i < 2 * D; i++) {
                row[3 + i] = res[(s * NPROBE + j) * 2 * D + i];
                mean[i] += row[3 + i] / (double)S;
            }
            st = tess_run_metrics_row(run, d->probe_csv, row);
        }
        char msg[512] = "";
        for (int64_t i = 0; i < 2 * D; i++) {
            row[3 + i] = mean[i];
            snprintf(msg + strlen(msg), sizeof msg - strlen(msg), " %s %.3f", d->cols[2 + i],
                     mean[i]);
        }
        row[0] = -1.0;
        if (st == TESS_OK) st = tess_run_metrics_row(run, d->probe_csv, row);
        tess_log_info("decode: probe on the validation slices (patch means, mean over %lld "
                      "sessions), %s%s of the last %d patch%s:%s",
                      (long long)S, probe_kind[j] == 2 ? "" : "ridge on ", fname[probe_kind[j]],
                      probe_lags[j], probe_lags[j] == 1 ? "" : "es", msg);
    }
    free(off), free(buf), free(res);
    TESS_CHECK(st);
    return TESS_OK;
}

tess_status calm_decode_finish(tess_run *run, calm_pretrain *p) {
    const tess_group *g = tess_run_group(run);
    calm_decode *d = &p->dec;
    const int64_t D = d->D, S = p->nsess;
    TESS_CHECK(calm_pretrain_cache(run, p));
    if (d->val_every > 0 && d->best_step > 0) { /* score the best-validated head (and DAT) */
        memcpy(tess_registry_params(d->reg), d->best,
               sizeof(float) * (size_t)tess_registry_local_total(d->reg));
        if (d->best_dat)
            memcpy(tess_registry_params(p->dat_reg), d->best_dat,
                   sizeof(float) * (size_t)tess_registry_local_total(p->dat_reg));
        tess_log_info("decode: validation: the head of step %lld scores (loss %.4f on %lld "
                      "validation windows)",
                      (long long)d->best_step, d->best_loss, (long long)p->nval);
    }
    int64_t *off = malloc((size_t)(S + 1) * sizeof(int64_t)), *toff = malloc((size_t)(S + 1) * sizeof(int64_t));
    if (!off || !toff) free(off), free(toff);
    TESS_REQUIRE(off && toff, TESS_ERR_MEM, "out of memory");
    off[0] = toff[0] = 0;
    int64_t maxT = 0;
    for (int64_t s = 0; s < S; s++) {
        off[s + 1] = off[s] + p->sess[s].T * D;
        toff[s + 1] = toff[s] + p->sess[s].T;
        maxT = p->sess[s].T > maxT ? p->sess[s].T : maxT;
    }
    /* pred: NDEC decoders x (all sessions' T x D), then covered (all sessions' T) */
    const int64_t npred = off[S], nall = NDEC * npred + toff[S];
    double *buf = calloc((size_t)nall, sizeof(double));
    double *a = malloc((size_t)maxT * sizeof(double)), *b = malloc((size_t)maxT * sizeof(double));
    float *fp = malloc((size_t)(maxT * D) * sizeof(float));
    tess_status st = buf && a && b && fp ? TESS_OK : TESS_ERR_MEM;
    double *covered = buf ? buf + NDEC * npred : NULL;
    if (st == TESS_OK) head_predict(p, g, off, toff, buf, covered);
    /* the baselines: sessions split over the ranks (tail), or on rank 0 (animal) */
    int64_t lo = 0, hi = 0;
    tess_par_block_range(S, g->size, g->rank, &lo, &hi);
    double *chosen = calloc((size_t)(S * (D + 1)), sizeof(double)); /* ridge lambdas, MLP steps */
    if (!chosen && st == TESS_OK) st = TESS_ERR_MEM;
    if (d->split == CALM_SPLIT_ANIMAL) {
        if (st == TESS_OK && g->rank == 0) st = pooled_baselines(p, tess_run_seed(run) + 100, off, buf, npred, chosen);
        hi = lo; /* no per-session fits */
    }
    for (int64_t s = lo; st == TESS_OK && s < hi; s++) {
        const calm_dec_session bs = base_session(p, s);
        const calm_dec_base_config bc = base_config(p, tess_run_seed(run) + 100 + (uint64_t)s);
        double lambda[CALM_DEC_MAX_TARGETS];
        int64_t steps = 0;
        st = calm_dec_ridge(&bs, &bc, fp, lambda);
        for (int64_t i = 0; st == TESS_OK && i < bs.T * D; i++)
            buf[npred + off[s] + i] = isfinite(fp[i]) ? fp[i] : 0.0;
        if (st == TESS_OK) st = calm_dec_mlp(&bs, &bc, fp, &steps);
        for (int64_t i = 0; st == TESS_OK && i < bs.T * D; i++)
            buf[2 * npred + off[s] + i] = isfinite(fp[i]) ? fp[i] : 0.0;
        for (int64_t k = 0; k < D; k++) chosen[s * (D + 1) + k] = lambda[k];
        chosen[s * (D + 1) + D] = (double)steps;
    }
    st = tess_par_agree(g, st);
    if (st == TESS_OK) st = tess_par_allreduce_f64(g, buf, nall, TESS_PAR_SUM);
    if (st == TESS_OK) st = tess_par_allreduce_f64(g, chosen, S * (D + 1), TESS_PAR_SUM);
    /* per scored session and decoder, then the means over them (session = -1) */
    int64_t scored = 0;
    for (int64_t s = 0; s < S; s++) scored += scored_session(p, s);
    double mean[NDEC][2 * CALM_DEC_MAX_TARGETS] = {{0}}, cnt[NDEC][2 * CALM_DEC_MAX_TARGETS] = {{0}};
    for (int64_t s = 0; st == TESS_OK && s < S; s++)
        for (int j = 0; st == TESS_OK && scored_session(p, s) && j < NDEC; j++) {
            double row[2 + 2 * CALM_DEC_MAX_TARGETS] = {(double)s, (double)j};
            session_metrics(p, s, buf + j * npred + off[s], covered + toff[s], row + 2, a, b);
            for (int64_t i = 0; i < 2 * D; i++)
                if (isfinite(row[2 + i])) mean[j][i] += row[2 + i], cnt[j][i] += 1.0;
            st = tess_run_metrics_row(run, d->res_csv, row);
        }
    for (int j = 0; st == TESS_OK && j < NDEC; j++) {
        double row[2 + 2 * CALM_DEC_MAX_TARGETS] = {-1.0, (double)j};
        char msg[512] = "";
        for (int64_t i = 0; i < 2 * D; i++) {
            row[2 + i] = cnt[j][i] > 0 ? mean[j][i] / cnt[j][i] : NAN;
            snprintf(msg + strlen(msg), sizeof msg - strlen(msg), " %s %.3f", d->cols[2 + i],
                     row[2 + i]);
        }
        st = tess_run_metrics_row(run, d->res_csv, row);
        tess_log_info("decode (%s split, test frames, mean over %lld sessions), %s:%s",
                      calm_split_names[d->split].name, (long long)scored, dec_names[d->split == CALM_SPLIT_ANIMAL][j], msg);
    }
    /* the trace session's test frames, every decoder against the truth */
    const int64_t ts = trace_session(p);
    for (int64_t t = 0; st == TESS_OK && t < p->sess[ts].T; t++) {
        if (covered[toff[ts] + t] < 0.5) continue;
        double row[1 + 4 * CALM_DEC_MAX_TARGETS] = {(double)t};
        for (int64_t k = 0; k < D; k++) {
            row[1 + 4 * k] = p->sess[ts].beh[t * D + k];
            for (int j = 0; j < NDEC; j++) row[2 + 4 * k + j] = buf[j * npred + off[ts] + t * D + k];
        }
        st = tess_run_metrics_row(run, d->trace_csv, row);
    }
    for (int64_t k = 0; st == TESS_OK && k < D; k++) {
        double lmin = INFINITY, lmax = 0.0;
        for (int64_t s = 0; s < S; s++) {
            if (!scored_session(p, s)) continue;
            const double l = chosen[s * (D + 1) + k];
            lmin = l < lmin ? l : lmin, lmax = l > lmax ? l : lmax;
        }
        tess_log_info("decode: ridge penalty of %s chosen on the validation slices: %g to %g",
                      d->names[k], lmin, lmax);
    }
    for (int64_t s = 0; st == TESS_OK && s < S; s++)
        if (scored_session(p, s))
            tess_log_info("decode: %s: MLP decoder stopped at %g steps (validation slice)",
                      p->sess[s].name, chosen[s * (D + 1) + D]);
    free(off), free(toff), free(buf), free(a), free(b), free(fp), free(chosen);
    TESS_CHECK(st);
    if (d->probe) TESS_CHECK(probe(run, p));
    return TESS_OK;
}

void calm_decode_free(calm_decode *d) {
    tess_gradsync_destroy(&d->sync);
    tess_adamw_destroy(&d->opt);
    calm_dec_destroy(&d->head);
    tess_registry_destroy(&d->reg);
    free(d->mu), free(d->sd), free(d->target), free(d->dh), free(d->best), free(d->best_dat);
    d->mu = d->sd = NULL, d->target = d->dh = NULL, d->best = d->best_dat = NULL;
}

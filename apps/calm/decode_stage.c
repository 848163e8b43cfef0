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
    TESS_OPT_REAL("lr", 3e-3, 1e-7, 1.0,
                  "AdamW learning rate of the head (and of the DAT in the scratch regime)"),
    TESS_OPT_REAL("backbone_lr", 1e-4, 1e-7, 1.0, "AdamW learning rate of the DAT (finetune)"),
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
};
const int64_t calm_decode_nopts = sizeof calm_decode_opts / sizeof calm_decode_opts[0];

enum { NDEC = 3 }; /* decoders: 0 the head, 1 ridge, 2 MLP */
static const char *const dec_names[2][NDEC] = {
    {"CalM-lite head", "ridge", "MLP"},
    {"CalM-lite head (trained on the other animals)", "ridge on population summaries (other animals)",
     "MLP on population summaries (other animals)"}};
static const double VAL_FRACTION = 0.2; /* the baselines' validation slice */
static const double MIN_LR_FRACTION = 0.1; /* the decayed learning rate's end, of the peak */

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
                                  .weight_decay = (float)p->weight_decay};
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
    tess_log_info("decode: regime %s, readout %s, %lld targets (%s), %lld head steps, %s "
                  "learning rate",
                  calm_regime_names[d->regime].name, calm_dec_readout_names[d->readout].name,
                  (long long)D, list, (long long)d->steps, tess_sched_kind_name(d->sched.kind));
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
        const double lr = d->regime == CALM_REGIME_FINETUNE ? d->backbone_lr : d->lr;
        tess_adamw_step(p->dat_opt, (float)(lr * decay));
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

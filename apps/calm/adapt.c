/* adapt.c - the calm app's adaptation stage (docs/calm.md, "Adaptation to a held-out animal"):
 * in the animal split the held-out animal's unit and session embeddings are untrained after the
 * DAT stage (its sessions give no training window). This stage, the spec's embedding-only
 * fine-tuning (POYO / POCO practice), trains those two tables - the rest of the DAT frozen - on
 * the held-out animal's own training part (the first train.train_fraction of its sessions, the
 * frames that already set its z-scoring), never on its test frames; the forecast then scores
 * the held-out animal both zero-shot (the stage's starting parameters) and adapted.
 *
 * Freezing: every entry of the DAT's registry but dat.unit_emb and dat.sess_emb is marked not
 * trainable (nn/registry.h: optimizers and clipping skip such entries), and the stage has its own
 * AdamW, whose moments start at zero. A batch holds only held-out windows, so only the held-out
 * animal's rows of the two tables get a gradient; every other row has g = m = v = 0 and no
 * weight decay (embeddings are not decayed), so AdamW's update of it is 0 / (0 + eps) = 0
 * exactly: the other animals' rows are bitwise unchanged (tested).
 *
 * Data parallel as the DAT stage: global sample j of a step is a Philox draw keyed by
 * (run.seed, step, j), rank r runs samples [r b, (r + 1) b); gradients averaged by the DAT's
 * par/gradsync. The optimizer's state, the starting parameters and the best-validated state
 * are in the driver's checkpoints (adapt/...), so a run stopped mid-stage resumes exactly. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "calm.h"
#include "core/log.h"     /* tess_log_info */
#include "nn/state.h"     /* tess_state_add_* */
#include "optim/adamw.h"  /* tess_adamw_* */
#include "optim/clip.h"   /* tess_clip_grad_norm */
#include "par/coll.h"     /* tess_par_allreduce_f64 */
#include "par/gradsync.h" /* tess_gradsync_finish */
#include "par/layout.h"   /* tess_par_block_range */

const tess_opt calm_adapt_opts[] = {
    TESS_OPT_INT("steps", 0, 0, 10000000,
                 "embedding-only adaptation steps on the held-out animal's training part after "
                 "the DAT stage (train.split = animal; 0: none, the held-out animal is forecast "
                 "zero-shot only)"),
    TESS_OPT_INT("batch", 8, 1, 1 << 20, "GLOBAL windows per adaptation step; a multiple of the ranks"),
    TESS_OPT_REAL("lr", 3e-3, 1e-7, 1.0, "AdamW learning rate (constant) of the two embeddings"),
    TESS_OPT_INT("val_every", 0, 0, 10000000,
                 "adaptation validation period (0: none): the last 20 % of the held-out training "
                 "part is kept out of the stage, its loss measured at the start and every "
                 "val_every steps, and the best-validated embeddings forecast"),
};
const int64_t calm_adapt_nopts = sizeof calm_adapt_opts / sizeof calm_adapt_opts[0];

static const double VAL_FRACTION = 0.2; /* the validation slice, as the DAT stage's */
enum { DRAW_ADAPT = 6 };                /* the Philox stream of the stage's samples */

tess_status calm_adapt_config(tess_run *run, calm_pretrain *p) {
    const tess_config *cfg = tess_run_config(run);
    calm_adapt *a = &p->adapt;
    a->steps = tess_config_int(cfg, "adapt.steps");
    a->batch = tess_config_int(cfg, "adapt.batch");
    a->lr = tess_config_real(cfg, "adapt.lr");
    a->val_every = tess_config_int(cfg, "adapt.val_every");
    if (a->steps == 0) return TESS_OK;
    const calm_split split = (calm_split)tess_config_enum(cfg, "train.split");
    TESS_REQUIRE(split == CALM_SPLIT_ANIMAL, TESS_ERR_CONFIG,
                 "adapt.steps = %lld needs train.split = animal (got '%s'): the stage adapts the "
                 "held-out animal's embeddings",
                 (long long)a->steps, calm_split_names[split].name);
    const int size = tess_run_group(run)->size;
    TESS_REQUIRE(a->batch % size == 0, TESS_ERR_CONFIG,
                 "adapt.batch = %lld must be a multiple of the number of ranks (%d)",
                 (long long)a->batch, size);
    a->b = a->batch / size;
    return TESS_OK;
}

tess_status calm_adapt_windows(calm_pretrain *p) {
    calm_adapt *a = &p->adapt;
    const int64_t Lw = p->tokc.M * p->tokc.P;
    const double vf = a->val_every > 0 ? VAL_FRACTION : 0.0;
    calm_split_held_out_windows(p->sess, p->nsess, Lw, p->tokc.P, vf, NULL, &a->ntrain, NULL,
                                &a->nval);
    TESS_REQUIRE(a->ntrain > 0 && (a->val_every == 0 || a->nval > 0), TESS_ERR_CONFIG,
                 "adapt.steps = %lld: no complete window of %lld frames in the held-out animal's "
                 "training part%s (%lld training, %lld validation windows; "
                 "train.train_fraction = %g)",
                 (long long)a->steps, (long long)Lw,
                 a->val_every > 0 ? " or in its validation slice (adapt.val_every)" : "",
                 (long long)a->ntrain, (long long)a->nval, p->train_fraction);
    a->win = malloc((size_t)a->ntrain * sizeof *a->win);
    a->val = malloc((size_t)(a->nval + 1) * sizeof *a->val);
    TESS_REQUIRE(a->win && a->val, TESS_ERR_MEM, "out of memory for the adaptation windows");
    calm_split_held_out_windows(p->sess, p->nsess, Lw, p->tokc.P, vf, a->win, &a->ntrain, a->val,
                                &a->nval);
    return TESS_OK;
}

tess_status calm_adapt_setup(tess_run *run, calm_pretrain *p) {
    calm_adapt *a = &p->adapt;
    const tess_adamw_config ac = {.beta1 = 0.9f, .beta2 = 0.95f, .eps = 1e-8f,
                                  .weight_decay = (float)p->weight_decay};
    TESS_CHECK(tess_adamw_create(&a->opt, p->dat_reg, &ac));
    TESS_CHECK(tess_registry_alloc_state(p->dat_reg, &a->start));
    tess_state *st = tess_run_state(run);
    TESS_CHECK(tess_adamw_describe(a->opt, st, "adapt/optim"));
    TESS_CHECK(tess_run_bound_counter(run, "adapt/optim/step_count", 1));
    TESS_CHECK(tess_state_add_like(st, "adapt/start", p->dat_reg, a->start, false));
    a->best_loss = INFINITY;
    if (a->val_every > 0) {
        TESS_CHECK(tess_registry_alloc_state(p->dat_reg, &a->best));
        TESS_CHECK(tess_state_add_like(st, "adapt/best", p->dat_reg, a->best, false));
        TESS_CHECK(tess_state_add_f64(st, "adapt/best_loss", &a->best_loss));
        TESS_CHECK(tess_state_add_i64(st, "adapt/best_step", &a->best_step));
    }
    static const char *const lcols[] = {"loss", "ce", "patch_mse", "grad_norm"};
    TESS_CHECK(tess_run_metrics(run, "adaptation", lcols, 4, true, &a->loss_csv));
    static const char *const vcols[] = {"val_ce", "val_patch_mse", "val_loss", "best_val_loss"};
    if (a->val_every > 0)
        TESS_CHECK(tess_run_metrics(run, "adapt_validation", vcols, 4, true, &a->val_csv));
    static const char *const ly[] = {"loss"}, *const lt[] = {"training loss (CE + next-patch MSE)"};
    static const char *const xl = "driver step (tokenizer and DAT steps, then adaptation)";
    const tess_plot_spec lp = {.title = "calm: embedding-only adaptation to the held-out animal",
                               .xlabel = xl, .ycols = ly, .ny = 1, .ytitles = lt,
                               .ylabel = "loss per (neuron, patch) pair (nats + z-units^2)"};
    TESS_CHECK(tess_run_plot(run, a->loss_csv, "adaptation.png", &lp));
    static const char *const vy[] = {"val_loss", "best_val_loss"},
                             *const vt[] = {"validation loss", "best so far"};
    const tess_plot_spec vp = {.title = "calm: adaptation, held-out animal's validation slice",
                               .xlabel = xl, .ycols = vy, .ny = 2, .ytitles = vt,
                               .ylabel = "next-patch MSE (z-units^2), or CE (nats) with the token head"};
    if (a->val_every > 0) TESS_CHECK(tess_run_plot(run, a->val_csv, "adapt_validation.png", &vp));
    tess_log_info("adaptation: %lld steps of the held-out animal's unit and session embeddings "
                  "on %lld windows of its training part (%lld validation windows), batch %lld, "
                  "lr %g",
                  (long long)a->steps, (long long)a->ntrain, (long long)a->nval,
                  (long long)a->batch, a->lr);
    return TESS_OK;
}

/* Every entry of the DAT's registry frozen but the unit and session embeddings. */
static tess_status freeze(tess_registry *reg) {
    for (int64_t i = 0; i < tess_registry_count(reg); i++) {
        const char *name = tess_registry_get(reg, i)->name;
        const bool emb = strcmp(name, "dat.unit_emb") == 0 || strcmp(name, "dat.sess_emb") == 0;
        TESS_CHECK(tess_registry_set_trainable(reg, i, emb));
    }
    return TESS_OK;
}

/* The DAT's mean CE and next-patch MSE per pair (v[0], v[1]) on the held-out validation
 * windows (all their neurons up to N_max) and the criterion v[2]: the next-patch MSE with a
 * patch head, else the CE (as the DAT stage's validation). Collective. */
static tess_status validate(calm_pretrain *p, const tess_group *g, double *v) {
    const int64_t first = p->ntrain + p->ntest + p->nval + p->adapt.ntrain; /* in the token cache */
    return calm_pretrain_validate_span(p, g, first, p->adapt.nval, v);
}

/* Validate; keep the parameters as the best when their loss is the lowest so far (step k). */
static tess_status validate_keep(tess_run *run, calm_pretrain *p, int64_t k) {
    calm_adapt *a = &p->adapt;
    double v[4] = {0.0};
    TESS_CHECK(validate(p, tess_run_group(run), v));
    if (v[2] < a->best_loss) {
        a->best_loss = v[2], a->best_step = k;
        memcpy(a->best, tess_registry_params(p->dat_reg),
               sizeof(float) * (size_t)tess_registry_local_total(p->dat_reg));
    }
    v[3] = a->best_loss;
    TESS_CHECK(tess_run_metrics_row(run, a->val_csv, v));
    return TESS_OK;
}

tess_status calm_adapt_step(tess_run *run, calm_pretrain *p, int64_t step, tess_run_step_out *out) {
    const tess_group *g = tess_run_group(run);
    calm_adapt *a = &p->adapt;
    const int64_t k = step - p->tok_steps - p->dat_steps, first = g->rank * a->b;
    const int64_t base = p->ntrain + p->ntest + p->nval; /* a->win[0] in the token cache */
    float *params = tess_registry_params(p->dat_reg);
    const size_t bytes = sizeof(float) * (size_t)tess_registry_local_total(p->dat_reg);
    TESS_CHECK(calm_pretrain_cache(run, p));
    TESS_CHECK(freeze(p->dat_reg));
    if (k == 0) { /* the zero-shot state: the best-validated DAT when the DAT stage validated */
        if (p->val_every > 0 && p->best_step > 0) {
            memcpy(params, p->best, bytes);
            tess_log_info("adaptation starts from the DAT of step %lld (validation loss %.4f)",
                          (long long)p->best_step, p->best_loss);
        }
        memcpy(a->start, params, bytes);
        if (a->val_every > 0) TESS_CHECK(validate_keep(run, p, 0));
    }
    for (int64_t i = 0; i < a->b; i++) {
        const uint64_t r = calm_pretrain_draw(run, step, DRAW_ADAPT, first + i);
        calm_pretrain_window(p, base + (int64_t)(r % (uint64_t)a->ntrain), i, true, r >> 32, step);
    }
    double tot[3], gnorm = 0.0; /* gnorm: the embeddings' norm (the rest is frozen) */
    TESS_CHECK(calm_pretrain_dat_gradients(run, p, a->b, tot, &gnorm));
    tess_adamw_step(a->opt, (float)a->lr);
    const double row[4] = {(tot[0] + tot[1]) / tot[2], tot[0] / tot[2], tot[1] / tot[2], gnorm};
    if ((k + 1) % 10 == 0 || k + 1 == a->steps) TESS_CHECK(tess_run_metrics_row(run, a->loss_csv, row));
    if (a->val_every > 0 && ((k + 1) % a->val_every == 0 || k + 1 == a->steps))
        TESS_CHECK(validate_keep(run, p, k + 1));
    *out = (tess_run_step_out){.done = k + 1 == a->steps, .loss = row[0],
                               .items = (double)a->batch, .position = NAN,
                               .data_cursor = out->data_cursor};
    return TESS_OK;
}

void calm_adapt_free(calm_adapt *a) {
    tess_adamw_destroy(&a->opt);
    free(a->win), free(a->val), free(a->start), free(a->best);
    a->win = a->val = NULL, a->start = a->best = NULL;
}

/* calm - the calcium-trace foundation model app (docs/calm.md), a composition on the run driver.
 *
 *   run.mode = pretrain   (default) simulated sessions in memory; stage 1 the tokenizer, stage 2
 *                         the dual-axis transformer; at the end forecasting on the held-out tail
 *                         against copy-last (pretrain.c).
 *   run.mode = decode     the pretrain mode's stages (the DAT stage skipped in the scratch
 *                         regime), then the behaviour-decoding head (decode.regime: frozen,
 *                         finetune, scratch); at the end the head, a ridge and an MLP decoder
 *                         scored on the held-out tail (decode_stage.c).
 *   run.mode = simulate   the synthetic calcium simulator (sim.h): animals x sessions files with
 *                         ground truth in the layout of the shipped recordings, one round of
 *                         `ranks` sessions per step; the files do not depend on the rank count.
 */
#include <stdlib.h>

#include "calm.h"

static const tess_opt run_opts[] = {
    TESS_OPT_ENUM("mode", "pretrain", calm_mode_names,
                  "pretrain: tokenizer + DAT; decode: + behaviour decoding; simulate: write simulated "
                  "sessions"),
};

static tess_status calm_setup(tess_run *run, void *ctx) {
    calm_app *a = ctx;
    a->mode = (calm_mode)tess_config_enum(tess_run_config(run), "run.mode");
    a->pre.dec.on = a->mode == CALM_MODE_DECODE;
    if (a->mode == CALM_MODE_SIMULATE) TESS_CHECK(calm_simulate_setup(run, &a->sim));
    else TESS_CHECK(calm_pretrain_setup(run, &a->pre));
    return TESS_OK;
}

static tess_status calm_step(tess_run *run, void *ctx, int64_t step, tess_run_step_out *out) {
    calm_app *a = ctx;
    if (a->mode == CALM_MODE_SIMULATE) TESS_CHECK(calm_simulate_step(run, &a->sim, out));
    else TESS_CHECK(calm_pretrain_step(run, &a->pre, step, out));
    return TESS_OK;
}

static tess_status calm_finish(tess_run *run, void *ctx) {
    calm_app *a = ctx;
    if (a->mode == CALM_MODE_PRETRAIN) TESS_CHECK(calm_pretrain_finish(run, &a->pre));
    if (a->mode == CALM_MODE_DECODE) TESS_CHECK(calm_decode_finish(run, &a->pre));
    return TESS_OK;
}

static void calm_destroy(void *ctx) {
    calm_app *a = ctx;
    calm_pretrain_free(&a->pre);
}

int main(int argc, char **argv) {
    const tess_config_section sections[] = {{"data", calm_data_opts, calm_data_nopts},
                                            {"sim", calm_sim_opts, calm_sim_nopts},
                                            {"tok", calm_tok_opts, calm_tok_nopts},
                                            {"model", calm_model_opts, calm_model_nopts},
                                            {"train", calm_train_opts, calm_train_nopts},
                                            {"decode", calm_decode_opts, calm_decode_nopts},
                                            {"adapt", calm_adapt_opts, calm_adapt_nopts}};
    const tess_run_app app = {
        .name = "calm", .unit = "step", .rate_unit = "samples", .default_dir = "runs/calm",
        .sections = sections, .nsections = sizeof sections / sizeof sections[0],
        .run_opts = run_opts, .nrun_opts = sizeof run_opts / sizeof run_opts[0],
        .setup = calm_setup, .step = calm_step, .finish = calm_finish, .destroy = calm_destroy};
    calm_app a = {0};
    return tess_run_main(&app, &a, argc, argv);
}

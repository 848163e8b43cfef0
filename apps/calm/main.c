/* calm - the calcium-trace foundation model app (docs/calm.md), a composition on the run driver.
 *
 *   run.mode = simulate   the synthetic calcium simulator (sim.h): animals x sessions files with
 *                         ground truth in the layout of the shipped recordings, one round of
 *                         `ranks` sessions per step; the files do not depend on the rank count.
 */
#include <stdlib.h>

#include "calm.h"

static const tess_opt run_opts[] = {
    TESS_OPT_ENUM("mode", "simulate", calm_mode_names, "simulate: write simulated sessions"),
};

static tess_status calm_setup(tess_run *run, void *ctx) {
    calm_app *a = ctx;
    a->mode = (calm_mode)tess_config_enum(tess_run_config(run), "run.mode");
    TESS_CHECK(calm_simulate_setup(run, &a->sim));
    return TESS_OK;
}

static tess_status calm_step(tess_run *run, void *ctx, int64_t step, tess_run_step_out *out) {
    calm_app *a = ctx;
    (void)step; /* the data cursor in out says where the run is */
    TESS_CHECK(calm_simulate_step(run, &a->sim, out));
    return TESS_OK;
}

int main(int argc, char **argv) {
    const tess_config_section sections[] = {{"sim", calm_sim_opts, calm_sim_nopts}};
    const tess_run_app app = {
        .name = "calm", .unit = "round", .rate_unit = "sessions", .default_dir = "runs/calm",
        .sections = sections, .nsections = 1, .run_opts = run_opts,
        .nrun_opts = sizeof run_opts / sizeof run_opts[0], .setup = calm_setup, .step = calm_step};
    calm_app a = {0};
    return tess_run_main(&app, &a, argc, argv);
}

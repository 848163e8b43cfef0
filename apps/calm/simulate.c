/* simulate.c - the calm app's simulate mode: the simulator's sessions (sim.h) written as files
 * of the shipped recordings' layout, one round of `ranks` sessions per step. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "calm.h"
#include "core/log.h" /* tess_log_info */

const tess_opt calm_sim_opts[] = {
    TESS_OPT_INT("animals", 2, 1, 256, "number of animals"),
    TESS_OPT_INT("sessions", 2, 1, 99, "sessions per animal"),
    TESS_OPT_INT("frames", 600, 2, INT64_C(1) << 30, "frames per session"),
    TESS_OPT_REAL("rate_hz", 2.0, 1e-3, 1e4, "frame rate f_s (Hz)"),
    TESS_OPT_INT("oversample", 10, 1, 1000, "fine steps per frame"),
    TESS_OPT_INT("neurons_min", 40, 1, 1 << 20, "fewest neurons of an animal"),
    TESS_OPT_INT("neurons_max", 80, 1, 1 << 20, "most neurons of an animal"),
    TESS_OPT_INT("population", 200, 1, 1 << 22, "shared population the animals sample from"),
    TESS_OPT_INT("latent_dim", 8, 2, 64, "latent dimension (even)"),
    TESS_OPT_ENUM("indicator", "gcamp6s", calm_sim_indicator_names, "calcium indicator"),
    TESS_OPT_REAL("noise", 2.0, 0.0, 100.0, "standardised noise level nu (%·s^-1/2)"),
    TESS_OPT_REAL("rate_median_hz", 0.5, 0.0, 100.0, "median baseline firing rate (0: silent)"),
    TESS_OPT_REAL("neuropil", 0.2, 0.0, 1.0, "largest neuropil weight"),
    TESS_OPT_BOOL("bleach", true, "photobleaching, tau 10-60 min per session"),
    TESS_OPT_RESUMABLE(STRING, "dir", "", "simulate: output directory; empty: <run.dir>/sessions"),
    TESS_OPT_STRING("prefix", "sim", "file names <prefix>-a<animal>-s<session>.h5"),
};
const int64_t calm_sim_nopts = sizeof calm_sim_opts / sizeof calm_sim_opts[0];

tess_status calm_sim_config_read(calm_sim_config *c, const tess_config *cfg, uint64_t seed) {
    TESS_REQUIRE(seed <= UINT32_MAX, TESS_ERR_CONFIG,
                 "run.seed = %llu: the simulator takes seeds below 2^32", (unsigned long long)seed);
    *c = (calm_sim_config){
        .seed = (uint32_t)seed,
        .animals = tess_config_int(cfg, "sim.animals"),
        .sessions = tess_config_int(cfg, "sim.sessions"),
        .frames = tess_config_int(cfg, "sim.frames"),
        .rate_hz = tess_config_real(cfg, "sim.rate_hz"),
        .oversample = tess_config_int(cfg, "sim.oversample"),
        .neurons_min = tess_config_int(cfg, "sim.neurons_min"),
        .neurons_max = tess_config_int(cfg, "sim.neurons_max"),
        .population = tess_config_int(cfg, "sim.population"),
        .latent_dim = tess_config_int(cfg, "sim.latent_dim"),
        .indicator = (calm_sim_indicator)tess_config_enum(cfg, "sim.indicator"),
        .noise_nu = tess_config_real(cfg, "sim.noise"),
        .rate_median_hz = tess_config_real(cfg, "sim.rate_median_hz"),
        .neuropil = tess_config_real(cfg, "sim.neuropil"),
        .bleach = tess_config_bool(cfg, "sim.bleach"),
    };
    TESS_CHECK(calm_sim_config_check(c));
    return TESS_OK;
}

tess_status calm_simulate_setup(tess_run *run, calm_simulate *s) {
    const tess_config *cfg = tess_run_config(run);
    TESS_CHECK(calm_sim_config_read(&s->cfg, cfg, tess_run_seed(run)));
    const char *dir = tess_config_string(cfg, "sim.dir"), *prefix = tess_config_string(cfg, "sim.prefix");
    int n = dir[0] ? snprintf(s->dir, sizeof s->dir, "%s", dir)
                   : snprintf(s->dir, sizeof s->dir, "%s/sessions", tess_run_dir(run));
    TESS_REQUIRE(n > 0 && (size_t)n < sizeof s->dir, TESS_ERR_CONFIG, "sim.dir is too long");
    TESS_REQUIRE(prefix[0] && strlen(prefix) < sizeof s->prefix && !strchr(prefix, '/'),
                 TESS_ERR_CONFIG, "sim.prefix = '%s' must be a non-empty file name below %zu bytes",
                 prefix, sizeof s->prefix);
    snprintf(s->prefix, sizeof s->prefix, "%s", prefix);
    s->total = s->cfg.animals * s->cfg.sessions;
    TESS_CHECK(calm_sim_make_dir(tess_run_group(run), s->dir));
    tess_run_set_total(run, (double)s->total, 0);
    tess_run_local_from_here(run);
    tess_log_info("simulate: %lld sessions (%lld animals x %lld) into %s/", (long long)s->total,
                  (long long)s->cfg.animals, (long long)s->cfg.sessions, s->dir);
    return TESS_OK;
}

tess_status calm_simulate_step(tess_run *run, calm_simulate *s, tess_run_step_out *out) {
    const tess_group *g = tess_run_group(run);
    /* the data cursor (the driver passes it in out) counts the sessions written, so a resume on
     * another rank count goes on where the last run stopped */
    int64_t first = out->data_cursor;
    int64_t k = first + g->rank, next = first + g->size < s->total ? first + g->size : s->total;
    if (k < s->total) TESS_CHECK(calm_sim_emit(&s->cfg, s->dir, s->prefix, k));
    *out = (tess_run_step_out){.done = next >= s->total, .loss = NAN, .items = (double)(next - first),
                               .position = (double)next, .data_cursor = next};
    return TESS_OK;
}

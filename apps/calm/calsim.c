/* tess-calsim - write simulated calcium-imaging sessions with ground truth (sim.h,
 * docs/calm.md "Simulator"): one HDF5 file per session in the layout of the shipped Flavell-lab
 * recordings, so `tess-convert calcium` and io/traces.h read them like real data.
 *
 *   mpiexec -n 2 tess-calsim --set sim.animals=8 --set out.dir=sim
 *
 * Sessions are split over the ranks; the files do not depend on the rank count.
 */
#include <mpi.h>

#include "core/config.h"  /* tess_config_* */
#include "core/log.h"     /* tess_log_info */
#include "core/runtime.h" /* tess_runtime_* */
#include "sim.h"          /* calm_sim_* */

static const tess_opt sim_opts[] = {
    TESS_OPT_INT("seed", 1, 0, UINT32_MAX, "Philox seed of every draw"),
    TESS_OPT_INT("animals", 2, 1, 1 << 20, "number of animals"),
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
};
static const tess_opt out_opts[] = {
    TESS_OPT_STRING("dir", "calsim", "output directory (created by rank 0)"),
    TESS_OPT_STRING("prefix", "sim", "file names <prefix>-a<animal>-s<session>.h5"),
};

/* Every failure is agreed over the world (config parsing, calm_sim_run): collective. */
static tess_status run(const tess_runtime *rt, int argc, char **argv) {
    const tess_config_section secs[] = {TESS_CONFIG_SECTION("sim", sim_opts),
                                        TESS_CONFIG_SECTION("out", out_opts)};
    tess_config *cfg = NULL;
    TESS_CHECK(tess_config_create(&cfg, secs, 2));
    tess_config_action action;
    tess_status s = tess_config_parse_args(cfg, rt->world, argc, argv, &action);
    if (s != TESS_OK || action != TESS_CONFIG_ACTION_RUN) {
        tess_config_destroy(&cfg);
        return s;
    }
    calm_sim_config c = {
        .seed = (uint32_t)tess_config_int(cfg, "sim.seed"),
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
    s = calm_sim_run(&c, rt->world, tess_config_string(cfg, "out.dir"),
                     tess_config_string(cfg, "out.prefix"));
    if (s == TESS_OK)
        tess_log_info("tess-calsim: %lld sessions (%lld animals x %lld) in %s/",
                      (long long)(c.animals * c.sessions), (long long)c.animals,
                      (long long)c.sessions, tess_config_string(cfg, "out.dir"));
    tess_config_destroy(&cfg);
    return s;
}

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    tess_runtime rt;
    tess_status s = tess_runtime_start(&rt, MPI_COMM_WORLD);
    if (s == TESS_OK) s = run(&rt, argc, argv);
    return tess_runtime_finish(&rt, s, true);
}

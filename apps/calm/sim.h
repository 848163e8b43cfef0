/* sim.h - the synthetic calcium-imaging simulator of the calm app (docs/calm.md, "Simulator"):
 * behaviour (rest/run switch, OU running speed), latent dynamics driven by behaviour and noise,
 * per-animal loadings drawn from one shared population, Poisson spikes, double-exponential
 * calcium, a saturating indicator, frame averaging, neuropil, bleaching and Gaussian noise, with
 * GCaMP6f/m/s time constants and amplitudes.
 *
 * Rank-count independence: every random number is a Philox draw (core/rng.h) named by
 * (seed, animal, session, neuron, what, step): key {seed, animal}, counter
 * (TESS_RNG_PURPOSE_NOISE, (session + 1) << 24 | (neuron + 1)), the element index carrying the
 * kind of draw in its top 16 bits and the fine step, frame or component below. Session 0/neuron 0
 * of the counter hold the animal-level and session-level draws; the shared population uses the
 * stream 0xFFFFFFFF. A session is therefore a pure function of (config, animal, session), and
 * the files do not depend on how many ranks share the sessions (the calm app's simulate mode,
 * apps/calm/main.c, deals them out).
 *
 * Letters: T frames, N neurons, D latent dimensions, O fine steps per frame (oversampling).
 */
#ifndef CALM_SIM_H
#define CALM_SIM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/config.h" /* tess_opt_enum */
#include "core/status.h" /* tess_status */
#include "par/mesh.h"    /* tess_group */

typedef enum {
    CALM_SIM_GCAMP6F = 0,
    CALM_SIM_GCAMP6M,
    CALM_SIM_GCAMP6S,
    CALM_SIM_INDICATOR_COUNT
} calm_sim_indicator;

static const tess_opt_enum calm_sim_indicator_names[] = {
    {"gcamp6f", CALM_SIM_GCAMP6F}, {"gcamp6m", CALM_SIM_GCAMP6M}, {"gcamp6s", CALM_SIM_GCAMP6S}};
TESS_OPT_ENUM_TABLE_CHECK(calm_sim_indicator_names, CALM_SIM_INDICATOR_COUNT);

/* Per-neuron draws of an indicator: decay and rise time constants uniform in [lo, hi] seconds,
 * single-spike peak dF/F log-normal with median amp_median and CV 0.5 (Chen et al. 2013). */
typedef struct {
    const char *name;
    double tau_d_lo, tau_d_hi, tau_r_lo, tau_r_hi, amp_median;
} calm_sim_indicator_params;

/* The constants of indicator ind (static storage). */
const calm_sim_indicator_params *calm_sim_indicator_get(calm_sim_indicator ind);

typedef struct {
    uint32_t seed;
    int64_t animals;         /* >= 1 */
    int64_t sessions;        /* per animal, >= 1 */
    int64_t frames;          /* T per session, >= 2 */
    double rate_hz;          /* frame rate f_s */
    int64_t oversample;      /* O fine steps per frame; fine step = 1 / (O f_s) */
    int64_t neurons_min, neurons_max; /* N_a ~ U{min..max} per animal */
    int64_t population;      /* shared population size, >= neurons_max */
    int64_t latent_dim;      /* D, even (2-d rotation blocks) */
    calm_sim_indicator indicator;
    double noise_nu;         /* standardised noise level nu (%·s^-1/2): sigma = nu sqrt(f_s) / 100 */
    double rate_median_hz;   /* median baseline rate (log-normal, sigma_log 1); 0 = silent */
    double neuropil;         /* largest neuropil weight; each neuron U[neuropil / 3, neuropil] */
    bool bleach;             /* multiply F by exp(-t / tau_b), tau_b ~ U[10, 60] min per session */
} calm_sim_config;

/* Defaults: the C. elegans-like CI regime (2 animals x 2 sessions, 600 frames at 2 Hz, 40-80
 * neurons, GCaMP6s, nu = 2). */
calm_sim_config calm_sim_config_default(void);

/* Check c; TESS_ERR_CONFIG naming the "sim.<key>" that is wrong and what it must be. */
tess_status calm_sim_config_check(const calm_sim_config *c);

/* One simulated session with its ground truth; arrays malloc'ed, owned by the struct. */
typedef struct {
    int64_t animal, session, frames, neurons, latent_dim;
    double rate_hz, bleach_tau_s;
    float *dff;       /* (T, N) observed dF/F: bleaching, neuropil and noise included */
    float *fluor;     /* (T, N) raw fluorescence F = F0 (1 + dff) */
    float *dff_clean; /* (T, N) indicator dF/F, frame-averaged, before neuropil/bleach/noise */
    float *spikes;    /* (T, N) spike counts per frame */
    float *latents;   /* (T, D) frame-averaged latent state */
    float *velocity;  /* (T) frame-averaged running speed, cm/s (>= 0) */
    float *running;   /* (T) fraction of the frame spent in the run state */
    double *loadings; /* (N, D) w_i */
    /* (N) per neuron: */
    double *base_rate, *speed_gain, *tau_d, *tau_r, *amplitude, *ksat, *neuropil_w, *f0;
    double *expected_spikes; /* sum over fine steps of lambda_i delta (the Poisson means) */
} calm_sim_session;

/* Simulate session `session` of animal `animal` (0-based) from c (already checked). On failure
 * s holds nothing. Not collective. */
tess_status calm_sim_generate(calm_sim_session *s, const calm_sim_config *c, int64_t animal,
                              int64_t session);

/* Free the arrays and zero s. Safe on a zeroed struct. */
void calm_sim_session_free(calm_sim_session *s);

/* Write s to path (through path.tmp and a rename) in the layout of the shipped Flavell-lab
 * recordings, so tess_traces_import_flavell (io/traces.h) and tess-convert calcium read it:
 *   /gcamp/trace_array (T, N) f32 = dff, /gcamp/trace_array_original (T, N) f32 = fluor,
 *   /behavior/velocity (T) f32, /behavior/running (T) f32,
 *   /timing/timestamp_confocal (T) f64 = t / f_s,
 *   /truth/{spikes, dff, latents} f32, /truth/loadings (N, D) f64, /truth/<per-neuron> (N) f64,
 *   root attributes: format "calm.sim", seed, animal, session, rate_hz, oversample, indicator,
 *   noise_nu, latent_dim, bleach_tau_s.
 * Float arrays chunked along time, gzip 4; no object timestamps, so equal sessions give equal
 * bytes. TESS_ERR_IO naming the path. Not collective. */
tess_status calm_sim_write(const char *path, const calm_sim_session *s, const calm_sim_config *c);

/* The file of session `session` of animal `animal`: dir/<prefix>-a<animal>-s<session>.h5
 * (animal and session zero-padded to 3 and 2 digits) into buf (n bytes). TESS_ERR_ARG when it
 * does not fit. Not collective. */
tess_status calm_sim_path(char *buf, size_t n, const char *dir, const char *prefix,
                          int64_t animal, int64_t session);

/* Generate and write global session k of c (animal k / c->sessions, session k % c->sessions)
 * to its calm_sim_path. Not collective: the calm app deals sessions to ranks by k. */
tess_status calm_sim_emit(const calm_sim_config *c, const char *dir, const char *prefix,
                          int64_t k);

/* Create directory dir on rank 0 (an existing directory is fine); every rank returns the same
 * status, TESS_ERR_IO naming dir. Collective on g. */
tess_status calm_sim_make_dir(const tess_group *g, const char *dir);

/* The double-exponential calcium transient at fine step dt: state (c, y), [Ca] = c - y,
 * c <- c e^{-dt/tau_d} + n A, y <- y e^{-dt/tau_r} + n A, with A chosen so that one spike
 * peaks at 1. */
typedef struct {
    double decay_d, decay_r, amp; /* e^{-dt/tau_d}, e^{-dt/tau_r}, A */
    double c, y;
} calm_sim_calcium;

/* k for time constants tau_r < tau_d and step dt (all seconds), state zero. */
void calm_sim_calcium_init(calm_sim_calcium *k, double tau_r, double tau_d, double dt);
/* Advance one step with n spikes arriving in it; returns [Ca] after the step. */
double calm_sim_calcium_step(calm_sim_calcium *k, double n);

/* Frame-domain AR(2) of the same transient sampled every dt: [Ca]_t = g[0] [Ca]_{t-1} +
 * g[1] [Ca]_{t-2} + A (e^{-dt/tau_d} - e^{-dt/tau_r}) n_{t-1}. */
void calm_sim_ar2(double tau_r, double tau_d, double dt, double g[2]);

#endif

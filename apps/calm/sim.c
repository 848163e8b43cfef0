/* sim.c - the calcium simulator (sim.h): draws, the per-session recursion, the HDF5 writer and
 * the MPI split over sessions. */
#include "sim.h"

#include <cblas.h>
#include <errno.h>
#include <hdf5.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "core/rng.h"  /* tess_rng_* */
#include "io/h5.h" /* tess_h5_quiet_*, tess_h5_reason */
#include "par/coll.h"  /* tess_par_agree */

static const calm_sim_indicator_params INDICATORS[CALM_SIM_INDICATOR_COUNT] = {
    [CALM_SIM_GCAMP6F] = {"gcamp6f", 0.4, 0.7, 0.020, 0.050, 0.15},
    [CALM_SIM_GCAMP6M] = {"gcamp6m", 0.9, 1.1, 0.040, 0.080, 0.15},
    [CALM_SIM_GCAMP6S] = {"gcamp6s", 1.25, 2.0, 0.060, 0.120, 0.225},
};

const calm_sim_indicator_params *calm_sim_indicator_get(calm_sim_indicator ind) {
    return &INDICATORS[ind];
}

calm_sim_config calm_sim_config_default(void) {
    return (calm_sim_config){.seed = 1,
                             .animals = 2,
                             .sessions = 2,
                             .frames = 600,
                             .rate_hz = 2.0,
                             .oversample = 10,
                             .neurons_min = 40,
                             .neurons_max = 80,
                             .population = 200,
                             .latent_dim = 8,
                             .indicator = CALM_SIM_GCAMP6S,
                             .noise_nu = 2.0,
                             .rate_median_hz = 0.5,
                             .neuropil = 0.2,
                             .bleach = true};
}

static const double PI = 3.14159265358979323846; /* M_PI is not C11 */

enum { ID_BITS = 24 };
#define ID_MAX ((INT64_C(1) << ID_BITS) - 2)

tess_status calm_sim_config_check(const calm_sim_config *c) {
    TESS_REQUIRE(c->animals >= 1 && c->animals <= ID_MAX, TESS_ERR_CONFIG,
                 "sim.animals = %lld must be in [1, %lld]", (long long)c->animals,
                 (long long)ID_MAX);
    TESS_REQUIRE(c->sessions >= 1 && c->sessions <= 99, TESS_ERR_CONFIG,
                 "sim.sessions = %lld must be in [1, 99]", (long long)c->sessions);
    TESS_REQUIRE(c->frames >= 2, TESS_ERR_CONFIG, "sim.frames = %lld must be >= 2",
                 (long long)c->frames);
    TESS_REQUIRE(c->rate_hz > 0.0 && isfinite(c->rate_hz), TESS_ERR_CONFIG,
                 "sim.rate_hz = %g must be > 0", c->rate_hz);
    TESS_REQUIRE(c->oversample >= 1, TESS_ERR_CONFIG, "sim.oversample = %lld must be >= 1",
                 (long long)c->oversample);
    TESS_REQUIRE(c->frames * c->oversample < (INT64_C(1) << 40), TESS_ERR_CONFIG,
                 "sim.frames x sim.oversample = %lld is too large (< 2^40 fine steps)",
                 (long long)(c->frames * c->oversample));
    TESS_REQUIRE(c->neurons_min >= 1 && c->neurons_min <= c->neurons_max, TESS_ERR_CONFIG,
                 "sim.neurons_min = %lld must be in [1, sim.neurons_max = %lld]",
                 (long long)c->neurons_min, (long long)c->neurons_max);
    TESS_REQUIRE(c->population >= c->neurons_max && c->population <= ID_MAX, TESS_ERR_CONFIG,
                 "sim.population = %lld must be in [sim.neurons_max = %lld, %lld]",
                 (long long)c->population, (long long)c->neurons_max, (long long)ID_MAX);
    TESS_REQUIRE(c->latent_dim >= 2 && c->latent_dim % 2 == 0 && c->latent_dim <= 64,
                 TESS_ERR_CONFIG, "sim.latent_dim = %lld must be even and in [2, 64]",
                 (long long)c->latent_dim);
    TESS_REQUIRE(c->indicator >= 0 && c->indicator < CALM_SIM_INDICATOR_COUNT, TESS_ERR_CONFIG,
                 "sim.indicator %d is not an indicator", (int)c->indicator);
    TESS_REQUIRE(c->noise_nu >= 0.0 && isfinite(c->noise_nu), TESS_ERR_CONFIG,
                 "sim.noise = %g must be >= 0", c->noise_nu);
    TESS_REQUIRE(c->rate_median_hz >= 0.0 && isfinite(c->rate_median_hz), TESS_ERR_CONFIG,
                 "sim.rate_median_hz = %g must be >= 0", c->rate_median_hz);
    TESS_REQUIRE(c->neuropil >= 0.0 && c->neuropil <= 1.0, TESS_ERR_CONFIG,
                 "sim.neuropil = %g must be in [0, 1]", c->neuropil);
    return TESS_OK;
}

/* ---- draws ---------------------------------------------------------------------------------
 * Kinds (top 16 bits of the element index). Scalars take even indices so that each has its own
 * Philox block (uniform and normal draws of one block are not independent, core/rng.h). */
enum {
    K_ANIMAL = 1,  /* animal scalars: counter (0, 0) */
    K_ROT_A,       /* latent block frequencies and time constants */
    K_INPUT_B,     /* input matrix B (D x 2) */
    K_ROT_Q,       /* the rotation Q_a: two vectors and an angle */
    K_NEURON,      /* neuron scalars: counter (0, i + 1) */
    K_LOAD_NOISE,  /* loading noise (D) */
    K_SHARED,      /* shared population loadings (D), stream 0xFFFFFFFF */
    K_SESSION,     /* session scalars: counter (s + 1, 0) */
    K_SWITCH,      /* rest/run switch, per fine step */
    K_OU,          /* speed noise, per fine step */
    K_LATENT,      /* latent noise, per fine step x D */
    K_NEUROPIL,    /* neuropil noise, per frame */
    K_SPIKE,       /* spike uniforms, per fine step: counter (s + 1, i + 1) */
    K_SPIKE_BIG,   /* normal approximation for Poisson means >= 30 */
    K_NOISE,       /* measurement noise, per frame */
};

/* The permutation of the shared population for animal a: counter (0, ID_MAX + 1). */
#define PERM_NEURON (ID_MAX + 1)

static tess_rng_key key_of(const calm_sim_config *c, uint32_t stream) {
    return (tess_rng_key){c->seed, stream};
}
static uint64_t ctr_of(int64_t session_plus1, int64_t neuron_plus1) {
    return tess_rng_ctr(TESS_RNG_PURPOSE_NOISE,
                        ((uint64_t)session_plus1 << ID_BITS) | (uint64_t)neuron_plus1);
}
static uint64_t idx_of(int kind, int64_t i) { return ((uint64_t)kind << 48) | (uint64_t)i; }

typedef struct {
    tess_rng_key key;
    uint64_t ctr;
} stream;

static double unif(stream s, int kind, int64_t i, double a, double b) {
    return tess_rng_uniform(s.key, s.ctr, idx_of(kind, i), a, b);
}
static double gauss(stream s, int kind, int64_t i) {
    return tess_rng_normal(s.key, s.ctr, idx_of(kind, i), 0.0, 1.0);
}

/* Poisson(mu) from one uniform by inversion of the CDF (mu < 30), else the rounded normal
 * approximation from one normal draw. */
static double poisson(stream s, int64_t step, double mu) {
    if (mu <= 0.0) return 0.0;
    if (mu >= 30.0) {
        double x = floor(mu + sqrt(mu) * gauss(s, K_SPIKE_BIG, step) + 0.5);
        return x > 0.0 ? x : 0.0;
    }
    double u = unif(s, K_SPIKE, step, 0.0, 1.0), p = exp(-mu), cdf = p, k = 0.0;
    while (u > cdf && k < 200.0) {
        k += 1.0;
        p *= mu / k;
        cdf += p;
    }
    return k;
}

/* ---- calcium kernel ------------------------------------------------------------------------ */

void calm_sim_calcium_init(calm_sim_calcium *k, double tau_r, double tau_d, double dt) {
    double tstar = tau_d * tau_r * log(tau_d / tau_r) / (tau_d - tau_r);
    k->amp = 1.0 / (exp(-tstar / tau_d) - exp(-tstar / tau_r));
    k->decay_d = exp(-dt / tau_d);
    k->decay_r = exp(-dt / tau_r);
    k->c = k->y = 0.0;
}

double calm_sim_calcium_step(calm_sim_calcium *k, double n) {
    k->c = k->c * k->decay_d + n * k->amp;
    k->y = k->y * k->decay_r + n * k->amp;
    return k->c - k->y;
}

void calm_sim_ar2(double tau_r, double tau_d, double dt, double g[2]) {
    double a = exp(-dt / tau_d), b = exp(-dt / tau_r);
    g[0] = a + b;
    g[1] = -a * b;
}

/* ---- the generative model ------------------------------------------------------------------ */

/* Animal-level quantities. */
typedef struct {
    int64_t neurons;
    double mu_run, sigma_ou, tau_ou, dwell_s, input_share;
    double *rho, *theta; /* (D/2) per rotation block: decay per fine step, angle per fine step */
    double *B;           /* (D, 2) */
} animal_params;

static void animal_free(animal_params *a) {
    free(a->rho);
    free(a->theta);
    free(a->B);
}

static tess_status animal_draw(animal_params *a, const calm_sim_config *c, int64_t animal,
                               double dt) {
    *a = (animal_params){0};
    stream s = {key_of(c, (uint32_t)animal), ctr_of(0, 0)};
    int64_t D = c->latent_dim;
    a->neurons = c->neurons_min +
                 (int64_t)floor(unif(s, K_ANIMAL, 0, 0.0, 1.0) *
                                (double)(c->neurons_max - c->neurons_min + 1));
    if (a->neurons > c->neurons_max) a->neurons = c->neurons_max;
    a->mu_run = unif(s, K_ANIMAL, 2, 10.0, 40.0);
    a->sigma_ou = unif(s, K_ANIMAL, 4, 5.0, 10.0);
    a->tau_ou = unif(s, K_ANIMAL, 6, 1.0, 2.0);
    a->dwell_s = unif(s, K_ANIMAL, 8, 5.0, 30.0);
    a->input_share = unif(s, K_ANIMAL, 10, 0.3, 0.6);
    a->rho = malloc((size_t)(D / 2) * sizeof(double));
    a->theta = malloc((size_t)(D / 2) * sizeof(double));
    a->B = malloc((size_t)(D * 2) * sizeof(double));
    if (!a->rho || !a->theta || !a->B) {
        animal_free(a);
        TESS_REQUIRE(false, TESS_ERR_MEM, "out of memory for animal %lld", (long long)animal);
    }
    for (int64_t j = 0; j < D / 2; j++) {
        double f = unif(s, K_ROT_A, 4 * j, 0.05, 0.5), tau = unif(s, K_ROT_A, 4 * j + 2, 0.5, 5.0);
        a->rho[j] = exp(-dt / tau);
        a->theta[j] = 2.0 * PI * f * dt;
    }
    /* B: two input columns, each a random unit direction (so both inputs drive the latents). */
    for (int col = 0; col < 2; col++) {
        double norm = 0.0;
        for (int64_t d = 0; d < D; d++) {
            a->B[d * 2 + col] = gauss(s, K_INPUT_B, 2 * (d * 2 + col));
            norm += a->B[d * 2 + col] * a->B[d * 2 + col];
        }
        for (int64_t d = 0; d < D; d++) a->B[d * 2 + col] /= sqrt(norm);
    }
    return TESS_OK;
}

/* W_a = W_shared[pi_a] Q_a + sigma_w N(0, 1/D): (N, D) into w. Q_a rotates by an angle in
 * [0, 20] degrees in a random plane. */
static tess_status loadings_draw(double *w, const calm_sim_config *c, int64_t animal,
                                 int64_t N) {
    int64_t D = c->latent_dim, P = c->population;
    int64_t *perm = malloc((size_t)P * sizeof *perm);
    double *u = malloc((size_t)(2 * D) * sizeof(double)), *row = malloc((size_t)D * sizeof(double));
    if (!perm || !u || !row) {
        free(perm);
        free(u);
        free(row);
        TESS_REQUIRE(false, TESS_ERR_MEM, "out of memory for the loadings of animal %lld",
                     (long long)animal);
    }
    tess_rng_permutation(key_of(c, (uint32_t)animal), ctr_of(0, PERM_NEURON), perm, P);
    stream sa = {key_of(c, (uint32_t)animal), ctr_of(0, 0)};
    /* two orthonormal vectors (Gram-Schmidt) and the angle */
    double *e1 = u, *e2 = u + D, n1 = 0.0, dot = 0.0, n2 = 0.0;
    for (int64_t d = 0; d < D; d++) {
        e1[d] = gauss(sa, K_ROT_Q, 2 * d);
        e2[d] = gauss(sa, K_ROT_Q, 2 * (D + d));
        n1 += e1[d] * e1[d];
    }
    for (int64_t d = 0; d < D; d++) e1[d] /= sqrt(n1);
    for (int64_t d = 0; d < D; d++) dot += e1[d] * e2[d];
    for (int64_t d = 0; d < D; d++) {
        e2[d] -= dot * e1[d];
        n2 += e2[d] * e2[d];
    }
    for (int64_t d = 0; d < D; d++) e2[d] /= sqrt(n2);
    double ang = unif(sa, K_ROT_Q, 4 * D, 0.0, 20.0) * PI / 180.0;
    double cs = cos(ang) - 1.0, sn = sin(ang);
    const double sigma_w = 0.3 / sqrt((double)D);
    for (int64_t i = 0; i < N; i++) {
        stream sp = {key_of(c, UINT32_MAX), ctr_of(0, perm[i] + 1)};
        for (int64_t d = 0; d < D; d++) row[d] = gauss(sp, K_SHARED, 2 * d) / sqrt((double)D);
        /* row Q with Q = I + cs (e1 e1' + e2 e2') + sn (e2 e1' - e1 e2') (row vector times Q) */
        double p1 = 0.0, p2 = 0.0;
        for (int64_t d = 0; d < D; d++) {
            p1 += row[d] * e1[d];
            p2 += row[d] * e2[d];
        }
        stream sn_ = {key_of(c, (uint32_t)animal), ctr_of(0, i + 1)};
        for (int64_t d = 0; d < D; d++)
            w[i * D + d] = row[d] + cs * (p1 * e1[d] + p2 * e2[d]) + sn * (p2 * e1[d] - p1 * e2[d]) +
                           sigma_w * gauss(sn_, K_LOAD_NOISE, 2 * d);
    }
    free(perm);
    free(u);
    free(row);
    return TESS_OK;
}

static tess_status session_alloc(calm_sim_session *s) {
    size_t TN = (size_t)(s->frames * s->neurons), T = (size_t)s->frames, N = (size_t)s->neurons;
    s->dff = malloc(TN * sizeof(float));
    s->fluor = malloc(TN * sizeof(float));
    s->dff_clean = malloc(TN * sizeof(float));
    s->spikes = malloc(TN * sizeof(float));
    s->latents = malloc(T * (size_t)s->latent_dim * sizeof(float));
    s->velocity = malloc(T * sizeof(float));
    s->running = malloc(T * sizeof(float));
    s->loadings = malloc(N * (size_t)s->latent_dim * sizeof(double));
    double **per[] = {&s->base_rate, &s->speed_gain, &s->tau_d,      &s->tau_r,
                      &s->amplitude, &s->ksat,       &s->neuropil_w, &s->f0,
                      &s->expected_spikes};
    bool ok = s->dff && s->fluor && s->dff_clean && s->spikes && s->latents && s->velocity &&
              s->running && s->loadings;
    for (size_t k = 0; k < sizeof per / sizeof per[0]; k++) {
        *per[k] = calloc(N, sizeof(double));
        ok = ok && *per[k];
    }
    TESS_REQUIRE(ok, TESS_ERR_MEM, "out of memory for a session of %lld x %lld",
                 (long long)s->frames, (long long)s->neurons);
    return TESS_OK;
}

void calm_sim_session_free(calm_sim_session *s) {
    void *arrays[] = {s->dff,      s->fluor,     s->dff_clean, s->spikes, s->latents,
                      s->velocity, s->running,   s->loadings,  s->base_rate,
                      s->speed_gain, s->tau_d,   s->tau_r,     s->amplitude, s->ksat,
                      s->neuropil_w, s->f0,      s->expected_spikes};
    for (size_t k = 0; k < sizeof arrays / sizeof arrays[0]; k++) free(arrays[k]);
    *s = (calm_sim_session){0};
}

/* Per-neuron constants of animal a (keyed by the neuron's position i in the animal). */
static void neuron_draw(calm_sim_session *s, const calm_sim_config *c) {
    const calm_sim_indicator_params *ind = calm_sim_indicator_get(c->indicator);
    const double amp_sigma = sqrt(log(1.25)); /* log-normal with CV 0.5 */
    for (int64_t i = 0; i < s->neurons; i++) {
        stream sn = {key_of(c, (uint32_t)s->animal), ctr_of(0, i + 1)};
        s->base_rate[i] = c->rate_median_hz * exp(gauss(sn, K_NEURON, 0));
        s->speed_gain[i] = 0.5 * gauss(sn, K_NEURON, 2);
        s->tau_d[i] = unif(sn, K_NEURON, 4, ind->tau_d_lo, ind->tau_d_hi);
        s->tau_r[i] = unif(sn, K_NEURON, 6, ind->tau_r_lo, ind->tau_r_hi);
        s->amplitude[i] = ind->amp_median * exp(amp_sigma * gauss(sn, K_NEURON, 8));
        s->ksat[i] = unif(sn, K_NEURON, 10, 5.0, 20.0);
        s->neuropil_w[i] = unif(sn, K_NEURON, 12, c->neuropil / 3.0, c->neuropil);
        s->f0[i] = 100.0 * exp(0.5 * gauss(sn, K_NEURON, 14));
    }
}

/* Rotation-decay step of the latent blocks: z <- rho R(theta) z (in place). */
static void rotate(double *z, const animal_params *a, int64_t D) {
    for (int64_t j = 0; j < D / 2; j++) {
        double x = z[2 * j], y = z[2 * j + 1], cs = cos(a->theta[j]), sn = sin(a->theta[j]);
        z[2 * j] = a->rho[j] * (cs * x - sn * y);
        z[2 * j + 1] = a->rho[j] * (sn * x + cs * y);
    }
}

tess_status calm_sim_generate(calm_sim_session *s, const calm_sim_config *c, int64_t animal,
                              int64_t session) {
    *s = (calm_sim_session){0};
    const int64_t T = c->frames, O = c->oversample, D = c->latent_dim;
    const double dt = 1.0 / ((double)O * c->rate_hz);
    animal_params a;
    TESS_CHECK(animal_draw(&a, c, animal, dt));
    s->animal = animal;
    s->session = session;
    s->frames = T;
    s->neurons = a.neurons;
    s->latent_dim = D;
    s->rate_hz = c->rate_hz;
    const int64_t N = s->neurons;
    double *zbuf = malloc((size_t)(O * D) * sizeof(double)), *logr = NULL, *speed = NULL;
    double *ze = calloc((size_t)D, sizeof(double)), *zu = calloc((size_t)D, sizeof(double));
    calm_sim_calcium *ca = malloc((size_t)N * sizeof *ca);
    double *np = malloc((size_t)T * sizeof(double)), *offset = malloc((size_t)N * sizeof(double));
    logr = malloc((size_t)(O * N) * sizeof(double));
    speed = malloc((size_t)O * sizeof(double));
    tess_status st = session_alloc(s);
    if (st == TESS_OK && (!zbuf || !ze || !zu || !ca || !np || !offset || !logr || !speed))
        st = tess_error_push(TESS_ERR_MEM, __FILE__, __LINE__, __func__, "out of memory");
    if (st == TESS_OK) st = loadings_draw(s->loadings, c, animal, N);
    if (st != TESS_OK) {
        free(zbuf), free(ze), free(zu), free(ca), free(np), free(offset), free(logr), free(speed);
        animal_free(&a);
        calm_sim_session_free(s);
        TESS_REQUIRE(false, st, "simulating animal %lld session %lld", (long long)animal,
                     (long long)session);
    }
    neuron_draw(s, c);

    /* c_i normalises E[exp(w_i'z + b_i v / 20)] to about 1: latents of about unit variance per
     * coordinate, speed 0 at rest and mu_run when running, half of the time each. */
    for (int64_t i = 0; i < N; i++) {
        double w2 = 0.0;
        for (int64_t d = 0; d < D; d++) w2 += s->loadings[i * D + d] * s->loadings[i * D + d];
        double ci = 0.5 * w2 + log(0.5 + 0.5 * exp(s->speed_gain[i] * a.mu_run / 20.0));
        offset[i] = (s->base_rate[i] > 0.0 ? log(s->base_rate[i]) : -INFINITY) - ci;
        calm_sim_calcium_init(&ca[i], s->tau_r[i], s->tau_d[i], dt);
    }

    /* session-level state and the neuropil (unit-variance OU at frame rate, tau 5 s) */
    stream ss = {key_of(c, (uint32_t)animal), ctr_of(session + 1, 0)};
    s->bleach_tau_s = c->bleach ? 60.0 * unif(ss, K_SESSION, 0, 10.0, 60.0) : INFINITY;
    bool run_state = unif(ss, K_SESSION, 2, 0.0, 1.0) < 0.5;
    double v = run_state ? a.mu_run : 0.0;
    const double rho_np = exp(-1.0 / (5.0 * c->rate_hz));
    for (int64_t t = 0; t < T; t++) {
        double e = gauss(ss, K_NEUROPIL, t);
        np[t] = t == 0 ? e : rho_np * np[t - 1] + sqrt(1.0 - rho_np * rho_np) * e;
    }
    const double p_switch = dt / a.dwell_s, ou_k = dt / a.tau_ou,
                 ou_s = a.sigma_ou * sqrt(2.0 * dt / a.tau_ou);
    const double share_e = sqrt(1.0 - a.input_share), share_u = sqrt(a.input_share);
    const double sigma = c->noise_nu * sqrt(c->rate_hz) / 100.0;
    int64_t k = 0;
    for (int64_t t = 0; t < T; t++) {
        double vsum = 0.0, rsum = 0.0;
        /* behaviour and latents for the O fine steps of frame t */
        for (int64_t o = 0; o < O; o++, k++) {
            if (unif(ss, K_SWITCH, k, 0.0, 1.0) < p_switch) run_state = !run_state;
            v += ((run_state ? a.mu_run : 0.0) - v) * ou_k + ou_s * gauss(ss, K_OU, k);
            speed[o] = v > 0.0 ? v : 0.0;
            vsum += speed[o];
            rsum += run_state ? 1.0 : 0.0;
            double u0 = speed[o] / 20.0 - a.mu_run / 40.0, u1 = run_state ? 0.5 : -0.5;
            rotate(ze, &a, D);
            rotate(zu, &a, D);
            for (int64_t j = 0; j < D / 2; j++)
                for (int64_t q = 0; q < 2; q++) {
                    int64_t d = 2 * j + q;
                    ze[d] += sqrt(1.0 - a.rho[j] * a.rho[j]) * gauss(ss, K_LATENT, k * D + d);
                    zu[d] += (1.0 - a.rho[j]) * 2.0 * (a.B[d * 2] * u0 + a.B[d * 2 + 1] * u1);
                }
            for (int64_t d = 0; d < D; d++) zbuf[o * D + d] = share_e * ze[d] + share_u * zu[d];
        }
        s->velocity[t] = (float)(vsum / (double)O);
        s->running[t] = (float)(rsum / (double)O);
        for (int64_t d = 0; d < D; d++) {
            double m = 0.0;
            for (int64_t o = 0; o < O; o++) m += zbuf[o * D + d];
            s->latents[t * D + d] = (float)(m / (double)O);
        }
        /* log rates (O, N) = Z (O, D) W' (D, N) */
        cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (int)O, (int)N, (int)D, 1.0, zbuf,
                    (int)D, s->loadings, (int)D, 0.0, logr, (int)N);
        double bleach = exp(-((double)t / c->rate_hz) / s->bleach_tau_s);
        for (int64_t i = 0; i < N; i++) {
            stream sn = {key_of(c, (uint32_t)animal), ctr_of(session + 1, i + 1)};
            double count = 0.0, dff = 0.0;
            for (int64_t o = 0; o < O; o++) {
                double lr = logr[o * N + i] + s->speed_gain[i] * speed[o] / 20.0 + offset[i];
                double mu = (lr < log(500.0) ? exp(lr) : 500.0) * dt; /* rates capped at 500 Hz */
                s->expected_spikes[i] += mu;
                double n = poisson(sn, (t * O + o), mu);
                count += n;
                double cal = calm_sim_calcium_step(&ca[i], n);
                dff += s->amplitude[i] * cal / (1.0 + cal / s->ksat[i]);
            }
            dff /= (double)O;
            double obs = bleach * (1.0 + dff + s->neuropil_w[i] * np[t]) - 1.0 +
                         sigma * gauss(sn, K_NOISE, t);
            s->spikes[t * N + i] = (float)count;
            s->dff_clean[t * N + i] = (float)dff;
            s->dff[t * N + i] = (float)obs;
            s->fluor[t * N + i] = (float)(s->f0[i] * (1.0 + obs));
        }
    }
    free(zbuf), free(ze), free(zu), free(ca), free(np), free(offset), free(logr), free(speed);
    animal_free(&a);
    return TESS_OK;
}

/* ---- writer -------------------------------------------------------------------------------- */

static herr_t put(hid_t loc, const char *name, hid_t type, int rank, const hsize_t *dims,
                  const void *data, bool chunked) {
    hid_t space = H5Screate_simple(rank, dims, NULL), dcpl = H5Pcreate(H5P_DATASET_CREATE);
    H5Pset_obj_track_times(dcpl, 0);
    if (chunked && dims[0] > 0) {
        hsize_t chunk[2] = {dims[0] < 256 ? dims[0] : 256, rank > 1 ? dims[1] : 1};
        if (rank > 1 && chunk[1] == 0) chunk[1] = 1;
        H5Pset_chunk(dcpl, rank, chunk);
        H5Pset_deflate(dcpl, 4);
    }
    hid_t d = H5Dcreate2(loc, name, type, space, H5P_DEFAULT, dcpl, H5P_DEFAULT);
    herr_t e = d >= 0 ? H5Dwrite(d, type, H5S_ALL, H5S_ALL, H5P_DEFAULT, data) : -1;
    if (d >= 0) H5Dclose(d);
    H5Pclose(dcpl);
    H5Sclose(space);
    return e;
}

static herr_t attr_f64(hid_t loc, const char *name, double x) {
    hid_t sp = H5Screate(H5S_SCALAR), a = H5Acreate2(loc, name, H5T_NATIVE_DOUBLE, sp,
                                                     H5P_DEFAULT, H5P_DEFAULT);
    herr_t e = a >= 0 ? H5Awrite(a, H5T_NATIVE_DOUBLE, &x) : -1;
    if (a >= 0) H5Aclose(a);
    H5Sclose(sp);
    return e;
}

static herr_t attr_str(hid_t loc, const char *name, const char *text) {
    hid_t t = H5Tcopy(H5T_C_S1);
    H5Tset_size(t, strlen(text) + 1);
    hid_t sp = H5Screate(H5S_SCALAR), a = H5Acreate2(loc, name, t, sp, H5P_DEFAULT, H5P_DEFAULT);
    herr_t e = a >= 0 ? H5Awrite(a, t, text) : -1;
    if (a >= 0) H5Aclose(a);
    H5Sclose(sp);
    H5Tclose(t);
    return e;
}

static hid_t group(hid_t file, const char *name) {
    hid_t gcpl = H5Pcreate(H5P_GROUP_CREATE);
    H5Pset_obj_track_times(gcpl, 0);
    hid_t g = H5Gcreate2(file, name, H5P_DEFAULT, gcpl, H5P_DEFAULT);
    H5Pclose(gcpl);
    return g;
}

static herr_t write_all(hid_t f, const calm_sim_session *s, const calm_sim_config *c) {
    hsize_t T = (hsize_t)s->frames, N = (hsize_t)s->neurons, D = (hsize_t)s->latent_dim;
    hsize_t tn[2] = {T, N}, td[2] = {T, D}, nd[2] = {N, D}, t1[1] = {T}, n1[1] = {N};
    hid_t gc = group(f, "/gcamp"), gb = group(f, "/behavior"), gt = group(f, "/timing"),
          gr = group(f, "/truth");
    herr_t e = (gc < 0 || gb < 0 || gt < 0 || gr < 0) ? -1 : 0;
    double *ts = malloc((size_t)T * sizeof(double));
    if (!ts) e = -1;
    for (hsize_t t = 0; ts && t < T; t++) ts[t] = (double)t / s->rate_hz;
    if (e >= 0) e = put(gc, "trace_array", H5T_NATIVE_FLOAT, 2, tn, s->dff, true);
    if (e >= 0) e = put(gc, "trace_array_original", H5T_NATIVE_FLOAT, 2, tn, s->fluor, true);
    if (e >= 0) e = put(gb, "velocity", H5T_NATIVE_FLOAT, 1, t1, s->velocity, true);
    if (e >= 0) e = put(gb, "running", H5T_NATIVE_FLOAT, 1, t1, s->running, true);
    if (e >= 0) e = put(gt, "timestamp_confocal", H5T_NATIVE_DOUBLE, 1, t1, ts, false);
    if (e >= 0) e = put(gr, "spikes", H5T_NATIVE_FLOAT, 2, tn, s->spikes, true);
    if (e >= 0) e = put(gr, "dff", H5T_NATIVE_FLOAT, 2, tn, s->dff_clean, true);
    if (e >= 0) e = put(gr, "latents", H5T_NATIVE_FLOAT, 2, td, s->latents, true);
    if (e >= 0) e = put(gr, "loadings", H5T_NATIVE_DOUBLE, 2, nd, s->loadings, false);
    const struct {
        const char *name;
        const double *x;
    } per[] = {{"base_rate_hz", s->base_rate}, {"speed_gain", s->speed_gain},
               {"tau_d_s", s->tau_d},          {"tau_r_s", s->tau_r},
               {"amplitude", s->amplitude},    {"ksat", s->ksat},
               {"neuropil_weight", s->neuropil_w}, {"f0", s->f0},
               {"expected_spikes", s->expected_spikes}};
    for (size_t k = 0; k < sizeof per / sizeof per[0] && e >= 0; k++)
        e = put(gr, per[k].name, H5T_NATIVE_DOUBLE, 1, n1, per[k].x, false);
    if (e >= 0) e = attr_str(f, "format", "calm.sim");
    if (e >= 0) e = attr_str(f, "indicator", calm_sim_indicator_get(c->indicator)->name);
    const struct {
        const char *name;
        double x;
    } at[] = {{"seed", (double)c->seed},          {"animal", (double)s->animal},
              {"session", (double)s->session},    {"rate_hz", s->rate_hz},
              {"oversample", (double)c->oversample}, {"noise_nu", c->noise_nu},
              {"latent_dim", (double)s->latent_dim}, {"bleach_tau_s", s->bleach_tau_s},
              {"rate_median_hz", c->rate_median_hz}, {"neuropil", c->neuropil}};
    for (size_t k = 0; k < sizeof at / sizeof at[0] && e >= 0; k++)
        e = attr_f64(f, at[k].name, at[k].x);
    free(ts);
    hid_t gs[] = {gc, gb, gt, gr};
    for (int k = 0; k < 4; k++)
        if (gs[k] >= 0) H5Gclose(gs[k]);
    return e;
}

tess_status calm_sim_write(const char *path, const calm_sim_session *s, const calm_sim_config *c) {
    char tmp[4096];
    TESS_REQUIRE(strlen(path) + 5 < sizeof tmp, TESS_ERR_ARG, "path too long: '%s'", path);
    snprintf(tmp, sizeof tmp, "%s.tmp", path);
    hid_t fcpl = H5Pcreate(H5P_FILE_CREATE);
    H5Pset_obj_track_times(fcpl, 0);
    tess_h5_quiet q;
    tess_h5_quiet_begin(&q);
    hid_t f = H5Fcreate(tmp, H5F_ACC_TRUNC, fcpl, H5P_DEFAULT);
    H5Pclose(fcpl);
    herr_t e = f >= 0 ? write_all(f, s, c) : -1;
    herr_t ec = f >= 0 ? H5Fclose(f) : -1;
    char why[256];
    tess_h5_reason(why, sizeof why);
    tess_h5_quiet_end(&q);
    if (e < 0 || ec < 0) remove(tmp);
    TESS_REQUIRE(e >= 0 && ec >= 0, TESS_ERR_IO, "cannot write '%s': %s", tmp, why);
    TESS_REQUIRE(rename(tmp, path) == 0, TESS_ERR_IO, "cannot rename '%s' to '%s': %s", tmp, path,
                 strerror(errno));
    return TESS_OK;
}

/* ---- files and directories ------------------------------------------------------------------ */

tess_status calm_sim_path(char *buf, size_t n, const char *dir, const char *prefix,
                          int64_t animal, int64_t session) {
    int w = snprintf(buf, n, "%s/%s-a%03lld-s%02lld.h5", dir, prefix, (long long)animal,
                     (long long)session);
    TESS_REQUIRE(w > 0 && (size_t)w < n, TESS_ERR_ARG, "session path in '%s' too long", dir);
    return TESS_OK;
}

tess_status calm_sim_emit(const calm_sim_config *c, const char *dir, const char *prefix,
                          int64_t k) {
    int64_t animal = k / c->sessions, session = k % c->sessions;
    char path[4096];
    TESS_CHECK(calm_sim_path(path, sizeof path, dir, prefix, animal, session));
    calm_sim_session s;
    TESS_CHECK(calm_sim_generate(&s, c, animal, session));
    tess_status st = calm_sim_write(path, &s, c);
    calm_sim_session_free(&s);
    TESS_REQUIRE(st == TESS_OK, st, "writing animal %lld session %lld", (long long)animal,
                 (long long)session);
    return TESS_OK;
}

/* mkdir -p: every missing component of dir (the run directory may not exist yet). */
static tess_status make_dir(const char *dir) {
    char path[4096];
    TESS_REQUIRE(strlen(dir) < sizeof path && dir[0], TESS_ERR_IO, "bad directory name '%s'", dir);
    snprintf(path, sizeof path, "%s", dir);
    for (char *p = path + 1;; p++) {
        bool end = *p == '\0';
        if (*p == '/' || end) {
            *p = '\0';
            TESS_REQUIRE(mkdir(path, 0777) == 0 || errno == EEXIST, TESS_ERR_IO,
                         "cannot create directory '%s': %s", path, strerror(errno));
            if (end) break;
            *p = '/';
        }
    }
    struct stat sb;
    TESS_REQUIRE(stat(dir, &sb) == 0 && S_ISDIR(sb.st_mode), TESS_ERR_IO,
                 "'%s' exists and is not a directory", dir);
    return TESS_OK;
}

tess_status calm_sim_make_dir(const tess_group *g, const char *dir) {
    TESS_CHECK(tess_par_agree(g, g->rank == 0 ? make_dir(dir) : TESS_OK));
    return TESS_OK;
}

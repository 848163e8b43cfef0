/* test_sim - the calcium simulator's checks (apps/calm/sim.h, docs/calm.md "Simulator"):
 * the isolated-spike transient peaks at 1 and decays with tau_d; AR(2) deconvolution of a
 * noise-free frame-rate trace recovers the spikes exactly; spike counts match the integrated
 * rates within 3 sigma; the noise estimate nu_hat = 100 median|diff(dF/F)| / sqrt(f_s) of pure
 * white noise is within 15 % of 0.954 nu; ridge decoding of the running speed from about 1 s of
 * frames has R^2 > 0.5; sessions are pure functions of (config, animal, session); a written
 * session reads back through tess_traces_import_flavell; bad configs name the key. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/rng.h" /* tess_rng_* */
#include "io/traces.h" /* tess_traces_import_flavell */
#include "sim.h"
#include "tess_test.h"

static int dcmp(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* One spike at step 0 with a 1 ms step: peak of [Ca] and the decay constant of a log-linear fit
 * over [5 tau_r, 3 tau_d] sampled at 30 Hz. */
static void test_transient(void) {
    for (int ind = 0; ind < CALM_SIM_INDICATOR_COUNT; ind++) {
        const calm_sim_indicator_params *p = calm_sim_indicator_get((calm_sim_indicator)ind);
        double tau_d = 0.5 * (p->tau_d_lo + p->tau_d_hi), tau_r = 0.5 * (p->tau_r_lo + p->tau_r_hi);
        const double dt = 1e-3;
        calm_sim_calcium k;
        calm_sim_calcium_init(&k, tau_r, tau_d, dt);
        double peak = 0.0, sx = 0, sy = 0, sxx = 0, sxy = 0;
        int n = 0;
        int64_t steps = (int64_t)(4.0 * tau_d / dt);
        for (int64_t s = 0; s < steps; s++) {
            double ca = calm_sim_calcium_step(&k, s == 0 ? 1.0 : 0.0), t = (double)(s + 1) * dt;
            if (ca > peak) peak = ca;
            if (s % 33 == 0 && t > 5.0 * tau_r && t < 3.0 * tau_d) {
                double y = log(ca);
                sx += t, sy += y, sxx += t * t, sxy += t * y, n++;
            }
        }
        double slope = (n * sxy - sx * sy) / (n * sxx - sx * sx);
        TESS_TEST_CLOSE(peak, 1.0, 2e-3, 0.0, p->name);
        TESS_TEST_CHECK(fabs(-1.0 / slope - tau_d) < 0.10 * tau_d,
                        "%s: fitted tau_d %.4f s, true %.4f s", p->name, -1.0 / slope, tau_d);
    }
}

/* [Ca] sampled every dt (one step per frame) obeys the AR(2) exactly: the spikes come back. */
static void test_ar2(void) {
    const double tau_r = 0.08, tau_d = 1.5, dt = 1.0 / 30.0;
    const int64_t T = 3000;
    calm_sim_calcium k;
    calm_sim_calcium_init(&k, tau_r, tau_d, dt);
    double *ca = malloc((size_t)T * sizeof(double)), *n = malloc((size_t)T * sizeof(double)), g[2];
    tess_rng_key key = {7, 0};
    for (int64_t t = 0; t < T; t++) {
        double u = tess_rng_uniform(key, tess_rng_ctr(TESS_RNG_PURPOSE_TEST, 1), (uint64_t)t, 0, 1);
        n[t] = u < 0.05 ? 1.0 : (u < 0.06 ? 2.0 : 0.0);
        ca[t] = calm_sim_calcium_step(&k, n[t]);
    }
    calm_sim_ar2(tau_r, tau_d, dt, g);
    double gain = k.amp * (k.decay_d - k.decay_r), worst = 0.0;
    int64_t wrong = 0;
    for (int64_t t = 2; t < T; t++) {
        double rec = (ca[t] - g[0] * ca[t - 1] - g[1] * ca[t - 2]) / gain;
        worst = fmax(worst, fabs(rec - n[t - 1]));
        wrong += (int64_t)floor(rec + 0.5) != (int64_t)n[t - 1];
    }
    TESS_TEST_CHECK(wrong == 0 && worst < 1e-9, "AR(2) deconvolution: %lld wrong, worst %.3g",
                    (long long)wrong, worst);
    free(ca);
    free(n);
}

/* Spike counts against the integrated Poisson means; determinism; import of the written file. */
static void test_session(void) {
    calm_sim_config c = calm_sim_config_default();
    calm_sim_session s, again, other;
    TESS_TEST_CHECK(calm_sim_generate(&s, &c, 1, 0) == TESS_OK, "generate");
    double total = 0.0, mean = 0.0;
    int64_t inside = 0;
    for (int64_t i = 0; i < s.neurons; i++) {
        double cnt = 0.0;
        for (int64_t t = 0; t < s.frames; t++) cnt += s.spikes[t * s.neurons + i];
        total += cnt;
        mean += s.expected_spikes[i];
        inside += fabs(cnt - s.expected_spikes[i]) <= 3.0 * sqrt(s.expected_spikes[i]) + 1.0;
    }
    TESS_TEST_CHECK(fabs(total - mean) <= 3.0 * sqrt(mean),
                    "spike count %.0f, sum of lambda delta %.1f (3 sigma %.1f)", total, mean,
                    3.0 * sqrt(mean));
    TESS_TEST_CHECK(inside >= (int64_t)(0.95 * (double)s.neurons),
                    "%lld of %lld neurons within 3 sigma", (long long)inside,
                    (long long)s.neurons);
    TESS_TEST_CHECK(mean > 100.0, "the session has spikes (%.1f expected)", mean);

    TESS_TEST_CHECK(calm_sim_generate(&again, &c, 1, 0) == TESS_OK, "generate again");
    TESS_TEST_CHECK(again.neurons == s.neurons &&
                        memcmp(again.dff, s.dff, (size_t)(s.frames * s.neurons) * 4) == 0 &&
                        memcmp(again.velocity, s.velocity, (size_t)s.frames * 4) == 0,
                    "a session is a pure function of (config, animal, session)");
    TESS_TEST_CHECK(calm_sim_generate(&other, &c, 1, 1) == TESS_OK, "generate session 1");
    TESS_TEST_CHECK(other.neurons == s.neurons &&
                        memcmp(other.loadings, s.loadings,
                               (size_t)(s.neurons * s.latent_dim) * 8) == 0 &&
                        memcmp(other.dff, s.dff, (size_t)(s.frames * s.neurons) * 4) != 0,
                    "sessions of one animal share neurons and loadings, not activity");

    TESS_TEST_CHECK(calm_sim_write("sim-test.h5", &s, &c) == TESS_OK, "write");
    tess_traces_session r;
    TESS_TEST_CHECK(tess_traces_import_flavell(&r, "sim-test.h5", "trace_array",
                                               "velocity,running") == TESS_OK,
                    "import through io/traces.h");
    TESS_TEST_CHECK(r.frames == s.frames && r.neurons == s.neurons, "imported shape %lld x %lld",
                    (long long)r.frames, (long long)r.neurons);
    TESS_TEST_CLOSE(r.rate_hz, c.rate_hz, 1e-9, 1e-9, "imported frame rate");
    TESS_TEST_CHECK(r.traces && memcmp(r.traces, s.dff, (size_t)(s.frames * s.neurons) * 4) == 0,
                    "imported traces equal the observed dF/F");
    TESS_TEST_CHECK(r.behavior && r.behavior[2 * 5] == s.velocity[5] &&
                        r.behavior[2 * 5 + 1] == s.running[5],
                    "imported behaviour columns");
    free(r.traces);
    free(r.behavior);
    calm_sim_session_free(&s);
    calm_sim_session_free(&again);
    calm_sim_session_free(&other);
}

/* Silent neurons, no neuropil, no bleaching: dF/F is white noise of sigma = nu sqrt(f_s)/100. */
static void test_noise(void) {
    calm_sim_config c = calm_sim_config_default();
    c.frames = 4000, c.rate_hz = 30.0, c.oversample = 2, c.rate_median_hz = 0.0;
    c.neuropil = 0.0, c.bleach = false, c.noise_nu = 2.0;
    calm_sim_session s;
    TESS_TEST_CHECK(calm_sim_generate(&s, &c, 0, 0) == TESS_OK, "generate silent session");
    double *d = malloc((size_t)(s.frames - 1) * sizeof(double));
    int64_t bad = 0;
    double worst = 0.0;
    for (int64_t i = 0; i < s.neurons; i++) {
        for (int64_t t = 1; t < s.frames; t++)
            d[t - 1] = fabs((double)s.dff[t * s.neurons + i] - s.dff[(t - 1) * s.neurons + i]);
        qsort(d, (size_t)(s.frames - 1), sizeof *d, dcmp);
        double nu_hat = 100.0 * d[(s.frames - 1) / 2] / sqrt(c.rate_hz);
        double err = fabs(nu_hat - 0.954 * c.noise_nu) / (0.954 * c.noise_nu);
        worst = fmax(worst, err);
        bad += err > 0.15;
    }
    TESS_TEST_CHECK(bad == 0, "%lld neurons with nu_hat off by > 15 %% (worst %.1f %%)",
                    (long long)bad, 100.0 * worst);
    free(d);
    calm_sim_session_free(&s);
}

/* Solve (A + lam I) x = b for symmetric positive definite A (n x n) by Cholesky, in place. */
static void ridge_solve(double *A, double *b, int n, double lam) {
    for (int i = 0; i < n; i++) A[i * n + i] += lam;
    for (int j = 0; j < n; j++) {
        for (int k = 0; k < j; k++) A[j * n + j] -= A[j * n + k] * A[j * n + k];
        A[j * n + j] = sqrt(A[j * n + j]);
        for (int i = j + 1; i < n; i++) {
            for (int k = 0; k < j; k++) A[i * n + j] -= A[i * n + k] * A[j * n + k];
            A[i * n + j] /= A[j * n + j];
        }
    }
    for (int i = 0; i < n; i++) {
        for (int k = 0; k < i; k++) b[i] -= A[i * n + k] * b[k];
        b[i] /= A[i * n + i];
    }
    for (int i = n - 1; i >= 0; i--) {
        for (int k = i + 1; k < n; k++) b[i] -= A[k * n + i] * b[k];
        b[i] /= A[i * n + i];
    }
}

/* Speed at frame t from the z-scored traces of frames t .. t + L - 1 (about 1 s: calcium lags
 * the spikes), ridge lambda 10 fit on the first 70 % of the frames, R^2 on the rest. */
static double decode_r2(const calm_sim_session *s) {
    const int64_t T = s->frames, N = s->neurons, L = (int64_t)floor(s->rate_hz + 0.5) + 1;
    const int64_t rows = T - L + 1, train = (int64_t)(0.7 * (double)rows), F = N * L;
    double *mu = calloc((size_t)N, sizeof(double)), *sd = calloc((size_t)N, sizeof(double));
    for (int64_t t = 0; t < train; t++)
        for (int64_t i = 0; i < N; i++) mu[i] += s->dff[t * N + i] / (double)train;
    for (int64_t t = 0; t < train; t++)
        for (int64_t i = 0; i < N; i++)
            sd[i] += pow(s->dff[t * N + i] - mu[i], 2) / (double)train;
    for (int64_t i = 0; i < N; i++) sd[i] = sqrt(sd[i]) + 1e-12;
    double *x = malloc((size_t)F * sizeof(double)), *A = calloc((size_t)(F * F), sizeof(double));
    double *b = calloc((size_t)F, sizeof(double)), ym = 0.0;
    for (int64_t t = 0; t < train; t++) ym += s->velocity[t] / (double)train;
    for (int64_t t = 0; t < train; t++) {
        for (int64_t l = 0; l < L; l++)
            for (int64_t i = 0; i < N; i++)
                x[l * N + i] = (s->dff[(t + l) * N + i] - mu[i]) / sd[i];
        for (int64_t p = 0; p < F; p++) {
            b[p] += x[p] * (s->velocity[t] - ym);
            for (int64_t q = 0; q <= p; q++) A[p * F + q] += x[p] * x[q];
        }
    }
    for (int64_t p = 0; p < F; p++)
        for (int64_t q = p + 1; q < F; q++) A[p * F + q] = A[q * F + p];
    ridge_solve(A, b, (int)F, 10.0);
    double sse = 0.0, sst = 0.0, tm = 0.0;
    for (int64_t t = train; t < rows; t++) tm += s->velocity[t] / (double)(rows - train);
    for (int64_t t = train; t < rows; t++) {
        double p = ym;
        for (int64_t l = 0; l < L; l++)
            for (int64_t i = 0; i < N; i++)
                p += b[l * N + i] * (s->dff[(t + l) * N + i] - mu[i]) / sd[i];
        sse += pow(p - s->velocity[t], 2);
        sst += pow(s->velocity[t] - tm, 2);
    }
    free(mu), free(sd), free(x), free(A), free(b);
    return 1.0 - sse / sst;
}

static void test_decoding(void) {
    calm_sim_config c = calm_sim_config_default();
    c.frames = 3000, c.neurons_min = 100, c.neurons_max = 150, c.population = 300;
    double mean = 0.0;
    const int animals = 3;
    for (int a = 0; a < animals; a++) {
        calm_sim_session s;
        TESS_TEST_CHECK(calm_sim_generate(&s, &c, a, 0) == TESS_OK, "generate animal %d", a);
        double r2 = decode_r2(&s);
        printf("speed decoding, animal %d (%lld neurons): R^2 = %.3f\n", a,
               (long long)s.neurons, r2);
        mean += r2 / animals;
        calm_sim_session_free(&s);
    }
    TESS_TEST_CHECK(mean > 0.5, "mean speed-decoding R^2 %.3f over %d animals", mean, animals);
}

static void test_config(void) {
    calm_sim_config c = calm_sim_config_default();
    TESS_TEST_CHECK(calm_sim_config_check(&c) == TESS_OK, "the default config is valid");
    c.latent_dim = 7;
    TESS_TEST_CHECK(calm_sim_config_check(&c) == TESS_ERR_CONFIG, "odd latent_dim refused");
    c = calm_sim_config_default();
    c.population = c.neurons_max - 1;
    TESS_TEST_CHECK(calm_sim_config_check(&c) == TESS_ERR_CONFIG, "population < neurons_max");
}

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    test_transient();
    test_ar2();
    test_session();
    test_noise();
    test_decoding();
    test_config();
    int rc = tess_test_finish("test_sim");
    MPI_Finalize();
    return rc;
}

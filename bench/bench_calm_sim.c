/* bench_calm_sim - the calcium simulator's throughput (apps/calm/sim.h) on one core against a
 * plain C loop of the same per-neuron recursion.
 *
 *   bench_calm_sim [--neurons 200] [--frames 2000] [--oversample 10] [--reps 3]
 *
 *   tessera  calm_sim_generate: behaviour, latents (D = 8), rates through dgemm, Poisson spikes
 *            by CDF inversion from Philox, double-exponential calcium, saturating indicator,
 *            frame averaging, neuropil, bleaching, noise, and the per-neuron parameter draws
 *   plain    one inline loop per neuron and fine step: log-rate = w . z + gain v + offset,
 *            Poisson inversion from a Philox uniform, the two calcium exponentials, saturation,
 *            frame averaging and a Box-Muller noise draw per frame; latents and speed
 *            precomputed sinusoids (no behaviour or latent dynamics, no parameter draws)
 * Rates are neuron-frames per CPU second of this process (tess_bench_cpu_now), the median of
 * --reps runs. Prints "key value" lines.
 */
#include <Random123/philox.h>
#include <math.h>
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench_common.h" /* tess_bench_* */
#include "sim.h"          /* calm_sim_* */

static double philox_u(uint32_t seed, uint64_t ctr, uint64_t i) {
    philox4x32_ctr_t c = {{(uint32_t)i, (uint32_t)(i >> 32), (uint32_t)ctr, (uint32_t)(ctr >> 32)}};
    philox4x32_key_t k = {{seed, 0}};
    philox4x32_ctr_t r = philox4x32(c, k);
    return ((double)(((uint64_t)r.v[0] << 21) ^ r.v[1]) + 0.5) / 9007199254740992.0;
}

/* The plain loop; returns a checksum so the work is not optimised away. The latents and the
 * speed of every fine step are precomputed (sinusoids), as the simulator computes them once per
 * step for all neurons. */
static double plain(int64_t N, int64_t T, int64_t O, double rate_hz) {
    enum { D = 8 };
    const int64_t K = T * O;
    const double dt = 1.0 / (O * rate_hz), dd = exp(-dt / 1.5), dr = exp(-dt / 0.08), A = 1.3;
    double *z = malloc(sizeof(double) * (size_t)(K * D)), *v = malloc(sizeof(double) * (size_t)K);
    if (!z || !v) return NAN;
    for (int64_t k = 0; k < K; k++) {
        v[k] = 1.0 + sin(0.01 * k);
        for (int d = 0; d < D; d++) z[k * D + d] = sin(0.001 * k * (d + 1));
    }
    double sum = 0.0, w[D];
    for (int64_t n = 0; n < N; n++) {
        for (int d = 0; d < D; d++) w[d] = 0.3 * sin((double)(n * D + d));
        double c = 0.0, y = 0.0, gain = 0.1 * cos((double)n), off = log(0.5) - 0.2;
        for (int64_t t = 0; t < T; t++) {
            double acc = 0.0;
            for (int64_t o = 0; o < O; o++) {
                int64_t k = t * O + o;
                double lr = off + gain * v[k];
                for (int d = 0; d < D; d++) lr += w[d] * z[k * D + d];
                double mu = exp(lr) * dt, u = philox_u(1, (uint64_t)n, (uint64_t)k);
                double p = exp(-mu), cdf = p, spikes = 0.0;
                while (u > cdf && spikes < 200.0) spikes += 1.0, p *= mu / spikes, cdf += p;
                c = c * dd + spikes * A;
                y = y * dr + spikes * A;
                double ca = c - y;
                acc += 0.2 * ca / (1.0 + ca / 10.0);
            }
            double u1 = philox_u(2, (uint64_t)n, (uint64_t)t), u2 = philox_u(3, (uint64_t)n, (uint64_t)t);
            sum += acc / (double)O + 0.03 * sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2);
        }
    }
    free(z);
    free(v);
    return sum;
}

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    int64_t N = 200, T = 2000, O = 10;
    int reps = 3;
    for (int i = 1; i + 1 < argc; i += 2) {
        if (!strcmp(argv[i], "--neurons")) N = atoll(argv[i + 1]);
        else if (!strcmp(argv[i], "--frames")) T = atoll(argv[i + 1]);
        else if (!strcmp(argv[i], "--oversample")) O = atoll(argv[i + 1]);
        else if (!strcmp(argv[i], "--reps")) reps = atoi(argv[i + 1]);
    }
    tess_bench_blas_setup(1);
    calm_sim_config c = calm_sim_config_default();
    c.animals = 1, c.sessions = 1, c.frames = T, c.oversample = O;
    c.neurons_min = c.neurons_max = N, c.population = N;
    double ts[16], tp[16], check = 0.0;
    int64_t neurons = 0;
    if (reps > 16) reps = 16;
    for (int r = 0; r < reps; r++) {
        calm_sim_session s;
        double t0 = tess_bench_cpu_now();
        if (calm_sim_generate(&s, &c, 0, 0) != TESS_OK) return 1;
        ts[r] = tess_bench_cpu_now() - t0;
        neurons = s.neurons;
        calm_sim_session_free(&s);
        t0 = tess_bench_cpu_now();
        check += plain(N, T, O, c.rate_hz);
        tp[r] = tess_bench_cpu_now() - t0;
    }
    double a = tess_bench_median(ts, reps), b = tess_bench_median(tp, reps);
    printf("sim_neurons %lld\nsim_frames %lld\nsim_oversample %lld\n", (long long)neurons,
           (long long)T, (long long)O);
    printf("sim_tessera_neuron_frames_per_s %.4g\n", (double)(neurons * T) / a);
    printf("sim_plain_neuron_frames_per_s %.4g\n", (double)(N * T) / b);
    printf("sim_ratio_tessera_over_plain %.3f\n", ((double)(neurons * T) / a) / ((double)(N * T) / b));
    printf("sim_plain_checksum %.6g\n", check);
    MPI_Finalize();
    return 0;
}

/* test_zo_chain - the zo app's Markov noise sources (apps/zo/chain.h).
 *   - sticky chain: the TV mixing time of p = 1 - 4^(-1/tau) is exactly tau for tau in
 *     {1, 2, 3, 7, 16, 100, 1000}; the random-access state equals the sequential one;
 *   - empirical mixing (tau = 20, n = 16, 400000 steps, fixed seed): P(Z_{t+k} = Z_t) =
 *     r^k + (1 - r^k)/n with r = 1 - p, so the autocorrelation r^k of the state indicators is
 *     estimated at lags 1, tau/2, tau, 2 tau within 0.03 of r^k (at lag tau: 1/4, the mixing
 *     threshold); every state's frequency is within 15% of 1/n (about 4.5 standard errors at
 *     the chain's integrated time ~ 29);
 *   - AR(1): lag-1 and lag-tau correlations of y match rho and rho^tau = 1/4 within 0.03, and the
 *     quantised states are uniform as above;
 *   - segments: advancing in pieces gives the same path as one long advance; reset replays it.
 */
#include <math.h>
#include <mpi.h>
#include <stdlib.h>
#include <string.h>

#include "chain.h"     /* zoapp_chain_* */
#include "tess_test.h" /* TESS_TEST_* */

enum { N = 400000 };

static void check_uniform(const int32_t *z, int64_t n, int64_t ns, const char *what) {
    int64_t cnt[64] = {0};
    for (int64_t t = 0; t < n; t++) cnt[z[t]]++;
    double worst = 0.0;
    for (int64_t s = 0; s < ns; s++) {
        double dev = fabs((double)cnt[s] - (double)n / (double)ns) / ((double)n / (double)ns);
        worst = dev > worst ? dev : worst;
    }
    TESS_TEST_CHECK(worst < 0.15, "%s: state frequencies deviate by %.3f (relative) from uniform",
                    what, worst);
}

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    const double taus[] = {1, 2, 3, 7, 16, 100, 1000};
    for (size_t i = 0; i < sizeof taus / sizeof taus[0]; i++) {
        double p = 1.0 - pow(4.0, -1.0 / taus[i]);
        TESS_TEST_CHECK(zoapp_chain_sticky_tau(p) == (int64_t)taus[i],
                        "sticky tau: %lld from p = %g, expected %g",
                        (long long)zoapp_chain_sticky_tau(p), p, taus[i]);
    }
    zoapp_chain c, c2;
    const tess_rng_key key = {.seed = 2024, .stream = 7};
    const int64_t ns = 16;
    TESS_TEST_CHECK(zoapp_chain_init(&c, ZOAPP_CHAIN_STICKY, ns, 20.0, key, N) == TESS_OK, "init");
    TESS_TEST_CHECK(zoapp_chain_init(&c2, ZOAPP_CHAIN_STICKY, ns, 20.0, key, 1000) == TESS_OK,
                    "init 2");
    zoapp_chain_advance(&c, N);
    int ok = 1;
    for (int64_t t = 0; t < 3000; t += 7) ok &= zoapp_chain_sticky_at(&c, t) == c.seg[t];
    TESS_TEST_CHECK(ok, "random access differs from the sequential chain");
    for (int64_t t0 = 0; t0 < 5000; t0 += 1000) { /* in pieces of 1000, with a final short one */
        zoapp_chain_advance(&c2, 1000);
        ok &= memcmp(c2.seg, c.seg + t0, 1000 * sizeof *c2.seg) == 0;
    }
    TESS_TEST_CHECK(ok, "segments differ from one long advance");
    zoapp_chain_reset(&c2);
    zoapp_chain_advance(&c2, 1000);
    TESS_TEST_CHECK(memcmp(c2.seg, c.seg, 1000 * sizeof *c2.seg) == 0, "reset does not replay");
    const double r = 1.0 - c.p;
    const int64_t lags[4] = {1, 10, 20, 40};
    for (int l = 0; l < 4; l++) {
        int64_t k = lags[l], same = 0;
        for (int64_t t = 0; t + k < N; t++) same += c.seg[t] == c.seg[t + k];
        double pk = (double)same / (double)(N - k);
        double rk = (pk - 1.0 / (double)ns) / (1.0 - 1.0 / (double)ns); /* estimate of r^k */
        TESS_TEST_CLOSE(rk, pow(r, (double)k), 0.03, 0.0, "sticky autocorrelation");
    }
    check_uniform(c.seg, N, ns, "sticky");
    zoapp_chain_free(&c);
    zoapp_chain_free(&c2);

    TESS_TEST_CHECK(zoapp_chain_init(&c, ZOAPP_CHAIN_AR1, ns, 20.0, key, N) == TESS_OK, "ar1");
    double *y = malloc(N * sizeof *y);
    for (int64_t t = 0; t < N; t++) {
        zoapp_chain_next(&c);
        y[t] = c.y;
    }
    zoapp_chain_reset(&c);
    zoapp_chain_advance(&c, N);
    const int64_t alag[2] = {1, 20};
    for (int l = 0; l < 2; l++) {
        double sxy = 0.0, sxx = 0.0;
        for (int64_t t = 0; t + alag[l] < N; t++) {
            sxy += y[t] * y[t + alag[l]];
            sxx += y[t] * y[t];
        }
        TESS_TEST_CLOSE(sxy / sxx, pow(c.rho, (double)alag[l]), 0.03, 0.0, "AR(1) correlation");
    }
    check_uniform(c.seg, N, ns, "AR(1)");
    free(y);
    zoapp_chain_free(&c);
    TESS_TEST_CHECK(zoapp_chain_init(&c, ZOAPP_CHAIN_STICKY, ns, 0.5, key, 10) == TESS_ERR_CONFIG,
                    "tau < 1 accepted");
    tess_error_clear();
    int rc = tess_test_finish("zo_chain");
    MPI_Finalize();
    return rc;
}

/* test_gcfl.c - GCFL's clustering (apps/fedkalter/gcfl.h) on hand-made update vectors:
 *   the Stoer-Wagner cut equals the brute-force minimum over all bipartitions of random complete
 *   graphs of 2..8 vertices, and the returned sides have that weight, vertex 0 on the true side;
 *   fk_gcfl_step: 5 clients whose updates point two ways (0, 2, 4 vs 1, 3) with a small mean
 *   and large norms split into {0, 2, 4} and {1, 3} after the warm-up, not at it; a large mean,
 *   small norms, or a cluster of 2 do not split; a later cluster keeps its order after a split.
 *   fk_gcfl_norms: the rule's two norms per cluster against hand values, and they are the values
 *   the rule compares (eps at the logged norm: no split; one ulp past it: split).
 *   GCFL+: fk_gcfl_dtw against hand values and the minimum over every monotone warping path of
 *   random sequences (length 1..5); fk_gcflplus_step waits for T norms, not in the warm-up,
 *   splits by the norm dynamics ({0, 2, 4} growing vs {1, 3} flat, although their directions
 *   would cut otherwise), keeps a sliding window, restarts the sequences after a split, and
 *   splits at most one cluster per round. */
#include <math.h>
#include <stdlib.h>

#include "core/rng.h" /* tess_rng_uniform */
#include "gcfl.h"
#include "tess_test.h"

static double cut_weight(const double *w, int64_t n, const bool *side) {
    double s = 0.0;
    for (int64_t i = 0; i < n; i++)
        for (int64_t j = i + 1; j < n; j++) s += side[i] != side[j] ? w[i * n + j] : 0.0;
    return s;
}

static void test_min_cut(void) {
    for (int64_t n = 2; n <= 8; n++) {
        for (uint32_t seed = 1; seed <= 20; seed++) {
            double w[64];
            const tess_rng_key key = {seed, (uint32_t)n};
            for (int64_t i = 0; i < n; i++) {
                w[i * n + i] = 5.0; /* ignored */
                for (int64_t j = i + 1; j < n; j++)
                    w[i * n + j] = w[j * n + i] = tess_rng_uniform(key, 0, (uint64_t)(i * n + j), 0, 2);
            }
            double brute = INFINITY;
            for (int64_t mask = 1; mask < (1 << n) - 1; mask += 2) { /* vertex 0 on one side */
                bool s[8];
                for (int64_t i = 0; i < n; i++) s[i] = (mask >> i) & 1;
                brute = fmin(brute, cut_weight(w, n, s));
            }
            bool side[8];
            const double got = fk_gcfl_min_cut(w, n, side);
            int64_t ntrue = 0;
            for (int64_t i = 0; i < n; i++) ntrue += side[i];
            TESS_TEST_CHECK(fabs(got - brute) <= 1e-12, "n %lld seed %u: cut %.17g, brute force "
                            "%.17g", (long long)n, seed, got, brute);
            TESS_TEST_CHECK(fabs(cut_weight(w, n, side) - brute) <= 1e-12, "n %lld seed %u: the "
                            "sides cut %.17g", (long long)n, seed, cut_weight(w, n, side));
            TESS_TEST_CHECK(side[0] && ntrue < n, "n %lld seed %u: vertex 0 on the true side of "
                            "a proper cut", (long long)n, seed);
        }
    }
}

enum { L = 3 };

/* clients 0, 2, 4 move by +1 along e0, clients 1, 3 by -1.5 (and 0.01 k along e1): the mean
 * update is 0 along e0 and 0.02 along e1, the norms 1 to 1.5 (times scale) */
static void two_way(double *dw, double scale) {
    for (int64_t k = 0; k < 5; k++) {
        dw[k * L + 0] = (k % 2 == 0 ? 1.0 : -1.5) * scale;
        dw[k * L + 1] = 0.01 * (double)k * scale;
        dw[k * L + 2] = 0.0;
    }
}

static void test_step(void) {
    double dw[5 * L];
    int64_t cl[5] = {0, 0, 0, 0, 0}, ncl = 1;
    two_way(dw, 1.0);
    TESS_TEST_CHECK(fk_gcfl_step(cl, &ncl, dw, 5, L, 20, 20, 0.05, 0.1) == 0 && ncl == 1,
                    "no split at the warm-up's last round");
    TESS_TEST_CHECK(fk_gcfl_step(cl, &ncl, dw, 5, L, 21, 20, 0.01, 0.1) == 0 && ncl == 1,
                    "no split: mean norm 0.02 >= eps1 0.01");
    TESS_TEST_CHECK(fk_gcfl_step(cl, &ncl, dw, 5, L, 21, 20, 0.05, 2.0) == 0 && ncl == 1,
                    "no split: max norm 1.5 <= eps2 2");
    TESS_TEST_CHECK(fk_gcfl_step(cl, &ncl, dw, 5, L, 21, 20, 0.05, 0.1) == 1 && ncl == 2,
                    "split after the warm-up");
    const int64_t want[5] = {0, 1, 0, 1, 0};
    for (int k = 0; k < 5; k++) TESS_TEST_CHECK(cl[k] == want[k], "client %d in cluster %lld", k,
                                                (long long)cl[k]);
    /* clusters {0,2,4} and {1,3}: {1,3} has 2 clients and never splits; {0,2,4} with 0 against
     * 2, 4 splits into {0} and {2,4}, and {1,3} moves from id 1 to id 2 */
    for (int64_t i = 0; i < 5 * L; i++) dw[i] = 0.0;
    dw[0 * L + 0] = 1.0, dw[2 * L + 1] = 1.0, dw[4 * L + 1] = 1.0, dw[2 * L + 0] = -0.25;
    dw[4 * L + 0] = -0.25, dw[2 * L + 1] = -0.3, dw[4 * L + 1] = -0.3, dw[0 * L + 1] = 0.6;
    dw[1 * L + 0] = 1.0, dw[3 * L + 0] = -1.0;
    TESS_TEST_CHECK(fk_gcfl_step(cl, &ncl, dw, 5, L, 22, 20, 0.5, 0.1) == 1 && ncl == 3,
                    "one split of 3, the pair kept: %lld clusters", (long long)ncl);
    const int64_t want2[5] = {0, 2, 1, 2, 1};
    for (int k = 0; k < 5; k++) TESS_TEST_CHECK(cl[k] == want2[k], "after the second split: "
                                                "client %d in cluster %lld", k, (long long)cl[k]);
}

/* fk_gcfl_norms against hand values of two_way's updates, one cluster and {0, 2, 4} / {1, 3} /
 * an empty third; the logged norms are the rule's: eps1 just above the mean norm (eps2 just
 * below the largest) splits, eps1 equal to it (eps2 equal to it) does not */
static void test_norms(void) {
    double dw[5 * L], mean[3], max[3];
    int64_t size[3], one[5] = {0, 0, 0, 0, 0};
    two_way(dw, 1.0);
    fk_gcfl_norms(one, 1, dw, 5, L, mean, max, size);
    /* mean update (0, 0.02, 0); largest update client 3's (-1.5, 0.03) */
    TESS_TEST_CHECK(size[0] == 5 && fabs(mean[0] - 0.02) <= 1e-15 &&
                    fabs(max[0] - sqrt(2.25 + 0.0009)) <= 1e-15,
                    "one cluster: %lld clients, mean norm %.17g (want 0.02), largest %.17g (want "
                    "sqrt 2.2509)", (long long)size[0], mean[0], max[0]);
    const int64_t two[5] = {0, 1, 0, 1, 0};
    fk_gcfl_norms(two, 3, dw, 5, L, mean, max, size);
    TESS_TEST_CHECK(size[0] == 3 && fabs(mean[0] - sqrt(1.0004)) <= 1e-15 &&
                    fabs(max[0] - sqrt(1.0016)) <= 1e-15, "{0,2,4}: %lld, %.17g, %.17g",
                    (long long)size[0], mean[0], max[0]);
    TESS_TEST_CHECK(size[1] == 2 && fabs(mean[1] - sqrt(2.2504)) <= 1e-15 &&
                    fabs(max[1] - sqrt(2.2509)) <= 1e-15, "{1,3}: %lld, %.17g, %.17g",
                    (long long)size[1], mean[1], max[1]);
    TESS_TEST_CHECK(size[2] == 0 && mean[2] == 0.0 && max[2] == 0.0, "empty cluster: %lld, %g, %g",
                    (long long)size[2], mean[2], max[2]);
    fk_gcfl_norms(one, 1, dw, 5, L, mean, max, size);
    int64_t cl[5] = {0, 0, 0, 0, 0}, ncl = 1;
    TESS_TEST_CHECK(fk_gcfl_step(cl, &ncl, dw, 5, L, 21, 20, mean[0], 0.1) == 0,
                    "eps1 = the logged mean norm: no split");
    TESS_TEST_CHECK(fk_gcfl_step(cl, &ncl, dw, 5, L, 21, 20, 1.5, max[0]) == 0,
                    "eps2 = the logged largest norm: no split");
    TESS_TEST_CHECK(fk_gcfl_step(cl, &ncl, dw, 5, L, 21, 20, nextafter(mean[0], 1.0),
                                 nextafter(max[0], 0.0)) == 1 && ncl == 2,
                    "eps1 just above the mean norm and eps2 just below the largest: split");
}

/* the cheapest monotone warping path from (i, j) to (n-1, n-1), every path enumerated */
static double path_min(const double *x, const double *y, int64_t n, int64_t i, int64_t j) {
    const double d = (x[i] - y[j]) * (x[i] - y[j]);
    if (i == n - 1 && j == n - 1) return d;
    double best = INFINITY;
    if (i + 1 < n) best = fmin(best, path_min(x, y, n, i + 1, j));
    if (j + 1 < n) best = fmin(best, path_min(x, y, n, i, j + 1));
    if (i + 1 < n && j + 1 < n) best = fmin(best, path_min(x, y, n, i + 1, j + 1));
    return d + best;
}

static void test_dtw(void) {
    const double a[3] = {1, 2, 3}, b[3] = {2, 3, 4}, c[3] = {0, 0, 1}, e[3] = {0, 1, 1};
    TESS_TEST_CHECK(fabs(fk_gcfl_dtw(a, b, 3) - sqrt(2.0)) <= 1e-15, "dtw(123, 234) = %.17g, "
                    "want sqrt 2 (path 1-2, 2-2, 3-3, 3-4)", fk_gcfl_dtw(a, b, 3));
    TESS_TEST_CHECK(fk_gcfl_dtw(c, e, 3) == 0.0, "dtw(001, 011) = %g, want 0 (warped)",
                    fk_gcfl_dtw(c, e, 3));
    TESS_TEST_CHECK(fabs(fk_gcfl_dtw(a, a + 2, 1) - 2.0) <= 1e-15, "length 1: |1 - 3|");
    for (int64_t n = 1; n <= 5; n++) {
        for (uint32_t seed = 1; seed <= 10; seed++) {
            double x[5], y[5];
            const tess_rng_key key = {seed, (uint32_t)(100 + n)};
            for (int64_t i = 0; i < n; i++) {
                x[i] = tess_rng_uniform(key, 0, (uint64_t)i, -1, 1);
                y[i] = tess_rng_uniform(key, 1, (uint64_t)i, -1, 1);
            }
            const double want = sqrt(path_min(x, y, n, 0, 0)), got = fk_gcfl_dtw(x, y, n);
            TESS_TEST_CHECK(fabs(got - want) <= 1e-14, "n %lld seed %u: dtw %.17g, every path "
                            "%.17g", (long long)n, seed, got, want);
            TESS_TEST_CHECK(got == fk_gcfl_dtw(y, x, n), "n %lld seed %u: not symmetric",
                            (long long)n, seed);
        }
    }
}

/* round r's updates: clients 0, 2, 4 of norm r (along +e0), 1 and 3 of norm 1 (-e0, then +e0
 * from round 3 on, so that GCFL's cosine cut would not give {0, 2, 4} vs {1, 3} in the last) */
static void norms(double *dw, int64_t r) {
    for (int64_t k = 0; k < 5; k++) {
        dw[k * L + 0] = k % 2 == 0 ? (double)r : (r < 3 ? -1.0 : 1.0);
        dw[k * L + 1] = dw[k * L + 2] = 0.0;
    }
}

static void test_plus_step(void) {
    double dw[5 * L], seq[5 * 3];
    int64_t cl[5] = {0, 0, 0, 0, 0}, ncl = 1, count = 0;
    /* eps1 1e9, eps2 0: GCFL's rule passes; T = 3 norms needed */
    for (int64_t r = 1; r <= 2; r++) {
        norms(dw, r);
        TESS_TEST_CHECK(fk_gcflplus_step(cl, &ncl, dw, seq, &count, 5, L, 3, 20 + r, 20, 1e9,
                                         0.0) == 0 && ncl == 1 && count == r,
                        "round %lld: %lld norms of 3, no split", (long long)r, (long long)count);
    }
    norms(dw, 3);
    TESS_TEST_CHECK(fk_gcflplus_step(cl, &ncl, dw, seq, &count, 5, L, 3, 20, 20, 1e9, 0.0) == 0 &&
                    ncl == 1 && count == 3, "no split in the warm-up, 3 norms kept");
    TESS_TEST_CHECK(seq[0] == 1 && seq[1] == 2 && seq[2] == 3 && seq[3] == 1 && seq[5] == 1,
                    "sequences 1 2 3 and 1 1 1: %g %g %g / %g %g %g", seq[0], seq[1], seq[2],
                    seq[3], seq[4], seq[5]);
    TESS_TEST_CHECK(fk_gcflplus_step(cl, &ncl, dw, seq, &count, 5, L, 3, 23, 20, 0.5, 0.0) == 0 &&
                    ncl == 1, "no split: the mean update's norm is above eps1");
    TESS_TEST_CHECK(seq[0] == 2 && seq[1] == 3 && seq[2] == 3, "sliding window: %g %g %g",
                    seq[0], seq[1], seq[2]);
    TESS_TEST_CHECK(fk_gcflplus_step(cl, &ncl, dw, seq, &count, 5, L, 3, 24, 20, 1e9, 0.0) == 1 &&
                    ncl == 2 && count == 0, "split past the warm-up, sequences restarted");
    const int64_t want[5] = {0, 1, 0, 1, 0};
    for (int k = 0; k < 5; k++) TESS_TEST_CHECK(cl[k] == want[k], "GCFL+: client %d in cluster "
                                                "%lld", k, (long long)cl[k]);
    /* two clusters of 3 that both pass the rule (T = 1: D = |norm difference|): the first
     * splits {0, 1} | {2}, the second waits for the next round */
    int64_t c6[6] = {0, 0, 0, 1, 1, 1};
    double d6[6 * L] = {0}, s6[6];
    const double nrm[6] = {1, 1, 3, 1, 1, 3};
    for (int k = 0; k < 6; k++) d6[k * L] = nrm[k];
    ncl = 2, count = 0;
    TESS_TEST_CHECK(fk_gcflplus_step(c6, &ncl, d6, s6, &count, 6, L, 1, 21, 20, 1e9, 0.0) == 1 &&
                    ncl == 3, "one split per round: %lld clusters", (long long)ncl);
    const int64_t w1[6] = {0, 0, 1, 2, 2, 2}, w2[6] = {0, 0, 1, 2, 2, 3};
    for (int k = 0; k < 6; k++) TESS_TEST_CHECK(c6[k] == w1[k], "first split: client %d in "
                                                "cluster %lld", k, (long long)c6[k]);
    TESS_TEST_CHECK(fk_gcflplus_step(c6, &ncl, d6, s6, &count, 6, L, 1, 22, 20, 1e9, 0.0) == 1 &&
                    ncl == 4, "the second cluster splits in the next round");
    for (int k = 0; k < 6; k++) TESS_TEST_CHECK(c6[k] == w2[k], "second split: client %d in "
                                                "cluster %lld", k, (long long)c6[k]);
}

int main(void) {
    test_min_cut();
    test_step();
    test_norms();
    test_dtw();
    test_plus_step();
    return tess_test_finish("fedkalter_gcfl");
}

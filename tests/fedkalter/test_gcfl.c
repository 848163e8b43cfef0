/* test_gcfl.c - GCFL's clustering (apps/fedkalter/gcfl.h) on hand-made update vectors:
 *   the Stoer-Wagner cut equals the brute-force minimum over all bipartitions of random complete
 *   graphs of 2..8 vertices, and the returned sides have that weight, vertex 0 on the true side;
 *   fk_gcfl_step: 5 clients whose updates point two ways (0, 2, 4 vs 1, 3) with a small mean
 *   and large norms split into {0, 2, 4} and {1, 3} after the warm-up, not at it; a large mean,
 *   small norms, or a cluster of 2 do not split; a later cluster keeps its order after a split. */
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

int main(void) {
    test_min_cut();
    test_step();
    return tess_test_finish("fedkalter_gcfl");
}

/* test_rng.c - Philox draws: known-answer vectors, determinism, shard invariance (in one process
 * and across the ranks of MPI_COMM_WORLD), moments within a stated tolerance, permutations, and
 * independence of streams and seeds. */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "core/rng.h" /* tess_rng_* */
#include "tess_test.h"

enum { N = 1001, NSTAT = 200000 };

static void test_known_answers(void) {
    /* Random123's kat_vectors for philox4x32_10. */
    uint32_t w[4];
    tess_rng_block((tess_rng_key){0, 0}, 0, 0, w);
    TESS_TEST_CHECK(w[0] == 0x6627e8d5u && w[1] == 0xe169c58du && w[2] == 0xbc57ac4cu &&
                        w[3] == 0x9b00dbd8u,
                    "zero vector: %08x %08x %08x %08x", w[0], w[1], w[2], w[3]);
    tess_rng_block((tess_rng_key){0xa4093822u, 0x299f31d0u}, 0x0370734413198a2eull,
                   0x85a308d3243f6a88ull, w);
    TESS_TEST_CHECK(w[0] == 0xd16cfe09u && w[1] == 0x94fdccebu && w[2] == 0x5001e420u &&
                        w[3] == 0x24126ea1u,
                    "pi vector: %08x %08x %08x %08x", w[0], w[1], w[2], w[3]);
    /* the bulk blocks: the pi vector, and every block of a run crossing 2^32 (the block's high
     * word) equal to the single ones */
    uint32_t bulk[4 * 37];
    tess_rng_blocks((tess_rng_key){0xa4093822u, 0x299f31d0u}, 0x0370734413198a2eull,
                    0x85a308d3243f6a88ull, 1, bulk);
    TESS_TEST_CHECK(bulk[0] == 0xd16cfe09u && bulk[3] == 0x24126ea1u, "bulk pi vector");
    const tess_rng_key k = {99, 5};
    const uint64_t c = tess_rng_ctr(TESS_RNG_PURPOSE_DROPOUT, 3), first = 0xFFFFFFF0ull;
    tess_rng_blocks(k, c, first, 37, bulk);
    int same = 1;
    for (int b = 0; b < 37; b++) {
        tess_rng_block(k, c, first + (uint64_t)b, w);
        same &= memcmp(w, bulk + 4 * b, sizeof w) == 0;
    }
    TESS_TEST_CHECK(same, "tess_rng_blocks equals tess_rng_block over 37 blocks across 2^32");
}

/* Fills of any sub-range equal the whole fill bitwise, and equal the single draws. */
static void test_shards(void) {
    tess_rng_key key = {7, 3};
    uint64_t ctr = tess_rng_ctr(TESS_RNG_PURPOSE_TEST, 11);
    static float whole_n[N], whole_u[N], part[N];
    tess_rng_fill_normal(key, ctr, 0, N, whole_n, 0.5f, 2.0f);
    tess_rng_fill_uniform(key, ctr, 0, N, whole_u, -1.0f, 1.0f);
    const int64_t cuts[] = {0, 1, 2, 5, 333, 334, 700, 999, N};
    for (size_t c = 0; c + 1 < sizeof cuts / sizeof cuts[0]; c++) {
        int64_t lo = cuts[c], n = cuts[c + 1] - cuts[c];
        tess_rng_fill_normal(key, ctr, lo, n, part, 0.5f, 2.0f);
        TESS_TEST_CHECK(memcmp(part, whole_n + lo, (size_t)n * sizeof(float)) == 0,
                        "normal shard [%lld, %lld)", (long long)lo, (long long)(lo + n));
        tess_rng_fill_uniform(key, ctr, lo, n, part, -1.0f, 1.0f);
        TESS_TEST_CHECK(memcmp(part, whole_u + lo, (size_t)n * sizeof(float)) == 0,
                        "uniform shard [%lld, %lld)", (long long)lo, (long long)(lo + n));
    }
    int same = 0;
    for (int64_t i = 0; i < N; i++) {
        same += (float)tess_rng_normal(key, ctr, (uint64_t)i, 0.5, 2.0) == whole_n[i];
        same += (float)tess_rng_uniform(key, ctr, (uint64_t)i, -1.0, 1.0) == whole_u[i];
    }
    TESS_TEST_CHECK(same == 2 * N, "single draws equal fill elements (%d of %d)", same, 2 * N);
    uint64_t u = tess_rng_u64(key, ctr, 17);
    TESS_TEST_CHECK(tess_rng_uniform(key, ctr, 17, 0.0, 1.0) == (double)(u >> 11) * 0x1p-53,
                    "uniform is the top 53 bits of u64");
    static float again[N];
    tess_rng_fill_normal(key, ctr, 0, N, again, 0.5f, 2.0f);
    TESS_TEST_CHECK(memcmp(again, whole_n, sizeof again) == 0, "deterministic");
}

/* Each rank fills its block of a global vector; the gathered vector equals a 1-rank fill. */
static void test_shards_mpi(void) {
    int rank, size;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    static float whole[N], gathered[N], mine[N];
    int counts[64], displs[64];
    for (int r = 0; r < size && r < 64; r++) {
        int64_t per = (N + size - 1) / size, lo = r * per, hi = lo + per < N ? lo + per : N;
        displs[r] = (int)(lo < N ? lo : N);
        counts[r] = (int)(hi > lo ? hi - lo : 0);
    }
    tess_rng_key key = {2024, 0};
    uint64_t ctr = tess_rng_ctr(TESS_RNG_PURPOSE_INIT, 0);
    tess_rng_fill_normal(key, ctr, displs[rank], counts[rank], mine, 0.0f, 0.02f);
    MPI_Allgatherv(mine, counts[rank], MPI_FLOAT, gathered, counts, displs, MPI_FLOAT,
                   MPI_COMM_WORLD);
    tess_rng_fill_normal(key, ctr, 0, N, whole, 0.0f, 0.02f);
    TESS_TEST_CHECK(memcmp(whole, gathered, sizeof whole) == 0,
                    "fill over %d ranks equals the 1-rank fill", size);
}

/* Sample mean and variance of NSTAT draws within 5 standard errors of the true values (a correct
 * generator fails this with probability below 1e-6 per check; the seed is fixed, so the test is
 * deterministic). Standard errors: mean sigma/sqrt(n); variance sqrt((mu4 - sigma^4) / n). */
static void test_moments(void) {
    static float x[NSTAT];
    tess_rng_key key = {99, 1};
    uint64_t ctr = tess_rng_ctr(TESS_RNG_PURPOSE_TEST, 1);
    double n = NSTAT;

    tess_rng_fill_normal(key, ctr, 0, NSTAT, x, 2.0f, 3.0f);
    double m = 0, v = 0;
    for (int i = 0; i < NSTAT; i++) m += x[i];
    m /= n;
    for (int i = 0; i < NSTAT; i++) v += (x[i] - m) * (x[i] - m);
    v /= n - 1;
    TESS_TEST_CLOSE(m, 2.0, 5 * 3.0 / sqrt(n), 0, "normal mean");
    TESS_TEST_CLOSE(v, 9.0, 5 * sqrt(2 * 81.0 / n), 0, "normal variance"); /* mu4 = 3 sigma^4 */

    tess_rng_fill_uniform(key, ctr + 1, 0, NSTAT, x, -1.0f, 3.0f);
    m = 0;
    v = 0;
    int inside = 0;
    for (int i = 0; i < NSTAT; i++) {
        m += x[i];
        inside += x[i] >= -1.0f && x[i] < 3.0f;
    }
    m /= n;
    for (int i = 0; i < NSTAT; i++) v += (x[i] - m) * (x[i] - m);
    v /= n - 1;
    double var = 16.0 / 12.0, mu4 = 256.0 / 80.0;
    TESS_TEST_CHECK(inside == NSTAT, "uniform in [a, b): %d of %d", inside, NSTAT);
    TESS_TEST_CLOSE(m, 1.0, 5 * sqrt(var / n), 0, "uniform mean");
    TESS_TEST_CLOSE(v, var, 5 * sqrt((mu4 - var * var) / n), 0, "uniform variance");
}

static void test_permutation(void) {
    enum { P = 1000 };
    static int64_t p[P], q[P];
    static int seen[P];
    tess_rng_key key = {5, 0};
    tess_rng_permutation(key, tess_rng_ctr(TESS_RNG_PURPOSE_DATA, 0), p, P);
    int ok = 1, fixed = 0;
    for (int i = 0; i < P; i++) {
        if (p[i] < 0 || p[i] >= P || seen[p[i]]++) ok = 0;
        fixed += p[i] == i;
    }
    TESS_TEST_CHECK(ok, "every index exactly once");
    TESS_TEST_CHECK(fixed < 10, "shuffled: %d fixed points (expected about 1)", fixed);
    tess_rng_permutation(key, tess_rng_ctr(TESS_RNG_PURPOSE_DATA, 0), q, P);
    TESS_TEST_CHECK(memcmp(p, q, sizeof p) == 0, "same seed and epoch, same order");
    tess_rng_permutation(key, tess_rng_ctr(TESS_RNG_PURPOSE_DATA, 1), q, P);
    TESS_TEST_CHECK(memcmp(p, q, sizeof p) != 0, "next epoch, another order");
    int64_t one = -1;
    tess_rng_permutation(key, 0, &one, 1);
    TESS_TEST_CHECK(one == 0, "n = 1");
    tess_rng_permutation(key, 0, NULL, 0);
}

/* Different streams, seeds or counters give unrelated values. */
static void test_independence(void) {
    static float a[N], b[N];
    uint64_t ctr = tess_rng_ctr(TESS_RNG_PURPOSE_TEST, 2);
    const tess_rng_key keys[] = {{1, 1}, {2, 0}, {1, 0}};
    tess_rng_fill_uniform((tess_rng_key){1, 0}, ctr, 0, N, a, 0.0f, 1.0f);
    for (int k = 0; k < 3; k++) {
        uint64_t c = k == 2 ? ctr + 1 : ctr;
        tess_rng_fill_uniform(keys[k], c, 0, N, b, 0.0f, 1.0f);
        int equal = 0;
        double dot = 0;
        for (int i = 0; i < N; i++) {
            equal += a[i] == b[i];
            dot += (a[i] - 0.5) * (b[i] - 0.5);
        }
        /* correlation of independent uniforms: sd 1/sqrt(N), tolerance 5 sd */
        double corr = dot / N * 12.0;
        TESS_TEST_CHECK(equal == 0 && fabs(corr) < 5.0 / sqrt(N),
                        "variant %d: %d equal values, correlation %.3f", k, equal, corr);
    }
}

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    test_known_answers();
    test_shards();
    test_shards_mpi();
    test_moments();
    test_permutation();
    test_independence();
    int rc = tess_test_finish_mpi("rng", MPI_COMM_WORLD);
    MPI_Finalize();
    return rc;
}

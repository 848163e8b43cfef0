/* test_layout.c - ownership arithmetic in one process, for 1..7 ranks: every element of every
 * size is owned exactly once, by the rank an independent rule names, and local shapes add up. */
#include <stdint.h>
#include <string.h>

#include "par/layout.h" /* tess_par_block_range, tess_par_numroc, tess_layout_* */
#include "tess_test.h"

enum { MAX_N = 200 };

/* Sizes worth checking for p ranks: empty, single, around p, odd, larger than MAX_N / 2. */
static int sizes_for(int p, int64_t *n) {
    int64_t cand[] = {0, 1, p - 1, p, p + 1, 2 * p + 3, 17, 100, 199};
    int k = 0;
    for (size_t i = 0; i < sizeof cand / sizeof cand[0]; i++)
        if (cand[i] >= 0) n[k++] = cand[i];
    return k;
}

static void check_block_range(int64_t n, int p) {
    int owned[MAX_N] = {0};
    int64_t block = (n + p - 1) / p, prev_hi = 0;
    for (int r = 0; r < p; r++) {
        int64_t lo, hi;
        tess_par_block_range(n, p, r, &lo, &hi);
        TESS_TEST_CHECK(lo == prev_hi && lo <= hi && hi <= n, "n=%lld p=%d r=%d: [%lld, %lld)",
                        (long long)n, p, r, (long long)lo, (long long)hi);
        TESS_TEST_CHECK(hi - lo == block || hi == n, "n=%lld p=%d r=%d: only the tail is short",
                        (long long)n, p, r);
        for (int64_t i = lo; i < hi && i < MAX_N; i++) {
            owned[i]++;
            /* The rule stated in layout.h: element i belongs to rank i / ceil(n/p). */
            TESS_TEST_CHECK(i / block == r, "n=%lld p=%d: element %lld on rank %d", (long long)n,
                            p, (long long)i, r);
        }
        prev_hi = hi;
    }
    TESS_TEST_CHECK(prev_hi == n, "n=%lld p=%d: ranges end at %lld", (long long)n, p,
                    (long long)prev_hi);
    int once = 1;
    for (int64_t i = 0; i < n; i++) once &= owned[i] == 1;
    TESS_TEST_CHECK(once, "n=%lld p=%d: every element owned exactly once", (long long)n, p);
}

/* NUMROC against counting: element i of a block-cyclic dimension is on process (i / nb) % p. */
static void check_numroc(int64_t n, int64_t nb, int p) {
    int64_t count[8] = {0}, total = 0;
    for (int64_t i = 0; i < n; i++) count[(i / nb) % p]++;
    for (int q = 0; q < p; q++) {
        int64_t got = tess_par_numroc(n, nb, q, p);
        TESS_TEST_CHECK(got == count[q], "numroc(n=%lld, nb=%lld, %d of %d) = %lld, expected %lld",
                        (long long)n, (long long)nb, q, p, (long long)got, (long long)count[q]);
        total += got;
    }
    TESS_TEST_CHECK(total == n, "numroc sums to n=%lld", (long long)n);
}

static void check_sharded_shapes(int p) {
    const int64_t global[3] = {5, p + 1, 3};
    for (int dim = 0; dim < 3; dim++) {
        int64_t sum = 0, next = 0;
        for (int r = 0; r < p; r++) {
            tess_layout l = tess_layout_sharded(dim, p, r);
            int64_t local[3], off[3], lo, hi;
            tess_layout_local_shape(&l, 3, global, local, off);
            tess_par_block_range(global[dim], p, r, &lo, &hi);
            int same = 1;
            for (int i = 0; i < 3; i++)
                same &= i == dim ? (local[i] == hi - lo && off[i] == lo)
                                 : (local[i] == global[i] && off[i] == 0);
            TESS_TEST_CHECK(same, "p=%d dim=%d r=%d: local shape and offset", p, dim, r);
            TESS_TEST_CHECK(off[dim] == next, "p=%d dim=%d r=%d: shards are contiguous", p, dim,
                            r);
            next = off[dim] + local[dim];
            sum += tess_layout_local_count(&l, 3, global);
        }
        TESS_TEST_CHECK(sum == 5 * (p + 1) * 3, "p=%d dim=%d: local counts add up", p, dim);
    }
    tess_layout rep = tess_layout_replicated();
    TESS_TEST_CHECK(tess_layout_local_count(&rep, 3, global) == 5 * (p + 1) * 3,
                    "replicated holds everything");
}

static void check_block_cyclic_shapes(int p) {
    const int64_t global[2] = {7, 11};
    for (int nprow = 1; nprow <= p; nprow++) {
        if (p % nprow) continue;
        int npcol = p / nprow;
        int64_t sum = 0;
        for (int r = 0; r < p; r++) {
            tess_layout l = tess_layout_block_cyclic(nprow, npcol, r / npcol, r % npcol, 2, 3);
            int64_t local[2];
            tess_layout_local_shape(&l, 2, global, local, NULL);
            TESS_TEST_CHECK(local[0] == tess_par_numroc(7, 2, r / npcol, nprow) &&
                                local[1] == tess_par_numroc(11, 3, r % npcol, npcol),
                            "grid %dx%d rank %d: local shape (%lld, %lld)", nprow, npcol, r,
                            (long long)local[0], (long long)local[1]);
            sum += tess_layout_local_count(&l, 2, global);
        }
        TESS_TEST_CHECK(sum == 77, "grid %dx%d: local counts add up to 77, got %lld", nprow,
                        npcol, (long long)sum);
    }
}

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    for (int p = 1; p <= 7; p++) {
        int64_t n[16];
        int k = sizes_for(p, n);
        for (int i = 0; i < k; i++) {
            check_block_range(n[i], p);
            for (int64_t nb = 1; nb <= 5; nb++) check_numroc(n[i], nb, p);
        }
        check_sharded_shapes(p);
        check_block_cyclic_shapes(p);
    }
    TESS_TEST_CHECK(strcmp(tess_layout_kind_name(TESS_LAYOUT_REPLICATED), "replicated") == 0 &&
                        strcmp(tess_layout_kind_name(TESS_LAYOUT_SHARDED), "sharded") == 0 &&
                        strcmp(tess_layout_kind_name(TESS_LAYOUT_BLOCK_CYCLIC), "block_cyclic") == 0,
                    "kind names");
    int rc = tess_test_finish("par_layout");
    MPI_Finalize();
    return rc;
}

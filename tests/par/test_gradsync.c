/* test_gradsync.c - bucketed overlapped gradient sync gives the mean over ranks for any bucket
 * size and any way of cutting the ready ranges, repeatedly (state resets per step), and refuses
 * ranges out of order. argv[1]: the registered world size. */
#include <stdlib.h>

#include "par/gradsync.h" /* tess_gradsync_* */
#include "par_test.h"

enum { N = 1000 };

/* Value of gradient i on rank r at step s: exact in float, so the mean is exact too. */
static float grad_value(int r, int s, int64_t i) { return (float)((r + 1) * 4 + s) + (float)(i % 17); }

int main(int argc, char **argv) {
    int rank, size;
    par_test_init(&argc, &argv, &rank, &size);
    tess_group *g = NULL;
    TESS_TEST_CHECK(tess_group_create(MPI_COMM_WORLD, "dp", &g) == TESS_OK, "group");
    float *grads = malloc(N * sizeof *grads);
    const int64_t buckets[] = {1, 7, 64, 333, N, 5 * N};
    const int64_t cuts[] = {1, 13, 250, N}; /* length of each ready range, from the end */
    for (size_t bi = 0; bi < sizeof buckets / sizeof buckets[0]; bi++) {
        tess_gradsync *gs = NULL;
        TESS_TEST_CHECK(tess_gradsync_create(&gs, g, grads, N, buckets[bi]) == TESS_OK, "create");
        for (int step = 0; step < 4; step++) {
            const int64_t cut = cuts[step];
            for (int64_t i = 0; i < N; i++) grads[i] = grad_value(rank, step, i);
            tess_status st = TESS_OK;
            for (int64_t hi = N; hi > 0 && step < 3 && st == TESS_OK; hi -= cut) /* step 3: finish alone */
                st = tess_gradsync_ready(gs, hi - cut > 0 ? hi - cut : 0, hi);
            TESS_TEST_CHECK(st == TESS_OK && tess_gradsync_finish(gs, NULL) == TESS_OK, "finish:\n%s",
                            tess_error_text());
            int bad = 0;
            for (int64_t i = 0; i < N; i++) {
                double mean = 0.0;
                for (int r = 0; r < size; r++) mean += grad_value(r, step, i);
                mean /= size;
                bad += grads[i] != (float)mean;
            }
            TESS_TEST_CHECK(bad == 0, "bucket %lld, ranges of %lld: %d wrong means",
                            (long long)buckets[bi], (long long)cut, bad);
        }
        tess_gradsync_destroy(&gs);
        TESS_TEST_CHECK(gs == NULL, "destroy clears the handle");
    }

    tess_gradsync *gs = NULL;
    TESS_TEST_CHECK(tess_gradsync_create(&gs, g, grads, N, 100) == TESS_OK, "create");
    DIST_TEST_FAILS(tess_gradsync_ready(gs, 0, 500), TESS_ERR_ARG, "expected a range ending at 1000");
    TESS_TEST_CHECK(tess_gradsync_ready(gs, 500, N) == TESS_OK, "in-order range accepted");
    tess_gradsync_hook(gs, 0, 400); /* a gap: [400, 500) never reported */
    DIST_TEST_FAILS(tess_gradsync_finish(gs, NULL), TESS_ERR_ARG, "does not continue the step");
    TESS_TEST_CHECK(tess_gradsync_finish(gs, NULL) == TESS_OK, "a later step works again");
    tess_gradsync_destroy(&gs);
    DIST_TEST_FAILS(tess_gradsync_create(&gs, g, grads, N, 0), TESS_ERR_ARG, "bucket must hold");

    free(grads);
    tess_group_destroy(&g);
    int rc = tess_test_finish_mpi("gradsync", MPI_COMM_WORLD);
    MPI_Finalize();
    return rc;
}

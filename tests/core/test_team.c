/* test_team.c - the thread team (core/team.h): every member runs once per run with its index,
 * what members write is visible after the run, many runs in a row (no lost or doubled wake-up),
 * a team of one runs inline, and bad sizes are refused with a message. */
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <string.h>

#include "core/team.h"
#include "tess_test.h"

typedef struct {
    int64_t hits[8];     /* runs seen per member */
    int64_t sum[8];      /* each member's partial sum of the current run */
    int nseen[8];        /* n passed to each member */
    pthread_t self[8];   /* the thread that ran each member */
    int64_t len;         /* sum 0..len-1 split over the members */
} job;

static void work(void *ctx, int m, int n) {
    job *j = ctx;
    j->hits[m]++;
    j->nseen[m] = n;
    j->self[m] = pthread_self();
    int64_t lo = j->len * m / n, hi = j->len * (m + 1) / n, s = 0;
    for (int64_t i = lo; i < hi; i++) s += i;
    j->sum[m] = s;
}

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    for (int n = 1; n <= 4; n++) {
        tess_team *t = NULL;
        TESS_TEST_CHECK(tess_team_create(&t, n) == TESS_OK && t, "create %d", n);
        TESS_TEST_CHECK(tess_team_size(t) == n, "size %d", n);
        job j;
        memset(&j, 0, sizeof j);
        const int runs = 2000;
        bool sums_ok = true;
        for (int r = 0; r < runs; r++) {
            j.len = 1000 + r;
            tess_team_run(t, work, &j);
            int64_t s = 0;
            for (int m = 0; m < n; m++) s += j.sum[m];
            sums_ok = sums_ok && s == j.len * (j.len - 1) / 2;
        }
        TESS_TEST_CHECK(sums_ok, "n = %d: the members' partial sums add up in every run", n);
        for (int m = 0; m < n; m++) {
            TESS_TEST_CHECK(j.hits[m] == runs, "n = %d: member %d ran %lld times, expected %d", n,
                            m, (long long)j.hits[m], runs);
            TESS_TEST_CHECK(j.nseen[m] == n, "n = %d: member %d saw n = %d", n, m, j.nseen[m]);
        }
        TESS_TEST_CHECK(pthread_equal(j.self[0], pthread_self()), "member 0 is the caller");
        for (int m = 1; m < n; m++)
            TESS_TEST_CHECK(!pthread_equal(j.self[m], pthread_self()),
                            "n = %d: member %d runs on a helper", n, m);
        tess_team_destroy(&t);
        TESS_TEST_CHECK(t == NULL, "destroy clears");
    }
    tess_team_destroy(NULL);
    tess_team *bad = NULL;
    TESS_TEST_CHECK(tess_team_create(&bad, 0) == TESS_ERR_ARG && !bad, "n = 0 refused");
    TESS_TEST_CHECK(strstr(tess_error_text(), "1 to 64 members, got 0") != NULL, "message: %s",
                    tess_error_text());
    TESS_TEST_CHECK(tess_team_create(&bad, 65) == TESS_ERR_ARG && !bad, "n = 65 refused");
    int rc = tess_test_finish("team");
    MPI_Finalize();
    return rc;
}
